// The CUDA kernels of the network operators of the shape family and their launchers
// (declared in ops/detail/cuda_launch_shape.hpp): plain CUDA, no fluidk or Boost header.
// (matmul and gemm are cuBLAS's; flatten2 and reshape2 are views, no kernel.)
#include <cstdint>

#include "ops/detail/cuda_launch_shape.hpp"

namespace fluidk::ops::cuda_launch {

namespace {

constexpr int threads = 256;

// Grid-stride loops: any n with a bounded grid.
int blocks_for(std::int64_t n) {
  const std::int64_t b = (n + threads - 1) / threads;
  return int(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

template <class T>
__global__ void matrix_scale_kernel(T* y, std::int64_t n, T factor) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(blockDim.x) * gridDim.x)
    y[i] *= factor;
}

template <class T>
__global__ void gemm_broadcast_c_kernel(const T* c, T* out, std::int64_t m, std::int64_t n,
                                        std::int64_t row_stride, std::int64_t col_stride, T beta) {
  for (std::int64_t e = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < m * n;
       e += std::int64_t(blockDim.x) * gridDim.x)
    out[e] = beta * c[(e / n) * row_stride + (e % n) * col_stride];
}

// kind: 1 relu, 2 clip to [lo, hi], 3 sigmoid; as relu_of, activation_clip_of and
// activation_sigmoid_of compute them.
template <class T>
__global__ void gemm_activation_kernel(T* y, std::int64_t n, int kind, T lo, T hi) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(blockDim.x) * gridDim.x) {
    const T v = y[i];
    if (kind == 1) {
      y[i] = v > T(0) ? v : T(0);
    } else if (kind == 2) {
      const T low = v < lo ? lo : v;
      y[i] = hi < low ? hi : low;
    } else {
      y[i] = T(1) / (T(1) + exp(-v));
    }
  }
}

template <class T>
__global__ void concat_part_kernel(const T* x, T* out, std::int64_t outer, std::int64_t inner,
                                   std::int64_t out_inner, std::int64_t at) {
  for (std::int64_t e = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < outer * inner;
       e += std::int64_t(blockDim.x) * gridDim.x)
    out[(e / inner) * out_inner + at + e % inner] = x[e];
}

}  // namespace

template <class T>
cudaError_t matrix_scale(cudaStream_t stream, T* y, std::int64_t n, T factor) {
  if (n == 0) return cudaSuccess;
  matrix_scale_kernel<<<blocks_for(n), threads, 0, stream>>>(y, n, factor);
  return cudaGetLastError();
}

template <class T>
cudaError_t gemm_broadcast_c(cudaStream_t stream, const T* c, T* out, std::int64_t m, std::int64_t n,
                             std::int64_t row_stride, std::int64_t col_stride, T beta) {
  if (m * n == 0) return cudaSuccess;
  gemm_broadcast_c_kernel<<<blocks_for(m * n), threads, 0, stream>>>(c, out, m, n, row_stride, col_stride,
                                                                     beta);
  return cudaGetLastError();
}

template <class T>
cudaError_t gemm_activation(cudaStream_t stream, T* y, std::int64_t n, int kind, T lo, T hi) {
  if (n == 0) return cudaSuccess;
  gemm_activation_kernel<<<blocks_for(n), threads, 0, stream>>>(y, n, kind, lo, hi);
  return cudaGetLastError();
}

template <class T>
cudaError_t concat_part(cudaStream_t stream, const T* x, T* out, std::int64_t outer, std::int64_t inner,
                        std::int64_t out_inner, std::int64_t at) {
  if (outer * inner == 0) return cudaSuccess;
  concat_part_kernel<<<blocks_for(outer * inner), threads, 0, stream>>>(x, out, outer, inner, out_inner, at);
  return cudaGetLastError();
}

#define FLUIDK_OPS_CUDA_SHAPE_INSTANTIATE(T)                                                                \
  template cudaError_t matrix_scale<T>(cudaStream_t, T*, std::int64_t, T);                                  \
  template cudaError_t gemm_broadcast_c<T>(cudaStream_t, const T*, T*, std::int64_t, std::int64_t,          \
                                           std::int64_t, std::int64_t, T);                                  \
  template cudaError_t gemm_activation<T>(cudaStream_t, T*, std::int64_t, int, T, T);                       \
  template cudaError_t concat_part<T>(cudaStream_t, const T*, T*, std::int64_t, std::int64_t, std::int64_t, \
                                      std::int64_t);
FLUIDK_OPS_CUDA_SHAPE_INSTANTIATE(float)
FLUIDK_OPS_CUDA_SHAPE_INSTANTIATE(double)
#undef FLUIDK_OPS_CUDA_SHAPE_INSTANTIATE

}  // namespace fluidk::ops::cuda_launch
