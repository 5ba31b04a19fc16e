// The CPU device: the host's context, its 64-byte aligned allocator and host copies,
// registered through the same extension points as every other backend.
#pragma once

#include <cstddef>
#include <cstring>
#include <limits>
#include <new>

#include "fluidk/device.hpp"
#include "fluidk/device_memory_cache.hpp"
#include "fluidk/place.hpp"

namespace fluidk {

// Alignment of host buffers: a cache line, and what AVX-512 loads want.
inline constexpr std::size_t cpu_alignment = 64;

class cpu_context final : public device_context {
 public:
  explicit cpu_context(int = 0) noexcept {}
  fluidk::place place() const noexcept override { return cpu_place; }
  void wait() override {}
};

namespace detail {
// Large host blocks kept for reuse when freed, as Fluid's best-fit allocators and ONNX
// Runtime's arena keep theirs: a network asks for the same activation sizes every run, and a
// block the C library would give back to the system (glibc maps blocks of 32 MiB and more
// anew each time) is page-faulted in again on its next use. Measured on AMD Zen 5 (family 26,
// model 2), MobileNetV2 at batch 8 through oneDNN, one thread: a 1x1 convolution writing 38 MiB
// took 59 ms a run in fresh pages and 1.5 ms in reused ones; the whole run 102 -> 70 ms.
// Blocks of 1 MiB and more are rounded up to a size class (an eighth of a power of two: at
// most 12.5 % more) and kept per class in a device_memory_cache, at most its limit in all (1
// GiB; the blocks freed first go beyond it); smaller ones go to the C library, whose own bins
// serve them. Not under AddressSanitizer, whose poisoning of freed memory would be hidden by
// the reuse.
struct host_block_cache {
  static constexpr std::size_t min_bytes = std::size_t(1) << 20;

  static void release(int, void* block) noexcept {
    ::operator delete(block, std::align_val_t(cpu_alignment));
  }

  // Never destroyed: tensors of static objects are freed during the process's exit, after any
  // static cache would be gone (what it keeps then is the system's to take back).
  static device_memory_cache& instance() {
    static device_memory_cache* const cache = new device_memory_cache(0, &release);
    return *cache;
  }

  // The size a request of `bytes` is allocated as (bytes below min_bytes: themselves).
  static std::size_t size_class(std::size_t bytes) noexcept {
    if (bytes < min_bytes) return bytes;
    std::size_t power = min_bytes;
    while (power <= bytes / 2) power *= 2;  // the largest power of two <= bytes
    const std::size_t step = power / 8;
    return (bytes + step - 1) / step * step;
  }
};

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool reuse_host_blocks = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool reuse_host_blocks = false;
#else
inline constexpr bool reuse_host_blocks = true;
#endif
#else
inline constexpr bool reuse_host_blocks = true;
#endif
}  // namespace detail

template <>
struct device_traits<cpu> {
  using context_type = cpu_context;
  static int device_count() noexcept { return 1; }
  static void* allocate(int, std::size_t bytes) {
    if (bytes == 0) return nullptr;
    if (bytes > std::size_t(std::numeric_limits<std::ptrdiff_t>::max()))
      throw allocation_error(cpu_place, bytes, "more than the address space can hold");
    using blocks = detail::host_block_cache;
    const std::size_t size = detail::reuse_host_blocks ? blocks::size_class(bytes) : bytes;
    const auto make = [](std::size_t n) {
      return ::operator new(n, std::align_val_t(cpu_alignment), std::nothrow);
    };
    // Out of memory with blocks kept: they go back, and the C library is asked once more.
    void* memory = detail::reuse_host_blocks && size >= blocks::min_bytes
                       ? blocks::instance().allocate(size, make, [] {})
                       : make(size);
    if (memory == nullptr) throw allocation_error(cpu_place, bytes, "out of host memory");
    return memory;
  }
  static void deallocate(int, void* handle, std::size_t bytes) noexcept {
    if (handle == nullptr) return;
    using blocks = detail::host_block_cache;
    if (detail::reuse_host_blocks && bytes >= blocks::min_bytes)
      blocks::instance().deallocate(handle, blocks::size_class(bytes));
    else
      blocks::release(0, handle);
  }
};

template <>
struct copy_traits<cpu, cpu> {
  static void copy(const memory_ref& dst, const memory_ref& src, std::size_t bytes) noexcept {
    std::memmove(static_cast<std::byte*>(dst.handle) + dst.offset,
                 static_cast<const std::byte*>(src.handle) + src.offset, bytes);
  }
};

namespace detail {
// Registers the CPU device once, whichever asks first: the inline variable below, during the
// static initialisation of a translation unit that includes this header, or the first
// tensor allocated, which may come earlier (from the static initialisation of a translation
// unit initialised before every one that includes this header).
inline bool cpu_device_ready() {
  static const bool registered = register_device<cpu>() && register_copy<cpu, cpu>();
  return registered;
}
inline const bool cpu_device_registered = cpu_device_ready();
}  // namespace detail

}  // namespace fluidk
