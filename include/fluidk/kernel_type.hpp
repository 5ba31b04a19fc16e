// The key of a kernel: place, data type, layout and library. `kernel_type` is the
// compile-time key (four tags); `kernel_key` the runtime one, with a dense ordinal for
// tables, printing in Fluid's format and parsing back.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

#include "fluidk/dtype.hpp"
#include "fluidk/layout.hpp"
#include "fluidk/library.hpp"
#include "fluidk/place.hpp"

namespace fluidk {

class kernel_key {
 public:
  // Size of the ordinal space: every place kind id times every data type, layout id and
  // library id (ids reserved, registered or not).
  static constexpr std::size_t ordinal_count =
      max_place_kinds * data_type_count * max_layouts * max_libraries;

  constexpr kernel_key() noexcept : in_kind_(ordinal_in_kind(data_type::float32, layout_, library_)) {}
  constexpr kernel_key(fluidk::place p, data_type d, data_layout l, library_type lib) noexcept
      : place_(p), layout_(l), library_(lib), in_kind_(ordinal_in_kind(d, l, lib)), dtype_(d) {}

  constexpr fluidk::place place() const noexcept { return place_; }
  constexpr data_type dtype() const noexcept { return dtype_; }
  constexpr data_layout layout() const noexcept { return layout_; }
  constexpr library_type library() const noexcept { return library_; }

  constexpr kernel_key with_place(fluidk::place p) const noexcept {
    kernel_key out = *this;  // the ordinal within the kind stays
    out.place_ = p;
    return out;
  }
  constexpr kernel_key with_dtype(data_type d) const noexcept { return {place_, d, layout_, library_}; }
  constexpr kernel_key with_layout(data_layout l) const noexcept { return {place_, dtype_, l, library_}; }
  constexpr kernel_key with_library(library_type l) const noexcept { return {place_, dtype_, layout_, l}; }

  // Unique over the key space, ignoring the device id, and below ordinal_count: a perfect
  // hash. Within a place kind: layout id, then library id, then data type, so that the keys
  // of the registered layouts and libraries (small ids) come first and an operator's runtime
  // table (operator_registry.hpp) indexes with it directly, sized by the largest registered.
  constexpr std::size_t ordinal() const noexcept {
    return std::size_t(place_.kind_id()) * keys_per_place_kind + in_kind_;
  }

  // The ordinal within the keys of the same place kind: ordinal() % keys per place kind.
  // Kept in the key (computed when it is made): kernel lookup indexes with it on every call.
  constexpr std::size_t ordinal_in_kind() const noexcept { return in_kind_; }

  static constexpr std::size_t keys_per_place_kind = data_type_count * max_layouts * max_libraries;

  // The inverse of ordinal(); the place kind, layout and library must be known to the runtime.
  static kernel_key from_ordinal(std::size_t ordinal, int device = 0) {
    if (ordinal >= ordinal_count)
      throw error("kernel key ordinal " + std::to_string(ordinal) + " is out of range (below " +
                  std::to_string(ordinal_count) + ")");
    const auto kind_id = place_kind_id(ordinal / keys_per_place_kind);
    ordinal %= keys_per_place_kind;
    const auto dtype = data_type(ordinal % data_type_count);
    ordinal /= data_type_count;
    const std::size_t lib_id = ordinal % max_libraries;
    const std::size_t layout_id = ordinal / max_libraries;
    const library_info* lib = find_library(library_id(lib_id));
    if (lib == nullptr)
      throw not_registered(
          "kernel key ordinal names library id " + std::to_string(lib_id) +
          ", which no registered library has; registered: " + detail::library_registry().names());
    const layout_info* layout = find_layout(fluidk::layout_id(layout_id));
    if (layout == nullptr)
      throw not_registered(
          "kernel key ordinal names layout id " + std::to_string(layout_id) +
          ", which no registered layout has; registered: " + detail::layout_registry().names());
    const place_kind_info* kind = detail::place_kind_registry::instance().find(kind_id);
    if (kind == nullptr)
      throw not_registered("kernel key ordinal names place kind id " + std::to_string(kind_id) +
                           ", which no registered place kind has; registered: " +
                           detail::place_kind_registry::instance().names());
    return {fluidk::place(*kind, device), dtype, data_layout(*layout), library_type(*lib)};
  }

  // A regular value: equal when every field is, the device id included.
  friend constexpr bool operator==(const kernel_key& a, const kernel_key& b) noexcept {
    return a.dtype_ == b.dtype_ && a.layout_ == b.layout_ && a.library_ == b.library_ && a.place_ == b.place_;
  }
  friend constexpr std::strong_ordering operator<=>(const kernel_key& a, const kernel_key& b) noexcept {
    if (const auto c = a.ordinal() <=> b.ordinal(); c != 0) return c;
    return a.place_.device() <=> b.place_.device();
  }
  // Kernel lookup semantics: the same kernel apart from the device id (a kernel for a place
  // kind serves every device of that kind).
  friend constexpr bool same_kernel(const kernel_key& a, const kernel_key& b) noexcept {
    return a.ordinal() == b.ordinal();
  }

  // {data_type[float]; data_layout[NCHW]; place[Place(cpu)]; library_type[PLAIN]}
  std::string to_string() const {
    std::string out = "{data_type[";
    out += name_of(dtype_);
    out += "]; data_layout[";
    out += name_of(layout_);
    out += "]; place[";
    out += place_.to_string();
    out += "]; library_type[";
    out += name_of(library_);
    return out + "]}";
  }
  friend std::ostream& operator<<(std::ostream& os, const kernel_key& key) { return os << key.to_string(); }

 private:
  static constexpr std::uint16_t ordinal_in_kind(data_type d, data_layout l, library_type lib) noexcept {
    return std::uint16_t((std::size_t(l.id()) * max_libraries + lib.id()) * data_type_count + index_of(d));
  }
  static_assert(keys_per_place_kind <= 0xffff);

  // The pointers first and the small fields last, in one 8-byte word: 40 bytes, copied in
  // whole words (a key is often made just before it is passed on, and a copy that read two
  // small stores as one word would wait for them).
  fluidk::place place_{};
  data_layout layout_{};
  library_type library_{};
  std::uint16_t in_kind_;  // ordinal_in_kind(dtype_, layout_, library_)
  data_type dtype_ = data_type::float32;
};

// The compile-time key of a kernel.
template <class P, class D, class L = layout::any, class Lib = library::plain>
struct kernel_type {
  // Each check is its own static_assert so that a wrong argument gives exactly one line;
  // `valid` then keeps the members from adding errors of their own.
  static_assert(Place<P>,
                "fluidk: kernel_type<Place, DType, Layout, Library>: the place is not a place tag (such as "
                "fluidk::cpu, or a backend's tag declaring `using place_tag = itself;`)");
  static_assert(
      DType<D>,
      "fluidk: kernel_type<Place, DType, Layout, Library>: the data type is not one of float, double, "
      "float16, bfloat16, int8_t, uint8_t, int16_t, int32_t, int64_t, bool");
  static_assert(Layout<L>,
                "fluidk: kernel_type<Place, DType, Layout, Library>: the layout is not a layout tag (such as "
                "fluidk::layout::nchw, or one declaring `using layout_tag = itself;`)");
  static_assert(Library<Lib>,
                "fluidk: kernel_type<Place, DType, Layout, Library>: the library is not a library tag (such "
                "as fluidk::library::plain, or one declaring `using library_tag = itself;`)");
  static constexpr bool valid = Place<P> && DType<D> && Layout<L> && Library<Lib>;

  using place_t = P;
  using dtype_t = D;
  using layout_t = L;
  using library_t = Lib;

  static constexpr kernel_key key(int device = 0) noexcept {
    if constexpr (valid)
      return {place::of<P>(device), data_type_of<D>, data_layout_of<L>, library_type_of<Lib>};
    else
      return {};
  }
  // A compile-time key converts to the runtime key of device 0.
  constexpr operator kernel_key() const noexcept { return key(); }
};

template <class T>
inline constexpr bool is_kernel_type = false;
template <class P, class D, class L, class Lib>
inline constexpr bool is_kernel_type<kernel_type<P, D, L, Lib>> = true;

template <class T>
concept KernelType = is_kernel_type<T>;

// Reads the printed form back: "{data_type[float]; data_layout[NCHW]; place[Place(cpu)];
// library_type[PLAIN]}". Fields may come in any order; all four are required.
inline kernel_key parse_kernel_key(std::string_view text) {
  const std::string original(detail::trim(text));
  std::string_view rest = detail::trim(text);
  if (rest.size() < 2 || rest.front() != '{' || rest.back() != '}')
    throw parse_error("kernel key '" + original +
                      "' is not of the form {data_type[..]; data_layout[..]; place[..]; library_type[..]}");
  rest = rest.substr(1, rest.size() - 2);
  std::string_view fields[4];  // data_type, data_layout, place, library_type
  constexpr std::string_view field_names[4] = {"data_type", "data_layout", "place", "library_type"};
  rest = detail::trim(rest);
  while (!rest.empty()) {
    const auto open = rest.find('[');
    // The place field itself holds brackets only as Place(...), never '[' or ']'.
    const auto close = rest.find(']');
    if (open == std::string_view::npos || close == std::string_view::npos || close < open)
      throw parse_error("kernel key '" + original + "': expected <field>[<value>]");
    const std::string_view field = detail::trim(rest.substr(0, open));
    const std::string_view value = rest.substr(open + 1, close - open - 1);
    bool known = false;
    for (int i = 0; i < 4; ++i) {
      if (!detail::iequals(field, field_names[i])) continue;
      if (!fields[i].empty())
        throw parse_error("kernel key '" + original + "': field '" + std::string(field) + "' given twice");
      fields[i] = value.empty() ? std::string_view(" ") : value;
      known = true;
    }
    if (!known)
      throw parse_error("kernel key '" + original + "': unknown field '" + std::string(field) +
                        "'; accepted: data_type, data_layout, place, library_type");
    // Fields are separated by exactly one ';', as the printer writes them; none after the last.
    rest = detail::trim(rest.substr(close + 1));
    if (rest.empty()) break;
    if (rest.front() != ';')
      throw parse_error("kernel key '" + original + "': expected ';' between fields, found '" +
                        std::string(rest.substr(0, 1)) + "' after field '" + std::string(field) + "'");
    rest = detail::trim(rest.substr(1));
    if (rest.empty()) throw parse_error("kernel key '" + original + "': a ';' with no field after it");
  }
  for (int i = 0; i < 4; ++i)
    if (fields[i].empty())
      throw parse_error("kernel key '" + original + "': missing field '" + std::string(field_names[i]) + "'");
  return {parse_place(fields[2]), parse_data_type(fields[0]), parse_data_layout(fields[1]),
          parse_library_type(fields[3])};
}

}  // namespace fluidk

// Every field counts, as for ==: the ordinal (a perfect hash of the other fields) and the
// device id.
template <>
struct std::hash<fluidk::kernel_key> {
  std::size_t operator()(const fluidk::kernel_key& key) const noexcept {
    return key.ordinal() + fluidk::kernel_key::ordinal_count * std::size_t(key.place().device());
  }
};
template <>
struct std::hash<fluidk::place> {
  std::size_t operator()(const fluidk::place& p) const noexcept {
    return std::size_t(p.kind_id()) * 1'000'003u + std::size_t(p.device());
  }
};
