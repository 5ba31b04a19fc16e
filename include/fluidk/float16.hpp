// IEEE 754 binary16 as a storage and interchange type: conversions round once, to nearest even, from any
// source, and arithmetic goes through float so that host code can read and write half-precision tensors.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>

#include "fluidk/detail/half_rounding.hpp"

namespace fluidk {

class float16 {
  using format = detail::binary16_format;

 public:
  constexpr float16() noexcept = default;

  constexpr explicit float16(float value) noexcept : bits_(detail::narrow<format>(value)) {}
  constexpr explicit float16(double value) noexcept : bits_(detail::narrow<format>(value)) {}
  // Rounds from the integer itself: going through float first would round twice for large values.
  template <std::integral I>
  constexpr explicit float16(I value) noexcept : bits_(detail::narrow_integer<format>(value)) {}

  static constexpr float16 from_bits(std::uint16_t bits) noexcept {
    float16 result;
    result.bits_ = bits;
    return result;
  }
  constexpr std::uint16_t bits() const noexcept { return bits_; }

  // Exact: every binary16 value, NaN payloads included, is representable in float and double.
  constexpr explicit operator float() const noexcept { return detail::widen_to_float<format>(bits_); }
  constexpr explicit operator double() const noexcept { return detail::widen_to_double<format>(bits_); }

  // Truncates toward zero like a float-to-integer cast, but saturates where that cast would be
  // undefined: NaN gives 0 and out-of-range values give the nearest end of I's range. bool is true for
  // any nonzero value, NaN included, as for float.
  template <std::integral I>
  constexpr explicit operator I() const noexcept {
    return detail::saturating_float_to_integer<I>(static_cast<float>(*this));
  }

  constexpr float16 operator+() const noexcept { return *this; }
  // Only the sign bit changes, as IEEE negate requires, NaNs included.
  constexpr float16 operator-() const noexcept {
    return from_bits(static_cast<std::uint16_t>(bits_ ^ 0x8000u));
  }

  // float's 24-bit significand is at least 2 * 11 + 2 bits, so rounding the float result of + - * / to
  // binary16 gives the correctly rounded binary16 result; the intermediate rounding cannot show through.
  friend constexpr float16 operator+(float16 a, float16 b) noexcept {
    return float16(static_cast<float>(a) + static_cast<float>(b));
  }
  friend constexpr float16 operator-(float16 a, float16 b) noexcept {
    return float16(static_cast<float>(a) - static_cast<float>(b));
  }
  friend constexpr float16 operator*(float16 a, float16 b) noexcept {
    return float16(static_cast<float>(a) * static_cast<float>(b));
  }
  friend constexpr float16 operator/(float16 a, float16 b) noexcept {
    return float16(static_cast<float>(a) / static_cast<float>(b));
  }

  constexpr float16& operator+=(float16 other) noexcept { return *this = *this + other; }
  constexpr float16& operator-=(float16 other) noexcept { return *this = *this - other; }
  constexpr float16& operator*=(float16 other) noexcept { return *this = *this * other; }
  constexpr float16& operator/=(float16 other) noexcept { return *this = *this / other; }

  // IEEE comparisons: NaN is unordered and +0 equals -0, so the bits cannot be compared directly.
  friend constexpr bool operator==(float16 a, float16 b) noexcept {
    return static_cast<float>(a) == static_cast<float>(b);
  }
  friend constexpr bool operator!=(float16 a, float16 b) noexcept {
    return static_cast<float>(a) != static_cast<float>(b);
  }
  friend constexpr bool operator<(float16 a, float16 b) noexcept {
    return static_cast<float>(a) < static_cast<float>(b);
  }
  friend constexpr bool operator<=(float16 a, float16 b) noexcept {
    return static_cast<float>(a) <= static_cast<float>(b);
  }
  friend constexpr bool operator>(float16 a, float16 b) noexcept {
    return static_cast<float>(a) > static_cast<float>(b);
  }
  friend constexpr bool operator>=(float16 a, float16 b) noexcept {
    return static_cast<float>(a) >= static_cast<float>(b);
  }

  friend std::ostream& operator<<(std::ostream& os, float16 value) { return os << static_cast<float>(value); }

 private:
  std::uint16_t bits_{};
};

constexpr bool isnan(float16 value) noexcept {
  return (value.bits() & 0x7C00u) == 0x7C00u && (value.bits() & 0x03FFu) != 0;
}
constexpr bool isinf(float16 value) noexcept { return (value.bits() & 0x7FFFu) == 0x7C00u; }
constexpr bool isfinite(float16 value) noexcept { return (value.bits() & 0x7C00u) != 0x7C00u; }
constexpr bool signbit(float16 value) noexcept { return (value.bits() & 0x8000u) != 0; }

}  // namespace fluidk

template <>
struct std::numeric_limits<fluidk::float16> {
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
  static constexpr bool is_iec559 = true;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 11;
  static constexpr int digits10 = 3;
  static constexpr int max_digits10 = 5;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -13;
  static constexpr int min_exponent10 = -4;
  static constexpr int max_exponent = 16;
  static constexpr int max_exponent10 = 4;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;

  static constexpr fluidk::float16 min() noexcept { return fluidk::float16::from_bits(0x0400); }  // 2^-14
  static constexpr fluidk::float16 max() noexcept { return fluidk::float16::from_bits(0x7BFF); }  // 65504
  static constexpr fluidk::float16 lowest() noexcept { return fluidk::float16::from_bits(0xFBFF); }
  static constexpr fluidk::float16 epsilon() noexcept { return fluidk::float16::from_bits(0x1400); }  // 2^-10
  static constexpr fluidk::float16 round_error() noexcept { return fluidk::float16::from_bits(0x3800); }
  static constexpr fluidk::float16 infinity() noexcept { return fluidk::float16::from_bits(0x7C00); }
  static constexpr fluidk::float16 quiet_NaN() noexcept { return fluidk::float16::from_bits(0x7E00); }
  static constexpr fluidk::float16 signaling_NaN() noexcept { return fluidk::float16::from_bits(0x7D00); }
  static constexpr fluidk::float16 denorm_min() noexcept {
    return fluidk::float16::from_bits(0x0001);
  }  // 2^-24
};

// Hashes agree wherever == holds for non-NaN values, so -0 hashes like +0.
template <>
struct std::hash<fluidk::float16> {
  std::size_t operator()(fluidk::float16 value) const noexcept {
    const std::uint16_t bits = (value.bits() & 0x7FFFu) == 0 ? std::uint16_t{0} : value.bits();
    return std::hash<std::uint16_t>{}(bits);
  }
};
