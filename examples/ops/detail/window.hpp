// Which windows of a sliding-window operator (conv2d, pool2d) read the input, along one axis:
// one rule for the pooling kernels' check, the oneDNN convolution's guard and the ONNX
// importer's refusal.
#pragma once

#include <cstdint>

namespace fluidk::ops::detail {

// Whether window `o` of an axis of `size` cells reads one of them: the window starts at
// o * stride - padding and has `taps` taps `dilation` apart. It reads none when it lies wholly
// in the padding, or when its taps step over an input shorter than the dilation. The arguments
// are the operator's, checked so that o * stride - padding fits 64 bits (positive strides,
// taps and dilations); nothing here adds two of them that could overflow.
constexpr bool window_reads_input(std::int64_t o, std::int64_t size, std::int64_t taps, std::int64_t stride,
                                  std::int64_t padding, std::int64_t dilation) noexcept {
  const std::int64_t start = o * stride - padding;
  if (start >= 0) return start < size;
  // The first tap at or past the input's start: tap `first`, at `at` (in [0, dilation)).
  const std::int64_t before = -start, skipped = before / dilation, rest = before % dilation;
  const std::int64_t first = skipped + (rest != 0 ? 1 : 0), at = rest != 0 ? dilation - rest : 0;
  return first < taps && at < size;
}

// The first of an axis's `windows` windows that reads no input cell, or -1 when each reads one.
// A window that starts on the input reads it: only those that start in the front padding are
// tried one by one, then the first that starts past the input's end, found from the last
// window back. Work in proportion to the paddings over the stride, not to the windows (pool2d
// asks on every call).
constexpr std::int64_t first_window_without_input(std::int64_t windows, std::int64_t size, std::int64_t taps,
                                                  std::int64_t stride, std::int64_t padding,
                                                  std::int64_t dilation) noexcept {
  std::int64_t o = 0;
  for (; o < windows && o * stride < padding; ++o)
    if (!window_reads_input(o, size, taps, stride, padding, dilation)) return o;
  std::int64_t past = windows;  // the first window from `o` on that starts past the end
  while (past > o && (past - 1) * stride - padding >= size) --past;
  return past < windows ? past : -1;
}

// One-tap windows from -1 over a one-cell input: the first misses. A 2-tap window of dilation 3
// from -2 steps over a one-cell input; from -1 it reads cell 2 of three. Three-tap windows
// from -1 over three cells each read one. A padding and a dilation near 2^62, whose sum is
// beyond 64 bits: the second tap reads cell 0.
static_assert(first_window_without_input(3, 1, 1, 1, 1, 1) == 0);
static_assert(first_window_without_input(1, 1, 2, 1, 2, 3) == 0);
static_assert(first_window_without_input(1, 3, 2, 1, 1, 3) == -1);
static_assert(first_window_without_input(3, 3, 3, 1, 1, 1) == -1);
static_assert(first_window_without_input(5, 3, 1, 1, 0, 1) == 3);  // windows 3 and 4 start past 3 cells
static_assert(first_window_without_input(1, 1, 2, 1, (std::int64_t(1) << 62) + 1,
                                         (std::int64_t(1) << 62) + 1) == -1);
static_assert(first_window_without_input(1, 1, 2, 1, (std::int64_t(1) << 62) + 2,
                                         (std::int64_t(1) << 62) + 1) == 0);

}  // namespace fluidk::ops::detail
