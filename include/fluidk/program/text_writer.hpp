// The text form of a program (the format is described in fluidk/program.hpp): to_text.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>
#include <vector>

#include "fluidk/detail/runtime_linkage.hpp"
#include "fluidk/program/desc.hpp"

namespace fluidk {

// --- text form ------------------------------------------------------------------------------

namespace detail::text_form {

inline bool is_name_char(char c) noexcept {
  const auto u = static_cast<unsigned char>(c);
  if (u <= 0x20 || u == 0x7f) return false;
  switch (c) {
    case '(':
    case ')':
    case '[':
    case ']':
    case '{':
    case '}':
    case ',':
    case ';':
    case ':':
    case '"':
    case '#':
      return false;
    default:
      return true;
  }
}

inline void write_quoted(std::string& out, std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default: {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f) {
          out += "\\x";
          out += hex[u >> 4];
          out += hex[u & 15];
        } else {
          out += c;
        }
      }
    }
  }
  out += '"';
}

inline void write_name(std::string& out, std::string_view name) {
  if (!name.empty() && name != "->" && std::all_of(name.begin(), name.end(), is_name_char))
    out += name;
  else
    write_quoted(out, name);
}

template <class T>
void write_number(std::string& out, T value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, result.ptr);
}

template <class T>
void write_value(std::string& out, const T& value) {
  if constexpr (std::is_same_v<T, bool>)
    out += value ? "true" : "false";
  else if constexpr (std::is_same_v<T, std::string>)
    write_quoted(out, value);
  else if constexpr (std::is_arithmetic_v<T>)
    write_number(out, value);
  else if constexpr (std::is_same_v<T, block_ref>)
    write_number(out, value.index);
  else {  // a list (of bools too: its elements are proxies, read as bools)
    out += '[';
    bool first = true;
    for (const typename T::value_type& element : value) {
      if (!first) out += ", ";
      first = false;
      write_value(out, element);
    }
    out += ']';
  }
}

inline void write_slots(std::string& out, const slot_map& slots) {
  out += '(';
  bool first = true;
  for (const auto& [slot, names] : slots) {
    if (!first) out += "; ";
    first = false;
    write_name(out, slot);
    out += ':';
    for (std::size_t i = 0; i < names.size(); ++i) {
      out += i == 0 ? " " : ", ";
      write_name(out, names[i]);
    }
  }
  out += ')';
}

inline void write_var(std::string& out, const VarDesc& v) {
  out += "  var ";
  write_name(out, v.name);
  out += " : ";
  out += name_of(v.kind);
  out += ' ';
  out += name_of(v.dtype);
  out += " [";
  for (std::size_t i = 0; i < v.shape.size(); ++i) {
    if (i > 0) out += ", ";
    write_number(out, v.shape[i]);
  }
  out += ']';
  if (v.persistable) out += " persistable";
  out += '\n';
}

inline void write_op(std::string& out, const OpDesc& op) {
  out += "  op ";
  write_name(out, op.type());
  out += ' ';
  write_slots(out, op.inputs());
  out += " -> ";
  write_slots(out, op.outputs());
  if (op.attrs().size() > 0) {
    out += " {";
    bool first = true;
    for (const auto& [name, value] : op.attrs()) {
      if (!first) out += "; ";
      first = false;
      write_name(out, name);
      out += ": ";
      out += kind_name(value);
      out += ' ';
      std::visit([&](const auto& v) { write_value(out, v); }, value);
    }
    out += '}';
  }
  out += '\n';
}

}  // namespace detail::text_form

// The program as text (format at the top of this header).
FLUIDK_DETAIL_RUNTIME_LINKAGE std::string to_text(const ProgramDesc& program);
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE std::string to_text(const ProgramDesc& program) {
  std::string out;
  for (const BlockDesc& block : program.blocks()) {
    out += detail::text_cat("block ", std::to_string(block.idx()));
    if (block.parent_idx()) out += detail::text_cat(" parent ", std::to_string(*block.parent_idx()));
    out += '\n';
    // Each variable goes before the first operator that names it, in declaration order.
    std::size_t written = 0;
    auto write_vars_until = [&](std::size_t count) {
      for (; written < count; ++written) detail::text_form::write_var(out, block.vars()[written]);
    };
    for (const OpDesc& op : block.ops()) {
      std::size_t needed = written;
      for (const slot_map* slots : {&op.inputs(), &op.outputs()})
        for (const auto& [slot, names] : *slots)
          for (const std::string& name : names)
            if (const auto i = block.var_index(name)) needed = std::max(needed, *i + 1);
      write_vars_until(needed);
      detail::text_form::write_op(out, op);
    }
    write_vars_until(block.vars().size());
  }
  return out;
}
#endif
}  // namespace fluidk
