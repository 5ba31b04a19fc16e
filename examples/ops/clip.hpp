// clip (X -> Out): Out = min(max(X, min), max), elementwise; a NaN stays NaN (as ONNX Runtime
// keeps it). Attributes min (default -FLT_MAX) and max (default FLT_MAX); a NaN bound is refused.
//
// Kernels (float): CPU plain, CPU oneDNN (eltwise_clip), OpenCL, CUDA. The CPU kernels are
// declared for the wildcard layout and the oneDNN one also for nChw8c and nChw16c, so blocked
// data from a oneDNN conv2d stays blocked; padding lanes stay zero whatever the bounds. The
// device kernels run over row-major data.
#pragma once

#include <array>
#include <boost/mp11/list.hpp>
#include <cmath>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <string_view>
#include <utility>

#include "ops/detail/common.hpp"
#include "ops/detail/network_activation.hpp"
#if FLUIDK_OPS_ONEDNN
#include "ops/detail/onednn.hpp"
#endif
#if FLUIDK_OPS_OPENCL
#include "ops/detail/opencl.hpp"
#endif
#if FLUIDK_OPS_CUDA
#include "ops/detail/cuda.hpp"
#include "ops/detail/cuda_launch_spatial.hpp"
#endif

namespace fluidk::ops {

namespace detail {
// clip over X's storage into a new tensor of its layout; padding lanes zeroed again when the
// bounds move 0.
inline Tensor clip_storage(const execution_context& ctx, const Tensor& x, const clip_bounds& b) {
  Tensor out(x.dims(), data_type::float32, ctx.place(), x.layout());
  const float* in = x.data<float>();
  float* y = out.data<float>();
  const std::int64_t n = storage_elements(x);
  for (std::int64_t i = 0; i < n; ++i) y[i] = activation_clip_of(in[i], b.lo, b.hi);
  if (!b.keeps_zero()) activation_zero_padding(out);
  return out;
}
}  // namespace detail

struct clip_cpu {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const detail::clip_bounds b = detail::clip_bounds_of(ctx);
    const Tensor x = detail::activation_storage_input(detail::input(ctx, "X"));
    ctx.set_output("Out", detail::clip_storage(ctx, x, b), ctx.input_lod("X"));
  }
};

#if FLUIDK_OPS_ONEDNN
struct clip_onednn {
  using dtype = float;
  using layouts = boost::mp11::mp_list<layout::any, layout::nChw8c, layout::nChw16c>;

  void operator()(execution_context& ctx) const {
    using dnnl::memory;
    const detail::clip_bounds b = detail::clip_bounds_of(ctx);
    const Tensor x = detail::activation_storage_input(detail::input(ctx, "X"));
    // oneDNN's clip returns min where min > max (min(max(x, min), max) gives max): computed
    // here instead, the same values.
    if (b.lo > b.hi || x.numel() == 0) {
      ctx.set_output("Out", detail::clip_storage(ctx, x, b), ctx.input_lod("X"));
      return;
    }
    Tensor out(x.dims(), data_type::float32, ctx.place(), x.layout());
    onednn_context& dnn = detail::onednn_of(ctx);
    // Over the flat storage where the padding lanes stay zero; else over the logical elements
    // of the blocked layout, where oneDNN writes the padding lanes as zeros (the tests check).
    const bool flat = !x.layout().blocked() || b.keeps_zero();
    const std::int64_t n = detail::storage_elements(x);
    const memory src =
        flat ? detail::onednn_plain_memory(x, {n}, dnn.engine()) : detail::onednn_memory_of(x, dnn.engine());
    const memory dst = flat ? detail::onednn_plain_memory(out, {n}, dnn.engine())
                            : detail::onednn_memory_of(out, dnn.engine());
    // The bounds are the primitive's (alpha, beta): part of its key.
    detail::onednn_key key("clip.fwd");
    key << src.get_desc() << b.lo << b.hi;
    const auto kept = detail::kept_primitive<dnnl::eltwise_forward>(dnn, key, [&] {
      return dnnl::eltwise_forward::primitive_desc(
          dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_clip,
                                      src.get_desc(), b.lo, b.hi),
          detail::kept_attr(), dnn.engine());
    });
    detail::run_kept(dnn, *kept, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    dnn.wait();
    // oneDNN's clip maps NaN to min (its comparisons fail): put the NaNs back.
    const float* in = x.data<float>();
    float* y = out.data<float>();
    for (std::int64_t i = 0; i < n; ++i)
      if (std::isnan(in[i])) y[i] = in[i];
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto clip_onednn_kernels = fluidk::kernels_on<cpu, library::onednn>(clip_onednn{});
}
#else
namespace detail {
inline constexpr auto clip_onednn_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_OPENCL
struct clip_opencl {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const detail::clip_bounds b = detail::clip_bounds_of(ctx);
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    Tensor out(x.dims(), data_type::float32, ctx.place(), x.layout());
    const std::int64_t n = x.numel();
    if (n > 0)
      detail::opencl_launch_from(ctx, detail::activation_opencl_source, "activation_clip_f32", std::size_t(n),
                                 1, detail::cl_arg<float>(x), detail::cl_buffer(out), cl_ulong(n), b.lo,
                                 b.hi);
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto clip_opencl_kernels = fluidk::kernels_on<opencl>(clip_opencl{});
}
#else
namespace detail {
inline constexpr auto clip_opencl_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_CUDA
struct clip_cuda {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const detail::clip_bounds b = detail::clip_bounds_of(ctx);
    detail::cuda_call call(ctx);
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    Tensor out(x.dims(), data_type::float32, ctx.place(), x.layout());
    detail::cuda_require(cuda_launch::clip_f32(call.stream(), detail::device_data<float>(x),
                                               detail::device_data<float>(out), x.numel(), b.lo, b.hi),
                         ctx, "the clip kernel");
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto clip_cuda_kernels = fluidk::kernels_on<cuda>(clip_cuda{});
}
#else
namespace detail {
inline constexpr auto clip_cuda_kernels = no_kernels();
}
#endif

struct clip {
  static constexpr std::string_view name = "clip";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // Where the expected kernel type has none (use_onednn without oneDNN, double data), the CPU
  // kernel runs, reported as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels =
      fluidk::make_kernels(fluidk::kernels_on<cpu>(clip_cpu{}), detail::clip_onednn_kernels,
                           detail::clip_cuda_kernels, detail::clip_opencl_kernels);
};

}  // namespace fluidk::ops
