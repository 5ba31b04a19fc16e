// How the CPU transform kernels write: through the caches, or streaming (non-temporal stores
// that bypass them), chosen from the size of what a transform writes against the cache sizes
// detected once per process, and overridable, as the instruction-set level is, so that tests
// and benchmarks can run every path on one machine.
#pragma once

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include "fluidk/error.hpp"
#include "fluidk/transforms/detail/cpu_isa.hpp"

namespace fluidk::transforms::cpu_kernels {

// The data caches one core sees, in bytes: its L1 data cache and L2, and the last level, shared
// by `llc_sharing` logical processors (from a CPUID cache leaf, the most that may share it; 0
// where the source does not say). `source` says where the sizes came from.
struct cache_sizes {
  std::size_t l1d = 0, l2 = 0, llc = 0;
  unsigned llc_sharing = 0;
  std::string_view source = "none";
};

namespace detail {
inline constexpr std::size_t kib = std::size_t(1) << 10, mib = std::size_t(1) << 20;

// The last level where no source gives a plausible one: a common server core's share.
inline constexpr std::size_t assumed_llc = 32 * mib;
// The sizes where no source gives any: a common server core's, so that large transforms still
// stream.
inline constexpr cache_sizes assumed_caches{32 * kib, mib, assumed_llc, 0, "assumed"};

// The largest L3 one core of an AMD Zen sees, its CCX's (Zen and Zen+ 8 MiB, Zen 2 16 MiB; from
// Zen 3 on the CCX is the CCD, 32 MiB); 0 before Zen and on other vendors' CPUs. AMD's legacy
// leaf 0x80000006 gives the whole package's L3 (384 MiB on a Zen 5 of 12 CCDs whose topology
// leaf gives 32), and so does the cache folder Linux builds from it where the topology leaf is
// hidden (arch/x86/kernel/cpu/cacheinfo.c), while the store policy wants what one core's CCX
// holds. (The bound errs low on 3D V-Cache parts, 96 MiB a CCD: they stream from 4 MiB rather
// than 12.)
inline std::size_t zen_ccx_l3(amd_cpu cpu) noexcept {
  if (cpu.family == 0x17) return (cpu.model < 0x30 ? 8 : 16) * mib;
  return cpu.family >= 0x19 ? 32 * mib : 0;
}

// The most a source's last level may be, and what stands for it otherwise, with the source's
// name then.
struct llc_bound {
  std::size_t most, instead;
  std::string_view instead_source;
};

// The one check of every source's sizes (a hypervisor's registers reach Linux's cache folder
// too): L1d from 4 KiB to 1 MiB, and L2 from 64 KiB to 64 MiB and above L1d, else the source
// gives no answer; the last level from L2 (a CPU without an L3: its L2) to `bound.most`, else it
// is `bound.instead`, and the source says so.
inline bool believed(cache_sizes& out, const llc_bound& bound) noexcept {
  if (out.l1d < 4 * kib || out.l1d > mib || out.l2 < 64 * kib || out.l2 > 64 * mib || out.l2 <= out.l1d)
    return false;
  if (out.llc < out.l2 || out.llc > bound.most) {
    out.llc = bound.instead;
    out.llc_sharing = 0;
    out.source = bound.instead_source;
  }
  return true;
}

// The bound of a source of `cpu` that gives the package's L3 (AMD's legacy leaf, and Linux's
// folder without the topology leaf): one CCX's on a Zen (`by_family` names the source then), 1
// GiB elsewhere, above which the size is assumed (`assumed`).
inline llc_bound package_llc_bound(amd_cpu cpu, std::string_view by_family,
                                   std::string_view assumed) noexcept {
  const std::size_t ccx = zen_ccx_l3(cpu);
  return ccx != 0 ? llc_bound{ccx, ccx, by_family} : llc_bound{1024 * mib, assumed_llc, assumed};
}

// The sizes a CPUID cache leaf describes (leaf 4 on Intel, 0x8000001D on AMD: the same
// format), subleaf by subleaf until the null type; each level's EAX[25:14] + 1 is the most
// logical processors that may share it.
inline bool caches_from_cpuid(cache_sizes& out) noexcept {
#if FLUIDK_DETAIL_X86_KERNELS
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  unsigned leaf = 4;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool amd = ebx == amd_vendor_ebx;
  if (amd) {
    // Topology extensions (CPUID 0x80000001 ECX bit 22) say whether 0x8000001D is there.
    if (__get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) == 0 || (ecx & (1u << 22)) == 0) return false;
    leaf = 0x8000001D;
  } else if (eax < 4) {
    return false;
  }
  bool any = false;
  for (unsigned sub = 0; sub < 16; ++sub) {
    __cpuid_count(leaf, sub, eax, ebx, ecx, edx);
    const unsigned type = eax & 0x1F, level = (eax >> 5) & 0x7;
    if (type == 0) break;
    if (type != 1 && type != 3) continue;  // data or unified
    const std::size_t size = std::size_t((ebx >> 22) + 1) * (((ebx >> 12) & 0x3FF) + 1) *
                             ((ebx & 0xFFF) + 1) * (std::size_t(ecx) + 1);
    any = true;
    if (level == 1) out.l1d = size;
    if (level == 2) out.l2 = size;
    if (level >= 2 && size >= out.llc) {
      out.llc = size;
      out.llc_sharing = ((eax >> 14) & 0xFFF) + 1;
    }
  }
  if (!any) return false;
  out.source = amd ? "CPUID 0x8000001D" : "CPUID 4";
  return believed(out,
                  {1024 * mib, assumed_llc, amd ? "CPUID 0x8000001D, L3 assumed" : "CPUID 4, L3 assumed"});
#else
  (void)out;
  return false;
#endif
}

// How many logical processors a Linux CPU list names ("0-1,4-5,8": 5); 0 if it is not one.
inline unsigned cpu_list_count(std::string_view list) noexcept {
  const char* const end = list.data() + list.size();
  unsigned count = 0;
  for (const char* p = list.data();; ++p) {  // past each ','
    unsigned first = 0, last = 0;
    auto read = std::from_chars(p, end, first);
    last = first;
    if (read.ec == std::errc() && read.ptr != end && *read.ptr == '-')
      read = std::from_chars(read.ptr + 1, end, last);
    if (read.ec != std::errc() || last < first) return 0;
    count += last - first + 1;
    p = read.ptr;
    if (p == end) return count;
    if (*p != ',') return 0;
  }
}

// What Linux reports in /sys/devices/system/cpu/cpu0/cache/index*/ ("32K", "1024K", "32M"), and
// how many processors share the last level (shared_cpu_list); its L3 bounded as `cpu`'s
// package's (package_llc_bound): it is reached only where CPUID's cache leaf is not there, and
// then Linux built it from the legacy leaves on AMD.
inline bool caches_from_sysfs(cache_sizes& out, amd_cpu cpu) {
  bool any = false;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int level = 0;
    std::string type, size_text;
    if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size_text) || size_text.empty())
      continue;
    if (type != "Data" && type != "Unified") continue;
    std::size_t size = 0;
    const char* const suffix =
        std::from_chars(size_text.data(), size_text.data() + size_text.size(), size).ptr;
    if (suffix != size_text.data() + size_text.size())
      size <<= *suffix == 'K' ? 10 : *suffix == 'M' ? 20 : *suffix == 'G' ? 30 : 0;
    any = true;
    if (level == 1) out.l1d = size;
    if (level == 2) out.l2 = size;
    if (level >= 2 && size >= out.llc) {
      out.llc = size;
      std::ifstream shared_file(dir + "shared_cpu_list");
      std::string shared;
      out.llc_sharing = shared_file >> shared ? cpu_list_count(shared) : 0;
    }
  }
  if (!any) return false;
  out.source = "sysfs";
  return believed(out, package_llc_bound(cpu, "sysfs, L3 of one CCX by the family", "sysfs, L3 assumed"));
}

// The sizes AMD's legacy leaves give: 0x80000005 ECX[31:24], the L1 data cache in KiB;
// 0x80000006 ECX[31:16], the L2 in KiB, and EDX[31:18], the package's L3 in 512 KiB units.
// Hypervisors that hide the topology leaf 0x8000001D pass these through. The L3 is bounded as
// the package's (package_llc_bound): on a Zen it is at most one CCX's (an L3 field of 384 or 508
// MiB on a Zen 5, whose CCD has 32, gives 32), elsewhere an implausible one is assumed.
inline bool caches_from_amd_legacy(unsigned ecx5, unsigned ecx6, unsigned edx6, amd_cpu cpu,
                                   cache_sizes& out) noexcept {
  out = {std::size_t(ecx5 >> 24) * kib, std::size_t(ecx6 >> 16) * kib, std::size_t(edx6 >> 18) * 512 * kib, 0,
         "CPUID 0x80000005/6"};
  // An L3 no larger than L2 is no L3.
  if (out.llc <= out.l2) out.llc = 0;
  return believed(out, package_llc_bound(cpu, "CPUID 0x80000005/6, L3 of one CCX by the family",
                                         "CPUID 0x80000005/6, L3 assumed"));
}

inline bool caches_from_amd_legacy_cpuid(cache_sizes& out, amd_cpu cpu) noexcept {
#if FLUIDK_DETAIL_X86_KERNELS
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (cpu.family == 0) return false;
  if (__get_cpuid(0x80000000, &eax, &ebx, &ecx, &edx) == 0 || eax < 0x80000006) return false;
  __get_cpuid(0x80000005, &eax, &ebx, &ecx, &edx);
  const unsigned ecx5 = ecx;
  __get_cpuid(0x80000006, &eax, &ebx, &ecx, &edx);
  return caches_from_amd_legacy(ecx5, ecx, edx, cpu, out);
#else
  (void)out;
  (void)cpu;
  return false;
#endif
}

// The first answer of: CPUID's cache leaves (4, or 0x8000001D on AMD), Linux's sysfs, AMD's
// legacy leaves, and last the sizes of a common server core, "assumed".
inline cache_sizes detect_caches() {
  const amd_cpu cpu = detect_amd_cpu();
  cache_sizes out;
  if (caches_from_cpuid(out)) return out;
  out = {};
  try {
    if (caches_from_sysfs(out, cpu)) return out;
  } catch (...) {
  }
  out = {};
  if (caches_from_amd_legacy_cpuid(out, cpu)) return out;
  return assumed_caches;
}
}  // namespace detail

// The caches of this machine, detected on first use.
inline const cache_sizes& detected_caches() noexcept {
  static const cache_sizes sizes = [] {
    try {
      return detail::detect_caches();
    } catch (...) {
      return detail::assumed_caches;
    }
  }();
  return sizes;
}

// cached: ordinary stores (the result stays in the caches for the next kernel), the hardware
//   prefetchers bringing the lines in (and software for NCHW -> nChw8c's source rows beyond
//   the L2: reads_rows_ahead).
// prefetched: ordinary stores, the layout transforms also prefetching in software the target
//   lines and source rows ahead of use. Never chosen automatically: on AMD Zen 4 it is 10-25%
//   slower than `cached` at every size measured (the hardware prefetchers keep up, and the
//   prefetches take load slots), on Zen 3 15-28% (NCHW <-> nChw8c and NCHW -> NHWC of float,
//   196 KiB to 3 MiB); on Intel Sapphire Rapids an earlier version of the kernels
//   was 3-6% faster with it, and on an Intel Xeon of family 6, model 207 NCHW <-> nChw8c of
//   float from the L3 are 3-4% faster with it but 8-35% slower from the L2. Force it where a
//   measurement says it pays.
// streaming: non-temporal stores where the target allows them (aligned lines), then a fence.
enum class store_policy : std::uint8_t { cached, prefetched, streaming };

constexpr std::string_view name_of(store_policy p) noexcept {
  switch (p) {
    case store_policy::cached:
      return "cached";
    case store_policy::prefetched:
      return "prefetched";
    case store_policy::streaming:
      return "streaming";
  }
  return "unknown";
}

// The automatic choice for a transform that writes `bytes`: streaming once the result is
// more than an eighth of the last-level cache (it would evict what the next kernel reads, and
// be evicted itself before it is read), else cached. Measured on AMD EPYC (Zen 4, 32 MiB L3): a
// 3 MiB result is written 1.1-1.6x faster through the caches, a 12 MiB one 1.4-3.8x faster
// streaming.
inline store_policy automatic_store_policy(std::size_t bytes) noexcept {
  return bytes > detected_caches().llc / 8 ? store_policy::streaming : store_policy::cached;
}

// Whether a layout transform whose threads each read and write `bytes_per_thread` through the
// caches prefetches its planar source rows a few lines at a time (layout_job::read_ahead; the
// AVX-512 engine's NCHW -> nChw8c of 4-byte elements, and NCHW -> NHWC of 8 channels, the same
// transform: gather8_lines in cpu_simd.ipp): where that is more than the L2 holds, so that the
// rows come from the L3. Measured on Zen 4: 5-10% faster from the L3, 9% slower from the L2 and
// streamed. (NCHW -> NHWC, sixteen rows at a time, was 10-15% slower with it from the L3, and
// nChw8c -> NCHW prefetching its eight target rows so no faster: neither reads ahead.)
inline bool reads_rows_ahead(store_policy policy, std::size_t bytes_per_thread) noexcept {
  return policy == store_policy::cached && bytes_per_thread > detected_caches().l2;
}

// Whether an nChw8c -> planar transform into 2-byte elements (the fused float -> float16 or
// bfloat16 pass) prefetches its source in software, a few kilobytes ahead of its reads
// (cpu_simd.ipp's scatter_chunk), on AMD Zen 5 (family 0x1A), whose hardware prefetchers alone
// left the one stream it reads behind: `streams` (its stores streamed), where what it reads and
// writes is more than the last-level cache holds; through the caches, where each thread reads
// more than its L2 holds and the whole fits in the last-level cache. Measured there, one thread,
// the fused nChw8c float -> NCHW float16 pass, GB/s read + written: streamed, medians of 3-5
// rounds, [16, 64, 112, 112] 43.5 -> 56.6, [64, 64, 112, 112] 36.5 -> 48.0 (memcpy of the same bytes
// 52-53 and 41-42), and from the L3 ([4, 64, 112, 112]) 1-2% slower, so not there; through the
// caches, transforms_bench's medians of 5, [1, 64, 112, 112] (3 MiB read) 85.8 -> 97.4 (memcpy 107),
// against 46.4 for the reorder and the cast one after the other. Other CPUs were not measured with
// it.
inline bool reads_source_ahead(store_policy policy, bool streams, std::size_t bytes,
                               std::size_t bytes_per_thread) noexcept {
  if (active_amd_family() < zen5_family) return false;
  if (streams) return bytes > detected_caches().llc;  // only the streaming policy streams
  return policy == store_policy::cached && bytes_per_thread > detected_caches().l2 &&
         bytes <= detected_caches().llc;
}

// How far ahead of its reads a cast through the caches prefetches its source, in bytes, where it
// reads it from the L3 (cast_reads_ahead).
inline constexpr int cast_read_ahead = 1024;

// Whether float -> float16 and float -> bfloat16 through the caches prefetch their source
// (cast_read_ahead bytes ahead), given what each thread reads: where that is more than the L2
// holds, on AMD Zen 5 (family 0x1A), whose hardware prefetchers left those reads from the L3
// behind. Measured there, one thread, GB/s read + written, medians of 41 rounds, without -> with:
// [1, 64, 112, 112] (3 MiB read) float16 102.6-104.0 -> 127.2-130.7, bfloat16 102.9-104.9 ->
// 130.3-132.9 (memcpy of the same bytes 106-118); [2, 64, 112, 112] float16 94.4-94.7 ->
// 107.8-108.3, bfloat16 93.7-94.8 -> 105.1-108.3 (memcpy 98-121). Streamed, the casts do not read
// ahead: what they write is then more than an eighth of the last-level cache, and from memory the
// prefetches were 9-14% slower.
inline bool cast_reads_ahead(std::size_t read_per_thread) noexcept {
  return read_per_thread > detected_caches().l2 && active_amd_family() >= zen5_family;
}

namespace detail {
inline forced_choice store_policy_override;
}  // namespace detail

// The policy the kernels use for a transform that writes `bytes`: the forced one if any, else
// the automatic one.
inline store_policy active_store_policy(std::size_t bytes) noexcept {
  const int forced = detail::store_policy_override.get();
  return forced < 0 ? automatic_store_policy(bytes) : static_cast<store_policy>(forced);
}

// The policy of a layout transform of `se`-byte into `de`-byte elements that writes `written`
// bytes, reads and writes `bytes`, on `threads` threads: active_store_policy's, except that on
// AMD Zen 5 (family 0x1A) a float transform on several threads whose reads and writes fit in the
// last-level cache stays in the caches where the automatic choice would stream. Streamed, two
// threads wrote there no faster than one; through the shared L3 they wrote twice as fast. Measured
// there, float, GB/s read + written, medians of 15 (cached / streamed): [4, 64, 112, 112] (12.25
// MiB written), two threads: NCHW -> nChw8c 119.3 / 86.9, nChw8c -> NCHW 117.3 / 87.2, NCHW -> NHWC
// 129.0 / 88.9 (oneDNN's reorder NCHW -> nChw8c 168); one thread: 61.5 / 84.4, 63.7 / 86.9, 66.8 /
// 88.8 (it streams). [16, 64, 112, 112] (49 MiB, more than the L3), two threads: 46.6 / 66.4, 44.8 /
// 58.3, 88.7 / 110.1 (it streams). The fused float -> float16 pass and the float -> float16 cast
// stream faster on two threads too (at [4, 64, 112, 112] 141.8 / 184.0 and 190.7 / 243.3), and keep
// the automatic choice; so does float -> bfloat16, though it streamed slower there (179.7 / 131.6,
// not explained: its 512-bit blocks stream whole lines as float16's do).
inline store_policy active_layout_store_policy(std::size_t written, std::size_t se, std::size_t de,
                                               std::size_t bytes, int threads) noexcept {
  const int forced = detail::store_policy_override.get();
  if (forced >= 0) return static_cast<store_policy>(forced);
  const store_policy policy = automatic_store_policy(written);
  if (policy == store_policy::streaming && threads > 1 && se == 4 && de == 4 &&
      bytes <= detected_caches().llc && active_amd_family() >= zen5_family)
    return store_policy::cached;
  return policy;
}

// Makes every transform use `policy` from now on, process-wide (for tests and benchmarks:
// the bytes written are the same either way).
inline void force_store_policy(store_policy policy) noexcept {
  detail::store_policy_override.set(static_cast<int>(policy));
}
// Back to the automatic choice.
inline void reset_store_policy() noexcept { detail::store_policy_override.set(-1); }

// Forces a policy for the lifetime of the scope, then restores the previous choice.
class store_policy_scope {
 public:
  explicit store_policy_scope(store_policy policy) noexcept
      : forced_(detail::store_policy_override, static_cast<int>(policy)) {}

 private:
  detail::forced_scope forced_;
};

// How a transform from a planar layout (NCHW) into NHWC walks an image's pixels. Each step moves
// one to four chunks of 8 channels of 8 pixels; a target pixel's channels lie together, so one
// pass of a chunk over many pixels writes the target at a stride of C elements.
//   long_runs: a chunk group over all of an image's pixels before the next group (4-byte
//     elements), or over blocks of pixels whose rows and lines fit in L2 (about 512 KB; other
//     sizes). Few source rows in flight, each read a long way. On AMD Zen 4 (64 channels of
//     float, 3 MiB in the L3) this runs at 0.87x memcpy; all four chunk groups of 8 pixels a
//     step (64 source rows in flight) ran at 0.54-0.59x there, short blocks at 0.63x (and
//     streamed, at 12 and 49 MiB, 0.42-0.55x against long runs' 1.04-1.63x).
//   short_blocks: blocks of 32 pixels (an image's last block also takes the pixels left), every
//     chunk group of a block before the next block, so that the target is written a few lines
//     at a time in order. On Intel Xeon (family 6, model 207: 2 MiB L2, the same 3 MiB case) a
//     pass over every 4th line of the target runs at 0.48x memcpy: the L2's streamer brings in
//     the lines the pass skips and loses them before the next pass. Short blocks run at
//     0.84-0.86x there (the bench, above L2).
// The walk also says how a streamed transform reads NHWC: on the cores that take long runs, in
// blocks of 1024 pixels, also into a planar target; elsewhere in blocks of 64, and a planar
// target through the caches (make_layout_job in cpu_layout.hpp). And whether nChw8c -> NCHW of
// 4-byte elements stores rows that do not start on a line a line at a time: on the cores of short
// blocks (layout_job::line_rows; on the Intel Xeon above, [1, 64, 14, 14] 22 -> 42-53 GB/s, one
// thread), not on Zen 4, where it ran 5-10% slower.
enum class nhwc_walk : std::uint8_t { long_runs, short_blocks };

constexpr std::string_view name_of(nhwc_walk w) noexcept {
  return w == nhwc_walk::long_runs ? "long runs" : "short blocks";
}

namespace detail {
// AMD's Zen cores (family 0x17 and later) take long runs; other CPUs short blocks. Measured on
// Zen 4, on Zen 3 (family 0x19, model 1: NCHW -> NHWC of 64 channels of float, one thread, long
// runs against short blocks 46.6 against 32.4 GB/s at 196 KiB, 42.1 against 28.6 at 3 MiB), on
// Zen 1 (family 0x17, model 1: 38.8 against 29.1 at 196 KiB, 34.7 against 25.5 at 784 KiB) and on
// the Intel Xeon above.
inline nhwc_walk detect_nhwc_walk() noexcept {
  return detected_amd_family() >= 0x17 ? nhwc_walk::long_runs : nhwc_walk::short_blocks;
}

inline forced_choice nhwc_walk_override;
}  // namespace detail

// Whether streamed planar -> NHWC of 4-byte elements moves two groups of chunks a step (each
// pixel's two lines written back to back: make_layout_job's streamed_pair_block and
// memory_pair_block) from a pixel of 256 bytes on (64 channels of float), from the last-level
// cache and from memory alike; elsewhere from 512 bytes, and from the last-level cache only. On
// AMD Zen 5 (family 0x1A) a streamed pass that writes one line of every pixel of 256 bytes or more
// ran at about half the speed of one that writes two lines back to back. Measured there, float,
// one thread, GB/s read + written, medians of 3-7 rounds, one group -> two a step (memcpy): from
// the L3 [4, 64, 112, 112] 51.5 -> 89.5 (95.3); from memory [16, 64, 112, 112] 47.3 -> 54.2
// (49.8), [64, 64, 112, 112] 43.6 -> 43.6 (41.5), [16, 128, 56, 56] 26.2 -> 49.6 (58.2), [16, 256,
// 56, 56] 24.7 -> 47.1 (50.3), [64, 512, 14, 14] 18.0 -> 48.9 (61.1), [64, 2048, 7, 7] 44.2 ->
// 55.8 (59.1). With a pixel of 128 bytes (32 channels) two groups were no faster ([16, 32, 112,
// 112] 83.5 -> 80.2). On Zen 4 the one-group pass was as fast or faster from memory
// (make_layout_job).
inline bool streams_nhwc_pairs_widely() noexcept { return active_amd_family() >= zen5_family; }

// This CPU's walk, detected on first use.
inline nhwc_walk detected_nhwc_walk() noexcept {
  static const nhwc_walk value = detail::detect_nhwc_walk();
  return value;
}

// The walk the layout transforms use now: the forced one if any, else the detected one.
inline nhwc_walk active_nhwc_walk() noexcept {
  const int forced = detail::nhwc_walk_override.get();
  return forced < 0 ? detected_nhwc_walk() : static_cast<nhwc_walk>(forced);
}

// Forces a walk for the lifetime of the scope (for tests and benchmarks: the bytes are the same
// either way), then restores the previous choice.
class nhwc_walk_scope {
 public:
  explicit nhwc_walk_scope(nhwc_walk walk) noexcept
      : forced_(detail::nhwc_walk_override, static_cast<int>(walk)) {}

 private:
  detail::forced_scope forced_;
};

}  // namespace fluidk::transforms::cpu_kernels
