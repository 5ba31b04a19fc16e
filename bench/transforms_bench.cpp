// Benchmarks of the CPU transform kernels against the references of the transforms issue:
// memcpy of the same bytes, oneDNN's reorder, and the unfused two-step path. scripts/bench runs
// it and bench/ratios.py turns the medians into the RATIO lines.
#include <benchmark/benchmark.h>

#include <cstring>
#include <fluidk/devices/onednn.hpp>
#include <fluidk/transforms/cpu_kernels.hpp>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

using namespace fluidk;
namespace kernels = fluidk::transforms::cpu;

namespace {

// oneDNN's CPU runtime here is OpenMP: its thread count is OpenMP's.
void set_threads(int threads) {
#ifdef _OPENMP
  omp_set_num_threads(threads);
#else
  (void)threads;
#endif
}

struct shape_case {
  const char* name;
  dims shape;
};
const shape_case large{"large", {32, 64, 56, 56}};  // 25.7 MB of float
const shape_case small{"small", {1, 64, 28, 28}};   // 200 KB: stays in L2

std::byte* bytes_of(Tensor& t) { return static_cast<std::byte*>(t.handle()); }

// Every tensor a benchmark touches, allocated once per shape and written before any timing, so
// that page faults and first touches are never timed; references and fluidk use the same ones.
struct buffers {
  Tensor nchw, nhwc, nChw8c, nChw16c, nchw_f16, nchw_bf16, scratch;
  explicit buffers(const dims& shape)
      : nchw(shape, data_type::float32, cpu_place, data_layout::nchw),
        nhwc(shape, data_type::float32, cpu_place, data_layout::nhwc),
        nChw8c(shape, data_type::float32, cpu_place, data_layout::nChw8c),
        nChw16c(shape, data_type::float32, cpu_place, data_layout::nChw16c),
        nchw_f16(shape, data_type::float16, cpu_place, data_layout::nchw),
        nchw_bf16(shape, data_type::bfloat16, cpu_place, data_layout::nchw),
        scratch(shape, data_type::float32, cpu_place, data_layout::nchw) {
    std::mt19937 rng(42);
    std::normal_distribution<float> dist(0.f, 1.f);
    for (Tensor* t : {&nchw, &nhwc, &nChw8c, &nChw16c, &scratch}) {
      float* p = t->data<float>();
      for (std::size_t i = 0; i < t->storage_bytes() / 4; ++i) p[i] = dist(rng);
    }
    std::memset(nchw_f16.handle(), 0, nchw_f16.storage_bytes());
    std::memset(nchw_bf16.handle(), 0, nchw_bf16.storage_bytes());
  }
  static buffers& of(const shape_case& c) {
    static std::map<std::string, std::unique_ptr<buffers>> all;
    auto& slot = all[c.name];
    if (!slot) slot = std::make_unique<buffers>(c.shape);
    return *slot;
  }
};

// Runs `body` in the timing loop, counting `bytes` read plus written per iteration.
template <class Body>
void timed(benchmark::State& state, int threads, std::size_t bytes, Body&& body) {
  set_threads(threads);
  body();  // warm: primitive creation, OpenMP thread pool, caches
  for (auto _ : state) {
    body();
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(bytes));
  set_threads(1);
}

void onednn_reorder(benchmark::State& state, int threads, Tensor& src, Tensor& dst) {
  auto& ctx = onednn_context::this_thread();
  set_threads(threads);  // before creating the primitive: some implementations size themselves then
  auto s = onednn_memory(src, ctx.engine()), d = onednn_memory(dst, ctx.engine());
  dnnl::reorder prim(s, d);
  timed(state, threads, src.storage_bytes() + dst.storage_bytes(), [&] {
    prim.execute(ctx.stream(), s, d);
    ctx.stream().wait();
  });
}

void fluidk_reorder(benchmark::State& state, int threads, Tensor& src, Tensor& dst) {
  timed(state, threads, src.storage_bytes() + dst.storage_bytes(), [&] {
    kernels::reorder(bytes_of(src), src.layout(), bytes_of(dst), dst.layout(), src.dims(), 4, threads);
  });
}

// memcpy of `bytes` from src to dst: 2 * bytes read plus written.
void copy(benchmark::State& state, Tensor& src, Tensor& dst, std::size_t bytes) {
  timed(state, 1, 2 * bytes, [&] { std::memcpy(dst.handle(), src.handle(), bytes); });
}

void fluidk_cast(benchmark::State& state, int threads, Tensor& src, Tensor& dst) {
  timed(state, threads, src.storage_bytes() + dst.storage_bytes(), [&] {
    kernels::cast(bytes_of(src), src.dtype(), bytes_of(dst), dst.dtype(), std::size_t(src.numel()), threads);
  });
}

using bench_fn = void (*)(benchmark::State&, buffers&, int);

struct entry {
  std::string name;  // <figure>/<implementation>
  bench_fn fn;
  std::vector<int> threads;
};

const std::vector<entry>& entries() {
  static const std::vector<entry> all = {
      {"nChw8c_to_nchw/fluidk",
       [](auto& s, auto& b, int t) { fluidk_reorder(s, t, b.nChw8c, b.nchw); },
       {1, 2}},
      {"nChw8c_to_nchw/onednn",
       [](auto& s, auto& b, int t) { onednn_reorder(s, t, b.nChw8c, b.nchw); },
       {1, 2}},
      {"nchw_to_nChw8c/fluidk",
       [](auto& s, auto& b, int t) { fluidk_reorder(s, t, b.nchw, b.nChw8c); },
       {1, 2}},
      {"nchw_to_nChw8c/onednn",
       [](auto& s, auto& b, int t) { onednn_reorder(s, t, b.nchw, b.nChw8c); },
       {1, 2}},
      {"nchw_to_nhwc/fluidk", [](auto& s, auto& b, int t) { fluidk_reorder(s, t, b.nchw, b.nhwc); }, {1, 2}},
      {"nchw_to_nhwc/onednn", [](auto& s, auto& b, int t) { onednn_reorder(s, t, b.nchw, b.nhwc); }, {1, 2}},
      {"nchw_to_nhwc/memcpy",
       [](auto& s, auto& b, int) { copy(s, b.nchw, b.nhwc, b.nchw.storage_bytes()); },
       {1}},
      // Not in the targets, shown for completeness.
      {"nhwc_to_nchw/fluidk", [](auto& s, auto& b, int t) { fluidk_reorder(s, t, b.nhwc, b.nchw); }, {1}},
      {"nhwc_to_nchw/onednn", [](auto& s, auto& b, int t) { onednn_reorder(s, t, b.nhwc, b.nchw); }, {1}},
      {"nChw16c_to_nchw/fluidk",
       [](auto& s, auto& b, int t) { fluidk_reorder(s, t, b.nChw16c, b.nchw); },
       {1}},
      {"nChw16c_to_nchw/onednn",
       [](auto& s, auto& b, int t) { onednn_reorder(s, t, b.nChw16c, b.nchw); },
       {1}},
      {"nchw_to_nChw16c/fluidk",
       [](auto& s, auto& b, int t) { fluidk_reorder(s, t, b.nchw, b.nChw16c); },
       {1}},
      {"nchw_to_nChw16c/onednn",
       [](auto& s, auto& b, int t) { onednn_reorder(s, t, b.nchw, b.nChw16c); },
       {1}},
      {"nhwc_to_nChw8c/fluidk", [](auto& s, auto& b, int t) { fluidk_reorder(s, t, b.nhwc, b.nChw8c); }, {1}},
      {"nhwc_to_nChw8c/onednn", [](auto& s, auto& b, int t) { onednn_reorder(s, t, b.nhwc, b.nChw8c); }, {1}},
      // Casts: memcpy of 3 bytes per element reads plus writes 6, as float -> 16-bit does.
      {"f32_to_f16/fluidk", [](auto& s, auto& b, int t) { fluidk_cast(s, t, b.nchw, b.nchw_f16); }, {1}},
      {"f32_to_f16/memcpy",
       [](auto& s, auto& b, int) { copy(s, b.nchw, b.scratch, std::size_t(b.nchw.numel()) * 3); },
       {1}},
      {"f32_to_bf16/fluidk", [](auto& s, auto& b, int t) { fluidk_cast(s, t, b.nchw, b.nchw_bf16); }, {1}},
      {"f32_to_bf16/memcpy",
       [](auto& s, auto& b, int) { copy(s, b.nchw, b.scratch, std::size_t(b.nchw.numel()) * 3); },
       {1}},
      {"f16_to_f32/fluidk", [](auto& s, auto& b, int t) { fluidk_cast(s, t, b.nchw_f16, b.scratch); }, {1}},
      {"bf16_to_f32/fluidk", [](auto& s, auto& b, int t) { fluidk_cast(s, t, b.nchw_bf16, b.scratch); }, {1}},
      // nChw8c float -> NCHW float16: one fused pass, against the two steps through an
      // intermediate NCHW float tensor (allocated once and warm: the kindest case for it).
      {"fused_nChw8c_f32_to_nchw_f16/fluidk",
       [](auto& s, auto& b, int t) {
         timed(s, t, b.nChw8c.storage_bytes() + b.nchw_f16.storage_bytes(), [&] {
           kernels::reorder_cast(bytes_of(b.nChw8c), data_layout::nChw8c, data_type::float32,
                                 bytes_of(b.nchw_f16), data_layout::nchw, data_type::float16, b.nChw8c.dims(),
                                 t);
         });
       },
       {1, 2}},
      {"fused_nChw8c_f32_to_nchw_f16/sequential",
       [](auto& s, auto& b, int t) {
         timed(s, t, b.nChw8c.storage_bytes() + b.nchw_f16.storage_bytes(), [&] {
           kernels::reorder(bytes_of(b.nChw8c), data_layout::nChw8c, bytes_of(b.scratch), data_layout::nchw,
                            b.nChw8c.dims(), 4, t);
           kernels::cast(bytes_of(b.scratch), data_type::float32, bytes_of(b.nchw_f16), data_type::float16,
                         std::size_t(b.scratch.numel()), t);
         });
       },
       {1, 2}},
  };
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  const dnnl_version_t* v = dnnl_version();
  benchmark::AddCustomContext(
      "onednn", std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
                    " cpu_runtime=" + (v->cpu_runtime == DNNL_RUNTIME_OMP ? "omp" : "other"));
  benchmark::AddCustomContext("fluidk_isa", std::string(kernels::name_of(kernels::active_isa())));
#ifdef _OPENMP
  benchmark::AddCustomContext("openmp_max_threads", std::to_string(omp_get_max_threads()));
#endif
  for (const shape_case* c : {&large, &small})
    for (const entry& e : entries())
      for (int t : e.threads) {
        const std::string name = e.name + "/" + c->name + "/t" + std::to_string(t);
        benchmark::RegisterBenchmark(name.c_str(), [c, fn = e.fn, t](benchmark::State& state) {
          fn(state, buffers::of(*c), t);
        })->UseRealTime();
      }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
