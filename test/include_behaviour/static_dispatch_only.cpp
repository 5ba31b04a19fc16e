// A translation unit that includes fluidk/static_dispatch.hpp and nothing else of fluidk:
// the chain of its call is computed at compile time from the CPU's transforms.
#include <fluidk/static_dispatch.hpp>

#include "half_scale.hpp"

namespace include_behaviour {

std::string run_by_static_dispatch() {
  fluidk::typed_tensor<fluidk::cpu, float, fluidk::layout::nhwc> x(nhwc_input());
  fluidk::Tensor out;
  fluidk::run<half_scale, fluidk::float16>(fluidk::target<fluidk::cpu>(), fluidk::inputs(x),
                                           fluidk::outputs(out));
  return describe(out);
}

extern const std::string static_dispatch_at_static_init = run_by_static_dispatch();

}  // namespace include_behaviour
