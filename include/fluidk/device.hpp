// The extension points through which a backend adds a device: `device_traits<P>` (its
// context, allocator and device count) and `copy_traits<From, To>` (copies between places),
// and the runtime tables that `register_device<P>()` and `register_copy<From, To>()` fill.
// The core names no backend: CPU is registered through these same points.
#pragma once

#include <array>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fluidk/error.hpp"
#include "fluidk/place.hpp"

namespace fluidk {

// Allocation failure on any place: names the place and the byte count.
class allocation_error : public error {
 public:
  allocation_error(const place& where, std::size_t bytes, const std::string& reason)
      : error("cannot allocate " + std::to_string(bytes) + " bytes on " + where.to_string() + ": " + reason),
        where_(where),
        bytes_(bytes) {}
  // The same failure, its message led by `context` (what the allocation was for).
  allocation_error(const std::string& context, const allocation_error& e)
      : error(context + ": " + detail::unprefixed(e)), where_(e.where_), bytes_(e.bytes_) {}
  const place& where() const noexcept { return where_; }
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  place where_;
  std::size_t bytes_;
};

// A place that exists in the build but not on this machine (no CUDA device, say).
class device_unavailable : public error {
 public:
  using error::error;
};

// What every device context offers; a backend's context adds its streams, queues and
// library handles.
class device_context {
 public:
  virtual ~device_context() = default;
  virtual fluidk::place place() const noexcept = 0;
  // Blocks until all work queued on this context has finished.
  virtual void wait() = 0;
};

// Where bytes are: a place, the place's handle of a buffer (a pointer on the host and on
// CUDA, a cl_mem on OpenCL) and a byte offset into it.
struct memory_ref {
  fluidk::place place;
  void* handle = nullptr;
  std::size_t offset = 0;
};

// Whether `a_bytes` bytes at `a` and `b_bytes` bytes at `b` share a byte: parts of one buffer
// whose ranges cross.
constexpr bool overlapping(const memory_ref& a, std::size_t a_bytes, const memory_ref& b,
                           std::size_t b_bytes) noexcept {
  return a.handle == b.handle && a.offset < b.offset + b_bytes && b.offset < a.offset + a_bytes;
}

// Specialised by each backend for its place kind:
//   using context_type = ...;   // derived from device_context, constructible from the device id
//   static int device_count();   // devices present at run time (0 when none)
//   static void* allocate(int device, std::size_t bytes);   // throws allocation_error
//   static void deallocate(int device, void* handle, std::size_t bytes) noexcept;
template <class P>
struct device_traits;

// Specialised by a backend for each pair of place kinds it can copy between. copy() may
// queue the work on a stream, but returns only when the source may be freed, and when the
// destination is host-accessible, only when the bytes have arrived. The two ranges may be
// overlapping parts of one buffer (slices of one tensor): the result is memmove's.
//   static void copy(const memory_ref& dst, const memory_ref& src, std::size_t bytes);
template <class From, class To>
struct copy_traits;

template <class P>
concept Device = Place<P> && requires(int device, std::size_t bytes, void* handle) {
  typename device_traits<P>::context_type;
  requires std::derived_from<typename device_traits<P>::context_type, device_context>;
  { device_traits<P>::device_count() } -> std::convertible_to<int>;
  { device_traits<P>::allocate(device, bytes) } -> std::same_as<void*>;
  device_traits<P>::deallocate(device, handle, bytes);
};

template <class From, class To>
concept CopyBetween = requires(const memory_ref& ref, std::size_t bytes) {
  copy_traits<From, To>::copy(ref, ref, bytes);
};

namespace detail {

// The context of each device of kind P, made on first use and kept for the process. After
// the first use of a device, getting its context is one atomic load.
template <class P>
class context_pool {
 public:
  using context_type = typename device_traits<P>::context_type;
  static constexpr int max_devices = 64;

  static context_type& get(int device) {
    if (device >= 0 && device < max_devices)
      if (context_type* c = fast()[std::size_t(device)].load(std::memory_order_acquire)) return *c;
    // After the pool is destroyed (a static object's destructor at exit), its contexts are gone
    // and the pool may not be touched.
    if (gone().load(std::memory_order_acquire))
      throw device_unavailable("no device " + place::of<P>(device).to_string() + ": the contexts of kind '" +
                               std::string(P::name) + "' were destroyed at exit, before this use");
    const int count = device_traits<P>::device_count();
    if (device < 0 || device >= count)
      throw device_unavailable("no device " + place::of<P>(device).to_string() + ": " +
                               std::to_string(count) + " device(s) of kind '" + std::string(P::name) +
                               "' present");
    auto& self = instance(device);
    const std::lock_guard lock(self.mutex_);
    return self.make(device);
  }

  // The context of `device` if it has been made and not yet destroyed (at exit), else nullptr;
  // never makes one. For the deallocations of a device's buffers, which may come after.
  static context_type* existing(int device) noexcept {
    return device >= 0 && device < max_devices ? fast()[std::size_t(device)].load(std::memory_order_acquire)
                                               : nullptr;
  }

 private:
  // The pool is made with the first context asked for, inside its constructor: a device kind's
  // runtime that starts with its first context, or with the count of its devices, is then
  // started before the pool is finished, so the pool is destroyed before the runtime at exit,
  // and the contexts release what they hold (CUDA's cuDNN and cuBLAS handles) while it is still
  // there. (Made after the count alone, the pool outlived a runtime that its first context
  // started: test/context_teardown_test.cpp.)
  explicit context_pool(int first_device) { make(first_device); }
  ~context_pool() {
    gone().store(true, std::memory_order_release);
    for (auto& c : fast()) c.store(nullptr, std::memory_order_relaxed);
  }
  context_pool(const context_pool&) = delete;
  context_pool& operator=(const context_pool&) = delete;

  static context_pool& instance(int first_device) {
    static context_pool pool(first_device);
    return pool;
  }
  // The context of `device`, made if it is not yet (under mutex_, or in the constructor).
  context_type& make(int device) {
    if (contexts_.size() <= std::size_t(device)) contexts_.resize(std::size_t(device) + 1);
    auto& slot = contexts_[std::size_t(device)];
    if (!slot) {
      slot = std::make_unique<context_type>(device);
      if (device < max_devices) fast()[std::size_t(device)].store(slot.get(), std::memory_order_release);
    }
    return *slot;
  }

  // The contexts made so far, by device, for the lock-free path: outside the pool, since it is
  // read before the pool is made. Constant-initialised; cleared when the pool is destroyed.
  static std::array<std::atomic<context_type*>, max_devices>& fast() noexcept {
    static constinit std::array<std::atomic<context_type*>, max_devices> contexts{};
    return contexts;
  }

  // Set when the pool is destroyed; constant-initialised and never destroyed itself, so that it
  // can be read after.
  static std::atomic<bool>& gone() noexcept {
    static constinit std::atomic<bool> flag{false};
    return flag;
  }

  std::mutex mutex_;
  std::vector<std::unique_ptr<context_type>> contexts_;
};

// Runtime entry points of one place kind.
struct device_entry {
  int (*device_count)() = nullptr;
  void* (*allocate)(int device, std::size_t bytes) = nullptr;
  void (*deallocate)(int device, void* handle, std::size_t bytes) noexcept = nullptr;
  device_context& (*context)(int device) = nullptr;
};

using copy_function = void (*)(const memory_ref& dst, const memory_ref& src, std::size_t bytes);

// Moves on with every registration of a device, a copy or a transform. Memoised transform
// plans are kept per value of it, so that a plan never depends on what happened to be
// registered when it was first asked for (static initialisation runs in an order that the
// translation units and the link decide).
inline std::atomic<std::uint64_t>& registration_generation() noexcept {
  static std::atomic<std::uint64_t> generation{0};
  return generation;
}

class device_registry {
 public:
  static device_registry& instance() {
    static device_registry registry;
    return registry;
  }

  void add(place_kind_id kind, const device_entry& entry) {
    devices_[kind].store(&entry);
    registration_generation().fetch_add(1, std::memory_order_acq_rel);
  }
  void add_copy(place_kind_id from, place_kind_id to, copy_function fn) {
    copies_[from][to].store(fn);
    registration_generation().fetch_add(1, std::memory_order_acq_rel);
  }

  const device_entry* find(place_kind_id kind) const noexcept {
    return kind < max_place_kinds ? devices_[kind].load() : nullptr;
  }
  copy_function find_copy(place_kind_id from, place_kind_id to) const noexcept {
    return from < max_place_kinds && to < max_place_kinds ? copies_[from][to].load() : nullptr;
  }

 private:
  std::array<std::atomic<const device_entry*>, max_place_kinds> devices_{};
  std::array<std::array<std::atomic<copy_function>, max_place_kinds>, max_place_kinds> copies_{};
};

template <class P>
inline constexpr device_entry device_entry_of{
    &device_traits<P>::device_count, &device_traits<P>::allocate, &device_traits<P>::deallocate,
    [](int device) -> device_context& { return context_pool<P>::get(device); }};

template <class P>
struct device_check {
  static_assert(
      Device<P>,
      "fluidk: not a device: a place kind becomes a device by specialising fluidk::device_traits<P> "
      "with context_type, device_count(), allocate() and deallocate()");
  static constexpr bool value = Device<P>;
};

}  // namespace detail

// Makes a device usable at run time: its place kind (parsing, printing) and its allocator
// and contexts. Backends call it from an inline variable. Returns true.
template <class P>
bool register_device() {
  if constexpr (detail::device_check<P>::value) {
    register_place_kind<P>();
    detail::device_registry::instance().add(P::id, detail::device_entry_of<P>);
  }
  return true;
}

// Makes copy_traits<From, To> usable at run time. Returns true.
template <class From, class To>
bool register_copy() {
  static_assert(CopyBetween<From, To>,
                "fluidk: no copy between these places: specialise fluidk::copy_traits<From, To> with "
                "static void copy(const memory_ref& dst, const memory_ref& src, std::size_t bytes)");
  if constexpr (CopyBetween<From, To>)
    detail::device_registry::instance().add_copy(From::id, To::id, &copy_traits<From, To>::copy);
  return true;
}

// The context of a device, at compile time ...
template <class P>
typename device_traits<P>::context_type& context_of(int device = 0) {
  return detail::context_pool<P>::get(device);
}

// The context a copy between `src` and `dst` runs on, device `device` of kind P; without it
// (no such device, or its contexts destroyed at exit), a device_unavailable that names both
// ends of the copy. For a backend's copy_traits.
template <class P>
typename device_traits<P>::context_type& copy_context_of(int device, const memory_ref& dst,
                                                         const memory_ref& src) {
  try {
    return context_of<P>(device);
  } catch (const device_unavailable& e) {
    throw device_unavailable("copy from " + src.place.to_string() + " to " + dst.place.to_string() + ": " +
                             detail::unprefixed(e));
  }
}

namespace detail {
inline const device_entry& device_entry_for(const place& where) {
  startup_errors::instance().check();
  const device_entry* entry = device_registry::instance().find(where.kind_id());
  if (entry == nullptr)
    throw not_registered("no device is registered for " + where.to_string() +
                         "; include its backend header (fluidk/devices/...) or call register_device<P>()");
  return *entry;
}
}  // namespace detail

// ... and at run time, for a full place.
inline device_context& context_of(const place& where) {
  return detail::device_entry_for(where).context(where.device());
}

// Number of devices of a place's kind present at run time.
inline int device_count(const place& where) { return detail::device_entry_for(where).device_count(); }

// Copies bytes between two places, through the copy registered for the pair.
inline void copy_bytes(const memory_ref& dst, const memory_ref& src, std::size_t bytes) {
  if (bytes == 0) return;
  detail::startup_errors::instance().check();
  const auto copy = detail::device_registry::instance().find_copy(src.place.kind_id(), dst.place.kind_id());
  if (copy == nullptr)
    throw not_registered("no copy from " + src.place.to_string() + " to " + dst.place.to_string() +
                         " is registered (copy_traits<" + std::string(src.place.kind().name) + ", " +
                         std::string(dst.place.kind().name) + ">)");
  copy(dst, src, bytes);
}

}  // namespace fluidk
