// Asks for the accelerator's NHWC -> NCHW plan during static initialisation, before or after
// late_registration.cpp registers a direct transform, and again when asked later.
#include <fluidk/transforms/runtime.hpp>

#include "accelerator_layout.hpp"

namespace include_behaviour {

std::size_t accelerator_plan_steps() {
  return fluidk::plan_transform(accelerator_nhwc, accelerator_nchw).steps().size();
}

extern const std::size_t accelerator_plan_steps_at_static_init = accelerator_plan_steps();

}  // namespace include_behaviour
