// How the CPU kernels cut a 4-D layout transform into independent pieces of work, how those
// pieces are spread over OpenMP threads, and the portable (type-erased, scalar) engine that
// runs them; the vector engines in cpu_simd.ipp run the same pieces faster.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fluidk/devices/onednn_tags.hpp"
#include "fluidk/layout.hpp"
#include "fluidk/transforms/detail/cpu_convert.hpp"
#include "fluidk/transforms/detail/cpu_memory.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace fluidk::transforms::cpu_kernels::detail {

// ---- Threads -------------------------------------------------------------------------------

// Below this many bytes moved (read + written) a transform stays on the calling thread: waking
// a second thread and joining it costs a few microseconds, what ~100 KB take to move on one
// core. Measured here (nchw -> nChw8c, 2 threads): even at ~400 KB, 1.2x faster at 512 KB,
// 1.6x at 1 MB.
inline constexpr std::int64_t parallel_min_bytes = std::int64_t{512} << 10;

// The number of threads for a transform that moves `bytes`; `requested` > 0 caps it (the
// benchmarks ask for exactly 1 or 2), 0 means OpenMP's default. 1 without OpenMP.
inline int threads_for(std::int64_t bytes, int requested) noexcept {
#ifdef _OPENMP
  if (bytes < parallel_min_bytes || omp_in_parallel()) return 1;
  return std::max(1, requested > 0 ? requested : omp_get_max_threads());
#else
  (void)bytes;
  (void)requested;
  return 1;
#endif
}

// Runs fn(begin, end) over [0, items) on `threads` threads, each taking one contiguous range so
// that each thread streams through its own part of memory.
template <class Fn>
void parallel_for(std::int64_t items, int threads, Fn&& fn) {
  if (items <= 0) return;
#ifdef _OPENMP
  const int nt = static_cast<int>(std::min<std::int64_t>(threads, items));
  if (nt > 1) {
#pragma omp parallel num_threads(nt)
    {
      const std::int64_t t = omp_get_thread_num(), count = omp_get_num_threads();
      const std::int64_t begin = items * t / count, end = items * (t + 1) / count;
      if (begin < end) fn(begin, end);
    }
    return;
  }
#else
  (void)threads;
#endif
  fn(std::int64_t{0}, items);
}

// ---- Layout transforms as pieces ---------------------------------------------------------------

// Every 4-D layout here stores, for image n and channel chunk q (channels 8q .. 8q+7), the chunk's
// elements at offset chunk(n, q) + pixel * ps + channel_in_chunk * cs:
//   NCHW:    ps = 1, cs = H*W   (a chunk is 8 rows of pixels)
//   NHWC:    ps = C, cs = 1     (a chunk is 8 adjacent channels of each pixel)
//   nChw8c / nChw16c: ps = block, cs = 1, the chunk inside its block.
// So every pair of layouts is a loop over (n, pixel range, q) of one of three 8-channel moves:
// planar -> channels-together (an 8x8 transpose per 8 pixels), the reverse, or a copy of 8
// adjacent channels per pixel. One decomposition serves every pair, direct, with no temporary.
enum class side_kind : std::uint8_t { planar, channels_last, blocked };

struct layout_side {
  side_kind kind = side_kind::planar;
  std::int64_t block = 1;     // 8 or 16 for blocked layouts
  std::int64_t n_stride = 0;  // elements per image, padding included
  std::int64_t ps = 1, cs = 1;
  std::int64_t hw = 0;

  constexpr std::int64_t chunk(std::int64_t n, std::int64_t q) const noexcept {
    switch (kind) {
      case side_kind::planar:
        return n * n_stride + q * 8 * hw;
      case side_kind::channels_last:
        return n * n_stride + q * 8;
      case side_kind::blocked:
        // Blocks of 8 or 16 channels: one chunk or two a block. (A division per chunk cost NCHW
        // -> nChw8c of [1, 2048, 2, 2] float 17% on Zen 4.)
        return n * n_stride + (block == 8 ? q * 8 * hw : (q / 2) * hw * 16 + (q % 2) * 8);
    }
    return 0;
  }
};

// The layouts the CPU kernels reorder: the core's NCHW and NHWC and oneDNN's blocked ones.
inline constexpr data_layout layouts[] = {data_layout::nchw, data_layout::nhwc,
                                          data_layout_of<layout::nChw8c>, data_layout_of<layout::nChw16c>};
constexpr bool is_4d_layout(data_layout l) noexcept {
  for (const data_layout known : layouts)
    if (l == known) return true;
  return false;
}

inline layout_side side_of(data_layout l, std::int64_t c, std::int64_t hw) noexcept {
  layout_side s;
  s.hw = hw;
  if (l == data_layout::nhwc) {
    s.kind = side_kind::channels_last;
    s.n_stride = c * hw;
    s.ps = c;
  } else if (l == data_layout_of<layout::nChw8c> || l == data_layout_of<layout::nChw16c>) {
    s.kind = side_kind::blocked;
    s.block = l.block_size();
    s.n_stride = (c + s.block - 1) / s.block * s.block * hw;
    s.ps = s.block;
  } else {
    s.kind = side_kind::planar;
    s.n_stride = c * hw;
    s.cs = hw;
  }
  return s;
}

struct layout_job {
  layout_side s, d;
  std::int64_t n = 0, c = 0, hw = 0;
  std::int64_t q_count = 0;   // channel chunks written: the padded ones too for a blocked target
  bool d_pads = false;        // the target is blocked: each chunk gets 8 lanes, zeros past C
  bool s_padded = false;      // the source is blocked: a chunk's 8 lanes may be read past C
  std::int64_t p_block = 0;   // pixels per piece of work (a multiple of 8, or all of them)
  std::int64_t p_blocks = 0;  // pieces per image: pieces_of(hw, p_block)
  std::int64_t group = 1;     // planar -> channels together: full chunks moved together (1 to 8)
  // Channels together -> planar, bit copies of 2- and 4-byte elements through the caches: pairs
  // of full chunks that lie together in the source moved in each step of 8 pixels
  // (make_layout_job).
  std::int64_t scatter_pairs = 1;
  // Planar -> NHWC on the cores that take long runs, with many channels (make_layout_job): two
  // groups a step, over blocks of this many pixels; 0: a group at a time over all pixels.
  // streamed_pair_block and memory_pair_block: the same where the job streams, what it reads and
  // writes fitting in the last-level cache or not (set_streaming).
  std::int64_t pair_block = 0, streamed_pair_block = 0, memory_pair_block = 0;
  bool prefetch = false;  // prefetch in software ahead of the hardware (store_policy::prefetched)
  bool stream = false;    // write with non-temporal stores (every vector store aligned)
  // From NHWC on cores that take long runs (make_layout_job): pixels per piece when streaming,
  // and a planar target may stream; 0 elsewhere.
  std::int64_t streamed_block = 0;
  bool read_ahead = false;  // prefetch planar source rows in bursts (reads_rows_ahead)
  // Streamed nChw8c -> planar of 2-byte targets from memory: the source prefetched in software
  // (reads_source_ahead).
  bool source_ahead = false;
  // nChw8c -> planar of 4-byte elements through the caches, on the cores whose walk is short
  // blocks: rows that do not start on a line are stored a line at a time (cpu_simd.ipp's
  // scatter8_aligned), since a vector store across two lines costs those cores a second store.
  bool line_rows = false;

  std::int64_t items() const noexcept { return n * p_blocks; }

  // Piece `item`: pixels [p0, p1) of image n. Each piece of an image has p_block pixels but its
  // last, which also takes the pixels left (fewer than p_block): so no piece of an image of at
  // least 8 pixels has fewer than 8, which the vector kernels move a step at a time (the pixels
  // left after the steps go as one more step over a piece's last 8: cpu_simd.ipp's run_layout).
  struct piece_range {
    std::int64_t n, p0, p1;
  };
  piece_range piece(std::int64_t item) const noexcept {
    const std::int64_t b = item % p_blocks, p0 = b * p_block;
    return {item / p_blocks, p0, b + 1 == p_blocks ? hw : p0 + p_block};
  }
  static constexpr std::int64_t pieces_of(std::int64_t hw, std::int64_t p_block) noexcept {
    // No division where one piece takes all (a small image): on Zen 5 the two 64-bit divisions
    // of make_layout_job were a quarter of planning NCHW -> NHWC of [1, 8, 2, 2].
    return hw == 0 ? 0 : hw < 2 * p_block ? 1 : hw / p_block;
  }
};

// The pieces of from -> to for logical dims [N, C, H, W] (both layouts 4-D and different).
// `wide_stream_pairs`: streams_nhwc_pairs_widely.
inline layout_job make_layout_job(data_layout from, data_layout to, std::int64_t n, std::int64_t c,
                                  std::int64_t hw, std::size_t se, std::size_t de,
                                  nhwc_walk walk = nhwc_walk::long_runs,
                                  bool wide_stream_pairs = false) noexcept {
  layout_job j;
  j.s = side_of(from, c, hw);
  j.d = side_of(to, c, hw);
  j.n = n;
  j.c = c;
  j.hw = hw;
  j.d_pads = j.d.kind == side_kind::blocked;
  j.s_padded = j.s.kind == side_kind::blocked;
  j.q_count = j.d_pads ? (c + j.d.block - 1) / j.d.block * j.d.block / 8 : (c + 7) / 8;
  const std::int64_t all = std::max<std::int64_t>(hw, 1);
  if (j.s.kind == side_kind::planar && j.d.kind == side_kind::channels_last) {
    // Planar -> NHWC of 4-byte elements: two chunks of every pixel at a time, which fill one
    // cache line of the target, so that each step writes whole lines and no target line is
    // touched twice. Measured on AMD Zen 4 (float, 64 channels, 3 MiB in the L3, cached stores):
    // one line a pixel 0.82-0.84x memcpy, two lines (32 source rows in flight) 0.63-0.70x, four
    // 0.54-0.59x; streamed at 49 MiB, one line 1.4x memcpy, two 1.0x. Such a pass never comes
    // back to its pixels: they go as one block (blocks of L2's size were 2-5% slower). Other
    // element sizes move four chunks at a time over a block of pixels whose source rows and
    // target lines stay in L2 (~512 KB): 2-byte elements written and 1-byte copies all four in
    // each step of 8 pixels (cpu_simd.ipp's gather_packed_chunks), 4-byte ones one chunk after the
    // other, the next chunks of the same pixels finding them in L2.
    // Where the CPU's walk is short blocks (nhwc_walk), every case goes 32 pixels at a time.
    if (se == 4 && de == 4 && c >= 16) {
      j.group = 2;
      j.p_block = all;
      // On the cores that take long runs, with many channels, two groups a step (32 channels:
      // each pixel's two lines written back to back, gather16_pairs_as in cpu_simd.ipp). With a
      // pixel 1 KiB or more long (256 channels), a group's pass over all pixels writes one line
      // every 1 KiB or more: lines of few L1 sets (of one where a pixel is a multiple of 4
      // KiB), one after the other. On Zen 4 such stores alone (a line of each of 48 pixels 8
      // KiB apart, then the next line of each) ran at 32 GB/s, against 113 with the pixels
      // 8256 bytes apart. Through the caches such jobs go two groups a step over blocks of 64
      // pixels. Streamed from the L3 (what is read and written fits in it), two groups a step
      // over all pixels from 128 channels on; from memory the one-group pass (16 source rows in
      // flight rather than 32) was as fast or faster. Zen 4, float, one thread, GB/s read +
      // written, medians of three runs in turn (memcpy): cached [1, 1024, 14, 14] 38.6 -> 45.9
      // (95), [1, 256, 56, 56] 54.9 -> 66.4 (95), [1, 2048, 7, 7] 38.8 -> 42.5 (103); streamed
      // from the L3 [8, 1024, 14, 14] 18.9 -> 43.6 (74), [4, 512, 28, 28] 29.2 -> 53.0 (74),
      // [8, 128, 56, 56] 29.1 -> 50.3 (51), [32, 2048, 7, 7] 27.3 -> 33.2 (51); from memory the
      // two-group pass had measured [64, 2048, 7, 7] 15.7 against 18.8, [16, 256, 56, 56] 24.9
      // against 26.6.
      // A pixel a multiple of 4 KiB (1024 channels or more of float) puts every pixel's lines in
      // one L1 set (a set of 12 ways on Zen 5, 8 on Zen 4), a multiple of 2 KiB in two: a block of
      // 64 pixels has its lines gone from L1 before the next pair of groups comes to write the
      // lines beside them. Such pixels go in blocks of 8 (4 KiB) or 16 (2 KiB), so that a block's
      // lines stay in L1 and each pixel is written as a run. AMD Zen 5 (EPYC, family 26), float,
      // one thread, us, blocks of 64 -> 8 -> 16: [1, 2048, 7, 7] 36.8 -> 14.3 -> 18.0, [1, 1024,
      // 14, 14] 60.3 -> 27.3 -> 37.3, [1, 1024, 7, 7] 17.2 -> 7.1, [4, 1024, 14, 14] 298 -> 96,
      // [16, 1024, 14, 14] 1232 -> 762; [1, 512, 14, 14] 20.2 -> 10.7 -> 9.6, [1, 512, 28, 28] 82.1
      // -> 50.4 -> 41.7, [1, 512, 56, 56] 326 -> 223 -> 180, [8, 512, 28, 28] 834 -> 747. Other
      // pixels keep 64: at 256 channels (1 KiB) 8 and 16 were mixed ([1, 256, 56, 56] 90.8 -> 106.6
      // -> 81.2, [1, 256, 28, 28] 23.7 -> 32.9 -> 24.4, [4, 256, 14, 14] 32.9 -> 19.2 -> 30.0), at
      // 384 and 768 slower ([1, 384, 28, 28] 25.6 -> 36.9 -> 33.4, [1, 768, 14, 14] 15.5 -> 18.8 ->
      // 16.6).
      if (walk == nhwc_walk::long_runs) {
        const std::int64_t pixel = c * std::int64_t(de);
        if (pixel >= 1024) j.pair_block = pixel % 4096 == 0 ? 8 : pixel % 2048 == 0 ? 16 : 64;
        if (c * std::int64_t(de) >= 512) j.streamed_pair_block = all;
        // On AMD Zen 5, streamed from 256 bytes a pixel on, from memory too
        // (streams_nhwc_pairs_widely in cpu_memory.hpp, with the measurements).
        if (wide_stream_pairs && pixel >= 256) j.streamed_pair_block = j.memory_pair_block = all;
      }
    } else {
      j.group = c >= 32 ? 4 : c >= 16 ? 2 : 1;
      // 1-byte copies with 128 channels or more, a multiple of 64: eight chunks a step, a whole
      // line of each pixel (four wrote half of it, and the next group's pass came back for the
      // other half). Zen 4, one thread, GB/s read + written, four -> eight: [1, 2048, 7, 7] 22.2
      // -> 27.0, [1, 1024, 14, 14] 47.5 -> 52.3, [16, 128, 56, 56] 30.9 -> 37.3, [1, 256, 28,
      // 28] 60.3 -> 60.3; at 64 channels 52.2 -> 49.0 ([4, 64, 56, 56]), so not there.
      if (se == 1 && c >= 128 && c % 64 == 0) j.group = 8;
      j.p_block = all;
      if (all > 64) {
        const std::int64_t block =
            (std::int64_t{512} << 10) / std::max<std::int64_t>(1, c * std::int64_t(se + de));
        j.p_block = std::min(all, std::max<std::int64_t>(64, block / 8 * 8));
      }
      // 2-byte elements written with a pixel of 1 KiB or more (512 channels), on the cores that
      // take long runs, stream two groups a step (64 channels, two lines of each of 8 pixels)
      // over all pixels, from the last-level cache and from memory alike. Before, these went
      // through the caches (a group a step streamed, the pixels' lines fall in few L1 sets as
      // above: at 2048 channels 0.3-0.7x the cached speed). Zen 4, GB/s read + written, medians
      // of three runs in turn, cached -> two groups streamed:
      //   float -> float16, one thread: [16, 1024, 14, 14] 13.3 -> 25.4, [8, 512, 28, 28]
      //   13.8 -> 25.8, [24, 672, 14, 14] 17.9 -> 31.9, [16, 512, 28, 28] 11.6 -> 13.4,
      //   [32, 2048, 7, 7] 19.9 -> 28.2, [64, 2048, 7, 7] 11.5 -> 20.6; two threads 44.2 -> 65.8,
      //   45.2 -> 68.0, 54.8 -> 73.0, 23.1 -> 23.4, 53.2 -> 59.5, 22.8 -> 42.7;
      //   float -> bfloat16, one thread: 12.7 -> 13.1, 17.5 -> 16.0, 17.6 -> 22.2, 10.7 -> 8.5,
      //   17.1 -> 23.2, 12.0 -> 19.8;
      //   float16 copies, one thread: 37.9 -> 41.4, 38.2 -> 44.7, 40.8 -> 44.4, 11.2 -> 33.1,
      //   25.6 -> 29.5, 15.3 -> 28.0; two threads 81.6 -> 53.3, 83.9 -> 51.7, 88.0 -> 54.6,
      //   25.2 -> 48.1, 50.8 -> 49.0, 32.7 -> 48.5.
      // The copies' losses on two threads are the streaming policy's own trade (a benchmark
      // loop keeps a cached result in the L3; a program's next kernel finds it evicted): two
      // threads streamed at most 55 GB/s here, as NCHW -> nChw8c of float [8, 64, 56, 56] did
      // (cached in such a loop: 175).
      if (walk == nhwc_walk::long_runs && de == 2 && c * std::int64_t(de) >= 1024)
        j.streamed_pair_block = j.memory_pair_block = all;
    }
    if (walk == nhwc_walk::short_blocks) j.p_block = std::min<std::int64_t>(all, 32);
  } else if (j.s.kind == side_kind::planar ||
             (j.s.kind == side_kind::blocked && j.d.kind == side_kind::planar)) {
    // Planar <-> blocked moves whole contiguous planes: no pixel blocking. A planar source fills
    // a whole nChw16c block (one line of float) per pixel at a time.
    if (j.d.kind == side_kind::blocked) j.group = j.d.block / 8;
    j.p_block = all;
    j.line_rows = j.d.kind == side_kind::planar && walk == nhwc_walk::short_blocks;
  } else {
    // Gathering from NHWC (to planar or blocked) reads each pixel's channels a chunk at a time: a
    // block of pixels keeps those lines in L1 while all chunks of the block go by (so too
    // between blocked layouts and from a blocked layout into NHWC). From NHWC streamed, on
    // the cores that take long runs, blocks of 1024 pixels, and a planar target streams too
    // (set_streaming, streams_whole_lines): each chunk's rows are then written 4 KiB at a time
    // (of float) rather than 256 bytes. Measured on Zen 4, float, 64 channels, one thread, at
    // 12 and 49 MiB: NHWC -> NCHW 14-16 and 12 GB/s through the caches (0.33x and 0.48x
    // memcpy), streamed in blocks of 64 pixels 34 and 18, in blocks of 1024 38 and 25 (0.84x
    // and 0.81x); NHWC -> nChw8c (which streamed already) 21 -> 38 GB/s at 12 MiB. Through the
    // caches, blocks of 1024 were 5% slower at 3 MiB. On the Intel Xeon of nhwc_walk, NHWC ->
    // NCHW streamed in blocks of 64 ran at 0.4-0.7x the cached speed at 49 MiB, and blocks of
    // 1024 were not measured there: its cores keep the blocks of 64 and cached planar rows.
    j.p_block = 64;
    // A pixel of the NHWC side a multiple of 4 KiB (1024 channels of float) puts every pixel's
    // line of a chunk in one L1 set, and a block of 64 such pixels has its lines gone from L1
    // before the next chunk comes for them: on the cores that take long runs, copies of 4-byte
    // elements go 8 pixels a block there (into NCHW: below). Zen 4, one thread, GB/s read +
    // written, medians of three runs in turn, 64 -> 8 pixels, at [1, 1024, 14, 14], [1, 2048,
    // 7, 7], [8, 1024, 14, 14] (memcpy 94, 100, 75): NHWC -> nChw8c 48.2 -> 82.4, 46.6 -> 92.2,
    // (streamed: unchanged); NHWC -> nChw16c 44.8 -> 80.3, 47.1 -> 93.7; nChw8c -> NHWC 45.8 ->
    // 61.2, 51.4 -> 60.0, streamed 34.5 -> 49.6; nChw16c -> NHWC 47.1 -> 63.7, 53.9 -> 61.6,
    // 34.9 -> 48.6. At other pixel sizes, and for the other element sizes and ways, 8 pixels
    // measured slower (bytes 0.4-0.7x; float at 512 and 768 channels 0.74-0.92x), and blocked
    // <-> blocked keeps 64 too.
    const bool nhwc_side = j.s.kind == side_kind::channels_last || j.d.kind == side_kind::channels_last;
    if (walk == nhwc_walk::long_runs && nhwc_side && j.d.kind != side_kind::planar && se == 4 && de == 4 &&
        c * std::int64_t(se) % 4096 == 0)
      j.p_block = 8;
    // NHWC -> NCHW of 2- and 4-byte elements with 512 channels or more, a multiple of 128, on the
    // same cores: all pixels, 8 pairs of chunks (128 channels, whose rows lie together in the
    // target) a step of 8 pixels (scatter_line_chunks, scatter_packed_chunks), so that a
    // channel's row is written in one pass. Blocks of pixels (8, or 64) over all the channels
    // wrote a piece of every row per pass, and the row's lines had left L1 by the next pass.
    // Zen 4, GB/s read + written, medians of three runs of each build in turn, one thread (two),
    // before -> after: float [1, 2048, 7, 7] 38.7 -> 51.3, [1, 1024, 14, 14] 42.4 -> 64.2 (44.8
    // -> 79.6), [4, 2048, 7, 7] 35.6 -> 48.1 (69.2 -> 86.6), [2, 512, 14, 14] 57.4 -> 70.3 (62.4
    // -> 119.0), [8, 1024, 14, 14] (not streamable) 36.7 -> 47.4 (67.4 -> 113.1); 2-byte 26.8 ->
    // 37.5 (27.5 -> 36.8), 39.8 -> 51.9 (43.3 -> 42.3), 26.6 -> 35.3 (52.0 -> 64.5), 49.6 -> 56.3
    // (75.7 -> 79.3), 36.8 -> 45.7 (68.3 -> 86.2). 4 and 16 pairs a step measured about the same
    // as 8. At 256 channels it was mixed (one thread [4, 256, 14, 14] 59.6 -> 69.1 but [1, 256,
    // 56, 56] 62.1 -> 55.0; 2-byte on two threads 90.8 -> 66.7), and at 128 too: not taken.
    if (walk == nhwc_walk::long_runs && j.s.kind == side_kind::channels_last &&
        j.d.kind == side_kind::planar && se == de && (se == 2 || se == 4) && c >= 512 && c % 128 == 0) {
      j.p_block = all;
      j.scatter_pairs = 8;
    }
    // (Elements of 2 and 4 bytes: the vector engines write neither 1- nor 8-byte ones streamed.)
    if (walk == nhwc_walk::long_runs && j.s.kind == side_kind::channels_last && (de == 2 || de == 4))
      j.streamed_block = 1024;
  }
  j.p_blocks = layout_job::pieces_of(hw, j.p_block);
  return j;
}

// Whether the job may stream to `dst` (elements of `de` bytes from elements of `se` bytes):
// its stores write each target line whole, the lines one after another, and every vector store
// (8 elements) is aligned to its width, as non-temporal stores need. A line that non-temporal stores
// leave partly written goes to memory in pieces: measured on Intel Xeon (family 6, model 207),
// a pass writing 8 channels of each NHWC or nChw16c pixel streamed at 0.4-2.4 GB/s against
// 23-50 GB/s through the caches, and NHWC -> NCHW (eight rows of 64 pixels a step) at 0.4-0.7x
// the cached speed at 49 MiB. So:
//   - a planar target streams a line at a time (its rows must be whole lines), from a blocked
//     source, and from NHWC on the cores that take long runs, in blocks of 1024 pixels
//     (make_layout_job's streamed_block; on Zen 4 2.4x the cached speed at 12 MiB);
//   - an nChw8c target streams: each pass writes its pixels' chunks one after the other; so does
//     an nChw16c target from NHWC or nChw8c with C a multiple of 16 (both chunks of a pixel at
//     once), and an NHWC target of 4-byte elements from a blocked layout with such a C;
//   - an NHWC or nChw16c target streams only where every step fills a pixel's line: 4-byte
//     copies from a planar source moving two chunks of 8 channels at a time (make_layout_job's
//     group), with C a multiple of 16 (no chunk left to go alone), and 2-byte elements written
//     into NHWC four chunks at a time, with C a multiple of 32 and the target on a line, a
//     pixel under 1 KiB. From 512 channels on, the lines of a step's pixels fall in few L1
//     sets (as for make_layout_job's pair_block), and streaming four chunks a step measured
//     mixed on Zen 4: float16 copies of [16, 1024, 14, 14] and [8, 512, 28, 28] 0.54-0.77x the
//     cached speed, of [16, 512, 28, 28] and [64, 2048, 7, 7] 1.8-2.2x; float -> float16 of
//     [32, 2048, 7, 7] 0.58-0.68x, of [16, 1024, 14, 14] and [8, 512, 28, 28] 1.3-1.8x. There,
//     on the cores that take long runs, two groups a step stream instead (make_layout_job's
//     streamed_pair_block); on other cores such targets go through the caches.
inline bool streams_whole_lines(const layout_job& j, const std::byte* dst, std::size_t se,
                                std::size_t de) noexcept {
  if (reinterpret_cast<std::uintptr_t>(dst) % 32 != 0) return false;
  switch (j.d.kind) {
    case side_kind::planar:
      return (j.s.kind == side_kind::blocked || j.streamed_block > 0) && (j.hw * std::int64_t(de)) % 64 == 0;
    case side_kind::blocked:
      if (j.d.block == 8) return true;
      // nChw16c from channels together with every block full: each pixel's block written at
      // once (run_layout).
      if (j.s.kind != side_kind::planar && j.c % 16 == 0) return true;
      break;
    case side_kind::channels_last:
      // From a blocked layout, 4-byte elements, every 16 channels of a pixel a whole line (a
      // target on a line): two chunks of a pixel at once (run_layout).
      if (j.s.kind == side_kind::blocked && de == 4 && j.c % 16 == 0 &&
          reinterpret_cast<std::uintptr_t>(dst) % 64 == 0)
        return true;
      break;
  }
  if (j.s.kind != side_kind::planar) return false;
  // 2-byte elements into NHWC four chunks a step (a line of each pixel), every pixel's line on
  // a line, with a pixel under 1 KiB, or two groups a step with a longer one.
  if (j.d.kind == side_kind::channels_last && de == 2 && j.group == 4 && j.c % 32 == 0 &&
      (j.c * std::int64_t(de) < 1024 || j.streamed_pair_block > 0) &&
      reinterpret_cast<std::uintptr_t>(dst) % 64 == 0)
    return true;
  return se == 4 && de == 4 && j.group == 2 && j.c % 16 == 0;
}

// Writes the job with non-temporal stores or not (`stream`: store_policy::streaming and
// streams_whole_lines), in the pieces that suit that; `from_llc`: what the job reads and writes
// fits in the last-level cache.
inline void set_streaming(layout_job& j, bool stream, bool from_llc) noexcept {
  j.stream = stream;
  if (stream) j.pair_block = from_llc ? j.streamed_pair_block : j.memory_pair_block;
  if (stream && j.streamed_block > 0) {
    j.p_block = std::min(std::max<std::int64_t>(j.hw, 1), j.streamed_block);
    j.p_blocks = layout_job::pieces_of(j.hw, j.p_block);
  }
}

// Makes enough pieces for `threads` threads to share (a few per thread, so that uneven images
// still balance), by cutting the pixel range finer, down to pieces of 32 pixels: a small image
// of many channels ([1, 1024, 14, 14], 196 pixels) makes 6 pieces for two threads (3 each).
inline void split_for_threads(layout_job& j, int threads) noexcept {
  if (threads <= 1 || j.hw == 0) return;
  while (j.items() < 4 * std::int64_t{threads} && j.p_block > 32) {
    j.p_block = (j.p_block / 2 + 7) / 8 * 8;
    j.p_blocks = layout_job::pieces_of(j.hw, j.p_block);
  }
}

// The portable engine: each piece as runs of one channel over a pixel range, through the
// type-erased element loop `convert` (a bit copy for plain layout transforms). `fill` copies
// zeros (from a stride-0 source) into the padding lanes of a blocked target.
inline void run_layout_portable(const layout_job& j, const std::byte* src, std::size_t se, std::byte* dst,
                                std::size_t de, strided_fn convert, strided_fn fill, std::int64_t begin,
                                std::int64_t end) noexcept {
  alignas(8) static constexpr std::byte zeros[8]{};
  for (std::int64_t item = begin; item < end; ++item) {
    const auto [n, p0, p1] = j.piece(item);
    const std::int64_t len = p1 - p0;
    for (std::int64_t q = 0; q < j.q_count; ++q) {
      const std::int64_t kv = std::clamp<std::int64_t>(j.c - 8 * q, 0, 8), kt = j.d_pads ? 8 : kv;
      const std::int64_t so = j.s.chunk(n, q) + p0 * j.s.ps, dof = j.d.chunk(n, q) + p0 * j.d.ps;
      for (std::int64_t k = 0; k < kv; ++k)
        convert(src + std::size_t(so + k * j.s.cs) * se, j.s.ps, dst + std::size_t(dof + k * j.d.cs) * de,
                j.d.ps, len);
      for (std::int64_t k = kv; k < kt; ++k)
        fill(zeros, 0, dst + std::size_t(dof + k * j.d.cs) * de, j.d.ps, len);
    }
  }
}

}  // namespace fluidk::transforms::cpu_kernels::detail
