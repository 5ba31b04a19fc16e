// uniform_random (no inputs -> Out): a tensor of attribute `shape` drawn uniformly from
// [min, max) (defaults -1 and 1), in the data type that attribute `dtype` names. Like
// fill_constant, its data type comes from the attribute (its data_type_attribute).
//
// Element i is a function of (seed, i) alone (ops/detail/random.hpp), so the CPU, CUDA and
// OpenCL kernels draw the same numbers. Unlike Fluid, seed 0 is a seed like any other (the
// default): a program draws the same weights every run.
//
// Kernels: CPU plain (float, double), CUDA (float, double) and OpenCL (float); no oneDNN
// kernel (oneDNN has no random primitive).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "ops/detail/common.hpp"
#include "ops/detail/random.hpp"
#if FLUIDK_OPS_OPENCL
#include "ops/detail/opencl.hpp"
#endif
#if FLUIDK_OPS_CUDA
#include "ops/detail/cuda.hpp"
#endif

namespace fluidk::ops {

namespace detail {
inline std::uint64_t seed_attr(const execution_context& ctx) {
  return std::uint64_t(int_attr(ctx, "seed", 0));
}
// Attributes min and max as T's values: min below max (else [min, max) holds nothing), both
// finite and max - min too (else every draw is infinite or NaN, which the rule that no draw
// is max would turn into max's neighbour).
template <class T>
std::pair<T, T> bounds_attr(const execution_context& ctx) {
  const T lo = number_attr_as<T>(ctx, "min", T(-1)), hi = number_attr_as<T>(ctx, "max", T(1));
  const std::string type(name_of(data_type_of<T>));
  require(lo < hi, ctx, "needs attribute min below max, as " + type + " values");
  require(std::isfinite(lo) && std::isfinite(hi) && std::isfinite(T(hi - lo)), ctx,
          "needs attributes min and max finite, and max - min too, as " + type + " values");
  return {lo, hi};
}
}  // namespace detail

template <class T>
struct uniform_random_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    Tensor out(detail::shape_attr(ctx, "shape"), data_type_of<T>, ctx.place());
    const auto [lo, hi] = detail::bounds_attr<T>(ctx);
    const std::uint64_t seed = detail::seed_attr(ctx);
    T* y = out.data<T>();
    for (std::int64_t i = 0; i < out.numel(); ++i) y[i] = random::uniform(seed, std::uint64_t(i), lo, hi);
    ctx.set_output("Out", std::move(out));
  }
};

#if FLUIDK_OPS_OPENCL
template <class T>
struct uniform_random_opencl {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the OpenCL uniform_random kernel computes in float");
  void operator()(execution_context& ctx) const {
    Tensor out(detail::shape_attr(ctx, "shape"), data_type::float32, ctx.place());
    const std::int64_t n = out.numel();
    const auto [lo, hi] = detail::bounds_attr<float>(ctx);
    if (n > 0)
      detail::opencl_launch(ctx, "uniform_f32", std::size_t(n), 1, detail::cl_buffer(out),
                            cl_ulong(detail::seed_attr(ctx)), cl_float(lo), cl_float(hi), cl_ulong(n));
    ctx.set_output("Out", std::move(out));
  }
};
namespace detail {
inline constexpr auto uniform_random_opencl_kernels =
    fluidk::kernels_on<opencl>(uniform_random_opencl<float>{});
}
#else
namespace detail {
inline constexpr auto uniform_random_opencl_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_CUDA
template <class T>
struct uniform_random_cuda {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    detail::cuda_call call(ctx);
    Tensor out(detail::shape_attr(ctx, "shape"), data_type_of<T>, ctx.place());
    const auto [lo, hi] = detail::bounds_attr<T>(ctx);
    detail::cuda_require(cuda_launch::uniform<T>(call.stream(), detail::device_data<T>(out), out.numel(),
                                                 detail::seed_attr(ctx), lo, hi),
                         ctx, "the uniform_random kernel");
    ctx.set_output("Out", std::move(out));
  }
};
namespace detail {
inline constexpr auto uniform_random_cuda_kernels =
    fluidk::kernels_on<cuda>(uniform_random_cuda<float>{}, uniform_random_cuda<double>{});
}
#else
namespace detail {
inline constexpr auto uniform_random_cuda_kernels = no_kernels();
}
#endif

struct uniform_random {
  static constexpr std::string_view name = "uniform_random";
  static constexpr std::array<std::string_view, 0> inputs{};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr std::string_view data_type_attribute = "dtype";
  // Where the expected kernel type has no kernel (double on OpenCL, use_onednn), the CPU
  // kernel of the same data type runs.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels =
      fluidk::make_kernels(fluidk::kernels_on<cpu>(uniform_random_cpu<float>{}, uniform_random_cpu<double>{}),
                           detail::uniform_random_cuda_kernels, detail::uniform_random_opencl_kernels);
};

}  // namespace fluidk::ops
