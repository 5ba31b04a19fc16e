// The launchers of pool2d's CUDA kernel (ops/cuda/network_pool.cu): device pointers in, work
// queued on `stream`, the launch status out. float is instantiated.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fluidk::ops::cuda_launch {

// One 2-D pooling over `planes` NCHW planes [h, w] into [oh, ow]: window (ky, kx) of output
// (y, x) reads input (y * sh - ph + ky * dh, x * sw - pw + kx * dw), cells outside the input
// skipped. An average divides by the cells read (exclusive) or by the cells of the window
// below limit_h / limit_w (the input plus its end padding).
struct pool2d_params {
  std::int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, limit_h, limit_w;
  bool max, exclusive;
};

template <class T>
cudaError_t pool2d(cudaStream_t stream, const T* x, T* y, const pool2d_params& p);

}  // namespace fluidk::ops::cuda_launch
