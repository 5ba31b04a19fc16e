// The OpenCL backend: place kind `opencl`, added through the same public extension points
// as a user's device. Needs FLUIDK_HAS_OPENCL, which Meson's fluidk_opencl_dep defines.
//
// Device ids count the devices of every OpenCL platform, in platform order. Each device has
// one context (a cl_context and an in-order cl_command_queue); buffers are cl_mem objects of
// that context, passed around as the `void*` handle of a memory_ref; a freed buffer goes back
// to the context's device_memory_cache, for the next allocation of its size. Copies are blocking.
#pragma once

#if !defined(FLUIDK_HAS_OPENCL) || !FLUIDK_HAS_OPENCL
#error \
    "fluidk/devices/opencl.hpp needs the OpenCL backend: use fluidk_opencl_dep (Meson), or define FLUIDK_HAS_OPENCL=1 and link OpenCL"
#else

// fluidk uses the OpenCL 1.2 API; without a target the Khronos headers assume 3.0 and say so.
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif

#include <CL/cl.h>

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fluidk/device.hpp"
#include "fluidk/device_memory_cache.hpp"
#include "fluidk/devices/cpu.hpp"
#include "fluidk/place.hpp"

namespace fluidk {

struct opencl {
  using place_tag = opencl;
  static constexpr place_kind_id id = 2;
  static constexpr std::string_view name = "opencl";
  static constexpr bool has_device_id = true;
  static constexpr bool host_accessible = false;
  static constexpr std::array<std::string_view, 1> aliases{"cl"};
};

namespace detail {
struct opencl_error_entry {
  cl_int code;
  std::string_view name;
};
// By number, so that the table does not depend on CL_TARGET_OPENCL_VERSION.
inline constexpr opencl_error_entry opencl_errors[] = {
    {0, "CL_SUCCESS"},
    {-1, "CL_DEVICE_NOT_FOUND"},
    {-2, "CL_DEVICE_NOT_AVAILABLE"},
    {-3, "CL_COMPILER_NOT_AVAILABLE"},
    {-4, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
    {-5, "CL_OUT_OF_RESOURCES"},
    {-6, "CL_OUT_OF_HOST_MEMORY"},
    {-7, "CL_PROFILING_INFO_NOT_AVAILABLE"},
    {-8, "CL_MEM_COPY_OVERLAP"},
    {-9, "CL_IMAGE_FORMAT_MISMATCH"},
    {-10, "CL_IMAGE_FORMAT_NOT_SUPPORTED"},
    {-11, "CL_BUILD_PROGRAM_FAILURE"},
    {-12, "CL_MAP_FAILURE"},
    {-13, "CL_MISALIGNED_SUB_BUFFER_OFFSET"},
    {-14, "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"},
    {-15, "CL_COMPILE_PROGRAM_FAILURE"},
    {-16, "CL_LINKER_NOT_AVAILABLE"},
    {-17, "CL_LINK_PROGRAM_FAILURE"},
    {-18, "CL_DEVICE_PARTITION_FAILED"},
    {-19, "CL_KERNEL_ARG_INFO_NOT_AVAILABLE"},
    {-30, "CL_INVALID_VALUE"},
    {-31, "CL_INVALID_DEVICE_TYPE"},
    {-32, "CL_INVALID_PLATFORM"},
    {-33, "CL_INVALID_DEVICE"},
    {-34, "CL_INVALID_CONTEXT"},
    {-35, "CL_INVALID_QUEUE_PROPERTIES"},
    {-36, "CL_INVALID_COMMAND_QUEUE"},
    {-37, "CL_INVALID_HOST_PTR"},
    {-38, "CL_INVALID_MEM_OBJECT"},
    {-39, "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR"},
    {-40, "CL_INVALID_IMAGE_SIZE"},
    {-41, "CL_INVALID_SAMPLER"},
    {-42, "CL_INVALID_BINARY"},
    {-43, "CL_INVALID_BUILD_OPTIONS"},
    {-44, "CL_INVALID_PROGRAM"},
    {-45, "CL_INVALID_PROGRAM_EXECUTABLE"},
    {-46, "CL_INVALID_KERNEL_NAME"},
    {-47, "CL_INVALID_KERNEL_DEFINITION"},
    {-48, "CL_INVALID_KERNEL"},
    {-49, "CL_INVALID_ARG_INDEX"},
    {-50, "CL_INVALID_ARG_VALUE"},
    {-51, "CL_INVALID_ARG_SIZE"},
    {-52, "CL_INVALID_KERNEL_ARGS"},
    {-53, "CL_INVALID_WORK_DIMENSION"},
    {-54, "CL_INVALID_WORK_GROUP_SIZE"},
    {-55, "CL_INVALID_WORK_ITEM_SIZE"},
    {-56, "CL_INVALID_GLOBAL_OFFSET"},
    {-57, "CL_INVALID_EVENT_WAIT_LIST"},
    {-58, "CL_INVALID_EVENT"},
    {-59, "CL_INVALID_OPERATION"},
    {-60, "CL_INVALID_GL_OBJECT"},
    {-61, "CL_INVALID_BUFFER_SIZE"},
    {-62, "CL_INVALID_MIP_LEVEL"},
    {-63, "CL_INVALID_GLOBAL_WORK_SIZE"},
    {-64, "CL_INVALID_PROPERTY"},
    {-65, "CL_INVALID_IMAGE_DESCRIPTOR"},
    {-66, "CL_INVALID_COMPILER_OPTIONS"},
    {-67, "CL_INVALID_LINKER_OPTIONS"},
    {-68, "CL_INVALID_DEVICE_PARTITION_COUNT"},
    {-69, "CL_INVALID_PIPE_SIZE"},
    {-70, "CL_INVALID_DEVICE_QUEUE"},
    {-71, "CL_INVALID_SPEC_ID"},
    {-72, "CL_MAX_SIZE_RESTRICTION_EXCEEDED"},
    {-1001, "CL_PLATFORM_NOT_FOUND_KHR"},
};
}  // namespace detail

// The name of an OpenCL error code ("CL_INVALID_VALUE"), or "CL error <n>" for others.
inline std::string opencl_error_name(cl_int code) {
  for (const auto& entry : detail::opencl_errors)
    if (entry.code == code) return std::string(entry.name);
  return "CL error " + std::to_string(code);
}

namespace detail {

// One OpenCL device as fluidk numbers them: its platform and id.
struct opencl_device_info {
  cl_platform_id platform;
  cl_device_id device;
};

// Every device of every platform, in platform order; empty when there is no platform (no
// ICD installed) or enumeration fails. Enumerated once: devices do not come and go.
inline std::vector<opencl_device_info> enumerate_opencl_devices() noexcept {
  try {
    std::vector<opencl_device_info> found;
    cl_uint platform_count = 0;
    if (clGetPlatformIDs(0, nullptr, &platform_count) != CL_SUCCESS || platform_count == 0) return found;
    std::vector<cl_platform_id> platforms(platform_count);
    if (clGetPlatformIDs(platform_count, platforms.data(), &platform_count) != CL_SUCCESS) return found;
    platforms.resize(platform_count);
    for (cl_platform_id platform : platforms) {
      cl_uint count = 0;
      // CL_DEVICE_NOT_FOUND (a platform without devices) and other errors: skip the platform.
      if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &count) != CL_SUCCESS || count == 0)
        continue;
      std::vector<cl_device_id> devices(count);
      if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, devices.data(), &count) != CL_SUCCESS) continue;
      for (cl_uint i = 0; i < count && i < devices.size(); ++i) found.push_back({platform, devices[i]});
    }
    return found;
  } catch (...) {
    return {};
  }
}

inline const std::vector<opencl_device_info>& opencl_devices() noexcept {
  static const std::vector<opencl_device_info> devices = enumerate_opencl_devices();
  return devices;
}

template <class T>
T opencl_device_value(cl_device_id device, cl_device_info what, T fallback) noexcept {
  T value{};
  return clGetDeviceInfo(device, what, sizeof(T), &value, nullptr) == CL_SUCCESS ? value : fallback;
}

inline std::string opencl_device_string(cl_device_id device, cl_device_info what) {
  std::size_t size = 0;
  if (clGetDeviceInfo(device, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
  std::string text(size, '\0');
  if (clGetDeviceInfo(device, what, size, text.data(), nullptr) != CL_SUCCESS) return {};
  while (!text.empty() && text.back() == '\0') text.pop_back();  // the terminating NUL
  return text;
}

}  // namespace detail

// The context of one OpenCL device: what a kernel needs to run there (a cl_context and an
// in-order command queue), owned for the lifetime of the object.
class opencl_context final : public device_context {
 public:
  // `device` counts the devices of all platforms in platform order. Throws
  // device_unavailable when there is no such device or OpenCL cannot set it up.
  explicit opencl_context(int device) : device_index_(device), memory_(device, &release_buffer) {
    const auto& devices = detail::opencl_devices();
    if (device < 0 || std::size_t(device) >= devices.size())
      throw device_unavailable("no device " + place().to_string() + ": " + std::to_string(devices.size()) +
                               " OpenCL device(s) present");
    platform_ = devices[std::size_t(device)].platform;
    device_ = devices[std::size_t(device)].device;
    const cl_context_properties properties[] = {CL_CONTEXT_PLATFORM,
                                                reinterpret_cast<cl_context_properties>(platform_), 0};
    cl_int status = CL_SUCCESS;
    context_ = clCreateContext(properties, 1, &device_, nullptr, nullptr, &status);
    if (status != CL_SUCCESS || context_ == nullptr) fail("clCreateContext", status);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    // In order, no profiling. clCreateCommandQueue is the 1.2 call fluidk targets; headers
    // that target OpenCL 2.0 or later mark it deprecated, though every ICD loader keeps it.
    queue_ = clCreateCommandQueue(context_, device_, 0, &status);
#pragma GCC diagnostic pop
    if (status != CL_SUCCESS || queue_ == nullptr) {
      clReleaseContext(context_);
      fail("clCreateCommandQueue", status);
    }
    max_alloc_bytes_ = detail::opencl_device_value<cl_ulong>(device_, CL_DEVICE_MAX_MEM_ALLOC_SIZE, 0);
    const std::size_t global = detail::opencl_device_value<cl_ulong>(device_, CL_DEVICE_GLOBAL_MEM_SIZE, 0);
    memory_.set_limit(device_memory_cache::limit_for(global));
  }

  opencl_context(const opencl_context&) = delete;
  opencl_context& operator=(const opencl_context&) = delete;

  // The cached buffers go first: they belong to the context.
  ~opencl_context() override {
    memory_.empty();
    clReleaseCommandQueue(queue_);
    clReleaseContext(context_);
  }

  fluidk::place place() const noexcept override { return place::of<opencl>(device_index_); }

  // Blocks until everything queued on this device's queue has finished.
  void wait() override {
    if (const cl_int status = clFinish(queue_); status != CL_SUCCESS)
      throw error("clFinish on " + place().to_string() + " failed: " + opencl_error_name(status));
  }

  cl_context context() const noexcept { return context_; }
  cl_command_queue queue() const noexcept { return queue_; }
  cl_device_id device() const noexcept { return device_; }
  cl_platform_id platform() const noexcept { return platform_; }
  std::string device_name() const { return detail::opencl_device_string(device_, CL_DEVICE_NAME); }
  // CL_DEVICE_MAX_MEM_ALLOC_SIZE: the largest buffer this device accepts (0 if unknown).
  std::size_t max_alloc_bytes() const noexcept { return max_alloc_bytes_; }
  // The buffers freed on this device, kept for reuse: its statistics, limit and empty().
  device_memory_cache& memory_cache() noexcept { return memory_; }

  static void release_buffer(int, void* handle) noexcept { clReleaseMemObject(static_cast<cl_mem>(handle)); }

 private:
  [[noreturn]] void fail(const char* call, cl_int status) const {
    throw device_unavailable("cannot set up " + place().to_string() + " (" +
                             detail::opencl_device_string(device_, CL_DEVICE_NAME) + "): " + call +
                             " failed: " + opencl_error_name(status));
  }

  int device_index_;
  cl_platform_id platform_ = nullptr;
  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  std::size_t max_alloc_bytes_ = 0;
  device_memory_cache memory_;
};

template <>
struct device_traits<opencl> {
  using context_type = opencl_context;

  static int device_count() noexcept { return int(detail::opencl_devices().size()); }

  // A cl_mem of `bytes` on the device's context, as a void*; nullptr for 0 bytes.
  static void* allocate(int device, std::size_t bytes) {
    if (bytes == 0) return nullptr;
    const place where = place::of<opencl>(device);
    opencl_context* context = nullptr;
    try {
      context = &context_of<opencl>(device);
    } catch (const device_unavailable& e) {
      // Its message says why: no such device (and how many there are), or the contexts were
      // destroyed at exit (when the device list may be gone too, so it is not read here).
      throw allocation_error(where, bytes, detail::unprefixed(e));
    }
    // Checked here, so that the error names the limit, whatever the implementation does with
    // such sizes (PoCL 3.1 answers CL_INVALID_BUFFER_SIZE). Buffers within the limit may
    // still be backed lazily: PoCL accepts more of them than its global memory holds.
    const std::size_t limit = context->max_alloc_bytes();
    if (limit != 0 && bytes > limit)
      throw allocation_error(where, bytes,
                             "more than CL_DEVICE_MAX_MEM_ALLOC_SIZE (" + std::to_string(limit) +
                                 " bytes) of " + context->device_name());
    // A buffer freed earlier, else a new one; out of memory, the cache is emptied, the queue
    // finished (OpenCL releases a buffer once the commands that use it are done) and
    // clCreateBuffer asked again. (Where the driver backs buffers lazily, as PoCL does, a
    // device out of memory fails the commands instead: memory_cache().empty() is the way out.)
    cl_int status = CL_SUCCESS;
    void* buffer = context->memory_cache().allocate(
        bytes,
        [&](std::size_t n) -> void* {
          cl_mem made = clCreateBuffer(context->context(), CL_MEM_READ_WRITE, n, nullptr, &status);
          if (status == CL_SUCCESS && made != nullptr) return made;
          if (status == CL_MEM_OBJECT_ALLOCATION_FAILURE || status == CL_OUT_OF_RESOURCES ||
              status == CL_OUT_OF_HOST_MEMORY)
            return nullptr;
          throw allocation_error(where, bytes, "clCreateBuffer failed: " + opencl_error_name(status));
        },
        [&] { static_cast<void>(clFinish(context->queue())); });
    if (buffer == nullptr)
      throw allocation_error(where, bytes, "clCreateBuffer failed: " + opencl_error_name(status));
    return buffer;
  }

  // Back to the device's cache; to OpenCL once the context is gone (a tensor destroyed at exit).
  static void deallocate(int device, void* handle, std::size_t bytes) noexcept {
    deallocate_to_cache<opencl>(device, handle, bytes);
  }
};

namespace detail {

inline cl_mem opencl_mem(const memory_ref& ref) noexcept { return static_cast<cl_mem>(ref.handle); }

[[noreturn]] inline void opencl_copy_failed(const memory_ref& dst, const memory_ref& src, std::size_t bytes,
                                            const char* call, cl_int status) {
  throw error("copy of " + std::to_string(bytes) + " bytes from " + src.place.to_string() + " to " +
              dst.place.to_string() + " failed: " + call + ": " + opencl_error_name(status));
}

// Blocking read of a device range into host memory.
inline void opencl_read(const memory_ref& dst, const memory_ref& src, void* host, std::size_t bytes) {
  const cl_command_queue queue = copy_context_of<opencl>(src.place.device(), dst, src).queue();
  const cl_int status =
      clEnqueueReadBuffer(queue, opencl_mem(src), CL_TRUE, src.offset, bytes, host, 0, nullptr, nullptr);
  if (status != CL_SUCCESS) opencl_copy_failed(dst, src, bytes, "clEnqueueReadBuffer", status);
}

// Blocking write of host memory into a device range.
inline void opencl_write(const memory_ref& dst, const memory_ref& src, const void* host, std::size_t bytes) {
  const cl_command_queue queue = copy_context_of<opencl>(dst.place.device(), dst, src).queue();
  const cl_int status =
      clEnqueueWriteBuffer(queue, opencl_mem(dst), CL_TRUE, dst.offset, bytes, host, 0, nullptr, nullptr);
  if (status != CL_SUCCESS) opencl_copy_failed(dst, src, bytes, "clEnqueueWriteBuffer", status);
}

inline const std::byte* host_bytes(const memory_ref& ref) noexcept {
  return static_cast<const std::byte*>(ref.handle) + ref.offset;
}

}  // namespace detail

// Host to device: a blocking write, so the host buffer may be freed or reused on return.
template <>
struct copy_traits<cpu, opencl> {
  static void copy(const memory_ref& dst, const memory_ref& src, std::size_t bytes) {
    if (bytes == 0) return;
    detail::opencl_write(dst, src, detail::host_bytes(src), bytes);
  }
};

// Device to host: a blocking read, so the bytes are there on return.
template <>
struct copy_traits<opencl, cpu> {
  static void copy(const memory_ref& dst, const memory_ref& src, std::size_t bytes) {
    if (bytes == 0) return;
    detail::opencl_read(dst, src, static_cast<std::byte*>(dst.handle) + dst.offset, bytes);
  }
};

// Device to device: clEnqueueCopyBuffer on the device's queue, waited for, when both ranges
// are on one device and do not overlap; otherwise staged through a host buffer.
template <>
struct copy_traits<opencl, opencl> {
  static void copy(const memory_ref& dst, const memory_ref& src, std::size_t bytes) {
    const bool same_buffer = dst.handle == src.handle;
    if (bytes == 0 || (same_buffer && dst.offset == src.offset)) return;  // nothing moves
    const bool overlap = overlapping(dst, bytes, src, bytes);
    if (dst.place == src.place && !overlap) {
      const cl_command_queue queue = copy_context_of<opencl>(dst.place.device(), dst, src).queue();
      cl_int status = clEnqueueCopyBuffer(queue, detail::opencl_mem(src), detail::opencl_mem(dst), src.offset,
                                          dst.offset, bytes, 0, nullptr, nullptr);
      if (status != CL_SUCCESS) detail::opencl_copy_failed(dst, src, bytes, "clEnqueueCopyBuffer", status);
      status = clFinish(queue);
      if (status != CL_SUCCESS) detail::opencl_copy_failed(dst, src, bytes, "clFinish", status);
      return;
    }
    // Another device (another cl_context), or overlapping ranges of one buffer, which
    // clEnqueueCopyBuffer refuses (CL_MEM_COPY_OVERLAP): through the host, like memmove.
    const auto staging = std::make_unique_for_overwrite<std::byte[]>(bytes);
    detail::opencl_read(dst, src, staging.get(), bytes);
    detail::opencl_write(dst, src, staging.get(), bytes);
  }
};

namespace detail {
inline const bool opencl_device_registered = register_at_startup([] {
  return register_device<opencl>() && register_copy<cpu, opencl>() && register_copy<opencl, cpu>() &&
         register_copy<opencl, opencl>();
});
}

}  // namespace fluidk

#endif  // the backend's feature macro
