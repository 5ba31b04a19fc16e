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
// sequence offsets. Logits decide the kernel's data type; Label is never transformed (a
// kernel reads it on its own place, copying it there when it lives elsewhere).
//
// Kernels: CPU plain and CUDA, float and double logits.
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
#if FLUIDK_OPS_CUDA
#include "ops/detail/cuda.hpp"
#endif

namespace fluidk::ops {

// The shapes of one call, checked: Logits [..., classes] read as [rows, classes], and Label
// (on the kernel's place, whichever place it came from: it is exempt from transforms).
struct softmax_with_cross_entropy_geometry {
  std::int64_t rows, classes, ignore_index;
  bool soft;
  dims shape, loss_shape;
  Tensor logits, label;

  template <class T>
  static softmax_with_cross_entropy_geometry of(const execution_context& ctx) {
    softmax_with_cross_entropy_geometry g{};
    g.logits = detail::row_major(detail::input(ctx, "Logits"));
    g.label = detail::row_major(detail::input(ctx, "Label"));
    if (g.label.place() != ctx.place()) g.label = copy_to(g.label, ctx.place());
    g.shape = g.logits.dims();
    detail::require(g.shape.rank() >= 1 && g.shape[g.shape.rank() - 1] > 0, ctx,
                    "Logits must have a last dimension of classes, not " + g.shape.to_string());
    g.classes = g.shape[g.shape.rank() - 1];
    g.rows = g.shape.numel() / g.classes;
    g.soft = ctx.attr_or<bool>("soft_label", false);
    g.ignore_index = detail::int_attr(ctx, "ignore_index", -100);
    if (g.soft) {
      detail::require(g.label.dtype() == data_type_of<T> && g.label.dims() == g.shape, ctx,
                      "with soft_label, Label must be " + std::string(name_of(data_type_of<T>)) + " " +
                          g.shape.to_string() + " like Logits, not " + g.label.describe());
    } else {
      detail::require(g.label.dtype() == data_type::int64 && g.label.numel() == g.rows, ctx,
                      "Label must hold one int64_t class index per row of Logits (" + std::to_string(g.rows) +
                          "), not " + g.label.describe());
    }
    g.loss_shape = g.shape.with(g.shape.rank() - 1, 1);
    return g;
  }

  [[noreturn]] void bad_label(const execution_context& ctx, std::int64_t row, std::int64_t label) const {
    detail::fail(ctx, "Label " + std::to_string(label) + " of row " + std::to_string(row) +
                          " is outside [0, " + std::to_string(classes) + ") and is not ignore_index (" +
                          std::to_string(ignore_index) + ")");
  }
};

namespace detail {
// Writes both outputs with Logits' sequence offsets (copied first: an output may be the input).
// The offsets are checked against both before either is written (Loss of 1-D Logits has one
// row), so that a refusal leaves both outputs as they were.
inline void set_softmax_outputs(const execution_context& ctx, Tensor softmax, Tensor loss) {
  const lod offsets = ctx.input_lod("Logits");
  for (const Tensor* t : {&softmax, &loss}) LoDTensor(*t).check_lod(offsets);
  ctx.set_output("Softmax", std::move(softmax), offsets);
  ctx.set_output("Loss", std::move(loss), offsets);
}
}  // namespace detail

template <class T>
struct softmax_with_cross_entropy_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const softmax_with_cross_entropy_geometry g = softmax_with_cross_entropy_geometry::of<T>(ctx);
    const std::int64_t classes = g.classes;
    Tensor softmax(g.shape, data_type_of<T>, ctx.place());
    Tensor loss(g.loss_shape, data_type_of<T>, ctx.place());
    const T* x = g.logits.data<T>();
    T* p = softmax.data<T>();
    T* l = loss.data<T>();
    for (std::int64_t r = 0; r < g.rows; ++r) {
      const T* row = x + r * classes;
      T* prob = p + r * classes;
      const T max = *std::max_element(row, row + classes);
      T sum = 0;
      for (std::int64_t j = 0; j < classes; ++j) sum += prob[j] = std::exp(row[j] - max);
      const T log_sum = std::log(sum);
      for (std::int64_t j = 0; j < classes; ++j) prob[j] /= sum;
      if (g.soft) {
        const T* target = g.label.data<T>() + r * classes;
        T entropy = 0;
        for (std::int64_t j = 0; j < classes; ++j) entropy -= target[j] * (row[j] - max - log_sum);
        l[r] = entropy;
      } else {
        const std::int64_t c = g.label.data<std::int64_t>()[r];
        if (c == g.ignore_index) {
          l[r] = 0;
          continue;
        }
        if (c < 0 || c >= classes) g.bad_label(ctx, r, c);
        l[r] = log_sum - (row[c] - max);
      }
    }
    detail::set_softmax_outputs(ctx, std::move(softmax), std::move(loss));
  }
};

#if FLUIDK_OPS_CUDA
// One thread block per row. A label out of range is found on the device and reported (the
// smallest such row) after the kernel, before any output is written.
template <class T>
struct softmax_with_cross_entropy_cuda {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    detail::cuda_call call(ctx);
    const softmax_with_cross_entropy_geometry g = softmax_with_cross_entropy_geometry::of<T>(ctx);
    Tensor softmax(g.shape, data_type_of<T>, ctx.place());
    Tensor loss(g.loss_shape, data_type_of<T>, ctx.place());
    // The kernel lowers this (read as unsigned) to the first bad row; all ones = none.
    Tensor bad_row({1}, data_type::int64);
    constexpr std::uint64_t none = ~std::uint64_t(0);
    bad_row.data<std::int64_t>()[0] = -1;
    Tensor bad_row_device = copy_to(bad_row, ctx.place());
    detail::cuda_require(
        cuda_launch::softmax_with_cross_entropy<T>(
            call.stream(), detail::device_data<T>(g.logits),
            g.soft ? nullptr : detail::device_data<std::int64_t>(g.label),
            g.soft ? detail::device_data<T>(g.label) : nullptr, detail::device_data<T>(softmax),
            detail::device_data<T>(loss), g.rows, g.classes, g.ignore_index,
            reinterpret_cast<unsigned long long*>(detail::device_data<std::int64_t>(bad_row_device))),
        ctx, "the softmax_with_cross_entropy kernel");
    if (!g.soft) {
      const auto row = std::uint64_t(copy_to(bad_row_device, cpu_place).data<std::int64_t>()[0]);  // waits
      if (row != none) {
        const Tensor labels = copy_to(g.label, cpu_place);
        g.bad_label(ctx, std::int64_t(row), labels.data<std::int64_t>()[row]);
      }
    }
    detail::set_softmax_outputs(ctx, std::move(softmax), std::move(loss));
  }
};
namespace detail {
inline constexpr auto softmax_with_cross_entropy_cuda_kernels = fluidk::kernels_on<cuda>(
    softmax_with_cross_entropy_cuda<float>{}, softmax_with_cross_entropy_cuda<double>{});
}
#else
namespace detail {
inline constexpr auto softmax_with_cross_entropy_cuda_kernels = no_kernels();
}
#endif

struct softmax_with_cross_entropy {
  static constexpr std::string_view name = "softmax_with_cross_entropy";
  static constexpr std::array<std::string_view, 2> inputs{"Logits", "Label"};
  static constexpr std::array<std::string_view, 2> outputs{"Softmax", "Loss"};
  static constexpr std::string_view data_type_input = "Logits";
  static constexpr std::array<std::string_view, 1> no_transform_inputs{"Label"};
  static constexpr auto kernels =
      fluidk::make_kernels(fluidk::kernels_on<cpu>(softmax_with_cross_entropy_cpu<float>{},
                                                   softmax_with_cross_entropy_cpu<double>{}),
                           detail::softmax_with_cross_entropy_cuda_kernels);
};

}  // namespace fluidk::ops
