// lookup_table_grad (W, Ids, Out@GRAD -> W@GRAD): the gradient of lookup_table with respect
// to the table. Out@GRAD holds one row of width W.dims[1] per id.
//   is_sparse true: W@GRAD is SelectedRows, rows = the ids (in order, repeats kept: the
//     rows of a SelectedRows add up), height = W's rows, value = the rows of Out@GRAD.
//   is_sparse false (default): W@GRAD is a dense LoDTensor of W's shape, zero except the
//     rows looked up, which accumulate their gradient rows.
// Rows looked up with padding_idx get no gradient (zero rows in the sparse value), so both
// forms describe the same matrix. W is read for its shape only, so it is never transformed
// (a large table stays where it is); Out@GRAD decides the data type, as in Fluid. The
// operator's InferVarType makes W@GRAD SelectedRows exactly when is_sparse is true.
//
// Kernels: CPU plain (float, double). Other places add their groups to `kernels`.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <fluidk/program/desc.hpp>
#include <fluidk/selected_rows.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ops/detail/common.hpp"
#include "ops/lookup_table.hpp"

namespace fluidk::ops {

template <class T>
struct lookup_table_grad_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor& w = detail::input(ctx, "W");
    const Tensor& ids_tensor = detail::input(ctx, "Ids");
    const Tensor grad = detail::row_major(detail::input(ctx, "Out@GRAD"));
    detail::require(w.dims().rank() == 2, ctx, "W must be 2-D [rows, width], not " + w.dims().to_string());
    const std::int64_t rows = w.dims()[0], width = w.dims()[1];
    const std::int64_t padding_idx = detail::padding_index(ctx, rows);
    const std::span<const std::int64_t> ids = detail::checked_ids(ctx, ids_tensor, rows);
    const std::int64_t n = std::int64_t(ids.size());
    detail::require(
        grad.dims().rank() >= 1 && grad.dims()[grad.dims().rank() - 1] == width && grad.numel() == n * width,
        ctx,
        "Out@GRAD " + grad.dims().to_string() + " must hold one row of width " + std::to_string(width) +
            " per id (" + std::to_string(n) + ")");
    const T* g = grad.data<T>();

    if (ctx.attr_or<bool>("is_sparse", false)) {
      kernel_arg& out = ctx.output_arg("W@GRAD");
      detail::require(out.variable() != nullptr, ctx,
                      "a sparse W@GRAD (SelectedRows) needs an output variable");
      Tensor value({n, width}, data_type_of<T>, ctx.place());
      T* v = value.data<T>();
      std::copy(g, g + n * width, v);
      for (std::int64_t i = 0; i < n; ++i)
        if (ids[std::size_t(i)] == padding_idx) std::fill(v + i * width, v + (i + 1) * width, T(0));
      SelectedRows result(std::vector<std::int64_t>(ids.begin(), ids.end()), rows, std::move(value));
      out.mutable_selected_rows() = std::move(result);
    } else {
      Tensor dense({rows, width}, data_type_of<T>, ctx.place());
      T* d = dense.data<T>();
      std::fill(d, d + rows * width, T(0));
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t id = ids[std::size_t(i)];
        if (id == padding_idx) continue;
        for (std::int64_t j = 0; j < width; ++j) d[id * width + j] += g[i * width + j];
      }
      ctx.set_output("W@GRAD", std::move(dense));
    }
  }
};

struct lookup_table_grad {
  static constexpr std::string_view name = "lookup_table_grad";
  static constexpr std::array<std::string_view, 3> inputs{"W", "Ids", "Out@GRAD"};
  static constexpr std::array<std::string_view, 1> outputs{"W@GRAD"};
  static constexpr std::string_view data_type_input = "Out@GRAD";
  static constexpr std::array<std::string_view, 1> no_transform_inputs{"W"};
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(lookup_table_grad_cpu<float>{}, lookup_table_grad_cpu<double>{}));

  // InferVarType: W@GRAD is SelectedRows when the bool attribute is_sparse is true, else
  // (also when absent) a LoDTensor; its data type is W's.
  static void infer_var_type(const OpDesc& op, BlockDesc& block) {
    const bool sparse = op.attr_or<bool>("is_sparse", false);
    const data_type dtype =
        input_var_desc(op, block, "W", first_input_name(op, "W", "the weight gradient takes W's data type"))
            .dtype;
    for (const std::string& name : op.output("W@GRAD")) {
      VarDesc& grad = block.var_recursive(name);
      grad.kind = sparse ? var_kind::selected_rows : var_kind::lod_tensor;
      grad.dtype = dtype;
    }
  }
};

}  // namespace fluidk::ops
