// Caches that keep copies of an object key them by the object's id, which is never reused: the
// executor's transfer cache keeps a variable's content moved or transformed, the oneDNN cache
// keeps a storage's bytes reordered for a primitive. A copy of an object that is gone is never
// served again, and would hold its bytes (device memory, for a copy on a device) until the
// cache's least-recently-used rule drops it. So the object tells the caches that copied it, as
// it is destroyed, on whatever thread destroys it (gone_notice), and each cache drops those
// copies at its next use, while it holds whatever guards it (gone_list::take). Each copy kept
// or dropped, and each copied object's destruction, takes one process-wide lock per kind.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace fluidk::detail {

template <class Kind>
class gone_notice;

// The ids of the objects of one kind (Kind: the object's type, a tag) whose copies a cache
// holds, and of those that are gone since the cache last took them. A cache holds one, at an
// address that does not change while it has copies, and calls watch() as it keeps a copy of an
// object and unwatch() as it drops one (from one thread at a time: the cache's own, or under
// its lock). Only a cache that holds a copy of an object hears of it: one that sits unused
// collects no more ids than it holds copies.
template <class Kind>
class gone_list {
 public:
  gone_list() = default;
  gone_list(const gone_list&) = delete;
  gone_list& operator=(const gone_list&) = delete;
  ~gone_list() {
    if (!listed_) return;
    registry& r = registry::instance();
    const std::lock_guard lock(r.mutex);
    std::erase(r.lists, this);
  }

  // As a copy of object `id`, whose notice this is, is kept. Each watch is undone by one
  // unwatch, or by the object's destruction.
  void watch(const gone_notice<Kind>& notice, std::uint64_t id) {
    registry& r = registry::instance();
    const std::lock_guard lock(r.mutex);
    if (!listed_) {
      r.lists.push_back(this);
      listed_ = true;
    }
    ++held_[id];
    gone_notice<Kind>::told.store(&tell, std::memory_order_release);
    notice.copied_.store(true, std::memory_order_relaxed);
  }
  // As a copy kept through watch() is dropped (nothing for an object already told gone).
  void unwatch(std::uint64_t id) noexcept {
    const std::lock_guard lock(registry::instance().mutex);
    if (const auto it = held_.find(id); it != held_.end() && --it->second == 0) held_.erase(it);
  }
  // Every copy dropped at once.
  void unwatch_all() noexcept {
    const std::lock_guard lock(registry::instance().mutex);
    held_.clear();
  }

  // Whether take() has ids to give: one load, for the cache's every use.
  bool any() const noexcept { return any_.load(std::memory_order_acquire); }

  // The ids told since the last call. The cache drops their copies after it: with no lock of
  // this kind held, so that an object a dropped copy holds may tell its own caches.
  std::vector<std::uint64_t> take() {
    std::vector<std::uint64_t> ids;
    const std::lock_guard lock(registry::instance().mutex);
    ids.swap(ids_);
    any_.store(false, std::memory_order_relaxed);
    return ids;
  }

 private:
  friend class gone_notice<Kind>;

  // Never destroyed: an object may be destroyed after the statics are.
  struct registry {
    std::mutex mutex;
    std::vector<gone_list*> lists;
    static registry& instance() {
      static registry* const r = new registry;
      return *r;
    }
  };

  static void tell(std::uint64_t id) noexcept {
    registry& r = registry::instance();
    const std::lock_guard lock(r.mutex);
    for (gone_list* list : r.lists)
      if (list->held_.erase(id) != 0) try {
          list->ids_.push_back(id);
          list->any_.store(true, std::memory_order_release);
        } catch (const std::bad_alloc&) {  // its copies stay until they are the least recently used
        }
  }

  std::unordered_map<std::uint64_t, std::size_t> held_;  // copies kept, by object; under the lock
  std::vector<std::uint64_t> ids_;                       // told gone; under the lock
  std::atomic<bool> any_{false};
  bool listed_ = false;  // in the registry's lists
};

// Held by an object that caches copy (a Variable, a storage), whose destructor calls tell()
// with its id. One flag: nothing to do for an object never copied. (The lists are reached
// through a pointer that the first watch() sets, so that a file that only destroys such
// objects compiles nothing of them.)
template <class Kind>
class gone_notice {
 public:
  gone_notice() = default;
  gone_notice(const gone_notice&) = delete;
  gone_notice& operator=(const gone_notice&) = delete;

  void tell(std::uint64_t id) const noexcept {
    if (copied_.load(std::memory_order_relaxed))
      if (const auto lists = told.load(std::memory_order_acquire)) lists(id);
  }

 private:
  friend class gone_list<Kind>;
  static inline std::atomic<void (*)(std::uint64_t) noexcept> told{nullptr};
  mutable std::atomic<bool> copied_{false};
};

}  // namespace fluidk::detail
