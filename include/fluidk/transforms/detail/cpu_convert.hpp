// The element conversions of the CPU transforms, one scalar definition per pair of data types:
// the portable path runs them directly and the vector paths must give the same bits.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "fluidk/bfloat16.hpp"
#include "fluidk/detail/half_rounding.hpp"
#include "fluidk/dtype.hpp"
#include "fluidk/float16.hpp"

namespace fluidk::transforms::cpu_kernels::detail {

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

// Double to integer with the same defined choices as fluidk::detail::saturating_float_to_integer:
// truncation toward zero where the value fits, saturation past either end, NaN -> 0 (C++ leaves
// the last two undefined).
template <std::integral I>
constexpr I saturating_double_to_integer(double value) noexcept {
  using limits = std::numeric_limits<I>;
  if (value != value) return I{0};
  constexpr double past_max = static_cast<double>((limits::max() >> 1) + 1) * 2.0;  // 2^digits, exact
  if (value >= past_max) return limits::max();
  if constexpr (std::is_signed_v<I>) {
    if (value <= -past_max) return limits::min();
  } else {
    if (value <= -1.0) return I{0};
  }
  return static_cast<I>(value);
}

// fluidk's conversion of one element from S to D, for every pair of data types:
//  - integer -> integer: static_cast (modular since C++20);
//  - integer -> floating: static_cast; half types round to nearest even from the integer itself;
//  - floating -> floating: round to nearest even, NaN and infinities kept (double -> half rounds once);
//  - floating -> integer: truncation toward zero, saturating at the target's range, NaN -> 0. C++
//    leaves out-of-range and NaN undefined; this is fluidk's defined choice, the same on every path;
//  - anything -> bool: value != 0 (NaN -> true); bool -> anything: 0 or 1.
template <class D, class S>
constexpr D convert(S s) noexcept {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (std::is_same_v<D, bool>) {
    if constexpr (is_half_v<S>)
      return !(static_cast<float>(s) == 0.0f);
    else
      return !(s == S{0});
  } else if constexpr (std::is_same_v<S, bool>) {
    return s ? D(1) : D(0);
  } else if constexpr (std::is_integral_v<S> && std::is_integral_v<D>) {
    return static_cast<D>(s);
  } else if constexpr (std::is_integral_v<S>) {
    return static_cast<D>(s);
  } else if constexpr (std::is_integral_v<D>) {
    if constexpr (std::is_same_v<S, double>)
      return saturating_double_to_integer<D>(s);
    else
      return fluidk::detail::saturating_float_to_integer<D>(static_cast<float>(s));  // halves: exact in float
  } else if constexpr (is_half_v<D> && is_half_v<S>) {
    return D(static_cast<float>(s));  // exact widening, then the one rounding
  } else {
    return static_cast<D>(s);
  }
}

// Unaligned, aliasing-safe element access. bool is read as a byte != 0, so that a byte other
// than 0 or 1 in a bool tensor is not undefined behaviour here.
template <class T>
inline T load_elem(const std::byte* p) noexcept {
  if constexpr (std::is_same_v<T, bool>) {
    unsigned char c;
    std::memcpy(&c, p, 1);
    return c != 0;
  } else {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }
}
template <class T>
inline void store_elem(std::byte* p, T v) noexcept {
  if constexpr (std::is_same_v<T, bool>) {
    const unsigned char c = v ? 1 : 0;
    std::memcpy(p, &c, 1);
  } else {
    std::memcpy(p, &v, sizeof(T));
  }
}

// Converts n elements, src and dst strides in elements. The one type-erased building block of
// the portable path: layout transforms call it once per run of elements, so the cost of the
// indirect call is spread over a run, and only 100 + 4 small loops are instantiated.
using strided_fn = void (*)(const std::byte* src, std::ptrdiff_t src_stride, std::byte* dst,
                            std::ptrdiff_t dst_stride, std::int64_t n) noexcept;

template <class S, class D>
void strided_convert(const std::byte* src, std::ptrdiff_t ss, std::byte* dst, std::ptrdiff_t ds,
                     std::int64_t n) noexcept {
  constexpr std::ptrdiff_t sz = sizeof(S), dz = sizeof(D);
  if (ss == 1 && ds == 1) {
    // The contiguous case separately, so that compilers can vectorise it.
    for (std::int64_t i = 0; i < n; ++i) store_elem<D>(dst + i * dz, convert<D>(load_elem<S>(src + i * sz)));
  } else {
    for (std::int64_t i = 0; i < n; ++i)
      store_elem<D>(dst + i * ds * dz, convert<D>(load_elem<S>(src + i * ss * sz)));
  }
}

template <std::size_t... I>
constexpr std::array<strided_fn, sizeof...(I)> make_convert_table(std::index_sequence<I...>) noexcept {
  return {
      &strided_convert<type_of<data_type(I / data_type_count)>, type_of<data_type(I % data_type_count)>>...};
}

inline strided_fn convert_fn(data_type from, data_type to) noexcept {
  static constexpr auto table =
      make_convert_table(std::make_index_sequence<data_type_count * data_type_count>{});
  return table[index_of(from) * data_type_count + index_of(to)];
}

// Bit copies for layout transforms of elements of 1, 2, 4 or 8 bytes.
inline strided_fn copy_fn(std::size_t elem_size) noexcept {
  switch (elem_size) {
    case 1:
      return &strided_convert<std::uint8_t, std::uint8_t>;
    case 2:
      return &strided_convert<std::uint16_t, std::uint16_t>;
    case 4:
      return &strided_convert<std::uint32_t, std::uint32_t>;
    case 8:
      return &strided_convert<std::uint64_t, std::uint64_t>;
    default:
      return nullptr;
  }
}

}  // namespace fluidk::transforms::cpu_kernels::detail
