// increment (X -> Out): Out = X + step, X holding exactly one element (a loop counter), Fluid's
// increment. Attribute step (float, default 1.0), converted to X's data type as Fluid's
// static_cast does (an integer X takes its whole part). Out has X's dims (often Out is X
// itself, the counter advanced in place). An integer sum beyond its type's range is an error.
//
// Kernels: CPU plain (float, double, int32, int64) and OpenCL (float, int32, int64).
#pragma once

#include <array>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "ops/detail/common.hpp"
#if FLUIDK_OPS_OPENCL
#include "ops/detail/opencl.hpp"
#endif

namespace fluidk::ops {

namespace detail {
// X, checked to hold one element.
inline const Tensor& increment_input(const execution_context& ctx) {
  const Tensor& x = input(ctx, "X");
  require(x.numel() == 1, ctx, "X must hold exactly one element, not " + x.dims().to_string());
  return x;
}
}  // namespace detail

template <class T>
struct increment_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor& x = detail::increment_input(ctx);
    const T step = detail::number_attr_as<T>(ctx, "step", T(1));
    const T value = x.data<T>()[0];
    T sum{};
    if constexpr (std::is_integral_v<T>)
      detail::require(!checked_add(value, step, sum), ctx,
                      std::to_string(value) + " + step " + std::to_string(step) + " is beyond the range of " +
                          std::string(name_of(data_type_of<T>)));
    else
      sum = value + step;
    Tensor out(x.dims(), data_type_of<T>, ctx.place());
    out.data<T>()[0] = sum;
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};

#if FLUIDK_OPS_OPENCL
namespace detail {
inline constexpr const char* increment_opencl_source = R"CLC(
__kernel void increment_f32(__global const float* x, ulong x_off, __global float* y, float step) {
  y[0] = x[x_off] + step;
}
__kernel void increment_i32(__global const int* x, ulong x_off, __global int* y, int step) {
  y[0] = x[x_off] + step;
}
__kernel void increment_i64(__global const long* x, ulong x_off, __global long* y, long step) {
  y[0] = x[x_off] + step;
}
)CLC";
}  // namespace detail

// The sum on the device, where the counter stays unread: an integer sum's range is not checked
// there (the CPU kernel checks it).
template <class T>
struct increment_opencl {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor& x = detail::increment_input(ctx);
    const T step = detail::number_attr_as<T>(ctx, "step", T(1));
    Tensor out(x.dims(), data_type_of<T>, ctx.place());
    const char* name = std::is_same_v<T, float>          ? "increment_f32"
                       : std::is_same_v<T, std::int32_t> ? "increment_i32"
                                                         : "increment_i64";
    if constexpr (std::is_same_v<T, float>)
      detail::opencl_launch_from(ctx, detail::increment_opencl_source, name, 1, 1, detail::cl_arg<T>(x),
                                 detail::cl_buffer(out), cl_float(step));
    else if constexpr (std::is_same_v<T, std::int32_t>)
      detail::opencl_launch_from(ctx, detail::increment_opencl_source, name, 1, 1, detail::cl_arg<T>(x),
                                 detail::cl_buffer(out), cl_int(step));
    else
      detail::opencl_launch_from(ctx, detail::increment_opencl_source, name, 1, 1, detail::cl_arg<T>(x),
                                 detail::cl_buffer(out), cl_long(step));
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto increment_opencl_kernels = fluidk::kernels_on<opencl>(
    increment_opencl<float>{}, increment_opencl<std::int32_t>{}, increment_opencl<std::int64_t>{});
}
#else
namespace detail {
inline constexpr auto increment_opencl_kernels = no_kernels();
}
#endif

struct increment {
  static constexpr std::string_view name = "increment";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // Where the expected kernel type has no kernel (double on OpenCL, a CUDA place, use_onednn),
  // the CPU kernel of the same data type runs, counted and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(increment_cpu<float>{}, increment_cpu<double>{}, increment_cpu<std::int32_t>{},
                              increment_cpu<std::int64_t>{}),
      detail::increment_opencl_kernels);
};

}  // namespace fluidk::ops
