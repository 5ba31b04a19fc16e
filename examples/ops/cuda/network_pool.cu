// The CUDA kernel of pool2d and its launcher (declared in ops/detail/cuda_launch_pool.hpp):
// plain CUDA, no fluidk or Boost header.
#include <cstdint>

#include "ops/detail/cuda_launch_pool.hpp"

namespace fluidk::ops::cuda_launch {

namespace {

constexpr int threads = 256;

// Grid-stride loops: any n with a bounded grid.
int blocks_for(std::int64_t n) {
  const std::int64_t b = (n + threads - 1) / threads;
  return int(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

// One thread per output element, as the CPU kernel computes it (the same order of the sum).
template <class T>
__global__ void pool2d_kernel(const T* x, T* y, pool2d_params p) {
  const std::int64_t total = p.planes * p.oh * p.ow;
  for (std::int64_t e = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += std::int64_t(blockDim.x) * gridDim.x) {
    const std::int64_t ox = e % p.ow, oy = (e / p.ow) % p.oh, plane = e / (p.ow * p.oh);
    const T* src = x + plane * p.h * p.w;
    const std::int64_t y0 = oy * p.sh - p.ph, x0 = ox * p.sw - p.pw;
    T acc = p.max ? -T(INFINITY) : T(0);
    std::int64_t count = 0;
    for (std::int64_t ky = 0; ky < p.kh; ++ky) {
      const std::int64_t iy = y0 + ky * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      for (std::int64_t kx = 0; kx < p.kw; ++kx) {
        const std::int64_t ix = x0 + kx * p.dw;
        if (ix < 0 || ix >= p.w) continue;
        const T v = src[iy * p.w + ix];
        if (p.max) {
          if (v > acc) acc = v;
        } else {
          acc += v;
        }
        ++count;
      }
    }
    if (!p.max) {
      const std::int64_t rows = (y0 + p.kh < p.limit_h ? y0 + p.kh : p.limit_h) - y0;
      const std::int64_t cols = (x0 + p.kw < p.limit_w ? x0 + p.kw : p.limit_w) - x0;
      acc /= T(p.exclusive ? count : rows * cols);
    }
    y[e] = acc;
  }
}

}  // namespace

template <class T>
cudaError_t pool2d(cudaStream_t stream, const T* x, T* y, const pool2d_params& p) {
  const std::int64_t total = p.planes * p.oh * p.ow;
  if (total == 0) return cudaSuccess;
  pool2d_kernel<<<blocks_for(total), threads, 0, stream>>>(x, y, p);
  return cudaGetLastError();
}

template cudaError_t pool2d<float>(cudaStream_t, const float*, float*, const pool2d_params&);

}  // namespace fluidk::ops::cuda_launch
