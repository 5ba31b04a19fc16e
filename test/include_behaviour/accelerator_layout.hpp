// A layout transform on the simulated accelerator, declared for every translation unit of the
// test and registered by late_registration.cpp alone: until then, the planner goes through
// the host (copy, re-layout, copy back); after it, one step on the device.
#pragma once

#include <fluidk/transforms/cpu.hpp>

#include "simulated_device.hpp"

template <>
struct fluidk::layout_transform<fluidk_test::accelerator, fluidk::layout::nhwc, fluidk::layout::nchw> {
  static void run(const Tensor& src, Tensor& dst) { fluidk::detail::cpu_reorder(src, dst); }
};

namespace include_behaviour {
inline const fluidk::kernel_key accelerator_nhwc(fluidk::place::of<fluidk_test::accelerator>(0),
                                                 fluidk::data_type::float32, fluidk::data_layout::nhwc,
                                                 fluidk::library_type::plain);
inline const fluidk::kernel_key accelerator_nchw(fluidk::place::of<fluidk_test::accelerator>(0),
                                                 fluidk::data_type::float32, fluidk::data_layout::nchw,
                                                 fluidk::library_type::plain);
}  // namespace include_behaviour
