// The logical operators, Fluid's: logical_and, logical_or, logical_xor (X, Y -> Out) and
// logical_not (X -> Out), over bool tensors. The binary ones broadcast as elementwise_add does
// (numpy's rule, axis -1; Fluid's, axis >= 0); logical_not keeps X's dims. Out keeps X's
// sequence offsets when it has X's dims.
//
// Kernels: CPU plain (bool); on another place the CPU's runs as a fallback.
#pragma once

#include <array>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <string_view>
#include <utility>

#include "ops/detail/common.hpp"
#include "ops/detail/network_elementwise.hpp"

namespace fluidk::ops {

struct and_logic {
  static constexpr std::string_view name = "logical_and";
  static bool apply(bool a, bool b) { return a && b; }
};
struct or_logic {
  static constexpr std::string_view name = "logical_or";
  static bool apply(bool a, bool b) { return a || b; }
};
struct xor_logic {
  static constexpr std::string_view name = "logical_xor";
  static bool apply(bool a, bool b) { return a != b; }
};

template <class Logic>
struct logical_binary_cpu {
  using dtype = bool;
  void operator()(execution_context& ctx) const {
    const bool keeps_zero = detail::keeps_zero<bool, Logic, bool>();
    const auto [x, y] = detail::elementwise_operands(ctx, keeps_zero);
    const broadcast_geometry g = broadcast_geometry::of(ctx, x, y);
    Tensor out(g.out, data_type::boolean, ctx.place(), g.layout);
    detail::broadcast_loop<bool, Logic, bool>(g, x.data<bool>(), y.data<bool>(), out.data<bool>());
    ctx.set_output("Out", std::move(out), g.offsets(ctx, x.dims()));
  }
};

template <class Logic>
struct logical_binary_operator {
  static constexpr std::string_view name = Logic::name;
  static constexpr std::array<std::string_view, 2> inputs{"X", "Y"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<cpu>(logical_binary_cpu<Logic>{}));
};

using logical_and = logical_binary_operator<and_logic>;
using logical_or = logical_binary_operator<or_logic>;
using logical_xor = logical_binary_operator<xor_logic>;

// Elementwise over the storage in X's layout (the padding lanes of a blocked layout hold no
// element anyone reads).
struct logical_not_cpu {
  using dtype = bool;
  void operator()(execution_context& ctx) const {
    detail::map_storage<bool>(ctx, [](bool v) { return !v; });
  }
};

struct logical_not {
  static constexpr std::string_view name = "logical_not";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<cpu>(logical_not_cpu{}));
};

}  // namespace fluidk::ops
