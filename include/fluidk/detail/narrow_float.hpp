// The one implementation behind float16 and bfloat16: a CRTP base, so that each stays its own class type
// (for numeric_limits, hash and type lists) while only its 16-bit format tells them apart.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>

#include "fluidk/detail/half_rounding.hpp"

namespace fluidk::detail {

template <class Derived, class Fmt>
class narrow_float {
  // float's significand has at least 2p + 2 bits for both formats' precision p, so rounding the float
  // result of + - * / to Fmt gives the correctly rounded Fmt result; the intermediate rounding cannot show
  // through. Where Fmt's exponent range is float's (bfloat16), float's grid below the normal range is still
  // 2^16 times finer than Fmt's, which is enough for these four operations there as well.
  static_assert(std::numeric_limits<float>::digits >= 2 * (Fmt::mant_bits + 1) + 2);

 public:
  constexpr narrow_float() noexcept = default;

  constexpr explicit narrow_float(float value) noexcept : bits_(narrow<Fmt>(value)) {}
  constexpr explicit narrow_float(double value) noexcept : bits_(narrow<Fmt>(value)) {}
  // Rounds from the integer itself: going through float first would round twice for large values.
  template <std::integral I>
  constexpr explicit narrow_float(I value) noexcept : bits_(narrow_integer<Fmt>(value)) {}

  static constexpr Derived from_bits(std::uint16_t bits) noexcept {
    Derived result;
    result.bits_ = bits;
    return result;
  }
  constexpr std::uint16_t bits() const noexcept { return bits_; }

  // Exact: every value of Fmt, NaN payloads included, is representable in float and double.
  constexpr explicit operator float() const noexcept { return widen_to_float<Fmt>(bits_); }
  constexpr explicit operator double() const noexcept { return widen_to_double<Fmt>(bits_); }

  // Truncates toward zero like a float-to-integer cast, but saturates where that cast would be
  // undefined: NaN gives 0 and out-of-range values give the nearest end of I's range. bool is true for
  // any nonzero value, NaN included, as for float.
  template <std::integral I>
  constexpr explicit operator I() const noexcept {
    return saturating_float_to_integer<I>(static_cast<float>(*this));
  }

  constexpr Derived operator+() const noexcept { return self(); }
  // Only the sign bit changes, as IEEE negate requires, NaNs included.
  constexpr Derived operator-() const noexcept {
    return from_bits(static_cast<std::uint16_t>(bits_ ^ Fmt::sign_mask));
  }

  // Hidden friends on Derived, not the base: a bare base object is never an operand, and mixing
  // float16 with bfloat16 stays an error.
  friend constexpr Derived operator+(Derived a, Derived b) noexcept {
    return Derived(static_cast<float>(a) + static_cast<float>(b));
  }
  friend constexpr Derived operator-(Derived a, Derived b) noexcept {
    return Derived(static_cast<float>(a) - static_cast<float>(b));
  }
  friend constexpr Derived operator*(Derived a, Derived b) noexcept {
    return Derived(static_cast<float>(a) * static_cast<float>(b));
  }
  friend constexpr Derived operator/(Derived a, Derived b) noexcept {
    return Derived(static_cast<float>(a) / static_cast<float>(b));
  }

  constexpr Derived& operator+=(Derived other) noexcept { return self() = self() + other; }
  constexpr Derived& operator-=(Derived other) noexcept { return self() = self() - other; }
  constexpr Derived& operator*=(Derived other) noexcept { return self() = self() * other; }
  constexpr Derived& operator/=(Derived other) noexcept { return self() = self() / other; }

  // IEEE comparisons: NaN is unordered and +0 equals -0, so the bits cannot be compared directly.
  friend constexpr bool operator==(Derived a, Derived b) noexcept {
    return static_cast<float>(a) == static_cast<float>(b);
  }
  friend constexpr bool operator!=(Derived a, Derived b) noexcept {
    return static_cast<float>(a) != static_cast<float>(b);
  }
  friend constexpr bool operator<(Derived a, Derived b) noexcept {
    return static_cast<float>(a) < static_cast<float>(b);
  }
  friend constexpr bool operator<=(Derived a, Derived b) noexcept {
    return static_cast<float>(a) <= static_cast<float>(b);
  }
  friend constexpr bool operator>(Derived a, Derived b) noexcept {
    return static_cast<float>(a) > static_cast<float>(b);
  }
  friend constexpr bool operator>=(Derived a, Derived b) noexcept {
    return static_cast<float>(a) >= static_cast<float>(b);
  }

  friend std::ostream& operator<<(std::ostream& os, Derived value) { return os << static_cast<float>(value); }

 private:
  constexpr Derived& self() noexcept { return static_cast<Derived&>(*this); }
  constexpr const Derived& self() const noexcept { return static_cast<const Derived&>(*this); }

  std::uint16_t bits_{};
};

// Hashes agree wherever == holds for non-NaN values, so -0 hashes like +0.
template <class T>
struct narrow_float_hash {
  std::size_t operator()(T value) const noexcept {
    const std::uint16_t bits = (value.bits() & 0x7FFFu) == 0 ? std::uint16_t{0} : value.bits();
    return std::hash<std::uint16_t>{}(bits);
  }
};

// The std::numeric_limits members that do not depend on the format.
struct narrow_float_limits {
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr std::float_denorm_style has_denorm = std::denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int radix = 2;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
};

}  // namespace fluidk::detail

namespace fluidk {

// Namespace-scope templates rather than hidden friends, so that fluidk::isnan(x) keeps working as well.
template <class Derived, class Fmt>
constexpr bool isnan(detail::narrow_float<Derived, Fmt> value) noexcept {
  return (value.bits() & Fmt::exp_mask) == Fmt::exp_mask && (value.bits() & Fmt::mant_mask) != 0;
}
template <class Derived, class Fmt>
constexpr bool isinf(detail::narrow_float<Derived, Fmt> value) noexcept {
  return (value.bits() & 0x7FFFu) == Fmt::exp_mask;
}
template <class Derived, class Fmt>
constexpr bool isfinite(detail::narrow_float<Derived, Fmt> value) noexcept {
  return (value.bits() & Fmt::exp_mask) != Fmt::exp_mask;
}
template <class Derived, class Fmt>
constexpr bool signbit(detail::narrow_float<Derived, Fmt> value) noexcept {
  return (value.bits() & Fmt::sign_mask) != 0;
}

}  // namespace fluidk
