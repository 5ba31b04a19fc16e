// Programs: VarDesc, OpDesc, BlockDesc and ProgramDesc, the operators' InferVarType, and a
// text form that can be written and read back.
//
// A BlockDesc holds variables (by name, in the order they were declared) and operators (in
// order); an operator sees the variables of its block and of the enclosing blocks. append_op
// validates an operator against the registry (fluidk/runtime_dispatch.hpp) before it changes
// anything: the operator is registered, every slot it is given is one the operator
// declares, every input variable is declared, and the attributes dispatch reads have their
// kinds (op_device a string; use_onednn, use_mkldnn, use_cudnn bools). Then it declares the
// outputs that no visible block has (in its own block) and runs the operator's InferVarType
// (registered with the operator as `static void infer_var_type(const OpDesc&, BlockDesc&)`;
// default: every output a dense LoDTensor), which sets the kinds and data types of the
// outputs and may reject the operator (wrong kinds of inputs or attributes). On any error
// the block is left as it was: the variables the operator names are restored, the ones
// declared on the way removed, and the operator is not appended.
//
// Text form, one line per item; leading blanks are ignored, as are empty lines and lines
// whose first non-blank character is '#':
//
//   block 0
//     var emb : LoDTensor float [100000, 64] persistable
//     var ids : LoDTensor int64_t [-1, 1]
//     op lookup_table (Ids: ids; W: emb) -> (Out: x) {is_sparse: bool true; padding_idx: int64 -1}
//   block 1 parent 0
//     op sum (X: x, y; Extra:) -> (Out: z)
//
//   block N [parent P]   starts block N; blocks come in order, block 0 first (it has no
//                        parent), every other block names a parent before it (default 0)
//   var NAME : KIND DTYPE [D0, D1, ...] [persistable]
//                        KIND: LoDTensor, SelectedRows, LoDTensorArray or nothing (also
//                        lod_tensor, selected_rows, lod_tensor_array, empty); DTYPE: a data
//                        type name as fluidk/dtype.hpp reads it; the shape may be [] (a
//                        scalar, or not known: append_op makes outputs without a shape)
//   op TYPE (SLOT: NAME, ...; ...) -> (SLOT: NAME, ...; ...) [{ATTR: KIND VALUE; ...}]
//                        slots are written in name order; a slot may be empty ("X:")
//
// Attribute kinds and values: bool (true, false), int and int64 (decimal), float and double
// (shortest text that reads back to the same value; inf, -inf, nan), string ("..." with
// \" \\ \n \t \r and \xHH escapes), and the lists ints, int64s, floats, strings ([v, v, ...]).
// A name (variable, slot, operator, attribute) is written bare when it holds none of
// blanks, control characters, ( ) [ ] { } , ; : " #, and is not "->"; else quoted like a
// string.
//
// Reading replays the text through the same calls a program is built with: var lines
// declare variables (BlockDesc::var), op lines go through append_op, so unknown operators,
// unknown slots, variables used before their declaration and attributes of the wrong kind
// for the operator's InferVarType are errors, each naming the line. A var line holds the
// variable's final description: it is applied where it stands and again when the whole
// text is read, so that what InferVarType sets on the way does not override it. to_text
// writes each variable before the first operator that uses it, so that
// write → read → write gives the same text and reading gives an equal ProgramDesc.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "fluidk/attribute.hpp"
#include "fluidk/dtype.hpp"
#include "fluidk/error.hpp"
#include "fluidk/runtime_dispatch.hpp"
#include "fluidk/variable.hpp"

namespace fluidk {

// A variable of a block: what it holds and its static shape (-1 for a dimension known only
// when the program runs).
struct VarDesc {
  std::string name;
  var_kind kind = var_kind::lod_tensor;
  data_type dtype = data_type::float32;
  std::vector<std::int64_t> shape = {};  // "= {}" lets VarDesc{"x"} pass -Wmissing-field-initializers
  bool persistable = false;

  friend bool operator==(const VarDesc&, const VarDesc&) = default;
};

// Slot name → the variable names it holds, in order. Slots are kept in name order.
using slot_map = std::map<std::string, std::vector<std::string>, std::less<>>;

namespace detail {
// Text pieces joined into one string by appending (`"literal" + temporary` makes g++ 12 at
// -O3 report a false -Wrestrict).
template <class... Parts>
std::string text_cat(const Parts&... parts) {
  const std::string_view views[] = {std::string_view(parts)...};
  std::size_t size = 0;
  for (const std::string_view v : views) size += v.size();
  std::string out;
  out.reserve(size);
  for (const std::string_view v : views) out.append(v);
  return out;
}

// Attribute equality in which NaN equals NaN, so that programs compare equal to their text
// round trip.
template <class T>
bool same_value(const T& a, const T& b) {
  if constexpr (std::is_floating_point_v<T>)
    return a == b || (std::isnan(a) && std::isnan(b));
  else
    return a == b;
}
template <class T>
bool same_value(const std::vector<T>& a, const std::vector<T>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const T& x, const T& y) { return same_value(x, y); });
}
inline bool same_attributes(const attribute_map& a, const attribute_map& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.first == y.first && x.second.index() == y.second.index() &&
           std::visit(
               [&](const auto& value) {
                 return same_value(value, std::get<std::decay_t<decltype(value)>>(y.second));
               },
               x.second);
  });
}

template <class Range>
std::string join_slots(const Range& slots) {
  std::string out;
  for (const auto& s : slots) out += (out.empty() ? "'" : ", '") + std::string(s) + "'";
  return out.empty() ? "none" : out;
}
}  // namespace detail

// One operator of a block: its type, its input and output slots, and its attributes.
class OpDesc {
 public:
  OpDesc() = default;
  explicit OpDesc(std::string type) : type_(std::move(type)) {}
  OpDesc(std::string type, slot_map inputs, slot_map outputs, attribute_map attrs = {})
      : type_(std::move(type)),
        inputs_(std::move(inputs)),
        outputs_(std::move(outputs)),
        attrs_(std::move(attrs)) {}

  const std::string& type() const noexcept { return type_; }
  void set_type(std::string type) { type_ = std::move(type); }

  const slot_map& inputs() const noexcept { return inputs_; }
  const slot_map& outputs() const noexcept { return outputs_; }
  bool has_input(std::string_view slot) const { return inputs_.find(slot) != inputs_.end(); }
  bool has_output(std::string_view slot) const { return outputs_.find(slot) != outputs_.end(); }

  // The variables of a slot; an error naming the operator and the slot when it has none.
  const std::vector<std::string>& input(std::string_view slot) const { return get(inputs_, slot, "input"); }
  const std::vector<std::string>& output(std::string_view slot) const {
    return get(outputs_, slot, "output");
  }

  OpDesc& set_input(std::string_view slot, std::vector<std::string> names) {
    set(inputs_, slot, std::move(names));
    return *this;
  }
  OpDesc& set_output(std::string_view slot, std::vector<std::string> names) {
    set(outputs_, slot, std::move(names));
    return *this;
  }

  const attribute_map& attrs() const noexcept { return attrs_; }
  bool has_attr(std::string_view name) const noexcept { return attrs_.contains(name); }
  // The attribute as a T; an error naming the operator and the attribute when it is absent
  // or of another kind.
  template <class T>
  const T& attr(std::string_view name) const {
    return attrs_.get<T>(name, type_);
  }
  // The attribute as a T, or `fallback` when absent (another kind is still an error).
  template <class T>
  T attr_or(std::string_view name, T fallback) const {
    return attrs_.get_or<T>(name, std::move(fallback), type_);
  }
  OpDesc& set_attr(std::string_view name, attribute value) {
    attrs_.set(name, std::move(value));
    return *this;
  }
  template <std::size_t N>
  OpDesc& set_attr(std::string_view name, const char (&value)[N]) {
    return set_attr(name, attribute(std::string(value)));
  }

  friend bool operator==(const OpDesc& a, const OpDesc& b) {
    return a.type_ == b.type_ && a.inputs_ == b.inputs_ && a.outputs_ == b.outputs_ &&
           detail::same_attributes(a.attrs_, b.attrs_);
  }

 private:
  const std::vector<std::string>& get(const slot_map& slots, std::string_view slot, const char* what) const {
    const auto it = slots.find(slot);
    if (it == slots.end()) {
      std::string have;
      for (const auto& [name, _] : slots) have += (have.empty() ? "'" : ", '") + name + "'";
      throw error("operator '" + type_ + "' has no " + what + " slot '" + std::string(slot) + "'; it has " +
                  (have.empty() ? std::string("none") : have));
    }
    return it->second;
  }
  static void set(slot_map& slots, std::string_view slot, std::vector<std::string> names) {
    const auto it = slots.find(slot);
    if (it != slots.end())
      it->second = std::move(names);
    else
      slots.emplace(std::string(slot), std::move(names));
  }

  std::string type_;
  slot_map inputs_, outputs_;
  attribute_map attrs_;
};

class ProgramDesc;

// A sequence of operators and the variables they use. Reading and writing a block from
// several threads at once needs outside locking. References to variables and operators stay
// valid while the block grows (they are stored in deques); renaming a VarDesc through such a
// reference is not supported.
class BlockDesc {
 public:
  // A standalone block: index 0, no parent.
  BlockDesc() = default;

  std::size_t idx() const noexcept { return idx_; }
  // The index of the enclosing block; none for the global block and a standalone one.
  std::optional<std::size_t> parent_idx() const noexcept { return parent_; }
  // The enclosing block, when the block belongs to a program and has one.
  const BlockDesc* parent_block() const noexcept;
  BlockDesc* parent_block() noexcept;

  // The variable of this name in this block, declared (as a float32 LoDTensor) if missing.
  VarDesc& var(std::string_view name) {
    if (VarDesc* v = find_var(name)) return *v;
    if (name.empty())
      throw error(detail::text_cat("block ", std::to_string(idx_), ": a variable needs a name"));
    vars_.push_back(VarDesc{std::string(name)});
    index_.emplace(std::string(name), vars_.size() - 1);
    return vars_.back();
  }
  // The variable of this name in this block, or nullptr.
  VarDesc* find_var(std::string_view name) noexcept {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &vars_[it->second];
  }
  const VarDesc* find_var(std::string_view name) const noexcept {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &vars_[it->second];
  }
  bool has_var(std::string_view name) const noexcept { return find_var(name) != nullptr; }
  // The position of a variable of this block in vars(), or none.
  std::optional<std::size_t> var_index(std::string_view name) const noexcept {
    const auto it = index_.find(name);
    return it == index_.end() ? std::nullopt : std::optional<std::size_t>(it->second);
  }
  // The variable of this name in this block; an error naming it when it is not declared.
  const VarDesc& get_var(std::string_view name) const {
    if (const VarDesc* v = find_var(name)) return *v;
    throw error(detail::text_cat("block ", std::to_string(idx_), " has no variable '", name, "'"));
  }
  // The variable in this block or the nearest enclosing block that has it, or nullptr.
  VarDesc* find_var_recursive(std::string_view name) noexcept {
    for (BlockDesc* b = this; b != nullptr; b = b->parent_block())
      if (VarDesc* v = b->find_var(name)) return v;
    return nullptr;
  }
  const VarDesc* find_var_recursive(std::string_view name) const noexcept {
    for (const BlockDesc* b = this; b != nullptr; b = b->parent_block())
      if (const VarDesc* v = b->find_var(name)) return v;
    return nullptr;
  }
  // The variable as an operator sees it: in this block or an enclosing one; declared in
  // this block if none has it. What InferVarType functions use for their outputs.
  VarDesc& var_recursive(std::string_view name) {
    if (VarDesc* v = find_var_recursive(name)) return *v;
    return var(name);
  }

  // Validates, declares the outputs, runs the operator's InferVarType, appends; on any
  // error the block (and its enclosing blocks) are left as they were.
  OpDesc& append_op(OpDesc op);

  // The variables in declaration order, the operators in order.
  const std::deque<VarDesc>& vars() const noexcept { return vars_; }
  const std::deque<OpDesc>& ops() const noexcept { return ops_; }

  friend bool operator==(const BlockDesc& a, const BlockDesc& b) {
    return a.idx_ == b.idx_ && a.parent_ == b.parent_ && a.vars_ == b.vars_ && a.ops_ == b.ops_;
  }

 private:
  friend class ProgramDesc;

  // Keeps the first `count` variables.
  void truncate_vars(std::size_t count) {
    if (vars_.size() <= count) return;
    vars_.resize(count);
    std::erase_if(index_, [&](const auto& entry) { return entry.second >= count; });
  }

  std::size_t idx_ = 0;
  std::optional<std::size_t> parent_;
  ProgramDesc* program_ = nullptr;
  std::deque<VarDesc> vars_;
  std::map<std::string, std::size_t, std::less<>> index_;
  std::deque<OpDesc> ops_;
};

// A program: blocks, block 0 the global one. Blocks stay at their address while the
// program grows; copying a program copies its blocks and links them to the copy.
class ProgramDesc {
 public:
  ProgramDesc() { blocks_.emplace_back().program_ = this; }
  ProgramDesc(const ProgramDesc& other) : blocks_(other.blocks_) { relink(); }
  ProgramDesc(ProgramDesc&& other) noexcept : blocks_(std::move(other.blocks_)) { relink(); }
  ProgramDesc& operator=(const ProgramDesc& other) {
    if (this != &other) {
      blocks_ = other.blocks_;
      relink();
    }
    return *this;
  }
  ProgramDesc& operator=(ProgramDesc&& other) noexcept {
    if (this != &other) {
      blocks_ = std::move(other.blocks_);
      relink();
    }
    return *this;
  }
  ~ProgramDesc() = default;

  std::size_t num_blocks() const noexcept { return blocks_.size(); }
  BlockDesc& block(std::size_t i) { return blocks_[checked(i)]; }
  const BlockDesc& block(std::size_t i) const { return blocks_[checked(i)]; }
  BlockDesc& global_block() { return block(0); }
  const BlockDesc& global_block() const { return block(0); }
  const std::deque<BlockDesc>& blocks() const noexcept { return blocks_; }

  // A new block whose operators also see the variables of `parent` (and of its parents).
  BlockDesc& append_block(std::size_t parent = 0) {
    checked(parent);
    BlockDesc& b = blocks_.emplace_back();
    b.idx_ = blocks_.size() - 1;
    b.parent_ = parent;
    b.program_ = this;
    return b;
  }

  friend bool operator==(const ProgramDesc& a, const ProgramDesc& b) { return a.blocks_ == b.blocks_; }

 private:
  friend class BlockDesc;

  std::size_t checked(std::size_t i) const {
    if (i >= blocks_.size())
      throw error(detail::text_cat("the program has ", std::to_string(blocks_.size()),
                                   blocks_.size() == 1 ? " block" : " blocks", "; there is no block ",
                                   std::to_string(i)));
    return i;
  }
  void relink() noexcept {
    for (BlockDesc& b : blocks_) b.program_ = this;
  }

  std::deque<BlockDesc> blocks_;
};

inline const BlockDesc* BlockDesc::parent_block() const noexcept {
  return program_ != nullptr && parent_ && *parent_ < program_->blocks_.size() ? &program_->blocks_[*parent_]
                                                                               : nullptr;
}
inline BlockDesc* BlockDesc::parent_block() noexcept {
  return program_ != nullptr && parent_ && *parent_ < program_->blocks_.size() ? &program_->blocks_[*parent_]
                                                                               : nullptr;
}

// --- InferVarType ---------------------------------------------------------------------------

// The default: every output is a dense LoDTensor; data types stay as they are.
inline void default_infer_var_type(const OpDesc& op, BlockDesc& block) {
  for (const auto& [slot, names] : op.outputs())
    for (const std::string& name : names) block.var_recursive(name).kind = var_kind::lod_tensor;
}

namespace detail {
inline const VarDesc& infer_input_var(const OpDesc& op, const BlockDesc& block, std::string_view slot,
                                      const std::string& name) {
  if (const VarDesc* v = block.find_var_recursive(name)) return *v;
  throw error("operator '" + op.type() + "' input slot '" + std::string(slot) + "': variable '" + name +
              "' is used before it is declared");
}
inline const std::string& infer_first_input(const OpDesc& op, std::string_view slot, std::string_view why) {
  const std::vector<std::string>& names = op.input(slot);
  if (names.empty())
    throw error("operator '" + op.type() + "' input slot '" + std::string(slot) + "' is empty; " +
                std::string(why));
  return names.front();
}
}  // namespace detail

// sum (inputs "X", output "Out"): if any input is a LoDTensorArray, all must be and the
// output is one; else the output is a LoDTensor if any input is one, else SelectedRows. The
// output's data type is the first input's.
inline void infer_sum_var_type(const OpDesc& op, BlockDesc& block) {
  const std::vector<std::string>& xs = op.input("X");
  const std::vector<std::string>& outs = op.output("Out");
  const data_type dtype =
      detail::infer_input_var(
          op, block, "X",
          detail::infer_first_input(op, "X", "sum takes the output's data type from the first"))
          .dtype;
  const std::string* array = nullptr;  // an input that is a LoDTensorArray
  const VarDesc* not_array = nullptr;  // an input that is not
  bool any_dense = false;
  for (const std::string& name : xs) {
    const VarDesc& v = detail::infer_input_var(op, block, "X", name);
    if (v.kind == var_kind::lod_tensor_array) {
      if (array == nullptr) array = &name;
    } else if (not_array == nullptr) {
      not_array = &v;
    }
    any_dense = any_dense || v.kind == var_kind::lod_tensor;
  }
  if (array != nullptr && not_array != nullptr)
    throw error("operator '" + op.type() +
                "' input slot 'X': if any input is a LoDTensorArray, all must be; '" + *array +
                "' is a LoDTensorArray but '" + not_array->name + "' is a " +
                std::string(name_of(not_array->kind)));
  const var_kind kind = array != nullptr ? var_kind::lod_tensor_array
                        : any_dense      ? var_kind::lod_tensor
                                         : var_kind::selected_rows;
  for (const std::string& name : outs) {
    VarDesc& out = block.var_recursive(name);
    out.kind = kind;
    out.dtype = dtype;
  }
}

// lookup_table_grad (inputs "W", "Ids", "Out@GRAD", output "W@GRAD"): the weight gradient is
// SelectedRows when the bool attribute is_sparse is true, else (also when absent) a
// LoDTensor; its data type is W's.
inline void infer_lookup_table_grad_var_type(const OpDesc& op, BlockDesc& block) {
  const bool sparse = op.attr_or<bool>("is_sparse", false);
  const data_type dtype =
      detail::infer_input_var(op, block, "W",
                              detail::infer_first_input(op, "W", "the weight gradient takes W's data type"))
          .dtype;
  for (const std::string& name : op.output("W@GRAD")) {
    VarDesc& grad = block.var_recursive(name);
    grad.kind = sparse ? var_kind::selected_rows : var_kind::lod_tensor;
    grad.dtype = dtype;
  }
}

// --- append_op ------------------------------------------------------------------------------

inline OpDesc& BlockDesc::append_op(OpDesc op) {
  auto& registry = operator_registry::instance();
  const operator_info* info = registry.find(op.type());
  if (info == nullptr)
    throw not_registered("unknown operator '" + op.type() + "'; registered: " + registry.names());

  auto check_slots = [&](const slot_map& given, std::span<const std::string_view> declared,
                         const char* what) {
    for (const auto& [slot, names] : given) {
      if (std::find(declared.begin(), declared.end(), slot) == declared.end())
        throw error("operator '" + op.type() + "' has no " + what + " slot '" + slot + "'; its " + what +
                    " slots are " + detail::join_slots(declared));
      for (const std::string& name : names)
        if (name.empty())
          throw error("operator '" + op.type() + "' " + what + " slot '" + slot +
                      "': an empty variable name");
    }
  };
  check_slots(op.inputs(), info->inputs(), "input");
  check_slots(op.outputs(), info->outputs(), "output");
  // The attributes dispatch reads for every operator (expected_kernel_key) have a fixed kind.
  (void)op.attr_or<std::string>("op_device", {});
  for (const std::string_view flag : {"use_onednn", "use_mkldnn", "use_cudnn"})
    (void)op.attr_or<bool>(flag, false);
  for (const auto& [slot, names] : op.inputs())
    for (const std::string& name : names)
      if (find_var_recursive(name) == nullptr)
        throw error("operator '" + op.type() + "' input slot '" + slot + "': variable '" + name +
                    "' is used before it is declared");

  // What to restore on failure: the variables the operator names, and the number of
  // variables of this block and of every enclosing one.
  std::vector<std::pair<BlockDesc*, std::size_t>> sizes;
  for (BlockDesc* b = this; b != nullptr; b = b->parent_block()) sizes.emplace_back(b, b->vars_.size());
  std::vector<std::pair<VarDesc*, VarDesc>> saved;
  for (const slot_map* slots : {&op.inputs(), &op.outputs()})
    for (const auto& [slot, names] : *slots)
      for (const std::string& name : names)
        if (VarDesc* v = find_var_recursive(name)) saved.emplace_back(v, *v);

  try {
    for (const auto& [slot, names] : op.outputs())
      for (const std::string& name : names) var_recursive(name);
    if (infer_var_type_function infer = info->infer_var_type())
      infer(op, *this);
    else
      default_infer_var_type(op, *this);
    ops_.push_back(std::move(op));
    return ops_.back();
  } catch (...) {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) *it->first = std::move(it->second);
    for (const auto& [b, count] : sizes) b->truncate_vars(count);
    throw;
  }
}

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
  else {  // a list
    out += '[';
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (i > 0) out += ", ";
      write_value(out, value[i]);
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
inline std::string to_text(const ProgramDesc& program) {
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
  const std::string_view w = line.expect_word("a variable kind (LoDTensor, SelectedRows, LoDTensorArray)");
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
                                    {"nothing", var_kind::empty},
                                    {"empty", var_kind::empty}};
  for (const entry& e : words)
    if (iequals(e.word, w)) return e.kind;
  line.fail(text_cat("unknown variable kind '", w,
                     "'; accepted: LoDTensor, SelectedRows, LoDTensorArray, nothing"));
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
        line.fail(
            text_cat("unknown attribute kind '", kind,
                     "'; accepted: bool, int, int64, float, double, string, ints, int64s, floats, strings"));
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
inline ProgramDesc parse_program(std::string_view text) {
  ProgramDesc program;
  BlockDesc* block = nullptr;
  std::vector<std::pair<std::size_t, VarDesc>> declared;  // (block, final description)
  std::size_t number = 0;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view raw = text.substr(start, end - start);
    start = end + 1;
    ++number;
    detail::text_form::program_line line(raw, number);
    if (line.at_end() || line.peek('#')) continue;
    const std::string_view keyword = line.word();
    if (keyword == "block") {
      const std::size_t next = block == nullptr ? 0 : program.num_blocks();
      const auto idx = line.number<std::size_t>("a block index after 'block'");
      if (idx != next)
        line.fail(
            detail::text_cat("expected block ", std::to_string(next), ", found block ", std::to_string(idx)));
      std::optional<std::size_t> parent;
      if (!line.at_end()) {
        line.expect_keyword("parent", "or the end of the line after the block index");
        parent = line.number<std::size_t>("a parent block index after 'parent'");
        if (idx == 0) line.fail("block 0 is the global block and has no parent");
        if (*parent >= idx)
          line.fail(detail::text_cat("block ", std::to_string(idx), " names parent ", std::to_string(*parent),
                                     "; a parent comes before its child"));
      }
      line.expect_end();
      block = idx == 0 ? &program.global_block() : &program.append_block(parent.value_or(0));
    } else if (keyword == "var" || keyword == "op") {
      if (block == nullptr)
        line.fail(detail::text_cat("expected 'block 0' before the first '", keyword, "'"));
      if (keyword == "var") {
        VarDesc v = detail::text_form::parse_var(line);
        if (block->has_var(v.name))
          line.fail("variable '" + v.name + "' is already declared in block " + std::to_string(block->idx()));
        block->var(v.name) = v;
        declared.emplace_back(block->idx(), std::move(v));
      } else {
        OpDesc op = detail::text_form::parse_op(line);
        try {
          block->append_op(std::move(op));
        } catch (const error&) {
          detail::text_form::rethrow_at_line(number);
        }
      }
    } else {
      detail::text_form::program_line(raw, number)
          .expected("'block', 'var' or 'op' at the start of the line");
    }
  }
  // The var lines hold the final descriptions.
  for (auto& [idx, v] : declared) program.block(idx).var(v.name) = std::move(v);
  return program;
}

}  // namespace fluidk
