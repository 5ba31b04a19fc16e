// What a kernel receives: the device context of its place, its inputs and outputs by slot,
// its attributes, and the kernel key it runs as. The same type serves the static path
// (built on the stack around typed tensors) and the runtime path (around variables).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "fluidk/attribute.hpp"
#include "fluidk/debug.hpp"
#include "fluidk/detail/error_context.hpp"
#include "fluidk/device.hpp"
#include "fluidk/kernel_type.hpp"
#include "fluidk/variable.hpp"

namespace fluidk {

// One input or output: a variable (runtime path) or a tensor (static path).
class kernel_arg {
 public:
  constexpr kernel_arg() noexcept = default;
  constexpr kernel_arg(Variable* variable) noexcept : variable_(variable) {}
  // An input the kernel reads.
  constexpr kernel_arg(const Tensor* tensor) noexcept : tensor_(tensor) {}
  // An output the kernel writes.
  constexpr kernel_arg(Tensor* tensor) noexcept : tensor_(tensor), mutable_tensor_(tensor) {}

  bool empty() const noexcept { return variable_ == nullptr && tensor_ == nullptr; }
  Variable* variable() const noexcept { return variable_; }

  // The dense tensor of the argument (a LoDTensor's tensor for a variable).
  const Tensor& tensor() const {
    if (tensor_ != nullptr) return *tensor_;
    return checked_variable().template get<LoDTensor>();
  }
  // For outputs: the tensor to write, made a LoDTensor if the variable is empty. Every
  // mutable accessor counts as a write to the storage the output holds now (its version
  // moves on, so that no cache serves its old bytes); a tensor assigned to it later is new
  // storage of its own.
  Tensor& mutable_tensor() {
    Tensor* t = mutable_tensor_ != nullptr ? mutable_tensor_ : &variable_tensor();
    t->mark_modified();
    return *t;
  }
  const LoDTensor& lod_tensor() const { return checked_variable().template get<LoDTensor>(); }
  LoDTensor& mutable_lod_tensor() {
    LoDTensor& t = checked_variable().template get_mutable<LoDTensor>();
    t.mark_modified();
    return t;
  }
  const SelectedRows& selected_rows() const { return checked_variable().template get<SelectedRows>(); }
  SelectedRows& mutable_selected_rows() {
    SelectedRows& rows = checked_variable().template get_mutable<SelectedRows>();
    rows.value().mark_modified();
    return rows;
  }

 private:
  // A variable's tensor to write (made a LoDTensor if the variable is empty), out of line: the
  // static path's outputs are bare tensors, and its call sites inline the rest of
  // mutable_tensor, a test and the version's store.
  [[gnu::noinline]] Tensor& variable_tensor() {
    if (tensor_ != nullptr) throw error("a kernel asked to write one of its inputs");
    return checked_variable().template get_mutable<LoDTensor>();
  }
  Variable& checked_variable() const {
    if (variable_ == nullptr) no_variable();
    return *variable_;
  }
  [[noreturn, gnu::cold, gnu::noinline]] void no_variable() const {
    throw error(tensor_ != nullptr ? "this argument is a bare tensor; LoD and SelectedRows need a variable"
                                   : "this argument is empty");
  }

  Variable* variable_ = nullptr;
  const Tensor* tensor_ = nullptr;
  Tensor* mutable_tensor_ = nullptr;
};

// Arguments are grouped by slot: slot s holds args[offsets[s] .. offsets[s + 1]).
struct slot_args {
  std::span<kernel_arg> args;
  std::span<const std::uint32_t> offsets;

  std::size_t slot_count() const noexcept { return offsets.empty() ? 0 : offsets.size() - 1; }
  std::span<kernel_arg> slot(std::size_t s) const noexcept {
    return args.subspan(offsets[s], offsets[s + 1] - offsets[s]);
  }
};

namespace detail {
inline const attribute_map empty_attributes{};
inline const lod no_lod{};
}  // namespace detail

class execution_context {
 public:
  execution_context(std::string_view op, std::span<const std::string_view> input_names,
                    std::span<const std::string_view> output_names, device_context& device, kernel_key key,
                    slot_args inputs, slot_args outputs,
                    const attribute_map& attrs = detail::empty_attributes) noexcept
      : op_(op),
        input_names_(input_names),
        output_names_(output_names),
        device_(&device),
        key_(key),
        inputs_(inputs),
        outputs_(outputs),
        attrs_(&attrs) {}

  std::string_view op_type() const noexcept { return op_; }
  device_context& device() const noexcept { return *device_; }
  // The backend's own context type (cuda_context, opencl_context, ...), checked.
  template <class Context>
  Context& device_as() const {
    if (auto* c = dynamic_cast<Context*>(device_)) return *c;
    throw error("operator '" + std::string(op_) + "': the kernel for " + key_.to_string() +
                " asked for another kind of device context than " + device_->place().to_string() + " has");
  }
  fluidk::place place() const noexcept { return key_.place(); }
  const kernel_key& kernel() const noexcept { return key_; }
  const attribute_map& attributes() const noexcept { return *attrs_; }

  template <class T>
  const T& attr(std::string_view name) const {
    return attrs_->get<T>(name, op_);
  }
  template <class T>
  T attr_or(std::string_view name, T fallback) const {
    return attrs_->get_or<T>(name, std::move(fallback), op_);
  }

  // Inputs and outputs by slot index (resolved at compile time by the operator's helpers)
  // or by slot name.
  std::size_t input_slot_count() const noexcept { return inputs_.slot_count(); }
  std::size_t output_slot_count() const noexcept { return outputs_.slot_count(); }
  std::span<kernel_arg> inputs(std::size_t slot) const noexcept {
    FLUIDK_DEBUG_CHECK(slot < inputs_.slot_count(), "operator '" + std::string(op_) + "': input slot " +
                                                        std::to_string(slot) + " of " +
                                                        std::to_string(inputs_.slot_count()));
    return inputs_.slot(slot);
  }
  std::span<kernel_arg> outputs(std::size_t slot) const noexcept {
    FLUIDK_DEBUG_CHECK(slot < outputs_.slot_count(), "operator '" + std::string(op_) + "': output slot " +
                                                         std::to_string(slot) + " of " +
                                                         std::to_string(outputs_.slot_count()));
    return outputs_.slot(slot);
  }
  std::span<kernel_arg> inputs(std::string_view slot) const {
    return inputs_.slot(index_of(slot, input_names_, "input"));
  }
  std::span<kernel_arg> outputs(std::string_view slot) const {
    return outputs_.slot(index_of(slot, output_names_, "output"));
  }

  const Tensor& input(std::size_t slot, std::size_t i = 0) const {
    return arg(inputs_, slot, i, "input").tensor();
  }
  const Tensor& input(std::string_view slot, std::size_t i = 0) const {
    return arg(inputs_, index_of(slot, input_names_, "input"), i, "input").tensor();
  }
  Tensor& output(std::size_t slot, std::size_t i = 0) const {
    return arg(outputs_, slot, i, "output").mutable_tensor();
  }
  Tensor& output(std::string_view slot, std::size_t i = 0) const {
    return arg(outputs_, index_of(slot, output_names_, "output"), i, "output").mutable_tensor();
  }
  kernel_arg& input_arg(std::string_view slot, std::size_t i = 0) const {
    return arg(inputs_, index_of(slot, input_names_, "input"), i, "input");
  }
  kernel_arg& output_arg(std::string_view slot, std::size_t i = 0) const {
    return arg(outputs_, index_of(slot, output_names_, "output"), i, "output");
  }
  // All inputs or outputs by slot, and a slot's name ("" past the operator's slots).
  const slot_args& all_inputs() const noexcept { return inputs_; }
  const slot_args& all_outputs() const noexcept { return outputs_; }
  std::string_view input_name(std::size_t slot) const noexcept {
    return slot < input_names_.size() ? input_names_[slot] : std::string_view();
  }

  // Sequence offsets (LoD). The executor and run_operator start every run of an operator
  // with its outputs' offsets cleared (except an output that is also an input): an output
  // has offsets only when its kernel sets them, through these.
  //
  // An input's offsets: a LoDTensor variable's; none for a bare tensor (the static path) or
  // another kind of variable.
  const lod& input_lod(std::string_view slot, std::size_t i = 0) const {
    const kernel_arg& a = input_arg(slot, i);
    if (Variable* v = a.variable(); v != nullptr && v->is<LoDTensor>()) return v->get<LoDTensor>().lod();
    return detail::no_lod;
  }
  // Writes dense output `slot` (its first variable): a LoDTensor with these offsets (checked
  // against its rows) into a variable, or the tensor alone into a bare tensor of the static
  // path, which has no offsets to keep. The offsets are copied before the output is
  // replaced, so an output that is also the input they came from is safe.
  void set_output(std::string_view slot, Tensor value, const lod& offsets = {}) const {
    kernel_arg& a = output_arg(slot);
    if (a.variable() != nullptr) {
      LoDTensor result(std::move(value), offsets);
      a.mutable_lod_tensor() = std::move(result);
    } else {
      a.mutable_tensor() = std::move(value);
    }
  }
  // Sets the offsets of output `slot`[i], keeping its tensor (checked against its rows when
  // it holds data); nothing for a bare tensor of the static path.
  void set_output_lod(std::string_view slot, lod offsets, std::size_t i = 0) const {
    kernel_arg& a = output_arg(slot, i);
    // Checked before the variable is asked for writing: refused offsets leave the output
    // untouched (its version too), as a failed operator's outputs are left.
    Variable* v = a.variable();
    if (v == nullptr) return;
    if (v->is<LoDTensor>()) v->get<LoDTensor>().check_lod(offsets);
    v->get_mutable<LoDTensor>().set_lod(std::move(offsets));
  }
  // Fluid's ShareLoD: output `out`[j] takes the offsets of input `in`[i] (none when the
  // input has none). Set the output's tensor first, so that its rows are checked.
  void share_lod(std::string_view in, std::string_view out, std::size_t i = 0, std::size_t j = 0) const {
    set_output_lod(out, input_lod(in, i), j);
  }

 private:
  std::size_t index_of(std::string_view slot, std::span<const std::string_view> names,
                       const char* what) const {
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == slot) return i;
    throw error("operator '" + std::string(op_) + "' has no " + what + " slot '" + std::string(slot) + "'");
  }
  kernel_arg& arg(const slot_args& args, std::size_t slot, std::size_t i, const char* what) const {
    const std::span<const std::uint32_t> offsets = args.offsets;
    if (slot + 1 >= offsets.size() || i >= offsets[slot + 1] - offsets[slot]) [[unlikely]]
      missing(slot, i, what);
    return args.args[offsets[slot] + i];
  }
  // Out of line and cold: every kernel calls arg(), and the message is only built on error.
  [[noreturn, gnu::cold, gnu::noinline]] void missing(std::size_t slot, std::size_t i,
                                                      const char* what) const {
    throw error("operator '" + std::string(op_) + "': " + what + " " + std::to_string(slot) + "[" +
                std::to_string(i) + "] was not given");
  }

  std::string_view op_;
  std::span<const std::string_view> input_names_, output_names_;
  device_context* device_;
  kernel_key key_;
  slot_args inputs_, outputs_;
  const attribute_map* attrs_;
};

namespace detail {
// The tensors a variable holds, each passed to f(const Tensor&): a LoDTensor's, a
// SelectedRows' value, each element of a LoDTensorArray.
template <class F>
void for_each_held_tensor(const Variable& v, F&& f) {
  if (v.is<LoDTensor>()) {
    f(v.get<LoDTensor>());
  } else if (v.is<SelectedRows>()) {
    f(v.get<SelectedRows>().value());
  } else if (v.is<LoDTensorArray>()) {
    for (const LoDTensor& t : v.get<LoDTensorArray>()) f(t);
  }
}
// The same for an argument, which may also be a bare tensor.
template <class F>
void for_each_held_tensor(const kernel_arg& a, F&& f) {
  if (const Variable* v = a.variable())
    for_each_held_tensor(*v, f);
  else if (!a.empty())
    f(a.tensor());
}

// FLUIDK_DEBUG's check that a kernel wrote none of its inputs (fluidk/debug.hpp): the inputs'
// storages and their versions before the call, then after it each one that no output shares
// (before or after the call) must have kept its version; and each input variable that is not
// also an output must have kept its own (replaced, reshaped, given other offsets or rows).
class input_write_check {
 public:
  explicit input_write_check(const execution_context& context) {
    const slot_args& in = context.all_inputs();
    for (std::size_t s = 0; s < in.slot_count(); ++s)
      for (std::size_t i = 0; i < in.slot(s).size(); ++i) {
        if (const Variable* v = in.slot(s)[i].variable()) variables_.push_back({v, v->version(), s, i});
        for_each_held_tensor(in.slot(s)[i], [&](const Tensor& t) {
          if (t.storage_id() != 0) inputs_.push_back({t, t.version(), s, i});
        });
      }
    note_outputs(context);
  }
  void after(const execution_context& context) {
    note_outputs(context);
    for (const seen_variable& in : variables_) {
      bool is_output = false;
      for (const kernel_arg& a : context.all_outputs().args)
        is_output = is_output || a.variable() == in.variable;
      FLUIDK_DEBUG_CHECK(is_output || in.variable->version() == in.version,
                         "operator '" + std::string(context.op_type()) + "', kernel " +
                             context.kernel().to_string() + ": the kernel wrote input " +
                             std::string(context.input_name(in.slot)) + "[" + std::to_string(in.index) +
                             "] (variable '" + in.variable->name() + "': its version moved from " +
                             std::to_string(in.version) + " to " + std::to_string(in.variable->version()) +
                             "); a kernel reads its inputs and writes its outputs, and an operator that "
                             "works in place names the variable as an output too");
    }
    for (const seen& in : inputs_) {
      bool in_place = false;
      for (const std::uint64_t id : output_storages_) in_place = in_place || id == in.tensor.storage_id();
      FLUIDK_DEBUG_CHECK(in_place || in.tensor.version() == in.version,
                         "operator '" + std::string(context.op_type()) + "', kernel " +
                             context.kernel().to_string() + ": the kernel wrote input " +
                             std::string(context.input_name(in.slot)) + "[" + std::to_string(in.index) +
                             "] (its storage's version moved from " + std::to_string(in.version) + " to " +
                             std::to_string(in.tensor.version()) +
                             "); a kernel reads its inputs and writes its outputs, and an operator that "
                             "works in place names the variable as an output too");
    }
  }

 private:
  void note_outputs(const execution_context& context) {
    const slot_args& out = context.all_outputs();
    for (const kernel_arg& a : out.args)
      for_each_held_tensor(a, [&](const Tensor& t) { output_storages_.push_back(t.storage_id()); });
  }
  struct seen {
    Tensor tensor;  // a copy: keeps the storage, and its version, whatever the kernel does
    std::uint64_t version;
    std::size_t slot, index;
  };
  struct seen_variable {
    const Variable* variable;
    std::uint64_t version;
    std::size_t slot, index;
  };
  std::vector<seen> inputs_;
  std::vector<seen_variable> variables_;
  std::vector<std::uint64_t> output_storages_;
};

// The exception a kernel let out, rethrown naming the operator and the kernel where its
// message does not name the operator (an input of another kind than the kernel reads, a
// transform it asked for), for the runtime path and the executor (kernel_entry). Not on the
// static path, whose call names its operator in the source and costs a direct call's
// instructions (a handler there cost 3 more, dispatch_bench under callgrind). fluidk's own
// kinds keep their type (rethrow_in_context: an allocation_error its place and size too); any
// other exception (a type of the kernel's own or derived from fluidk's, std::bad_alloc)
// leaves as it is.
[[noreturn, gnu::cold, gnu::noinline]] inline void rethrow_naming_operator(const execution_context& context) {
  try {
    throw;
  } catch (const error& e) {
    const std::string op(context.op_type());
    if (std::string_view(e.what()).find("operator '" + op + "'") != std::string_view::npos) throw;
    rethrow_in_context(e, "operator '" + op + "', kernel " + context.kernel().to_string());
  }
}

// Runs kernel k on a context: every path (static, runtime, executor) calls its kernels
// through this, so that FLUIDK_DEBUG's checks of a call are made in one place. Without
// FLUIDK_DEBUG it is the call alone.
template <class K>
[[gnu::always_inline]] inline void run_kernel(const K& k, execution_context& context) {
#if FLUIDK_DEBUG_ENABLED
  input_write_check check(context);
  k(context);
  check.after(context);
#else
  k(context);
#endif
}
}  // namespace detail

}  // namespace fluidk
