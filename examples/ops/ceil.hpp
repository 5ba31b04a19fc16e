// ceil (X -> Out): Out = the least whole number not below X, elementwise (Fluid's ceil; ONNX
// Ceil), in X's layout, with X's sequence offsets. NaN and infinities stay as they are.
//
// Kernels: CPU plain (float, double); on another place the CPU's runs as a fallback.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <string_view>
#include <utility>

#include "ops/detail/common.hpp"

namespace fluidk::ops {

// Elementwise over the storage, so any layout works (a blocked layout's zero padding lanes
// stay zero).
template <class T>
struct ceil_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    detail::map_storage<T>(ctx, [](T v) { return std::ceil(v); });
  }
};

struct ceil {
  static constexpr std::string_view name = "ceil";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels =
      fluidk::make_kernels(fluidk::kernels_on<cpu>(ceil_cpu<float>{}, ceil_cpu<double>{}));
};

}  // namespace fluidk::ops
