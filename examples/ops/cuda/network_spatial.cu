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
    // The factor in double first, as the CPU kernels (batch_norm_affine_of): (x - mean) / sqrt
    // could overflow before the scale brings it back.
    const float a = float(double(scale[c]) / sqrt(double(var[c]) + double(epsilon)));
    y[i] = (x[i] - mean[c]) * a + bias[c];
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

// y = act(y + bias[c] + residual): the comparisons of activation_clip_of and relu_of.
template <class T>
__global__ void conv2d_epilogue_kernel(T* y, const T* bias, const T* residual, std::int64_t n,
                                       std::int64_t channels, std::int64_t plane, int activation, T lo,
                                       T hi) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(blockDim.x) * gridDim.x) {
    T v = y[i];
    if (bias != nullptr) v += bias[(i / plane) % channels];
    if (residual != nullptr) v += residual[i];
    if (activation == 1) {
      v = v > T(0) ? v : T(0);
    } else if (activation == 2) {
      const T low = v < lo ? lo : v;
      v = hi < low ? hi : low;
    } else if (activation == 3) {
      v = T(1) / (T(1) + exp(-v));
    }
    y[i] = v;
  }
}

template <class T>
cudaError_t conv2d_epilogue(cudaStream_t stream, T* y, const T* bias, const T* residual, std::int64_t n,
                            std::int64_t channels, std::int64_t plane, int activation, T lo, T hi) {
  if (n == 0 || plane == 0 || channels == 0) return cudaSuccess;
  conv2d_epilogue_kernel<T>
      <<<blocks_for(n), threads, 0, stream>>>(y, bias, residual, n, channels, plane, activation, lo, hi);
  return cudaGetLastError();
}

}  // namespace

cudaError_t conv2d_epilogue_f32(cudaStream_t stream, float* y, const float* bias, const float* residual,
                                std::int64_t n, std::int64_t channels, std::int64_t plane, int activation,
                                float lo, float hi) {
  return conv2d_epilogue<float>(stream, y, bias, residual, n, channels, plane, activation, lo, hi);
}
cudaError_t conv2d_epilogue_f64(cudaStream_t stream, double* y, const double* bias, const double* residual,
                                std::int64_t n, std::int64_t channels, std::int64_t plane, int activation,
                                double lo, double hi) {
  return conv2d_epilogue<double>(stream, y, bias, residual, n, channels, plane, activation, lo, hi);
}

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
