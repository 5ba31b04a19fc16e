// The runner of the nvcc-compiled CUDA tests, compiled by the host compiler (Catch2's
// implementation, ../catch_impl.cpp, is most of the nvcc time otherwise). Without a CUDA device
// the executable skips with Meson's code 77 and says why.
#include <cstdio>
#include <fluidk/devices/cuda.hpp>

#include "catch_run.hpp"

int main(int argc, char* argv[]) {
  if (!fluidk::cuda_available()) {
    std::printf("skipped: %s\n", fluidk::cuda_unavailable_reason().c_str());
    return 77;
  }
  return fluidk_test::run_catch(argc, argv);
}
