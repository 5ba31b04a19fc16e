// The runtime path of dispatch: per operator, the registered keys and kernels read off the
// same Hana map the static path uses (no second registration) and a dense table, indexed by
// the expected key's ordinal, that memoises rule 2 of kernel_choice.hpp for both fallback
// policies; the calls that apply the rules of kernel_choice.hpp to tensors and attributes;
// fallbacks counted and reported once per operator and key; listing and `explain`.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/hana/for_each.hpp>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include "fluidk/detail/name_index.hpp"
#include "fluidk/operator.hpp"
// With the CPU's transforms, a call whose inputs need a layout change or a cast on the CPU
// works with this header alone.
#include "fluidk/transforms/cpu.hpp"
#include "fluidk/transforms/runtime.hpp"

namespace fluidk {

// One registered kernel: its key and how to call it.
struct kernel_entry {
  kernel_key key;
  void (*call)(const void* kernel, execution_context& context);
  const void* kernel;

  void operator()(execution_context& context) const { call(kernel, context); }
};

// What a fallback was: reported once per operator and expected key, counted every time.
struct fallback_event {
  std::string_view op;
  kernel_key expected;
  kernel_key chosen;
};

class operator_info;
class OpDesc;
class BlockDesc;

// An operator's InferVarType: sets the kinds (and data types) of its outputs in the block.
using infer_var_type_function = void (*)(const OpDesc& op, BlockDesc& block);

namespace detail {

template <class K>
void call_kernel(const void* kernel, execution_context& context) {
  (*static_cast<const K*>(kernel))(context);
}

// A name for an operator type in registration errors.
template <class Op>
std::string type_name_of() {
#if defined(__GNUG__)
  const std::string_view f = __PRETTY_FUNCTION__;  // "... [with Op = ns::type; ...]"
  std::string_view name = typeid(Op).name();
  if (const auto at = f.find("Op = "); at != std::string_view::npos) {
    name = f.substr(at + 5);
    name = name.substr(0, name.find_first_of(";]"));
  }
#else
  const std::string_view name = typeid(Op).name();
#endif
  std::string out(1, '\'');
  out.append(name);
  out.push_back('\'');
  return out;
}
}  // namespace detail

// The runtime face of one operator type.
class operator_info {
 public:
  template <class Op>
  static std::unique_ptr<operator_info> make() {
    auto info = std::unique_ptr<operator_info>(new operator_info());
    info->name_ = Op::name;
    info->inputs_ = Op::inputs;
    info->outputs_ = Op::outputs;
    info->rules_ = rules_of<Op>;
    info->data_type_attribute_ = data_type_attribute_of<Op>();
    info->type_ = &typeid(Op);
    info->type_name_ = detail::type_name_of<Op>;
    if constexpr (requires { &Op::infer_var_type; }) info->infer_var_type_ = &Op::infer_var_type;
    static_assert(fluidk::registered_keys<Op>.size() < no_entry,
                  "fluidk: an operator has at most 65534 kernels");
    boost::hana::for_each(Op::kernels, [&](const auto& pair) {
      using key_type = typename std::decay_t<decltype(boost::hana::first(pair))>::type;
      using kernel_t = std::decay_t<decltype(boost::hana::second(pair))>;
      info->entries_.push_back({key_type::key(), &detail::call_kernel<kernel_t>, &boost::hana::second(pair)});
    });
    return info;
  }

  std::string_view name() const noexcept { return name_; }
  std::span<const std::string_view> inputs() const noexcept { return inputs_; }
  std::span<const std::string_view> outputs() const noexcept { return outputs_; }
  // The operator's configuration as the rules of kernel_choice.hpp read it.
  const selection_rules& rules() const noexcept { return rules_; }
  fallback_policy fallback() const noexcept { return rules_.fallback; }
  // The kernels in declaration order: entry i has key rules().keys[i].
  const std::vector<kernel_entry>& kernels() const noexcept { return entries_; }
  bool no_transform(std::size_t slot) const noexcept { return slot < 64 && rules_.exempt(slot); }
  bool cast(std::size_t slot) const noexcept { return slot < 64 && rules_.casts(slot); }
  bool keep_layout(std::size_t slot) const noexcept { return slot < 64 && rules_.keeps_layout(slot); }
  const std::optional<place>& run_on() const noexcept { return rules_.run_on; }
  std::size_t data_type_input() const noexcept { return rules_.data_type_input; }
  // The attribute that gives the data type; empty when the inputs decide.
  std::string_view data_type_attribute() const noexcept { return data_type_attribute_; }
  // The operator's InferVarType, nullptr for the default (every output a dense LoDTensor).
  infer_var_type_function infer_var_type() const noexcept { return infer_var_type_; }
  // The C++ type registered under the name (for registration errors).
  const std::type_info& type() const noexcept { return *type_; }
  std::string type_name() const { return type_name_(); }

  // Rule 2 of kernel_choice.hpp (choose_registered_kernel) for an expected key and policy:
  // the index of the kernel in kernels(), selection_rules::none when there is none, and
  // whether that was a fallback. Memoised per place kind in a dense table: after the first
  // call for a kind, an atomic load and two reads.
  struct match {
    std::size_t index;
    bool fell_back;
  };
  match lookup(const kernel_key& expected, fallback_policy policy) const {
    const subtable* sub = tables_[expected.place().kind_id()].load(std::memory_order_acquire);
    if (sub == nullptr) sub = &build_table(expected.place().kind());
    const table_entry& e = (*sub)[expected.ordinal_in_kind()];
    const std::uint16_t i = policy == fallback_policy::cpu ? e.with_cpu_fallback : e.strict;
    return {i == no_entry ? selection_rules::none : std::size_t(i), e.strict == no_entry && i != no_entry};
  }

  std::string registered_keys() const {
    std::string out;
    for (const kernel_entry& e : entries_) out += (out.empty() ? "" : ", ") + e.key.to_string();
    return out.empty() ? "none" : out;
  }

  ~operator_info() {
    for (auto& t : tables_) delete t.load(std::memory_order_relaxed);
  }
  operator_info(const operator_info&) = delete;
  operator_info& operator=(const operator_info&) = delete;

 private:
  static constexpr std::uint16_t no_entry = 0xffff;
  struct table_entry {
    std::uint16_t strict = no_entry;             // fallback_policy::none
    std::uint16_t with_cpu_fallback = no_entry;  // fallback_policy::cpu
  };
  using subtable = std::array<table_entry, kernel_key::keys_per_place_kind>;

  operator_info() = default;

  // Fills the table of one place kind by asking rule 2 for every key of that kind.
  const subtable& build_table(const place_kind_info& kind) const {
    const std::lock_guard lock(table_mutex_);
    std::atomic<const subtable*>& slot = tables_[kind.id];
    if (const subtable* built = slot.load(std::memory_order_acquire)) return *built;
    static_assert(kernel_key::ordinal_count == max_place_kinds * kernel_key::keys_per_place_kind);
    auto sub = std::make_unique<subtable>();
    const place where(kind, 0);
    for (std::size_t d = 0; d < data_type_count; ++d)
      for (std::size_t l = 0; l < data_layout_count; ++l)
        for (std::size_t b = 0; b < library_type_count; ++b) {
          const kernel_key key(where, data_type(d), data_layout(l), library_type(b));
          auto index = [&](fallback_policy policy) {
            const std::size_t i = choose_registered_kernel(rules_.keys, key, policy).index;
            return i == selection_rules::none ? no_entry : std::uint16_t(i);
          };
          (*sub)[key.ordinal_in_kind()] = {index(fallback_policy::none), index(fallback_policy::cpu)};
        }
    slot.store(sub.get(), std::memory_order_release);
    return *sub.release();
  }

  std::string_view name_;
  std::span<const std::string_view> inputs_, outputs_;
  selection_rules rules_;
  std::string_view data_type_attribute_;
  const std::type_info* type_ = nullptr;
  std::string (*type_name_)() = nullptr;
  infer_var_type_function infer_var_type_ = nullptr;
  std::vector<kernel_entry> entries_;
  mutable std::mutex table_mutex_;
  mutable std::array<std::atomic<const subtable*>, max_place_kinds> tables_{};
};

// The operators known at run time, each registered once with register_operator<Op>().
class operator_registry {
 public:
  // Inline, so that a call's lookup does not pay a call for it.
  [[gnu::always_inline]] static operator_registry& instance() {
    static operator_registry registry;
    return registry;
  }

  // Registers Op under its name; registering it again returns the same info. Another type
  // under a name already taken is a registration_error naming both.
  template <class Op>
  const operator_info& add() {
    static_assert(detail::operator_check<Op>::value);
    const std::unique_lock lock(mutex_);
    auto& slot = operators_[std::string(Op::name)];
    if (!slot) {
      slot = operator_info::make<Op>();
      index_.insert(Op::name, slot.get());
    } else if (slot->type() != typeid(Op)) {
      throw registration_error("operator name '" + std::string(Op::name) + "' is taken by " +
                               slot->type_name() + "; cannot register " + detail::type_name_of<Op>() +
                               " under it");
    }
    return *slot;
  }

  // The operator registered under `name`, or nullptr. Takes no lock: a name index that
  // registrations publish atomically (detail::name_index), so that a by-name call costs a hash
  // and a probe even while another thread registers.
  const operator_info* find(std::string_view name) const {
    detail::startup_errors::instance().check();
    return index_.find(name);
  }

  const operator_info& get(std::string_view name) const {
    if (const operator_info* op = find(name)) return *op;
    throw not_registered("unknown operator '" + std::string(name) + "'; registered: " + names());
  }

  std::string names() const {
    const std::shared_lock lock(mutex_);
    std::string out;
    for (const auto& [name, _] : operators_) out += (out.empty() ? "" : ", ") + name;
    return out.empty() ? "none" : out;
  }

  // Every registered (operator, kernel key), in name and key order.
  std::vector<std::pair<std::string, kernel_key>> list() const {
    const std::shared_lock lock(mutex_);
    std::vector<std::pair<std::string, kernel_key>> out;
    for (const auto& [name, op] : operators_)
      for (const kernel_entry& e : op->kernels()) out.emplace_back(name, e.key);
    std::sort(out.begin(), out.end());
    return out;
  }

  // Global fallback policy: when set, it replaces every operator's own, from the next call
  // on (prepared programs included).
  void set_global_fallback(std::optional<fallback_policy> policy) {
    global_fallback_.store(policy ? int(*policy) : -1, std::memory_order_relaxed);
  }
  std::optional<fallback_policy> global_fallback() const noexcept {
    const int global = global_fallback_code();
    return global < 0 ? std::nullopt : std::optional<fallback_policy>(fallback_policy(global));
  }
  // The same as a number: -1 when none is set, else the fallback_policy's value.
  int global_fallback_code() const noexcept { return global_fallback_.load(std::memory_order_relaxed); }
  fallback_policy effective_fallback(const operator_info& op) const noexcept {
    return global_fallback().value_or(op.fallback());
  }

  // Called once per (operator, expected key) that falls back; by default one line on stderr.
  // The reporter runs outside the registry's lock: it may call back into the registry.
  void set_fallback_reporter(std::function<void(const fallback_event&)> reporter) {
    const std::lock_guard lock(fallback_mutex_);
    reporter_ = std::make_shared<const std::function<void(const fallback_event&)>>(std::move(reporter));
  }
  void note_fallback(const fallback_event& event) {
    std::shared_ptr<const std::function<void(const fallback_event&)>> reporter;
    {
      const std::lock_guard lock(fallback_mutex_);
      if (fallbacks_[{std::string(event.op), event.expected}]++ != 0) return;
      reporter = reporter_;
    }
    if (reporter && *reporter)
      (*reporter)(event);
    else
      std::fprintf(stderr, "fluidk: operator '%.*s' has no kernel for %s; falling back to %s\n",
                   int(event.op.size()), event.op.data(), event.expected.to_string().c_str(),
                   event.chosen.to_string().c_str());
  }
  std::size_t fallback_count(std::string_view op, const kernel_key& expected) const {
    const std::lock_guard lock(fallback_mutex_);
    const auto it = fallbacks_.find({std::string(op), expected});
    return it == fallbacks_.end() ? 0 : it->second;
  }

 private:
  // Registration and listing: the map owns the operators, in name order, under the mutex;
  // lookups go through the index.
  mutable std::shared_mutex mutex_;
  std::map<std::string, std::unique_ptr<operator_info>, std::less<>> operators_;
  detail::name_index<operator_info> index_;
  std::atomic<int> global_fallback_{-1};
  mutable std::mutex fallback_mutex_;
  std::map<std::pair<std::string, kernel_key>, std::size_t> fallbacks_;
  std::shared_ptr<const std::function<void(const fallback_event&)>> reporter_;
};

// Registers an operator for the runtime path, from its kernel map. Returns its info.
template <class Op>
const operator_info& register_operator() {
  return operator_registry::instance().add<Op>();
}

inline const operator_info& find_operator(std::string_view name) {
  return operator_registry::instance().get(name);
}

// The inputs of one call, by slot: each slot a list of tensors (empty pointers allowed for
// optional inputs).
using input_tensors = std::span<const std::vector<const Tensor*>>;

// The place an `op_device` attribute forces ("opencl:0"), if any.
inline std::optional<place> op_device_of(const attribute_map& attrs) {
  if (const attribute* device = attrs.find("op_device"))
    if (const auto* text = std::get_if<std::string>(device); text && !text->empty())
      return parse_place(*text);
  return std::nullopt;
}

// The library configuration asks for: use_onednn (or Fluid's use_mkldnn), use_cudnn, else
// plain. `op` names the operator in the error for an attribute of the wrong kind.
inline library_type library_of(const attribute_map& attrs, std::string_view op) {
  if (attrs.get_or<bool>("use_onednn", false, op) || attrs.get_or<bool>("use_mkldnn", false, op))
    return library_type::onednn;
  if (attrs.get_or<bool>("use_cudnn", false, op)) return library_type::cudnn;
  return library_type::plain;
}

// What a call's attributes ask for (op_device, the library, the data-type attribute), on the
// executor's place. The policy is left to the registry, read on every call.
inline selection_request request_of(const operator_info& op, const place& executor_place,
                                    const attribute_map& attrs) {
  selection_request r;
  r.executor_place = executor_place;
  r.forced_place = op_device_of(attrs);
  r.library = library_of(attrs, op.name());
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
// tensor `t` (tensor_of(*v), or a bare tensor with v null), or each element of a
// LoDTensorArray; nothing for an empty variable or tensor.
template <class F>
void for_each_input_state(const Variable* v, const Tensor* t, std::uint32_t slot, F&& f) {
  if (t != nullptr) {
    if (t->initialized()) f(input_state{slot, key_of(*t)});
  } else if (v != nullptr && v->is<LoDTensorArray>()) {
    for (const LoDTensor& element : v->get<LoDTensorArray>())
      if (element.initialized()) f(input_state{slot, key_of(element)});
  }
}
inline void append_input_states(const Variable* v, const Tensor* t, std::uint32_t slot,
                                std::vector<input_state>& out) {
  for_each_input_state(v, t, slot, [&](const input_state& state) { out.push_back(state); });
}
inline void append_input_states(const Variable* v, std::uint32_t slot, std::vector<input_state>& out) {
  append_input_states(v, v != nullptr ? tensor_of(*v) : nullptr, slot, out);
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
inline kernel_key expected_kernel_key(const operator_info& op, const place& executor_place,
                                      input_tensors inputs,
                                      const attribute_map& attrs = detail::empty_attributes) {
  std::vector<input_state> states;
  for (std::size_t s = 0; s < inputs.size(); ++s)
    for (const Tensor* t : inputs[s]) append_input_states(nullptr, t, std::uint32_t(s), states);
  return expected_kernel_key(op, states, request_of(op, executor_place, attrs));
}

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
inline kernel_choice lookup_kernel(const operator_info& op, const kernel_key& expected) {
  const operator_info::match m = op.lookup(expected, operator_registry::instance().effective_fallback(op));
  if (m.index == selection_rules::none) return {expected, nullptr, expected, false};
  const kernel_entry& entry = op.kernels()[m.index];
  return {expected, &entry, on_device(entry.key, expected.place()), m.fell_back};
}
}  // namespace detail

// Rule 2 of kernel_choice.hpp on the runtime path. A fallback is counted and reported; no
// kernel is an exception naming the operator, the key and what is registered.
inline kernel_choice choose_kernel(const operator_info& op, const kernel_key& expected) {
  const kernel_choice choice = detail::lookup_kernel(op, expected);
  if (choice.entry == nullptr) detail::no_kernel_for(op, expected);
  if (choice.fell_back) operator_registry::instance().note_fallback({op.name(), expected, choice.chosen});
  return choice;
}

// Rule 3a of kernel_choice.hpp for a tensor: the key it is transformed to.
inline kernel_key input_target_key(const operator_info& op, std::size_t slot, const Tensor& input,
                                   const kernel_key& kernel) {
  return fluidk::input_target_key(op.rules(), slot, key_of(input), kernel);
}

// What a call would do, for a person: the expected key, the chosen kernel, any fallback, and
// the transform chain of each input.
inline std::string explain(const operator_info& op, const place& executor_place, input_tensors inputs,
                           const attribute_map& attrs = detail::empty_attributes) {
  const kernel_key expected = expected_kernel_key(op, executor_place, inputs, attrs);
  std::string out = "operator '" + std::string(op.name()) + "'\n  expected: " + expected.to_string() + "\n";
  const kernel_choice choice = detail::lookup_kernel(op, expected);
  if (choice.entry == nullptr)
    return out + "  kernel:   none (no kernel for " + expected.to_string() +
           "; registered: " + op.registered_keys() + ")\n";
  const kernel_key chosen = choice.chosen;
  out += "  kernel:   " + chosen.to_string() + (choice.fell_back ? " (fallback)" : "") + "\n";
  for (std::size_t s = 0; s < inputs.size(); ++s)
    for (std::size_t i = 0; i < inputs[s].size(); ++i) {
      const Tensor* t = inputs[s][i];
      out += "  input " + std::string(s < op.inputs().size() ? op.inputs()[s] : "?") + "[" +
             std::to_string(i) + "]: ";
      if (t == nullptr || !t->initialized()) {
        out += "empty\n";
      } else if (op.no_transform(s)) {
        out += "exempt from transforms\n";
      } else {
        const kernel_key target = input_target_key(op, s, *t, chosen);
        out += (needs_transform(key_of(*t), target) ? plan_transform(key_of(*t), target).describe()
                                                    : std::string("none")) +
               "\n";
      }
    }
  return out;
}

// The variable as a kernel of key `target` needs it, written into `into`; the source is
// never changed. LoD and selected rows survive.
inline void transform_variable(const Variable& source, const kernel_key& target, Variable& into) {
  if (source.is<LoDTensor>())
    into.set(transform(source.get<LoDTensor>(), target));
  else if (source.is<SelectedRows>())
    into.set(transform(source.get<SelectedRows>(), target));
  else
    throw error("variable '" + source.name() + "' holds " + std::string(name_of(source.kind())) +
                ", which fluidk cannot transform");
}

// Rule 3 of kernel_choice.hpp for an input variable of slot `slot` whose dense tensor is
// `t` (tensor_of(v)): the key its content is transformed to, when it must be (nothing when
// the kernel reads it as it is). For a LoDTensorArray, the target of its first element that
// must move.
inline std::optional<kernel_key> input_transform_target(const selection_rules& rules, std::size_t slot,
                                                        const Variable& v, const Tensor* t,
                                                        const kernel_key& kernel) {
  if (rules.exempt(slot)) return std::nullopt;
  auto target_of = [&](const Tensor& tensor) -> std::optional<kernel_key> {
    if (!tensor.initialized()) return std::nullopt;
    const kernel_key from = key_of(tensor);
    const kernel_key target = input_target_key(rules, slot, from, kernel);
    return needs_transform(from, target) ? std::optional<kernel_key>(target) : std::nullopt;
  };
  if (t != nullptr) return target_of(*t);
  if (v.is<LoDTensorArray>())
    for (const LoDTensor& element : v.get<LoDTensorArray>())
      if (auto target = target_of(element)) return target;
  return std::nullopt;
}

// The input as the kernel needs it, written into `into` (the source is never changed):
// `target` from input_transform_target; a LoDTensorArray's elements each by rule 3.
inline void transform_input(const selection_rules& rules, std::size_t slot, const Variable& source,
                            const kernel_key& target, const kernel_key& kernel, Variable& into) {
  if (!source.is<LoDTensorArray>()) return transform_variable(source, target, into);
  LoDTensorArray out;
  for (const LoDTensor& t : source.get<LoDTensorArray>())
    out.push_back(t.initialized() ? transform(t, input_target_key(rules, slot, key_of(t), kernel)) : t);
  into.set(std::move(out));
}

// Runs `f`, which prepares input `slot` of a call; a fluidk error it throws comes out of the
// same kind, naming the operator, the input and the kernel key.
template <class F>
decltype(auto) preparing_input(const operator_info& op, std::size_t slot, const Variable& v,
                               const kernel_key& kernel, F&& f) {
  auto context = [&](const error& e) {
    std::string what = e.what();
    if (what.rfind("fluidk: ", 0) == 0) what.erase(0, 8);
    return "operator '" + std::string(op.name()) + "' input " + std::string(op.inputs()[slot]) + " ('" +
           v.name() + "') for kernel " + kernel.to_string() + ": " + what;
  };
  try {
    return std::forward<F>(f)();
  } catch (const not_registered& e) {
    throw not_registered(context(e));
  } catch (const parse_error& e) {
    throw parse_error(context(e));
  } catch (const registration_error& e) {
    throw registration_error(context(e));
  } catch (const error& e) {
    throw error(context(e));
  }
}

// Each run of an operator starts with its outputs' sequence offsets cleared, so that an
// output never keeps the LoD of an earlier run: a kernel sets them (set_output, share_lod).
// An output that is also one of the operator's inputs keeps them, as they are this run's
// input. Outputs without offsets are not touched (their version does not move).
inline void clear_output_lods(std::span<Variable* const> outputs, std::span<Variable* const> inputs) {
  for (Variable* out : outputs) {
    if (out == nullptr || !out->is<LoDTensor>() || out->get<LoDTensor>().lod().empty()) continue;
    bool is_input = false;
    for (const Variable* in : inputs) is_input = is_input || in == out;
    if (!is_input) out->get_mutable<LoDTensor>().set_lod({});
  }
}

// Runs an operator once on variables, by slot: picks the kernel, transforms each input that
// needs it into a temporary (the variables given are never changed) and calls the kernel on
// the context of its place. Returns the kernel chosen.
inline kernel_choice run_operator(const operator_info& op, const place& executor_place,
                                  std::span<const std::vector<Variable*>> inputs,
                                  std::span<const std::vector<Variable*>> outputs,
                                  const attribute_map& attrs = detail::empty_attributes) {
  if (inputs.size() != op.inputs().size() || outputs.size() != op.outputs().size())
    throw error("operator '" + std::string(op.name()) + "' takes " + std::to_string(op.inputs().size()) +
                " input and " + std::to_string(op.outputs().size()) + " output slots, but was given " +
                std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
  std::vector<input_state> states;
  for (std::size_t s = 0; s < inputs.size(); ++s)
    for (const Variable* v : inputs[s]) append_input_states(v, std::uint32_t(s), states);
  const kernel_key expected = expected_kernel_key(op, states, request_of(op, executor_place, attrs));
  const kernel_choice choice = choose_kernel(op, expected);

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
  clear_output_lods(given_outputs, given_inputs);
  const std::span<kernel_arg> all(args);
  execution_context context(op.name(), op.inputs(), op.outputs(), context_of(choice.chosen.place()),
                            choice.chosen, {all.first(first_output), input_offsets},
                            {all.subspan(first_output), output_offsets}, attrs);
  (*choice.entry)(context);
  return choice;
}

}  // namespace fluidk
