// tensor_array_to_tensor (X -> Out, OutIndex): Fluid's operator that makes one tensor of a
// LoDTensorArray's elements, in order. Attributes axis (int, default 0) and use_stack (bool,
// default false):
//   use_stack true: the elements, all of one shape, stacked along a new dimension `axis` of Out
//     (in [-(rank + 1), rank], negative counted from the end): ONNX Loop's scan outputs, axis 0;
//   use_stack false: the elements concatenated along their dimension `axis` (in [-rank,
//     rank - 1]), their other dims equal.
// OutIndex (optional, int32 [elements]): each element's extent along axis (1 when stacked).
// Every element must hold data, of one data type; an empty array is an error (its elements'
// shape is unknown). Out holds no sequence offsets.
//
// Kernels: CPU plain (float, double, int32, int64, bool); on another place the CPU's runs as
// a fallback.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ops/detail/common.hpp"
#include "ops/detail/network_shape.hpp"
#include "ops/tensor_array.hpp"

namespace fluidk::ops {

template <class T>
struct tensor_array_to_tensor_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const LoDTensorArray& array = detail::input_array(ctx);
    detail::require(!array.empty(), ctx,
                    "input X is an empty array: there is no element to take a shape from");
    const bool stack = ctx.attr_or<bool>("use_stack", false);
    std::vector<Tensor> parts;
    for (std::size_t k = 0; k < array.size(); ++k) {
      detail::require(array[k].initialized(), ctx, "element " + std::to_string(k) + " of X is empty");
      detail::require(array[k].dtype() == data_type_of<T>, ctx,
                      "element " + std::to_string(k) + " of X holds " +
                          std::string(name_of(array[k].dtype())) + ", element 0 " +
                          std::string(name_of(data_type_of<T>)) + "; they must share one");
      parts.push_back(detail::row_major(array[k]));
    }
    const dims& first = parts.front().dims();
    const std::int64_t rank = std::int64_t(first.rank());
    const std::int64_t given = detail::int_attr(ctx, "axis", 0);
    const std::int64_t low = stack ? -(rank + 1) : -rank, high = stack ? rank : rank - 1;
    detail::require(given >= low && given <= high, ctx,
                    "axis " + std::to_string(given) + " is outside [" + std::to_string(low) + ", " +
                        std::to_string(high) + "] for elements " + first.to_string() +
                        (stack ? " stacked" : " concatenated"));
    const std::size_t axis = std::size_t(given < 0 ? given + (stack ? rank + 1 : rank) : given);
    if (stack)
      detail::require(first.rank() < max_rank, ctx,
                      "stacking elements " + first.to_string() + " needs rank " + std::to_string(rank + 1) +
                          ", beyond fluidk's " + std::to_string(max_rank));
    // Out's dims, and each element's extent along axis (its block of `extent * inner` elements
    // per outer index).
    std::vector<std::int64_t> extents;
    std::int64_t total = 0;
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const dims& d = parts[k].dims();
      bool fits = d.rank() == first.rank();
      for (std::size_t j = 0; fits && j < d.rank(); ++j) fits = d[j] == first[j] || (!stack && j == axis);
      detail::require(fits, ctx,
                      "element " + std::to_string(k) + " of X is " + d.to_string() + ", element 0 " +
                          first.to_string() +
                          (stack ? "; stacked elements share one shape"
                                 : "; concatenated elements differ only along axis " + std::to_string(axis)));
      extents.push_back(stack ? 1 : d[axis]);
      total += extents.back();
    }
    std::vector<std::int64_t> out_dims(first.begin(), first.end());
    if (stack)
      out_dims.insert(out_dims.begin() + std::ptrdiff_t(axis), total);
    else
      out_dims[axis] = total;
    const dims shape{std::span<const std::int64_t>(out_dims)};
    // The elements' outer part (dims before axis) and inner part (from axis on, one extent).
    const std::int64_t outer = detail::product(first, 0, axis);
    const std::int64_t inner = detail::product(first, stack ? axis : axis + 1, first.rank());
    Tensor out(shape, data_type_of<T>, ctx.place());
    T* y = out.data<T>();
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::size_t k = 0; k < parts.size(); ++k) {
        const std::int64_t block = extents[k] * inner;
        const T* x = std::as_const(parts[k]).data<T>() + o * block;  // read: a view of X's element
        y = std::copy(x, x + block, y);
      }
    if (detail::output_requested(ctx, "OutIndex")) {
      Tensor index({std::int64_t(extents.size())}, data_type::int32, ctx.place());
      for (std::size_t k = 0; k < extents.size(); ++k) {
        detail::require(extents[k] <= INT32_MAX, ctx,
                        "element " + std::to_string(k) + "'s extent does not fit OutIndex's int32");
        index.data<std::int32_t>()[k] = std::int32_t(extents[k]);
      }
      ctx.set_output("OutIndex", std::move(index));
    }
    ctx.set_output("Out", std::move(out));
  }
};

struct tensor_array_to_tensor {
  static constexpr std::string_view name = "tensor_array_to_tensor";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 2> outputs{"Out", "OutIndex"};
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<cpu>(
      tensor_array_to_tensor_cpu<float>{}, tensor_array_to_tensor_cpu<double>{},
      tensor_array_to_tensor_cpu<std::int32_t>{}, tensor_array_to_tensor_cpu<std::int64_t>{},
      tensor_array_to_tensor_cpu<bool>{}));

  // InferVarType: Out is a LoDTensor of the array's data type; OutIndex an int32 LoDTensor.
  static void infer_var_type(const OpDesc& op, BlockDesc& block) {
    detail::outputs_of_x_type(op, block, "Out", var_kind::lod_tensor,
                              "tensor_array_to_tensor takes the array's data type");
    if (op.has_output("OutIndex"))
      for (const std::string& name : op.output("OutIndex")) {
        VarDesc& index = block.var_recursive(name);
        index.kind = var_kind::lod_tensor;
        index.dtype = data_type::int32;
      }
  }
};

}  // namespace fluidk::ops
