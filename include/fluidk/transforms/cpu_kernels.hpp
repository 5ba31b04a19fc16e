// The CPU's data-transform kernels on host memory: layout changes among NCHW, NHWC, nChw8c and
// nChw16c, casts between every pair of data types, and both fused in one pass. Vectorised with
// runtime dispatch (AVX-512, AVX2 + F16C, portable) and spread over OpenMP threads when the
// user's build enables OpenMP; the transform types and the planner sit on top of these.

// The checks of the file that compiles the kernels once (below) run at every inclusion, before
// the include guard: a file that includes this header again after it defines the macro (another
// of fluidk's headers, <fluidk/separate_runtime.hpp> among them, read it first) would compile
// none of the kernels, and the program would fail to link with a list of undefined references.
#if defined(FLUIDK_CPU_KERNELS_DEFINE) && !defined(FLUIDK_SEPARATE_CPU_KERNELS)
#error \
    "fluidk: FLUIDK_CPU_KERNELS_DEFINE needs FLUIDK_SEPARATE_CPU_KERNELS, defined for every file of the program"
#elif defined(FLUIDK_CPU_KERNELS_DEFINE) && defined(FLUIDK_DETAIL_KERNELS_HERE) && !FLUIDK_DETAIL_KERNELS_HERE
#error "fluidk: FLUIDK_CPU_KERNELS_DEFINE must come before fluidk's headers: define it first in its file"
#endif
#ifndef FLUIDK_TRANSFORMS_CPU_KERNELS_HPP
#define FLUIDK_TRANSFORMS_CPU_KERNELS_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "fluidk/dims.hpp"
#include "fluidk/dtype.hpp"
#include "fluidk/error.hpp"
#include "fluidk/layout.hpp"
#include "fluidk/transforms/detail/cpu_convert.hpp"
#include "fluidk/transforms/detail/cpu_isa.hpp"
#include "fluidk/transforms/detail/cpu_layout.hpp"
#include "fluidk/transforms/detail/cpu_memory.hpp"

// Where the kernels are compiled. Header-only by default: every translation unit that runs a CPU
// transform compiles them (several seconds, several times that under sanitizers). A program with
// many such files can compile them once: FLUIDK_SEPARATE_CPU_KERNELS defined for every file of
// the program, and one file that defines FLUIDK_CPU_KERNELS_DEFINE before it includes this
// header (docs/transforms.md, "Compiling the kernels once"). The other files then compile none
// of the kernels: they call reorder, cast, reorder_cast and transform_threads (declared below) as
// compiled there, where the vector engines, the portable path, the plans and the threads
// (OpenMP's when that file is built with it) all are.
#if defined(FLUIDK_SEPARATE_CPU_KERNELS) && !defined(FLUIDK_CPU_KERNELS_DEFINE)
#define FLUIDK_DETAIL_KERNELS_HERE 0
#else
#define FLUIDK_DETAIL_KERNELS_HERE 1
#endif
#if defined(FLUIDK_SEPARATE_CPU_KERNELS)
#define FLUIDK_DETAIL_KERNELS_LINKAGE
#else
#define FLUIDK_DETAIL_KERNELS_LINKAGE inline
#endif

#if FLUIDK_DETAIL_X86_KERNELS && FLUIDK_DETAIL_KERNELS_HERE
#include <immintrin.h>

// The engines are compiled once per level with the level's target attribute: no -mavx2 (or
// similar) is needed in the user's build, and nothing of them runs unless the CPU has it.
#define FLUIDK_DETAIL_SIMD_TARGET __attribute__((target("avx2,f16c,fma")))
#define FLUIDK_DETAIL_SIMD_ENGINE avx2
#define FLUIDK_DETAIL_SIMD_LEVEL 2
#include "fluidk/transforms/detail/cpu_simd.ipp"
#undef FLUIDK_DETAIL_SIMD_TARGET
#undef FLUIDK_DETAIL_SIMD_ENGINE
#undef FLUIDK_DETAIL_SIMD_LEVEL

#define FLUIDK_DETAIL_SIMD_TARGET __attribute__((target("avx2,f16c,fma,avx512f,avx512bw,avx512vl")))
#define FLUIDK_DETAIL_SIMD_ENGINE avx512
#define FLUIDK_DETAIL_SIMD_LEVEL 3
#include "fluidk/transforms/detail/cpu_simd.ipp"
#undef FLUIDK_DETAIL_SIMD_TARGET
#undef FLUIDK_DETAIL_SIMD_ENGINE
#undef FLUIDK_DETAIL_SIMD_LEVEL
#endif

namespace fluidk::transforms::cpu_kernels {

// The entry points, described where they are defined (below).
FLUIDK_DETAIL_KERNELS_LINKAGE void reorder(const std::byte* src, data_layout from, std::byte* dst,
                                           data_layout to, const dims& shape, std::size_t elem_size,
                                           int threads = 0);
FLUIDK_DETAIL_KERNELS_LINKAGE void cast(const std::byte* src, data_type from, std::byte* dst, data_type to,
                                        std::size_t n, int threads = 0);
FLUIDK_DETAIL_KERNELS_LINKAGE void reorder_cast(const std::byte* src, data_layout from, data_type from_type,
                                                std::byte* dst, data_layout to, data_type to_type,
                                                const dims& shape, int threads = 0);
// The threads a transform moving `bytes` (read + written) spreads over when it may use
// `threads` (0: OpenMP's default): 1 below 512 KB, and always 1 where the kernels are compiled
// without OpenMP.
FLUIDK_DETAIL_KERNELS_LINKAGE int transform_threads(std::size_t bytes, int threads = 0) noexcept;

namespace detail {

using layout_kernel = void (*)(const layout_job&, const std::byte*, std::byte*, std::int64_t,
                               std::int64_t) noexcept;
using range_kernel = void (*)(const std::byte*, std::byte*, std::int64_t, std::int64_t, bool) noexcept;

// The vector kernel of the active level for a bit-copy layout transform, or nullptr; for a
// layout transform with a float <-> half conversion, or nullptr; for a cast whose threads each
// read `read_per_thread` bytes, or nullptr.
FLUIDK_DETAIL_KERNELS_LINKAGE layout_kernel vector_layout_copy(std::size_t elem_size) noexcept;
FLUIDK_DETAIL_KERNELS_LINKAGE layout_kernel vector_layout_convert(data_type from, data_type to) noexcept;
FLUIDK_DETAIL_KERNELS_LINKAGE range_kernel vector_cast(data_type from, data_type to,
                                                       std::size_t read_per_thread) noexcept;

#if FLUIDK_DETAIL_KERNELS_HERE
FLUIDK_DETAIL_KERNELS_LINKAGE layout_kernel vector_layout_copy(std::size_t elem_size) noexcept {
#if FLUIDK_DETAIL_X86_KERNELS
  switch (active_isa()) {
    case isa::avx512_bf16:
    case isa::avx512:
      return avx512::layout_copy_kernel(elem_size);
    case isa::avx2:
      return avx2::layout_copy_kernel(elem_size);
    case isa::scalar:
      break;
  }
#else
  (void)elem_size;
#endif
  return nullptr;
}

FLUIDK_DETAIL_KERNELS_LINKAGE layout_kernel vector_layout_convert(data_type from, data_type to) noexcept {
#if FLUIDK_DETAIL_X86_KERNELS
  switch (active_isa()) {
    case isa::avx512_bf16:
    case isa::avx512:
      return avx512::layout_convert_kernel(from, to);
    case isa::avx2:
      return avx2::layout_convert_kernel(from, to);
    case isa::scalar:
      break;
  }
#else
  (void)from;
  (void)to;
#endif
  return nullptr;
}

// The level of each cast is chosen from measurements, not by width, and for some by the bytes
// each thread reads. On AMD Zen 4 (one thread, 3 MiB in the L3, against memcpy of the same
// bytes), float <-> float16 ran faster on the AVX2 engine (f32 -> f16 1.00x against 0.88x; f16
// -> f32 0.98x against 0.93x: the 512-bit F16C conversions issue as two halves there), except
// float -> float16 whose data fit in the L1 (read and written: 12 KiB read, 1.56x faster on the
// AVX-512 engine; from 49 KiB read in the L2, 3-4% slower). The casts to bfloat16 ran faster on
// the AVX-512 engine (0.85x against 0.60x: its rounding works on 16 lanes and narrows in one
// instruction), float -> bfloat16 fastest with AVX512_BF16's conversion (1.0x: one instruction
// for 32 elements), whose 256-bit form is the faster one once each thread reads more than its L2
// holds (1.03-1.05x from the L3, against 0.99-1.0x; cpu_simd.ipp). Where the two measured the
// same, the wider one.
// AMD Zen 5 (family 0x1A) runs the 512-bit conversions at full width: there float -> float16 and
// float -> bfloat16 take the AVX-512 engine, with the 512-bit AVX512_BF16 blocks, at every size.
// One thread, GB/s read + written, medians of 7 rounds, [1, 64, s, s] (read: 49 KiB to 3 MiB),
// AVX2 -> AVX-512 for float16 and 256-bit -> 512-bit AVX512_BF16 blocks for bfloat16: s = 14
// 139 -> 170 and 138 -> 166, 28 149 -> 186 and 146 -> 181, 56 122 -> 138 and 125 -> 135, 112
// (through the caches) 103 -> 108 and 102 -> 112, against memcpy of the same bytes at 112: 109
// (0.94x -> 0.99x and 0.93x -> 1.02x); [4, 64, 112, 112] streamed 116 -> 124 and 124 -> 124
// (memcpy 116). (float16 -> float was not measured there, and keeps the AVX2 engine.)
inline bool wide_casts_pay() noexcept { return active_amd_family() >= zen5_family; }
inline bool cast_prefers_avx2(data_type from, data_type to, std::size_t read_per_thread) noexcept {
  if (from == data_type::float16 && to == data_type::float32) return true;
  return from == data_type::float32 && to == data_type::float16 && !wide_casts_pay() &&
         read_per_thread + read_per_thread / 2 > detected_caches().l1d;
}

FLUIDK_DETAIL_KERNELS_LINKAGE range_kernel vector_cast(data_type from, data_type to,
                                                       std::size_t read_per_thread) noexcept {
#if FLUIDK_DETAIL_X86_KERNELS
  switch (active_isa()) {
    case isa::avx512_bf16:
      if (from == data_type::float32 && to == data_type::bfloat16) {
        if (wide_casts_pay())
          return cast_reads_ahead(read_per_thread) ? avx512::run_cast_f32_bf16_native_ahead
                                                   : avx512::run_cast_f32_bf16_native;
        return read_per_thread > detected_caches().l2 ? avx512::run_cast_f32_bf16_native_ymm
                                                      : avx512::run_cast_f32_bf16_native;
      }
      [[fallthrough]];
    case isa::avx512:
      if (from == data_type::float32 && to == data_type::float16 && cast_reads_ahead(read_per_thread))
        return avx512::run_cast_f32_f16_ahead;
      return cast_prefers_avx2(from, to, read_per_thread) ? avx2::cast_kernel(from, to)
                                                          : avx512::cast_kernel(from, to);
    case isa::avx2:
      return avx2::cast_kernel(from, to);
    case isa::scalar:
      break;
  }
#else
  (void)from;
  (void)to;
  (void)read_per_thread;
#endif
  return nullptr;
}
#endif  // FLUIDK_DETAIL_KERNELS_HERE

[[noreturn]] inline void no_layout_transform(data_layout from, data_layout to, const dims& shape,
                                             const std::string& why = {}) {
  throw not_registered("no layout transform from " + std::string(name_of(from)) + " to " +
                       std::string(name_of(to)) + " for shape " + shape.to_string() +
                       (why.empty() ? "" : ": " + why));
}

// Elements of `layout`'s storage for `shape` (blocked layouts pad C); checks the rank.
inline std::int64_t storage_elements(data_layout layout, const dims& shape, data_layout from,
                                     data_layout to) {
  const int rank = rank_of(layout);
  if (rank != 0 && std::size_t(rank) != shape.rank())
    no_layout_transform(from, to, shape,
                        std::string(name_of(layout)) + " needs rank " + std::to_string(rank) +
                            ", the shape has rank " + std::to_string(shape.rank()));
  return storage_numel(shape, layout);  // the padding rule and its overflow check
}

// A copy of `bytes`, shared among threads when large.
inline void copy_bytes(const std::byte* src, std::byte* dst, std::size_t bytes, int threads) {
  if (bytes == 0) return;
  constexpr std::int64_t piece = 64 * 1024;
  const std::int64_t pieces = (static_cast<std::int64_t>(bytes) + piece - 1) / piece;
  parallel_for(pieces, threads_for(2 * static_cast<std::int64_t>(bytes), threads),
               [&](std::int64_t begin, std::int64_t end) {
                 const std::size_t b = std::size_t(begin * piece);
                 const std::size_t e = std::min(bytes, std::size_t(end * piece));
                 std::memcpy(dst + b, src + b, e - b);
               });
}

inline void check_elem_size(std::size_t elem_size) {
  if (copy_fn(elem_size) == nullptr)
    throw error("layout transforms move elements of 1, 2, 4 or 8 bytes, not " + std::to_string(elem_size));
}

// How run_layout cuts from -> to (both 4-D, different) into pieces and writes them: the job with
// its store policy, streaming and read-ahead chosen (the one place they are), and the threads
// that share it.
struct layout_plan {
  layout_job job;
  int threads = 1;
};
inline layout_plan plan_layout(data_layout from, std::size_t se, const std::byte* dst, data_layout to,
                               std::size_t de, const dims& shape, int threads) {
  const std::int64_t read = storage_elements(from, shape, from, to) * std::int64_t(se);
  const std::int64_t written = storage_elements(to, shape, from, to) * std::int64_t(de);
  const std::int64_t bytes = read + written;
  // Assigned, not list-initialized: GCC 12 zeroed the whole plan first with a `rep stos`, which
  // on AMD Zen 5 made a small transform's call (NCHW -> NHWC of [1, 8, 2, 2]) 46 ns, not 39.
  layout_plan plan;
  plan.job = make_layout_job(from, to, shape[0], shape[1], shape[2] * shape[3], se, de, active_nhwc_walk(),
                             streams_nhwc_pairs_widely());
  if (plan.job.items() == 0) return plan;
  plan.threads = threads_for(bytes, threads);
  const store_policy policy =
      active_layout_store_policy(std::size_t(written), se, de, std::size_t(bytes), plan.threads);
  plan.job.prefetch = policy == store_policy::prefetched;
  set_streaming(plan.job, policy == store_policy::streaming && streams_whole_lines(plan.job, dst, se, de),
                std::size_t(bytes) <= detected_caches().llc);
  plan.job.read_ahead = reads_rows_ahead(policy, std::size_t(bytes / plan.threads));
  plan.job.source_ahead =
      reads_source_ahead(policy, plan.job.stream, std::size_t(bytes), std::size_t(bytes / plan.threads));
  split_for_threads(plan.job, plan.threads);
  return plan;
}

// A 4-D transform from -> to (different layouts), each element through `convert` (a bit copy
// when the types are the same). Images of one pixel go through `run(s, d, count)`, which
// converts `count` contiguous elements: in every 4-D layout such an image is its C channels in
// order (a blocked layout pads them to its block), so the transform is one run of C elements
// per image (one run for all where neither side pads), and zeros in a blocked target's padding.
// The pixel loops would take each chunk of 8 channels element by element: 2.3 us for NCHW ->
// NHWC of [1, 2048, 1, 1] floats on Zen 4 (a classifier's input after global pooling), where
// memcpy takes 0.08 us.
template <class Run>
void run_layout(const std::byte* src, data_layout from, std::size_t se, std::byte* dst, data_layout to,
                std::size_t de, const dims& shape, layout_kernel vector, strided_fn convert, int threads,
                Run&& run) {
  if (!is_4d_layout(from) || !is_4d_layout(to)) no_layout_transform(from, to, shape);
  const layout_plan plan = plan_layout(from, se, dst, to, de, shape, threads);
  const layout_job& job = plan.job;
  if (job.items() == 0) return;
  if (job.hw == 1) {
    if (job.s.n_stride == job.c && job.d.n_stride == job.c) {
      run(src, dst, job.n * job.c);
      return;
    }
    for (std::int64_t i = 0; i < job.n; ++i) {
      std::byte* d = dst + std::size_t(i * job.d.n_stride) * de;
      run(src + std::size_t(i * job.s.n_stride) * se, d, job.c);
      std::memset(d + std::size_t(job.c) * de, 0, std::size_t(job.d.n_stride - job.c) * de);
    }
    return;
  }
  const strided_fn fill = copy_fn(de);
  parallel_for(job.items(), plan.threads, [&](std::int64_t begin, std::int64_t end) {
    if (vector != nullptr)
      vector(job, src, dst, begin, end);
    else
      run_layout_portable(job, src, se, dst, de, convert, fill, begin, end);
  });
}

}  // namespace detail

#if FLUIDK_DETAIL_KERNELS_HERE
FLUIDK_DETAIL_KERNELS_LINKAGE int transform_threads(std::size_t bytes, int threads) noexcept {
  return detail::threads_for(std::int64_t(bytes), threads);
}

// Copies a host tensor of logical dims `shape` ([N, C, H, W] for the 4-D layouts) from layout
// `from` to layout `to`, bit for bit, for elements of `elem_size` = 1, 2, 4 or 8 bytes. Blocked
// layouts pad C to a multiple of the block: padding lanes are written as zeros going in and
// dropped coming out. Every pair among NCHW, NHWC, nChw8c and nChw16c is one direct pass; the
// same layout on both sides is a plain copy (`any`, a wildcard rather than a memory order, only
// to itself). `threads` caps the OpenMP threads (0: OpenMP's default); a transform that moves
// under 512 KB (read + written) stays on the calling thread whatever is asked. src and dst must
// not overlap; src is only read.
// Throws fluidk::not_registered, before touching dst, for a pair it cannot transform or a shape
// of the wrong rank, naming both layouts and the shape.
FLUIDK_DETAIL_KERNELS_LINKAGE void reorder(const std::byte* src, data_layout from, std::byte* dst,
                                           data_layout to, const dims& shape, std::size_t elem_size,
                                           int threads) {
  detail::check_elem_size(elem_size);
  if (from == to) {
    const std::int64_t n = detail::storage_elements(from, shape, from, to);
    detail::copy_bytes(src, dst, std::size_t(n) * elem_size, threads);
    return;
  }
  detail::run_layout(src, from, elem_size, dst, to, elem_size, shape, detail::vector_layout_copy(elem_size),
                     detail::copy_fn(elem_size), threads,
                     [&](const std::byte* s, std::byte* d, std::int64_t count) {
                       detail::copy_bytes(s, d, std::size_t(count) * elem_size, threads);
                     });
}

// Converts n elements from `from` to `to` (every pair of the 10 data types; the same type is a
// copy). The conversion of each pair is defined in detail::convert: C++ conversions for
// integers, round to nearest even for floating-point targets with NaN and infinities kept, and
// for floating -> integer truncation that saturates at the target's range with NaN -> 0 (where
// C++ would be undefined: fluidk's defined choice). Every instruction-set level gives the same
// bytes.
FLUIDK_DETAIL_KERNELS_LINKAGE void cast(const std::byte* src, data_type from, std::byte* dst, data_type to,
                                        std::size_t n, int threads) {
  if (n == 0) return;
  if (from == to) {
    detail::copy_bytes(src, dst, n * size_of(from), threads);
    return;
  }
  const std::int64_t se = std::int64_t(size_of(from)), de = std::int64_t(size_of(to));
  const std::int64_t count = std::int64_t(n);
  // Pieces of 64 elements keep each thread's range starting on a cache line of the target.
  constexpr std::int64_t piece = 64;
  const std::int64_t pieces = (count + piece - 1) / piece;
  const int nt = int(std::min<std::int64_t>(detail::threads_for(count * (se + de), threads), pieces));
  const detail::range_kernel vector = detail::vector_cast(from, to, n * std::size_t(se) / std::size_t(nt));
  const detail::strided_fn convert = detail::convert_fn(from, to);
  const bool stream = active_store_policy(n * std::size_t(de)) == store_policy::streaming;
  detail::parallel_for(pieces, nt, [&](std::int64_t begin, std::int64_t end) {
    const std::int64_t b = begin * piece, e = std::min(count, end * piece);
    if (vector != nullptr)
      vector(src, dst, b, e, stream);
    else
      convert(src + b * se, 1, dst + b * de, 1, e - b);
  });
}

// reorder and cast in one pass over the data, with no intermediate buffer: each element is
// read once in `from` layout and `from_type` and written once in `to` layout and `to_type`.
// Same semantics as reorder followed by cast (byte for byte); either step may be the identity.
FLUIDK_DETAIL_KERNELS_LINKAGE void reorder_cast(const std::byte* src, data_layout from, data_type from_type,
                                                std::byte* dst, data_layout to, data_type to_type,
                                                const dims& shape, int threads) {
  if (from_type == to_type) {
    reorder(src, from, dst, to, shape, size_of(from_type), threads);
    return;
  }
  if (from == to) {
    const std::int64_t n = detail::storage_elements(from, shape, from, to);
    cast(src, from_type, dst, to_type, std::size_t(n), threads);
    return;
  }
  detail::run_layout(src, from, size_of(from_type), dst, to, size_of(to_type), shape,
                     detail::vector_layout_convert(from_type, to_type),
                     detail::convert_fn(from_type, to_type), threads,
                     [&](const std::byte* s, std::byte* d, std::int64_t count) {
                       cast(s, from_type, d, to_type, std::size_t(count), threads);
                     });
}
#endif  // FLUIDK_DETAIL_KERNELS_HERE

}  // namespace fluidk::transforms::cpu_kernels

#endif  // FLUIDK_TRANSFORMS_CPU_KERNELS_HPP
