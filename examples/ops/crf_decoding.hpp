// crf_decoding (Emission, Transition -> ViterbiPath): the most likely tag sequence of a
// linear-chain CRF for each sequence, by Viterbi decoding as Fluid's crf_decoding does.
//   Emission: [rows, tags], the rows of all sequences one after the other, split by one
//     level of sequence offsets (a tensor without offsets is one sequence);
//   Transition: [tags + 2, tags]: row 0 the start weights, row 1 the end weights, rows 2..
//     the weight of moving from tag i (row 2 + i) to tag j (column j);
//   ViterbiPath: int64 [rows, 1] with Emission's offsets, the best tag of each row.
// The score of a path is start[t0] + sum_k emission[k][t_k] + sum_k transition[t_{k-1}][t_k]
// + end[t_last]; ties go to the smaller tag. The operator runs on the CPU whatever the
// program's place (run_on): its inputs come to the CPU and its output stays there.
//
// Kernels: CPU plain (float, double).
#pragma once

#include <array>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ops/detail/common.hpp"

namespace fluidk::ops {

namespace detail {
// Viterbi over one sequence of `length` rows: x [length, tags], w [tags + 2, tags].
template <class T>
void viterbi(const T* x, std::int64_t length, std::int64_t tags, const T* w, std::int64_t* path) {
  if (length == 0) return;
  constexpr std::int64_t transition_base = 2;  // rows 0 and 1 are the start and end weights
  std::vector<T> alpha(std::size_t(length * tags));
  std::vector<std::int64_t> track(std::size_t(length * tags), 0);
  for (std::int64_t i = 0; i < tags; ++i) alpha[std::size_t(i)] = w[i] + x[i];
  for (std::int64_t k = 1; k < length; ++k)
    for (std::int64_t i = 0; i < tags; ++i) {
      T best = std::numeric_limits<T>::lowest();
      std::int64_t best_j = 0;
      for (std::int64_t j = 0; j < tags; ++j) {
        const T score = alpha[std::size_t((k - 1) * tags + j)] + w[(j + transition_base) * tags + i];
        if (score > best) {
          best = score;
          best_j = j;
        }
      }
      alpha[std::size_t(k * tags + i)] = best + x[k * tags + i];
      track[std::size_t(k * tags + i)] = best_j;
    }
  T best = std::numeric_limits<T>::lowest();
  std::int64_t last = 0;
  for (std::int64_t i = 0; i < tags; ++i) {
    const T score = alpha[std::size_t((length - 1) * tags + i)] + w[tags + i];
    if (score > best) {
      best = score;
      last = i;
    }
  }
  path[length - 1] = last;
  for (std::int64_t k = length - 1; k >= 1; --k) path[k - 1] = last = track[std::size_t(k * tags + last)];
}
}  // namespace detail

template <class T>
struct crf_decoding_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor emission = detail::row_major(detail::input(ctx, "Emission"));
    const Tensor transition = detail::row_major(detail::input(ctx, "Transition"));
    detail::require(emission.dims().rank() == 2, ctx,
                    "Emission must be 2-D [rows, tags], not " + emission.dims().to_string());
    const std::int64_t rows = emission.dims()[0], tags = emission.dims()[1];
    detail::require(tags > 0, ctx, "Emission has no tags");
    detail::require(transition.dims() == dims{tags + 2, tags}, ctx,
                    "Transition must be [tags + 2, tags] = [" + std::to_string(tags + 2) + ", " +
                        std::to_string(tags) + "], not " + transition.dims().to_string());
    const lod offsets = ctx.input_lod("Emission");  // a copy: the output may be the input
    detail::require(
        offsets.size() <= 1, ctx,
        "Emission must have one level of sequence offsets, not " + std::to_string(offsets.size()));
    const std::vector<std::size_t> starts =
        offsets.empty() ? std::vector<std::size_t>{0, std::size_t(rows)} : offsets[0];
    detail::require(starts.back() == std::size_t(rows), ctx,
                    "Emission's sequence offsets end at " + std::to_string(starts.back()) + ", not at its " +
                        std::to_string(rows) + " rows");

    Tensor path({rows, 1}, data_type::int64, ctx.place());
    const T* x = emission.data<T>();
    const T* w = transition.data<T>();
    std::int64_t* p = path.data<std::int64_t>();
    for (std::size_t s = 0; s + 1 < starts.size(); ++s) {
      const auto begin = std::int64_t(starts[s]), length = std::int64_t(starts[s + 1] - starts[s]);
      detail::viterbi(x + begin * tags, length, tags, w, p + begin);
    }
    ctx.set_output("ViterbiPath", std::move(path), offsets);
  }
};

struct crf_decoding {
  static constexpr std::string_view name = "crf_decoding";
  static constexpr std::array<std::string_view, 2> inputs{"Emission", "Transition"};
  static constexpr std::array<std::string_view, 1> outputs{"ViterbiPath"};
  using run_on = cpu;
  static constexpr auto kernels =
      fluidk::make_kernels(fluidk::kernels_on<cpu>(crf_decoding_cpu<float>{}, crf_decoding_cpu<double>{}));
};

}  // namespace fluidk::ops
