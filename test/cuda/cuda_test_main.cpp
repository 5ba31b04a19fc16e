// The runner of the nvcc-compiled CUDA tests, compiled by the host compiler (Catch2's
// implementation is most of the nvcc time otherwise). Without a CUDA device the executable
// skips with Meson's code 77 and says why.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>
#include <fluidk/devices/cuda.hpp>

int main(int argc, char* argv[]) {
  if (!fluidk::cuda_available()) {
    std::printf("skipped: %s\n", fluidk::cuda_unavailable_reason().c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
