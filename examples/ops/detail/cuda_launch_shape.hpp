// The launchers of the shape family's CUDA kernels (ops/cuda/network_shape.cu): device pointers
// in, work queued on `stream`, the launch status out. float and double are instantiated.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fluidk::ops::cuda_launch {

// y[i] *= factor, n elements.
template <class T>
cudaError_t matrix_scale(cudaStream_t stream, T* y, std::int64_t n, T factor);

// out [m, n] = beta * c broadcast: element (i, j) from c[i * row_stride + j * col_stride]
// (ONNX Gemm's C, before the product accumulates onto it).
template <class T>
cudaError_t gemm_broadcast_c(cudaStream_t stream, const T* c, T* out, std::int64_t m, std::int64_t n,
                             std::int64_t row_stride, std::int64_t col_stride, T beta);

// gemm's fused activation on y, n elements, in place: kind 1 relu, 2 clip to [lo, hi],
// 3 sigmoid.
template <class T>
cudaError_t gemm_activation(cudaStream_t stream, T* y, std::int64_t n, int kind, T lo, T hi);

// One input of a concatenation: x as [outer, inner] into out as [outer, out_inner], from
// column `at` of each row.
template <class T>
cudaError_t concat_part(cudaStream_t stream, const T* x, T* out, std::int64_t outer, std::int64_t inner,
                        std::int64_t out_inner, std::int64_t at);

}  // namespace fluidk::ops::cuda_launch
