// The runtime registry of operators, with no Hana: per operator, its slots, its rules (as
// the constexpr functions of kernel_choice.hpp read them), its kernels as type-erased entries
// and a dense table, indexed by the expected key's fields, that memoises rule 2 for both
// fallback policies; the registry finds operators by name without a lock, keeps the global
// fallback policy and reports fallbacks once per operator and key. register_operator<Op>()
// (fluidk/runtime_dispatch.hpp) fills it from an operator's declaration; the executor and
// the runtime calls (fluidk/runtime_call.hpp) need only this.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "fluidk/detail/fallback_log.hpp"
#include "fluidk/detail/name_index.hpp"
#include "fluidk/detail/runtime_linkage.hpp"
#include "fluidk/error.hpp"
#include "fluidk/execution_context.hpp"
#include "fluidk/kernel_choice.hpp"

namespace fluidk {

// One registered kernel: its key and how to call it.
struct kernel_entry {
  kernel_key key;
  void (*call)(const void* kernel, execution_context& context);
  const void* kernel;

  // An error the kernel lets out names the operator and the kernel (rethrow_naming_operator).
  void operator()(execution_context& context) const;
};

class operator_info;
class OpDesc;
class BlockDesc;

// An operator's InferVarType: sets the kinds (and data types) of its outputs in the block.
using infer_var_type_function = void (*)(const OpDesc& op, BlockDesc& block);

// What runs an operator: its kernels (none), or the executor, which runs its sub-block (the
// control-flow operators of fluidk/control_flow.hpp, which have no kernels).
enum class control_kind : std::uint8_t { none, while_loop, conditional_block };

// The runtime face of one operator type.
class operator_info {
 public:
  // The parts of an operator, as register_operator<Op>() (fluidk/runtime_dispatch.hpp) reads
  // them off its declaration: kernels[i] has key rules.keys[i].
  operator_info(std::string_view name, std::span<const std::string_view> inputs,
                std::span<const std::string_view> outputs, const selection_rules& rules,
                std::string_view data_type_attribute, const std::type_info& type, std::string (*type_name)(),
                infer_var_type_function infer_var_type, std::vector<kernel_entry> kernels,
                control_kind control = control_kind::none);
  // The most kernels an operator may have (the runtime table holds 16-bit indices).
  static constexpr std::size_t max_kernels = 0xfffe;

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
  // Whether the executor runs the operator's sub-block instead of a kernel.
  control_kind control() const noexcept { return control_; }
  // The C++ type registered under the name (for registration errors).
  const std::type_info& type() const noexcept { return *type_; }
  std::string type_name() const { return type_name_(); }

  // Rule 2 of kernel_choice.hpp (choose_registered_kernel) for an expected key and policy:
  // the index of the kernel in kernels(), selection_rules::none when there is none, and
  // whether that was a fallback. Memoised per place kind in a table indexed by the key's
  // ordinal within its kind, sized by the largest layout and library ids registered when it
  // was built: after the first call for a kind, an atomic load, a bounds check and two reads.
  struct match {
    std::size_t index;
    bool fell_back;
  };
  match lookup(const kernel_key& expected, fallback_policy policy) const;

  std::string registered_keys() const;

  ~operator_info();
  operator_info(const operator_info&) = delete;
  operator_info& operator=(const operator_info&) = delete;

 private:
  static constexpr std::uint16_t no_entry = 0xffff;
  static constexpr std::uint16_t unknown = 0xfffe;  // an id no layout or library had at the build
  struct table_entry {
    std::uint16_t exact = no_entry;              // fallback_policy::strict
    std::uint16_t library_fallback = no_entry;   // fallback_policy::none
    std::uint16_t with_cpu_fallback = no_entry;  // fallback_policy::cpu
  };
  // The table of one place kind, indexed by the key's ordinal within its kind (layout id,
  // library id, data type): up to the largest registered layout and library, the entries in
  // the same allocation as the size (one pointer to follow, not two).
  struct subtable {
    std::size_t size = 0;
    std::size_t layouts = 0, libraries = 0;  // the registries' extents at the build
    table_entry* entries() noexcept { return reinterpret_cast<table_entry*>(this + 1); }
    const table_entry* entries() const noexcept { return reinterpret_cast<const table_entry*>(this + 1); }

    static subtable* create(std::size_t layouts, std::size_t libraries) {
      const std::size_t n =
          layouts == 0 || libraries == 0 ? 0 : ((layouts - 1) * max_libraries + libraries) * data_type_count;
      void* memory = ::operator new(sizeof(subtable) + n * sizeof(table_entry));
      auto* sub = new (memory) subtable{n, layouts, libraries};
      std::uninitialized_default_construct_n(sub->entries(), n);
      return sub;
    }
    static void destroy(const subtable* sub) noexcept {
      if (sub != nullptr) ::operator delete(const_cast<subtable*>(sub));
    }
  };
  static_assert(alignof(table_entry) <= alignof(subtable) && std::is_trivially_destructible_v<table_entry>);

  match choose(const kernel_key& expected, fallback_policy policy) const;

  // A key the table does not answer: its layout or library was registered after the table was
  // built (the table is rebuilt to take it in), or never registered (chosen directly).
  match lookup_outside(const kernel_key& expected, fallback_policy policy, const subtable* seen) const;

  // Fills the table of one place kind by asking rule 2 for every key of that kind, over the
  // layouts and libraries registered now. Rebuilds it when `stale` is the one in place and
  // more have been registered since; a replaced table is kept until the operator goes, as
  // lookups may still read it.
  const subtable& build_table(const place_kind_info& kind, const subtable* stale) const;

  std::string_view name_;
  std::span<const std::string_view> inputs_, outputs_;
  selection_rules rules_;
  std::string_view data_type_attribute_;
  const std::type_info* type_ = nullptr;
  std::string (*type_name_)() = nullptr;
  infer_var_type_function infer_var_type_ = nullptr;
  std::vector<kernel_entry> entries_;
  control_kind control_ = control_kind::none;
  mutable std::mutex table_mutex_;
  mutable std::array<std::atomic<const subtable*>, max_place_kinds> tables_{};
  mutable std::vector<const subtable*> retired_;  // replaced tables, freed with the operator
};

// The operators known at run time, each registered once with register_operator<Op>().
class operator_registry {
 public:
  // Inline, so that a call's lookup does not pay a call for it.
  operator_registry();
  ~operator_registry();
  operator_registry(const operator_registry&) = delete;
  operator_registry& operator=(const operator_registry&) = delete;

  [[gnu::always_inline]] static operator_registry& instance() {
    static operator_registry registry;
    return registry;
  }

  // Registers an operator under `name`, made by `make` the first time (register_operator<Op>()
  // in fluidk/runtime_dispatch.hpp gives these for a declared operator type); registering the
  // same type again returns the same info. Another type under a name already taken is a
  // registration_error naming both.
  const operator_info& add(std::string_view name, const std::type_info& type, std::string (*type_name)(),
                           std::unique_ptr<operator_info> (*make)());

  // The operator registered under `name`, or nullptr. Takes no lock: a name index that
  // registrations publish atomically (detail::name_index), so that a by-name call costs a hash
  // and a probe even while another thread registers.
  const operator_info* find(std::string_view name) const;

  const operator_info& get(std::string_view name) const;

  std::string names() const;

  // Every registered (operator, kernel key), in name and key order.
  std::vector<std::pair<std::string, kernel_key>> list() const;

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

  // Called once per (operator, expected key) that falls back, on either path; by default one
  // line on stderr. The reporter runs outside every lock: it may call back into the registry.
  void set_fallback_reporter(std::function<void(const fallback_event&)> reporter);
  void note_fallback(const fallback_event& event) { detail::fallback_log::instance().note(event); }
  // How many calls fell back, on either path (the static path counts too).
  std::size_t fallback_count(std::string_view op, const kernel_key& expected) const;

 private:
  // Registration and listing: the map owns the operators, in name order, under the mutex;
  // lookups go through the index.
  mutable std::shared_mutex mutex_;
  std::map<std::string, std::unique_ptr<operator_info>, std::less<>> operators_;
  detail::name_index<operator_info> index_;
  std::atomic<int> global_fallback_{-1};
};

// Compiled where the runtime is (fluidk/detail/runtime_linkage.hpp): a file that includes the
// registry to name its types instantiates none of its tables, maps and name index.
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE operator_registry::operator_registry() = default;
FLUIDK_DETAIL_RUNTIME_LINKAGE operator_registry::~operator_registry() = default;

FLUIDK_DETAIL_RUNTIME_LINKAGE operator_info::operator_info(
    std::string_view name, std::span<const std::string_view> inputs,
    std::span<const std::string_view> outputs, const selection_rules& rules,
    std::string_view data_type_attribute, const std::type_info& type, std::string (*type_name)(),
    infer_var_type_function infer_var_type, std::vector<kernel_entry> kernels, control_kind control)
    : name_(name),
      inputs_(inputs),
      outputs_(outputs),
      rules_(rules),
      data_type_attribute_(data_type_attribute),
      type_(&type),
      type_name_(type_name),
      infer_var_type_(infer_var_type),
      entries_(std::move(kernels)),
      control_(control) {
  if (entries_.size() >= no_entry)
    throw registration_error("operator '" + std::string(name_) + "' has " + std::to_string(entries_.size()) +
                             " kernels; at most " + std::to_string(no_entry - 1) + " are supported");
}

FLUIDK_DETAIL_RUNTIME_LINKAGE operator_info::match operator_info::lookup(const kernel_key& expected,
                                                                         fallback_policy policy) const {
  const subtable* sub = tables_[expected.place().kind_id()].load(std::memory_order_acquire);
  if (sub == nullptr) [[unlikely]]
    sub = &build_table(expected.place().kind(), nullptr);
  const std::size_t i = expected.ordinal_in_kind();
  if (i >= sub->size) [[unlikely]]
    return lookup_outside(expected, policy, sub);
  const table_entry& e = sub->entries()[i];
  if (e.exact == unknown) [[unlikely]]
    return lookup_outside(expected, policy, sub);
  const std::uint16_t k = policy == fallback_policy::cpu      ? e.with_cpu_fallback
                          : policy == fallback_policy::strict ? e.exact
                                                              : e.library_fallback;
  return {k == no_entry ? selection_rules::none : std::size_t(k), e.exact == no_entry && k != no_entry};
}

FLUIDK_DETAIL_RUNTIME_LINKAGE std::string operator_info::registered_keys() const {
  std::string out;
  for (const kernel_entry& e : entries_) out += (out.empty() ? "" : ", ") + e.key.to_string();
  return out.empty() ? "none" : out;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE operator_info::~operator_info() {
  for (auto& t : tables_) subtable::destroy(t.load(std::memory_order_relaxed));
  for (const subtable* t : retired_) subtable::destroy(t);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE operator_info::match operator_info::choose(const kernel_key& expected,
                                                                         fallback_policy policy) const {
  const std::size_t exact = choose_registered_kernel(rules_.keys, expected, fallback_policy::strict).index;
  const std::size_t i = choose_registered_kernel(rules_.keys, expected, policy).index;
  return {i, exact == selection_rules::none && i != selection_rules::none};
}

FLUIDK_DETAIL_RUNTIME_LINKAGE operator_info::match operator_info::lookup_outside(const kernel_key& expected,
                                                                                 fallback_policy policy,
                                                                                 const subtable* seen) const {
  const subtable& sub = build_table(expected.place().kind(), seen);
  const std::size_t i = expected.ordinal_in_kind();
  if (i < sub.size && sub.entries()[i].exact != unknown) return lookup(expected, policy);
  return choose(expected, policy);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE const operator_info::subtable& operator_info::build_table(
    const place_kind_info& kind, const subtable* stale) const {
  const std::lock_guard lock(table_mutex_);
  std::atomic<const subtable*>& slot = tables_[kind.id];
  const subtable* built = slot.load(std::memory_order_acquire);
  const auto& layouts = detail::layout_registry();
  const auto& libraries = detail::library_registry();
  if (built != nullptr &&
      (built != stale || (built->layouts >= layouts.extent() && built->libraries >= libraries.extent())))
    return *built;
  retired_.reserve(retired_.size() + 1);  // so that keeping the old table cannot fail below
  subtable* sub = subtable::create(layouts.extent(), libraries.extent());
  const place where(kind, 0);
  for (std::size_t i = 0; i < sub->size; ++i) {
    const layout_info* layout = layouts.find(i / data_type_count / max_libraries);
    const library_info* library = libraries.find(i / data_type_count % max_libraries);
    if (layout == nullptr || library == nullptr) {
      sub->entries()[i] = {unknown, unknown, unknown};
      continue;
    }
    const kernel_key key(where, data_type(i % data_type_count), data_layout(*layout), library_type(*library));
    auto index = [&](fallback_policy policy) {
      const std::size_t k = choose_registered_kernel(rules_.keys, key, policy).index;
      return k == selection_rules::none ? no_entry : std::uint16_t(k);
    };
    sub->entries()[i] = {index(fallback_policy::strict), index(fallback_policy::none),
                         index(fallback_policy::cpu)};
  }
  if (built != nullptr) retired_.push_back(built);
  slot.store(sub, std::memory_order_release);
  return *sub;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE const operator_info& operator_registry::add(
    std::string_view name, const std::type_info& type, std::string (*type_name)(),
    std::unique_ptr<operator_info> (*make)()) {
  const std::unique_lock lock(mutex_);
  auto& slot = operators_[std::string(name)];
  if (!slot) {
    slot = make();
    index_.insert(name, slot.get());
  } else if (slot->type() != type) {
    throw registration_error("operator name '" + std::string(name) + "' is taken by " + slot->type_name() +
                             "; cannot register " + type_name() + " under it");
  }
  return *slot;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE const operator_info* operator_registry::find(std::string_view name) const {
  detail::startup_errors::instance().check();
  return index_.find(name);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE const operator_info& operator_registry::get(std::string_view name) const {
  if (const operator_info* op = find(name)) return *op;
  throw not_registered("unknown operator '" + std::string(name) + "'; registered: " + names());
}

FLUIDK_DETAIL_RUNTIME_LINKAGE std::string operator_registry::names() const {
  const std::shared_lock lock(mutex_);
  std::string out;
  for (const auto& [name, _] : operators_) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "none" : out;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE std::vector<std::pair<std::string, kernel_key>> operator_registry::list()
    const {
  const std::shared_lock lock(mutex_);
  std::vector<std::pair<std::string, kernel_key>> out;
  for (const auto& [name, op] : operators_)
    for (const kernel_entry& e : op->kernels()) out.emplace_back(name, e.key);
  std::sort(out.begin(), out.end());
  return out;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void operator_registry::set_fallback_reporter(
    std::function<void(const fallback_event&)> reporter) {
  detail::fallback_log::instance().set_reporter(std::move(reporter));
}

FLUIDK_DETAIL_RUNTIME_LINKAGE std::size_t operator_registry::fallback_count(
    std::string_view op, const kernel_key& expected) const {
  return detail::fallback_log::instance().count(op, expected);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void kernel_entry::operator()(execution_context& context) const {
  try {
    detail::run_kernel([this](execution_context& c) { call(kernel, c); }, context);
  } catch (...) {
    detail::rethrow_naming_operator(context);
  }
}
#endif

inline const operator_info& find_operator(std::string_view name) {
  return operator_registry::instance().get(name);
}
}  // namespace fluidk
