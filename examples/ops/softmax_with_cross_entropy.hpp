// softmax_with_cross_entropy (Logits, Label -> Softmax, Loss): the softmax of each row of
// Logits (its last dimension) and the cross entropy against Label, computed stably from the
// log-sum-exp of the row shifted by its maximum.
//   hard labels (soft_label false, the default): Label holds int64 class indices, one per
//     row ([..., 1]); Loss = log(sum_j exp(x_j)) - x_label; rows whose label is
//     ignore_index (int, default -100) get loss 0; any other label outside [0, classes) is
//     an error.
//   soft labels (soft_label true): Label is a distribution of Logits' shape and data type;
//     Loss = -sum_j label_j * log(softmax_j).
// Softmax has Logits' shape, Loss its shape with the last dimension 1; both keep Logits'
// sequence offsets. Logits decide the kernel's data type; Label is never transformed.
//
// Kernels: CPU plain (float and double logits). Other places add their groups to `kernels`.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "ops/detail/common.hpp"

namespace fluidk::ops {

template <class T>
struct softmax_with_cross_entropy_cpu {
  void operator()(execution_context& ctx) const {
    const Tensor logits = detail::row_major(detail::input(ctx, "Logits"));
    const Tensor label = detail::row_major(detail::input(ctx, "Label"));
    const dims& shape = logits.dims();
    detail::require(shape.rank() >= 1 && shape[shape.rank() - 1] > 0, ctx,
                    "Logits must have a last dimension of classes, not " + shape.to_string());
    const std::int64_t classes = shape[shape.rank() - 1];
    const std::int64_t rows = shape.numel() / classes;
    const bool soft = ctx.attr_or<bool>("soft_label", false);
    const std::int64_t ignore_index = detail::int_attr(ctx, "ignore_index", -100);
    if (soft) {
      detail::require(label.dtype() == data_type_of<T> && label.dims() == shape, ctx,
                      "with soft_label, Label must be " + std::string(name_of(data_type_of<T>)) + " " +
                          shape.to_string() + " like Logits, not " + label.describe());
    } else {
      detail::require(label.dtype() == data_type::int64 && label.numel() == rows, ctx,
                      "Label must hold one int64_t class index per row of Logits (" + std::to_string(rows) +
                          "), not " + label.describe());
    }

    dims loss_shape = shape;
    loss_shape[shape.rank() - 1] = 1;
    Tensor softmax(shape, data_type_of<T>, ctx.place());
    Tensor loss(loss_shape, data_type_of<T>, ctx.place());
    const T* x = logits.data<T>();
    T* p = softmax.data<T>();
    T* l = loss.data<T>();
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* row = x + r * classes;
      T* prob = p + r * classes;
      const T max = *std::max_element(row, row + classes);
      T sum = 0;
      for (std::int64_t j = 0; j < classes; ++j) sum += prob[j] = std::exp(row[j] - max);
      const T log_sum = std::log(sum);
      for (std::int64_t j = 0; j < classes; ++j) prob[j] /= sum;
      if (soft) {
        const T* target = label.data<T>() + r * classes;
        T entropy = 0;
        for (std::int64_t j = 0; j < classes; ++j) entropy -= target[j] * (row[j] - max - log_sum);
        l[r] = entropy;
      } else {
        const std::int64_t c = label.data<std::int64_t>()[r];
        if (c == ignore_index) {
          l[r] = 0;
          continue;
        }
        detail::require(c >= 0 && c < classes, ctx,
                        "Label " + std::to_string(c) + " of row " + std::to_string(r) + " is outside [0, " +
                            std::to_string(classes) + ") and is not ignore_index (" +
                            std::to_string(ignore_index) + ")");
        l[r] = log_sum - (row[c] - max);
      }
    }
    const lod offsets = detail::input_lod(ctx, "Logits");  // a copy: an output may be the input
    detail::set_output(ctx, "Softmax", std::move(softmax), offsets);
    detail::set_output(ctx, "Loss", std::move(loss), offsets);
  }
};

struct softmax_with_cross_entropy {
  static constexpr std::string_view name = "softmax_with_cross_entropy";
  static constexpr std::array<std::string_view, 2> inputs{"Logits", "Label"};
  static constexpr std::array<std::string_view, 2> outputs{"Softmax", "Loss"};
  static constexpr std::string_view data_type_input = "Logits";
  static constexpr std::array<std::string_view, 1> no_transform_inputs{"Label"};
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<cpu>(
      softmax_with_cross_entropy_cpu<float>{}, softmax_with_cross_entropy_cpu<double>{}));
};

}  // namespace fluidk::ops
