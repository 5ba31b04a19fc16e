// The CUDA backend: place kind `cuda` (printed gpu, as Fluid did), its device context (a
// non-blocking stream per device, cuDNN and cuBLAS handles bound to it), the cudaMalloc
// allocator with its cache of freed buffers (device_memory_cache) and the copies host <-> device and device
// <-> device, all added through the public extension points of fluidk/device.hpp. Needs FLUIDK_HAS_CUDA,
// which Meson's fluidk_cuda_dep defines. Host code only (no Boost.Hana): it compiles with g++/clang++ and in
// .cu files with nvcc alike.
#pragma once

#if !defined(FLUIDK_HAS_CUDA) || !FLUIDK_HAS_CUDA
#error \
    "fluidk/devices/cuda.hpp needs the CUDA backend: use fluidk_cuda_dep (Meson), or define FLUIDK_HAS_CUDA=1 and link cudart, cublas and cudnn"
#else

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>

#include "fluidk/device.hpp"
#include "fluidk/device_memory_cache.hpp"
#include "fluidk/devices/cpu.hpp"
#include "fluidk/devices/cudnn_tags.hpp"
#include "fluidk/error.hpp"
#include "fluidk/place.hpp"

namespace fluidk {

struct cuda {
  using place_tag = cuda;
  static constexpr place_kind_id id = 1;
  static constexpr std::string_view name = "gpu";
  static constexpr bool has_device_id = true;
  static constexpr bool host_accessible = false;
  static constexpr std::array<std::string_view, 1> aliases{"cuda"};
};

namespace detail {

// "out of memory (cudaErrorMemoryAllocation)".
inline std::string cuda_error_text(cudaError_t status) {
  return std::string(cudaGetErrorString(status)) + " (" + cudaGetErrorName(status) + ")";
}

// Throws fluidk::error "<what>: <CUDA error>" on failure, after clearing the runtime's
// last-error state (a sticky error, such as a kernel fault, stays: that is CUDA's rule).
inline void cuda_check(cudaError_t status, const std::string& what) {
  if (status == cudaSuccess) return;
  static_cast<void>(cudaGetLastError());
  throw error(what + ": " + cuda_error_text(status));
}

// What cudaGetDeviceCount said, asked once per process: the runtime enumerates devices
// once (CUDA_VISIBLE_DEVICES is read at initialisation), so the answer cannot change.
struct cuda_probe_result {
  int count = 0;
  cudaError_t status = cudaSuccess;
};

inline const cuda_probe_result& cuda_probe() noexcept {
  static const cuda_probe_result result = [] {
    cuda_probe_result r;
    r.status = cudaGetDeviceCount(&r.count);
    if (r.status != cudaSuccess) {
      r.count = 0;
      static_cast<void>(cudaGetLastError());  // not sticky, but leave no error behind
    }
    return r;
  }();
  return result;
}

// Makes `device` current for its lifetime and restores the caller's current device. Never
// throws: status() says whether the switch happened.
class cuda_device_guard {
 public:
  explicit cuda_device_guard(int device) noexcept {
    status_ = cudaGetDevice(&previous_);
    if (status_ == cudaSuccess && previous_ != device) {
      status_ = cudaSetDevice(device);
      switched_ = status_ == cudaSuccess;
    }
    if (status_ != cudaSuccess) static_cast<void>(cudaGetLastError());
  }
  cuda_device_guard(const cuda_device_guard&) = delete;
  cuda_device_guard& operator=(const cuda_device_guard&) = delete;
  ~cuda_device_guard() {
    if (switched_) static_cast<void>(cudaSetDevice(previous_));
  }

  cudaError_t status() const noexcept { return status_; }
  // Throws fluidk::error naming the device when the switch failed.
  void check(int device) const {
    cuda_check(status_, "cannot make CUDA device " + std::to_string(device) + " current");
  }

 private:
  int previous_ = 0;
  bool switched_ = false;
  cudaError_t status_ = cudaSuccess;
};

}  // namespace detail

// Whether this process sees at least one CUDA device (false without a driver or a device).
inline bool cuda_available() noexcept { return detail::cuda_probe().count > 0; }

// Why there is no CUDA device, for skips and error messages: "no CUDA device (<what
// cudaGetDeviceCount said>)"; empty when a device is present.
inline std::string cuda_unavailable_reason() {
  const auto& probe = detail::cuda_probe();
  if (probe.count > 0) return {};
  if (probe.status != cudaSuccess)
    return "no CUDA device (" + std::string(cudaGetErrorString(probe.status)) + ")";
  return "no CUDA device (cudaGetDeviceCount found 0 devices)";
}

// One CUDA device's context: a non-blocking stream (no implicit synchronisation with the
// legacy default stream) and, made on first request, cuDNN and cuBLAS handles bound to it.
// fluidk's copies to and from this device are queued on this stream, so kernels launched on
// stream() are ordered after the data arrives and before it is copied out.
class cuda_context final : public device_context {
 public:
  explicit cuda_context(int device) : device_(device), memory_(device, &release_buffer) {
    const detail::cuda_device_guard guard(device);
    guard.check(device);
    detail::cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                       "cannot create a stream on " + place().to_string());
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess)
      memory_.set_limit(device_memory_cache::limit_for(total));
    static_cast<void>(cudaGetLastError());
  }
  cuda_context(const cuda_context&) = delete;
  cuda_context& operator=(const cuda_context&) = delete;

  // Releases the cached buffers, the handles and the stream. When the process is exiting and
  // the CUDA runtime has already been torn down (cudaErrorCudartUnloading), the buffers and
  // library handles are left to the driver, which reclaims everything: destroying them then
  // can crash inside cuDNN.
  ~cuda_context() override {
    const detail::cuda_device_guard guard(device_);
    if (guard.status() != cudaSuccess) {
      memory_.abandon();
    } else {
      memory_.empty();
      if (cublas_ != nullptr) static_cast<void>(cublasDestroy(cublas_));
      if (cudnn_ != nullptr) static_cast<void>(cudnnDestroy(cudnn_));
    }
    if (stream_ != nullptr) static_cast<void>(cudaStreamDestroy(stream_));
    static_cast<void>(cudaGetLastError());
  }

  fluidk::place place() const noexcept override { return fluidk::place::of<cuda>(device_); }
  int device() const noexcept { return device_; }
  cudaStream_t stream() const noexcept { return stream_; }

  // The buffers freed on this device, kept for reuse on stream(): its statistics, limit and
  // empty(). A buffer used by work on another stream must be waited for before it is freed.
  device_memory_cache& memory_cache() noexcept { return memory_; }

  // cudaFree waits for the device's queued work before it releases.
  static void release_buffer(int device, void* handle) noexcept {
    const detail::cuda_device_guard guard(device);
    static_cast<void>(cudaFree(handle));
    static_cast<void>(cudaGetLastError());
  }

  // Blocks until all work queued on stream() has finished; throws fluidk::error with the
  // CUDA error (including one from an earlier asynchronous kernel) on failure.
  void wait() override {
    detail::cuda_check(cudaStreamSynchronize(stream_), "waiting for " + place().to_string() + " failed");
  }

  // The cuDNN handle of this device, bound to stream(); made on first call.
  cudnnHandle_t cudnn() {
    const std::lock_guard lock(mutex_);
    if (cudnn_ == nullptr) {
      const detail::cuda_device_guard guard(device_);
      guard.check(device_);
      cudnnHandle_t handle = nullptr;
      check_cudnn(cudnnCreate(&handle), "cudnnCreate");
      if (const cudnnStatus_t status = cudnnSetStream(handle, stream_); status != CUDNN_STATUS_SUCCESS) {
        static_cast<void>(cudnnDestroy(handle));
        check_cudnn(status, "cudnnSetStream");
      }
      cudnn_ = handle;
    }
    return cudnn_;
  }

  // cuDNN allows one thread at a time on a handle: hold this lock while calling cuDNN with
  // cudnn(). (cuBLAS handles may be used from several threads at once.)
  [[nodiscard]] std::unique_lock<std::mutex> lock_cudnn() { return std::unique_lock<std::mutex>(cudnn_use_); }

  // The cuBLAS handle of this device, bound to stream(); made on first call.
  cublasHandle_t cublas() {
    const std::lock_guard lock(mutex_);
    if (cublas_ == nullptr) {
      const detail::cuda_device_guard guard(device_);
      guard.check(device_);
      cublasHandle_t handle = nullptr;
      check_cublas(cublasCreate(&handle), "cublasCreate");
      if (const cublasStatus_t status = cublasSetStream(handle, stream_); status != CUBLAS_STATUS_SUCCESS) {
        static_cast<void>(cublasDestroy(handle));
        check_cublas(status, "cublasSetStream");
      }
      cublas_ = handle;
    }
    return cublas_;
  }

 private:
  void check_cudnn(cudnnStatus_t status, const char* what) const {
    if (status != CUDNN_STATUS_SUCCESS)
      throw error(std::string(what) + " failed on " + place().to_string() + ": " +
                  cudnnGetErrorString(status));
  }
  void check_cublas(cublasStatus_t status, const char* what) const {
    if (status != CUBLAS_STATUS_SUCCESS)
      throw error(std::string(what) + " failed on " + place().to_string() + ": " +
                  cublasGetStatusString(status) + " (" + cublasGetStatusName(status) + ")");
  }

  int device_;
  cudaStream_t stream_ = nullptr;
  std::mutex mutex_;  // guards the lazy handles: contexts are shared between threads
  std::mutex cudnn_use_;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  device_memory_cache memory_;
};

template <>
struct device_traits<cuda> {
  using context_type = cuda_context;

  // Devices this process sees; 0 (never an exception) without a driver or a device.
  static int device_count() noexcept { return detail::cuda_probe().count; }

  static void* allocate(int device, std::size_t bytes) {
    if (bytes == 0) return nullptr;
    const place where = place::of<cuda>(device);
    const int count = device_count();
    if (count == 0) throw allocation_error(where, bytes, cuda_unavailable_reason());
    if (device < 0 || device >= count)
      throw allocation_error(where, bytes,
                             "no such device: " + std::to_string(count) + " CUDA device(s) present");
    const detail::cuda_device_guard guard(device);
    if (guard.status() != cudaSuccess)
      throw allocation_error(where, bytes,
                             "cannot make the device current: " + detail::cuda_error_text(guard.status()));
    cudaError_t status = cudaSuccess;
    const auto make = [&](std::size_t n) -> void* {
      void* made = nullptr;
      status = cudaMalloc(&made, n);
      if (status == cudaSuccess) return made;
      static_cast<void>(cudaGetLastError());
      if (status == cudaErrorMemoryAllocation) return nullptr;
      throw allocation_error(where, bytes, "cudaMalloc: " + detail::cuda_error_text(status));
    };
    // A buffer freed earlier, else a new one; out of memory, the cache is emptied (its
    // cudaFree waits for the device) and cudaMalloc asked again. Without the device's context
    // (destroyed at exit, when a static object allocates): cudaMalloc, and cudaFree later.
    cuda_context* context = nullptr;
    try {
      context = &context_of<cuda>(device);
    } catch (const device_unavailable&) {
    } catch (const error& e) {
      throw allocation_error(where, bytes, "cannot set up the device: " + std::string(detail::unprefixed(e)));
    }
    void* memory = context != nullptr ? context->memory_cache().allocate(bytes, make, [] {}) : make(bytes);
    if (memory == nullptr)
      throw allocation_error(where, bytes, "cudaMalloc: " + detail::cuda_error_text(status));
    return memory;
  }

  // Back to the device's cache, without waiting: the buffer's next owner queues its work on
  // the same stream, after the work queued on it so far. Once the context is gone (a tensor
  // destroyed at exit), to cudaFree, which waits for the device's queued work.
  static void deallocate(int device, void* handle, std::size_t bytes) noexcept {
    deallocate_to_cache<cuda>(device, handle, bytes);
  }
};

namespace detail {

inline void* cuda_address(const memory_ref& ref) noexcept {
  return static_cast<std::byte*>(ref.handle) + ref.offset;
}

inline void cuda_copy_check(cudaError_t status, const char* what, const memory_ref& dst,
                            const memory_ref& src) {
  if (status == cudaSuccess) return;
  static_cast<void>(cudaGetLastError());
  throw error("copy from " + src.place.to_string() + " to " + dst.place.to_string() + " failed: " + what +
              ": " + cuda_error_text(status));
}

}  // namespace detail

// Host -> device, queued on the destination's stream, so later work on that stream sees the
// bytes. The call returns when the source may be reused: from pageable memory (what fluidk's
// CPU allocator gives) cudaMemcpyAsync returns only after staging the bytes into driver
// memory (CUDA's "API synchronization behavior"); a page-locked or managed source is read by
// the DMA engine later, so for one of those the stream is synchronised before returning.
template <>
struct copy_traits<cpu, cuda> {
  static void copy(const memory_ref& dst, const memory_ref& src, std::size_t bytes) {
    cuda_context& context = copy_context_of<cuda>(dst.place.device(), dst, src);
    const detail::cuda_device_guard guard(context.device());
    detail::cuda_copy_check(guard.status(), "cudaSetDevice", dst, src);
    const void* from = detail::cuda_address(src);
    detail::cuda_copy_check(
        cudaMemcpyAsync(detail::cuda_address(dst), from, bytes, cudaMemcpyHostToDevice, context.stream()),
        "cudaMemcpyAsync", dst, src);
    cudaPointerAttributes attributes{};
    const bool pageable = cudaPointerGetAttributes(&attributes, from) == cudaSuccess &&
                          attributes.type == cudaMemoryTypeUnregistered;
    static_cast<void>(cudaGetLastError());
    if (!pageable)
      detail::cuda_copy_check(cudaStreamSynchronize(context.stream()), "cudaStreamSynchronize", dst, src);
  }
};

// Device -> host, queued on the source's stream (after the work that wrote the source), then
// waited for: on return the host may read the bytes.
template <>
struct copy_traits<cuda, cpu> {
  static void copy(const memory_ref& dst, const memory_ref& src, std::size_t bytes) {
    cuda_context& context = copy_context_of<cuda>(src.place.device(), dst, src);
    const detail::cuda_device_guard guard(context.device());
    detail::cuda_copy_check(guard.status(), "cudaSetDevice", dst, src);
    detail::cuda_copy_check(cudaMemcpyAsync(detail::cuda_address(dst), detail::cuda_address(src), bytes,
                                            cudaMemcpyDeviceToHost, context.stream()),
                            "cudaMemcpyAsync", dst, src);
    detail::cuda_copy_check(cudaStreamSynchronize(context.stream()), "cudaStreamSynchronize", dst, src);
  }
};

// Device -> device. On one device: a copy queued on its stream. Across devices: the
// destination's stream first waits for the work queued on the source's stream, then runs
// cudaMemcpyPeerAsync (staged through the host when peer access is off); the source's stream
// in turn waits for the copy, so later work on the source's buffer (its next owner's, once it
// is freed to the device's memory cache) comes after the copy has read it; where that wait
// cannot be set up, the copy is waited for before the error is thrown. Either way the copy is ordered before
// later work on the destination's stream, and the call does not block the host.
template <>
struct copy_traits<cuda, cuda> {
  static void copy(const memory_ref& dst, const memory_ref& src, std::size_t bytes) {
    const int to = dst.place.device();
    const int from = src.place.device();
    cuda_context& target = copy_context_of<cuda>(to, dst, src);
    if (from == to) {
      const detail::cuda_device_guard guard(to);
      detail::cuda_copy_check(guard.status(), "cudaSetDevice", dst, src);
      auto* const d = static_cast<std::byte*>(detail::cuda_address(dst));
      const auto* const s = static_cast<const std::byte*>(detail::cuda_address(src));
      if (bytes == 0 || d == s) return;  // nothing moves
      // cudaMemcpy's ranges must not overlap: overlapping ones (two slices of one buffer) go
      // through a buffer of the stream's own, like memmove, all queued in order.
      if (d < s + bytes && s < d + bytes) {
        void* staging = nullptr;
        detail::cuda_copy_check(cudaMallocAsync(&staging, bytes, target.stream()), "cudaMallocAsync", dst,
                                src);
        cudaError_t status = cudaMemcpyAsync(staging, s, bytes, cudaMemcpyDeviceToDevice, target.stream());
        if (status == cudaSuccess)
          status = cudaMemcpyAsync(d, staging, bytes, cudaMemcpyDeviceToDevice, target.stream());
        const cudaError_t freed = cudaFreeAsync(staging, target.stream());
        detail::cuda_copy_check(status, "cudaMemcpyAsync", dst, src);
        detail::cuda_copy_check(freed, "cudaFreeAsync", dst, src);
        return;
      }
      detail::cuda_copy_check(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, target.stream()),
                              "cudaMemcpyAsync", dst, src);
      return;
    }
    cuda_context& source = copy_context_of<cuda>(from, dst, src);
    cudaEvent_t source_ready = nullptr;
    cudaEvent_t copy_done = nullptr;
    {
      const detail::cuda_device_guard guard(from);
      detail::cuda_copy_check(guard.status(), "cudaSetDevice", dst, src);
      detail::cuda_copy_check(cudaEventCreateWithFlags(&source_ready, cudaEventDisableTiming),
                              "cudaEventCreate", dst, src);
      const cudaError_t recorded = cudaEventRecord(source_ready, source.stream());
      if (recorded != cudaSuccess) static_cast<void>(cudaEventDestroy(source_ready));
      detail::cuda_copy_check(recorded, "cudaEventRecord", dst, src);
    }
    {
      const detail::cuda_device_guard guard(to);
      cudaError_t status = guard.status();
      const char* step = "cudaSetDevice";
      if (status == cudaSuccess) {
        step = "cudaStreamWaitEvent";
        status = cudaStreamWaitEvent(target.stream(), source_ready, 0);
      }
      // An event may be destroyed while work still waits on it: it is released once done.
      static_cast<void>(cudaEventDestroy(source_ready));
      bool queued = false;
      if (status == cudaSuccess) {
        step = "cudaMemcpyPeerAsync";
        status = cudaMemcpyPeerAsync(detail::cuda_address(dst), to, detail::cuda_address(src), from, bytes,
                                     target.stream());
        queued = status == cudaSuccess;
      }
      if (status == cudaSuccess) {
        step = "cudaEventCreate";
        status = cudaEventCreateWithFlags(&copy_done, cudaEventDisableTiming);
      }
      if (status == cudaSuccess) {
        step = "cudaEventRecord";
        status = cudaEventRecord(copy_done, target.stream());
        if (status != cudaSuccess) static_cast<void>(cudaEventDestroy(copy_done));
      }
      // The source's stream will not wait for a copy queued: the copy is waited for here, as
      // the source's buffer may go to its next owner once the error has freed it.
      if (status != cudaSuccess && queued) static_cast<void>(cudaStreamSynchronize(target.stream()));
      detail::cuda_copy_check(status, step, dst, src);
    }
    cudaError_t status = cudaSuccess;
    {
      const detail::cuda_device_guard guard(from);
      status = guard.status();
      if (status == cudaSuccess) status = cudaStreamWaitEvent(source.stream(), copy_done, 0);
      static_cast<void>(cudaEventDestroy(copy_done));
    }
    if (status != cudaSuccess) {
      const detail::cuda_device_guard guard(to);
      static_cast<void>(cudaStreamSynchronize(target.stream()));
    }
    detail::cuda_copy_check(status, "cudaStreamWaitEvent", dst, src);
  }
};

namespace detail {
inline const bool cuda_device_registered = register_at_startup([] {
  return register_device<cuda>() && register_copy<cpu, cuda>() && register_copy<cuda, cpu>() &&
         register_copy<cuda, cuda>();
});
}

}  // namespace fluidk

#endif  // the backend's feature macro
