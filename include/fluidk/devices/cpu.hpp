// The CPU device: the host's context, its 64-byte aligned allocator and host copies,
// registered through the same extension points as every other backend.
#pragma once

#include <cstddef>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "fluidk/device.hpp"
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
// most 12.5 % more) and kept per class, at most `max_bytes` in all (a block that would exceed
// it is freed); smaller ones go to the C library, whose own bins serve them. Not under
// AddressSanitizer, whose poisoning of freed memory would be hidden by the reuse.
class host_block_cache {
 public:
  static constexpr std::size_t min_bytes = std::size_t(1) << 20;
  static constexpr std::size_t max_bytes = std::size_t(1) << 30;

  // Never destroyed: tensors of static objects are freed during the process's exit, after any
  // static cache would be gone (what it keeps then is the system's to take back).
  static host_block_cache& instance() {
    static host_block_cache* const cache = new host_block_cache;
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

  void* take(std::size_t size) {
    const std::lock_guard lock(mutex_);
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* block = it->second.back();
    it->second.pop_back();
    cached_ -= size;
    return block;
  }
  // False when the block is not kept (the cache would grow past max_bytes): the caller frees it.
  bool keep(void* block, std::size_t size) {
    const std::lock_guard lock(mutex_);
    if (cached_ + size > max_bytes) return false;
    free_[size].push_back(block);
    cached_ += size;
    return true;
  }
  std::size_t cached_bytes() const {
    const std::lock_guard lock(mutex_);
    return cached_;
  }
  // Frees every kept block.
  void release() {
    const std::lock_guard lock(mutex_);
    for (auto& [size, blocks] : free_)
      for (void* block : blocks) ::operator delete(block, std::align_val_t(cpu_alignment));
    free_.clear();
    cached_ = 0;
  }

 private:
  host_block_cache() = default;
  mutable std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
  std::size_t cached_ = 0;
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
    const std::size_t size = detail::reuse_host_blocks ? detail::host_block_cache::size_class(bytes) : bytes;
    if (detail::reuse_host_blocks && size >= detail::host_block_cache::min_bytes)
      if (void* block = detail::host_block_cache::instance().take(size)) return block;
    void* memory = ::operator new(size, std::align_val_t(cpu_alignment), std::nothrow);
    if (memory == nullptr && detail::reuse_host_blocks && size >= detail::host_block_cache::min_bytes) {
      // Out of memory with blocks kept: give them back, and try once more.
      detail::host_block_cache::instance().release();
      memory = ::operator new(size, std::align_val_t(cpu_alignment), std::nothrow);
    }
    if (memory == nullptr) throw allocation_error(cpu_place, bytes, "out of host memory");
    return memory;
  }
  static void deallocate(int, void* handle, std::size_t bytes) noexcept {
    if (handle == nullptr) return;
    if (detail::reuse_host_blocks && bytes >= detail::host_block_cache::min_bytes) {
      try {
        if (detail::host_block_cache::instance().keep(handle, detail::host_block_cache::size_class(bytes)))
          return;
      } catch (...) {  // no room to note it: freed
      }
    }
    ::operator delete(handle, std::align_val_t(cpu_alignment));
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
