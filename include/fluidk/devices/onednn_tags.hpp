// oneDNN's vocabulary, declared through the same extension points a user's library uses:
// the library tag `library::onednn` (asked for by use_onednn, or Fluid's use_mkldnn) and
// oneDNN's memory formats as layouts: nChw8c and nChw16c (channels blocked by 8 and 16,
// padded) and nc (2-D). Needs no oneDNN: the CPU transforms convert the blocked layouts
// without it, and kernel keys may name them in a build without the backend
// (fluidk/devices/onednn.hpp, which includes this header).
#pragma once

#include <array>
#include <string_view>

#include "fluidk/error.hpp"
#include "fluidk/layout.hpp"
#include "fluidk/library.hpp"

namespace fluidk {

namespace library {
struct onednn {
  using library_tag = onednn;
  static constexpr library_id id = 1;
  static constexpr std::string_view name = "ONEDNN";
  // MKLDNN and DNNL are oneDNN's former names, still common in Fluid programs.
  static constexpr std::array<std::string_view, 2> aliases{"MKLDNN", "DNNL"};
  static constexpr std::array<std::string_view, 2> request_attributes{"use_onednn", "use_mkldnn"};
};
}  // namespace library

namespace layout {
struct nChw8c {
  using layout_tag = nChw8c;
  static constexpr layout_id id = 3;
  static constexpr std::string_view name = "nChw8c";
  static constexpr int rank = 4;
  static constexpr int block_axis = 1;
  static constexpr int block_size = 8;
  using plain = nchw;
};
struct nChw16c {
  using layout_tag = nChw16c;
  static constexpr layout_id id = 4;
  static constexpr std::string_view name = "nChw16c";
  static constexpr int rank = 4;
  static constexpr int block_axis = 1;
  static constexpr int block_size = 16;
  using plain = nchw;
};
struct nc {
  using layout_tag = nc;
  static constexpr layout_id id = 5;
  static constexpr std::string_view name = "NC";
  static constexpr int rank = 2;
};
}  // namespace layout

namespace detail {
inline const bool onednn_tags_registered = register_at_startup([] {
  return register_library<library::onednn>() && register_layout<layout::nChw8c>() &&
         register_layout<layout::nChw16c>() && register_layout<layout::nc>();
});
}  // namespace detail

}  // namespace fluidk
