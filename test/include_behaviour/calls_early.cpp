// Includes nothing of fluidk: when the link puts it first, its static initialisation asks
// runtime_dispatch_only.cpp for a CPU plan before any translation unit that includes a
// fluidk header has been initialised (a registration from an inline variable would not be
// there yet), and for a whole call, which allocates tensors (a CPU device registered by an
// inline variable would not be there yet either).
#include <string>

namespace include_behaviour {
std::string describe_cpu_plan();
std::string run_by_runtime_dispatch();
extern const std::string cpu_plan_at_static_init = describe_cpu_plan();
extern const std::string call_before_any_fluidk_unit = run_by_runtime_dispatch();
}  // namespace include_behaviour
