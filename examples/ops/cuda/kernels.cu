// The CUDA kernels of the example operators and their launchers: plain CUDA, no fluidk or
// Boost header, so nvcc compiles only this. The operators' kernel classes (host code, in
// the operator headers) call the launchers declared in ops/detail/cuda.hpp with device
// pointers and the stream of the device's fluidk context.
#include <cstdint>

#include "ops/detail/cuda_launch.hpp"
#include "ops/detail/random.hpp"

namespace fluidk::ops::cuda_launch {

namespace {

constexpr int threads = 256;

// Grid-stride loops: any n with a bounded grid.
int blocks_for(std::int64_t n) {
  const std::int64_t b = (n + threads - 1) / threads;
  return int(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

template <class T>
__global__ void relu_kernel(const T* x, T* y, std::int64_t n) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(blockDim.x) * gridDim.x) {
    const T v = x[i];
    y[i] = v > T(0) ? v : T(0);
  }
}

template <class T>
__global__ void fill_kernel(T* y, std::int64_t n, T value) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(blockDim.x) * gridDim.x)
    y[i] = value;
}

template <class T>
__global__ void uniform_kernel(T* y, std::int64_t n, std::uint64_t seed, T lo, T hi) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(blockDim.x) * gridDim.x)
    y[i] = random::uniform(seed, std::uint64_t(i), lo, hi);
}

template <class T>
__global__ void add_kernel(const T* a, const T* b, T* c, std::int64_t total, std::int64_t n,
                           std::int64_t post) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += std::int64_t(blockDim.x) * gridDim.x)
    c[i] = a[i] + b[(i / post) % n];
}

template <class T>
__global__ void fill_rows_kernel(const T* row, T* c, std::int64_t m, std::int64_t n) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < m * n;
       i += std::int64_t(blockDim.x) * gridDim.x)
    c[i] = row[i % n];
}

__device__ inline float exp_of(float x) { return expf(x); }
__device__ inline double exp_of(double x) { return exp(x); }
__device__ inline float log_of(float x) { return logf(x); }
__device__ inline double log_of(double x) { return log(x); }

// One row per thread block (the kernel below loops over rows): the maximum, the sum of
// exponentials (shared-memory reductions), then the softmax and the loss. A hard label
// outside [0, classes) that is not ignore_index is recorded in *bad_row (the smallest such
// row) and the row's loss is left 0.
template <class T>
__device__ void softmax_cross_entropy_row(const T* logits, const std::int64_t* hard, const T* soft,
                                          T* softmax, T* loss, std::int64_t r, std::int64_t classes,
                                          std::int64_t ignore_index, unsigned long long* bad_row,
                                          T* partial) {
  const T* row = logits + r * classes;
  T* prob = softmax + r * classes;

  T max = row[0];
  for (std::int64_t j = threadIdx.x; j < classes; j += blockDim.x) max = row[j] > max ? row[j] : max;
  partial[threadIdx.x] = max;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s && partial[threadIdx.x + s] > partial[threadIdx.x])
      partial[threadIdx.x] = partial[threadIdx.x + s];
    __syncthreads();
  }
  max = partial[0];
  __syncthreads();

  T sum = 0;
  for (std::int64_t j = threadIdx.x; j < classes; j += blockDim.x) sum += prob[j] = exp_of(row[j] - max);
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  sum = partial[0];
  const T log_sum = log_of(sum);
  __syncthreads();

  T entropy = 0;
  for (std::int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
    prob[j] /= sum;
    if (soft != nullptr) entropy -= soft[r * classes + j] * (row[j] - max - log_sum);
  }
  if (soft != nullptr) {
    partial[threadIdx.x] = entropy;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
      if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) loss[r] = partial[0];
    __syncthreads();  // partial is reused by the next row
    return;
  }
  if (threadIdx.x != 0) return;
  const std::int64_t c = hard[r];
  if (c == ignore_index) {
    loss[r] = 0;
  } else if (c < 0 || c >= classes) {
    loss[r] = 0;
    atomicMin(bad_row, static_cast<unsigned long long>(r));
  } else {
    loss[r] = log_sum - (row[c] - max);
  }
}

template <class T>
__global__ void softmax_cross_entropy_kernel(const T* logits, const std::int64_t* hard, const T* soft,
                                             T* softmax, T* loss, std::int64_t rows, std::int64_t classes,
                                             std::int64_t ignore_index, unsigned long long* bad_row) {
  __shared__ T partial[threads];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    softmax_cross_entropy_row(logits, hard, soft, softmax, loss, r, classes, ignore_index, bad_row, partial);
}

}  // namespace

template <class T>
cudaError_t relu(cudaStream_t stream, const T* x, T* y, std::int64_t n) {
  if (n == 0) return cudaSuccess;
  relu_kernel<<<blocks_for(n), threads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

template <class T>
cudaError_t fill(cudaStream_t stream, T* y, std::int64_t n, T value) {
  if (n == 0) return cudaSuccess;
  fill_kernel<<<blocks_for(n), threads, 0, stream>>>(y, n, value);
  return cudaGetLastError();
}

template <class T>
cudaError_t uniform(cudaStream_t stream, T* y, std::int64_t n, std::uint64_t seed, T lo, T hi) {
  if (n == 0) return cudaSuccess;
  uniform_kernel<<<blocks_for(n), threads, 0, stream>>>(y, n, seed, lo, hi);
  return cudaGetLastError();
}

template <class T>
cudaError_t add(cudaStream_t stream, const T* a, const T* b, T* c, std::int64_t total, std::int64_t n,
                std::int64_t post) {
  if (total == 0) return cudaSuccess;
  add_kernel<<<blocks_for(total), threads, 0, stream>>>(a, b, c, total, n, post);
  return cudaGetLastError();
}

template <class T>
cudaError_t fill_rows(cudaStream_t stream, const T* row, T* c, std::int64_t m, std::int64_t n) {
  if (m * n == 0) return cudaSuccess;
  fill_rows_kernel<<<blocks_for(m * n), threads, 0, stream>>>(row, c, m, n);
  return cudaGetLastError();
}

template <class T>
cudaError_t softmax_with_cross_entropy(cudaStream_t stream, const T* logits, const std::int64_t* hard_label,
                                       const T* soft_label, T* softmax, T* loss, std::int64_t rows,
                                       std::int64_t classes, std::int64_t ignore_index,
                                       unsigned long long* bad_row) {
  if (rows == 0) return cudaSuccess;
  // One block per row, at most 65535 blocks: each block then takes every gridDim.x-th row.
  softmax_cross_entropy_kernel<<<blocks_for(rows * threads), threads, 0, stream>>>(
      logits, hard_label, soft_label, softmax, loss, rows, classes, ignore_index, bad_row);
  return cudaGetLastError();
}

#define FLUIDK_OPS_CUDA_INSTANTIATE(T)                                                                      \
  template cudaError_t relu<T>(cudaStream_t, const T*, T*, std::int64_t);                                   \
  template cudaError_t fill<T>(cudaStream_t, T*, std::int64_t, T);                                          \
  template cudaError_t uniform<T>(cudaStream_t, T*, std::int64_t, std::uint64_t, T, T);                     \
  template cudaError_t add<T>(cudaStream_t, const T*, const T*, T*, std::int64_t, std::int64_t,             \
                              std::int64_t);                                                                \
  template cudaError_t fill_rows<T>(cudaStream_t, const T*, T*, std::int64_t, std::int64_t);                \
  template cudaError_t softmax_with_cross_entropy<T>(cudaStream_t, const T*, const std::int64_t*, const T*, \
                                                     T*, T*, std::int64_t, std::int64_t, std::int64_t,      \
                                                     unsigned long long*);
FLUIDK_OPS_CUDA_INSTANTIATE(float)
FLUIDK_OPS_CUDA_INSTANTIATE(double)
#undef FLUIDK_OPS_CUDA_INSTANTIATE

}  // namespace fluidk::ops::cuda_launch
