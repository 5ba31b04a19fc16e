// A translation unit that includes what docs/programs.md names to run a program (executor.hpp,
// program.hpp, runtime_dispatch.hpp) and no transform header: the program it runs needs the
// CPU's transforms.

#include <fluidk/executor.hpp>
#include <fluidk/program.hpp>           // the program text
#include <fluidk/runtime_dispatch.hpp>  // register_operator: docs/programs.md names the three headers

#include "half_scale.hpp"

namespace include_behaviour {

std::string run_by_executor() {
  fluidk::register_operator<half_scale>();
  const fluidk::ProgramDesc program = fluidk::parse_program(R"(
block 0
  var x : LoDTensor float [1, 2, 1, 2]
  op half_scale (X: x) -> (Out: out) {dtype: string "float16"}
)");
  fluidk::Scope scope;
  scope.var("x").set(fluidk::LoDTensor(nhwc_input()));
  fluidk::Executor executor(fluidk::cpu_place);
  auto prepared = executor.prepare(program.block(0), scope);
  executor.run(prepared);
  return describe(scope.get("out").get<fluidk::LoDTensor>());
}

extern const std::string executor_at_static_init = run_by_executor();

}  // namespace include_behaviour
