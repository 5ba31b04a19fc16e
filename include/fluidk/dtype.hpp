// Data types: the C++ types a kernel computes in are the compile-time tags; `data_type`
// is the same set as a runtime value, with Fluid's names for printing.
#pragma once

#include <array>
#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "fluidk/bfloat16.hpp"
#include "fluidk/detail/text.hpp"
#include "fluidk/error.hpp"
#include "fluidk/float16.hpp"

namespace fluidk {

// The order here is the order of `data_type` and of kernel-key ordinals.
using dtypes = boost::mp11::mp_list<float, double, float16, bfloat16, std::int8_t, std::uint8_t, std::int16_t,
                                    std::int32_t, std::int64_t, bool>;

enum class data_type : std::uint8_t {
  float32,
  float64,
  float16,
  bfloat16,
  int8,
  uint8,
  int16,
  int32,
  int64,
  boolean
};

inline constexpr std::size_t data_type_count = boost::mp11::mp_size<dtypes>::value;

// Exactly one of the listed types: `const float` or `long long` are not data type tags.
template <class T>
concept DType = boost::mp11::mp_contains<dtypes, T>::value;

namespace detail {
template <class T>
struct data_type_of_impl {
  static_assert(DType<T>,
                "fluidk: not a data type tag; use float, double, fluidk::float16, fluidk::bfloat16, int8_t, "
                "uint8_t, int16_t, int32_t, int64_t or bool");
  static constexpr data_type value =
      DType<T> ? data_type(boost::mp11::mp_find<dtypes, T>::value) : data_type::float32;
};
}  // namespace detail

// The runtime value of a data type tag: data_type_of<float> == data_type::float32.
template <class T>
inline constexpr data_type data_type_of = detail::data_type_of_impl<T>::value;

// The C++ type of a runtime data type known at compile time.
template <data_type D>
using type_of = boost::mp11::mp_at_c<dtypes, std::size_t(D)>;

constexpr std::size_t index_of(data_type d) noexcept { return std::size_t(d); }

inline constexpr std::array<data_type, data_type_count> all_data_types{
    data_type::float32, data_type::float64, data_type::float16, data_type::bfloat16, data_type::int8,
    data_type::uint8,   data_type::int16,   data_type::int32,   data_type::int64,    data_type::boolean};

constexpr std::size_t size_of(data_type d) noexcept {
  constexpr std::array<std::size_t, data_type_count> sizes{4, 8, 2, 2, 1, 1, 2, 4, 8, 1};
  return sizes[index_of(d)];
}

constexpr bool is_floating_point(data_type d) noexcept {
  return d == data_type::float32 || d == data_type::float64 || d == data_type::float16 ||
         d == data_type::bfloat16;
}

// Fluid's names, so that keys print as Fluid printed them.
constexpr std::string_view name_of(data_type d) noexcept {
  constexpr std::array<std::string_view, data_type_count> names{
      "float", "double", "float16", "bfloat16", "int8_t", "uint8_t", "int16_t", "int", "int64_t", "bool"};
  return names[index_of(d)];
}

namespace detail {
struct data_type_word {
  std::string_view word;
  data_type value;
};
inline constexpr data_type_word data_type_words[] = {
    {"float", data_type::float32},     {"float32", data_type::float32}, {"fp32", data_type::float32},
    {"f32", data_type::float32},       {"double", data_type::float64},  {"float64", data_type::float64},
    {"fp64", data_type::float64},      {"f64", data_type::float64},     {"float16", data_type::float16},
    {"fp16", data_type::float16},      {"f16", data_type::float16},     {"half", data_type::float16},
    {"bfloat16", data_type::bfloat16}, {"bf16", data_type::bfloat16},   {"int8", data_type::int8},
    {"int8_t", data_type::int8},       {"s8", data_type::int8},         {"uint8", data_type::uint8},
    {"uint8_t", data_type::uint8},     {"u8", data_type::uint8},        {"int16", data_type::int16},
    {"int16_t", data_type::int16},     {"int", data_type::int32},       {"int32", data_type::int32},
    {"int32_t", data_type::int32},     {"s32", data_type::int32},       {"int64", data_type::int64},
    {"int64_t", data_type::int64},     {"bool", data_type::boolean},    {"boolean", data_type::boolean}};
}  // namespace detail

// Reads a data type name, case-insensitively, accepting Fluid's names and the usual aliases.
inline data_type parse_data_type(std::string_view text) {
  const std::string_view word = detail::trim(text);
  for (const auto& entry : detail::data_type_words)
    if (detail::iequals(entry.word, word)) return entry.value;
  throw parse_error("unknown data type '" + std::string(word) +
                    "'; accepted: " + detail::join_names(detail::data_type_words, [](const auto& e) {
                      return std::string(e.word);
                    }));
}

}  // namespace fluidk
