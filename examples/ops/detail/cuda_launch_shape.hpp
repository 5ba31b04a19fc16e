// The launchers of the shape family's CUDA kernels (ops/cuda/network_shape.cu): device pointers
// in, work queued on `stream`, the launch status out.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fluidk::ops::cuda_launch {}  // namespace fluidk::ops::cuda_launch
