// batch_norm (X, Scale, Bias, Mean, Variance -> Y), inference only:
//   Y = (X - Mean[c]) / sqrt(Variance[c] + epsilon) * Scale[c] + Bias[c], c = X's dim 1.
// Attributes: epsilon (1e-5), momentum (training only: unused), is_test (false, Fluid's
// default, is refused: no training statistics), data_layout ("NCHW" only). X has rank 2 or
// more; each statistic is 1-D [C], float32.
//
// Kernels (float): CPU plain, CPU oneDNN (batch_normalization_forward with global statistics,
// declared for the wildcard layout and for nChw8c and nChw16c, so blocked data from a oneDNN
// conv2d stays blocked, padding lanes zero), OpenCL, CUDA (row-major data). The statistics
// keep their layout (keep_layout_inputs): 1-D, they are never relabelled blocked next to X.
#pragma once

#include <array>
#include <boost/mp11/list.hpp>
#include <cstddef>
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
// The CPU computation over X in row-major order, into Y of X's (row-major) layout.
inline Tensor batch_norm_rows(const execution_context& ctx, const Tensor& x, const batch_norm_call& call) {
  const batch_norm_affine f = batch_norm_affine_of(ctx, call);
  Tensor y(x.dims(), data_type::float32, ctx.place(), x.layout());
  const float* in = x.data<float>();
  float* out = y.data<float>();
  for (std::int64_t o = 0; o < call.outer; ++o)
    for (std::int64_t c = 0; c < call.channels; ++c) {
      const float a = f.a[std::size_t(c)], mean = f.mean[std::size_t(c)], bias = f.bias[std::size_t(c)];
      const std::int64_t base = (o * call.channels + c) * call.inner;
      for (std::int64_t s = 0; s < call.inner; ++s) out[base + s] = (in[base + s] - mean) * a + bias;
    }
  return y;
}
}  // namespace detail

struct batch_norm_cpu {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const detail::batch_norm_call call = detail::batch_norm_call_of(ctx);
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    ctx.set_output("Y", detail::batch_norm_rows(ctx, x, call), ctx.input_lod("X"));
  }
};

#if FLUIDK_OPS_ONEDNN
struct batch_norm_onednn {
  using dtype = float;
  using layouts = boost::mp11::mp_list<layout::any, layout::nChw8c, layout::nChw16c>;

  void operator()(execution_context& ctx) const {
    using dnnl::memory;
    const detail::batch_norm_call call = detail::batch_norm_call_of(ctx);
    const Tensor& x = detail::input(ctx, "X");
    // oneDNN normalises data of rank 2 to 5; other ranks (row-major) are computed here, the
    // same values.
    if (x.dims().rank() > 5 || x.numel() == 0) {
      ctx.set_output("Y", detail::batch_norm_rows(ctx, detail::row_major(x), call), ctx.input_lod("X"));
      return;
    }
    Tensor y(x.dims(), data_type::float32, ctx.place(), x.layout());
    onednn_context& dnn = detail::onednn_of(ctx);
    // X in its own layout with its logical dims: oneDNN writes a blocked Y's padding lanes as
    // zeros (the tests check).
    const memory src = detail::onednn_memory_of(x, dnn.engine());
    const memory dst{src.get_desc(), dnn.engine(), static_cast<std::byte*>(y.mutable_handle()) + y.offset()};
    const memory::dims per_channel{call.channels};
    const auto statistic = [&](const char* slot) {
      return detail::onednn_plain_memory(detail::input(ctx, slot), per_channel, dnn.engine());
    };
    const memory scale = statistic("Scale"), shift = statistic("Bias"), mean = statistic("Mean"),
                 variance = statistic("Variance");
    // Scale and shift are separate arguments (use_scale, use_shift): read in place, nothing to
    // prepare.
    using flags = dnnl::normalization_flags;
    detail::onednn_key key("batch_norm.fwd");
    key << src.get_desc() << call.epsilon;
    const auto kept = detail::kept_primitive<dnnl::batch_normalization_forward>(dnn, key, [&] {
      return dnnl::batch_normalization_forward::primitive_desc(
          dnnl::batch_normalization_forward::desc(
              dnnl::prop_kind::forward_inference, src.get_desc(), call.epsilon,
              flags::use_global_stats | flags::use_scale | flags::use_shift),
          detail::kept_attr(), dnn.engine());
    });
    detail::run_kept(dnn, *kept,
                     {{DNNL_ARG_SRC, src},
                      {DNNL_ARG_DST, dst},
                      {DNNL_ARG_SCALE, scale},
                      {DNNL_ARG_SHIFT, shift},
                      {DNNL_ARG_MEAN, mean},
                      {DNNL_ARG_VARIANCE, variance}});
    dnn.wait();
    ctx.set_output("Y", std::move(y), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto batch_norm_onednn_kernels =
    fluidk::kernels_on<cpu, library::onednn>(batch_norm_onednn{});
}
#else
namespace detail {
inline constexpr auto batch_norm_onednn_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_OPENCL
struct batch_norm_opencl {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const detail::batch_norm_call call = detail::batch_norm_call_of(ctx);
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    Tensor y(x.dims(), data_type::float32, ctx.place(), x.layout());
    const std::int64_t n = x.numel();
    using detail::cl_arg;
    if (n > 0)
      detail::opencl_launch_from(
          ctx, detail::activation_opencl_source, "activation_batch_norm_f32", std::size_t(n), 1,
          cl_arg<float>(x), cl_arg<float>(detail::input(ctx, "Scale")),
          cl_arg<float>(detail::input(ctx, "Bias")), cl_arg<float>(detail::input(ctx, "Mean")),
          cl_arg<float>(detail::input(ctx, "Variance")), detail::cl_buffer(y), cl_ulong(n),
          cl_ulong(call.channels), cl_ulong(call.inner), call.epsilon);
    ctx.set_output("Y", std::move(y), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto batch_norm_opencl_kernels = fluidk::kernels_on<opencl>(batch_norm_opencl{});
}
#else
namespace detail {
inline constexpr auto batch_norm_opencl_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_CUDA
struct batch_norm_cuda {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const detail::batch_norm_call call = detail::batch_norm_call_of(ctx);
    detail::cuda_call cuda(ctx);
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    Tensor y(x.dims(), data_type::float32, ctx.place(), x.layout());
    const auto statistic = [&](const char* slot) {
      return detail::device_data<float>(detail::input(ctx, slot));
    };
    detail::cuda_require(
        cuda_launch::batch_norm_inference_f32(cuda.stream(), detail::device_data<float>(x),
                                              statistic("Scale"), statistic("Bias"), statistic("Mean"),
                                              statistic("Variance"), detail::device_data<float>(y), x.numel(),
                                              call.channels, call.inner, call.epsilon),
        ctx, "the batch_norm kernel");
    ctx.set_output("Y", std::move(y), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto batch_norm_cuda_kernels = fluidk::kernels_on<cuda>(batch_norm_cuda{});
}
#else
namespace detail {
inline constexpr auto batch_norm_cuda_kernels = no_kernels();
}
#endif

struct batch_norm {
  static constexpr std::string_view name = "batch_norm";
  static constexpr std::array<std::string_view, 5> inputs{"X", "Scale", "Bias", "Mean", "Variance"};
  static constexpr std::array<std::string_view, 1> outputs{"Y"};
  static constexpr std::string_view data_type_input = "X";
  static constexpr std::array<std::string_view, 4> keep_layout_inputs{"Scale", "Bias", "Mean", "Variance"};
  // Where the expected kernel type has none (use_onednn without oneDNN, double data), the CPU
  // kernel runs, reported as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels =
      fluidk::make_kernels(fluidk::kernels_on<cpu>(batch_norm_cpu{}), detail::batch_norm_onednn_kernels,
                           detail::batch_norm_cuda_kernels, detail::batch_norm_opencl_kernels);
};

}  // namespace fluidk::ops
