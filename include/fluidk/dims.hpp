// The shape of a tensor: up to `max_rank` extents stored inline, so that copying a shape
// never allocates (shapes are copied on every dispatch). A shape always holds non-negative
// extents whose product fits in int64: both are checked whenever an extent is set, so that
// numel() is exact and cannot wrap. (A program description keeps -1 for a dimension known
// only at run time in its own VarDesc::shape; a tensor's shape never does.)
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <string>

#include "fluidk/debug.hpp"
#include "fluidk/error.hpp"

namespace fluidk {

inline constexpr std::size_t max_rank = 8;

// out = a * b; true when the product overflows (out is then unspecified).
template <class T>
constexpr bool checked_mul(T a, T b, T& out) noexcept {
  return __builtin_mul_overflow(a, b, &out);
}
// out = a + b; true when the sum overflows.
template <class T>
constexpr bool checked_add(T a, T b, T& out) noexcept {
  return __builtin_add_overflow(a, b, &out);
}

class dims {
 public:
  constexpr dims() noexcept = default;
  constexpr dims(std::initializer_list<std::int64_t> extents) { assign(extents.begin(), extents.size()); }
  explicit constexpr dims(std::span<const std::int64_t> extents) { assign(extents.data(), extents.size()); }

  constexpr std::size_t size() const noexcept { return rank_; }
  constexpr std::size_t rank() const noexcept { return rank_; }
  constexpr bool empty() const noexcept { return rank_ == 0; }
  constexpr std::int64_t operator[](std::size_t i) const noexcept {
    FLUIDK_DEBUG_CHECK(i < rank_, "extent " + std::to_string(i) + " of shape " + to_string() +
                                      ", which has " + std::to_string(rank_));
    return extents_[i];
  }
  // Sets extent i, with the checks of the constructors (extents are read-only otherwise).
  constexpr dims& set(std::size_t i, std::int64_t extent) {
    if (i >= rank_)
      throw error("dimension " + std::to_string(i) + " of shape " + to_string() + " does not exist");
    dims out = *this;
    out.extents_[i] = extent;
    out.check();
    return *this = out;
  }
  // A copy with extent i set.
  constexpr dims with(std::size_t i, std::int64_t extent) const {
    dims out = *this;
    return out.set(i, extent);
  }
  constexpr const std::int64_t* begin() const noexcept { return extents_.data(); }
  constexpr const std::int64_t* end() const noexcept { return extents_.data() + rank_; }

  // Number of elements; 1 for rank 0 (a scalar), 0 when any extent is 0. Exact: the
  // constructors and set() refuse shapes whose product does not fit.
  constexpr std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (std::size_t i = 0; i < rank_; ++i) n *= extents_[i];
    return n;
  }

  friend constexpr bool operator==(const dims& a, const dims& b) noexcept {
    return a.rank_ == b.rank_ && std::equal(a.begin(), a.end(), b.begin());
  }

  std::string to_string() const {
    std::string out = "[";
    for (std::size_t i = 0; i < rank_; ++i) out += (i ? ", " : "") + std::to_string(extents_[i]);
    return out + "]";
  }
  friend std::ostream& operator<<(std::ostream& os, const dims& d) { return os << d.to_string(); }

 private:
  constexpr void assign(const std::int64_t* first, std::size_t count) {
    if (count > max_rank)
      throw error("a shape has at most " + std::to_string(max_rank) + " dimensions, got " +
                  std::to_string(count));
    for (std::size_t i = 0; i < count; ++i) extents_[i] = first[i];
    rank_ = count;
    check();
  }

  // Every extent non-negative, and their product within int64 (with 0 extents, the product
  // of the others still counts: a reshape or a padding step could make them non-zero).
  constexpr void check() const {
    std::int64_t product = 1;
    for (std::size_t i = 0; i < rank_; ++i) {
      if (extents_[i] < 0)
        throw error("negative extent " + std::to_string(extents_[i]) + " in shape " + to_string() +
                    "; a tensor's extents are known sizes (-1 for unknown is only for program descriptions)");
      if (extents_[i] != 0 && checked_mul(product, extents_[i], product))
        throw error("shape " + to_string() + " has more elements than int64 can count");
    }
  }

  std::array<std::int64_t, max_rank> extents_{};
  std::size_t rank_ = 0;
};

}  // namespace fluidk
