// concat (X: several inputs -> Out): Fluid's concat. The inputs, of one rank and of the same
// dims but along axis (int, 0; a negative one counts from the end), one after the other along
// it. Out keeps X[0]'s sequence offsets when axis is not 0 (its rows are X[0]'s).
//
// Kernels: CPU plain (float, double, int32, int64: row-major copies), CPU oneDNN (float: the
// concat primitive), OpenCL (float) and CUDA (float, double), one copy kernel per input. The
// oneDNN kernel is declared for the wildcard layout and for nChw8c and nChw16c: blocked conv2d
// outputs concatenated stay blocked (SqueezeNet's fire modules concatenate channels) where
// every input's channels are whole blocks, or the axis is not the channels'; NHWC inputs (of
// oneDNN's NHWC convolutions) stay NHWC, copied as runs of their storage; otherwise the inputs
// go to NCHW and Out is NCHW (oneDNN cannot place a block's padding lanes mid-tensor).
#pragma once

#include <algorithm>
#include <array>
#include <boost/mp11/list.hpp>
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

struct concat_geometry {
  std::size_t axis = 0;
  dims out;
  std::int64_t outer = 1;           // the product of the dims before axis
  std::vector<std::int64_t> inner;  // each input's elements per outer index
  std::int64_t out_inner = 0;       // Out's
  std::vector<std::int64_t> at;     // where each input starts in Out's rows of out_inner

  // The inputs of X, each holding data (as a kernel reads them: `prepare` may re-lay them out).
  template <class Prepare>
  static std::vector<Tensor> inputs(const execution_context& ctx, Prepare&& prepare) {
    const auto args = ctx.inputs("X");
    detail::require(!args.empty(), ctx, "X has no inputs");
    std::vector<Tensor> xs;
    for (std::size_t i = 0; i < args.size(); ++i) {
      detail::require(!args[i].empty() && args[i].tensor().initialized(), ctx,
                      "input X[" + std::to_string(i) + "] holds no data");
      xs.push_back(prepare(args[i].tensor()));
    }
    return xs;
  }

  static concat_geometry of(const execution_context& ctx, std::span<const Tensor> xs) {
    const dims& first = xs[0].dims();
    const std::int64_t rank = std::int64_t(first.rank());
    detail::require(rank > 0, ctx, "X[0] " + first.to_string() + " has no axis to concatenate along");
    std::int64_t axis = detail::int_attr(ctx, "axis", 0);
    detail::require(axis >= -rank && axis < rank, ctx,
                    "axis (" + std::to_string(axis) + ") must be in [-" + std::to_string(rank) + ", " +
                        std::to_string(rank) + ") for X[0] " + first.to_string());
    if (axis < 0) axis += rank;
    concat_geometry g;
    g.axis = std::size_t(axis);
    std::int64_t extent = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const dims& d = xs[i].dims();
      bool fits = d.rank() == first.rank();
      for (std::size_t j = 0; fits && j < d.rank(); ++j) fits = j == g.axis || d[j] == first[j];
      detail::require(fits, ctx,
                      "X[" + std::to_string(i) + "] " + d.to_string() + " does not fit X[0] " +
                          first.to_string() + ": the inputs differ only along axis " + std::to_string(axis));
      detail::require(!checked_add(extent, d[g.axis], extent), ctx,
                      "the inputs' extents along axis overflow");
    }
    g.out = first.with(g.axis, extent);  // dims checks that the product fits
    g.outer = detail::product(first, 0, g.axis);
    const std::int64_t trailing = detail::product(first, g.axis + 1, first.rank());
    for (const Tensor& x : xs) {
      g.at.push_back(g.out_inner);
      g.inner.push_back(x.dims()[g.axis] * trailing);
      g.out_inner += g.inner.back();
    }
    return g;
  }

  // The same concatenation over 4-D NHWC storage, whose order is [N, H, W, C]: the runs along
  // the axis's place in that order (C last).
  static concat_geometry of_stored_nhwc(const concat_geometry& g, std::span<const Tensor> xs) {
    static constexpr std::array<std::size_t, 4> stored_axis{0, 3, 1, 2};  // N, C, H, W -> place in NHWC
    const auto stored = [](const dims& d) { return std::array<std::int64_t, 4>{d[0], d[2], d[3], d[1]}; };
    concat_geometry s = g;
    const std::size_t a = stored_axis[g.axis];
    const std::array<std::int64_t, 4> first = stored(xs[0].dims());
    s.outer = 1;
    for (std::size_t j = 0; j < a; ++j) s.outer *= first[j];
    s.inner.clear();
    s.at.clear();
    s.out_inner = 0;
    for (const Tensor& x : xs) {
      const std::array<std::int64_t, 4> d = stored(x.dims());
      std::int64_t inner = 1;
      for (std::size_t j = a; j < 4; ++j) inner *= d[j];
      s.at.push_back(s.out_inner);
      s.inner.push_back(inner);
      s.out_inner += inner;
    }
    return s;
  }

  // X[0]'s offsets when Out keeps its rows.
  lod offsets(const execution_context& ctx) const { return axis == 0 ? lod{} : ctx.input_lod("X"); }
};

template <class T>
struct concat_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const std::vector<Tensor> xs = concat_geometry::inputs(ctx, detail::row_major);
    const concat_geometry g = concat_geometry::of(ctx, xs);
    Tensor out(g.out, data_type_of<T>, ctx.place(), xs[0].layout());
    T* y = out.data<T>();
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const T* x = xs[i].data<T>();
      const std::int64_t inner = g.inner[i];
      for (std::int64_t o = 0; o < g.outer; ++o)
        std::copy(x + o * inner, x + (o + 1) * inner, y + o * g.out_inner + g.at[i]);
    }
    ctx.set_output("Out", std::move(out), g.offsets(ctx));
  }
};

#if FLUIDK_OPS_ONEDNN
template <class T>
struct concat_onednn {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the oneDNN concat kernel computes in float");
  using layouts = boost::mp11::mp_list<layout::any, layout::nChw8c, layout::nChw16c>;

  void operator()(execution_context& ctx) const {
    using dnnl::memory;
    std::vector<Tensor> xs = concat_geometry::inputs(ctx, [](const Tensor& t) { return t; });
    const concat_geometry g = concat_geometry::of(ctx, xs);
    const data_layout blocked = xs[0].layout();
    const std::int64_t block = blocked.block_axis() == 1 ? blocked.block_size() : 0;
    bool keep_blocked = block > 0;
    for (const Tensor& x : xs)
      keep_blocked = keep_blocked && x.layout() == blocked && (g.axis != 1 || x.dims()[1] % block == 0);
    // NHWC inputs (of oneDNN's NHWC convolutions) stay NHWC: Out is their concatenation along
    // the same axis of the storage's order [N, H, W, C].
    bool keep_nhwc = true;
    for (const Tensor& x : xs)
      keep_nhwc = keep_nhwc && x.layout() == data_layout::nhwc && x.dims().rank() == 4;
    if (keep_nhwc) {
      Tensor out(g.out, data_type::float32, ctx.place(), data_layout::nhwc);
      copy_runs(xs, concat_geometry::of_stored_nhwc(g, xs), out.data<T>());
      ctx.set_output("Out", std::move(out), g.offsets(ctx));
      return;
    }
    if (!keep_blocked)
      for (Tensor& x : xs) x = detail::row_major(x);
    // Along N, or along C with every C a whole number of blocks: each input's storage of one
    // item (of all of it, along N, padding lanes included) is a run placed whole in Out's,
    // as in row-major order. These are copies at memory speed, where oneDNN's concat has only
    // its element-wise "simple" implementation for blocked data (4 times slower on
    // SqueezeNet's fire modules).
    bool whole_blocks = keep_blocked && g.axis <= 1;
    for (const Tensor& x : xs) whole_blocks = whole_blocks && (g.axis == 0 || x.dims()[1] % block == 0);
    if (whole_blocks) {
      Tensor out(g.out, data_type::float32, ctx.place(), blocked);
      T* y = out.data<T>();
      if (g.axis == 0) {
        for (const Tensor& x : xs) {
          const T* from = x.template data<T>();
          y = std::copy(from, from + detail::storage_elements(x), y);
        }
      } else {
        copy_runs(xs, g, y);
      }
      ctx.set_output("Out", std::move(out), g.offsets(ctx));
      return;
    }
    // oneDNN makes no memory of an empty dimension: empty inputs add nothing, and an empty
    // output is the plain kernel's.
    std::vector<std::size_t> used;
    for (std::size_t i = 0; i < xs.size(); ++i)
      if (xs[i].numel() > 0) used.push_back(i);
    if (used.empty()) return concat_cpu<T>{}(ctx);
    onednn_context& dnn = detail::onednn_of(ctx);
    Tensor out(g.out, data_type::float32, ctx.place(), keep_blocked ? blocked : xs[0].layout());
    std::vector<memory::desc> sources;
    std::unordered_map<int, memory> args;
    for (const std::size_t i : used) {
      memory m = keep_blocked ? detail::onednn_memory_of(xs[i], dnn.engine()) : plain_memory(xs[i], dnn);
      sources.push_back(m.get_desc());
      args.insert({DNNL_ARG_MULTIPLE_SRC + int(args.size()), m});
    }
    memory dst = keep_blocked ? detail::onednn_memory_of(out, dnn.engine()) : plain_memory(out, dnn);
    args.insert({DNNL_ARG_DST, dst});
    detail::onednn_key key("concat");
    key << dst.get_desc() << int(g.axis) << std::int64_t(sources.size());
    for (const memory::desc& d : sources) key << d;
    std::shared_ptr<const detail::onednn_kept<dnnl::concat> > kept;
    try {
      kept = detail::kept_primitive<dnnl::concat>(dnn, key, [&] {
        return dnnl::concat::primitive_desc(dst.get_desc(), int(g.axis), sources, dnn.engine(),
                                            detail::kept_attr());
      });
    } catch (const dnnl::error&) {
      // No implementation for these blocked descriptions: the plain layout, where every
      // concatenation has one (the plain kernel's copies).
      if (keep_blocked) return concat_cpu<T>{}(ctx);
      throw;
    }
    detail::run_kept(dnn, *kept, std::move(args));
    dnn.wait();
    ctx.set_output("Out", std::move(out), g.offsets(ctx));
  }

 private:
  // Each input's runs of g.inner[i] elements of its storage, one per outer index, placed at
  // g.at[i] in Out's rows of g.out_inner.
  static void copy_runs(std::span<const Tensor> xs, const concat_geometry& g, T* y) {
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const T* x = xs[i].template data<T>();  // const: read only, its version stays
      const std::int64_t inner = g.inner[i];
      for (std::int64_t o = 0; o < g.outer; ++o)
        std::copy(x + o * inner, x + (o + 1) * inner, y + o * g.out_inner + g.at[i]);
    }
  }

  // A row-major tensor of any rank, described by its strides.
  static dnnl::memory plain_memory(const Tensor& t, onednn_context& dnn) {
    const dnnl::memory::dims shape = detail::onednn_dims(t.dims());
    dnnl::memory::dims strides(shape.size());
    std::int64_t step = 1;
    for (std::size_t d = shape.size(); d-- > 0;) {
      strides[d] = step;
      step *= shape[d];
    }
    return {dnnl::memory::desc(shape, dnnl::memory::data_type::f32, strides), dnn.engine(),
            static_cast<std::byte*>(t.handle()) + t.offset()};
  }
};
namespace detail {
inline constexpr auto concat_onednn_kernels =
    fluidk::kernels_on<cpu, library::onednn>(concat_onednn<float>{});
}
#else
namespace detail {
inline constexpr auto concat_onednn_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_OPENCL
template <class T>
struct concat_opencl {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the OpenCL concat kernel computes in float");

  void operator()(execution_context& ctx) const {
    const std::vector<Tensor> xs = concat_geometry::inputs(ctx, detail::row_major);
    const concat_geometry g = concat_geometry::of(ctx, xs);
    Tensor out(g.out, data_type::float32, ctx.place(), xs[0].layout());
    for (std::size_t i = 0; i < xs.size(); ++i)
      if (g.outer * g.inner[i] > 0)
        detail::opencl_launch_from(ctx, detail::shape_opencl_source, "concat_part_f32",
                                   std::size_t(g.outer * g.inner[i]), 1, detail::cl_arg<float>(xs[i]),
                                   detail::cl_buffer(out), cl_ulong(g.outer), cl_ulong(g.inner[i]),
                                   cl_ulong(g.out_inner), cl_ulong(g.at[i]));
    ctx.set_output("Out", std::move(out), g.offsets(ctx));
  }
};
namespace detail {
inline constexpr auto concat_opencl_kernels = fluidk::kernels_on<opencl>(concat_opencl<float>{});
}
#else
namespace detail {
inline constexpr auto concat_opencl_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_CUDA
template <class T>
struct concat_cuda {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    detail::cuda_call call(ctx);
    const std::vector<Tensor> xs = concat_geometry::inputs(ctx, detail::row_major);
    const concat_geometry g = concat_geometry::of(ctx, xs);
    Tensor out(g.out, data_type_of<T>, ctx.place(), xs[0].layout());
    for (std::size_t i = 0; i < xs.size(); ++i)
      detail::cuda_require(
          cuda_launch::concat_part<T>(call.stream(), detail::device_data<T>(xs[i]),
                                      detail::device_data<T>(out), g.outer, g.inner[i], g.out_inner, g.at[i]),
          ctx, "the concat kernel");
    ctx.set_output("Out", std::move(out), g.offsets(ctx));
  }
};
namespace detail {
inline constexpr auto concat_cuda_kernels =
    fluidk::kernels_on<cuda>(concat_cuda<float>{}, concat_cuda<double>{});
}
#else
namespace detail {
inline constexpr auto concat_cuda_kernels = no_kernels();
}
#endif

struct concat {
  static constexpr std::string_view name = "concat";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // Where the expected kernel type has no kernel (use_onednn with another data type than
  // float or in a build without oneDNN; another data type on a device), the CPU kernel of the
  // same data type runs, counted and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(concat_cpu<float>{}, concat_cpu<double>{}, concat_cpu<std::int32_t>{},
                              concat_cpu<std::int64_t>{}),
      detail::concat_onednn_kernels, detail::concat_cuda_kernels, detail::concat_opencl_kernels);
};

}  // namespace fluidk::ops
