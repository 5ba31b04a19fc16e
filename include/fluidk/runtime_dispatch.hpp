// The runtime path of dispatch: a dense table per operator generated from the same Hana map
// the static path uses (no second registration), indexed by the kernel key's ordinal; the
// rules for the expected kernel type and for each input's transform target; fallback
// policy, counted and reported once per operator and key; listing and `explain`.
#pragma once

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
#include <utility>
#include <vector>

#include "fluidk/operator.hpp"
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
inline constexpr std::size_t keys_per_place_kind = data_type_count * data_layout_count * library_type_count;

template <class K>
void call_kernel(const void* kernel, execution_context& context) {
  (*static_cast<const K*>(kernel))(context);
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
    info->fallback_ = fallback_of<Op>();
    info->data_type_input_ = data_type_input_index<Op>();
    if constexpr (requires { typename Op::run_on; }) info->run_on_ = place::of<typename Op::run_on>(0);
    if constexpr (requires { &Op::infer_var_type; }) info->infer_var_type_ = &Op::infer_var_type;
    for (std::size_t s = 0; s < Op::inputs.size(); ++s) {
      info->no_transform_.push_back(no_transform_input<Op>(Op::inputs[s]));
      info->cast_.push_back(cast_input<Op>(Op::inputs[s]));
      info->keep_layout_.push_back(keep_layout_input<Op>(Op::inputs[s]));
    }
    boost::hana::for_each(Op::kernels, [&](const auto& pair) {
      using key_type = typename std::decay_t<decltype(boost::hana::first(pair))>::type;
      using kernel_t = std::decay_t<decltype(boost::hana::second(pair))>;
      info->entries_.push_back({key_type::key(), &detail::call_kernel<kernel_t>, &boost::hana::second(pair)});
    });
    info->build_table();
    return info;
  }

  std::string_view name() const noexcept { return name_; }
  std::span<const std::string_view> inputs() const noexcept { return inputs_; }
  std::span<const std::string_view> outputs() const noexcept { return outputs_; }
  fallback_policy fallback() const noexcept { return fallback_; }
  const std::vector<kernel_entry>& kernels() const noexcept { return entries_; }
  bool no_transform(std::size_t slot) const noexcept {
    return slot < no_transform_.size() && no_transform_[slot];
  }
  bool cast(std::size_t slot) const noexcept { return slot < cast_.size() && cast_[slot]; }
  bool keep_layout(std::size_t slot) const noexcept {
    return slot < keep_layout_.size() && keep_layout_[slot];
  }
  const std::optional<place>& run_on() const noexcept { return run_on_; }
  std::size_t data_type_input() const noexcept { return data_type_input_; }
  // The operator's InferVarType, nullptr for the default (every output a dense LoDTensor).
  infer_var_type_function infer_var_type() const noexcept { return infer_var_type_; }

  // The kernel registered for this key, or for a key of ANY_LAYOUT, one registered for a
  // concrete layout; nullptr when none. Lock-free: two loads.
  const kernel_entry* find(const kernel_key& key) const noexcept {
    const auto& sub = table_[key.place().kind_id()];
    return sub ? (*sub)[key.ordinal() % detail::keys_per_place_kind] : nullptr;
  }

  std::string registered_keys() const {
    std::string out;
    for (const kernel_entry& e : entries_) out += (out.empty() ? "" : ", ") + e.key.to_string();
    return out.empty() ? "none" : out;
  }

 private:
  operator_info() = default;

  void build_table() {
    auto slot = [&](const kernel_key& key) -> const kernel_entry*& {
      auto& sub = table_[key.place().kind_id()];
      if (!sub) sub = std::make_unique<std::array<const kernel_entry*, detail::keys_per_place_kind>>();
      return (*sub)[key.ordinal() % detail::keys_per_place_kind];
    };
    for (const kernel_entry& e : entries_) slot(e.key) = &e;
    // A key of ANY_LAYOUT reaches the first kernel declared for a concrete layout.
    for (const kernel_entry& e : entries_) {
      const kernel_entry*& wildcard = slot(e.key.with_layout(data_layout::any));
      if (wildcard == nullptr) wildcard = &e;
    }
  }

  std::string_view name_;
  std::span<const std::string_view> inputs_, outputs_;
  fallback_policy fallback_ = fallback_policy::none;
  std::size_t data_type_input_ = 0;
  std::optional<place> run_on_;
  infer_var_type_function infer_var_type_ = nullptr;
  std::vector<bool> no_transform_, cast_, keep_layout_;
  std::vector<kernel_entry> entries_;
  std::array<std::unique_ptr<std::array<const kernel_entry*, detail::keys_per_place_kind>>, max_place_kinds>
      table_;
};

// The operators known at run time, each registered once with register_operator<Op>().
class operator_registry {
 public:
  static operator_registry& instance() {
    static operator_registry registry;
    return registry;
  }

  template <class Op>
  const operator_info& add() {
    static_assert(detail::operator_check<Op>::value);
    const std::unique_lock lock(mutex_);
    auto& slot = operators_[std::string(Op::name)];
    if (!slot) slot = operator_info::make<Op>();
    return *slot;
  }

  const operator_info* find(std::string_view name) const {
    const std::shared_lock lock(mutex_);
    const auto it = operators_.find(name);
    return it == operators_.end() ? nullptr : it->second.get();
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

  // Global fallback policy: when set, it replaces every operator's own.
  void set_global_fallback(std::optional<fallback_policy> policy) {
    global_fallback_.store(policy ? int(*policy) : -1, std::memory_order_relaxed);
  }
  fallback_policy effective_fallback(const operator_info& op) const noexcept {
    const int global = global_fallback_.load(std::memory_order_relaxed);
    return global < 0 ? op.fallback() : fallback_policy(global);
  }

  // Called once per (operator, expected key) that falls back; by default one line on stderr.
  void set_fallback_reporter(std::function<void(const fallback_event&)> reporter) {
    const std::lock_guard lock(fallback_mutex_);
    reporter_ = std::move(reporter);
  }
  void note_fallback(const fallback_event& event) {
    const std::lock_guard lock(fallback_mutex_);
    std::size_t& count = fallbacks_[{std::string(event.op), event.expected.ordinal()}];
    if (count++ == 0) {
      if (reporter_)
        reporter_(event);
      else
        std::fprintf(stderr, "fluidk: operator '%.*s' has no kernel for %s; falling back to %s\n",
                     int(event.op.size()), event.op.data(), event.expected.to_string().c_str(),
                     event.chosen.to_string().c_str());
    }
  }
  std::size_t fallback_count(std::string_view op, const kernel_key& expected) const {
    const std::lock_guard lock(fallback_mutex_);
    const auto it = fallbacks_.find({std::string(op), expected.ordinal()});
    return it == fallbacks_.end() ? 0 : it->second;
  }

 private:
  mutable std::shared_mutex mutex_;
  std::map<std::string, std::unique_ptr<operator_info>, std::less<>> operators_;
  std::atomic<int> global_fallback_{-1};
  mutable std::mutex fallback_mutex_;
  std::map<std::pair<std::string, std::size_t>, std::size_t> fallbacks_;
  std::function<void(const fallback_event&)> reporter_;
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

namespace detail {
[[noreturn, gnu::cold, gnu::noinline]] inline void inputs_disagree(const operator_info& op,
                                                                   std::size_t first_slot, data_type first,
                                                                   std::size_t slot, data_type other) {
  throw error("operator '" + std::string(op.name()) + "': its inputs disagree on the data type (" +
              std::string(op.inputs()[first_slot]) + " is " + std::string(name_of(first)) + ", " +
              std::string(op.inputs()[slot]) + " is " + std::string(name_of(other)) +
              "); the operator can name the input that decides with data_type_input");
}
[[noreturn, gnu::cold, gnu::noinline]] inline void no_input_data(const operator_info& op) {
  throw error("operator '" + std::string(op.name()) + "': no input holds data, so the data type is unknown");
}

// The data type of the expected kernel, Fluid's IndicateDataType: the deciding input's
// (data_type_input), else the one all inputs that are not exempt from transforms share.
// `slot_tensors(s)` gives the tensors of input slot s (null or empty ones are skipped).
// The one rule behind expected_kernel_key and the executor.
template <class SlotTensors>
data_type major_data_type(const operator_info& op, std::size_t slots, SlotTensors&& slot_tensors) {
  const std::size_t decider = op.data_type_input();
  const bool named = decider < op.inputs().size();
  std::optional<data_type> dtype;
  std::size_t first_slot = 0;
  for (std::size_t s = 0; s < slots; ++s) {
    if (named ? s != decider : op.no_transform(s)) continue;
    for (const Tensor* t : slot_tensors(s)) {
      if (t == nullptr || !t->initialized()) continue;
      if (!dtype) {
        dtype = t->dtype();
        first_slot = s;
      } else if (*dtype != t->dtype()) {
        inputs_disagree(op, first_slot, *dtype, s, t->dtype());
      }
    }
  }
  if (!dtype) no_input_data(op);
  return *dtype;
}
}  // namespace detail

// The expected kernel type: the executor's place (or the operator's own, or an `op_device`
// attribute), the data type of the deciding input or of all inputs (which must agree),
// layout ANY, and the library configuration asks for (use_onednn / use_mkldnn / use_cudnn).
inline kernel_key expected_kernel_key(const operator_info& op, const place& executor_place,
                                      input_tensors inputs,
                                      const attribute_map& attrs = detail::empty_attributes) {
  const std::optional<place> forced = op_device_of(attrs);
  const place where = op.run_on() ? *op.run_on() : forced ? *forced : executor_place;
  const data_type dtype = detail::major_data_type(
      op, inputs.size(), [&](std::size_t s) -> const auto& { return inputs[s]; });
  return {where, dtype, data_layout::any, library_of(attrs, op.name())};
}

// The outcome of kernel selection.
struct kernel_choice {
  kernel_key expected;
  const kernel_entry* entry;
  kernel_key chosen;  // the entry's key on the device the call runs on
  bool fell_back;
};

// Finds the kernel for an expected key: the exact key, preferring the layout the first
// input is in when the expected layout is ANY; else the fallback the policy allows; else an
// exception naming the operator, the key and what is registered.
inline kernel_choice choose_kernel(const operator_info& op, const kernel_key& expected,
                                   data_layout preferred = data_layout::any) {
  auto lookup = [&](const kernel_key& key) -> const kernel_entry* {
    if (key.layout() == data_layout::any && preferred != data_layout::any)
      if (const kernel_entry* e = op.find(key.with_layout(preferred)); e && e->key.layout() == preferred)
        return e;
    return op.find(key);
  };
  auto on_device = [](const kernel_entry* e, const place& where) {
    return e->key.with_place(e->key.place().same_kind(where) ? where : place(e->key.place().kind(), 0));
  };
  if (const kernel_entry* e = lookup(expected)) return {expected, e, on_device(e, expected.place()), false};

  auto& registry = operator_registry::instance();
  if (registry.effective_fallback(op) == fallback_policy::cpu) {
    const kernel_key candidates[] = {expected.with_library(library_type::plain),
                                     expected.with_place(cpu_place),
                                     expected.with_place(cpu_place).with_library(library_type::plain)};
    for (const kernel_key& candidate : candidates) {
      if (const kernel_entry* e = lookup(candidate)) {
        const kernel_key chosen = on_device(e, candidate.place());
        registry.note_fallback({op.name(), expected, chosen});
        return {expected, e, chosen, true};
      }
    }
  }
  throw not_registered("Operator (" + std::string(op.name()) + ") does not have kernel for " +
                       expected.to_string() + "; registered: " + op.registered_keys());
}

// The kernel key an input is transformed to, Fluid's GetKernelTypeForVar: the kernel's
// place and layout with the input's own data type (its cast target when the operator asks
// for a cast) and its own layout when the operator keeps that input's layout; an exempt
// input keeps its own key, so nothing happens to it.
inline kernel_key input_target_key(const operator_info& op, std::size_t slot, const Tensor& input,
                                   const kernel_key& kernel) {
  if (op.no_transform(slot)) return key_of(input);
  return {kernel.place(), op.cast(slot) ? kernel.dtype() : input.dtype(),
          op.keep_layout(slot) ? input.layout() : kernel.layout(), library_type::plain};
}

// What a call would do, for a person: the expected key, the chosen kernel, any fallback, and
// the transform chain of each input.
inline std::string explain(const operator_info& op, const place& executor_place, input_tensors inputs,
                           const attribute_map& attrs = detail::empty_attributes) {
  const kernel_key expected = expected_kernel_key(op, executor_place, inputs, attrs);
  const data_layout preferred =
      !inputs.empty() && !inputs[0].empty() && inputs[0][0] ? inputs[0][0]->layout() : data_layout::any;
  std::string out = "operator '" + std::string(op.name()) + "'\n  expected: " + expected.to_string() + "\n";
  kernel_choice choice;
  try {
    choice = choose_kernel(op, expected, preferred);
  } catch (const not_registered& e) {
    return out + "  kernel:   none (" + e.what() + ")\n";
  }
  out += "  kernel:   " + choice.chosen.to_string() + (choice.fell_back ? " (fallback)" : "") + "\n";
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
        const kernel_key target = input_target_key(op, s, *t, choice.chosen);
        out += plan_transform(key_of(*t), target).describe() + "\n";
      }
    }
  return out;
}

// The dense tensor a variable holds: a LoDTensor's, or a SelectedRows' value; nullptr for
// an empty variable or an array.
inline const Tensor* tensor_of(const Variable& v) {
  if (v.is<LoDTensor>()) return &v.get<LoDTensor>();
  if (v.is<SelectedRows>()) return &v.get<SelectedRows>().value();
  return nullptr;
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
  std::vector<std::vector<const Tensor*>> tensors(inputs.size());
  for (std::size_t s = 0; s < inputs.size(); ++s)
    for (Variable* v : inputs[s]) tensors[s].push_back(v ? tensor_of(*v) : nullptr);
  const kernel_key expected = expected_kernel_key(op, executor_place, tensors, attrs);
  const data_layout preferred =
      !tensors.empty() && !tensors[0].empty() && tensors[0][0] ? tensors[0][0]->layout() : data_layout::any;
  const kernel_choice choice = choose_kernel(op, expected, preferred);

  std::vector<std::unique_ptr<Variable>> temporaries;
  std::vector<kernel_arg> args;
  std::vector<std::uint32_t> input_offsets{0}, output_offsets{0};
  for (std::size_t s = 0; s < inputs.size(); ++s) {
    for (std::size_t i = 0; i < inputs[s].size(); ++i) {
      Variable* v = inputs[s][i];
      const Tensor* t = tensors[s][i];
      if (v != nullptr && t != nullptr && t->initialized()) {
        const kernel_key target = input_target_key(op, s, *t, choice.chosen);
        if (!plan_transform(key_of(*t), target).empty()) {
          temporaries.push_back(std::make_unique<Variable>(v->name()));
          transform_variable(*v, target, *temporaries.back());
          v = temporaries.back().get();
        }
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
  const std::span<kernel_arg> all(args);
  execution_context context(op.name(), op.inputs(), op.outputs(), context_of(choice.chosen.place()),
                            choice.chosen, {all.first(first_output), input_offsets},
                            {all.subspan(first_output), output_offsets}, attrs);
  (*choice.entry)(context);
  return choice;
}

}  // namespace fluidk
