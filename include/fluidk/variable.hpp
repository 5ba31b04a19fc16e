// Variable: a named slot in a scope that holds one LoDTensor, SelectedRows, LoDTensorArray or
// StepScopes (the scopes a control-flow operator ran its body in). Its kind is fixed once set; every mutable
// access bumps a version counter, and writes to the bytes bump the version of their storage, so that cached
// copies of it can tell they are stale.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "fluidk/detail/gone_notice.hpp"
#include "fluidk/lod_tensor.hpp"
#include "fluidk/selected_rows.hpp"

namespace fluidk {

class Scope;

// The scopes a control-flow operator ran its sub-block in, one per step, in order (a while's
// StepScopes output, a conditional_block's Scope; fluidk/control_flow.hpp). They are child
// scopes of the scope the operator ran in, which owns them: the executor drops them when the
// operator runs again, and so does deleting that scope's children.
struct StepScopes {
  std::vector<Scope*> scopes;
  // Each listed scope's Scope::serial(), in the same order: a scope that is gone (deleted with
  // an enclosing loop's step, or with its parent's children) is told apart from a new one that
  // took its address. (The executor's memory count reads only the scopes both name.)
  std::vector<std::uint64_t> serials = {};
};

enum class var_kind : std::uint8_t { empty, lod_tensor, selected_rows, lod_tensor_array, step_scopes };

constexpr std::string_view name_of(var_kind kind) noexcept {
  switch (kind) {
    case var_kind::lod_tensor:
      return "LoDTensor";
    case var_kind::selected_rows:
      return "SelectedRows";
    case var_kind::lod_tensor_array:
      return "LoDTensorArray";
    case var_kind::step_scopes:
      return "StepScopes";
    case var_kind::empty:
      break;
  }
  return "nothing";
}

template <class T>
concept VariableContent = std::same_as<T, LoDTensor> || std::same_as<T, SelectedRows> ||
    std::same_as<T, LoDTensorArray> || std::same_as<T, StepScopes>;

template <VariableContent T>
inline constexpr var_kind var_kind_of = std::same_as<T, LoDTensor>        ? var_kind::lod_tensor
                                        : std::same_as<T, SelectedRows>   ? var_kind::selected_rows
                                        : std::same_as<T, LoDTensorArray> ? var_kind::lod_tensor_array
                                                                          : var_kind::step_scopes;

class Variable {
 public:
  Variable() = default;
  explicit Variable(std::string name) : name_(std::move(name)) {}
  Variable(const Variable&) = delete;
  Variable& operator=(const Variable&) = delete;
  // The caches that copied it are told, so that they drop their copies at once rather than
  // keep them until they are the least recently used (detail/gone_notice.hpp).
  ~Variable() { gone_.tell(id_); }

  const std::string& name() const noexcept { return name_; }
  var_kind kind() const noexcept { return var_kind(content_.index()); }
  bool initialized() const noexcept { return kind() != var_kind::empty; }

  template <VariableContent T>
  bool is() const noexcept {
    return std::holds_alternative<T>(content_);
  }

  // Read access: the variable must hold a T.
  template <VariableContent T>
  const T& get() const {
    if (const T* value = std::get_if<T>(&content_)) return *value;
    wrong_kind(var_kind_of<T>, ", not ", "");
  }

  // Write access: makes the variable a T if it is empty; it must not hold another kind.
  // Counts as a write (the version moves on).
  template <VariableContent T>
  T& get_mutable() {
    T* value = std::get_if<T>(&content_);
    if (value == nullptr) [[unlikely]] {
      if (content_.index() != 0)
        wrong_kind(var_kind_of<T>, ", and cannot become ", ": a variable's kind is fixed once set");
      value = &content_.template emplace<T>();
    }
    // A load and a store, not a locked add, as for a storage's version (detail::buffer::touch):
    // every kernel output goes through here, and two threads writing one variable at once
    // race on its content anyway.
    version_.store(version_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    return *value;
  }

  // Sets the content, checking the kind as get_mutable() does.
  template <VariableContent T>
  T& set(T value) {
    T& slot = get_mutable<T>();
    slot = std::move(value);
    return slot;
  }

  // Increases on every write access to the variable (get_mutable, set, mark_modified): its
  // content was replaced or its metadata (shape, LoD, rows) may have changed. Writes to the
  // bytes move the version of the storage instead (Tensor::version()), which every alias and
  // view of them shares.
  std::uint64_t version() const noexcept { return version_.load(std::memory_order_acquire); }

  // The content changed by a route that no accessor saw, such as a pointer kept from an
  // earlier access: moves this variable's version and that of every storage it holds.
  void mark_modified() noexcept {
    version_.fetch_add(1, std::memory_order_acq_rel);
    for_each_tensor([](const Tensor& t) { t.mark_modified(); });
  }

  // Calls f(const Tensor&) for each tensor the content holds: a LoDTensor's, a SelectedRows'
  // value, every element of a LoDTensorArray (nothing for an empty variable or StepScopes).
  template <class F>
  void for_each_tensor(F&& f) const {
    if (const auto* t = std::get_if<LoDTensor>(&content_)) {
      f(static_cast<const Tensor&>(*t));
    } else if (const auto* rows = std::get_if<SelectedRows>(&content_)) {
      f(rows->value());
    } else if (const auto* array = std::get_if<LoDTensorArray>(&content_)) {
      for (const LoDTensor& element : *array) f(static_cast<const Tensor&>(element));
    }
  }

  // Out of line and cold: every kernel reads and writes variables, the messages are rare.
  [[noreturn, gnu::cold, gnu::noinline]] void wrong_kind(var_kind asked, const char* relation,
                                                         const char* why) const {
    throw error("variable '" + name_ + "' holds " + std::string(name_of(kind())) + relation +
                std::string(name_of(asked)) + why);
  }

  // Unique for the life of the process, unlike the address: a cache keyed by it cannot
  // mistake a new variable for a destroyed one that lived at the same address.
  std::uint64_t id() const noexcept { return id_; }

  // What a cache keyed by id() watches to hear of its destruction (detail::gone_list).
  const detail::gone_notice<Variable>& gone_notice() const noexcept { return gone_; }

 private:
  // The content and its version first, the name last: kernels and the executor read the
  // first two on every call, the name only in messages.
  std::variant<std::monostate, LoDTensor, SelectedRows, LoDTensorArray, StepScopes> content_;
  std::atomic<std::uint64_t> version_{0};
  std::uint64_t id_ = next_id();
  detail::gone_notice<Variable> gone_;
  std::string name_;

  static std::uint64_t next_id() noexcept {
    static std::atomic<std::uint64_t> counter{0};
    return counter.fetch_add(1, std::memory_order_relaxed) + 1;
  }
};

}  // namespace fluidk
