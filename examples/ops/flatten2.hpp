// flatten2 (X -> Out, XShape): Fluid's flatten2. Out is X as a matrix [product of X's dims
// before axis, product of the rest]; axis (int, 1) is in [-rank, rank], a negative one counting
// from the end as ONNX's Flatten does (axis 0: Out is [1, numel]). XShape, optional, is
// Fluid's [0, X's dims...], which holds no elements. Out keeps X's sequence offsets when its
// rows are X's.
//
// Out is a view: it shares X's storage, with other dims (layout ANY), when X is in row-major
// order; an NHWC X is brought to that order first (a copy). fluidk never writes an input, and a
// write to X's storage through any tensor moves the version that Out shares, so a cached copy
// of Out is never served stale.
//
// Kernels: one view for every place and data type it is registered for: CPU (float, double,
// int32, int64), OpenCL (float) and CUDA (float, double), the last two a view of the device
// buffer. No oneDNN kernel: use_onednn falls back to the CPU's (policy cpu). Each is declared
// for layout ANY, so fluidk brings blocked (nChw8c, nChw16c) data to NCHW first.
#pragma once

#include <array>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <string>
#include <string_view>

#include "ops/detail/common.hpp"
#include "ops/detail/network_shape.hpp"

namespace fluidk::ops {

// Out's dims for X's.
inline dims flatten2_dims(const execution_context& ctx, const dims& x) {
  const std::int64_t rank = std::int64_t(x.rank());
  std::int64_t axis = detail::int_attr(ctx, "axis", 1);
  detail::require(axis >= -rank && axis <= rank, ctx,
                  "axis (" + std::to_string(axis) + ") must be in [-" + std::to_string(rank) + ", " +
                      std::to_string(rank) + "] for X " + x.to_string());
  if (axis < 0) axis += rank;
  return {detail::product(x, 0, std::size_t(axis)), detail::product(x, std::size_t(axis), x.rank())};
}

template <class T>
struct flatten2_view {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const dims out = flatten2_dims(ctx, x.dims());
    detail::set_xshape(ctx, x);
    detail::set_output_sharing_input(ctx, "Out", detail::reshaped_view(x, out),
                                     detail::offsets_if_rows_kept(ctx, "X", x.dims(), out));
  }
};

struct flatten2 {
  static constexpr std::string_view name = "flatten2";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 2> outputs{"Out", "XShape"};
  // Where the expected kernel type has no kernel (use_onednn; another data type on a device),
  // the CPU kernel of the same data type runs, counted and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(flatten2_view<float>{}, flatten2_view<double>{}, flatten2_view<std::int32_t>{},
                              flatten2_view<std::int64_t>{}),
#if FLUIDK_OPS_OPENCL
      fluidk::kernels_on<opencl>(flatten2_view<float>{}),
#endif
#if FLUIDK_OPS_CUDA
      fluidk::kernels_on<cuda>(flatten2_view<float>{}, flatten2_view<double>{}),
#endif
      detail::no_kernels());
};

}  // namespace fluidk::ops
