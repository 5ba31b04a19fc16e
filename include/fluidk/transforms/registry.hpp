// The runtime table of primitive transforms, filled from the same trait specialisations
// the static path uses (or, for a backend with many uniform entries such as the CPU, by
// one function serving them all). The runtime planner asks it which edges exist.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "fluidk/device.hpp"
#include "fluidk/kernel_type.hpp"
#include "fluidk/transforms/planner.hpp"
#include "fluidk/transforms/traits.hpp"

namespace fluidk {

using transform_function = void (*)(const Tensor& src, Tensor& dst);

namespace detail {

class transform_registry {
 public:
  static transform_registry& instance() {
    static transform_registry registry;
    return registry;
  }

  void add(planning::step_kind kind, place_kind_id p, data_layout from_layout, data_layout to_layout,
           data_type from, data_type to, transform_function fn) {
    const std::unique_lock lock(mutex_);
    functions_[key(kind, p, from_layout, to_layout, from, to)] = fn;
    registration_generation().fetch_add(1, std::memory_order_acq_rel);
  }

  transform_function find(planning::step_kind kind, place_kind_id p, data_layout from_layout,
                          data_layout to_layout, data_type from, data_type to) const {
    const std::shared_lock lock(mutex_);
    const auto it = functions_.find(key(kind, p, from_layout, to_layout, from, to));
    return it == functions_.end() ? nullptr : it->second;
  }

 private:
  // Layout steps ignore the data types and cast steps the layouts: they are keyed as such.
  static std::uint32_t key(planning::step_kind kind, place_kind_id p, data_layout a, data_layout b,
                           data_type d, data_type e) {
    if (kind == planning::step_kind::layout) d = e = data_type::float32;
    if (kind == planning::step_kind::cast) a = b = data_layout::any;
    return ((((std::uint32_t(kind) * max_place_kinds + p) * max_layouts + index_of(a)) * max_layouts +
             index_of(b)) *
                data_type_count +
            index_of(d)) *
               data_type_count +
           index_of(e);
  }

  mutable std::shared_mutex mutex_;
  std::unordered_map<std::uint32_t, transform_function> functions_;
};

}  // namespace detail

// Registration of one trait specialisation each; backends call these from inline
// variables, as they call register_device. Each returns true.
template <class P, class FromLayout, class ToLayout>
bool register_layout_transform() {
  static_assert(
      HasLayoutTransform<P, FromLayout, ToLayout>,
      "fluidk: register_layout_transform: no layout_transform<P, From, To> specialisation to register");
  detail::transform_registry::instance().add(
      detail::planning::step_kind::layout, P::id, data_layout_of<FromLayout>, data_layout_of<ToLayout>,
      data_type::float32, data_type::float32, &layout_transform<P, FromLayout, ToLayout>::run);
  return true;
}

template <class P, class From, class To>
bool register_cast_transform() {
  static_assert(HasCastTransform<P, From, To>,
                "fluidk: register_cast_transform: no cast_transform<P, From, To> specialisation to register");
  detail::transform_registry::instance().add(detail::planning::step_kind::cast, P::id, data_layout::any,
                                             data_layout::any, data_type_of<From>, data_type_of<To>,
                                             &cast_transform<P, From, To>::run);
  return true;
}

template <class P, class FromLayout, class ToLayout, class From, class To>
bool register_fused_transform() {
  static_assert(HasFusedTransform<P, FromLayout, ToLayout, From, To>,
                "fluidk: register_fused_transform: no fused_transform<P, ...> specialisation to register");
  detail::transform_registry::instance().add(
      detail::planning::step_kind::fused, P::id, data_layout_of<FromLayout>, data_layout_of<ToLayout>,
      data_type_of<From>, data_type_of<To>, &fused_transform<P, FromLayout, ToLayout, From, To>::run);
  return true;
}

}  // namespace fluidk
