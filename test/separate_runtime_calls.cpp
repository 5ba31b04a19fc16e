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
  Executor::prepared again = executor.prepare(Executor::invocations(program.block(0)), scope);
  executor.run(program.block(0), scope);
  out += std::to_string(storage_numel(dims{1, 8, 1, 1}, parse_data_layout("nChw8c")));
  detail::add_layout(*find_layout(0));
  detail::add_library(*detail::library_registry().find(std::size_t(0)));
  detail::place_kind_registry::instance().add(detail::place_info<cpu>);
  return out;
}

// The members of the descriptions, scopes, attribute maps, executor and registry that are
// compiled once: copies, moves, comparisons and lookups.
std::string call_members(ProgramDesc& program, Scope& scope, Executor& executor, const kernel_entry& entry,
                         execution_context& context, std::unique_ptr<operator_info> info) {
  attribute_map attrs{{"axis", 1}};
  attrs.set("keep_dims", true);
  attribute_map attrs_copy(attrs);
  attribute_map attrs_moved(std::move(attrs_copy));
  attrs_copy = attrs_moved;
  attrs_moved = std::move(attrs_copy);
  OpDesc op("relu", {{"X", {"x"}}}, {{"Out", {"y"}}}, attrs_moved);
  op.set_attr("axis", 2);
  OpDesc op_copy(op);
  OpDesc op_moved(std::move(op_copy));
  op_copy = op_moved;
  op_moved = std::move(op_copy);
  std::string out = op == op_moved && detail::same_attributes(op.attrs(), attrs_moved) ? "same" : "other";
  BlockDesc& block = program.append_block(0);
  block.var("x");
  block.append_op(op);
  out += block.user_of(block.get_var("x")) != nullptr ? "used" : "unused";
  out += std::to_string(block.child_blocks(op.type(), op.attrs()).size());
  BlockDesc block_copy(block);
  BlockDesc block_moved(std::move(block_copy));
  block_copy = block_moved;
  block_moved = std::move(block_copy);
  ProgramDesc program_copy(program);
  ProgramDesc program_moved(std::move(program_copy));
  program_copy = program_moved;
  program_moved = std::move(program_copy);
  out += program == program_moved && block == block_moved ? "same" : "other";

  Scope& child = scope.new_scope();
  child.var("x");
  out += child.find_local("x") != nullptr ? child.get("x").name() : "";
  for (const std::string& name : child.local_var_names()) out += name;
  out += child.erase("x") ? "erased" : "kept";
  out += std::to_string(scope.kid_count());
  scope.delete_scope(child);
  scope.drop_kids();
  auto own = std::make_unique<Scope>();  // its destructor, compiled once

  Executor moved(std::move(executor));
  executor = std::move(moved);
  Executor::prepared empty;
  Executor::prepared prepared(std::move(empty));
  empty = std::move(prepared);
  transfer_cache cache(1024);
  transfer_cache cache_moved(std::move(cache));
  cache = std::move(cache_moved);
  cache.clear();
  cache.drop_gone();
  out += std::to_string(cache.size());

  operator_registry& registry = operator_registry::instance();
  const operator_info& added = registry.add(
      "separate_runtime_op", typeid(int), [] { return std::string("int"); },
      [] { return std::unique_ptr<operator_info>(); });
  out += registry.find("relu") != nullptr ? registry.get("relu").registered_keys() : registry.names();
  out += std::string(added.name()) + std::to_string(registry.list().size()) +
         std::to_string(registry.fallback_count("relu", kernel_key()));
  registry.set_fallback_reporter(nullptr);
  out += std::to_string(info->lookup(kernel_key(), fallback_policy::none).index);
  info.reset(new operator_info("op", {}, {}, selection_rules{}, "", typeid(int), nullptr, nullptr, {}));
  entry(context);
  return out;
}

}  // namespace fluidk_test
