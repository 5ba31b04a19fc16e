// What the CUDA kernels of the example operators share (host side): the device context of
// the call, typed device pointers of fluidk tensors, and errors from CUDA, cuBLAS and cuDNN
// that name the operator. The device code is in ops/cuda/kernels.cu.
#pragma once

#if !defined(FLUIDK_OPS_CUDA) || !FLUIDK_OPS_CUDA
#error "ops/detail/cuda.hpp needs the CUDA kernels of the example operators (FLUIDK_OPS_CUDA=1)"
#else

#include <cstddef>
#include <cstdint>
#include <fluidk/devices/cuda.hpp>
#include <fluidk/execution_context.hpp>
#include <limits>
#include <string>
#include <type_traits>

#include "ops/detail/common.hpp"
#include "ops/detail/cuda_launch.hpp"

namespace fluidk::ops::detail {

// The kernel's CUDA context, with its device made current for the caller's scope.
struct cuda_call {
  cuda_context& cuda;
  fluidk::detail::cuda_device_guard guard;

  explicit cuda_call(const execution_context& ctx)
      : cuda(ctx.device_as<cuda_context>()), guard(cuda.device()) {
    guard.check(cuda.device());
  }
  cuda_call(const cuda_call&) = delete;
  cuda_call& operator=(const cuda_call&) = delete;
  cudaStream_t stream() const noexcept { return cuda.stream(); }
};

// A tensor's first element on the device.
template <class T>
const T* device_data(const Tensor& t) {
  return reinterpret_cast<const T*>(static_cast<const std::byte*>(t.handle()) + t.offset());
}
template <class T>
T* device_data(Tensor& t) {
  return reinterpret_cast<T*>(static_cast<std::byte*>(t.mutable_handle()) + t.offset());
}

inline void cuda_require(cudaError_t status, const execution_context& ctx, const char* what) {
  if (status != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    fail(ctx, std::string(what) + " on " + ctx.place().to_string() + ": " +
                  fluidk::detail::cuda_error_text(status));
  }
}
// (Both leave no CUDA error behind for the next operator to report as its own.)
inline void cublas_require(cublasStatus_t status, const execution_context& ctx, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    static_cast<void>(cudaGetLastError());
    fail(ctx, std::string(what) + " on " + ctx.place().to_string() + ": " + cublasGetStatusString(status));
  }
}
inline void cudnn_require(cudnnStatus_t status, const execution_context& ctx, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS) {
    static_cast<void>(cudaGetLastError());
    fail(ctx, std::string(what) + " on " + ctx.place().to_string() + ": " + cudnnGetErrorString(status));
  }
}

// Row-major C [m, n] = A [m, k] x B [k, n] (+ C when accumulate) with cuBLAS, which is
// column-major: it computes C^T = B^T x A^T, the same bytes.
template <class T>
void cublas_gemm(const execution_context& ctx, cuda_call& call, std::int64_t m, std::int64_t n,
                 std::int64_t k, const T* a, const T* b, T* c, bool accumulate) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C stays (accumulate) or is zero, as the CPU kernel has it
    if (!accumulate)
      cuda_require(cudaMemsetAsync(c, 0, std::size_t(m * n) * sizeof(T), call.stream()), ctx,
                   "cudaMemsetAsync");
    return;
  }
  constexpr std::int64_t int_max = std::numeric_limits<int>::max();
  require(m <= int_max && n <= int_max && k <= int_max, ctx, "a matrix side exceeds cuBLAS's int range");
  const T alpha = 1;
  const T beta = accumulate ? 1 : 0;
  cublasHandle_t handle = call.cuda.cublas();
  const int mi = int(m), ni = int(n), ki = int(k);
  if constexpr (std::is_same_v<T, float>)
    cublas_require(
        cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, ni, mi, ki, &alpha, b, ni, a, ki, &beta, c, ni), ctx,
        "cublasSgemm");
  else
    cublas_require(
        cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, ni, mi, ki, &alpha, b, ni, a, ki, &beta, c, ni), ctx,
        "cublasDgemm");
}

}  // namespace fluidk::ops::detail

#endif  // FLUIDK_OPS_CUDA
