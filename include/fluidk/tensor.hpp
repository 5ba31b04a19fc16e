// Tensor: a shape, a data type, a layout and a place, over a buffer from the place's
// allocator. Tensors that share data share the buffer (Fluid's ShareDataWith); a slice is
// a byte offset into it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "fluidk/debug.hpp"
#include "fluidk/detail/gone_notice.hpp"
#include "fluidk/device.hpp"
#include "fluidk/devices/cpu.hpp"
#include "fluidk/dims.hpp"
#include "fluidk/dtype.hpp"
#include "fluidk/layout.hpp"
#include "fluidk/place.hpp"

namespace fluidk {

// Bytes of a tensor of this shape, data type and layout on `where` (a blocked layout's
// padding included): every count checked, an error naming all four when it does not fit.
inline std::size_t storage_bytes_of(const dims& shape, data_type dtype, data_layout layout,
                                    const place& where) {
  auto too_big = [&](const std::string& why) -> error {
    return error("a tensor of shape " + shape.to_string() + ", " + std::string(name_of(dtype)) + ", " +
                 std::string(name_of(layout)) + " on " + where.to_string() + ": " + why);
  };
  std::int64_t elements = 0;
  try {
    elements = storage_numel(shape, layout);
  } catch (const error& e) {
    throw too_big(detail::unprefixed(e));
  }
  std::int64_t bytes = 0;
  if (checked_mul(elements, std::int64_t(size_of(dtype)), bytes))
    throw too_big(std::to_string(elements) + " elements of " + std::to_string(size_of(dtype)) +
                  " bytes need more bytes than the address space holds");
  return std::size_t(bytes);
}

namespace detail {
// A buffer owned by its place's allocator and released through it. It carries what every
// tensor viewing it shares: an identity unique in the process (unlike its address, never
// reused) and a version that every write through any of them moves on.
class buffer {
 public:
  buffer(const place& where, std::size_t bytes)
      : entry_((cpu_device_ready(), &device_entry_for(where))),
        where_(where),
        bytes_(bytes),
        handle_(entry_->allocate(where.device(), bytes)) {}
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  // The caches that copied its bytes are told first (detail/gone_notice.hpp).
  ~buffer() {
    gone_.tell(id_);
    entry_->deallocate(where_.device(), handle_, bytes_);
  }

  void* handle() const noexcept { return handle_; }
  std::size_t bytes() const noexcept { return bytes_; }
  const place& where() const noexcept { return where_; }
  std::uint64_t id() const noexcept { return id_; }
  const gone_notice<buffer>& notice() const noexcept { return gone_; }
  std::uint64_t version() const noexcept { return version_.load(std::memory_order_relaxed); }
  // A load and a store, not a locked add: a kernel may take data<T>() once per element, and
  // `lock xadd` costs some 20 cycles where this costs one. Two threads writing disjoint parts
  // of one buffer at once may merge their steps, but the version still moves past every
  // value read before either write; reading the version while the bytes are being written
  // is a data race on the bytes in any case. (Memory order: the version orders nothing; the
  // writer and the reader of the bytes synchronise by other means, a join or a lock.)
  void touch() const noexcept {
    version_.store(version_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

 private:
  static std::uint64_t next_id() noexcept {
    static std::atomic<std::uint64_t> counter{0};
    return counter.fetch_add(1, std::memory_order_relaxed) + 1;
  }

  const device_entry* entry_;
  place where_;
  std::size_t bytes_;
  void* handle_;
  std::uint64_t id_ = next_id();
  mutable std::atomic<std::uint64_t> version_{0};
  gone_notice<buffer> gone_;
};
}  // namespace detail

class Tensor {
 public:
  // An empty tensor: no buffer, no shape; `initialized()` is false.
  Tensor() = default;

  // Allocates storage for `shape` on `where` through the place's allocator.
  Tensor(const dims& shape, data_type dtype, const place& where = cpu_place,
         data_layout layout = data_layout::any)
      : place_(where), dtype_(dtype), layout_(layout), dims_(shape) {
    buffer_ = std::make_shared<detail::buffer>(where, storage_bytes_of(shape, dtype, layout, where));
  }

  const fluidk::dims& dims() const noexcept { return dims_; }
  data_type dtype() const noexcept { return dtype_; }
  data_layout layout() const noexcept { return layout_; }
  const fluidk::place& place() const noexcept { return place_; }
  bool initialized() const noexcept { return buffer_ != nullptr; }
  std::int64_t numel() const noexcept { return dims_.numel(); }
  // Bytes of storage this tensor covers (blocked layouts include their padding).
  std::size_t storage_bytes() const { return storage_bytes_of(dims_, dtype_, layout_, place_); }

  // The place's handle of the buffer (pointer or cl_mem) and this tensor's offset in it, to
  // read. A kernel that writes through a handle takes mutable_handle() or mutable_memory().
  void* handle() const noexcept { return buffer_ ? buffer_->handle() : nullptr; }
  std::size_t offset() const noexcept { return offset_; }
  memory_ref memory() const noexcept { return {place_, handle(), offset_}; }
  void* mutable_handle() noexcept {
    mark_modified();
    return handle();
  }
  memory_ref mutable_memory() noexcept {
    mark_modified();
    return memory();
  }

  bool shares_buffer_with(const Tensor& other) const noexcept {
    return buffer_ != nullptr && buffer_ == other.buffer_;
  }

  // The storage's identity, unique in the process (0 without data), and its version. Every tensor
  // sharing the storage (copies, aliases, slices) sees the same two; every mutable route to the
  // bytes moves the version on: data<T>() and the mutable handles of a non-const tensor,
  // typed_tensor::data(), a kernel's outputs and copy_into. Read-only access never does, nor do
  // reshape and set_layout, which change only this tensor's metadata. Writes through a pointer kept
  // from an earlier access are not seen: say so with mark_modified() (docs/programs.md, "What the
  // transfer cache sees").
  std::uint64_t storage_id() const noexcept { return buffer_ ? buffer_->id() : 0; }
  // For a cache keyed by storage_id() that keeps a copy of the bytes: `list`, a
  // detail::gone_list<detail::buffer>, hears of the storage's destruction
  // (detail/gone_notice.hpp). Nothing for a tensor without storage.
  // (A template: compiled only by the caches that call it.)
  template <class List>
  void watch_storage(List& list) const {
    if (buffer_) list.watch(buffer_->notice(), buffer_->id());
  }
  std::uint64_t version() const noexcept { return buffer_ ? buffer_->version() : 0; }
  // The bytes changed by a route the version cannot see (a kept pointer, a device kernel
  // queued earlier): caches of them are stale from now on. The storage is shared, so this is
  // a const member, as the write it reports need not go through this tensor.
  void mark_modified() const noexcept {
    if (buffer_) buffer_->touch();
  }

  // Typed host access: checks the data type, that the data is on a host-readable place and
  // that there is data at all. Through a non-const tensor it counts as a write.
  template <class T>
  T* data() {
    check_access(data_type_of<T>);
    buffer_->touch();
    return reinterpret_cast<T*>(static_cast<std::byte*>(buffer_->handle()) + offset_);
  }
  template <class T>
  const T* data() const {
    check_access(data_type_of<T>);
    return reinterpret_cast<const T*>(static_cast<const std::byte*>(buffer_->handle()) + offset_);
  }

  // Makes this tensor view `other`'s buffer with `other`'s metadata (Fluid's ShareDataWith).
  Tensor& share_data_with(const Tensor& other) {
    *this = other;
    return *this;
  }

  // Rows [begin, end) of dimension 0, sharing the buffer. Dimension 0 is outermost in every
  // layout, blocked ones included, so a slice is one contiguous range. A layout that blocks
  // dimension 0 itself (by b rows) keeps b rows together: a slice of it (but an empty one)
  // begins at a multiple of b and ends at one or at the last row, so that it is whole blocks
  // (the last one padded as before).
  Tensor slice(std::int64_t begin, std::int64_t end) const {
    if (!initialized()) throw error("slice of a tensor that holds no data");
    if (dims_.rank() == 0 || begin < 0 || end < begin || end > dims_[0])
      throw error("slice [" + std::to_string(begin) + ", " + std::to_string(end) +
                  ") is out of range for shape " + dims_.to_string());
    const std::int64_t block = layout_.block_axis() == 0 ? layout_.block_size() : 1;
    if (begin != end && (begin % block != 0 || (end % block != 0 && end != dims_[0])))
      throw error("slice [" + std::to_string(begin) + ", " + std::to_string(end) + ") of " + describe() +
                  ": the layout keeps dimension 0 in blocks of " + std::to_string(block) +
                  ", so a slice begins at a multiple of " + std::to_string(block) +
                  " and ends at one or at the last row");
    Tensor out = *this;
    const std::int64_t groups = (dims_[0] + block - 1) / block;
    const std::size_t group_bytes = groups == 0 ? 0 : storage_bytes() / std::size_t(groups);
    out.dims_.set(0, end - begin);
    out.offset_ = offset_ + std::size_t(begin / block) * group_bytes;
    return out;
  }

  // Reinterprets the layout (this tensor's metadata only: the bytes and their version stay,
  // and other tensors sharing them keep their own layout); the storage size must not change.
  Tensor& set_layout(data_layout layout) {
    if (initialized() && storage_bytes_of(dims_, dtype_, layout, place_) != storage_bytes())
      throw error("layout " + std::string(name_of(layout)) + " needs a different storage size than " +
                  std::string(name_of(layout_)) + " for shape " + dims_.to_string());
    layout_ = layout;
    return *this;
  }

  // Changes the shape in place when the storage size stays the same (Fluid's Resize of a
  // tensor that already holds data): metadata of this tensor only, as for set_layout. (A
  // variable's tensor is reached through Variable::get_mutable, which moves the variable's
  // version; a resize to another size is a new tensor, with new storage.)
  Tensor& reshape(const fluidk::dims& shape) {
    if (initialized() && shape.numel() != dims_.numel())
      throw error("cannot reshape " + dims_.to_string() + " to " + shape.to_string() +
                  ": the number of elements differs");
    if (initialized() && storage_bytes_of(shape, dtype_, layout_, place_) != storage_bytes())
      throw error("cannot reshape " + dims_.to_string() + " to " + shape.to_string() + " in layout " +
                  std::string(name_of(layout_)) + ": its padded storage size differs");
    dims_ = shape;
    return *this;
  }

  std::string describe() const {
    return "Tensor(" + dims_.to_string() + ", " + std::string(name_of(dtype_)) + ", " +
           std::string(name_of(layout_)) + ", " + place_.to_string() + ")";
  }

 private:
  // The check is inline, the messages out of line: typed access is on every kernel's path.
  void check_access(data_type requested) const {
    if (!initialized() || requested != dtype_ || !place_.host_accessible()) [[unlikely]]
      access_error(requested);
    FLUIDK_DEBUG_CHECK(offset_ <= buffer_->bytes() && storage_bytes() <= buffer_->bytes() - offset_,
                       describe() + " addresses " + std::to_string(storage_bytes()) + " bytes at offset " +
                           std::to_string(offset_) + " of a storage of " + std::to_string(buffer_->bytes()));
  }
  [[noreturn, gnu::cold, gnu::noinline]] void access_error(data_type requested) const {
    if (!initialized()) throw error("typed access to a tensor that holds no data");
    if (requested != dtype_)
      throw error("typed access as " + std::string(name_of(requested)) + " to " + describe() +
                  ", which holds " + std::string(name_of(dtype_)));
    throw error("host access to " + describe() + ", whose memory the host cannot read; copy it to " +
                cpu_place.to_string() + " first");
  }

  // What a kernel key and a data pointer need first, the shape (72 bytes) after them.
  std::shared_ptr<detail::buffer> buffer_;
  std::size_t offset_ = 0;
  fluidk::place place_;
  data_type dtype_ = data_type::float32;
  data_layout layout_ = data_layout::any;
  fluidk::dims dims_;
};

// A copy of `src` on `where` (same shape, data type and layout); never writes to `src`.
inline Tensor copy_to(const Tensor& src, const place& where) {
  if (!src.initialized()) throw error("copy of a tensor that holds no data");
  Tensor dst(src.dims(), src.dtype(), where, src.layout());
  copy_bytes(dst.memory(), src.memory(), src.storage_bytes());
  return dst;
}

// Copies the contents of `src` into the existing storage of `dst` (same size required).
inline void copy_into(Tensor& dst, const Tensor& src) {
  if (!src.initialized() || !dst.initialized()) throw error("copy between tensors that hold no data");
  if (dst.storage_bytes() != src.storage_bytes())
    throw error("copy of " + src.describe() + " into " + dst.describe() + ": the sizes differ");
  copy_bytes(dst.mutable_memory(), src.memory(), src.storage_bytes());
}

}  // namespace fluidk
