// cuDNN's vocabulary, declared through the same extension points a user's library uses: the
// library tag `library::cudnn` (asked for by use_cudnn). Needs no CUDA, so that kernel keys
// may name it in a build without the backend (fluidk/devices/cuda.hpp includes this header).
#pragma once

#include <array>
#include <string_view>

#include "fluidk/error.hpp"
#include "fluidk/library.hpp"

namespace fluidk {

namespace library {
struct cudnn {
  using library_tag = cudnn;
  static constexpr library_id id = 2;
  static constexpr std::string_view name = "CUDNN";
  static constexpr std::array<std::string_view, 1> request_attributes{"use_cudnn"};
};
}  // namespace library

namespace detail {
inline const bool cudnn_tags_registered =
    register_at_startup([] { return register_library<library::cudnn>(); });
}  // namespace detail

}  // namespace fluidk
