// Calls every function that FLUIDK_SEPARATE_RUNTIME compiles once (fluidk/separate_runtime.hpp),
// for separate_runtime_check.py: built with FLUIDK_SEPARATE_RUNTIME, this file must define none
// of them and call each as compiled in the runtime's own file. Never run.
#include <fluidk/separate_runtime.hpp>  // the headers that declare them

namespace fluidk_test {

using namespace fluidk;

std::string call_everything(const operator_info& op, variable_slots inputs, variable_slots outputs,
                            const Variable& source, Variable& into, const Tensor& tensor, Scope& scope) {
  const kernel_key key = expected_kernel_key(op, cpu_place, inputs);
  std::string out = explain(op, cpu_place, inputs);
  run_operator(op, cpu_place, inputs, outputs);
  transform_variable(source, key, into);
  transform_input(op.rules(), 0, source, key, key, into);
  const transform_plan& plan = plan_transform(key, key);
  out += plan.describe();
  plan.check(tensor);
  out += transform(plan.apply(tensor), key).describe();
  out += transform(LoDTensor(tensor), key).tensor().describe();
  out += transform(SelectedRows({0}, 1, tensor), key).value().describe();
  const ProgramDesc program = parse_program(to_text(ProgramDesc()));
  out += to_dot(program) + to_dot(program.block(0));
  Executor executor(parse_place("cpu"));
  Executor::prepared prepared = executor.prepare(program.block(0), scope);
  executor.run(prepared);
  executor.run(Executor::invocations(program.block(0)), scope);
  out += std::to_string(storage_numel(dims{1, 8, 1, 1}, parse_data_layout("nChw8c")));
  detail::add_layout(*find_layout(0));
  detail::add_library(*detail::library_registry().find(std::size_t(0)));
  detail::place_kind_registry::instance().add(detail::place_info<cpu>);
  return out;
}

}  // namespace fluidk_test
