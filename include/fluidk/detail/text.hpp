// Small text helpers shared by the printers and parsers of the vocabulary.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fluidk::detail {

constexpr char ascii_lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }

constexpr bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  return true;
}

// The blanks around a word: those the program text reader skips, and line ends (a word read
// from a file with CRLF line ends keeps its '\r').
constexpr bool is_blank(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

constexpr std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

// Joins the names of a range of named entries with ", " for error messages.
template <class Range, class NameOf>
std::string join_names(const Range& range, NameOf name_of) {
  std::string out;
  for (const auto& item : range) {
    if (!out.empty()) out += ", ";
    out += name_of(item);
  }
  return out;
}

}  // namespace fluidk::detail
