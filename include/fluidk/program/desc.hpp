// Program descriptions: VarDesc, OpDesc, BlockDesc and ProgramDesc, and BlockDesc::append_op,
// which checks an operator against the registry and runs its InferVarType. No Hana: the
// registry it reads is fluidk/operator_registry.hpp. The text form is in text_writer.hpp and
// text_reader.hpp beside this header; fluidk/program.hpp brings all of them.
//
// A BlockDesc holds variables (by name, in the order they were declared) and operators (in order);
// an operator sees the variables of its block and of the enclosing blocks. append_op validates an
// operator against the registry before it changes anything: the operator is registered, every slot
// it is given is one the operator declares, every input variable is declared, and the attributes
// dispatch reads have their kinds (op_device a string; the registered libraries' request
// attributes, such as use_cudnn, bools). Then it declares the outputs that no visible block has (in
// its own block) and runs the operator's InferVarType (registered with the operator as `static void
// infer_var_type(const OpDesc&, BlockDesc&)`; default: every output a dense LoDTensor), which sets
// the kinds and data types of the outputs and may reject the operator (wrong kinds of inputs or
// attributes). On any error the block is left as it was: the variables the operator names are
// restored, the ones declared on the way removed, and the operator is not appended.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "fluidk/attribute.hpp"
#include "fluidk/detail/request_attributes.hpp"
#include "fluidk/detail/runtime_linkage.hpp"
#include "fluidk/dtype.hpp"
#include "fluidk/error.hpp"
#include "fluidk/operator_registry.hpp"
#include "fluidk/variable.hpp"

#if FLUIDK_DETAIL_RUNTIME_HERE
#include <cmath>
#endif

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
FLUIDK_DETAIL_RUNTIME_LINKAGE bool same_attributes(const attribute_map& a, const attribute_map& b);
#if FLUIDK_DETAIL_RUNTIME_HERE
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
FLUIDK_DETAIL_RUNTIME_LINKAGE bool same_attributes(const attribute_map& a, const attribute_map& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.first == y.first && x.second.index() == y.second.index() &&
           std::visit(
               [&](const auto& value) {
                 return same_value(value, std::get<std::decay_t<decltype(value)>>(y.second));
               },
               x.second);
  });
}
#endif

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
  OpDesc(std::string type, slot_map inputs, slot_map outputs, attribute_map attrs = {});
  OpDesc(const OpDesc&);
  OpDesc(OpDesc&&) noexcept;
  OpDesc& operator=(const OpDesc&);
  OpDesc& operator=(OpDesc&&) noexcept;
  ~OpDesc();

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
  OpDesc& set_attr(std::string_view name, attribute value);
  template <std::size_t N>
  OpDesc& set_attr(std::string_view name, const char (&value)[N]) {
    return set_attr(name, attribute(std::string(value)));
  }

  friend bool operator==(const OpDesc& a, const OpDesc& b);

 private:
  const std::vector<std::string>& get(const slot_map& slots, std::string_view slot, const char* what) const;
  static void set(slot_map& slots, std::string_view slot, std::vector<std::string> names);

  std::string type_;
  slot_map inputs_, outputs_;
  attribute_map attrs_;
};

#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE OpDesc::OpDesc(std::string type, slot_map inputs, slot_map outputs,
                                             attribute_map attrs)
    : type_(std::move(type)),
      inputs_(std::move(inputs)),
      outputs_(std::move(outputs)),
      attrs_(std::move(attrs)) {}
FLUIDK_DETAIL_RUNTIME_LINKAGE OpDesc::OpDesc(const OpDesc&) = default;
FLUIDK_DETAIL_RUNTIME_LINKAGE OpDesc::OpDesc(OpDesc&&) noexcept = default;
FLUIDK_DETAIL_RUNTIME_LINKAGE OpDesc& OpDesc::operator=(const OpDesc&) = default;
FLUIDK_DETAIL_RUNTIME_LINKAGE OpDesc& OpDesc::operator=(OpDesc&&) noexcept = default;
FLUIDK_DETAIL_RUNTIME_LINKAGE OpDesc::~OpDesc() = default;

FLUIDK_DETAIL_RUNTIME_LINKAGE OpDesc& OpDesc::set_attr(std::string_view name, attribute value) {
  attrs_.set(name, std::move(value));
  return *this;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE bool operator==(const OpDesc& a, const OpDesc& b) {
  return a.type_ == b.type_ && a.inputs_ == b.inputs_ && a.outputs_ == b.outputs_ &&
         detail::same_attributes(a.attrs_, b.attrs_);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE const std::vector<std::string>& OpDesc::get(const slot_map& slots,
                                                                          std::string_view slot,
                                                                          const char* what) const {
  const auto it = slots.find(slot);
  if (it == slots.end()) {
    std::string have;
    for (const auto& [name, _] : slots) have += (have.empty() ? "'" : ", '") + name + "'";
    throw error("operator '" + type_ + "' has no " + what + " slot '" + std::string(slot) + "'; it has " +
                (have.empty() ? std::string("none") : have));
  }
  return it->second;
}
FLUIDK_DETAIL_RUNTIME_LINKAGE void OpDesc::set(slot_map& slots, std::string_view slot,
                                               std::vector<std::string> names) {
  const auto it = slots.find(slot);
  if (it != slots.end())
    it->second = std::move(names);
  else
    slots.emplace(std::string(slot), std::move(names));
}
#endif

class ProgramDesc;

namespace detail {
// Registers the control-flow operators once (fluidk/control_flow.hpp, included at the end).
inline bool control_flow_registered();
}  // namespace detail

// A sequence of operators and the variables they use. Reading and writing a block from
// several threads at once needs outside locking. References to variables and operators stay
// valid while the block grows (they are stored in deques); renaming a VarDesc through such a
// reference is not supported.
class BlockDesc {
 public:
  // A standalone block: index 0, no parent.
  BlockDesc() = default;
  // A copy is a block of no program: its variables and operators, and the index and parent
  // index it had, but lookups through parents end at it (the original's program may be gone).
  // A ProgramDesc that copies its blocks links the copies to itself.
  BlockDesc(const BlockDesc& other);
  BlockDesc(BlockDesc&& other);
  // Assigning replaces the variables and operators, all or none. A block of a program stays
  // where it is (its program, index and parent), so that program.block(1) = other.block(1)
  // still looks up through this program's blocks; a block of no program takes the index and
  // parent index too, and then compares equal to what it was assigned.
  BlockDesc& operator=(const BlockDesc& other);
  BlockDesc& operator=(BlockDesc&& other);
  ~BlockDesc();

  std::size_t idx() const noexcept { return idx_; }
  // The index of the enclosing block; none for the global block and a standalone one.
  std::optional<std::size_t> parent_idx() const noexcept { return parent_; }
  // The program the block belongs to; null for a standalone block or a copy of one.
  const ProgramDesc* program() const noexcept { return program_; }
  // The enclosing block, when the block belongs to a program and has one.
  const BlockDesc* parent_block() const noexcept;
  BlockDesc* parent_block() noexcept;

  // The variable of this name in this block, declared (as a float32 LoDTensor) if missing.
  VarDesc& var(std::string_view name);
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

  // The blocks that an operator of this block, of type `op_type` with attributes `attrs`,
  // carries (its block attributes, in name order), each checked to be a block of this block's
  // program whose parent is this block; an error naming the operator, the attribute and the
  // block otherwise. append_op checks each operator so. A walk over sub-blocks checks again
  // (a block assigned from another program, an attribute set on an operator appended before,
  // may name any block), so that it follows the tree of blocks and no cycle.
  std::vector<std::size_t> child_blocks(std::string_view op_type, const attribute_map& attrs) const;

  // An operator that names variable `v` (as its own block sees the name), the first found:
  // of any block of the program, or of this block and the blocks inside it (`inside`); of
  // this block alone when it belongs to no program. Null when none does.
  const OpDesc* user_of(const VarDesc& v, bool inside = false) const;

  // The variables in declaration order, the operators in order.
  const std::deque<VarDesc>& vars() const noexcept { return vars_; }
  const std::deque<OpDesc>& ops() const noexcept { return ops_; }

  friend bool operator==(const BlockDesc& a, const BlockDesc& b);

 private:
  friend class ProgramDesc;

  void take(BlockDesc&& other) noexcept;
  // Keeps the first `count` variables.
  void truncate_vars(std::size_t count);

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
  ProgramDesc();
  ProgramDesc(const ProgramDesc& other);
  ProgramDesc(ProgramDesc&& other) noexcept;
  ProgramDesc& operator=(const ProgramDesc& other);
  ProgramDesc& operator=(ProgramDesc&& other) noexcept;
  ~ProgramDesc();

  std::size_t num_blocks() const noexcept { return blocks_.size(); }
  BlockDesc& block(std::size_t i) { return blocks_[checked(i)]; }
  const BlockDesc& block(std::size_t i) const { return blocks_[checked(i)]; }
  BlockDesc& global_block() { return block(0); }
  const BlockDesc& global_block() const { return block(0); }
  const std::deque<BlockDesc>& blocks() const noexcept { return blocks_; }

  // A new block whose operators also see the variables of `parent` (and of its parents).
  BlockDesc& append_block(std::size_t parent = 0);

  friend bool operator==(const ProgramDesc& a, const ProgramDesc& b);

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

// The larger members of the descriptions are compiled where the runtime is
// (fluidk/detail/runtime_linkage.hpp): their containers of operators, each with its maps of
// slots and attributes, are most of what a header that only names them would instantiate.
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE BlockDesc::BlockDesc(const BlockDesc& other)
    : idx_(other.idx_), parent_(other.parent_), vars_(other.vars_), index_(other.index_), ops_(other.ops_) {}
FLUIDK_DETAIL_RUNTIME_LINKAGE BlockDesc::BlockDesc(BlockDesc&& other)
    : idx_(other.idx_),
      parent_(other.parent_),
      vars_(std::move(other.vars_)),
      index_(std::move(other.index_)),
      ops_(std::move(other.ops_)) {}
FLUIDK_DETAIL_RUNTIME_LINKAGE BlockDesc& BlockDesc::operator=(const BlockDesc& other) {
  if (this != &other) take(BlockDesc(other));
  return *this;
}
FLUIDK_DETAIL_RUNTIME_LINKAGE BlockDesc& BlockDesc::operator=(BlockDesc&& other) {
  if (this != &other) take(std::move(other));
  return *this;
}
FLUIDK_DETAIL_RUNTIME_LINKAGE BlockDesc::~BlockDesc() = default;

FLUIDK_DETAIL_RUNTIME_LINKAGE VarDesc& BlockDesc::var(std::string_view name) {
  if (VarDesc* v = find_var(name)) return *v;
  if (name.empty())
    throw error(detail::text_cat("block ", std::to_string(idx_), ": a variable needs a name"));
  // A new variable here shadows an enclosing block's of that name: an operator appended
  // before, here or inside, that read or wrote the enclosing one would silently name this one.
  if (const BlockDesc* parent = parent_block())
    if (const VarDesc* outer = parent->find_var_recursive(name))
      if (const OpDesc* user = user_of(*outer, true))
        throw error(detail::text_cat("block ", std::to_string(idx_), " cannot declare '", name,
                                     "': operator '", user->type(),
                                     "' appended before uses the enclosing block's '", name,
                                     "', which the declaration would hide from it"));
  vars_.push_back(VarDesc{std::string(name)});
  index_.emplace(std::string(name), vars_.size() - 1);
  return vars_.back();
}

FLUIDK_DETAIL_RUNTIME_LINKAGE bool operator==(const BlockDesc& a, const BlockDesc& b) {
  return a.idx_ == b.idx_ && a.parent_ == b.parent_ && a.vars_ == b.vars_ && a.ops_ == b.ops_;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void BlockDesc::take(BlockDesc&& other) noexcept {
  vars_.swap(other.vars_);
  index_.swap(other.index_);
  ops_.swap(other.ops_);
  if (program_ == nullptr) {
    idx_ = other.idx_;
    parent_ = other.parent_;
  }
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void BlockDesc::truncate_vars(std::size_t count) {
  if (vars_.size() <= count) return;
  vars_.resize(count);
  std::erase_if(index_, [&](const auto& entry) { return entry.second >= count; });
}

FLUIDK_DETAIL_RUNTIME_LINKAGE ProgramDesc::ProgramDesc() { blocks_.emplace_back().program_ = this; }
FLUIDK_DETAIL_RUNTIME_LINKAGE ProgramDesc::ProgramDesc(const ProgramDesc& other) : blocks_(other.blocks_) {
  relink();
}
FLUIDK_DETAIL_RUNTIME_LINKAGE ProgramDesc::ProgramDesc(ProgramDesc&& other) noexcept
    : blocks_(std::move(other.blocks_)) {
  relink();
}
FLUIDK_DETAIL_RUNTIME_LINKAGE ProgramDesc& ProgramDesc::operator=(const ProgramDesc& other) {
  if (this != &other) {
    blocks_ = std::deque<BlockDesc>(other.blocks_);  // copies made whole (index and parent too)
    relink();
  }
  return *this;
}
FLUIDK_DETAIL_RUNTIME_LINKAGE ProgramDesc& ProgramDesc::operator=(ProgramDesc&& other) noexcept {
  if (this != &other) {
    blocks_ = std::move(other.blocks_);
    relink();
  }
  return *this;
}
FLUIDK_DETAIL_RUNTIME_LINKAGE ProgramDesc::~ProgramDesc() = default;

FLUIDK_DETAIL_RUNTIME_LINKAGE BlockDesc& ProgramDesc::append_block(std::size_t parent) {
  checked(parent);
  BlockDesc& b = blocks_.emplace_back();
  b.idx_ = blocks_.size() - 1;
  b.parent_ = parent;
  b.program_ = this;
  return b;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE bool operator==(const ProgramDesc& a, const ProgramDesc& b) {
  return a.blocks_ == b.blocks_;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE std::vector<std::size_t> BlockDesc::child_blocks(
    std::string_view op_type, const attribute_map& attrs) const {
  std::vector<std::size_t> out;
  for (const auto& [attr_name, value] : attrs) {
    const std::string& name = attr_name;  // clang++ 14 captures no structured binding
    auto check_block = [&](const block_ref& b) {
      const std::string where = "operator '" + std::string(op_type) + "' attribute '" + name + "'";
      if (program_ == nullptr)
        throw error(where + " names block " + std::to_string(b.index) +
                    ", but the operator's block belongs to no program");
      if (b.index >= program_->blocks_.size())
        throw error(where + " names block " + std::to_string(b.index) + "; the program has " +
                    std::to_string(program_->blocks_.size()) + " block(s)");
      const BlockDesc& named = program_->blocks_[b.index];
      if (named.parent_ != idx_)
        throw error(where + " names block " + std::to_string(b.index) + ", which is not a child of block " +
                    std::to_string(idx_) + " (its parent is " +
                    (named.parent_ ? "block " + std::to_string(*named.parent_) : std::string("none")) + ")");
      out.push_back(b.index);
    };
    if (const auto* one = std::get_if<block_ref>(&value)) check_block(*one);
    if (const auto* many = std::get_if<std::vector<block_ref>>(&value))
      for (const block_ref& b : *many) check_block(b);
  }
  return out;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE const OpDesc* BlockDesc::user_of(const VarDesc& v, bool inside) const {
  auto within = [&](const BlockDesc& b) {
    for (const BlockDesc* up = &b; up != nullptr; up = up->parent_block())
      if (up == this) return true;
    return false;
  };
  auto in_block = [&](const BlockDesc& b) -> const OpDesc* {
    for (const OpDesc& op : b.ops_)
      for (const auto* slots : {&op.inputs(), &op.outputs()})
        for (const auto& [slot, names] : *slots)
          for (const std::string& name : names)
            if (name == v.name && b.find_var_recursive(name) == &v) return &op;
    return nullptr;
  };
  if (program_ == nullptr) return in_block(*this);
  for (const BlockDesc& b : program_->blocks_)
    if (!inside || within(b))
      if (const OpDesc* op = in_block(b)) return op;
  return nullptr;
}
#endif

inline const BlockDesc* BlockDesc::parent_block() const noexcept {
  return program_ != nullptr && parent_ && *parent_ < program_->blocks_.size() ? &program_->blocks_[*parent_]
                                                                               : nullptr;
}
inline BlockDesc* BlockDesc::parent_block() noexcept {
  return program_ != nullptr && parent_ && *parent_ < program_->blocks_.size() ? &program_->blocks_[*parent_]
                                                                               : nullptr;
}

// --- InferVarType: the default, and the building blocks of an operator's own rule ---------

// The default: every output is a dense LoDTensor; data types stay as they are.
inline void default_infer_var_type(const OpDesc& op, BlockDesc& block) {
  for (const auto& [slot, names] : op.outputs())
    for (const std::string& name : names) block.var_recursive(name).kind = var_kind::lod_tensor;
}

// The building blocks of an operator's own InferVarType (examples/ops/sum.hpp and
// lookup_table_grad.hpp use them): the description of input variable `name` of slot `slot`,
// and the first variable of an input slot, each an error naming the operator when missing.
inline const VarDesc& input_var_desc(const OpDesc& op, const BlockDesc& block, std::string_view slot,
                                     const std::string& name) {
  if (const VarDesc* v = block.find_var_recursive(name)) return *v;
  throw error("operator '" + op.type() + "' input slot '" + std::string(slot) + "': variable '" + name +
              "' is used before it is declared");
}
inline const std::string& first_input_name(const OpDesc& op, std::string_view slot, std::string_view why) {
  const std::vector<std::string>& names = op.input(slot);
  if (names.empty())
    throw error("operator '" + op.type() + "' input slot '" + std::string(slot) + "' is empty; " +
                std::string(why));
  return names.front();
}

// --- append_op ------------------------------------------------------------------------------

#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE OpDesc& BlockDesc::append_op(OpDesc op) {
  (void)detail::control_flow_registered();
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
  // The attributes dispatch reads (expected_kernel_key) have a fixed kind, read here by the
  // readers dispatch uses: op_device a string, the library requests bools, and the data-type
  // attribute a data type's name. (op_device's place is parsed when the operator runs: a
  // program may name a device kind this build lacks.)
  (void)op.attr_or<std::string>("op_device", {});
  (void)library_asked(op.attrs(), op.type());
  (void)attribute_data_type(op.attrs(), info->data_type_attribute(), op.type());
  for (const auto& [slot, names] : op.inputs())
    for (const std::string& name : names)
      if (find_var_recursive(name) == nullptr)
        throw error("operator '" + op.type() + "' input slot '" + slot + "': variable '" + name +
                    "' is used before it is declared");
  (void)child_blocks(op.type(), op.attrs());

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
    // A variable's kind is fixed once an operator uses it: an earlier operator (of any block)
    // that read or wrote it as it was would no longer hold (its InferVarType could refuse it,
    // and the text form, which declares each variable once, could not be read back).
    for (const auto& [v, before] : saved)
      if (v->kind != before.kind)
        if (const OpDesc* user = user_of(*v))
          throw error("operator '" + op.type() + "' makes variable '" + v->name + "' a " +
                      std::string(name_of(v->kind)) + ", but operator '" + user->type() +
                      "' before it uses it as a " + std::string(name_of(before.kind)) +
                      "; a variable's kind is fixed once an operator uses it");
    ops_.push_back(std::move(op));
    return ops_.back();
  } catch (...) {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) *it->first = std::move(it->second);
    for (const auto& [b, count] : sizes) b->truncate_vars(count);
    throw;
  }
}
#endif
}  // namespace fluidk

#include "fluidk/control_flow.hpp"  // while and conditional_block, which append_op knows
