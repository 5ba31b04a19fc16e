// startup: a program that starts from operators without inputs, as Fluid's programs do.
//
//   startup program:  fill_constant -> bias      uniform_random -> w      fill_constant -> x
//   main program:     fc(x, w, bias) -> hidden   relu(hidden) -> out
//
// fill_constant and uniform_random have no tensor input to take a data type from: each
// names the attribute that gives it (`dtype`), and fluidk chooses their kernels by it. The
// startup program runs on the accelerator when one is built (OpenCL; CUDA kernels exist too)
// and again on the CPU; uniform_random draws element i from (seed, i) alone, so both runs
// make the same weights, and the main program gives the same output from either. The
// example prints the kernel each operator ran and exits 1 if the two outputs differ by more
// than 1e-5 * max(1, |cpu|) in any element.
#include <cmath>
#include <cstdint>
#include <fluidk/executor.hpp>
#include <fluidk/fluidk.hpp>
#include <fluidk/program.hpp>
#include <iostream>
#include <ops/ops.hpp>
#include <string>
#include <vector>

namespace {

using namespace fluidk;

constexpr double tolerance = 1e-5;

ProgramDesc startup_program() {
  ProgramDesc program;
  BlockDesc& block = program.global_block();
  const std::string f32 = "float32";
  block.append_op(OpDesc("fill_constant", {}, {{"Out", {"bias"}}},
                         {{"shape", std::vector<std::int64_t>{16}}, {"value", 0.1}, {"dtype", f32}}));
  block.append_op(OpDesc("uniform_random", {}, {{"Out", {"w"}}},
                         {{"shape", std::vector<std::int64_t>{32, 16}},
                          {"min", -0.5},
                          {"max", 0.5},
                          {"seed", std::int64_t(2026)},
                          {"dtype", f32}}));
  block.append_op(OpDesc("fill_constant", {}, {{"Out", {"x"}}},
                         {{"shape", std::vector<std::int64_t>{4, 32}}, {"value", 1.0}, {"dtype", f32}}));
  return program;
}

ProgramDesc main_program() {
  ProgramDesc program;
  BlockDesc& block = program.global_block();
  for (const char* name : {"x", "w", "bias"}) block.var(name).kind = var_kind::lod_tensor;
  block.append_op(OpDesc("fc", {{"Input", {"x"}}, {"W", {"w"}}, {"Bias", {"bias"}}}, {{"Out", {"hidden"}}}));
  block.append_op(OpDesc("relu", {{"X", {"hidden"}}}, {{"Out", {"out"}}}));
  return program;
}

// Runs both programs at `where`; returns the output on the host.
std::vector<float> run(const place& where, Scope& scope) {
  Executor executor(where);
  std::vector<op_trace> trace;
  executor.trace_into(&trace);
  executor.run(startup_program().block(0), scope);
  executor.run(main_program().block(0), scope);
  executor.trace_into(nullptr);
  std::cout << "--- on " << where << '\n';
  for (const op_trace& t : trace)
    std::cout << "  " << t.op << ": " << t.chosen << (t.fell_back ? " (fallback)" : "") << '\n';
  const Tensor out = copy_to(scope.get("out").get<LoDTensor>(), cpu_place);
  return {out.data<float>(), out.data<float>() + out.numel()};
}

}  // namespace

int main() {
  ops::register_all();
#if FLUIDK_HAS_OPENCL
  const place accelerator = parse_place("opencl:0");
#else
  const place accelerator = cpu_place;
#endif
  Scope on_device, on_cpu;
  const std::vector<float> device_out = run(accelerator, on_device);
  const std::vector<float> cpu_out = run(cpu_place, on_cpu);
  if (device_out.size() != cpu_out.size() || cpu_out.size() != 4 * 16) {
    std::cout << "output sizes differ\n";
    return 1;
  }
  for (std::size_t i = 0; i < cpu_out.size(); ++i)
    if (!(std::abs(device_out[i] - cpu_out[i]) <= tolerance * std::max(1.0, std::abs(double(cpu_out[i]))))) {
      std::cout << "element " << i << ": " << device_out[i] << " on the accelerator, " << cpu_out[i]
                << " on the CPU\n";
      return 1;
    }
  std::cout << "the accelerator's output matches the CPU's (" << cpu_out.size()
            << " elements, out[0] = " << cpu_out[0] << ")\n";
  return 0;
}
