// The CUDA kernels of the network operators of the spatial family and their launchers
// (declared in ops/detail/cuda_launch_spatial.hpp): plain CUDA, no fluidk or Boost header.
#include <cstdint>

#include "ops/detail/cuda_launch_spatial.hpp"
