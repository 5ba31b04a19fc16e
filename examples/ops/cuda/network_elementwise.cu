// The CUDA kernels of the network operators of the elementwise family and their launchers
// (declared in ops/detail/cuda_launch_elementwise.hpp): plain CUDA, no fluidk or Boost header.
#include <cstdint>

#include "ops/detail/cuda_launch_elementwise.hpp"
