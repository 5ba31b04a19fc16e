// The CUDA kernels of the network operators of the elementwise family and their launchers
// (declared in ops/detail/cuda_launch_elementwise.hpp): plain CUDA, no fluidk or Boost header.
// softmax and dropout's scale (dropout's Mask is a cudaMemset; assign and dropout's
// upscale_in_train are views).
#include <cstdint>

#include "ops/detail/cuda_launch_elementwise.hpp"

namespace fluidk::ops::cuda_launch {

namespace {

constexpr int threads = 256;

// Grid-stride loops: any n with a bounded grid.
int blocks_for(std::int64_t n) {
  const std::int64_t b = (n + threads - 1) / threads;
  return int(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

// One thread per (outer, inner) row, like the OpenCL kernel.
template <class T>
__global__ void softmax_kernel(const T* x, T* y, std::int64_t outer, std::int64_t n, std::int64_t inner) {
  for (std::int64_t r = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < outer * inner;
       r += std::int64_t(blockDim.x) * gridDim.x) {
    const std::int64_t base = (r / inner) * n * inner + r % inner;
    const T* in = x + base;
    T* out = y + base;
    T m = in[0];
    for (std::int64_t k = 1; k < n; ++k) m = max(m, in[k * inner]);
    T sum = 0;
    for (std::int64_t k = 0; k < n; ++k) {
      const T e = exp(in[k * inner] - m);
      out[k * inner] = e;
      sum += e;
    }
    for (std::int64_t k = 0; k < n; ++k) out[k * inner] /= sum;
  }
}

template <class T>
__global__ void scale_kernel(const T* x, T* y, std::int64_t n, T factor) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(blockDim.x) * gridDim.x)
    y[i] = x[i] * factor;
}

template <class T>
__global__ void binary_broadcast_kernel(binary_op op, const T* a, const T* b, T* out, broadcast_shape shape,
                                        std::int64_t total) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += std::int64_t(blockDim.x) * gridDim.x) {
    std::int64_t rest = i, ai = 0, bi = 0;
    for (int d = shape.rank - 1; d >= 0; --d) {
      const std::int64_t at = rest % shape.extents[d];
      rest /= shape.extents[d];
      ai += at * shape.a_strides[d];
      bi += at * shape.b_strides[d];
    }
    out[i] = op == binary_op::add ? a[ai] + b[bi] : a[ai] * b[bi];
  }
}

}  // namespace

template <class T>
cudaError_t binary_broadcast(cudaStream_t stream, binary_op op, const T* a, const T* b, T* out,
                             broadcast_shape shape, std::int64_t total) {
  if (total == 0) return cudaSuccess;
  binary_broadcast_kernel<<<blocks_for(total), threads, 0, stream>>>(op, a, b, out, shape, total);
  return cudaGetLastError();
}

template <class T>
cudaError_t softmax(cudaStream_t stream, const T* x, T* y, std::int64_t outer, std::int64_t n,
                    std::int64_t inner) {
  if (outer * n * inner == 0) return cudaSuccess;
  softmax_kernel<<<blocks_for(outer * inner), threads, 0, stream>>>(x, y, outer, n, inner);
  return cudaGetLastError();
}

template <class T>
cudaError_t scale(cudaStream_t stream, const T* x, T* y, std::int64_t n, T factor) {
  if (n == 0) return cudaSuccess;
  scale_kernel<<<blocks_for(n), threads, 0, stream>>>(x, y, n, factor);
  return cudaGetLastError();
}

#define FLUIDK_OPS_CUDA_ELEMENTWISE_INSTANTIATE(T)                                                           \
  template cudaError_t softmax<T>(cudaStream_t, const T*, T*, std::int64_t, std::int64_t, std::int64_t);     \
  template cudaError_t scale<T>(cudaStream_t, const T*, T*, std::int64_t, T);                                \
  template cudaError_t binary_broadcast<T>(cudaStream_t, binary_op, const T*, const T*, T*, broadcast_shape, \
                                           std::int64_t);
FLUIDK_OPS_CUDA_ELEMENTWISE_INSTANTIATE(float)
FLUIDK_OPS_CUDA_ELEMENTWISE_INSTANTIATE(double)
#undef FLUIDK_OPS_CUDA_ELEMENTWISE_INSTANTIATE

}  // namespace fluidk::ops::cuda_launch
