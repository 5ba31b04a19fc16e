// The rules of kernel choice, each written once as a constexpr function over plain values:
//
//   1. expected_kernel_key: the key a call asks for (place, data type, preferred layout,
//      library), from the operator's configuration, the keys of its inputs and the request;
//   2. match_kernel / choose_registered_kernel: the registered kernel that serves that key
//      (exact, then layout ANY, then another layout of the same place, type and library,
//      then the plain kernel of the same place for a library request, then the fallbacks
//      the policy allows);
//   3. input_target_key / needs_transform: what each input is transformed to, and whether
//      that is a transform at all.
//
// The static path evaluates them at compile time over the operator's registered keys (a
// std::array read off its kernel map) and turns the chosen index back into a type; the
// runtime table and the executor call the same functions at run time. docs/dispatch.md
// states the rule with worked cases.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "fluidk/kernel_type.hpp"
#include "fluidk/transforms/planner.hpp"

namespace fluidk {

// What to do when an operator has no kernel for its expected kernel type.
enum class fallback_policy : std::uint8_t {
  none,    // the default: only a library request falls back, to the plain kernel of the same
           // place (use_onednn on an operator without a oneDNN kernel, as Fluid's operator.cc
           // does: "missing MKLDNN kernel: fallbacking to PLAIN one"); anything else is an
           // error, at compile time in the static path, an exception at run time
  cpu,     // the plain kernel of the same place, then the CPU kernel of the library asked
           // for, then the CPU's plain kernel (each of the same data type)
  strict,  // no fallback at all: a library request without a kernel of that library is an
           // error too
};

// An operator's configuration as the rules read it: plain values, the same on both paths.
struct selection_rules {
  static constexpr std::size_t none = std::size_t(-1);

  std::span<const kernel_key> keys;       // registered, in declaration order, on device 0
  std::uint64_t no_transform = 0;         // bit s: slot s is never transformed nor decides
  std::uint64_t cast = 0;                 // bit s: slot s is cast to the kernel's data type
  std::uint64_t keep_layout = 0;          // bit s: slot s keeps its own layout
  std::size_t data_type_input = none;     // the slot whose data type decides, if any
  bool data_type_from_attribute = false;  // the operator takes its data type from an attribute
  std::optional<place> run_on;            // the place kind it always runs on, as its device 0
  fallback_policy fallback = fallback_policy::none;

  constexpr bool exempt(std::size_t slot) const noexcept { return (no_transform >> slot) & 1u; }
  constexpr bool casts(std::size_t slot) const noexcept { return (cast >> slot) & 1u; }
  constexpr bool keeps_layout(std::size_t slot) const noexcept { return (keep_layout >> slot) & 1u; }
};

// One input tensor as the rules see it: its slot and the key of its data. Inputs left out,
// empty ones and arrays' empty elements are not listed.
struct input_state {
  std::uint32_t slot = 0;
  kernel_key key{};  // place, data type and layout of the data; library plain

  friend constexpr bool operator==(const input_state&, const input_state&) noexcept = default;
};

// What a call asks for, besides its inputs.
struct selection_request {
  place executor_place{};                      // where the executor (or static target) runs
  std::optional<place> forced_place;           // op_device
  library_type library = library_type::plain;  // use_onednn, use_cudnn, or the target's library
  std::optional<data_type> attribute_dtype;    // the data-type attribute's value, when given
  std::optional<fallback_policy> policy;       // replaces the operator's own policy when set
};

enum class selection_status : std::uint8_t {
  chosen,           // a kernel serves the call
  no_kernel,        // nothing registered serves the expected key, and no fallback does
  inputs_disagree,  // the deciding inputs hold different data types
  no_data_type,     // no input decides the data type and no attribute gives it
};

// The expected kernel key, or why there is none. On disagreement, the two slots and types.
struct expectation {
  selection_status status = selection_status::chosen;
  kernel_key key{};
  std::uint32_t first_slot = 0, other_slot = 0;
  data_type first_dtype = data_type::float32, other_dtype = data_type::float32;
};

// The outcome of a whole selection: the expected key, the index of the chosen kernel among
// the registered keys (selection_rules::none when there is none), the chosen key on the
// device the call runs on, and whether a fallback was taken.
struct selection {
  expectation expected{};
  std::size_t index = selection_rules::none;
  kernel_key chosen{};
  bool fell_back = false;

  constexpr selection_status status() const noexcept {
    return expected.status != selection_status::chosen ? expected.status
           : index == selection_rules::none            ? selection_status::no_kernel
                                                       : selection_status::chosen;
  }
};

// Rule 1a. The place: the operator's own kind (run_on), on the executor's device when the
// executor is of that kind and on device 0 otherwise; else the place op_device forces; else
// the executor's.
constexpr place expected_place(const selection_rules& op, const selection_request& request) noexcept {
  if (op.run_on) return op.run_on->same_kind(request.executor_place) ? request.executor_place : *op.run_on;
  return request.forced_place ? *request.forced_place : request.executor_place;
}

// Rule 1b. Whether an input decides the data type (and the preferred layout): the named
// data_type_input alone when there is one, else every input not exempt from transforms;
// none when the operator takes its data type from an attribute.
constexpr bool decides(const selection_rules& op, std::size_t slot) noexcept {
  if (op.data_type_from_attribute) return false;
  return op.data_type_input != selection_rules::none ? slot == op.data_type_input : !op.exempt(slot);
}

// Rule 1. The expected kernel key: the place of rule 1a; the data type of the deciding
// inputs (which must agree), or of the attribute; the layout of the first deciding input
// (ANY when there is none); the library asked for.
constexpr expectation expected_kernel_key(const selection_rules& op, std::span<const input_state> inputs,
                                          const selection_request& request) noexcept {
  expectation out;
  std::optional<data_type> dtype;
  data_layout preferred = data_layout::any;
  if (op.data_type_from_attribute) {
    dtype = request.attribute_dtype;
  } else {
    for (const input_state& in : inputs) {
      if (!decides(op, in.slot)) continue;
      if (!dtype) {
        dtype = in.key.dtype();
        preferred = in.key.layout();
        out.first_slot = in.slot;
      } else if (*dtype != in.key.dtype()) {
        out.status = selection_status::inputs_disagree;
        out.other_slot = in.slot;
        out.first_dtype = *dtype;
        out.other_dtype = in.key.dtype();
        return out;
      }
    }
  }
  if (!dtype) {
    out.status = selection_status::no_data_type;
    return out;
  }
  out.key = kernel_key(expected_place(op, request), *dtype, preferred, request.library);
  return out;
}

// Rule 2a. The registered kernel for a key, matching the place kind (a kernel serves every
// device of its kind), data type and library: the key's layout exactly; else the kernel of
// layout ANY; else the first declared for another layout. `none` when there is none.
constexpr std::size_t match_kernel(std::span<const kernel_key> keys, const kernel_key& wanted) noexcept {
  std::size_t any = selection_rules::none, other = selection_rules::none;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const kernel_key& k = keys[i];
    if (!k.place().same_kind(wanted.place()) || k.dtype() != wanted.dtype() ||
        k.library() != wanted.library())
      continue;
    if (k.layout() == wanted.layout()) return i;
    if (k.layout() == data_layout::any) {
      if (any == selection_rules::none) any = i;
    } else if (other == selection_rules::none) {
      other = i;
    }
  }
  return any != selection_rules::none ? any : other;
}

// The place a chosen kernel runs on: the expected place when the kernel is of its kind,
// else device 0 of the kernel's kind (a fallback to the CPU).
constexpr kernel_key on_device(const kernel_key& registered, const place& where) noexcept {
  return registered.with_place(registered.place().same_kind(where) ? where
                                                                   : place(registered.place().kind(), 0));
}

// Rule 2. The kernel for an expected key under a fallback policy: rule 2a for the key; then,
// unless the policy is strict, rule 2a for the key with the plain library (a library request
// falls back to the plain kernel of the same place); then, only with fallback_policy::cpu,
// rule 2a for the key on the CPU, and for the key on the CPU with the plain library, in that
// order.
constexpr selection choose_registered_kernel(std::span<const kernel_key> keys, const kernel_key& expected,
                                             fallback_policy policy) noexcept {
  selection out;
  out.expected.key = expected;
  if (const std::size_t i = match_kernel(keys, expected); i != selection_rules::none) {
    out.index = i;
    out.chosen = on_device(keys[i], expected.place());
    return out;
  }
  if (policy == fallback_policy::strict) return out;
  const kernel_key candidates[] = {expected.with_library(library_type::plain), expected.with_place(cpu_place),
                                   expected.with_place(cpu_place).with_library(library_type::plain)};
  const std::size_t tried = policy == fallback_policy::cpu ? 3 : 1;
  for (std::size_t c = 0; c < tried; ++c) {
    if (const std::size_t i = match_kernel(keys, candidates[c]); i != selection_rules::none) {
      out.index = i;
      out.chosen = on_device(keys[i], candidates[c].place());
      out.fell_back = true;
      return out;
    }
  }
  return out;
}

// Whether a kernel reading layout `to` reads data of layout `from` as it is: a target of ANY
// reads every unblocked layout; data of ANY, in the logical order of its dims, reads as a
// plain layout (NCHW, NC: Fluid transforms no layout to or from kAnyLayout), and is
// reordered for another (NHWC, a blocked one). Rules 3a and 3b.
constexpr bool reads_layout_as_is(data_layout from, data_layout to) noexcept {
  const data_layout target = detail::planning::effective_target_layout(from, to);
  return target == data_layout::any || detail::planning::effective_source_layout(from, target) == target;
}

// Rule 3a. The key an input of slot `slot` is transformed to (Fluid's GetKernelTypeForVar):
// the kernel's place and layout with the input's own data type; the kernel's data type
// when the operator casts that slot; the input's own layout when it keeps it, or when the
// kernel reads it as it is (so that an input that only moves to another device, or is only
// cast, is never relabelled: data of ANY keeps ANY, whatever its rank). An exempt input
// keeps its own key, so nothing happens to it.
constexpr kernel_key input_target_key(const selection_rules& op, std::size_t slot, const kernel_key& input,
                                      const kernel_key& kernel) noexcept {
  if (op.exempt(slot)) return input;
  const bool own_layout = op.keeps_layout(slot) || reads_layout_as_is(input.layout(), kernel.layout());
  return {kernel.place(), op.casts(slot) ? kernel.dtype() : input.dtype(),
          own_layout ? input.layout() : kernel.layout(), library_type::plain};
}

// Rule 3b. Whether data of key `from` must be transformed for a kernel reading key `to`:
// another place (device id included) or data type does; a layout does unless the kernel
// reads the data as it is (reads_layout_as_is).
constexpr bool needs_transform(const kernel_key& from, const kernel_key& to) noexcept {
  if (from.place() != to.place() || from.dtype() != to.dtype()) return true;
  return !reads_layout_as_is(from.layout(), to.layout());
}

// The whole choice: rule 1, then rule 2 under the request's policy (else the operator's).
constexpr selection select_kernel(const selection_rules& op, std::span<const input_state> inputs,
                                  const selection_request& request) noexcept {
  const expectation expected = expected_kernel_key(op, inputs, request);
  if (expected.status != selection_status::chosen) {
    selection out;
    out.expected = expected;
    return out;
  }
  selection out = choose_registered_kernel(op.keys, expected.key, request.policy.value_or(op.fallback));
  out.expected = expected;
  return out;
}

}  // namespace fluidk
