// What the OpenCL kernels of the example operators share: their OpenCL C source, built once
// per cl_context, and a launcher that sets a kernel's arguments from fluidk tensors and
// queues it on the context's in-order queue.
//
// Kernels are queued, not waited for: everything that reads their results afterwards (a
// copy to the host, the next kernel) goes through the same in-order queue, and so does the
// work of a buffer's next owner, once the device's memory cache gives it to another tensor.
#pragma once

#if !defined(FLUIDK_HAS_OPENCL) || !FLUIDK_HAS_OPENCL
#error "ops/detail/opencl.hpp needs the OpenCL backend (FLUIDK_HAS_OPENCL=1)"
#else

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fluidk/devices/opencl.hpp>
#include <fluidk/execution_context.hpp>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "ops/detail/common.hpp"

namespace fluidk::ops::detail {

// One program for every operator. Element offsets come as arguments, so a tensor that is a
// slice of a larger buffer works like any other.
inline constexpr const char* opencl_source = R"CLC(
__kernel void relu_f32(__global const float* x, ulong x_off, __global float* y, ulong n) {
  const size_t i = get_global_id(0);
  if (i >= n) return;
  const float v = x[x_off + i];
  y[i] = v > 0.0f ? v : 0.0f;
}

// c = a + b, b repeated: a is [pre, n, post] and b is [n] (same = elementwise when n covers a).
__kernel void add_f32(__global const float* a, ulong a_off, __global const float* b, ulong b_off,
                      __global float* c, ulong total, ulong n, ulong post) {
  const size_t i = get_global_id(0);
  if (i >= total) return;
  c[i] = a[a_off + i] + b[b_off + (i / post) % n];
}

__kernel void fill_f32(__global float* y, float value, ulong n) {
  const size_t i = get_global_id(0);
  if (i < n) y[i] = value;
}

// uniform_random: the steps of ops/detail/random.hpp in OpenCL C.
ulong fluidk_mix(ulong z) {
  z += 0x9e3779b97f4a7c15UL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;
  return z ^ (z >> 31);
}
__kernel void uniform_f32(__global float* y, ulong seed, float lo, float hi, ulong n) {
  const size_t i = get_global_id(0);
  if (i >= n) return;
  const float u = (float)(fluidk_mix(seed ^ fluidk_mix(i)) >> 40) * (1.0f / 16777216.0f);
  const float r = fma(hi - lo, u, lo);
  y[i] = r < hi ? r : nextafter(hi, lo);
}

// C[m, n] = A[m, k] x B[k, n] (+ bias[n] when has_bias), row-major; one work-item per element
// of C. The sum runs in k order, like the CPU kernels' reference loop.
__kernel void gemm_f32(__global const float* a, ulong a_off, __global const float* b, ulong b_off,
                       __global const float* bias, ulong bias_off, int has_bias,
                       __global float* c, ulong m, ulong n, ulong k) {
  const size_t col = get_global_id(0);
  const size_t row = get_global_id(1);
  if (col >= n || row >= m) return;
  __global const float* a_row = a + a_off + row * k;
  __global const float* b_col = b + b_off + col;
  float sum = 0.0f;
  for (ulong p = 0; p < k; ++p) sum += a_row[p] * b_col[p * n];
  c[row * n + col] = has_bias ? sum + bias[bias_off + col] : sum;
}
)CLC";

// An OpenCL C program (the one above, or an operator's own source, a string with static
// storage), built for a context's device once; later calls reuse it.
inline cl_program opencl_program(const execution_context& ctx, opencl_context& cl,
                                 const char* source = opencl_source) {
  struct programs {
    std::mutex mutex;
    std::map<std::pair<cl_context, const char*>, cl_program> built;
    ~programs() {
      for (auto& [context, program] : built) clReleaseProgram(program);
    }
  };
  static programs cache;
  const std::lock_guard lock(cache.mutex);
  cl_program& program = cache.built[{cl.context(), source}];
  if (program != nullptr) return program;
  cl_int status = CL_SUCCESS;
  cl_program made = clCreateProgramWithSource(cl.context(), 1, &source, nullptr, &status);
  if (status != CL_SUCCESS)
    fail(ctx, "clCreateProgramWithSource on " + cl.place().to_string() + ": " + opencl_error_name(status));
  cl_device_id device = cl.device();
  status = clBuildProgram(made, 1, &device, "-cl-std=CL1.2", nullptr, nullptr);
  if (status != CL_SUCCESS) {
    std::size_t size = 0;
    clGetProgramBuildInfo(made, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
    std::string log(size, '\0');
    clGetProgramBuildInfo(made, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
    clReleaseProgram(made);
    fail(ctx, "the OpenCL kernels do not build on " + cl.place().to_string() + " (" +
                  opencl_error_name(status) + "): " + log);
  }
  program = made;
  return program;
}

// A kernel made and kept (opencl_kernel), with the work-group size its launches take along
// their first dimension (opencl_launch_from).
struct opencl_kept_kernel {
  cl_kernel kernel;
  std::size_t group;
};

// What this thread made of kernels and keeps (opencl_kernel), by program and name.
struct opencl_thread_kernels {
  std::map<cl_program, std::map<std::string, opencl_kept_kernel, std::less<> > > made;
  opencl_thread_kernels() = default;
  opencl_thread_kernels(const opencl_thread_kernels&) = delete;
  opencl_thread_kernels& operator=(const opencl_thread_kernels&) = delete;
  ~opencl_thread_kernels() {
    for (auto& [program, kernels] : made)
      for (auto& [name, kept] : kernels) clReleaseKernel(kept.kernel);
  }
  static opencl_thread_kernels& this_thread() {
    thread_local opencl_thread_kernels kept;
    return kept;
  }
};

// Kernel `name` of `program`, made by the calling thread on its first launch and kept for its
// next ones, as a framework keeps its kernel objects. Per thread: a cl_kernel holds the
// arguments set on it, and clSetKernelArg is not thread-safe on a kernel that another thread
// sets at once. clEnqueueNDRangeKernel captures the values set, so the next launch sets them
// anew while the last one may still run. Made per launch instead, each launch cost PoCL 2-10 us
// more (a kernel of two arguments: 3.2-12.8 us a launch against 1.4-2.7 kept).
// Its work-group size: 64 work-items, or the largest power of two the kernel allows on the
// device where that is less.
inline opencl_kept_kernel opencl_kernel(const execution_context& ctx, opencl_context& cl, cl_program program,
                                        const char* name) {
  auto& kernels = opencl_thread_kernels::this_thread().made[program];
  if (const auto it = kernels.find(std::string_view(name)); it != kernels.end()) return it->second;
  cl_int status = CL_SUCCESS;
  cl_kernel kernel = clCreateKernel(program, name, &status);
  if (status != CL_SUCCESS)
    fail(ctx, std::string("clCreateKernel(") + name + "): " + opencl_error_name(status));
  std::size_t allowed = 0;
  status = clGetKernelWorkGroupInfo(kernel, cl.device(), CL_KERNEL_WORK_GROUP_SIZE, sizeof(allowed), &allowed,
                                    nullptr);
  if (status != CL_SUCCESS) {
    clReleaseKernel(kernel);
    fail(ctx, std::string("clGetKernelWorkGroupInfo(") + name + "): " + opencl_error_name(status));
  }
  std::size_t group = 64;
  while (group > 1 && group > allowed) group /= 2;
  const opencl_kept_kernel kept{kernel, group};
  kernels.emplace(name, kept);
  return kept;
}

// How many kernels the calling thread keeps (opencl_kernel): one per program and name it launched.
inline std::size_t opencl_kernels_kept() {
  std::size_t count = 0;
  for (const auto& [program, kernels] : opencl_thread_kernels::this_thread().made) count += kernels.size();
  return count;
}

// A tensor's buffer and its offset in elements of T, as an OpenCL kernel takes them.
template <class T>
struct cl_view {
  cl_mem buffer;
  cl_ulong offset;
};
template <class T>
cl_view<T> cl_arg(const Tensor& t) {
  return {static_cast<cl_mem>(t.handle()), cl_ulong(t.offset() / sizeof(T))};
}
// The buffer of an output the kernel just made (offset 0).
inline cl_mem cl_buffer(const Tensor& t) { return static_cast<cl_mem>(t.handle()); }

// Queues kernel `name` of the program built from `source` with these arguments (cl_view<T> gives two: buffer
// and offset) over a 1-D or 2-D range, its first dimension rounded up to whole work-groups of the
// kernel's size (opencl_kernel; the kernels return past the end of their range): OpenCL 1.2 wants
// the range a multiple of the work-group size, and left to choose, an implementation can only
// take groups of 1 work-item for a prime count (PoCL ran 21 sigmoids of 4,000,037 floats in 335
// ms, against 63 ms for 4,000,000). Errors name the operator and the failing call.
template <class... Args>
void opencl_launch_from(const execution_context& ctx, const char* source, const char* name,
                        std::size_t global0, std::size_t global1, const Args&... args) {
  auto& cl = ctx.device_as<opencl_context>();
  cl_int status = CL_SUCCESS;
  const opencl_kept_kernel kept = opencl_kernel(ctx, cl, opencl_program(ctx, cl, source), name);
  const cl_kernel kernel = kept.kernel;
  cl_uint index = 0;
  auto set = [&](std::size_t size, const void* value) {
    if (status == CL_SUCCESS) status = clSetKernelArg(kernel, index++, size, value);
  };
  auto add = [&](const auto& arg) {
    using A = std::remove_cvref_t<decltype(arg)>;
    if constexpr (requires { arg.buffer; }) {
      set(sizeof(cl_mem), &arg.buffer);
      set(sizeof(cl_ulong), &arg.offset);
    } else {
      static_assert(std::is_trivially_copyable_v<A>);
      set(sizeof(A), &arg);
    }
  };
  (add(args), ...);
  if (status != CL_SUCCESS)
    fail(ctx, std::string("clSetKernelArg(") + name + ", " + std::to_string(index - 1) +
                  "): " + opencl_error_name(status));
  // A range within one group is one group of its size.
  const std::size_t group = std::max<std::size_t>(1, std::min(kept.group, global0));
  const std::size_t global[2] = {(global0 + group - 1) / group * group, global1};
  const std::size_t local[2] = {group, 1};
  status = clEnqueueNDRangeKernel(cl.queue(), kernel, global1 > 1 ? 2 : 1, nullptr, global, local, 0, nullptr,
                                  nullptr);
  if (status != CL_SUCCESS)
    fail(ctx, std::string("clEnqueueNDRangeKernel(") + name + ") on " + cl.place().to_string() + ": " +
                  opencl_error_name(status));
}

// A kernel of the program above (opencl_source).
template <class... Args>
void opencl_launch(const execution_context& ctx, const char* name, std::size_t global0, std::size_t global1,
                   const Args&... args) {
  opencl_launch_from(ctx, opencl_source, name, global0, global1, args...);
}

// Row-major out [m, n] = a [m, k] x b [k, n], plus bias [n] on every row when given (mul's
// and fc's kernel); `out` was just made on the device.
inline void opencl_gemm(const execution_context& ctx, std::int64_t m, std::int64_t n, std::int64_t k,
                        const Tensor& a, const Tensor& b, const Tensor* bias, Tensor& out) {
  if (m == 0 || n == 0) return;
  const cl_view<float> bias_arg = bias != nullptr ? cl_arg<float>(*bias) : cl_arg<float>(a);  // a: unread
  opencl_launch(ctx, "gemm_f32", std::size_t(n), std::size_t(m), cl_arg<float>(a), cl_arg<float>(b), bias_arg,
                cl_int(bias != nullptr), cl_buffer(out), cl_ulong(m), cl_ulong(n), cl_ulong(k));
}

}  // namespace fluidk::ops::detail

#endif  // FLUIDK_HAS_OPENCL
