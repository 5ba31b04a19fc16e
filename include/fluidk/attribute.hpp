// Operator attributes: the kinds of Fluid's OpDesc attributes, kept in a small map ordered by
// name, with typed access that names the operator and the attribute on error. Besides numbers,
// strings and their lists: bools (a list of bool), and block and blocks, which name sub-blocks
// of the operator's program by index (Fluid's BLOCK and BLOCKS: a control-flow operator's body,
// fluidk/control_flow.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "fluidk/detail/runtime_linkage.hpp"
#include "fluidk/dtype.hpp"
#include "fluidk/error.hpp"

namespace fluidk {

// A block of the operator's program, by its index (ProgramDesc::block). BlockDesc::append_op
// checks that it exists and is a child of the operator's block.
struct block_ref {
  std::size_t index = 0;
  friend bool operator==(const block_ref&, const block_ref&) = default;
};

using attribute =
    std::variant<bool, std::int32_t, std::int64_t, float, double, std::string, std::vector<std::int32_t>,
                 std::vector<std::int64_t>, std::vector<float>, std::vector<std::string>, std::vector<bool>,
                 block_ref, std::vector<block_ref>>;

// Names of the kinds, in the variant's order, for error messages and the text form.
inline constexpr std::string_view attribute_kind_names[] = {"bool",   "int",   "int64",  "float",  "double",
                                                            "string", "ints",  "int64s", "floats", "strings",
                                                            "bools",  "block", "blocks"};
static_assert(std::size(attribute_kind_names) == std::variant_size_v<attribute>);

// The kinds, listed for messages: "bool, int, ..., blocks".
inline std::string attribute_kinds_list() {
  std::string out;
  for (const std::string_view k : attribute_kind_names) {
    if (!out.empty()) out += ", ";
    out += k;
  }
  return out;
}

inline std::string_view kind_name(const attribute& a) { return attribute_kind_names[a.index()]; }

template <class T>
inline constexpr std::size_t attribute_index = [] {
  std::size_t index = std::variant_size_v<attribute>;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((std::is_same_v<T, std::variant_alternative_t<I, attribute>> ? (index = I, 0) : 0), ...);
  }
  (std::make_index_sequence<std::variant_size_v<attribute>>{});
  return index;
}();

// Its copies, moves and changes are compiled where the runtime is (runtime_linkage.hpp): the
// variant's copy, move and destruction over its thirteen kinds are the larger part of what a
// header that only passes attribute maps along would instantiate.
class attribute_map {
 public:
  attribute_map() = default;
  attribute_map(std::initializer_list<std::pair<std::string, attribute>> entries);
  attribute_map(const attribute_map&);
  attribute_map(attribute_map&&) noexcept;
  attribute_map& operator=(const attribute_map&);
  attribute_map& operator=(attribute_map&&) noexcept;
  ~attribute_map();

  // An attribute needs a name (the program text could not write one without it).
  void set(std::string_view name, attribute value);

  const attribute* find(std::string_view name) const noexcept {
    const auto it = lower_bound(name);
    return it != entries_.end() && it->first == name ? &it->second : nullptr;
  }
  bool contains(std::string_view name) const noexcept { return find(name) != nullptr; }

  // The attribute as a T; `owner` (an operator's name) goes into the error messages.
  template <class T>
  const T& get(std::string_view name, std::string_view owner = "") const {
    static_assert(attribute_index<T> < std::variant_size_v<attribute>,
                  "fluidk: attributes are bool, int32_t, int64_t, float, double, std::string, vectors of "
                  "int32_t, int64_t, float, std::string or bool, block_ref or a vector of block_ref");
    const attribute* a = find(name);
    if (a == nullptr) throw error(prefix(owner) + "has no attribute '" + std::string(name) + "'");
    if (const T* value = std::get_if<T>(a)) return *value;
    throw error(prefix(owner) + "attribute '" + std::string(name) + "' holds " + std::string(kind_name(*a)) +
                ", not " + std::string(attribute_kind_names[attribute_index<T>]));
  }

  // The attribute as a T, or `fallback` when it is absent (a wrong kind is still an error).
  template <class T>
  T get_or(std::string_view name, T fallback, std::string_view owner = "") const {
    return contains(name) ? get<T>(name, owner) : fallback;
  }

  std::size_t size() const noexcept { return entries_.size(); }
  auto begin() const noexcept { return entries_.begin(); }
  auto end() const noexcept { return entries_.end(); }

 private:
  static std::string prefix(std::string_view owner) {
    return owner.empty() ? std::string() : "operator '" + std::string(owner) + "' ";
  }
  std::vector<std::pair<std::string, attribute>>::iterator lower_bound(std::string_view name) {
    return std::lower_bound(entries_.begin(), entries_.end(), name,
                            [](const auto& entry, std::string_view n) { return entry.first < n; });
  }
  std::vector<std::pair<std::string, attribute>>::const_iterator lower_bound(std::string_view name) const {
    return std::lower_bound(entries_.begin(), entries_.end(), name,
                            [](const auto& entry, std::string_view n) { return entry.first < n; });
  }

  std::vector<std::pair<std::string, attribute>> entries_;
};

#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE attribute_map::attribute_map(
    std::initializer_list<std::pair<std::string, attribute>> entries) {
  for (const auto& [name, value] : entries) set(name, value);
}
FLUIDK_DETAIL_RUNTIME_LINKAGE attribute_map::attribute_map(const attribute_map&) = default;
FLUIDK_DETAIL_RUNTIME_LINKAGE attribute_map::attribute_map(attribute_map&&) noexcept = default;
// Copy and swap: a copy of the entries and a swap of the vectors, so that the variant's
// assignments over its thirteen kinds are not compiled (the copy constructor is anyway).
FLUIDK_DETAIL_RUNTIME_LINKAGE attribute_map& attribute_map::operator=(const attribute_map& other) {
  if (this != &other) {
    attribute_map copy(other);
    entries_.swap(copy.entries_);
  }
  return *this;
}
FLUIDK_DETAIL_RUNTIME_LINKAGE attribute_map& attribute_map::operator=(attribute_map&&) noexcept = default;
FLUIDK_DETAIL_RUNTIME_LINKAGE attribute_map::~attribute_map() = default;

FLUIDK_DETAIL_RUNTIME_LINKAGE void attribute_map::set(std::string_view name, attribute value) {
  if (name.empty()) throw error("an attribute needs a name");
  const auto it = lower_bound(name);
  if (it != entries_.end() && it->first == name) {
    // The variant's move constructor cannot throw (every kind moves without throwing): the
    // old value is destroyed and the new one moved into its place, without the assignment.
    static_assert(std::is_nothrow_move_constructible_v<attribute>);
    std::destroy_at(&it->second);
    std::construct_at(&it->second, std::move(value));
    return;
  }
  // A new name: the entries after it move one place up, by construction into a new vector.
  // What can throw (the allocations) comes before the first move, so that a failure leaves the
  // map as it was; moving an entry cannot throw.
  const auto at = static_cast<std::size_t>(it - entries_.begin());
  std::vector<std::pair<std::string, attribute>> grown;
  grown.reserve(entries_.size() + 1);
  std::pair<std::string, attribute> entry(std::string(name), std::move(value));
  for (std::size_t i = 0; i < at; ++i) grown.push_back(std::move(entries_[i]));
  grown.push_back(std::move(entry));
  for (std::size_t i = at; i < entries_.size(); ++i) grown.push_back(std::move(entries_[i]));
  entries_.swap(grown);
}
#endif

// The data type an operator's data-type attribute gives (a data type's name, as in program
// text: "float32", "int64"), or nothing when the operator declares none or the attribute is
// absent. A wrong kind or an unknown name is an error naming the operator.
inline std::optional<data_type> attribute_data_type(const attribute_map& attrs, std::string_view attribute,
                                                    std::string_view op) {
  if (attribute.empty() || !attrs.contains(attribute)) return std::nullopt;
  const std::string& text = attrs.get<std::string>(attribute, op);
  try {
    return parse_data_type(text);
  } catch (const parse_error& e) {
    throw parse_error("operator '" + std::string(op) + "' attribute '" + std::string(attribute) +
                      "': " + detail::unprefixed(e));
  }
}

}  // namespace fluidk
