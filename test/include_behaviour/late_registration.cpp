// Registers the accelerator's layout transform during static initialisation: before or after
// plans_early.cpp asks for a plan, as the link orders it.
#include <fluidk/transforms/registry.hpp>

#include "accelerator_layout.hpp"

namespace include_behaviour {
extern const bool accelerator_layout_registered =
    fluidk::register_layout_transform<fluidk_test::accelerator, fluidk::layout::nhwc, fluidk::layout::nchw>();
}
