// fluidk's demo: a small sequence tagger run as one mixed-device program.
//
//   words --lookup_table (CPU: the 100,000 x 64 table stays in host memory)--> emb
//   emb --fc + relu (accelerator)--> hidden
//   image --conv2d (CPU, oneDNN: leaves nChw16c data, nChw8c without AVX-512)--> feature
//   feature --relu (accelerator: fluidk moves it to NCHW, then CPU -> accelerator)
//           --fc (accelerator)--> image_context, the bias of the tagger's last fc
//   hidden --fc (accelerator, + image_context)--> emission
//   emission --crf_decoding (CPU only, inside the accelerator program)--> path
//
// The accelerator is the first CUDA GPU when there is one, else the first OpenCL device
// (PoCL runs OpenCL on the CPU), else there is none and everything runs on the CPU. The demo
// prints the program, the variable kinds InferVarType gave it, the plan of the first run
// (kernel per operator, inputs moved and what moving them cost), then runs a second batch,
// where the transfer cache serves the weights, and checks both batches against the same
// program run entirely on the CPU. Exit status 1 on a mismatch.
#include <algorithm>
#include <cmath>
#include <common/plan_table.hpp>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fluidk/devices/enabled.hpp>
#include <fluidk/dot.hpp>
#include <fluidk/executor.hpp>
#include <fluidk/program.hpp>
#include <fstream>
#include <ops/ops.hpp>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace fluidk;
using example::bytes_text;
using example::print_plan;
using example::short_name;

constexpr std::int64_t vocabulary = 100'000, embedding_width = 64, hidden_width = 128, tags = 9;
constexpr std::int64_t image_channels = 3, image_side = 32, filters = 8;

// The accelerator this machine has, and a line saying which and why.
place pick_accelerator(std::string& about) {
#if FLUIDK_OPS_CUDA
  if (cuda_available()) {
    about = "CUDA GPU 0";
    return place::of<cuda>(0);
  }
  about = cuda_unavailable_reason() + "\n             ";
#endif
#if FLUIDK_OPS_OPENCL
  if (device_count(place::of<opencl>(0)) > 0) {
    about += "OpenCL device 0, " + context_of<opencl>(0).device_name();
    return place::of<opencl>(0);
  }
  about += "no OpenCL device\n             ";
#endif
  about += "no accelerator: the whole program runs on the CPU";
  return cpu_place;
}

// The tagger as a program. Inputs and parameters are declared; the outputs of each
// operator are made and typed by append_op (InferVarType).
ProgramDesc tagger_program() {
  ProgramDesc program;
  BlockDesc& block = program.block(0);
  auto declare = [&](const char* name, data_type dtype, std::vector<std::int64_t> shape, bool persistable) {
    block.var(name) = VarDesc{name, var_kind::lod_tensor, dtype, std::move(shape), persistable};
  };
  declare("words", data_type::int64, {-1, 1}, false);
  declare("image", data_type::float32, {1, image_channels, image_side, image_side}, false);
  declare("embedding", data_type::float32, {vocabulary, embedding_width}, true);
  declare("w_hidden", data_type::float32, {embedding_width, hidden_width}, true);
  declare("b_hidden", data_type::float32, {hidden_width}, true);
  declare("filter", data_type::float32, {filters, image_channels, 3, 3}, true);
  declare("w_image", data_type::float32, {filters * image_side * image_side, tags}, true);
  declare("w_emission", data_type::float32, {hidden_width, tags}, true);
  declare("transition", data_type::float32, {tags + 2, tags}, true);
  declare("path", data_type::int64, {-1, 1}, false);  // the decoded tags; its kind is inferred too

  auto op = [&](const char* type, slot_map in, slot_map out, attribute_map attrs = {}) {
    block.append_op(OpDesc(type, std::move(in), std::move(out), std::move(attrs)));
  };
  // The table stays in host memory: its lookup is placed on the CPU.
  op("lookup_table", {{"W", {"embedding"}}, {"Ids", {"words"}}}, {{"Out", {"emb"}}},
     {{"op_device", std::string("cpu")}});
  op("fc", {{"Input", {"emb"}}, {"W", {"w_hidden"}}, {"Bias", {"b_hidden"}}}, {{"Out", {"hidden"}}});
  op("relu", {{"X", {"hidden"}}}, {{"Out", {"hidden_relu"}}});
  op("conv2d", {{"Input", {"image"}}, {"Filter", {"filter"}}}, {{"Output", {"feature"}}},
     {{"use_onednn", true},
      {"paddings", std::vector<std::int32_t>{1, 1}},
      {"op_device", std::string("cpu")}});
  op("relu", {{"X", {"feature"}}}, {{"Out", {"feature_relu"}}});
  op("fc", {{"Input", {"feature_relu"}}, {"W", {"w_image"}}}, {{"Out", {"image_context"}}});
  op("fc", {{"Input", {"hidden_relu"}}, {"W", {"w_emission"}}, {"Bias", {"image_context"}}},
     {{"Out", {"emission"}}});
  op("crf_decoding", {{"Emission", {"emission"}}, {"Transition", {"transition"}}},
     {{"ViterbiPath", {"path"}}});
  return program;
}

// The text form, an operator's attributes on a line of their own when the line would not
// fit a terminal.
void print_program(const std::string& text) {
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    const std::size_t attrs = line.find(" {");
    if (line.size() > 96 && attrs != std::string::npos)
      std::printf("%s\n      %s\n", line.substr(0, attrs).c_str(), line.substr(attrs + 1).c_str());
    else
      std::printf("%s\n", line.c_str());
    begin = end + 1;
  }
  std::printf("\n");
}

Tensor uniform(const dims& shape, float scale, std::mt19937& rng) {
  Tensor t(shape, data_type::float32);
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

void set_parameters(Scope& scope, std::uint32_t seed) {
  std::mt19937 rng(seed);
  scope.var("embedding").set(LoDTensor(uniform({vocabulary, embedding_width}, 1.0f, rng)));
  scope.var("w_hidden").set(LoDTensor(uniform({embedding_width, hidden_width}, 0.25f, rng)));
  scope.var("b_hidden").set(LoDTensor(uniform({hidden_width}, 0.1f, rng)));
  scope.var("filter").set(LoDTensor(uniform({filters, image_channels, 3, 3}, 0.5f, rng)));
  scope.var("w_image").set(LoDTensor(uniform({filters * image_side * image_side, tags}, 0.02f, rng)));
  scope.var("w_emission").set(LoDTensor(uniform({hidden_width, tags}, 0.25f, rng)));
  scope.var("transition").set(LoDTensor(uniform({tags + 2, tags}, 1.0f, rng)));
}

// A batch: sentences of the given lengths (word ids, one level of sequence offsets) and an
// image. Writing the variables bumps their versions, so cached copies of the last batch
// are not reused.
void set_batch(Scope& scope, const std::vector<std::int64_t>& lengths, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::size_t> offsets{0};
  for (const std::int64_t n : lengths) offsets.push_back(offsets.back() + std::size_t(n));
  Tensor words({std::int64_t(offsets.back()), 1}, data_type::int64);
  std::uniform_int_distribution<std::int64_t> id(0, vocabulary - 1);
  for (std::int64_t i = 0; i < words.numel(); ++i) words.data<std::int64_t>()[i] = id(rng);
  scope.var("words").set(LoDTensor(words, {offsets}));
  scope.var("image").set(LoDTensor(uniform({1, image_channels, image_side, image_side}, 1.0f, rng)));
}

struct run_summary {
  executor_stats stats;
  std::uint64_t cached_bytes = 0;  // copies the transfer cache made unnecessary
};

run_summary summarize(const executor_stats& stats, const std::vector<op_trace>& trace,
                      const std::vector<op_trace>& first_run) {
  run_summary s{stats};
  for (const op_trace& t : trace)
    for (const input_trace& in : t.inputs)
      if (in.cached)
        for (const op_trace& f : first_run)
          for (const input_trace& g : f.inputs)
            if (g.variable == in.variable && g.to == in.to) s.cached_bytes += g.bytes_copied;
  return s;
}

// Compares a run's emission and path with the all-CPU run's: emission within 1e-4 relative
// (float; the accelerator sums products in another order), the decoded path exactly.
bool agrees(const Scope& scope, const Scope& reference, const char* batch) {
  const Tensor emission = copy_to(scope.get("emission").get<LoDTensor>(), cpu_place);
  const Tensor expected = reference.get("emission").get<LoDTensor>();
  const LoDTensor& path = scope.get("path").get<LoDTensor>();
  const LoDTensor& expected_path = reference.get("path").get<LoDTensor>();
  double worst = 0;
  bool close = emission.dims() == expected.dims();
  for (std::int64_t i = 0; close && i < emission.numel(); ++i) {
    const double a = emission.data<float>()[i], e = expected.data<float>()[i];
    worst = std::max(worst, std::abs(a - e) / std::max(1.0, std::abs(e)));
  }
  close = close && worst <= 1e-4;
  std::int64_t same = 0;
  const bool comparable = path.dims() == expected_path.dims() && path.lod() == expected_path.lod();
  for (std::int64_t i = 0; comparable && i < path.numel(); ++i)
    same += path.data<std::int64_t>()[i] == expected_path.data<std::int64_t>()[i];
  const bool paths = comparable && same == path.numel();
  std::printf("  %s: emission off by %.1e at most (tolerance 1e-4): %s; tags equal: %lld of %lld: %s\n",
              batch, worst, close ? "ok" : "NO", static_cast<long long>(same),
              static_cast<long long>(expected_path.numel()), paths ? "ok" : "NO");
  return close && paths;
}

void print_paths(const Scope& scope) {
  const LoDTensor& path = scope.get("path").get<LoDTensor>();
  const auto& offsets = path.lod()[0];
  for (std::size_t s = 0; s + 1 < offsets.size(); ++s) {
    std::printf("  sentence %zu:", s);
    for (std::size_t i = offsets[s]; i < offsets[s + 1]; ++i)
      std::printf(" %lld", static_cast<long long>(path.data<std::int64_t>()[i]));
    std::printf("\n");
  }
}

int run(const char* dot_path) {
  ops::register_all();
  std::string about;
  const place accelerator = pick_accelerator(about);
  std::printf("fluidk demo: a sequence tagger as a mixed-device program\naccelerator: %s\n\n", about.c_str());

  const ProgramDesc program = tagger_program();
  std::printf("program:\n");
  print_program(to_text(program));
  std::printf("operator outputs by kind (each operator's InferVarType decides):\n");
  for (const var_kind kind : {var_kind::lod_tensor, var_kind::selected_rows}) {
    std::string names;
    for (const OpDesc& op : program.block(0).ops())
      for (const auto& [slot, outputs] : op.outputs())
        for (const std::string& name : outputs)
          if (program.block(0).get_var(name).kind == kind) names += (names.empty() ? "" : ", ") + name;
    std::printf("  %-13s %s\n", (std::string(name_of(kind)) + ":").c_str(),
                names.empty() ? "none" : names.c_str());
  }
  std::printf("\n");

  const std::vector<std::int64_t> first_batch{7, 12, 5, 9}, second_batch{10, 4, 8};
  Scope scope, cpu_scope;
  set_parameters(scope, 2026);
  set_parameters(cpu_scope, 2026);
  Executor executor(accelerator), cpu_executor(cpu_place);
  Executor::prepared prepared = executor.prepare(program.block(0), scope);
  Executor::prepared cpu_prepared = cpu_executor.prepare(program.block(0), cpu_scope);

  std::vector<op_trace> first, second;
  set_batch(scope, first_batch, 1);
  executor.trace_into(&first);
  executor.run(prepared);
  const executor_stats first_stats = executor.stats();
  std::printf("plan of the first batch (%zu sentences, %lld words) on %s:\n", first_batch.size(),
              static_cast<long long>(scope.get("words").get<LoDTensor>().numel()),
              short_name(accelerator).c_str());
  print_plan(first);
  if (dot_path != nullptr) {
    // The same plan as a picture: Graphviz DOT of the block and of what this run did.
    std::ofstream(dot_path) << to_dot(program, first);
  }

  set_batch(cpu_scope, first_batch, 1);
  cpu_executor.run(cpu_prepared);
  std::printf("\ndecoded tags, first batch:\n");
  print_paths(scope);
  std::printf("\nchecks against the same program run entirely on the CPU:\n");
  bool ok = agrees(scope, cpu_scope, "batch 1");

  set_batch(scope, second_batch, 2);
  executor.reset_stats();
  executor.trace_into(&second);
  executor.run(prepared);
  executor.trace_into(nullptr);
  set_batch(cpu_scope, second_batch, 2);
  cpu_executor.run(cpu_prepared);
  ok = agrees(scope, cpu_scope, "batch 2") && ok;

  const run_summary s1 = summarize(first_stats, first, first);
  const run_summary s2 = summarize(executor.stats(), second, first);
  std::printf("\ntransfers (the transfer cache keeps moved weights until they change):\n");
  std::printf("  %-8s %12s %14s %12s %16s\n", "", "transforms", "bytes copied", "cache hits", "copies saved");
  for (const auto& [name, s] : {std::pair{"batch 1", s1}, std::pair{"batch 2", s2}})
    std::printf("  %-8s %12llu %14s %12llu %16s\n", name, static_cast<unsigned long long>(s.stats.transforms),
                bytes_text(s.stats.bytes_copied).c_str(), static_cast<unsigned long long>(s.stats.cache_hits),
                bytes_text(s.cached_bytes).c_str());
  const Tensor& table = scope.get("embedding").get<LoDTensor>();
  std::printf("  the embedding table (%s) stayed on %s; fallbacks: %llu\n",
              bytes_text(table.storage_bytes()).c_str(), short_name(table.place()).c_str(),
              static_cast<unsigned long long>(first_stats.fallbacks + executor.stats().fallbacks));

  std::printf("\n%s\n", ok ? "OK: the mixed-device run matches the all-CPU run"
                           : "MISMATCH: the mixed-device run differs from the all-CPU run");
  return ok ? 0 : 1;
}

}  // namespace

// demo [--dot FILE]: with --dot, also writes the plan of the first batch as Graphviz DOT.
int main(int argc, char** argv) {
  const char* dot_path = argc == 3 && std::string(argv[1]) == "--dot" ? argv[2] : nullptr;
  if (argc != 1 && dot_path == nullptr) {
    std::fprintf(stderr, "usage: demo [--dot FILE]\n");
    return 2;
  }
  try {
    return run(dot_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "demo failed: %s\n", e.what());
    return 1;
  }
}
