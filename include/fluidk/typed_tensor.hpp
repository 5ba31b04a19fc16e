// typed_tensor<Place, T, Layout>: a Tensor whose place kind, data type and layout are part
// of its type, for the compile-time dispatch path. Converting from a Tensor is checked;
// converting back is free.
#pragma once

#include <string>
#include <utility>

#include "fluidk/kernel_type.hpp"
#include "fluidk/tensor.hpp"

namespace fluidk {

template <class P, class T, class L = layout::any>
class typed_tensor {
  static_assert(kernel_type<P, T, L>::valid);  // one readable line per bad argument, from kernel_type

 public:
  using place_t = P;
  using dtype_t = T;
  using layout_t = L;

  // Allocates on device `device` of kind P.
  explicit typed_tensor(const fluidk::dims& shape, int device = 0)
      : tensor_(shape, data_type_of<T>, place::of<P>(device), data_layout_of<L>) {}

  // Checked: the tensor must be of kind P, hold T and be in layout L.
  explicit typed_tensor(Tensor tensor) : tensor_(std::move(tensor)) { check(tensor_); }

  // For tensors the library itself made with this type (the result of a static transform
  // chain): no check to repeat.
  static typed_tensor unchecked(Tensor tensor) noexcept {
    return typed_tensor(std::move(tensor), unchecked_tag{});
  }

  const Tensor& tensor() const& noexcept { return tensor_; }
  Tensor&& tensor() && noexcept { return std::move(tensor_); }
  operator const Tensor&() const noexcept { return tensor_; }

  const fluidk::dims& dims() const noexcept { return tensor_.dims(); }
  fluidk::place place() const noexcept { return tensor_.place(); }
  std::int64_t numel() const noexcept { return tensor_.numel(); }
  void* handle() const noexcept { return tensor_.handle(); }
  void* mutable_handle() noexcept { return tensor_.mutable_handle(); }
  std::uint64_t version() const noexcept { return tensor_.version(); }
  void mark_modified() const noexcept { tensor_.mark_modified(); }

  // Host access without run-time checks: the type already proves them. Through a non-const
  // view it counts as a write (the storage's version moves on, see Tensor::version()).
  T* data() noexcept requires(P::host_accessible) {
    return reinterpret_cast<T*>(static_cast<std::byte*>(tensor_.mutable_handle()) + tensor_.offset());
  }
  const T* data() const noexcept requires(P::host_accessible) {
    return reinterpret_cast<const T*>(static_cast<const std::byte*>(tensor_.handle()) + tensor_.offset());
  }

  static constexpr kernel_key key(int device = 0) noexcept { return kernel_type<P, T, L>::key(device); }

  static void check(const Tensor& t) {
    const char* what = !t.initialized()                  ? "it holds no data"
                       : t.place().kind_id() != P::id    ? "the place kind differs"
                       : t.dtype() != data_type_of<T>    ? "the data type differs"
                       : t.layout() != data_layout_of<L> ? "the layout differs"
                                                         : nullptr;
    if (what != nullptr) fail(t, what);
  }

 private:
  struct unchecked_tag {};
  typed_tensor(Tensor tensor, unchecked_tag) noexcept : tensor_(std::move(tensor)) {}

  // Out of line and cold: the error text is built only when it is thrown.
  [[noreturn, gnu::cold, gnu::noinline]] static void fail(const Tensor& t, const char* what) {
    throw error(t.describe() + " is not a typed_tensor<" + std::string(P::name) + ", " +
                std::string(name_of(data_type_of<T>)) + ", " + std::string(name_of(data_layout_of<L>)) +
                ">: " + what);
  }

  Tensor tensor_;
};

template <class T>
inline constexpr bool is_typed_tensor = false;
template <class P, class T, class L>
inline constexpr bool is_typed_tensor<typed_tensor<P, T, L>> = true;

// Checked conversion from a runtime Tensor.
template <class P, class T, class L = layout::any>
typed_tensor<P, T, L> tensor_cast(const Tensor& t) {
  return typed_tensor<P, T, L>(t);
}

}  // namespace fluidk
