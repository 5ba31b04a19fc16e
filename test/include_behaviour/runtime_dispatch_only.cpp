// A translation unit that includes fluidk/runtime_dispatch.hpp and nothing else of fluidk
// (half_scale.hpp needs only fluidk/operator.hpp): its call needs the CPU's transforms.
#include <fluidk/runtime_dispatch.hpp>

#include "half_scale.hpp"

namespace include_behaviour {

std::string run_by_runtime_dispatch() {
  const fluidk::operator_info& op = fluidk::register_operator<half_scale>();
  fluidk::Variable x("x"), out("out");
  x.set(fluidk::LoDTensor(nhwc_input()));
  const std::vector<std::vector<fluidk::Variable*>> inputs{{&x}}, outputs{{&out}};
  fluidk::run_operator(op, fluidk::cpu_place, inputs, outputs, {{"dtype", std::string("float16")}});
  return describe(out.get<fluidk::LoDTensor>());
}

// The CPU's plan for the same change, asked for by whoever calls: calls_early.cpp does so
// during its static initialisation, which may come before that of this translation unit.
std::string describe_cpu_plan() {
  const fluidk::kernel_key from(fluidk::cpu_place, fluidk::data_type::float32, fluidk::data_layout::nhwc,
                                fluidk::library_type::plain);
  const fluidk::kernel_key to(fluidk::cpu_place, fluidk::data_type::float16, fluidk::data_layout::nchw,
                              fluidk::library_type::plain);
  return fluidk::plan_transform(from, to).describe();
}

extern const std::string runtime_dispatch_at_static_init = run_by_runtime_dispatch();

}  // namespace include_behaviour
