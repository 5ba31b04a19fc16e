// mul (X, Y -> Out): Fluid's matrix product. X is read as a matrix by its first
// x_num_col_dims dimensions (the rows) and the rest (the columns), Y likewise with
// y_num_col_dims (both default 1); Out has X's leading and Y's trailing dimensions and X's
// sequence offsets.
//
// Kernels: CPU plain (float, double: a blocked GEMM), CPU oneDNN (float: the matmul
// primitive), CUDA (float, double: cuBLAS) and OpenCL (float).
#pragma once

#include <array>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/detail/common.hpp"
#include "ops/detail/gemm.hpp"
#if FLUIDK_OPS_ONEDNN
#include "ops/detail/onednn.hpp"
#endif
#if FLUIDK_OPS_OPENCL
#include "ops/detail/opencl.hpp"
#endif
#if FLUIDK_OPS_CUDA
#include "ops/detail/cuda.hpp"
#endif

namespace fluidk::ops {

// The two operands of mul as matrices, and the output's shape.
struct mul_geometry {
  std::int64_t m, k, n;
  dims out;

  static mul_geometry of(const execution_context& ctx, const Tensor& x, const Tensor& y) {
    const std::int64_t xn = detail::int_attr(ctx, "x_num_col_dims", 1);
    const std::int64_t yn = detail::int_attr(ctx, "y_num_col_dims", 1);
    detail::require(xn >= 1 && std::size_t(xn) < x.dims().rank(), ctx,
                    "x_num_col_dims (" + std::to_string(xn) + ") must be in [1, rank of X) for X " +
                        x.dims().to_string());
    detail::require(yn >= 1 && std::size_t(yn) < y.dims().rank(), ctx,
                    "y_num_col_dims (" + std::to_string(yn) + ") must be in [1, rank of Y) for Y " +
                        y.dims().to_string());
    mul_geometry g{};
    g.m = detail::product(x.dims(), 0, std::size_t(xn));
    g.k = detail::product(x.dims(), std::size_t(xn), x.dims().rank());
    const std::int64_t y_rows = detail::product(y.dims(), 0, std::size_t(yn));
    g.n = detail::product(y.dims(), std::size_t(yn), y.dims().rank());
    detail::require(g.k == y_rows, ctx,
                    "X " + x.dims().to_string() + " read as [" + std::to_string(g.m) + ", " +
                        std::to_string(g.k) + "] and Y " + y.dims().to_string() + " read as [" +
                        std::to_string(y_rows) + ", " + std::to_string(g.n) + "] cannot be multiplied");
    std::vector<std::int64_t> out(x.dims().begin(), x.dims().begin() + xn);
    out.insert(out.end(), y.dims().begin() + yn, y.dims().end());
    g.out = dims(std::span<const std::int64_t>(out));
    return g;
  }
};

template <class T>
struct mul_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const Tensor y = detail::row_major(detail::input(ctx, "Y"));
    const mul_geometry g = mul_geometry::of(ctx, x, y);
    Tensor out(g.out, data_type_of<T>, ctx.place());
    detail::gemm<T>(g.m, g.n, g.k, x.data<T>(), g.k, y.data<T>(), g.n, out.data<T>(), g.n);
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};

#if FLUIDK_OPS_ONEDNN
template <class T>
struct mul_onednn {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the oneDNN mul kernel computes in float");

  void operator()(execution_context& ctx) const {
    using dnnl::memory;
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const Tensor y = detail::row_major(detail::input(ctx, "Y"));
    const mul_geometry g = mul_geometry::of(ctx, x, y);
    // oneDNN makes no primitive of an empty dimension: the plain kernel's result, an empty
    // output or (K = 0) zeros.
    if (g.m == 0 || g.n == 0 || g.k == 0) return mul_cpu<T>{}(ctx);
    onednn_context& dnn = detail::onednn_of(ctx);
    Tensor out(g.out, data_type::float32, ctx.place());
    memory a = detail::onednn_plain_memory(x, {g.m, g.k}, dnn.engine());
    memory b = detail::onednn_plain_memory(y, {g.k, g.n}, dnn.engine());
    memory c = detail::onednn_plain_memory(out, {g.m, g.n}, dnn.engine());
    detail::onednn_key key("mul.matmul");
    key << a.get_desc() << b.get_desc() << c.get_desc();
    const auto kept = detail::kept_primitive<dnnl::matmul>(dnn, key, [&] {
      return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a.get_desc(), b.get_desc(), c.get_desc()),
                                          detail::kept_attr(), dnn.engine());
    });
    detail::run_kept(dnn, *kept, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    dnn.wait();
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto mul_onednn_kernels = fluidk::kernels_on<cpu, library::onednn>(mul_onednn<float>{});
}
#else
namespace detail {
inline constexpr auto mul_onednn_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_OPENCL
template <class T>
struct mul_opencl {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the OpenCL mul kernel computes in float");

  void operator()(execution_context& ctx) const {
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const Tensor y = detail::row_major(detail::input(ctx, "Y"));
    const mul_geometry g = mul_geometry::of(ctx, x, y);
    Tensor out(g.out, data_type::float32, ctx.place());
    detail::opencl_gemm(ctx, g.m, g.n, g.k, x, y, nullptr, out);
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto mul_opencl_kernels = fluidk::kernels_on<opencl>(mul_opencl<float>{});
}
#else
namespace detail {
inline constexpr auto mul_opencl_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_CUDA
template <class T>
struct mul_cuda {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    detail::cuda_call call(ctx);
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const Tensor y = detail::row_major(detail::input(ctx, "Y"));
    const mul_geometry g = mul_geometry::of(ctx, x, y);
    Tensor out(g.out, data_type_of<T>, ctx.place());
    detail::cublas_gemm<T>(ctx, call, g.m, g.n, g.k, detail::device_data<T>(x), detail::device_data<T>(y),
                           detail::device_data<T>(out), false);
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto mul_cuda_kernels = fluidk::kernels_on<cuda>(mul_cuda<float>{}, mul_cuda<double>{});
}
#else
namespace detail {
inline constexpr auto mul_cuda_kernels = no_kernels();
}
#endif

struct mul {
  static constexpr std::string_view name = "mul";
  static constexpr std::array<std::string_view, 2> inputs{"X", "Y"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // Where the expected kernel type has no kernel (use_onednn with double data or in a build
  // without oneDNN; double on OpenCL), the CPU kernel of the same data type runs, counted
  // and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels =
      fluidk::make_kernels(fluidk::kernels_on<cpu>(mul_cpu<float>{}, mul_cpu<double>{}),
                           detail::mul_onednn_kernels, detail::mul_cuda_kernels, detail::mul_opencl_kernels);
};

}  // namespace fluidk::ops
