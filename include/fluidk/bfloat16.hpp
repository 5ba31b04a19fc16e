// bfloat16, the top half of an IEEE float, as a storage and interchange type: conversions round once, to
// nearest even, from any source, and arithmetic goes through float.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>

#include "fluidk/detail/half_rounding.hpp"

namespace fluidk {

class bfloat16 {
  using format = detail::bfloat16_format;

 public:
  constexpr bfloat16() noexcept = default;

  constexpr explicit bfloat16(float value) noexcept : bits_(detail::narrow<format>(value)) {}
  constexpr explicit bfloat16(double value) noexcept : bits_(detail::narrow<format>(value)) {}
  // Rounds from the integer itself: going through float first would round twice for large values.
  template <std::integral I>
  constexpr explicit bfloat16(I value) noexcept : bits_(detail::narrow_integer<format>(value)) {}

  static constexpr bfloat16 from_bits(std::uint16_t bits) noexcept {
    bfloat16 result;
    result.bits_ = bits;
    return result;
  }
  constexpr std::uint16_t bits() const noexcept { return bits_; }

  // Exact: every bfloat16 value, NaN payloads included, is representable in float and double.
  constexpr explicit operator float() const noexcept { return detail::widen_to_float<format>(bits_); }
  constexpr explicit operator double() const noexcept { return detail::widen_to_double<format>(bits_); }

  // Truncates toward zero like a float-to-integer cast, but saturates where that cast would be
  // undefined: NaN gives 0 and out-of-range values give the nearest end of I's range. bool is true for
  // any nonzero value, NaN included, as for float.
  template <std::integral I>
  constexpr explicit operator I() const noexcept {
    return detail::saturating_float_to_integer<I>(static_cast<float>(*this));
  }

  constexpr bfloat16 operator+() const noexcept { return *this; }
  // Only the sign bit changes, as IEEE negate requires, NaNs included.
  constexpr bfloat16 operator-() const noexcept {
    return from_bits(static_cast<std::uint16_t>(bits_ ^ 0x8000u));
  }

  // float's 24-bit significand is at least 2 * 8 + 2 bits, so rounding the float result of + - * / to
  // bfloat16 gives the correctly rounded bfloat16 result. Below the normal range float's grid is still
  // 2^16 times finer than bfloat16's, which is enough for these four operations there as well.
  friend constexpr bfloat16 operator+(bfloat16 a, bfloat16 b) noexcept {
    return bfloat16(static_cast<float>(a) + static_cast<float>(b));
  }
  friend constexpr bfloat16 operator-(bfloat16 a, bfloat16 b) noexcept {
    return bfloat16(static_cast<float>(a) - static_cast<float>(b));
  }
  friend constexpr bfloat16 operator*(bfloat16 a, bfloat16 b) noexcept {
    return bfloat16(static_cast<float>(a) * static_cast<float>(b));
  }
  friend constexpr bfloat16 operator/(bfloat16 a, bfloat16 b) noexcept {
    return bfloat16(static_cast<float>(a) / static_cast<float>(b));
  }

  constexpr bfloat16& operator+=(bfloat16 other) noexcept { return *this = *this + other; }
  constexpr bfloat16& operator-=(bfloat16 other) noexcept { return *this = *this - other; }
  constexpr bfloat16& operator*=(bfloat16 other) noexcept { return *this = *this * other; }
  constexpr bfloat16& operator/=(bfloat16 other) noexcept { return *this = *this / other; }

  // IEEE comparisons: NaN is unordered and +0 equals -0, so the bits cannot be compared directly.
  friend constexpr bool operator==(bfloat16 a, bfloat16 b) noexcept {
    return static_cast<float>(a) == static_cast<float>(b);
  }
  friend constexpr bool operator!=(bfloat16 a, bfloat16 b) noexcept {
    return static_cast<float>(a) != static_cast<float>(b);
  }
  friend constexpr bool operator<(bfloat16 a, bfloat16 b) noexcept {
    return static_cast<float>(a) < static_cast<float>(b);
  }
  friend constexpr bool operator<=(bfloat16 a, bfloat16 b) noexcept {
    return static_cast<float>(a) <= static_cast<float>(b);
  }
  friend constexpr bool operator>(bfloat16 a, bfloat16 b) noexcept {
    return static_cast<float>(a) > static_cast<float>(b);
  }
  friend constexpr bool operator>=(bfloat16 a, bfloat16 b) noexcept {
    return static_cast<float>(a) >= static_cast<float>(b);
  }

  friend std::ostream& operator<<(std::ostream& os, bfloat16 value) {
    return os << static_cast<float>(value);
  }

 private:
  std::uint16_t bits_{};
};

constexpr bool isnan(bfloat16 value) noexcept {
  return (value.bits() & 0x7F80u) == 0x7F80u && (value.bits() & 0x007Fu) != 0;
}
constexpr bool isinf(bfloat16 value) noexcept { return (value.bits() & 0x7FFFu) == 0x7F80u; }
constexpr bool isfinite(bfloat16 value) noexcept { return (value.bits() & 0x7F80u) != 0x7F80u; }
constexpr bool signbit(bfloat16 value) noexcept { return (value.bits() & 0x8000u) != 0; }

}  // namespace fluidk

template <>
struct std::numeric_limits<fluidk::bfloat16> {
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr float_denorm_style has_denorm = denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr float_round_style round_style = round_to_nearest;
  // IEEE 754 defines no 16-bit format with an 8-bit exponent, even though this one follows its rules.
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 8;
  static constexpr int digits10 = 2;
  static constexpr int max_digits10 = 4;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -125;
  static constexpr int min_exponent10 = -37;
  static constexpr int max_exponent = 128;
  static constexpr int max_exponent10 = 38;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;

  static constexpr fluidk::bfloat16 min() noexcept { return fluidk::bfloat16::from_bits(0x0080); }  // 2^-126
  static constexpr fluidk::bfloat16 max() noexcept {
    return fluidk::bfloat16::from_bits(0x7F7F);
  }  // ~3.39e38
  static constexpr fluidk::bfloat16 lowest() noexcept { return fluidk::bfloat16::from_bits(0xFF7F); }
  static constexpr fluidk::bfloat16 epsilon() noexcept {
    return fluidk::bfloat16::from_bits(0x3C00);
  }  // 2^-7
  static constexpr fluidk::bfloat16 round_error() noexcept { return fluidk::bfloat16::from_bits(0x3F00); }
  static constexpr fluidk::bfloat16 infinity() noexcept { return fluidk::bfloat16::from_bits(0x7F80); }
  static constexpr fluidk::bfloat16 quiet_NaN() noexcept { return fluidk::bfloat16::from_bits(0x7FC0); }
  static constexpr fluidk::bfloat16 signaling_NaN() noexcept { return fluidk::bfloat16::from_bits(0x7FA0); }
  static constexpr fluidk::bfloat16 denorm_min() noexcept {
    return fluidk::bfloat16::from_bits(0x0001);
  }  // 2^-133
};

// Hashes agree wherever == holds for non-NaN values, so -0 hashes like +0.
template <>
struct std::hash<fluidk::bfloat16> {
  std::size_t operator()(fluidk::bfloat16 value) const noexcept {
    const std::uint16_t bits = (value.bits() & 0x7FFFu) == 0 ? std::uint16_t{0} : value.bits();
    return std::hash<std::uint16_t>{}(bits);
  }
};
