// elementwise_add (X, Y -> Out): Out = X + Y, elementwise with broadcasting (attribute axis,
// int, default -1): axis -1 is numpy's multidirectional broadcasting (Out's dims the broadcast
// of X's and Y's: [3, 4, 5] + [5], [2, 1, 4] + [3, 1], a Y larger than X); axis >= 0 is
// Fluid's rule (Y's dims, trailing 1s dropped, equal X's from dimension axis on: a conv bias
// [C] at axis 1). Out has X's layout (when X and Y share it) and sequence offsets when it has
// X's dims. The rule and the kernels are elementwise_mul's (ops/detail/network_elementwise.hpp).
//
// Kernels: CPU plain (float, double, int32, int64), CPU oneDNN (float: the binary primitive, declared for the
// plain layouts and nChw8c / nChw16c, so that a residual add of blocked tensors stays blocked),
// CUDA (float, double) and OpenCL (float), the device kernels over at most 8 merged dims.
#pragma once

#include <array>
#include <fluidk/operator.hpp>
#include <string_view>

#include "ops/detail/network_elementwise.hpp"

namespace fluidk::ops {

struct elementwise_add {
  static constexpr std::string_view name = "elementwise_add";
  static constexpr std::array<std::string_view, 2> inputs{"X", "Y"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // X decides the kernel's layout; a Y of another rank ([C] beside a blocked X) cannot take
  // it, so Y comes in its own layout and the kernels bring it to the order they read.
  static constexpr std::array<std::string_view, 1> keep_layout_inputs{"Y"};
  // Where the expected kernel type has no kernel (use_onednn with double data or in a build
  // without oneDNN; double on OpenCL), the CPU kernel of the same data type runs, counted
  // and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = detail::elementwise_binary_kernels<add_operation>();
};

}  // namespace fluidk::ops
