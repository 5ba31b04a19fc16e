// What batch_norm, clip, sigmoid and the fused activations of conv2d and gemm share: the value of each as
// every kernel computes it, the checks of their attributes and shapes, and their OpenCL C source
// (activation_opencl_source).
#pragma once

#include <cmath>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/tensor.hpp>
#include <limits>
#include <string>
#include <vector>

#include "ops/detail/common.hpp"

namespace fluidk::ops::detail {

// clip of one value: min(max(v, lo), hi) as std::max and std::min order their operands, so a
// NaN v stays NaN (as ONNX Runtime keeps it) and lo > hi gives hi.
template <class T>
constexpr T activation_clip_of(T v, T lo, T hi) {
  const T low = v < lo ? lo : v;
  return hi < low ? hi : low;
}
// sigmoid of one value: exp(-v) overflows to infinity for very negative v, giving 0, not NaN.
template <class T>
T activation_sigmoid_of(T v) {
  return T(1) / (T(1) + std::exp(-v));
}

// The activation a fused operator applies last (conv2d's and gemm's fuse_activation): ""
// (none), "relu", "clip" (to [fuse_alpha, fuse_beta]) or "sigmoid", each computing what the
// relu, clip and sigmoid operators compute. Read from the attributes and checked.
struct fused_activation {
  // The values are the CUDA launchers' and the OpenCL kernels' kinds.
  enum kind_type : int { none = 0, relu = 1, clip = 2, sigmoid = 3 };
  kind_type kind = none;
  float lo = 0, hi = 0;  // clip's bounds

  // clip_bounds_required: clip needs both bounds given (conv2d); else a bound left out is
  // the lowest or highest float (gemm).
  static fused_activation of(const execution_context& ctx, bool clip_bounds_required) {
    fused_activation act;
    const std::string name = ctx.attributes().get_or<std::string>("fuse_activation", "", ctx.op_type());
    if (name.empty()) return act;
    if (name == "relu") {
      act.kind = relu;
    } else if (name == "sigmoid") {
      act.kind = sigmoid;
    } else if (name == "clip") {
      act.kind = clip;
      require(!clip_bounds_required || (ctx.attributes().find("fuse_alpha") != nullptr &&
                                        ctx.attributes().find("fuse_beta") != nullptr),
              ctx, "fuse_activation \"clip\" needs attributes 'fuse_alpha' (min) and 'fuse_beta' (max)");
      act.lo = number_attr_as<float>(ctx, "fuse_alpha", -std::numeric_limits<float>::max());
      act.hi = number_attr_as<float>(ctx, "fuse_beta", std::numeric_limits<float>::max());
      require(!std::isnan(act.lo) && !std::isnan(act.hi), ctx,
              "attribute 'fuse_alpha' or 'fuse_beta' is NaN");
    } else {
      fail(ctx, "attribute 'fuse_activation' is \"" + name +
                    "\"; it takes \"\" (none), \"relu\", \"clip\" or \"sigmoid\"");
    }
    return act;
  }
  template <class T>
  T operator()(T v) const {
    switch (kind) {
      case relu:
        return relu_of(v);
      case clip:
        return activation_clip_of(v, T(lo), T(hi));
      case sigmoid:
        return activation_sigmoid_of(v);
      case none:
        break;
    }
    return v;
  }
  template <class T>
  void apply(T* y, std::int64_t n) const {
    if (kind != none)
      for (std::int64_t i = 0; i < n; ++i) y[i] = (*this)(y[i]);
  }
};

// clip's bounds, checked: a NaN bound would make the kernels disagree (oneDNN's clip returns
// the bound, the comparisons return x), so it is refused rather than computed one way.
struct clip_bounds {
  float lo, hi;
  // Whether clip maps 0 to 0: a blocked layout's zero padding lanes then stay zero.
  bool keeps_zero() const { return activation_clip_of(0.f, lo, hi) == 0.f; }
};
inline clip_bounds clip_bounds_of(const execution_context& ctx) {
  const clip_bounds b{number_attr_as<float>(ctx, "min", -std::numeric_limits<float>::max()),
                      number_attr_as<float>(ctx, "max", std::numeric_limits<float>::max())};
  require(!std::isnan(b.lo) && !std::isnan(b.hi), ctx, "attribute 'min' or 'max' is NaN");
  return b;
}

// batch_norm's call, checked: inference only, channels on dim 1 of X, each statistic [C].
struct batch_norm_call {
  float epsilon;
  std::int64_t outer, channels, inner;  // X as [outer, C, inner], row-major
};
inline batch_norm_call batch_norm_call_of(const execution_context& ctx) {
  const attribute_map& attrs = ctx.attributes();
  require(attrs.get_or<bool>("is_test", false, ctx.op_type()), ctx,
          "computes inference only: attribute 'is_test' must be true (training statistics are not "
          "supported)");
  const std::string layout = attrs.get_or<std::string>("data_layout", "NCHW", ctx.op_type());
  require(layout == "NCHW", ctx, "supports data_layout \"NCHW\" only, not \"" + layout + "\"");
  // momentum updates the running statistics in training only: read for its kind, unused.
  static_cast<void>(number_attr(ctx, "momentum", 0.9));
  const float epsilon = number_attr_as<float>(ctx, "epsilon", 1e-5f);
  require(std::isfinite(epsilon) && epsilon >= 0, ctx, "attribute 'epsilon' must be finite and non-negative");
  const dims& x = input(ctx, "X").dims();
  require(x.rank() >= 2, ctx, "needs X of rank 2 or more (channels on dim 1), not " + x.to_string());
  const std::int64_t channels = x[1];
  for (const char* slot : {"Scale", "Bias", "Mean", "Variance"}) {
    const Tensor& t = input(ctx, slot);
    require(t.dims().rank() == 1 && t.dims()[0] == channels, ctx,
            std::string("input '") + slot + "' must be 1-D [" + std::to_string(channels) +
                "] (X's channels), not " + t.dims().to_string());
    require(t.dtype() == data_type::float32, ctx,
            std::string("input '") + slot + "' must be float32, not " + std::string(name_of(t.dtype())));
  }
  return {epsilon, x[0], channels, product(x, 2, x.rank())};
}

// Each channel's y = (x - mean[c]) * a[c] + bias[c], a = scale / sqrt(var + eps) (computed in
// double), the order of ONNX's formula, which the OpenCL and CUDA kernels follow: the kernels
// differ only in the last rounding. (Folding the mean into the bias, x * a + (bias - mean * a),
// cancels where the mean is large against the spread: 5e-4 off at x = 10000.5, mean 10000,
// variance 1e-4; and gives NaN for inf where the variance and epsilon are 0.)
struct batch_norm_affine {
  std::vector<float> a, mean, bias;
};
// (The CPU kernels' statistics, on the host.)
inline batch_norm_affine batch_norm_affine_of(const execution_context& ctx, const batch_norm_call& call) {
  const auto host = [&](const char* slot) {
    const Tensor& t = input(ctx, slot);
    return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  };
  const std::vector<float> scale = host("Scale"), variance = host("Variance");
  batch_norm_affine r{std::vector<float>(std::size_t(call.channels)), host("Mean"), host("Bias")};
  for (std::size_t c = 0; c < r.a.size(); ++c)
    r.a[c] = float(double(scale[c]) / std::sqrt(double(variance[c]) + double(call.epsilon)));
  return r;
}

// X as an elementwise pass over its storage reads it: as it is, unless blocked on another dim
// than the channels (activation_zero_padding knows only channel blocks).
inline Tensor activation_storage_input(const Tensor& x) {
  return x.layout().blocked() && x.layout().block_axis() != 1 ? row_major(x) : x;
}

// Zeroes the padding lanes of a blocked float tensor (channels blocked on dim 1, as nChw8c and
// nChw16c are) after a pass over its storage computed f(0) there: fluidk and oneDNN read
// blocked data with zero padding.
inline void activation_zero_padding(Tensor& t) {
  const data_layout l = t.layout();
  if (!l.blocked()) return;
  const std::int64_t block = l.block_size(), channels = t.dims()[1];
  const std::int64_t blocks = (channels + block - 1) / block, used = channels - (blocks - 1) * block;
  if (blocks == 0 || used == block) return;
  const std::int64_t outer = t.dims()[0], inner = product(t.dims(), 2, t.dims().rank());
  float* p = t.data<float>();
  for (std::int64_t n = 0; n < outer; ++n) {
    float* last = p + (n * blocks + blocks - 1) * inner * block;
    for (std::int64_t s = 0; s < inner; ++s)
      for (std::int64_t lane = used; lane < block; ++lane) last[s * block + lane] = 0.f;
  }
}

}  // namespace fluidk::ops::detail

#if FLUIDK_OPS_OPENCL
namespace fluidk::ops::detail {
// One work-item per element of row-major data; offsets in elements, so views work. clip and
// batch_norm compute what activation_clip_of and the CPU kernels compute (batch_norm's factor
// scale / sqrt(var + epsilon) in double where the device has it, as batch_norm_affine_of).
inline constexpr const char* activation_opencl_source = R"CLC(
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
__kernel void activation_clip_f32(__global const float* x, ulong x_off, __global float* y, ulong n, float lo,
                                  float hi) {
  const size_t i = get_global_id(0);
  if (i >= n) return;
  const float v = x[x_off + i];
  const float low = v < lo ? lo : v;
  y[i] = hi < low ? hi : low;
}

__kernel void activation_sigmoid_f32(__global const float* x, ulong x_off, __global float* y, ulong n) {
  const size_t i = get_global_id(0);
  if (i >= n) return;
  y[i] = 1.0f / (1.0f + exp(-x[x_off + i]));
}

// x as [outer, channels, inner], the statistics per channel.
__kernel void activation_batch_norm_f32(__global const float* x, ulong x_off, __global const float* scale,
                                        ulong scale_off, __global const float* bias, ulong bias_off,
                                        __global const float* mean, ulong mean_off, __global const float* var,
                                        ulong var_off, __global float* y, ulong n, ulong channels, ulong inner,
                                        float epsilon) {
  const size_t i = get_global_id(0);
  if (i >= n) return;
  const ulong c = (i / inner) % channels;
  // The factor first, as the CPU kernels: (x - mean) / sqrt(...) could overflow before the
  // scale brings it back.
#ifdef cl_khr_fp64
  const float a = (float)((double)scale[scale_off + c] / sqrt((double)var[var_off + c] + (double)epsilon));
#else
  const float a = scale[scale_off + c] / sqrt(var[var_off + c] + epsilon);
#endif
  y[i] = (x[x_off + i] - mean[mean_off + c]) * a + bias[bias_off + c];
}
)CLC";
}  // namespace fluidk::ops::detail
#endif
