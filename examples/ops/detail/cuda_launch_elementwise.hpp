// The launchers of the elementwise family's CUDA kernels (ops/cuda/network_elementwise.cu): device pointers
// in, work queued on `stream`, the launch status out. float and double are instantiated.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace fluidk::ops::cuda_launch {

// Softmax of x as [outer, n, inner] along n, the maximum subtracted first.
template <class T>
cudaError_t softmax(cudaStream_t stream, const T* x, T* y, std::int64_t outer, std::int64_t n,
                    std::int64_t inner);

// y = x * factor, n elements.
// out[i] = a op b over Out's dims (rank at most broadcast_max_rank), each operand read through
// its own element strides (0 along a dim it repeats); total elements.
inline constexpr std::size_t broadcast_max_rank = 8;
struct broadcast_shape {
  int rank = 1;
  std::int64_t extents[broadcast_max_rank] = {};
  std::int64_t a_strides[broadcast_max_rank] = {};
  std::int64_t b_strides[broadcast_max_rank] = {};
};
enum class binary_op : int { add, mul };
template <class T>
cudaError_t binary_broadcast(cudaStream_t stream, binary_op op, const T* a, const T* b, T* out,
                             broadcast_shape shape, std::int64_t total);

template <class T>
cudaError_t scale(cudaStream_t stream, const T* x, T* y, std::int64_t n, T factor);

}  // namespace fluidk::ops::cuda_launch
