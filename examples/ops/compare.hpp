// The comparisons, Fluid's compare operators (X, Y -> Out): less_than, less_equal, greater_than,
// greater_equal, equal and not_equal. Out is a bool tensor, X op Y elementwise with
// elementwise_add's broadcasting (attribute axis, int, default -1: numpy's multidirectional
// broadcasting, so a Y of one element compares with every element of X; axis >= 0: Fluid's rule).
// X and Y share a data type. Out keeps X's sequence offsets when it has X's dims.
//
// Kernels: CPU plain (float, double, int32, int64) and OpenCL (float, int64); elsewhere the
// CPU's runs as a fallback.
#pragma once

#include <array>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <string_view>
#include <type_traits>
#include <utility>

#include "ops/detail/common.hpp"
#include "ops/detail/network_elementwise.hpp"
#if FLUIDK_OPS_OPENCL
#include "ops/detail/opencl.hpp"
#endif

namespace fluidk::ops {

// The comparisons, each with its code in the OpenCL kernel.
struct less_than_comparison {
  static constexpr std::string_view name = "less_than";
  static constexpr int code = 0;
  template <class T>
  static bool apply(T a, T b) {
    return a < b;
  }
};
struct less_equal_comparison {
  static constexpr std::string_view name = "less_equal";
  static constexpr int code = 1;
  template <class T>
  static bool apply(T a, T b) {
    return a <= b;
  }
};
struct greater_than_comparison {
  static constexpr std::string_view name = "greater_than";
  static constexpr int code = 2;
  template <class T>
  static bool apply(T a, T b) {
    return a > b;
  }
};
struct greater_equal_comparison {
  static constexpr std::string_view name = "greater_equal";
  static constexpr int code = 3;
  template <class T>
  static bool apply(T a, T b) {
    return a >= b;
  }
};
struct equal_comparison {
  static constexpr std::string_view name = "equal";
  static constexpr int code = 4;
  template <class T>
  static bool apply(T a, T b) {
    return a == b;
  }
};
struct not_equal_comparison {
  static constexpr std::string_view name = "not_equal";
  static constexpr int code = 5;
  template <class T>
  static bool apply(T a, T b) {
    return a != b;
  }
};

// elementwise_add's CPU kernel with a bool Out.
template <class T, class Cmp>
using compare_cpu = elementwise_binary_cpu<T, Cmp, bool>;

#if FLUIDK_OPS_OPENCL
namespace detail {
// One kernel per data type, over elementwise_add's geometry; Out is bool, one byte an element.
inline constexpr const char* compare_opencl_source = R"CLC(
#define FLUIDK_COMPARE(NAME, T)                                                                      \
__kernel void NAME(__global const T* a, ulong a_off, __global const T* b, ulong b_off,              \
                   __global uchar* c, ulong total, int op, int rank, ulong8 extents,                \
                   ulong8 a_strides, ulong8 b_strides) {                                             \
  const size_t i = get_global_id(0);                                                                 \
  if (i >= total) return;                                                                            \
  ulong e[8], as[8], bs[8];                                                                          \
  vstore8(extents, 0, e);                                                                            \
  vstore8(a_strides, 0, as);                                                                         \
  vstore8(b_strides, 0, bs);                                                                         \
  ulong rest = i, ai = a_off, bi = b_off;                                                            \
  for (int d = rank - 1; d >= 0; --d) {                                                              \
    const ulong k = rest % e[d];                                                                     \
    rest /= e[d];                                                                                    \
    ai += k * as[d];                                                                                 \
    bi += k * bs[d];                                                                                 \
  }                                                                                                  \
  const T u = a[ai], v = b[bi];                                                                      \
  c[i] = op == 0 ? u < v : op == 1 ? u <= v : op == 2 ? u > v : op == 3 ? u >= v : op == 4 ? u == v \
                                                                                             : u != v; \
}
FLUIDK_COMPARE(compare_f32, float)
FLUIDK_COMPARE(compare_i64, long)
)CLC";
}  // namespace detail

template <class T, class Cmp>
struct compare_opencl {
  using dtype = T;
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, std::int64_t>,
                "the OpenCL comparisons compute in float and int64");
  void operator()(execution_context& ctx) const {
    const bool keeps_zero = detail::keeps_zero<T, Cmp, bool>();
    const auto [x, y] = detail::elementwise_operands(ctx, keeps_zero);
    const broadcast_geometry g = broadcast_geometry::of(ctx, x, y);
    Tensor out(g.out, data_type::boolean, ctx.place(), g.layout);
    if (g.total > 0)
      detail::opencl_launch_from(
          ctx, detail::compare_opencl_source, std::is_same_v<T, float> ? "compare_f32" : "compare_i64",
          std::size_t(g.total), 1, detail::cl_arg<T>(x), detail::cl_arg<T>(y), detail::cl_buffer(out),
          cl_ulong(g.total), cl_int(Cmp::code), cl_int(g.rank), detail::cl_ulong8_of(g.extents),
          detail::cl_ulong8_of(g.x_strides), detail::cl_ulong8_of(g.y_strides));
    ctx.set_output("Out", std::move(out), g.offsets(ctx, x.dims()));
  }
};
#endif

namespace detail {
template <class Cmp>
constexpr auto compare_opencl_kernels() {
#if FLUIDK_OPS_OPENCL
  return fluidk::kernels_on<opencl>(compare_opencl<float, Cmp>{}, compare_opencl<std::int64_t, Cmp>{});
#else
  return no_kernels();
#endif
}
}  // namespace detail

// A comparison operator; less_than and the others below are its instances.
template <class Cmp>
struct compare_operator {
  static constexpr std::string_view name = Cmp::name;
  static constexpr std::array<std::string_view, 2> inputs{"X", "Y"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // Where the expected kernel type has no kernel (int32 or double on OpenCL, a CUDA place,
  // use_onednn), the CPU kernel of the same data type runs, counted and reported once.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(compare_cpu<float, Cmp>{}, compare_cpu<double, Cmp>{},
                              compare_cpu<std::int32_t, Cmp>{}, compare_cpu<std::int64_t, Cmp>{}),
      detail::compare_opencl_kernels<Cmp>());
};

using less_than = compare_operator<less_than_comparison>;
using less_equal = compare_operator<less_equal_comparison>;
using greater_than = compare_operator<greater_than_comparison>;
using greater_equal = compare_operator<greater_equal_comparison>;
using equal = compare_operator<equal_comparison>;
using not_equal = compare_operator<not_equal_comparison>;

}  // namespace fluidk::ops
