// gemm (A, B, C -> Out): ONNX's Gemm, which Fluid lacks. Out [M, N] = alpha x op(A) x op(B)
// + beta x C, op a transpose where trans_a / trans_b (bool, false) asks for one: A is [M, K]
// ([K, M] transposed), B [K, N] ([N, K] transposed), both 2-D. C, optional, is broadcast to
// [M, N] one way (a scalar, [1], [N], [1, N], [M, 1] or [M, N]); alpha and beta (float, 1).
// fuse_activation (string, "" for none), set by run-onnx's gemm_activation pass, applies an
// activation to Out last: "relu", "clip" (to [fuse_alpha, fuse_beta], float, as clip's min and
// max) or "sigmoid", each computing what the relu, clip and sigmoid operators compute.
//
// Kernels: CPU plain (float, double: a blocked GEMM, then alpha and beta x C), CPU oneDNN
// (float: the matmul primitive, with C as its bias where C is a row and alpha and beta are 1,
// else on an output that starts as beta x C and a sum post-op; the activation an eltwise
// post-op; the primitive kept per shape and B in the format oneDNN asks for, reordered once
// while it is unchanged), OpenCL (float) and CUDA (float, double: the output starts as beta x
// C, then cuBLAS accumulates onto it); the OpenCL and CUDA kernels apply the activation in
// place after.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "ops/detail/common.hpp"
#include "ops/detail/network_activation.hpp"
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

struct gemm_geometry {
  detail::matrix_product product;  // one product, no batch
  double alpha = 1, beta = 1;
  bool has_c = false;
  detail::broadcast_matrix c_at;  // where C's element (i, j) is
  detail::fused_activation activation;

  static gemm_geometry of(const execution_context& ctx, const Tensor& a, const Tensor& b) {
    detail::require(a.dims().rank() == 2 && b.dims().rank() == 2, ctx,
                    "A " + a.dims().to_string() + " and B " + b.dims().to_string() + " must be 2-D");
    gemm_geometry g;
    detail::matrix_product& p = g.product;
    p.trans_a = ctx.attr_or<bool>("trans_a", false);
    p.trans_b = ctx.attr_or<bool>("trans_b", false);
    p.m = a.dims()[p.trans_a ? 1 : 0];
    p.k = a.dims()[p.trans_a ? 0 : 1];
    const std::int64_t b_rows = b.dims()[p.trans_b ? 1 : 0];
    p.n = b.dims()[p.trans_b ? 0 : 1];
    detail::require(p.k == b_rows, ctx,
                    "A " + a.dims().to_string() + (p.trans_a ? " transposed" : "") + " and B " +
                        b.dims().to_string() + (p.trans_b ? " transposed" : "") + " cannot be multiplied: " +
                        std::to_string(p.k) + " columns against " + std::to_string(b_rows) + " rows");
    g.has_c = detail::has_input(ctx, "C");
    if (g.has_c) {
      const dims& c = ctx.input("C").dims();
      detail::require(detail::broadcast_matrix::of(c, p.m, p.n, g.c_at), ctx,
                      "C " + c.to_string() + " does not broadcast to the output [" + std::to_string(p.m) +
                          ", " + std::to_string(p.n) + "] (a scalar, [N], [1, N], [M, 1] or [M, N])");
    }
    g.alpha = detail::number_attr(ctx, "alpha", 1.0);
    g.beta = detail::number_attr(ctx, "beta", 1.0);
    // beta 0 leaves C out, as BLAS and ONNX Runtime do: 0 x an infinity or NaN of C is NaN. (C's
    // shape is still checked.)
    if (g.beta == 0) g.has_c = false;
    g.activation = detail::fused_activation::of(ctx, false);
    return g;
  }
  dims out() const { return {product.m, product.n}; }
};

template <class T>
struct gemm_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor a = detail::row_major(detail::input(ctx, "A"));
    const Tensor b = detail::row_major(detail::input(ctx, "B"));
    const gemm_geometry g = gemm_geometry::of(ctx, a, b);
    Tensor out(g.out(), data_type_of<T>, ctx.place());
    T* y = out.data<T>();
    detail::cpu_matrix_products<T>(g.product, a.data<T>(), b.data<T>(), y, T(g.alpha));
    if (g.has_c) {
      const Tensor c = detail::row_major(ctx.input("C"));
      const T* cv = c.data<T>();
      const T beta = T(g.beta);
      for (std::int64_t i = 0; i < g.product.m; ++i)
        for (std::int64_t j = 0; j < g.product.n; ++j)
          y[i * g.product.n + j] += beta * cv[i * g.c_at.row_stride + j * g.c_at.col_stride];
    }
    g.activation.apply(y, g.product.m * g.product.n);
    ctx.set_output("Out", std::move(out));
  }
};

#if FLUIDK_OPS_ONEDNN
template <class T>
struct gemm_onednn {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the oneDNN gemm kernel computes in float");

  void operator()(execution_context& ctx) const {
    using dnnl::memory;
    const Tensor a = detail::row_major(detail::input(ctx, "A"));
    const Tensor b = detail::row_major(detail::input(ctx, "B"));
    const gemm_geometry g = gemm_geometry::of(ctx, a, b);
    const detail::matrix_product& p = g.product;
    // oneDNN makes no primitive of an empty dimension: the plain kernel's result.
    if (p.m == 0 || p.n == 0 || p.k == 0) return gemm_cpu<T>{}(ctx);
    onednn_context& dnn = detail::onednn_of(ctx);
    Tensor out(g.out(), data_type::float32, ctx.place());
    memory src = detail::onednn_matrix_memory(a, {}, p.m, p.k, p.trans_a, dnn);
    memory user_weights = detail::onednn_matrix_memory(b, {}, p.k, p.n, p.trans_b, dnn);
    memory dst = detail::onednn_matrix_memory(out, {}, p.m, p.n, false, dnn);
    // Const: C is read only (a mutable Tensor's data() would move its storage's version).
    const Tensor c = g.has_c ? detail::row_major(ctx.input("C")) : Tensor();
    // C as a row of biases where alpha and beta are 1: oneDNN adds it to every row of the
    // product. Otherwise the post-ops run in order: alpha x the product, then the sum with
    // what Out holds (beta x C); the activation last, an eltwise post-op.
    const bool bias =
        g.has_c && g.alpha == 1 && g.beta == 1 && g.c_at.row_stride == 0 && g.c_at.col_stride == 1;
    // The primitive of these shapes, kept in the context's cache, with the weights in the
    // format oneDNN chooses for them (format `any`).
    detail::onednn_key key("gemm.fwd");
    key << p.m << p.k << p.n << p.trans_a << bias << (g.has_c && !bias) << float(g.alpha)
        << int(g.activation.kind) << g.activation.lo << g.activation.hi;
    const auto kept = detail::kept_primitive<dnnl::matmul>(dnn, key, [&] {
      dnnl::post_ops post;
      if (!bias && g.alpha != 1)
        post.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, float(g.alpha), 0.f);
      if (g.has_c && !bias) post.append_sum(1.f);
      detail::append_onednn_activation(post, g.activation);
      dnnl::primitive_attr attr = detail::kept_attr();
      attr.set_post_ops(post);
      const memory::desc any_weights({p.k, p.n}, memory::data_type::f32, memory::format_tag::any);
      return bias ? dnnl::matmul::primitive_desc(
                        dnnl::matmul::desc(
                            src.get_desc(), any_weights,
                            memory::desc({1, p.n}, memory::data_type::f32, memory::format_tag::ab),
                            dst.get_desc()),
                        attr, dnn.engine())
                  : dnnl::matmul::primitive_desc(
                        dnnl::matmul::desc(src.get_desc(), any_weights, dst.get_desc()), attr, dnn.engine());
    });
    // B in that format: reordered once and kept while B is unchanged (a weight); a B that
    // row_major had to copy is reordered per call (its copy is new each time).
    const memory weights =
        detail::weights_for(dnn, b, detail::input(ctx, "B"), user_weights, kept->pd.weights_desc());
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
    if (bias) {
      args.emplace(DNNL_ARG_BIAS, detail::onednn_plain_memory(c, {1, p.n}, dnn.engine()));
    } else if (g.has_c) {
      float* y = out.data<float>();
      const float* cv = c.data<float>();
      const float beta = float(g.beta);
      for (std::int64_t i = 0; i < p.m; ++i)
        for (std::int64_t j = 0; j < p.n; ++j)
          y[i * p.n + j] = beta * cv[i * g.c_at.row_stride + j * g.c_at.col_stride];
    }
    detail::run_kept(dnn, *kept, std::move(args));
    dnn.wait();
    ctx.set_output("Out", std::move(out));
  }
};
namespace detail {
inline constexpr auto gemm_onednn_kernels = fluidk::kernels_on<cpu, library::onednn>(gemm_onednn<float>{});
}
#else
namespace detail {
inline constexpr auto gemm_onednn_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_OPENCL
template <class T>
struct gemm_opencl {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the OpenCL gemm kernel computes in float");

  void operator()(execution_context& ctx) const {
    const Tensor a = detail::row_major(detail::input(ctx, "A"));
    const Tensor b = detail::row_major(detail::input(ctx, "B"));
    const gemm_geometry g = gemm_geometry::of(ctx, a, b);
    Tensor out(g.out(), data_type::float32, ctx.place());
    Tensor c;
    if (g.has_c) c = detail::row_major(ctx.input("C"));
    detail::opencl_matrix_products(ctx, g.product, a, b, float(g.alpha), g.has_c ? &c : nullptr, g.c_at,
                                   float(g.beta), out);
    // The activation in place: each work-item reads and writes its own element.
    const std::int64_t n = out.numel();
    const detail::fused_activation& act = g.activation;
    if (n > 0 && act.kind == act.relu)
      detail::opencl_launch(ctx, "relu_f32", std::size_t(n), 1, detail::cl_arg<float>(out),
                            detail::cl_buffer(out), cl_ulong(n));
    if (n > 0 && act.kind == act.clip)
      detail::opencl_launch_from(ctx, detail::activation_opencl_source, "activation_clip_f32", std::size_t(n),
                                 1, detail::cl_arg<float>(out), detail::cl_buffer(out), cl_ulong(n), act.lo,
                                 act.hi);
    if (n > 0 && act.kind == act.sigmoid)
      detail::opencl_launch_from(ctx, detail::activation_opencl_source, "activation_sigmoid_f32",
                                 std::size_t(n), 1, detail::cl_arg<float>(out), detail::cl_buffer(out),
                                 cl_ulong(n));
    ctx.set_output("Out", std::move(out));
  }
};
namespace detail {
inline constexpr auto gemm_opencl_kernels = fluidk::kernels_on<opencl>(gemm_opencl<float>{});
}
#else
namespace detail {
inline constexpr auto gemm_opencl_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_CUDA
template <class T>
struct gemm_cuda {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    detail::cuda_call call(ctx);
    const Tensor a = detail::row_major(detail::input(ctx, "A"));
    const Tensor b = detail::row_major(detail::input(ctx, "B"));
    const gemm_geometry g = gemm_geometry::of(ctx, a, b);
    const detail::matrix_product& p = g.product;
    Tensor out(g.out(), data_type_of<T>, ctx.place());
    if (g.has_c) {  // Out starts as beta x C; the product accumulates onto it
      const Tensor c = detail::row_major(ctx.input("C"));
      detail::cuda_require(cuda_launch::gemm_broadcast_c<T>(call.stream(), detail::device_data<T>(c),
                                                            detail::device_data<T>(out), p.m, p.n,
                                                            g.c_at.row_stride, g.c_at.col_stride, T(g.beta)),
                           ctx, "the broadcast kernel");
    }
    detail::cublas_matrix_products<T>(ctx, call, p, detail::device_data<T>(a), detail::device_data<T>(b),
                                      detail::device_data<T>(out), T(g.alpha), T(g.has_c ? 1 : 0));
    const detail::fused_activation& act = g.activation;
    if (act.kind != act.none)
      detail::cuda_require(cuda_launch::gemm_activation<T>(call.stream(), detail::device_data<T>(out),
                                                           p.m * p.n, int(act.kind), T(act.lo), T(act.hi)),
                           ctx, "the activation kernel");
    ctx.set_output("Out", std::move(out));
  }
};
namespace detail {
inline constexpr auto gemm_cuda_kernels = fluidk::kernels_on<cuda>(gemm_cuda<float>{}, gemm_cuda<double>{});
}
#else
namespace detail {
inline constexpr auto gemm_cuda_kernels = no_kernels();
}
#endif

struct gemm {
  static constexpr std::string_view name = "gemm";
  static constexpr std::array<std::string_view, 3> inputs{"A", "B", "C"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // Where the expected kernel type has no kernel (use_onednn with double data or in a build
  // without oneDNN; double on OpenCL), the CPU kernel of the same data type runs, counted
  // and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(gemm_cpu<float>{}, gemm_cpu<double>{}), detail::gemm_onednn_kernels,
      detail::gemm_cuda_kernels, detail::gemm_opencl_kernels);
};

}  // namespace fluidk::ops
