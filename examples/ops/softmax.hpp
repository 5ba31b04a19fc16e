// softmax (X -> Out): Out = exp(X - max) / sum(exp(X - max)) along one axis (attribute axis,
// int, default -1; a negative one counts from the end), ONNX's opset-13 Softmax. The maximum
// along the axis is subtracted first, so large inputs do not overflow. Out has X's dims,
// layout (row-major order) and sequence offsets.
//
// Kernels: CPU plain (float, double), CPU oneDNN (float: softmax_forward over X as
// [outer, n, inner], plain layouts only: fluidk brings blocked data to NCHW first), OpenCL
// (float) and CUDA (float, double). Each refuses an axis out of [-rank, rank) and a rank-0 X.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "ops/detail/common.hpp"
#if FLUIDK_OPS_ONEDNN
#include "ops/detail/onednn.hpp"
#endif
#if FLUIDK_OPS_OPENCL
#include "ops/detail/opencl.hpp"
#endif
#if FLUIDK_OPS_CUDA
#include "ops/detail/cuda.hpp"
#include "ops/detail/cuda_launch_elementwise.hpp"
#endif

namespace fluidk::ops {

// X as [outer, n, inner], n the softmax axis.
struct softmax_geometry {
  std::int64_t outer = 1, n = 1, inner = 1;

  static softmax_geometry of(const execution_context& ctx, const dims& x) {
    const std::int64_t rank = std::int64_t(x.rank());
    std::int64_t axis = detail::int_attr(ctx, "axis", -1);
    detail::require(rank > 0 && axis >= -rank && axis < rank, ctx,
                    "axis (" + std::to_string(axis) + ") must be in [-rank, rank) for X " + x.to_string());
    if (axis < 0) axis += rank;
    const std::size_t a = std::size_t(axis);
    return {detail::product(x, 0, a), x[a], detail::product(x, a + 1, x.rank())};
  }
  std::int64_t total() const { return outer * n * inner; }
};

template <class T>
struct softmax_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const softmax_geometry g = softmax_geometry::of(ctx, x.dims());
    Tensor out(x.dims(), data_type_of<T>, ctx.place(), x.layout());
    const T* in = x.data<T>();
    T* y = out.data<T>();
    // (An empty softmax axis has no maximum to read, and Out is as empty: nothing to compute.)
    for (std::int64_t o = 0; g.n > 0 && o < g.outer; ++o)
      for (std::int64_t i = 0; i < g.inner; ++i) {
        const std::int64_t base = o * g.n * g.inner + i;
        T m = in[base];
        for (std::int64_t k = 1; k < g.n; ++k) m = std::max(m, in[base + k * g.inner]);
        T sum = 0;
        for (std::int64_t k = 0; k < g.n; ++k) {
          const T e = std::exp(in[base + k * g.inner] - m);
          y[base + k * g.inner] = e;
          sum += e;
        }
        for (std::int64_t k = 0; k < g.n; ++k) y[base + k * g.inner] /= sum;
      }
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};

#if FLUIDK_OPS_ONEDNN
struct softmax_onednn {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const softmax_geometry g = softmax_geometry::of(ctx, x.dims());
    Tensor out(x.dims(), data_type::float32, ctx.place(), x.layout());
    if (g.total() > 0) {
      onednn_context& dnn = detail::onednn_of(ctx);
      const dnnl::memory::dims shape{g.outer, g.n, g.inner};
      dnnl::memory src = detail::onednn_plain_memory(x, shape, dnn.engine());
      dnnl::memory dst = detail::onednn_plain_memory(out, shape, dnn.engine());
      detail::onednn_key key("softmax.fwd");
      key << src.get_desc();
      const auto kept = detail::kept_primitive<dnnl::softmax_forward>(dnn, key, [&] {
        return dnnl::softmax_forward::primitive_desc(
            dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, src.get_desc(), 1),
            detail::kept_attr(), dnn.engine());
      });
      detail::run_kept(dnn, *kept, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
      dnn.wait();
    }
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto softmax_onednn_kernels = fluidk::kernels_on<cpu, library::onednn>(softmax_onednn{});
}
#else
namespace detail {
inline constexpr auto softmax_onednn_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_OPENCL
// Softmax of x as [outer, n, inner] along n; one work-item per (outer, inner) row.
inline constexpr const char* softmax_opencl_source = R"CLC(
__kernel void softmax_f32(__global const float* x, ulong x_off, __global float* y, ulong outer, ulong n,
                          ulong inner) {
  const size_t r = get_global_id(0);
  if (r >= outer * inner) return;
  const ulong base = (r / inner) * n * inner + r % inner;
  __global const float* in = x + x_off + base;
  __global float* out = y + base;
  float m = in[0];
  for (ulong k = 1; k < n; ++k) m = fmax(m, in[k * inner]);
  float sum = 0.0f;
  for (ulong k = 0; k < n; ++k) {
    const float e = exp(in[k * inner] - m);
    out[k * inner] = e;
    sum += e;
  }
  for (ulong k = 0; k < n; ++k) out[k * inner] /= sum;
}
)CLC";

struct softmax_opencl {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const softmax_geometry g = softmax_geometry::of(ctx, x.dims());
    Tensor out(x.dims(), data_type::float32, ctx.place(), x.layout());
    if (g.total() > 0)
      detail::opencl_launch_from(ctx, softmax_opencl_source, "softmax_f32", std::size_t(g.outer * g.inner), 1,
                                 detail::cl_arg<float>(x), detail::cl_buffer(out), cl_ulong(g.outer),
                                 cl_ulong(g.n), cl_ulong(g.inner));
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto softmax_opencl_kernels = fluidk::kernels_on<opencl>(softmax_opencl{});
}
#else
namespace detail {
inline constexpr auto softmax_opencl_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_CUDA
template <class T>
struct softmax_cuda {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    detail::cuda_call call(ctx);
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const softmax_geometry g = softmax_geometry::of(ctx, x.dims());
    Tensor out(x.dims(), data_type_of<T>, ctx.place(), x.layout());
    detail::cuda_require(cuda_launch::softmax<T>(call.stream(), detail::device_data<T>(x),
                                                 detail::device_data<T>(out), g.outer, g.n, g.inner),
                         ctx, "the softmax kernel");
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto softmax_cuda_kernels =
    fluidk::kernels_on<cuda>(softmax_cuda<float>{}, softmax_cuda<double>{});
}
#else
namespace detail {
inline constexpr auto softmax_cuda_kernels = no_kernels();
}
#endif

struct softmax {
  static constexpr std::string_view name = "softmax";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // Where the expected kernel type has no kernel (double with use_onednn or on OpenCL), the
  // CPU kernel of the same data type runs, counted and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(softmax_cpu<float>{}, softmax_cpu<double>{}), detail::softmax_onednn_kernels,
      detail::softmax_cuda_kernels, detail::softmax_opencl_kernels);
};

}  // namespace fluidk::ops
