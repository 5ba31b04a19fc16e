// The executor: runs a block of operators on a scope at a place. Operators are resolved
// once (prepare); each run picks every operator's kernel through the runtime table and
// prepares its inputs: an input whose kernel type differs from the kernel's (full place
// compared, device id included) is transformed into a child scope under the same name,
// made once per operator run and only when needed. Sources are never changed, outputs are
// never overwritten by copying a transformed input back, and transformed inputs are kept in
// a bounded transfer cache that any tracked write to the source's bytes invalidates (see
// content_stamp, and docs/programs.md for what is tracked).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fluidk/program.hpp"
#include "fluidk/runtime_dispatch.hpp"
#include "fluidk/scope.hpp"

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
};

// What one operator run did, for people: the kernel chosen and, for each input that had to
// move, the chain and what it cost (Executor::trace_into collects these).
struct input_trace {
  std::string slot, variable;
  kernel_key from, to;
  std::string chain;               // transform_plan::describe()
  std::uint64_t bytes_copied = 0;  // written by copies between places in this run
  bool cached = false;             // served by the transfer cache: nothing moved
};
struct op_trace {
  std::string op;
  kernel_key expected, chosen;
  bool fell_back = false;
  std::vector<input_trace> inputs;  // the inputs that were transformed (or served cached)
};

// What a cached copy was made from, and what it is: a variable's version and the identity
// and version of every storage its content views. Equal stamps mean the same bytes with the
// same metadata: any write through an alias, a view or a kernel output moves a storage's
// version, any change of shape, LoD or rows goes through the variable and moves its version.
class content_stamp {
 public:
  content_stamp() = default;
  explicit content_stamp(const Variable& v) : version_(v.version()) {
    v.for_each_tensor([&](const Tensor& t) { storages_.push_back({t.storage_id(), t.version()}); });
  }
  // Compares without allocating: on the cached rerun's path.
  bool matches(const Variable& v) const noexcept {
    if (v.version() != version_) return false;
    std::size_t i = 0;
    bool same = true;
    v.for_each_tensor([&](const Tensor& t) {
      same = same && i < storages_.size() && storages_[i].id == t.storage_id() &&
             storages_[i].version == t.version();
      ++i;
    });
    return same && i == storages_.size();
  }

 private:
  struct storage {
    std::uint64_t id, version;
  };
  std::uint64_t version_ = 0;
  std::vector<storage> storages_;
};

// Transformed inputs, keyed by the source variable's id and the target key (device
// included). An entry is served only while the source's stamp (its version, and the identity
// and version of each storage it views) is what it was made from, and while the copy's own
// storages are unwritten (a kernel may write the input it was given). Bounded in bytes,
// least recently used first out.
class transfer_cache {
 public:
  explicit transfer_cache(std::size_t max_bytes = std::size_t(1) << 30) : max_bytes_(max_bytes) {}

  // The content of `source` as a kernel of key `target` needs it: `make(into)` writes it on
  // a miss; `bytes_copied` is what that copy moves between places.
  template <class Make>
  const Variable& get(const Variable& source, const kernel_key& target, std::uint64_t bytes_copied,
                      executor_stats& stats, Make&& make) {
    const key k{source.id(), target.ordinal(), target.place().device()};
    if (auto it = entries_.find(k); it != entries_.end()) {
      if (it->second.source.matches(source) && it->second.copy.matches(*it->second.value)) {
        lru_.splice(lru_.begin(), lru_, it->second.position);
        ++stats.cache_hits;
        return *it->second.value;
      }
      erase(it);
    }
    content_stamp stamp(source);  // before make(), which may run for long on another stream
    auto value = std::make_unique<Variable>(source.name());
    make(*value);
    ++stats.transforms;
    stats.bytes_copied += bytes_copied;
    std::size_t bytes = 0;
    value->for_each_tensor([&](const Tensor& t) { bytes += t.initialized() ? t.storage_bytes() : 0; });
    content_stamp copy(*value);
    lru_.push_front(k);
    auto [it, _] =
        entries_.emplace(k, entry{std::move(stamp), std::move(copy), std::move(value), bytes, lru_.begin()});
    bytes_ += bytes;
    while (bytes_ > max_bytes_ && lru_.size() > 1) erase(entries_.find(lru_.back()));
    return *it->second.value;
  }

  std::size_t bytes() const noexcept { return bytes_; }
  std::size_t size() const noexcept { return entries_.size(); }
  void clear() {
    entries_.clear();
    lru_.clear();
    bytes_ = 0;
  }

 private:
  using key = std::tuple<std::uint64_t, std::size_t, int>;
  struct key_hash {
    std::size_t operator()(const key& k) const noexcept {
      const auto [id, ordinal, device] = k;
      return (std::size_t(id) * kernel_key::ordinal_count + ordinal) * 131 + std::size_t(device);
    }
  };
  struct entry {
    content_stamp source, copy;
    std::unique_ptr<Variable> value;
    std::size_t bytes;
    std::list<key>::iterator position;
  };

  void erase(std::unordered_map<key, entry, key_hash>::iterator it) {
    bytes_ -= it->second.bytes;
    lru_.erase(it->second.position);
    entries_.erase(it);
  }

  std::size_t max_bytes_;
  std::size_t bytes_ = 0;
  std::list<key> lru_;
  std::unordered_map<key, entry, key_hash> entries_;
};

class Executor {
 public:
  explicit Executor(fluidk::place where, std::size_t cache_bytes = std::size_t(1) << 30)
      : place_(where), cache_(cache_bytes) {}

  const fluidk::place& place() const noexcept { return place_; }
  const executor_stats& stats() const noexcept { return stats_; }
  void reset_stats() noexcept { stats_ = {}; }
  transfer_cache& cache() noexcept { return cache_; }
  // Appends an op_trace per operator run to `sink` until called with nullptr (the default:
  // no tracing). The sink must outlive the runs.
  void trace_into(std::vector<op_trace>* sink) noexcept { trace_ = sink; }

  // A block resolved against a scope: operators found, variables looked up (made in the
  // scope when missing), attributes read. Valid while the scope lives.
  class prepared {
   public:
    std::size_t size() const noexcept { return ops_.size(); }

   private:
    friend class Executor;
    struct op {
      const operator_info* info;
      std::vector<Variable*> inputs, outputs;
      std::vector<std::uint32_t> input_offsets, output_offsets;
      attribute_map attrs;
      selection_request request;     // what the attributes ask for, read once
      std::vector<kernel_arg> args;  // reused across runs
      std::vector<input_state> states;
      std::vector<const Tensor*> tensors;  // tensor_of each input, this run
      struct local {                       // this run's transfer-scope variables
        const Variable* source;
        kernel_key target;
        Variable* variable;
        Scope* scope;
      };
      std::vector<local> locals;
      // The last run's choice, the inputs and policy it was made for, and the device
      // context of the kernel's place.
      std::optional<kernel_choice> last_choice;
      std::vector<input_state> last_states;
      std::optional<fallback_policy> last_policy;
      device_context* context = nullptr;
    };
    Scope* scope_ = nullptr;
    std::vector<op> ops_;
  };

  prepared prepare(std::span<const op_invocation> ops, Scope& scope) const {
    prepared p;
    p.scope_ = &scope;
    for (const op_invocation& call : ops) {
      prepared::op o;
      o.info = &find_operator(call.type);
      auto bind = [&](const auto& given, std::span<const std::string_view> declared, const char* what,
                      std::vector<Variable*>& vars, std::vector<std::uint32_t>& offsets) {
        for (const auto& [slot, names] : given) {
          bool known = false;
          for (std::string_view d : declared) known = known || d == slot;
          if (!known) throw error("operator '" + call.type + "' has no " + what + " slot '" + slot + "'");
        }
        offsets.assign(1, 0);
        for (std::string_view d : declared) {
          for (const auto& [slot, names] : given)
            if (slot == d)
              for (const std::string& name : names) {
                Variable* v = scope.find_var(name);
                vars.push_back(v != nullptr ? v : &scope.var(name));
              }
          offsets.push_back(std::uint32_t(vars.size()));
        }
      };
      bind(call.inputs, o.info->inputs(), "input", o.inputs, o.input_offsets);
      bind(call.outputs, o.info->outputs(), "output", o.outputs, o.output_offsets);
      o.attrs = call.attrs;
      o.request = request_of(*o.info, place_, o.attrs);
      o.args.resize(o.inputs.size() + o.outputs.size());
      o.tensors.resize(o.inputs.size());
      p.ops_.push_back(std::move(o));
    }
    return p;
  }

  void run(prepared& p) {
    for (prepared::op& o : p.ops_) run_op(o, *p.scope_);
  }

  // Prepares and runs once.
  void run(std::span<const op_invocation> ops, Scope& scope) {
    prepared p = prepare(ops, scope);
    run(p);
  }

  // The operators of a block, as the executor takes them.
  static std::vector<op_invocation> invocations(const BlockDesc& block) {
    std::vector<op_invocation> ops;
    ops.reserve(block.ops().size());
    for (const OpDesc& op : block.ops())
      ops.push_back({op.type(),
                     {op.inputs().begin(), op.inputs().end()},
                     {op.outputs().begin(), op.outputs().end()},
                     op.attrs()});
    return ops;
  }
  prepared prepare(const BlockDesc& block, Scope& scope) const { return prepare(invocations(block), scope); }
  void run(const BlockDesc& block, Scope& scope) { run(invocations(block), scope); }

 private:
  void run_op(prepared::op& o, Scope& scope) {
    const operator_info& info = *o.info;
    const std::size_t slots = o.input_offsets.size() - 1;
    // The kernel: rules 1 and 2 of kernel_choice.hpp, as every path applies them.
    o.states.clear();
    for (std::size_t s = 0; s < slots; ++s)
      for (std::uint32_t i = o.input_offsets[s]; i < o.input_offsets[s + 1]; ++i) {
        o.tensors[i] = tensor_of(*o.inputs[i]);
        append_input_states(o.inputs[i], o.tensors[i], std::uint32_t(s), o.states);
      }
    // The rule is a function of the inputs' keys, the attributes (read at prepare) and the
    // fallback policy: while those are what they were on the last run, so is its result.
    const std::optional<fallback_policy> policy = operator_registry::instance().global_fallback();
    if (!o.last_choice || o.states != o.last_states || policy != o.last_policy) {
      const kernel_key expected = expected_kernel_key(info, o.states, o.request);
      o.last_choice = choose_kernel(info, expected);
      o.last_states = o.states;
      o.last_policy = policy;
      o.context = &context_of(o.last_choice->chosen.place());
    } else if (o.last_choice->fell_back) {
      operator_registry::instance().note_fallback(
          {info.name(), o.last_choice->expected, o.last_choice->chosen});  // counted every time
    }
    const kernel_choice& choice = *o.last_choice;
    const kernel_key& expected = choice.expected;
    if (choice.fell_back) ++stats_.fallbacks;
    op_trace* trace = trace_ != nullptr
                          ? &trace_->emplace_back(op_trace{
                                std::string(info.name()), expected, choice.chosen, choice.fell_back, {}})
                          : nullptr;

    // Inputs: the variable itself, or its transformed copy in a child scope (deleted when
    // the operator is done, or fails). A variable given to two slots that need different
    // copies gets the second in a scope of its own below the first.
    Scope* child = nullptr;
    o.locals.clear();
    struct child_guard {
      Scope& parent;
      Scope*& child;
      ~child_guard() {
        if (child != nullptr) parent.delete_scope(*child);
      }
    } guard{scope, child};
    for (std::size_t s = 0; s < slots; ++s) {
      for (std::uint32_t i = o.input_offsets[s]; i < o.input_offsets[s + 1]; ++i) {
        Variable* v = o.inputs[i];
        o.args[i] = kernel_arg(v);
        const std::optional<kernel_key> target =
            input_transform_target(info.rules(), s, *v, o.tensors[i], choice.chosen);
        if (!target) continue;
        const executor_stats before = stats_;
        std::uint64_t bytes = 0;
        const Variable& transformed = preparing_input(info, s, *v, choice.chosen, [&]() -> const Variable& {
          bytes = copied_bytes(info.rules(), s, *v, choice.chosen);
          return cache_.get(*v, *target, bytes, stats_, [&](Variable& into) {
            transform_input(info.rules(), s, *v, *target, choice.chosen, into);
          });
        });
        if (trace != nullptr) {
          const Tensor* t = tensor_of(*v);
          const kernel_key from = t != nullptr ? key_of(*t) : key_of(first_element(*v));
          const std::string chain = plan_transform(from, *target).describe();
          trace->inputs.push_back({std::string(info.inputs()[s]), v->name(), from, *target,
                                   t != nullptr ? chain : "each element: " + chain,
                                   stats_.bytes_copied - before.bytes_copied,
                                   stats_.cache_hits > before.cache_hits});
        }
        if (child == nullptr) {
          child = &scope.new_scope();
          ++stats_.child_scopes;
        }
        o.args[i] = kernel_arg(&local_for(o, *child, *v, *target, transformed));
      }
    }
    const std::size_t first_output = o.inputs.size();
    for (std::size_t i = 0; i < o.outputs.size(); ++i) o.args[first_output + i] = kernel_arg(o.outputs[i]);
    clear_output_lods(o.outputs, o.inputs);
    const std::span<kernel_arg> args(o.args);
    execution_context context(info.name(), info.inputs(), info.outputs(), *o.context, choice.chosen,
                              {args.first(first_output), o.input_offsets},
                              {args.subspan(first_output), o.output_offsets}, o.attrs);
    (*choice.entry)(context);
    ++stats_.ops_run;
  }

  // The bytes that bringing input `v` of slot `slot` to the kernel copies between places.
  static std::uint64_t copied_bytes(const selection_rules& rules, std::size_t slot, const Variable& v,
                                    const kernel_key& kernel) {
    auto of = [&](const Tensor& t) -> std::uint64_t {
      if (!t.initialized()) return 0;
      const kernel_key to = input_target_key(rules, slot, key_of(t), kernel);
      return needs_transform(key_of(t), to) ? plan_transform(key_of(t), to).bytes_copied(t.numel()) : 0;
    };
    if (!v.is<LoDTensorArray>()) return of(*tensor_of(v));
    std::uint64_t bytes = 0;
    for (const LoDTensor& t : v.get<LoDTensorArray>()) bytes += of(t);
    return bytes;
  }
  // The first element of an array that holds data (an array that needs a transform has one).
  static const Tensor& first_element(const Variable& v) {
    for (const LoDTensor& t : v.get<LoDTensorArray>())
      if (t.initialized()) return t;
    throw error("variable '" + v.name() + "': no element holds data");
  }

  // The variable of the transfer scope that views `content` for source `v` and `target`:
  // made once per run; when the child already holds the name for another target (the
  // same variable in two slots, transformed differently), in a new scope below it.
  static Variable& local_for(prepared::op& o, Scope& child, const Variable& v, const kernel_key& target,
                             const Variable& content) {
    Scope* scope = &child;
    for (const auto& [source, to, local, where] : o.locals) {
      if (source != &v) continue;
      if (to == target) return *local;
      scope = where;  // taken for another target: go below the deepest one
    }
    if (scope->find_local(v.name()) != nullptr) scope = &scope->new_scope();
    Variable& local = scope->var(v.name());
    share_content(content, local);
    o.locals.push_back({&v, target, &local, scope});
    return local;
  }

  // The child variable views the cached content: it shares the buffers, copies nothing.
  static void share_content(const Variable& from, Variable& to) {
    if (from.is<LoDTensor>())
      to.set(from.get<LoDTensor>());
    else if (from.is<SelectedRows>())
      to.set(from.get<SelectedRows>());
    else
      to.set(from.get<LoDTensorArray>());
  }

  fluidk::place place_;
  transfer_cache cache_;
  executor_stats stats_;
  std::vector<op_trace>* trace_ = nullptr;
};

}  // namespace fluidk
