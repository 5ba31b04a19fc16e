// The launchers of the spatial family's CUDA kernels (ops/cuda/network_spatial.cu): device pointers
// in, work queued on `stream`, the launch status out.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fluidk::ops::cuda_launch {

// batch_norm, inference: x as [outer, channels, inner] row-major, n = its elements;
// y = (x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + bias[c].
cudaError_t batch_norm_inference_f32(cudaStream_t stream, const float* x, const float* scale,
                                     const float* bias, const float* mean, const float* var, float* y,
                                     std::int64_t n, std::int64_t channels, std::int64_t inner,
                                     float epsilon);

// y = min(max(x, lo), hi) (NaN stays NaN), n elements.
cudaError_t clip_f32(cudaStream_t stream, const float* x, float* y, std::int64_t n, float lo, float hi);

// y = 1 / (1 + exp(-x)), n elements.
cudaError_t sigmoid_f32(cudaStream_t stream, const float* x, float* y, std::int64_t n);

// conv2d's epilogue, in place on y as [n, channels, plane] row-major: y = act(y + bias[c] +
// residual), bias and residual each left out when null; activation 0 none, 1 relu, 2 clip to
// [lo, hi], 3 sigmoid (conv2d_epilogue's kinds), as the CPU kernels compute them.
cudaError_t conv2d_epilogue_f32(cudaStream_t stream, float* y, const float* bias, const float* residual,
                                std::int64_t n, std::int64_t channels, std::int64_t plane, int activation,
                                float lo, float hi);
cudaError_t conv2d_epilogue_f64(cudaStream_t stream, double* y, const double* bias, const double* residual,
                                std::int64_t n, std::int64_t channels, std::int64_t plane, int activation,
                                double lo, double hi);

}  // namespace fluidk::ops::cuda_launch
