// cpu: one small classifier computed twice on the CPU with the example operators, once
// through each of fluidk's two dispatch paths, and every result compared bit for bit.
//
//   logits = relu(x W1 + b1) W2 + b2        fc, relu, mul, elementwise_add
//   loss   = cross_entropy(softmax(logits), label)      softmax_with_cross_entropy
//
// 1. The static path: the inputs are typed tensors (place, data type and layout in the
//    type), so fluidk::run<Op> picks each kernel while compiling; nothing is looked up at
//    run time.
// 2. The runtime path: the same operators as a program (ProgramDesc) run by an Executor on
//    a Scope holding the same tensors; every kernel is found in the operators' runtime
//    tables, which register_all() builds from the same kernel maps.
//
// Both paths call the same kernels on the same data, so the results must be identical; the
// program exits with 1 when they are not.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <fluidk/executor.hpp>
#include <fluidk/fluidk.hpp>
#include <fluidk/program.hpp>
#include <fluidk/static_dispatch.hpp>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <ops/ops.hpp>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace {

using fluidk::cpu;
using f32_tensor = fluidk::typed_tensor<cpu, float>;  // CPU, float, any layout
namespace ops = fluidk::ops;

constexpr std::int64_t batch = 4, features = 6, hidden = 8, classes = 3;

// A tensor of the given shape filled with uniform values in [-1, 1).
f32_tensor random_tensor(const fluidk::dims& shape, std::mt19937& rng) {
  f32_tensor t(shape);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::generate_n(t.data(), t.numel(), [&] { return dist(rng); });
  return t;
}

// True when two float tensors hold the same bits (so -0 differs from 0, and NaN equals NaN).
bool identical(const fluidk::Tensor& a, const fluidk::Tensor& b) {
  const std::span<const float> x(a.data<float>(), static_cast<std::size_t>(a.numel()));
  const std::span<const float> y(b.data<float>(), static_cast<std::size_t>(b.numel()));
  const auto bits = [](float v) { return std::bit_cast<std::uint32_t>(v); };
  return a.dims() == b.dims() && std::ranges::equal(x, y, {}, bits, bits);
}

}  // namespace

int main() {
  std::mt19937 rng(2024);
  const f32_tensor x = random_tensor({batch, features}, rng);
  const f32_tensor w1 = random_tensor({features, hidden}, rng);
  const f32_tensor b1 = random_tensor({hidden}, rng);
  const f32_tensor w2 = random_tensor({hidden, classes}, rng);
  const f32_tensor b2 = random_tensor({classes}, rng);
  fluidk::typed_tensor<cpu, std::int64_t> label({batch, 1});  // hard labels: one class per row
  for (std::int64_t i = 0; i < batch; ++i) label.data()[i] = i % classes;

  // --- 1. The static path ---------------------------------------------------------------------
  // Each call names the operator and the target (the CPU, plain kernels); the outputs are
  // plain Tensors, viewed as typed tensors again to feed the next call (a checked
  // conversion that shares the buffer).
  const fluidk::target<cpu> on_cpu;
  fluidk::Tensor h, h_relu, scores, logits, softmax, loss;
  fluidk::run<ops::fc>(on_cpu, fluidk::inputs(x, w1, b1), fluidk::outputs(h));
  fluidk::run<ops::relu>(on_cpu, fluidk::inputs(f32_tensor(h)), fluidk::outputs(h_relu));
  fluidk::run<ops::mul>(on_cpu, fluidk::inputs(f32_tensor(h_relu), w2), fluidk::outputs(scores));
  fluidk::run<ops::elementwise_add>(on_cpu, fluidk::inputs(f32_tensor(scores), b2), fluidk::outputs(logits));
  fluidk::run<ops::softmax_with_cross_entropy>(on_cpu, fluidk::inputs(f32_tensor(logits), label),
                                               fluidk::outputs(softmax, loss));

  // The kernel the static path chose for fc, as a type, and its runtime key.
  using fc_kernel =
      fluidk::static_kernel_type<ops::fc, fluidk::target<cpu>, f32_tensor, f32_tensor, f32_tensor>;
  std::cout << "static path: fc runs " << fc_kernel::key() << "\n\n";

  // --- 2. The runtime path --------------------------------------------------------------------
  ops::register_all();  // the runtime tables of the example operators

  // The tensors go into a scope under the names the program uses; LoDTensor(t) shares t's
  // buffer, so both paths read the very same data.
  fluidk::Scope scope;
  const std::pair<const char*, const fluidk::Tensor*> feeds[] = {
      {"x", &x.tensor()},   {"w1", &w1.tensor()}, {"b1", &b1.tensor()},
      {"w2", &w2.tensor()}, {"b2", &b2.tensor()}, {"label", &label.tensor()}};
  for (const auto& [name, tensor] : feeds) scope.var(name).set(fluidk::LoDTensor(*tensor));

  // The program: variables for the data fed in (weights persistable), then the operators;
  // append_op checks each operator and declares its outputs.
  fluidk::ProgramDesc program;
  fluidk::BlockDesc& block = program.global_block();
  using fluidk::var_kind;
  using fluidk::VarDesc;
  block.var("x") = VarDesc{"x", var_kind::lod_tensor, fluidk::data_type::float32, {-1, features}};
  block.var("w1") = VarDesc{"w1", var_kind::lod_tensor, fluidk::data_type::float32, {features, hidden}, true};
  block.var("b1") = VarDesc{"b1", var_kind::lod_tensor, fluidk::data_type::float32, {hidden}, true};
  block.var("w2") = VarDesc{"w2", var_kind::lod_tensor, fluidk::data_type::float32, {hidden, classes}, true};
  block.var("b2") = VarDesc{"b2", var_kind::lod_tensor, fluidk::data_type::float32, {classes}, true};
  block.var("label") = VarDesc{"label", var_kind::lod_tensor, fluidk::data_type::int64, {-1, 1}};
  using fluidk::OpDesc;
  block.append_op(OpDesc("fc", {{"Input", {"x"}}, {"W", {"w1"}}, {"Bias", {"b1"}}}, {{"Out", {"h"}}}));
  block.append_op(OpDesc("relu", {{"X", {"h"}}}, {{"Out", {"h_relu"}}}));
  block.append_op(OpDesc("mul", {{"X", {"h_relu"}}, {"Y", {"w2"}}}, {{"Out", {"scores"}}}));
  block.append_op(OpDesc("elementwise_add", {{"X", {"scores"}}, {"Y", {"b2"}}}, {{"Out", {"logits"}}}));
  block.append_op(OpDesc("softmax_with_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"label"}}},
                         {{"Softmax", {"softmax"}}, {"Loss", {"loss"}}}));

  // What the runtime path does for one call: the expected kernel key, the kernel chosen and
  // each input's transforms (none here: everything is already a plain float CPU tensor).
  const std::vector<std::vector<fluidk::Variable*>> fc_inputs{
      {&scope.get("x")}, {&scope.get("w1")}, {&scope.get("b1")}};
  std::cout << "runtime path: " << fluidk::explain(fluidk::find_operator("fc"), fluidk::cpu_place, fc_inputs)
            << '\n';

  fluidk::Executor executor(fluidk::cpu_place);
  auto prepared = executor.prepare(program.block(0), scope);  // operators and variables resolved once
  executor.run(prepared);

  // --- The two paths must agree exactly -------------------------------------------------------
  const std::pair<const char*, const fluidk::Tensor*> results[] = {
      {"h", &h},           {"h_relu", &h_relu},   {"scores", &scores},
      {"logits", &logits}, {"softmax", &softmax}, {"loss", &loss}};
  bool same = true;
  for (const auto& [name, tensor] : results)
    if (!identical(*tensor, scope.get(name).get<fluidk::LoDTensor>())) {
      std::cout << "MISMATCH: '" << name << "' differs between the static and the runtime path\n";
      same = false;
    }
  const fluidk::Tensor& rt_loss = scope.get("loss").get<fluidk::LoDTensor>();

  std::cout << "row  label  softmax (static path)          loss (static)  loss (runtime)\n"
            << std::fixed << std::setprecision(6);
  for (std::int64_t i = 0; i < batch; ++i) {
    std::cout << std::setw(3) << i << std::setw(7) << label.data()[i] << " ";
    for (std::int64_t j = 0; j < classes; ++j)
      std::cout << std::setw(10) << softmax.data<float>()[i * classes + j];
    std::cout << std::setw(15) << loss.data<float>()[i] << std::setw(16) << rt_loss.data<float>()[i] << '\n';
  }
  std::cout << "executor: " << executor.stats().ops_run << " operators run, " << executor.stats().transforms
            << " inputs transformed\n";
  if (!same) {
    std::cout << "FAILED: the static and runtime paths disagree\n";
    return 1;
  }
  std::cout << "the static and runtime paths agree bit for bit on all " << std::size(results) << " results\n";
  return 0;
}
