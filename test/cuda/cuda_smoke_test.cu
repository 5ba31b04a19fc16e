// Compiled by nvcc in every test run: the vocabulary and the CUDA place in a .cu file, and
// a kernel launch where a device exists; without one the test skips and says why.
#include <cuda_runtime.h>

#include <cstdio>
#include <fluidk/devices/cuda.hpp>
#include <fluidk/kernel_type.hpp>

namespace {
__global__ void fill(unsigned long long* out, unsigned long long value, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value + i;
}

int fail(const char* what) {
  std::printf("FAIL: %s\n", what);
  return 1;
}
}  // namespace

int main() {
  using key_t =
      fluidk::kernel_type<fluidk::cuda, fluidk::float16, fluidk::layout::nchw, fluidk::library::cudnn>;
  const fluidk::kernel_key key = key_t::key(0);
  if (key.to_string() != "{data_type[float16]; data_layout[NCHW]; place[Place(gpu:0)]; library_type[CUDNN]}")
    return fail(key.to_string().c_str());
  if (!(fluidk::parse_place("gpu:0") == key.place())) return fail("parse_place(gpu:0)");

  if (!fluidk::cuda_available()) {
    std::printf("skipped: %s\n", fluidk::cuda_unavailable_reason().c_str());
    return 77;
  }
  const int count = fluidk::device_count(key.place());
  constexpr int n = 1000;
  unsigned long long* device_buffer = nullptr;
  if (cudaMalloc(&device_buffer, n * sizeof(unsigned long long)) != cudaSuccess) return fail("cudaMalloc");
  fill<<<(n + 255) / 256, 256>>>(device_buffer, key.ordinal(), n);
  unsigned long long host[n];
  const bool copied = cudaMemcpy(host, device_buffer, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess;
  cudaFree(device_buffer);
  if (!copied) return fail("cudaMemcpy");
  for (int i = 0; i < n; ++i)
    if (host[i] != key.ordinal() + i) return fail("kernel result");
  std::printf("ok: %d CUDA device(s); kernel ran on %s\n", count, key.place().to_string().c_str());
  return 0;
}
