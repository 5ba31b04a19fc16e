// The transform planner: the cheapest chain of primitive transforms from one kernel type
// to another, cost = bytes moved per element. One constexpr implementation serves both
// paths: the static path asks it at compile time with trait-based edges, the runtime path
// at run time with the registered tables. Narrowing casts land before device copies and
// widening ones after, because that moves fewer bytes; a layout change lands on whichever
// place has a transform for it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fluidk/dtype.hpp"
#include "fluidk/layout.hpp"
#include "fluidk/place.hpp"

namespace fluidk::detail::planning {

enum class step_kind : std::uint8_t { layout, cast, fused, copy };

constexpr std::string_view name_of(step_kind k) noexcept {
  constexpr std::string_view names[] = {"layout", "cast", "layout+cast", "copy"};
  return names[std::size_t(k)];
}

// Indices into the candidate lists of a search space.
struct state {
  std::uint8_t place = 0, dtype = 0, layout = 0;
  friend constexpr bool operator==(const state&, const state&) = default;
};

// The places, data types and layouts a chain may pass through: those of the two ends, the
// host as a staging place, and NCHW as a hub between layouts.
struct space {
  std::array<place, 3> places{};
  std::size_t place_count = 0;
  std::array<data_type, 2> dtypes{};
  std::size_t dtype_count = 0;
  std::array<data_layout, 3> layouts{};
  std::size_t layout_count = 0;

  constexpr std::size_t add_place(place p) {
    for (std::size_t i = 0; i < place_count; ++i)
      if (places[i] == p) return i;
    places[place_count] = p;
    return place_count++;
  }
  constexpr std::size_t add_dtype(data_type d) {
    for (std::size_t i = 0; i < dtype_count; ++i)
      if (dtypes[i] == d) return i;
    dtypes[dtype_count] = d;
    return dtype_count++;
  }
  constexpr std::size_t add_layout(data_layout l) {
    for (std::size_t i = 0; i < layout_count; ++i)
      if (layouts[i] == l) return i;
    layouts[layout_count] = l;
    return layout_count++;
  }
  constexpr std::size_t node_count() const { return place_count * dtype_count * layout_count; }
  constexpr std::size_t node(const state& s) const {
    return (std::size_t(s.place) * dtype_count + s.dtype) * layout_count + s.layout;
  }
  constexpr state state_of(std::size_t node) const {
    state s;
    s.layout = std::uint8_t(node % layout_count);
    node /= layout_count;
    s.dtype = std::uint8_t(node % dtype_count);
    s.place = std::uint8_t(node / dtype_count);
    return s;
  }
};

struct step {
  step_kind kind = step_kind::copy;
  state from, to;
};

inline constexpr std::size_t max_chain_length = 8;

struct chain {
  bool found = false;
  std::size_t cost = 0;  // bytes moved per element
  std::size_t size = 0;
  std::array<step, max_chain_length> steps{};
};

// The question asked of the planner. A target layout of ANY_LAYOUT accepts every layout.
struct request {
  place from_place, to_place;
  data_type from_dtype, to_dtype;
  data_layout from_layout, to_layout;
};

// What a target of ANY_LAYOUT accepts: every unblocked layout as it is; blocked data must be
// unblocked first, to its plain layout, since a kernel declared for any layout indexes
// unblocked memory (Fluid did the same for oneDNN's layout).
constexpr data_layout effective_target_layout(data_layout from, data_layout to) noexcept {
  return to == data_layout::any && from.blocked() ? from.plain() : to;
}

// What a source of ANY_LAYOUT means: the logical order row-major, which is the plain layout
// of the target's rank (NCHW for NHWC and nChw8c, NC for NC). Relabelling it costs nothing.
constexpr data_layout effective_source_layout(data_layout from, data_layout to) noexcept {
  if (from != data_layout::any || to == data_layout::any) return from;
  return to.plain();
}

struct problem {
  space s;
  state from, to;
  bool any_layout_target = false;
};

constexpr problem make_problem(const request& r) {
  problem p;
  const data_layout to_layout = effective_target_layout(r.from_layout, r.to_layout);
  const data_layout from_layout = effective_source_layout(r.from_layout, to_layout);
  p.from.place = std::uint8_t(p.s.add_place(r.from_place));
  p.to.place = std::uint8_t(p.s.add_place(r.to_place));
  p.s.add_place(cpu_place);
  p.from.dtype = std::uint8_t(p.s.add_dtype(r.from_dtype));
  p.to.dtype = std::uint8_t(p.s.add_dtype(r.to_dtype));
  p.from.layout = std::uint8_t(p.s.add_layout(from_layout));
  p.any_layout_target = to_layout == data_layout::any;
  p.to.layout = std::uint8_t(p.s.add_layout(p.any_layout_target ? from_layout : to_layout));
  // The plain layout of the source's rank, through which two layouts with no direct step meet.
  if (from_layout != data_layout::any) p.s.add_layout(from_layout.plain());
  return p;
}

// Dijkstra over at most 3 x 2 x 3 nodes. `Edges` answers, in the space's indices:
//   layout(place, dtype, from_layout, to_layout), cast(place, layout, from_dtype, to_dtype),
//   fused(place, from_layout, to_layout, from_dtype, to_dtype), copy(from_place, to_place).
// Ties go to the chain with fewer steps.
template <class Edges>
constexpr chain find_chain(const problem& p, const Edges& edges) {
  const space& s = p.s;
  constexpr std::size_t max_nodes = 18;
  constexpr std::size_t unreached = std::size_t(-1);
  std::array<std::size_t, max_nodes> cost{}, length{}, previous{};
  std::array<step, max_nodes> via{};
  std::array<bool, max_nodes> done{};
  for (std::size_t i = 0; i < max_nodes; ++i) cost[i] = unreached;
  const std::size_t n = s.node_count();
  cost[s.node(p.from)] = 0;
  length[s.node(p.from)] = 0;

  auto is_goal = [&](const state& st) {
    return st.place == p.to.place && st.dtype == p.to.dtype &&
           (p.any_layout_target || st.layout == p.to.layout);
  };
  auto size_of_dtype = [&](std::size_t d) { return size_of(s.dtypes[d]); };

  std::size_t goal = unreached;
  for (;;) {
    std::size_t best = unreached;
    for (std::size_t i = 0; i < n; ++i)
      if (!done[i] && cost[i] != unreached &&
          (best == unreached || cost[i] < cost[best] || (cost[i] == cost[best] && length[i] < length[best])))
        best = i;
    if (best == unreached) break;
    done[best] = true;
    const state at = s.state_of(best);
    if (is_goal(at)) {
      goal = best;
      break;
    }
    auto relax = [&](step_kind kind, const state& next, std::size_t step_cost) {
      const std::size_t j = s.node(next);
      const std::size_t c = cost[best] + step_cost;
      if (cost[j] == unreached || c < cost[j] || (c == cost[j] && length[best] + 1 < length[j])) {
        cost[j] = c;
        length[j] = length[best] + 1;
        previous[j] = best;
        via[j] = step{kind, at, next};
      }
    };
    for (std::uint8_t l = 0; l < s.layout_count; ++l) {
      if (l == at.layout) continue;
      if (edges.layout(at.place, at.dtype, at.layout, l))
        relax(step_kind::layout, state{at.place, at.dtype, l}, 2 * size_of_dtype(at.dtype));
      for (std::uint8_t d = 0; d < s.dtype_count; ++d)
        if (d != at.dtype && edges.fused(at.place, at.layout, l, at.dtype, d))
          relax(step_kind::fused, state{at.place, d, l}, size_of_dtype(at.dtype) + size_of_dtype(d));
    }
    for (std::uint8_t d = 0; d < s.dtype_count; ++d)
      if (d != at.dtype && edges.cast(at.place, at.layout, at.dtype, d))
        relax(step_kind::cast, state{at.place, d, at.layout}, size_of_dtype(at.dtype) + size_of_dtype(d));
    for (std::uint8_t q = 0; q < s.place_count; ++q)
      if (q != at.place && edges.copy(at.place, q))
        relax(step_kind::copy, state{q, at.dtype, at.layout}, 2 * size_of_dtype(at.dtype));
  }

  chain out;
  if (goal == unreached) return out;
  out.found = true;
  out.cost = cost[goal];
  out.size = length[goal];
  for (std::size_t node = goal, i = out.size; i > 0; node = previous[node]) out.steps[--i] = via[node];
  return out;
}

// When no chain exists: the first axis, in the order place, data type, layout, that cannot
// be changed on its own.
enum class axis : std::uint8_t { none, place, dtype, layout };

template <class Edges>
constexpr axis missing_axis(const problem& p, const Edges& edges) {
  if (find_chain(p, edges).found) return axis::none;
  problem place_only = p;
  place_only.to.dtype = p.from.dtype;
  place_only.to.layout = p.from.layout;
  if (!find_chain(place_only, edges).found) return axis::place;
  problem no_layout = p;
  no_layout.any_layout_target = true;
  if (!find_chain(no_layout, edges).found) return axis::dtype;
  return axis::layout;
}

}  // namespace fluidk::detail::planning
