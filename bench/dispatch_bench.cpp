// Dispatch benchmarks: the static path against a direct kernel call, and the runtime path
// against what Fluid did per call, each side doing the same work (bench/README.md states each
// reference step by step, with the Fluid function it imitates):
//  - by name: operator name -> kernel on every call (Fluid's OperatorWithKernel::RunImpl finds
//    the operator's kernels by type name in AllOpKernels(), then the kernel by OpKernelType);
//  - prepared: the operator resolved once, expected key -> kernel per call.
// The mixed workloads cycle 300 calls through 40 operators with keys varied over place, data
// type, layout and library, in one pseudo-random order that both sides follow; the single-key
// loops are the best case of every hash map and branch predictor, kept and labelled so.
//
//   dispatch_bench [google benchmark flags]     timings
//   dispatch_bench --calls=static|direct N      N calls and nothing else, for callgrind
#include <benchmark/benchmark.h>

#include <array>
#include <boost/hana/first.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/second.hpp>
#include <cstdlib>
#include <cstring>
#include <fluidk/devices/cudnn_tags.hpp>
#include <fluidk/devices/onednn_tags.hpp>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/static_dispatch.hpp>
#include <functional>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

using namespace fluidk;

namespace {

// A small kernel: adds its input to its output, 16 elements, enough to be a real call.
template <class T>
struct accumulate {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const T* in = static_cast<const T*>(ctx.input(0).handle());
    T* out = static_cast<T*>(ctx.output(0).handle());
    for (int i = 0; i < 16; ++i) out[i] += in[i];
  }
};
template <class T>
struct accumulate_blocked : accumulate<T> {
  using dtype = T;
  using layouts = boost::mp11::mp_list<layout::nChw8c, layout::nChw16c>;
};

// A kernel with next to no work, so that what is measured is the dispatch.
std::uint64_t ticks = 0;
template <class T>
struct tick {
  using dtype = T;
  void operator()(execution_context&) const { ++ticks; }
};
template <class T>
struct tick_blocked : tick<T> {
  using dtype = T;
  using layouts = boost::mp11::mp_list<layout::nChw8c, layout::nChw16c>;
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

// ---- The runtime path and its Fluid-style references ------------------------------------------

// A second place kind, declared as a backend declares one: the keys of the mixed workload
// reach kernels on it. Nothing runs on a device: the kernels only tick.
struct accelerator {
  using place_tag = accelerator;
  static constexpr place_kind_id id = 6;
  static constexpr std::string_view name = "acc";
  static constexpr bool has_device_id = true;
  static constexpr bool host_accessible = false;
};

// The kernels every operator of the benchmarks registers: 12 keys over two places, six data
// types, three layouts and three libraries.
constexpr auto tick_kernels() {
  return make_kernels(kernels_on<cpu>(tick<float>{}, tick<double>{}, tick<std::int32_t>{},
                                      tick<std::int64_t>{}, tick<float16>{}, tick<bfloat16>{}),
                      kernels_on<cpu, library::onednn>(tick_blocked<float>{}, tick<bfloat16>{}),
                      kernels_on<accelerator>(tick<float>{}, tick<float16>{}),
                      kernels_on<accelerator, library::cudnn>(tick<float>{}));
}

// The 40 operators of the mixed workload: one C++ type each, as real operators are.
constexpr std::array<std::string_view, 40> op_names{"conv2d",
                                                    "conv2d_grad",
                                                    "relu",
                                                    "relu_grad",
                                                    "mul",
                                                    "mul_grad",
                                                    "fc",
                                                    "elementwise_add",
                                                    "elementwise_add_grad",
                                                    "elementwise_mul",
                                                    "softmax",
                                                    "softmax_grad",
                                                    "cross_entropy",
                                                    "cross_entropy_grad",
                                                    "lookup_table",
                                                    "lookup_table_grad",
                                                    "sum",
                                                    "mean",
                                                    "mean_grad",
                                                    "batch_norm",
                                                    "batch_norm_grad",
                                                    "pool2d",
                                                    "pool2d_grad",
                                                    "dropout",
                                                    "dropout_grad",
                                                    "reshape2",
                                                    "transpose2",
                                                    "concat",
                                                    "split",
                                                    "scale",
                                                    "sgd",
                                                    "adam",
                                                    "fill_constant",
                                                    "uniform_random",
                                                    "cast",
                                                    "layer_norm",
                                                    "matmul",
                                                    "tanh",
                                                    "sigmoid",
                                                    "crf_decoding"};

template <std::size_t I>
struct named_op {
  static constexpr std::string_view name = op_names[I];
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = tick_kernels();
};
// The single-key loops' operator, apart from the 40.
struct tick_op {
  static constexpr std::string_view name = "tick";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = tick_kernels();
};

template <std::size_t... I>
std::vector<const operator_info*> register_named_ops(std::index_sequence<I...>) {
  return {&register_operator<named_op<I>>()...};
}

// Fluid's kernel registry: OpKernelType {place (a boost::variant there), data type, layout,
// library} hashed by OpKernelType::Hash (the place's class, the fields bit-packed),
// in an unordered_map per operator (OpKernelMap), those in an unordered_map by type name
// (AllOpKernels()), kernels as std::function.
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
struct fluid_hash {
  std::size_t operator()(const fluid_kernel_type& k) const {
    // OpKernelType::Hash: the place's variant index (its class: a kernel serves every device of
    // it, as operator== compares places_are_same_class), then the fields bit-packed, through
    // std::hash<int>.
    constexpr int left = 8;
    int h = int(k.place.index());
    h += k.data_type << left;
    h += k.layout << (left * 2);
    h += k.library << (left * 3);
    return std::hash<int>()(h);
  }
};
using fluid_kernel = std::function<void(execution_context&)>;
using fluid_kernel_map = std::unordered_map<fluid_kernel_type, fluid_kernel, fluid_hash>;
using fluid_all_op_kernels = std::unordered_map<std::string, fluid_kernel_map>;

// A fluidk key in Fluid's terms: the proto's data-type numbers, layouts and libraries as
// Fluid numbered them.
fluid_kernel_type fluid_key_of(const kernel_key& k) {
  int dtype = 5;
  switch (k.dtype()) {
    case data_type::float32:
      dtype = 5;
      break;
    case data_type::float64:
      dtype = 6;
      break;
    case data_type::int32:
      dtype = 2;
      break;
    case data_type::int64:
      dtype = 3;
      break;
    case data_type::float16:
      dtype = 4;
      break;
    case data_type::bfloat16:
      dtype = 22;
      break;
    default:
      dtype = 20 + int(index_of(k.dtype()));
      break;
  }
  const fluid_place place = k.place().kind_id() == cpu::id
                                ? fluid_place(fluid_cpu_place{})
                                : fluid_place(fluid_cuda_place{k.place().device()});
  return {place, dtype, int(index_of(k.layout())), int(index_of(k.library()))};
}

// Fluid's registry holding what a fluidk operator registers: the same keys, each kernel object
// itself in a std::function (as REGISTER_OP_KERNEL stores a functor calling Compute), so that
// a call is one indirect call on both sides.
template <class Op>
void add_fluid_kernels(fluid_all_op_kernels& all) {
  fluid_kernel_map& map = all[std::string(Op::name)];
  boost::hana::for_each(Op::kernels, [&](const auto& entry) {
    using key_type = typename std::decay_t<decltype(boost::hana::first(entry))>::type;
    map[fluid_key_of(key_type::key())] = boost::hana::second(entry);
  });
}
template <std::size_t... I>
void add_named_fluid_kernels(fluid_all_op_kernels& all, std::index_sequence<I...>) {
  (add_fluid_kernels<named_op<I>>(all), ...);
}

// One context for every call: the kernels only tick, what is timed is finding them.
struct call_context {
  fixture f;
  static constexpr std::array<std::uint32_t, 2> one{0, 1};
  std::array<kernel_arg, 1> in{kernel_arg(&f.x.tensor())};
  std::array<kernel_arg, 1> out{kernel_arg(&f.y)};
  execution_context ctx{
      "tick",    tick_op::inputs, tick_op::outputs, context_of(cpu_place), kernel_type<cpu, float>::key(),
      {in, one}, {out, one}};
};

// The mixed workload: 300 calls, each an operator (by name, and resolved on each side) and a
// registered key of it, drawn with a fixed seed; both sides walk the same array.
struct mixed_call {
  std::string name;  // as Fluid's OpDesc holds it
  kernel_key key;
  fluid_kernel_type fluid_key;
  const operator_info* op;      // prepared: fluidk's operator resolved once
  const fluid_kernel_map* map;  // prepared: Fluid's kernel map resolved once
};

struct mixed_workload {
  static constexpr std::size_t calls = 300;
  fluid_all_op_kernels fluid;
  std::vector<mixed_call> sequence;

  mixed_workload() {
    const std::vector<const operator_info*> ops =
        register_named_ops(std::make_index_sequence<op_names.size()>{});
    add_named_fluid_kernels(fluid, std::make_index_sequence<op_names.size()>{});
    std::mt19937 rng(20261125);
    for (std::size_t i = 0; i < calls; ++i) {
      const operator_info* op = ops[rng() % ops.size()];
      kernel_key key = op->kernels()[rng() % op->kernels().size()].key;
      if (!key.place().same_kind(cpu_place)) key = key.with_place(place::of<accelerator>(int(rng() % 2)));
      sequence.push_back(
          {std::string(op->name()), key, fluid_key_of(key), op, &fluid.at(std::string(op->name()))});
    }
  }
  static mixed_workload& get() {
    static mixed_workload w;
    return w;
  }
};

void per_call_counter(benchmark::State& state, std::size_t calls) {
  state.counters["per_call_ns"] = benchmark::Counter(
      double(calls), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// By name, fluidk: find_operator (the registry's lock-free name index), the table lookup of
// the key (rule 2 of kernel_choice.hpp, memoised), the call.
void BM_dispatch_by_name_mixed(benchmark::State& state) {
  mixed_workload& w = mixed_workload::get();
  call_context c;
  for (auto _ : state) {
    for (const mixed_call& call : w.sequence) {
      const operator_info& op = find_operator(call.name);
      (*choose_kernel(op, call.key).entry)(c.ctx);
    }
    benchmark::ClobberMemory();
  }
  per_call_counter(state, w.sequence.size());
}
BENCHMARK(BM_dispatch_by_name_mixed);

// By name, Fluid: AllOpKernels().find(type), OpKernelMap::find(expected kernel type), both
// checked (PADDLE_ENFORCE), the std::function call.
void BM_dispatch_by_name_mixed_fluid_style(benchmark::State& state) {
  mixed_workload& w = mixed_workload::get();
  call_context c;
  for (auto _ : state) {
    for (const mixed_call& call : w.sequence) {
      const auto op = w.fluid.find(call.name);
      if (op == w.fluid.end()) std::abort();
      const auto kernel = op->second.find(call.fluid_key);
      if (kernel == op->second.end()) std::abort();
      kernel->second(c.ctx);
    }
    benchmark::ClobberMemory();
  }
  per_call_counter(state, w.sequence.size());
}
BENCHMARK(BM_dispatch_by_name_mixed_fluid_style);

// Prepared, fluidk: the operator resolved before the loop (as an executor does per operator
// of a program); per call the table lookup of the key and the call.
void BM_dispatch_prepared_mixed(benchmark::State& state) {
  mixed_workload& w = mixed_workload::get();
  call_context c;
  for (auto _ : state) {
    for (const mixed_call& call : w.sequence) (*choose_kernel(*call.op, call.key).entry)(c.ctx);
    benchmark::ClobberMemory();
  }
  per_call_counter(state, w.sequence.size());
}
BENCHMARK(BM_dispatch_prepared_mixed);

// Prepared, Fluid: the operator's OpKernelMap resolved before the loop; per call its find,
// checked, and the std::function call.
void BM_dispatch_prepared_mixed_fluid_style(benchmark::State& state) {
  mixed_workload& w = mixed_workload::get();
  call_context c;
  for (auto _ : state) {
    for (const mixed_call& call : w.sequence) {
      const auto kernel = call.map->find(call.fluid_key);
      if (kernel == call.map->end()) std::abort();
      kernel->second(c.ctx);
    }
    benchmark::ClobberMemory();
  }
  per_call_counter(state, w.sequence.size());
}
BENCHMARK(BM_dispatch_prepared_mixed_fluid_style);

// The same walks without the calls: what finding the kernel costs on each side, apart from
// the indirect call to it (which the mixed order mispredicts on both sides alike).
void BM_dispatch_by_name_mixed_lookup(benchmark::State& state) {
  mixed_workload& w = mixed_workload::get();
  for (auto _ : state)
    for (const mixed_call& call : w.sequence)
      benchmark::DoNotOptimize(choose_kernel(find_operator(call.name), call.key).entry);
  per_call_counter(state, w.sequence.size());
}
BENCHMARK(BM_dispatch_by_name_mixed_lookup);

void BM_dispatch_by_name_mixed_lookup_fluid_style(benchmark::State& state) {
  mixed_workload& w = mixed_workload::get();
  for (auto _ : state)
    for (const mixed_call& call : w.sequence) {
      const auto op = w.fluid.find(call.name);
      if (op == w.fluid.end()) std::abort();
      const auto kernel = op->second.find(call.fluid_key);
      if (kernel == op->second.end()) std::abort();
      benchmark::DoNotOptimize(&kernel->second);
    }
  per_call_counter(state, w.sequence.size());
}
BENCHMARK(BM_dispatch_by_name_mixed_lookup_fluid_style);

void BM_dispatch_prepared_mixed_lookup(benchmark::State& state) {
  mixed_workload& w = mixed_workload::get();
  for (auto _ : state)
    for (const mixed_call& call : w.sequence)
      benchmark::DoNotOptimize(choose_kernel(*call.op, call.key).entry);
  per_call_counter(state, w.sequence.size());
}
BENCHMARK(BM_dispatch_prepared_mixed_lookup);

void BM_dispatch_prepared_mixed_lookup_fluid_style(benchmark::State& state) {
  mixed_workload& w = mixed_workload::get();
  for (auto _ : state)
    for (const mixed_call& call : w.sequence) {
      const auto kernel = call.map->find(call.fluid_key);
      if (kernel == call.map->end()) std::abort();
      benchmark::DoNotOptimize(&kernel->second);
    }
  per_call_counter(state, w.sequence.size());
}
BENCHMARK(BM_dispatch_prepared_mixed_lookup_fluid_style);

// The floor of the mixed calls: the 300 kernels found beforehand, only called.
void BM_dispatch_mixed_calls_only(benchmark::State& state) {
  mixed_workload& w = mixed_workload::get();
  call_context c;
  std::vector<const kernel_entry*> entries;
  for (const mixed_call& call : w.sequence) entries.push_back(choose_kernel(*call.op, call.key).entry);
  for (auto _ : state) {
    for (const kernel_entry* entry : entries) (*entry)(c.ctx);
    benchmark::ClobberMemory();
  }
  per_call_counter(state, w.sequence.size());
}
BENCHMARK(BM_dispatch_mixed_calls_only);

// Best case, prepared, one operator and one key on every call: fluidk.
void BM_dispatch_runtime(benchmark::State& state) {
  call_context c;
  const operator_info& op = register_operator<tick_op>();
  data_type dtype = data_type::float32;
  for (auto _ : state) {
    benchmark::DoNotOptimize(dtype);
    const kernel_key key(cpu_place, dtype, data_layout::any, library_type::plain);
    (*choose_kernel(op, key).entry)(c.ctx);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_dispatch_runtime);

// Best case, prepared, one operator and one key on every call: Fluid, among the same 40
// operators and the tick operator.
void BM_dispatch_runtime_fluid_style(benchmark::State& state) {
  mixed_workload& w = mixed_workload::get();
  call_context c;
  register_operator<tick_op>();
  add_fluid_kernels<tick_op>(w.fluid);
  const fluid_kernel_map& kernels = w.fluid.at("tick");
  int dtype = 5;
  for (auto _ : state) {
    benchmark::DoNotOptimize(dtype);
    const fluid_kernel_type key{fluid_cpu_place{}, dtype, 0, 0};
    const auto kernel = kernels.find(key);
    if (kernel == kernels.end()) std::abort();
    kernel->second(c.ctx);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_dispatch_runtime_fluid_style);

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
