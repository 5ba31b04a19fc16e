// Test kernels' bodies: out[i] = f(in[i]) on the CPU, and out[i] = <an OpenCL C expression of
// x = in[i]> on the OpenCL device of the kernel's context (its program built once per context
// and expression), for float tensors. The executor's and the control-flow tests use them.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <fluidk/devices/opencl.hpp>
#include <fluidk/execution_context.hpp>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace fluidk_test {

using namespace fluidk;

// Runs `out[i] = <expression of in[i]>` on the OpenCL device of the kernel's context.
inline void opencl_map(execution_context& ctx, const std::string& expression) {
  auto& cl = ctx.device_as<opencl_context>();
  static std::mutex mutex;
  static std::map<std::pair<cl_context, std::string>, cl_kernel> kernels;
  cl_kernel kernel;
  {
    const std::lock_guard lock(mutex);
    cl_kernel& slot = kernels[{cl.context(), expression}];
    if (slot == nullptr) {
      const std::string source =
          "__kernel void map(__global const float* in, __global float* out) {"
          " size_t i = get_global_id(0); float x = in[i]; out[i] = " +
          expression + "; }";
      const char* text = source.c_str();
      cl_int status = CL_SUCCESS;
      cl_program program = clCreateProgramWithSource(cl.context(), 1, &text, nullptr, &status);
      REQUIRE(status == CL_SUCCESS);
      cl_device_id device = cl.device();
      REQUIRE(clBuildProgram(program, 1, &device, "", nullptr, nullptr) == CL_SUCCESS);
      slot = clCreateKernel(program, "map", &status);
      REQUIRE(status == CL_SUCCESS);
      clReleaseProgram(program);  // the kernel keeps it alive
    }
    kernel = slot;
  }
  const Tensor& in = ctx.input(0);
  REQUIRE(in.place() == ctx.place());
  REQUIRE(in.offset() == 0);
  Tensor out(in.dims(), in.dtype(), ctx.place(), in.layout());
  cl_mem in_buffer = static_cast<cl_mem>(in.handle());
  cl_mem out_buffer = static_cast<cl_mem>(out.handle());
  const std::size_t n = std::size_t(in.numel());
  if (n > 0) {
    const std::lock_guard lock(mutex);  // clSetKernelArg on a shared kernel is not thread-safe
    REQUIRE(clSetKernelArg(kernel, 0, sizeof(cl_mem), &in_buffer) == CL_SUCCESS);
    REQUIRE(clSetKernelArg(kernel, 1, sizeof(cl_mem), &out_buffer) == CL_SUCCESS);
    REQUIRE(clEnqueueNDRangeKernel(cl.queue(), kernel, 1, nullptr, &n, nullptr, 0, nullptr, nullptr) ==
            CL_SUCCESS);
    ctx.device().wait();
  }
  ctx.output(0) = std::move(out);
}

inline void cpu_map(execution_context& ctx, float (*f)(float)) {
  const Tensor& in = ctx.input(0);
  Tensor out(in.dims(), in.dtype(), cpu_place,
             in.layout() == data_layout::any ? data_layout::any : in.layout());
  for (std::int64_t i = 0; i < in.numel(); ++i) out.data<float>()[i] = f(in.data<float>()[i]);
  ctx.output(0) = std::move(out);
}

}  // namespace fluidk_test
