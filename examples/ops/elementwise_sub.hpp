// elementwise_sub (X, Y -> Out): Out = X - Y, elementwise with
// elementwise_add's broadcasting (attribute axis, int, default -1: numpy's multidirectional
// broadcasting; axis >= 0: Fluid's rule). Out has X's layout (when X and Y share it) and sequence
// offsets when it has X's dims. The rule and the kernels are elementwise_add's
// (ops/detail/network_elementwise.hpp).
//
// Kernels: CPU plain (float, double, int32, int64), CPU oneDNN (float: the binary primitive,
// declared for the plain layouts and nChw8c / nChw16c) and OpenCL (float). No CUDA kernel: on a
// CUDA place the CPU's runs as a fallback.
#pragma once

#include <array>
#include <fluidk/operator.hpp>
#include <string_view>

#include "ops/detail/network_elementwise.hpp"

namespace fluidk::ops {

struct elementwise_sub {
  static constexpr std::string_view name = "elementwise_sub";
  static constexpr std::array<std::string_view, 2> inputs{"X", "Y"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // X decides the kernel's layout; a Y of another rank ([C] beside a blocked X) cannot take
  // it, so Y comes in its own layout and the kernels bring it to the order they read.
  static constexpr std::array<std::string_view, 1> keep_layout_inputs{"Y"};
  // Where the expected kernel type has no kernel (an integer type or double on a device,
  // use_onednn with another data type than float, CUDA), the CPU kernel of the same data type
  // runs, counted and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = detail::elementwise_binary_kernels<sub_operation>();
};

}  // namespace fluidk::ops
