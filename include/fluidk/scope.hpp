// Scope: names to variables, with child scopes owned by their parent and lookup that goes
// up through the parents. Safe to share across threads: executors running on sibling
// scopes may read a common parent (weights) and add their own children concurrently.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fluidk/detail/runtime_linkage.hpp"
#include "fluidk/variable.hpp"

#if FLUIDK_DETAIL_RUNTIME_HERE
#include <algorithm>
#endif

namespace fluidk {

namespace detail {
// Lets lookups by string_view find std::string keys without building a string.
struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
}  // namespace detail

class Scope {
 public:
  Scope() = default;
  Scope(const Scope&) = delete;
  ~Scope();
  Scope& operator=(const Scope&) = delete;

  const Scope* parent() const noexcept { return parent_; }
  // Unique for the life of the process, unlike the address (StepScopes::serials).
  std::uint64_t serial() const noexcept { return serial_; }

  // The variable `name` of this scope, made empty if it does not exist here yet (a variable
  // of the same name in a parent is shadowed, not touched).
  Variable& var(const std::string& name);

  // Looks in this scope, then in each parent; nullptr when no scope has it.
  Variable* find_var(std::string_view name) const {
    for (const Scope* scope = this; scope != nullptr; scope = scope->parent_)
      if (Variable* v = scope->find_local(name)) return v;
    return nullptr;
  }
  Variable* find_local(std::string_view name) const;

  // Like find_var, but a missing name is an error naming the scopes searched.
  Variable& get(std::string_view name) const;

  bool has_local(std::string_view name) const { return find_local(name) != nullptr; }

  std::vector<std::string> local_var_names() const;

  // Removes a variable of this scope; false when it has none of that name.
  bool erase(std::string_view name);

  // Moves on whenever a variable is made in or erased from this scope or one of its parents,
  // that is whenever a name may find another variable than before (a new one that shadows a
  // parent's, or one made again after an erase). What keeps variables found by name (a
  // prepared program) finds them again when this has moved.
  std::uint64_t names_version() const noexcept {
    std::uint64_t version = 0;
    for (const Scope* scope = this; scope != nullptr; scope = scope->parent_)
      version += scope->names_changed_.load(std::memory_order_relaxed);
    return version;
  }

  // A new child scope, owned by this one and destroyed with it or by delete_scope().
  Scope& new_scope();

  // Destroys a child scope and everything under it.
  void delete_scope(Scope& child);

  // Destroys every child scope.
  void drop_kids();

  std::size_t kid_count() const;

  // Calls f(const Variable&) for each variable of this scope and of every scope under it (the
  // executor's memory count of kept step scopes). f must not make or erase variables or scopes.
  template <class F>
  void for_each_variable(F&& f) const {
    {
      const std::shared_lock lock(vars_mutex_);
      for (const auto& [name, v] : vars_) f(static_cast<const Variable&>(*v));
    }
    for_each_kid([&](const Scope& kid) { kid.for_each_variable(f); });
  }
  // Calls f(const Scope&) for each child scope, under the lock of this scope's children: f must
  // not make or delete a child of this scope.
  template <class F>
  void for_each_kid(F&& f) const {
    const std::lock_guard lock(kids_mutex_);
    for (const std::unique_ptr<Scope>& kid : kids_) f(static_cast<const Scope&>(*kid));
  }

 private:
  explicit Scope(const Scope* parent) : parent_(parent) {}

  const Scope* parent_ = nullptr;
  std::uint64_t serial_ = next_serial();
  static std::uint64_t next_serial() noexcept {
    static std::atomic<std::uint64_t> counter{0};
    return counter.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  mutable std::shared_mutex vars_mutex_;
  std::unordered_map<std::string, std::unique_ptr<Variable>, detail::string_hash, std::equal_to<>> vars_;
  std::atomic<std::uint64_t> names_changed_{0};  // variables made or erased here (names_version)
  mutable std::mutex kids_mutex_;
  std::vector<std::unique_ptr<Scope>> kids_;
};

// Compiled where the runtime is (fluidk/detail/runtime_linkage.hpp).
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE Scope::~Scope() = default;

FLUIDK_DETAIL_RUNTIME_LINKAGE Variable& Scope::var(const std::string& name) {
  {
    const std::shared_lock lock(vars_mutex_);
    if (auto it = vars_.find(name); it != vars_.end()) return *it->second;
  }
  // Made before the map is asked for its slot: an allocation that fails leaves no empty
  // entry behind for the next lookup to return.
  auto made = std::make_unique<Variable>(name);
  const std::unique_lock lock(vars_mutex_);
  const auto [it, inserted] = vars_.try_emplace(name, std::move(made));
  if (inserted) names_changed_.fetch_add(1, std::memory_order_relaxed);
  return *it->second;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE Variable* Scope::find_local(std::string_view name) const {
  const std::shared_lock lock(vars_mutex_);
  const auto it = vars_.find(name);
  return it == vars_.end() ? nullptr : it->second.get();
}

FLUIDK_DETAIL_RUNTIME_LINKAGE Variable& Scope::get(std::string_view name) const {
  if (Variable* v = find_var(name)) return *v;
  std::size_t depth = 0;
  for (const Scope* scope = this; scope != nullptr; scope = scope->parent_) ++depth;
  throw error("no variable '" + std::string(name) + "' in this scope or its " + std::to_string(depth - 1) +
              " parent scope(s)");
}

FLUIDK_DETAIL_RUNTIME_LINKAGE std::vector<std::string> Scope::local_var_names() const {
  const std::shared_lock lock(vars_mutex_);
  std::vector<std::string> names;
  names.reserve(vars_.size());
  for (const auto& [name, _] : vars_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE bool Scope::erase(std::string_view name) {
  const std::unique_lock lock(vars_mutex_);
  const auto it = vars_.find(name);
  if (it == vars_.end()) return false;
  vars_.erase(it);
  names_changed_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE Scope& Scope::new_scope() {
  auto child = std::unique_ptr<Scope>(new Scope(this));
  const std::lock_guard lock(kids_mutex_);
  kids_.push_back(std::move(child));
  return *kids_.back();
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Scope::delete_scope(Scope& child) {
  std::unique_ptr<Scope> doomed;
  {
    const std::lock_guard lock(kids_mutex_);
    const auto it =
        std::find_if(kids_.begin(), kids_.end(), [&](const auto& kid) { return kid.get() == &child; });
    if (it == kids_.end()) throw error("delete_scope: the scope given is not a child of this scope");
    doomed = std::move(*it);
    kids_.erase(it);
  }
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Scope::drop_kids() {
  std::vector<std::unique_ptr<Scope>> doomed;
  const std::lock_guard lock(kids_mutex_);
  doomed.swap(kids_);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE std::size_t Scope::kid_count() const {
  const std::lock_guard lock(kids_mutex_);
  return kids_.size();
}
#endif

}  // namespace fluidk
