// The OpenCL backend: place kind `opencl`, added through the same public extension points
// as a user's device. Needs FLUIDK_HAS_OPENCL, which Meson's fluidk_opencl_dep defines.
#pragma once

#if !defined(FLUIDK_HAS_OPENCL) || !FLUIDK_HAS_OPENCL
#error "fluidk/devices/opencl.hpp needs the OpenCL backend: use fluidk_opencl_dep (Meson), or define FLUIDK_HAS_OPENCL=1 and link OpenCL"
#endif

#include <array>
#include <string_view>

#include "fluidk/place.hpp"

namespace fluidk {

struct opencl {
  using place_tag = opencl;
  static constexpr place_kind_id id = 2;
  static constexpr std::string_view name = "opencl";
  static constexpr bool has_device_id = true;
  static constexpr bool host_accessible = false;
  static constexpr std::array<std::string_view, 1> aliases{"cl"};
};

namespace detail {
inline const bool opencl_place_registered = register_place_kind<opencl>();
}

}  // namespace fluidk
