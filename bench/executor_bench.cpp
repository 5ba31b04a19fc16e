// Executor benchmarks: the cost per operator of a 300-operator program of trivial kernels
// against a Fluid-style executor that does what Fluid's does per operator (bench/README.md), a
// while loop's step against its body's operators run straight, and a program whose 64 MB CPU weight feeds an
// accelerator operator run twice: the second run must not copy the weight again.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <boost/hana/first.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/second.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fluidk/executor.hpp>
#include <fluidk/program/desc.hpp>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/transforms/cpu.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
#include <fluidk/devices/opencl.hpp>
#endif

using namespace fluidk;

namespace {

// Next to no work, so that what is timed is the executor: reads the first element of its
// first input and writes it to its output (which holds a tensor already), through the checked
// accessors every kernel uses (the output's version moves on, as for any write).
template <class T>
struct pass_on {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    ctx.output(0).template data<T>()[0] = ctx.input(0).template data<T>()[0];
  }
};

// A program shaped like a real one: 300 operators of 10 types (one, two and three inputs,
// each type with kernels of its own data types), each reading outputs of earlier operators
// and a persistable weight. Every input is a float CPU tensor, so nothing is transformed: what
// is timed is finding and calling the kernels.
struct op_shape {
  std::string_view name;
  std::size_t inputs;
};
constexpr std::array<op_shape, 10> op_shapes{{{"relu", 1},
                                              {"scale", 1},
                                              {"elementwise_add", 2},
                                              {"mul", 2},
                                              {"softmax", 1},
                                              {"concat", 3},
                                              {"batch_norm", 3},
                                              {"dropout", 1},
                                              {"elementwise_mul", 2},
                                              {"tanh", 1}}};
constexpr std::array<std::string_view, 3> input_slots{"X", "Y", "Z"};

template <std::size_t N>
constexpr std::array<std::string_view, N> first_slots() {
  std::array<std::string_view, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = input_slots[i];
  return out;
}

template <std::size_t I>
struct program_op {
  static constexpr std::string_view name = op_shapes[I].name;
  static constexpr auto inputs = first_slots<op_shapes[I].inputs>();
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(
      kernels_on<cpu>(pass_on<float>{}, pass_on<double>{}, pass_on<float16>{}, pass_on<std::int64_t>{}),
      kernels_on<cpu, library::onednn>(pass_on<bfloat16>{}));
};

constexpr int program_length = 300;

template <std::size_t... I>
void register_program_ops(std::index_sequence<I...>) {
  (register_operator<program_op<I>>(), ...);
}

// The program and its scope: v0 (the input) and w (a weight) hold float tensors, operator i
// writes v<i+1> from v<i> and, for its further inputs, w and an output a few operators back.
// "v<i>", the name of the program's variable i.
std::string v(int i) {
  std::string name = "v";  // not "v" + ...: g++ 12 warns falsely (-Wrestrict) on that at -O3
  name += std::to_string(i);
  return name;
}

std::vector<op_invocation> program() {
  register_program_ops(std::make_index_sequence<op_shapes.size()>{});
  std::vector<op_invocation> ops;
  for (int i = 0; i < program_length; ++i) {
    const op_shape& shape = op_shapes[std::size_t(i * 7 % 10)];
    op_invocation op{std::string(shape.name), {}, {{"Out", {v(i + 1)}}}, {}};
    const std::string further[2] = {"w", v(std::max(0, i - 3))};
    for (std::size_t s = 0; s < shape.inputs; ++s)
      op.inputs.push_back({std::string(input_slots[s]), {s == 0 ? v(i) : further[s - 1]}});
    ops.push_back(std::move(op));
  }
  return ops;
}

// Every variable of the program holds a 16-float tensor before the first run.
void fill_scope(Scope& scope) {
  for (int i = 0; i <= program_length; ++i) scope.var(v(i)).set(LoDTensor(Tensor({16}, data_type::float32)));
  scope.var("w").set(LoDTensor(Tensor({16}, data_type::float32)));
}

void per_op_counter(benchmark::State& state) {
  state.counters["per_op_ns"] = benchmark::Counter(
      double(program_length), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_executor_program(benchmark::State& state) {
  const auto ops = program();
  Scope scope;
  fill_scope(scope);
  Executor executor(cpu_place);
  auto prepared = executor.prepare(ops, scope);
  for (auto _ : state) executor.run(prepared);
  per_op_counter(state);
}
BENCHMARK(BM_executor_program)->Unit(benchmark::kMicrosecond);

// The floor: the same kernels called directly, their contexts built once, in program order.
// What the executors add per operator is their time minus this.
void BM_executor_program_kernels_only(benchmark::State& state) {
  const auto ops = program();
  Scope scope;
  fill_scope(scope);
  struct direct_call {
    const kernel_entry* entry;
    std::vector<kernel_arg> args;
    std::vector<std::uint32_t> input_offsets;
  };
  std::vector<direct_call> calls;
  for (const op_invocation& op : ops) {
    const operator_info& info = find_operator(op.type);
    direct_call c{&info.kernels()[0], {}, {0}};
    for (const auto& [slot, names] : op.inputs) {
      c.args.emplace_back(&scope.var(names[0]));
      c.input_offsets.push_back(std::uint32_t(c.args.size()));
    }
    c.args.emplace_back(&scope.var(op.outputs[0].second[0]));
    calls.push_back(std::move(c));
  }
  static constexpr std::array<std::uint32_t, 2> one{0, 1};
  device_context& device = context_of(cpu_place);
  std::vector<execution_context> contexts;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const std::span<kernel_arg> all(calls[i].args);
    const std::size_t n = all.size() - 1;
    contexts.emplace_back(ops[i].type, std::span(input_slots).first(n), program_op<0>::outputs, device,
                          kernel_type<cpu, float>::key(), slot_args{all.first(n), calls[i].input_offsets},
                          slot_args{all.subspan(n, 1), one}, ops[i].attrs);
  }
  for (auto _ : state)
    for (std::size_t i = 0; i < calls.size(); ++i) (*calls[i].entry)(contexts[i]);
  per_op_counter(state);
}
BENCHMARK(BM_executor_program_kernels_only)->Unit(benchmark::kMicrosecond);

// A while loop's step against the same operators run straight. The body is 10 trivial
// operators: count_down (n = n - 1, c = n > 0, which ends the loop) and 9 of the program's
// operators above, every variable block 0's, holding its tensor before the first run. The
// straight program is those 10 operators as block 0, run once per iteration; the loop program
// sets n = steps and c = true (reset_count), then runs the while for `steps` steps. Their
// per-step times give RATIO executor.while_step.vs_straight (bench/dispatch_figures.py).
template <class T>
struct count_down {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    T& n = ctx.output(0).template data<T>()[0];
    n = ctx.input(0).template data<T>()[0] - 1;
    ctx.output(1).template data<bool>()[0] = n > 0;
  }
};
template <class T>
struct reset_count {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    ctx.output(0).template data<T>()[0] = T(ctx.attr<float>("value"));
    ctx.output(1).template data<bool>()[0] = true;
  }
};
template <template <class> class K, const std::string_view& Name>
struct counter_op {
  static constexpr std::string_view name = Name;
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 2> outputs{"Out", "Cond"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(K<float>{}));
};
constexpr std::string_view count_down_name = "count_down", reset_count_name = "reset_count";
constexpr int loop_steps = 1000;

// The 10 operators of the body into `block`; the variables into block 0 of `program`.
void loop_body(ProgramDesc& program, BlockDesc& block) {
  register_program_ops(std::make_index_sequence<op_shapes.size()>{});
  register_operator<counter_op<count_down, count_down_name>>();
  register_operator<counter_op<reset_count, reset_count_name>>();
  BlockDesc& global = program.global_block();
  for (int i = 0; i < 10; ++i) global.var(v(i));
  global.var("w");
  global.var("n");
  global.var("c").dtype = data_type::boolean;
  block.append_op(OpDesc("count_down", {{"X", {"n"}}}, {{"Out", {"n"}}, {"Cond", {"c"}}}));
  for (int i = 0; i < 9; ++i) {
    const op_shape& shape = op_shapes[std::size_t(i * 7 % 10)];
    const std::string further[2] = {"w", v(std::max(0, i - 3))};
    slot_map inputs;
    for (std::size_t s = 0; s < shape.inputs; ++s)
      inputs[std::string(input_slots[s])] = {s == 0 ? v(i) : further[s - 1]};
    block.append_op(OpDesc(std::string(shape.name), std::move(inputs), {{"Out", {v(i + 1)}}}));
  }
}
void fill_loop_scope(Scope& scope) {
  for (int i = 0; i < 10; ++i) scope.var(v(i)).set(LoDTensor(Tensor({16}, data_type::float32)));
  scope.var("w").set(LoDTensor(Tensor({16}, data_type::float32)));
  scope.var("n").set(LoDTensor(Tensor({1}, data_type::float32)));
  scope.var("c").set(LoDTensor(Tensor({1}, data_type::boolean)));
}

void BM_executor_straight_10(benchmark::State& state) {
  ProgramDesc program;
  loop_body(program, program.global_block());
  Scope scope;
  fill_loop_scope(scope);
  scope.get("n").get_mutable<LoDTensor>().data<float>()[0] = 1e30f;  // never reaches 0
  Executor executor(cpu_place);
  auto prepared = executor.prepare(program.global_block(), scope);
  for (auto _ : state) executor.run(prepared);
}
BENCHMARK(BM_executor_straight_10)->Unit(benchmark::kNanosecond);

void BM_executor_while_step(benchmark::State& state) {
  ProgramDesc program;
  BlockDesc& body = program.append_block(0);
  loop_body(program, body);
  BlockDesc& global = program.global_block();
  global.append_op(OpDesc("reset_count", {{"X", {"n"}}}, {{"Out", {"n"}}, {"Cond", {"c"}}},
                          {{"value", float(loop_steps)}}));
  global.append_op(
      OpDesc("while", {{"Condition", {"c"}}}, {{"Out", {"n", "c"}}}, {{"sub_block", block_ref{body.idx()}}}));
  Scope scope;
  fill_loop_scope(scope);
  Executor executor(cpu_place);
  auto prepared = executor.prepare(global, scope);
  executor.run(prepared);
  if (executor.stats().block_runs != std::uint64_t(loop_steps)) {
    state.SkipWithError("the loop did not run its steps");
    return;
  }
  for (auto _ : state) executor.run(prepared);
  state.counters["per_step_ns"] = benchmark::Counter(
      double(loop_steps), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_executor_while_step)->Unit(benchmark::kMicrosecond);

// Fluid's executor, per operator, as OperatorWithKernel::RunImpl does it from Fluid 1.5 on
// (operator.cc), step by step in bench/README.md. The kernel is chosen on an operator's first
// run and kept (ChooseKernel: kernel_type_ and kernel_func_), as here before the timed runs.
// Each run: the RuntimeContext (std::maps of slot name to the variables, found by name through
// the scope) unless the operator keeps it (enable_cache_runtime_context, which inference sets:
// BM_executor_program_fluid_cached_context), the device context looked up by place
// (DeviceContextPool::Get), the kept kernel checked, PrepareData (each input's
// GetKernelTypeForVar against the kernel's type through NeedTransform; a transfer scope only
// when an input moves), the kernel's configs found by its type (GetKernelConfig), the
// ExecutionContext built and the std::function called. Left out: InferShape, which fluidk does
// not do either (its kernels size their outputs), and the profiler's RecordEvent.
struct fluid_kernel_type {
  int place;  // 0: CPUPlace (the only place in this program)
  int data_type, layout, library;
  bool operator==(const fluid_kernel_type& o) const {
    return place == o.place && data_type == o.data_type && layout == o.layout && library == o.library;
  }
};
struct fluid_hash {
  std::size_t operator()(const fluid_kernel_type& k) const {
    constexpr int left = 8;  // OpKernelType::Hash: the place's class, the fields bit-packed
    int h = k.place;
    h += k.data_type << left;
    h += k.layout << (left * 2);
    h += k.library << (left * 3);
    return std::hash<int>()(h);
  }
};
using fluid_kernel_map =
    std::unordered_map<fluid_kernel_type, std::function<void(execution_context&)>, fluid_hash>;
constexpr int fluid_any_layout = int(index_of(data_layout::any));

// The key Fluid gives a variable's tensor (GetKernelTypeForVar).
fluid_kernel_type fluid_key_of(const Tensor& t) {
  return {t.place().kind_id(), int(index_of(t.dtype())), int(index_of(t.layout())), 0};
}
// NeedTransform: another place, another data type, or two concrete layouts that differ.
bool fluid_need_transform(const fluid_kernel_type& from, const fluid_kernel_type& to) {
  return from.place != to.place || from.data_type != to.data_type ||
         (from.layout != fluid_any_layout && to.layout != fluid_any_layout && from.layout != to.layout);
}

template <std::size_t... I>
void add_fluid_kernels(std::unordered_map<std::string, fluid_kernel_map>& all, std::index_sequence<I...>) {
  auto add = [&](auto op) {
    using Op = decltype(op);
    fluid_kernel_map& map = all[std::string(Op::name)];
    boost::hana::for_each(Op::kernels, [&](const auto& entry) {
      using key_type = typename std::decay_t<decltype(boost::hana::first(entry))>::type;
      const kernel_key k = key_type::key();
      map[{k.place().kind_id(), int(index_of(k.dtype())), int(index_of(k.layout())),
           int(index_of(k.library()))}] = boost::hana::second(entry);
    });
  };
  (add(program_op<I>{}), ...);
}

// RuntimeContext: each slot's variables, by slot name (VariableValueMap).
using fluid_variable_map = std::map<std::string, std::vector<Variable*>>;
struct fluid_runtime_context {
  fluid_variable_map inputs, outputs;
  fluid_runtime_context(const op_invocation& op, const Scope& scope) {
    for (const auto& [slot, names] : op.inputs) {
      std::vector<Variable*>& vars = inputs[slot];
      for (const std::string& name : names) vars.push_back(scope.find_var(name));
    }
    for (const auto& [slot, names] : op.outputs) {
      std::vector<Variable*>& vars = outputs[slot];
      for (const std::string& name : names) vars.push_back(scope.find_var(name));
    }
  }
};

template <bool CacheRuntimeContext>
void fluid_style_run(benchmark::State& state) {
  const auto ops = program();
  Scope scope;
  fill_scope(scope);
  std::unordered_map<std::string, fluid_kernel_map> all_op_kernels;
  add_fluid_kernels(all_op_kernels, std::make_index_sequence<op_shapes.size()>{});
  // DeviceContextPool: the device contexts by place.
  const std::map<int, device_context*> device_pool{{cpu_place.kind_id(), &context_of(cpu_place)}};
  // What an operator keeps after its first run: the kernel's type and function (ChooseKernel:
  // IndicateDataType over the inputs, the executor's place, the plain layout and library, the
  // kernel found by OpKernelType's hash), its (empty) kernel configs, and with
  // enable_cache_runtime_context the RuntimeContext.
  struct fluid_operator {
    const op_invocation* op;
    fluid_kernel_type kernel_type;
    const std::function<void(execution_context&)>* kernel_func;
    std::unique_ptr<fluid_runtime_context> runtime_context;
    const Scope* pre_scope;
    // The OpDesc's attributes by name (AttributeMap), which HasAttr looks in: this program's
    // operators have none but the cache flag where it is set.
    std::unordered_map<std::string, int> attrs;
    bool enable_cache_runtime_context, all_kernels_must_compute_runtime_shape;
  };
  // Fluid's attribute names (op_proto_maker.h and operator.h), std::strings on every HasAttr.
  static constexpr char cache_attr[] = "@ENABLE_CACHE_RUNTIME_CONTEXT@";
  static constexpr char runtime_shape_attr[] = "@ALL_KERNELS_MUST_COMPUTE_RUNTIME_SHAPE@";
  std::unordered_map<fluid_kernel_type, std::vector<int>, fluid_hash> kernel_configs;
  std::vector<fluid_operator> operators;
  for (const op_invocation& op : ops) {
    const fluid_runtime_context ctx(op, scope);
    int data_type = -1;
    for (const auto& [slot, vars] : ctx.inputs)
      for (const Variable* v : vars) {
        const Tensor& t = v->get<LoDTensor>();
        if (!t.initialized()) continue;
        const int d = int(index_of(t.dtype()));
        if (data_type != -1 && d != data_type) std::abort();
        data_type = d;
      }
    const fluid_kernel_type expected{cpu_place.kind_id(), data_type, fluid_any_layout, 0};
    const fluid_kernel_map& kernels = all_op_kernels.at(op.type);
    const auto kernel = kernels.find(expected);
    if (kernel == kernels.end()) std::abort();
    kernel_configs.try_emplace(expected);
    fluid_operator f{&op, expected, &kernel->second, nullptr, nullptr, {}, false, false};
    if (CacheRuntimeContext) {
      f.attrs.emplace(cache_attr, 1);
      f.enable_cache_runtime_context = true;  // set by the first run's HasAttr
      f.runtime_context = std::make_unique<fluid_runtime_context>(op, scope);
      f.pre_scope = &scope;
    }
    operators.push_back(std::move(f));
  }
  static constexpr std::array<std::uint32_t, 2> one{0, 1};
  std::array<kernel_arg, 4> args;
  std::array<std::uint32_t, 4> input_offsets{};
  for (auto _ : state) {
    for (fluid_operator& f : operators) {
      const op_invocation& op = *f.op;
      // 1. The flags, each tested while it is false (HasAttr), and the RuntimeContext, or the
      // one the operator keeps for this scope.
      if (!f.enable_cache_runtime_context && f.attrs.count(cache_attr) != 0)
        f.enable_cache_runtime_context = true;
      if (!f.all_kernels_must_compute_runtime_shape && f.attrs.count(runtime_shape_attr) != 0)
        f.all_kernels_must_compute_runtime_shape = true;
      std::optional<fluid_runtime_context> fresh;
      if (!f.enable_cache_runtime_context) {
        fresh.emplace(op, scope);
      } else if (f.runtime_context == nullptr || f.pre_scope != &scope) {
        f.runtime_context = std::make_unique<fluid_runtime_context>(op, scope);
        f.pre_scope = &scope;
      }
      fluid_runtime_context& ctx = fresh ? *fresh : *f.runtime_context;
      // 2. The device context of the place.
      device_context* device = device_pool.find(cpu_place.kind_id())->second;
      // 3. The kernel kept from the first run.
      if (f.kernel_func == nullptr) std::abort();
      // 4. PrepareData: over the operator's input slots (Inputs()), each slot's variables
      // found in the RuntimeContext by name, each input's key against the kernel's; a transfer
      // scope only when one moves (none does in this program: the scope is never made, as in
      // Fluid).
      Scope* transfer = nullptr;
      std::size_t n = 0;
      for (const auto& [slot, names] : op.inputs)
        for (Variable* v : ctx.inputs[slot]) {
          const Tensor& t = v->get<LoDTensor>();
          if (!t.initialized()) continue;
          if (fluid_need_transform(fluid_key_of(t), f.kernel_type)) {
            if (transfer == nullptr) transfer = &scope.new_scope();
            std::abort();  // a transform: not in this program
          }
        }
      // 5. The kernel's configs (GetKernelConfig).
      if (kernel_configs.find(f.kernel_type) == kernel_configs.end()) std::abort();
      // 6. The ExecutionContext over the RuntimeContext's variables (its Input(name) finds a
      // slot by name in the map; fluidk's contexts take slots in the operator's order).
      for (const auto& [slot, names] : op.inputs) {
        args[n] = kernel_arg(ctx.inputs.find(slot)->second[0]);
        ++n;
        input_offsets[n] = std::uint32_t(n);
      }
      args[n] = kernel_arg(ctx.outputs.find("Out")->second[0]);
      const std::span<kernel_arg> all(args.data(), n + 1);
      execution_context context(op.type, std::span(input_slots).first(n), program_op<0>::outputs, *device,
                                kernel_type<cpu, float>::key(),
                                {all.first(n), std::span(input_offsets).first(n + 1)},
                                {all.subspan(n, 1), one}, op.attrs);
      // 7. The kernel's std::function.
      (*f.kernel_func)(context);
      if (transfer != nullptr) scope.delete_scope(*transfer);
    }
  }
  per_op_counter(state);
}

void BM_executor_program_fluid_style(benchmark::State& state) { fluid_style_run<false>(state); }
BENCHMARK(BM_executor_program_fluid_style)->Unit(benchmark::kMicrosecond);
void BM_executor_program_fluid_cached_context(benchmark::State& state) { fluid_style_run<true>(state); }
BENCHMARK(BM_executor_program_fluid_cached_context)->Unit(benchmark::kMicrosecond);

#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
// Reads the first element of its input on the accelerator: the weight's transfer is the cost.
template <class T>
struct peek_opencl {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    Tensor out({1}, data_type::float32);
    copy_bytes(out.memory(), ctx.input(0).memory(), sizeof(float));
    ctx.output(0) = std::move(out);
  }
};
struct peek_op {
  static constexpr std::string_view name = "peek";
  static constexpr std::array<std::string_view, 1> inputs{"W"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<opencl>(peek_opencl<float>{}));
};

// Times the first and second run of the same prepared program, each on a fresh executor
// state, and prints the figures of the cached rerun.
void cached_rerun_figures() {
  register_operator<peek_op>();
  constexpr std::int64_t floats = 16 * 1024 * 1024;  // 64 MiB
  Scope scope;
  Tensor weight({floats}, data_type::float32);
  for (std::int64_t i = 0; i < floats; ++i) weight.data<float>()[i] = float(i % 1000);
  scope.var("w").set(LoDTensor(weight));
  const std::vector<op_invocation> program{{"peek", {{"W", {"w"}}}, {{"Out", {"out"}}}, {}}};
  std::vector<double> first, second;
  std::uint64_t first_bytes = 0, second_bytes = 0;
  for (int repetition = 0; repetition < 5; ++repetition) {
    Executor executor(place::of<opencl>(0));
    auto prepared = executor.prepare(program, scope);
    auto time = [&] {
      const auto start = std::chrono::steady_clock::now();
      executor.run(prepared);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    first.push_back(time());
    first_bytes = executor.stats().bytes_copied;
    executor.reset_stats();
    second.push_back(time());
    second_bytes = executor.stats().bytes_copied;
  }
  std::sort(first.begin(), first.end());
  std::sort(second.begin(), second.end());
  std::printf("executor.cached_rerun: first run %.3f ms, second run %.3f ms (medians of 5)\n", first[2] * 1e3,
              second[2] * 1e3);
  std::printf("RATIO executor.cached_rerun.vs_first_run %.1f\n", first[2] / second[2]);
  std::printf("VALUE executor.bytes_copied.first_run %llu\n", static_cast<unsigned long long>(first_bytes));
  std::printf("VALUE executor.bytes_copied.second_run %llu\n", static_cast<unsigned long long>(second_bytes));
}
#endif

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
  cached_rerun_figures();
#endif
  return 0;
}
