// The runtime side of an open axis (place kinds, layouts, libraries): the tags a program has
// registered, by id and by name. One class serves the three axes: an id is unique (a second
// tag with another name is an error naming both), names and aliases parse case-insensitively,
// and lookups take no lock (registrations are rare; lookups come with every parse and table
// build).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>
#include <typeinfo>

#include "fluidk/detail/text.hpp"
#include "fluidk/error.hpp"

namespace fluidk::detail {

// Info: a literal type with `id`, `name`, `aliases` (pointer) and `alias_count`, one object
// per tag so that its address is stable. Max: the ids an axis reserves.
template <class Info, std::size_t Max>
class tag_registry {
 public:
  // `what` names the axis in errors ("place kind", "layout", "library"); `core` are the tags
  // the core declares, known before any registration.
  tag_registry(std::string_view what, std::initializer_list<const Info*> core) : what_(what) {
    for (const Info* info : core) {
      tags_[info->id].store(info, std::memory_order_relaxed);
      if (std::size_t(info->id) + 1 > extent_.load(std::memory_order_relaxed))
        extent_.store(std::size_t(info->id) + 1, std::memory_order_relaxed);
    }
  }

  // Adds a tag. The same tag again (the same C++ type, also from another copy of its header
  // in a shared library) is no error; another tag under a taken id is, even of the same name:
  // keys of the two would compare equal and describe different things.
  void add(const Info& info) {
    const std::lock_guard lock(mutex_);
    if (std::size_t(info.id) >= Max)
      throw registration_error(std::string(what_) + " '" + std::string(info.name) + "' declares id " +
                               std::to_string(info.id) + "; ids are below " + std::to_string(Max));
    std::atomic<const Info*>& slot = tags_[info.id];
    const Info* taken = slot.load(std::memory_order_relaxed);
    if (taken != nullptr && *taken->type != *info.type)
      throw registration_error(std::string(what_) + " '" + std::string(info.name) + "' declares id " +
                               std::to_string(info.id) + ", which " + std::string(what_) + " '" +
                               std::string(taken->name) + "' already uses" +
                               (taken->name == info.name ? " (another tag of the same name)" : "") +
                               "; give it an unused id below " + std::to_string(Max));
    for (std::size_t i = 0; i < Max; ++i)
      if (const Info* other = tags_[i].load(std::memory_order_relaxed); other != nullptr && i != info.id) {
        if (names_clash(*other, info))
          throw registration_error(std::string(what_) + " '" + std::string(info.name) + "' (id " +
                                   std::to_string(info.id) + ") shares a name or alias with " +
                                   std::string(what_) + " '" + std::string(other->name) + "' (id " +
                                   std::to_string(other->id) + "); text could not tell them apart");
        // Tags that an attribute asks for (libraries): one attribute selects one tag.
        if constexpr (requires { info.request_attribute_count; })
          for (std::size_t a = 0; a < info.request_attribute_count; ++a)
            for (std::size_t b = 0; b < other->request_attribute_count; ++b)
              if (info.request_attributes[a] == other->request_attributes[b])
                throw registration_error(
                    std::string(what_) + " '" + std::string(info.name) + "' (id " + std::to_string(info.id) +
                    ") is asked for by attribute '" + std::string(info.request_attributes[a]) +
                    "', which asks for " + std::string(what_) + " '" + std::string(other->name) + "' (id " +
                    std::to_string(other->id) + ") already; give it an attribute of its own");
      }
    if (taken == nullptr) {
      slot.store(&info, std::memory_order_release);
      if (std::size_t(info.id) + 1 > extent_.load(std::memory_order_relaxed))
        extent_.store(std::size_t(info.id) + 1, std::memory_order_release);
    }
  }

  const Info* find(std::size_t id) const noexcept {
    return id < Max ? tags_[id].load(std::memory_order_acquire) : nullptr;
  }

  const Info* find(std::string_view word) const noexcept {
    for (std::size_t i = 0; i < Max; ++i)
      if (const Info* info = tags_[i].load(std::memory_order_acquire);
          info != nullptr && answers_to(*info, word))
        return info;
    return nullptr;
  }

  // One more than the largest registered id: what dense tables over this axis are sized by.
  std::size_t extent() const noexcept { return extent_.load(std::memory_order_acquire); }

  // The registered names, in id order, for error messages.
  std::string names() const { return join(false); }

  // Every word that parses: the names and their aliases, for error messages.
  std::string words() const { return join(true); }

 private:
  std::string join(bool with_aliases) const {
    std::string out;
    for (std::size_t i = 0; i < Max; ++i)
      if (const Info* info = tags_[i].load(std::memory_order_acquire)) {
        if (!out.empty()) out += ", ";
        out += info->name;
        for (std::size_t a = 0; with_aliases && a < info->alias_count; ++a) (out += ", ") += info->aliases[a];
      }
    return out;
  }
  static bool answers_to(const Info& info, std::string_view word) noexcept {
    if (iequals(info.name, word)) return true;
    for (std::size_t a = 0; a < info.alias_count; ++a)
      if (iequals(info.aliases[a], word)) return true;
    return false;
  }
  static bool names_clash(const Info& a, const Info& b) noexcept {
    if (answers_to(a, b.name)) return true;
    for (std::size_t i = 0; i < b.alias_count; ++i)
      if (answers_to(a, b.aliases[i])) return true;
    return false;
  }

  std::string_view what_;
  std::mutex mutex_;
  std::array<std::atomic<const Info*>, Max> tags_{};
  std::atomic<std::size_t> extent_{0};
};

// The aliases a tag declares (`static constexpr std::array<std::string_view, N> aliases`),
// as a pointer and a count; none when it declares none.
template <class T>
constexpr std::size_t alias_count_of() {
  if constexpr (requires { T::aliases.size(); })
    return T::aliases.size();
  else
    return 0;
}
template <class T>
constexpr const std::string_view* aliases_of() {
  if constexpr (requires { T::aliases.data(); })
    return T::aliases.data();
  else
    return nullptr;
}

}  // namespace fluidk::detail
