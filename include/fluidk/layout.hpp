// Data layouts: tags for the compile-time path and `data_layout` values for the runtime
// path. oneDNN's blocked layouts are layouts of their own, not metadata on NCHW.
#pragma once

#include <array>
#include <boost/mp11/list.hpp>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fluidk/detail/text.hpp"
#include "fluidk/dims.hpp"
#include "fluidk/error.hpp"

namespace fluidk {

enum class data_layout : std::uint8_t { any, nchw, nhwc, nChw8c, nChw16c, nc };

namespace layout {
// `rank` is the number of logical dimensions (0 for the wildcard), `block` the channel
// block of oneDNN's blocked formats (1 when unblocked).
#define FLUIDK_DETAIL_LAYOUT_TAG(tag, rank_, block_)       \
  struct tag {                                             \
    using layout_tag = tag;                                \
    static constexpr data_layout value = data_layout::tag; \
    static constexpr int rank = rank_;                     \
    static constexpr int block = block_;                   \
  }
FLUIDK_DETAIL_LAYOUT_TAG(any, 0, 1);
FLUIDK_DETAIL_LAYOUT_TAG(nchw, 4, 1);
FLUIDK_DETAIL_LAYOUT_TAG(nhwc, 4, 1);
FLUIDK_DETAIL_LAYOUT_TAG(nChw8c, 4, 8);
FLUIDK_DETAIL_LAYOUT_TAG(nChw16c, 4, 16);
FLUIDK_DETAIL_LAYOUT_TAG(nc, 2, 1);
#undef FLUIDK_DETAIL_LAYOUT_TAG
}  // namespace layout

// In `data_layout` order.
using layouts = boost::mp11::mp_list<layout::any, layout::nchw, layout::nhwc, layout::nChw8c, layout::nChw16c,
                                     layout::nc>;

inline constexpr std::size_t data_layout_count = boost::mp11::mp_size<layouts>::value;

template <class T>
concept Layout = requires {
  typename T::layout_tag;
  { T::value } -> std::convertible_to<data_layout>;
}
&&std::same_as<typename T::layout_tag, T>;

constexpr std::size_t index_of(data_layout l) noexcept { return std::size_t(l); }

inline constexpr std::array<data_layout, data_layout_count> all_data_layouts{
    data_layout::any,    data_layout::nchw,    data_layout::nhwc,
    data_layout::nChw8c, data_layout::nChw16c, data_layout::nc};

// Printed as Fluid printed its layouts (ANY_LAYOUT, NCHW, NHWC) and oneDNN its blocked ones.
constexpr std::string_view name_of(data_layout l) noexcept {
  constexpr std::array<std::string_view, data_layout_count> names{"ANY_LAYOUT", "NCHW",    "NHWC",
                                                                  "nChw8c",     "nChw16c", "NC"};
  return names[index_of(l)];
}

// Logical rank of tensors in this layout; 0 for `any`, which takes every rank.
constexpr int rank_of(data_layout l) noexcept {
  constexpr std::array<int, data_layout_count> ranks{0, 4, 4, 4, 4, 2};
  return ranks[index_of(l)];
}

// Channel block of a blocked layout; 1 for the unblocked ones.
constexpr int block_of(data_layout l) noexcept {
  constexpr std::array<int, data_layout_count> blocks{1, 1, 1, 8, 16, 1};
  return blocks[index_of(l)];
}

namespace detail {
struct data_layout_word {
  std::string_view word;
  data_layout value;
};
inline constexpr data_layout_word data_layout_words[] = {
    {"ANY_LAYOUT", data_layout::any}, {"any", data_layout::any},       {"NCHW", data_layout::nchw},
    {"NHWC", data_layout::nhwc},      {"nChw8c", data_layout::nChw8c}, {"nChw16c", data_layout::nChw16c},
    {"NC", data_layout::nc}};
}  // namespace detail

// Elements a tensor of these logical dims occupies in `layout`: a blocked layout pads the
// channels (dimension 1) up to a multiple of its block. Checks the rank the layout needs
// and that the padded count fits in int64; the one place this size is computed.
inline std::int64_t storage_numel(const dims& shape, data_layout layout) {
  const int rank = rank_of(layout);
  if (rank != 0 && std::size_t(rank) != shape.rank())
    throw error("layout " + std::string(name_of(layout)) + " needs rank " + std::to_string(rank) +
                ", but the shape " + shape.to_string() + " has rank " + std::to_string(shape.rank()));
  const int block = block_of(layout);
  if (block == 1) return shape.numel();
  std::int64_t channels = 0;
  if (checked_add(shape[1], std::int64_t(block - 1), channels))
    throw error("shape " + shape.to_string() + " padded to " + std::string(name_of(layout)) +
                " has more elements than int64 can count");
  channels = channels / block * block;
  try {
    return shape.with(1, channels).numel();
  } catch (const error&) {
    throw error("shape " + shape.to_string() + " padded to " + std::string(name_of(layout)) +
                " has more elements than int64 can count");
  }
}

inline data_layout parse_data_layout(std::string_view text) {
  const std::string_view word = detail::trim(text);
  for (const auto& entry : detail::data_layout_words)
    if (detail::iequals(entry.word, word)) return entry.value;
  throw parse_error("unknown data layout '" + std::string(word) +
                    "'; accepted: " + detail::join_names(detail::data_layout_words, [](const auto& e) {
                      return std::string(e.word);
                    }));
}

}  // namespace fluidk
