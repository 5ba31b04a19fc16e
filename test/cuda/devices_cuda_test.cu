// The shared device tests on the CUDA place, compiled by nvcc, plus what only CUDA has: a
// kernel on the context's stream over fluidk tensors, cuDNN and cuBLAS handles bound to that
// stream, and copies between two GPUs. Without a device the whole executable skips (exit 77,
// Meson's skip code) and says why: see cuda_test_main.cpp, which holds Catch2's runner so
// that nvcc compiles only the test cases.
#include <boost/mp11/list.hpp>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <fluidk/devices/cuda.hpp>
#include <fluidk/tensor.hpp>
#include <string>

using test_places = boost::mp11::mp_list<fluidk::cuda>;

#include "../device_test_bodies.hpp"

namespace {

__global__ void double_values(float* data, std::int64_t n) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= 2.0f;
}

std::string cuda_text(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
}

}  // namespace

TEST_CASE("a kernel on the context's stream works on fluidk tensors", "[cuda]") {
  using namespace fluidk;
  const place gpu0 = place::of<cuda>(0);
  cuda_context& context = context_of<cuda>(0);

  constexpr std::int64_t n = 100'003;
  Tensor host({n}, data_type::float32);
  for (std::int64_t i = 0; i < n; ++i) host.data<float>()[i] = float(i) - 0.25f;

  Tensor on_device({n}, data_type::float32, gpu0);
  REQUIRE(on_device.place() == gpu0);
  copy_into(on_device, host);  // queued on context.stream()
  // The kernel runs on the same stream, so it sees the copied bytes; copy_to(cpu) is queued
  // after it on that stream and waits, so the host reads the doubled values.
  const int threads = 256;
  const int blocks = int((n + threads - 1) / threads);
  double_values<<<blocks, threads, 0, context.stream()>>>(static_cast<float*>(on_device.handle()), n);
  const cudaError_t launched = cudaGetLastError();
  INFO(cuda_text(launched));
  REQUIRE(launched == cudaSuccess);

  const Tensor back = copy_to(on_device, cpu_place);
  for (std::int64_t i = 0; i < n; ++i) {
    if (back.data<float>()[i] != 2.0f * (float(i) - 0.25f)) {
      INFO("element " << i);
      CHECK(back.data<float>()[i] == 2.0f * (float(i) - 0.25f));
      break;
    }
  }
  CHECK(host.data<float>()[1] == 0.75f);  // the source is untouched

  // The same through a slice: only rows [10, 20) are doubled.
  Tensor rows = on_device.slice(10, 20);
  double_values<<<1, threads, 0, context.stream()>>>(
      static_cast<float*>(rows.handle()) + rows.offset() / sizeof(float), 10);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  context.wait();
  const Tensor again = copy_to(on_device, cpu_place);
  CHECK(again.data<float>()[9] == 2.0f * (9 - 0.25f));
  CHECK(again.data<float>()[10] == 4.0f * (10 - 0.25f));
  CHECK(again.data<float>()[19] == 4.0f * (19 - 0.25f));
  CHECK(again.data<float>()[20] == 2.0f * (20 - 0.25f));
}

TEST_CASE("the cuDNN and cuBLAS handles are made once and bound to the context's stream", "[cuda]") {
  using namespace fluidk;
  cuda_context& context = context_of<cuda>(0);
  REQUIRE(context.stream() != nullptr);
  unsigned int flags = 0;
  REQUIRE(cudaStreamGetFlags(context.stream(), &flags) == cudaSuccess);
  CHECK((flags & cudaStreamNonBlocking) != 0);

  cudnnHandle_t dnn = context.cudnn();
  REQUIRE(dnn != nullptr);
  CHECK(context.cudnn() == dnn);
  cudaStream_t dnn_stream = nullptr;
  REQUIRE(cudnnGetStream(dnn, &dnn_stream) == CUDNN_STATUS_SUCCESS);
  CHECK(dnn_stream == context.stream());

  cublasHandle_t blas = context.cublas();
  REQUIRE(blas != nullptr);
  CHECK(context.cublas() == blas);
  cudaStream_t blas_stream = nullptr;
  REQUIRE(cublasGetStream(blas, &blas_stream) == CUBLAS_STATUS_SUCCESS);
  CHECK(blas_stream == context.stream());

  // Both libraries compute on fluidk tensors, ordered with fluidk's copies on the stream.
  Tensor host({2, 3, 4, 5}, data_type::float32);
  for (int i = 0; i < 120; ++i) host.data<float>()[i] = float(i);
  Tensor x = copy_to(host, context.place());

  const float three = 3.0f;
  REQUIRE(cublasSscal(blas, 120, &three, static_cast<float*>(x.handle()), 1) == CUBLAS_STATUS_SUCCESS);

  cudnnTensorDescriptor_t desc = nullptr;
  REQUIRE(cudnnCreateTensorDescriptor(&desc) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 3, 4, 5) ==
          CUDNN_STATUS_SUCCESS);
  const float half = 0.5f;
  const cudnnStatus_t scaled = cudnnScaleTensor(dnn, desc, x.handle(), &half);
  cudnnDestroyTensorDescriptor(desc);
  REQUIRE(scaled == CUDNN_STATUS_SUCCESS);

  const Tensor back = copy_to(x, cpu_place);
  for (int i = 0; i < 120; ++i) CHECK(back.data<float>()[i] == 1.5f * float(i));
}

TEST_CASE("copies between two GPUs move the data and keep the caller's current device", "[cuda]") {
  using namespace fluidk;
  const int count = device_count(place::of<cuda>(0));
  if (count < 2) {
    WARN("skipped: copies between GPUs need 2 CUDA devices, " << count << " present");
    return;
  }
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  const place gpu0 = place::of<cuda>(0);
  const place gpu1 = place::of<cuda>(1);

  Tensor host({1'000'003}, data_type::int32);
  for (std::int64_t i = 0; i < host.numel(); ++i) host.data<std::int32_t>()[i] = std::int32_t(i * 7 - 3);

  const Tensor on1 = copy_to(host, gpu1);
  CHECK(context_of<cuda>(1).place() == gpu1);
  int current = -1;
  REQUIRE(cudaGetDevice(&current) == cudaSuccess);
  CHECK(current == 0);  // allocation, context creation and the copy restored it

  const Tensor on0 = copy_to(on1, gpu0);  // GPU1 -> GPU0
  CHECK(on0.place() == gpu0);
  CHECK(device_tests::same_bytes(device_tests::host_copy(on0), host));

  // A kernel on GPU 0's stream sees the copied data without a host wait in between.
  Tensor floats_host({4096}, data_type::float32);
  for (int i = 0; i < 4096; ++i) floats_host.data<float>()[i] = float(i);
  const Tensor floats1 = copy_to(floats_host, gpu1);
  Tensor floats0 = copy_to(floats1, gpu0);
  double_values<<<16, 256, 0, context_of<cuda>(0).stream()>>>(static_cast<float*>(floats0.handle()), 4096);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  const Tensor doubled = copy_to(floats0, cpu_place);
  for (int i = 0; i < 4096; ++i) CHECK(doubled.data<float>()[i] == 2.0f * float(i));

  // Slices at an offset, GPU0 -> GPU1 into an existing buffer.
  Tensor target = copy_to(host, gpu1);
  Tensor zeros({10}, data_type::int32);
  for (int i = 0; i < 10; ++i) zeros.data<std::int32_t>()[i] = 0;
  const Tensor zeros0 = copy_to(zeros, gpu0);
  Tensor target_rows = target.slice(100, 110);
  copy_into(target_rows, zeros0);
  const Tensor target_back = copy_to(target, cpu_place);
  for (std::int64_t i = 95; i < 115; ++i)
    CHECK(target_back.data<std::int32_t>()[i] == (i >= 100 && i < 110 ? 0 : std::int32_t(i * 7 - 3)));
  REQUIRE(cudaGetDevice(&current) == cudaSuccess);
  CHECK(current == 0);
}
