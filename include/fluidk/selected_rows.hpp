// SelectedRows: a sparse set of rows of a tall matrix (the gradient of an embedding table
// touches only the rows looked up): the row indices, the full height, and a value tensor
// holding one row per index.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fluidk/tensor.hpp"

namespace fluidk {

class SelectedRows {
 public:
  SelectedRows() = default;
  SelectedRows(std::vector<std::int64_t> rows, std::int64_t height)
      : rows_(std::move(rows)), height_(height) {
    check_rows();
  }
  SelectedRows(std::vector<std::int64_t> rows, std::int64_t height, Tensor value)
      : rows_(std::move(rows)), height_(height), value_(std::move(value)) {
    check_rows();
    check_value();
  }

  const std::vector<std::int64_t>& rows() const noexcept { return rows_; }
  std::int64_t height() const noexcept { return height_; }
  const Tensor& value() const noexcept { return value_; }
  Tensor& value() noexcept { return value_; }

  // Checked against the height only, not against the value: rows and value are replaced one
  // after the other, in either order (or at once, by the constructor, which checks both).
  // What reads the pair (copy_to, the transforms, a kernel through check()) refuses a value
  // without one row per index.
  void set_rows(std::vector<std::int64_t> rows) {
    std::swap(rows_, rows);
    try {
      check_rows();
    } catch (...) {
      std::swap(rows_, rows);  // leave the object as it was
      throw;
    }
  }
  void set_height(std::int64_t height) {
    if (height < 0) throw error("SelectedRows height " + std::to_string(height) + " is negative");
    for (std::int64_t r : rows_)
      if (r >= height)
        throw error("SelectedRows height " + std::to_string(height) + " is below row index " +
                    std::to_string(r));
    height_ = height;
  }
  void set_value(Tensor value) {
    std::swap(value_, value);
    try {
      check_value();
    } catch (...) {
      std::swap(value_, value);
      throw;
    }
  }

  // The pair as a reader needs it: every row index inside the height, and a value (when it
  // holds data) with one row per index; an error saying which does not hold.
  void check() const {
    check_rows();
    check_value();
  }

  // The shape of the dense matrix these rows belong to: [height, value dims 1..].
  fluidk::dims dense_dims() const {
    const fluidk::dims& value = value_.dims();
    return value.rank() == 0 ? fluidk::dims{height_} : value.with(0, height_);
  }

 private:
  void check_rows() const {
    if (height_ < 0) throw error("SelectedRows height " + std::to_string(height_) + " is negative");
    for (std::int64_t r : rows_)
      if (r < 0 || r >= height_)
        throw error("SelectedRows row index " + std::to_string(r) + " is outside [0, " +
                    std::to_string(height_) + ")");
  }
  void check_value() const {
    if (value_.initialized() && (value_.dims().rank() == 0 || value_.dims()[0] != std::int64_t(rows_.size())))
      throw error("SelectedRows value " + value_.describe() + " must have one row per index (" +
                  std::to_string(rows_.size()) + ")");
  }

  std::vector<std::int64_t> rows_;
  std::int64_t height_ = 0;
  Tensor value_;
};

// The copy on another place keeps the rows and the height; only the value moves.
inline SelectedRows copy_to(const SelectedRows& src, const place& where) {
  return SelectedRows(src.rows(), src.height(),
                      src.value().initialized() ? copy_to(src.value(), where) : Tensor());
}

}  // namespace fluidk
