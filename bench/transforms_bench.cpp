// Benchmarks of the CPU transform kernels over a sweep of sizes, against the references of
// bench/README.md: memcpy of the same bytes, oneDNN's reorder (which changes layout and data
// type in one pass, as fluidk's fused kernel does), and fluidk's own steps one after the
// other. scripts/bench runs it; bench/ratios.py turns the medians into the RATIO lines and
// bench/plots.py into charts.
//
// The sizes step by factors of 4 from 12 KiB to 196 MiB of float, each a real network's
// activation of 64 channels (ResNet's first stage: 56 x 56 and 112 x 112 images, batches of 1
// to 64, and the smaller images of later stages). No padding in the blocked layouts, and no
// power-of-two row strides, where every channel row of a tile falls in one cache set (a case
// docs/performance.md measures apart).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <fluidk/devices/onednn.hpp>
#include <fluidk/transforms/cpu_kernels.hpp>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

using namespace fluidk;
namespace kernels = fluidk::transforms::cpu_kernels;

namespace {

// oneDNN's CPU runtime here is OpenMP: its thread count is OpenMP's.
void set_threads(int threads) {
#ifdef _OPENMP
  omp_set_num_threads(threads);
#else
  (void)threads;
#endif
}

// The sweep: [N, 64, s, s] float tensors, named "<N>x64x<s>x<s>".
struct size_case {
  std::size_t bytes;
  dims shape;
};
size_case case_of(const dims& d) { return {std::size_t(d[0] * d[1] * d[2] * d[3] * 4), d}; }
std::vector<size_case> sweep() {
  std::vector<size_case> out;
  for (const auto& [n, side] : {std::pair<std::int64_t, std::int64_t>{1, 7},
                                {1, 14},
                                {1, 28},
                                {1, 56},
                                {1, 112},
                                {4, 112},
                                {16, 112},
                                {64, 112}})
    out.push_back(case_of(dims{n, 64, side, side}));
  return out;
}
// Shapes of a network's later layers, where the images are small and the channels many: ResNet-50's
// last two stages (1024 channels of 14 x 14, 2048 of 7 x 7, with pixels left over after the
// kernels' steps of 8), the pooled features its classifier reads (one pixel, 32 images), and
// PSPNet's pyramid pooling of its 2048 channels into 2 x 2 bins (fewer pixels than a step).
std::vector<size_case> network_shapes() {
  std::vector<size_case> out;
  for (const dims& d :
       {dims{1, 1024, 14, 14}, dims{1, 2048, 7, 7}, dims{32, 2048, 1, 1}, dims{1, 2048, 2, 2}})
    out.push_back(case_of(d));
  return out;
}
std::string size_name(const size_case& c) {
  return std::to_string(c.shape[0]) + "x" + std::to_string(c.shape[1]) + "x" + std::to_string(c.shape[2]) +
         "x" + std::to_string(c.shape[3]);
}
std::string bytes_name(std::size_t bytes) {
  char text[32];
  if (bytes >= (std::size_t(1) << 20))
    std::snprintf(text, sizeof text, "%.4g MiB", double(bytes) / (1 << 20));
  else
    std::snprintf(text, sizeof text, "%.4g KiB", double(bytes) / (1 << 10));
  return text;
}

std::byte* bytes_of(Tensor& t) { return static_cast<std::byte*>(t.handle()); }

// Every tensor a benchmark of one size touches, allocated when the size is first run and
// written before any timing, so that page faults and first touches are never timed; the
// references and fluidk use the same ones. All sizes are kept (about 2 GiB together): the
// repetitions are interleaved at random.
struct buffers {
  Tensor nchw, nhwc, nChw8c, nchw_f16, nchw_bf16, scratch;
  explicit buffers(const dims& shape)
      : nchw(shape, data_type::float32, cpu_place, data_layout::nchw),
        nhwc(shape, data_type::float32, cpu_place, data_layout::nhwc),
        nChw8c(shape, data_type::float32, cpu_place, data_layout_of<layout::nChw8c>),
        nchw_f16(shape, data_type::float16, cpu_place, data_layout::nchw),
        nchw_bf16(shape, data_type::bfloat16, cpu_place, data_layout::nchw),
        scratch(shape, data_type::float32, cpu_place, data_layout::nchw) {
    std::mt19937 rng(42);
    std::normal_distribution<float> dist(0.f, 1.f);
    for (Tensor* t : {&nchw, &nhwc, &nChw8c, &scratch}) {
      float* p = t->data<float>();
      for (std::size_t i = 0; i < t->storage_bytes() / 4; ++i) p[i] = dist(rng);
    }
    std::memset(nchw_f16.handle(), 0, nchw_f16.storage_bytes());
    std::memset(nchw_bf16.handle(), 0, nchw_bf16.storage_bytes());
  }
  static buffers& of(const size_case& c) {
    static std::map<std::string, std::unique_ptr<buffers>> all;
    auto& slot = all[size_name(c)];
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

// oneDNN's reorder from src to dst, each described by its own layout and data type.
void onednn_reorder(benchmark::State& state, int threads, Tensor& src, Tensor& dst) {
  auto& ctx = onednn_context::this_thread();
  set_threads(threads);  // before creating the primitive: some implementations size themselves then
  auto s = onednn_memory(src, ctx.engine()), d = onednn_memory(dst, ctx.engine());
  dnnl::reorder prim;
  try {
    const dnnl::reorder::primitive_desc pd(s, d);
    prim = dnnl::reorder(pd);
    // The implementation oneDNN chose ("jit:uni", "simple:any", "ref:any", ...): ratios.py
    // names it beside each ratio against oneDNN.
    state.SetLabel(pd.impl_info_str());
  } catch (const dnnl::error& e) {
    state.SkipWithError(("oneDNN has no reorder for this: " + std::string(e.what())).c_str());
    return;
  }
  timed(state, threads, src.storage_bytes() + dst.storage_bytes(), [&] {
    prim.execute(ctx.stream(), s, d);
    ctx.stream().wait();
  });
}

// fluidk's one pass from src to dst (a reorder, a cast, or both fused).
void fluidk_transform(benchmark::State& state, int threads, Tensor& src, Tensor& dst) {
  timed(state, threads, src.storage_bytes() + dst.storage_bytes(), [&] {
    kernels::reorder_cast(bytes_of(src), src.layout(), src.dtype(), bytes_of(dst), dst.layout(), dst.dtype(),
                          src.dims(), threads);
  });
}

// memcpy of `bytes` from src to dst: 2 * bytes read plus written.
void copy(benchmark::State& state, Tensor& src, Tensor& dst, std::size_t bytes) {
  timed(state, 1, 2 * bytes, [&] { std::memcpy(dst.handle(), src.handle(), bytes); });
}

using bench_fn = void (*)(benchmark::State&, buffers&, int);

struct entry {
  std::string name;  // <figure>/<implementation>
  bench_fn fn;
  std::vector<int> threads;
  bool network = false;  // run at network_shapes() too (one thread)
  bool sweep = true;     // run at the sweep's sizes (else at network_shapes() only)
};

// Each figure's source and target, and the memcpy that reads plus writes as many bytes (for
// float -> 16-bit, 6 bytes per element: a memcpy of 3 bytes per element).
const std::vector<entry>& entries() {
  static const std::vector<entry> all = {
      {"nChw8c_to_nchw/fluidk",
       [](auto& s, auto& b, int t) { fluidk_transform(s, t, b.nChw8c, b.nchw); },
       {1, 2},
       true},
      {"nChw8c_to_nchw/onednn",
       [](auto& s, auto& b, int t) { onednn_reorder(s, t, b.nChw8c, b.nchw); },
       {1, 2},
       true},
      {"nChw8c_to_nchw/memcpy",
       [](auto& s, auto& b, int) { copy(s, b.nChw8c, b.scratch, b.nchw.storage_bytes()); },
       {1},
       true},
      {"nchw_to_nChw8c/fluidk",
       [](auto& s, auto& b, int t) { fluidk_transform(s, t, b.nchw, b.nChw8c); },
       {1, 2},
       true},
      {"nchw_to_nChw8c/onednn",
       [](auto& s, auto& b, int t) { onednn_reorder(s, t, b.nchw, b.nChw8c); },
       {1, 2},
       true},
      {"nchw_to_nChw8c/memcpy",
       [](auto& s, auto& b, int) { copy(s, b.nchw, b.scratch, b.nchw.storage_bytes()); },
       {1},
       true},
      {"nchw_to_nhwc/fluidk",
       [](auto& s, auto& b, int t) { fluidk_transform(s, t, b.nchw, b.nhwc); },
       {1, 2},
       true},
      {"nchw_to_nhwc/onednn",
       [](auto& s, auto& b, int t) { onednn_reorder(s, t, b.nchw, b.nhwc); },
       {1, 2},
       true},
      {"nchw_to_nhwc/memcpy",
       [](auto& s, auto& b, int) { copy(s, b.nchw, b.scratch, b.nchw.storage_bytes()); },
       {1},
       true},
      // NHWC -> NCHW at the network shapes only: its kernels for many channels are not the
      // ones the sweep's 64 channels take.
      {"nhwc_to_nchw/fluidk",
       [](auto& s, auto& b, int t) { fluidk_transform(s, t, b.nhwc, b.nchw); },
       {1},
       true,
       false},
      {"nhwc_to_nchw/onednn",
       [](auto& s, auto& b, int t) { onednn_reorder(s, t, b.nhwc, b.nchw); },
       {1},
       true,
       false},
      {"nhwc_to_nchw/memcpy",
       [](auto& s, auto& b, int) { copy(s, b.nhwc, b.scratch, b.nhwc.storage_bytes()); },
       {1},
       true,
       false},
      {"f32_to_f16/fluidk",
       [](auto& s, auto& b, int t) { fluidk_transform(s, t, b.nchw, b.nchw_f16); },
       {1, 2}},
      // oneDNN 2.6 has no fast f32 -> f16 reorder here (it runs its generic one, simple:any,
      // element by element, at 0.06-0.15 GB/s): one thread is enough to show it, and each
      // iteration takes seconds at large sizes.
      {"f32_to_f16/onednn", [](auto& s, auto& b, int t) { onednn_reorder(s, t, b.nchw, b.nchw_f16); }, {1}},
      {"f32_to_f16/memcpy",
       [](auto& s, auto& b, int) { copy(s, b.nchw, b.scratch, std::size_t(b.nchw.numel()) * 3); },
       {1}},
      {"f32_to_bf16/fluidk",
       [](auto& s, auto& b, int t) { fluidk_transform(s, t, b.nchw, b.nchw_bf16); },
       {1, 2}},
      {"f32_to_bf16/onednn",
       [](auto& s, auto& b, int t) { onednn_reorder(s, t, b.nchw, b.nchw_bf16); },
       {1, 2}},
      {"f32_to_bf16/memcpy",
       [](auto& s, auto& b, int) { copy(s, b.nchw, b.scratch, std::size_t(b.nchw.numel()) * 3); },
       {1}},
      // nChw8c float -> NCHW float16: one fused pass, against fluidk's two steps through an
      // intermediate NCHW float tensor (allocated once and warm: the kindest case for them),
      // against oneDNN's one reorder, and a memcpy of the bytes the fused pass moves.
      {"fused_nChw8c_f32_to_nchw_f16/fluidk",
       [](auto& s, auto& b, int t) { fluidk_transform(s, t, b.nChw8c, b.nchw_f16); },
       {1, 2},
       true},
      {"fused_nChw8c_f32_to_nchw_f16/sequential",
       [](auto& s, auto& b, int t) {
         timed(s, t, b.nChw8c.storage_bytes() + b.nchw_f16.storage_bytes(), [&] {
           kernels::reorder(bytes_of(b.nChw8c), data_layout_of<layout::nChw8c>, bytes_of(b.scratch),
                            data_layout::nchw, b.nChw8c.dims(), 4, t);
           kernels::cast(bytes_of(b.scratch), data_type::float32, bytes_of(b.nchw_f16), data_type::float16,
                         std::size_t(b.scratch.numel()), t);
         });
       },
       {1, 2},
       true},
      {"fused_nChw8c_f32_to_nchw_f16/onednn",
       [](auto& s, auto& b, int t) { onednn_reorder(s, t, b.nChw8c, b.nchw_f16); },
       {1}},
      {"fused_nChw8c_f32_to_nchw_f16/memcpy",
       [](auto& s, auto& b, int) { copy(s, b.nChw8c, b.scratch, std::size_t(b.nchw.numel()) * 3); },
       {1},
       true},
  };
  return all;
}

}  // namespace

// --describe: what the kernels see on this machine, and the store policy each size gets.
void describe() {
  const kernels::cache_sizes& caches = kernels::detected_caches();
  // CPUID's cache leaves say how many logical processors may share the last level at most.
  const std::string_view from = caches.source;
  const std::string sharing = caches.llc_sharing == 0 ? std::string("sharing not known")
                              : from.starts_with("CPUID")
                                  ? "shared by up to " + std::to_string(caches.llc_sharing)
                                  : "shared by " + std::to_string(caches.llc_sharing);
  std::printf(
      "fluidk kernels: %s instructions (detected: %s); caches: L1d %zu KiB, L2 %zu KiB, last level %zu MiB "
      "%s (from %.*s)\n",
      std::string(kernels::name_of(kernels::active_isa())).c_str(),
      std::string(kernels::name_of(kernels::detected_isa())).c_str(), caches.l1d >> 10, caches.l2 >> 10,
      caches.llc >> 20, sharing.c_str(), int(from.size()), from.data());
  std::printf("NCHW -> NHWC walks: %s\n", std::string(kernels::name_of(kernels::active_nhwc_walk())).c_str());
  std::printf(
      "store policy by size (layout transforms of float write the size, casts to 16 bits half of it):\n");
  std::vector<size_case> all = sweep();
  for (const size_case& c : network_shapes()) all.push_back(c);
  for (const size_case& c : all)
    std::printf("  %-14s %10s: layout %-9s cast %s\n", size_name(c).c_str(), bytes_name(c.bytes).c_str(),
                std::string(kernels::name_of(kernels::active_store_policy(c.bytes))).c_str(),
                std::string(kernels::name_of(kernels::active_store_policy(c.bytes / 2))).c_str());
}

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--describe") {
    describe();
    return 0;
  }
  const dnnl_version_t* v = dnnl_version();
  // fluidk's own cache sizes, which ratios.py reads: Google Benchmark's context names no cache
  // where the hypervisor hides CPUID's topology leaf and Linux has no cache folder.
  const kernels::cache_sizes& caches = kernels::detected_caches();
  benchmark::AddCustomContext("fluidk_l1d_bytes", std::to_string(caches.l1d));
  benchmark::AddCustomContext("fluidk_l2_bytes", std::to_string(caches.l2));
  benchmark::AddCustomContext("fluidk_llc_bytes", std::to_string(caches.llc));
  benchmark::AddCustomContext("fluidk_caches_from", std::string(caches.source));
  benchmark::AddCustomContext(
      "onednn", std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
                    " cpu_runtime=" + (v->cpu_runtime == DNNL_RUNTIME_OMP ? "omp" : "other"));
  benchmark::AddCustomContext("fluidk_isa", std::string(kernels::name_of(kernels::active_isa())));
#ifdef _OPENMP
  benchmark::AddCustomContext("openmp_max_threads", std::to_string(omp_get_max_threads()));
#endif
  // Sizes outermost, so that each size's buffers are made once.
  const auto add = [](const std::string& name, const size_case& c, bench_fn fn, int t) {
    benchmark::RegisterBenchmark(name.c_str(), [c, fn, t](benchmark::State& state) {
      fn(state, buffers::of(c), t);
    })->UseRealTime();
  };
  for (const size_case& c : sweep())
    for (const entry& e : entries())
      if (e.sweep)
        for (int t : e.threads) add(e.name + "/" + size_name(c) + "/t" + std::to_string(t), c, e.fn, t);
  for (const size_case& c : network_shapes())
    for (const entry& e : entries())
      if (e.network) add("shapes/" + e.name + "/" + size_name(c) + "/t1", c, e.fn, 1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
