// Which instruction set the CPU transform kernels run with: detected once per process, and
// overridable so that tests and benchmarks can run every path on one machine.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "fluidk/error.hpp"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

// The vector kernels need GNU-style target attributes and x86 intrinsics; elsewhere only the
// portable scalar path is compiled.
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define FLUIDK_DETAIL_X86_KERNELS 1
#else
#define FLUIDK_DETAIL_X86_KERNELS 0
#endif

namespace fluidk::transforms::cpu_kernels {

// Ordered: each level implies the ones before it.
//   avx2:        AVX2 + F16C + FMA (Haswell and later).
//   avx512:      avx2 + AVX-512 F/BW/VL (Skylake-SP and later).
//   avx512_bf16: avx512 + AVX512_BF16 and DQ (Cooper Lake, Sapphire Rapids, AMD Zen 4), for float ->
//                bfloat16 casts only. VCVTNE2PS2BF16 rounds to nearest even as
//                fluidk::bfloat16 does, but flushes subnormal inputs to zero and quiets
//                signalling NaNs: a block of 32 elements holding either goes through the
//                integer rounding of the avx512 level instead, so the bytes are the same.
enum class isa : std::uint8_t { scalar, avx2, avx512, avx512_bf16 };

constexpr std::string_view name_of(isa i) noexcept {
  switch (i) {
    case isa::scalar:
      return "scalar";
    case isa::avx2:
      return "avx2";
    case isa::avx512:
      return "avx512";
    case isa::avx512_bf16:
      return "avx512_bf16";
  }
  return "unknown";
}

namespace detail {
inline isa detect_isa() noexcept {
#if FLUIDK_DETAIL_X86_KERNELS
  __builtin_cpu_init();
  // Clang 14's __builtin_cpu_supports does not know "f16c": read CPUID leaf 1 for it. (AVX2 being
  // reported already means the OS saves the AVX state.)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c)) return isa::scalar;
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl")))
    return isa::avx2;
  // AVX512_BF16 (CPUID leaf 7, subleaf 1, EAX bit 5; subleaf 1 exists when leaf 7 subleaf 0's
  // EAX says so), with AVX512DQ for VFPCLASSPS (every CPU with the one has the other).
  if (__builtin_cpu_supports("avx512dq") && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 &&
      eax >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax & (1u << 5)) != 0)
    return isa::avx512_bf16;
  return isa::avx512;
#else
  return isa::scalar;
#endif
}

// A process-wide choice the kernels read once per call, which tests and benchmarks can force so
// that every path runs on one machine: the instruction-set level here, the store policy and the
// pixel walk in cpu_memory.hpp. -1 while nothing is forced (a relaxed load costs nothing next to
// the data a kernel moves).
class forced_choice {
 public:
  int get() const noexcept { return value_.load(std::memory_order_relaxed); }
  void set(int value) noexcept { value_.store(value, std::memory_order_relaxed); }
  int exchange(int value) noexcept { return value_.exchange(value, std::memory_order_relaxed); }

 private:
  std::atomic<int> value_{-1};
};

// Forces `value` into `choice` for the lifetime of the scope, then restores what it held.
class forced_scope {
 public:
  forced_scope(forced_choice& choice, int value) noexcept
      : choice_(choice), previous_(choice.exchange(value)) {}
  forced_scope(const forced_scope&) = delete;
  forced_scope& operator=(const forced_scope&) = delete;
  ~forced_scope() { choice_.set(previous_); }

 private:
  forced_choice& choice_;
  int previous_;
};

inline forced_choice isa_override;
}  // namespace detail

namespace detail {
// CPUID leaf 0's EBX on AMD: "Auth", the start of "AuthenticAMD".
inline constexpr unsigned amd_vendor_ebx = 0x68747541;

// AMD's family and model numbers (CPUID leaf 1: the base family, plus the extended family where
// the base is 0xF, and the model with the extended model's bits above it there), zeros on other
// vendors' CPUs and where the kernels are not x86 ones. A few of the kernels' choices were
// measured to differ between AMD's generations: Zen and Zen 2 are family 0x17 (Zen 2 from model
// 0x30), Zen 3 and Zen 4 0x19, Zen 5 0x1A.
struct amd_cpu {
  unsigned family = 0, model = 0;
};
inline amd_cpu detect_amd_cpu() noexcept {
#if FLUIDK_DETAIL_X86_KERNELS
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0 || ebx != amd_vendor_ebx) return {};
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return {};
  const unsigned base = (eax >> 8) & 0xF, model = (eax >> 4) & 0xF;
  if (base != 0xF) return {base, model};
  return {base + ((eax >> 20) & 0xFF), model | (((eax >> 16) & 0xF) << 4)};
#else
  return {};
#endif
}
inline unsigned detect_amd_family() noexcept { return detect_amd_cpu().family; }
}  // namespace detail

// AMD Zen 5's family: its cores execute 512-bit instructions at full width (Zen 4 issues most of
// them as two 256-bit halves), and stream stores to memory differently (cpu_memory.hpp).
inline constexpr unsigned zen5_family = 0x1A;

// This CPU's AMD family (detail::detect_amd_family), detected on first use.
inline unsigned detected_amd_family() noexcept {
  static const unsigned value = detail::detect_amd_family();
  return value;
}

namespace detail {
inline forced_choice amd_family_override;
}  // namespace detail

// The AMD family whose measured choices the kernels make now (the casts' engine in
// cpu_kernels.hpp, the streamed NHWC pairs and the source read-ahead in cpu_memory.hpp): the
// forced one if any, else the detected one. (The pixel walk, also chosen by family, has its own
// override: nhwc_walk_scope.)
inline unsigned active_amd_family() noexcept {
  const int forced = detail::amd_family_override.get();
  return forced < 0 ? detected_amd_family() : static_cast<unsigned>(forced);
}

// Makes the kernels choose as on AMD family `family` (0: another vendor's CPU) for the lifetime of
// the scope, then restores the previous choice: for tests and benchmarks, so that every choice
// runs on one machine (the results are the same bytes, and each choice uses only instructions of
// the level in force).
class amd_family_scope {
 public:
  explicit amd_family_scope(unsigned family) noexcept
      : forced_(detail::amd_family_override, static_cast<int>(family & 0xFFFF)) {}

 private:
  detail::forced_scope forced_;
};

// The best level this CPU (and this build) supports; detected on first use.
inline isa detected_isa() noexcept {
  static const isa value = detail::detect_isa();
  return value;
}

inline bool isa_supported(isa i) noexcept { return i <= detected_isa(); }

// The level the kernels use now: the forced one if any, else the detected one.
inline isa active_isa() noexcept {
  const int forced = detail::isa_override.get();
  return forced < 0 ? detected_isa() : static_cast<isa>(forced);
}

// A level the CPU supports, as an int for detail::isa_override; throws for one it does not.
namespace detail {
inline int supported_level(isa level) {
  if (!isa_supported(level))
    throw error("cannot force the " + std::string(name_of(level)) +
                " transform kernels: this CPU supports up to " + std::string(name_of(detected_isa())));
  return static_cast<int>(level);
}
}  // namespace detail

// Makes every kernel use `level` from now on, process-wide (for tests and benchmarks: the
// results are the same bytes on every level, only the speed differs). Throws for a level
// the CPU does not support.
inline void force_isa(isa level) { detail::isa_override.set(detail::supported_level(level)); }

// Back to the detected level.
inline void reset_isa() noexcept { detail::isa_override.set(-1); }

// Forces a level for the lifetime of the scope, then restores the previous choice.
class isa_scope {
 public:
  explicit isa_scope(isa level) : forced_(detail::isa_override, detail::supported_level(level)) {}

 private:
  detail::forced_scope forced_;
};

}  // namespace fluidk::transforms::cpu_kernels
