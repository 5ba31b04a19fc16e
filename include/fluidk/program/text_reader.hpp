// Reading the text form of a program (the format is described in fluidk/program.hpp):
// parse_program, which replays the text through BlockDesc::var and append_op.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <deque>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include "fluidk/detail/runtime_linkage.hpp"
#include "fluidk/program/desc.hpp"
#include "fluidk/program/text_writer.hpp"

namespace fluidk {

namespace detail::text_form {

// Reads one line of the text form, token by token.
class program_line {
 public:
  program_line(std::string_view text, std::size_t number) : text_(text), number_(number) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw parse_error(text_cat("program text, line ", std::to_string(number_), ": ", what));
  }
  [[noreturn]] void expected(const std::string& what) { fail("expected " + what + ", found " + found()); }

  void skip_blanks() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\r')) ++pos_;
  }
  bool at_end() {
    skip_blanks();
    return pos_ == text_.size();
  }
  bool peek(char c) {
    skip_blanks();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  bool accept(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  void expect(char c, const std::string& where) {
    if (!accept(c)) expected(text_cat("'", std::string_view(&c, 1), "' ", where));
  }
  void expect_end() {
    if (!at_end()) expected("the end of the line");
  }

  // A bare word (names, keywords, numbers); empty when the next thing is not one.
  std::string_view word() {
    skip_blanks();
    const std::size_t start = pos_;
    while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }
  std::string_view expect_word(const std::string& what) {
    const std::string_view w = word();
    if (w.empty()) expected(what);
    return w;
  }
  void expect_keyword(std::string_view keyword, const std::string& where) {
    const std::size_t start = pos_;
    if (word() != keyword) {
      pos_ = start;
      expected(text_cat("'", keyword, "' ", where));
    }
  }

  // A name: a bare word other than "->", or a quoted string that is not empty.
  std::string name(const std::string& what) {
    if (peek('"')) {
      std::string quoted_name = quoted();
      if (quoted_name.empty()) fail("expected " + what + ", found an empty name \"\"");
      return quoted_name;
    }
    const std::size_t start = pos_;
    const std::string_view w = word();
    if (w.empty() || w == "->") {
      pos_ = start;
      expected(what);
    }
    return std::string(w);
  }

  std::string quoted() {
    skip_blanks();
    if (!accept('"')) expected("a quoted string");
    std::string out;
    for (;;) {
      if (pos_ == text_.size()) fail("a quoted string does not end before the end of the line");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ == text_.size()) fail("a quoted string does not end before the end of the line");
      switch (const char e = text_[pos_++]) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'x': {
          unsigned value = 0;
          for (int i = 0; i < 2; ++i) {
            const char h = pos_ < text_.size() ? text_[pos_] : '\0';
            const int digit = h >= '0' && h <= '9'   ? h - '0'
                              : h >= 'a' && h <= 'f' ? h - 'a' + 10
                              : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                     : -1;
            if (digit < 0) fail("expected two hexadecimal digits after \\x in a quoted string");
            value = value * 16 + unsigned(digit);
            ++pos_;
          }
          out += char(value);
          break;
        }
        default:
          fail(text_cat("unknown escape \\", std::string_view(&e, 1),
                        " in a quoted string; accepted: \\\" \\\\ \\n \\t \\r \\xHH"));
      }
    }
  }

  template <class T>
  T number(const std::string& what) {
    const std::size_t start = pos_;
    const std::string_view w = word();
    T value{};
    const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), value);
    if (w.empty() || ec != std::errc() || end != w.data() + w.size()) {
      pos_ = start;
      if (ec == std::errc::result_out_of_range && !w.empty())
        fail(what + " '" + std::string(w) + "' is out of range");
      expected(what);
    }
    return value;
  }

  template <class T>
  T value(const std::string& what) {
    if constexpr (std::is_same_v<T, bool>) {
      const std::size_t start = pos_;
      const std::string_view w = word();
      if (w == "true") return true;
      if (w == "false") return false;
      pos_ = start;
      expected("true or false for " + what);
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!peek('"')) expected("a quoted string for " + what);
      return quoted();
    } else if constexpr (std::is_same_v<T, block_ref>) {
      return block_ref{number<std::size_t>("a block index for " + what)};
    } else if constexpr (std::is_integral_v<T>) {
      return number<T>("an integer for " + what);
    } else if constexpr (std::is_floating_point_v<T>) {
      return number<T>("a number for " + what);
    } else {
      using element = typename T::value_type;
      T list;
      expect('[', "to open the list " + what);
      if (accept(']')) return list;
      do list.push_back(value<element>(what));
      while (accept(','));
      expect(']', "to close the list " + what);
      return list;
    }
  }

 private:
  std::string found() {
    if (at_end()) return "the end of the line";
    if (text_[pos_] == '"') return "a quoted string";
    std::string_view rest = text_.substr(pos_);
    std::size_t n = 0;
    while (n < rest.size() && is_name_char(rest[n])) ++n;
    if (n == 0) {
      // A character no token starts with: a control character is shown as it would be
      // written in a quoted string, so that the message shows it.
      std::string shown;
      write_quoted(shown, rest.substr(0, 1));
      return text_cat("'", std::string_view(shown).substr(1, shown.size() - 2), "'");
    }
    return text_cat("'", rest.substr(0, n), "'");
  }

  std::string_view text_;
  std::size_t number_;
  std::size_t pos_ = 0;
};

inline var_kind parse_var_kind(program_line& line) {
  const std::string_view w =
      line.expect_word("a variable kind (LoDTensor, SelectedRows, LoDTensorArray, StepScopes)");
  struct entry {
    std::string_view word;
    var_kind kind;
  };
  static constexpr entry words[] = {{"LoDTensor", var_kind::lod_tensor},
                                    {"lod_tensor", var_kind::lod_tensor},
                                    {"SelectedRows", var_kind::selected_rows},
                                    {"selected_rows", var_kind::selected_rows},
                                    {"LoDTensorArray", var_kind::lod_tensor_array},
                                    {"lod_tensor_array", var_kind::lod_tensor_array},
                                    {"StepScopes", var_kind::step_scopes},
                                    {"step_scopes", var_kind::step_scopes},
                                    {"nothing", var_kind::empty},
                                    {"empty", var_kind::empty}};
  for (const entry& e : words)
    if (iequals(e.word, w)) return e.kind;
  line.fail(text_cat("unknown variable kind '", w,
                     "'; accepted: LoDTensor, SelectedRows, LoDTensorArray, StepScopes, nothing"));
}

inline VarDesc parse_var(program_line& line) {
  VarDesc v;
  v.name = line.name("a variable name after 'var'");
  line.expect(':', "after the variable name '" + v.name + "'");
  v.kind = parse_var_kind(line);
  const std::string_view dtype = line.expect_word("a data type after the variable kind");
  try {
    v.dtype = parse_data_type(dtype);
  } catch (const parse_error& e) {
    line.fail(std::string(e.what()).substr(std::string_view("fluidk: ").size()));
  }
  line.expect('[', "to open the shape of '" + v.name + "'");
  if (!line.accept(']')) {
    do {
      const auto extent =
          line.number<std::int64_t>("a dimension (an integer) in the shape of '" + v.name + "'");
      // -1: a dimension known only when the program runs (Fluid's VarDesc); nothing below.
      if (extent < -1)
        line.fail("dimension " + std::to_string(extent) + " in the shape of '" + v.name +
                  "': extents are non-negative, or -1 for one known only at run time");
      v.shape.push_back(extent);
    } while (line.accept(','));
    line.expect(']', "to close the shape of '" + v.name + "'");
  }
  if (!line.at_end()) {
    if (line.word() != "persistable")
      line.fail("expected 'persistable' or the end of the line after the shape of '" + v.name + "'");
    v.persistable = true;
  }
  line.expect_end();
  return v;
}

inline slot_map parse_slots(program_line& line, const std::string& what) {
  slot_map slots;
  line.expect('(', "to open the " + what + " slots");
  if (line.accept(')')) return slots;
  do {
    std::string slot = line.name(text_cat(what == "input" ? "an " : "a ", what, " slot name"));
    line.expect(':', "after the " + what + " slot '" + slot + "'");
    std::vector<std::string> names;
    if (!line.peek(';') && !line.peek(')')) {
      do names.push_back(line.name("a variable name in the " + what + " slot '" + slot + "'"));
      while (line.accept(','));
    }
    if (slots.find(slot) != slots.end()) line.fail(what + " slot '" + slot + "' appears twice");
    slots.emplace(std::move(slot), std::move(names));
  } while (line.accept(';'));
  line.expect(')', "to close the " + what + " slots");
  return slots;
}

template <std::size_t I = 0>
attribute parse_attribute_value(program_line& line, std::size_t kind, const std::string& what) {
  if constexpr (I < std::variant_size_v<attribute>) {
    if (kind == I)
      return attribute(std::in_place_index<I>, line.value<std::variant_alternative_t<I, attribute>>(what));
    return parse_attribute_value<I + 1>(line, kind, what);
  } else {
    return attribute();
  }
}

inline OpDesc parse_op(program_line& line) {
  std::string type = line.name("an operator type after 'op'");
  slot_map inputs = parse_slots(line, "input");
  line.expect_keyword("->", "between the input and the output slots");
  slot_map outputs = parse_slots(line, "output");
  attribute_map attrs;
  if (line.accept('{') && !line.accept('}')) {
    do {
      const std::string name = line.name("an attribute name");
      line.expect(':', "after the attribute name '" + name + "'");
      const std::string_view kind = line.expect_word("an attribute kind after '" + name + ":'");
      const auto* k = std::find(std::begin(attribute_kind_names), std::end(attribute_kind_names), kind);
      if (k == std::end(attribute_kind_names))
        line.fail(text_cat("unknown attribute kind '", kind, "'; accepted: ", attribute_kinds_list()));
      if (attrs.contains(name)) line.fail("attribute '" + name + "' appears twice");
      attrs.set(name, parse_attribute_value(line, std::size_t(k - std::begin(attribute_kind_names)),
                                            "attribute '" + name + "'"));
    } while (line.accept(';'));
    line.expect('}', "to close the attributes");
  }
  line.expect_end();
  return OpDesc(std::move(type), std::move(inputs), std::move(outputs), std::move(attrs));
}

// Rethrows the current fluidk exception with the line in front: an unknown operator stays
// not_registered, every other error becomes a parse_error.
[[noreturn]] inline void rethrow_at_line(std::size_t number) {
  const std::string prefix = text_cat("program text, line ", std::to_string(number), ": ");
  auto message = [&](const error& e) {
    const std::string_view what = e.what();
    const std::string_view tag = "fluidk: ";
    return prefix + std::string(what.substr(what.rfind(tag, 0) == 0 ? tag.size() : 0));
  };
  try {
    throw;
  } catch (const not_registered& e) {
    throw not_registered(message(e));
  } catch (const error& e) {
    // Any other refusal of the text (an unknown slot, a variable used before it is declared,
    // an attribute of the wrong kind) is a parse error of that line.
    throw parse_error(message(e));
  }
}

}  // namespace detail::text_form

// Reads a program from its text form (format at the top of this header), validating every
// operator through append_op. Errors name the line.
FLUIDK_DETAIL_RUNTIME_LINKAGE ProgramDesc parse_program(std::string_view text);
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE ProgramDesc parse_program(std::string_view text) {
  ProgramDesc program;
  BlockDesc* block = nullptr;
  // The final description of each variable a var line declares, by the variable (blocks and
  // `declared` keep their elements in deques: the addresses hold).
  std::deque<VarDesc> declared;
  std::map<VarDesc*, const VarDesc*> finals;
  // Two passes: the block lines first, so that an operator's block attribute (a loop's body)
  // may name a block that the text writes after the operator's own; then the variables and
  // operators, each block line making its block the current one again.
  for (int pass = 0; pass < 2; ++pass) {
    std::size_t number = 0;
    std::size_t blocks_seen = 0;
    block = nullptr;  // each pass: a var or op line before the first block line is an error
    for (std::size_t start = 0; start <= text.size();) {
      const std::size_t end = std::min(text.find('\n', start), text.size());
      const std::string_view raw = text.substr(start, end - start);
      start = end + 1;
      ++number;
      detail::text_form::program_line line(raw, number);
      if (line.at_end() || line.peek('#')) continue;
      const std::string_view keyword = line.word();
      if (keyword == "block" && pass == 1) {
        block = &program.block(blocks_seen++);
      } else if (keyword == "block") {
        const std::size_t next = block == nullptr ? 0 : program.num_blocks();
        const auto idx = line.number<std::size_t>("a block index after 'block'");
        if (idx != next)
          line.fail(detail::text_cat("expected block ", std::to_string(next), ", found block ",
                                     std::to_string(idx)));
        std::optional<std::size_t> parent;
        if (!line.at_end()) {
          line.expect_keyword("parent", "or the end of the line after the block index");
          parent = line.number<std::size_t>("a parent block index after 'parent'");
          if (idx == 0) line.fail("block 0 is the global block and has no parent");
          if (*parent >= idx)
            line.fail(detail::text_cat("block ", std::to_string(idx), " names parent ",
                                       std::to_string(*parent), "; a parent comes before its child"));
        }
        line.expect_end();
        block = idx == 0 ? &program.global_block() : &program.append_block(parent.value_or(0));
      } else if (pass == 0) {
        continue;
      } else if (keyword == "var" || keyword == "op") {
        if (block == nullptr)
          line.fail(detail::text_cat("expected 'block 0' before the first '", keyword, "'"));
        if (keyword == "var") {
          VarDesc v = detail::text_form::parse_var(line);
          if (block->has_var(v.name))
            line.fail("variable '" + v.name + "' is already declared in block " +
                      std::to_string(block->idx()));
          VarDesc* made = nullptr;
          try {
            made = &block->var(v.name);  // refused where it would shadow a name an operator uses
          } catch (const error&) {
            detail::text_form::rethrow_at_line(number);
          }
          *made = v;
          declared.push_back(std::move(v));
          finals[made] = &declared.back();
        } else {
          OpDesc op = detail::text_form::parse_op(line);
          try {
            try {
              block->append_op(op);  // a copy: it may be tried again
            } catch (const not_registered&) {
              throw;
            } catch (const error&) {
              // Refused as the variables stand after the operators before it. A description
              // edited between two operators (a gradient made dense) is only in the var
              // lines: the variables the operator names take theirs, where they differ, and
              // it is tried again. The first refusal is the one reported.
              const std::exception_ptr first = std::current_exception();
              bool changed = false;
              for (const slot_map* slots : {&op.inputs(), &op.outputs()})
                for (const auto& [slot, names] : *slots)
                  for (const std::string& name : names)
                    if (const auto it = finals.find(block->find_var_recursive(name));
                        it != finals.end() && !(*it->first == *it->second)) {
                      *it->first = *it->second;
                      changed = true;
                    }
              if (!changed) std::rethrow_exception(first);
              try {
                block->append_op(std::move(op));
              } catch (const error&) {
                std::rethrow_exception(first);
              }
            }
          } catch (const error&) {
            detail::text_form::rethrow_at_line(number);
          }
        }
      } else {
        detail::text_form::program_line(raw, number)
            .expected("'block', 'var' or 'op' at the start of the line");
      }
    }
  }
  // The var lines hold the final descriptions.
  for (const auto& [variable, final_description] : finals) *variable = *final_description;
  return program;
}
#endif
}  // namespace fluidk
