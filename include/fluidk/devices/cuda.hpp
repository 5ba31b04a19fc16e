// The CUDA backend: place kind `cuda` (printed gpu, as Fluid did). Needs FLUIDK_HAS_CUDA,
// which Meson's fluidk_cuda_dep defines.
#pragma once

#if !defined(FLUIDK_HAS_CUDA) || !FLUIDK_HAS_CUDA
#error "fluidk/devices/cuda.hpp needs the CUDA backend: use fluidk_cuda_dep (Meson), or define FLUIDK_HAS_CUDA=1 and link cudart, cublas and cudnn"
#endif

#include <array>
#include <string_view>

#include "fluidk/place.hpp"

namespace fluidk {

struct cuda {
  using place_tag = cuda;
  static constexpr place_kind_id id = 1;
  static constexpr std::string_view name = "gpu";
  static constexpr bool has_device_id = true;
  static constexpr bool host_accessible = false;
  static constexpr std::array<std::string_view, 1> aliases{"cuda"};
};

namespace detail {
inline const bool cuda_place_registered = register_place_kind<cuda>();
}

}  // namespace fluidk
