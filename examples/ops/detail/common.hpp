// What the example operators share: errors that name the operator, attribute readers that
// accept Fluid's int and int64 kinds, and shape helpers. (Outputs and their sequence
// offsets are written through execution_context: set_output, share_lod.)
#pragma once

#include <array>
#include <boost/hana/basic_tuple.hpp>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fluidk/devices/cudnn_tags.hpp>
#include <fluidk/devices/onednn_tags.hpp>
#include <fluidk/execution_context.hpp>
#include <fluidk/lod_tensor.hpp>
#include <fluidk/tensor.hpp>
#include <fluidk/transforms/cpu.hpp>
#include <fluidk/transforms/runtime.hpp>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

// 1 when the oneDNN kernels are compiled in (fluidk_onednn_dep defines FLUIDK_HAS_ONEDNN).
#if defined(FLUIDK_HAS_ONEDNN) && FLUIDK_HAS_ONEDNN
#define FLUIDK_OPS_ONEDNN 1
#else
#define FLUIDK_OPS_ONEDNN 0
#endif
// 1 when the OpenCL kernels are compiled in (fluidk_opencl_dep defines FLUIDK_HAS_OPENCL).
#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
#define FLUIDK_OPS_OPENCL 1
#else
#define FLUIDK_OPS_OPENCL 0
#endif
// 1 when the CUDA kernels are compiled in: fluidk_ops_dep defines it when CUDA was found and
// links the launchers of ops/cuda/kernels.cu (a program built otherwise defines it itself).
#ifndef FLUIDK_OPS_CUDA
#define FLUIDK_OPS_CUDA 0
#endif

namespace fluidk::ops::detail {

// The kernel group of a backend that is not compiled in: no entries. An operator lists each
// backend's group in its make_kernels(...) unconditionally; a backend header that is left
// out contributes this.
constexpr auto no_kernels() { return boost::hana::make_basic_tuple(); }

// An error whose message starts with the operator's name.
[[noreturn]] inline void fail(const execution_context& ctx, const std::string& what) {
  throw error("operator '" + std::string(ctx.op_type()) + "': " + what);
}
inline void require(bool condition, const execution_context& ctx, const std::string& what) {
  if (!condition) fail(ctx, what);
}

// relu of one value, as every relu kernel computes it: v above 0, else 0 (NaN too).
template <class T>
constexpr T relu_of(T v) {
  return v > T(0) ? v : T(0);
}

// An integer attribute stored as int or int64, or `fallback` when absent.
inline std::int64_t int_attr(const execution_context& ctx, std::string_view name, std::int64_t fallback) {
  const attribute* a = ctx.attributes().find(name);
  if (a == nullptr) return fallback;
  if (const auto* v = std::get_if<std::int32_t>(a)) return *v;
  if (const auto* v = std::get_if<std::int64_t>(a)) return *v;
  fail(ctx,
       "attribute '" + std::string(name) + "' holds " + std::string(kind_name(*a)) + ", not int or int64");
}

// A list attribute of integers stored as ints or int64s, as int64s (an attribute of any
// other kind is an error naming it).
inline std::vector<std::int64_t> int_list(const execution_context& ctx, std::string_view name,
                                          const attribute& a) {
  if (const auto* v = std::get_if<std::vector<std::int32_t>>(&a)) return {v->begin(), v->end()};
  if (const auto* w = std::get_if<std::vector<std::int64_t>>(&a)) return *w;
  fail(ctx,
       "attribute '" + std::string(name) + "' holds " + std::string(kind_name(a)) + ", not ints or int64s");
}

// A list attribute of exactly N integers stored as ints or int64s, or `fallback` when absent.
template <std::size_t N>
std::array<std::int64_t, N> ints_attr(const execution_context& ctx, std::string_view name,
                                      std::array<std::int64_t, N> fallback) {
  const attribute* a = ctx.attributes().find(name);
  if (a == nullptr) return fallback;
  const std::vector<std::int64_t> values = int_list(ctx, name, *a);
  if (values.size() != N)
    fail(ctx, "attribute '" + std::string(name) + "' needs " + std::to_string(N) + " values, but has " +
                  std::to_string(values.size()));
  std::array<std::int64_t, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = values[i];
  return out;
}

// A shape attribute: a list of non-negative ints or int64s (required).
inline dims shape_attr(const execution_context& ctx, std::string_view name) {
  const attribute* a = ctx.attributes().find(name);
  if (a == nullptr) fail(ctx, "needs attribute '" + std::string(name) + "' (a list of non-negative extents)");
  const std::vector<std::int64_t> values = int_list(ctx, name, *a);
  for (std::int64_t extent : values)
    require(extent >= 0, ctx, "attribute '" + std::string(name) + "' has a negative extent");
  return dims(std::span<const std::int64_t>(values));
}

// A number attribute stored as float, double, int or int64, or `fallback` when absent.
inline double number_attr(const execution_context& ctx, std::string_view name, double fallback) {
  const attribute* a = ctx.attributes().find(name);
  if (a == nullptr) return fallback;
  if (const auto* v = std::get_if<float>(a)) return *v;
  if (const auto* v = std::get_if<double>(a)) return *v;
  if (const auto* v = std::get_if<std::int32_t>(a)) return double(*v);
  if (const auto* v = std::get_if<std::int64_t>(a)) return double(*v);
  fail(ctx, "attribute '" + std::string(name) + "' holds " + std::string(kind_name(*a)) + ", not a number");
}

// Refuses attribute `name`'s value (`shown`, as the message writes it) for data type T: `why`
// it cannot be one ("is out of the range of", "is beyond the largest value of").
template <class T>
[[noreturn]] void refuse_number(const execution_context& ctx, std::string_view name, const std::string& shown,
                                std::string_view why) {
  fail(ctx, "attribute '" + std::string(name) + "' = " + shown + " " + std::string(why) + " " +
                std::string(name_of(data_type_of<T>)));
}

// `d`, the value of attribute `name` (`shown` in messages, else d itself), as a T, converted as
// number_attr_as converts a float.
template <class T>
T number_as(const execution_context& ctx, std::string_view name, double d, const std::string& shown = "") {
  static_assert(std::is_floating_point_v<T> || (std::is_signed_v<T> && !std::is_same_v<T, bool>),
                "number_as makes float and signed integer types");
  const auto refuse = [&](std::string_view why) {
    refuse_number<T>(ctx, name, shown.empty() ? std::to_string(d) : shown, why);
  };
  if constexpr (std::is_integral_v<T>) {
    // A whole part in [min, -min) is one of T's values: the values in (min - 1, -min), both
    // ends exact in a double (min - 1 is min for int64, hence the first test).
    constexpr double low = double(std::numeric_limits<T>::min());
    if (!(d < -low && (d >= low || d > low - 1))) refuse("is out of the range of");
  } else {
    // A finite value that rounds to infinity: at or beyond the largest value plus half its
    // unit in the last place (a tie rounds to the even infinity). None for double.
    const double top = double(std::numeric_limits<T>::max()),
                 half_ulp = (top - double(std::nextafter(std::numeric_limits<T>::max(), T(0)))) / 2;
    if (std::isfinite(d) && std::fabs(d) >= top + half_ulp) refuse("is beyond the largest value of");
  }
  return T(d);
}

// A number attribute (as number_attr reads it) as a value of T, the data type of the kernel's
// output, or `fallback` when absent, converted as Fluid's cast does: an integer T takes a
// float's whole part, a float T a value's nearest. An integer attribute is read as it is (an
// int64 beyond 2^53 does not pass through a double), and a value that T cannot hold is an
// error naming the attribute: an integer out of T's range, a float whose whole part is out of
// it (or NaN), a finite value that a floating T would round to infinity.
template <class T>
T number_attr_as(const execution_context& ctx, std::string_view name, T fallback) {
  static_assert(std::is_floating_point_v<T> || (std::is_signed_v<T> && !std::is_same_v<T, bool>),
                "number_attr_as reads float and signed integer types");
  const attribute* a = ctx.attributes().find(name);
  if (a == nullptr) return fallback;
  const auto integer = [&](auto v) {
    if constexpr (std::is_integral_v<T>) {
      if (!std::in_range<T>(v)) refuse_number<T>(ctx, name, std::to_string(v), "is out of the range of");
    }
    return T(v);
  };
  if (const auto* v = std::get_if<std::int32_t>(a)) return integer(*v);
  if (const auto* v = std::get_if<std::int64_t>(a)) return integer(*v);
  return number_as<T>(ctx, name, number_attr(ctx, name, 0.0));
}

// A number given as text in attribute `name` (Fluid's str_value: "123456789", "-0.5", "inf"),
// as a T: an integer T read from the digits exactly, else the nearest double converted as
// number_as converts it. Text that is not a number, or a value that T cannot hold, is an
// error naming the attribute.
template <class T>
T number_text_as(const execution_context& ctx, std::string_view name, std::string_view text) {
  const char* const first = text.data();
  const char* const last = first + text.size();
  const std::string shown = "\"" + std::string(text) + "\"";
  if constexpr (std::is_integral_v<T>) {
    std::int64_t v = 0;
    if (const auto [end, ec] = std::from_chars(first, last, v); ec == std::errc() && end == last) {
      if (!std::in_range<T>(v)) refuse_number<T>(ctx, name, shown, "is out of the range of");
      return T(v);
    }
  }
  double d = 0;
  const auto [end, ec] = std::from_chars(first, last, d);
  if (ec == std::errc::invalid_argument || end != last)  // (the empty text too)
    fail(ctx, "attribute '" + std::string(name) + "' = " + shown + " is not a number");
  if (ec == std::errc::result_out_of_range)  // beyond a double's range (or below its smallest)
    refuse_number<T>(ctx, name, shown, "is out of the range of");
  return number_as<T>(ctx, name, d, shown);
}

// The input of a slot as a tensor that holds data; an error naming the slot otherwise.
inline const Tensor& input(const execution_context& ctx, std::string_view slot, std::size_t i = 0) {
  const Tensor& t = ctx.input(slot, i);
  require(t.initialized(), ctx, "input '" + std::string(slot) + "' holds no data");
  return t;
}

// True when an optional input slot is given and holds data. A variable that holds another kind
// (SelectedRows, LoDTensorArray) is an error, not an input left out: read as absent, a Bias
// held as SelectedRows was silently not added.
inline bool has_input(const execution_context& ctx, std::string_view slot) {
  const auto args = ctx.inputs(slot);
  if (args.empty() || args[0].empty()) return false;
  if (const Variable* v = args[0].variable(); v != nullptr) {
    if (!v->initialized()) return false;
    require(v->is<LoDTensor>(), ctx,
            "input '" + std::string(slot) + "' holds " + std::string(name_of(v->kind())) + ", not LoDTensor");
  }
  return args[0].tensor().initialized();
}

// Whether a layout keeps its elements in logical row-major order: any, NCHW, NC.
inline bool row_major_order(data_layout layout) {
  return layout == data_layout::any || layout == data_layout::nchw || layout == data_layout_of<layout::nc>;
}
// The tensor in its logical row-major order (NCHW for 4-D data): unchanged when it already
// is (row_major_order), else re-laid-out by fluidk's transforms (NHWC and the blocked layouts).
inline Tensor row_major(const Tensor& t) {
  if (row_major_order(t.layout())) return t;
  return transform(t, kernel_key{t.place(), t.dtype(), data_layout::nchw, library_type::plain});
}

// Elements of a tensor's storage (blocked layouts include their zero padding lanes):
// what an elementwise kernel runs over when its inputs share one layout.
inline std::int64_t storage_elements(const Tensor& t) {
  return std::int64_t(t.storage_bytes() / size_of(t.dtype()));
}

// Out = f(x) of each element of input X's storage, as T (X's data type) -> R: Out in X's dims
// and layout, with X's sequence offsets. The CPU kernel of an elementwise operator of one
// input (a blocked layout's padding lanes are mapped like the elements).
template <class T, class R = T, class F>
void map_storage(execution_context& ctx, F f) {
  const Tensor& x = input(ctx, "X");
  Tensor out(x.dims(), data_type_of<R>, ctx.place(), x.layout());
  const T* in = x.data<T>();
  R* y = out.data<R>();
  const std::int64_t n = storage_elements(x);
  for (std::int64_t i = 0; i < n; ++i) y[i] = f(in[i]);
  ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
}

// The product of dims [begin, end).
inline std::int64_t product(const dims& d, std::size_t begin, std::size_t end) {
  std::int64_t n = 1;
  for (std::size_t i = begin; i < end; ++i) n *= d[i];
  return n;
}

}  // namespace fluidk::ops::detail
