// A device's cache of freed buffers, for the allocators of devices whose allocation is costly:
// cudaMalloc, and cudaFree, which waits for the whole device; clCreateBuffer. A program that
// runs again then asks the driver for nothing (what Paddle's auto-growth allocator and
// PyTorch's caching allocator do for CUDA). The CUDA and OpenCL backends keep one in each
// device context, and the CPU's allocator one for its large blocks (devices/cpu.hpp); a backend
// of a new device can keep one the same way (docs/new-device.md).
//
// Reuse is safe in the order of the device's one queue: fluidk queues all work on a device's
// memory on its context's queue (CUDA's stream, OpenCL's in-order queue), or makes that queue
// wait for work queued elsewhere (a CUDA copy between devices, queued on the destination's
// stream, which the source's stream then waits for), so the work of a buffer's next owner is
// queued after the work of the last one, and a buffer goes back to the cache as soon as its
// tensor is freed, without waiting. A program that queues work of its own on other queues
// (another CUDA stream) must wait for it before the tensor it uses is freed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <new>

#include "fluidk/device.hpp"

namespace fluidk {

class device_memory_cache {
 public:
  // Gives a buffer back to the driver: the raw deallocation of the device and the device.
  using release_function = void (*)(int device, void* handle) noexcept;

  struct statistics {
    std::uint64_t driver_allocations = 0;  // buffers the driver made (through allocate())
    std::uint64_t reuses = 0;              // allocations served from the cache
    std::uint64_t driver_releases = 0;     // buffers given back to the driver
    std::size_t cached_bytes = 0;          // held free now
    std::size_t cached_buffers = 0;
    friend bool operator==(const statistics&, const statistics&) = default;
  };

  // At most this many bytes are held free by default, or a quarter of the device's memory where
  // that is less (limit_for, which the backends set); the oldest freed go to the driver beyond
  // it (set_limit).
  static constexpr std::size_t default_limit = std::size_t(1) << 30;
  // The limit for a device of `device_bytes` of memory: default_limit, or a quarter of it where
  // that is less (0: not known, the default).
  static constexpr std::size_t limit_for(std::size_t device_bytes) noexcept {
    return device_bytes != 0 ? std::min(default_limit, device_bytes / 4) : default_limit;
  }

  device_memory_cache(int device, release_function release, std::size_t limit = default_limit) noexcept
      : device_(device), release_(release), limit_(limit) {}
  device_memory_cache(const device_memory_cache&) = delete;
  device_memory_cache& operator=(const device_memory_cache&) = delete;
  ~device_memory_cache() { empty(); }

  // A buffer of exactly `bytes`: the one of that size freed last, else a new one from
  // `allocate(bytes)`. When `allocate` returns nullptr (the device has no memory left for it),
  // every cached buffer goes back to the driver, `before_retry()` runs (a wait for the device,
  // where the driver releases a buffer only once the work queued on it is done) and `allocate`
  // is asked once more; its nullptr then comes back to the caller. `allocate` throws on other
  // failures.
  template <class Allocate, class BeforeRetry>
  void* allocate(std::size_t bytes, Allocate&& allocate, BeforeRetry&& before_retry) {
    {
      const std::lock_guard lock(mutex_);
      const auto last = free_.upper_bound(bytes);
      if (last != free_.begin() && std::prev(last)->first == bytes) {
        // Equal keys keep their order of insertion: the one before upper_bound was freed last.
        const auto it = std::prev(last);
        void* handle = it->second.handle;
        by_age_.erase(it->second.order);
        free_.erase(it);
        stats_.cached_bytes -= bytes;
        --stats_.cached_buffers;
        ++stats_.reuses;
        return handle;
      }
    }
    void* handle = allocate(bytes);
    if (handle == nullptr && stats().cached_buffers != 0) {
      empty();
      before_retry();
      handle = allocate(bytes);
    }
    if (handle != nullptr) {
      const std::lock_guard lock(mutex_);
      ++stats_.driver_allocations;
    }
    return handle;
  }

  // Takes back a buffer of `bytes` that allocate() gave, for the next allocation of its size
  // (to the driver when it is larger than the limit, or when there is no memory to note it).
  void deallocate(void* handle, std::size_t bytes) noexcept {
    if (handle == nullptr) return;
    const std::lock_guard lock(mutex_);
    if (bytes > limit_) {
      release_locked(handle);
      return;
    }
    try {
      const auto it = free_.emplace(bytes, cached{handle, next_});
      try {
        by_age_.emplace(next_, it);
      } catch (const std::bad_alloc&) {
        free_.erase(it);
        throw;
      }
    } catch (const std::bad_alloc&) {
      release_locked(handle);
      return;
    }
    ++next_;
    stats_.cached_bytes += bytes;
    ++stats_.cached_buffers;
    trim_locked();
  }

  // Gives every cached buffer back to the driver.
  void empty() noexcept {
    const std::lock_guard lock(mutex_);
    for (const auto& [bytes, entry] : free_) release_locked(entry.handle);
    clear_locked();
  }

  // Forgets every cached buffer without giving it back: for a process whose device runtime is
  // already torn down at exit, which reclaims them itself.
  void abandon() noexcept {
    const std::lock_guard lock(mutex_);
    clear_locked();
  }

  // At most `bytes` held free from now on (0: none, every freed buffer goes to the driver).
  void set_limit(std::size_t bytes) noexcept {
    const std::lock_guard lock(mutex_);
    limit_ = bytes;
    trim_locked();
  }
  std::size_t limit() const noexcept {
    const std::lock_guard lock(mutex_);
    return limit_;
  }

  statistics stats() const noexcept {
    const std::lock_guard lock(mutex_);
    return stats_;
  }

 private:
  struct cached {
    void* handle;
    std::uint64_t order;  // when it was freed, for the oldest to go first
  };

  void release_locked(void* handle) noexcept {
    release_(device_, handle);
    ++stats_.driver_releases;
  }
  void clear_locked() noexcept {
    free_.clear();
    by_age_.clear();
    stats_.cached_bytes = 0;
    stats_.cached_buffers = 0;
  }
  // Beyond the limit, the buffers freed first go to the driver.
  void trim_locked() noexcept {
    while (stats_.cached_bytes > limit_) {
      const auto oldest = by_age_.begin()->second;
      release_locked(oldest->second.handle);
      stats_.cached_bytes -= oldest->first;
      --stats_.cached_buffers;
      by_age_.erase(by_age_.begin());
      free_.erase(oldest);
    }
  }

  int device_;
  release_function release_;
  mutable std::mutex mutex_;
  std::size_t limit_;
  std::uint64_t next_ = 0;
  std::multimap<std::size_t, cached> free_;                                       // by size
  std::map<std::uint64_t, std::multimap<std::size_t, cached>::iterator> by_age_;  // by order freed
  statistics stats_;
};

// The deallocation of a device whose context keeps its freed buffers: a context_type with
// memory_cache() and a static release_buffer(device, handle) (the raw release). To the cache;
// once the context is gone (a tensor destroyed at exit, after the contexts), to the driver.
template <class P>
void deallocate_to_cache(int device, void* handle, std::size_t bytes) noexcept {
  using context_type = typename device_traits<P>::context_type;
  if (handle == nullptr) return;
  if (context_type* context = detail::context_pool<P>::existing(device))
    context->memory_cache().deallocate(handle, bytes);
  else
    context_type::release_buffer(device, handle);
}

}  // namespace fluidk
