// onednn: a convolution through oneDNN followed by a plain operator, in one program.
//
//   conv2d {use_onednn: true}  ->  relu (plain CPU kernel)
//
// oneDNN's convolution works in its own blocked layouts: the example conv2d kernel leaves
// its output in nChw8c or nChw16c (whichever oneDNN picked for this machine). The plain relu
// kernel knows nothing of blocked data, so the executor unblocks the tensor to NCHW before
// relu runs, in a child scope, leaving conv2d's output as it is. Nothing in the program asks
// for that transform; fluidk inserts it from the kernel keys.
//
// The program prints what the executor did for each operator (its trace: the kernel key it
// chose and every input it transformed, with the chain), checks that relu's input was
// unblocked, and compares the result with the same program run with the plain conv2d
// kernel: the two convolutions add their products in different orders, so the results
// agree to float rounding, not bit for bit. Tolerance: |onednn - plain| <= 1e-4 *
// max(1, |plain|) per element. Exit status 1 on a mismatch.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fluidk/executor.hpp>
#include <fluidk/fluidk.hpp>
#include <fluidk/program.hpp>
#include <iomanip>
#include <iostream>
#include <ops/ops.hpp>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if !FLUIDK_OPS_ONEDNN
#error "the onednn example needs the oneDNN kernels of examples/ops (build with fluidk_onednn_dep)"
#endif

namespace {

using namespace fluidk;

constexpr double tolerance = 1e-4;

Tensor random_tensor(const dims& shape, data_layout layout, std::mt19937& rng) {
  Tensor t(shape, data_type::float32, cpu_place, layout);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::generate_n(t.data<float>(), t.numel(), [&] { return dist(rng); });
  return t;
}

// conv2d (3x3, padding 1) followed by relu; only conv2d may use oneDNN.
ProgramDesc conv_relu(bool use_onednn) {
  ProgramDesc program;
  BlockDesc& block = program.global_block();
  block.var("image").shape = {-1, 3, 8, 8};
  block.var("filter") = VarDesc{"filter", var_kind::lod_tensor, data_type::float32, {16, 3, 3, 3}, true};
  attribute_map conv_attrs{{"strides", std::vector<std::int32_t>{1, 1}},
                           {"paddings", std::vector<std::int32_t>{1, 1}},
                           {"use_onednn", use_onednn}};
  block.append_op(OpDesc("conv2d", {{"Input", {"image"}}, {"Filter", {"filter"}}}, {{"Output", {"conv"}}},
                         std::move(conv_attrs)));
  block.append_op(OpDesc("relu", {{"X", {"conv"}}}, {{"Out", {"out"}}}));
  return program;
}

bool blocked(data_layout layout) { return block_of(layout) > 1; }

// A program run: its scope (a child of the one holding the image and the filter) and the
// executor's trace, one entry per operator run.
struct run_result {
  Scope& scope;
  std::vector<op_trace> trace;
};

run_result run_program(const ProgramDesc& program, Scope& data, const char* title) {
  run_result result{data.new_scope(), {}};
  Executor executor(cpu_place);
  executor.trace_into(&result.trace);
  executor.run(program.block(0), result.scope);
  executor.trace_into(nullptr);

  std::cout << "--- " << title << '\n';
  for (const op_trace& op : result.trace) {
    std::cout << std::left << std::setw(8) << op.op << std::right << op.chosen
              << (op.fell_back ? " (fallback)" : "") << '\n';
    for (const input_trace& in : op.inputs)
      std::cout << "          " << in.slot << " '" << in.variable << "': " << in.chain
                << (in.cached ? " (cached)" : "") << '\n';
  }
  const executor_stats& stats = executor.stats();
  std::cout << "executor: " << stats.ops_run << " operators, " << stats.transforms << " inputs transformed, "
            << stats.fallbacks << " fallbacks\n";
  return result;
}

// The trace entry of the first operator of a type, or nullptr.
const op_trace* find_op(const std::vector<op_trace>& trace, std::string_view type) {
  const auto it = std::find_if(trace.begin(), trace.end(), [&](const op_trace& t) { return t.op == type; });
  return it != trace.end() ? &*it : nullptr;
}

}  // namespace

int main() {
  ops::register_all();

  std::mt19937 rng(7);
  Scope data;
  data.var("image").set(LoDTensor(random_tensor({2, 3, 8, 8}, data_layout::nchw, rng)));
  data.var("filter").set(LoDTensor(random_tensor({16, 3, 3, 3}, data_layout::any, rng)));

  const run_result dnn = run_program(conv_relu(true), data, "conv2d with oneDNN, then the plain relu");
  const run_result plain =
      run_program(conv_relu(false), data, "reference: the plain conv2d, then the plain relu");

  // oneDNN's conv2d left its output blocked, and the executor unblocked it for the plain
  // relu: relu's trace shows its input X transformed from the blocked layout, and relu's
  // output (relu keeps the layout of its input) shows what it read.
  const data_layout conv_layout = dnn.scope.get("conv").get<LoDTensor>().layout();
  const data_layout relu_layout = dnn.scope.get("out").get<LoDTensor>().layout();
  const op_trace* relu = find_op(dnn.trace, "relu");
  const bool unblocked =
      relu != nullptr && std::any_of(relu->inputs.begin(), relu->inputs.end(), [&](const input_trace& in) {
        return in.slot == "X" && in.from.layout() == conv_layout && !blocked(in.to.layout());
      });
  std::cout << "---\nconv2d (oneDNN) output layout: " << name_of(conv_layout)
            << "; relu (plain) output layout: " << name_of(relu_layout) << '\n';
  bool ok = blocked(conv_layout) && unblocked && !blocked(relu_layout);
  if (!ok) std::cout << "MISMATCH: expected conv2d's blocked output to be unblocked before the plain relu\n";

  // Both results are NCHW now (checked above for oneDNN's), so they compare element by element.
  const Tensor& a = dnn.scope.get("out").get<LoDTensor>();
  const Tensor& b = plain.scope.get("out").get<LoDTensor>();
  if (a.dims() != b.dims() || a.layout() != b.layout()) {
    std::cout << "MISMATCH: oneDNN's result is " << a.describe() << ", the plain one " << b.describe()
              << '\n';
    ok = false;
  } else {
    double max_diff = 0;
    std::int64_t misses = 0;
    for (std::int64_t i = 0; i < a.numel(); ++i) {
      const double x = a.data<float>()[i], y = b.data<float>()[i], diff = std::abs(x - y);
      max_diff = std::max(max_diff, diff);
      if (!(diff <= tolerance * std::max(1.0, std::abs(y)))) ++misses;
    }
    std::cout << "oneDNN vs plain, " << a.dims() << ": max |difference| " << max_diff << ", " << misses
              << " element(s) outside the tolerance " << tolerance << " * max(1, |plain|)\n";
    ok = ok && misses == 0;
  }
  std::cout << (ok ? "OK\n" : "FAILED\n");
  return ok ? 0 : 1;
}
