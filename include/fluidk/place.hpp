// Places: where data lives and kernels run. A place kind is a compile-time tag (`cpu`
// here; backends declare `cuda`, `opencl`, ... the same way); a `place` value carries the
// kind and the device id, and prints as Fluid did: Place(cpu), Place(gpu:0).
#pragma once

#include <array>
#include <charconv>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <string_view>
#include <typeinfo>

#include "fluidk/detail/runtime_linkage.hpp"
#include "fluidk/detail/tag_registry.hpp"
#include "fluidk/detail/text.hpp"
#include "fluidk/error.hpp"

namespace fluidk {

using place_kind_id = std::uint8_t;

// Kernel-key ordinals reserve room for this many place kinds, so that a kind's ordinals
// do not depend on which other backends are compiled in.
inline constexpr std::size_t max_place_kinds = 8;

// A place kind tag declares:
//   using place_tag = itself;
//   static constexpr place_kind_id id;          // unique, below max_place_kinds; cpu is 0
//   static constexpr std::string_view name;     // printed: Place(<name>:<device>)
//   static constexpr bool has_device_id;        // false: one device only, printed Place(<name>)
//   static constexpr bool host_accessible;      // the host can read its memory directly
// and optionally `static constexpr std::array<std::string_view, N> aliases` for parsing.
template <class T>
concept Place = requires {
  typename T::place_tag;
  { T::id } -> std::convertible_to<place_kind_id>;
  { T::name } -> std::convertible_to<std::string_view>;
  { T::has_device_id } -> std::convertible_to<bool>;
  { T::host_accessible } -> std::convertible_to<bool>;
}
&&std::same_as<typename T::place_tag, T> && (std::size_t(T::id) < max_place_kinds);

// The host: the one place the core needs.
struct cpu {
  using place_tag = cpu;
  static constexpr place_kind_id id = 0;
  static constexpr std::string_view name = "cpu";
  static constexpr bool has_device_id = false;
  static constexpr bool host_accessible = true;
  static constexpr std::array<std::string_view, 1> aliases{"host"};
};

// The runtime description of a place kind; one object per kind, so its address is stable.
struct place_kind_info {
  place_kind_id id;
  std::string_view name;
  bool has_device_id;
  bool host_accessible;
  const std::string_view* aliases;
  std::size_t alias_count;
  const std::type_info* type;  // the tag's: two tags are one only when they are one type
};

namespace detail {
template <class P>
inline constexpr place_kind_info place_info{
    P::id, P::name, P::has_device_id, P::host_accessible, aliases_of<P>(), alias_count_of<P>(), &typeid(P)};

// The kinds known at run time, for parsing and for turning ordinals back into keys. A
// registration error kept from static initialisation is thrown by the first lookup.
class place_kind_registry {
 public:
  static place_kind_registry& instance() {
    static place_kind_registry registry;
    return registry;
  }
  void add(const place_kind_info& info);
  const place_kind_info* find(place_kind_id id) const {
    startup_errors::instance().check();
    return kinds_.find(id);
  }
  const place_kind_info* find(std::string_view word) const {
    startup_errors::instance().check();
    return kinds_.find(word);
  }
  std::string names() const { return kinds_.names(); }

 private:
  place_kind_registry() : kinds_("place kind", {&place_info<cpu>}) {}
  tag_registry<place_kind_info, max_place_kinds> kinds_;
};
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE void place_kind_registry::add(const place_kind_info& info) { kinds_.add(info); }
#endif

template <class P>
struct place_check {
  static_assert(Place<P>,
                "fluidk: not a place tag; a place kind declares `using place_tag = itself;`, a unique `id` "
                "below max_place_kinds, `name`, `has_device_id` and `host_accessible` (see fluidk::cpu)");
  static constexpr bool value = Place<P>;
};
}  // namespace detail

// Makes a place kind known to the runtime (parsing, ordinals back to keys). Backend headers
// call it from an inline variable; a user's device does the same. Returns true.
template <class P>
bool register_place_kind() {
  if constexpr (detail::place_check<P>::value)
    detail::place_kind_registry::instance().add(detail::place_info<P>);
  return true;
}

// A place: a kind and a device id. Equality compares both: data on GPU 1 is not where a
// kernel on GPU 0 needs it. `same_kind` is what kernel lookup uses.
class place {
 public:
  constexpr place() noexcept : kind_(&detail::place_info<cpu>), kind_id_(cpu::id), host_accessible_(true) {}
  constexpr place(const place_kind_info& kind, int device) noexcept
      : kind_(&kind),
        device_(kind.has_device_id ? device : 0),
        kind_id_(kind.id),
        host_accessible_(kind.host_accessible) {}

  template <class P>
  static constexpr place of(int device = 0) noexcept {
    if constexpr (detail::place_check<P>::value)
      return place(detail::place_info<P>, device);
    else
      return place();
  }

  constexpr const place_kind_info& kind() const noexcept { return *kind_; }
  constexpr place_kind_id kind_id() const noexcept { return kind_id_; }
  constexpr int device() const noexcept { return device_; }
  constexpr bool host_accessible() const noexcept { return host_accessible_; }

  template <class P>
  constexpr bool is() const noexcept {
    return detail::place_check<P>::value && kind_id_ == P::id;
  }
  constexpr bool same_kind(const place& other) const noexcept { return kind_id_ == other.kind_id_; }

  friend constexpr bool operator==(const place& a, const place& b) noexcept {
    return a.kind_id_ == b.kind_id_ && a.device_ == b.device_;
  }

  std::string to_string() const {
    std::string out = "Place(";
    out += kind_->name;
    if (kind_->has_device_id) {
      out += ':';
      out += std::to_string(device_);
    }
    out += ')';
    return out;
  }
  friend std::ostream& operator<<(std::ostream& os, const place& p) { return os << p.to_string(); }

 private:
  const place_kind_info* kind_;
  int device_ = 0;
  // The kind's id and whether the host reads its memory, kept beside the device id (in what
  // would be padding): kernel lookup and typed access read them on every call, and this
  // saves following kind_.
  place_kind_id kind_id_;
  bool host_accessible_;
};

inline constexpr place cpu_place{};

// Reads what place::to_string() prints and its short forms: "cpu", "Place(cpu)", "gpu:1",
// "Place(gpu:1)", "opencl" (device 0); kinds and aliases case-insensitively. A place is one
// word: blanks around it are ignored, blanks inside it are errors, and the device id is
// decimal digits only (no sign) that fit in an int.
FLUIDK_DETAIL_RUNTIME_LINKAGE place parse_place(std::string_view text);
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE place parse_place(std::string_view text) {
  std::string_view word = detail::trim(text);
  const std::string original(word);
  const auto& registry = detail::place_kind_registry::instance();
  auto accepted = [&] {
    return "; accepted: <kind>, <kind>:<device id> or Place(...) of either, with the kinds " +
           registry.names();
  };
  if (word.size() >= 6 && detail::iequals(word.substr(0, 6), "Place(")) {
    if (word.back() != ')') throw parse_error("place '" + original + "' does not end with ')'" + accepted());
    word = word.substr(6, word.size() - 7);
  }
  for (const char c : word)
    if (detail::is_blank(c)) throw parse_error("place '" + original + "' has a blank inside" + accepted());
  int device = 0;
  if (const auto colon = word.find(':'); colon != std::string_view::npos) {
    const std::string_view digits = word.substr(colon + 1);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), device);
    // from_chars takes a leading '-'; a device id has no sign.
    if (digits.empty() || digits.front() < '0' || digits.front() > '9' ||
        end != digits.data() + digits.size() || (ec != std::errc{} && ec != std::errc::result_out_of_range))
      throw parse_error("bad device id in place '" + original +
                        "'; expected <kind>:<device id>, the id in decimal digits");
    if (ec == std::errc::result_out_of_range)
      throw parse_error("device id in place '" + original + "' is out of range; the largest is " +
                        std::to_string(std::numeric_limits<int>::max()));
    word = word.substr(0, colon);
  }
  if (word.empty()) throw parse_error("place '" + original + "' names no kind" + accepted());
  const place_kind_info* kind = registry.find(word);
  if (kind == nullptr) throw parse_error("unknown place '" + original + "'" + accepted());
  if (!kind->has_device_id && device != 0)
    throw parse_error("place '" + original + "': kind '" + std::string(kind->name) + "' has no device ids");
  return place(*kind, device);
}
#endif

}  // namespace fluidk
