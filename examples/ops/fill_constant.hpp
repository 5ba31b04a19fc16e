// fill_constant (no inputs -> Out): a tensor of attribute `shape` with every element
// `value` (default 0; or `str_value`, its text, when given: Fluid writes both), in the data
// type that attribute `dtype` names ("float32", "int64", ...). It has no tensor input to take
// a data type from, so, as in Fluid, the attribute
// decides the kernel: the operator declares it as its data_type_attribute. Programs start
// from operators like this one (a startup program filling biases and counters).
//
// Kernels: CPU plain (float, double, int32, int64, bool: true when value is not 0, or a bool
// attribute's value), CUDA (float, double) and OpenCL (float).
// oneDNN has no fill primitive, so there is no oneDNN kernel; with use_onednn the CPU's plain
// kernel runs as a fallback.
#pragma once

#include <array>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "ops/detail/common.hpp"
#if FLUIDK_OPS_OPENCL
#include "ops/detail/opencl.hpp"
#endif
#if FLUIDK_OPS_CUDA
#include "ops/detail/cuda.hpp"
#endif

namespace fluidk::ops {

namespace detail {
// The value to fill with, as a T. Fluid writes it twice: `value`, a float, and `str_value`, its
// text (str(int(v)) for the integer types, str(float(v)) for the others), exact where the
// float is not (an int64 beyond 2^24); the text, when given and not empty, is the one read,
// as Fluid's kernel reads it. A bool is a number that is not 0, or a bool attribute's value.
template <class T>
T fill_value(const execution_context& ctx) {
  const std::string text = ctx.attr_or<std::string>("str_value", "");
  if constexpr (std::is_same_v<T, bool>) {
    if (!text.empty()) return number_text_as<double>(ctx, "str_value", text) != 0;
    const attribute* a = ctx.attributes().find("value");
    const bool* flag = a != nullptr ? std::get_if<bool>(a) : nullptr;
    return flag != nullptr ? *flag : number_attr(ctx, "value", 0.0) != 0;
  } else {
    if (!text.empty()) return number_text_as<T>(ctx, "str_value", text);
    return number_attr_as<T>(ctx, "value", T(0));
  }
}
}  // namespace detail

template <class T>
struct fill_constant_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    Tensor out(detail::shape_attr(ctx, "shape"), data_type_of<T>, ctx.place());
    const T value = detail::fill_value<T>(ctx);
    T* y = out.data<T>();
    for (std::int64_t i = 0; i < out.numel(); ++i) y[i] = value;
    ctx.set_output("Out", std::move(out));
  }
};

#if FLUIDK_OPS_OPENCL
template <class T>
struct fill_constant_opencl {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the OpenCL fill_constant kernel computes in float");
  void operator()(execution_context& ctx) const {
    Tensor out(detail::shape_attr(ctx, "shape"), data_type::float32, ctx.place());
    const float value = detail::fill_value<float>(ctx);  // checked for every shape
    const std::int64_t n = out.numel();
    if (n > 0)
      detail::opencl_launch(ctx, "fill_f32", std::size_t(n), 1, detail::cl_buffer(out), cl_float(value),
                            cl_ulong(n));
    ctx.set_output("Out", std::move(out));
  }
};
namespace detail {
inline constexpr auto fill_constant_opencl_kernels =
    fluidk::kernels_on<opencl>(fill_constant_opencl<float>{});
}
#else
namespace detail {
inline constexpr auto fill_constant_opencl_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_CUDA
template <class T>
struct fill_constant_cuda {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    detail::cuda_call call(ctx);
    Tensor out(detail::shape_attr(ctx, "shape"), data_type_of<T>, ctx.place());
    detail::cuda_require(cuda_launch::fill<T>(call.stream(), detail::device_data<T>(out), out.numel(),
                                              detail::fill_value<T>(ctx)),
                         ctx, "the fill_constant kernel");
    ctx.set_output("Out", std::move(out));
  }
};
namespace detail {
inline constexpr auto fill_constant_cuda_kernels =
    fluidk::kernels_on<cuda>(fill_constant_cuda<float>{}, fill_constant_cuda<double>{});
}
#else
namespace detail {
inline constexpr auto fill_constant_cuda_kernels = no_kernels();
}
#endif

struct fill_constant {
  static constexpr std::string_view name = "fill_constant";
  static constexpr std::array<std::string_view, 0> inputs{};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr std::string_view data_type_attribute = "dtype";
  // Where the expected kernel type has no kernel (int64 on a device, use_onednn), the CPU
  // kernel of the same data type runs.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(fill_constant_cpu<float>{}, fill_constant_cpu<double>{},
                              fill_constant_cpu<std::int32_t>{}, fill_constant_cpu<std::int64_t>{},
                              fill_constant_cpu<bool>{}),
      detail::fill_constant_cuda_kernels, detail::fill_constant_opencl_kernels);
};

}  // namespace fluidk::ops
