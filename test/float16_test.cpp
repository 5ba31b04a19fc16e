// Tests of float16 and bfloat16: exhaustive round trips, comparison with the F16C instructions and with
// an integer reference over a large sample of floats, and the rounding edge cases one by one.
#include "fluidk/float16.hpp"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "fluidk/bfloat16.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define FLUIDK_TEST_X86 1
#endif

namespace {

using fluidk::bfloat16;
using fluidk::float16;

float float_from_bits(std::uint32_t bits) { return std::bit_cast<float>(bits); }
std::uint32_t bits_of(float value) { return std::bit_cast<std::uint32_t>(value); }
double double_from_bits(std::uint64_t bits) { return std::bit_cast<double>(bits); }
std::uint64_t bits_of(double value) { return std::bit_cast<std::uint64_t>(value); }

bool float_is_nan(std::uint32_t bits) {
  return (bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0;
}

// float to double keeping a signalling NaN signalling, which the hardware conversion does not.
double widen_exactly(std::uint32_t bits) {
  if (!float_is_nan(bits)) return static_cast<double>(float_from_bits(bits));
  return double_from_bits(std::uint64_t{bits >> 31} << 63 | std::uint64_t{0x7FF} << 52 |
                          std::uint64_t{bits & 0x007FFFFFu} << 29);
}

std::string hex(std::uint64_t value) {
  std::ostringstream os;
  os << "0x" << std::hex << value;
  return os.str();
}

// Collects failures of a large sweep so that one assertion reports the count and the first few cases;
// an assertion per sample would dominate the run time.
struct mismatch_log {
  std::size_t count = 0;
  std::string examples;
  void add(const std::string& what) {
    if (count++ < 8) examples += what + "\n";
  }
};

#define FLUIDK_CHECK_LOG(log) \
  do {                        \
    INFO((log).examples);     \
    CHECK((log).count == 0u); \
  } while (false)

// Values the formats find hardest: every pattern near each 16-bit value, the exact midpoints between
// consecutive values and their float neighbours, plus a strided and a random sweep over all floats.
template <class Half>
std::vector<std::uint32_t> make_float_sample() {
  std::vector<std::uint32_t> out;
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFu; u += 4099) out.push_back(static_cast<std::uint32_t>(u));
  std::mt19937 rng(20240611u);
  for (int i = 0; i < (1 << 20); ++i) out.push_back(static_cast<std::uint32_t>(rng()));
  const Half max = std::numeric_limits<Half>::max();
  for (std::uint32_t sign : {0u, 0x8000u}) {
    for (std::uint32_t b = 0; b <= max.bits(); ++b) {
      const std::uint32_t center =
          bits_of(static_cast<float>(Half::from_bits(static_cast<std::uint16_t>(b | sign))));
      for (std::uint32_t k = 0; k <= 4; ++k) {
        out.push_back(center + k);
        out.push_back(center - k);
      }
      const float lo = static_cast<float>(Half::from_bits(static_cast<std::uint16_t>(b)));
      float mid = 0;
      if (b < max.bits()) {
        mid = (lo + static_cast<float>(Half::from_bits(static_cast<std::uint16_t>(b + 1)))) / 2;
      } else {  // halfway to the first value past the largest, where rounding goes to infinity
        mid = lo + (lo - static_cast<float>(Half::from_bits(static_cast<std::uint16_t>(b - 1)))) / 2;
      }
      const std::uint32_t m = bits_of(mid) | (sign << 16);
      for (std::uint32_t k = 0; k <= 2; ++k) {
        out.push_back(m + k);
        out.push_back(m - k);
      }
    }
  }
  return out;
}

template <class Half>
const std::vector<std::uint32_t>& float_sample() {
  static const std::vector<std::uint32_t> sample = make_float_sample<Half>();
  return sample;
}

#ifdef FLUIDK_TEST_X86
// The packed forms, because clang's scalar _cvtss_sh macro uses a compound literal that -Wpedantic rejects.
__attribute__((target("f16c"))) std::uint16_t hardware_float_to_half(float value) {
  return static_cast<std::uint16_t>(
      _mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(value), _MM_FROUND_TO_NEAREST_INT), 0));
}
__attribute__((target("f16c"))) float hardware_half_to_float(std::uint16_t bits) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits)));
}
bool have_f16c() {
#if defined(__clang__)
  // clang 14 does not accept "f16c" here: read the CPUID bit, with "avx" vouching that the OS saves the
  // VEX register state the instruction needs.
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0 && __builtin_cpu_supports("avx");
#else
  return __builtin_cpu_supports("f16c");
#endif
}
#else
std::uint16_t hardware_float_to_half(float) { return 0; }
float hardware_half_to_float(std::uint16_t) { return 0; }
bool have_f16c() { return false; }
#endif

// bfloat16 reference in plain integer arithmetic: adding 0x7FFF plus the lowest kept bit rounds the
// discarded half to nearest even, and a carry runs into the exponent as it should.
std::uint16_t reference_bfloat16(std::uint32_t u) {
  if (float_is_nan(u)) {
    auto top = static_cast<std::uint16_t>(u >> 16);
    if ((top & 0x7F) == 0) top |= 0x40;
    return top;
  }
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// Rounds a magnitude to `precision` significant bits, ties to even, without an exponent limit. The
// result has at most precision + 1 significant bits, so the double is exact.
double reference_round_integer(std::uint64_t x, int precision) {
  const int width = std::bit_width(x);
  if (width <= precision) return static_cast<double>(x);
  const int drop = width - precision;
  const std::uint64_t ulp = std::uint64_t{1} << drop;
  const std::uint64_t low = x & ~(ulp - 1);
  const std::uint64_t rest = x - low;
  const bool up = rest > ulp / 2 || (rest == ulp / 2 && ((low >> drop) & 1u) != 0);
  return static_cast<double>(low) + (up ? static_cast<double>(ulp) : 0.0);
}

template <class Half>
bool same_bits(Half a, Half b) {
  return a.bits() == b.bits();
}

}  // namespace

TEST_CASE("float16 round-trips every bit pattern through float and double", "[float16]") {
  mismatch_log log;
  const bool hw = have_f16c();
  for (std::uint32_t b = 0; b <= 0xFFFFu; ++b) {
    const auto h = float16::from_bits(static_cast<std::uint16_t>(b));
    const float f = static_cast<float>(h);
    const double d = static_cast<double>(h);
    if (float16(f).bits() != b) log.add("via float " + hex(b) + " -> " + hex(float16(f).bits()));
    if (float16(d).bits() != b) log.add("via double " + hex(b) + " -> " + hex(float16(d).bits()));
    const bool nan = fluidk::isnan(h);
    if (nan != std::isnan(f) || nan != std::isnan(d)) log.add("NaN-ness " + hex(b));
    if (!nan && static_cast<double>(f) != d) log.add("float and double disagree " + hex(b));
    if (std::signbit(f) != fluidk::signbit(h)) log.add("sign " + hex(b));
    if (hw) {
      // The hardware quiets signalling NaNs; the library keeps them so that round trips are exact.
      const std::uint32_t expected = bits_of(hardware_half_to_float(static_cast<std::uint16_t>(b)));
      const std::uint32_t got = nan ? bits_of(f) | 0x00400000u : bits_of(f);
      if (got != expected)
        log.add("F16C widening " + hex(b) + ": " + hex(bits_of(f)) + " vs " + hex(expected));
    }
  }
  FLUIDK_CHECK_LOG(log);
  CHECK(bits_of(static_cast<float>(float16::from_bits(0x7D00))) == 0x7FA00000u);  // signalling stays so
  CHECK(bits_of(static_cast<float>(float16::from_bits(0x0001))) == bits_of(std::ldexp(1.0f, -24)));
  CHECK(bits_of(static_cast<double>(float16::from_bits(0x8001))) == bits_of(-std::ldexp(1.0, -24)));
  CHECK(bits_of(static_cast<double>(float16::from_bits(0xFD01))) == 0xFFF4040000000000u);
}

TEST_CASE("bfloat16 round-trips every bit pattern through float and double", "[bfloat16]") {
  mismatch_log log;
  for (std::uint32_t b = 0; b <= 0xFFFFu; ++b) {
    const auto h = bfloat16::from_bits(static_cast<std::uint16_t>(b));
    const float f = static_cast<float>(h);
    const double d = static_cast<double>(h);
    if (bits_of(f) != b << 16) log.add("widening " + hex(b) + " -> " + hex(bits_of(f)));
    if (bfloat16(f).bits() != b) log.add("via float " + hex(b) + " -> " + hex(bfloat16(f).bits()));
    if (bfloat16(d).bits() != b) log.add("via double " + hex(b) + " -> " + hex(bfloat16(d).bits()));
    const bool nan = fluidk::isnan(h);
    if (nan != std::isnan(d)) log.add("NaN-ness " + hex(b));
    if (!nan && static_cast<double>(f) != d) log.add("float and double disagree " + hex(b));
  }
  FLUIDK_CHECK_LOG(log);
  CHECK(bits_of(static_cast<double>(bfloat16::from_bits(0x0001))) == bits_of(std::ldexp(1.0, -133)));
  CHECK(bits_of(static_cast<double>(bfloat16::from_bits(0x7FA1))) == 0x7FF4200000000000u);
}

TEST_CASE("float16 from float matches F16C hardware", "[float16]") {
  const auto& sample = float_sample<float16>();
  REQUIRE(sample.size() > 2'000'000u);
  mismatch_log log;
  const bool hw = have_f16c();
  if (!hw) WARN("the CPU has no F16C: float16 is checked for consistency only, not against hardware");
  for (std::uint32_t u : sample) {
    const float f = float_from_bits(u);
    const std::uint16_t ours = float16(f).bits();
    // A float is exact in double, so both sources must round identically.
    if (float16(widen_exactly(u)).bits() != ours) log.add("double disagrees for " + hex(u));
    if (float_is_nan(u)) {
      if (!fluidk::isnan(float16::from_bits(ours)) || (ours >> 15) != (u >> 31)) log.add("NaN " + hex(u));
    }
    if (!hw) continue;
    const std::uint16_t expected = hardware_float_to_half(f);
    if (float_is_nan(u)) {
      // The hardware sets the quiet bit; a quiet NaN must then match exactly, a signalling one once quieted.
      const bool quiet = (u & 0x00400000u) != 0;
      if ((quiet ? ours : ours | 0x0200u) != expected)
        log.add("NaN " + hex(u) + ": " + hex(ours) + " vs " + hex(expected));
    } else if (ours != expected) {
      log.add(hex(u) + ": " + hex(ours) + " vs F16C " + hex(expected));
    }
  }
  FLUIDK_CHECK_LOG(log);
}

TEST_CASE("bfloat16 from float matches the integer reference", "[bfloat16]") {
  const auto& sample = float_sample<bfloat16>();
  REQUIRE(sample.size() > 2'000'000u);
  mismatch_log log;
  for (std::uint32_t u : sample) {
    const float f = float_from_bits(u);
    const std::uint16_t ours = bfloat16(f).bits();
    const std::uint16_t expected = reference_bfloat16(u);
    if (ours != expected) log.add(hex(u) + ": " + hex(ours) + " vs " + hex(expected));
    if (bfloat16(widen_exactly(u)).bits() != ours) log.add("double disagrees for " + hex(u));
  }
  FLUIDK_CHECK_LOG(log);
}

// Midpoints between neighbours are exact in double; a double just off a midpoint is where rounding
// through float would land on the midpoint and then tie the wrong way.
template <class Half>
void check_double_midpoints(mismatch_log& log) {
  const Half max = std::numeric_limits<Half>::max();
  for (std::uint16_t sign : {std::uint16_t{0}, std::uint16_t{0x8000}}) {
    for (std::uint32_t b = 0; b <= max.bits(); ++b) {
      const auto lo = Half::from_bits(static_cast<std::uint16_t>(b | sign));
      const auto hi = Half::from_bits(static_cast<std::uint16_t>((b + 1) | sign));  // max + 1 is infinity
      const double dlo = static_cast<double>(lo);
      const double step =
          b < max.bits()
              ? static_cast<double>(hi) - dlo
              : dlo - static_cast<double>(Half::from_bits(static_cast<std::uint16_t>((b - 1) | sign)));
      const double mid = dlo + step / 2;
      const Half even = (b & 1u) == 0 ? lo : hi;
      const double toward_hi = std::nextafter(
          mid, sign ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity());
      const double toward_lo = std::nextafter(mid, 0.0);
      if (!same_bits(Half(mid), even)) log.add("tie at " + hex(b | sign));
      if (!same_bits(Half(toward_hi), hi)) log.add("above midpoint of " + hex(b | sign));
      if (!same_bits(Half(toward_lo), lo)) log.add("below midpoint of " + hex(b | sign));
      // A tiny excess far below float precision must still break the tie.
      const double nudged = mid + (sign ? -1 : 1) * std::abs(mid) * 0x1p-40;
      if (!same_bits(Half(nudged), hi)) log.add("nudged midpoint of " + hex(b | sign));
    }
  }
}

TEST_CASE("float16 from double rounds once", "[float16]") {
  mismatch_log log;
  check_double_midpoints<float16>(log);
  FLUIDK_CHECK_LOG(log);

  // Through float, 1 + 2^-11 + 2^-40 becomes the tie 1 + 2^-11 and then 1.
  const double d = 1.0 + 0x1p-11 + 0x1p-40;
  CHECK(float16(d).bits() == float16(1.0 + 0x1p-10).bits());
  CHECK(float16(static_cast<float>(d)).bits() == float16(1.0f).bits());
  CHECK(float16(0x1p-25 + 0x1p-60).bits() == 0x0001);  // just above half the smallest subnormal
  CHECK(float16(65519.999999).bits() == 0x7BFF);
  CHECK(float16(65520.0).bits() == 0x7C00);
  CHECK(float16(1e300).bits() == 0x7C00);
  CHECK(float16(-1e300).bits() == 0xFC00);
  CHECK(float16(1e-300).bits() == 0x0000);
  CHECK(float16(-1e-300).bits() == 0x8000);
  CHECK(float16(std::numeric_limits<double>::denorm_min()).bits() == 0x0000);
  CHECK(float16(std::numeric_limits<double>::infinity()).bits() == 0x7C00);
  CHECK(float16(double_from_bits(0x7FF0000000000001u)).bits() == 0x7E00);  // payload lost: quiet bit
  CHECK(float16(double_from_bits(0x7FF8000000000000u)).bits() == 0x7E00);
  CHECK(float16(double_from_bits(0xFFF4000000000000u)).bits() == 0xFD00);  // signalling, sign kept
}

TEST_CASE("bfloat16 from double rounds once", "[bfloat16]") {
  mismatch_log log;
  check_double_midpoints<bfloat16>(log);
  FLUIDK_CHECK_LOG(log);

  const double d = 1.0 + 0x1p-8 + 0x1p-40;
  CHECK(bfloat16(d).bits() == 0x3F81);
  CHECK(bfloat16(static_cast<float>(d)).bits() == 0x3F80);
  // Below float's subnormal grid: float would keep only the tie 2^-134 and round it to zero.
  CHECK(bfloat16(0x1p-134 + 0x1p-160).bits() == 0x0001);
  CHECK(bfloat16(0x1p-134).bits() == 0x0000);
  CHECK(bfloat16(1e300).bits() == 0x7F80);
  CHECK(bfloat16(-1e300).bits() == 0xFF80);
  CHECK(bfloat16(-1e-300).bits() == 0x8000);
  CHECK(bfloat16(double_from_bits(0x7FF0000000000001u)).bits() == 0x7FC0);
  CHECK(bfloat16(double_from_bits(0xFFF0200000000000u)).bits() == 0xFF81);
}

TEST_CASE("float16 hand-picked rounding cases", "[float16]") {
  SECTION("ties to even") {
    CHECK(static_cast<float>(float16(2049.0f)) == 2048.0f);
    CHECK(static_cast<float>(float16(2051.0f)) == 2052.0f);
    CHECK(static_cast<float>(float16(2050.0f)) == 2050.0f);
    CHECK(static_cast<float>(float16(1.0f + 0x1p-11f)) == 1.0f);
    CHECK(static_cast<float>(float16(1.0f + 3 * 0x1p-11f)) == 1.0f + 0x1p-9f);
    CHECK(static_cast<float>(float16(1.0f + 0x1p-11f + 0x1p-23f)) == 1.0f + 0x1p-10f);
    CHECK(static_cast<float>(float16(-2049.0f)) == -2048.0f);
  }
  SECTION("overflow to infinity") {
    CHECK(float16(65504.0f).bits() == 0x7BFF);
    CHECK(float16(65519.0f).bits() == 0x7BFF);
    CHECK(float16(65519.99f).bits() == 0x7BFF);
    CHECK(float16(65520.0f).bits() == 0x7C00);
    CHECK(float16(-65520.0f).bits() == 0xFC00);
    CHECK(float16(-65519.0f).bits() == 0xFBFF);
    CHECK(float16(1e10f).bits() == 0x7C00);
    CHECK(float16(std::numeric_limits<float>::max()).bits() == 0x7C00);
    CHECK(float16(std::numeric_limits<float>::infinity()).bits() == 0x7C00);
    CHECK(float16(-std::numeric_limits<float>::infinity()).bits() == 0xFC00);
  }
  SECTION("subnormals and underflow") {
    CHECK(float16(0x1p-24f).bits() == 0x0001);
    CHECK(float16(0x1p-25f).bits() == 0x0000);  // halfway to zero, ties to the even zero
    CHECK(float16(-0x1p-25f).bits() == 0x8000);
    CHECK(float16(std::nextafter(0x1p-25f, 1.0f)).bits() == 0x0001);
    CHECK(float16(3 * 0x1p-25f).bits() == 0x0002);
    CHECK(float16(0x1p-14f - 0x1p-25f).bits() == 0x0400);  // rounds up into the normal range
    CHECK(float16(0x1p-14f - 0x1p-24f).bits() == 0x03FF);
    CHECK(float16(std::numeric_limits<float>::denorm_min()).bits() == 0x0000);
    CHECK(float16(-0.0f).bits() == 0x8000);
    CHECK(float16(0.0f).bits() == 0x0000);
  }
  SECTION("NaN payloads") {
    CHECK(float16(float_from_bits(0x7FC00001u)).bits() == 0x7E00);
    CHECK(float16(float_from_bits(0x7F800001u)).bits() == 0x7E00);  // would be infinity without the quiet bit
    CHECK(float16(float_from_bits(0xFF800001u)).bits() == 0xFE00);
    CHECK(float16(float_from_bits(0x7FA00000u)).bits() == 0x7D00);  // signalling, payload survives
    CHECK(float16(float_from_bits(0x7FFFE000u)).bits() == 0x7FFF);
    CHECK(fluidk::isnan(float16(std::numeric_limits<float>::quiet_NaN())));
    CHECK(fluidk::isnan(float16(std::numeric_limits<float>::signaling_NaN())));
  }
  SECTION("classification") {
    CHECK(fluidk::isinf(float16::from_bits(0xFC00)));
    CHECK_FALSE(fluidk::isinf(float16::from_bits(0x7C01)));
    CHECK(fluidk::isnan(float16::from_bits(0x7C01)));
    CHECK_FALSE(fluidk::isfinite(float16::from_bits(0x7C01)));
    CHECK(fluidk::isfinite(float16::from_bits(0x7BFF)));
    CHECK(fluidk::isfinite(float16::from_bits(0x8001)));
    CHECK(fluidk::signbit(float16::from_bits(0x8000)));
  }
}

TEST_CASE("bfloat16 hand-picked rounding cases", "[bfloat16]") {
  CHECK(bfloat16(1.0f).bits() == 0x3F80);
  CHECK(bfloat16(1.0f + 0x1p-8f).bits() == 0x3F80);      // tie, down to even
  CHECK(bfloat16(1.0f + 3 * 0x1p-8f).bits() == 0x3F82);  // tie, up to even
  CHECK(bfloat16(257.0f).bits() == bfloat16(256.0f).bits());
  CHECK(bfloat16(259.0f).bits() == bfloat16(260.0f).bits());
  CHECK(bfloat16(std::numeric_limits<float>::max()).bits() == 0x7F80);
  CHECK(bfloat16(-std::numeric_limits<float>::max()).bits() == 0xFF80);
  CHECK(bfloat16(float_from_bits(0x7F7F7FFFu)).bits() == 0x7F7F);
  CHECK(bfloat16(float_from_bits(0x7F7F8000u)).bits() == 0x7F80);  // the tie above the largest value
  CHECK(bfloat16(0x1p-133f).bits() == 0x0001);
  CHECK(bfloat16(0x1p-134f).bits() == 0x0000);
  CHECK(bfloat16(std::nextafter(0x1p-134f, 1.0f)).bits() == 0x0001);
  CHECK(bfloat16(-0x1p-134f).bits() == 0x8000);
  CHECK(bfloat16(0x1p-126f - 0x1p-134f).bits() == 0x0080);
  CHECK(bfloat16(float_from_bits(0x7F800001u)).bits() == 0x7FC0);
  CHECK(bfloat16(float_from_bits(0x7FC00001u)).bits() == 0x7FC0);
  CHECK(bfloat16(float_from_bits(0xFF810000u)).bits() == 0xFF81);
  CHECK(fluidk::isnan(bfloat16::from_bits(0x7F81)));
  CHECK(fluidk::isinf(bfloat16::from_bits(0xFF80)));
  CHECK_FALSE(fluidk::isfinite(bfloat16::from_bits(0x7F80)));
  CHECK(fluidk::isfinite(bfloat16::from_bits(0x7F7F)));
}

TEST_CASE("integers convert with a single rounding", "[float16][bfloat16]") {
  SECTION("hand cases") {
    CHECK(float16(2049).bits() == float16(2048.0f).bits());
    CHECK(float16(2051).bits() == float16(2052.0f).bits());
    CHECK(float16(65519).bits() == 0x7BFF);
    CHECK(float16(65520).bits() == 0x7C00);
    CHECK(float16(-65520).bits() == 0xFC00);
    CHECK(float16(std::numeric_limits<std::int64_t>::min()).bits() == 0xFC00);
    CHECK(float16(std::numeric_limits<std::uint64_t>::max()).bits() == 0x7C00);
    CHECK(float16(std::int8_t{-128}).bits() == float16(-128.0f).bits());
    CHECK(float16(std::uint8_t{255}).bits() == float16(255.0f).bits());
    CHECK(float16(true).bits() == 0x3C00);
    CHECK(float16(false).bits() == 0x0000);
    CHECK(float16(0).bits() == 0x0000);
    CHECK(bfloat16('A').bits() == bfloat16(65.0f).bits());
    // 2^40 + 2^32 + 1: float keeps only the tie 2^40 + 2^32, which would round down to 2^40.
    const std::int64_t big = (std::int64_t{1} << 40) + (std::int64_t{1} << 32) + 1;
    CHECK(static_cast<double>(bfloat16(big)) == 0x1p40 + 0x1p33);
    CHECK(static_cast<double>(bfloat16(static_cast<float>(big))) == 0x1p40);
    CHECK(static_cast<double>(bfloat16(big - 1)) == 0x1p40);
    CHECK(static_cast<double>(bfloat16(-big)) == -(0x1p40 + 0x1p33));
    CHECK(static_cast<double>(bfloat16((std::int64_t{1} << 40) + 3 * (std::int64_t{1} << 32))) ==
          0x1p40 + 0x1p34);
    CHECK(static_cast<double>(bfloat16(std::numeric_limits<std::int64_t>::min())) == -0x1p63);
    CHECK(static_cast<double>(bfloat16(std::numeric_limits<std::int64_t>::max())) == 0x1p63);
    CHECK(static_cast<double>(bfloat16(std::numeric_limits<std::uint64_t>::max())) == 0x1p64);
    CHECK(static_cast<double>(float16(std::uint64_t{1} << 15)) == 0x1p15);
  }
  SECTION("every value near the float16 range agrees with exact float") {
    mismatch_log log;
    for (std::int32_t i = -70000; i <= 70000; ++i) {
      if (float16(i).bits() != float16(static_cast<float>(i)).bits()) log.add(std::to_string(i));
      if (bfloat16(i).bits() != bfloat16(static_cast<float>(i)).bits()) log.add("bf " + std::to_string(i));
    }
    FLUIDK_CHECK_LOG(log);
  }
  SECTION("random 64-bit integers against an integer reference") {
    mismatch_log log;
    std::mt19937_64 rng(7u);
    for (int i = 0; i < 200000; ++i) {
      const int width = static_cast<int>(rng() % 64) + 1;
      const std::uint64_t raw = rng();
      const std::uint64_t magnitude = width == 64 ? raw : raw & ((std::uint64_t{1} << width) - 1);
      const bool negative = (rng() & 1) != 0 && magnitude <= (std::uint64_t{1} << 63);
      const double bf_expected = reference_round_integer(magnitude, 8) * (negative ? -1 : 1);
      double h_expected = reference_round_integer(magnitude, 11);
      if (h_expected > 65504.0) h_expected = INFINITY;
      h_expected *= negative ? -1 : 1;
      if (negative) {
        const auto value = static_cast<std::int64_t>(std::uint64_t{0} - magnitude);
        if (static_cast<double>(bfloat16(value)) != bf_expected) log.add("bf int64 " + std::to_string(value));
        if (static_cast<double>(float16(value)) != h_expected) log.add("f16 int64 " + std::to_string(value));
      } else {
        if (static_cast<double>(bfloat16(magnitude)) != bf_expected)
          log.add("bf uint64 " + std::to_string(magnitude));
        if (static_cast<double>(float16(magnitude)) != h_expected)
          log.add("f16 uint64 " + std::to_string(magnitude));
        if (magnitude < (std::uint64_t{1} << 63)) {
          const auto value = static_cast<std::int64_t>(magnitude);
          if (static_cast<double>(bfloat16(value)) != bf_expected)
            log.add("bf int64 " + std::to_string(value));
        }
      }
    }
    FLUIDK_CHECK_LOG(log);
  }
}

// Reference for the saturating conversion, computed in double with std::trunc.
template <class I>
I reference_to_integer(double v) {
  using L = std::numeric_limits<I>;
  if (std::isnan(v)) return 0;
  const double t = std::trunc(v);
  if (t >= std::ldexp(1.0, L::digits)) return L::max();
  if (t < static_cast<double>(L::min())) return L::min();
  return static_cast<I>(t);
}

template <class Half, class I>
void check_integer_conversions(mismatch_log& log) {
  for (std::uint32_t b = 0; b <= 0xFFFFu; ++b) {
    const auto h = Half::from_bits(static_cast<std::uint16_t>(b));
    if (static_cast<I>(h) != reference_to_integer<I>(static_cast<double>(h))) log.add(hex(b));
  }
}

TEST_CASE("conversions to integers truncate and saturate", "[float16][bfloat16]") {
  CHECK(static_cast<int>(float16(2.75f)) == 2);
  CHECK(static_cast<int>(float16(-2.75f)) == -2);
  CHECK(static_cast<int>(float16(-0.5f)) == 0);
  CHECK(static_cast<unsigned>(float16(-0.5f)) == 0u);
  CHECK(static_cast<std::int8_t>(float16(300.0f)) == 127);
  CHECK(static_cast<std::int8_t>(float16(-300.0f)) == -128);
  CHECK(static_cast<std::int8_t>(float16(-128.75f)) == -128);
  CHECK(static_cast<std::uint8_t>(float16(-5.0f)) == 0);
  CHECK(static_cast<std::uint8_t>(float16(255.5f)) == 255);
  CHECK(static_cast<std::int16_t>(float16(65504.0f)) == 32767);
  CHECK(static_cast<std::uint16_t>(float16(65504.0f)) == 65504);
  CHECK(static_cast<int>(std::numeric_limits<float16>::quiet_NaN()) == 0);
  CHECK(static_cast<int>(std::numeric_limits<float16>::infinity()) == std::numeric_limits<int>::max());
  CHECK(static_cast<int>(-std::numeric_limits<float16>::infinity()) == std::numeric_limits<int>::min());
  CHECK(static_cast<std::int64_t>(std::numeric_limits<bfloat16>::max()) ==
        std::numeric_limits<std::int64_t>::max());
  CHECK(static_cast<std::int64_t>(bfloat16(-0x1p63f)) == std::numeric_limits<std::int64_t>::min());
  CHECK(static_cast<std::uint64_t>(bfloat16(0x1p63f)) == std::uint64_t{1} << 63);
  CHECK(static_cast<std::uint64_t>(-std::numeric_limits<bfloat16>::infinity()) == 0u);
  CHECK(static_cast<bool>(float16(0.5f)));
  CHECK_FALSE(static_cast<bool>(float16(-0.0f)));
  CHECK(static_cast<bool>(std::numeric_limits<bfloat16>::quiet_NaN()));  // as for float

  mismatch_log log;
  check_integer_conversions<float16, std::int8_t>(log);
  check_integer_conversions<float16, std::uint8_t>(log);
  check_integer_conversions<float16, std::int16_t>(log);
  check_integer_conversions<float16, std::uint16_t>(log);
  check_integer_conversions<float16, std::int32_t>(log);
  check_integer_conversions<float16, std::uint64_t>(log);
  check_integer_conversions<bfloat16, std::int8_t>(log);
  check_integer_conversions<bfloat16, std::uint16_t>(log);
  check_integer_conversions<bfloat16, std::int32_t>(log);
  check_integer_conversions<bfloat16, std::uint32_t>(log);
  check_integer_conversions<bfloat16, std::int64_t>(log);
  check_integer_conversions<bfloat16, std::uint64_t>(log);
  FLUIDK_CHECK_LOG(log);
}

TEST_CASE("numeric_limits describe the formats", "[float16][bfloat16]") {
  using HL = std::numeric_limits<float16>;
  STATIC_REQUIRE(HL::is_specialized);
  STATIC_REQUIRE(HL::is_iec559);
  STATIC_REQUIRE(HL::has_denorm == std::denorm_present);
  STATIC_REQUIRE(HL::digits == 11);
  CHECK(static_cast<float>(HL::max()) == 65504.0f);
  CHECK(static_cast<float>(HL::lowest()) == -65504.0f);
  CHECK(static_cast<float>(HL::min()) == 0x1p-14f);
  CHECK(static_cast<float>(HL::denorm_min()) == 0x1p-24f);
  CHECK(static_cast<float>(HL::epsilon()) == 0x1p-10f);
  CHECK(static_cast<float>(HL::round_error()) == 0.5f);
  CHECK(static_cast<float>(HL::infinity()) == INFINITY);
  CHECK(fluidk::isnan(HL::quiet_NaN()));
  CHECK(fluidk::isnan(HL::signaling_NaN()));
  CHECK((HL::signaling_NaN().bits() & 0x0200u) == 0u);
  CHECK(std::ldexp(1.0f, HL::min_exponent - 1) == static_cast<float>(HL::min()));
  CHECK(std::ldexp(1.0f, HL::max_exponent) == 65536.0f);
  CHECK(std::pow(10.0f, static_cast<float>(HL::min_exponent10)) >= static_cast<float>(HL::min()));
  CHECK(std::pow(10.0f, static_cast<float>(HL::max_exponent10)) <= static_cast<float>(HL::max()));
  // epsilon is the gap above one; the representable precision matches digits.
  CHECK(static_cast<float>(float16(1.0f + static_cast<float>(HL::epsilon()))) > 1.0f);
  CHECK(float16(2049.0f).bits() == float16(2048.0f).bits());
  CHECK(static_cast<float>(float16(2047.0f)) == 2047.0f);

  using BL = std::numeric_limits<bfloat16>;
  using FL = std::numeric_limits<float>;
  STATIC_REQUIRE(BL::is_specialized);
  STATIC_REQUIRE(BL::digits == 8);
  STATIC_REQUIRE(BL::min_exponent == FL::min_exponent);
  STATIC_REQUIRE(BL::max_exponent == FL::max_exponent);
  STATIC_REQUIRE(BL::min_exponent10 == FL::min_exponent10);
  STATIC_REQUIRE(BL::max_exponent10 == FL::max_exponent10);
  CHECK(static_cast<float>(BL::min()) == FL::min());
  CHECK(static_cast<float>(BL::max()) == 0x1.FEp127f);
  CHECK(static_cast<float>(BL::lowest()) == -0x1.FEp127f);
  CHECK(static_cast<float>(BL::epsilon()) == 0x1p-7f);
  CHECK(static_cast<float>(BL::denorm_min()) == 0x1p-133f);
  CHECK(static_cast<float>(BL::infinity()) == INFINITY);
  CHECK(fluidk::isnan(BL::quiet_NaN()));
  CHECK(fluidk::isnan(BL::signaling_NaN()));
  CHECK((BL::signaling_NaN().bits() & 0x0040u) == 0u);
  CHECK(bfloat16(257.0f).bits() == bfloat16(256.0f).bits());
  CHECK(static_cast<float>(bfloat16(255.0f)) == 255.0f);
}

template <class Half>
void check_comparisons(mismatch_log& log) {
  std::mt19937 rng(99u);
  for (int i = 0; i < 200000; ++i) {
    const auto a = Half::from_bits(static_cast<std::uint16_t>(rng()));
    // Every other pair shares a magnitude, so equal and signed-zero cases come up too.
    const auto b = (i & 1) != 0 ? Half::from_bits(static_cast<std::uint16_t>(rng()))
                                : Half::from_bits(static_cast<std::uint16_t>(a.bits() ^ (rng() & 0x8000u)));
    const float fa = static_cast<float>(a);
    const float fb = static_cast<float>(b);
    if ((a == b) != (fa == fb) || (a != b) != (fa != fb) || (a < b) != (fa < fb) || (a <= b) != (fa <= fb) ||
        (a > b) != (fa > fb) || (a >= b) != (fa >= fb)) {
      log.add(hex(a.bits()) + " vs " + hex(b.bits()));
    }
  }
}

TEST_CASE("comparisons follow IEEE rules", "[float16][bfloat16]") {
  const auto nan = std::numeric_limits<float16>::quiet_NaN();
  const float16 one(1.0f);
  CHECK_FALSE(nan == nan);
  CHECK(nan != nan);
  CHECK_FALSE(nan < one);
  CHECK_FALSE(nan >= one);
  CHECK_FALSE(one <= nan);
  CHECK(float16(-0.0f) == float16(0.0f));
  CHECK_FALSE(float16(-0.0f) < float16(0.0f));
  CHECK(-std::numeric_limits<float16>::infinity() < std::numeric_limits<float16>::lowest());
  CHECK(std::numeric_limits<float16>::denorm_min() > float16(0.0f));
  CHECK(float16(1.0f) < float16(1.0009765625f));
  const auto bnan = std::numeric_limits<bfloat16>::quiet_NaN();
  CHECK(bnan != bnan);
  CHECK(bfloat16(-0.0f) == bfloat16(0.0f));
  CHECK(bfloat16(1.0f) > bfloat16(-1.0f));

  mismatch_log log;
  check_comparisons<float16>(log);
  check_comparisons<bfloat16>(log);
  FLUIDK_CHECK_LOG(log);
}

// The results of + - * / are checked against the double result rounded once; for float16 sums and
// products, and bfloat16 products, that double is exact.
template <class Half>
void check_arithmetic(mismatch_log& log) {
  std::mt19937 rng(1234u);
  auto agree = [](Half got, double exact) {
    const Half expected(exact);
    return fluidk::isnan(expected) ? fluidk::isnan(got) : got.bits() == expected.bits();
  };
  for (int i = 0; i < 100000; ++i) {
    const auto a = Half::from_bits(static_cast<std::uint16_t>(rng()));
    // Nearby exponents half of the time, where cancellation and ties happen.
    const auto b =
        Half::from_bits(static_cast<std::uint16_t>((i & 1) != 0 ? rng() : (a.bits() ^ (rng() & 0x83FFu))));
    const double da = static_cast<double>(a);
    const double db = static_cast<double>(b);
    if (!agree(a + b, da + db)) log.add(hex(a.bits()) + " + " + hex(b.bits()));
    if (!agree(a - b, da - db)) log.add(hex(a.bits()) + " - " + hex(b.bits()));
    if (!agree(a * b, da * db)) log.add(hex(a.bits()) + " * " + hex(b.bits()));
    if (!agree(a / b, da / db)) log.add(hex(a.bits()) + " / " + hex(b.bits()));
    Half c = a;
    c += b;
    c -= b;
    c *= b;
    c /= b;
    Half d = a + b;
    d = d - b;
    d = d * b;
    d = d / b;
    if (c.bits() != d.bits() && !(fluidk::isnan(c) && fluidk::isnan(d))) log.add("compound " + hex(a.bits()));
    if ((-a).bits() != (a.bits() ^ 0x8000u) || (+a).bits() != a.bits()) log.add("sign " + hex(a.bits()));
  }
}

TEST_CASE("arithmetic is correctly rounded", "[float16][bfloat16]") {
  CHECK(static_cast<float>(float16(1.5f) + float16(2.25f)) == 3.75f);
  CHECK(static_cast<float>(float16(65504.0f) + float16(16.0f)) == INFINITY);  // the tie rounds up
  CHECK(static_cast<float>(float16(65504.0f) + float16(15.0f)) == 65504.0f);
  CHECK(static_cast<float>(float16(1.0f) / float16(3.0f)) == static_cast<float>(float16(1.0 / 3.0)));
  CHECK(static_cast<float>(bfloat16(3.0f) * bfloat16(5.0f)) == 15.0f);
  CHECK(fluidk::isnan(float16(0.0f) / float16(0.0f)));
  CHECK((-float16(0.0f)).bits() == 0x8000);

  mismatch_log log;
  check_arithmetic<float16>(log);
  check_arithmetic<bfloat16>(log);
  FLUIDK_CHECK_LOG(log);
}

TEST_CASE("hash, streaming and type properties", "[float16][bfloat16]") {
  STATIC_REQUIRE(sizeof(float16) == 2);
  STATIC_REQUIRE(sizeof(bfloat16) == 2);
  STATIC_REQUIRE(std::is_trivially_copyable_v<float16>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<bfloat16>);
  STATIC_REQUIRE(std::is_standard_layout_v<float16>);
  STATIC_REQUIRE(std::is_standard_layout_v<bfloat16>);
  STATIC_REQUIRE(std::is_nothrow_default_constructible_v<float16>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<float, float16>);  // conversions round, so they are explicit
  STATIC_REQUIRE_FALSE(std::is_convertible_v<int, bfloat16>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<float16, float>);
  STATIC_REQUIRE(std::is_constructible_v<float, float16>);
  STATIC_REQUIRE(std::is_constructible_v<long long, bfloat16>);

  CHECK(float16{}.bits() == 0);
  CHECK(bfloat16{}.bits() == 0);
  CHECK(std::hash<float16>{}(float16(0.0f)) == std::hash<float16>{}(float16(-0.0f)));
  CHECK(std::hash<bfloat16>{}(bfloat16(0.0f)) == std::hash<bfloat16>{}(bfloat16(-0.0f)));
  std::unordered_set<float16> set{float16(1.0f), float16(2.0f), float16(0.0f)};
  CHECK(set.count(float16(-0.0f)) == 1);
  CHECK(set.count(float16(2.0f)) == 1);
  CHECK(set.count(float16(3.0f)) == 0);

  std::ostringstream os;
  os << float16(1.5f) << ' ' << bfloat16(-2.0f) << ' ' << float16(65504.0f);
  CHECK(os.str() == "1.5 -2 65504");
}

TEST_CASE("conversions are usable in constant expressions", "[float16][bfloat16]") {
  static_assert(float16(1.0f).bits() == 0x3C00);
  static_assert(float16(-2.0).bits() == 0xC000);
  static_assert(float16(2049).bits() == 0x6800);
  static_assert(float16(65520.0f).bits() == 0x7C00);
  static_assert(float16(0x1p-25).bits() == 0x0000);
  static_assert(float16(1.0 + 0x1p-11 + 0x1p-40).bits() == 0x3C01);
  static_assert(static_cast<float>(float16::from_bits(0x3555)) == 0x1.554p-2f);
  static_assert(static_cast<double>(float16::from_bits(0x0001)) == 0x1p-24);
  static_assert(static_cast<int>(float16(-2.5f)) == -2);
  static_assert(static_cast<std::uint8_t>(float16(-2.5f)) == 0);
  static_assert(float16(1.0f) + float16(2.0f) == float16(3.0f));
  static_assert(fluidk::isnan(float16(std::numeric_limits<float>::quiet_NaN())));
  static_assert(bfloat16(1.0).bits() == 0x3F80);
  static_assert(bfloat16(std::int64_t{(1LL << 40) + (1LL << 32) + 1}).bits() == 0x5381);
  static_assert(static_cast<float>(bfloat16::from_bits(0x4049)) == 3.140625f);
  static_assert(fluidk::isinf(bfloat16(1e39)));
  static_assert(std::numeric_limits<bfloat16>::max() > bfloat16(0.0f));
  SUCCEED("evaluated at compile time");
}
