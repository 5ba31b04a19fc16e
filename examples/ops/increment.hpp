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
#include <fluidk/tensor.hpp>
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
// An integer sum beyond the range of T: the error every kernel gives.
template <class T>
[[noreturn]] void increment_beyond_range(const execution_context& ctx, T value, T step) {
  fail(ctx, std::to_string(value) + " + step " + std::to_string(step) + " is beyond the range of " +
                std::string(name_of(data_type_of<T>)));
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
    if constexpr (std::is_integral_v<T>) {
      if (checked_add(value, step, sum)) detail::increment_beyond_range(ctx, value, step);
    } else {
      sum = value + step;
    }
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
// An integer sum beyond the type's range (undefined in OpenCL C) is not made: *beyond is set.
__kernel void increment_i32(__global const int* x, ulong x_off, __global int* y, int step, __global int* beyond) {
  const int v = x[x_off];
  const int out = step > 0 ? v > INT_MAX - step : v < INT_MIN - step;
  beyond[0] = out;
  y[0] = out ? v : v + step;
}
__kernel void increment_i64(__global const long* x, ulong x_off, __global long* y, long step,
                            __global int* beyond) {
  const long v = x[x_off];
  const int out = step > 0 ? v > LONG_MAX - step : v < LONG_MIN - step;
  beyond[0] = out;
  y[0] = out ? v : v + step;
}
)CLC";
}  // namespace detail

// The sum on the device. An integer sum's range is checked there, as the CPU kernel checks it:
// a flag read back (a blocking read of 4 bytes) and, beyond the range, X's value to name it.
template <class T>
struct increment_opencl {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor& x = detail::increment_input(ctx);
    const T step = detail::number_attr_as<T>(ctx, "step", T(1));
    Tensor out(x.dims(), data_type_of<T>, ctx.place());
    if constexpr (std::is_same_v<T, float>) {
      detail::opencl_launch_from(ctx, detail::increment_opencl_source, "increment_f32", 1, 1,
                                 detail::cl_arg<T>(x), detail::cl_buffer(out), cl_float(step));
    } else {
      const Tensor beyond({1}, data_type::int32, ctx.place());
      using cl_type = std::conditional_t<std::is_same_v<T, std::int32_t>, cl_int, cl_long>;
      detail::opencl_launch_from(ctx, detail::increment_opencl_source,
                                 std::is_same_v<T, std::int32_t> ? "increment_i32" : "increment_i64", 1, 1,
                                 detail::cl_arg<T>(x), detail::cl_buffer(out), cl_type(step),
                                 detail::cl_buffer(beyond));
      if (copy_to(beyond, cpu_place).data<std::int32_t>()[0] != 0)
        detail::increment_beyond_range(ctx, copy_to(x, cpu_place).data<T>()[0], step);
    }
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
