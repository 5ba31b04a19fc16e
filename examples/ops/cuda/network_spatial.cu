// The CUDA kernels of the network operators of the spatial family and their launchers
// (declared in ops/detail/cuda_launch_spatial.hpp): plain CUDA, no fluidk or Boost header.
#include <cstdint>

#include "ops/detail/cuda_launch_spatial.hpp"

namespace fluidk::ops::cuda_launch {

namespace {

constexpr int threads = 256;

// Grid-stride loops: any n with a bounded grid.
int blocks_for(std::int64_t n) {
  const std::int64_t b = (n + threads - 1) / threads;
  return int(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

__global__ void batch_norm_inference_kernel(const float* x, const float* scale, const float* bias,
                                            const float* mean, const float* var, float* y, std::int64_t n,
                                            std::int64_t channels, std::int64_t inner, float epsilon) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(blockDim.x) * gridDim.x) {
    const std::int64_t c = (i / inner) % channels;
    y[i] = (x[i] - mean[c]) / sqrtf(var[c] + epsilon) * scale[c] + bias[c];
  }
}

// The comparisons of ops/detail/network_activation.hpp's activation_clip_of (fminf and fmaxf
// would drop a NaN).
__global__ void clip_kernel(const float* x, float* y, std::int64_t n, float lo, float hi) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(blockDim.x) * gridDim.x) {
    const float v = x[i];
    const float low = v < lo ? lo : v;
    y[i] = hi < low ? hi : low;
  }
}

__global__ void sigmoid_kernel(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(blockDim.x) * gridDim.x)
    y[i] = 1.0f / (1.0f + expf(-x[i]));
}

}  // namespace

cudaError_t batch_norm_inference_f32(cudaStream_t stream, const float* x, const float* scale,
                                     const float* bias, const float* mean, const float* var, float* y,
                                     std::int64_t n, std::int64_t channels, std::int64_t inner,
                                     float epsilon) {
  if (n == 0) return cudaSuccess;
  batch_norm_inference_kernel<<<blocks_for(n), threads, 0, stream>>>(x, scale, bias, mean, var, y, n,
                                                                     channels, inner, epsilon);
  return cudaGetLastError();
}

cudaError_t clip_f32(cudaStream_t stream, const float* x, float* y, std::int64_t n, float lo, float hi) {
  if (n == 0) return cudaSuccess;
  clip_kernel<<<blocks_for(n), threads, 0, stream>>>(x, y, n, lo, hi);
  return cudaGetLastError();
}

cudaError_t sigmoid_f32(cudaStream_t stream, const float* x, float* y, std::int64_t n) {
  if (n == 0) return cudaSuccess;
  sigmoid_kernel<<<blocks_for(n), threads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

}  // namespace fluidk::ops::cuda_launch
