// The runtime path's calls: the rules of kernel_choice.hpp applied to tensors, variables and
// attributes (the expected key, the kernel through the operator's table, each input's target),
// inputs transformed into temporaries, outputs' offsets cleared, `run_operator` and
// `explain`. The executor runs on these.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fluidk/detail/error_context.hpp"
#include "fluidk/detail/request_attributes.hpp"
#include "fluidk/detail/runtime_linkage.hpp"
#include "fluidk/execution_context.hpp"
#include "fluidk/operator_registry.hpp"
// With the CPU's transforms (which transforms/runtime.hpp brings where the runtime is
// compiled), a call whose inputs need a layout change or a cast on the CPU works with this
// header alone.
#include "fluidk/transforms/runtime.hpp"

namespace fluidk {

// The variables of one call, by slot: each slot a list of variables (null pointers allowed for
// optional inputs). The one spelling of a call's inputs (and outputs) on the runtime path:
// expected_kernel_key, explain and run_operator take it.
using variable_slots = std::span<const std::vector<Variable*>>;

// What a call's attributes ask for (op_device, the library, the data-type attribute), on the
// executor's place. The policy is left to the registry, read on every call.
inline selection_request request_of(const operator_info& op, const place& executor_place,
                                    const attribute_map& attrs) {
  selection_request r;
  r.executor_place = executor_place;
  r.forced_place = op_device_of(attrs, op.name());
  r.library = requested_library(attrs, op.name());
  r.attribute_dtype = attribute_data_type(attrs, op.data_type_attribute(), op.name());
  return r;
}

// The dense tensor a variable holds: a LoDTensor's, or a SelectedRows' value; nullptr for
// an empty variable or an array.
inline const Tensor* tensor_of(const Variable& v) {
  if (v.is<LoDTensor>()) return &v.get<LoDTensor>();
  if (v.is<SelectedRows>()) return &v.get<SelectedRows>().value();
  return nullptr;
}

// The inputs a variable holds as the rules see them, each passed to f(input_state): its
// dense tensor (tensor_of), or each element of a LoDTensorArray; nothing for an empty
// variable or tensor.
template <class F>
void for_each_input_state(const Variable& v, std::uint32_t slot, F&& f) {
  detail::for_each_held_tensor(v, [&](const Tensor& t) {
    if (t.initialized()) f(input_state{slot, key_of(t)});
  });
}
// The same, appended to `out`; nothing for an input left out (v null).
inline void append_input_states(const Variable* v, std::uint32_t slot, std::vector<input_state>& out) {
  if (v != nullptr) for_each_input_state(*v, slot, [&](const input_state& state) { out.push_back(state); });
}

namespace detail {
[[noreturn, gnu::cold, gnu::noinline]] inline void no_expected_key(const operator_info& op,
                                                                   const expectation& e) {
  if (e.status == selection_status::inputs_disagree)
    throw error("operator '" + std::string(op.name()) + "': its inputs disagree on the data type (" +
                std::string(op.inputs()[e.first_slot]) + " is " + std::string(name_of(e.first_dtype)) + ", " +
                std::string(op.inputs()[e.other_slot]) + " is " + std::string(name_of(e.other_dtype)) +
                "); the operator can name the input that decides with data_type_input");
  if (!op.data_type_attribute().empty())
    throw error("operator '" + std::string(op.name()) + "' takes its data type from attribute '" +
                std::string(op.data_type_attribute()) + "', which is not set");
  throw error("operator '" + std::string(op.name()) + "': no input that decides the data type holds data");
}
[[noreturn, gnu::cold, gnu::noinline]] inline void wrong_slot_count(const operator_info& op,
                                                                    std::size_t inputs,
                                                                    std::optional<std::size_t> outputs) {
  std::string takes = std::to_string(op.inputs().size()) + " input";
  std::string given = std::to_string(inputs);
  if (outputs) {
    takes += " and " + std::to_string(op.outputs().size()) + " output";
    given += " and " + std::to_string(*outputs);
  }
  throw error("operator '" + std::string(op.name()) + "' takes " + takes + " slots, but was given " + given);
}
// The slots a call gives against the operator's, before any of them is read: the one check of
// run_operator, expected_kernel_key and explain (outputs: none where the call gives none).
inline void check_slot_counts(const operator_info& op, std::size_t inputs,
                              std::optional<std::size_t> outputs = std::nullopt) {
  if (inputs != op.inputs().size() || (outputs && *outputs != op.outputs().size()))
    wrong_slot_count(op, inputs, outputs);
}
[[noreturn, gnu::cold, gnu::noinline]] inline void no_kernel_for(const operator_info& op,
                                                                 const kernel_key& expected) {
  throw not_registered("Operator (" + std::string(op.name()) + ") does not have kernel for " +
                       expected.to_string() + "; registered: " + op.registered_keys());
}
}  // namespace detail

// Rule 1 of kernel_choice.hpp on the runtime path: the expected kernel key, or an error
// naming the operator (inputs that disagree, no data type).
inline kernel_key expected_kernel_key(const operator_info& op, std::span<const input_state> inputs,
                                      const selection_request& request) {
  const expectation e = fluidk::expected_kernel_key(op.rules(), inputs, request);
  if (e.status != selection_status::chosen) detail::no_expected_key(op, e);
  return e.key;
}
FLUIDK_DETAIL_RUNTIME_LINKAGE kernel_key
expected_kernel_key(const operator_info& op, const place& executor_place, variable_slots inputs,
                    const attribute_map& attrs = detail::empty_attributes);
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE kernel_key expected_kernel_key(const operator_info& op,
                                                             const place& executor_place,
                                                             variable_slots inputs,
                                                             const attribute_map& attrs) {
  detail::check_slot_counts(op, inputs.size());
  std::vector<input_state> states;
  for (std::size_t s = 0; s < inputs.size(); ++s)
    for (const Variable* v : inputs[s]) append_input_states(v, std::uint32_t(s), states);
  return expected_kernel_key(op, states, request_of(op, executor_place, attrs));
}
#endif

// The outcome of kernel selection.
struct kernel_choice {
  kernel_key expected;
  const kernel_entry* entry;
  kernel_key chosen;  // the entry's key on the device the call runs on
  bool fell_back;
};

namespace detail {
// Rule 2 of kernel_choice.hpp through the operator's table, under the global policy when
// one is set, else the operator's; entry null when there is none. Counts nothing.
[[gnu::always_inline]] inline kernel_choice lookup_kernel(const operator_info& op,
                                                          const kernel_key& expected) {
  const operator_info::match m = op.lookup(expected, operator_registry::instance().effective_fallback(op));
  if (m.index == selection_rules::none) return {expected, nullptr, expected, false};
  const kernel_entry& entry = op.kernels()[m.index];
  return {expected, &entry, on_device(entry.key, expected.place()), m.fell_back};
}
}  // namespace detail

// Rule 2 of kernel_choice.hpp on the runtime path. A fallback is counted and reported; no
// kernel is an exception naming the operator, the key and what is registered.
[[gnu::always_inline]] inline kernel_choice choose_kernel(const operator_info& op,
                                                          const kernel_key& expected) {
  const kernel_choice choice = detail::lookup_kernel(op, expected);
  if (choice.entry == nullptr) detail::no_kernel_for(op, expected);
  if (choice.fell_back) operator_registry::instance().note_fallback({op.name(), expected, choice.chosen});
  return choice;
}

// The context of the device a chosen kernel runs on. A device that is not present (an
// op_device attribute naming one past the count, say) is an error naming the operator, the
// kernel, and the attribute when the place is the one it asked for. The runtime call and the
// executor take their contexts here.
inline device_context& kernel_context_of(const operator_info& op, const kernel_key& chosen,
                                         const selection_request& request) {
  try {
    return context_of(chosen.place());
  } catch (const device_unavailable& e) {
    const bool forced = request.forced_place && *request.forced_place == chosen.place();
    throw device_unavailable("operator '" + std::string(op.name()) + "' kernel " + chosen.to_string() +
                             (forced ? " (the place attribute 'op_device' asks for)" : "") + ": " +
                             detail::unprefixed(e));
  }
}

// Rule 3a of kernel_choice.hpp for a tensor: the key it is transformed to.
inline kernel_key input_target_key(const operator_info& op, std::size_t slot, const Tensor& input,
                                   const kernel_key& kernel) {
  return fluidk::input_target_key(op.rules(), slot, key_of(input), kernel);
}

// What a call would do, for a person: the expected key, the chosen kernel, any fallback, and
// the transform chain of each input (of each element, for a LoDTensorArray).
FLUIDK_DETAIL_RUNTIME_LINKAGE std::string explain(const operator_info& op, const place& executor_place,
                                                  variable_slots inputs,
                                                  const attribute_map& attrs = detail::empty_attributes);
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE std::string explain(const operator_info& op, const place& executor_place,
                                                  variable_slots inputs, const attribute_map& attrs) {
  const kernel_key expected = expected_kernel_key(op, executor_place, inputs, attrs);
  std::string out = "operator '" + std::string(op.name()) + "'\n  expected: " + expected.to_string() + "\n";
  const kernel_choice choice = detail::lookup_kernel(op, expected);
  if (choice.entry == nullptr)
    return out + "  kernel:   none (no kernel for " + expected.to_string() +
           "; registered: " + op.registered_keys() + ")\n";
  const kernel_key chosen = choice.chosen;
  out += "  kernel:   " + chosen.to_string() + (choice.fell_back ? " (fallback)" : "") + "\n";
  const int devices = device_count(chosen.place());
  if (chosen.place().device() >= devices)
    return out + "  device:   none (" + chosen.place().to_string() +
           " is not present: " + std::to_string(devices) + " device(s) of its kind); the call would fail\n";
  // A transform the call could not make is said, as the call would fail on it.
  const auto plan_of = [&](std::size_t s, const Tensor* t) -> std::string {
    if (t == nullptr || !t->initialized()) return "empty";
    if (op.no_transform(s)) return "exempt from transforms";
    const kernel_key target = input_target_key(op, s, *t, chosen);
    if (!needs_transform(key_of(*t), target)) return "none";
    try {
      const transform_plan& plan = plan_transform(key_of(*t), target);
      plan.check(*t);
      return plan.describe();
    } catch (const error& e) {
      return "none (" + detail::unprefixed(e) + "); the call would fail";
    }
  };
  for (std::size_t s = 0; s < inputs.size(); ++s)
    for (std::size_t i = 0; i < inputs[s].size(); ++i) {
      const Variable* v = inputs[s][i];
      const std::string name = "  input " + std::string(op.inputs()[s]) + "[" + std::to_string(i) + "]";
      if (v != nullptr && v->is<LoDTensorArray>()) {
        const LoDTensorArray& array = v->get<LoDTensorArray>();
        if (array.empty()) out += name + ": empty array\n";
        for (std::size_t e = 0; e < array.size(); ++e)
          out += name + "[" + std::to_string(e) + "]: " + plan_of(s, &array[e]) + "\n";
      } else {
        out += name + ": " + plan_of(s, v != nullptr ? tensor_of(*v) : nullptr) + "\n";
      }
    }
  return out;
}
#endif

// The variable as a kernel of key `target` needs it, written into `into`; the source is
// never changed. LoD and selected rows survive.
FLUIDK_DETAIL_RUNTIME_LINKAGE void transform_variable(const Variable& source, const kernel_key& target,
                                                      Variable& into);
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE void transform_variable(const Variable& source, const kernel_key& target,
                                                      Variable& into) {
  if (source.is<LoDTensor>())
    into.set(transform(source.get<LoDTensor>(), target));
  else if (source.is<SelectedRows>())
    into.set(transform(source.get<SelectedRows>(), target));
  else
    throw error("variable '" + source.name() + "' holds " + std::string(name_of(source.kind())) +
                ", which fluidk cannot transform");
}
#endif

// One move of an input: the tensor that moves and the key it is transformed to.
struct input_move {
  const Tensor* source;
  kernel_key target;
};

// Rule 3 of kernel_choice.hpp for an input variable of slot `slot` whose dense tensor is
// `t` (tensor_of(v)): the tensor and the key it is transformed to, when it must be (nothing
// when the kernel reads it as it is). For a LoDTensorArray, its first element that must move
// (each element moves by its own key: transform_input).
inline std::optional<input_move> first_input_move(const selection_rules& rules, std::size_t slot,
                                                  const Variable& v, const Tensor* t,
                                                  const kernel_key& kernel) {
  if (rules.exempt(slot)) return std::nullopt;
  auto move_of = [&](const Tensor& tensor) -> std::optional<input_move> {
    if (!tensor.initialized()) return std::nullopt;
    const kernel_key from = key_of(tensor);
    const kernel_key target = input_target_key(rules, slot, from, kernel);
    return needs_transform(from, target) ? std::optional<input_move>({&tensor, target}) : std::nullopt;
  };
  if (t != nullptr) return move_of(*t);
  if (v.is<LoDTensorArray>())
    for (const LoDTensor& element : v.get<LoDTensorArray>())
      if (auto move = move_of(element)) return move;
  return std::nullopt;
}
// The key of first_input_move alone.
inline std::optional<kernel_key> input_transform_target(const selection_rules& rules, std::size_t slot,
                                                        const Variable& v, const Tensor* t,
                                                        const kernel_key& kernel) {
  const std::optional<input_move> move = first_input_move(rules, slot, v, t, kernel);
  return move ? std::optional<kernel_key>(move->target) : std::nullopt;
}

// The input as the kernel needs it, written into `into` (the source is never changed):
// `target` from input_transform_target; a LoDTensorArray's elements each by rule 3, those
// that need no transform shared as they are.
FLUIDK_DETAIL_RUNTIME_LINKAGE void transform_input(const selection_rules& rules, std::size_t slot,
                                                   const Variable& source, const kernel_key& target,
                                                   const kernel_key& kernel, Variable& into);
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE void transform_input(const selection_rules& rules, std::size_t slot,
                                                   const Variable& source, const kernel_key& target,
                                                   const kernel_key& kernel, Variable& into) {
  if (!source.is<LoDTensorArray>()) return transform_variable(source, target, into);
  LoDTensorArray out;
  for (const LoDTensor& t : source.get<LoDTensorArray>()) {
    // An element the kernel reads as it is (by needs_transform, as a dense input) is passed
    // as it is: one in layout any is not relabelled to a layout its rank may not fit.
    const kernel_key target = t.initialized() ? input_target_key(rules, slot, key_of(t), kernel) : key_of(t);
    out.push_back(t.initialized() && needs_transform(key_of(t), target) ? transform(t, target) : t);
  }
  into.set(std::move(out));
}
#endif

// Runs `f`, which prepares input `slot` of a call; a fluidk error it throws comes out of the
// same kind, naming the operator, the input and the kernel key.
template <class F>
decltype(auto) preparing_input(const operator_info& op, std::size_t slot, const Variable& v,
                               const kernel_key& kernel, F&& f) {
  return detail::preparing_input(op.name(), op.inputs()[slot], v.name(), kernel, std::forward<F>(f));
}

namespace detail {
// Whether output `out` holds sequence offsets.
inline bool has_lod(const Variable* out) noexcept {
  return out != nullptr && out->is<LoDTensor>() && !out->get<LoDTensor>().lod().empty();
}
// Whether variable `v` is one of the operator's inputs.
inline bool is_input(const Variable* v, std::span<Variable* const> inputs) noexcept {
  for (const Variable* in : inputs)
    if (in == v) return true;
  return false;
}

// Offsets taken off an output for a run, and its version after they were.
struct taken_lod {
  Variable* variable;
  std::uint64_t version;
  lod offsets;
};

// Takes the offsets off each output that has some and is not an input (its version moves on).
inline std::vector<taken_lod> take_output_lods(std::span<Variable* const> outputs,
                                               std::span<Variable* const> inputs) {
  std::vector<taken_lod> taken;
  for (Variable* out : outputs)
    if (has_lod(out) && !is_input(out, inputs)) {
      lod offsets = out->get_mutable<LoDTensor>().take_lod();
      taken.push_back({out, out->version(), std::move(offsets)});
    }
  return taken;
}

// After a failed kernel: gives the offsets back to every output it did not touch (its version
// has not moved since). An output the kernel wrote keeps what the kernel left, without
// offsets: they need not fit it.
inline void give_back_untouched(std::vector<taken_lod>& taken) noexcept {
  for (taken_lod& t : taken)
    if (t.variable->version() == t.version && t.variable->is<LoDTensor>()) {
      // The tensor is the one the offsets were checked against: set_lod does not refuse them.
      try {
        t.variable->get_mutable<LoDTensor>().set_lod(std::move(t.offsets));
      } catch (...) {
      }
    }
}

// After a kernel that ran: an output that is also an input kept its offsets, which must still
// fit its rows, as must the offsets a kernel set on any output. Only the rows can have changed
// under them, so this is a comparison per output with offsets. A kernel that gave such an
// output a tensor of other rows (assigned through output(), or reshaped through the Tensor it
// is) without setting its offsets is an error naming the operator and the kernel; the offsets
// are taken off first, so that no sequence kernel reads past its rows.
[[noreturn, gnu::cold, gnu::noinline]] inline void refuse_kept_lod(Variable* out,
                                                                   const execution_context& context) {
  const LoDTensor& t = out->get<LoDTensor>();
  try {
    t.check_lod(t.lod());  // for its message, which says what does not fit
    throw error("LoD level " + std::to_string(t.lod().size() - 1) + " ends at " +
                std::to_string(t.lod().back().back()) + ", but the tensor has " +
                std::to_string(t.dims().rank() > 0 ? t.dims()[0] : 0) + " rows");
  } catch (const error& e) {
    out->get_mutable<LoDTensor>().take_lod();
    try {
      throw error("output '" + out->name() +
                  "', also an input, keeps its sequence offsets, which its tensor no longer fits (" +
                  unprefixed(e) + "): a kernel that changes its rows sets its offsets (set_output)");
    } catch (...) {
      rethrow_naming_operator(context);
    }
  }
}
[[gnu::always_inline]] inline void check_kept_lods(std::span<Variable* const> outputs,
                                                   const execution_context& context) {
  for (Variable* out : outputs)
    if (has_lod(out) && !out->get<LoDTensor>().lod_fits_rows()) [[unlikely]]
      refuse_kept_lod(out, context);
}

// run_kernel_clearing_lods where some output has offsets.
[[gnu::noinline]] inline void run_kernel_with_lods(const kernel_entry& entry, execution_context& context,
                                                   std::span<Variable* const> outputs,
                                                   std::span<Variable* const> inputs) {
  std::vector<taken_lod> taken = take_output_lods(outputs, inputs);
  try {
    entry(context);
  } catch (...) {
    give_back_untouched(taken);
    throw;
  }
  check_kept_lods(outputs, context);
}
}  // namespace detail

// Runs the kernel `entry` on `context` with its outputs' sequence offsets cleared, so that an
// output never keeps the LoD of an earlier run: a kernel sets them (set_output, share_lod). An
// output that is also one of the operator's inputs keeps them, as they are this run's input,
// and they must still fit it after the kernel (detail::check_kept_lods). Outputs without
// offsets are not touched (their version does not move). If the kernel throws, every output
// it did not write gets its offsets back: a failed operator leaves its outputs as they were.
// The runtime call and both executor paths run kernels through here.
[[gnu::always_inline]] inline void run_kernel_clearing_lods(const kernel_entry& entry,
                                                            execution_context& context,
                                                            std::span<Variable* const> outputs,
                                                            std::span<Variable* const> inputs) {
  bool kept = false;  // an output that is also an input, with offsets
  for (const Variable* out : outputs)
    if (detail::has_lod(out)) [[unlikely]] {
      if (!detail::is_input(out, inputs))
        return detail::run_kernel_with_lods(entry, context, outputs, inputs);
      kept = true;
    }
  entry(context);
  if (kept) [[unlikely]]
    detail::check_kept_lods(outputs, context);
}

// Runs an operator once on variables, by slot: picks the kernel, transforms each input that
// needs it into a temporary (the variables given are never changed) and calls the kernel on
// the context of its place. Returns the kernel chosen.
FLUIDK_DETAIL_RUNTIME_LINKAGE kernel_choice
run_operator(const operator_info& op, const place& executor_place, variable_slots inputs,
             variable_slots outputs, const attribute_map& attrs = detail::empty_attributes);
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE kernel_choice run_operator(const operator_info& op, const place& executor_place,
                                                         variable_slots inputs, variable_slots outputs,
                                                         const attribute_map& attrs) {
  if (op.control() != control_kind::none)
    throw error("operator '" + std::string(op.name()) +
                "' runs a sub-block of its program, not a kernel: run the program with an Executor");
  detail::check_slot_counts(op, inputs.size(), outputs.size());
  std::vector<input_state> states;
  for (std::size_t s = 0; s < inputs.size(); ++s)
    for (const Variable* v : inputs[s]) append_input_states(v, std::uint32_t(s), states);
  const selection_request request = request_of(op, executor_place, attrs);
  const kernel_key expected = expected_kernel_key(op, states, request);
  const kernel_choice choice = choose_kernel(op, expected);
  device_context& device = kernel_context_of(op, choice.chosen, request);

  std::vector<std::unique_ptr<Variable>> temporaries;
  std::vector<kernel_arg> args;
  std::vector<std::uint32_t> input_offsets{0}, output_offsets{0};
  for (std::size_t s = 0; s < inputs.size(); ++s) {
    for (Variable* v : inputs[s]) {
      if (v != nullptr)
        if (const auto target = input_transform_target(op.rules(), s, *v, tensor_of(*v), choice.chosen)) {
          temporaries.push_back(std::make_unique<Variable>(v->name()));
          preparing_input(op, s, *v, choice.chosen, [&] {
            transform_input(op.rules(), s, *v, *target, choice.chosen, *temporaries.back());
          });
          v = temporaries.back().get();
        }
      args.emplace_back(v);
    }
    input_offsets.push_back(std::uint32_t(args.size()));
  }
  const std::size_t first_output = args.size();
  for (const auto& slot : outputs) {
    for (Variable* v : slot) args.emplace_back(v);
    output_offsets.push_back(std::uint32_t(args.size() - first_output));
  }
  std::vector<Variable*> given_inputs, given_outputs;
  for (const auto& slot : inputs) given_inputs.insert(given_inputs.end(), slot.begin(), slot.end());
  for (const auto& slot : outputs) given_outputs.insert(given_outputs.end(), slot.begin(), slot.end());
  const std::span<kernel_arg> all(args);
  execution_context context(op.name(), op.inputs(), op.outputs(), device, choice.chosen,
                            {all.first(first_output), input_offsets},
                            {all.subspan(first_output), output_offsets}, attrs);
  run_kernel_clearing_lods(*choice.entry, context, given_outputs, given_inputs);
  return choice;
}
#endif

}  // namespace fluidk
