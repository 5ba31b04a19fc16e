// The CPU device: the host's context, its 64-byte aligned allocator and host copies,
// registered through the same extension points as every other backend.
#pragma once

#include <cstddef>
#include <cstring>
#include <limits>
#include <new>

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

template <>
struct device_traits<cpu> {
  using context_type = cpu_context;
  static int device_count() noexcept { return 1; }
  static void* allocate(int, std::size_t bytes) {
    if (bytes == 0) return nullptr;
    if (bytes > std::size_t(std::numeric_limits<std::ptrdiff_t>::max()))
      throw allocation_error(cpu_place, bytes, "more than the address space can hold");
    void* memory = ::operator new(bytes, std::align_val_t(cpu_alignment), std::nothrow);
    if (memory == nullptr) throw allocation_error(cpu_place, bytes, "out of host memory");
    return memory;
  }
  static void deallocate(int, void* handle, std::size_t) noexcept {
    if (handle != nullptr) ::operator delete(handle, std::align_val_t(cpu_alignment));
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
