// Compute libraries a kernel can be written with on its place: plain code, oneDNN, cuDNN.
#pragma once

#include <array>
#include <boost/mp11/list.hpp>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fluidk/detail/text.hpp"
#include "fluidk/error.hpp"

namespace fluidk {

enum class library_type : std::uint8_t { plain, onednn, cudnn };

namespace library {
struct plain {
  using library_tag = plain;
  static constexpr library_type value = library_type::plain;
};
struct onednn {
  using library_tag = onednn;
  static constexpr library_type value = library_type::onednn;
};
struct cudnn {
  using library_tag = cudnn;
  static constexpr library_type value = library_type::cudnn;
};
}  // namespace library

using libraries = boost::mp11::mp_list<library::plain, library::onednn, library::cudnn>;

inline constexpr std::size_t library_type_count = boost::mp11::mp_size<libraries>::value;

template <class T>
concept Library = requires {
  typename T::library_tag;
  { T::value } -> std::convertible_to<library_type>;
}
&&std::same_as<typename T::library_tag, T>;

constexpr std::size_t index_of(library_type l) noexcept { return std::size_t(l); }

inline constexpr std::array<library_type, library_type_count> all_library_types{
    library_type::plain, library_type::onednn, library_type::cudnn};

constexpr std::string_view name_of(library_type l) noexcept {
  constexpr std::array<std::string_view, library_type_count> names{"PLAIN", "ONEDNN", "CUDNN"};
  return names[index_of(l)];
}

namespace detail {
struct library_word {
  std::string_view word;
  library_type value;
};
// MKLDNN and DNNL are oneDNN's former names, still common in Fluid programs. CPU and CUDA
// read as PLAIN, as Fluid's StringToLibraryType reads them: the plain library of those places.
inline constexpr library_word library_words[] = {
    {"PLAIN", library_type::plain}, {"ONEDNN", library_type::onednn}, {"MKLDNN", library_type::onednn},
    {"DNNL", library_type::onednn}, {"CUDNN", library_type::cudnn},   {"CPU", library_type::plain},
    {"CUDA", library_type::plain}};
}  // namespace detail

inline library_type parse_library_type(std::string_view text) {
  const std::string_view word = detail::trim(text);
  for (const auto& entry : detail::library_words)
    if (detail::iequals(entry.word, word)) return entry.value;
  throw parse_error("unknown library '" + std::string(word) +
                    "'; accepted: " + detail::join_names(detail::library_words, [](const auto& e) {
                      return std::string(e.word);
                    }));
}

}  // namespace fluidk
