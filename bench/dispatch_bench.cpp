// Dispatch benchmarks: the static path against a direct kernel call, and the runtime path
// against what Fluid did per call (operator found by name in a hash map, the kernel in a
// hash map keyed by Fluid's bit-packed kernel-type hash, called through std::function).
//
//   dispatch_bench [google benchmark flags]     timings
//   dispatch_bench --calls=static|direct N      N calls and nothing else, for callgrind
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/static_dispatch.hpp>
#include <functional>
#include <string>
#include <unordered_map>
#include <variant>

using namespace fluidk;

namespace {

// A small kernel: adds its input to its output, 16 elements, enough to be a real call.
template <class T>
struct accumulate {
  void operator()(execution_context& ctx) const {
    const T* in = static_cast<const T*>(ctx.input(0).handle());
    T* out = static_cast<T*>(ctx.output(0).handle());
    for (int i = 0; i < 16; ++i) out[i] += in[i];
  }
};
template <class T>
struct accumulate_blocked : accumulate<T> {
  using layouts = boost::mp11::mp_list<layout::nChw8c, layout::nChw16c>;
};

// A kernel with next to no work, so that what is measured is the dispatch.
std::uint64_t ticks = 0;
template <class T>
struct tick {
  void operator()(execution_context&) const { ++ticks; }
};

struct accumulate_op {
  static constexpr std::string_view name = "accumulate";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels =
      make_kernels(kernels_on<cpu>(accumulate<float>{}, accumulate<double>{}, accumulate<std::int32_t>{},
                                   accumulate<std::int64_t>{}),
                   kernels_on<cpu, library::onednn>(accumulate_blocked<float>{}));
};

struct fixture {
  typed_tensor<cpu, float> x{{16}};
  Tensor y{{16}, data_type::float32};
  fixture() {
    for (int i = 0; i < 16; ++i) {
      x.data()[i] = float(i);
      y.data<float>()[i] = 0;
    }
  }
};

// What calling the kernel directly takes: the same context, built by hand. Both callers are
// kept out of interprocedural optimisation (noipa), so that neither gets a calling
// convention of its own from the benchmark loop (g++ had given one of them an IPA-SRA clone
// taking the context pointer instead of the target), and start on a cache line (aligned):
// what differs is only their bodies.
#if defined(__clang__)  // no noipa: noinline is as far as clang goes
#define FLUIDK_BENCH_OPAQUE [[gnu::noinline, gnu::aligned(64)]]
#else
#define FLUIDK_BENCH_OPAQUE [[gnu::noipa, gnu::aligned(64)]]
#endif
FLUIDK_BENCH_OPAQUE void direct_call(fixture& f, const target<cpu>& t) {
  static constexpr std::array<std::uint32_t, 2> one{0, 1};
  std::array<kernel_arg, 1> in{kernel_arg(&f.x.tensor())};
  std::array<kernel_arg, 1> out{kernel_arg(&f.y)};
  execution_context ctx(accumulate_op::name, accumulate_op::inputs, accumulate_op::outputs, t.context(),
                        kernel_type<cpu, float>::key(), {in, one}, {out, one});
  accumulate<float>{}(ctx);
}

FLUIDK_BENCH_OPAQUE void static_call(fixture& f, const target<cpu>& t) {
  run<accumulate_op>(t, inputs(f.x), outputs(f.y));
}

void BM_dispatch_direct(benchmark::State& state) {
  fixture f;
  const target<cpu> t;
  for (auto _ : state) {
    direct_call(f, t);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_dispatch_direct);

void BM_dispatch_static(benchmark::State& state) {
  fixture f;
  const target<cpu> t;
  for (auto _ : state) {
    static_call(f, t);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_dispatch_static);

// The runtime path: the operator resolved once (as an executor does per operator of a
// program), then per call the table lookup by the expected key's ordinal and the call.
struct tick_op {
  static constexpr std::string_view name = "tick";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels =
      make_kernels(kernels_on<cpu>(tick<float>{}, tick<double>{}, tick<std::int32_t>{}, tick<std::int64_t>{}),
                   kernels_on<cpu, library::onednn>(tick<bfloat16>{}));
};

void BM_dispatch_runtime(benchmark::State& state) {
  fixture f;
  const operator_info& op = register_operator<tick_op>();
  static constexpr std::array<std::uint32_t, 2> one{0, 1};
  std::array<kernel_arg, 1> in{kernel_arg(&f.x.tensor())};
  std::array<kernel_arg, 1> out{kernel_arg(&f.y)};
  execution_context ctx(op.name(), op.inputs(), op.outputs(), context_of(cpu_place),
                        kernel_type<cpu, float>::key(), {in, one}, {out, one});
  data_type dtype = data_type::float32;
  for (auto _ : state) {
    benchmark::DoNotOptimize(dtype);
    const kernel_key key(cpu_place, dtype, data_layout::any, library_type::plain);
    const kernel_entry* entry = choose_kernel(op, key).entry;
    (*entry)(ctx);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_dispatch_runtime);

// Fluid's way, per call: OperatorWithKernel::RunImpl finds the operator's kernels by type
// name in AllOpKernels(), builds the OpKernelType (a Place variant, data type, layout,
// library), finds the kernel with OpKernelType::Hash (the place hashed through a visitor,
// the fields bit-packed) and calls the std::function.
struct fluid_cpu_place {};
struct fluid_cuda_place {
  int device;
};
struct fluid_pinned_place {};
using fluid_place = std::variant<fluid_cuda_place, fluid_cpu_place, fluid_pinned_place>;
struct fluid_kernel_type {
  fluid_place place;
  int data_type, layout, library;
  bool operator==(const fluid_kernel_type& o) const {
    return place.index() == o.place.index() && data_type == o.data_type && layout == o.layout &&
           library == o.library;
  }
};
struct fluid_place_hash {
  std::size_t operator()(const fluid_cpu_place&) const { return 0; }
  std::size_t operator()(const fluid_cuda_place& p) const { return std::hash<int>()(p.device) * 2 + 1; }
  std::size_t operator()(const fluid_pinned_place&) const { return 2; }
};
struct fluid_hash {
  std::size_t operator()(const fluid_kernel_type& k) const {
    constexpr int left = 8;  // OpKernelType::Hash: place, then data type, layout, library
    std::size_t h = std::visit(fluid_place_hash{}, k.place);
    h |= std::size_t(k.data_type) << left;
    h |= std::size_t(k.layout) << (left * 2);
    h |= std::size_t(k.library) << (left * 3);
    return std::hash<std::size_t>()(h);
  }
};
using fluid_kernel_map =
    std::unordered_map<fluid_kernel_type, std::function<void(execution_context&)>, fluid_hash>;

void BM_dispatch_fluid_style(benchmark::State& state) {
  fixture f;
  std::unordered_map<std::string, fluid_kernel_map> all_op_kernels;
  for (const char* other : {"conv2d", "relu", "mul", "softmax", "lookup_table", "sum", "elementwise_mul"})
    all_op_kernels[other][{fluid_cpu_place{}, 5, 0, 0}] = tick<float>{};
  auto& kernels = all_op_kernels["elementwise_add"];
  kernels[{fluid_cpu_place{}, 5, 0, 0}] = tick<float>{};
  kernels[{fluid_cpu_place{}, 6, 0, 0}] = tick<double>{};
  kernels[{fluid_cpu_place{}, 2, 0, 0}] = tick<std::int32_t>{};
  kernels[{fluid_cpu_place{}, 3, 0, 0}] = tick<std::int64_t>{};
  kernels[{fluid_cpu_place{}, 22, 0, 1}] = tick<bfloat16>{};
  static constexpr std::array<std::uint32_t, 2> one{0, 1};
  std::array<kernel_arg, 1> in{kernel_arg(&f.x.tensor())};
  std::array<kernel_arg, 1> out{kernel_arg(&f.y)};
  execution_context ctx(accumulate_op::name, accumulate_op::inputs, accumulate_op::outputs,
                        context_of(cpu_place), kernel_type<cpu, float>::key(), {in, one}, {out, one});
  const std::string type = "elementwise_add";
  int data_type = 5;
  for (auto _ : state) {
    benchmark::DoNotOptimize(data_type);
    auto op = all_op_kernels.find(type);
    const fluid_kernel_type key{fluid_cpu_place{}, data_type, 0, 0};
    auto kernel = op->second.find(key);
    kernel->second(ctx);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_dispatch_fluid_style);

}  // namespace

int main(int argc, char** argv) {
  // --calls=static|direct N: exactly N calls, for instruction counts under callgrind.
  if (argc == 3 && std::strncmp(argv[1], "--calls=", 8) == 0) {
    const bool use_static = std::strcmp(argv[1] + 8, "static") == 0;
    const long calls = std::atol(argv[2]);
    fixture f;
    const target<cpu> t;
    for (long i = 0; i < calls; ++i) use_static ? static_call(f, t) : direct_call(f, t);
    return f.y.data<float>()[1] == float(calls) ? 0 : 1;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
