// fc (Input, W, Bias -> Out): Fluid's fully connected layer, Out = Input x W + Bias. Input is
// read as a matrix by its first in_num_col_dims dimensions (default 1) and the rest; W is
// [K, N]; Bias, optional, is [N] or [1, N] and added to every row. Out has Input's leading
// dimensions and N, and its sequence offsets. The string attribute activation_type is, as in
// Fluid, "" (none, the default) or "relu", applied after the bias.
//
// Kernels: CPU plain (float, double: a blocked GEMM), CPU oneDNN (float: the inner product
// primitive, kept per shape in the context's cache, its weights reordered into the format
// oneDNN asks for once while W is unchanged), CUDA (float, double:
// the bias rows, then cuBLAS accumulating onto them) and OpenCL (float).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
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

namespace detail {
// fc's activation on the host, over its m x n results.
template <class T>
void relu_in_place(T* y, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) y[i] = relu_of(y[i]);
}
}  // namespace detail

struct fc_geometry {
  std::int64_t m, k, n;
  bool bias;
  bool relu;  // activation_type "relu"
  dims out;

  static fc_geometry of(const execution_context& ctx, const Tensor& input, const Tensor& w) {
    const std::int64_t in_cols = detail::int_attr(ctx, "in_num_col_dims", 1);
    detail::require(in_cols >= 1 && std::size_t(in_cols) < input.dims().rank(), ctx,
                    "in_num_col_dims (" + std::to_string(in_cols) +
                        ") must be in [1, rank of Input) for Input " + input.dims().to_string());
    detail::require(w.dims().rank() == 2, ctx, "W must be 2-D [K, N], not " + w.dims().to_string());
    fc_geometry g{};
    g.m = detail::product(input.dims(), 0, std::size_t(in_cols));
    g.k = detail::product(input.dims(), std::size_t(in_cols), input.dims().rank());
    g.n = w.dims()[1];
    detail::require(g.k == w.dims()[0], ctx,
                    "Input " + input.dims().to_string() + " read as [" + std::to_string(g.m) + ", " +
                        std::to_string(g.k) + "] does not fit W " + w.dims().to_string());
    g.bias = detail::has_input(ctx, "Bias");
    if (g.bias) {
      const dims& b = ctx.input("Bias").dims();
      detail::require(b.numel() == g.n && (b.rank() == 1 || (b.rank() == 2 && b[0] == 1)), ctx,
                      "Bias must be [" + std::to_string(g.n) + "] or [1, " + std::to_string(g.n) + "], not " +
                          b.to_string());
    }
    const std::string activation = ctx.attr_or<std::string>("activation_type", "");
    detail::require(
        activation.empty() || activation == "relu", ctx,
        "activation_type must be \"\" (none) or \"relu\", as in Fluid, not \"" + activation + "\"");
    g.relu = activation == "relu";
    std::vector<std::int64_t> out(input.dims().begin(), input.dims().begin() + in_cols);
    out.push_back(g.n);
    g.out = dims(std::span<const std::int64_t>(out));
    return g;
  }
};

template <class T>
struct fc_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor input = detail::row_major(detail::input(ctx, "Input"));
    const Tensor w = detail::row_major(detail::input(ctx, "W"));
    const fc_geometry g = fc_geometry::of(ctx, input, w);
    Tensor out(g.out, data_type_of<T>, ctx.place());
    T* y = out.data<T>();
    if (g.bias) {  // start from the bias in every row, then accumulate the product
      const T* b = ctx.input("Bias").data<T>();
      for (std::int64_t i = 0; i < g.m; ++i) std::copy(b, b + g.n, y + i * g.n);
    }
    detail::gemm<T>(g.m, g.n, g.k, input.data<T>(), g.k, w.data<T>(), g.n, y, g.n, g.bias);
    if (g.relu) detail::relu_in_place(y, g.m * g.n);
    ctx.set_output("Out", std::move(out), ctx.input_lod("Input"));
  }
};

#if FLUIDK_OPS_ONEDNN
template <class T>
struct fc_onednn {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the oneDNN fc kernel computes in float");

  void operator()(execution_context& ctx) const {
    using dnnl::memory;
    const Tensor input = detail::row_major(detail::input(ctx, "Input"));
    const Tensor w = detail::row_major(detail::input(ctx, "W"));
    const fc_geometry g = fc_geometry::of(ctx, input, w);
    // oneDNN makes no primitive of an empty dimension: the plain kernel's result, an empty
    // output or (K = 0) the bias in every row, else zeros.
    if (g.m == 0 || g.n == 0 || g.k == 0) return fc_cpu<T>{}(ctx);
    onednn_context& dnn = detail::onednn_of(ctx);
    const auto f32 = memory::data_type::f32;
    Tensor out(g.out, data_type::float32, ctx.place());
    memory src = detail::onednn_plain_memory(input, {g.m, g.k}, dnn.engine());
    memory dst = detail::onednn_plain_memory(out, {g.m, g.n}, dnn.engine());
    // oneDNN's weights are [N, K]; W [K, N] in row-major order is their `io` format.
    memory user_weights(memory::desc({g.n, g.k}, f32, memory::format_tag::io), dnn.engine(),
                        static_cast<std::byte*>(w.handle()) + w.offset());
    const memory::desc any_weights({g.n, g.k}, f32, memory::format_tag::any);
    using ip = dnnl::inner_product_forward;
    const auto inference = dnnl::prop_kind::forward_inference;
    // The primitive of these shapes, kept in the context's cache, its weights in the format
    // oneDNN chooses for them.
    detail::onednn_key key("fc.fwd");
    key << g.m << g.k << g.n << g.bias;
    const auto kept = detail::kept_primitive<ip>(dnn, key, [&] {
      return g.bias ? ip::primitive_desc(
                          ip::desc(inference, src.get_desc(), any_weights,
                                   memory::desc({g.n}, f32, memory::format_tag::a), dst.get_desc()),
                          detail::kept_attr(), dnn.engine())
                    : ip::primitive_desc(ip::desc(inference, src.get_desc(), any_weights, dst.get_desc()),
                                         detail::kept_attr(), dnn.engine());
    });
    // W in that format: reordered once and kept while W is unchanged; a W that row_major had
    // to copy is reordered per call (its copy is new each time).
    const memory weights =
        detail::weights_for(dnn, w, detail::input(ctx, "W"), user_weights, kept->pd.weights_desc());
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
    if (g.bias)
      args.emplace(DNNL_ARG_BIAS, detail::onednn_plain_memory(ctx.input("Bias"), {g.n}, dnn.engine()));
    detail::run_kept(dnn, *kept, std::move(args));
    dnn.wait();
    if (g.relu) detail::relu_in_place(out.data<float>(), g.m * g.n);
    ctx.set_output("Out", std::move(out), ctx.input_lod("Input"));
  }
};
namespace detail {
inline constexpr auto fc_onednn_kernels = fluidk::kernels_on<cpu, library::onednn>(fc_onednn<float>{});
}
#else
namespace detail {
inline constexpr auto fc_onednn_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_OPENCL
template <class T>
struct fc_opencl {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the OpenCL fc kernel computes in float");

  void operator()(execution_context& ctx) const {
    const Tensor input = detail::row_major(detail::input(ctx, "Input"));
    const Tensor w = detail::row_major(detail::input(ctx, "W"));
    const fc_geometry g = fc_geometry::of(ctx, input, w);
    Tensor out(g.out, data_type::float32, ctx.place());
    detail::opencl_gemm(ctx, g.m, g.n, g.k, input, w, g.bias ? &ctx.input("Bias") : nullptr, out);
    if (g.relu && out.numel() > 0)  // relu_f32 in place: each work-item reads its element, then writes it
      detail::opencl_launch(ctx, "relu_f32", std::size_t(out.numel()), 1, detail::cl_arg<float>(out),
                            detail::cl_buffer(out), cl_ulong(out.numel()));
    ctx.set_output("Out", std::move(out), ctx.input_lod("Input"));
  }
};
namespace detail {
inline constexpr auto fc_opencl_kernels = fluidk::kernels_on<opencl>(fc_opencl<float>{});
}
#else
namespace detail {
inline constexpr auto fc_opencl_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_CUDA
template <class T>
struct fc_cuda {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    detail::cuda_call call(ctx);
    const Tensor input = detail::row_major(detail::input(ctx, "Input"));
    const Tensor w = detail::row_major(detail::input(ctx, "W"));
    const fc_geometry g = fc_geometry::of(ctx, input, w);
    Tensor out(g.out, data_type_of<T>, ctx.place());
    if (g.bias)  // every row starts as the bias; the GEMM accumulates onto it
      detail::cuda_require(cuda_launch::fill_rows<T>(call.stream(), detail::device_data<T>(ctx.input("Bias")),
                                                     detail::device_data<T>(out), g.m, g.n),
                           ctx, "the bias kernel");
    detail::cublas_gemm<T>(ctx, call, g.m, g.n, g.k, detail::device_data<T>(input), detail::device_data<T>(w),
                           detail::device_data<T>(out), g.bias);
    if (g.relu)  // in place: each thread reads its element, then writes it
      detail::cuda_require(cuda_launch::relu<T>(call.stream(), detail::device_data<T>(out),
                                                detail::device_data<T>(out), g.m * g.n),
                           ctx, "the relu kernel");
    ctx.set_output("Out", std::move(out), ctx.input_lod("Input"));
  }
};
namespace detail {
inline constexpr auto fc_cuda_kernels = fluidk::kernels_on<cuda>(fc_cuda<float>{}, fc_cuda<double>{});
}
#else
namespace detail {
inline constexpr auto fc_cuda_kernels = no_kernels();
}
#endif

struct fc {
  static constexpr std::string_view name = "fc";
  static constexpr std::array<std::string_view, 3> inputs{"Input", "W", "Bias"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // Where the expected kernel type has no kernel (use_onednn with double data or in a build
  // without oneDNN; double on OpenCL), the CPU kernel of the same data type runs, counted
  // and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels =
      fluidk::make_kernels(fluidk::kernels_on<cpu>(fc_cpu<float>{}, fc_cpu<double>{}),
                           detail::fc_onednn_kernels, detail::fc_cuda_kernels, detail::fc_opencl_kernels);
};

}  // namespace fluidk::ops
