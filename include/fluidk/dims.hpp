// The shape of a tensor: up to `max_rank` extents stored inline, so that copying a shape
// never allocates (shapes are copied on every dispatch).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <string>

#include "fluidk/error.hpp"

namespace fluidk {

inline constexpr std::size_t max_rank = 8;

class dims {
 public:
  constexpr dims() noexcept = default;
  constexpr dims(std::initializer_list<std::int64_t> extents) { assign(extents.begin(), extents.size()); }
  explicit constexpr dims(std::span<const std::int64_t> extents) { assign(extents.data(), extents.size()); }

  constexpr std::size_t size() const noexcept { return rank_; }
  constexpr std::size_t rank() const noexcept { return rank_; }
  constexpr bool empty() const noexcept { return rank_ == 0; }
  constexpr std::int64_t operator[](std::size_t i) const noexcept { return extents_[i]; }
  constexpr std::int64_t& operator[](std::size_t i) noexcept { return extents_[i]; }
  constexpr const std::int64_t* begin() const noexcept { return extents_.data(); }
  constexpr const std::int64_t* end() const noexcept { return extents_.data() + rank_; }

  // Number of elements; 1 for rank 0 (a scalar), 0 when any extent is 0.
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
    for (std::size_t i = 0; i < count; ++i) {
      if (first[i] < 0) throw error("negative extent " + std::to_string(first[i]) + " in a shape");
      extents_[i] = first[i];
    }
    rank_ = count;
  }

  std::array<std::int64_t, max_rank> extents_{};
  std::size_t rank_ = 0;
};

}  // namespace fluidk
