// Fluid's LoDTensorArray operators, a loop's per-step values:
//   write_to_array (X, I -> Out): Out[I] = X. Out is a LoDTensorArray, grown to I + 1 elements
//     when shorter (the elements between left empty); its other elements are kept. The element
//     is a view of X (its storage shared, its sequence offsets copied).
//   read_from_array (X, I -> Out): Out = X[I], a view of the element; I past X's last element,
//     or an empty element, is an error.
// I is an int64 (or int32) tensor of one element, read on the host wherever it is (a copy of
// one value); a negative I is an error. Their InferVarType (infer_var_type) makes
// write_to_array's Out a LoDTensorArray and read_from_array's a LoDTensor, of X's data type.
//
// Kernels: CPU plain (float, double, int32, int64, bool): the views need no device code, and
// on another place the CPU's runs as a fallback (elements on a device are brought to the CPU).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <fluidk/program/desc.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "ops/detail/common.hpp"
#include "ops/detail/network_shape.hpp"

namespace fluidk::ops {

namespace detail {
// Input I as an index: one int64 or int32 element, not negative.
inline std::size_t array_index(const execution_context& ctx) {
  const Tensor& given = input(ctx, "I");
  require(given.dtype() == data_type::int64 || given.dtype() == data_type::int32, ctx,
          "input I holds " + std::string(name_of(given.dtype())) + "; an index is int64 (or int32)");
  require(given.numel() == 1, ctx, "input I must hold one element, not " + given.dims().to_string());
  const Tensor i = given.place().host_accessible() ? given : copy_to(given, cpu_place);
  const std::int64_t value =
      i.dtype() == data_type::int64 ? i.data<std::int64_t>()[0] : i.data<std::int32_t>()[0];
  require(value >= 0, ctx, "input I is " + std::to_string(value) + "; an index is not negative");
  return std::size_t(value);
}

// The LoDTensorArray of input X, or an error naming what X holds.
inline const LoDTensorArray& input_array(const execution_context& ctx) {
  const Variable* v = ctx.input_arg("X").variable();
  require(v != nullptr, ctx, "input X must be a variable holding a LoDTensorArray");
  require(v->is<LoDTensorArray>(), ctx,
          "input X holds " + std::string(name_of(v->kind())) + ", not a LoDTensorArray");
  return v->get<LoDTensorArray>();
}

// InferVarType's one rule for the array operators: every variable of output `slot` is of `kind`
// and of input X's data type (`why` says why X is needed, when the slot is empty).
inline void outputs_of_x_type(const OpDesc& op, BlockDesc& block, std::string_view slot, var_kind kind,
                              std::string_view why) {
  const data_type dtype = input_var_desc(op, block, "X", first_input_name(op, "X", why)).dtype;
  for (const std::string& name : op.output(slot)) {
    VarDesc& out = block.var_recursive(name);
    out.kind = kind;
    out.dtype = dtype;
  }
}
}  // namespace detail

template <class T>
struct write_to_array_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor& x = detail::input(ctx, "X");
    const std::size_t i = detail::array_index(ctx);
    Variable* out = ctx.output_arg("Out").variable();
    detail::require(out != nullptr, ctx, "output Out must be a variable (it holds a LoDTensorArray)");
    detail::require(!out->initialized() || out->is<LoDTensorArray>(), ctx,
                    "output Out holds " + std::string(name_of(out->kind())) + ", not a LoDTensorArray");
    LoDTensor element(x, ctx.input_lod("X"));
    LoDTensorArray& array = out->get_mutable<LoDTensorArray>();
    if (array.size() <= i) array.resize(i + 1);
    array[i] = std::move(element);
  }
};

struct write_to_array {
  static constexpr std::string_view name = "write_to_array";
  static constexpr std::array<std::string_view, 2> inputs{"X", "I"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr std::string_view data_type_input = "X";
  // I is read where it is, in its own data type.
  static constexpr std::array<std::string_view, 1> no_transform_inputs{"I"};
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<cpu>(
      write_to_array_cpu<float>{}, write_to_array_cpu<double>{}, write_to_array_cpu<std::int32_t>{},
      write_to_array_cpu<std::int64_t>{}, write_to_array_cpu<bool>{}));

  // InferVarType: Out is a LoDTensorArray of X's data type.
  static void infer_var_type(const OpDesc& op, BlockDesc& block) {
    detail::outputs_of_x_type(op, block, "Out", var_kind::lod_tensor_array,
                              "write_to_array writes X into the array");
  }
};

template <class T>
struct read_from_array_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const LoDTensorArray& array = detail::input_array(ctx);
    const std::size_t i = detail::array_index(ctx);
    detail::require(i < array.size(), ctx,
                    "input I is " + std::to_string(i) + ", past the array's " + std::to_string(array.size()) +
                        " element(s)");
    const LoDTensor& element = array[i];
    detail::require(element.initialized(), ctx, "element " + std::to_string(i) + " of the array is empty");
    detail::set_output_sharing_input(ctx, "Out", element, element.lod());
  }
};

struct read_from_array {
  static constexpr std::string_view name = "read_from_array";
  static constexpr std::array<std::string_view, 2> inputs{"X", "I"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr std::string_view data_type_input = "X";
  static constexpr std::array<std::string_view, 1> no_transform_inputs{"I"};
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<cpu>(
      read_from_array_cpu<float>{}, read_from_array_cpu<double>{}, read_from_array_cpu<std::int32_t>{},
      read_from_array_cpu<std::int64_t>{}, read_from_array_cpu<bool>{}));

  // InferVarType: Out is a LoDTensor of the array's data type.
  static void infer_var_type(const OpDesc& op, BlockDesc& block) {
    detail::outputs_of_x_type(op, block, "Out", var_kind::lod_tensor,
                              "read_from_array reads an element of X");
  }
};

}  // namespace fluidk::ops
