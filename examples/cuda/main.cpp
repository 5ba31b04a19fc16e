// cuda: the example operators' CUDA kernels (cuDNN convolution, cuBLAS fc, CUDA softmax with
// cross entropy) in a program run by an executor on GPU 0, checked against the same program
// on the CPU. The example is compiled whenever the CUDA backend is built; without a device it
// says so and exits 0 (or 77, the skip code, with --as-test).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fluidk/devices/cuda.hpp>
#include <fluidk/executor.hpp>
#include <ops/ops.hpp>
#include <random>
#include <string>

namespace {

using namespace fluidk;

// conv2d (cuDNN) -> relu -> fc (cuBLAS) -> softmax_with_cross_entropy, as a program.
ProgramDesc classifier() {
  ProgramDesc program;
  BlockDesc& block = program.block(0);
  for (const char* name : {"image", "label", "filter", "w"}) block.var(name);
  block.var("label").dtype = data_type::int64;
  block.append_op(OpDesc("conv2d", {{"Input", {"image"}}, {"Filter", {"filter"}}}, {{"Output", {"conv"}}},
                         {{"use_cudnn", true}, {"paddings", std::vector<std::int32_t>{1, 1}}}));
  block.append_op(OpDesc("relu", {{"X", {"conv"}}}, {{"Out", {"act"}}}, {}));
  block.append_op(OpDesc("fc", {{"Input", {"act"}}, {"W", {"w"}}}, {{"Out", {"logits"}}}, {}));
  block.append_op(OpDesc("softmax_with_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"label"}}},
                         {{"Softmax", {"probabilities"}}, {"Loss", {"loss"}}}, {}));
  return program;
}

void fill(Scope& scope) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1, 1);
  auto random = [&](const dims& shape, float scale) {
    Tensor t(shape, data_type::float32);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * dist(rng);
    return LoDTensor(t);
  };
  scope.var("image").set(random({4, 3, 16, 16}, 1.0f));
  scope.var("filter").set(random({8, 3, 3, 3}, 0.3f));
  scope.var("w").set(random({8 * 16 * 16, 10}, 0.05f));
  Tensor label({4, 1}, data_type::int64);
  for (std::int64_t i = 0; i < 4; ++i) label.data<std::int64_t>()[i] = (3 * i + 1) % 10;
  scope.var("label").set(LoDTensor(label));
}

double worst_difference(const Scope& a, const Scope& b, const char* name) {
  const Tensor x = copy_to(a.get(name).get<LoDTensor>(), cpu_place);
  const Tensor y = copy_to(b.get(name).get<LoDTensor>(), cpu_place);
  double worst = x.dims() == y.dims() ? 0 : INFINITY;
  for (std::int64_t i = 0; worst != INFINITY && i < x.numel(); ++i) {
    const double e = y.data<float>()[i];
    worst = std::max(worst, std::abs(x.data<float>()[i] - e) / std::max(1.0, std::abs(e)));
  }
  return worst;
}

int run(bool as_test) {
  if (!cuda_available()) {
    std::printf("%s: the CUDA kernels were compiled, but there is nothing to run them on\n",
                cuda_unavailable_reason().c_str());
    return as_test ? 77 : 0;
  }
  ops::register_all();
  const ProgramDesc program = classifier();
  Scope gpu_scope, cpu_scope;
  fill(gpu_scope);
  fill(cpu_scope);
  Executor gpu(place::of<cuda>(0)), cpu(cpu_place);
  std::vector<op_trace> trace;
  gpu.trace_into(&trace);
  gpu.run(program.block(0), gpu_scope);
  cpu.run(program.block(0), cpu_scope);
  for (const op_trace& t : trace)
    std::printf("  %-28s %s%s\n", t.op.c_str(), t.chosen.to_string().c_str(),
                t.fell_back ? " (fallback)" : "");
  const double probabilities = worst_difference(gpu_scope, cpu_scope, "probabilities");
  const double loss = worst_difference(gpu_scope, cpu_scope, "loss");
  const bool ok = probabilities <= 1e-4 && loss <= 1e-4;
  std::printf("against the CPU run (tolerance 1e-4): softmax %.1e, loss %.1e: %s\n", probabilities, loss,
              ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc > 1 && std::strcmp(argv[1], "--as-test") == 0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda example failed: %s\n", e.what());
    return 1;
  }
}
