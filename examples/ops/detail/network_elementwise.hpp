// What elementwise_add, elementwise_mul, elementwise_sub and elementwise_div share: the one
// broadcasting rule and their kernels (CPU plain, oneDNN's binary primitive, OpenCL, CUDA for add
// and mul), with their OpenCL C source; the compare and logical operators reuse the rule. (clip and
// sigmoid share ops/detail/network_activation.hpp; softmax and dropout keep their own sources.)
#pragma once

#include <algorithm>
#include <array>
#include <boost/mp11/list.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <fluidk/tensor.hpp>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "ops/detail/common.hpp"
#if FLUIDK_OPS_ONEDNN
#include "ops/detail/network_activation.hpp"
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

// --- broadcasting (elementwise_add, elementwise_mul) ----------------------------------------

// How X and Y line up, by attribute axis:
//   -1 (the default): numpy's multidirectional broadcasting (ONNX Add, Mul): the dims aligned
//       from the right, each pair equal or one of them 1; Out has the broadcast dims.
//   >= 0: Fluid's rule: Y's dims, its trailing 1s dropped, are X's from dimension axis on, and
//       Y repeats over the others (a bias [C] at axis 1 of [N, C, H, W]); Out has X's dims.
// X and Y of the same dims add elementwise whatever the axis, over their storage when they
// share a layout (blocked ones included: their zero padding lanes give zero).
struct broadcast_geometry {
  bool same = false;
  dims out;
  data_layout layout = data_layout::any;  // Out's
  // Each operand's extent along each of Out's dims (1 where it repeats).
  std::array<std::int64_t, max_rank> x_aligned{}, y_aligned{};
  // What the loops run over, row-major: Out's dims with the 1s dropped and neighbours merged
  // where both operands step through them alike (a bias add is [N, C, H*W] with Y's strides
  // [0, 1, 0]); each operand's element strides along them (0 where it repeats). The same
  // dims: the storage as one run.
  int rank = 1;
  std::array<std::int64_t, max_rank> extents{}, x_strides{}, y_strides{};
  std::int64_t total = 0;  // elements of Out's storage

  bool full_x() const { return std::equal(x_aligned.begin(), x_aligned.begin() + out.rank(), out.begin()); }
  bool full_y() const { return std::equal(y_aligned.begin(), y_aligned.begin() + out.rank(), out.begin()); }

  // X's sequence offsets, when Out keeps X's rows.
  lod offsets(const execution_context& ctx, const dims& x) const {
    if (out.rank() != x.rank() || (out.rank() > 0 && out[0] != x[0])) return {};
    return ctx.input_lod("X");
  }

  // X and Y as given: the strides describe them in their row-major order (the kernels pass them
  // through elementwise_operands first), `same` and the dims hold for any layout.
  static broadcast_geometry of(const execution_context& ctx, const Tensor& x, const Tensor& y) {
    broadcast_geometry g;
    const dims& xd = x.dims();
    const dims& yd = y.dims();
    g.same = xd == yd && (x.layout() == y.layout() ||
                          (detail::row_major_order(x.layout()) && detail::row_major_order(y.layout())));
    if (g.same) {
      g.out = xd;
      g.layout = x.layout();
      std::copy(xd.begin(), xd.end(), g.x_aligned.begin());
      std::copy(xd.begin(), xd.end(), g.y_aligned.begin());
      g.total = detail::storage_elements(x);
      g.extents[0] = g.total;
      g.x_strides[0] = g.y_strides[0] = 1;
      return g;
    }
    const std::int64_t axis = detail::int_attr(ctx, "axis", -1);
    detail::require(axis >= -1, ctx,
                    "axis (" + std::to_string(axis) +
                        ") must be -1 (numpy broadcasting) or at least 0 (Y's dims are X's from axis on)");
    const std::size_t rx = xd.rank(), ry = yd.rank();
    if (axis == -1) {
      const std::size_t rank = std::max(rx, ry);
      std::array<std::int64_t, max_rank> out{};
      for (std::size_t d = 0; d < rank; ++d) {
        const std::int64_t a = d + rx >= rank ? xd[d + rx - rank] : 1;
        const std::int64_t b = d + ry >= rank ? yd[d + ry - rank] : 1;
        if (a != b && a != 1 && b != 1)
          detail::fail(ctx, (rx >= ry ? "Y " + yd.to_string() + " does not broadcast to X " + xd.to_string() +
                                            " at axis " + std::to_string(rx - ry)
                                      : "X " + xd.to_string() + " does not broadcast to Y " + yd.to_string() +
                                            " at axis " + std::to_string(ry - rx)) +
                                ": along Out's dimension " + std::to_string(d) + ", X has " +
                                std::to_string(a) + " and Y " + std::to_string(b) +
                                " (numpy broadcasting, axis -1: equal, or one of them 1)");
        g.x_aligned[d] = a;
        g.y_aligned[d] = b;
        out[d] = a == 1 ? b : a;
      }
      g.out = dims(std::span<const std::int64_t>(out.data(), rank));
    } else {
      std::size_t kept = ry;  // Fluid drops Y's trailing 1s
      while (kept > 0 && yd[kept - 1] == 1) --kept;
      bool fits = std::size_t(axis) + kept <= rx;
      for (std::size_t i = 0; fits && i < kept; ++i) fits = xd[std::size_t(axis) + i] == yd[i];
      detail::require(fits, ctx,
                      "Y " + yd.to_string() + " does not broadcast to X " + xd.to_string() + " at axis " +
                          std::to_string(axis) +
                          " (Fluid's rule for axis >= 0: Y's dims, without its trailing 1s, "
                          "are X's from dimension axis on)");
      g.out = xd;
      for (std::size_t d = 0; d < rx; ++d) {
        g.x_aligned[d] = xd[d];
        g.y_aligned[d] = d >= std::size_t(axis) && d < std::size_t(axis) + kept ? xd[d] : 1;
      }
    }
    // Out's labels: a row-major operand of Out's rank lends its own (NCHW stays NCHW).
    const auto label = [](const Tensor& t) {
      return detail::row_major_order(t.layout()) ? t.layout() : data_layout::nchw;
    };
    g.layout = rx == g.out.rank() ? label(x) : ry == g.out.rank() ? label(y) : data_layout::any;
    g.total = g.out.numel();
    // Row-major strides of each aligned operand, 0 where it repeats; then the loops' dims.
    std::array<std::int64_t, max_rank> xs{}, ys{};
    std::int64_t sx = 1, sy = 1;
    for (std::size_t d = g.out.rank(); d-- > 0;) {
      xs[d] = g.x_aligned[d] == 1 ? 0 : sx;
      ys[d] = g.y_aligned[d] == 1 ? 0 : sy;
      sx *= g.x_aligned[d];
      sy *= g.y_aligned[d];
    }
    g.rank = 0;
    for (std::size_t d = 0; d < g.out.rank(); ++d) {
      const std::int64_t e = g.out[d];
      if (e == 1) continue;
      if (g.rank > 0 && g.x_strides[g.rank - 1] == xs[d] * e && g.y_strides[g.rank - 1] == ys[d] * e) {
        g.extents[g.rank - 1] *= e;
      } else {
        g.extents[g.rank] = e;
        ++g.rank;
      }
      g.x_strides[g.rank - 1] = xs[d];
      g.y_strides[g.rank - 1] = ys[d];
    }
    if (g.rank == 0) {  // one element
      g.rank = 1;
      g.extents[0] = 1;
      g.x_strides[0] = g.y_strides[0] = 0;
    }
    return g;
  }
};

// The operations: Fluid's elementwise_add, elementwise_mul, elementwise_sub and
// elementwise_div, and their code in the device kernels.
struct add_operation {
  static constexpr int code = 0;
  template <class T>
  static T apply(T a, T b) {
    return a + b;
  }
};
struct mul_operation {
  static constexpr int code = 1;
  template <class T>
  static T apply(T a, T b) {
    return a * b;
  }
};
struct sub_operation {
  static constexpr int code = 2;
  template <class T>
  static T apply(T a, T b) {
    return a - b;
  }
};
// Integers divide as C++ (and ONNX) do, towards zero; a zero divisor is an error rather than
// undefined behaviour, and the one quotient that overflows (min / -1) wraps to min.
struct div_operation {
  static constexpr int code = 3;
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      if (b == T(0)) throw error("integer division by zero");
      if (b == T(-1)) return a == std::numeric_limits<T>::min() ? a : T(-a);
    }
    return a / b;
  }
};

namespace detail {
// Whether Op gives zero (false) for two zeros, so that a pass over blocked storage leaves the
// padding lanes zero, as every reader of blocked data expects (a oneDNN convolution multiplies
// them by its zero-padded weights: a NaN there made every output NaN). add, sub, mul, the
// logical operations and the strict comparisons do; div does not (0 / 0 is NaN for floats and
// an error for integers), nor do equal, less_equal and greater_equal (true).
template <class T, class Op, class R = T>
bool keeps_zero() {
  if constexpr (std::is_same_v<Op, div_operation>)
    return false;
  else
    return Op::apply(T(0), T(0)) == R(0);
}

// Whether a tensor's storage has padding lanes: a blocked layout whose blocked dim is not a
// whole number of blocks.
inline bool has_padding_lanes(const Tensor& t) {
  const data_layout l = t.layout();
  return l.blocked() && l.block_axis() < int(t.dims().rank()) &&
         t.dims()[std::size_t(l.block_axis())] % l.block_size() != 0;
}

// X and Y as the kernels read them: as given when they share dims and layout (their storage
// runs elementwise) and the pass keeps padding lanes zero (`keeps_zero`: the operation gives
// zero for two zeros, or there are none); else both in row-major order (the broadcast is on
// logical dimensions). (Kernels pass keeps_zero<...>() through a bool variable: as the
// argument itself it would make the call, and so x and y, type-dependent in their templates.)
inline std::pair<Tensor, Tensor> elementwise_operands(const execution_context& ctx, bool keeps_zero) {
  const Tensor& x = input(ctx, "X");
  const Tensor& y = input(ctx, "Y");
  if (x.dims() == y.dims() && x.layout() == y.layout() && (keeps_zero || !has_padding_lanes(x)))
    return {x, y};
  return {row_major(x), row_major(y)};
}

// c = op(a, b) over the geometry's runs: the last dim innermost, the others counted like an
// odometer, each operand's offset moved by its strides. R is the result's type (bool for the
// comparisons).
template <class T, class Op, class R = T>
void broadcast_loop(const broadcast_geometry& g, const T* a, const T* b, R* c) {
  if (g.total == 0) return;
  const int last = g.rank - 1;
  const std::int64_t n = g.extents[std::size_t(last)], sa = g.x_strides[std::size_t(last)],
                     sb = g.y_strides[std::size_t(last)];
  std::array<std::int64_t, max_rank> index{};
  std::int64_t ao = 0, bo = 0;
  for (std::int64_t done = 0; done < g.total; done += n) {
    for (std::int64_t k = 0; k < n; ++k) c[done + k] = Op::apply(a[ao + k * sa], b[bo + k * sb]);
    for (int d = last - 1; d >= 0; --d) {
      const std::size_t i = std::size_t(d);
      ao += g.x_strides[i];
      bo += g.y_strides[i];
      if (++index[i] < g.extents[i]) break;
      ao -= g.x_strides[i] * g.extents[i];
      bo -= g.y_strides[i] * g.extents[i];
      index[i] = 0;
    }
  }
}
}  // namespace detail

// Out = Op::apply(x, y) with broadcasting, Out of R (T's own, or bool for the comparisons).
template <class T, class Op, class R = T>
struct elementwise_binary_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const bool keeps_zero = detail::keeps_zero<T, Op, R>();
    const auto [x, y] = detail::elementwise_operands(ctx, keeps_zero);
    const broadcast_geometry g = broadcast_geometry::of(ctx, x, y);
    Tensor out(g.out, data_type_of<R>, ctx.place(), g.layout);
    detail::broadcast_loop<T, Op, R>(g, x.template data<T>(), y.template data<T>(), out.template data<R>());
    ctx.set_output("Out", std::move(out), g.offsets(ctx, x.dims()));
  }
};

#if FLUIDK_OPS_ONEDNN
namespace detail {
// A row-major oneDNN description of any rank (plain_format stops at 6), by its strides.
inline dnnl::memory::desc onednn_row_major_desc(std::span<const std::int64_t> shape) {
  dnnl::memory::dims d(shape.begin(), shape.end()), strides(shape.size());
  std::int64_t step = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= d[i];
  }
  return {d, dnnl::memory::data_type::f32, strides};
}
inline dnnl::memory onednn_at(const dnnl::memory::desc& desc, const Tensor& t, const dnnl::engine& engine) {
  return {desc, engine, static_cast<std::byte*>(t.handle()) + t.offset()};
}

// Out = A op B with A and Out in the blocked layout nChw<block>c ([N, C, H, W] with channel
// blocks of `block` lanes) and B row-major of dims `b_dims` (each 1 or Out's): oneDNN's binary
// has only its reference implementation when B repeats and the block is not its vector
// length (nChw8c on AVX-512: 15-50 ms a call on a MobileNet activation), where this is one
// pass. The padding lanes of Out (channels C and up) are written as zeros, as oneDNN writes
// them.
template <class Op, std::int64_t block, bool b_first>
void blocked_broadcast(const float* a, const float* b, float* out, const dims& d,
                       std::span<const std::int64_t> b_dims) {
  // Op(a, b), or Op(b, a) where B is the operation's first operand (sub and div do not commute).
  const auto apply = [](float av, float bv) { return b_first ? Op::apply(bv, av) : Op::apply(av, bv); };
  const std::int64_t n = d[0], c = d[1], hw = d[2] * d[3];
  const std::int64_t blocks = (c + block - 1) / block;
  // B's element strides along N, C, H, W; 0 where it repeats.
  std::int64_t bs[4];
  for (std::int64_t i = 3, step = 1; i >= 0; --i) {
    bs[i] = b_dims[std::size_t(i)] == 1 ? 0 : step;
    step *= b_dims[std::size_t(i)];
  }
  for (std::int64_t in = 0; in < n; ++in)
    for (std::int64_t cb = 0; cb < blocks; ++cb) {
      const std::int64_t base = (in * blocks + cb) * hw * block;
      const std::int64_t lanes = std::min(block, c - cb * block);
      const float* bc = b + in * bs[0] + cb * block * bs[1];
      if (bs[2] == 0 && bs[3] == 0) {
        // B constant over the plane (a per-channel bias or scale): its lanes once.
        float lane[block] = {};
        for (std::int64_t l = 0; l < lanes; ++l) lane[l] = bc[l * bs[1]];
        for (std::int64_t p = 0; p < hw; ++p) {
          const std::int64_t at = base + p * block;
          for (std::int64_t l = 0; l < block; ++l) out[at + l] = l < lanes ? apply(a[at + l], lane[l]) : 0.f;
        }
        continue;
      }
      for (std::int64_t h = 0; h < d[2]; ++h)
        for (std::int64_t w = 0; w < d[3]; ++w) {
          const std::int64_t at = base + (h * d[3] + w) * block;
          const float* bp = bc + h * bs[2] + w * bs[3];
          for (std::int64_t l = 0; l < block; ++l)
            out[at + l] = l < lanes ? apply(a[at + l], bp[l * bs[1]]) : 0.f;
        }
    }
}
}  // namespace detail

// oneDNN's binary primitive, declared for the wildcard layout and for nChw8c and nChw16c:
//   - the same dims and layout: one run over the storage, any layout (oneDNN's jit);
//   - otherwise the operand of Out's dims is source 0 (oneDNN 2 broadcasts source 1 only).
//     Source 0 blocked, of Out's rank: Out in its layout and the other operand row-major,
//     combined by blocked_broadcast in the operation's order (oneDNN's jit takes a repeating
//     source 1 only in the blocked layout of its own vector length, the others by its
//     reference implementation; the loop reads the operand as it is, with no reorder); else
//     both in row-major order, described by strides, where that order is the operation's: Y
//     the full one, sub and div (which do not commute) take the plain kernel;
//   - neither of Out's dims (both broadcast), or empty: the plain kernel, which computes the
//     same numbers.
// The primitive is kept in the context's oneDNN cache by its algorithm and descriptions.
template <class Op>
struct elementwise_binary_onednn {
  using dtype = float;
  using layouts = boost::mp11::mp_list<layout::any, layout::nChw8c, layout::nChw16c>;

  void operator()(execution_context& ctx) const {
    using dnnl::memory;
    const Tensor& x = detail::input(ctx, "X");
    const Tensor& y = detail::input(ctx, "Y");
    const broadcast_geometry g = broadcast_geometry::of(ctx, x, y);
    const bool x_full = g.full_x();
    if (g.total == 0 || g.out.rank() == 0 || (!x_full && !g.full_y()))
      return elementwise_binary_cpu<float, Op>{}(ctx);
    onednn_context& dnn = detail::onednn_of(ctx);
    const dnnl::algorithm algorithm = Op::code == add_operation::code   ? dnnl::algorithm::binary_add
                                      : Op::code == mul_operation::code ? dnnl::algorithm::binary_mul
                                      : Op::code == sub_operation::code ? dnnl::algorithm::binary_sub
                                                                        : dnnl::algorithm::binary_div;
    if (g.same) {
      const bool keeps_zero = detail::keeps_zero<float, Op>();
      // (Padding lanes off the channels: the plain kernel, on row-major operands.)
      if (!keeps_zero && detail::has_padding_lanes(x) && x.layout().block_axis() != 1)
        return elementwise_binary_cpu<float, Op>{}(ctx);
      Tensor out(g.out, data_type::float32, ctx.place(), x.layout());
      const memory::desc flat({g.total}, memory::data_type::f32, memory::format_tag::a);
      run(dnn, algorithm, detail::onednn_at(flat, x, dnn.engine()), detail::onednn_at(flat, y, dnn.engine()),
          detail::onednn_at(flat, out, dnn.engine()));
      // div's 0 / 0 in the padding lanes (the kernel's blocked layouts block the channels).
      if (!keeps_zero) detail::activation_zero_padding(out);
      ctx.set_output("Out", std::move(out), g.offsets(ctx, x.dims()));
      return;
    }
    constexpr bool commutes = Op::code == add_operation::code || Op::code == mul_operation::code;
    const Tensor& full = x_full ? x : y;
    const Tensor& other = x_full ? y : x;
    const std::span<const std::int64_t> other_dims(x_full ? g.y_aligned.data() : g.x_aligned.data(),
                                                   g.out.rank());
    // Out in the full operand's blocked layout: where it has that operand's rank (a rank-4
    // operand broadcast against a rank-5 one gives a rank-5 Out, which no 4-D blocked layout
    // holds: row-major then).
    const bool blocked = full.layout().blocked() && g.out.rank() == full.dims().rank();
    if (!x_full && !commutes && !blocked) return elementwise_binary_cpu<float, Op>{}(ctx);
    const Tensor source1 = detail::row_major(other);
    if (blocked) {
      Tensor out(g.out, data_type::float32, ctx.place(), full.layout());
      const float* a = full.data<float>();
      const float* b = source1.data<float>();
      float* o = out.data<float>();
      if (full.layout().block_size() == 16 && x_full)
        detail::blocked_broadcast<Op, 16, false>(a, b, o, g.out, other_dims);
      else if (full.layout().block_size() == 16)
        detail::blocked_broadcast<Op, 16, !commutes>(a, b, o, g.out, other_dims);
      else if (full.layout().block_size() == 8 && x_full)
        detail::blocked_broadcast<Op, 8, false>(a, b, o, g.out, other_dims);
      else if (full.layout().block_size() == 8)
        detail::blocked_broadcast<Op, 8, !commutes>(a, b, o, g.out, other_dims);
      else
        return elementwise_binary_cpu<float, Op>{}(ctx);
      ctx.set_output("Out", std::move(out), g.offsets(ctx, x.dims()));
      return;
    }
    const Tensor source0 = detail::row_major(full);
    const memory::desc desc0 = detail::onednn_row_major_desc(std::span(g.out.begin(), g.out.end()));
    const memory src1 = detail::onednn_at(detail::onednn_row_major_desc(other_dims), source1, dnn.engine());
    Tensor out(g.out, data_type::float32, ctx.place(), g.layout);
    try {
      run(dnn, algorithm, detail::onednn_at(desc0, source0, dnn.engine()), src1,
          detail::onednn_at(desc0, out, dnn.engine()));
    } catch (const dnnl::error&) {
      // No implementation for these descriptions: the plain kernel's numbers are the same.
      return elementwise_binary_cpu<float, Op>{}(ctx);
    }
    ctx.set_output("Out", std::move(out), g.offsets(ctx, x.dims()));
  }

 private:
  static void run(onednn_context& dnn, dnnl::algorithm algorithm, const dnnl::memory& src0,
                  const dnnl::memory& src1, const dnnl::memory& dst) {
    detail::onednn_key key("binary");
    key << int(algorithm) << src0.get_desc() << src1.get_desc() << dst.get_desc();
    const auto kept = detail::kept_primitive<dnnl::binary>(dnn, key, [&] {
      return dnnl::binary::primitive_desc(
          dnnl::binary::desc(algorithm, src0.get_desc(), src1.get_desc(), dst.get_desc()),
          detail::kept_attr(), dnn.engine());
    });
    detail::run_kept(dnn, *kept, {{DNNL_ARG_SRC_0, src0}, {DNNL_ARG_SRC_1, src1}, {DNNL_ARG_DST, dst}});
    dnn.wait();
  }
};

#endif

#if FLUIDK_OPS_OPENCL
namespace detail {
// The OpenCL C kernel of elementwise_add and elementwise_mul. Element offsets come as arguments, so a tensor
// that is a slice of a larger buffer works like any other; each computes what the CPU kernels compute.
inline constexpr const char* elementwise_opencl_source = R"CLC(
// c = a op b (op 0: +, 1: *, 2: -, 3: /) over `rank` dims of `extents`, each operand stepping by its own
// strides (0 where it repeats). Vectors carry the dims; vstore8 makes them indexable.
__kernel void binary_broadcast_f32(__global const float* a, ulong a_off, __global const float* b, ulong b_off,
                                   __global float* c, ulong total, int op, int rank, ulong8 extents,
                                   ulong8 a_strides, ulong8 b_strides) {
  const size_t i = get_global_id(0);
  if (i >= total) return;
  ulong e[8], as[8], bs[8];
  vstore8(extents, 0, e);
  vstore8(a_strides, 0, as);
  vstore8(b_strides, 0, bs);
  ulong rest = i, ai = a_off, bi = b_off;
  for (int d = rank - 1; d >= 0; --d) {
    const ulong k = rest % e[d];
    rest /= e[d];
    ai += k * as[d];
    bi += k * bs[d];
  }
  const float u = a[ai], v = b[bi];
  c[i] = op == 0 ? u + v : op == 1 ? u * v : op == 2 ? u - v : u / v;
}
)CLC";

inline cl_ulong8 cl_ulong8_of(const std::array<std::int64_t, max_rank>& v) {
  static_assert(max_rank <= 8, "binary_broadcast_f32 takes up to 8 dims");
  cl_ulong8 out{};
  for (std::size_t i = 0; i < max_rank; ++i) out.s[i] = cl_ulong(v[i]);
  return out;
}
}  // namespace detail

template <class Op>
struct elementwise_binary_opencl {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const bool keeps_zero = detail::keeps_zero<float, Op>();
    const auto [x, y] = detail::elementwise_operands(ctx, keeps_zero);
    const broadcast_geometry g = broadcast_geometry::of(ctx, x, y);
    Tensor out(g.out, data_type::float32, ctx.place(), g.layout);
    if (g.total > 0)
      detail::opencl_launch_from(ctx, detail::elementwise_opencl_source, "binary_broadcast_f32",
                                 std::size_t(g.total), 1, detail::cl_arg<float>(x), detail::cl_arg<float>(y),
                                 detail::cl_buffer(out), cl_ulong(g.total), cl_int(Op::code), cl_int(g.rank),
                                 detail::cl_ulong8_of(g.extents), detail::cl_ulong8_of(g.x_strides),
                                 detail::cl_ulong8_of(g.y_strides));
    ctx.set_output("Out", std::move(out), g.offsets(ctx, x.dims()));
  }
};
#endif

#if FLUIDK_OPS_CUDA
template <class T, class Op>
struct elementwise_binary_cuda {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    static_assert(max_rank <= cuda_launch::broadcast_max_rank);
    detail::cuda_call call(ctx);
    const bool keeps_zero = detail::keeps_zero<T, Op>();
    const auto [x, y] = detail::elementwise_operands(ctx, keeps_zero);
    const broadcast_geometry g = broadcast_geometry::of(ctx, x, y);
    Tensor out(g.out, data_type_of<T>, ctx.place(), g.layout);
    cuda_launch::broadcast_shape shape{};
    shape.rank = g.rank;
    for (std::size_t d = 0; d < std::size_t(g.rank); ++d) {
      shape.extents[d] = g.extents[d];
      shape.a_strides[d] = g.x_strides[d];
      shape.b_strides[d] = g.y_strides[d];
    }
    detail::cuda_require(
        cuda_launch::binary_broadcast<T>(
            call.stream(),
            Op::code == add_operation::code ? cuda_launch::binary_op::add : cuda_launch::binary_op::mul,
            detail::device_data<T>(x), detail::device_data<T>(y), detail::device_data<T>(out), shape,
            g.total),
        ctx, "the elementwise kernel");
    ctx.set_output("Out", std::move(out), g.offsets(ctx, x.dims()));
  }
};
#endif

namespace detail {
// The CUDA kernels of an operation: add and mul have theirs (cuda_launch::binary_op); sub and div
// none, so they fall back to the CPU.
template <class Op>
constexpr auto elementwise_binary_cuda_kernels() {
#if FLUIDK_OPS_CUDA
  if constexpr (Op::code == add_operation::code || Op::code == mul_operation::code)
    return fluidk::kernels_on<cuda>(elementwise_binary_cuda<float, Op>{},
                                    elementwise_binary_cuda<double, Op>{});
  else
    return no_kernels();
#else
  return no_kernels();
#endif
}

// The kernels of elementwise_add (Op add_operation), elementwise_mul (mul_operation),
// elementwise_sub (sub_operation) or elementwise_div (div_operation): CPU plain (float, double,
// int32, int64), oneDNN (float), CUDA (float, double; add and mul), OpenCL (float).
template <class Op>
constexpr auto elementwise_binary_kernels() {
  return fluidk::make_kernels(
      fluidk::kernels_on<cpu>(elementwise_binary_cpu<float, Op>{}, elementwise_binary_cpu<double, Op>{},
                              elementwise_binary_cpu<std::int32_t, Op>{},
                              elementwise_binary_cpu<std::int64_t, Op>{}),
#if FLUIDK_OPS_ONEDNN
      fluidk::kernels_on<cpu, library::onednn>(elementwise_binary_onednn<Op>{}),
#endif
      elementwise_binary_cuda_kernels<Op>(),
#if FLUIDK_OPS_OPENCL
      fluidk::kernels_on<opencl>(elementwise_binary_opencl<Op>{}),
#endif
      no_kernels());
}
}  // namespace detail

}  // namespace fluidk::ops
