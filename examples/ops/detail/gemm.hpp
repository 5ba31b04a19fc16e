// A small cache-blocked GEMM for the plain CPU kernels (conv2d through im2col, mul, fc):
// C[M, N] = A[M, K] * B[K, N] (+ C when accumulating), all row-major with leading dimensions.
// Blocks of A's rows and of K keep a panel of B in cache; the inner loop runs along a row of
// B and of C, contiguous in memory, so the compiler vectorises it.
#pragma once

#include <algorithm>
#include <cstdint>

namespace fluidk::ops::detail {

template <class T>
void gemm(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, const T* b,
          std::int64_t ldb, T* c, std::int64_t ldc, bool accumulate = false) {
  constexpr std::int64_t block_m = 32, block_n = 256, block_k = 128;
  if (!accumulate)
    for (std::int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
  for (std::int64_t j0 = 0; j0 < n; j0 += block_n) {
    const std::int64_t j1 = std::min(n, j0 + block_n);
    for (std::int64_t p0 = 0; p0 < k; p0 += block_k) {
      const std::int64_t p1 = std::min(k, p0 + block_k);
      for (std::int64_t i0 = 0; i0 < m; i0 += block_m) {
        const std::int64_t i1 = std::min(m, i0 + block_m);
        for (std::int64_t i = i0; i < i1; ++i) {
          T* c_row = c + i * ldc;
          for (std::int64_t p = p0; p < p1; ++p) {
            const T a_ip = a[i * lda + p];
            const T* b_row = b + p * ldb;
            for (std::int64_t j = j0; j < j1; ++j) c_row[j] += a_ip * b_row[j];
          }
        }
      }
    }
  }
}

}  // namespace fluidk::ops::detail
