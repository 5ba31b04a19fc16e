// Data layouts: tags for the compile-time path and `data_layout` values for the runtime
// path. The axis is open the way places are: the core declares ANY_LAYOUT, NCHW and NHWC; a
// backend (or a user) declares its own layouts, blocked ones included, and registers them
// from its header (oneDNN's nChw8c, nChw16c and nc come with fluidk/devices/onednn_tags.hpp).
#pragma once

#include <array>
#include <compare>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>

#include "fluidk/detail/runtime_linkage.hpp"
#include "fluidk/detail/tag_registry.hpp"
#include "fluidk/dims.hpp"
#include "fluidk/error.hpp"

namespace fluidk {

using layout_id = std::uint8_t;

// Layout ids are below this: kernel-key ordinals reserve room for this many layouts, so that
// a layout's ordinals do not depend on which others are compiled in.
inline constexpr std::size_t max_layouts = 32;

// A layout tag declares:
//   using layout_tag = itself;
//   static constexpr layout_id id;            // unique, below max_layouts
//   static constexpr std::string_view name;   // printed in kernel keys and program text
//   static constexpr int rank;                // logical dimensions; 0 only for the wildcard
// and optionally
//   static constexpr int block_axis, block_size;  // a blocked layout: that logical axis is
//                                                 // split into blocks of block_size (padded)
//   using plain = <layout tag>;   // the layout of the same rank that stores the logical order
//                                 // row-major (NCHW for NHWC and nChw8c); default: itself
//   static constexpr std::array<std::string_view, N> aliases;   // more names for parsing
template <class T>
concept Layout = requires {
  typename T::layout_tag;
  { T::id } -> std::convertible_to<layout_id>;
  { T::name } -> std::convertible_to<std::string_view>;
  { T::rank } -> std::convertible_to<int>;
}
&&std::same_as<typename T::layout_tag, T> && (std::size_t(T::id) < max_layouts);

// The runtime description of a layout; one object per layout, so its address is stable.
struct layout_info {
  layout_id id;
  std::string_view name;
  int rank;
  int block_axis;            // -1 when unblocked
  int block_size;            // 1 when unblocked
  const layout_info* plain;  // nullptr: itself
  const std::string_view* aliases;
  std::size_t alias_count;
  const std::type_info* type;  // the tag's: two tags are one only when they are one type
};

namespace layout {
// Every layout: the wildcard a kernel declares when it indexes plain memory of any rank.
struct any {
  using layout_tag = any;
  static constexpr layout_id id = 0;
  static constexpr std::string_view name = "ANY_LAYOUT";
  static constexpr int rank = 0;
  static constexpr std::array<std::string_view, 1> aliases{"any"};
};
struct nchw {
  using layout_tag = nchw;
  static constexpr layout_id id = 1;
  static constexpr std::string_view name = "NCHW";
  static constexpr int rank = 4;
};
struct nhwc {
  using layout_tag = nhwc;
  static constexpr layout_id id = 2;
  static constexpr std::string_view name = "NHWC";
  static constexpr int rank = 4;
  using plain = nchw;
};
}  // namespace layout

namespace detail {
template <class L>
constexpr const layout_info* plain_layout_info();

template <class L>
inline constexpr layout_info layout_info_of{L::id,
                                            L::name,
                                            L::rank,
                                            [] {
                                              if constexpr (requires { L::block_axis; })
                                                return int(L::block_axis);
                                              else
                                                return -1;
                                            }(),
                                            [] {
                                              if constexpr (requires { L::block_size; })
                                                return int(L::block_size);
                                              else
                                                return 1;
                                            }(),
                                            plain_layout_info<L>(),
                                            aliases_of<L>(),
                                            alias_count_of<L>(),
                                            &typeid(L)};

template <class L>
constexpr const layout_info* plain_layout_info() {
  if constexpr (requires { typename L::plain; })
    return &layout_info_of<typename L::plain>;
  else
    return nullptr;
}

template <class L>
struct layout_check {
  static_assert(Layout<L>,
                "fluidk: not a layout tag; a layout declares `using layout_tag = itself;`, a unique `id` "
                "below max_layouts, `name` and `rank` (see fluidk::layout::nchw)");
  static_assert(layout_info_of<L>.block_size == 1
                    ? layout_info_of<L>.block_axis == -1
                    : layout_info_of<L>.block_size > 1 && layout_info_of<L>.block_axis >= 0 &&
                          layout_info_of<L>.block_axis < L::rank,
                "fluidk: a blocked layout declares both a `block_axis` below its rank and a `block_size` "
                "above 1");
  static constexpr bool value = Layout<L>;
};
}  // namespace detail

// A layout at run time: a reference to its description. Equality and order are by id.
class data_layout {
 public:
  constexpr data_layout() noexcept : info_(&detail::layout_info_of<layout::any>) {}
  constexpr explicit data_layout(const layout_info& info) noexcept : info_(&info) {}

  constexpr layout_id id() const noexcept { return info_->id; }
  constexpr std::string_view name() const noexcept { return info_->name; }
  // Logical rank of tensors in this layout; 0 for the wildcard, which takes every rank.
  constexpr int rank() const noexcept { return info_->rank; }
  constexpr bool blocked() const noexcept { return info_->block_size != 1; }
  // The logical axis split into blocks, -1 when unblocked; the size of its blocks, 1 then.
  constexpr int block_axis() const noexcept { return info_->block_axis; }
  constexpr int block_size() const noexcept { return info_->block_size; }
  // The layout of the same rank that stores the logical order row-major (itself if it does).
  constexpr data_layout plain() const noexcept { return info_->plain ? data_layout(*info_->plain) : *this; }
  constexpr const layout_info& info() const noexcept { return *info_; }

  friend constexpr bool operator==(data_layout a, data_layout b) noexcept {
    return a.info_->id == b.info_->id;
  }
  friend constexpr std::strong_ordering operator<=>(data_layout a, data_layout b) noexcept {
    return a.info_->id <=> b.info_->id;
  }

  // The core's layouts; the others are data_layout_of<Tag>.
  static const data_layout any, nchw, nhwc;

 private:
  const layout_info* info_;
};

// The plain layout of a tag (its `plain`, or itself): see Layout.
template <class L>
struct plain_layout {
  using type = L;
};
template <class L>
requires requires { typename L::plain; }
struct plain_layout<L> {
  using type = typename L::plain;
};
template <class L>
using plain_layout_t = typename plain_layout<L>::type;

// The runtime value of a layout tag.
template <class L>
inline constexpr data_layout data_layout_of{detail::layout_info_of<L>};

namespace detail {
// The layout tag among Candidates whose id is Id: a rule chose the layout among tags the
// caller knows, and this names its type. void when none is.
template <layout_id Id, class... Candidates>
struct layout_type_of {
  using type = void;
};
template <layout_id Id, class L, class... Rest>
struct layout_type_of<Id, L, Rest...> {
  using type =
      typename std::conditional_t<L::id == Id, std::type_identity<L>, layout_type_of<Id, Rest...>>::type;
};
}  // namespace detail

inline constexpr data_layout data_layout::any{detail::layout_info_of<layout::any>};
inline constexpr data_layout data_layout::nchw{detail::layout_info_of<layout::nchw>};
inline constexpr data_layout data_layout::nhwc{detail::layout_info_of<layout::nhwc>};

constexpr std::size_t index_of(data_layout l) noexcept { return l.id(); }
// Printed as Fluid printed its layouts (ANY_LAYOUT, NCHW, NHWC) and oneDNN its blocked ones.
constexpr std::string_view name_of(data_layout l) noexcept { return l.name(); }
constexpr int rank_of(data_layout l) noexcept { return l.rank(); }
// Block size of a blocked layout; 1 for the unblocked ones.
constexpr int block_of(data_layout l) noexcept { return l.block_size(); }

namespace detail {
using layout_registry_t = tag_registry<layout_info, max_layouts>;
inline layout_registry_t& layout_registry() {
  static layout_registry_t registry(
      "layout", {&layout_info_of<layout::any>, &layout_info_of<layout::nchw>, &layout_info_of<layout::nhwc>});
  return registry;
}
// Adds a layout to the runtime's registry: register_layout's work, written once for all layouts.
FLUIDK_DETAIL_RUNTIME_LINKAGE void add_layout(const layout_info& info);
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE void add_layout(const layout_info& info) { layout_registry().add(info); }
#endif
}  // namespace detail

// Makes a layout known to the runtime (parsing, tables over layouts): the header that
// declares a layout calls it from an inline variable (through register_at_startup). A
// second layout under a taken id or name is a registration_error naming both. Returns true.
template <class L>
bool register_layout() {
  if constexpr (detail::layout_check<L>::value) detail::add_layout(detail::layout_info_of<L>);
  return true;
}

namespace detail {
// Data of layout `from` read as layout `as` without moving a byte: ANY_LAYOUT data, in its
// logical order, read as the plain layout of a transform's target (planning's
// effective_source_layout). Throws when its rank is not the one `as` needs; the runtime plan
// and the static chain both check here.
inline void check_read_as(const dims& shape, data_layout from, data_layout as) {
  const int rank = as.rank();
  if (from == as || rank == 0 || std::size_t(rank) == shape.rank()) return;
  throw error(
      "data of layout " + std::string(from.name()) + " is in its logical order, read as " +
      std::string(as.name()) + ", and " + std::string(as.name()) + " needs rank " + std::to_string(rank) +
      ": the shape " + shape.to_string() + " has rank " + std::to_string(shape.rank()) +
      " (an operator passes such an input in its own layout by listing its slot in keep_layout_inputs)");
}
}  // namespace detail

// The layout with this id, if registered.
inline const layout_info* find_layout(layout_id id) noexcept { return detail::layout_registry().find(id); }

// Elements a tensor of these logical dims occupies in `layout`: a blocked layout pads its
// block axis up to a multiple of its block. Checks the rank the layout needs and that the
// padded count fits in int64; the one place this size is computed.
FLUIDK_DETAIL_RUNTIME_LINKAGE std::int64_t storage_numel(const dims& shape, data_layout layout);
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE std::int64_t storage_numel(const dims& shape, data_layout layout) {
  const int rank = layout.rank();
  if (rank != 0 && std::size_t(rank) != shape.rank())
    throw error("layout " + std::string(layout.name()) + " needs rank " + std::to_string(rank) +
                ", but the shape " + shape.to_string() + " has rank " + std::to_string(shape.rank()));
  if (!layout.blocked()) return shape.numel();
  const std::size_t axis = std::size_t(layout.block_axis());
  const std::int64_t block = layout.block_size();
  auto too_many = [&] {
    return error("shape " + shape.to_string() + " padded to " + std::string(layout.name()) +
                 " has more elements than int64 can count");
  };
  std::int64_t padded = 0;
  if (checked_add(shape[axis], block - 1, padded)) throw too_many();
  padded = padded / block * block;
  try {
    return shape.with(axis, padded).numel();
  } catch (const error&) {
    throw too_many();
  }
}
#endif

// Reads a layout's name or alias, case-insensitively, among the registered layouts.
FLUIDK_DETAIL_RUNTIME_LINKAGE data_layout parse_data_layout(std::string_view text);
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE data_layout parse_data_layout(std::string_view text) {
  detail::startup_errors::instance().check();
  const std::string_view word = detail::trim(text);
  const auto& registry = detail::layout_registry();
  if (const layout_info* info = registry.find(word)) return data_layout(*info);
  throw parse_error("unknown data layout '" + std::string(word) + "'; accepted: " + registry.words());
}
#endif

}  // namespace fluidk
