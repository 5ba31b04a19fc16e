// cast (X -> Out): Fluid's cast, Out = X converted to the data type that attribute out_dtype
// names ("float32", "int64", "bool", ...: a name as fill_constant's dtype takes it). X decides
// the kernel (its own data type); Out has X's dims and sequence offsets. Conversions:
//   to bool: a value other than 0 is true (NaN too); from bool: 0 or 1;
//   a float to an integer type: its whole part, as C++ and ONNX convert it; a value whose whole
//     part the type cannot hold, or NaN, is an error (C++ leaves it undefined);
//   an integer to a narrower integer type: its low bits (two's complement), as C++ and numpy do;
//   anything to a float type: the nearest value.
// out_dtype is one of float32, float64, int32, int64 and bool.
//
// Kernels: CPU plain (float, double, int32, int64, bool); on another place the CPU's runs as a
// fallback.
#pragma once

#include <array>
#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>
#include <cmath>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <fluidk/program/desc.hpp>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "ops/detail/common.hpp"

namespace fluidk::ops {

namespace detail {
// The data types cast converts between.
using cast_types = boost::mp11::mp_list<float, double, std::int32_t, std::int64_t, bool>;

template <class To, class From>
To cast_value(const execution_context& ctx, From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    // A whole part in [min, -min) is one of To's values: the values in (min - 1, -min), both
    // ends exact in a double (min - 1 is min for int64, hence the first test). NaN fails both.
    constexpr double low = double(std::numeric_limits<To>::min());
    const double d = double(v);
    if (!(d < -low && (d >= low || d > low - 1)))
      fail(ctx, "the value " + std::to_string(double(v)) + " of X is out of the range of " +
                    std::string(name_of(data_type_of<To>)));
    return To(v);
  } else {
    return To(v);
  }
}

// out_dtype, as a data type cast converts to.
inline data_type cast_target(const execution_context& ctx) {
  const attribute* a = ctx.attributes().find("out_dtype");
  require(a != nullptr, ctx, "needs attribute 'out_dtype' (a data type's name: float32, int64, bool, ...)");
  const auto* text = std::get_if<std::string>(a);
  require(text != nullptr, ctx,
          "attribute 'out_dtype' holds " + std::string(kind_name(*a)) + ", not a data type's name (string)");
  data_type target{};
  try {
    target = parse_data_type(*text);
  } catch (const error& e) {
    fail(ctx, "attribute 'out_dtype': " + std::string(e.what()));
  }
  bool known = false;
  boost::mp11::mp_for_each<cast_types>([&](auto t) { known = known || data_type_of<decltype(t)> == target; });
  require(known, ctx,
          "attribute 'out_dtype' is " + std::string(name_of(target)) +
              "; cast converts to float32, float64, int32, int64 and bool");
  return target;
}
}  // namespace detail

template <class T>
struct cast_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const data_type target = detail::cast_target(ctx);
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    Tensor out(x.dims(), target, ctx.place());
    const T* in = x.data<T>();
    const std::int64_t n = x.numel();
    boost::mp11::mp_for_each<detail::cast_types>([&](auto t) {
      using To = decltype(t);
      if (data_type_of<To> != target) return;
      To* y = out.data<To>();
      for (std::int64_t i = 0; i < n; ++i) y[i] = detail::cast_value<To>(ctx, in[i]);
    });
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};

struct cast {
  static constexpr std::string_view name = "cast";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(cast_cpu<float>{}, cast_cpu<double>{}, cast_cpu<std::int32_t>{},
                              cast_cpu<std::int64_t>{}, cast_cpu<bool>{}));

  // InferVarType: Out is a LoDTensor of the data type out_dtype names (when it names one).
  static void infer_var_type(const OpDesc& op, BlockDesc& block) {
    const attribute* a = op.attrs().find("out_dtype");
    const std::string* text = a != nullptr ? std::get_if<std::string>(a) : nullptr;
    std::optional<data_type> target;
    if (text != nullptr) {
      try {
        target = parse_data_type(*text);
      } catch (const error& e) {
        throw error("operator '" + op.type() + "' attribute 'out_dtype': " + std::string(e.what()));
      }
    }
    for (const std::string& name : op.output("Out")) {
      VarDesc& out = block.var_recursive(name);
      out.kind = var_kind::lod_tensor;
      if (target) out.dtype = *target;
    }
  }
};

}  // namespace fluidk::ops
