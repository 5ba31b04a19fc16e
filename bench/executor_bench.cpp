// Executor benchmarks: the cost per operator of a chain of 1,000 trivial operators against
// a Fluid-style executor (operators and variables looked up by name on every run, a child
// scope per operator), and a program whose 64 MB CPU weight feeds an accelerator operator
// run twice: the second run must not copy the weight again.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fluidk/executor.hpp>
#include <fluidk/transforms/cpu.hpp>
#include <functional>
#include <string>
#include <unordered_map>
#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
#include <fluidk/devices/opencl.hpp>
#endif

using namespace fluidk;

namespace {

// Passes its input on: the output shares the input's buffer. All the cost is the executor's.
template <class T>
struct pass_on {
  void operator()(execution_context& ctx) const { ctx.output(0) = ctx.input(0); }
};
struct pass_on_op {
  static constexpr std::string_view name = "pass_on";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(pass_on<float>{}, pass_on<double>{}));
};

constexpr int chain_length = 1000;

std::string variable(int i) {
  std::string name = "v";
  name += std::to_string(i);
  return name;
}

std::vector<op_invocation> chain() {
  std::vector<op_invocation> ops;
  for (int i = 0; i < chain_length; ++i)
    ops.push_back({"pass_on", {{"X", {variable(i)}}}, {{"Out", {variable(i + 1)}}}, {}});
  return ops;
}

void BM_executor_chain(benchmark::State& state) {
  register_operator<pass_on_op>();
  Scope scope;
  scope.var("v0").set(LoDTensor(Tensor({16}, data_type::float32)));
  const auto ops = chain();
  Executor executor(cpu_place);
  auto prepared = executor.prepare(ops, scope);
  for (auto _ : state) executor.run(prepared);
  state.counters["per_op_ns"] = benchmark::Counter(
      double(chain_length), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_executor_chain)->Unit(benchmark::kMicrosecond);

// Fluid's executor, per run and operator: the operator found by type name, a child scope
// made and dropped, each variable found by name through the scopes, the kernel through a
// std::function.
void BM_executor_chain_fluid_style(benchmark::State& state) {
  Scope scope;
  scope.var("v0").set(LoDTensor(Tensor({16}, data_type::float32)));
  const auto ops = chain();
  std::unordered_map<std::string, std::function<void(execution_context&)>> registry;
  registry["pass_on"] = pass_on<float>{};
  for (const char* other : {"conv2d", "relu", "mul", "softmax", "lookup_table", "sum"})
    registry[other] = pass_on<float>{};
  static constexpr std::array<std::uint32_t, 2> one{0, 1};
  for (auto _ : state) {
    for (const op_invocation& op : ops) {
      auto& kernel = registry.at(op.type);
      Scope& local = scope.new_scope();
      Variable* in = local.find_var(op.inputs[0].second[0]);
      Variable* out = local.find_var(op.outputs[0].second[0]);
      if (out == nullptr) out = &scope.var(op.outputs[0].second[0]);
      std::array<kernel_arg, 2> args{kernel_arg(in), kernel_arg(out)};
      const std::span<kernel_arg> all(args);
      execution_context ctx(pass_on_op::name, pass_on_op::inputs, pass_on_op::outputs, context_of(cpu_place),
                            kernel_type<cpu, float>::key(), {all.first(1), one}, {all.subspan(1), one},
                            op.attrs);
      kernel(ctx);
      scope.delete_scope(local);
    }
  }
  state.counters["per_op_ns"] = benchmark::Counter(
      double(chain_length), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_executor_chain_fluid_style)->Unit(benchmark::kMicrosecond);

#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
// Reads the first element of its input on the accelerator: the weight's transfer is the cost.
template <class T>
struct peek_opencl {
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
