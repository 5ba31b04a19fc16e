// dropout (X -> Out, Mask): Fluid's dropout at inference. Attributes: dropout_prob (float,
// 0.5, in [0, 1]), is_test (bool, false), dropout_implementation ("downgrade_in_infer", the
// default: Out = X * (1 - dropout_prob); "upscale_in_train": Out = X, a view of X's storage).
// Training (is_test false) drops random elements, which fluidk does not do: it is refused
// unless dropout_prob is 0 (nothing dropped, the same Out as inference). Mask, optional, is a
// bool tensor of X's dims, all true (every element kept). Out keeps X's sequence offsets.
//
// Kernels: CPU (float, double), OpenCL (float) and CUDA (float, double), each a scale or a
// view. No oneDNN kernel: use_onednn falls back to the CPU's (policy cpu). The CPU kernel is
// declared for ANY and for nChw8c and nChw16c: a blocked network (use_onednn's convolutions)
// goes through dropout without a reorder, the view sharing the blocked storage, the scale
// running over all of it (padding lanes hold zeros, and zeros scaled stay zeros); Mask is
// then row-major. The device kernels are declared for ANY, so fluidk brings blocked data to
// NCHW first.
#pragma once

#include <array>
#include <boost/mp11/list.hpp>
#include <cstdint>
#include <cstring>
#include <fluidk/devices/onednn_tags.hpp>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "ops/detail/common.hpp"
#if FLUIDK_OPS_OPENCL
#include "ops/detail/opencl.hpp"
#endif
#if FLUIDK_OPS_CUDA
#include "ops/detail/cuda.hpp"
#include "ops/detail/cuda_launch_elementwise.hpp"
#endif
#include "ops/detail/network_shape.hpp"

namespace fluidk::ops {

// What a dropout call computes: Out = X * keep, or X itself (view).
struct dropout_settings {
  double keep = 1;
  bool view = false;

  static dropout_settings of(const execution_context& ctx) {
    const double p = detail::number_attr(ctx, "dropout_prob", 0.5);
    detail::require(p >= 0 && p <= 1, ctx, "dropout_prob (" + std::to_string(p) + ") must be in [0, 1]");
    detail::require(
        ctx.attr_or<bool>("is_test", false) || p == 0, ctx,
        "is_test false (training: random elements dropped) is not supported unless dropout_prob is 0");
    const std::string how = ctx.attr_or<std::string>("dropout_implementation", "downgrade_in_infer");
    detail::require(
        how == "downgrade_in_infer" || how == "upscale_in_train", ctx,
        "dropout_implementation must be \"downgrade_in_infer\" or \"upscale_in_train\", not \"" + how + "\"");
    if (how == "upscale_in_train") return {1, true};
    return {1 - p, false};
  }
};

namespace detail {
// Out (a view of X, or the scaled copy the kernel made) and Mask, all true, when asked for.
template <class FillMask>
void set_dropout_outputs(execution_context& ctx, const Tensor& x, Tensor* scaled, FillMask fill_mask) {
  if (output_requested(ctx, "Mask")) {
    Tensor mask(x.dims(), data_type::boolean, ctx.place(),
                row_major_order(x.layout()) ? x.layout() : data_layout::any);
    if (x.numel() > 0) fill_mask(mask);
    ctx.set_output("Mask", std::move(mask), ctx.input_lod("X"));
  }
  if (scaled != nullptr)
    ctx.set_output("Out", std::move(*scaled), ctx.input_lod("X"));
  else
    set_output_sharing_input(ctx, "Out", x, ctx.input_lod("X"));
}
}  // namespace detail

template <class T>
struct dropout_cpu {
  using dtype = T;
  using layouts = boost::mp11::mp_list<layout::any, layout::nChw8c, layout::nChw16c>;
  void operator()(execution_context& ctx) const {
    const dropout_settings s = dropout_settings::of(ctx);
    const Tensor& given = detail::input(ctx, "X");
    const bool blocked =
        given.layout() == data_layout_of<layout::nChw8c> || given.layout() == data_layout_of<layout::nChw16c>;
    const Tensor x = blocked ? given : detail::row_major(given);
    const auto fill = [](Tensor& mask) { std::memset(mask.data<bool>(), 1, std::size_t(mask.numel())); };
    if (s.view) return detail::set_dropout_outputs(ctx, x, nullptr, fill);
    Tensor out(x.dims(), data_type_of<T>, ctx.place(), x.layout());
    const T keep = T(s.keep);
    const T* in = x.data<T>();
    T* y = out.data<T>();
    // Every element of the storage: a blocked layout's padding lanes too.
    const std::size_t count = x.numel() == 0 ? 0 : x.storage_bytes() / sizeof(T);
    for (std::size_t i = 0; i < count; ++i) y[i] = in[i] * keep;
    detail::set_dropout_outputs(ctx, x, &out, fill);
  }
};

#if FLUIDK_OPS_OPENCL
inline constexpr const char* dropout_opencl_source = R"CLC(
__kernel void scale_f32(__global const float* x, ulong x_off, __global float* y, float factor, ulong n) {
  const size_t i = get_global_id(0);
  if (i < n) y[i] = x[x_off + i] * factor;
}
// Mask: a bool tensor all true.
__kernel void fill_true(__global uchar* y, ulong n) {
  const size_t i = get_global_id(0);
  if (i < n) y[i] = 1;
}
)CLC";

struct dropout_opencl {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const dropout_settings s = dropout_settings::of(ctx);
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const auto fill = [&](Tensor& mask) {
      detail::opencl_launch_from(ctx, dropout_opencl_source, "fill_true", std::size_t(mask.numel()), 1,
                                 detail::cl_buffer(mask), cl_ulong(mask.numel()));
    };
    if (s.view) return detail::set_dropout_outputs(ctx, x, nullptr, fill);
    Tensor out(x.dims(), data_type::float32, ctx.place(), x.layout());
    if (x.numel() > 0)
      detail::opencl_launch_from(ctx, dropout_opencl_source, "scale_f32", std::size_t(x.numel()), 1,
                                 detail::cl_arg<float>(x), detail::cl_buffer(out), float(s.keep),
                                 cl_ulong(x.numel()));
    detail::set_dropout_outputs(ctx, x, &out, fill);
  }
};
#endif

#if FLUIDK_OPS_CUDA
template <class T>
struct dropout_cuda {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const dropout_settings s = dropout_settings::of(ctx);
    detail::cuda_call call(ctx);
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const auto fill = [&](Tensor& mask) {
      detail::cuda_require(
          cudaMemsetAsync(detail::device_data<bool>(mask), 1, std::size_t(mask.numel()), call.stream()), ctx,
          "cudaMemsetAsync");
    };
    if (s.view) return detail::set_dropout_outputs(ctx, x, nullptr, fill);
    Tensor out(x.dims(), data_type_of<T>, ctx.place(), x.layout());
    detail::cuda_require(cuda_launch::scale<T>(call.stream(), detail::device_data<T>(x),
                                               detail::device_data<T>(out), x.numel(), T(s.keep)),
                         ctx, "the scale kernel");
    detail::set_dropout_outputs(ctx, x, &out, fill);
  }
};
#endif

struct dropout {
  static constexpr std::string_view name = "dropout";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 2> outputs{"Out", "Mask"};
  // Where the expected kernel type has no kernel (use_onednn; double on OpenCL), the CPU
  // kernel of the same data type runs, counted and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels =
      fluidk::make_kernels(fluidk::kernels_on<cpu>(dropout_cpu<float>{}, dropout_cpu<double>{}),
#if FLUIDK_OPS_OPENCL
                           fluidk::kernels_on<opencl>(dropout_opencl{}),
#endif
#if FLUIDK_OPS_CUDA
                           fluidk::kernels_on<cuda>(dropout_cuda<float>{}, dropout_cuda<double>{}),
#endif
                           detail::no_kernels());
};

}  // namespace fluidk::ops
