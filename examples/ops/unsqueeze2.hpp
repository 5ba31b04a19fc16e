// unsqueeze2 (X -> Out, XShape): Fluid's unsqueeze2. Out is X with a dimension of extent 1
// inserted at each position of attribute axes (ints), which name Out's dimensions (in [-r, r - 1]
// for Out's rank r = X's rank + the number of axes, negative counted from the end; each once;
// in any order), X's dims filling the others in order: ONNX's Unsqueeze, and Fluid's for
// sorted non-negative axes. A scalar X (rank 0) with axes [0] is [1]. XShape, optional, is
// Fluid's [0, X's dims...]. Out is a view of X's storage (in row-major order), with X's
// sequence offsets when its rows are X's.
//
// Kernels: one view for every place and data type it is registered for: CPU (float, double,
// int32, int64, bool), OpenCL (float, int32, int64, bool); elsewhere the CPU's runs as a
// fallback.
#pragma once

#include <array>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ops/detail/common.hpp"
#include "ops/detail/network_shape.hpp"

namespace fluidk::ops {

inline dims unsqueeze2_dims(const execution_context& ctx, const dims& x) {
  const attribute* a = ctx.attributes().find("axes");
  detail::require(a != nullptr, ctx, "needs attribute 'axes' (ints)");
  const std::vector<std::int64_t> axes = detail::int_list(ctx, "axes", *a);
  const std::int64_t rank = std::int64_t(x.rank() + axes.size());
  detail::require(rank <= std::int64_t(max_rank), ctx,
                  "X " + x.to_string() + " with " + std::to_string(axes.size()) + " more dims has rank " +
                      std::to_string(rank) + ", beyond fluidk's " + std::to_string(max_rank));
  std::vector<bool> inserted(std::size_t(rank), false);
  for (const std::int64_t axis : axes) {
    detail::require(axis >= -rank && axis < rank, ctx,
                    "axis " + std::to_string(axis) + " is outside [" + std::to_string(-rank) + ", " +
                        std::to_string(rank - 1) + "] for Out's rank " + std::to_string(rank));
    const std::size_t at = std::size_t(axis < 0 ? axis + rank : axis);
    detail::require(!inserted[at], ctx, "axis " + std::to_string(at) + " is named twice in axes");
    inserted[at] = true;
  }
  std::vector<std::int64_t> out;
  std::size_t next = 0;
  for (std::int64_t d = 0; d < rank; ++d) out.push_back(inserted[std::size_t(d)] ? 1 : x[next++]);
  return dims(std::span<const std::int64_t>(out));
}

template <class T>
struct unsqueeze2_view {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const dims out = unsqueeze2_dims(ctx, x.dims());
    detail::set_xshape(ctx, x);
    detail::set_output_sharing_input(ctx, "Out", detail::reshaped_view(x, out),
                                     detail::offsets_if_rows_kept(ctx, "X", x.dims(), out));
  }
};

struct unsqueeze2 {
  static constexpr std::string_view name = "unsqueeze2";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 2> outputs{"Out", "XShape"};
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(unsqueeze2_view<float>{}, unsqueeze2_view<double>{},
                              unsqueeze2_view<std::int32_t>{}, unsqueeze2_view<std::int64_t>{},
                              unsqueeze2_view<bool>{}),
#if FLUIDK_OPS_OPENCL
      fluidk::kernels_on<opencl>(unsqueeze2_view<float>{}, unsqueeze2_view<std::int32_t>{},
                                 unsqueeze2_view<std::int64_t>{}, unsqueeze2_view<bool>{}),
#endif
      detail::no_kernels());
};

}  // namespace fluidk::ops
