// Compute libraries a kernel can be written with on its place. The axis is open the way
// places are: the core declares PLAIN (plain code); a backend declares its libraries and the
// program attributes that ask for them, and registers them from its header (oneDNN's comes
// with fluidk/devices/onednn_tags.hpp, cuDNN's with fluidk/devices/cudnn_tags.hpp).
#pragma once

#include <array>
#include <compare>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <typeinfo>

#include "fluidk/detail/runtime_linkage.hpp"
#include "fluidk/detail/tag_registry.hpp"
#include "fluidk/error.hpp"

namespace fluidk {

using library_id = std::uint8_t;

// Library ids are below this: kernel-key ordinals reserve room for this many libraries.
inline constexpr std::size_t max_libraries = 8;

// A library tag declares:
//   using library_tag = itself;
//   static constexpr library_id id;           // unique, below max_libraries; plain is 0
//   static constexpr std::string_view name;   // printed in kernel keys
// and optionally
//   static constexpr std::array<std::string_view, N> aliases;             // for parsing
//   static constexpr std::array<std::string_view, N> request_attributes;  // bool attributes
//       of an operator that ask for this library (use_cudnn); the lowest id asked for wins
template <class T>
concept Library = requires {
  typename T::library_tag;
  { T::id } -> std::convertible_to<library_id>;
  { T::name } -> std::convertible_to<std::string_view>;
}
&&std::same_as<typename T::library_tag, T> && (std::size_t(T::id) < max_libraries);

// The runtime description of a library; one object per library, so its address is stable.
struct library_info {
  library_id id;
  std::string_view name;
  const std::string_view* aliases;
  std::size_t alias_count;
  const std::string_view* request_attributes;
  std::size_t request_attribute_count;
  const std::type_info* type;  // the tag's: two tags are one only when they are one type
};

namespace library {
struct plain {
  using library_tag = plain;
  static constexpr library_id id = 0;
  static constexpr std::string_view name = "PLAIN";
  // Fluid's StringToLibraryType read CPU and CUDA as the plain library of those places.
  static constexpr std::array<std::string_view, 2> aliases{"CPU", "CUDA"};
};
}  // namespace library

namespace detail {
template <class Lib>
constexpr std::span<const std::string_view> request_attributes_of() {
  if constexpr (requires { Lib::request_attributes.data(); })
    return {Lib::request_attributes.data(), Lib::request_attributes.size()};
  else
    return {};
}

template <class Lib>
inline constexpr library_info library_info_of{Lib::id,
                                              Lib::name,
                                              aliases_of<Lib>(),
                                              alias_count_of<Lib>(),
                                              request_attributes_of<Lib>().data(),
                                              request_attributes_of<Lib>().size(),
                                              &typeid(Lib)};

template <class Lib>
struct library_check {
  static_assert(Library<Lib>,
                "fluidk: not a library tag; a library declares `using library_tag = itself;`, a unique "
                "`id` below max_libraries and `name` (see fluidk::library::plain)");
  static constexpr bool value = Library<Lib>;
};
}  // namespace detail

// A library at run time: a reference to its description. Equality and order are by id.
class library_type {
 public:
  constexpr library_type() noexcept : info_(&detail::library_info_of<library::plain>) {}
  constexpr explicit library_type(const library_info& info) noexcept : info_(&info) {}

  constexpr library_id id() const noexcept { return info_->id; }
  constexpr std::string_view name() const noexcept { return info_->name; }
  constexpr std::span<const std::string_view> request_attributes() const noexcept {
    return {info_->request_attributes, info_->request_attribute_count};
  }
  constexpr const library_info& info() const noexcept { return *info_; }

  friend constexpr bool operator==(library_type a, library_type b) noexcept {
    return a.info_->id == b.info_->id;
  }
  friend constexpr std::strong_ordering operator<=>(library_type a, library_type b) noexcept {
    return a.info_->id <=> b.info_->id;
  }

  // The core's library; the others are library_type_of<Tag>.
  static const library_type plain;

 private:
  const library_info* info_;
};

// The runtime value of a library tag.
template <class Lib>
inline constexpr library_type library_type_of{detail::library_info_of<Lib>};

inline constexpr library_type library_type::plain{detail::library_info_of<library::plain>};

constexpr std::size_t index_of(library_type l) noexcept { return l.id(); }
constexpr std::string_view name_of(library_type l) noexcept { return l.name(); }

namespace detail {
using library_registry_t = tag_registry<library_info, max_libraries>;
inline library_registry_t& library_registry() {
  static library_registry_t registry("library", {&library_info_of<library::plain>});
  return registry;
}
// Adds a library to the runtime's registry: register_library's work, written once for all
// libraries.
FLUIDK_DETAIL_RUNTIME_LINKAGE void add_library(const library_info& info);
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE void add_library(const library_info& info) { library_registry().add(info); }
#endif
}  // namespace detail

// Makes a library known to the runtime (parsing, its request attributes, tables over
// libraries): the header that declares a library calls it from an inline variable (through
// register_at_startup). A second library under a taken id or name is a registration_error
// naming both. Returns true.
template <class Lib>
bool register_library() {
  if constexpr (detail::library_check<Lib>::value) detail::add_library(detail::library_info_of<Lib>);
  return true;
}

// The library with this id, if registered.
inline const library_info* find_library(library_id id) noexcept {
  return detail::library_registry().find(id);
}

// Calls f(const library_info&) for every registered library, in id order.
template <class F>
void for_each_library(F&& f) {
  const auto& registry = detail::library_registry();
  for (std::size_t id = 0, n = registry.extent(); id < n; ++id)
    if (const library_info* info = registry.find(id)) f(*info);
}

// Reads a library's name or alias, case-insensitively, among the registered libraries.
inline library_type parse_library_type(std::string_view text) {
  detail::startup_errors::instance().check();
  const std::string_view word = detail::trim(text);
  const auto& registry = detail::library_registry();
  if (const library_info* info = registry.find(word)) return library_type(*info);
  throw parse_error("unknown library '" + std::string(word) + "'; accepted: " + registry.words());
}

}  // namespace fluidk
