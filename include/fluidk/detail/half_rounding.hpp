// Bit-level conversions shared by float16 and bfloat16. Every source is reduced to sign, integer
// significand and exponent so that there is exactly one rounding step, whatever the source type.
#pragma once

#include <bit>
#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace fluidk::detail {

// The parameters of a 16-bit binary floating-point encoding: 1 sign bit, ExpBits, MantBits.
template <int ExpBits, int MantBits>
struct small_float_format {
  static_assert(1 + ExpBits + MantBits == 16);
  static constexpr int exp_bits = ExpBits;
  static constexpr int mant_bits = MantBits;
  static constexpr int bias = (1 << (ExpBits - 1)) - 1;
  static constexpr int max_exponent = bias;  // of the largest finite value, 2^max_exponent * 1.xxx
  static constexpr int min_normal_exponent = 1 - bias;
  static constexpr std::uint16_t sign_mask = 0x8000;
  static constexpr std::uint16_t exp_mask = static_cast<std::uint16_t>(((1u << ExpBits) - 1) << MantBits);
  static constexpr std::uint16_t mant_mask = static_cast<std::uint16_t>((1u << MantBits) - 1);
  static constexpr std::uint16_t quiet_bit = static_cast<std::uint16_t>(1u << (MantBits - 1));
};

using binary16_format = small_float_format<5, 10>;
using bfloat16_format = small_float_format<8, 7>;

// Rounds (-1)^negative * significand * 2^exponent to the nearest Fmt value, ties to even, with
// overflow to infinity and gradual underflow. The 64-bit significand holds any integer source and
// any float or double significand exactly, so no source is rounded twice.
template <class Fmt>
constexpr std::uint16_t round_to_format(bool negative, std::uint64_t significand, int exponent) noexcept {
  const std::uint16_t sign = negative ? Fmt::sign_mask : std::uint16_t{0};
  if (significand == 0) return sign;
  // The value lies in [2^e, 2^(e+1)).
  const int e = std::bit_width(significand) - 1 + exponent;
  if (e > Fmt::max_exponent) return static_cast<std::uint16_t>(sign | Fmt::exp_mask);
  const bool subnormal = e < Fmt::min_normal_exponent;
  // Weight of the result's last significand bit; fixed below the normal range, which is what makes
  // underflow gradual.
  const int quantum = (subnormal ? Fmt::min_normal_exponent : e) - Fmt::mant_bits;
  const int shift = quantum - exponent;
  std::uint64_t kept = 0;
  if (shift <= 0) {
    kept = significand << -shift;  // exact: at most mant_bits + 1 significant bits
  } else if (shift <= 64) {
    const std::uint64_t rest = shift == 64 ? significand : significand & ((std::uint64_t{1} << shift) - 1);
    kept = shift == 64 ? 0 : significand >> shift;
    const std::uint64_t half = std::uint64_t{1} << (shift - 1);
    if (rest > half || (rest == half && (kept & 1) != 0)) ++kept;
  }
  // Otherwise the value is below half the quantum and rounds to zero.

  // For a normal result `kept` still carries the implicit bit, which adds one to the exponent field, so
  // the field is written one lower. A carry out of the significand then moves into the exponent on its
  // own: a subnormal becomes the smallest normal, and the largest finite value becomes exactly the
  // infinity pattern, never more, since e <= max_exponent here.
  const std::uint64_t exp_field =
      subnormal ? 0 : static_cast<std::uint64_t>(e - Fmt::min_normal_exponent) << Fmt::mant_bits;
  return static_cast<std::uint16_t>(sign | (exp_field + kept));
}

// A NaN keeps its sign and the top of its payload. If that top is all zero the result would read as an
// infinity, so the quiet bit is set instead. A signalling NaN whose top payload survives stays
// signalling, which keeps 16-bit -> wide -> 16-bit round trips bit-exact.
template <class Fmt>
constexpr std::uint16_t narrow_nan_or_inf(bool negative, std::uint64_t payload, int payload_bits) noexcept {
  const std::uint16_t sign = negative ? Fmt::sign_mask : std::uint16_t{0};
  if (payload == 0) return static_cast<std::uint16_t>(sign | Fmt::exp_mask);
  auto top = static_cast<std::uint16_t>(payload >> (payload_bits - Fmt::mant_bits));
  if (top == 0) top = Fmt::quiet_bit;
  return static_cast<std::uint16_t>(sign | Fmt::exp_mask | top);
}

// Narrows the bits of an IEEE binary format with SrcExpBits and SrcMantBits (float, double).
template <class Fmt, int SrcExpBits, int SrcMantBits>
constexpr std::uint16_t narrow_binary(std::uint64_t bits) noexcept {
  constexpr int src_bias = (1 << (SrcExpBits - 1)) - 1;
  constexpr std::uint64_t src_exp_all = (std::uint64_t{1} << SrcExpBits) - 1;
  const bool negative = ((bits >> (SrcExpBits + SrcMantBits)) & 1) != 0;
  const std::uint64_t field = (bits >> SrcMantBits) & src_exp_all;
  const std::uint64_t mant = bits & ((std::uint64_t{1} << SrcMantBits) - 1);
  if (field == src_exp_all) return narrow_nan_or_inf<Fmt>(negative, mant, SrcMantBits);
  if (field == 0) return round_to_format<Fmt>(negative, mant, 1 - src_bias - SrcMantBits);
  return round_to_format<Fmt>(negative, mant | (std::uint64_t{1} << SrcMantBits),
                              static_cast<int>(field) - src_bias - SrcMantBits);
}

template <class Fmt>
constexpr std::uint16_t narrow(float value) noexcept {
  return narrow_binary<Fmt, 8, 23>(std::bit_cast<std::uint32_t>(value));
}

template <class Fmt>
constexpr std::uint16_t narrow(double value) noexcept {
  return narrow_binary<Fmt, 11, 52>(std::bit_cast<std::uint64_t>(value));
}

template <class Fmt, std::integral I>
constexpr std::uint16_t narrow_integer(I value) noexcept {
  if constexpr (std::is_signed_v<I>) {
    // Negating in unsigned arithmetic keeps the most negative value representable.
    const auto wide = static_cast<std::uint64_t>(static_cast<std::int64_t>(value));
    return value < 0 ? round_to_format<Fmt>(true, std::uint64_t{0} - wide, 0)
                     : round_to_format<Fmt>(false, wide, 0);
  } else {
    return round_to_format<Fmt>(false, static_cast<std::uint64_t>(value), 0);
  }
}

// Widens Fmt bits to the bits of a wider IEEE binary format, exactly, NaN payloads included (a
// hardware float conversion could quiet a signalling NaN and break round trips).
template <class Fmt, int DstExpBits, int DstMantBits>
constexpr std::uint64_t widen_binary(std::uint16_t bits) noexcept {
  static_assert(DstExpBits >= Fmt::exp_bits && DstMantBits >= Fmt::mant_bits);
  constexpr int dst_bias = (1 << (DstExpBits - 1)) - 1;
  constexpr int mant_shift = DstMantBits - Fmt::mant_bits;
  const std::uint64_t sign = static_cast<std::uint64_t>(bits >> 15) << (DstExpBits + DstMantBits);
  const std::uint64_t magnitude = bits & 0x7FFFu;
  if constexpr (DstExpBits == Fmt::exp_bits) {
    // Same exponent range: every encoding, subnormals and NaNs too, widens by appending zeros.
    return sign | (magnitude << mant_shift);
  } else {
    const int field = static_cast<int>(magnitude >> Fmt::mant_bits);
    const std::uint64_t mant = magnitude & Fmt::mant_mask;
    constexpr int all_ones = (1 << Fmt::exp_bits) - 1;
    constexpr std::uint64_t dst_exp_all = (std::uint64_t{1} << DstExpBits) - 1;
    if (field == all_ones) return sign | (dst_exp_all << DstMantBits) | (mant << mant_shift);
    if (field == 0) {
      if (mant == 0) return sign;
      // With a wider exponent every subnormal of Fmt is a normal number: move the leading one into the
      // implicit position.
      const int top = std::bit_width(mant) - 1;
      const int e = top + Fmt::min_normal_exponent - Fmt::mant_bits;
      const std::uint64_t dst_mant = (mant << (DstMantBits - top)) & ((std::uint64_t{1} << DstMantBits) - 1);
      return sign | (static_cast<std::uint64_t>(e + dst_bias) << DstMantBits) | dst_mant;
    }
    return sign | (static_cast<std::uint64_t>(field - Fmt::bias + dst_bias) << DstMantBits) |
           (mant << mant_shift);
  }
}

template <class Fmt>
constexpr float widen_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(widen_binary<Fmt, 8, 23>(bits)));
}

template <class Fmt>
constexpr double widen_to_double(std::uint16_t bits) noexcept {
  return std::bit_cast<double>(widen_binary<Fmt, 11, 52>(bits));
}

// Float to integer with C++ truncation toward zero where the result fits, and saturation where it does
// not: NaN gives 0, values past either end give that end. A plain static_cast would be undefined there.
// bool follows the C++ float-to-bool rule instead (nonzero, NaN included, is true).
template <std::integral I>
constexpr I saturating_float_to_integer(float value) noexcept {
  if constexpr (std::is_same_v<I, bool>) {
    return !(value == 0.0f);
  } else {
    using limits = std::numeric_limits<I>;
    if (value != value) return I{0};
    // 2^digits: one past the largest value, exact in float for every integer width.
    constexpr float past_max = static_cast<float>((limits::max() >> 1) + 1) * 2.0f;
    if (value >= past_max) return limits::max();
    if constexpr (std::is_signed_v<I>) {
      // -2^digits is the minimum itself; anything below it saturates to the minimum as well.
      if (value <= -past_max) return limits::min();
    } else {
      if (value <= -1.0f) return I{0};
    }
    return static_cast<I>(value);
  }
}

}  // namespace fluidk::detail
