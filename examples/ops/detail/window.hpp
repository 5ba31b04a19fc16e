// Which windows of a sliding-window operator (conv2d, pool2d) read the input, along one axis:
// one rule for the pooling kernels' check, the oneDNN convolution's guard and the ONNX
// importer's refusal.
#pragma once

#include <algorithm>
#include <cstdint>

namespace fluidk::ops::detail {

// Whether window `o` of an axis of `size` cells reads one of them: the window starts at
// o * stride - padding and has `taps` taps `dilation` apart. It reads none when it lies wholly
// in the padding, or when its taps step over an input shorter than the dilation. The
// arguments are the operator's: stride and dilation in [1, 2^31) (32-bit attributes), padding
// and size in [0, 2^62), o * stride below 2^62 (o * stride - padding then fits 64 bits); any
// positive taps (only compared).
constexpr bool window_reads_input(std::int64_t o, std::int64_t size, std::int64_t taps, std::int64_t stride,
                                  std::int64_t padding, std::int64_t dilation) noexcept {
  const std::int64_t start = o * stride - padding;
  if (start >= 0) return start < size;
  // The first tap at or past the input's start: tap `first`, at `at` (in [0, dilation)).
  const std::int64_t before = -start, skipped = before / dilation, rest = before % dilation;
  const std::int64_t first = skipped + (rest != 0 ? 1 : 0), at = rest != 0 ? dilation - rest : 0;
  return first < taps && at < size;
}

namespace window {

// sum over x in [0, n) of floor((a x + b) / m), modulo 2^64: the floor sum of the algorithm
// libraries, which swaps the roles of a and m as Euclid's algorithm does (O(log m) rounds).
// Exact for n < 2^32 and m < 2^31 (a * n + b stays below m * (n + 1) in every round).
constexpr std::uint64_t floor_sum(std::uint64_t n, std::uint64_t m, std::uint64_t a,
                                  std::uint64_t b) noexcept {
  std::uint64_t sum = 0;
  while (true) {
    if (a >= m) {
      sum += n * (n - 1) / 2 * (a / m);
      a %= m;
    }
    if (b >= m) {
      sum += n * (b / m);
      b %= m;
    }
    const std::uint64_t top = a * n + b;
    if (top < m) return sum;
    n = top / m;
    b = top % m;
    const std::uint64_t next_a = m;
    m = a;
    a = next_a;
  }
}

// How many x in [0, n) have (a x + b) mod m at or above `low`, for a, b < m < 2^31 and
// 0 < low < m, n < 2^32: (a x + b + m - low) / m passes one more multiple of m than
// (a x + b) / m exactly then. The two sums' difference is exact though each is taken mod 2^64.
constexpr std::uint64_t residues_at_or_above(std::uint64_t n, std::uint64_t m, std::uint64_t a,
                                             std::uint64_t b, std::uint64_t low) noexcept {
  return floor_sum(n, m, a, b + m - low) - floor_sum(n, m, a, b);
}

}  // namespace window

// The first of an axis's `windows` windows that reads no input cell, or -1 when each reads one.
// A window that starts on the input reads it. Of those that start in the front padding, the
// first lies wholly in the padding if any does (the later ones start nearer the input); the
// others read the input unless their taps step over it, which happens where the first tap at
// or past the input's start, at (o * stride - padding) mod dilation, is at or past its end:
// found by counting such residues (window::residues_at_or_above) over a binary search, in
// O(log^2) steps however long the padding (the residues repeat within `dilation` windows, so
// the counts stay below 2^31). Then the first that starts past the input's end, found from the
// last window back (pool2d and conv2d compute each window anyway). Same arguments as
// window_reads_input, for every window o below `windows`.
constexpr std::int64_t first_window_without_input(std::int64_t windows, std::int64_t size, std::int64_t taps,
                                                  std::int64_t stride, std::int64_t padding,
                                                  std::int64_t dilation) noexcept {
  if (windows <= 0) return -1;
  // The windows that start in the front padding: o * stride < padding.
  const std::int64_t front = std::min(windows, padding / stride + (padding % stride != 0 ? 1 : 0));
  if (front > 0 && !window_reads_input(0, size, taps, stride, padding, dilation)) return 0;
  if (front > 1 && size < dilation) {
    const auto d = std::uint64_t(dilation), a = std::uint64_t(stride) % d;
    const std::uint64_t b = (d - std::uint64_t(padding) % d) % d, low = std::uint64_t(size);
    // The residues repeat after `dilation` windows at most: a first miss lies among those.
    const auto tried = std::uint64_t(std::min(front, dilation));
    if (window::residues_at_or_above(tried, d, a, b, low) > 0) {
      std::uint64_t none = 1, some = tried;  // the fewest windows holding a miss: in (none, some]
      while (some - none > 1) {
        const std::uint64_t mid = none + (some - none) / 2;
        (window::residues_at_or_above(mid, d, a, b, low) > 0 ? some : none) = mid;
      }
      return std::int64_t(some - 1);
    }
  }
  std::int64_t past = windows;  // the first window from `front` on that starts past the end
  while (past > front && (past - 1) * stride - padding >= size) --past;
  return past < windows ? past : -1;
}

// One-tap windows from -1 over a one-cell input: the first misses. A 2-tap window of dilation 3
// from -2 steps over a one-cell input; from -1 it reads cell 2 of three. Three-tap windows
// from -1 over three cells each read one. Windows 3 and 4 of stride 1 start past 3 cells.
static_assert(first_window_without_input(3, 1, 1, 1, 1, 1) == 0);
static_assert(first_window_without_input(1, 1, 2, 1, 2, 3) == 0);
static_assert(first_window_without_input(1, 3, 2, 1, 1, 3) == -1);
static_assert(first_window_without_input(3, 3, 3, 1, 1, 1) == -1);
static_assert(first_window_without_input(5, 3, 1, 1, 0, 1) == 3);
// Padding and dilation 2^31 - 1 over one cell: the second tap of window 0 reads it; with one
// cell less of padding, window 0's taps step over it.
static_assert(first_window_without_input(1, 1, 2, 1, (std::int64_t(1) << 31) - 1,
                                         (std::int64_t(1) << 31) - 1) == -1);
static_assert(first_window_without_input(1, 1, 2, 1, (std::int64_t(1) << 31) - 2,
                                         (std::int64_t(1) << 31) - 1) == 0);
// 2^31 - 2 windows in the front padding, dilation and taps 2^31 - 1, stride 1: window o's first
// tap on the input is at o + 1. Over 2 cells window 1 is the first to miss it; over 2^30 cells,
// window 2^30 - 1 (a loop over the windows would pass the compilers' constant-evaluation limits).
static_assert(first_window_without_input((std::int64_t(1) << 31) - 2, 2, (std::int64_t(1) << 31) - 1, 1,
                                         (std::int64_t(1) << 31) - 2, (std::int64_t(1) << 31) - 1) == 1);
static_assert(first_window_without_input((std::int64_t(1) << 31) - 2, std::int64_t(1) << 30,
                                         (std::int64_t(1) << 31) - 1, 1, (std::int64_t(1) << 31) - 2,
                                         (std::int64_t(1) << 31) - 1) == (std::int64_t(1) << 30) - 1);

}  // namespace fluidk::ops::detail
