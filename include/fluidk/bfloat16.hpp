// bfloat16, the top half of an IEEE float, as a storage and interchange type: conversions round once, to
// nearest even, from any source, and arithmetic goes through float.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>

#include "fluidk/detail/narrow_float.hpp"

namespace fluidk {

class bfloat16 : public detail::narrow_float<bfloat16, detail::bfloat16_format> {
 public:
  constexpr bfloat16() noexcept = default;
  using narrow_float::narrow_float;
};

}  // namespace fluidk

template <>
struct std::numeric_limits<fluidk::bfloat16> : fluidk::detail::narrow_float_limits {
  // IEEE 754 defines no 16-bit format with an 8-bit exponent, even though this one follows its rules.
  static constexpr bool is_iec559 = false;
  static constexpr int digits = 8;
  static constexpr int digits10 = 2;
  static constexpr int max_digits10 = 4;
  static constexpr int min_exponent = -125;
  static constexpr int min_exponent10 = -37;
  static constexpr int max_exponent = 128;
  static constexpr int max_exponent10 = 38;

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

template <>
struct std::hash<fluidk::bfloat16> : fluidk::detail::narrow_float_hash<fluidk::bfloat16> {};
