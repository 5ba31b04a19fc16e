// A string-keyed index for things registered rarely and looked up on every call (operators by
// name): readers take no lock and write nothing shared, writers are serialised by their owner.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fluidk::detail {

inline std::uint64_t load8(const char* p) noexcept {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}
inline std::uint64_t load4(const char* p) noexcept {
  std::uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

// A hash of a short name, a word at a time: names are a few to a few dozen bytes, so a
// byte-at-a-time hash (FNV) would cost more than the probe it feeds. Loads of 8 (or 4) bytes
// that overlap at the end cover every length without a loop over the tail.
inline std::uint64_t name_hash(std::string_view name) noexcept {
  auto mix = [](std::uint64_t h, std::uint64_t w) {
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 31);
  };
  const char* p = name.data();
  const std::size_t n = name.size();
  std::uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  if (n >= 8) {
    for (std::size_t i = 0; i + 8 < n; i += 8) h = mix(h, load8(p + i));
    h = mix(h, load8(p + n - 8));
  } else if (n >= 4) {
    h = mix(h, load4(p) | load4(p + n - 4) << 32);
  } else if (n > 0) {
    h = mix(h, std::uint64_t(std::uint8_t(p[0])) | std::uint64_t(std::uint8_t(p[n / 2])) << 8 |
                   std::uint64_t(std::uint8_t(p[n - 1])) << 16);
  }
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 29);
}

// Whether a[0, n) and b[0, n) hold the same bytes, with the loads of name_hash: inline,
// where memcmp would be a call for every lookup.
inline bool same_bytes(const char* a, const char* b, std::size_t n) noexcept {
  if (n >= 8) {
    for (std::size_t i = 0; i + 8 < n; i += 8)
      if (load8(a + i) != load8(b + i)) return false;
    return load8(a + n - 8) == load8(b + n - 8);
  }
  if (n >= 4) return load4(a) == load4(b) && load4(a + n - 4) == load4(b + n - 4);
  return n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1]);
}

// name -> const T*, insert-only. An open-addressing table of atomic entry pointers: a reader
// hashes the name, follows the probe sequence until it meets the name or an empty slot, and
// never blocks. A writer (one at a time: the owner holds its lock) fills an empty slot with a
// release store of a complete entry; past half full it builds a table twice the size and
// publishes it the same way. Readers that are still on an older table see what was there
// when they loaded it, so old tables are kept for the life of the index (all of them
// together are smaller than the current one).
template <class T>
class name_index {
 public:
  name_index() { grow(16); }
  name_index(const name_index&) = delete;
  name_index& operator=(const name_index&) = delete;

  const T* find(std::string_view name) const noexcept {
    const std::uint64_t h = name_hash(name);
    const table* t = current_.load(std::memory_order_acquire);
    for (std::size_t i = std::size_t(h) & t->mask;; i = (i + 1) & t->mask) {
      const entry* e = t->slots[i].load(std::memory_order_acquire);
      if (e == nullptr) return nullptr;
      if (e->hash == h && e->name.size() == name.size() &&
          same_bytes(e->name.data(), name.data(), name.size()))
        return e->value;
    }
  }

  // Adds `name` (which must not be in the index yet). The caller serialises writers.
  void insert(std::string_view name, const T* value) {
    entries_.push_back(std::make_unique<const entry>(entry{name_hash(name), std::string(name), value}));
    const table* t = current_.load(std::memory_order_relaxed);
    if (2 * (entries_.size()) > t->mask + 1) {
      grow(2 * (t->mask + 1));  // the new table already holds every entry, this one too
      return;
    }
    place(*t, entries_.back().get());
  }

  std::size_t size() const noexcept { return entries_.size(); }

 private:
  struct entry {
    std::uint64_t hash;
    std::string name;
    const T* value;
  };
  struct table {
    std::size_t mask;
    std::unique_ptr<std::atomic<const entry*>[]> slots;
  };

  static void place(const table& t, const entry* e) noexcept {
    std::size_t i = std::size_t(e->hash) & t.mask;
    while (t.slots[i].load(std::memory_order_relaxed) != nullptr) i = (i + 1) & t.mask;
    t.slots[i].store(e, std::memory_order_release);
  }

  void grow(std::size_t slots) {
    auto t = std::make_unique<table>(table{slots - 1, std::make_unique<std::atomic<const entry*>[]>(slots)});
    for (std::size_t i = 0; i < slots; ++i) t->slots[i].store(nullptr, std::memory_order_relaxed);
    for (const auto& e : entries_) place(*t, e.get());
    current_.store(t.get(), std::memory_order_release);
    tables_.push_back(std::move(t));
  }

  std::atomic<const table*> current_{nullptr};
  std::vector<std::unique_ptr<table>> tables_;
  std::vector<std::unique_ptr<const entry>> entries_;
};

}  // namespace fluidk::detail
