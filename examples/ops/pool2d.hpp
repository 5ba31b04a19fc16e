// pool2d (X [N, C, H, W] -> Out [N, C, OH, OW]) with Fluid's attributes pooling_type ("max"
// or "avg"), ksize (2 ints), strides (2 ints; default 1, 1), paddings (2 ints, or 4: top,
// bottom, left, right; default 0), global_pooling (default false: true makes the window the
// whole plane, unpadded), ceil_mode (default false), exclusive (default true: an average
// divides by the cells inside the input; false: by the cells of the window inside the padded
// input), padding_algorithm ("EXPLICIT", "SAME": an output of ceil(size / stride), padded as
// Fluid pads it; "VALID": no padding), adaptive (only false) and data_format ("NCHW" or
// "AnyLayout"); and dilations (2 ints; default 1, 1), a fluidk extension for ONNX's MaxPool,
// refused with "avg".
//
// Sizes: floor mode (size + paddings - extent) / stride + 1, extent = (ksize - 1) * dilation
// + 1; ceil mode rounds the division up, but drops a last window that would start in the end
// padding (as ONNX Runtime does). A window with no input cell (a padding not below the
// extent, or dilated taps that skip the input) is refused: max and exclusive avg have no
// value for it.
//
// Kernels, float (CPU plain also double): CPU plain in NCHW; CPU oneDNN (pooling_v2_forward,
// inference) declared for NCHW, NHWC, nChw8c and nChw16c, its output in the input's layout (so
// blocked or NHWC data from a oneDNN conv2d keeps its layout); OpenCL and CUDA in NCHW, one work-item
// per output element.
#pragma once

#include <algorithm>
#include <array>
#include <boost/mp11/list.hpp>
#include <cmath>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/detail/common.hpp"
#include "ops/detail/window.hpp"
#if FLUIDK_OPS_ONEDNN
#include "ops/detail/onednn.hpp"
#endif
#if FLUIDK_OPS_OPENCL
#include "ops/detail/opencl.hpp"
#endif
#if FLUIDK_OPS_CUDA
#include "ops/detail/cuda.hpp"
#include "ops/detail/cuda_launch_pool.hpp"
#endif

namespace fluidk::ops {

// The sizes of one pooling, checked against each other.
struct pool2d_geometry {
  std::int64_t n = 0, c = 0, h = 0, w = 0;  // input
  std::int64_t oh = 0, ow = 0;              // output
  bool max = true, exclusive = true;
  std::array<std::int64_t, 2> ksize{}, strides{1, 1}, dilations{1, 1};
  std::array<std::int64_t, 2> paddings{};      // before each axis: top, left
  std::array<std::int64_t, 2> paddings_end{};  // after it: bottom, right

  dims output_dims() const { return {n, c, oh, ow}; }
  // Where an include-padding average stops counting cells on each axis: the input's end
  // padding. A ceil-mode window may run past it; those cells are not counted (ONNX Runtime).
  std::int64_t limit(int axis) const { return (axis == 0 ? h : w) + paddings_end[std::size_t(axis)]; }
  // Whether the last window of an axis runs past the end padding (ceil mode only).
  bool overhangs(int axis) const {
    const auto a = std::size_t(axis);
    const std::int64_t extent = (ksize[a] - 1) * dilations[a] + 1;
    return ((axis == 0 ? oh : ow) - 1) * strides[a] - paddings[a] + extent > limit(axis);
  }

  static pool2d_geometry of(const execution_context& ctx, const Tensor& x) {
    using detail::require;
    require(x.dims().rank() == 4, ctx, "X must be 4-D [N, C, H, W], not " + x.dims().to_string());
    pool2d_geometry g;
    g.n = x.dims()[0];
    g.c = x.dims()[1];
    g.h = x.dims()[2];
    g.w = x.dims()[3];
    const std::string type = ctx.attr_or<std::string>("pooling_type", "");
    require(type == "max" || type == "avg", ctx,
            "pooling_type must be \"max\" or \"avg\", not \"" + type + "\"");
    g.max = type == "max";
    require(!ctx.attr_or<bool>("adaptive", false), ctx,
            "adaptive pooling is not supported (adaptive must be false)");
    const std::string format = ctx.attr_or<std::string>("data_format", "NCHW");
    require(format == "NCHW" || format == "AnyLayout", ctx,
            "data_format must be \"NCHW\" or \"AnyLayout\" (X's dims are [N, C, H, W] whatever its layout), "
            "not \"" +
                format + "\"");
    const std::string algorithm = ctx.attr_or<std::string>("padding_algorithm", "EXPLICIT");
    require(algorithm == "EXPLICIT" || algorithm == "SAME" || algorithm == "VALID", ctx,
            "padding_algorithm must be \"EXPLICIT\", \"SAME\" or \"VALID\", not \"" + algorithm + "\"");
    const bool global = ctx.attr_or<bool>("global_pooling", false);
    const bool ceil_mode = ctx.attr_or<bool>("ceil_mode", false);
    g.exclusive = ctx.attr_or<bool>("exclusive", true);
    require(global || ctx.attributes().find("ksize") != nullptr, ctx,
            "needs attribute 'ksize' (2 ints) unless global_pooling is true");
    g.ksize = detail::ints_attr<2>(ctx, "ksize", {1, 1});
    g.strides = detail::ints_attr<2>(ctx, "strides", {1, 1});
    g.dilations = detail::ints_attr<2>(ctx, "dilations", {1, 1});
    for (int i = 0; i < 2; ++i) {
      const auto a = std::size_t(i);
      require(g.ksize[a] >= 1, ctx, "ksize must be positive");
      require(g.strides[a] >= 1, ctx, "strides must be positive");
      require(g.dilations[a] >= 1, ctx, "dilations must be positive");
    }
    require(g.max || g.dilations == std::array<std::int64_t, 2>{1, 1}, ctx,
            "dilations other than 1 are supported with \"max\" pooling only");
    g.read_paddings(ctx);
    if (global) {
      g.ksize = {g.h, g.w};
      g.paddings = g.paddings_end = {0, 0};
      g.dilations = {1, 1};
    } else if (algorithm == "VALID") {
      g.paddings = g.paddings_end = {0, 0};
    } else if (algorithm == "SAME") {
      require(g.dilations == std::array<std::int64_t, 2>{1, 1}, ctx,
              "padding_algorithm \"SAME\" takes dilations 1 (Fluid pads it by the undilated window)");
      // ceil(size / stride) outputs; the padding they need, at least 0, its odd unit at the end.
      const std::int64_t size[2] = {g.h, g.w};
      for (std::size_t a = 0; a < 2; ++a) {
        const std::int64_t out = size[a] == 0 ? 0 : (size[a] - 1) / g.strides[a] + 1;
        std::int64_t reach = 0;
        require(!checked_add((out - 1) * g.strides[a], g.ksize[a], reach), ctx,
                "ksize overflows a 64-bit integer");
        const std::int64_t sum = std::max<std::int64_t>(reach - size[a], 0);
        g.paddings[a] = sum / 2;
        g.paddings_end[a] = sum - sum / 2;
      }
    }
    const std::int64_t size[2] = {g.h, g.w};
    std::int64_t out[2] = {0, 0};
    for (std::size_t a = 0; a < 2; ++a) {
      // The positions the kernels work out stay below the padded input plus a stride.
      std::int64_t extent = 0, padded = 0, reach = 0;
      const bool overflows = checked_mul(g.dilations[a], g.ksize[a] - 1, extent) ||
                             checked_add(extent, std::int64_t(1), extent) ||
                             checked_add(g.paddings[a], g.paddings_end[a], padded) ||
                             checked_add(padded, size[a], padded) || checked_add(padded, g.strides[a], reach);
      require(!overflows, ctx,
              "ksize, dilations, strides and paddings on X " + x.dims().to_string() +
                  " make positions that overflow a 64-bit integer");
      require(g.paddings[a] < extent && g.paddings_end[a] < extent, ctx,
              "a padding (" + std::to_string(std::max(g.paddings[a], g.paddings_end[a])) +
                  ") is not below the window's extent (" + std::to_string(extent) +
                  "): a window would lie wholly in the padding");
      require(padded >= extent, ctx,
              "the window (extent " + std::to_string(extent) + ") does not fit the padded input " +
                  x.dims().to_string());
      out[a] = (padded - extent + (ceil_mode ? g.strides[a] - 1 : 0)) / g.strides[a] + 1;
      // A ceil-mode window that would start in the end padding is dropped, as ONNX Runtime does.
      if (ceil_mode && (out[a] - 1) * g.strides[a] >= size[a] + g.paddings[a]) --out[a];
      require(size[a] > 0, ctx, "X " + x.dims().to_string() + " has an empty spatial dimension: no window");
      // Every window must read an input cell (the paddings are below the extent, so only a
      // window whose taps step over an input shorter than the dilation can miss it).
      const std::int64_t empty = detail::first_window_without_input(out[a], size[a], g.ksize[a], g.strides[a],
                                                                    g.paddings[a], g.dilations[a]);
      require(empty < 0, ctx,
              "window " + std::to_string(empty) + " of axis " + std::to_string(2 + a) + " of X " +
                  x.dims().to_string() + " reads no input cell (only padding, or taps stepping over it)");
    }
    g.oh = out[0];
    g.ow = out[1];
    return g;
  }

 private:
  void read_paddings(const execution_context& ctx) {
    using detail::require;
    paddings = paddings_end = {0, 0};
    const attribute* given = ctx.attributes().find("paddings");
    if (given == nullptr) return;
    const std::vector<std::int64_t> p = detail::int_list(ctx, "paddings", *given);
    require(
        p.size() == 2 || p.size() == 4, ctx,
        "attribute 'paddings' needs 2 values (both sides alike) or 4 (top, bottom, left, right), but has " +
            std::to_string(p.size()));
    require(std::all_of(p.begin(), p.end(), [](std::int64_t v) { return v >= 0; }), ctx,
            "paddings must not be negative");
    paddings =
        p.size() == 2 ? std::array<std::int64_t, 2>{p[0], p[1]} : std::array<std::int64_t, 2>{p[0], p[2]};
    paddings_end = p.size() == 2 ? paddings : std::array<std::int64_t, 2>{p[1], p[3]};
  }
};

namespace detail {
// Pools n * c NCHW planes; every kernel computes each output element as this does (taps in
// row-major order, the sum divided once at the end).
template <class T>
void pool2d_planes(const pool2d_geometry& g, const T* x, T* y) {
  const std::int64_t planes = g.n * g.c, limit_h = g.limit(0), limit_w = g.limit(1);
  for (std::int64_t p = 0; p < planes; ++p) {
    const T* src = x + p * g.h * g.w;
    T* dst = y + p * g.oh * g.ow;
    for (std::int64_t oy = 0; oy < g.oh; ++oy)
      for (std::int64_t ox = 0; ox < g.ow; ++ox) {
        const std::int64_t y0 = oy * g.strides[0] - g.paddings[0], x0 = ox * g.strides[1] - g.paddings[1];
        T acc = g.max ? -std::numeric_limits<T>::infinity() : T(0);
        std::int64_t count = 0;
        for (std::int64_t ky = 0; ky < g.ksize[0]; ++ky) {
          const std::int64_t iy = y0 + ky * g.dilations[0];
          if (iy < 0 || iy >= g.h) continue;
          for (std::int64_t kx = 0; kx < g.ksize[1]; ++kx) {
            const std::int64_t ix = x0 + kx * g.dilations[1];
            if (ix < 0 || ix >= g.w) continue;
            const T v = src[iy * g.w + ix];
            if (g.max) {
              if (v > acc) acc = v;
            } else {
              acc += v;
            }
            ++count;
          }
        }
        if (!g.max) {
          const std::int64_t rows = std::min(y0 + g.ksize[0], limit_h) - y0;
          const std::int64_t cols = std::min(x0 + g.ksize[1], limit_w) - x0;
          acc /= T(g.exclusive ? count : rows * cols);
        }
        dst[oy * g.ow + ox] = acc;
      }
  }
}
}  // namespace detail

// Plain CPU, in NCHW.
template <class T>
struct pool2d_cpu {
  using dtype = T;
  using layouts = boost::mp11::mp_list<layout::nchw>;

  void operator()(execution_context& ctx) const {
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const pool2d_geometry g = pool2d_geometry::of(ctx, x);
    Tensor out(g.output_dims(), data_type_of<T>, ctx.place(), data_layout::nchw);
    if (out.numel() > 0) detail::pool2d_planes<T>(g, x.data<T>(), out.data<T>());
    ctx.set_output("Out", std::move(out));
  }
};

#if FLUIDK_OPS_ONEDNN
// oneDNN: pooling_v2_forward in the input's layout (NCHW, NHWC, nChw8c or nChw16c).
template <class T>
struct pool2d_onednn {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the oneDNN pool2d kernel computes in float");
  using layouts = boost::mp11::mp_list<layout::nchw, layout::nhwc, layout::nChw8c, layout::nChw16c>;

  void operator()(execution_context& ctx) const {
    using dnnl::memory;
    const Tensor& x = detail::input(ctx, "X");
    const pool2d_geometry g = pool2d_geometry::of(ctx, x);
    // oneDNN's include-padding average divides by the whole window, where a ceil-mode window
    // past the end padding counts fewer cells here; and it makes no primitive of an empty
    // dimension. Those run the plain loop, the output then brought to the input's layout.
    const bool include_padding_overhang = !g.max && !g.exclusive && (g.overhangs(0) || g.overhangs(1));
    if (include_padding_overhang || x.numel() == 0) return run_plain(ctx, g, x);
    onednn_context& dnn = detail::onednn_of(ctx);
    Tensor out(g.output_dims(), data_type::float32, ctx.place(), x.layout());
    // The end padding that makes oneDNN's (floor) output size ours: the given one, or in ceil
    // mode what the last window reaches beyond the input. Max ignores padding, and the
    // exclude-padding average counts input cells only, so the extra padding changes nothing.
    memory::dims padding_r(2);
    for (std::size_t a = 0; a < 2; ++a) {
      const std::int64_t extent = (g.ksize[a] - 1) * g.dilations[a] + 1;
      const std::int64_t reach =
          ((a == 0 ? g.oh : g.ow) - 1) * g.strides[a] + extent - (a == 0 ? g.h : g.w) - g.paddings[a];
      padding_r[a] = std::max(g.paddings_end[a], reach);
    }
    const dnnl::algorithm algorithm = g.max         ? dnnl::algorithm::pooling_max
                                      : g.exclusive ? dnnl::algorithm::pooling_avg_exclude_padding
                                                    : dnnl::algorithm::pooling_avg_include_padding;
    memory src = detail::onednn_memory_of(x, dnn.engine());
    memory dst = detail::onednn_memory_of(out, dnn.engine());
    const memory::dims strides{g.strides[0], g.strides[1]}, kernel{g.ksize[0], g.ksize[1]},
        dilation{g.dilations[0] - 1, g.dilations[1] - 1}, padding_l{g.paddings[0], g.paddings[1]};
    detail::onednn_key key("pool2d.fwd");
    key << src.get_desc() << dst.get_desc() << int(algorithm) << strides << kernel << dilation << padding_l
        << padding_r;
    const auto kept = detail::kept_primitive<dnnl::pooling_v2_forward>(dnn, key, [&] {
      return dnnl::pooling_v2_forward::primitive_desc(
          dnnl::pooling_v2_forward::desc(dnnl::prop_kind::forward_inference, algorithm, src.get_desc(),
                                         dst.get_desc(), strides, kernel, dilation, padding_l, padding_r),
          detail::kept_attr(), dnn.engine());
    });
    detail::run_kept(dnn, *kept, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    dnn.wait();
    ctx.set_output("Out", std::move(out));
  }

 private:
  static void run_plain(execution_context& ctx, const pool2d_geometry& g, const Tensor& x) {
    const Tensor rows = detail::row_major(x);
    Tensor out(g.output_dims(), data_type::float32, ctx.place(), data_layout::nchw);
    if (out.numel() > 0) detail::pool2d_planes<float>(g, rows.data<float>(), out.data<float>());
    if (!detail::row_major_order(x.layout()))
      out = transform(out, kernel_key{ctx.place(), data_type::float32, x.layout(), library_type::plain});
    ctx.set_output("Out", std::move(out));
  }
};
namespace detail {
inline constexpr auto pool2d_onednn_kernels =
    fluidk::kernels_on<cpu, library::onednn>(pool2d_onednn<float>{});
}
#else
namespace detail {
inline constexpr auto pool2d_onednn_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_OPENCL
// One work-item per output element, computed as detail::pool2d_planes computes it.
inline constexpr const char* pool_opencl_source = R"CLC(
__kernel void pool2d_f32(__global const float* x, ulong x_off, __global float* y, ulong total,
                         long h, long w, long oh, long ow, long kh, long kw, long sh, long sw,
                         long ph, long pw, long dh, long dw, long limit_h, long limit_w,
                         int is_max, int exclusive) {
  const size_t e = get_global_id(0);
  if (e >= total) return;
  const long ox = (long)(e % (ulong)ow), oy = (long)((e / (ulong)ow) % (ulong)oh);
  const long plane = (long)(e / (ulong)(ow * oh));
  __global const float* src = x + x_off + plane * h * w;
  const long y0 = oy * sh - ph, x0 = ox * sw - pw;
  float acc = is_max ? -INFINITY : 0.0f;
  long count = 0;
  for (long ky = 0; ky < kh; ++ky) {
    const long iy = y0 + ky * dh;
    if (iy < 0 || iy >= h) continue;
    for (long kx = 0; kx < kw; ++kx) {
      const long ix = x0 + kx * dw;
      if (ix < 0 || ix >= w) continue;
      const float v = src[iy * w + ix];
      if (is_max) {
        if (v > acc) acc = v;
      } else {
        acc += v;
      }
      ++count;
    }
  }
  if (!is_max) {
    const long rows = min(y0 + kh, limit_h) - y0, cols = min(x0 + kw, limit_w) - x0;
    acc /= (float)(exclusive ? count : rows * cols);
  }
  y[e] = acc;
}
)CLC";

template <class T>
struct pool2d_opencl {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the OpenCL pool2d kernel computes in float");
  using layouts = boost::mp11::mp_list<layout::nchw>;

  void operator()(execution_context& ctx) const {
    const Tensor& x = detail::input(ctx, "X");
    detail::require(detail::row_major_order(x.layout()), ctx, "the OpenCL kernel takes X in NCHW");
    const pool2d_geometry g = pool2d_geometry::of(ctx, x);
    Tensor out(g.output_dims(), data_type::float32, ctx.place(), data_layout::nchw);
    const std::int64_t total = out.numel();
    if (total > 0)
      detail::opencl_launch_from(
          ctx, pool_opencl_source, "pool2d_f32", std::size_t(total), 1, detail::cl_arg<float>(x),
          detail::cl_buffer(out), cl_ulong(total), cl_long(g.h), cl_long(g.w), cl_long(g.oh), cl_long(g.ow),
          cl_long(g.ksize[0]), cl_long(g.ksize[1]), cl_long(g.strides[0]), cl_long(g.strides[1]),
          cl_long(g.paddings[0]), cl_long(g.paddings[1]), cl_long(g.dilations[0]), cl_long(g.dilations[1]),
          cl_long(g.limit(0)), cl_long(g.limit(1)), cl_int(g.max), cl_int(g.exclusive));
    ctx.set_output("Out", std::move(out));
  }
};
namespace detail {
inline constexpr auto pool2d_opencl_kernels = fluidk::kernels_on<opencl>(pool2d_opencl<float>{});
}
#else
namespace detail {
inline constexpr auto pool2d_opencl_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_CUDA
template <class T>
struct pool2d_cuda {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the CUDA pool2d kernel computes in float");
  using layouts = boost::mp11::mp_list<layout::nchw>;

  void operator()(execution_context& ctx) const {
    detail::cuda_call call(ctx);
    const Tensor& x = detail::input(ctx, "X");
    detail::require(detail::row_major_order(x.layout()), ctx, "the CUDA kernel takes X in NCHW");
    const pool2d_geometry g = pool2d_geometry::of(ctx, x);
    Tensor out(g.output_dims(), data_type::float32, ctx.place(), data_layout::nchw);
    const cuda_launch::pool2d_params p{
        g.n * g.c,      g.h,          g.w,          g.oh,          g.ow,          g.ksize[0],
        g.ksize[1],     g.strides[0], g.strides[1], g.paddings[0], g.paddings[1], g.dilations[0],
        g.dilations[1], g.limit(0),   g.limit(1),   g.max,         g.exclusive};
    if (out.numel() > 0)
      detail::cuda_require(
          cuda_launch::pool2d<T>(call.stream(), detail::device_data<T>(x), detail::device_data<T>(out), p),
          ctx, "the pool2d kernel");
    ctx.set_output("Out", std::move(out));
  }
};
namespace detail {
inline constexpr auto pool2d_cuda_kernels = fluidk::kernels_on<cuda>(pool2d_cuda<float>{});
}
#else
namespace detail {
inline constexpr auto pool2d_cuda_kernels = no_kernels();
}
#endif

struct pool2d {
  static constexpr std::string_view name = "pool2d";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // Where the expected kernel type has no kernel (use_onednn with double data or in a build
  // without oneDNN; double on a device), the CPU kernel of the same data type runs, counted
  // and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(pool2d_cpu<float>{}, pool2d_cpu<double>{}), detail::pool2d_onednn_kernels,
      detail::pool2d_cuda_kernels, detail::pool2d_opencl_kernels);
};

}  // namespace fluidk::ops
