// The vector engines of the CPU transforms, written once and compiled once per instruction set:
// cpu_kernels.hpp includes this file with FLUIDK_DETAIL_SIMD_TARGET (the target attribute),
// FLUIDK_DETAIL_SIMD_ENGINE (the namespace: avx2 or avx512) and FLUIDK_DETAIL_SIMD_LEVEL (2:
// AVX2 + F16C, 3: + AVX-512 F/BW/VL) defined. Everything here
// carries the target attribute, so that it inlines into one function per kernel and the binary
// still runs, through the portable path, on CPUs without these instructions.
//
// Every element conversion here gives the same bits as detail::convert (the tests check every
// path against it): the hardware conversions are used where they agree and patched where they
// do not (signalling NaNs, which F16C quiets).

// The small helpers must inline into the kernels (GCC otherwise keeps some, such as the
// transposes, as calls that pass eight registers through memory).
#define FLUIDK_DETAIL_SIMD_INLINE FLUIDK_DETAIL_SIMD_TARGET __attribute__((always_inline))

namespace fluidk::transforms::cpu_kernels::detail::FLUIDK_DETAIL_SIMD_ENGINE {

// Eight elements in the eight 32-bit lanes of a ymm register: raw bits for bit copies, a float
// for conversions among float, float16 and bfloat16 (exact for both half types).
using v8 = __m256;

FLUIDK_DETAIL_SIMD_INLINE inline __m128i pack32to16(__m256i x) noexcept {
#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
  // The zero-masking form: the plain one trips GCC 12's -Wmaybe-uninitialized in its header.
  return _mm256_maskz_cvtepi32_epi16(0xFF, x);
#else
  // The lanes hold values below 2^16, so unsigned saturation is a plain truncation.
  const __m256i packed = _mm256_packus_epi32(x, x);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
#endif
}

// ---- Element conversions on registers ------------------------------------------------------------

// binary16 (in the 16-bit lanes of h) to float. VCVTPH2PS quiets signalling NaNs; fluidk keeps
// every NaN's bits (so round trips are exact). NaNs are rare: the fix-up sits behind one
// well-predicted branch.
FLUIDK_DETAIL_SIMD_INLINE inline v8 f16_to_f32(__m128i h) noexcept {
  v8 f = _mm256_cvtph_ps(h);
  const v8 nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);
  if (!_mm256_testz_ps(nan, nan)) {
    const __m256i h32 = _mm256_cvtepu16_epi32(h);
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x8000)), 16);
    const __m256i mant = _mm256_slli_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x3FF)), 13);
    const __m256i exact = _mm256_or_si256(_mm256_or_si256(sign, mant), _mm256_set1_epi32(0x7F800000));
    f = _mm256_blendv_ps(f, _mm256_castsi256_ps(exact), nan);
  }
  return f;
}

// float to binary16, round to nearest even (the immediate makes it independent of MXCSR).
// VCVTPS2PH quiets signalling NaNs; fluidk keeps the top of the payload as it is and sets the
// quiet bit only where the payload would otherwise vanish.
FLUIDK_DETAIL_SIMD_INLINE inline __m128i f32_to_f16(v8 v) noexcept {
  __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const v8 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  if (!_mm256_testz_ps(nan, nan)) {
    const __m256i b = _mm256_castps_si256(v);
    __m256i top = _mm256_and_si256(_mm256_srli_epi32(b, 13), _mm256_set1_epi32(0x3FF));
    top = _mm256_or_si256(
        top, _mm256_and_si256(_mm256_cmpeq_epi32(top, _mm256_setzero_si256()), _mm256_set1_epi32(0x200)));
    const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x8000));
    const __m256i exact = _mm256_or_si256(_mm256_or_si256(sign, top), _mm256_set1_epi32(0x7C00));
    h = pack32to16(_mm256_blendv_epi8(_mm256_cvtepu16_epi32(h), exact, _mm256_castps_si256(nan)));
  }
  return h;
}

// float to bfloat16, round to nearest even on the bits: adding 0x7FFF plus the lowest kept bit
// carries into the kept half exactly when the dropped half is above the tie, or at the tie with
// an odd kept half; a carry out of the significand moves into the exponent, up to infinity, as
// it must. Subnormals round like normals (same exponent range); AVX512_BF16 would flush them.
// A NaN keeps its sign and top payload bits, with the quiet bit set if those are all zero.
// The result is the high half of each lane (the low half is what the rounding left). The kept
// bit is tested in place, not shifted down, and two registers are packed at once
// (pack_high16_pair): shifts and shuffles, which share two ports on AMD Zen 3, were what bounded
// the cast there. Zen 3, AVX2, one thread, GB/s read + written: float -> bfloat16 at [1, 64, 28,
// 28] 37.0 -> 41.0, at [1, 64, 112, 112] 32.4 -> 36.8 (memcpy of the same bytes 50-76).
FLUIDK_DETAIL_SIMD_INLINE inline __m256i f32_to_bf16_high(__m256i b) noexcept {
  const __m256i kept = _mm256_set1_epi32(0x10000);
  const __m256i odd = _mm256_cmpeq_epi32(_mm256_and_si256(b, kept), kept);  // -1 where odd
  return _mm256_sub_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x7FFF)), odd);
}
// f32_to_bf16_high with the NaN rule.
FLUIDK_DETAIL_SIMD_INLINE inline __m256i f32_to_bf16_high_checked(v8 v) noexcept {
  const __m256i b = _mm256_castps_si256(v);
  __m256i r = f32_to_bf16_high(b);
  const v8 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  if (!_mm256_testz_ps(nan, nan)) {
    const __m256i empty =
        _mm256_cmpeq_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7F0000)), _mm256_setzero_si256());
    const __m256i exact = _mm256_or_si256(b, _mm256_and_si256(empty, _mm256_set1_epi32(0x400000)));
    r = _mm256_blendv_epi8(r, exact, _mm256_castps_si256(nan));
  }
  return r;
}
// The high halves of 8 lanes in order, and of two registers' 16 lanes (a's then b's) in one:
// one pack and one lane permute for both.
FLUIDK_DETAIL_SIMD_INLINE inline __m128i pack_high16(__m256i r) noexcept {
  return pack32to16(_mm256_srli_epi32(r, 16));
}
FLUIDK_DETAIL_SIMD_INLINE inline __m256i pack_high16_pair(__m256i a, __m256i b) noexcept {
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(_mm256_srli_epi32(a, 16), _mm256_srli_epi32(b, 16)),
                                  0xD8);
}
// The rounding alone: right for every lane but NaNs.
FLUIDK_DETAIL_SIMD_INLINE inline __m128i f32_to_bf16_raw(v8 v) noexcept {
  return pack_high16(f32_to_bf16_high(_mm256_castps_si256(v)));
}
FLUIDK_DETAIL_SIMD_INLINE inline __m128i f32_to_bf16(v8 v) noexcept {
  return pack_high16(f32_to_bf16_high_checked(v));
}

#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
// The same three conversions on sixteen lanes, for the cast loops.
using v16 = __m512;

// The zero-masking forms of these, with every lane kept: the plain forms pass an undefined
// vector that trips GCC 12's -Wmaybe-uninitialized (GCC bug 105593) in users' -Werror builds.
FLUIDK_DETAIL_SIMD_INLINE inline __m512i sll32(__m512i a, unsigned n) noexcept {
  return _mm512_maskz_slli_epi32(0xFFFF, a, n);
}
FLUIDK_DETAIL_SIMD_INLINE inline __m512i srl32(__m512i a, unsigned n) noexcept {
  return _mm512_maskz_srli_epi32(0xFFFF, a, n);
}
FLUIDK_DETAIL_SIMD_INLINE inline __m512i widen16(__m256i h) noexcept {
  return _mm512_maskz_cvtepu16_epi32(0xFFFF, h);
}
FLUIDK_DETAIL_SIMD_INLINE inline __m256i narrow32(__m512i x) noexcept {
  return _mm512_maskz_cvtepi32_epi16(0xFFFF, x);
}

FLUIDK_DETAIL_SIMD_INLINE inline v16 f16_to_f32(__m256i h) noexcept {
  v16 f = _mm512_maskz_cvtph_ps(0xFFFF, h);
  const __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
  if (nan != 0) {
    const __m512i h32 = widen16(h);
    const __m512i sign = sll32(_mm512_and_si512(h32, _mm512_set1_epi32(0x8000)), 16);
    const __m512i mant = sll32(_mm512_and_si512(h32, _mm512_set1_epi32(0x3FF)), 13);
    const __m512i exact = _mm512_or_si512(_mm512_or_si512(sign, mant), _mm512_set1_epi32(0x7F800000));
    f = _mm512_mask_blend_ps(nan, f, _mm512_castsi512_ps(exact));
  }
  return f;
}
// The conversion alone: right for every lane but signalling NaNs.
FLUIDK_DETAIL_SIMD_INLINE inline __m256i f32_to_f16_raw(v16 v) noexcept {
  return _mm512_maskz_cvtps_ph(0xFFFF, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
FLUIDK_DETAIL_SIMD_INLINE inline __m256i f32_to_f16(v16 v) noexcept {
  __m256i h = f32_to_f16_raw(v);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  if (nan != 0) {
    const __m512i b = _mm512_castps_si512(v);
    const __m512i top = _mm512_and_si512(srl32(b, 13), _mm512_set1_epi32(0x3FF));
    const __mmask16 empty = _mm512_cmpeq_epi32_mask(top, _mm512_setzero_si512());
    const __m512i quiet = _mm512_mask_or_epi32(top, empty, top, _mm512_set1_epi32(0x200));
    const __m512i sign = _mm512_and_si512(srl32(b, 16), _mm512_set1_epi32(0x8000));
    const __m512i exact = _mm512_or_si512(_mm512_or_si512(sign, quiet), _mm512_set1_epi32(0x7C00));
    h = _mm256_mask_blend_epi16(nan, h, narrow32(exact));
  }
  return h;
}
FLUIDK_DETAIL_SIMD_INLINE inline __m512i f32_to_bf16_lanes(__m512i b) noexcept {
  const __m512i odd = _mm512_and_si512(srl32(b, 16), _mm512_set1_epi32(1));
  return srl32(_mm512_add_epi32(b, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
}
FLUIDK_DETAIL_SIMD_INLINE inline __m256i f32_to_bf16_raw(v16 v) noexcept {
  return narrow32(f32_to_bf16_lanes(_mm512_castps_si512(v)));
}
FLUIDK_DETAIL_SIMD_INLINE inline __m256i f32_to_bf16(v16 v) noexcept {
  const __m512i b = _mm512_castps_si512(v);
  __m512i r = f32_to_bf16_lanes(b);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  if (nan != 0) {
    const __m512i top = srl32(b, 16);
    const __mmask16 empty = _mm512_mask_cmpeq_epi32_mask(nan, _mm512_and_si512(top, _mm512_set1_epi32(0x7F)),
                                                         _mm512_setzero_si512());
    r = _mm512_mask_mov_epi32(r, nan, top);
    r = _mm512_mask_or_epi32(r, empty, r, _mm512_set1_epi32(0x40));
  }
  return narrow32(r);
}
#endif

// ---- Readers: elements from memory into 32-bit lanes ------------------------------------------------
// load(p): 8 elements at p. load2(a, b): 4 elements at a into lanes 0-3 and 4 at b into lanes
// 4-7, which lets a transpose take its 128-bit lane crossing from the loads for free.

// The 8 bytes at a, then the 8 at b, in one register.
FLUIDK_DETAIL_SIMD_INLINE inline __m128i load_half_pair16(const std::byte* a, const std::byte* b) noexcept {
  return _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a)),
                            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b)));
}
FLUIDK_DETAIL_SIMD_INLINE inline __m128i load16(const std::byte* p) noexcept {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

struct rd_b32 {
  using scalar_t = std::uint32_t;
  static constexpr std::int64_t size = 4;
  FLUIDK_DETAIL_SIMD_INLINE static v8 load(const std::byte* p) noexcept {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  }
  FLUIDK_DETAIL_SIMD_INLINE static v8 load2(const std::byte* a, const std::byte* b) noexcept {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(reinterpret_cast<const float*>(a))),
                                _mm_loadu_ps(reinterpret_cast<const float*>(b)), 1);
  }
};
struct rd_f32 : rd_b32 {
  using scalar_t = float;
#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
  FLUIDK_DETAIL_SIMD_INLINE static v16 load16(const std::byte* p) noexcept { return _mm512_loadu_ps(p); }
#endif
};
struct rd_b16 {
  using scalar_t = std::uint16_t;
  static constexpr std::int64_t size = 2;
  FLUIDK_DETAIL_SIMD_INLINE static v8 load(const std::byte* p) noexcept {
    return _mm256_castsi256_ps(_mm256_cvtepu16_epi32(FLUIDK_DETAIL_SIMD_ENGINE::load16(p)));
  }
  FLUIDK_DETAIL_SIMD_INLINE static v8 load2(const std::byte* a, const std::byte* b) noexcept {
    return _mm256_castsi256_ps(_mm256_cvtepu16_epi32(load_half_pair16(a, b)));
  }
};
struct rd_b8 {
  using scalar_t = std::uint8_t;
  static constexpr std::int64_t size = 1;
  FLUIDK_DETAIL_SIMD_INLINE static v8 load(const std::byte* p) noexcept {
    return _mm256_castsi256_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  FLUIDK_DETAIL_SIMD_INLINE static v8 load2(const std::byte* a, const std::byte* b) noexcept {
    std::int32_t x, y;
    std::memcpy(&x, a, 4);
    std::memcpy(&y, b, 4);
    return _mm256_castsi256_ps(
        _mm256_cvtepu8_epi32(_mm_unpacklo_epi32(_mm_cvtsi32_si128(x), _mm_cvtsi32_si128(y))));
  }
};
struct rd_f16 {
  using scalar_t = float16;
  static constexpr std::int64_t size = 2;
  FLUIDK_DETAIL_SIMD_INLINE static v8 load(const std::byte* p) noexcept {
    return f16_to_f32(FLUIDK_DETAIL_SIMD_ENGINE::load16(p));
  }
  // load_raw: load without the NaN fix-up, right for every lane but signalling NaNs (quieted).
  FLUIDK_DETAIL_SIMD_INLINE static v8 load_raw(const std::byte* p) noexcept {
    return _mm256_cvtph_ps(FLUIDK_DETAIL_SIMD_ENGINE::load16(p));
  }
  FLUIDK_DETAIL_SIMD_INLINE static v8 load2(const std::byte* a, const std::byte* b) noexcept {
    return f16_to_f32(load_half_pair16(a, b));
  }
#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
  FLUIDK_DETAIL_SIMD_INLINE static v16 load16(const std::byte* p) noexcept {
    return f16_to_f32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  FLUIDK_DETAIL_SIMD_INLINE static v16 load16_raw(const std::byte* p) noexcept {
    return _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
#endif
};
struct rd_bf16 {
  using scalar_t = bfloat16;
  static constexpr std::int64_t size = 2;
  // bfloat16 is the top half of a float: widening is a shift, exact for every encoding.
  FLUIDK_DETAIL_SIMD_INLINE static v8 load(const std::byte* p) noexcept {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(FLUIDK_DETAIL_SIMD_ENGINE::load16(p)), 16));
  }
  FLUIDK_DETAIL_SIMD_INLINE static v8 load2(const std::byte* a, const std::byte* b) noexcept {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load_half_pair16(a, b)), 16));
  }
#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
  FLUIDK_DETAIL_SIMD_INLINE static v16 load16(const std::byte* p) noexcept {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(sll32(widen16(h), 16));
  }
#endif
};

// ---- Writers: 32-bit lanes into elements in memory -------------------------------------------------
// store(p, v) writes 8 elements (store16: 16 elements, from a zmm register).

// stream(p, v) and stream2 write the same bytes with non-temporal stores, which bypass the
// caches: p must be aligned to the width written (the kernels stream only where every such
// store is). Writers of 1-byte elements never stream.
struct wr_b32 {
  using scalar_t = std::uint32_t;
  static constexpr std::int64_t size = 4;
  static constexpr bool streams = true;
  FLUIDK_DETAIL_SIMD_INLINE static void store(std::byte* p, v8 v) noexcept {
    _mm256_storeu_ps(reinterpret_cast<float*>(p), v);
  }
  FLUIDK_DETAIL_SIMD_INLINE static void stream(std::byte* p, v8 v) noexcept {
    _mm256_stream_ps(reinterpret_cast<float*>(p), v);
  }
  FLUIDK_DETAIL_SIMD_INLINE static void store2(std::byte* p, v8 a, v8 b) noexcept {
    store(p, a);
    store(p + 32, b);
  }
  FLUIDK_DETAIL_SIMD_INLINE static void stream2(std::byte* p, v8 a, v8 b) noexcept {
    stream(p, a);
    stream(p + 32, b);
  }
};
struct wr_f32 : wr_b32 {
  using scalar_t = float;
#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
  FLUIDK_DETAIL_SIMD_INLINE static void store16(std::byte* p, v16 v) noexcept { _mm512_storeu_ps(p, v); }
  FLUIDK_DETAIL_SIMD_INLINE static void stream16(std::byte* p, v16 v) noexcept {
    _mm512_stream_ps(reinterpret_cast<float*>(p), v);
  }
#endif
};
// Writers of 16-bit elements: pack(v) gives the 16 bytes to write.
template <class Self>
struct wr_16bit {
  static constexpr std::int64_t size = 2;
  static constexpr bool streams = true;
  FLUIDK_DETAIL_SIMD_INLINE static void store(std::byte* p, v8 v) noexcept {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), Self::pack(v));
  }
  FLUIDK_DETAIL_SIMD_INLINE static void stream(std::byte* p, v8 v) noexcept {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), Self::pack(v));
  }
  // 16 elements as one 32-byte store. pack2(a, b) and pack2_raw: the 32 bytes of a's then b's
  // elements (a writer may pack the two at once).
  FLUIDK_DETAIL_SIMD_INLINE static __m256i pack2(v8 a, v8 b) noexcept {
    return _mm256_set_m128i(Self::pack(b), Self::pack(a));
  }
  FLUIDK_DETAIL_SIMD_INLINE static __m256i pack2_raw(v8 a, v8 b) noexcept {
    return _mm256_set_m128i(Self::pack_raw(b), Self::pack_raw(a));
  }
  FLUIDK_DETAIL_SIMD_INLINE static void store2(std::byte* p, v8 a, v8 b) noexcept {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), Self::pack2(a, b));
  }
  FLUIDK_DETAIL_SIMD_INLINE static void stream2(std::byte* p, v8 a, v8 b) noexcept {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), Self::pack2(a, b));
  }
#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
  FLUIDK_DETAIL_SIMD_INLINE static void store16(std::byte* p, v16 v) noexcept {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), Self::pack(v));
  }
  FLUIDK_DETAIL_SIMD_INLINE static void stream16(std::byte* p, v16 v) noexcept {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), Self::pack(v));
  }
#endif
};
// pack_raw(v): pack(v) for lanes that hold no NaN (one instruction fewer or several: the NaN
// fix-up), for blocks whose NaNs were looked for at once; raw_needs_check says whether it differs.
struct wr_b16 : wr_16bit<wr_b16> {
  using scalar_t = std::uint16_t;
  static constexpr bool raw_needs_check = false;
  FLUIDK_DETAIL_SIMD_INLINE static __m128i pack(v8 v) noexcept { return pack32to16(_mm256_castps_si256(v)); }
  FLUIDK_DETAIL_SIMD_INLINE static __m128i pack_raw(v8 v) noexcept { return pack(v); }
};
struct wr_f16 : wr_16bit<wr_f16> {
  using scalar_t = float16;
  static constexpr bool raw_needs_check = true;
  FLUIDK_DETAIL_SIMD_INLINE static __m128i pack(v8 v) noexcept { return f32_to_f16(v); }
  FLUIDK_DETAIL_SIMD_INLINE static __m128i pack_raw(v8 v) noexcept {
    return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
  FLUIDK_DETAIL_SIMD_INLINE static __m256i pack(v16 v) noexcept { return f32_to_f16(v); }
  FLUIDK_DETAIL_SIMD_INLINE static __m256i pack_raw(v16 v) noexcept { return f32_to_f16_raw(v); }
#endif
};
struct wr_bf16 : wr_16bit<wr_bf16> {
  using scalar_t = bfloat16;
  static constexpr bool raw_needs_check = true;
  FLUIDK_DETAIL_SIMD_INLINE static __m128i pack(v8 v) noexcept { return f32_to_bf16(v); }
  FLUIDK_DETAIL_SIMD_INLINE static __m128i pack_raw(v8 v) noexcept { return f32_to_bf16_raw(v); }
  FLUIDK_DETAIL_SIMD_INLINE static __m256i pack2(v8 a, v8 b) noexcept {
    return pack_high16_pair(f32_to_bf16_high_checked(a), f32_to_bf16_high_checked(b));
  }
  FLUIDK_DETAIL_SIMD_INLINE static __m256i pack2_raw(v8 a, v8 b) noexcept {
    return pack_high16_pair(f32_to_bf16_high(_mm256_castps_si256(a)),
                            f32_to_bf16_high(_mm256_castps_si256(b)));
  }
#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
  FLUIDK_DETAIL_SIMD_INLINE static __m256i pack(v16 v) noexcept { return f32_to_bf16(v); }
  FLUIDK_DETAIL_SIMD_INLINE static __m256i pack_raw(v16 v) noexcept { return f32_to_bf16_raw(v); }
#endif
};
struct wr_b8 {
  using scalar_t = std::uint8_t;
  static constexpr std::int64_t size = 1;
  static constexpr bool streams = false;
  FLUIDK_DETAIL_SIMD_INLINE static void store(std::byte* p, v8 v) noexcept {
#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm256_maskz_cvtepi32_epi8(0xFF, _mm256_castps_si256(v)));
#else
    const __m256i x = _mm256_castps_si256(v);
    const __m256i w = _mm256_packus_epi16(_mm256_packus_epi32(x, x), _mm256_setzero_si256());
    const __m128i lo = _mm256_castsi256_si128(w), hi = _mm256_extracti128_si256(w, 1);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_unpacklo_epi32(lo, hi));
#endif
  }
  FLUIDK_DETAIL_SIMD_INLINE static void store2(std::byte* p, v8 a, v8 b) noexcept {
    store(p, a);
    store(p + 8, b);
  }
  FLUIDK_DETAIL_SIMD_INLINE static void stream(std::byte* p, v8 v) noexcept { store(p, v); }
  FLUIDK_DETAIL_SIMD_INLINE static void stream2(std::byte* p, v8 a, v8 b) noexcept { store2(p, a, b); }
};

// A store of 8 (put) or 16 (put2) elements, streaming or not.
template <class W>
FLUIDK_DETAIL_SIMD_INLINE inline void put(std::byte* p, v8 v, bool nt) noexcept {
  if (nt)
    W::stream(p, v);
  else
    W::store(p, v);
}
template <class W>
FLUIDK_DETAIL_SIMD_INLINE inline void put2(std::byte* p, v8 a, v8 b, bool nt) noexcept {
  if (nt)
    W::stream2(p, a, b);
  else
    W::store2(p, a, b);
}
// 32 or 16 bytes already packed.
FLUIDK_DETAIL_SIMD_INLINE inline void put_packed(std::byte* p, __m256i x, bool nt) noexcept {
  if (nt)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), x);
  else
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), x);
}
FLUIDK_DETAIL_SIMD_INLINE inline void put_packed(std::byte* p, __m128i x, bool nt) noexcept {
  if (nt)
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), x);
  else
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), x);
}
// Whether the 32 binary16 values h[0..3] hold a NaN: a magnitude above infinity's, 0x7C00.
FLUIDK_DETAIL_SIMD_INLINE inline bool holds_f16_nan(const __m128i* h) noexcept {
  const __m128i magnitude = _mm_set1_epi16(0x7FFF);
  const __m128i top =
      _mm_max_epi16(_mm_max_epi16(_mm_and_si128(h[0], magnitude), _mm_and_si128(h[1], magnitude)),
                    _mm_max_epi16(_mm_and_si128(h[2], magnitude), _mm_and_si128(h[3], magnitude)));
  const __m128i nan = _mm_cmpgt_epi16(top, _mm_set1_epi16(0x7C00));
  return !_mm_testz_si128(nan, nan);
}
// Readers and writers whose conversion has a NaN fix-up that a block holding no NaN can skip
// (load_raw, pack_raw), and the loads and stores of such a block: raw where there is a raw form.
template <class R>
concept loads_raw = requires(const std::byte* p) {
  R::load_raw(p);
};
template <class W>
concept packs_raw = requires {
  requires W::raw_needs_check;
};
template <class R>
FLUIDK_DETAIL_SIMD_INLINE inline v8 load_if_no_nan(const std::byte* p) noexcept {
  if constexpr (loads_raw<R>)
    return R::load_raw(p);
  else
    return R::load(p);
}
template <class W>
FLUIDK_DETAIL_SIMD_INLINE inline void put2_if_no_nan(std::byte* p, v8 a, v8 b, bool nt) noexcept {
  if constexpr (packs_raw<W>)
    put_packed(p, W::pack2_raw(a, b), nt);
  else
    put2<W>(p, a, b, nt);
}
#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
template <class W>
FLUIDK_DETAIL_SIMD_INLINE inline void put16(std::byte* p, v16 v, bool nt) noexcept {
  if (nt)
    W::stream16(p, v);
  else
    W::store16(p, v);
}
// loads_raw on 16 lanes.
template <class R>
concept loads16_raw = requires(const std::byte* p) {
  R::load16_raw(p);
};
template <class R>
FLUIDK_DETAIL_SIMD_INLINE inline v16 load16_if_no_nan(const std::byte* p) noexcept {
  if constexpr (loads16_raw<R>)
    return R::load16_raw(p);
  else
    return R::load16(p);
}
template <class W>
FLUIDK_DETAIL_SIMD_INLINE inline void put16_if_no_nan(std::byte* p, v16 v, bool nt) noexcept {
  if constexpr (packs_raw<W>)
    put_packed(p, W::pack_raw(v), nt);
  else
    put16<W>(p, v, nt);
}
#endif

// Asks for the line at p + offset bytes ahead of use, without forming a pointer past the end of
// anything (a prefetch never faults). Under store_policy::prefetched: a store to a line that
// is not in L1 waits for its read-for-ownership, and where the hardware prefetchers do not run
// far enough ahead of several interleaved store streams, prefetching the target lines pays
// (Sapphire Rapids, earlier kernels: 3-6%). On Zen 4 they do, and it costs 10-25%. And, through
// the caches, for the source rows of gather8_lines beyond the L2 (layout_job::read_ahead).
FLUIDK_DETAIL_SIMD_INLINE inline void prefetch(const std::byte* p, std::int64_t offset) noexcept {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(p) + std::uintptr_t(offset)),
               _MM_HINT_T0);
}

template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline void convert_one(const std::byte* s, std::byte* d) noexcept {
  store_elem<typename W::scalar_t>(d, convert<typename W::scalar_t>(load_elem<typename R::scalar_t>(s)));
}

// ---- Transposes ------------------------------------------------------------------------------

// An 8x8 block of 32-bit lanes loaded as a[k] = [row k, cols 0-3 | row k+4, cols 0-3] and
// a[4+k] = the same for cols 4-7 (k < 4) becomes its columns: a[j] = column j. Two rounds of
// in-lane shuffles (16) instead of three (24): the lane crossing came with the loads.
// transpose_quarter does one half: a[0..3] (cols 0-3, or cols 4-7) into those four columns.
FLUIDK_DETAIL_SIMD_INLINE inline void transpose_quarter(v8* a) noexcept {
  const v8 t0 = _mm256_unpacklo_ps(a[0], a[1]), t1 = _mm256_unpackhi_ps(a[0], a[1]);
  const v8 t2 = _mm256_unpacklo_ps(a[2], a[3]), t3 = _mm256_unpackhi_ps(a[2], a[3]);
  a[0] = _mm256_shuffle_ps(t0, t2, 0x44);
  a[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
  a[2] = _mm256_shuffle_ps(t1, t3, 0x44);
  a[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
}
FLUIDK_DETAIL_SIMD_INLINE inline void transpose_halves(v8* a) noexcept {
  transpose_quarter(a);
  transpose_quarter(a + 4);
}

// Loads 8 elements at rows[k] + offset (k < 8) and transposes them: a[j] = column j. The rows
// come as pointers, not as a stride: from a stride, GCC keeps one pointer per row and half row
// as induction variables of the caller's loop, more than the registers, and the loop spends
// most of its instructions spilling them.
template <class R>
FLUIDK_DETAIL_SIMD_INLINE inline void load_rows_transposed(const std::byte* const* rows, std::int64_t offset,
                                                           v8* a) noexcept {
  constexpr std::int64_t half = 4 * R::size;
#pragma GCC unroll 8
  for (int k = 0; k < 4; ++k) {
    a[k] = R::load2(rows[k] + offset, rows[k + 4] + offset);
    a[k + 4] = R::load2(rows[k] + offset + half, rows[k + 4] + offset + half);
  }
  transpose_halves(a);
}

// r[i][j] -> r[j][i] from whole rows, for blocks whose missing rows are zero registers.
FLUIDK_DETAIL_SIMD_INLINE inline void transpose8(v8* r) noexcept {
  const v8 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const v8 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const v8 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const v8 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const v8 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const v8 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const v8 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const v8 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
// ---- Transposes by two-register permutes ----------------------------------------------------------
// Copies of 4-byte elements between planar and channels-together layouts on Regs zmm registers of
// 16 lanes: log2(Regs) rounds of two-source permutes (VPERMT2PS), each exchanging one bit of the
// register number with one bit of the lane number, the last also putting the lanes in their final
// order. 8 permutes and 4 inserting loads per 256 bytes (or 12 permutes, loading whole lines),
// against 16 in-lane shuffles and 8 inserting loads in AVX2's 8x8 transposes: shuffles are what the
// layout transforms wait on from the L3. On Zen 4 (float, 3 MiB, one thread, the AVX2 kernels'
// figure first): NCHW -> NHWC 0.82x -> 0.88x memcpy, NCHW -> nChw8c 0.82x -> 0.87x, nChw8c -> NCHW
// 0.82x -> 0.89x. The same rounds run on ymm registers of 16 two-byte lanes (VPERMT2W), from a plan
// with 16-bit indices (scatter16_lines).
template <int Regs, class Index = std::int32_t>
struct permute_rounds {
  static_assert(Regs == 4 || Regs == 8);
  static constexpr int count = Regs == 4 ? 2 : 3;
  // Per round, the permute for the output register whose exchanged bit is 0, and for the one
  // whose bit is 1: lane l takes lane index[l] of the pair (16 and up: of the second register).
  alignas(64) Index index[count][2][16]{};
};

// The rounds for a transpose where lane l of output register r is input lane source(r, l), as
// register * 16 + lane. Only a permutation of the bits of (register, lane) has such rounds; any
// other mapping stops the compilation here.
template <int Regs, class Index = std::int32_t, class Source>
consteval permute_rounds<Regs, Index> plan_permute_rounds(Source source) {
  constexpr int count = permute_rounds<Regs, Index>::count;
  permute_rounds<Regs, Index> plan;
  int at[Regs][16]{};        // at[r][l]: the input position now in lane l of register r
  int out_reg[Regs * 16]{};  // the output register of each input position
  for (int r = 0; r < Regs; ++r)
    for (int l = 0; l < 16; ++l) {
      at[r][l] = r * 16 + l;
      out_reg[source(r, l)] = r;
    }
  for (int s = 0; s < count; ++s) {
    int next[Regs][16]{};
    if (s + 1 < count) {
      // The lane bit that holds bit s of every element's output register trades places with
      // register bit s.
      int lb = -1;
      for (int l = 0; l < 4 && lb < 0; ++l) {
        bool holds = true;
        for (int r = 0; r < Regs; ++r)
          for (int ln = 0; ln < 16; ++ln) holds = holds && ((out_reg[at[r][ln]] >> s) & 1) == ((ln >> l) & 1);
        if (holds) lb = l;
      }
      if (lb < 0) throw "not a permutation of the bits of (register, lane)";
      for (int r = 0; r < Regs; ++r)
        for (int ln = 0; ln < 16; ++ln) {
          const int bit = (r >> s) & 1, from = (ln >> lb) & 1, lane = (ln & ~(1 << lb)) | (bit << lb);
          next[r][ln] = at[(r & ~(1 << s)) | (from << s)][lane];
          plan.index[s][bit][ln] = static_cast<Index>(from * 16 + lane);
        }
    } else {
      // The last round takes each output lane from where it is, the same for every pair.
      for (int r = 0; r < Regs; ++r)
        for (int ln = 0; ln < 16; ++ln) {
          const int bit = (r >> s) & 1, a = r & ~(1 << s), want = source(r, ln);
          int found = -1;
          for (int k = 0; k < 32; ++k)
            if (at[k < 16 ? a : a | (1 << s)][k % 16] == want) found = k;
          // The pair a = 0 sets the permute; every other pair must take the same.
          if (found < 0 || (a != 0 && plan.index[s][bit][ln] != found))
            throw "the last round differs between register pairs";
          plan.index[s][bit][ln] = static_cast<Index>(found);
          next[r][ln] = want;
        }
    }
    for (int r = 0; r < Regs; ++r)
      for (int ln = 0; ln < 16; ++ln) at[r][ln] = next[r][ln];
  }
  return plan;
}

// nChw8c -> planar of 2-byte lanes: register i (ymm) holds pixels 2i and 2i + 1 (8 channels
// each); out: channel c's 16 pixels.
inline constexpr auto from_pixel_pairs = [](int c, int p) { return (p >> 1) * 16 + (p & 1) * 8 + c; };
inline constexpr permute_rounds<8, std::int16_t> to_planar8_words =
    plan_permute_rounds<8, std::int16_t>(from_pixel_pairs);
// Planar -> nChw8c: register k holds 8 pixels of channels k and k + 4; out: pixels 2i and
// 2i + 1.
inline constexpr permute_rounds<4> from_planar8 = plan_permute_rounds<4>([](int i, int l) {
  const int p = 2 * i + (l >> 3), c = l & 7;
  return (c & 3) * 16 + (c >> 2) * 8 + p;
});

FLUIDK_DETAIL_SIMD_INLINE inline __m512i load_index(const std::int32_t* p) noexcept {
  return _mm512_load_si512(p);
}
FLUIDK_DETAIL_SIMD_INLINE inline __m256i load_index(const std::int16_t* p) noexcept {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
}
FLUIDK_DETAIL_SIMD_INLINE inline __m512 permute_pair(__m512 a, __m512i index, __m512 b) noexcept {
  return _mm512_permutex2var_ps(a, index, b);
}
FLUIDK_DETAIL_SIMD_INLINE inline __m256i permute_pair(__m256i a, __m256i index, __m256i b) noexcept {
  return _mm256_permutex2var_epi16(a, index, b);
}

template <class V, int Regs, class Index>
FLUIDK_DETAIL_SIMD_INLINE inline void permute(V* z, const permute_rounds<Regs, Index>& plan) noexcept {
#pragma GCC unroll 3
  for (int s = 0; s < permute_rounds<Regs, Index>::count; ++s) {
    const auto lo = load_index(plan.index[s][0]), hi = load_index(plan.index[s][1]);
#pragma GCC unroll 8
    for (int a = 0; a < Regs; ++a) {
      if (a & (1 << s)) continue;
      const V x = permute_pair(z[a], lo, z[a | (1 << s)]);
      z[a | (1 << s)] = permute_pair(z[a], hi, z[a | (1 << s)]);
      z[a] = x;
    }
  }
}

#endif

// ---- Layout transform (fused with a conversion when R and W differ) ---------------------------------

// How far ahead of the stores the target is prefetched: about 8 KB of a target stream.
inline constexpr std::int64_t target_ahead_bytes = 8192;
// How far ahead of its reads a streamed nChw8c source is prefetched (layout_job::source_ahead):
// four steps of scatter_chunk's 32 pixels of float. On AMD Zen 5, the fused nChw8c float -> NCHW
// float16 pass at [16, 64, 112, 112], one thread: 2 KiB ahead 50.3 GB/s, 4 KiB 56.6, none 43.5.
inline constexpr std::int64_t source_ahead_bytes = 4096;

// One step of gather_chunks: the 8 pixels at `offset` of one chunk's rows (rows[0..7]), or of two
// chunks' (rows[0..15], gather_pair_step), transposed and written at dp + i * d_px, each pixel's
// two chunks back to back.
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline void gather_step(const std::byte* const* rows, std::int64_t offset,
                                                  std::byte* dp, std::int64_t d_px, bool nt) noexcept {
  v8 a[8];
  load_rows_transposed<R>(rows, offset, a);
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) put<W>(dp + i * d_px, a[i], nt);
}
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline void gather_pair_step(const std::byte* const* rows, std::int64_t offset,
                                                       std::byte* dp, std::int64_t d_px, bool nt) noexcept {
  v8 a[8], b[8];
  load_rows_transposed<R>(rows, offset, a);
  load_rows_transposed<R>(rows + 8, offset, b);
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) put2<W>(dp + i * d_px, a[i], b[i], nt);
}

// gather_chunks of two chunks (G == 2: NCHW -> NHWC of float on the AVX2 engine) without the
// prefetching policy: a function of its own, so that its 16 rows, 8 pixels and 16 registers of
// data are allocated apart from run_layout's (inlined there, it reloaded row pointers from the
// stack every step). On AMD Zen 3, one thread, GB/s read + written, [1, 64, 28, 28] 46.6 -> 49.5,
// [1, 64, 112, 112] 53.5 -> 53.8 (memcpy 65-67), the speed of a standalone loop of the same
// transposes; at 3 MiB that is 0.82x memcpy, and the one-chunk (8 rows) and four-chunk passes were
// slower in that loop (0.6x and 0.4-0.7x of it).
template <class R, class W>
FLUIDK_DETAIL_SIMD_TARGET __attribute__((noinline)) void gather2_steps(const std::byte* s, std::int64_t s_row,
                                                                       std::byte* d, std::int64_t d_px,
                                                                       std::int64_t count, bool nt) noexcept {
  for (std::int64_t p = 0; p < count; p += 8) {
    const std::byte* sp = s + p * R::size;
    const std::byte* at[16];
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) at[r] = sp + r * s_row;
    gather_pair_step<R, W>(at, 0, d + p * d_px, d_px, nt);
  }
}

// Planar -> channels together for G adjacent full chunks (8G channel rows, row stride s_row),
// 8 pixels at a time, up to `count` pixels (a multiple of 8). The chunks of a pixel are adjacent
// in the target (NHWC, or the two halves of an nChw16c block): with the pixels outermost, each
// step writes all G chunks of its 8 pixels, so a G that fills a line writes whole lines and
// never returns to them. G is a constant so that the rows stay in registers and the
// chunk loop unrolls (read from an array indexed at run time, the same loop was 15-25% slower on
// Zen 4). The chunks go by pairs, each pixel's two written back to back (streaming, a line is
// thus whole before the next is begun, as write-combining needs).
template <class R, class W, int G>
FLUIDK_DETAIL_SIMD_INLINE inline void gather_chunks(const std::byte* s, std::int64_t s_row, std::byte* d,
                                                    std::int64_t d_px, std::int64_t count, bool pf,
                                                    bool nt) noexcept {
  const std::int64_t ahead = std::max<std::int64_t>(16, target_ahead_bytes / d_px) * d_px;
  // The target lines of 8 pixels: one run of lines where the pixels are adjacent (nChw8c, and
  // nChw16c or NHWC when the group covers them), else each pixel's lines.
  const bool adjacent = d_px == 8 * G * W::size;
  const std::byte* rows[8 * G];  // the 8G source rows
  for (int r = 0; r < 8 * G; ++r) rows[r] = s + r * s_row;
  if constexpr (G == 2) {
    if (!pf) {
      gather2_steps<R, W>(s, s_row, d, d_px, count, nt);
      return;
    }
  }
  if constexpr (G == 1) {
    if (adjacent && !pf) {
      // nChw8c: the 8 pixels' lanes at constant offsets from one pointer, as in scatter_chunk
      // (with the pixels d_px apart, GCC spilled some of the pointers every step). On AMD Zen 3
      // (AVX2), NCHW -> nChw8c of float, one thread, GB/s read + written: [1, 64, 28, 28] 52.0
      // -> 68.6, [1, 64, 112, 112] 42.5 -> 44.2, [1, 2048, 7, 7] 28.0 -> 34.2 (memcpy 46-78).
      for (std::int64_t p = 0; p < count; p += 8)
        gather_step<R, W>(rows, p * R::size, d + p * (8 * W::size), 8 * W::size, nt);
      return;
    }
  }
  for (std::int64_t p = 0; p < count; p += 8) {
    std::byte* dp = d + p * d_px;
    if (pf) {
      if (adjacent) {
        for (std::int64_t line = 0; line < 8 * d_px; line += 64) prefetch(dp + line, ahead);
      } else {
        for (int i = 0; i < 8; ++i) {
          for (std::int64_t line = 0; line < 8 * G * W::size; line += 64)
            prefetch(dp + i * d_px + line, ahead);
        }
      }
      // The source rows as well, a line each per 16 pixels.
      if (p % 16 == 0) {
        for (int r = 0; r < 8 * G; ++r) prefetch(rows[r] + p * R::size, 128);
      }
    }
    if constexpr (G >= 2) {
      // One chunk at a time (eight registers live where pairs take all sixteen) wrote each
      // target line in two halves, 8 stores apart: where those stores all fall in one L1 set (a
      // pixel stride that is a multiple of 4 KiB: NCHW -> NHWC of 2048 float channels), the line
      // had left L1 before its second half came. On Zen 4, AVX2, [1, 2048, 7, 7]: 17.6 -> 35.5
      // GB/s; [1, 2040, 7, 7] 64 -> 68 GB/s; 64 channels from 12 KiB to 13 MiB the same within 2%.
#pragma GCC unroll 2
      for (int g = 0; g < G; g += 2)
        gather_pair_step<R, W>(rows + 8 * g, p * R::size, dp + 8 * g * W::size, d_px, nt);
    } else {
      gather_step<R, W>(rows, p * R::size, dp, d_px, nt);
    }
  }
}

// The 8 pixels at s of one chunk's rows (row stride s_row), transposed: r[i] = pixel i's 8
// channels. Rows at or past kv are padding: zeros, never loaded.
template <class R>
FLUIDK_DETAIL_SIMD_INLINE inline void load_chunk_transposed(const std::byte* s, std::int64_t s_row,
                                                            std::int64_t kv, v8* r) noexcept {
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) r[k] = k < kv ? R::load(s + k * s_row) : _mm256_setzero_ps();
  transpose8(r);
}

// The same for one chunk whose rows at or past kv are padding (read as zeros, never loaded).
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline void gather_partial(const std::byte* s, std::int64_t s_row, std::byte* d,
                                                     std::int64_t d_px, std::int64_t count, std::int64_t kv,
                                                     bool pf, bool nt) noexcept {
  const std::int64_t ahead = std::max<std::int64_t>(16, target_ahead_bytes / d_px) * d_px;
  for (std::int64_t p = 0; p < count; p += 8) {
    if (pf && !nt) {
      for (int i = 0; i < 8; ++i) prefetch(d + (p + i) * d_px, ahead);
    }
    v8 r[8];
    load_chunk_transposed<R>(s + p * R::size, s_row, kv, r);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) put<W>(d + (p + i) * d_px, r[i], nt);
  }
}

// 8 pixels of scatter_chunk, through the caches.
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline void scatter_step(const std::byte* const* pixels, const std::byte* s,
                                                   std::int64_t s_px, std::byte* const* rows, std::int64_t p,
                                                   std::int64_t kv, bool pf) noexcept {
  if (pf && p % 16 == 0) {
    // The source stream too: with another core busy the hardware prefetcher falls behind
    // (measured: 8% faster then, 1% when the machine is quiet).
    for (std::int64_t i = 0; i < 16; i += std::max<std::int64_t>(1, 64 / s_px))
      prefetch(s + (p + i) * s_px, 4096);
    for (int k = 0; k < 8; ++k)
      if (k < kv) prefetch(rows[k] + p * W::size, 256);
  }
  v8 a[8];
  load_rows_transposed<R>(pixels, p * s_px, a);
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k)
    if (k < kv) W::store(rows[k] + p * W::size, a[k]);
}

#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
// Readers of 16 elements and writers of 16 lanes into 16-bit elements (float, float16 and
// bfloat16 into float16 or bfloat16).
template <class R, class W>
concept packs16 = requires(const std::byte* p, v16 v) {
  R::load16(p);
  W::pack_raw(v);
};

// scatter16_block where the 16 pixels are contiguous, 8 lanes each (an nChw8c source): two pixels
// a 512-bit load, converted to one register of 16 halves, and to_planar8_words' three rounds of
// 16-bit two-register permutes. Against the AVX2 block: 8 conversions of 16 lanes instead of 16
// of 8, no inserts, the NaN test on masks (one compare per four pixels), and 24 permutes for 24
// unpacks.
// The fused nChw8c float -> NCHW float16 pass on Zen 4, one thread: 68 -> 86 GB/s at 3 MiB.
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline void scatter16_lines(const std::byte* s, std::byte* const* rows,
                                                      std::int64_t at, std::int64_t kv) noexcept {
  v16 z[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) z[i] = R::load16(s + i * 16 * R::size);
  bool nan = false;
  if constexpr (W::raw_needs_check) {
    __mmask16 m = 0;
#pragma GCC unroll 4
    for (int i = 0; i < 8; i += 2) m |= _mm512_cmp_ps_mask(z[i], z[i + 1], _CMP_UNORD_Q);
    nan = m != 0;
  }
  __m256i y[8];
  if (nan) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) y[i] = W::pack(z[i]);
  } else {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) y[i] = W::pack_raw(z[i]);
  }
  permute(y, to_planar8_words);
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c)
    if (c < kv) _mm256_storeu_si256(reinterpret_cast<__m256i*>(rows[c] + at), y[c]);
}
#endif

// The rows of 16 pixels (8 lanes each) packed into 16-bit elements, out[k] = row k's 16 elements,
// for scatter16_block: each pixel's 8 lanes are packed (converted) to 8 elements, pixels i and
// i + 8 share a register, and three rounds of 16-bit unpacks in each 128-bit lane leave a row's
// 16 pixels in one register. Where the conversion has a NaN fix-up, the block is looked at for
// NaNs once (one compare per two pixels) and converted without the fix-up; false, with nothing
// made, where it holds one.
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline bool scatter16_rows(const std::byte* const* pixels, std::int64_t offset,
                                                     std::int64_t s_px8, __m256i* out) noexcept {
  static_assert(W::size == 2);
  __m256i y[8];
  v8 nan = _mm256_setzero_ps();
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    const v8 a = R::load(pixels[i] + offset), b = R::load(pixels[i] + offset + s_px8);
    if constexpr (W::raw_needs_check) nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
    y[i] = W::pack2_raw(a, b);
  }
  if (W::raw_needs_check && !_mm256_testz_ps(nan, nan)) return false;
  __m256i t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi16(y[2 * i], y[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi16(y[2 * i], y[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 8; h += 4) {
    u[h] = _mm256_unpacklo_epi32(t[h], t[h + 2]);
    u[h + 1] = _mm256_unpackhi_epi32(t[h], t[h + 2]);
    u[h + 2] = _mm256_unpacklo_epi32(t[h + 1], t[h + 3]);
    u[h + 3] = _mm256_unpackhi_epi32(t[h + 1], t[h + 3]);
  }
  // u[0..3]: channels (0,1), (2,3), (4,5), (6,7) of pixels 0-3 (and 8-11); u[4..7] of pixels 4-7.
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    out[2 * c] = _mm256_unpacklo_epi64(u[c], u[c + 4]);
    out[2 * c + 1] = _mm256_unpackhi_epi64(u[c], u[c + 4]);
  }
  return true;
}

// 16 pixels of scatter_chunk into 16-bit rows (W::size == 2): a row's 16 pixels made in one
// register (scatter16_rows) for one 32-byte store. Against two 32-bit transposes and sixteen
// 16-byte stores: 24 shuffles and 8 inserts instead of 32 shuffles and 16 inserting loads, and
// half the stores (the fused nChw8c float -> NCHW float16 pass on the AVX2 engine 1.15x -> 1.93x
// the sequential steps on Zen 4, from the L3). On the AVX-512 engine, pixels that are contiguous
// (nChw8c) take scatter16_lines instead. `at` is the byte offset of the first pixel in every row.
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline void scatter16_block(const std::byte* const* pixels, std::int64_t offset,
                                                      std::int64_t s_px8, std::byte* const* rows,
                                                      std::int64_t at, std::int64_t kv) noexcept {
  static_assert(W::size == 2);
#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
  if constexpr (packs16<R, W>) {
    if (s_px8 == 64 * R::size) {
      scatter16_lines<R, W>(pixels[0] + offset, rows, at, kv);
      return;
    }
  }
#endif
  __m256i out[8];
  if (scatter16_rows<R, W>(pixels, offset, s_px8, out)) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)
      if (k < kv) _mm256_storeu_si256(reinterpret_cast<__m256i*>(rows[k] + at), out[k]);
    return;
  }
  // A NaN where the conversion has a fix-up (rare): both halves through the 32-bit transpose and
  // the fix-up, not unrolled (the code is large, and a sanitizer's instrumentation makes it larger).
#pragma GCC unroll 1
  for (int half = 0; half < 2; ++half) {
    v8 a[8];
    load_rows_transposed<R>(pixels, offset + half * s_px8, a);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)
      if (k < kv) W::store(rows[k] + at + half * 8 * W::size, a[k]);
  }
}

// One line of each of the first kv target rows of a chunk, streamed (4-byte targets: 16 pixels,
// the 64 bytes of a line), straight from the registers: channels 0-3 of the 16 pixels, as two
// transpose_quarter blocks of 8 pixels (eight registers), then channels 4-7, each row's line
// written by two stores back to back. Through a line staged in L1 per row, as the 2-byte targets
// go, every byte was stored twice, and AMD Zen 1 stores 16 bytes a cycle: nChw8c -> NCHW of float
// streamed, one thread, GB/s read + written, medians of 2-6 runs, [1, 64, 56, 56] (forced to
// stream) 26.0 -> 41.8, [1, 64, 112, 112] 24.7 -> 35.6, [4, 64, 112, 112] 10.9 -> 12.9 (memcpy
// about 45, 20-27 and 12).
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline void stream_line4(const std::byte* const* pixels, std::int64_t offset,
                                                   std::int64_t s_px8, std::byte* const* rows,
                                                   std::int64_t at, std::int64_t kv) noexcept {
  static_assert(W::size == 4);
  constexpr std::int64_t half = 4 * R::size;
#pragma GCC unroll 2
  for (int g = 0; g < 2; ++g) {
    v8 a[4], b[4];  // pixels 0-7 and 8-15; lanes 0-3 from pixel k, 4-7 from pixel k + 4
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      a[k] = R::load2(pixels[k] + offset + g * half, pixels[k + 4] + offset + g * half);
      b[k] = R::load2(pixels[k] + offset + s_px8 + g * half, pixels[k + 4] + offset + s_px8 + g * half);
    }
    transpose_quarter(a);
    transpose_quarter(b);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)
      if (4 * g + k < kv) {
        W::stream(rows[4 * g + k] + at, a[k]);
        W::stream(rows[4 * g + k] + at + 8 * W::size, b[k]);
      }
  }
}

// Channels together -> planar for one chunk: pixels (8 lanes each, readable even past kv) to the
// first kv channel rows, 8 pixels at a time (eight registers live: sixteen, two steps at once,
// spilled on AVX2). Streaming, each row's line is streamed whole: 16 floats made in registers
// (stream_line4), or 32 halves, the first 16 gathered in L1. Written 8 pixels at a time,
// each row's line would stay open across steps, and eight rows of half-written lines are more
// than write-combining holds (measured on Zen 4: 2x slower than through the caches).
// `ahead`: a streamed nChw8c source is prefetched source_ahead_bytes ahead (layout_job::source_ahead).
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline void scatter_chunk(const std::byte* s, std::int64_t s_px, std::byte* d,
                                                    std::int64_t d_row, std::int64_t count, std::int64_t kv,
                                                    bool pf, bool nt, bool ahead = false) noexcept {
  std::byte* rows[8];  // the target rows as pointers: see load_rows_transposed
  for (int k = 0; k < 8; ++k) rows[k] = d + k * d_row;
  const std::byte* pixels[8];  // the first 8 source pixels, advanced by an offset
  for (int i = 0; i < 8; ++i) pixels[i] = s + i * s_px;
  constexpr std::int64_t line_px = 64 / W::size;
  // Streaming starts where the rows reach a line boundary (they all do together: the job
  // streams only when a row is a whole number of lines); the pixels before go through the caches.
  const std::int64_t head =
      nt ? std::min(count, std::int64_t((64 - reinterpret_cast<std::uintptr_t>(d) % 64) % 64) / W::size) : 0;
  std::int64_t p = 0;
  for (; p + 8 <= head; p += 8) scatter_step<R, W>(pixels, s, s_px, rows, p, kv, pf);
  if (nt) {
    if constexpr (W::size == 2) {
      alignas(64) std::byte staged[8][64] = {};  // zeroed once: GCC cannot see that each row is written first
      std::byte* staged_rows[8];
      for (int k = 0; k < 8; ++k) staged_rows[k] = staged[k];
      // The line's second 16 pixels stay in registers where scatter16_block would make them as
      // scatter16_rows does (not where the AVX-512 engine takes scatter16_lines): only the first
      // 16 are staged, half the stores and loads of staging both (AMD Zen 1, one thread, GB/s
      // read + written, medians of four runs: the fused nChw8c float -> NCHW float16 pass,
      // streamed, [1, 64, 56, 56] 16.0 -> 19.8, [1, 64, 112, 112] 15.1 -> 18.8).
      bool lines = false;
#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
      if constexpr (packs16<R, W>) lines = s_px == 8 * R::size;
#endif
      const bool read_ahead = ahead && s_px == 8 * R::size;
      for (; p + line_px <= count; p += line_px) {
        if (read_ahead) {
          // The lines this step reads, source_ahead_bytes further on. A loop: unrolled, the 16
          // prefetches made the whole step slower ([64, 64, 112, 112] on Zen 5: 42.0 against 52.7
          // GB/s, and 29.9 against 35.7 with the prefetches off).
#pragma GCC unroll 1
          for (std::int64_t line = 0; line < line_px * 8 * R::size; line += 64)
            prefetch(s + p * s_px + line, source_ahead_bytes);
        }
        scatter16_block<R, W>(pixels, p * s_px, 8 * s_px, staged_rows, 0, kv);
        __m256i second[8];
        if (!lines && scatter16_rows<R, W>(pixels, (p + 16) * s_px, 8 * s_px, second)) {
#pragma GCC unroll 8
          for (int k = 0; k < 8; ++k)
            if (k < kv) {
              const __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(staged[k]));
              _mm256_stream_si256(reinterpret_cast<__m256i*>(rows[k] + p * W::size), lo);
              _mm256_stream_si256(reinterpret_cast<__m256i*>(rows[k] + p * W::size + 32), second[k]);
            }
          continue;
        }
        // scatter16_lines, or a NaN to fix up: the second half staged as well. (One store loop for
        // both, the second half loaded into `second` here, ran 8-10% slower streamed on Zen 1.)
        scatter16_block<R, W>(pixels, (p + 16) * s_px, 8 * s_px, staged_rows, 16 * W::size, kv);
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k)
          if (k < kv) {
            const __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(staged[k]));
            const __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(staged[k] + 32));
            _mm256_stream_si256(reinterpret_cast<__m256i*>(rows[k] + p * W::size), lo);
            _mm256_stream_si256(reinterpret_cast<__m256i*>(rows[k] + p * W::size + 32), hi);
          }
      }
    } else if constexpr (W::size == 4) {
      for (; p + line_px <= count; p += line_px)
        stream_line4<R, W>(pixels, p * s_px, 8 * s_px, rows, p * W::size, kv);
    }
  }
  if constexpr (W::size != 2) {
    if (!pf && kv == 8 && s_px == 8 * R::size) {
      // Pixels one after the other (nChw8c), full chunks: a step's pixels at constant offsets
      // from one pointer. From the array of eight pointers above, GCC kept the source pointers
      // and the target rows in more registers than there are, and reloaded or spilled some every
      // step: on AMD Zen 3 (AVX2), nChw8c -> NCHW of float, one thread, GB/s read + written, [1,
      // 64, 28, 28] 42.6 -> 52.9, [1, 64, 112, 112] 41.7 -> 47.6, [1, 2048, 7, 7] 30.7 -> 34.6
      // (memcpy 47-72). (2-byte targets take scatter16_block below, its pixels as they are.)
      constexpr std::int64_t px = 8 * R::size;
      const std::byte* near[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) near[i] = s + i * px;
      for (; p < count; p += 8) scatter_step<R, W>(near, s, px, rows, p, 8, false);
    }
  }
  if constexpr (W::size == 2) {
    if (!pf) {
      const bool read_ahead = ahead && s_px == 8 * R::size;
      for (; p + 16 <= count; p += 16) {
        if (read_ahead) {
          // As in the streamed loop above: the lines this step reads, further on.
#pragma GCC unroll 1
          for (std::int64_t line = 0; line < 16 * 8 * R::size; line += 64)
            prefetch(s + p * s_px + line, source_ahead_bytes);
        }
        scatter16_block<R, W>(pixels, p * s_px, 8 * s_px, rows, p * W::size, kv);
      }
    }
  }
  for (; p < count; p += 8) scatter_step<R, W>(pixels, s, s_px, rows, p, kv, pf);
}

#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
inline bool on_line(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }

// Inserting loads: 8 elements of 4 bytes at a, and at b in the upper half. (The zero-masked
// form of the insert is the same instruction under an all-ones mask; GCC 12 warns about the
// undefined pass-through value of the plain one.)
FLUIDK_DETAIL_SIMD_INLINE inline __m512 load_pair8(const std::byte* a, const std::byte* b) noexcept {
  return _mm512_castpd_ps(_mm512_maskz_insertf64x4(
      0xFF, _mm512_castpd256_pd512(_mm256_loadu_pd(reinterpret_cast<const double*>(a))),
      _mm256_loadu_pd(reinterpret_cast<const double*>(b)), 1));
}

// Planar -> nChw8c of one full chunk, 8 pixels a step: rows k and k + 4 in one register, 256
// contiguous bytes out. Streaming needs the chunk on a line boundary; it is not where an odd
// number of pixels puts it off by half a line, and then the chunk goes through gather_partial.
// On Zen 4 at 3 MiB: 0.92x memcpy, against 0.82x for AVX2's transposes and 0.83x for 16 pixels
// a step (eight registers of data: GCC spilled some).
// (NCHW -> NHWC of 8 channels is the same transform and takes it too.)
// Reading ahead (layout_job::read_ahead), each row's next 4 lines are prefetched every 64 pixels,
// 512 bytes ahead of the reads, while they lie in the row. The eight rows are read half a line
// each in turn, which the hardware prefetchers follow less well than lines read in bursts: on
// Zen 4 from the L3, 0.86x -> 0.95x memcpy at 3 MiB and 0.90x -> 0.94x at 784 KiB; from the
// L2 the prefetches cost 9% (they take load slots), and streamed at 49 MiB 9%.
template <class R, class W, bool Ahead>
FLUIDK_DETAIL_SIMD_INLINE inline void gather8_lines_as(const std::byte* s, std::int64_t s_row, std::byte* d,
                                                       std::int64_t count, bool nt) noexcept {
  const std::byte* rows[8];
  for (int k = 0; k < 8; ++k) rows[k] = s + k * s_row;
  for (std::int64_t p = 0; p < count; p += 8) {
    if constexpr (Ahead) {
      if (p % 64 == 0 && p + 192 <= count) {
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k)
#pragma GCC unroll 4
          for (int l = 0; l < 4; ++l) prefetch(rows[k] + p * 4, 512 + l * 64);
      }
    }
    __m512 z[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) z[k] = load_pair8(rows[k] + p * 4, rows[k + 4] + p * 4);
    permute(z, from_planar8);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) put16<wr_f32>(d + p * 32 + i * 64, z[i], nt);
  }
}
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline void gather8_lines(const std::byte* s, std::int64_t s_row, std::byte* d,
                                                    std::int64_t count, bool nt, bool ahead) noexcept {
  if (nt && !on_line(d)) {
    gather_partial<R, W>(s, s_row, d, 32, count, 8, false, nt);
    return;
  }
  if (ahead)
    gather8_lines_as<R, W, true>(s, s_row, d, count, nt);
  else
    gather8_lines_as<R, W, false>(s, s_row, d, count, nt);
}

// A 4x4 transpose in each 128-bit lane of x[0..3]: lane l of x[i] becomes element i of lane l
// of x[0..3]. In-lane unpacks, cheaper than two-register permutes (see gather16_lines). (The
// zero-masked forms are the plain instructions under an all-ones mask; GCC 12 warns about the
// undefined pass-through value of the plain ones.)
FLUIDK_DETAIL_SIMD_INLINE inline void transpose4_lanes(__m512* x) noexcept {
  const __m512d t0 = _mm512_castps_pd(_mm512_maskz_unpacklo_ps(0xFFFF, x[0], x[1]));
  const __m512d t1 = _mm512_castps_pd(_mm512_maskz_unpackhi_ps(0xFFFF, x[0], x[1]));
  const __m512d t2 = _mm512_castps_pd(_mm512_maskz_unpacklo_ps(0xFFFF, x[2], x[3]));
  const __m512d t3 = _mm512_castps_pd(_mm512_maskz_unpackhi_ps(0xFFFF, x[2], x[3]));
  x[0] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xFF, t0, t2));
  x[1] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xFF, t0, t2));
  x[2] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xFF, t1, t3));
  x[3] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xFF, t1, t3));
}

// The 16 pixels of one chunk at `at` (an nChw8c source: 512 contiguous bytes), transposed:
// row[k] = channel k's 16 pixels. Pixels i and i + 4 share a register (inserting loads), a 4x4
// transpose in each lane leaves channels c and c + 4 of four pixels in each lane, and one lane
// shuffle per row puts its 16 pixels together.
FLUIDK_DETAIL_SIMD_INLINE inline void rows16_of_chunk(const std::byte* at, v16* row) noexcept {
  __m512 lo[4], hi[4];  // pixels 0-7 and 8-15
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    lo[i] = load_pair8(at + i * 32, at + (i + 4) * 32);
    hi[i] = load_pair8(at + (i + 8) * 32, at + (i + 12) * 32);
  }
  transpose4_lanes(lo);
  transpose4_lanes(hi);
  // lo[c]'s lanes: channel c of pixels 0-3, channel c + 4 of pixels 0-3, the same of 4-7.
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    row[c] = _mm512_maskz_shuffle_f32x4(0xFFFF, lo[c], hi[c], _MM_SHUFFLE(2, 0, 2, 0));
    row[c + 4] = _mm512_maskz_shuffle_f32x4(0xFFFF, lo[c], hi[c], _MM_SHUFFLE(3, 1, 3, 1));
  }
}

// Whether 8 rows of d_row bytes from d all start on a cache line.
inline bool rows_on_lines(const std::byte* d, std::int64_t d_row) noexcept {
  return on_line(d) && d_row % 64 == 0;
}

// scatter8_lines through the caches into rows that do not start on a line (4-byte aligned):
// each row's 16 pixels of a step are stored as the line they fall in, made of the previous
// step's pixels and this one's (one two-register permute a row), so that no store crosses a
// line; the row's first and last lines are stored under a mask of its own lanes. A store that
// crosses a line is split in two: on Intel Xeon (family 6, model 207) nChw8c -> NCHW of float
// [1, 64, 14, 14] (rows of 784 bytes, every 64-byte store across a line) ran at 17-27 GB/s
// against 47-52 at 28 x 28 (rows on lines), on the AVX2 engine as slowly. `count` >= 16;
// returns the pixels done (the steps of 16), whose rows are written up to there.
FLUIDK_DETAIL_SIMD_INLINE inline std::int64_t scatter8_aligned(const std::byte* s, std::byte* const* rows,
                                                               std::int64_t count, std::int64_t kv) noexcept {
  // Row k: its first `head[k]` pixels end its first line (0: it starts on one); the line its
  // step j ends is written at line[k] + 64 j from pixels head[k] .. 15 of step j - 1 and 0 ..
  // head[k] - 1 of step j (lane l from lane l + head[k] of the pair).
  std::uintptr_t line[8];
  __m512i index[8];
  __mmask16 first[8];
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const std::uintptr_t at = reinterpret_cast<std::uintptr_t>(rows[k]);
    const int head = int((64 - at % 64) % 64 / 4);
    line[k] = at + std::uintptr_t(head) * 4 - 64;
    index[k] = _mm512_add_epi32(lanes, _mm512_set1_epi32(head));
    first[k] = static_cast<__mmask16>(0xFFFF0000u >> head);  // lanes 16 - head .. 15
  }
  v16 prev[8], row[8];
  rows16_of_chunk(s, prev);
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k)
    if (k < kv)
      _mm512_mask_storeu_ps(reinterpret_cast<void*>(line[k]), first[k],
                            _mm512_permutex2var_ps(prev[k], index[k], prev[k]));
  std::int64_t p = 16;
  for (; p + 16 <= count; p += 16) {
    rows16_of_chunk(s + p * 32, row);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      if (k < kv)
        _mm512_store_ps(reinterpret_cast<void*>(line[k] + std::uintptr_t(p) * 4),
                        _mm512_permutex2var_ps(prev[k], index[k], row[k]));
      prev[k] = row[k];
    }
  }
  // The lines the rows' last steps end in, up to pixel p.
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k)
    if (k < kv)
      _mm512_mask_storeu_ps(reinterpret_cast<void*>(line[k] + std::uintptr_t(p) * 4),
                            static_cast<__mmask16>(~first[k]),
                            _mm512_permutex2var_ps(prev[k], index[k], prev[k]));
  return p;
}

// nChw8c -> planar of one chunk (the first kv rows written), 16 pixels a step (rows16_of_chunk):
// 512 contiguous bytes in, 64 bytes of each row out. Streaming, the rows reach a line boundary
// together (the job streams a planar target only when its rows are whole lines) after at most 8
// pixels. 16 unpacks and 8 lane shuffles a step, against 24 two-register permutes before. On
// Zen 4, one thread: 0.88-0.91x -> 0.96x memcpy at 196 KiB (in the L2), 68-71 -> 74 GB/s at
// [1, 2048, 7, 7]; from the L3 and beyond, the same. The rows are stored in order once all eight
// are made (they had been stored as the shuffles made them: c, c + 4): on the Intel Xeon of
// scatter8_aligned, one thread, GB/s read + written, [1, 64, 28, 28] 46 -> 53, [1, 64, 56, 56]
// 32.5 -> 43.5; on Zen 4 the same as before. With `line_rows` (layout_job), rows that do not
// start on a line are written a line at a time (scatter8_aligned) from 64 pixels on.
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline void scatter8_lines(const std::byte* s, std::byte* d, std::int64_t d_row,
                                                     std::int64_t count, std::int64_t kv, bool nt,
                                                     bool line_rows) noexcept {
  std::byte* rows[8];
  for (int k = 0; k < 8; ++k) rows[k] = d + k * d_row;
  const std::byte* pixels[8];
  for (int i = 0; i < 8; ++i) pixels[i] = s + i * 32;
  std::int64_t p = 0;
  if (nt && !on_line(d) && count >= 8) {
    scatter_step<R, W>(pixels, s, 32, rows, 0, kv, false);
    p = 8;
  }
  if (line_rows && !nt && count >= 64 && !rows_on_lines(d, d_row) &&
      reinterpret_cast<std::uintptr_t>(d) % 4 == 0) {
    p = scatter8_aligned(s, rows, count, kv);
  } else {
    for (; p + 16 <= count; p += 16) {
      v16 row[8];
      rows16_of_chunk(s + p * 32, row);
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k)
        if (k < kv) put16<wr_f32>(rows[k] + p * 4, row[k], nt);
    }
  }
  for (; p < count; p += 8) scatter_step<R, W>(pixels, s, 32, rows, p, kv, false);
}

// 8 pixels of the 16 rows at rows[k] + offset: lo[i] = pixel i's 16 channels, hi[i] pixel i + 4's.
FLUIDK_DETAIL_SIMD_INLINE inline void load16_rows_transposed(const std::byte* const* rows,
                                                             std::int64_t offset, __m512* lo,
                                                             __m512* hi) noexcept {
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    const __m512 a = load_pair8(rows[r] + offset, rows[r + 4] + offset);
    const __m512 b = load_pair8(rows[r + 8] + offset, rows[r + 12] + offset);
    lo[r] = _mm512_maskz_shuffle_f32x4(0xFFFF, a, b, _MM_SHUFFLE(2, 0, 2, 0));
    hi[r] = _mm512_maskz_shuffle_f32x4(0xFFFF, a, b, _MM_SHUFFLE(3, 1, 3, 1));
  }
  transpose4_lanes(lo);
  transpose4_lanes(hi);
}

// Planar -> 16 channels together, 8 pixels a step: sixteen rows in, a line per pixel out (at
// d_px bytes from one pixel to the next). Rows r and r + 4 share a register, and rows r + 8 and
// r + 12 another (inserting loads); one 128-bit lane shuffle of the two puts rows r, r + 4,
// r + 8 and r + 12 of pixels 0-3 in the four lanes of one register, another those of pixels 4-7;
// a 4x4 transpose in each lane then leaves each pixel's 16 channels in one register. Eight lane
// shuffles and sixteen unpacks, against 24 two-register permutes before (three
// rounds of 8): on Zen 4, NCHW -> NHWC of float 0.87x -> 0.91x memcpy at 3 MiB, 0.91x -> 0.98x at
// 784 KiB and 0.85x -> 0.92x in the L2 (the two kernels in one loop, interleaved). The caller
// streams only where every such line is aligned. (16 pixels a step, 16 registers of data: GCC
// spilled them, 0.59x.)
template <bool NT>
FLUIDK_DETAIL_SIMD_INLINE inline void gather16_lines_as(const std::byte* s, std::int64_t s_row, std::byte* d,
                                                        std::int64_t d_px, std::int64_t count) noexcept {
  const std::byte* rows[16];
  for (int k = 0; k < 16; ++k) rows[k] = s + k * s_row;
  for (std::int64_t p = 0; p < count; p += 8) {
    __m512 lo[4], hi[4];  // pixels 0-3 and 4-7 of the step
    load16_rows_transposed(rows, p * 4, lo, hi);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      put16<wr_f32>(d + (p + i) * d_px, lo[i], NT);
      put16<wr_f32>(d + (p + i + 4) * d_px, hi[i], NT);
    }
  }
}

// The same two pairs of chunks a step (32 channels), each pixel's two lines written back to back,
// over blocks of `block` pixels (layout_job::pair_block): every pair of pairs goes over a
// block's pixels before the next pair of pairs; an odd pair last goes alone.
template <bool NT>
FLUIDK_DETAIL_SIMD_INLINE inline void gather16_pairs_as(const std::byte* s, std::int64_t s_row, std::byte* d,
                                                        std::int64_t d_px, std::int64_t count,
                                                        std::int64_t pairs, std::int64_t block) noexcept {
  const std::byte* rows[16];
  for (int k = 0; k < 16; ++k) rows[k] = s + k * s_row;
  const std::int64_t pair_row = 16 * s_row;
  for (std::int64_t b = 0; b < count; b += block) {
    const std::int64_t e = std::min(count, b + block);
    std::int64_t g = 0;
    for (; g + 2 <= pairs; g += 2) {
      for (std::int64_t p = b; p < e; p += 8) {
        std::byte* dp = d + p * d_px + g * 64;
        __m512 lo[4], hi[4], lo2[4], hi2[4];
        load16_rows_transposed(rows, p * 4 + g * pair_row, lo, hi);
        load16_rows_transposed(rows, p * 4 + (g + 1) * pair_row, lo2, hi2);
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
          put16<wr_f32>(dp + i * d_px, lo[i], NT);
          put16<wr_f32>(dp + i * d_px + 64, lo2[i], NT);
        }
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
          put16<wr_f32>(dp + (i + 4) * d_px, hi[i], NT);
          put16<wr_f32>(dp + (i + 4) * d_px + 64, hi2[i], NT);
        }
      }
    }
    if (g < pairs) gather16_lines_as<NT>(s + g * pair_row + b * 4, s_row, d + b * d_px + g * 64, d_px, e - b);
  }
}
FLUIDK_DETAIL_SIMD_INLINE inline void gather16_lines(const std::byte* s, std::int64_t s_row, std::byte* d,
                                                     std::int64_t d_px, std::int64_t count,
                                                     bool nt) noexcept {
  // One instance per store kind, as for the casts' blocks.
  if (nt)
    gather16_lines_as<true>(s, s_row, d, d_px, count);
  else
    gather16_lines_as<false>(s, s_row, d, d_px, count);
}
#endif

// Pixels [from, to) of one chunk, element by element: the first kv channels converted, the
// lanes from kv to kt (a blocked target's padding) zeroed. Where what is left is less than one
// vector step takes.
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline void convert_pixels(const std::byte* sq, std::int64_t s_ps,
                                                     std::int64_t s_cs, std::byte* dq, std::int64_t d_ps,
                                                     std::int64_t d_cs, std::int64_t from, std::int64_t to,
                                                     std::int64_t kv, std::int64_t kt) noexcept {
  for (std::int64_t p = from; p < to; ++p)
    for (std::int64_t k = 0; k < kt; ++k) {
      std::byte* out = dq + p * d_ps + k * d_cs;
      if (k < kv)
        convert_one<R, W>(sq + p * s_ps + k * s_cs, out);
      else
        store_elem<typename W::scalar_t>(out, typename W::scalar_t{});
    }
}

// One full chunk of 8 elements of E bytes (1 or 2) at a, or two (C = 2: a's, then b's), to d
// as they are: a channels-together pixel's chunks, no lanes to widen. Streamed (nt: 2-byte
// elements only, W::streams) where the caller's target allows it.
template <std::int64_t E, int C>
FLUIDK_DETAIL_SIMD_INLINE inline void copy_chunks(const std::byte* a, const std::byte* b, std::byte* d,
                                                  bool nt) noexcept {
  if constexpr (E == 1) {
    if constexpr (C == 1)
      _mm_storel_epi64(reinterpret_cast<__m128i*>(d), _mm_loadl_epi64(reinterpret_cast<const __m128i*>(a)));
    else
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d), load_half_pair16(a, b));
  } else if constexpr (C == 1) {
    const __m128i x = load16(a);
    if (nt)
      _mm_stream_si128(reinterpret_cast<__m128i*>(d), x);
    else
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d), x);
  } else {
    put_packed(d, _mm256_set_m128i(load16(b), load16(a)), nt);
  }
}

// Pixels [from, to) of `chunks` full chunks of image n from chunk q, element by element: the
// pixels a piece's vector steps leave where no last step covers them.
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline void convert_full_chunks(const layout_job& j, const std::byte* src,
                                                          std::byte* dst, std::int64_t n, std::int64_t q,
                                                          std::int64_t chunks, std::int64_t from,
                                                          std::int64_t to) noexcept {
  for (std::int64_t g = q; g < q + chunks; ++g)
    convert_pixels<R, W>(src + j.s.chunk(n, g) * R::size, j.s.ps * R::size, j.s.cs * R::size,
                         dst + j.d.chunk(n, g) * W::size, j.d.ps * W::size, j.d.cs * W::size, from, to, 8, 8);
}

// 8 pixels of a row as 2-byte elements: as they are (a copy), or converted by W.
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline __m128i row_halves(const std::byte* p) noexcept {
  if constexpr (std::is_same_v<R, rd_b16> && std::is_same_v<W, wr_b16>)
    return load16(p);
  else
    return W::pack(R::load(p));
}

// Pixels 0-7 of channels c and c + 1 (rows a and b) as 8 lanes of 4 bytes: pixel i's two
// channels in lane i, as they lie in a channels-together target.
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline v8 channel_pair(const std::byte* a, const std::byte* b) noexcept {
  const __m128i x = row_halves<R, W>(a), y = row_halves<R, W>(b);
  return _mm256_castsi256_ps(_mm256_set_m128i(_mm_unpackhi_epi16(x, y), _mm_unpacklo_epi16(x, y)));
}

// Pixels 0-7 of channels c to c + 3 of 1-byte elements (rows r[0..3]) as 8 lanes of 4 bytes.
FLUIDK_DETAIL_SIMD_INLINE inline v8 channel_quad(const std::byte* const* r) noexcept {
  const auto row = [](const std::byte* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); };
  const __m128i ab = _mm_unpacklo_epi8(row(r[0]), row(r[1])), cd = _mm_unpacklo_epi8(row(r[2]), row(r[3]));
  return _mm256_castsi256_ps(_mm256_set_m128i(_mm_unpackhi_epi16(ab, cd), _mm_unpacklo_epi16(ab, cd)));
}

// Planar -> channels together, G full chunks a step (make_layout_job's group: 4, or 2 into nChw16c
// and NHWC of 16-31 channels, or 8 for 1-byte copies of many channels; 8, two groups, where a job
// streams 2-byte elements into NHWC pixels of 1 KiB or more: gather_pairs), for writers of 2-byte
// elements, and 1-byte copies four chunks at a time: each step moves 8G channels of 8 pixels (whole
// lines where G is 4 or 8 and the elements are 2 bytes, half a line otherwise) and never comes back
// to them. The channels go as pairs (2-byte elements: channel_pair) or quads (1-byte: channel_quad)
// of 4 bytes, interleaved from their rows by unpacks, which one 8x8 transpose of 4-byte lanes puts
// in place for 8 pixels. Before, each chunk went alone: its elements widened to 4 bytes, transposed
// and narrowed back, a pass over the block's pixels per chunk, each pass writing a quarter of every
// pixel's line; where a pixel stride that is a multiple of 4 KiB (2048 or 1024 channels of float16)
// put all of a pass's lines in one L1 set, each had left L1 before the next pass came. On Zen 4,
// one thread, GB/s read + written, before -> after: float16 NCHW -> NHWC [1, 2048, 7, 7] 8.5 ->
// 28.4, [1, 1024, 14, 14] 16.0 -> 52.0, [4, 64, 56, 56] 32.2 -> 57.0, [1, 2040, 14, 14] 26.5 ->
// 39.2; float -> float16 on the way, [1, 2048, 7, 7] 11.3 -> 30.5 and [4, 64, 56, 56] 37.4 -> 46.0;
// bytes, [4, 64, 56, 56] 15.9 -> 49.0. Four chunks of 2-byte elements write a whole line of each
// pixel, and so may stream (NT; streams_whole_lines): from the L3 and beyond, where they had gone
// through the caches, float16 [16, 128, 56, 56] 15.1 -> 40.4 GB/s, [16, 384, 28, 28] 12.3 -> 42.9,
// float -> float16 [16, 64, 56, 56] 24.3 -> 47.1. The prefetching policy's form stays one chunk at
// a time. Functions of their own, which the AVX-512 engine calls too (the same instructions, one
// instance fewer each).
template <class R, class W, int G, bool NT = false>
FLUIDK_DETAIL_SIMD_TARGET __attribute__((noinline)) void gather_packed_chunks(const std::byte* s,
                                                                              std::int64_t s_row,
                                                                              std::byte* d, std::int64_t d_px,
                                                                              std::int64_t count) noexcept {
  constexpr bool bytes = std::is_same_v<R, rd_b8> && std::is_same_v<W, wr_b8>;
  static_assert((W::size == 2 && (G == 1 || G == 2 || G == 4 || G == 8)) || (bytes && (G == 4 || G == 8)));
  // Streamed: whole lines of each pixel a step, or of the pixels one after the other (G = 1).
  static_assert(!NT || (W::size == 2 && G != 2));
  if constexpr (G == 1) {
    // One chunk of pixels one after the other (nChw8c), 16 pixels a step (count >= 16, the last
    // step over the last 16): channel pairs of pixels 0-7 in x[0..3] and of 8-15 in x[4..7], so
    // that one transpose leaves pixel i's chunk and pixel i + 8's in x[i]. Before, the chunk's
    // elements were widened to 4 bytes, transposed and narrowed back, 8 pixels a step. Zen 4,
    // one thread, GB/s read + written, NCHW -> nChw8c of 2-byte elements: [1, 2048, 7, 7] 29.6
    // -> 38.7, [1, 1024, 14, 14] 36.9 -> 49.7, [4, 64, 56, 56] 41.7 -> 59.0; streamed [16, 64,
    // 56, 56] 38.6 -> 55.2, [64, 64, 56, 56] 33.4 -> 42.1.
    for (std::int64_t step = 0; step < count; step += 16) {
      const std::int64_t p = std::min(step, count - 16);
      const std::byte* sp = s + p * R::size;
      v8 x[8];
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        x[k] = channel_pair<R, W>(sp + 2 * k * s_row, sp + (2 * k + 1) * s_row);
        x[k + 4] =
            channel_pair<R, W>(sp + 8 * R::size + 2 * k * s_row, sp + 8 * R::size + (2 * k + 1) * s_row);
      }
      transpose8(x);
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const __m256i v = _mm256_castps_si256(x[i]);
        auto* lo = reinterpret_cast<__m128i*>(d + (p + i) * d_px);
        auto* hi = reinterpret_cast<__m128i*>(d + (p + i + 8) * d_px);
        if constexpr (NT) {
          _mm_stream_si128(lo, _mm256_castsi256_si128(v));
          _mm_stream_si128(hi, _mm256_extracti128_si256(v, 1));
        } else {
          _mm_storeu_si128(lo, _mm256_castsi256_si128(v));
          _mm_storeu_si128(hi, _mm256_extracti128_si256(v, 1));
        }
      }
    }
    return;
  }
  for (std::int64_t p = 0; p < count; p += 8) {
    const std::byte* sp = s + p * R::size;
    if constexpr (bytes) {
#pragma GCC unroll 2
      for (int h = 0; h < G / 4; ++h) {
        const std::byte* rows[32];
#pragma GCC unroll 32
        for (int k = 0; k < 32; ++k) rows[k] = sp + (32 * h + k) * s_row;
        v8 q[8];
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) q[k] = channel_quad(rows + 4 * k);
        transpose8(q);
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i)
          _mm256_storeu_ps(reinterpret_cast<float*>(d + (p + i) * d_px + 32 * h), q[i]);
      }
    } else {
      // G = 8: two lines of each pixel, the first group's line of the 8 pixels, then the second's.
#pragma GCC unroll 2
      for (int h = 0; h < (G == 8 ? 2 : 1); ++h) {
        const std::byte* sh = sp + 32 * h * s_row;
        v8 lo[8], hi[8];  // channels 0-15 and 16-31 of the step's pixels
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) lo[k] = channel_pair<R, W>(sh + 2 * k * s_row, sh + (2 * k + 1) * s_row);
        transpose8(lo);
        if constexpr (G >= 4) {
#pragma GCC unroll 8
          for (int k = 0; k < 8; ++k)
            hi[k] = channel_pair<R, W>(sh + (2 * k + 16) * s_row, sh + (2 * k + 17) * s_row);
          transpose8(hi);
        }
        // The two halves of each pixel's line back to back.
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) {
          std::byte* dp = d + (p + i) * d_px + 64 * h;
          if constexpr (NT) {
            _mm256_stream_ps(reinterpret_cast<float*>(dp), lo[i]);
            _mm256_stream_ps(reinterpret_cast<float*>(dp + 32), hi[i]);
          } else {
            _mm256_storeu_ps(reinterpret_cast<float*>(dp), lo[i]);
            if constexpr (G >= 4) _mm256_storeu_ps(reinterpret_cast<float*>(dp + 32), hi[i]);
          }
        }
      }
    }
  }
}

FLUIDK_DETAIL_SIMD_INLINE inline __m256i load32(const std::byte* p) noexcept {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
FLUIDK_DETAIL_SIMD_INLINE inline void store32(std::byte* p, __m256i x) noexcept {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), x);
}

// An 8x8 transpose of 16-bit elements in each 128-bit lane: element j of x[i] becomes element i
// of x[j].
FLUIDK_DETAIL_SIMD_INLINE inline void transpose8_words(__m256i* x) noexcept {
  __m256i t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi16(x[2 * i], x[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi16(x[2 * i], x[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    // rows 4h to 4h + 3: t[4h] and t[4h + 2] hold elements 0-3, t[4h + 1] and t[4h + 3] 4-7
    u[4 * h] = _mm256_unpacklo_epi32(t[4 * h], t[4 * h + 2]);
    u[4 * h + 1] = _mm256_unpackhi_epi32(t[4 * h], t[4 * h + 2]);
    u[4 * h + 2] = _mm256_unpacklo_epi32(t[4 * h + 1], t[4 * h + 3]);
    u[4 * h + 3] = _mm256_unpackhi_epi32(t[4 * h + 1], t[4 * h + 3]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    x[2 * i] = _mm256_unpacklo_epi64(u[i], u[i + 4]);
    x[2 * i + 1] = _mm256_unpackhi_epi64(u[i], u[i + 4]);
  }
}

// In each 128-bit lane, two pixels' 8 bytes (channels 0-7 of one, then of the other) <-> the
// channels' pairs (channel 0 of both, channel 1 of both, ...).
FLUIDK_DETAIL_SIMD_INLINE inline __m256i pairs_to_pixels(__m256i x) noexcept {
  return _mm256_shuffle_epi8(x, _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2,
                                                 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
}
FLUIDK_DETAIL_SIMD_INLINE inline __m256i pixels_to_pairs(__m256i x) noexcept {
  return _mm256_shuffle_epi8(x, _mm256_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 0, 8,
                                                 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15));
}

// Eight rows of 1-byte elements, pixels p to p + 31 (32 bytes at rows[r] + p), as z[j]: pixels
// 2j and 2j + 1 in the low lane and 2j + 16 and 2j + 17 in the high one, each pixel's 8
// channels together. Each row's 32 bytes are 16 pairs of pixels; an 8x8 transpose of those
// pairs gives each pair its 8 channels, and a byte shuffle puts each pixel's together.
FLUIDK_DETAIL_SIMD_INLINE inline void load_bytes_as_pixels(const std::byte* const* rows, std::int64_t p,
                                                           __m256i* z) noexcept {
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) z[r] = load32(rows[r] + p);
  transpose8_words(z);
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) z[j] = pairs_to_pixels(z[j]);
}
// The reverse: z[j] as load_bytes_as_pixels leaves it, written as 8 rows of 32 bytes.
FLUIDK_DETAIL_SIMD_INLINE inline void store_pixels_as_bytes(__m256i* z, std::byte* const* rows,
                                                            std::int64_t p) noexcept {
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) z[j] = pixels_to_pairs(z[j]);
  transpose8_words(z);
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) store32(rows[r] + p, z[r]);
}

// Planar -> blocked for 1-byte copies: G full chunks (8G rows, row stride s_row) into nChw8c
// (G = 1) or a whole nChw16c block (G = 2), whose pixels' 8G bytes lie one after the other;
// `count` pixels (at least 32), 32 a step, the last step over the last 32 (rewriting some with
// the same bytes). Each chunk had gone alone through 4-byte lanes, 8 pixels a step. On Zen 4,
// one thread, GB/s read + written, medians of three runs in turn: [4, 64, 56, 56] NCHW ->
// nChw8c 16.3 -> 80.3, NCHW -> nChw16c 16.3 -> 69.9 (memcpy 95); [1, 256, 28, 28] 16.5 ->
// 88.8 and 16.6 -> 73.5; at 7 x 7 (a last step over pixels 17-48) about 13 -> 40.
template <int G>
FLUIDK_DETAIL_SIMD_TARGET __attribute__((noinline)) void gather_bytes(const std::byte* s, std::int64_t s_row,
                                                                      std::byte* d,
                                                                      std::int64_t count) noexcept {
  static_assert(G == 1 || G == 2);
  const std::byte* rows[8 * G];
  for (int r = 0; r < 8 * G; ++r) rows[r] = s + r * s_row;
  for (std::int64_t step = 0; step < count; step += 32) {
    const std::int64_t p = std::min(step, count - 32);
    std::byte* dp = d + p * 8 * G;
    __m256i a[8];
    load_bytes_as_pixels(rows, p, a);
    if constexpr (G == 1) {
#pragma GCC unroll 4
      for (int j = 0; j < 8; j += 2) {
        store32(dp + 16 * j, _mm256_permute2x128_si256(a[j], a[j + 1], 0x20));
        store32(dp + 128 + 16 * j, _mm256_permute2x128_si256(a[j], a[j + 1], 0x31));
      }
    } else {
      __m256i b[8];
      load_bytes_as_pixels(rows + 8, p, b);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __m256i lo = _mm256_unpacklo_epi64(a[j], b[j]), hi = _mm256_unpackhi_epi64(a[j], b[j]);
        store32(dp + 32 * j, _mm256_permute2x128_si256(lo, hi, 0x20));
        store32(dp + 256 + 32 * j, _mm256_permute2x128_si256(lo, hi, 0x31));
      }
    }
  }
}

// Channels together -> planar for 1-byte copies, the reverse of gather_bytes: G full chunks
// that lie together in each pixel (one chunk of nChw8c or NHWC, a whole nChw16c block or two
// chunks of NHWC) at s, pixels s_px bytes apart (Packed: s_px = 8G, the pixels one after the
// other, loaded 32 bytes at a time), into 8G rows (row stride d_row), `count` pixels (at least
// 32), 32 a step, the last over the last 32, through the caches. On Zen 4, one thread, GB/s
// read + written, medians of three runs in turn: [4, 64, 56, 56] nChw8c -> NCHW 14.8 -> 75.1,
// nChw16c -> NCHW 14.7 -> 69.3, NHWC -> NCHW 12.8 -> 45.7; [1, 256, 28, 28] 15.0 -> 88.5,
// 14.9 -> 80.1 and 13.3 -> 50.1. H = 4 (NHWC, G = 2): four such pairs one after the other each
// step, a source line, so that the line is used whole while it is in L1: NHWC -> NCHW
// [1, 2048, 7, 7] 13.5 -> 17.5 GB/s, [1, 1024, 14, 14] 27.6 -> 37.9, [4, 64, 56, 56] and
// [1, 256, 28, 28] the same (45-46, 51).
template <int G, bool Packed, int H = 1>
FLUIDK_DETAIL_SIMD_TARGET __attribute__((noinline)) void scatter_bytes(const std::byte* s, std::int64_t s_px,
                                                                       std::byte* d, std::int64_t d_row,
                                                                       std::int64_t count) noexcept {
  static_assert(G == 1 || G == 2);
  static_assert(H == 1 || (G == 2 && !Packed));
  std::byte* rows[8 * G * H];
  for (int r = 0; r < 8 * G * H; ++r) rows[r] = d + r * d_row;
  for (std::int64_t step = 0; step < count; step += 32) {
    const std::int64_t p = std::min(step, count - 32);
    for (int h = 0; h < H; ++h) {
      const std::byte* sp = s + p * s_px + 16 * h;
      __m256i a[8];
      if constexpr (G == 1) {
        if constexpr (Packed) {
#pragma GCC unroll 4
          for (int j = 0; j < 8; j += 2) {
            const __m256i x = load32(sp + 16 * j), y = load32(sp + 128 + 16 * j);
            a[j] = _mm256_permute2x128_si256(x, y, 0x20);
            a[j + 1] = _mm256_permute2x128_si256(x, y, 0x31);
          }
        } else {
#pragma GCC unroll 8
          for (int j = 0; j < 8; ++j)
            a[j] = _mm256_set_m128i(load_half_pair16(sp + (16 + 2 * j) * s_px, sp + (17 + 2 * j) * s_px),
                                    load_half_pair16(sp + 2 * j * s_px, sp + (2 * j + 1) * s_px));
        }
        store_pixels_as_bytes(a, rows, p);
      } else {
        __m256i b[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          __m256i lo, hi;  // pixels 2j and 2j + 16, and 2j + 1 and 2j + 17
          if constexpr (Packed) {
            const __m256i x = load32(sp + 32 * j), y = load32(sp + 256 + 32 * j);
            lo = _mm256_permute2x128_si256(x, y, 0x20);
            hi = _mm256_permute2x128_si256(x, y, 0x31);
          } else {
            lo = _mm256_set_m128i(load16(sp + (16 + 2 * j) * s_px), load16(sp + 2 * j * s_px));
            hi = _mm256_set_m128i(load16(sp + (17 + 2 * j) * s_px), load16(sp + (2 * j + 1) * s_px));
          }
          a[j] = _mm256_unpacklo_epi64(lo, hi);
          b[j] = _mm256_unpackhi_epi64(lo, hi);
        }
        store_pixels_as_bytes(a, rows + 16 * h, p);
        store_pixels_as_bytes(b, rows + 16 * h + 8, p);
      }
    }
  }
}

// Channels together -> planar for two full chunks of 4-byte elements that lie together in the
// source (a line of it: NHWC, or an nChw16c block), through the caches, 8 pixels a step: both
// chunks of the step's pixels (as scatter_step does), so that a source line is used whole while
// it is in L1. A chunk at a time, a pass over a piece's pixels read half of every pixel's line,
// and with a pixel a multiple of 4 KiB (1024 channels) all of a pass's lines fell in one L1
// set and had left it before the next pass came for their other half. Zen 4, one thread, GB/s
// read + written, before -> after: NHWC -> NCHW of float [1, 2048, 7, 7] 21.8 -> 34.7,
// [1, 1024, 14, 14] 23.3 -> 32.3, [1, 256, 28, 28] 48.0 -> 65.6, [4, 64, 56, 56] 52.2 -> 69.5
// (memcpy 95-103); nChw16c -> NCHW 56.0 -> 61.3, 59.0 -> 74.4, 56.0 -> 74.0, 54.0 -> 75.0.
// Streamed, the chunks still go alone (scatter_chunk, a line of each row made in registers by
// stream_line4): both chunks of 16 pixels staged in L1, then their 16 lines streamed, measured
// the same at [16, 1024, 14, 14] (12-16 GB/s) and half the speed from memory ([64, 64, 56, 56]
// 24.2 -> 12.2). The AVX2 engine's, which the AVX-512 engine calls too: its own instance ran
// [1, 2048, 7, 7] at 28 GB/s.
// `pairs` such pairs that lie one after the other in the source (NHWC) go together, each step
// moving the 8 pixels of all of them (layout_job::scatter_pairs).
template <class R, class W>
FLUIDK_DETAIL_SIMD_TARGET __attribute__((noinline)) void scatter_line_chunks(const std::byte* s,
                                                                             std::int64_t s_px, std::byte* d,
                                                                             std::int64_t d_row,
                                                                             std::int64_t count,
                                                                             std::int64_t pairs) noexcept {
  const std::byte* pixels[2][8];
  for (int g = 0; g < 2; ++g)
    for (int i = 0; i < 8; ++i) pixels[g][i] = s + i * s_px + 8 * g * R::size;
  for (std::int64_t p = 0; p < count; p += 8) {
    for (std::int64_t k = 0; k < pairs; ++k) {
#pragma GCC unroll 2
      for (int g = 0; g < 2; ++g) {
        v8 a[8];
        load_rows_transposed<R>(pixels[g], p * s_px + 16 * k * R::size, a);
        std::byte* const out = d + 16 * k * d_row + p * W::size;
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r) W::store(out + (8 * g + r) * d_row, a[r]);
      }
    }
  }
}

// Channels together -> planar for two full chunks of 2-byte elements that lie together in the
// source (NHWC, or an nChw16c block), 8 pixels a step: each pixel's 16 channels as 8 pairs of 4
// bytes, one 8x8 transpose of those, and each pair split into its two rows by a byte shuffle
// within lanes and a 64-bit permute. Each chunk alone had its elements widened to 4 bytes,
// transposed and narrowed back. On Zen 4, one thread, float16 of [4, 64, 56, 56] (3 MiB, through
// the caches): NHWC -> NCHW 37 -> 53 GB/s, nChw16c -> NCHW 47 -> 72. Bit copies only (2-byte
// elements written from another type come through scatter16_lines or the chunks alone), and
// not streaming (a streamed planar target goes a chunk at a time through staged lines).
// `pairs` such pairs that lie one after the other in the source (NHWC) go together, each step
// moving the 8 pixels of all of them (layout_job::scatter_pairs).
template <class R, class W>
FLUIDK_DETAIL_SIMD_TARGET __attribute__((noinline)) void scatter_packed_chunks(
    const std::byte* s, std::int64_t s_px, std::byte* d, std::int64_t d_row, std::int64_t count,
    std::int64_t pairs) noexcept {
  static_assert(std::is_same_v<R, rd_b16> && std::is_same_v<W, wr_b16>);
  // In each 128-bit lane: the first element of each pair, then the second.
  const __m256i split = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5, 8,
                                         9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  for (std::int64_t p = 0; p < count; p += 8) {
    for (std::int64_t g = 0; g < pairs; ++g) {
      const std::byte* const in = s + 32 * g + p * s_px;
      std::byte* const out = d + 16 * g * d_row + p * 2;
      v8 x[8];  // pixel i's 16 channels, then (transposed) channels 2k and 2k + 1 of the 8 pixels
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) x[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(in + i * s_px));
      transpose8(x);
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const __m256i rows = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(_mm256_castps_si256(x[k]), split),
                                                      _MM_SHUFFLE(3, 1, 2, 0));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * k * d_row), _mm256_castsi256_si128(rows));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (2 * k + 1) * d_row),
                         _mm256_extracti128_si256(rows, 1));
      }
    }
  }
}

#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
// The AVX2 engine's reader or writer of the same name, for the kernels this engine leaves to it.
template <class T>
struct in_avx2;
template <>
struct in_avx2<rd_b32> {
  using type = avx2::rd_b32;
};
template <>
struct in_avx2<rd_f32> {
  using type = avx2::rd_f32;
};
template <>
struct in_avx2<wr_b32> {
  using type = avx2::wr_b32;
};
template <>
struct in_avx2<wr_f16> {
  using type = avx2::wr_f16;
};
template <>
struct in_avx2<wr_bf16> {
  using type = avx2::wr_bf16;
};
template <class T>
using avx2_twin = typename in_avx2<T>::type;
#else
template <class T>
using avx2_twin = T;  // this engine's own
#endif

// Planar -> channels together: j.group full chunks from sq (their first row) to dq (their
// first pixel), `count` pixels (a multiple of 8), through the kernel that fits the case.
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline void gather_group(const layout_job& j, const std::byte* sq, std::byte* dq,
                                                   std::int64_t count, bool nt, bool ahead) noexcept {
  const std::int64_t s_cs = j.s.cs * R::size, d_ps = j.d.ps * W::size;
  // 4-byte copies take the AVX-512 engine's kernels (gather8_lines, gather16_lines), unless the
  // prefetching policy is forced: that is the AVX2 transposes'. The two chunks that fill a
  // target line of 4-byte elements (make_layout_job's choice for NCHW -> NHWC of float, and
  // nChw16c) are one constant instance, for 4-byte copies only: each such instance is a large
  // function (under a sanitizer's instrumentation, more than the rest of the kernels together),
  // and NCHW -> NHWC of float is the one programs make. Four chunks of 2-byte elements written
  // or of 1-byte copies go together too, through caches without the prefetching policy
  // (gather_packed_chunks, whose AVX2 instances both engines call), as do two chunks of 2-byte
  // elements; the other cases go one chunk at a time.
  if constexpr (std::is_same_v<R, rd_b32> && std::is_same_v<W, wr_b32>) {
#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
    if (j.group == 1 && d_ps == 32 && !j.prefetch) {
      gather8_lines<R, W>(sq, s_cs, dq, count, nt, ahead);
      return;
    }
#endif
    if (j.group == 2) {
#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
      if (!j.prefetch && (!nt || (on_line(dq) && d_ps % 64 == 0))) {
        gather16_lines(sq, s_cs, dq, d_ps, count, nt);
        return;
      }
#endif
      gather_chunks<R, W, 2>(sq, s_cs, dq, d_ps, count, j.prefetch, nt);
      return;
    }
  }
  (void)ahead;
  if constexpr (W::size == 2 || (std::is_same_v<R, rd_b8> && std::is_same_v<W, wr_b8>)) {
    using R2 = avx2_twin<R>;  // the AVX2 engine's
    using W2 = avx2_twin<W>;
    if constexpr (W::size == 2) {
      // nChw8c (a chunk's pixels one after the other), 16 pixels a step.
      if (j.group == 1 && d_ps == 16 && !j.prefetch && count >= 16) {
        if (nt)
          avx2::gather_packed_chunks<R2, W2, 1, true>(sq, s_cs, dq, d_ps, count);
        else
          avx2::gather_packed_chunks<R2, W2, 1>(sq, s_cs, dq, d_ps, count);
        return;
      }
    }
    // Streamed only where each step writes a whole line of each pixel (streams_whole_lines).
    if ((j.group >= 4 || (j.group == 2 && W::size == 2)) && !j.prefetch &&
        (!nt || (W::size == 2 && j.group == 4))) {
      if constexpr (W::size == 2) {
        if (j.group == 2) {
          avx2::gather_packed_chunks<R2, W2, 2>(sq, s_cs, dq, d_ps, count);
          return;
        }
        if (nt) {
          avx2::gather_packed_chunks<R2, W2, 4, true>(sq, s_cs, dq, d_ps, count);
          return;
        }
      }
      if constexpr (W::size == 1) {
        if (j.group == 8) {
          avx2::gather_packed_chunks<R2, W2, 8>(sq, s_cs, dq, d_ps, count);
          return;
        }
      }
      avx2::gather_packed_chunks<R2, W2, 4>(sq, s_cs, dq, d_ps, count);
      return;
    }
  }
  for (std::int64_t g = 0; g < j.group; ++g)
    gather_chunks<R, W, 1>(sq + 8 * g * s_cs, s_cs, dq + 8 * g * W::size, d_ps, count, j.prefetch, nt);
}

// Planar -> NHWC, two groups of full chunks a step over blocks of j.pair_block pixels
// (make_layout_job): `groups` groups (of j.group chunks) from sq (their first row) to dq (their
// first pixel), `count` pixels (a multiple of 8); an odd group last goes alone. 4-byte copies:
// where gather16_pairs_as does not serve (AVX2, the prefetching policy), each group goes over a
// block's pixels in turn. 2-byte elements written, which take pairs only streamed and over
// all of a piece's pixels (make_layout_job's streamed_pair_block): eight chunks a step, except
// a last step of 8 pixels through the caches (nt false), a group at a time.
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline void gather_pairs(const layout_job& j, const std::byte* sq, std::byte* dq,
                                                   std::int64_t groups, std::int64_t count,
                                                   bool nt) noexcept {
  const std::int64_t s_cs = j.s.cs * R::size, d_ps = j.d.ps * W::size;
  if constexpr (W::size == 2) {
    using R2 = avx2_twin<R>;
    using W2 = avx2_twin<W>;
    const std::int64_t group_row = 32 * s_cs;  // a group of four chunks: 32 rows, a line of a pixel
    std::int64_t g = 0;
    for (; nt && g + 2 <= groups; g += 2)
      avx2::gather_packed_chunks<R2, W2, 8, true>(sq + g * group_row, s_cs, dq + g * 64, d_ps, count);
    for (; g < groups; ++g) {
      if (nt)
        avx2::gather_packed_chunks<R2, W2, 4, true>(sq + g * group_row, s_cs, dq + g * 64, d_ps, count);
      else
        avx2::gather_packed_chunks<R2, W2, 4>(sq + g * group_row, s_cs, dq + g * 64, d_ps, count);
    }
  } else {
    const std::int64_t block = j.pair_block;
#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
    if (!j.prefetch && (!nt || (on_line(dq) && d_ps % 64 == 0))) {
      if (nt)
        gather16_pairs_as<true>(sq, s_cs, dq, d_ps, count, groups, block);
      else
        gather16_pairs_as<false>(sq, s_cs, dq, d_ps, count, groups, block);
      return;
    }
#endif
    for (std::int64_t b = 0; b < count; b += block)
      for (std::int64_t g = 0; g < groups; ++g)
        gather_chunks<rd_b32, wr_b32, 2>(sq + (16 * g * s_cs + b * 4), s_cs, dq + (b * d_ps + g * 64), d_ps,
                                         std::min(block, count - b), j.prefetch, nt);
  }
}

// G full chunks that lie together in a channels-together source (from s: pixel stride s_ps bytes)
// into a target where each lies apart (from d, d_chunk bytes from one to the next: nChw8c's planes;
// pixel stride d_ps bytes), pixels [p0, p1): each pixel's G chunks read back to back, so that a
// source line is used whole while it is in L1. A chunk at a time, a pass over a piece's pixels read
// a part of every pixel's line, and with a pixel a multiple of 4 KiB (1024 channels of float) all
// of a pass's lines fell in one L1 set and had left it before the next pass came for their next
// chunk. Raw: 1- and 2-byte bit copies, each chunk as it is (copy_chunks).
template <class R, class W, int G, bool Raw>
FLUIDK_DETAIL_SIMD_INLINE inline void split_chunks(const std::byte* s, std::int64_t s_ps, std::byte* d,
                                                   std::int64_t d_ps, std::int64_t d_chunk, std::int64_t p0,
                                                   std::int64_t p1, bool nt) noexcept {
  for (std::int64_t p = p0; p < p1; ++p)
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      const std::byte* sp = s + p * s_ps + 8 * g * R::size;
      std::byte* dp = d + g * d_chunk + p * d_ps;
      if constexpr (Raw)
        copy_chunks<R::size, 1>(sp, nullptr, dp, nt);
      else
        put<W>(dp, R::load(sp), nt);
    }
}

// The other way: G full chunks that lie together in a channels-together target (from d: pixel
// stride d_ps bytes; a line's worth) from a source where they lie apart (chunk g from s[g]:
// nChw8c's planes, or nChw16c's blocks), pixels [p0, p1): each pixel's line written whole. One
// helper for both ways, with arrays of chunk pointers on both sides, was slower where a line
// holds 8 chunks: nChw8c or nChw16c -> NHWC of bytes 54 -> 38-40 GB/s (Zen 4, one thread, at
// [1, 2048, 7, 7], [1, 1024, 14, 14] and [4, 64, 56, 56]; the other ways unchanged).
template <class R, class W, int G, bool Raw>
FLUIDK_DETAIL_SIMD_INLINE inline void merge_chunks(const std::byte* const* s, std::int64_t s_ps, std::byte* d,
                                                   std::int64_t d_ps, std::int64_t p0, std::int64_t p1,
                                                   bool nt) noexcept {
  for (std::int64_t p = p0; p < p1; ++p)
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      const std::byte* sp = s[g] + p * s_ps;
      std::byte* dp = d + p * d_ps + 8 * g * W::size;
      if constexpr (Raw)
        copy_chunks<R::size, 1>(sp, nullptr, dp, nt);
      else
        put<W>(dp, R::load(sp), nt);
    }
}

// One chunk (kv channels real, kt written) between a planar side and a channels-together one,
// `count` pixels (a multiple of 8) from sq and dq (at the first pixel); false where no vector
// kernel fits (a partial chunk of an NHWC side, whose lanes past kv are another pixel's).
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline bool move_chunk(const layout_job& j, const std::byte* sq, std::byte* dq,
                                                 std::int64_t count, std::int64_t kv, std::int64_t kt,
                                                 bool nt) noexcept {
  const std::int64_t s_ps = j.s.ps * R::size, s_cs = j.s.cs * R::size;
  const std::int64_t d_ps = j.d.ps * W::size, d_cs = j.d.cs * W::size;
  if (j.s.kind == side_kind::planar) {
    if (kt != 8) return false;
    gather_partial<R, W>(sq, s_cs, dq, d_ps, count, kv, j.prefetch, nt);
    return true;
  }
  if (kv != 8 && !j.s_padded) return false;
#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
  if constexpr (std::is_same_v<R, rd_b32> && std::is_same_v<W, wr_b32>) {
    if (!j.prefetch && s_ps == 32) {
      scatter8_lines<R, W>(sq, dq, d_cs, count, kv, nt, j.line_rows);
      return true;
    }
  }
#endif
  scatter_chunk<R, W>(sq, s_ps, dq, d_cs, count, kv, j.prefetch, nt, j.source_ahead);
  return true;
}

// The first `count` (1 to 8) of the 8 elements of E bytes at `row`, which one store of 8E bytes
// wrote just before (W::store into a tile), to d: the row is loaded whole, as it was stored, and
// written out a power of two at a time from the register. Copied with two overlapping loads of
// its first `count` elements instead, nChw8c -> NCHW of [1, 2048, 2, 2] float took 3.6 us on
// Zen 4 against 2.6 us (the loads of part of a store that has not left yet wait longer).
template <std::size_t E>
FLUIDK_DETAIL_SIMD_INLINE inline void store_row_prefix(std::byte* d, const std::byte* row,
                                                       std::int64_t count) noexcept {
  const std::size_t n = std::size_t(std::clamp<std::int64_t>(count, 0, 8)) * E;
  __m128i x;
  if constexpr (E == 4) {
    const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(row));
    if (n == 32) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), v);
      return;
    }
    x = _mm256_castsi256_si128(v);
    if (n & 16) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d), x);
      x = _mm256_extracti128_si256(v, 1);
      d += 16;
    }
  } else if constexpr (E == 2) {
    x = _mm_load_si128(reinterpret_cast<const __m128i*>(row));
    if (n == 16) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d), x);
      return;
    }
  } else {
    x = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row));
  }
  if (n & 8) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(d), x);
    x = _mm_srli_si128(x, 8);
    d += 8;
  }
  if (n & 4) {
    const std::int32_t w = _mm_cvtsi128_si32(x);
    std::memcpy(d, &w, 4);
    x = _mm_srli_si128(x, 4);
    d += 4;
  }
  if (n & 2) {
    const auto h = static_cast<std::uint16_t>(_mm_cvtsi128_si32(x));
    std::memcpy(d, &h, 2);
    x = _mm_srli_si128(x, 2);
    d += 2;
  }
  if (n & 1) *d = static_cast<std::byte>(_mm_cvtsi128_si32(x));
}

// The first m (at most 8) of the registers r, each written as W::store writes it into a row of
// the tile, then the first `count` elements of each row to d + i * d_step.
template <class W>
FLUIDK_DETAIL_SIMD_INLINE inline void store_prefixes(std::byte (*tile)[8 * W::size], const v8* r,
                                                     std::int64_t m, std::byte* d, std::int64_t d_step,
                                                     std::int64_t count) noexcept {
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)
    if (i < m) W::store(tile[i], r[i]);
  for (std::int64_t i = 0; i < m; ++i) store_row_prefix<W::size>(d + i * d_step, tile[i], count);
}

// A full chunk of a 2 x 2 image (a pyramid pooling's bins) into NCHW: the chunk's 8 rows of 4
// pixels are 32 elements one after the other, 4 registers of two rows each, by unpacks of the 4
// pixels (from sq, s_ps bytes apart) and a swap of 128-bit halves.
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline void quad_to_planar(const std::byte* sq, std::int64_t s_ps,
                                                     std::byte* dq) noexcept {
  constexpr std::int64_t de = W::size;
  const v8 a = R::load(sq), b = R::load(sq + s_ps), c = R::load(sq + 2 * s_ps), e = R::load(sq + 3 * s_ps);
  const __m256d ab0 = _mm256_castps_pd(_mm256_unpacklo_ps(a, b)),
                ab1 = _mm256_castps_pd(_mm256_unpackhi_ps(a, b));
  const __m256d ce0 = _mm256_castps_pd(_mm256_unpacklo_ps(c, e)),
                ce1 = _mm256_castps_pd(_mm256_unpackhi_ps(c, e));
  const v8 k04 = _mm256_castpd_ps(_mm256_unpacklo_pd(ab0, ce0)),
           k15 = _mm256_castpd_ps(_mm256_unpackhi_pd(ab0, ce0));
  const v8 k26 = _mm256_castpd_ps(_mm256_unpacklo_pd(ab1, ce1)),
           k37 = _mm256_castpd_ps(_mm256_unpackhi_pd(ab1, ce1));
  W::store(dq, _mm256_permute2f128_ps(k04, k15, 0x20));
  W::store(dq + 8 * de, _mm256_permute2f128_ps(k26, k37, 0x20));
  W::store(dq + 16 * de, _mm256_permute2f128_ps(k04, k15, 0x31));
  W::store(dq + 24 * de, _mm256_permute2f128_ps(k26, k37, 0x31));
}

// The other way: a full chunk of a 2 x 2 image from NCHW (its 32 elements one after the other at
// sq) to its 4 pixels (from dq, d_ps bytes apart): a swap of 128-bit halves puts channels k and
// k + 4 in one register, then unpacks make each 128-bit lane's 4 x 4 transpose. 12 shuffles for
// the chunk, where the 8 x 8 transpose of a step of 8 pixels (half of them past the image) took
// 24.
template <class R, class W>
FLUIDK_DETAIL_SIMD_INLINE inline void quad_from_planar(const std::byte* sq, std::byte* dq,
                                                       std::int64_t d_ps) noexcept {
  constexpr std::int64_t se = R::size;
  const v8 x0 = R::load(sq), x1 = R::load(sq + 8 * se), x2 = R::load(sq + 16 * se),
           x3 = R::load(sq + 24 * se);
  const v8 t0 = _mm256_permute2f128_ps(x0, x2, 0x20), t1 = _mm256_permute2f128_ps(x0, x2, 0x31);
  const v8 t2 = _mm256_permute2f128_ps(x1, x3, 0x20), t3 = _mm256_permute2f128_ps(x1, x3, 0x31);
  const __m256d u0 = _mm256_castps_pd(_mm256_unpacklo_ps(t0, t1)),
                u1 = _mm256_castps_pd(_mm256_unpackhi_ps(t0, t1));
  const __m256d u2 = _mm256_castps_pd(_mm256_unpacklo_ps(t2, t3)),
                u3 = _mm256_castps_pd(_mm256_unpackhi_ps(t2, t3));
  W::store(dq, _mm256_castpd_ps(_mm256_unpacklo_pd(u0, u2)));
  W::store(dq + d_ps, _mm256_castpd_ps(_mm256_unpackhi_pd(u0, u2)));
  W::store(dq + 2 * d_ps, _mm256_castpd_ps(_mm256_unpacklo_pd(u1, u3)));
  W::store(dq + 3 * d_ps, _mm256_castpd_ps(_mm256_unpackhi_pd(u1, u3)));
}

// Images of fewer than 8 pixels (one piece each, layout_job::piece) between a planar side and a
// channels-together one: each chunk as one vector step of 8 pixels in registers, of which the
// image's pixels are written: whole chunks of pixels straight from the registers, rows of a
// planar target and partial chunks of an NHWC one through a tile (store_row_prefix), but for
// full chunks into NCHW from a channels-together source (below). A planar
// source's rows are read in place: 8 pixels of a row reach into the rows after it, which lie in
// src but where a step would read past its end (the last chunk of the last image, which goes
// element by element). A channels-together source's pixels past the image read as zeros; the
// lanes past a partial chunk's are read too (an NHWC pixel's next channels, never written out),
// but where the last pixel's would lie past the end of src (element by element). Element by
// element, such images ran at a quarter to a sixth of this speed: on Zen 4, one thread, float
// of [1, 2048, 2, 2], NCHW -> NHWC 4.4 -> 1.7 us, NCHW -> nChw8c 5.6 -> 1.8 us, nChw8c -> NCHW
// 5.0 -> 2.6 us, and nChw8c float -> NCHW float16 28 -> 3.2 us (memcpy of the float: 0.58 us).
// A function of its own, apart from run_layout's pixel loops.
template <class R, class W>
FLUIDK_DETAIL_SIMD_TARGET __attribute__((noinline)) void run_small_images(const layout_job& j,
                                                                          const std::byte* src,
                                                                          std::byte* dst, std::int64_t begin,
                                                                          std::int64_t end) noexcept {
  constexpr std::int64_t se = R::size, de = W::size;
  const std::int64_t hw = j.hw;
  const bool s_planar = j.s.kind == side_kind::planar;
  const std::int64_t s_ps = j.s.ps * se, s_cs = j.s.cs * se, d_ps = j.d.ps * de, d_cs = j.d.cs * de;
  const std::int64_t src_bytes = j.n * j.s.n_stride * se;
  // Rows (or pixels) written out in part, and zeros for the pixels past an image. The zeros lie
  // next to the tile: loads of a constant array that shared the tile's offset in a 4 KiB page
  // (as ASLR placed the stack) waited on the tile's stores, and nChw8c -> NCHW of [1, 2048, 2,
  // 2] float took 2.5 or 4.2 us on Zen 4 from run to run. (Zeros in registers and a whole 8x8
  // transpose: 3.3 us.)
  struct {
    alignas(64) std::byte tile[8][8 * de];
    alignas(32) std::byte zeros[8 * se];
  } local;
  std::memset(local.zeros, 0, sizeof local.zeros);
  auto& tile = local.tile;
  const std::byte* pixels[8];
  for (int i = 0; i < 8; ++i) pixels[i] = local.zeros;
  // 2 x 2 images: the full chunks in a loop of their own, from one chunk to the next by a fixed
  // stride (so not with an nChw16c side, whose chunks alternate within a block), from a planar
  // source by quad_from_planar rather than a step of 8 pixels. The loop below works each chunk's
  // offsets, bounds and branches out again, which had cost more than moving it: AMD Zen 5
  // (EPYC, family 26), one thread, [1, 2048, 2, 2] float, us, medians of three runs of each
  // build in turn, before -> after: NCHW -> NHWC 1.08 -> 0.37, NCHW -> nChw8c 1.23 -> 0.37,
  // nChw8c -> NCHW 0.89 -> 0.39, NHWC -> NCHW 0.83 -> 0.36, nChw8c float -> NCHW float16 0.97
  // -> 0.57 (memcpy of the float: 0.20; of the same bytes: 0.15). What is left of a transform's
  // own cost (planning, the policy and cache lookups) is about 0.04 us: NCHW -> NHWC of [1, 8,
  // 2, 2] takes 0.06.
  const bool quads = hw == 4 && j.s.block != 16 && j.d.block != 16;
  const std::int64_t full = std::min(j.c / 8, j.q_count);
  const std::int64_t s_q = (j.s.chunk(0, 1) - j.s.chunk(0, 0)) * se,
                     d_q = (j.d.chunk(0, 1) - j.d.chunk(0, 0)) * de;
  for (std::int64_t item = begin; item < end; ++item) {
    const std::int64_t n = j.piece(item).n;
    std::int64_t q = 0;
    if (quads) {
      const std::byte* sq = src + j.s.chunk(n, 0) * se;
      std::byte* dq = dst + j.d.chunk(n, 0) * de;
      if (s_planar) {
        for (; q < full; ++q, sq += s_q, dq += d_q) quad_from_planar<R, W>(sq, dq, d_ps);
      } else {
        for (; q < full; ++q, sq += s_q, dq += d_q) quad_to_planar<R, W>(sq, s_ps, dq);
      }
    }
    for (; q < j.q_count; ++q) {
      const std::int64_t kv = std::clamp<std::int64_t>(j.c - 8 * q, 0, 8), kt = j.d_pads ? 8 : kv;
      const std::int64_t s_at = j.s.chunk(n, q) * se;
      const std::byte* sq = src + s_at;
      std::byte* dq = dst + j.d.chunk(n, q) * de;
      // The end of what a step reads: row kv - 1's 8 pixels, or pixel hw - 1's 8 lanes.
      const std::int64_t reach = s_at + (s_planar ? (kv - 1) * s_cs : (hw - 1) * s_ps) + 8 * se;
      if (kv > 0 && reach > src_bytes) {
        convert_pixels<R, W>(sq, s_ps, s_cs, dq, d_ps, d_cs, 0, hw, kv, kt);
        continue;
      }
      v8 r[8];
      if (s_planar) {
        load_chunk_transposed<R>(sq, s_cs, kv, r);
        if (kt == 8) {
          // Unrolled with constant indices, so that the pixels stay in registers.
#pragma GCC unroll 8
          for (int i = 0; i < 8; ++i)
            if (i < hw) W::store(dq + i * d_ps, r[i]);
        } else {
          store_prefixes<W>(tile, r, hw, dq, d_ps, kt);
        }
      } else if (hw == 4 && kv == 8) {
        quad_to_planar<R, W>(sq, s_ps, dq);
      } else {
        for (std::int64_t i = 0; i < hw; ++i) pixels[i] = sq + i * s_ps;
        load_rows_transposed<R>(pixels, 0, r);
        if (kv == 8 && (8 * q + 7) * hw + 8 <= j.c * hw) {
          // Into NCHW the chunk's rows lie one after the other, and so do the rows of the
          // chunks after it: each row stored whole, in order, so that its lanes past the image's
          // pixels land on the next rows, which are stored later. Only where those lanes stay
          // inside the image (whose next one another thread may write); the rest through the
          // tile.
#pragma GCC unroll 8
          for (int i = 0; i < 8; ++i) W::store(dq + i * d_cs, r[i]);
        } else {
          store_prefixes<W>(tile, r, kv, dq, d_cs, hw);
        }
      }
    }
  }
}

// A piece of the job: pixels [p0, p1) of an image, every chunk. The vector kernels move 8 pixels a
// step; the 1-7 pixels left of a piece of at least 8 go as one more step over its last 8 pixels,
// which writes some of them a second time with the same values (src and dst never overlap, and no
// other thread writes this piece), through the caches. One pixel left of a bit copy goes element
// by element (convert_pixels; nChw8c -> NCHW at 7 x 7 with one left: 0.36-0.40 us either way), and
// images under 8 pixels with a planar side through run_small_images. At the small images of a
// network's later stages the pixels left had cost more than the rest, element by element with each
// chunk's offsets worked out again per element (a division, for a blocked side): on Zen 4, one
// thread, 64 channels of float at 14 x 14 (4 left), NCHW -> nChw8c 1.69 -> 1.00 us, NCHW -> NHWC
// 1.43 -> 1.06 us, nChw8c -> NCHW 1.28 -> 1.14 us, nChw8c float -> NCHW float16 1.76 -> 0.96 us
// (memcpy of the same bytes: 0.89 us); at 7 x 7 (1 left), offsets per chunk, 0.49 -> 0.34 us, 0.41
// -> 0.31 us and, in a step, 0.61 -> 0.44 us.
template <class R, class W>
FLUIDK_DETAIL_SIMD_TARGET void run_layout(const layout_job& j, const std::byte* src, std::byte* dst,
                                          std::int64_t begin, std::int64_t end) noexcept {
  constexpr std::int64_t se = R::size, de = W::size;
  const bool nt = W::streams && j.stream;
  const bool s_planar = j.s.kind == side_kind::planar, d_planar = j.d.kind == side_kind::planar;
  const std::int64_t s_ps = j.s.ps * se, s_cs = j.s.cs * se, d_ps = j.d.ps * de, d_cs = j.d.cs * de;
  constexpr bool converts = !std::is_same_v<typename R::scalar_t, typename W::scalar_t>;
  // Bit copies of 1- and 2-byte elements between channels-together layouts: each chunk's bytes
  // as they are (copy_chunks), not widened into 4-byte lanes and narrowed back. On Zen 4, one
  // thread, [4, 64, 56, 56], GB/s read + written, medians of three runs in turn: bytes NHWC ->
  // nChw16c 24.6 -> 54.1, nChw8c -> NHWC 24.5 -> 52.9, nChw8c -> nChw16c 24.5 -> 59.6, NHWC
  // -> nChw8c 23.0 -> 35.7; 2-byte nChw8c -> NHWC 57.0 -> 68.0 (memcpy 95).
  constexpr bool raw_copy = !converts && se < 4;
  alignas(32) static const std::int32_t lane_masks[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                          0,  0,  0,  0,  0,  0,  0,  0};
  if (j.hw < 8 && (s_planar || d_planar)) {
    // The AVX2 engine's: the same instructions, and three fewer instances to compile.
    avx2::run_small_images<avx2_twin<R>, avx2_twin<W>>(j, src, dst, begin, end);
    return;
  }
  for (std::int64_t item = begin; item < end; ++item) {
    const auto [n, p0, p1] = j.piece(item);
    const std::int64_t vec = (p1 - p0) / 8 * 8;
    // Where the last step starts when the pixels do not fill whole steps (see above); 0: none.
    // Not where the job streams into a planar or blocked target: there each chunk's pass would
    // end with ordinary stores to lines it had just streamed (still in write-combining buffers,
    // or gone to memory), which wait for them; the pixels left go element by element instead,
    // to lines of their own. On Zen 4, one thread, NCHW -> nChw8c of float streamed, 4 pixels
    // left in each chunk's plane: [8, 1024, 14, 14] 23.6 -> 55.7 GB/s, [16, 1024, 14, 14] 22.6
    // -> 47.1 (28 x 28 images, which leave none, 55). An NHWC target keeps the step: its passes
    // cover many chunks, so the step comes once per pass over a group (float -> float16 of
    // [16, 1024, 14, 14] element by element: 24.5 -> 13.3, the conversions one at a time).
    const std::int64_t left = p1 - p0 - vec;
    const bool overlap = !nt || j.d.kind == side_kind::channels_last;
    const std::int64_t last = vec > 0 && overlap && (left > 1 || (left == 1 && converts)) ? p1 - 8 : 0;
    std::int64_t q = 0;
    if (s_planar && !d_planar) {
      // Full chunks in groups whose pixels' channels are adjacent in the target.
      const std::int64_t full = std::min(j.c / 8, j.q_count);
      if constexpr ((std::is_same_v<R, rd_b32> && std::is_same_v<W, wr_b32>) || W::size == 2) {
        if (j.pair_block > 0) {
          const std::int64_t groups = full / j.group;
          const std::byte* sq = src + j.s.chunk(n, 0) * se;
          std::byte* dq = dst + j.d.chunk(n, 0) * de;
          gather_pairs<R, W>(j, sq + p0 * se, dq + p0 * d_ps, groups, vec, nt);
          if (last > 0) {
            gather_pairs<R, W>(j, sq + last * se, dq + last * d_ps, groups, 8, false);
          } else if (left > 0) {
            convert_full_chunks<R, W>(j, src, dst, n, 0, groups * j.group, p0 + vec, p1);
          }
          q = groups * j.group;
        }
      }
      if constexpr (std::is_same_v<R, rd_b8> && std::is_same_v<W, wr_b8>) {
        // 1-byte copies into nChw8c, or nChw16c's whole blocks, 32 pixels a step
        // (gather_bytes), all of the piece's pixels: its last step goes over the last 32.
        // (1-byte elements never stream: W::streams.)
        if (j.group <= 2 && d_ps == 8 * j.group && !j.prefetch && p1 - p0 >= 32) {
          for (; q + j.group <= full; q += j.group) {
            const std::byte* sq = src + j.s.chunk(n, q) * se + p0;
            std::byte* dq = dst + j.d.chunk(n, q) * de + p0 * d_ps;
            if (j.group == 1)
              avx2::gather_bytes<1>(sq, s_cs, dq, p1 - p0);
            else
              avx2::gather_bytes<2>(sq, s_cs, dq, p1 - p0);
          }
        }
      }
      for (; q + j.group <= full; q += j.group) {
        const std::byte* sq = src + j.s.chunk(n, q) * se;
        std::byte* dq = dst + j.d.chunk(n, q) * de;
        gather_group<R, W>(j, sq + p0 * se, dq + p0 * d_ps, vec, nt, j.read_ahead);
        if (last > 0) {
          gather_group<R, W>(j, sq + last * se, dq + last * d_ps, 8, false, false);
        } else if (left > 0) {
          convert_full_chunks<R, W>(j, src, dst, n, q, j.group, p0 + vec, p1);
        }
      }
    }
    if constexpr (std::is_same_v<R, rd_b8> && std::is_same_v<W, wr_b8>) {
      // 1-byte copies out of nChw8c, nChw16c or NHWC, a chunk or two that lie together at a
      // time, 32 pixels a step through the caches (scatter_bytes), all of the piece's pixels:
      // its last step goes over the last 32.
      if (d_planar && !s_planar && !j.prefetch && p1 - p0 >= 32) {
        while (q < j.c / 8) {
          const std::byte* sq = src + j.s.chunk(n, q) * se + p0 * s_ps;
          std::byte* dq = dst + j.d.chunk(n, q) * de + p0;
          if (q + 2 <= j.c / 8 && j.s.chunk(n, q + 1) == j.s.chunk(n, q) + 8) {
            // Two full chunks together in each pixel: an nChw16c block, or NHWC.
            if (s_ps == 16) {
              avx2::scatter_bytes<2, true>(sq, s_ps, dq, d_cs, p1 - p0);
              q += 2;
            } else if (q + 8 <= j.c / 8 && j.s.chunk(n, q + 7) == j.s.chunk(n, q) + 56) {
              // NHWC with a line of chunks left: the whole line each step.
              avx2::scatter_bytes<2, false, 4>(sq, s_ps, dq, d_cs, p1 - p0);
              q += 8;
            } else {
              avx2::scatter_bytes<2, false>(sq, s_ps, dq, d_cs, p1 - p0);
              q += 2;
            }
          } else {
            if (s_ps == 8)
              avx2::scatter_bytes<1, true>(sq, s_ps, dq, d_cs, p1 - p0);
            else
              avx2::scatter_bytes<1, false>(sq, s_ps, dq, d_cs, p1 - p0);
            q += 1;
          }
        }
      }
    }
    if constexpr ((std::is_same_v<R, rd_b16> && std::is_same_v<W, wr_b16>) ||
                  (std::is_same_v<R, rd_b32> && std::is_same_v<W, wr_b32>)) {
      // Full chunks two at a time where they lie together in the source, through the caches
      // (2-byte elements: scatter_packed_chunks; 4-byte: scatter_line_chunks, a source line).
      // Four chunks of 2-byte elements a step (a source line) measured mixed on Zen 4 (NHWC ->
      // NCHW [1, 2048, 7, 7] 18.9 -> 24.1 GB/s, [4, 64, 56, 56] 54.6 -> 41.8), and are not
      // taken.
      if (d_planar && !s_planar && !j.prefetch && !nt) {
        // j.scatter_pairs pairs a step where they lie together, then pairs.
        for (const std::int64_t pairs : {j.scatter_pairs, std::int64_t{1}}) {
          const std::int64_t chunks = 2 * pairs;
          const auto scatter = [&](const std::byte* sq, std::byte* dq, std::int64_t count) {
            if constexpr (se == 2)
              scatter_packed_chunks<R, W>(sq, s_ps, dq, d_cs, count, pairs);
            else
              avx2::scatter_line_chunks<avx2_twin<R>, avx2_twin<W>>(sq, s_ps, dq, d_cs, count, pairs);
          };
          for (; q + chunks <= j.c / 8 && j.s.chunk(n, q + chunks - 1) == j.s.chunk(n, q) + 8 * (chunks - 1);
               q += chunks) {
            const std::byte* sq = src + j.s.chunk(n, q) * se;
            std::byte* dq = dst + j.d.chunk(n, q) * de;
            scatter(sq + p0 * s_ps, dq + p0 * d_ps, vec);
            if (last > 0) {
              scatter(sq + last * s_ps, dq + last * d_ps, 8);
            } else if (left > 0) {
              convert_full_chunks<R, W>(j, src, dst, n, q, chunks, p0 + vec, p1);
            }
          }
        }
      }
    }
    if (!s_planar && !d_planar) {
      // Channels together on both sides: two full chunks that lie together in the target (NHWC,
      // or an nChw16c block) written for each pixel back to back, so that a line of 4-byte
      // elements is written whole (which lets such a target stream: streams_whole_lines). A
      // chunk at a time wrote half of every line in each pass. Float, 64 channels of 56 x 56,
      // one thread on Zen 4, GB/s at 3, 12 and 49 MiB (memcpy 95, 43-47, 18-24): NHWC -> nChw16c
      // 56 -> 79, 12.7 -> 36, 9.8 -> 19.6; nChw16c -> NHWC 59 -> 80, 14 -> 51, 10 -> 38; nChw8c
      // -> NHWC 69 -> 85, 16 -> 51, 11 -> 39; nChw8c -> nChw16c 69 -> 86, 29 -> 50, 19 -> 37.
      constexpr int per_line = int(64 / (8 * de));
      if constexpr (per_line > 2) {
        // 1- and 2-byte elements: a target line's worth of chunks (8 or 4) where they lie
        // together in the target (merge_chunks), each from where it lies in the source. Two at
        // a time, each pass over the pixels wrote a part of every pixel's line. Zen 4, one
        // thread, GB/s read + written, before -> after, [1, 2048, 7, 7], [1, 1024, 14, 14],
        // [4, 64, 56, 56], [16, 1024, 14, 14]: nChw8c -> NHWC of bytes 15.5 -> 55.0, 27.6 ->
        // 55.5, 46.4 -> 54.0, 25.9 -> 48.5; of 2-byte elements 16.7 -> 44.0, 37.7 -> 67.9, 70.0
        // -> 81.6, 32.9 -> 48.9; nChw16c -> NHWC of bytes 15.2 -> 53.7, 27.8 -> 53.9, 46.5 ->
        // 52.6, 26.0 -> 49.1; of 2-byte elements 17.1 -> 43.6, 36.8 -> 68.6, 67.5 -> 80.2, 32.4
        // -> 49.8.
        for (; q + per_line <= j.c / 8 &&
               j.d.chunk(n, q + per_line - 1) == j.d.chunk(n, q) + 8 * (per_line - 1);
             q += per_line) {
          const std::byte* rows[per_line];
          for (int g = 0; g < per_line; ++g) rows[g] = src + j.s.chunk(n, q + g) * se;
          merge_chunks<R, W, per_line, raw_copy>(rows, s_ps, dst + j.d.chunk(n, q) * de, d_ps, p0, p1, nt);
        }
      }
      for (; q + 2 <= j.c / 8 && j.d.chunk(n, q + 1) == j.d.chunk(n, q) + 8; q += 2) {
        const std::byte* sq0 = src + j.s.chunk(n, q) * se;
        const std::byte* sq1 = src + j.s.chunk(n, q + 1) * se;
        std::byte* dq = dst + j.d.chunk(n, q) * de;
        if constexpr (raw_copy) {
          for (std::int64_t p = p0; p < p1; ++p)
            copy_chunks<se, 2>(sq0 + p * s_ps, sq1 + p * s_ps, dq + p * d_ps, nt);
        } else {
          for (std::int64_t p = p0; p < p1; ++p)
            put2<W>(dq + p * d_ps, R::load(sq0 + p * s_ps), R::load(sq1 + p * s_ps), nt);
        }
      }
      // Full chunks that lie together in the source (NHWC, or an nChw16c block) into a target
      // where they lie apart (nChw8c): a source line's worth of them at a time (split_chunks: 2
      // of 4-byte elements, 4 of 2-byte, 8 of 1-byte), else two. Before, a chunk at a time.
      // Zen 4, one thread, GB/s read + written, before -> after (memcpy 95-103 at the first
      // three sizes, 43-49 at the last): NHWC -> nChw8c of float [1, 2048, 7, 7] 23.0 -> 48.4,
      // [1, 1024, 14, 14] 23.8 -> 47.6, [4, 64, 56, 56] 62.7 -> 83.3, streamed [16, 1024, 14,
      // 14] 21.4 -> 48.1; of 2-byte elements 11.6 -> 55.0, 17.2 -> 91.1, 42.7 -> 76.0, 16.9 ->
      // 49.3; of bytes 9.0 -> 53.9, 18.0 -> 54.4, 36.2 -> 50.9, 17.0 -> 38.4; nChw16c -> nChw8c
      // of float 76.1 -> 100.8, 65.0 -> 88.0, 67.1 -> 84.5, 38.7 -> 50.8.
      constexpr int s_per_line = int(64 / (8 * se));
      if constexpr (s_per_line > 2) {
        for (; q + s_per_line <= j.c / 8 &&
               j.s.chunk(n, q + s_per_line - 1) == j.s.chunk(n, q) + 8 * (s_per_line - 1);
             q += s_per_line)
          split_chunks<R, W, s_per_line, raw_copy>(src + j.s.chunk(n, q) * se, s_ps,
                                                   dst + j.d.chunk(n, q) * de, d_ps,
                                                   (j.d.chunk(n, q + 1) - j.d.chunk(n, q)) * de, p0, p1, nt);
      }
      for (; q + 2 <= j.c / 8 && j.s.chunk(n, q + 1) == j.s.chunk(n, q) + 8; q += 2)
        split_chunks<R, W, 2, raw_copy>(src + j.s.chunk(n, q) * se, s_ps, dst + j.d.chunk(n, q) * de, d_ps,
                                        (j.d.chunk(n, q + 1) - j.d.chunk(n, q)) * de, p0, p1, nt);
    }
    for (; q < j.q_count; ++q) {
      const std::int64_t kv = std::clamp<std::int64_t>(j.c - 8 * q, 0, 8), kt = j.d_pads ? 8 : kv;
      const std::byte* sq = src + j.s.chunk(n, q) * se;
      std::byte* dq = dst + j.d.chunk(n, q) * de;
      std::int64_t p = p0;
      if (s_planar || d_planar) {
        if (move_chunk<R, W>(j, sq + p0 * s_ps, dq + p0 * d_ps, vec, kv, kt, nt)) {
          p += vec;
          if (last > 0) {
            move_chunk<R, W>(j, sq + last * s_ps, dq + last * d_ps, 8, kv, kt, false);
            p = p1;
          }
        }
      } else if (kt == 8) {
        // Channels together on both sides: one vector per pixel. A partial chunk read from a
        // blocked source has its padding lanes masked, so the target's padding is zero whatever
        // the source's padding holds.
        if (kv == 8 && raw_copy) {
          for (; p < p1; ++p) copy_chunks<se, 1>(sq + p * s_ps, nullptr, dq + p * d_ps, nt);
        } else if (kv == 8) {
          for (; p < p1; ++p) put<W>(dq + p * d_ps, R::load(sq + p * s_ps), nt);
        } else if (kv == 0) {
          for (; p < p1; ++p) put<W>(dq + p * d_ps, _mm256_setzero_ps(), nt);
        } else if (j.s_padded) {
          const v8 mask = _mm256_loadu_ps(reinterpret_cast<const float*>(lane_masks + 8 - kv));
          for (; p < p1; ++p) put<W>(dq + p * d_ps, _mm256_and_ps(R::load(sq + p * s_ps), mask), nt);
        }
      }
      // What is left element by element: the one pixel after the steps of a bit copy, and
      // partial chunks of an NHWC side.
      convert_pixels<R, W>(sq, s_ps, s_cs, dq, d_ps, d_cs, p, p1, kv, kt);
    }
  }
  // Non-temporal stores are weakly ordered: made visible before anyone reads the target.
  if (nt) _mm_sfence();
}

// ---- Cast ---------------------------------------------------------------------------------------

// Blocks of 32 elements from i while they fit before end; returns where they stop. One instance
// per store kind: testing nt inside these L3-bound loops cost them 2-3% on Zen 4. Where the
// conversion has a NaN fix-up, a block is converted without it and looked at for NaNs once (a
// raw conversion keeps a NaN a NaN); one holding a NaN (rare) is converted again with the
// fix-up. On AVX2, Zen 4, 196 KiB in the L2: float -> float16 0.77x -> 1.0x memcpy, float16 ->
// float 0.85x -> 1.0x (a test and a branch per 8 elements cost more than the conversion).
// Ahead: bytes of the source to prefetch ahead of the reads (0: none; cast_reads_ahead).
template <class R, class W, bool NT, int Ahead = 0>
FLUIDK_DETAIL_SIMD_TARGET std::int64_t cast_blocks(const std::byte* src, std::byte* dst, std::int64_t i,
                                                   std::int64_t end) noexcept {
  constexpr std::int64_t se = R::size, de = W::size;
#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
  constexpr bool raw = loads16_raw<R> || packs_raw<W>;
  for (; i + 32 <= end; i += 32) {
    if constexpr (Ahead > 0)
      for (std::int64_t line = 0; line < 32 * se; line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(src + i * se + Ahead + line), _MM_HINT_T0);
    if constexpr (raw) {
      const v16 a = load16_if_no_nan<R>(src + i * se), b = load16_if_no_nan<R>(src + (i + 16) * se);
      if (_mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q) == 0) [[likely]] {
        put16_if_no_nan<W>(dst + i * de, a, NT);
        put16_if_no_nan<W>(dst + (i + 16) * de, b, NT);
        continue;
      }
      __asm__ volatile("" ::: "memory");  // as in the AVX2 loop below
    }
    const v16 a = R::load16(src + i * se), b = R::load16(src + (i + 16) * se);
    put16<W>(dst + i * de, a, NT);
    put16<W>(dst + (i + 16) * de, b, NT);
  }
#else
  constexpr bool raw = loads_raw<R> || packs_raw<W>;
  for (; i + 32 <= end; i += 32) {
    if constexpr (std::is_same_v<W, wr_f16> && !loads_raw<R>) {
      // Into float16 from a load that keeps every value (float, bfloat16): VCVTPS2PH gives a NaN
      // exactly where its input is one, so the block is converted raw and its 32 halves looked at
      // instead of its inputs, in 128-bit registers stored as they are. On AMD Zen 1 (one thread,
      // GB/s read + written, 196 KiB in the L2) 38.0 -> 42.2, a plain loop of conversions without
      // any test 47.3: VCVTPS2PH bounds it there, and the float compares of the inputs took the
      // same pipes.
      __m128i h[4];
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) h[k] = W::pack_raw(R::load(src + (i + 8 * k) * se));
      if (!holds_f16_nan(h)) [[likely]] {
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) put_packed(dst + (i + 8 * k) * de, h[k], NT);
        continue;
      }
      __asm__ volatile("" ::: "memory");  // as below
    } else if constexpr (raw) {
      const v8 a = load_if_no_nan<R>(src + i * se), b = load_if_no_nan<R>(src + (i + 8) * se);
      const v8 c = load_if_no_nan<R>(src + (i + 16) * se), e = load_if_no_nan<R>(src + (i + 24) * se);
      const v8 nan = _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_UNORD_Q), _mm256_cmp_ps(c, e, _CMP_UNORD_Q));
      if (_mm256_testz_ps(nan, nan)) [[likely]] {
        put2_if_no_nan<W>(dst + i * de, a, b, NT);
        put2_if_no_nan<W>(dst + (i + 16) * de, c, e, NT);
        continue;
      }
      // The block is read again below: without this barrier GCC keeps the loaded values for
      // it, and then cannot fold the loads into the conversions above (float16 -> float from
      // the L3 on Zen 4: 7% slower).
      __asm__ volatile("" ::: "memory");
    }
    const v8 a = R::load(src + i * se), b = R::load(src + (i + 8) * se);
    const v8 c = R::load(src + (i + 16) * se), e = R::load(src + (i + 24) * se);
    put2<W>(dst + i * de, a, b, NT);
    put2<W>(dst + (i + 16) * de, c, e, NT);
  }
#endif
  return i;
}

using blocks_fn = std::int64_t (*)(const std::byte*, std::byte*, std::int64_t, std::int64_t) noexcept;

// Elements [begin, end) from src to dst, the blocks of 32 by Cached or Streamed (nt). Streaming,
// the head is converted one by one up to the first 64-byte boundary of the target, so that every
// vector store after it is aligned.
template <class R, class W, blocks_fn Cached = &cast_blocks<R, W, false>,
          blocks_fn Streamed = &cast_blocks<R, W, true>>
FLUIDK_DETAIL_SIMD_TARGET void run_cast(const std::byte* src, std::byte* dst, std::int64_t begin,
                                        std::int64_t end, bool nt) noexcept {
  constexpr std::int64_t se = R::size, de = W::size;
  std::int64_t i = begin;
  if (nt) {
    for (; i < end && (reinterpret_cast<std::uintptr_t>(dst + i * de) & 63) != 0; ++i)
      convert_one<R, W>(src + i * se, dst + i * de);
  }
  i = nt ? Streamed(src, dst, i, end) : Cached(src, dst, i, end);
  for (; i + 8 <= end; i += 8) W::store(dst + i * de, R::load(src + i * se));
  for (; i < end; ++i) convert_one<R, W>(src + i * se, dst + i * de);
  if (nt) _mm_sfence();
}

#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
// float -> bfloat16 with AVX512_BF16 (isa::avx512_bf16): VCVTNE2PS2BF16 rounds 32 elements to
// nearest even in one instruction. It flushes subnormal inputs and quiets signalling NaNs, so a
// block of 32 holding either (one VFPCLASSPS per 16 finds them) takes the integer rounding.
// The head up to the first aligned line of the target (streaming) and the tail are run_cast's,
// which calls these blocks (not inlined: they need the AVX512_BF16 target).
#define FLUIDK_DETAIL_SIMD_BF16_TARGET \
  __attribute__((target("avx2,f16c,fma,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
// The VFPCLASSPS classes that the conversion would change: quiet NaN, signalling NaN, subnormal.
inline constexpr int bf16_native_special = 0x01 | 0x80 | 0x20;
// cast_blocks<rd_f32, wr_bf16, NT> with the conversion in one instruction.
template <bool NT, int Ahead = 0>
FLUIDK_DETAIL_SIMD_BF16_TARGET inline std::int64_t cast_f32_bf16_blocks(const std::byte* src, std::byte* dst,
                                                                        std::int64_t i,
                                                                        std::int64_t end) noexcept {
  constexpr int special = bf16_native_special;
  for (; i + 32 <= end; i += 32) {
    if constexpr (Ahead > 0)
      for (int line = 0; line < 128; line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(src + i * 4 + Ahead + line), _MM_HINT_T0);
    const __m512 a = _mm512_loadu_ps(src + i * 4), b = _mm512_loadu_ps(src + (i + 16) * 4);
    if (_kortestz_mask16_u8(_mm512_fpclass_ps_mask(a, special), _mm512_fpclass_ps_mask(b, special)))
        [[likely]] {
      const __m512i r = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a));  // a in the low half
      if constexpr (NT)
        _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i * 2), r);
      else
        _mm512_storeu_si512(dst + i * 2, r);
    } else {
      put16<wr_bf16>(dst + i * 2, a, NT);
      put16<wr_bf16>(dst + (i + 16) * 2, b, NT);
    }
  }
  return i;
}
// The same blocks through the caches with 256-bit vectors, eight elements per conversion: on AMD
// Zen 4, reading from the L3 (3 MiB, one thread), 0.99-1.0x memcpy of the same bytes with the
// 512-bit blocks, 1.03-1.05x with these, which are 4% slower from the L2 and half as fast from the
// L1 (vector_cast chooses by the bytes each thread reads). Streamed, both ran alike: the 512-bit
// blocks stream.
FLUIDK_DETAIL_SIMD_BF16_TARGET inline std::int64_t cast_f32_bf16_blocks_ymm(const std::byte* src,
                                                                            std::byte* dst, std::int64_t i,
                                                                            std::int64_t end) noexcept {
  constexpr int special = bf16_native_special;
  for (; i + 32 <= end; i += 32) {
    const float* f = reinterpret_cast<const float*>(src) + i;
    const __m256 a = _mm256_loadu_ps(f), b = _mm256_loadu_ps(f + 8), c = _mm256_loadu_ps(f + 16),
                 e = _mm256_loadu_ps(f + 24);
    const __mmask8 found = _mm256_fpclass_ps_mask(a, special) | _mm256_fpclass_ps_mask(b, special) |
                           _mm256_fpclass_ps_mask(c, special) | _mm256_fpclass_ps_mask(e, special);
    if (found == 0) [[likely]] {
      const __m128i ra = reinterpret_cast<__m128i>(_mm256_cvtneps_pbh(a)),
                    rb = reinterpret_cast<__m128i>(_mm256_cvtneps_pbh(b)),
                    rc = reinterpret_cast<__m128i>(_mm256_cvtneps_pbh(c)),
                    re = reinterpret_cast<__m128i>(_mm256_cvtneps_pbh(e));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i * 2), _mm256_set_m128i(rb, ra));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (i + 16) * 2), _mm256_set_m128i(re, rc));
    } else {
      put16<wr_bf16>(dst + i * 2, _mm512_loadu_ps(src + i * 4), false);
      put16<wr_bf16>(dst + (i + 16) * 2, _mm512_loadu_ps(src + (i + 16) * 4), false);
    }
  }
  return i;
}
inline constexpr auto run_cast_f32_bf16_native =
    &run_cast<rd_f32, wr_bf16, &cast_f32_bf16_blocks<false>, &cast_f32_bf16_blocks<true>>;
inline constexpr auto run_cast_f32_bf16_native_ymm =
    &run_cast<rd_f32, wr_bf16, &cast_f32_bf16_blocks_ymm, &cast_f32_bf16_blocks<true>>;
inline constexpr auto run_cast_f32_bf16_native_ahead =
    &run_cast<rd_f32, wr_bf16, &cast_f32_bf16_blocks<false, cast_read_ahead>, &cast_f32_bf16_blocks<true>>;
inline constexpr auto run_cast_f32_f16_ahead =
    &run_cast<rd_f32, wr_f16, &cast_blocks<rd_f32, wr_f16, false, cast_read_ahead>>;
#undef FLUIDK_DETAIL_SIMD_BF16_TARGET
#endif

// ---- What this level accelerates -----------------------------------------------------------------

using layout_fn = void (*)(const layout_job&, const std::byte*, std::byte*, std::int64_t,
                           std::int64_t) noexcept;
using range_fn = void (*)(const std::byte*, std::byte*, std::int64_t, std::int64_t, bool) noexcept;

// Conversions among float, float16 and bfloat16 (the other pairs take the portable path).
template <class Kernel, template <class, class> class Make>
inline Kernel float_pair_kernel(data_type from, data_type to) noexcept {
  using dt = data_type;
  if (from == dt::float32 && to == dt::float16) return Make<rd_f32, wr_f16>::value;
  if (from == dt::float32 && to == dt::bfloat16) return Make<rd_f32, wr_bf16>::value;
  if (from == dt::float16 && to == dt::float32) return Make<rd_f16, wr_f32>::value;
  if (from == dt::bfloat16 && to == dt::float32) return Make<rd_bf16, wr_f32>::value;
  if (from == dt::float16 && to == dt::bfloat16) return Make<rd_f16, wr_bf16>::value;
  if (from == dt::bfloat16 && to == dt::float16) return Make<rd_bf16, wr_f16>::value;
  return nullptr;
}
template <class R, class W>
struct make_cast {
  static constexpr range_fn value = &run_cast<R, W>;
};
inline range_fn cast_kernel(data_type from, data_type to) noexcept {
  return float_pair_kernel<range_fn, make_cast>(from, to);
}

#if FLUIDK_DETAIL_SIMD_LEVEL >= 3
// Layout transforms are bound by memory, and by shuffles in the caches: the AVX2 kernels serve
// this level too (which also halves what the kernels compile), except copies of 4-byte elements
// between planar and channels-together layouts, whose 512-bit transposes take fewer shuffles,
// and float into the half types, whose nChw8c -> planar blocks convert 16 lanes at a time and
// transpose with 16-bit permutes (scatter16_lines).
inline layout_fn layout_copy_kernel(std::size_t elem_size) noexcept {
  return elem_size == 4 ? &run_layout<rd_b32, wr_b32> : avx2::layout_copy_kernel(elem_size);
}
inline layout_fn layout_convert_kernel(data_type from, data_type to) noexcept {
  if (from == data_type::float32 && to == data_type::float16) return &run_layout<rd_f32, wr_f16>;
  if (from == data_type::float32 && to == data_type::bfloat16) return &run_layout<rd_f32, wr_bf16>;
  return avx2::layout_convert_kernel(from, to);
}
#else
// Bit copies: elements of 1, 2 or 4 bytes (8-byte elements take the portable path).
inline layout_fn layout_copy_kernel(std::size_t elem_size) noexcept {
  switch (elem_size) {
    case 1:
      return &run_layout<rd_b8, wr_b8>;
    case 2:
      return &run_layout<rd_b16, wr_b16>;
    case 4:
      return &run_layout<rd_b32, wr_b32>;
    default:
      return nullptr;
  }
}
// float to and from the half types; float16 <-> bfloat16 layout transforms are rare enough to
// take the portable path rather than cost every user's build two more kernels (named one by
// one: float_pair_kernel would instantiate those two as well).
inline layout_fn layout_convert_kernel(data_type from, data_type to) noexcept {
  using dt = data_type;
  if (from == dt::float32 && to == dt::float16) return &run_layout<rd_f32, wr_f16>;
  if (from == dt::float32 && to == dt::bfloat16) return &run_layout<rd_f32, wr_bf16>;
  if (from == dt::float16 && to == dt::float32) return &run_layout<rd_f16, wr_f32>;
  if (from == dt::bfloat16 && to == dt::float32) return &run_layout<rd_bf16, wr_f32>;
  return nullptr;
}
#endif

}  // namespace fluidk::transforms::cpu_kernels::detail::FLUIDK_DETAIL_SIMD_ENGINE

#undef FLUIDK_DETAIL_SIMD_INLINE
