// The launchers of the spatial family's CUDA kernels (ops/cuda/network_spatial.cu): device pointers
// in, work queued on `stream`, the launch status out.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fluidk::ops::cuda_launch {}  // namespace fluidk::ops::cuda_launch
