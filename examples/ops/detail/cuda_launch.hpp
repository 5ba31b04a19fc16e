// The launchers of the example operators' CUDA kernels (ops/cuda/kernels.cu, compiled by
// nvcc into the fluidk_ops_cuda library): device pointers in, work queued on `stream`, the
// launch status out. float and double are instantiated.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fluidk::ops::cuda_launch {

// y = max(x, 0), n elements.
template <class T>
cudaError_t relu(cudaStream_t stream, const T* x, T* y, std::int64_t n);

// c[i] = a[i] + b[(i / post) % n] for i < total: a as [pre, n, post], b as [n].
template <class T>
cudaError_t add(cudaStream_t stream, const T* a, const T* b, T* c, std::int64_t total, std::int64_t n,
                std::int64_t post);

// Every row of c [m, n] set to `row` [n] (fc's bias, before the GEMM accumulates onto it).
template <class T>
cudaError_t fill_rows(cudaStream_t stream, const T* row, T* c, std::int64_t m, std::int64_t n);

// Softmax of each row of logits [rows, classes] and its cross entropy: against hard_label
// (int64 per row) when soft_label is null, else against soft_label [rows, classes]. A hard
// label outside [0, classes) that is not ignore_index lowers *bad_row to its row (the
// caller sets it to the maximum first).
template <class T>
cudaError_t softmax_with_cross_entropy(cudaStream_t stream, const T* logits, const std::int64_t* hard_label,
                                       const T* soft_label, T* softmax, T* loss, std::int64_t rows,
                                       std::int64_t classes, std::int64_t ignore_index,
                                       unsigned long long* bad_row);

// y[i] = value, n elements.
template <class T>
cudaError_t fill(cudaStream_t stream, T* y, std::int64_t n, T value);

// y[i] = uniform_random's element i for this seed in [lo, hi) (ops/detail/random.hpp).
template <class T>
cudaError_t uniform(cudaStream_t stream, T* y, std::int64_t n, std::uint64_t seed, T lo, T hi);

}  // namespace fluidk::ops::cuda_launch
