// matmul (X, Y -> Out): Fluid's matrix product with numpy's matmul semantics. Out =
// alpha x op(X) x op(Y) over the last two dims, op a transpose where transpose_X /
// transpose_Y (bool, false) asks for one; the dims before them are batch dims, broadcast
// (numpy's rules: [2, 3, 4, 5] x [5, 6] is [2, 3, 4, 6], [3, 4] x [2, 4, 5] is [2, 3, 5]). A 1-D
// X is read as one row [1, K] and a 1-D Y as one column [K, 1], the added dim removed from
// Out (both 1-D: a scalar, rank 0); a transpose of a 1-D operand changes nothing, as in numpy.
// alpha (float, 1) scales the product.
//
// Kernels: CPU plain (float, double: a blocked GEMM per matrix of the batch), CPU oneDNN
// (float: the matmul primitive on plain layouts, kept per shape in the context's cache,
// transposes as strides, batch broadcast by oneDNN), OpenCL (float) and CUDA (float, double:
// cuBLAS, strided-batched where it can).
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
#include "ops/detail/network_shape.hpp"
#if FLUIDK_OPS_ONEDNN
#include "ops/detail/onednn.hpp"
#endif
#if FLUIDK_OPS_OPENCL
#include "ops/detail/opencl.hpp"
#endif
#if FLUIDK_OPS_CUDA
#include "ops/detail/cuda.hpp"
#include "ops/detail/cuda_launch_shape.hpp"
#endif

namespace fluidk::ops {

struct matmul_geometry {
  detail::matrix_product product;  // X is its A, Y its B
  // The product before any folding of the batch into rows (oneDNN describes the operands
  // with their own batch dims).
  detail::matrix_product unfolded;
  double alpha = 1;
  dims out;

  static matmul_geometry of(const execution_context& ctx, const Tensor& x, const Tensor& y) {
    const dims& xd = x.dims();
    const dims& yd = y.dims();
    detail::require(xd.rank() >= 1 && yd.rank() >= 1, ctx,
                    "X " + xd.to_string() + " and Y " + yd.to_string() + " must each have at least one dim");
    matmul_geometry g;
    detail::matrix_product& p = g.product;
    const std::size_t xr = xd.rank(), yr = yd.rank();
    // A transpose of a vector is the vector (numpy); Fluid's matmul_v2 ignores it too.
    p.trans_a = xr >= 2 && ctx.attr_or<bool>("transpose_X", false);
    p.trans_b = yr >= 2 && ctx.attr_or<bool>("transpose_Y", false);
    std::int64_t y_rows = 0;
    if (xr == 1) {
      p.m = 1;
      p.k = xd[0];
    } else {
      p.m = xd[xr - (p.trans_a ? 1 : 2)];
      p.k = xd[xr - (p.trans_a ? 2 : 1)];
    }
    if (yr == 1) {
      y_rows = yd[0];
      p.n = 1;
    } else {
      y_rows = yd[yr - (p.trans_b ? 1 : 2)];
      p.n = yd[yr - (p.trans_b ? 2 : 1)];
    }
    detail::require(p.k == y_rows, ctx,
                    "X " + xd.to_string() + (p.trans_a ? " transposed" : "") + " and Y " + yd.to_string() +
                        (p.trans_b ? " transposed" : "") + " cannot be multiplied: " + std::to_string(p.k) +
                        " columns against " + std::to_string(y_rows) + " rows");
    const std::span<const std::int64_t> x_batch(xd.begin(), xr >= 2 ? xr - 2 : 0);
    const std::span<const std::int64_t> y_batch(yd.begin(), yr >= 2 ? yr - 2 : 0);
    detail::require(
        p.set_batches(x_batch, y_batch), ctx,
        "the batch dims of X " + xd.to_string() + " and Y " + yd.to_string() +
            " do not broadcast (each pair, aligned from the last, must be equal or one of them 1)");
    std::vector<std::int64_t> out(p.batch);
    if (xr >= 2) out.push_back(p.m);
    if (yr >= 2) out.push_back(p.n);
    g.out = dims(std::span<const std::int64_t>(out));
    g.unfolded = p;
    if (p.foldable()) p.fold();
    g.alpha = detail::number_attr(ctx, "alpha", 1.0);
    return g;
  }
};

template <class T>
struct matmul_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const Tensor y = detail::row_major(detail::input(ctx, "Y"));
    const matmul_geometry g = matmul_geometry::of(ctx, x, y);
    Tensor out(g.out, data_type_of<T>, ctx.place());
    detail::cpu_matrix_products<T>(g.product, x.data<T>(), y.data<T>(), out.data<T>(), T(g.alpha));
    ctx.set_output("Out", std::move(out));
  }
};

#if FLUIDK_OPS_ONEDNN
template <class T>
struct matmul_onednn {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the oneDNN matmul kernel computes in float");

  void operator()(execution_context& ctx) const {
    using dnnl::memory;
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const Tensor y = detail::row_major(detail::input(ctx, "Y"));
    const matmul_geometry g = matmul_geometry::of(ctx, x, y);
    const detail::matrix_product& p = g.unfolded;
    // oneDNN makes no primitive of an empty dimension: the plain kernel's result, an empty
    // output or (K = 0) zeros.
    if (g.out.numel() == 0 || p.k == 0) return matmul_cpu<T>{}(ctx);
    onednn_context& dnn = detail::onednn_of(ctx);
    Tensor out(g.out, data_type::float32, ctx.place());
    memory a = detail::onednn_matrix_memory(x, p.a_batch, p.m, p.k, p.trans_a, dnn);
    memory b = detail::onednn_matrix_memory(y, p.b_batch, p.k, p.n, p.trans_b, dnn);
    memory c = detail::onednn_matrix_memory(out, p.batch, p.m, p.n, false, dnn);
    // The primitive of these descriptions, created once and kept in the context's cache.
    detail::onednn_key key("matmul.fwd");
    key << a.get_desc() << b.get_desc() << c.get_desc() << float(g.alpha);
    const auto kept = detail::kept_primitive<dnnl::matmul>(dnn, key, [&] {
      dnnl::primitive_attr attr = detail::kept_attr();
      if (g.alpha != 1) {
        dnnl::post_ops scale;
        scale.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, float(g.alpha), 0.f);
        attr.set_post_ops(scale);
      }
      return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a.get_desc(), b.get_desc(), c.get_desc()), attr,
                                          dnn.engine());
    });
    detail::run_kept(dnn, *kept, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    dnn.wait();
    ctx.set_output("Out", std::move(out));
  }
};
namespace detail {
inline constexpr auto matmul_onednn_kernels =
    fluidk::kernels_on<cpu, library::onednn>(matmul_onednn<float>{});
}
#else
namespace detail {
inline constexpr auto matmul_onednn_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_OPENCL
template <class T>
struct matmul_opencl {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the OpenCL matmul kernel computes in float");

  void operator()(execution_context& ctx) const {
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const Tensor y = detail::row_major(detail::input(ctx, "Y"));
    const matmul_geometry g = matmul_geometry::of(ctx, x, y);
    Tensor out(g.out, data_type::float32, ctx.place());
    detail::opencl_matrix_products(ctx, g.product, x, y, float(g.alpha), nullptr, {}, 0.f, out);
    ctx.set_output("Out", std::move(out));
  }
};
namespace detail {
inline constexpr auto matmul_opencl_kernels = fluidk::kernels_on<opencl>(matmul_opencl<float>{});
}
#else
namespace detail {
inline constexpr auto matmul_opencl_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_CUDA
template <class T>
struct matmul_cuda {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    detail::cuda_call call(ctx);
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const Tensor y = detail::row_major(detail::input(ctx, "Y"));
    const matmul_geometry g = matmul_geometry::of(ctx, x, y);
    Tensor out(g.out, data_type_of<T>, ctx.place());
    detail::cublas_matrix_products<T>(ctx, call, g.product, detail::device_data<T>(x),
                                      detail::device_data<T>(y), detail::device_data<T>(out), T(g.alpha),
                                      T(0));
    ctx.set_output("Out", std::move(out));
  }
};
namespace detail {
inline constexpr auto matmul_cuda_kernels =
    fluidk::kernels_on<cuda>(matmul_cuda<float>{}, matmul_cuda<double>{});
}
#else
namespace detail {
inline constexpr auto matmul_cuda_kernels = no_kernels();
}
#endif

struct matmul {
  static constexpr std::string_view name = "matmul";
  static constexpr std::array<std::string_view, 2> inputs{"X", "Y"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // Where the expected kernel type has no kernel (use_onednn with double data or in a build
  // without oneDNN; double on OpenCL), the CPU kernel of the same data type runs, counted
  // and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(matmul_cpu<float>{}, matmul_cpu<double>{}), detail::matmul_onednn_kernels,
      detail::matmul_cuda_kernels, detail::matmul_opencl_kernels);
};

}  // namespace fluidk::ops
