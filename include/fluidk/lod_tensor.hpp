// LoDTensor: a tensor with sequence offsets ("level of detail") at one or more levels, as
// Fluid kept variable-length sequences in one batch; and LoDTensorArray, a list of them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fluidk/tensor.hpp"

namespace fluidk {

// Each level holds offsets: level {0, 2, 5} splits 5 rows into sequences [0,2) and [2,5).
using lod = std::vector<std::vector<std::size_t>>;

class LoDTensor : public Tensor {
 public:
  LoDTensor() = default;
  explicit LoDTensor(Tensor tensor, fluidk::lod offsets = {}) : Tensor(std::move(tensor)) {
    set_lod(std::move(offsets));
  }
  LoDTensor(const fluidk::dims& shape, data_type dtype, const fluidk::place& where = cpu_place,
            data_layout layout = data_layout::any)
      : Tensor(shape, dtype, where, layout) {}

  const fluidk::lod& lod() const noexcept { return lod_; }

  // Offsets must start at 0 and never decrease; each level's last offset is the number of
  // entries of the level below it (of rows for the last level).
  void set_lod(fluidk::lod offsets) {
    check_lod(offsets);
    lod_ = std::move(offsets);
  }
  // The check of set_lod alone, against this tensor's rows (when it holds data): an error
  // saying what does not fit, and nothing changed.
  void check_lod(const fluidk::lod& offsets) const {
    check_offsets(offsets, initialized() ? std::optional<std::size_t>(rows_of(dims())) : std::nullopt);
  }

  // Whether offsets set before (and so checked) still fit this tensor's rows: only the rows
  // can have changed under them, through the Tensor it is, and only the last level's end
  // counts rows. Constant time, where check_lod walks every offset.
  bool lod_fits_rows() const noexcept {
    return lod_.empty() || !initialized() || lod_.back().back() == rows_of(dims());
  }

  // Tensor::reshape and share_data_with for a tensor with offsets: refused (nothing changed)
  // when the offsets would not fit the new rows, which a sequence kernel would read past.
  LoDTensor& reshape(const fluidk::dims& shape) {
    if (initialized() && !lod_.empty() && rows_of(shape) != rows_of(dims())) fits_rows(shape, "reshape to");
    Tensor::reshape(shape);
    return *this;
  }
  LoDTensor& share_data_with(const Tensor& other) {
    if (!lod_.empty() && other.initialized()) fits_rows(other.dims(), "share the data of");
    Tensor::share_data_with(other);
    return *this;
  }

  // Removes the offsets and returns them (set_lod gives them back; nothing is copied).
  fluidk::lod take_lod() noexcept { return std::exchange(lod_, {}); }

  std::size_t lod_levels() const noexcept { return lod_.size(); }
  // Number of sequences at `level`.
  std::size_t sequence_count(std::size_t level = 0) const {
    if (level >= lod_.size()) throw error("LoD level " + std::to_string(level) + " does not exist");
    return lod_[level].size() - 1;
  }

  Tensor& tensor() noexcept { return *this; }
  const Tensor& tensor() const noexcept { return *this; }

 private:
  static std::size_t rows_of(const fluidk::dims& shape) {
    return shape.rank() > 0 ? std::size_t(shape[0]) : 0;
  }
  // Offsets against a tensor of `rows` rows (none given: no rows to check, the tensor holds no
  // data): each level starts at 0 and never decreases; each level's last offset is the number
  // of entries of the level below it (of rows for the last level).
  static void check_offsets(const fluidk::lod& offsets, std::optional<std::size_t> rows) {
    // Every level's own form first: the ends are checked against the next level's size.
    for (std::size_t level = 0; level < offsets.size(); ++level) {
      const auto& o = offsets[level];
      if (o.empty() || o.front() != 0)
        throw error("LoD level " + std::to_string(level) + " must start with offset 0");
      for (std::size_t i = 1; i < o.size(); ++i)
        if (o[i] < o[i - 1]) throw error("LoD level " + std::to_string(level) + " has decreasing offsets");
    }
    for (std::size_t level = 0; level < offsets.size(); ++level) {
      const bool last = level + 1 == offsets.size();
      if (last && !rows) break;
      const std::size_t below = last ? *rows : offsets[level + 1].size() - 1;
      if (offsets[level].back() != below)
        throw error("LoD level " + std::to_string(level) + " ends at " +
                    std::to_string(offsets[level].back()) + ", but " +
                    (last ? "the tensor has " : "the next level has ") + std::to_string(below) + " entries");
    }
  }
  void fits_rows(const fluidk::dims& shape, const char* what) const {
    try {
      check_offsets(lod_, rows_of(shape));
    } catch (const error& e) {
      throw error("cannot " + std::string(what) + " " + shape.to_string() +
                  " keeping the sequence offsets of " + describe() + ": " + detail::unprefixed(e));
    }
  }

  fluidk::lod lod_;
};

using LoDTensorArray = std::vector<LoDTensor>;

// The copy of a LoDTensor on another place keeps its sequence offsets.
inline LoDTensor copy_to(const LoDTensor& src, const place& where) {
  return LoDTensor(copy_to(src.tensor(), where), src.lod());
}

}  // namespace fluidk
