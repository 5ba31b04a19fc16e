// opencl: the device that was added to fluidk from outside the core (see
// docs/new-device.md and include/fluidk/devices/opencl.hpp), used as a user would.
//
//   1. the place: its devices, the device fluidk will use, a round trip of a tensor;
//   2. the static path: fc then relu with OpenCL kernels picked at compile time; the input
//      starts on the CPU and the compile-time chain moves it;
//   3. the runtime path: the same two operators as a program run by an executor on the
//      OpenCL place, explain() for the first one;
//   4. both against the plain CPU kernels. Exit 1 on a mismatch, 0 with a message when the
//      machine has no OpenCL device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fluidk/devices/opencl.hpp>
#include <fluidk/executor.hpp>
#include <fluidk/static_dispatch.hpp>
#include <ops/ops.hpp>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace fluidk;

template <class P>
typed_tensor<P, float> random_matrix(std::int64_t rows, std::int64_t cols, std::mt19937& rng) {
  typed_tensor<cpu, float> host({rows, cols});
  std::uniform_real_distribution<float> dist(-1, 1);
  for (std::int64_t i = 0; i < host.numel(); ++i) host.data()[i] = dist(rng);
  if constexpr (std::is_same_v<P, cpu>)
    return host;
  else
    return tensor_cast<P, float>(copy_to(host, place::of<P>(0)));
}

// A device matrix brought back to the host, typed for the CPU kernels.
typed_tensor<cpu, float> host_copy(const typed_tensor<opencl, float>& t) {
  return tensor_cast<cpu, float>(copy_to(t, cpu_place));
}

// Largest |a - b| / max(1, |b|) over two tensors of the same shape, wherever they live.
double worst_difference(const Tensor& a, const Tensor& b) {
  const Tensor x = copy_to(a, cpu_place), y = copy_to(b, cpu_place);
  if (x.dims() != y.dims()) return INFINITY;
  double worst = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double e = y.data<float>()[i];
    worst = std::max(worst, std::abs(x.data<float>()[i] - e) / std::max(1.0, std::abs(e)));
  }
  return worst;
}

int run() {
  const place device = place::of<opencl>(0);
  std::printf("place kind '%s' (id %d), %d device(s)\n", std::string(opencl::name).c_str(), int(opencl::id),
              device_count(device));
  if (device_count(device) == 0) {
    std::printf("no OpenCL device on this machine: nothing to run\n");
    return 0;
  }
  std::printf("using %s: %s\n\n", device.to_string().c_str(), context_of<opencl>(0).device_name().c_str());
  ops::register_all();
  std::mt19937 rng(7);

  // 1. A round trip through device memory.
  const auto host = random_matrix<cpu>(3, 4, rng);
  const Tensor back = copy_to(copy_to(host, device), cpu_place);
  const bool round_trip = std::equal(host.data(), host.data() + host.numel(), back.data<float>());
  std::printf("round trip CPU -> %s -> CPU: %s\n", device.to_string().c_str(),
              round_trip ? "exact" : "DIFFERS");

  // 2. The static path: the kernels are chosen at compile time. x is on the CPU, so the
  //    chain for fc's Input is a copy to the device; W and b already live there.
  const auto x = random_matrix<cpu>(16, 32, rng);
  const auto w = random_matrix<opencl>(32, 8, rng);
  const auto b = random_matrix<opencl>(1, 8, rng);
  using fc_kernel = static_kernel_type<ops::fc, target<opencl>, decltype(x), decltype(w), decltype(b)>;
  std::printf("static fc on opencl: kernel %s\n", fc_kernel::key().to_string().c_str());
  Tensor hidden, out;
  run<ops::fc>(target<opencl>(0), inputs(x, w, b), outputs(hidden));
  run<ops::relu>(target<opencl>(0), inputs(tensor_cast<opencl, float>(hidden)), outputs(out));
  std::printf("static result: %s\n", out.describe().c_str());

  // 3. The runtime path: a program on the OpenCL place.
  ProgramDesc program;
  BlockDesc& block = program.block(0);
  for (const char* name : {"x", "w", "b"}) block.var(name).persistable = std::string(name) != "x";
  block.append_op(OpDesc("fc", {{"Input", {"x"}}, {"W", {"w"}}, {"Bias", {"b"}}}, {{"Out", {"hidden"}}}, {}));
  block.append_op(OpDesc("relu", {{"X", {"hidden"}}}, {{"Out", {"out"}}}, {}));
  Scope scope;
  scope.var("x").set(LoDTensor(x.tensor()));
  scope.var("w").set(LoDTensor(w.tensor()));
  scope.var("b").set(LoDTensor(b.tensor()));
  const std::vector<std::vector<Variable*>> fc_inputs{
      {&scope.get("x")}, {&scope.get("w")}, {&scope.get("b")}};
  std::printf("\n%s", explain(find_operator("fc"), device, fc_inputs).c_str());
  Executor executor(device);
  executor.run(program.block(0), scope);
  const Tensor& runtime_out = scope.get("out").get<LoDTensor>();
  std::printf("runtime result: %s; %llu input(s) moved, %llu bytes copied\n", runtime_out.describe().c_str(),
              static_cast<unsigned long long>(executor.stats().transforms),
              static_cast<unsigned long long>(executor.stats().bytes_copied));

  // 4. The plain CPU kernels on the same data.
  Tensor cpu_hidden, cpu_out;
  run<ops::fc>(target<cpu>(), inputs(x, host_copy(w), host_copy(b)), outputs(cpu_hidden));
  run<ops::relu>(target<cpu>(), inputs(tensor_cast<cpu, float>(cpu_hidden)), outputs(cpu_out));
  const double static_diff = worst_difference(out, cpu_out),
               runtime_diff = worst_difference(runtime_out, cpu_out);
  const bool ok = round_trip && static_diff <= 1e-4 && runtime_diff <= 1e-4;
  std::printf("\nagainst the CPU kernels (tolerance 1e-4): static %.1e, runtime %.1e: %s\n", static_diff,
              runtime_diff, ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "opencl example failed: %s\n", e.what());
    // What was queued before the error runs to its end before the process does: PoCL, which
    // compiles a kernel on its own thread when it first runs, crashed in an exit under way
    // (docs/new-device.md).
    try {
      if (device_count(place::of<opencl>(0)) > 0) context_of<opencl>(0).wait();
    } catch (const std::exception&) {
    }
    return 1;
  }
}
