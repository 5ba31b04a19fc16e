// slice (Input, StartsTensor, EndsTensor -> Out): Fluid's slice. Out is Input cut to
// [start, end) along each dimension named in attribute axes (ints), with the bounds of
// attributes starts and ends (ints or int64s, one per axis), or of the optional inputs
// StartsTensor and EndsTensor (1-D int64 or int32 tensors, one value per axis, read on the host
// wherever they are; each replaces its attribute: bounds computed while a program runs, such as
// a loop's counter). As in Fluid and ONNX, a negative bound counts from the dimension's end
// and every bound is clamped to [0, extent]; an end at or before its start gives an empty
// dimension. Attribute decrease_axis (ints, Fluid's for an index such as x[1]) drops those
// dims from Out, each of extent 1 in the slice; Out is [1] where it drops them all. Out is a
// copy, in row-major order, without sequence offsets.
//
// Kernels: CPU plain (float, double, int32, int64, bool); on another place the CPU's runs as a
// fallback.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ops/detail/common.hpp"

namespace fluidk::ops {

namespace detail {
// Bounds from input `slot` when given, else from attribute `attribute`.
inline std::vector<std::int64_t> slice_bounds(const execution_context& ctx, std::string_view slot,
                                              std::string_view attribute_name) {
  if (has_input(ctx, slot)) {
    const Tensor& given = ctx.input(slot);
    require(given.dtype() == data_type::int32 || given.dtype() == data_type::int64, ctx,
            "input " + std::string(slot) + " holds " + std::string(name_of(given.dtype())) +
                ", not int32 or int64");
    require(given.dims().rank() <= 1, ctx,
            "input " + std::string(slot) + " must be 1-D, not " + given.dims().to_string());
    const Tensor t = given.place().host_accessible() ? given : copy_to(given, cpu_place);
    if (t.dtype() == data_type::int32) return {t.data<std::int32_t>(), t.data<std::int32_t>() + t.numel()};
    return {t.data<std::int64_t>(), t.data<std::int64_t>() + t.numel()};
  }
  const attribute* a = ctx.attributes().find(attribute_name);
  require(a != nullptr, ctx,
          "needs attribute '" + std::string(attribute_name) + "' (ints) or input " + std::string(slot));
  return int_list(ctx, attribute_name, *a);
}

// Where each dimension of the cut starts in Input, the cut's dims, and Out's dims (the cut's,
// less those that decrease_axis drops).
struct slice_geometry {
  std::vector<std::int64_t> begin, out, shape;
};
inline slice_geometry slice_of(const execution_context& ctx, const dims& in) {
  const attribute* axes_attribute = ctx.attributes().find("axes");
  require(axes_attribute != nullptr, ctx, "needs attribute 'axes' (ints)");
  const std::vector<std::int64_t> axes = int_list(ctx, "axes", *axes_attribute);
  const std::vector<std::int64_t> starts = slice_bounds(ctx, "StartsTensor", "starts");
  const std::vector<std::int64_t> ends = slice_bounds(ctx, "EndsTensor", "ends");
  require(starts.size() == axes.size() && ends.size() == axes.size(), ctx,
          std::to_string(axes.size()) + " axes need as many starts and ends; given " +
              std::to_string(starts.size()) + " starts and " + std::to_string(ends.size()) + " ends");
  slice_geometry g;
  g.begin.assign(in.rank(), 0);
  g.out.assign(in.begin(), in.end());
  std::vector<bool> seen(in.rank(), false);
  const std::int64_t rank = std::int64_t(in.rank());
  for (std::size_t k = 0; k < axes.size(); ++k) {
    require(axes[k] >= -rank && axes[k] < rank, ctx,
            "axis " + std::to_string(axes[k]) + " is outside [" + std::to_string(-rank) + ", " +
                std::to_string(rank - 1) + "] for Input " + in.to_string());
    const std::size_t axis = std::size_t(axes[k] < 0 ? axes[k] + rank : axes[k]);
    require(!seen[axis], ctx, "axis " + std::to_string(axis) + " is named twice in axes");
    seen[axis] = true;
    const std::int64_t extent = in[axis];
    auto clamp = [&](std::int64_t v) {
      if (v < 0) v = v < -extent ? 0 : v + extent;  // no overflow: -extent <= v < 0
      return std::min(v, extent);
    };
    const std::int64_t start = clamp(starts[k]), end = clamp(ends[k]);
    g.begin[axis] = start;
    g.out[axis] = std::max<std::int64_t>(end - start, 0);
  }
  // Fluid's decrease_axis (what an index such as x[1] writes): Out drops those dims, each of
  // extent 1 in the cut, and is [1] where it drops them all.
  g.shape = g.out;
  if (const attribute* decrease = ctx.attributes().find("decrease_axis")) {
    std::vector<bool> dropped(in.rank(), false);
    for (const std::int64_t a : int_list(ctx, "decrease_axis", *decrease)) {
      require(a >= -rank && a < rank, ctx,
              "decrease_axis names axis " + std::to_string(a) + ", outside [" + std::to_string(-rank) + ", " +
                  std::to_string(rank - 1) + "] for Input " + in.to_string());
      const std::size_t axis = std::size_t(a < 0 ? a + rank : a);
      require(!dropped[axis], ctx, "decrease_axis names axis " + std::to_string(axis) + " twice");
      require(g.out[axis] == 1, ctx,
              "decrease_axis drops axis " + std::to_string(axis) + ", whose extent in the slice is " +
                  std::to_string(g.out[axis]) + ", not 1");
      dropped[axis] = true;
    }
    g.shape.clear();
    for (std::size_t i = 0; i < g.out.size(); ++i)
      if (!dropped[i]) g.shape.push_back(g.out[i]);
    if (g.shape.empty() && !g.out.empty()) g.shape.push_back(1);  // every dim dropped
  }
  return g;
}
}  // namespace detail

template <class T>
struct slice_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor x = detail::row_major(detail::input(ctx, "Input"));
    const dims& in = x.dims();
    const detail::slice_geometry g = detail::slice_of(ctx, in);
    Tensor out(dims(std::span<const std::int64_t>(g.shape)), data_type_of<T>, ctx.place());
    const std::int64_t n = out.numel();
    const std::size_t rank = in.rank();
    std::vector<std::int64_t> strides(rank, 1), index(rank, 0);
    for (std::size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * in[d];
    const T* src = x.data<T>();
    T* y = out.data<T>();
    // Out's elements in order, an odometer over its dims; the source offset follows.
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < rank; ++d) offset += g.begin[d] * strides[d];
    for (std::int64_t i = 0; i < n; ++i) {
      y[i] = src[offset];
      for (std::size_t d = rank; d-- > 0;) {
        offset += strides[d];
        if (++index[d] < g.out[d]) break;
        offset -= strides[d] * g.out[d];
        index[d] = 0;
      }
    }
    ctx.set_output("Out", std::move(out));
  }
};

struct slice {
  static constexpr std::string_view name = "slice";
  static constexpr std::array<std::string_view, 3> inputs{"Input", "StartsTensor", "EndsTensor"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // The bounds are read where they are, in their own data type.
  static constexpr std::array<std::string_view, 2> no_transform_inputs{"StartsTensor", "EndsTensor"};
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(slice_cpu<float>{}, slice_cpu<double>{}, slice_cpu<std::int32_t>{},
                              slice_cpu<std::int64_t>{}, slice_cpu<bool>{}));
};

}  // namespace fluidk::ops
