// The counter-based generator of uniform_random, shared by its CPU and CUDA kernels (the
// OpenCL kernel in ops/detail/opencl.hpp spells the same steps in OpenCL C): element i of a
// draw with seed s is a function of (s, i) alone, so every device and every thread count
// gives the same numbers. Plain C++ with no fluidk header, so that nvcc compiles it too.
#pragma once

#include <math.h>  // ::fmaf, ::fma, ::nextafterf and ::nextafter, which device code calls too

#include <cstdint>

#if defined(__CUDACC__)
#define FLUIDK_OPS_HOST_DEVICE __host__ __device__
#else
#define FLUIDK_OPS_HOST_DEVICE
#endif

namespace fluidk::ops::random {

// SplitMix64's finaliser: a bijection on 64 bits that mixes every input bit into every
// output bit.
FLUIDK_OPS_HOST_DEVICE inline std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// 64 random bits for element i of a draw with this seed.
FLUIDK_OPS_HOST_DEVICE inline std::uint64_t bits(std::uint64_t seed, std::uint64_t i) {
  return mix(seed ^ mix(i));
}

// A value in [lo, hi): lo + (hi - lo) * u with u in [0, 1) on the type's mantissa grid
// (24 bits for float, 53 for double), as one fused multiply-add: a compiler may fuse that
// sum on one device and not on another (nvcc and OpenCL do by default, g++ where the target
// has FMA), so it is fused on all. That sum rounds up to hi for a u near 1 (about one draw in
// 2^24 of float in [1, 2)); such a draw is the value just below hi instead.
FLUIDK_OPS_HOST_DEVICE inline float uniform(std::uint64_t seed, std::uint64_t i, float lo, float hi) {
  const float u = float(bits(seed, i) >> 40) * (1.0f / 16777216.0f);
  const float r = ::fmaf(hi - lo, u, lo);
  return r < hi ? r : ::nextafterf(hi, lo);
}
FLUIDK_OPS_HOST_DEVICE inline double uniform(std::uint64_t seed, std::uint64_t i, double lo, double hi) {
  const double u = double(bits(seed, i) >> 11) * (1.0 / 9007199254740992.0);
  const double r = ::fma(hi - lo, u, lo);
  return r < hi ? r : ::nextafter(hi, lo);
}

}  // namespace fluidk::ops::random
