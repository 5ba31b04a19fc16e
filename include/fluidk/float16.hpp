// IEEE 754 binary16 as a storage and interchange type: conversions round once, to nearest even, from any
// source, and arithmetic goes through float so that host code can read and write half-precision tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>

#include "fluidk/detail/narrow_float.hpp"

namespace fluidk {

class float16 : public detail::narrow_float<float16, detail::binary16_format> {
 public:
  constexpr float16() noexcept = default;
  using narrow_float::narrow_float;
};

}  // namespace fluidk

template <>
struct std::numeric_limits<fluidk::float16> : fluidk::detail::narrow_float_limits {
  static constexpr bool is_iec559 = true;
  static constexpr int digits = 11;
  static constexpr int digits10 = 3;
  static constexpr int max_digits10 = 5;
  static constexpr int min_exponent = -13;
  static constexpr int min_exponent10 = -4;
  static constexpr int max_exponent = 16;
  static constexpr int max_exponent10 = 4;

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

template <>
struct std::hash<fluidk::float16> : fluidk::detail::narrow_float_hash<fluidk::float16> {};
