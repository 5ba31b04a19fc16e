// conv2d (Input [N, C, H, W], Filter [OC, C / groups, KH, KW] -> Output [N, OC, OH, OW]) with
// Fluid's attributes strides, dilations (2 ints each; default 1, 1), paddings (2 ints, or 4:
// top, bottom, left, right; default 0), padding_algorithm ("EXPLICIT", the default: the
// paddings given; "SAME": an output of ceil(size / stride), padded as Fluid pads it, dilations
// 1; "VALID": no padding), groups (default 1) and data_format ("NCHW" or "AnyLayout": the
// dims are always [N, C, H, W], whatever the layout of the data); onednn_layout ("blocked" or
// "NHWC", below) for the oneDNN kernel.
//
// Fused (as run-onnx's fusion passes write it): Output = act(conv(Input, Filter) + Bias +
// ResidualData), with the optional inputs Bias ([OC], Input's data type, added per output
// channel) and ResidualData (Output's dims), and the attribute fuse_activation: "" (none),
// "relu", "clip" (to [fuse_alpha, fuse_beta], both required) or "sigmoid". Inputs are only
// read: ResidualData is never the output's storage.
//
// Kernels:
//   CPU plain, float and double: im2col and a blocked GEMM, in NCHW (the kernel is declared
//     for NCHW, so fluidk brings NHWC and blocked inputs to NCHW before it runs), then the
//     epilogue in one pass over the output.
//   CPU oneDNN, float: a convolution primitive created with the format `any` for source,
//     weights and destination, so that oneDNN picks its blocked layouts; Bias as its bias,
//     ResidualData as a sum post-op (reordered into the output first), the activation as an
//     eltwise post-op. Primitive and reordered filter are kept in the context's oneDNN cache.
//     The kernel is declared for NCHW, NHWC, nChw8c and nChw16c: a blocked or NHWC input stays
//     in its layout; an NCHW one (a network's first convolution) is taken as it is and the
//     output made in the layout the attribute onednn_layout names, which the next
//     convolutions then keep: "blocked" (the default), the blocked layout of oneDNN's direct
//     implementations on this CPU (nChw16c with AVX-512, nChw8c without); or "NHWC", where
//     oneDNN 2.6 runs its brgemm-based implementations on AVX-512 CPUs (faster on ResNet's
//     plain convolutions, slower on depthwise ones: run-onnx's --onednn-layout chooses per
//     network). The filter and the bias keep their layouts (keep_layout_inputs), the kernel
//     reorders what oneDNN asks for in another format (the weights, always, once while the
//     filter is unchanged), and leaves the output in the kernel's layout when one of oneDNN's
//     implementations produces it (for a blocked one, else in the other blocked layout); a
//     plain operator that follows gets the layout transform from fluidk.
//   OpenCL, float: one work-item per output element, summing over its group's input channels
//     and the taps in the order of a naive loop, then the epilogue, in NCHW (the filter must
//     arrive in row-major order: a filter kept in another layout is refused).
//   CUDA cuDNN, float and double: cudnnConvolutionForward in NCHW with descriptors and
//     algorithm kept per device and shape, then an epilogue kernel (use_cudnn selects it, as
//     in Fluid; without it a CUDA program falls back to the CPU kernel, reported once).
#pragma once

#include <algorithm>
#include <array>
#include <boost/mp11/list.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ops/detail/common.hpp"
#include "ops/detail/gemm.hpp"
#include "ops/detail/network_activation.hpp"
#include "ops/detail/window.hpp"
#if FLUIDK_OPS_ONEDNN
#include "ops/detail/onednn.hpp"
#endif
#if FLUIDK_OPS_OPENCL
#include "ops/detail/opencl.hpp"
#endif
#if FLUIDK_OPS_CUDA
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "ops/detail/cuda.hpp"
#include "ops/detail/cuda_launch_spatial.hpp"
#endif

namespace fluidk::ops {

// The sizes of one convolution, checked against each other.
struct conv2d_geometry {
  std::int64_t n, c, h, w;  // input
  std::int64_t oc, kh, kw;  // filter: [oc, c / groups, kh, kw]
  std::int64_t oh, ow;      // output
  std::int64_t groups;
  std::array<std::int64_t, 2> strides, dilations;
  std::array<std::int64_t, 2> paddings;      // before each axis: top, left
  std::array<std::int64_t, 2> paddings_end;  // after it: bottom, right

  dims output_dims() const { return {n, oc, oh, ow}; }

  static conv2d_geometry of(const execution_context& ctx, const Tensor& input, const Tensor& filter) {
    using detail::require;
    require(input.dims().rank() == 4, ctx, "Input must be 4-D [N, C, H, W], not " + input.dims().to_string());
    require(filter.dims().rank() == 4, ctx,
            "Filter must be 4-D [OC, C / groups, KH, KW], not " + filter.dims().to_string());
    conv2d_geometry g{};
    g.n = input.dims()[0];
    g.c = input.dims()[1];
    g.h = input.dims()[2];
    g.w = input.dims()[3];
    g.oc = filter.dims()[0];
    g.kh = filter.dims()[2];
    g.kw = filter.dims()[3];
    g.groups = detail::int_attr(ctx, "groups", 1);
    g.strides = detail::ints_attr<2>(ctx, "strides", {1, 1});
    g.dilations = detail::ints_attr<2>(ctx, "dilations", {1, 1});
    for (int i = 0; i < 2; ++i) {
      require(g.strides[i] >= 1, ctx, "strides must be positive");
      require(g.dilations[i] >= 1, ctx, "dilations must be positive");
    }
    g.set_paddings(ctx);
    require(g.groups >= 1 && g.c % g.groups == 0 && g.oc % g.groups == 0, ctx,
            "groups (" + std::to_string(g.groups) + ") must divide the input channels (" +
                std::to_string(g.c) + ") and the output channels (" + std::to_string(g.oc) + ")");
    require(filter.dims()[1] * g.groups == g.c, ctx,
            "Filter " + filter.dims().to_string() + " does not fit Input " + input.dims().to_string() +
                " with " + std::to_string(g.groups) + " group(s): Filter's dimension 1 must be C / groups");
    require(g.kh > 0 && g.kw > 0, ctx, "the filter " + filter.dims().to_string() + " has no taps");
    // Per axis: the filter's extent, dilation * (k - 1) + 1, and the padded input, size plus
    // the paddings before and after it, each checked, and twice the padded input too: the positions im2col
    // and the kernels work out (y * stride + tap * dilation, and the padding taken off) stay below it.
    std::int64_t extent[2], padded[2];
    const std::int64_t size[2] = {g.h, g.w}, taps[2] = {g.kh, g.kw};
    for (int i = 0; i < 2; ++i) {
      std::int64_t twice = 0;
      const bool overflows = checked_mul(g.dilations[i], taps[i] - 1, extent[i]) ||
                             checked_add(extent[i], std::int64_t(1), extent[i]) ||
                             checked_add(g.paddings[i], g.paddings_end[i], padded[i]) ||
                             checked_add(padded[i], size[i], padded[i]) ||
                             checked_mul(padded[i], std::int64_t(2), twice);
      require(!overflows, ctx,
              "the dilations, paddings and filter " + filter.dims().to_string() + " on Input " +
                  input.dims().to_string() + " make positions that overflow a 64-bit integer");
    }
    require(padded[0] >= extent[0] && padded[1] >= extent[1], ctx,
            "the filter " + filter.dims().to_string() + " does not fit the padded input " +
                input.dims().to_string());
    g.oh = (padded[0] - extent[0]) / g.strides[0] + 1;
    g.ow = (padded[1] - extent[1]) / g.strides[1] + 1;
    return g;
  }

 private:
  // The paddings of each axis, as Fluid's UpdatePaddingAndDilation sets them (the attribute
  // is read and checked whatever the algorithm); strides, dilations, the input and the filter
  // sizes are read and checked first.
  void set_paddings(const execution_context& ctx) {
    using detail::require;
    const std::string format = ctx.attr_or<std::string>("data_format", "NCHW");
    require(format == "NCHW" || format == "AnyLayout", ctx,
            "data_format must be \"NCHW\" or \"AnyLayout\" (Input's dims are [N, C, H, W] whatever its "
            "layout), not \"" +
                format + "\"");
    const std::string algorithm = ctx.attr_or<std::string>("padding_algorithm", "EXPLICIT");
    require(algorithm == "EXPLICIT" || algorithm == "SAME" || algorithm == "VALID", ctx,
            "padding_algorithm must be \"EXPLICIT\", \"SAME\" or \"VALID\", not \"" + algorithm + "\"");
    paddings = paddings_end = {0, 0};
    if (const attribute* given = ctx.attributes().find("paddings")) {
      const std::vector<std::int64_t> p = detail::int_list(ctx, "paddings", *given);
      require(p.size() == 2 || p.size() == 4, ctx,
              "attribute 'paddings' needs 2 values (both sides alike) or 4 (top, bottom, left, right), but "
              "has " +
                  std::to_string(p.size()));
      require(std::all_of(p.begin(), p.end(), [](std::int64_t v) { return v >= 0; }), ctx,
              "paddings must not be negative");
      paddings =
          p.size() == 2 ? std::array<std::int64_t, 2>{p[0], p[1]} : std::array<std::int64_t, 2>{p[0], p[2]};
      paddings_end = p.size() == 2 ? paddings : std::array<std::int64_t, 2>{p[1], p[3]};
    }
    if (algorithm == "VALID") paddings = paddings_end = {0, 0};
    if (algorithm != "SAME") return;
    // ceil(size / stride) outputs; the padding they need, at least 0, its odd unit at the end.
    // An empty axis needs taps - stride (Fluid's sum, unclamped), which the filter does not
    // fit: refused below, as in the other modes.
    const std::int64_t size[2] = {h, w}, taps[2] = {kh, kw};
    for (int i = 0; i < 2; ++i) {
      const std::int64_t out = size[i] == 0 ? 0 : (size[i] - 1) / strides[i] + 1;
      std::int64_t reach = 0;  // (out - 1) * stride + taps; (out - 1) * stride is below size
      require(!checked_add((out - 1) * strides[i], taps[i], reach), ctx,
              "the filter's size overflows a 64-bit integer");
      const std::int64_t sum = std::max<std::int64_t>(reach - size[i], 0);
      paddings[i] = sum / 2;
      paddings_end[i] = sum - sum / 2;
      dilations[i] = 1;
    }
  }
};

// What a fused conv2d adds to the convolution, in this order (the contract of run-onnx's
// fusion passes): Bias ([OC], Input's data type) per output channel, then ResidualData (of
// Output's dims), then the activation fuse_activation names: "" (none), "relu", "clip"
// (to [fuse_alpha, fuse_beta], both required) or "sigmoid", each computing what the relu,
// clip and sigmoid operators compute.
struct conv2d_epilogue {
  bool bias = false, residual = false;
  detail::fused_activation activation;  // its kinds are also the CUDA and OpenCL epilogues'

  bool empty() const { return !bias && !residual && activation.kind == detail::fused_activation::none; }

  static conv2d_epilogue of(const execution_context& ctx, const conv2d_geometry& g, const Tensor& input) {
    using detail::require;
    conv2d_epilogue e;
    e.bias = detail::has_input(ctx, "Bias");
    if (e.bias) {
      const Tensor& b = ctx.input("Bias");
      require(b.dims() == dims{g.oc}, ctx,
              "Bias must be [" + std::to_string(g.oc) + "] (one value per output channel), not " +
                  b.dims().to_string());
      require(b.dtype() == input.dtype(), ctx,
              "Bias holds " + std::string(name_of(b.dtype())) + ", not Input's " +
                  std::string(name_of(input.dtype())));
    }
    e.residual = detail::has_input(ctx, "ResidualData");
    if (e.residual) {
      const Tensor& r = ctx.input("ResidualData");
      require(r.dims() == g.output_dims(), ctx,
              "ResidualData must have Output's dims " + g.output_dims().to_string() + ", not " +
                  r.dims().to_string());
      require(r.dtype() == input.dtype(), ctx,
              "ResidualData holds " + std::string(name_of(r.dtype())) + ", not Input's " +
                  std::string(name_of(input.dtype())));
    }
    e.activation = detail::fused_activation::of(ctx, true);
    return e;
  }

  // On the host, over an NCHW output: y = act(y + bias[channel] + residual), one pass.
  template <class T>
  void apply(const conv2d_geometry& g, T* y, const T* bias_data, const T* residual_data) const {
    if (empty()) return;
    const std::int64_t plane = g.oh * g.ow;
    for (std::int64_t row = 0; row < g.n * g.oc; ++row) {
      const T b = bias ? bias_data[row % g.oc] : T(0);
      T* out = y + row * plane;
      const T* r = residual ? residual_data + row * plane : nullptr;
      for (std::int64_t i = 0; i < plane; ++i) {
        T v = out[i];
        if (bias) v += b;
        if (residual) v += r[i];
        out[i] = activation(v);
      }
    }
  }
};

namespace detail {
// The columns of one group of one image: row (c, ki, kj), column (y, x) holds the input
// pixel under filter tap (ki, kj) at output position (y, x), zero in the padding.
template <class T>
void im2col(const conv2d_geometry& g, std::int64_t channels, const T* src, T* col) {
  const std::int64_t plane = g.oh * g.ow;
  for (std::int64_t c = 0; c < channels; ++c)
    for (std::int64_t ki = 0; ki < g.kh; ++ki)
      for (std::int64_t kj = 0; kj < g.kw; ++kj) {
        T* dst = col + ((c * g.kh + ki) * g.kw + kj) * plane;
        const T* channel = src + c * g.h * g.w;
        for (std::int64_t y = 0; y < g.oh; ++y) {
          const std::int64_t iy = y * g.strides[0] - g.paddings[0] + ki * g.dilations[0];
          T* row = dst + y * g.ow;
          if (iy < 0 || iy >= g.h) {
            std::fill(row, row + g.ow, T(0));
            continue;
          }
          for (std::int64_t x = 0; x < g.ow; ++x) {
            const std::int64_t ix = x * g.strides[1] - g.paddings[1] + kj * g.dilations[1];
            row[x] = ix >= 0 && ix < g.w ? channel[iy * g.w + ix] : T(0);
          }
        }
      }
}
}  // namespace detail

// Plain CPU: per image and group, Output[oc, y*x] = Filter[oc, c*kh*kw] x columns[c*kh*kw, y*x].
template <class T>
struct conv2d_cpu {
  using dtype = T;
  using layouts = boost::mp11::mp_list<layout::nchw>;

  void operator()(execution_context& ctx) const {
    const Tensor input = detail::row_major(detail::input(ctx, "Input"));
    const Tensor filter = detail::row_major(detail::input(ctx, "Filter"));
    const conv2d_geometry g = conv2d_geometry::of(ctx, input, filter);
    const conv2d_epilogue epilogue = conv2d_epilogue::of(ctx, g, input);
    Tensor out(g.output_dims(), data_type_of<T>, ctx.place(), data_layout::nchw);
    const std::int64_t cg = g.c / g.groups, ocg = g.oc / g.groups, taps = cg * g.kh * g.kw;
    // The output holds plane elements per channel where there is one; without an image or
    // an output channel, oh * ow need not even fit an integer, and there is nothing to compute.
    if (out.numel() == 0) return ctx.set_output("Output", std::move(out));
    const std::int64_t plane = g.oh * g.ow;
    std::int64_t columns = 0;
    detail::require(!checked_mul(taps, plane, columns), ctx,
                    "the columns of Filter " + filter.dims().to_string() + " over an output plane of " +
                        std::to_string(plane) + " overflow a 64-bit integer");
    std::vector<T> col(static_cast<std::size_t>(columns));
    const T* x = input.data<T>();
    const T* w = filter.data<T>();
    T* y = out.data<T>();
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t group = 0; group < g.groups; ++group) {
        detail::im2col(g, cg, x + (n * g.c + group * cg) * g.h * g.w, col.data());
        detail::gemm<T>(ocg, plane, taps, w + group * ocg * taps, taps, col.data(), plane,
                        y + (n * g.oc + group * ocg) * plane, plane);
      }
    // Const: the inputs are read only (a mutable Tensor's data() would move its version).
    const Tensor bias = epilogue.bias ? detail::row_major(ctx.input("Bias")) : Tensor();
    const Tensor residual = epilogue.residual ? detail::row_major(ctx.input("ResidualData")) : Tensor();
    epilogue.apply<T>(g, y, epilogue.bias ? bias.data<T>() : nullptr,
                      epilogue.residual ? residual.data<T>() : nullptr);
    ctx.set_output("Output", std::move(out));
  }
};

#if FLUIDK_OPS_ONEDNN
// oneDNN: the convolution primitive in the layouts it chooses.
template <class T>
struct conv2d_onednn {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the oneDNN conv2d kernel computes in float");
  using layouts = boost::mp11::mp_list<layout::nchw, layout::nhwc, layout::nChw8c, layout::nChw16c>;

  void operator()(execution_context& ctx) const {
    using dnnl::memory;
    const Tensor& input = detail::input(ctx, "Input");
    const Tensor& filter = detail::input(ctx, "Filter");
    const conv2d_geometry g = conv2d_geometry::of(ctx, input, filter);
    const conv2d_epilogue epilogue = conv2d_epilogue::of(ctx, g, input);
    data_layout target = target_layout(ctx, input.layout());
    if (target == data_layout::nhwc && brgemm_residual_defect(g, epilogue)) target = blocked_layout();
    // oneDNN makes no primitive of an empty dimension: the plain kernel's result, in NCHW, an
    // empty output or (an input without channels or pixels, padded) zeros.
    if (input.numel() == 0 || g.oc == 0) return conv2d_cpu<T>{}(ctx);
    onednn_context& dnn = detail::onednn_of(ctx);
    const auto f32 = memory::data_type::f32;
    const memory::dims dst_dims{g.n, g.oc, g.oh, g.ow};
    const memory::dims wei_dims = g.groups == 1
                                      ? memory::dims{g.oc, g.c, g.kh, g.kw}
                                      : memory::dims{g.groups, g.oc / g.groups, g.c / g.groups, g.kh, g.kw};
    // The primitive of these shapes and layouts, chosen and generated once (the cache's key
    // holds everything choose() reads).
    detail::onednn_key key("conv2d.fwd");
    key << g.n << g.c << g.h << g.w << g.oc << g.kh << g.kw << g.groups << g.strides[0] << g.strides[1]
        << g.dilations[0] << g.dilations[1] << g.paddings[0] << g.paddings[1] << g.paddings_end[0]
        << g.paddings_end[1] << input.layout() << target << epilogue.bias << epilogue.residual
        << int(epilogue.activation.kind) << epilogue.activation.lo << epilogue.activation.hi;
    const auto kept = detail::kept_primitive<dnnl::convolution_forward>(
        dnn, key, [&] { return choose(g, epilogue, target, dnn); });
    const dnnl::convolution_forward::primitive_desc& pd = kept->pd;
    // The source as fluidk gave it (NCHW, NHWC, nChw8c or nChw16c), reordered if oneDNN wants
    // another.
    memory src = detail::reordered(detail::onednn_memory_of(input, dnn.engine()), pd.src_desc(), dnn);
    // The weights in the format oneDNN asks for. A grouped filter is made row-major first,
    // so that the group can be split off as a leading dimension of the same storage.
    const Tensor grouped_filter = g.groups == 1 ? filter : detail::row_major(filter);
    memory user_weights =
        g.groups == 1 ? detail::onednn_memory_of(filter, dnn.engine())
                      : memory(memory::desc(wei_dims, f32, memory::format_tag::goihw), dnn.engine(),
                               static_cast<std::byte*>(grouped_filter.handle()) + grouped_filter.offset());
    // Reordered once and kept while the filter is unchanged; a grouped filter that row_major
    // had to copy is reordered per call (its copy is new each time).
    const memory weights = detail::weights_for(dnn, grouped_filter, filter, user_weights, pd.weights_desc());

    // The output in the layout oneDNN chose, when fluidk has a name for it (the kernel's own
    // first: with one channel, NHWC and NCHW are the same description); else reordered into
    // the kernel's own layout.
    const data_layout chosen =
        detail::fluidk_layout_of(pd.dst_desc(), dst_dims,
                                 {target, data_layout_of<layout::nChw16c>, data_layout_of<layout::nChw8c>,
                                  data_layout::nchw, data_layout::nhwc});
    Tensor out(g.output_dims(), data_type::float32, ctx.place(),
               chosen != data_layout::any ? chosen : target);
    memory dst = detail::onednn_memory_of(out, dnn.engine());
    memory result = chosen != data_layout::any ? dst : memory(pd.dst_desc(), dnn.engine());
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, result}};
    // Const: the inputs are read only (a mutable Tensor's data() would move its version).
    const Tensor bias = epilogue.bias ? detail::row_major(ctx.input("Bias")) : Tensor();
    if (epilogue.bias)
      args.emplace(DNNL_ARG_BIAS, detail::reordered(detail::onednn_plain_memory(bias, {g.oc}, dnn.engine()),
                                                    pd.bias_desc(), dnn));
    // The sum post-op adds what the destination holds: ResidualData's content, copied into
    // the output (reordered where its layout differs), never the input itself.
    if (epilogue.residual) {
      memory residual = detail::onednn_memory_of(ctx.input("ResidualData"), dnn.engine());
      if (residual.get_desc() == result.get_desc())
        std::memcpy(result.get_data_handle(), residual.get_data_handle(), result.get_desc().get_size());
      else
        dnnl::reorder(residual, result).execute(dnn.stream(), residual, result);
    }
    detail::run_kept(dnn, *kept, std::move(args));
    if (chosen == data_layout::any) dnnl::reorder(result, dst).execute(dnn.stream(), result, dst);
    dnn.wait();
    ctx.set_output("Output", std::move(out));
  }

 private:
  using pd_type = dnnl::convolution_forward::primitive_desc;

  // The layout the kernel runs as (nChw8c, nChw16c or NHWC): its key's, else the input's, else
  // (a plain NCHW or ANY input) the one onednn_layout names: NHWC, or the blocked layout of
  // oneDNN's direct implementations on this CPU: nChw16c where it has AVX-512 (its AVX-512
  // convolutions produce it), nChw8c otherwise (its AVX2 ones).
  static data_layout target_layout(const execution_context& ctx, data_layout input) {
    // Checked on every call, so that a wrong value is refused wherever it is given.
    const std::string wanted = ctx.attr_or<std::string>("onednn_layout", "blocked");
    detail::require(wanted == "blocked" || wanted == "NHWC", ctx,
                    "onednn_layout must be \"blocked\" or \"NHWC\", not \"" + wanted + "\"");
    const data_layout kernel = ctx.kernel().layout();
    for (const data_layout l : {kernel, input})
      if (l == data_layout_of<layout::nChw8c> || l == data_layout_of<layout::nChw16c> ||
          l == data_layout::nhwc)
        return l;
    if (wanted == "NHWC") return data_layout::nhwc;
    return blocked_layout();
  }
  // The blocked layout of oneDNN's direct convolutions on this CPU.
  static data_layout blocked_layout() {
    return detail::onednn_avx512() ? data_layout_of<layout::nChw16c> : data_layout_of<layout::nChw8c>;
  }

  // Whether oneDNN 2.6's NHWC convolution would be wrong here: its brgemm-based one
  // (brgconv:avx512_core) computes wrong values, or crashes, for an output row whose window
  // lies wholly in the padding (no tap on the input) when the sum post-op adds ResidualData
  // (with Bias or an activation besides): Input [1, 8, 6, 8], a 1x1 Filter of 12, strides
  // {2, 1}, top padding 1 gave 0.12 for 0.68 in the first row, and a segmentation fault with
  // clip instead of Bias, in a program of oneDNN's API alone; so did a row whose dilated taps
  // step over a short input (Input height 1, a 2x1 Filter, dilation 3, top padding 2). Such a
  // convolution runs blocked (checked on both axes: columns are not known to be affected, and
  // the shapes are rare).
  static bool brgemm_residual_defect(const conv2d_geometry& g, const conv2d_epilogue& e) {
    if (!e.residual) return false;
    const std::int64_t size[2] = {g.h, g.w}, taps[2] = {g.kh, g.kw}, out[2] = {g.oh, g.ow};
    for (std::size_t i = 0; i < 2; ++i)
      if (detail::first_window_without_input(out[i], size[i], taps[i], g.strides[i], g.paddings[i],
                                             g.dilations[i]) >= 0)
        return true;
    return false;
  }

  static dnnl::convolution_forward::desc make_desc(const conv2d_geometry& g, bool bias,
                                                   dnnl::memory::format_tag data_format) {
    using dnnl::memory;
    const auto f32 = memory::data_type::f32;
    const memory::dims wei_dims = g.groups == 1
                                      ? memory::dims{g.oc, g.c, g.kh, g.kw}
                                      : memory::dims{g.groups, g.oc / g.groups, g.c / g.groups, g.kh, g.kw};
    const memory::desc src({g.n, g.c, g.h, g.w}, f32, data_format),
        weights(wei_dims, f32, memory::format_tag::any), dst({g.n, g.oc, g.oh, g.ow}, f32, data_format);
    const memory::dims strides{g.strides[0], g.strides[1]}, dilations{g.dilations[0] - 1, g.dilations[1] - 1},
        begin{g.paddings[0], g.paddings[1]}, end{g.paddings_end[0], g.paddings_end[1]};
    const auto prop = dnnl::prop_kind::forward_inference;
    const auto direct = dnnl::algorithm::convolution_direct;
    if (bias)
      return {prop, direct,  src,       weights, memory::desc({g.oc}, f32, memory::format_tag::a),
              dst,  strides, dilations, begin,   end};
    return {prop, direct, src, weights, dst, strides, dilations, begin, end};
  }

  // The residual as a sum post-op (the destination holds it when the primitive runs), then
  // the activation as an eltwise post-op. oneDNN's clip returns min where min is above max;
  // clip to [max, max] gives what the comparisons give there: max.
  static dnnl::primitive_attr post_ops_of(const conv2d_epilogue& e) {
    dnnl::post_ops post;
    if (e.residual) post.append_sum(1.f);
    detail::append_onednn_activation(post, e.activation);
    dnnl::primitive_attr attr = detail::kept_attr();
    attr.set_post_ops(post);
    return attr;
  }

  // The primitive. For a blocked layout: created with the format `any` for source, weights
  // and destination, and oneDNN's implementations walked in its order of preference, first to
  // one that puts the output in the kernel's layout, then to one that puts it in the other
  // blocked layout (oneDNN 2.6 on AVX-512 CPUs prefers an NHWC implementation first, and
  // nChw16c to nChw8c). When none does, and for NHWC, source and destination are asked for in
  // the kernel's layout; when oneDNN cannot do that either, its first choice for `any` stands
  // (and the output is reordered into the kernel's layout).
  static pd_type choose(const conv2d_geometry& g, const conv2d_epilogue& e, data_layout wanted,
                        onednn_context& dnn) {
    const dnnl::memory::dims dst_dims{g.n, g.oc, g.oh, g.ow};
    const dnnl::primitive_attr attr = post_ops_of(e);
    // (The descriptions outlive the walks: oneDNN's iterator reads them on each step.)
    const dnnl::convolution_forward::desc any = make_desc(g, e.bias, dnnl::memory::format_tag::any);
    // NHWC is asked for directly: walking from `any` would reach only oneDNN's reference code
    // on a CPU without AVX-512, whose implementations all choose blocked layouts for `any`
    // (ResNet-18 then took 10 s a run, against 40 ms with oneDNN's choice for NHWC itself).
    std::vector<data_layout> targets;
    if (wanted != data_layout::nhwc) targets.push_back(wanted);
    if (wanted == data_layout_of<layout::nChw8c>) targets.push_back(data_layout_of<layout::nChw16c>);
    if (wanted == data_layout_of<layout::nChw16c>) targets.push_back(data_layout_of<layout::nChw8c>);
    for (const data_layout target : targets) {
      pd_type walk(any, attr, dnn.engine());
      do {
        if (detail::fluidk_layout_of(walk.dst_desc(), dst_dims, {target}) == target) return walk;
      } while (walk.next_impl());
    }
    const dnnl::convolution_forward::desc in_kernel_layout = make_desc(g, e.bias, onednn_format(wanted));
    const pd_type forced(in_kernel_layout, attr, dnn.engine(), true);
    if (forced) return forced;
    return {any, attr, dnn.engine()};
  }
};

namespace detail {
inline constexpr auto conv2d_onednn_kernels =
    fluidk::kernels_on<cpu, library::onednn>(conv2d_onednn<float>{});
}
#else
namespace detail {
inline constexpr auto conv2d_onednn_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_OPENCL
// Work-item (e, row): output element e = oy * ow + ox of plane row = image * oc + channel.
// The taps that land inside the input are worked out once per work-item (the divisions are
// there, not in the loops), so the loops run branch-free over the group's channels, then the
// filter rows and columns, in the order of a naive loop; taps in the padding would add zeros.
inline constexpr const char* conv2d_opencl_source = R"CLC(
long fluidk_first_tap(long start, long dilation) {
  return start >= 0 ? 0 : (-start + dilation - 1) / dilation;
}
long fluidk_end_tap(long start, long size, long dilation, long taps) {
  if (start >= size) return 0;
  return min(taps, (size - start + dilation - 1) / dilation);
}

__kernel void conv2d_f32(__global const float* x, ulong x_off, __global const float* w, ulong w_off,
                         __global float* y, ulong plane, ulong planes, long c, long h, long wd,
                         long oc, long kh, long kw, long ow, long cg, long ocg, long sh, long sw,
                         long ph, long pw, long dh, long dw, __global const float* b, ulong b_off,
                         int has_bias, __global const float* r, ulong r_off, int has_residual,
                         int activation, float lo, float hi) {
  const size_t e = get_global_id(0);
  const size_t row = get_global_id(1);
  if (e >= plane || row >= planes) return;
  const long oy = (long)e / ow, ox = (long)e - oy * ow;
  const long image = (long)row / oc, channel = (long)row - image * oc;
  const long group = channel / ocg;
  const long y0 = oy * sh - ph, x0 = ox * sw - pw;
  const long ky0 = fluidk_first_tap(y0, dh), ky1 = fluidk_end_tap(y0, h, dh, kh);
  const long kx0 = fluidk_first_tap(x0, dw), kx1 = fluidk_end_tap(x0, wd, dw, kw);
  // Indices, not pointers: y0 * wd + x0 may lie before the buffer, a pointer there is undefined.
  const long hw = h * wd, taps = kh * kw, row_step = dh * wd;
  long in_ch = (long)x_off + (image * c + group * cg) * hw + (y0 + ky0 * dh) * wd + x0;
  long f_ch = (long)w_off + channel * cg * taps + ky0 * kw;
  float sum = 0.0f;
  for (long ci = 0; ci < cg; ++ci, in_ch += hw, f_ch += taps) {
    long in_row = in_ch, f_row = f_ch;
    for (long ky = ky0; ky < ky1; ++ky, in_row += row_step, f_row += kw)
      for (long kx = kx0; kx < kx1; ++kx) sum += x[in_row + kx * dw] * w[f_row + kx];
  }
  // The epilogue, as conv2d_epilogue::apply computes it (the kinds are detail::fused_activation's).
  if (has_bias) sum += b[b_off + channel];
  if (has_residual) sum += r[r_off + row * plane + e];
  if (activation == 1) {
    sum = sum > 0.0f ? sum : 0.0f;
  } else if (activation == 2) {
    const float low = sum < lo ? lo : sum;
    sum = hi < low ? hi : low;
  } else if (activation == 3) {
    sum = 1.0f / (1.0f + exp(-sum));
  }
  y[row * plane + e] = sum;
}
)CLC";

template <class T>
struct conv2d_opencl {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the OpenCL conv2d kernel computes in float");
  using layouts = boost::mp11::mp_list<layout::nchw>;

  void operator()(execution_context& ctx) const {
    const Tensor& input = detail::input(ctx, "Input");
    const Tensor& filter = detail::input(ctx, "Filter");
    detail::require(detail::row_major_order(input.layout()), ctx,
                    "the OpenCL kernel takes Input in NCHW, not " + std::string(name_of(input.layout())));
    // The filter keeps its layout (keep_layout_inputs) and there is no transform between
    // layouts on an OpenCL device: one in another layout is refused, not read wrongly.
    detail::require(detail::row_major_order(filter.layout()), ctx,
                    "the OpenCL kernel takes Filter in row-major order ([OC, C / groups, KH, KW], layout "
                    "ANY or NCHW), not " +
                        std::string(name_of(filter.layout())) + "; give it in row-major order");
    const conv2d_geometry g = conv2d_geometry::of(ctx, input, filter);
    const conv2d_epilogue epilogue = conv2d_epilogue::of(ctx, g, input);
    // Bias and ResidualData arrive row-major ([OC]; ResidualData in the kernel's NCHW).
    const Tensor* bias = epilogue.bias ? &ctx.input("Bias") : nullptr;
    const Tensor* residual = epilogue.residual ? &ctx.input("ResidualData") : nullptr;
    for (const Tensor* t : {bias, residual})
      detail::require(t == nullptr || detail::row_major_order(t->layout()), ctx,
                      "the OpenCL kernel takes Bias and ResidualData in row-major order, not " +
                          std::string(t == nullptr ? "" : name_of(t->layout())));
    Tensor out(g.output_dims(), data_type::float32, ctx.place(), data_layout::nchw);
    // Without an image or an output channel, oh * ow need not fit an integer: nothing to launch.
    if (out.numel() == 0) return ctx.set_output("Output", std::move(out));
    const std::int64_t plane = g.oh * g.ow, planes = g.n * g.oc;
    if (input.numel() == 0 && epilogue.empty()) {
      // No input channel or pixel (all padding): every sum is empty. No buffer to bind.
      detail::opencl_launch(ctx, "fill_f32", std::size_t(out.numel()), 1, detail::cl_buffer(out), 0.0f,
                            cl_ulong(out.numel()));
      return ctx.set_output("Output", std::move(out));
    }
    // An empty input has no buffer: the output's is bound in its place, never read (every
    // sum is empty). So is an input left out.
    const detail::cl_view<float> x_arg =
        input.numel() == 0 ? detail::cl_view<float>{detail::cl_buffer(out), 0} : detail::cl_arg<float>(input);
    const detail::cl_view<float> bias_arg = bias != nullptr ? detail::cl_arg<float>(*bias) : x_arg;
    const detail::cl_view<float> residual_arg =
        residual != nullptr ? detail::cl_arg<float>(*residual) : x_arg;
    detail::opencl_launch_from(
        ctx, conv2d_opencl_source, "conv2d_f32", std::size_t(plane), std::size_t(planes), x_arg,
        filter.numel() == 0 ? x_arg : detail::cl_arg<float>(filter), detail::cl_buffer(out), cl_ulong(plane),
        cl_ulong(planes), cl_long(g.c), cl_long(g.h), cl_long(g.w), cl_long(g.oc), cl_long(g.kh),
        cl_long(g.kw), cl_long(g.ow), cl_long(g.c / g.groups), cl_long(g.oc / g.groups),
        cl_long(g.strides[0]), cl_long(g.strides[1]), cl_long(g.paddings[0]), cl_long(g.paddings[1]),
        cl_long(g.dilations[0]), cl_long(g.dilations[1]), bias_arg, cl_int(epilogue.bias), residual_arg,
        cl_int(epilogue.residual), cl_int(epilogue.activation.kind), epilogue.activation.lo,
        epilogue.activation.hi);
    ctx.set_output("Output", std::move(out));
  }
};
namespace detail {
inline constexpr auto conv2d_opencl_kernels = fluidk::kernels_on<opencl>(conv2d_opencl<float>{});
}
#else
namespace detail {
inline constexpr auto conv2d_opencl_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_CUDA
// cuDNN: the forward convolution in NCHW, with the fastest full-precision algorithm cuDNN's
// heuristics report for the shapes; descriptors, algorithm and workspace size are made once
// per device and shape and kept. The epilogue (Bias, ResidualData, the activation) is one
// kernel over the output after it.
template <class T>
struct conv2d_cudnn {
  using dtype = T;
  using layouts = boost::mp11::mp_list<layout::nchw>;

  void operator()(execution_context& ctx) const {
    detail::cuda_call call(ctx);
    const Tensor input = detail::row_major(detail::input(ctx, "Input"));
    const Tensor filter = detail::row_major(detail::input(ctx, "Filter"));
    const conv2d_geometry g = conv2d_geometry::of(ctx, input, filter);
    const conv2d_epilogue epilogue = conv2d_epilogue::of(ctx, g, input);
    Tensor out(g.output_dims(), data_type_of<T>, ctx.place(), data_layout::nchw);
    if (out.numel() > 0 &&
        g.c == 0)  // no input channel: zeros, as the CPU kernel gives (cuDNN refuses C = 0)
      detail::cuda_require(
          cudaMemsetAsync(detail::device_data<T>(out), 0, out.storage_bytes(), call.stream()), ctx,
          "cudaMemsetAsync");
    else if (out.numel() > 0)
      run(ctx, call, g, input, filter, out);
    if (out.numel() > 0 && !epilogue.empty()) {
      const Tensor bias = epilogue.bias ? detail::row_major(ctx.input("Bias")) : Tensor();
      const Tensor residual = epilogue.residual ? detail::row_major(ctx.input("ResidualData")) : Tensor();
      const T* b = epilogue.bias ? detail::device_data<T>(bias) : nullptr;
      const T* r = epilogue.residual ? detail::device_data<T>(residual) : nullptr;
      const int kind = int(epilogue.activation.kind);
      cudaError_t status;
      if constexpr (std::is_same_v<T, float>)
        status = cuda_launch::conv2d_epilogue_f32(call.stream(), detail::device_data<T>(out), b, r,
                                                  out.numel(), g.oc, g.oh * g.ow, kind,
                                                  epilogue.activation.lo, epilogue.activation.hi);
      else
        status = cuda_launch::conv2d_epilogue_f64(call.stream(), detail::device_data<T>(out), b, r,
                                                  out.numel(), g.oc, g.oh * g.ow, kind,
                                                  epilogue.activation.lo, epilogue.activation.hi);
      detail::cuda_require(status, ctx, "the conv2d epilogue kernel");
    }
    ctx.set_output("Output", std::move(out));
  }

 private:
  // cuDNN's descriptors of one shape on one device, with the algorithm chosen for them and
  // its workspace size; made once and kept (cached()), destroyed with the process.
  struct plan {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    cudnnConvolutionFwdAlgo_t algo{};
    std::size_t workspace_bytes = 0;
    plan() = default;
    plan(const plan&) = delete;
    plan& operator=(const plan&) = delete;
    ~plan() {
      if (conv != nullptr) cudnnDestroyConvolutionDescriptor(conv);
      if (w != nullptr) cudnnDestroyFilterDescriptor(w);
      if (y != nullptr) cudnnDestroyTensorDescriptor(y);
      if (x != nullptr) cudnnDestroyTensorDescriptor(x);
    }
  };
  // The key: the device and every size that defines the plan (T is the struct's own).
  using plan_key = std::tuple<int, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                              std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                              std::int64_t, std::int64_t, std::int64_t, std::int64_t>;

  // The plan of these shapes on this device: made on the first call (under the cache's lock,
  // so each is made once), then shared; a plan is only read after it is made. A handful of
  // shapes per network, so the map is not bounded.
  static std::shared_ptr<const plan> cached(const execution_context& ctx, detail::cuda_call& call,
                                            const conv2d_geometry& g) {
    static std::mutex mutex;
    static std::map<plan_key, std::shared_ptr<const plan>> plans;
    const plan_key key{call.cuda.device(),
                       g.n,
                       g.c,
                       g.h,
                       g.w,
                       g.oc,
                       g.kh,
                       g.kw,
                       g.groups,
                       g.strides[0],
                       g.strides[1],
                       g.dilations[0],
                       g.dilations[1],
                       g.paddings[0],
                       g.paddings[1]};
    const std::lock_guard lock(mutex);
    if (auto it = plans.find(key); it != plans.end()) return it->second;
    std::shared_ptr<const plan> made = make_plan(ctx, call, g);
    plans.emplace(key, made);
    return made;
  }

  static std::shared_ptr<const plan> make_plan(const execution_context& ctx, detail::cuda_call& call,
                                               const conv2d_geometry& g) {
    using detail::cudnn_require;
    constexpr cudnnDataType_t type = std::is_same_v<T, float> ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
    auto i32 = [&](std::int64_t v) {
      detail::require(v <= std::numeric_limits<int>::max(), ctx, "a size exceeds cuDNN's int range");
      return int(v);
    };
    auto d = std::make_shared<plan>();
    cudnn_require(cudnnCreateTensorDescriptor(&d->x), ctx, "cudnnCreateTensorDescriptor");
    cudnn_require(cudnnCreateTensorDescriptor(&d->y), ctx, "cudnnCreateTensorDescriptor");
    cudnn_require(cudnnCreateFilterDescriptor(&d->w), ctx, "cudnnCreateFilterDescriptor");
    cudnn_require(cudnnCreateConvolutionDescriptor(&d->conv), ctx, "cudnnCreateConvolutionDescriptor");
    cudnn_require(
        cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, type, i32(g.n), i32(g.c), i32(g.h), i32(g.w)),
        ctx, "cudnnSetTensor4dDescriptor (Input)");
    cudnn_require(
        cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, type, i32(g.n), i32(g.oc), i32(g.oh), i32(g.ow)),
        ctx, "cudnnSetTensor4dDescriptor (Output)");
    cudnn_require(cudnnSetFilter4dDescriptor(d->w, type, CUDNN_TENSOR_NCHW, i32(g.oc), i32(g.c / g.groups),
                                             i32(g.kh), i32(g.kw)),
                  ctx, "cudnnSetFilter4dDescriptor");
    cudnn_require(cudnnSetConvolution2dDescriptor(d->conv, i32(g.paddings[0]), i32(g.paddings[1]),
                                                  i32(g.strides[0]), i32(g.strides[1]), i32(g.dilations[0]),
                                                  i32(g.dilations[1]), CUDNN_CROSS_CORRELATION, type),
                  ctx, "cudnnSetConvolution2dDescriptor");
    cudnn_require(cudnnSetConvolutionGroupCount(d->conv, i32(g.groups)), ctx,
                  "cudnnSetConvolutionGroupCount");
    // Full-precision arithmetic: the default math type lets cuDNN pick TF32 tensor-core
    // algorithms for float on Ampere and later (a 10-bit mantissa), unlike the CPU kernels.
    cudnn_require(cudnnSetConvolutionMathType(d->conv, CUDNN_FMA_MATH), ctx, "cudnnSetConvolutionMathType");

    cudnnHandle_t handle = call.cuda.cudnn();
    const auto lock = call.cuda.lock_cudnn();
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    cudnn_require(cudnnGetConvolutionForwardAlgorithm_v7(handle, d->x, d->w, d->conv, d->y,
                                                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf),
                  ctx, "cudnnGetConvolutionForwardAlgorithm_v7");
    // The fastest algorithm that computes in full precision (no tensor-op math type).
    int pick = 0;
    while (pick < found &&
           (perf[pick].status != CUDNN_STATUS_SUCCESS || perf[pick].mathType == CUDNN_TENSOR_OP_MATH ||
            perf[pick].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
      ++pick;
    detail::require(pick < found, ctx, "cuDNN has no forward algorithm for these shapes");
    d->algo = perf[pick].algo;
    cudnn_require(cudnnGetConvolutionForwardWorkspaceSize(handle, d->x, d->w, d->conv, d->y, d->algo,
                                                          &d->workspace_bytes),
                  ctx, "cudnnGetConvolutionForwardWorkspaceSize");
    return d;
  }

  static void run(const execution_context& ctx, detail::cuda_call& call, const conv2d_geometry& g,
                  const Tensor& input, const Tensor& filter, Tensor& out) {
    // (The plan's key holds one padding per axis.)
    detail::require(g.paddings == g.paddings_end, ctx,
                    "cuDNN pads both sides of an axis alike: these paddings (as SAME gives for this shape, "
                    "or four given) differ, which the CPU kernels take");
    const std::shared_ptr<const plan> d = cached(ctx, call, g);
    // The workspace is the call's own (two threads may run the same plan at once). Freed when
    // this returns, without waiting: it goes back to the device's cache, and whoever takes it
    // next queues its work on the same stream, after this convolution (device_memory_cache).
    // (An error of the convolution's own, found as it runs, is then reported by the next
    // operation that waits for the stream.)
    Tensor workspace({std::int64_t(d->workspace_bytes)}, data_type::uint8, ctx.place());
    cudnnHandle_t handle = call.cuda.cudnn();
    const auto lock = call.cuda.lock_cudnn();
    const T alpha = 1, beta = 0;
    detail::cudnn_require(
        cudnnConvolutionForward(
            handle, &alpha, d->x, detail::device_data<T>(input), d->w, detail::device_data<T>(filter),
            d->conv, d->algo, d->workspace_bytes > 0 ? detail::device_data<std::uint8_t>(workspace) : nullptr,
            d->workspace_bytes, &beta, d->y, detail::device_data<T>(out)),
        ctx, "cudnnConvolutionForward");
  }
};
namespace detail {
inline constexpr auto conv2d_cudnn_kernels =
    fluidk::kernels_on<cuda, library::cudnn>(conv2d_cudnn<float>{}, conv2d_cudnn<double>{});
}
#else
namespace detail {
inline constexpr auto conv2d_cudnn_kernels = no_kernels();
}
#endif

struct conv2d {
  static constexpr std::string_view name = "conv2d";
  static constexpr std::array<std::string_view, 4> inputs{"Input", "Filter", "Bias", "ResidualData"};
  static constexpr std::array<std::string_view, 1> outputs{"Output"};
  // Where the expected kernel type has no kernel (use_onednn with double data or in a build
  // without oneDNN; use_cudnn without cuDNN; a device without conv kernels), the CPU kernel
  // of the same data type runs, counted and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  // The filter and the bias are moved and cast like any input but keep their layouts: the
  // blocked layout of a oneDNN kernel describes its activations, and the kernel reorders the
  // weights itself. ResidualData, like Input, arrives in the kernel's layout.
  static constexpr std::array<std::string_view, 2> keep_layout_inputs{"Filter", "Bias"};
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(conv2d_cpu<float>{}, conv2d_cpu<double>{}), detail::conv2d_onednn_kernels,
      detail::conv2d_cudnn_kernels, detail::conv2d_opencl_kernels);
};

}  // namespace fluidk::ops
