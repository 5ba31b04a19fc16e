// lookup_table (W, Ids -> Out): the embedding lookup. W is the table [rows, width]; Ids holds
// int64 row indices ([..., 1] or [n]); Out[i] = W[Ids[i]], with Ids' shape, its last
// dimension replaced by (or, for 1-D Ids, extended with) width, and Ids' sequence offsets.
// Rows looked up with padding_idx (int64 attribute, default -1: none) are zeros; an index
// outside [0, rows) is an error. W decides the data type; Ids keep their own (int64).
//
// Kernels: CPU plain (float, double). Other places add their groups to `kernels`.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ops/detail/common.hpp"

namespace fluidk::ops {

namespace detail {
// The ids as a flat list, checked: int64, each a row of the table.
inline std::span<const std::int64_t> checked_ids(const execution_context& ctx, const Tensor& ids,
                                                 std::int64_t rows) {
  require(ids.dtype() == data_type::int64, ctx,
          "Ids must hold int64_t, not " + std::string(name_of(ids.dtype())));
  require(ids.dims().rank() >= 1 && (ids.dims().rank() == 1 || ids.dims()[ids.dims().rank() - 1] == 1), ctx,
          "Ids must be [n] or [..., 1], not " + ids.dims().to_string());
  const std::span<const std::int64_t> out(ids.data<std::int64_t>(), std::size_t(ids.numel()));
  for (std::size_t i = 0; i < out.size(); ++i)
    require(out[i] >= 0 && out[i] < rows, ctx,
            "Ids[" + std::to_string(i) + "] = " + std::to_string(out[i]) +
                " is outside the table's rows [0, " + std::to_string(rows) + ")");
  return out;
}

// padding_idx: -1 (none, the default) or a row of the table.
inline std::int64_t padding_index(const execution_context& ctx, std::int64_t rows) {
  const std::int64_t p = int_attr(ctx, "padding_idx", -1);
  require(p == -1 || (p >= 0 && p < rows), ctx,
          "padding_idx " + std::to_string(p) + " is neither -1 (none) nor a row of the table [0, " +
              std::to_string(rows) + ")");
  return p;
}
}  // namespace detail

template <class T>
struct lookup_table_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor w = detail::row_major(detail::input(ctx, "W"));
    const Tensor& ids_tensor = detail::input(ctx, "Ids");
    detail::require(w.dims().rank() == 2, ctx, "W must be 2-D [rows, width], not " + w.dims().to_string());
    const std::int64_t rows = w.dims()[0], width = w.dims()[1];
    const std::int64_t padding_idx = detail::padding_index(ctx, rows);
    const std::span<const std::int64_t> ids = detail::checked_ids(ctx, ids_tensor, rows);

    std::vector<std::int64_t> shape(ids_tensor.dims().begin(), ids_tensor.dims().end());
    if (shape.size() == 1)
      shape.push_back(width);
    else
      shape.back() = width;
    Tensor out(dims(std::span<const std::int64_t>(shape)), data_type_of<T>, ctx.place());
    const T* table = w.data<T>();
    T* y = out.data<T>();
    for (std::size_t i = 0; i < ids.size(); ++i) {
      T* row = y + std::int64_t(i) * width;
      if (ids[i] == padding_idx)
        std::fill(row, row + width, T(0));
      else
        std::copy(table + ids[i] * width, table + (ids[i] + 1) * width, row);
    }
    ctx.set_output("Out", std::move(out), ctx.input_lod("Ids"));
  }
};

struct lookup_table {
  static constexpr std::string_view name = "lookup_table";
  static constexpr std::array<std::string_view, 2> inputs{"W", "Ids"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr std::string_view data_type_input = "W";
  static constexpr auto kernels =
      fluidk::make_kernels(fluidk::kernels_on<cpu>(lookup_table_cpu<float>{}, lookup_table_cpu<double>{}));
};

}  // namespace fluidk::ops
