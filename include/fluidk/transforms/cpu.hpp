// The CPU's transforms: layout changes among NCHW, NHWC, nChw8c and nChw16c (oneDNN's
// blocked layouts, declared in fluidk/devices/onednn_tags.hpp, which needs no oneDNN), casts between
// every pair of data types, and both fused in one pass, declared as trait specialisations
// for the static path and registered in the runtime table for the runtime path (on the
// runtime planner's first use).
#pragma once

#include <string>
#include <type_traits>

#include "fluidk/transforms/cpu_kernels.hpp"
#include "fluidk/transforms/registry.hpp"
#include "fluidk/transforms/traits.hpp"

namespace fluidk {

namespace detail {
// The layout pairs the CPU kernels transform directly (transforms::cpu_kernels::detail::layouts).
constexpr bool cpu_reorderable(data_layout from, data_layout to) noexcept {
  return from != to && transforms::cpu_kernels::detail::is_4d_layout(from) &&
         transforms::cpu_kernels::detail::is_4d_layout(to);
}

// What a CPU transform checks of its target before it writes (a backend may call run() on a
// target of its own, or on host memory of its own place; fluidk's routes allocate one that
// passes): both hold data, the target has the source's dims, and its layout or data type where
// the step keeps it, and it shares no byte with the source, which a transform never writes.
// An error naming the step and both tensors, and nothing written.
inline void check_cpu_target(const char* step, const Tensor& src, const Tensor& dst, bool same_layout,
                             bool same_dtype) {
  auto refuse = [&](const std::string& why) {
    throw error(std::string("CPU ") + step + " from " + src.describe() + " into " + dst.describe() + ": " +
                why);
  };
  if (!src.initialized() || !dst.initialized()) refuse("both tensors must hold data");
  if (dst.dims() != src.dims()) refuse("the target must have the source's dims");
  if (same_layout && dst.layout() != src.layout()) refuse("a cast keeps the layout");
  if (same_dtype && dst.dtype() != src.dtype()) refuse("a layout transform keeps the data type");
  if (overlapping(dst.memory(), dst.storage_bytes(), src.memory(), src.storage_bytes()))
    refuse("the target overlaps the source, which a transform never writes");
}

inline std::byte* cpu_target(Tensor& dst) {
  return static_cast<std::byte*>(dst.mutable_handle()) + dst.offset();
}
inline const std::byte* cpu_source(const Tensor& src) {
  return static_cast<const std::byte*>(src.handle()) + src.offset();
}

inline void cpu_reorder(const Tensor& src, Tensor& dst) {
  check_cpu_target("layout transform", src, dst, false, true);
  transforms::cpu_kernels::reorder(cpu_source(src), src.layout(), cpu_target(dst), dst.layout(), src.dims(),
                                   size_of(src.dtype()));
}
inline void cpu_cast(const Tensor& src, Tensor& dst) {
  check_cpu_target("cast", src, dst, true, false);
  transforms::cpu_kernels::cast(cpu_source(src), src.dtype(), cpu_target(dst), dst.dtype(),
                                src.storage_bytes() / size_of(src.dtype()));
}
inline void cpu_reorder_cast(const Tensor& src, Tensor& dst) {
  check_cpu_target("layout transform and cast", src, dst, false, false);
  transforms::cpu_kernels::reorder_cast(cpu_source(src), src.layout(), src.dtype(), cpu_target(dst),
                                        dst.layout(), dst.dtype(), src.dims());
}
}  // namespace detail

template <Layout From, Layout To>
requires(detail::cpu_reorderable(data_layout_of<From>,
                                 data_layout_of<To>)) struct layout_transform<cpu, From, To> {
  static void run(const Tensor& src, Tensor& dst) { detail::cpu_reorder(src, dst); }
};

template <DType From, DType To>
requires(!std::is_same_v<From, To>) struct cast_transform<cpu, From, To> {
  static void run(const Tensor& src, Tensor& dst) { detail::cpu_cast(src, dst); }
};

template <Layout FromLayout, Layout ToLayout, DType From, DType To>
requires(detail::cpu_reorderable(data_layout_of<FromLayout>, data_layout_of<ToLayout>) &&
         !std::is_same_v<From, To>) struct fused_transform<cpu, FromLayout, ToLayout, From, To> {
  static void run(const Tensor& src, Tensor& dst) { detail::cpu_reorder_cast(src, dst); }
};

namespace detail {
// The runtime entries for the same specialisations. The CPU's kernels take the layouts and
// data types as values, so one function serves each kind of step: the table is filled by
// loops rather than by instantiating thousands of templates in every translation unit.
inline bool register_cpu_transforms() {
  auto& registry = transform_registry::instance();
  for (data_layout a : transforms::cpu_kernels::detail::layouts)
    for (data_layout b : transforms::cpu_kernels::detail::layouts)
      if (cpu_reorderable(a, b)) {
        registry.add(planning::step_kind::layout, cpu::id, a, b, data_type::float32, data_type::float32,
                     &cpu_reorder);
        for (data_type d : all_data_types)
          for (data_type e : all_data_types)
            if (d != e) registry.add(planning::step_kind::fused, cpu::id, a, b, d, e, &cpu_reorder_cast);
      }
  for (data_type d : all_data_types)
    for (data_type e : all_data_types)
      if (d != e)
        registry.add(planning::step_kind::cast, cpu::id, data_layout::any, data_layout::any, d, e, &cpu_cast);
  return true;
}
// Registers the CPU's entries once, when the runtime planner first plans (plan_cache calls
// it), not from an inline variable: so the table is complete whenever the first plan comes,
// even from the static initialisation of a translation unit initialised before every one
// that includes this header, and a translation unit that includes a dispatch header but
// makes no runtime call does not compile the CPU's kernels for it.
inline bool cpu_transforms_ready() {
  static const bool registered = register_cpu_transforms();
  return registered;
}
}  // namespace detail

}  // namespace fluidk
