// sum (X: several inputs -> Out), Fluid's semantics over LoDTensor and SelectedRows inputs:
//   any input a LoDTensor: Out is a LoDTensor of that input's shape (and of the first dense
//     input's sequence offsets): the sum of the dense inputs, with the rows of every
//     SelectedRows input added into the rows they name (its height must be Out's rows);
//     dense inputs with no elements are skipped, the others must share one shape;
//   all SelectedRows: Out is SelectedRows, the inputs concatenated: their rows one after the
//     other (repeats kept; a SelectedRows' repeated rows add up), their values stacked, the
//     common height;
//   all LoDTensorArray: Out is a LoDTensorArray whose element i is the sum of the inputs'
//     elements i that hold elements (offsets shared), up to the last such element (in place,
//     Out = X[0], at least as long as X[0] was).
// The operator's InferVarType (sum::infer_var_type) says the same for programs. All
// inputs share the data type. The output may be one of the inputs (in-place accumulation).
//
// Kernels: CPU plain (float, double, int32_t, int64_t). Other places add their groups to
// `kernels`.
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

namespace fluidk::ops {

template <class T>
struct sum_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const auto args = ctx.inputs("X");
    detail::require(!args.empty(), ctx, "X has no inputs");
    if (std::any_of(args.begin(), args.end(), holds_array)) return sum_arrays(ctx, args);
    std::vector<Tensor> dense;  // the dense inputs that hold elements
    std::vector<const SelectedRows*> sparse;
    const Tensor* first_dense = nullptr;
    const lod* offsets = nullptr;  // of the first dense input
    for (std::size_t i = 0; i < args.size(); ++i) {
      const kernel_arg& arg = args[i];
      const Variable* v = arg.variable();
      detail::require(!arg.empty() && (v == nullptr || v->initialized()), ctx,
                      "input X[" + std::to_string(i) + "] holds nothing");
      if (v != nullptr && v->is<SelectedRows>()) {
        v->get<SelectedRows>().check();  // rows and value may have been set apart
        sparse.push_back(&v->get<SelectedRows>());
        continue;
      }
      const Tensor& t = arg.tensor();
      if (first_dense == nullptr) {
        first_dense = &t;
        if (v != nullptr) offsets = &v->get<LoDTensor>().lod();
      }
      if (t.initialized() && t.numel() > 0) dense.push_back(t);
    }
    if (first_dense != nullptr)
      ctx.set_output("Out", add(ctx, dense, sparse, *first_dense), offsets != nullptr ? *offsets : lod{});
    else
      concatenate(ctx, sparse);
  }

 private:
  static bool holds_array(const kernel_arg& arg) noexcept {
    const Variable* v = arg.variable();
    return v != nullptr && v->is<LoDTensorArray>();
  }

  // LoDTensorArray inputs (if any input is one, all must be), as Fluid's sum adds them:
  // element i of Out is the sum of the inputs' elements i that hold elements (an input shorter
  // than i + 1, or whose element is empty, adds nothing), with their offsets, which must
  // agree; Out is as long as the last such element's index + 1 (in place, Out = X[0], at least
  // X[0]'s length, as Fluid's sum adds into X[0]), an element that no input filled left empty.
  // Written whole at the end, so Out may be one of the inputs.
  static void sum_arrays(execution_context& ctx, std::span<kernel_arg> args) {
    std::vector<const LoDTensorArray*> arrays;
    std::size_t length = 0;
    for (std::size_t i = 0; i < args.size(); ++i) {
      detail::require(
          holds_array(args[i]), ctx,
          "if any input of X is a LoDTensorArray, all must be; X[" + std::to_string(i) + "] is not");
      arrays.push_back(&args[i].variable()->get<LoDTensorArray>());
      for (std::size_t e = 0; e < arrays.back()->size(); ++e)
        if ((*arrays.back())[e].initialized() && (*arrays.back())[e].numel() > 0)
          length = std::max(length, e + 1);
    }
    // In place when Out is X[0] by name: an input that the executor moves is read from a copy
    // in a child scope, under the same name (docs/programs.md).
    kernel_arg& out = ctx.output_arg("Out");
    if (out.variable() != nullptr && out.variable()->name() == args.front().variable()->name())
      length = std::max(length, arrays.front()->size());
    LoDTensorArray result(length);
    for (std::size_t e = 0; e < length; ++e) {
      std::vector<Tensor> dense;
      const lod* offsets = nullptr;
      for (std::size_t i = 0; i < arrays.size(); ++i) {
        if (e >= arrays[i]->size()) continue;
        const LoDTensor& t = (*arrays[i])[e];
        if (!t.initialized() || t.numel() == 0) continue;
        detail::require(
            offsets == nullptr || *offsets == t.lod(), ctx,
            "the elements " + std::to_string(e) + " of the arrays of X must share their offsets (LoD)");
        offsets = &t.lod();
        dense.push_back(t);
      }
      if (dense.empty()) continue;
      const lod kept = *offsets;
      result[e] = LoDTensor(add(ctx, dense, {}, dense.front()), kept);
    }
    detail::require(out.variable() != nullptr, ctx, "a LoDTensorArray Out needs an output variable");
    out.variable()->get_mutable<LoDTensorArray>() = std::move(result);
  }

  // The dense sum: the dense inputs added elementwise, then each SelectedRows row added into
  // its row.
  static Tensor add(execution_context& ctx, std::vector<Tensor>& dense,
                    const std::vector<const SelectedRows*>& sparse, const Tensor& first_dense) {
    // Every input in one layout: added over the storage in that layout; else row-major.
    const bool one_layout = sparse.empty() && std::all_of(dense.begin(), dense.end(), [&](const Tensor& t) {
                              return t.layout() == dense.front().layout();
                            });
    if (!one_layout)
      for (Tensor& t : dense) t = detail::row_major(t);
    // The shape: the first dense input's that holds elements (Fluid skips empty ones), else
    // the SelectedRows' dense shape, else the first dense input's.
    const dims shape = !dense.empty()    ? dense.front().dims()
                       : !sparse.empty() ? sparse.front()->dense_dims()
                                         : first_dense.dims();
    const data_layout layout = !dense.empty() ? dense.front().layout() : data_layout::any;
    for (const Tensor& t : dense)
      detail::require(t.dims() == shape, ctx,
                      "the dense inputs of X must share one shape: " + shape.to_string() + " and " +
                          t.dims().to_string());
    Tensor out(shape, data_type_of<T>, ctx.place(), layout);
    T* y = out.data<T>();
    const std::int64_t n = detail::storage_elements(out);
    std::fill(y, y + n, T(0));
    for (const Tensor& t : dense) {
      const T* x = t.data<T>();
      for (std::int64_t i = 0; i < n; ++i) y[i] += x[i];
    }
    const std::int64_t height = shape.rank() > 0 ? shape[0] : 1;
    const std::int64_t width = height > 0 ? shape.numel() / height : 0;
    for (const SelectedRows* s : sparse) {
      detail::require(s->height() == height, ctx,
                      "a SelectedRows input of height " + std::to_string(s->height()) +
                          " cannot be added into the dense sum's " + std::to_string(height) + " rows");
      if (s->rows().empty()) continue;
      const Tensor value = detail::row_major(s->value());
      detail::require(value.numel() == std::int64_t(s->rows().size()) * width, ctx,
                      "a SelectedRows input's rows " + value.dims().to_string() + " do not have the width " +
                          std::to_string(width) + " of the dense sum " + shape.to_string());
      const T* v = value.data<T>();
      for (std::size_t r = 0; r < s->rows().size(); ++r) {
        T* row = y + s->rows()[r] * width;
        for (std::int64_t j = 0; j < width; ++j) row[j] += v[std::int64_t(r) * width + j];
      }
    }
    return out;
  }

  // The SelectedRows output: the inputs' rows and values one after the other.
  static void concatenate(execution_context& ctx, const std::vector<const SelectedRows*>& sparse) {
    const std::int64_t height = sparse.front()->height();
    std::vector<std::int64_t> rows;
    dims row_dims;  // the dims of one row of a value
    bool have_row_dims = false;
    for (const SelectedRows* s : sparse) {
      detail::require(s->height() == height, ctx,
                      "the SelectedRows inputs of X must share one height: " + std::to_string(height) +
                          " and " + std::to_string(s->height()));
      if (s->rows().empty()) continue;
      const dims d = s->value().dims().with(0, 1);
      detail::require(!have_row_dims || d == row_dims, ctx,
                      "the SelectedRows inputs of X must share one row shape: " + row_dims.to_string() +
                          " and " + d.to_string());
      row_dims = d;
      have_row_dims = true;
      rows.insert(rows.end(), s->rows().begin(), s->rows().end());
    }
    const dims value_dims = (have_row_dims ? row_dims : dims{0}).with(0, std::int64_t(rows.size()));
    Tensor value(value_dims, data_type_of<T>, ctx.place());
    T* v = value.data<T>();
    for (const SelectedRows* s : sparse) {
      if (s->rows().empty()) continue;
      const Tensor part = detail::row_major(s->value());
      v = std::copy(part.data<T>(), part.data<T>() + part.numel(), v);
    }
    SelectedRows result(std::move(rows), height, std::move(value));
    kernel_arg& out = ctx.output_arg("Out");
    detail::require(out.variable() != nullptr, ctx, "a SelectedRows Out needs an output variable");
    out.mutable_selected_rows() = std::move(result);
  }
};

struct sum {
  static constexpr std::string_view name = "sum";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<cpu>(
      sum_cpu<float>{}, sum_cpu<double>{}, sum_cpu<std::int32_t>{}, sum_cpu<std::int64_t>{}));

  // InferVarType: if any input is a LoDTensorArray, all must be and Out is one; else Out is a
  // LoDTensor if any input is one, else SelectedRows. Out's data type is the first input's.
  static void infer_var_type(const OpDesc& op, BlockDesc& block) {
    const std::vector<std::string>& xs = op.input("X");
    const std::vector<std::string>& outs = op.output("Out");
    const data_type dtype =
        input_var_desc(op, block, "X",
                       first_input_name(op, "X", "sum takes the output's data type from the first"))
            .dtype;
    const std::string* array = nullptr;  // an input that is a LoDTensorArray
    const VarDesc* not_array = nullptr;  // an input that is not
    bool any_dense = false;
    for (const std::string& name : xs) {
      const VarDesc& v = input_var_desc(op, block, "X", name);
      if (v.kind == var_kind::lod_tensor_array) {
        if (array == nullptr) array = &name;
      } else if (not_array == nullptr) {
        not_array = &v;
      }
      any_dense = any_dense || v.kind == var_kind::lod_tensor;
    }
    if (array != nullptr && not_array != nullptr)
      throw error("operator '" + op.type() +
                  "' input slot 'X': if any input is a LoDTensorArray, all must be; '" + *array +
                  "' is a LoDTensorArray but '" + not_array->name + "' is a " +
                  std::string(name_of(not_array->kind)));
    const var_kind kind = array != nullptr ? var_kind::lod_tensor_array
                          : any_dense      ? var_kind::lod_tensor
                                           : var_kind::selected_rows;
    for (const std::string& name : outs) {
      VarDesc& out = block.var_recursive(name);
      out.kind = kind;
      out.dtype = dtype;
    }
  }
};

}  // namespace fluidk::ops
