// assign (X -> Out): Out = X, a view of X's storage (fluidk never writes an input in place, and
// a write to X's bytes through any tensor moves the version Out shares, so no stale copy of
// Out is served). Out keeps X's dims, layout and sequence offsets.
//
// Kernels: one view for every place and data type it is registered for: CPU (float, double,
// int32, int64, bool), OpenCL (float, int32, int64, bool) and CUDA (float, double). No oneDNN kernel:
// use_onednn falls back to the CPU's (policy cpu). Each is declared for layout ANY, so fluidk brings blocked
// data to NCHW first.
#pragma once

#include <array>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <string_view>

#include "ops/detail/common.hpp"
#include "ops/detail/network_shape.hpp"

namespace fluidk::ops {

template <class T>
struct assign_view {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    detail::set_output_sharing_input(ctx, "Out", detail::input(ctx, "X"), ctx.input_lod("X"));
  }
};

struct assign {
  static constexpr std::string_view name = "assign";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // Where the expected kernel type has no kernel (use_onednn; another data type on a device),
  // the CPU kernel of the same data type runs, counted and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(assign_view<float>{}, assign_view<double>{}, assign_view<std::int32_t>{},
                              assign_view<std::int64_t>{}, assign_view<bool>{}),
#if FLUIDK_OPS_OPENCL
      fluidk::kernels_on<opencl>(assign_view<float>{}, assign_view<std::int32_t>{},
                                 assign_view<std::int64_t>{}, assign_view<bool>{}),
#endif
#if FLUIDK_OPS_CUDA
      fluidk::kernels_on<cuda>(assign_view<float>{}, assign_view<double>{}),
#endif
      detail::no_kernels());
};

}  // namespace fluidk::ops
