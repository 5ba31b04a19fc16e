// Control flow, as Fluid writes it: operators that carry a sub-block of their program as an
// attribute (kind block, fluidk/attribute.hpp) and that the executor runs by running that
// block, not a kernel (fluidk/executor.hpp). Both are registered with the runtime registry the
// first time a program or an executor asks for them; neither has kernels.
//
//   while (X: outer names the body reads; Condition: c) -> (Out: outer names it writes;
//          StepScopes: s) {sub_block: block B}
//     Runs block B while c, a bool tensor of one element, is true. The body must write c (an
//     enclosing block's variable) or the loop never ends: Executor::set_max_steps makes that an
//     error. Each step runs in a scope of its own: the variables block B declares start empty
//     at every step; a name B uses that an enclosing block declares is that block's variable,
//     which is how a loop carries state. StepScopes is optional.
//   conditional_block (Cond: c...; Input: outer names it reads) -> (Out: outer names it
//          writes; Scope: s) {sub_block: block B; is_scalar_condition: bool}
//     Runs block B once when the condition holds: with is_scalar_condition, c is one bool
//     tensor of one element and holds when true; without it (the attribute's default), when
//     every Cond tensor has at least one element. (Fluid's conditional_block tests its Input
//     tensors there, not Cond.) Scope is optional.
//
// B must be a child of the block the operator is in (append_op checks it). X, Input and Out
// document the operator's uses for readers of the program; the executor finds what the body
// reads and writes from the body itself. A step's scope is kept, as a child of the scope the
// operator ran in and listed in the StepScopes (Scope) variable, only when something needs it:
// the variable is named in prepare_options::keep or read by an operator of the program.
// Otherwise one scope serves every step, its variables emptied before each, and nothing is
// left behind. docs/programs.md, "Control flow", shows a loop's plan.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <variant>
#include <vector>

#include "fluidk/attribute.hpp"
#include "fluidk/operator_registry.hpp"
#include "fluidk/program/desc.hpp"

namespace fluidk {

namespace detail {

struct while_tag {};
struct conditional_block_tag {};

inline constexpr std::array<std::string_view, 2> while_inputs{"X", "Condition"};
inline constexpr std::array<std::string_view, 2> while_outputs{"Out", "StepScopes"};
inline constexpr std::array<std::string_view, 2> conditional_block_inputs{"Cond", "Input"};
inline constexpr std::array<std::string_view, 2> conditional_block_outputs{"Out", "Scope"};

// The sub-block an operator runs: its block attribute `sub_block`, checked.
inline const block_ref& sub_block_of(const OpDesc& op) { return op.attr<block_ref>("sub_block"); }

// The step-scopes output `slot`: at most one variable, made a StepScopes. The Out variables keep
// the kinds the body gives them (an array a loop fills stays an array).
inline void infer_step_scopes(const OpDesc& op, BlockDesc& block, std::string_view slot) {
  if (!op.has_output(slot)) return;
  const std::vector<std::string>& names = op.output(slot);
  if (names.size() > 1)
    throw error("operator '" + op.type() + "' output slot '" + std::string(slot) +
                "' takes one variable, not " + std::to_string(names.size()));
  for (const std::string& name : names) block.var_recursive(name).kind = var_kind::step_scopes;
}

inline void infer_while(const OpDesc& op, BlockDesc& block) {
  (void)sub_block_of(op);
  if (!op.has_input("Condition") || op.input("Condition").size() != 1)
    throw error(
        "operator 'while' takes one variable in its input slot 'Condition' (a bool tensor of one "
        "element), given " +
        std::to_string(op.has_input("Condition") ? op.input("Condition").size() : 0));
  infer_step_scopes(op, block, "StepScopes");
}

inline void infer_conditional_block(const OpDesc& op, BlockDesc& block) {
  (void)sub_block_of(op);
  const bool scalar = op.attr_or<bool>("is_scalar_condition", false);
  const std::size_t conditions = op.has_input("Cond") ? op.input("Cond").size() : 0;
  if (conditions == 0 || (scalar && conditions != 1))
    throw error("operator 'conditional_block' takes " +
                std::string(scalar ? "one variable (is_scalar_condition)" : "at least one variable") +
                " in its input slot 'Cond', given " + std::to_string(conditions));
  infer_step_scopes(op, block, "Scope");
}

template <class Tag>
std::string control_type_name() {
  return std::is_same_v<Tag, while_tag> ? "fluidk's while" : "fluidk's conditional_block";
}

// Registers the two operators once; returns true. Called by append_op and the executor, so
// that a program may name them without a registration of its own.
inline bool control_flow_registered() {
  static const bool registered = [] {
    auto& registry = operator_registry::instance();
    registry.add("while", typeid(while_tag), &control_type_name<while_tag>, [] {
      return std::make_unique<operator_info>("while", while_inputs, while_outputs, selection_rules{}, "",
                                             typeid(while_tag), &control_type_name<while_tag>, &infer_while,
                                             std::vector<kernel_entry>{}, control_kind::while_loop);
    });
    registry.add(
        "conditional_block", typeid(conditional_block_tag), &control_type_name<conditional_block_tag>, [] {
          return std::make_unique<operator_info>(
              "conditional_block", conditional_block_inputs, conditional_block_outputs, selection_rules{}, "",
              typeid(conditional_block_tag), &control_type_name<conditional_block_tag>,
              &infer_conditional_block, std::vector<kernel_entry>{}, control_kind::conditional_block);
        });
    return true;
  }();
  return registered;
}

}  // namespace detail

// The names of the control-flow operators, for readers of programs (to_dot draws their
// sub-blocks as clusters).
inline bool is_control_flow(std::string_view op_type) noexcept {
  return op_type == "while" || op_type == "conditional_block";
}

// The blocks an operator carries: its block attributes, in name order.
inline std::vector<std::size_t> sub_blocks(const OpDesc& op) {
  std::vector<std::size_t> out;
  for (const auto& [name, value] : op.attrs()) {
    if (const auto* one = std::get_if<block_ref>(&value)) out.push_back(one->index);
    if (const auto* many = std::get_if<std::vector<block_ref>>(&value))
      for (const block_ref& b : *many) out.push_back(b.index);
  }
  return out;
}

}  // namespace fluidk
