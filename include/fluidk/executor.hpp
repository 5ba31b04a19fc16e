// The executor: runs a block of operators on a scope at a place. Operators are resolved
// once (prepare); each run picks every operator's kernel through the runtime table and
// prepares its inputs: an input whose kernel type differs from the kernel's (full place
// compared, device id included) is transformed into a child scope under the same name,
// made once per operator run and only when needed. Sources are never changed, outputs are
// never overwritten by copying a transformed input back, and transformed inputs are kept in
// a bounded transfer cache that any tracked write to the source's bytes invalidates (see
// content_stamp, and docs/programs.md for what is tracked). Opt-in: eager deletion (each
// activation's storage released after its last use, prepare_options) and timing (time_runs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fluidk/content_stamp.hpp"
#include "fluidk/control_flow.hpp"
#include "fluidk/detail/error_context.hpp"
#include "fluidk/detail/runtime_linkage.hpp"
#include "fluidk/program/desc.hpp"
#include "fluidk/runtime_call.hpp"
#include "fluidk/scope.hpp"
#include "fluidk/trace.hpp"

#if FLUIDK_DETAIL_RUNTIME_HERE
#include <algorithm>
#include <chrono>
#include <functional>
#include <list>
#include <unordered_set>
#endif

namespace fluidk {

// One operator of a block, as the executor takes it: type, input and output slots with
// variable names, attributes. (A BlockDesc gives these; tests and benchmarks may too.)
struct op_invocation {
  std::string type;
  std::vector<std::pair<std::string, std::vector<std::string>>> inputs, outputs;
  attribute_map attrs;
};

// What runs did: counted across runs until reset.
struct executor_stats {
  std::uint64_t ops_run = 0;
  std::uint64_t transforms = 0;    // inputs transformed (cache misses)
  std::uint64_t cache_hits = 0;    // inputs served from the transfer cache
  std::uint64_t bytes_copied = 0;  // bytes written by copies between places
  std::uint64_t child_scopes = 0;  // child scopes made for transformed inputs
  std::uint64_t fallbacks = 0;     // operators that ran a fallback kernel
  // Of the transforms: those that stayed on one place (a layout or data type change, no copy
  // between places), and the bytes of every copy made (device copies and those alike).
  std::uint64_t reorders = 0;
  std::uint64_t bytes_transformed = 0;
  // Counted by programs prepared with eager deletion or memory counting (prepare_options): the
  // largest sum, at any point of a run, of the storage bytes that the block's activations (the
  // non-persistable variables it writes, in the run's scope, a control-flow operator's
  // sub-block's writes included; a buffer that several view counted once) and the transformed
  // copies of activations made for the operator running hold; and that sum at the end of the
  // last run (what the kept outputs hold). A loop's StepScopes holds what its kept step
  // scopes (and the scopes under them) hold. While a sub-block runs, the sum is taken over the
  // blocks together: the sub-block's own activations and the enclosing blocks' (as counted
  // after their last operator, and after each step of the loop), each buffer once.
  std::uint64_t peak_activation_bytes = 0;
  std::uint64_t live_bytes = 0;
  // Counted while timing is on (Executor::time_runs): nanoseconds in runs, inside kernels and
  // in transforming inputs. What a run spends elsewhere (choosing, bookkeeping) is
  // run_ns - kernel_ns - transform_ns.
  std::uint64_t run_ns = 0;
  std::uint64_t kernel_ns = 0;
  std::uint64_t transform_ns = 0;
  // Control flow (fluidk/control_flow.hpp): sub-block runs (a while's steps, a
  // conditional_block's runs), and conditions copied to the host to be tested (one per test of a
  // condition that lives on a device; their bytes are counted in bytes_copied).
  std::uint64_t block_runs = 0;
  std::uint64_t condition_copies = 0;
};

// How a program is prepared (Executor::prepare). Eager deletion, as Fluid's garbage collector:
// after each operator, the variables whose last use in the block that operator was drop their
// storage (the variable stays, for the next run to fill again). Only a variable that the block
// writes before it reads it, that is the run's scope's own (not a parent's) and that is not
// persistable (its VarDesc; a list of op_invocations declares none) nor named in `keep` is
// released; a view of its storage held by another variable keeps the storage alive. A
// transformed copy of such a non-persistable input is made for the operator and dropped with
// it, not kept in the transfer cache (docs/programs.md, "Eager deletion").
struct prepare_options {
  bool eager_deletion = false;
  // Count peak_activation_bytes and live_bytes without releasing anything (eager deletion
  // counts them too).
  bool count_memory = false;
  // Names never released: the outputs fetched after a run. ("= {}" lets {.eager_deletion = true}
  // pass -Wmissing-field-initializers.)
  std::vector<std::string> keep = {};
};

// What a copy of an input is made for. A dense input: the key it is transformed to. A
// LoDTensorArray, whose elements each move by rule 3 (input_target_key) over their own keys:
// the kernel's key with the operator's rules and the slot, which decide every element's
// target whatever rule 3 reads of them (one element's target would not).
struct copy_key {
  kernel_key target;
  const selection_rules* rules = nullptr;  // an array's operator rules; null for a dense input
  std::uint32_t slot = 0;                  // an array's slot

  static copy_key of(const selection_rules& rules, std::size_t slot, const Variable& v,
                     const kernel_key& target, const kernel_key& kernel) noexcept {
    if (!v.is<LoDTensorArray>()) return {target, nullptr, 0};
    return {kernel, &rules, std::uint32_t(slot)};
  }
  friend bool operator==(const copy_key&, const copy_key&) noexcept = default;
};

// Transformed inputs, keyed by the source variable's id and the copy key (device included). An
// entry is served only while the source's stamp (content_stamp) is what it was made from, and
// while the copy's own storages are unwritten (a kernel may write the input it was given).
// Bounded in bytes and in entries, least recently used first out (one of no bytes would
// otherwise stay for good). The copies of a variable that is destroyed are dropped at the
// cache's next use (drop_gone): its id is never reused, so they would never be served again.
class transfer_cache {
 public:
  explicit transfer_cache(std::size_t max_bytes = std::size_t(1) << 30,
                          std::size_t max_entries = std::size_t(1) << 16);
  transfer_cache(transfer_cache&&);
  transfer_cache& operator=(transfer_cache&&);
  ~transfer_cache();

  // The content of `source` as the copy `made_for` needs it: `make(into)` writes it on
  // a miss; `bytes_copied` is what that copy moves between places. (Defined where the runtime
  // is: the executor's moving of inputs calls it.)
  template <class Make>
  const Variable& get(const Variable& source, const copy_key& made_for, std::uint64_t bytes_copied,
                      executor_stats& stats, Make&& make);

  std::size_t bytes() const noexcept { return bytes_; }
  std::size_t size() const noexcept;
  void clear();
  // Drops the copies of the variables destroyed since the last call (get() calls it, and so
  // does each run of the executor as it starts); bytes() and size() count them until then.
  // Inline and short: one load when there is nothing to drop.
  void drop_gone() {
    if (gone_ != nullptr && gone_->any()) [[unlikely]]
      drop_gone_now();
  }

 private:
  void drop_gone_now();  // where the runtime is
  // The entries by key, and the keys from the most recently used (defined where the runtime is).
  struct table;

  std::size_t max_bytes_, max_entries_;
  std::size_t bytes_ = 0;
  std::unique_ptr<table> table_;
  const detail::gone_list<Variable>* gone_ = nullptr;  // the table's
};

namespace detail {
// Calls read(name, block) for every input and write(name, block, certain) for every output of
// the operators of block `b`, in order, with the block the operator is in; a control-flow
// operator's sub-blocks are walked between its inputs and its outputs. `certain`: the write
// happens whenever `b` runs, an output of one of b's own operators that runs no sub-block; what
// a sub-block writes, and a control-flow operator's outputs, may not be written (a condition
// that does not hold, a loop of no step). A block attribute that names no child of the
// operator's block is an error (BlockDesc::child_blocks).
template <class Read, class Write>
void walk_block_uses(const BlockDesc& b, Read&& read, Write&& write, bool top = true) {
  for (const OpDesc& op : b.ops()) {
    for (const auto& [slot, names] : op.inputs())
      for (const std::string& name : names) read(name, b);
    const std::vector<std::size_t> subs =
        b.program() != nullptr ? b.child_blocks(op.type(), op.attrs()) : sub_blocks(op);
    if (b.program() != nullptr)
      for (const std::size_t sub : subs) walk_block_uses(b.program()->block(sub), read, write, false);
    for (const auto& [slot, names] : op.outputs())
      for (const std::string& name : names) write(name, b, top && subs.empty());
  }
}
}  // namespace detail

class Executor {
 public:
  explicit Executor(fluidk::place where, std::size_t cache_bytes = std::size_t(1) << 30);
  Executor(Executor&&);
  Executor& operator=(Executor&&);
  ~Executor();

  const fluidk::place& place() const noexcept { return place_; }
  const executor_stats& stats() const noexcept { return stats_; }
  void reset_stats() noexcept { stats_ = {}; }
  transfer_cache& cache() noexcept { return cache_; }
  // Appends an op_trace per operator run to `sink` until called with nullptr (the default:
  // no tracing). The sink must outlive the runs.
  void trace_into(std::vector<op_trace>* sink) noexcept {
    trace_ = sink;
    instrumented_ = trace_ != nullptr || timing_;
  }
  // Counts run_ns, kernel_ns and transform_ns of the runs while on (off by default: two clock
  // reads per operator, and every operator takes the slower path that can read them).
  void time_runs(bool on) noexcept {
    timing_ = on;
    instrumented_ = trace_ != nullptr || timing_;
  }
  // The most steps one run of a `while` may take (fluidk/control_flow.hpp): a loop whose
  // condition is still true after that many is an error naming it, not a hang. 0, the
  // default: no limit.
  void set_max_steps(std::uint64_t steps) noexcept { max_steps_ = steps; }
  std::uint64_t max_steps() const noexcept { return max_steps_; }

  // A block resolved against a scope: operators found, variables looked up (made in the
  // scope when missing), attributes read. Valid while the scope lives.
  class prepared {
   public:
    prepared();
    // Moved, never copied: the kernels' contexts point into its own arrays.
    prepared(prepared&&) noexcept;
    prepared& operator=(prepared&&) noexcept;
    ~prepared();
    prepared(const prepared&) = delete;
    prepared& operator=(const prepared&) = delete;

    std::size_t size() const noexcept { return ops_.size(); }

   private:
    friend class Executor;
    // One input of one operator, and the key of its tensor when the last choice was made
    // (kept when every input had exactly one state, the common case).
    struct input {
      Variable* variable;
      const place_kind_info* kind = nullptr;
      int device = 0;
      data_type dtype{};
      data_layout layout{};
      std::uint32_t slot = 0;
      // Whether `t` has the key kept: then the input's state, {slot, key_of(t)}, is the one
      // the choice was made for (input_state's equality, with the place kind compared by its
      // description's address: a false "no" only makes the choice again).
      bool same_key(const Tensor& t) const noexcept {
        return &t.place().kind() == kind && t.place().device() == device && t.dtype() == dtype &&
               t.layout() == layout;
      }
      void keep(const kernel_key& key) noexcept {
        kind = &key.place().kind();
        device = key.place().device();
        dtype = key.dtype();
        layout = key.layout();
      }
    };
    // What every run reads of an operator. The operators, their inputs, outputs and slot
    // offsets each lie in one array for the whole program, in program order: a run walks
    // each array from start to end, so the hardware prefetches what the next operator needs
    // (a long program does not stay in L1, and each line of it read per operator would be a
    // miss).
    struct op {
      const operator_info* info;
      const kernel_entry* entry = nullptr;  // the last choice's kernel; null before the first run
      device_context* context = nullptr;    // of the kernel's place
      kernel_key chosen;                    // the kernel's key on the device it runs on
      std::uint32_t first_input = 0, input_count = 0;
      std::uint32_t first_output = 0, output_count = 0;
      std::uint32_t first_offset = 0;  // input_slots + 1 input offsets, then output_slots + 1
      std::uint16_t input_slots = 0, output_slots = 0;
      std::int8_t policy = -1;  // the global policy of the last choice; -1: none set
      bool fell_back = false;
      bool moves = false;           // some input has a target (rule 3)
      bool one_state_each = false;  // at the last choice, every input had exactly one state
      // A kernel is chosen, every input had one state, no fallback, nothing moves: a run
      // whose inputs have the kept keys only calls the kernel.
      bool plain = false;
    };
    // What a run reads only on a new choice, when an input moves, or when the inputs are not
    // one tensor each.
    struct local {  // this run's transfer-scope variables
      const Variable* source;
      copy_key target;
      Variable* variable;
      Scope* scope;
    };
    // A control-flow operator (fluidk/control_flow.hpp): its sub-block, prepared once on the
    // scope every step runs in (a child of the program's scope), and what a step resets.
    struct control {
      control_kind kind = control_kind::none;
      std::size_t block = 0;           // the sub-block's index
      Scope* parent = nullptr;         // the program's scope
      Scope* scope = nullptr;          // the steps' scope when they share one: a child of `parent`
      std::unique_ptr<prepared> body;  // prepared on `scope`
      std::vector<std::string> fresh;  // the body's own variables it reads before it writes them,
                                       // emptied before each step of the shared scope
      bool keep_scopes = false;        // a scope per step, kept and listed in StepScopes (Scope)
      bool scalar = true;              // conditional_block: is_scalar_condition
      // Whether `scope` is this operator's to delete: not once it was moved into a step scope
      // of an enclosing loop (reseat), which owns it from then on and may be gone first.
      bool owns_scope = true;

      control() = default;
      control(const control&) = delete;
      control& operator=(const control&) = delete;
      // The scope goes with the operator, after its body (whose own sub-blocks' scopes are
      // children of it).
      ~control();
    };
    struct cold {
      std::unique_ptr<control> flow;  // set for a control-flow operator
      std::uint32_t first_arg = 0;    // into args_
      attribute_map attrs;
      selection_request request;  // what the attributes ask for, read once
      kernel_key expected;        // of the last choice
      std::vector<input_state> last_states;
      std::vector<std::uint32_t> state_ends;           // of each input in last_states: an empty one has none
      std::vector<std::optional<kernel_key>> targets;  // rule 3's target of each input
      std::vector<local> locals;
      std::vector<char> uncached;  // per input, eager deletion: an activation, copied for the operator alone
    };
    Scope* scope_ = nullptr;
    // The place of the executor that prepared it, which its requests were made for.
    fluidk::place place_ = cpu_place;
    std::vector<op> ops_;
    std::vector<input> inputs_;
    std::vector<Variable*> input_variables_, output_variables_;
    // The names they were found by, and the scope's names_version() then: a run after a
    // variable was made or erased in the scope or a parent finds them again (rebind).
    std::vector<std::string> input_names_, output_names_;
    std::uint64_t names_version_ = 0;
    // A block's variables that are the scope's own (make_locals), made before any name is found.
    std::vector<std::string> local_names_;
    // The block's own arrays that it writes before it reads them: emptied as each run starts,
    // as in the new scope Fluid runs a program in (write_to_array grows an array: a run of fewer
    // steps than the last would otherwise keep the last run's elements past its own).
    std::vector<std::string> fresh_arrays_;
    std::vector<std::uint32_t> offsets_;
    // Each operator's kernel arguments (its inputs, then its outputs) and its kernel's
    // context over them, made on each new choice: a run of an unchanged operator builds
    // neither. An input that moves has its argument pointed at its copy for the run.
    std::vector<kernel_arg> args_;
    std::vector<execution_context> contexts_;
    std::vector<cold> cold_;
    // Eager deletion and memory counting (prepare_options). The block's activations, by name
    // (found again by rebind) and as found, each with whether it is the scope's own and the
    // storages it was last counted with; each output's activation (-1: none); after operator
    // k, activations released_[release_ends_[k] .. release_ends_[k + 1]).
    bool eager_ = false, counting_ = false;
    std::vector<std::string> activation_names_;
    std::vector<Variable*> activations_;
    std::vector<char> own_;
    std::vector<std::vector<std::uint64_t>> counted_;
    std::vector<std::int32_t> output_activation_;
    // The activations that a control-flow operator's sub-block writes (counted again after it):
    // of operator k, flow_written_[flow_written_ends_[k] .. flow_written_ends_[k + 1]).
    std::vector<std::uint32_t> flow_written_, flow_written_ends_;
    // Per operator, when counting: for a control-flow operator whose steps share one scope, a
    // counting slot (an index into counted_ past the activations) for the kept step scopes its
    // body's own StepScopes (and those of shared-scope bodies inside it) still list after it;
    // -1 otherwise.
    std::vector<std::int32_t> retained_slot_;
    std::vector<std::uint32_t> released_, release_ends_;
    // Counted storages: bytes and the activations that hold each; their sum.
    struct storage_count {
      std::size_t bytes;
      std::uint32_t holders;
    };
    std::unordered_map<std::uint64_t, storage_count> storages_;
    std::uint64_t live_ = 0;
  };

  prepared prepare(std::span<const op_invocation> ops, Scope& scope,
                   const prepare_options& options = {}) const;

  // Runs a prepared program, prepared by an executor on this one's place (an error otherwise).
  // A variable made in or erased from its scope (or a parent) since
  // the last run makes it find its variables by name again first: a name may now find
  // another variable (a new one that shadows a parent's, one made again after an erase).
  // The scope itself must outlive the prepared program.
  void run(prepared& p);

  // Prepares and runs once.
  void run(std::span<const op_invocation> ops, Scope& scope);

  // The operators of a block, as the executor takes them.
  static std::vector<op_invocation> invocations(const BlockDesc& block);
  // A block's operators, with its variables: those that its operators write and that it
  // declares without marking them persistable are the scope's own, made in it before the
  // operators' names are found, so that they shadow a parent's of the same name: executors on
  // sibling scopes under a common parent never write the parent's variable, or each other's.
  // (Fluid's executor makes every non-persistable variable of a block in its scope; only the
  // written ones here, so that an input the block only reads may be a parent's.) Persistable
  // ones (weights), and names the block does not declare, are found in the scope or a parent,
  // as with op_invocations.
  prepared prepare(const BlockDesc& block, Scope& scope, const prepare_options& options = {}) const;
  void run(const BlockDesc& block, Scope& scope);

 private:
  // The variable a program's name binds to: found in the scope or a parent, else made in the
  // scope.
  static Variable& variable_named(Scope& scope, const std::string& name);
  // Finds every variable of `p` by its name again (run, when the scope's names changed). Each
  // operator is chosen again on its next run (no entry), and that choice points its input
  // arguments at the variables found here (choose); the output arguments are pointed here.
  static void rebind(prepared& p);
  // Makes the scope's own variables of `p` (prepare(BlockDesc), run before finding names).
  static void make_locals(const prepared& p);
  prepared prepare(std::span<const op_invocation> ops, Scope& scope, const BlockDesc* block,
                   const prepare_options& options) const;

  static std::int8_t policy_code(std::optional<fallback_policy> policy) noexcept {
    return policy ? std::int8_t(*policy) : std::int8_t(-1);
  }

  // One operator of a run. The common case, an operator whose inputs have the keys of the
  // last run and none of which moves, is inline and short: a program's operators are many
  // and most of their kernels small. The rest is out of line.
  [[gnu::always_inline]] inline void run_op(prepared& p, std::size_t index);

  // An operator with something to do besides the call: a new choice (inputs of other keys,
  // another policy, or inputs that are not one tensor each), a fallback to count, inputs to
  // move or a trace to write.
  void run_op_slowly(prepared& p, std::size_t index);  // [[gnu::noinline]], where it is defined

  // --- Control flow (fluidk/control_flow.hpp) ---------------------------------------------

  // A while or conditional_block: its sub-block run while (once when) its condition holds.
  // An error inside names the operator, its block and the step (the operator that failed
  // names itself), and leaves no step scope behind.
  void run_control(prepared& p, std::size_t index);

  // One run of the sub-block: in the shared scope, its fresh variables emptied first, or in a
  // new scope kept in `scopes`.
  void run_step(prepared& p, prepared::control& c, Variable* scopes);

  // Points a prepared body at the scope of a new step, and the control-flow operators inside it
  // at new scopes below that one (their variables are found from there): the step's scope
  // owns those, and drops them with it.
  static void reseat(prepared& body, Scope& step);

  // After a failed run: the step scopes it made are dropped, and the shared scope's variables
  // emptied, so that nothing of the failed step is left to read.
  static void abandon_steps(prepared& p, prepared::control& c, Variable* scopes) noexcept;
  // The StepScopes (or Scope) variable of control-flow operator `index`, or nullptr.
  static Variable* step_scopes_of(const prepared& p, std::size_t index) noexcept;

  // Deletes the step scopes that `scopes` lists (children of the program's scope; one already
  // gone is skipped) and empties the list.
  static void drop_step_scopes(prepared& p, Variable* scopes) noexcept;
  // A StepScopes' scopes by address and serial, sorted (empty when it has no serials): a listed
  // scope is one of them only when both match, so a scope that is gone, or a new one at its
  // address, is never taken for it. (Addresses compared as integers: < on pointers to unrelated
  // objects is unspecified.)
  using listed_scopes = std::vector<std::pair<std::uintptr_t, std::uint64_t>>;
  static listed_scopes listed(const StepScopes& steps);
  static bool lists(const listed_scopes& listed, const Scope& scope) noexcept;

  // Whether a condition variable holds: a bool tensor of one element, read on the host. One
  // on a device is copied to the host first, counted (condition_copies, bytes_copied) and
  // traced as an input of the operator's trace entry `traced`.
  static constexpr std::size_t no_trace = std::size_t(-1);
  bool condition_holds(std::string_view op, std::string_view slot, const Variable& v, std::size_t traced);
  [[noreturn]] static void bad_condition(std::string_view op, std::string_view slot, const Variable& v,
                                         const Tensor* t);

  // A run with timing, eager deletion or memory counting: each operator as run() runs it,
  // then (counting) its outputs' storages counted and the activations whose last use it was
  // released.
  void run_instrumented(prepared& p);

  // What the activations hold as a run starts (the kept outputs of the last run, anything the
  // caller set): counted afresh, as they may have changed between runs.
  void begin_count(prepared& p);
  // Counts the storages activation `a` holds now (its last counted ones uncounted first): a
  // tensor's, or those of every variable of the scopes a StepScopes lists and of the scopes
  // under them. A storage that a block around p counts (enclosing_) counts there, with no
  // bytes here.
  void count_storages(prepared& p, std::size_t a);
  // Adds the storages of the variables of `step` and the scopes under it to activation `a`'s
  // (a loop's StepScopes, as each kept step ends).
  void count_step(prepared& p, std::size_t a, const Scope& step);
  // Adds to counting slot `a` of p the scopes that `steps` lists and that are still there under
  // `under` (each with the scopes under it).
  void count_listed(prepared& p, std::size_t a, const StepScopes& steps, const Scope& under);
  // Counts again, in control-flow operator `index`'s slot (retained_slot_), the kept step
  // scopes of the loops inside its body whose StepScopes are the body's own: they live on
  // after the operator, in its shared scope, until those loops run again.
  void count_retained(prepared& p, std::size_t index);
  // The counting block whose own activation a loop's StepScopes variable is, and which one:
  // p (its activation `a`, -1 for none) or a block around it; none when no block counts it.
  struct steps_owner {
    prepared* block = nullptr;
    std::size_t activation = 0;
  };
  steps_owner owner_of(prepared& p, std::int32_t a, const Variable& scopes) const noexcept;
  void add_retained(prepared& p, std::size_t slot, const prepared& body);
  void count_tensor(prepared& p, std::size_t a, const Tensor& t);
  // Takes activation `a`'s storages out of p's count, handing over those p lets go of.
  void uncount_storages(prepared& p, std::size_t a);
  // A storage whose bytes p counted and no longer counts (p let go of it, or p's run as a
  // sub-block ended) that a block around p still holds with none (counted there while p held
  // it) counts its bytes there from now on. Whether such a block took them.
  bool hand_over(const prepared& p, std::uint64_t id, std::size_t bytes) noexcept;

  // After operator `index`: its outputs counted, the peak taken (its inputs' copies still
  // alive while it ran), the activations it used last released (eager deletion).
  void after_op(prepared& p, std::size_t index);
  // Counts again what control-flow operator `index`'s sub-block writes of p's activations
  // (nothing for another operator).
  void count_flow_writes(prepared& p, std::size_t index);
  // What the blocks around the running one hold: the sum of their counts.
  std::uint64_t enclosing_bytes() const noexcept {
    std::uint64_t bytes = 0;
    for (const prepared* q : enclosing_) bytes += q->live_;
    return bytes;
  }

  // Drops a variable's storage, keeping its kind: the next run's writer fills it again.
  static void release(Variable& v);

  // The context of operator `index`'s kernel, over its arguments in args_.
  static execution_context context_for(prepared& p, std::size_t index);

  // The inputs' states of this run, in order, against those of the last choice (all of them,
  // whether or not each input had one), input by input: two variables of a slot that swap
  // which one is empty give the same list of states, but not the same targets.
  static bool same_states(const prepared& p, const prepared::op& o, std::span<const prepared::input> ins);

  // Rules 1 to 3 for the inputs of this run: the kernel, its device context, each input's
  // target, and the states they were chosen for.
  static void choose(prepared& p, std::size_t index, std::optional<fallback_policy> policy);

  // Points the arguments of the inputs that move at their copies: from the transfer cache, or
  // made and cached, viewed from `child` (made here). A variable given to two slots that need
  // different copies gets the second in a scope of its own below the first.
  void move_inputs(prepared& p, std::size_t index, Scope*& child, op_trace* trace);

  // A copy of activation `v` for this operator alone (eager deletion): kept out of the transfer
  // cache, which would hold it, never to serve it again, past the release of its source.
  const Variable& own_copy(const operator_info& info, std::size_t slot, const Variable& v,
                           const kernel_key& target, const kernel_key& kernel, std::uint64_t bytes_copied);

  // The bytes that bringing input `v` of slot `slot` to the kernel copies between places.
  static std::uint64_t copied_bytes(const selection_rules& rules, std::size_t slot, const Variable& v,
                                    const kernel_key& kernel);

  // The variable of the transfer scope that views `content` for source `v` and `target`:
  // made once per run; when the child already holds the name for another target (the
  // same variable in two slots, transformed differently), in a new scope below it.
  static Variable& local_for(std::vector<prepared::local>& locals, Scope& child, const Variable& v,
                             const copy_key& target, const Variable& content);

  // The child variable views the cached content: it shares the buffers, copies nothing.
  static void share_content(const Variable& from, Variable& to);

  fluidk::place place_;
  transfer_cache cache_;
  operator_registry* registry_;  // the process's, looked up once: it is on every operator's path
  executor_stats stats_;
  std::vector<op_trace>* trace_ = nullptr;
  bool timing_ = false;
  bool instrumented_ = false;  // tracing or timing: no operator takes the plain path
  std::uint64_t max_steps_ = 0;
  int depth_ = 0;  // sub-blocks being run: only the outermost run counts run_ns
  // Counting, while a sub-block runs: the blocks around it that count, outermost first. Their
  // counts (the kept step scopes of their loops included) are added to the sub-block's for its
  // peak, and a storage one of them counts with its bytes has none in the blocks inside it
  // (hand_over moves the bytes when their block lets go of it).
  std::vector<prepared*> enclosing_;
  std::vector<std::unique_ptr<Variable>> own_copies_;  // the running operator's (own_copy)
  std::uint64_t copy_bytes_ = 0;                       // their bytes
};

#if FLUIDK_DETAIL_RUNTIME_HERE
namespace detail {
// The executor's timing (Executor::time_runs) reads this clock.
using executor_clock = std::chrono::steady_clock;
inline std::uint64_t nanoseconds(executor_clock::duration d) noexcept {
  return std::uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}
}  // namespace detail

// The special members are compiled where the rest of the runtime is: a file that only holds an
// executor and its prepared programs instantiates none of their members' containers.
struct transfer_cache::table {
  // What a copy is made for besides its source: the copy key's target (ordinal and device),
  // rules and slot.
  struct target {
    std::size_t ordinal;
    int device;
    const selection_rules* rules;
    std::uint32_t slot;
    friend bool operator==(const target&, const target&) = default;
  };
  using position = std::list<std::pair<std::uint64_t, target>>::iterator;
  struct entry {
    target made_for;
    content_stamp source, copy;
    std::unique_ptr<Variable> value;
    std::size_t bytes;
    position used;  // in lru
  };

  // The copies by their source's id (one per target, rarely more than one), and (id, target)
  // from the most recently used.
  std::unordered_map<std::uint64_t, std::vector<entry>> sources;
  std::list<std::pair<std::uint64_t, target>> lru;

  using by_source = std::unordered_map<std::uint64_t, std::vector<entry>>::iterator;
  // Drops a copy; `bytes` is the cache's count of its entries' bytes. The source is no longer
  // watched once none of its copies is left, unless `keep_source` (a copy of it is being made).
  void erase(std::size_t& bytes, by_source it, const target& to, bool keep_source = false) {
    std::vector<entry>& copies = it->second;
    const auto e =
        std::find_if(copies.begin(), copies.end(), [&](const entry& c) { return c.made_for == to; });
    bytes -= e->bytes;
    lru.erase(e->used);
    copies.erase(e);
    if (copies.empty() && !keep_source) forget(it);
  }
  void forget(by_source it) {
    const std::uint64_t id = it->first;
    sources.erase(it);
    gone.unwatch(id);
  }
  // Drops the copies of the sources destroyed since (detail/gone_notice.hpp): a lookup per
  // source gone, whatever the cache holds.
  void drop_gone(std::size_t& bytes) {
    for (const std::uint64_t id : gone.take())
      if (const auto it = sources.find(id); it != sources.end()) {
        for (const entry& e : it->second) {
          bytes -= e.bytes;
          lru.erase(e.used);
        }
        sources.erase(it);
      }
  }

  // Last: out of the lists before the copies go, with the cache.
  detail::gone_list<Variable> gone;
};

FLUIDK_DETAIL_RUNTIME_LINKAGE transfer_cache::transfer_cache(std::size_t max_bytes, std::size_t max_entries)
    : max_bytes_(max_bytes),
      max_entries_(max_entries),
      table_(std::make_unique<table>()),
      gone_(&table_->gone) {}
FLUIDK_DETAIL_RUNTIME_LINKAGE transfer_cache::transfer_cache(transfer_cache&& other)
    : max_bytes_(other.max_bytes_),
      max_entries_(other.max_entries_),
      bytes_(std::exchange(other.bytes_, 0)),
      table_(std::move(other.table_)),
      gone_(std::exchange(other.gone_, nullptr)) {}
FLUIDK_DETAIL_RUNTIME_LINKAGE transfer_cache& transfer_cache::operator=(transfer_cache&& other) {
  max_bytes_ = other.max_bytes_;
  max_entries_ = other.max_entries_;
  bytes_ = std::exchange(other.bytes_, 0);
  table_ = std::move(other.table_);
  gone_ = std::exchange(other.gone_, nullptr);
  return *this;
}
FLUIDK_DETAIL_RUNTIME_LINKAGE transfer_cache::~transfer_cache() = default;

// A cache moved from has no table: it holds nothing, and makes one when it is used again.
FLUIDK_DETAIL_RUNTIME_LINKAGE std::size_t transfer_cache::size() const noexcept {
  return table_ != nullptr ? table_->lru.size() : 0;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void transfer_cache::drop_gone_now() { table_->drop_gone(bytes_); }

FLUIDK_DETAIL_RUNTIME_LINKAGE void transfer_cache::clear() {
  if (table_ != nullptr) {
    table_->sources.clear();
    table_->lru.clear();
    table_->gone.unwatch_all();
  }
  bytes_ = 0;
}

template <class Make>
const Variable& transfer_cache::get(const Variable& source, const copy_key& made_for,
                                    std::uint64_t bytes_copied, executor_stats& stats, Make&& make) {
  if (table_ == nullptr) {  // moved from
    table_ = std::make_unique<table>();
    gone_ = &table_->gone;
  }
  drop_gone();
  table& t = *table_;
  const std::uint64_t id = source.id();
  const table::target to{made_for.target.ordinal(), made_for.target.place().device(), made_for.rules,
                         made_for.slot};
  auto copies = t.sources.find(id);
  if (copies != t.sources.end())
    for (table::entry& e : copies->second) {
      if (e.made_for != to) continue;
      if (e.source.matches(source) && e.copy.matches(*e.value)) {
        t.lru.splice(t.lru.begin(), t.lru, e.used);
        ++stats.cache_hits;
        return *e.value;
      }
      // Stale: dropped before the new copy is made, the source still watched for it.
      t.erase(bytes_, copies, to, true);
      break;
    }
  content_stamp stamp(source);  // before make(), which may run for long on another stream
  auto value = std::make_unique<Variable>(source.name());
  try {
    make(*value);
  } catch (...) {
    if (copies != t.sources.end() && copies->second.empty()) t.forget(copies);
    throw;
  }
  ++stats.transforms;
  stats.bytes_copied += bytes_copied;
  std::size_t bytes = 0;
  value->for_each_tensor([&](const Tensor& c) { bytes += c.initialized() ? c.storage_bytes() : 0; });
  stats.bytes_transformed += bytes;
  if (bytes_copied == 0) ++stats.reorders;
  content_stamp copy(*value);
  // Watched before the slot is made (a slot is always watched; a watch without a slot is
  // harmless), and never a position in lru without its entry.
  if (copies == t.sources.end()) {
    t.gone.watch(source.gone_notice(), id);
    copies = t.sources.try_emplace(id).first;
  }
  t.lru.emplace_front(id, to);
  const Variable& kept = *value;
  try {
    copies->second.push_back(
        table::entry{to, std::move(stamp), std::move(copy), std::move(value), bytes, t.lru.begin()});
  } catch (...) {
    t.lru.pop_front();
    throw;
  }
  bytes_ += bytes;
  // Never the copy just made: it is the most recently used.
  while ((bytes_ > max_bytes_ || t.lru.size() > max_entries_) && t.lru.size() > 1) {
    const auto [oldest, oldest_target] = t.lru.back();
    t.erase(bytes_, t.sources.find(oldest), oldest_target);
  }
  return kept;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE Executor::Executor(fluidk::place where, std::size_t cache_bytes)
    : place_(where), cache_(cache_bytes), registry_(&operator_registry::instance()) {}
FLUIDK_DETAIL_RUNTIME_LINKAGE Executor::Executor(Executor&&) = default;
FLUIDK_DETAIL_RUNTIME_LINKAGE Executor& Executor::operator=(Executor&&) = default;
FLUIDK_DETAIL_RUNTIME_LINKAGE Executor::~Executor() = default;

FLUIDK_DETAIL_RUNTIME_LINKAGE Executor::prepared::prepared() = default;
FLUIDK_DETAIL_RUNTIME_LINKAGE Executor::prepared::prepared(prepared&&) noexcept = default;
FLUIDK_DETAIL_RUNTIME_LINKAGE Executor::prepared& Executor::prepared::operator=(prepared&&) noexcept =
    default;
FLUIDK_DETAIL_RUNTIME_LINKAGE Executor::prepared::~prepared() = default;

FLUIDK_DETAIL_RUNTIME_LINKAGE Executor::prepared::control::~control() {
  body.reset();
  if (scope != nullptr && owns_scope) try {
      parent->delete_scope(*scope);
    } catch (const error&) {  // deleted with the scope's other children already
    }
}

FLUIDK_DETAIL_RUNTIME_LINKAGE Variable& Executor::variable_named(Scope& scope, const std::string& name) {
  Variable* v = scope.find_var(name);
  return v != nullptr ? *v : scope.var(name);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::rebind(prepared& p) {
  Scope& scope = *p.scope_;
  make_locals(p);
  for (std::size_t i = 0; i < p.input_variables_.size(); ++i)
    p.input_variables_[i] = p.inputs_[i].variable = &variable_named(scope, p.input_names_[i]);
  for (std::size_t i = 0; i < p.output_variables_.size(); ++i)
    p.output_variables_[i] = &variable_named(scope, p.output_names_[i]);
  for (std::size_t k = 0; k < p.ops_.size(); ++k) {
    prepared::op& o = p.ops_[k];
    for (std::uint32_t i = 0; i < o.output_count; ++i)
      p.args_[p.cold_[k].first_arg + o.input_count + i] = kernel_arg(p.output_variables_[o.first_output + i]);
    o.entry = nullptr;
    o.plain = false;
  }
  for (std::size_t a = 0; a < p.activations_.size(); ++a) {
    p.activations_[a] = &variable_named(scope, p.activation_names_[a]);
    p.own_[a] = scope.find_local(p.activation_names_[a]) == p.activations_[a];
  }
  p.names_version_ = scope.names_version();
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::make_locals(const prepared& p) {
  for (const std::string& name : p.local_names_) p.scope_->var(name);
}

[[gnu::always_inline]] inline void Executor::run_op(prepared& p, std::size_t index) {
  prepared::op& o = p.ops_[index];
  // Rules 1 to 3 of kernel_choice.hpp are functions of the inputs' states, of the
  // attributes (read at prepare) and of the fallback policy: while those are what they were
  // at the last choice, so are the kernel and each input's target. The states are compared
  // as they are read, without being stored: one tensor each, against each input's kept
  // key (where every input had one), else all of them against the last list.
  bool plain = o.plain && registry_->global_fallback_code() == o.policy && !instrumented_;
  const prepared::input* in = p.inputs_.data() + o.first_input;
  for (std::uint32_t i = 0; i < o.input_count && plain; ++i) {
    const Tensor* t = tensor_of(*in[i].variable);
    plain = t != nullptr && t->initialized() && in[i].same_key(*t);
  }
  if (!plain) [[unlikely]] {
    run_op_slowly(p, index);
    return;
  }
  run_kernel_clearing_lods(*o.entry, p.contexts_[index],
                           {p.output_variables_.data() + o.first_output, o.output_count},
                           {p.input_variables_.data() + o.first_input, o.input_count});
  ++stats_.ops_run;
}

[[gnu::noinline]] FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::run_op_slowly(prepared& p, std::size_t index) {
  prepared::op& o = p.ops_[index];
  if (p.cold_[index].flow) {
    run_control(p, index);
    return;
  }
  const std::optional<fallback_policy> policy = registry_->global_fallback();
  const bool same = o.entry != nullptr && policy_code(policy) == o.policy &&
                    same_states(p, o, {p.inputs_.data() + o.first_input, o.input_count});
  if (!same) {
    choose(p, index, policy);
  } else if (o.fell_back) {
    registry_->note_fallback({o.info->name(), p.cold_[index].expected, o.chosen});  // counted every time
  }
  if (o.fell_back) ++stats_.fallbacks;
  op_trace* trace =
      trace_ != nullptr
          ? &trace_->emplace_back(
                op_trace{std::string(o.info->name()), p.cold_[index].expected, o.chosen, o.fell_back, {}})
          : nullptr;
  // An input that moves is read from its copy in a child scope, deleted when the operator
  // is done, or fails.
  // Copies made for this operator alone (eager deletion's) go with it.
  Scope* child = nullptr;
  struct child_guard {
    Scope& parent;
    Scope*& child;
    std::vector<std::unique_ptr<Variable>>& own_copies;
    ~child_guard() {
      if (child != nullptr) parent.delete_scope(*child);
      own_copies.clear();
    }
  } guard{*p.scope_, child, own_copies_};
  if (!timing_) [[likely]] {
    if (o.moves) move_inputs(p, index, child, trace);
    run_kernel_clearing_lods(*o.entry, p.contexts_[index],
                             {p.output_variables_.data() + o.first_output, o.output_count},
                             {p.input_variables_.data() + o.first_input, o.input_count});
  } else {
    const auto start = detail::executor_clock::now();
    if (o.moves) move_inputs(p, index, child, trace);
    const auto moved = detail::executor_clock::now();
    run_kernel_clearing_lods(*o.entry, p.contexts_[index],
                             {p.output_variables_.data() + o.first_output, o.output_count},
                             {p.input_variables_.data() + o.first_input, o.input_count});
    stats_.transform_ns += detail::nanoseconds(moved - start);
    stats_.kernel_ns += detail::nanoseconds(detail::executor_clock::now() - moved);
  }
  ++stats_.ops_run;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::run_control(prepared& p, std::size_t index) {
  const prepared::op& o = p.ops_[index];
  prepared::control& c = *p.cold_[index].flow;
  const std::uint32_t* in = p.offsets_.data() + o.first_offset;
  const std::uint32_t* out = in + o.input_slots + 1;
  // Condition is the while's input slot 1, Cond the conditional_block's slot 0.
  const std::uint32_t slot = c.kind == control_kind::while_loop ? 1 : 0;
  const std::span<Variable* const> conditions(p.input_variables_.data() + o.first_input + in[slot],
                                              in[slot + 1] - in[slot]);
  Variable* scopes = step_scopes_of(p, index);
  const std::string_view name = o.info->name();
  ++stats_.ops_run;
  if (c.keep_scopes) drop_step_scopes(p, scopes);  // the last run's
  // Traced: the operator's own entry, then its sub-block's runs; the entry counts them and
  // lists the condition's copies to the host (found by index: the body's traces grow the list).
  const std::size_t traced = trace_ != nullptr ? trace_->size() : no_trace;
  if (trace_ != nullptr) {
    const kernel_key none(place_, data_type::boolean, data_layout::any, library_type::plain);
    trace_->push_back(op_trace{std::string(name), none, none, false, {}});
  }
  std::uint64_t step = 0;  // runs of the sub-block so far
  struct count_runs {
    std::vector<op_trace>* trace;
    std::size_t traced;
    const std::uint64_t& runs;
    ~count_runs() {
      if (trace != nullptr && traced < trace->size()) (*trace)[traced].block_runs = runs;
    }
  } counting{trace_, traced, step};
  // Counting: while the sub-block runs, what this block holds counts with it (enclosing_):
  // as last counted, and again after each step, what the step wrote of it and the step's scope
  // when the loop keeps it. A step costs what it wrote, not what the block holds. The kept
  // steps count in the block whose own activation the StepScopes variable is: this one, or
  // one around it (a loop in a body, its StepScopes declared by an enclosing block).
  const steps_owner owner = p.counting_ && scopes != nullptr
                                ? owner_of(p, p.output_activation_[o.first_output + out[1]], *scopes)
                                : steps_owner{};
  struct enclosed {
    std::vector<prepared*>& blocks;
    std::size_t depth;
    ~enclosed() { blocks.resize(depth); }
  } within{enclosing_, enclosing_.size()};
  // What the body's own StepScopes keep is counted by the body while it runs (its
  // begin_count), and here again after the operator (after_op): not twice meanwhile, nor
  // after the inner loops dropped it.
  if (p.counting_ && p.retained_slot_[index] >= 0) uncount_storages(p, std::size_t(p.retained_slot_[index]));
  if (p.counting_) enclosing_.push_back(&p);
  // The steps' owner counts with this block among the blocks around the sub-block: a storage
  // that this block holds too (a kept step's view of its variable) counts once, here. (For
  // this block's own counts that changes nothing: a storage it holds already counts in it.)
  if (owner.block != nullptr) count_storages(*owner.block, owner.activation);  // dropped above
  auto stepped = [&] {
    if (!p.counting_) return;
    count_flow_writes(p, index);
    if (owner.block != nullptr && c.keep_scopes)
      count_step(*owner.block, owner.activation, *scopes->get<StepScopes>().scopes.back());
  };
  // The sub-block's operators count their own copies (copy_bytes_); its last one's are gone
  // when it returns, and this operator's own copies count again.
  struct own_copies {
    std::uint64_t& bytes;
    const std::uint64_t own;
    ~own_copies() { bytes = own; }
  } copies{copy_bytes_, copy_bytes_};
  ++depth_;
  try {
    if (c.kind == control_kind::while_loop) {
      while (condition_holds(name, "Condition", *conditions[0], traced)) {
        if (max_steps_ != 0 && step >= max_steps_)
          throw error("its condition '" + conditions[0]->name() + "' is still true after " +
                      std::to_string(step) + " steps, the most Executor::set_max_steps allows");
        run_step(p, c, scopes);
        ++step;
        stepped();
      }
    } else {
      bool holds = true;
      if (c.scalar) {
        holds = condition_holds(name, "Cond", *conditions[0], traced);
      } else {
        for (const Variable* v : conditions) {
          const Tensor* t = tensor_of(*v);
          holds = holds && t != nullptr && t->initialized() && t->numel() != 0;
        }
      }
      if (holds) {
        run_step(p, c, scopes);
        ++step;
        stepped();  // its kept scope, where a block around this one declares its Scope
      }
    }
    --depth_;
  } catch (const error& e) {
    --depth_;
    abandon_steps(p, c, scopes);
    detail::rethrow_in_context(
        e, "operator '" + std::string(name) + "' (block " + std::to_string(c.block) +
               (c.kind == control_kind::while_loop ? "), step " + std::to_string(step + 1) : ")"));
  } catch (...) {
    --depth_;
    abandon_steps(p, c, scopes);
    throw;
  }
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::run_step(prepared& p, prepared::control& c, Variable* scopes) {
  prepared& body = *c.body;
  if (c.keep_scopes) {
    // The list first, room for the step in it too: whatever throws, before the step's scope
    // is made, where nothing would list it or drop it.
    StepScopes& listed = scopes->get_mutable<StepScopes>();
    listed.serials.resize(listed.scopes.size());  // a list another writer made without them
    listed.scopes.reserve(listed.scopes.size() + 1);
    listed.serials.reserve(listed.scopes.size() + 1);
    Scope& step = p.scope_->new_scope();
    listed.scopes.push_back(&step);
    listed.serials.push_back(step.serial());
    reseat(body, step);
  } else {
    for (const std::string& name : c.fresh)
      if (Variable* v = c.scope->find_local(name)) release(*v);
  }
  ++stats_.block_runs;
  run(body);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::reseat(prepared& body, Scope& step) {
  body.scope_ = &step;
  rebind(body);
  for (prepared::cold& c : body.cold_)
    if (c.flow) {
      prepared::control& inner = *c.flow;
      inner.parent = &step;
      inner.scope = &step.new_scope();
      inner.owns_scope = false;
      reseat(*inner.body, *inner.scope);
    }
}

FLUIDK_DETAIL_RUNTIME_LINKAGE Variable* Executor::step_scopes_of(const prepared& p,
                                                                 std::size_t index) noexcept {
  // StepScopes and Scope are output slot 1 of both control-flow operators.
  const prepared::op& o = p.ops_[index];
  const std::uint32_t* out = p.offsets_.data() + o.first_offset + o.input_slots + 1;
  return out[2] > out[1] ? p.output_variables_[o.first_output + out[1]] : nullptr;
}

// Kept step scopes go, and with them what ran in them; a shared scope's variables are emptied,
// and so are those of the loops and conditionals inside its body, which ran in scopes of their own.
FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::abandon_steps(prepared& p, prepared::control& c,
                                                           Variable* scopes) noexcept {
  if (c.keep_scopes) {
    drop_step_scopes(p, scopes);
    return;
  }
  prepared& body = *c.body;
  for (const std::string& name : body.local_names_)
    if (Variable* v = c.scope->find_local(name)) release(*v);
  for (std::size_t k = 0; k < body.ops_.size(); ++k)
    if (prepared::control* inner = body.cold_[k].flow.get())
      abandon_steps(body, *inner, step_scopes_of(body, k));
}

FLUIDK_DETAIL_RUNTIME_LINKAGE Executor::listed_scopes Executor::listed(const StepScopes& steps) {
  listed_scopes out;
  if (steps.serials.size() != steps.scopes.size()) return out;
  out.reserve(steps.scopes.size());
  for (std::size_t i = 0; i < steps.scopes.size(); ++i)
    out.emplace_back(reinterpret_cast<std::uintptr_t>(steps.scopes[i]), steps.serials[i]);
  std::sort(out.begin(), out.end());
  return out;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE bool Executor::lists(const listed_scopes& listed, const Scope& scope) noexcept {
  return std::binary_search(listed.begin(), listed.end(),
                            std::pair{reinterpret_cast<std::uintptr_t>(&scope), scope.serial()});
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::drop_step_scopes(prepared& p, Variable* scopes) noexcept {
  if (scopes == nullptr || !scopes->is<StepScopes>()) return;
  StepScopes& steps = scopes->get_mutable<StepScopes>();
  // The listed children that are still there (one gone with its parent's children, or with an
  // enclosing loop's step, is skipped; a new child at its address is not it).
  try {
    const listed_scopes wanted = listed(steps);
    std::vector<Scope*> found;
    p.scope_->for_each_kid([&](const Scope& kid) {
      if (lists(wanted, kid)) found.push_back(const_cast<Scope*>(&kid));
    });
    for (Scope* step : found) p.scope_->delete_scope(*step);
  } catch (...) {  // no memory for the lists: the steps go with the program's scope
  }
  steps.scopes.clear();
  steps.serials.clear();
}

FLUIDK_DETAIL_RUNTIME_LINKAGE bool Executor::condition_holds(std::string_view op, std::string_view slot,
                                                             const Variable& v, std::size_t traced) {
  const Tensor* t = v.is<LoDTensor>() ? &v.get<LoDTensor>() : nullptr;
  if (t == nullptr || !t->initialized() || t->dtype() != data_type::boolean || t->numel() != 1) [[unlikely]]
    bad_condition(op, slot, v, t);
  if (t->place().host_accessible()) [[likely]]
    return *t->data<bool>();
  const kernel_key from = key_of(*t);
  const kernel_key to(cpu_place, data_type::boolean, t->layout(), library_type::plain);
  const Tensor host = detail::preparing_input(op, slot, v.name(), to, [&] { return transform(*t, to); });
  const std::uint64_t bytes = plan_transform(from, to).bytes_copied(t->dims());
  ++stats_.condition_copies;
  stats_.bytes_copied += bytes;
  if (traced != no_trace && trace_ != nullptr && traced < trace_->size())
    (*trace_)[traced].inputs.push_back(
        {std::string(slot), v.name(), from, to, plan_transform(from, to).describe(), bytes, false});
  return *host.data<bool>();
}

[[noreturn, gnu::cold, gnu::noinline]] FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::bad_condition(
    std::string_view op, std::string_view slot, const Variable& v, const Tensor* t) {
  std::string holds;
  if (t == nullptr)
    holds = std::string(name_of(v.kind()));
  else if (!t->initialized())
    holds = "an empty tensor";
  else
    holds = std::string(name_of(t->dtype())) + " tensor of dims " + t->dims().to_string();
  throw error("operator '" + std::string(op) + "' input " + std::string(slot) + " ('" + v.name() +
              "'): a condition is a bool tensor of one element; it holds " + holds);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::run_instrumented(prepared& p) {
  const auto start = timing_ ? detail::executor_clock::now() : detail::executor_clock::time_point{};
  const std::size_t count = p.ops_.size();
  if (p.counting_) {
    begin_count(p);
    for (std::size_t i = 0; i < count; ++i) {
      copy_bytes_ = 0;
      run_op(p, i);
      after_op(p, i);
    }
    stats_.live_bytes = p.live_;
    // A sub-block's run ends: its count leaves the sum (its next run counts again).
    if (!enclosing_.empty())
      for (auto& [id, held] : p.storages_)
        if (hand_over(p, id, held.bytes)) {
          p.live_ -= held.bytes;
          held.bytes = 0;
        }
  } else {
    for (std::size_t i = 0; i < count; ++i) run_op(p, i);
  }
  if (timing_ && depth_ == 0) stats_.run_ns += detail::nanoseconds(detail::executor_clock::now() - start);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::begin_count(prepared& p) {
  p.storages_.clear();
  p.live_ = 0;
  for (std::size_t a = 0; a < p.activations_.size(); ++a) {
    p.counted_[a].clear();
    if (p.own_[a]) count_storages(p, a);
  }
  for (std::size_t k = 0; k < p.retained_slot_.size(); ++k)
    if (p.retained_slot_[k] >= 0) {
      p.counted_[std::size_t(p.retained_slot_[k])].clear();
      count_retained(p, k);
    }
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::count_storages(prepared& p, std::size_t a) {
  uncount_storages(p, a);
  const Variable& v = *p.activations_[a];
  if (v.is<StepScopes>()) {
    count_listed(p, a, v.get<StepScopes>(), *p.scope_);
    return;
  }
  v.for_each_tensor([&](const Tensor& t) { count_tensor(p, a, t); });
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::count_listed(prepared& p, std::size_t a, const StepScopes& steps,
                                                          const Scope& under) {
  // The listed scopes that are still there, found under `under` by address and
  // serial: a listed scope may be gone (with an enclosing loop's step, or deleted with its
  // parent's children), and a new scope may have its address. Nothing is read of a scope
  // before it is found so.
  const listed_scopes wanted = listed(steps);
  std::size_t left = wanted.size();
  auto find = [&](auto& self, const Scope& s) -> void {
    s.for_each_kid([&](const Scope& kid) {
      if (left == 0) return;
      if (lists(wanted, kid)) {
        count_step(p, a, kid);
        --left;
      } else {
        self(self, kid);
      }
    });
  };
  find(find, under);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE Executor::steps_owner Executor::owner_of(
    prepared& p, std::int32_t a, const Variable& scopes) const noexcept {
  if (a >= 0 && p.own_[std::size_t(a)]) return {&p, std::size_t(a)};
  for (auto q = enclosing_.rbegin(); q != enclosing_.rend(); ++q)
    for (std::size_t b = 0; b < (*q)->activations_.size(); ++b)
      if ((*q)->own_[b] && (*q)->activations_[b] == &scopes) return {*q, b};
  return {};
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::count_retained(prepared& p, std::size_t index) {
  if (p.retained_slot_[index] < 0) return;
  const std::size_t slot = std::size_t(p.retained_slot_[index]);
  uncount_storages(p, slot);
  add_retained(p, slot, *p.cold_[index].flow->body);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::add_retained(prepared& p, std::size_t slot,
                                                          const prepared& body) {
  for (std::size_t a = 0; a < body.activations_.size(); ++a)
    if (body.own_[a] && body.activations_[a]->is<StepScopes>())
      count_listed(p, slot, body.activations_[a]->get<StepScopes>(), *body.scope_);
  for (const prepared::cold& c : body.cold_)
    if (c.flow && !c.flow->keep_scopes) add_retained(p, slot, *c.flow->body);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::count_step(prepared& p, std::size_t a, const Scope& step) {
  step.for_each_variable(
      [&](const Variable& v) { v.for_each_tensor([&](const Tensor& t) { count_tensor(p, a, t); }); });
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::count_tensor(prepared& p, std::size_t a, const Tensor& t) {
  const std::uint64_t id = t.storage_id();
  if (id == 0) return;
  p.counted_[a].push_back(id);
  // A storage that a block around p counts with its bytes counts there. One counted there with
  // none (a kept step's view, counted by an enclosing owner while a block inside it held the
  // storage) has its bytes in that inner block, p perhaps, which counts it again here.
  const bool outside = std::any_of(enclosing_.begin(), enclosing_.end(), [&](const prepared* q) {
    const auto found = q->storages_.find(id);
    return found != q->storages_.end() && found->second.bytes != 0;
  });
  auto [it, made] = p.storages_.try_emplace(id, prepared::storage_count{outside ? 0 : t.storage_bytes(), 0});
  if (made) p.live_ += it->second.bytes;
  ++it->second.holders;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE bool Executor::hand_over(const prepared& p, std::uint64_t id,
                                                       std::size_t bytes) noexcept {
  if (bytes == 0) return false;
  for (prepared* q : enclosing_) {
    if (q == &p) continue;
    const auto held = q->storages_.find(id);
    if (held == q->storages_.end() || held->second.bytes != 0) continue;
    held->second.bytes = bytes;
    q->live_ += bytes;
    return true;
  }
  return false;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::uncount_storages(prepared& p, std::size_t a) {
  for (const std::uint64_t id : p.counted_[a]) {
    const auto it = p.storages_.find(id);
    if (--it->second.holders == 0) {
      p.live_ -= it->second.bytes;
      hand_over(p, id, it->second.bytes);
      p.storages_.erase(it);
    }
  }
  p.counted_[a].clear();
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::count_flow_writes(prepared& p, std::size_t index) {
  for (std::uint32_t r = p.flow_written_ends_[index]; r < p.flow_written_ends_[index + 1]; ++r)
    if (p.own_[p.flow_written_[r]]) count_storages(p, p.flow_written_[r]);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::after_op(prepared& p, std::size_t index) {
  const prepared::op& o = p.ops_[index];
  for (std::uint32_t i = o.first_output; i < o.first_output + o.output_count; ++i) {
    const std::int32_t a = p.output_activation_[i];
    if (a >= 0 && p.own_[std::size_t(a)]) count_storages(p, std::size_t(a));
  }
  count_flow_writes(p, index);
  count_retained(p, index);
  const std::uint64_t live = enclosing_bytes() + p.live_ + copy_bytes_;
  if (live > stats_.peak_activation_bytes) stats_.peak_activation_bytes = live;
  if (!p.eager_) return;
  for (std::uint32_t r = p.release_ends_[index]; r < p.release_ends_[index + 1]; ++r) {
    const std::uint32_t a = p.released_[r];
    // A StepScopes is not released: its scopes live, and count, until the loop runs again.
    if (!p.own_[a] || p.activations_[a]->is<StepScopes>()) continue;
    uncount_storages(p, a);
    release(*p.activations_[a]);
  }
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::release(Variable& v) {
  if (v.is<LoDTensor>())
    v.set(LoDTensor());
  else if (v.is<SelectedRows>())
    v.set(SelectedRows());
  else if (v.is<LoDTensorArray>())
    v.set(LoDTensorArray());
}

FLUIDK_DETAIL_RUNTIME_LINKAGE execution_context Executor::context_for(prepared& p, std::size_t index) {
  const prepared::op& o = p.ops_[index];
  const prepared::cold& c = p.cold_[index];
  const operator_info& info = *o.info;
  kernel_arg* args = p.args_.data() + c.first_arg;
  const std::uint32_t* offsets = p.offsets_.data() + o.first_offset;
  return execution_context(info.name(), info.inputs(), info.outputs(),
                           o.context != nullptr ? *o.context : context_of(cpu_place), o.chosen,
                           {{args, o.input_count}, {offsets, std::size_t(o.input_slots) + 1}},
                           {{args + o.input_count, o.output_count},
                            {offsets + o.input_slots + 1, std::size_t(o.output_slots) + 1}},
                           c.attrs);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE bool Executor::same_states(const prepared& p, const prepared::op& o,
                                                         std::span<const prepared::input> ins) {
  const prepared::cold& c = p.cold_[std::size_t(&o - p.ops_.data())];
  const std::vector<input_state>& last = c.last_states;
  std::size_t seen = 0;
  bool same = true;
  for (std::size_t i = 0; i < ins.size() && same; ++i) {
    for_each_input_state(*ins[i].variable, ins[i].slot, [&](const input_state& state) {
      same = same && seen < last.size() && last[seen] == state;
      ++seen;
    });
    same = same && seen == c.state_ends[i];
  }
  return same && seen == last.size();
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::choose(prepared& p, std::size_t index,
                                                    std::optional<fallback_policy> policy) {
  prepared::op& o = p.ops_[index];
  prepared::cold& c = p.cold_[index];
  const operator_info& info = *o.info;
  const std::span<prepared::input> ins(p.inputs_.data() + o.first_input, o.input_count);
  c.last_states.clear();
  c.state_ends.clear();
  o.entry = nullptr;  // until a kernel is chosen: a choice that throws leaves none
  o.plain = false;
  o.one_state_each = true;
  for (prepared::input& in : ins) {
    const std::size_t before = c.last_states.size();
    append_input_states(in.variable, in.slot, c.last_states);
    c.state_ends.push_back(std::uint32_t(c.last_states.size()));
    o.one_state_each = o.one_state_each && c.last_states.size() == before + 1;
    if (c.last_states.size() == before + 1) in.keep(c.last_states.back().key);
  }
  c.expected = expected_kernel_key(info, c.last_states, c.request);
  const kernel_choice choice = choose_kernel(info, c.expected);
  o.context = &kernel_context_of(info, choice.chosen, c.request);
  o.chosen = choice.chosen;
  o.fell_back = choice.fell_back;
  o.policy = policy_code(policy);
  o.moves = false;
  for (std::size_t i = 0; i < ins.size(); ++i) {
    c.targets[i] = input_transform_target(info.rules(), ins[i].slot, *ins[i].variable,
                                          tensor_of(*ins[i].variable), o.chosen);
    o.moves = o.moves || c.targets[i].has_value();
    p.args_[c.first_arg + i] = kernel_arg(ins[i].variable);
  }
  p.contexts_[index] = context_for(p, index);
  o.entry = choice.entry;
  o.plain = o.one_state_each && !o.fell_back && !o.moves;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::move_inputs(prepared& p, std::size_t index, Scope*& child,
                                                         op_trace* trace) {
  const prepared::op& o = p.ops_[index];
  prepared::cold& c = p.cold_[index];
  const operator_info& info = *o.info;
  const kernel_key& kernel = o.chosen;
  c.locals.clear();
  for (std::size_t i = 0; i < o.input_count; ++i) {
    const std::optional<kernel_key>& target = c.targets[i];
    if (!target) continue;
    Variable* v = p.inputs_[o.first_input + i].variable;
    const std::size_t s = p.inputs_[o.first_input + i].slot;
    const copy_key made_for = copy_key::of(info.rules(), s, *v, *target, kernel);
    const executor_stats before = stats_;
    const Variable& transformed = preparing_input(info, s, *v, kernel, [&]() -> const Variable& {
      if (!c.uncached.empty() && c.uncached[i]) {
        // A variable in two slots moved to one target: the copy made for the earlier slot
        // (the cached path finds it in the cache).
        for (const prepared::local& l : c.locals)
          if (l.source == v && l.target == made_for) return *l.variable;
        return own_copy(info, s, *v, *target, kernel, copied_bytes(info.rules(), s, *v, kernel));
      }
      const std::uint64_t bytes = copied_bytes(info.rules(), s, *v, kernel);
      return cache_.get(*v, made_for, bytes, stats_,
                        [&](Variable& into) { transform_input(info.rules(), s, *v, *target, kernel, into); });
    });
    if (trace != nullptr) {
      // The tensor whose move the target names: the dense one, or an array's first element
      // that moves (its other elements may take other chains).
      const Tensor* t = tensor_of(*v);
      const kernel_key from = key_of(*first_input_move(info.rules(), s, *v, t, kernel)->source);
      const std::string chain = plan_transform(from, *target).describe();
      trace->inputs.push_back({std::string(info.inputs()[s]), v->name(), from, *target,
                               t != nullptr ? chain : "first element that moves: " + chain,
                               stats_.bytes_copied - before.bytes_copied,
                               stats_.cache_hits > before.cache_hits});
    }
    if (child == nullptr) {
      child = &p.scope_->new_scope();
      ++stats_.child_scopes;
    }
    p.args_[c.first_arg + i] = kernel_arg(&local_for(c.locals, *child, *v, made_for, transformed));
  }
}

FLUIDK_DETAIL_RUNTIME_LINKAGE const Variable& Executor::own_copy(const operator_info& info, std::size_t slot,
                                                                 const Variable& v, const kernel_key& target,
                                                                 const kernel_key& kernel,
                                                                 std::uint64_t bytes_copied) {
  Variable& value = *own_copies_.emplace_back(std::make_unique<Variable>(v.name()));
  transform_input(info.rules(), slot, v, target, kernel, value);
  std::uint64_t bytes = 0;
  value.for_each_tensor([&](const Tensor& t) { bytes += t.initialized() ? t.storage_bytes() : 0; });
  ++stats_.transforms;
  stats_.bytes_copied += bytes_copied;
  stats_.bytes_transformed += bytes;
  if (bytes_copied == 0) ++stats_.reorders;
  copy_bytes_ += bytes;
  return value;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE std::uint64_t Executor::copied_bytes(const selection_rules& rules,
                                                                   std::size_t slot, const Variable& v,
                                                                   const kernel_key& kernel) {
  auto of = [&](const Tensor& t) -> std::uint64_t {
    if (!t.initialized()) return 0;
    const kernel_key to = input_target_key(rules, slot, key_of(t), kernel);
    if (!needs_transform(key_of(t), to)) return 0;
    const transform_plan& plan = plan_transform(key_of(t), to);
    plan.check(t);  // the error the transform gives, before the bytes are counted
    return plan.bytes_copied(t.dims());
  };
  if (!v.is<LoDTensorArray>()) return of(*tensor_of(v));
  std::uint64_t bytes = 0;
  for (const LoDTensor& t : v.get<LoDTensorArray>()) bytes += of(t);
  return bytes;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE Variable& Executor::local_for(std::vector<prepared::local>& locals,
                                                            Scope& child, const Variable& v,
                                                            const copy_key& target, const Variable& content) {
  Scope* scope = &child;
  for (const auto& [source, to, local, where] : locals) {
    if (source != &v) continue;
    if (to == target) return *local;
    scope = where;  // taken for another target: go below the deepest one
  }
  if (scope->find_local(v.name()) != nullptr) scope = &scope->new_scope();
  Variable& local = scope->var(v.name());
  share_content(content, local);
  locals.push_back({&v, target, &local, scope});
  return local;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::share_content(const Variable& from, Variable& to) {
  if (from.is<LoDTensor>())
    to.set(from.get<LoDTensor>());
  else if (from.is<SelectedRows>())
    to.set(from.get<SelectedRows>());
  else
    to.set(from.get<LoDTensorArray>());
}
FLUIDK_DETAIL_RUNTIME_LINKAGE Executor::prepared Executor::prepare(std::span<const op_invocation> ops,
                                                                   Scope& scope, const BlockDesc* block,
                                                                   const prepare_options& options) const {
  // What can refuse the block is looked at before the scope gets a variable, so that a
  // refused block leaves the scope as it was: an unknown operator, a slot it does not
  // declare, an attribute of the wrong kind.
  (void)detail::control_flow_registered();
  std::vector<const operator_info*> infos;
  std::vector<selection_request> requests;
  // Per control-flow operator: the names its sub-block (and the blocks inside it) read and write
  // that this block sees, which count as the operator's own uses.
  std::vector<std::vector<std::string>> extra_reads(ops.size()), extra_writes(ops.size());
  infos.reserve(ops.size());
  requests.reserve(ops.size());
  for (const op_invocation& call : ops) {
    const operator_info& info = find_operator(call.type);
    if (info.control() != control_kind::none) {
      const block_ref& sub = call.attrs.get<block_ref>("sub_block", call.type);
      if (block == nullptr || block->program() == nullptr)
        throw error("operator '" + call.type + "' runs block " + std::to_string(sub.index) +
                    " of its program: prepare the program's block (a BlockDesc of a ProgramDesc), not a list "
                    "of op_invocations");
      const ProgramDesc& program = *block->program();
      (void)block->child_blocks(call.type, call.attrs);  // sub_block among them
      const std::size_t k = infos.size();
      std::unordered_set<std::string> reads, writes;
      detail::walk_block_uses(
          program.block(sub.index),
          [&](const std::string& name, const BlockDesc& where) {
            const VarDesc* outer = block->find_var_recursive(name);
            if (outer != nullptr && where.find_var_recursive(name) == outer && reads.insert(name).second)
              extra_reads[k].push_back(name);
          },
          [&](const std::string& name, const BlockDesc& where, bool) {
            const VarDesc* outer = block->find_var_recursive(name);
            if (outer != nullptr && where.find_var_recursive(name) == outer && writes.insert(name).second)
              extra_writes[k].push_back(name);
          });
    }
    auto check = [&](const auto& given, std::span<const std::string_view> declared, const char* what) {
      for (const auto& [slot, names] : given) {
        bool known = false;
        for (std::string_view d : declared) known = known || d == slot;
        if (!known) throw error("operator '" + call.type + "' has no " + what + " slot '" + slot + "'");
      }
    };
    check(call.inputs, info.inputs(), "input");
    check(call.outputs, info.outputs(), "output");
    infos.push_back(&info);
    requests.push_back(request_of(info, place_, call.attrs));
  }
  prepared p;
  p.scope_ = &scope;
  p.place_ = place_;
  if (block != nullptr) {
    std::unordered_set<std::string_view> seen;
    for (const op_invocation& call : ops)
      for (const auto& [slot, names] : call.outputs)
        for (const std::string& name : names) {
          // Declared by this block itself: a parent block's variable, which a sub-block writes
          // (a loop's accumulator), is found in the scope's parent like any name it reads.
          const VarDesc* declared = block->find_var(name);
          if (declared != nullptr && !declared->persistable && seen.insert(name).second)
            p.local_names_.push_back(name);
        }
    for (const std::vector<std::string>& names : extra_writes)
      for (const std::string& name : names) {
        const VarDesc* declared = block->find_var(name);
        if (declared != nullptr && !declared->persistable && seen.insert(name).second)
          p.local_names_.push_back(name);
      }
    make_locals(p);
    // What a sub-block reads or writes of this block's variables is found (or made) here, not
    // in the sub-block's scope: there a persistable variable that a body writes, made on its
    // first write, would be the body's own, and the program's scope would never see it.
    for (const auto* uses : {&extra_reads, &extra_writes})
      for (const std::vector<std::string>& names : *uses)
        for (const std::string& name : names) (void)variable_named(scope, name);
  }
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const op_invocation& call = ops[k];
    prepared::op o;
    o.info = infos[k];
    // Appends the variables of the declared slots in order, and the slots' offsets.
    auto bind = [&](const auto& given, std::span<const std::string_view> declared,
                    std::vector<Variable*>& vars) {
      const std::size_t first = vars.size();
      p.offsets_.push_back(0);
      for (std::string_view d : declared) {
        for (const auto& [slot, names] : given)
          if (slot == d)
            for (const std::string& name : names) vars.push_back(&variable_named(scope, name));
        p.offsets_.push_back(std::uint32_t(vars.size() - first));
      }
    };
    o.first_offset = std::uint32_t(p.offsets_.size());
    o.first_input = std::uint32_t(p.input_variables_.size());
    bind(call.inputs, o.info->inputs(), p.input_variables_);
    for (std::uint32_t i = o.first_input; i < p.input_variables_.size(); ++i)
      p.input_names_.push_back(p.input_variables_[i]->name());
    o.input_count = std::uint32_t(p.input_variables_.size() - o.first_input);
    o.input_slots = std::uint16_t(o.info->inputs().size());
    o.first_output = std::uint32_t(p.output_variables_.size());
    bind(call.outputs, o.info->outputs(), p.output_variables_);
    for (std::uint32_t i = o.first_output; i < p.output_variables_.size(); ++i)
      p.output_names_.push_back(p.output_variables_[i]->name());
    o.output_count = std::uint32_t(p.output_variables_.size() - o.first_output);
    o.output_slots = std::uint16_t(o.info->outputs().size());
    for (std::uint16_t slot = 0; slot < o.input_slots; ++slot) {
      const std::uint32_t* offsets = p.offsets_.data() + o.first_offset;
      for (std::uint32_t i = offsets[slot]; i < offsets[slot + 1]; ++i)
        p.inputs_.push_back({.variable = p.input_variables_[o.first_input + i], .slot = slot});
    }
    prepared::cold c;
    c.attrs = call.attrs;
    c.request = requests[k];
    c.targets.resize(o.input_count);
    c.first_arg = std::uint32_t(p.args_.size());
    for (std::uint32_t i = 0; i < o.input_count; ++i)
      p.args_.emplace_back(p.input_variables_[o.first_input + i]);
    for (std::uint32_t i = 0; i < o.output_count; ++i)
      p.args_.emplace_back(p.output_variables_[o.first_output + i]);
    p.ops_.push_back(o);
    p.cold_.push_back(std::move(c));
  }
  // A context for each operator over its arguments, made again by each choice.
  p.contexts_.reserve(p.ops_.size());
  for (std::size_t i = 0; i < p.ops_.size(); ++i) p.contexts_.push_back(context_for(p, i));
  // Each control-flow operator's sub-block, prepared once on a child scope, after this block's
  // variables were found: a name the body does not declare is this block's (or a parent's).
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const operator_info& info = *infos[k];
    if (info.control() == control_kind::none) continue;
    const op_invocation& call = ops[k];
    const ProgramDesc& program = *block->program();
    prepared::control& c = *(p.cold_[k].flow = std::make_unique<prepared::control>());
    c.kind = info.control();
    c.block = call.attrs.get<block_ref>("sub_block", call.type).index;
    c.scalar = c.kind == control_kind::while_loop ||
               call.attrs.get_or<bool>("is_scalar_condition", false, call.type);
    // Step scopes are kept when their variable is fetched (keep) or read by an operator.
    for (const auto& [slot, names] : call.outputs)
      if (slot == info.outputs()[1])
        for (const std::string& name : names) {
          c.keep_scopes = c.keep_scopes ||
                          std::find(options.keep.begin(), options.keep.end(), name) != options.keep.end();
          for (const BlockDesc& b : program.blocks())
            for (const OpDesc& op : b.ops())
              for (const auto& [in_slot, in_names] : op.inputs())
                c.keep_scopes =
                    c.keep_scopes || std::find(in_names.begin(), in_names.end(), name) != in_names.end();
        }
    const BlockDesc& sub = program.block(c.block);
    c.parent = &scope;
    c.scope = &scope.new_scope();
    // Kept step scopes are read after the loop (a gradient, a fetch): their variables are not
    // freed early then, as Fluid's eager deletion keeps a while's step scopes whole.
    prepare_options body_options = options;
    if (c.keep_scopes) {
      body_options.eager_deletion = false;
      body_options.count_memory = options.count_memory || options.eager_deletion;
    }
    c.body = std::make_unique<prepared>(prepare(invocations(sub), *c.scope, &sub, body_options));
    // The body's own variables that it may read before it writes them start each step empty, as
    // in a new scope: written before means written for certain, by an operator of the body
    // itself (not in a conditional_block or a loop inside it, which may not run).
    std::unordered_set<std::string> written, fresh;
    detail::walk_block_uses(
        sub,
        [&](const std::string& name, const BlockDesc& where) {
          const VarDesc* own = sub.find_var(name);
          if (own != nullptr && !own->persistable && where.find_var_recursive(name) == own &&
              !written.contains(name) && fresh.insert(name).second)
            c.fresh.push_back(name);
        },
        [&](const std::string& name, const BlockDesc&, bool certain) {
          if (certain) written.insert(name);
        });
  }
  if (block != nullptr) {
    std::unordered_set<std::string_view> used;
    for (std::size_t k = 0; k < p.ops_.size(); ++k) {
      const prepared::op& o = p.ops_[k];
      for (std::uint32_t i = o.first_input; i < o.first_input + o.input_count; ++i)
        used.insert(p.input_names_[i]);
      for (const std::string& name : extra_reads[k]) used.insert(name);
      auto written = [&](const std::string& name) {
        if (!used.insert(name).second) return;
        const VarDesc* declared = block->find_var(name);
        if (declared != nullptr && !declared->persistable && declared->kind == var_kind::lod_tensor_array)
          p.fresh_arrays_.push_back(name);
      };
      for (std::uint32_t i = o.first_output; i < o.first_output + o.output_count; ++i)
        written(p.output_names_[i]);
      for (const std::string& name : extra_writes[k]) written(name);
    }
  }
  p.eager_ = options.eager_deletion;
  p.counting_ = options.eager_deletion || options.count_memory;
  if (p.counting_) {
    // The activations: the non-persistable variables the block writes, each with the operator
    // that uses it last, and whether the block reads it before it writes it (then it holds
    // what came from outside the run: fed, or carried from the last run).
    const std::unordered_set<std::string_view> keep(options.keep.begin(), options.keep.end());
    auto persistable = [&](const std::string& name) {
      const VarDesc* declared = block != nullptr ? block->find_var_recursive(name) : nullptr;
      return declared != nullptr && declared->persistable;
    };
    std::unordered_map<std::string_view, std::uint32_t> activation;
    std::unordered_set<std::string_view> written, read_first;
    std::vector<std::uint32_t> last_use;
    for (std::size_t k = 0; k < p.ops_.size(); ++k) {
      const prepared::op& o = p.ops_[k];
      auto read = [&](const std::string& name) {
        if (!written.contains(name)) read_first.insert(name);
        if (const auto it = activation.find(name); it != activation.end())
          last_use[it->second] = std::uint32_t(k);
      };
      auto write = [&](const std::string& name) {
        written.insert(name);
        if (persistable(name)) return;
        const auto [it, made] = activation.try_emplace(name, std::uint32_t(p.activation_names_.size()));
        if (made) {
          p.activation_names_.push_back(name);
          last_use.push_back(0);
        }
        last_use[it->second] = std::uint32_t(k);
      };
      for (std::uint32_t i = o.first_input; i < o.first_input + o.input_count; ++i) read(p.input_names_[i]);
      for (const std::string& name : extra_reads[k]) read(name);
      for (std::uint32_t i = o.first_output; i < o.first_output + o.output_count; ++i)
        write(p.output_names_[i]);
      for (const std::string& name : extra_writes[k]) write(name);
    }
    p.output_activation_.assign(p.output_variables_.size(), -1);
    for (std::size_t i = 0; i < p.output_names_.size(); ++i)
      if (const auto it = activation.find(p.output_names_[i]); it != activation.end())
        p.output_activation_[i] = std::int32_t(it->second);
    for (const std::string& name : p.activation_names_) {
      p.activations_.push_back(&variable_named(scope, name));
      p.own_.push_back(scope.find_local(name) == p.activations_.back());
    }
    p.counted_.resize(p.activations_.size());
    p.retained_slot_.assign(p.ops_.size(), -1);
    for (std::size_t k = 0; k < p.ops_.size(); ++k)
      if (const prepared::control* c = p.cold_[k].flow.get(); c != nullptr && !c->keep_scopes) {
        p.retained_slot_[k] = std::int32_t(p.counted_.size());
        p.counted_.emplace_back();
      }
    p.flow_written_ends_.push_back(0);
    for (std::size_t k = 0; k < p.ops_.size(); ++k) {
      for (const std::string& name : extra_writes[k])
        if (const auto it = activation.find(name); it != activation.end())
          p.flow_written_.push_back(it->second);
      p.flow_written_ends_.push_back(std::uint32_t(p.flow_written_.size()));
    }
    std::vector<std::vector<std::uint32_t>> released(p.ops_.size());
    if (p.eager_)
      for (std::uint32_t a = 0; a < p.activation_names_.size(); ++a)
        if (!read_first.contains(p.activation_names_[a]) && !keep.contains(p.activation_names_[a]))
          released[last_use[a]].push_back(a);
    p.release_ends_.push_back(0);
    for (const std::vector<std::uint32_t>& after : released) {
      p.released_.insert(p.released_.end(), after.begin(), after.end());
      p.release_ends_.push_back(std::uint32_t(p.released_.size()));
    }
    // An input whose copies eager deletion keeps out of the transfer cache: an activation, or
    // another non-persistable variable the block declares, of the scope's own.
    if (p.eager_)
      for (std::size_t k = 0; k < p.ops_.size(); ++k) {
        const prepared::op& o = p.ops_[k];
        std::vector<char>& uncached = p.cold_[k].uncached;
        uncached.assign(o.input_count, 0);
        for (std::uint32_t i = 0; i < o.input_count; ++i) {
          const std::string& name = p.input_names_[o.first_input + i];
          const bool declared = block != nullptr && block->find_var_recursive(name) != nullptr;
          uncached[i] = (activation.contains(name) || (declared && !persistable(name))) &&
                        scope.find_local(name) == p.input_variables_[o.first_input + i];
        }
      }
  }
  p.names_version_ = scope.names_version();  // after the variables made above
  return p;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::run(prepared& p) {
  // Its kernels were asked for on the preparing executor's place: on another, the same call
  // would choose otherwise than this executor does.
  if (p.place_ != place_) [[unlikely]]
    throw error("a program prepared by an executor on " + p.place_.to_string() +
                " cannot run on an executor on " + place_.to_string() + "; prepare it on this one");
  if (p.scope_->names_version() != p.names_version_) [[unlikely]]
    rebind(p);
  cache_.drop_gone();
  for (const std::string& name : p.fresh_arrays_)
    if (Variable* v = p.scope_->find_local(name); v != nullptr && v->is<LoDTensorArray>())
      v->set(LoDTensorArray());
  // Timing and counting are off the common path: one test per run, not per operator.
  if (timing_ || p.counting_) [[unlikely]] {
    run_instrumented(p);
    return;
  }
  const std::size_t count = p.ops_.size();
  for (std::size_t i = 0; i < count; ++i) run_op(p, i);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE Executor::prepared Executor::prepare(std::span<const op_invocation> ops,
                                                                   Scope& scope,
                                                                   const prepare_options& options) const {
  return prepare(ops, scope, nullptr, options);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE Executor::prepared Executor::prepare(const BlockDesc& block, Scope& scope,
                                                                   const prepare_options& options) const {
  return prepare(invocations(block), scope, &block, options);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::run(const BlockDesc& block, Scope& scope) {
  prepared p = prepare(block, scope);
  run(p);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE void Executor::run(std::span<const op_invocation> ops, Scope& scope) {
  prepared p = prepare(ops, scope);
  run(p);
}

FLUIDK_DETAIL_RUNTIME_LINKAGE std::vector<op_invocation> Executor::invocations(const BlockDesc& block) {
  std::vector<op_invocation> ops;
  ops.reserve(block.ops().size());
  for (const OpDesc& op : block.ops())
    ops.push_back({op.type(),
                   {op.inputs().begin(), op.inputs().end()},
                   {op.outputs().begin(), op.outputs().end()},
                   op.attrs()});
  return ops;
}
#endif

}  // namespace fluidk
