// Stamps of content: what a cache entry was made from, compared without allocating to tell
// whether the source is still what it was. The executor's transfer cache stamps variables
// (content_stamp); the device libraries' caches of prepared weights (oneDNN's reordered
// filters) stamp tensors (tensor_stamp). One rule for both: the storage's identity and
// version, which every tracked write moves on, and the metadata a copy shows besides bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fluidk/tensor.hpp"
#include "fluidk/variable.hpp"

namespace fluidk {

// A tensor's storage identity and version, and its offset, data type, layout and shape. Equal
// stamps mean the same bytes read the same way: any write through an alias, a view or a kernel
// output moves the storage's version (Tensor::version()), and a storage's identity is never
// reused, so a stamp of a freed tensor matches no later one.
class tensor_stamp {
 public:
  tensor_stamp() = default;
  explicit tensor_stamp(const Tensor& t) {
    for_each_word(t, [&](std::uint64_t w) { words_.push_back(w); });
  }
  bool matches(const Tensor& t) const noexcept {
    std::size_t i = 0;
    bool same = true;
    for_each_word(t, [&](std::uint64_t w) {
      same = same && i < words_.size() && words_[i] == w;
      ++i;
    });
    return same && i == words_.size();
  }

  // The stamp as words, passed to f one by one (the rank before the dims).
  template <class F>
  static void for_each_word(const Tensor& t, F&& f) {
    f(t.storage_id());
    f(t.version());
    f(t.offset());
    f(std::uint64_t(t.dtype()) << 32 | std::uint64_t(t.layout().id()));
    f(t.dims().rank());
    for (std::size_t d = 0; d < t.dims().rank(); ++d) f(std::uint64_t(t.dims()[d]));
  }

 private:
  std::vector<std::uint64_t> words_;
};

// What a cached copy was made from, and what it is: a variable's version; the identity and
// version of every storage its content views; and what a copy shows besides the bytes: each
// tensor's shape, data type, layout and offset in its storage, a LoDTensor's offsets (each
// array element's), a SelectedRows' height and rows. Equal stamps mean the same bytes with
// the same metadata: any write through an alias, a view or a kernel output moves a storage's
// version, and a change of shape, LoD or rows shows even when made through a reference kept
// from get_mutable (which moves the variable's version only when it is called).
class content_stamp {
 public:
  content_stamp() = default;
  explicit content_stamp(const Variable& v) : version_(v.version()) {
    for_each_word(v, [&](std::uint64_t w) { words_.push_back(w); });
  }
  // Compares without allocating: on the cached rerun's path.
  bool matches(const Variable& v) const noexcept {
    if (v.version() != version_) return false;
    std::size_t i = 0;
    bool same = true;
    for_each_word(v, [&](std::uint64_t w) {
      same = same && i < words_.size() && words_[i] == w;
      ++i;
    });
    return same && i == words_.size();
  }

 private:
  // The stamp as words, passed to f one by one (lengths before lists, so that two contents
  // never give the same words).
  template <class F>
  static void for_each_word(const Variable& v, F&& f) {
    auto tensor = [&](const Tensor& t) { tensor_stamp::for_each_word(t, f); };
    auto list = [&](const auto& values) {
      f(values.size());
      for (const auto x : values) f(std::uint64_t(x));
    };
    auto lod_tensor = [&](const LoDTensor& t) {
      tensor(t);
      f(t.lod().size());
      for (const auto& level : t.lod()) list(level);
    };
    if (v.is<LoDTensor>()) {
      lod_tensor(v.get<LoDTensor>());
    } else if (v.is<SelectedRows>()) {
      const SelectedRows& rows = v.get<SelectedRows>();
      tensor(rows.value());
      f(std::uint64_t(rows.height()));
      list(rows.rows());
    } else if (v.is<LoDTensorArray>()) {
      f(v.get<LoDTensorArray>().size());
      for (const LoDTensor& element : v.get<LoDTensorArray>()) lod_tensor(element);
    }
  }

  std::uint64_t version_ = 0;
  std::vector<std::uint64_t> words_;
};

}  // namespace fluidk
