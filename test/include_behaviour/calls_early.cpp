// Includes nothing of fluidk: when the link puts it first, its static initialisation asks
// runtime_dispatch_only.cpp for a CPU plan before any translation unit that includes a
// fluidk header has been initialised (a registration from an inline variable would not be
// there yet).
#include <string>

namespace include_behaviour {
std::string describe_cpu_plan();
extern const std::string cpu_plan_at_static_init = describe_cpu_plan();
}  // namespace include_behaviour
