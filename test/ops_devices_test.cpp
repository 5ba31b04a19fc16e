// The device kernels of the example operators, each against the plain CPU kernel of the same
// operator on the same random inputs, run through the runtime path with the accelerator as
// the executor's place (inputs start on the CPU: fluidk moves them). Built twice: for OpenCL
// (PoCL: runs in every test run) and, with -DFLUIDK_OPS_TEST_CUDA=1, for CUDA (skips, saying
// why, where there is no device; see cuda/cuda_test_main.cpp).
//
// Tolerances, per data type: float 1e-4 relative (floor 1e-4 absolute) for products and
// convolutions, 1e-5 for softmax; double 1e-10 and 1e-12. relu and elementwise_add are one
// rounding each, so they must match exactly.
#include <algorithm>
#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <fluidk/executor.hpp>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/scope.hpp>
#include <fluidk/transforms/cpu.hpp>
#include <ops/ops.hpp>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "ops_test_support.hpp"

using namespace fluidk;

#if defined(FLUIDK_OPS_TEST_CUDA) && FLUIDK_OPS_TEST_CUDA
using device_place_kind = cuda;
using device_types = boost::mp11::mp_list<float, double>;
#else
using device_place_kind = opencl;
using device_types = boost::mp11::mp_list<float>;
#endif

namespace {

const bool registered = (ops::register_all(), true);
const place device = place::of<device_place_kind>(0);

std::mt19937& rng() {
  static std::mt19937 engine(20261122);
  return engine;
}

template <class T>
Tensor random_tensor(const dims& shape, double lo = -1, double hi = 1) {
  Tensor t(shape, data_type_of<T>);
  fluidk_test::fill_uniform<T>(t, rng(), lo, hi);
  return t;
}

// The elements of a variable's tensor, wherever it lives, in row-major order.
template <class T>
std::vector<T> values(const Variable& v) {
  Tensor t = copy_to(v.get<LoDTensor>(), cpu_place);
  if (t.layout() != data_layout::any && t.layout() != data_layout::nchw)
    t = transform(t, kernel_key{cpu_place, t.dtype(), data_layout::nchw, library_type::plain});
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

template <class T>
double product_tolerance() {
  return std::is_same_v<T, float> ? 1e-4 : 1e-10;
}

using fluidk_test::check_close;
using fluidk_test::slot_names;

// One operator through the runtime path at `where`, on variables of the scope by name.
kernel_choice run_at(const place& where, Scope& scope, std::string_view type, const slot_names& in,
                     const slot_names& out, const attribute_map& attrs = {}) {
  REQUIRE(registered);
  return fluidk_test::run_named(where, scope, type, in, out, attrs);
}

// Runs the operator on the device (into outputs suffixed "_dev") and on the CPU ("_cpu");
// checks that the device kernel was the one chosen and left its outputs on the device.
void run_both(Scope& scope, std::string_view type, const slot_names& in,
              const std::vector<std::string>& out_slots, const std::string& out_name,
              const attribute_map& attrs = {}) {
  for (const bool on_device : {true, false}) {
    slot_names out;
    for (const std::string& slot : out_slots)
      out.push_back({slot, {out_name + "_" + slot + (on_device ? "_dev" : "_cpu")}});
    const kernel_choice choice = run_at(on_device ? device : cpu_place, scope, type, in, out, attrs);
    INFO(std::string(type) << " chose " << choice.chosen.to_string());
    CHECK_FALSE(choice.fell_back);
    CHECK(choice.chosen.place() == (on_device ? device : cpu_place));
    for (const auto& [slot, names] : out)
      CHECK(scope.get(names[0]).get<LoDTensor>().place() == choice.chosen.place());
  }
}

template <class T>
void compare(Scope& scope, const std::string& out_name, const std::string& slot, double tol) {
  INFO(out_name << " " << slot);
  const auto dev = values<T>(scope.get(out_name + "_" + slot + "_dev"));
  const auto cpu = values<T>(scope.get(out_name + "_" + slot + "_cpu"));
  if (tol == 0)
    CHECK(dev == cpu);
  else
    check_close(dev, cpu, tol);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("relu and elementwise_add on the device: exactly the CPU results, LoD kept",
                        "[ops][device]", device_types) {
  using T = TestType;
  Scope scope;
  scope.var("x").set(LoDTensor(random_tensor<T>({7, 3, 5}), {{0, 3, 7}}));
  scope.var("same").set(LoDTensor(random_tensor<T>({7, 3, 5})));
  scope.var("row").set(LoDTensor(random_tensor<T>({5})));
  scope.var("middle").set(LoDTensor(random_tensor<T>({3, 1})));  // trailing 1 dropped: axis 1
  scope.var("empty").set(LoDTensor(Tensor({0, 5}, data_type_of<T>)));
  run_both(scope, "relu", {{"X", {"x"}}}, {"Out"}, "relu");
  scope.var("x_part").set(LoDTensor(copy_to(random_tensor<T>({6, 5}), device).slice(1, 4)));
  run_both(scope, "relu", {{"X", {"x_part"}}}, {"Out"}, "relu_part");
  compare<T>(scope, "relu_part", "Out", 0);
  compare<T>(scope, "relu", "Out", 0);
  CHECK(scope.get("relu_Out_dev").get<LoDTensor>().lod() == lod{{0, 3, 7}});
  run_both(scope, "relu", {{"X", {"empty"}}}, {"Out"}, "relu_empty");
  CHECK(scope.get("relu_empty_Out_dev").get<LoDTensor>().numel() == 0);
  run_both(scope, "elementwise_add", {{"X", {"x"}}, {"Y", {"same"}}}, {"Out"}, "same");
  compare<T>(scope, "same", "Out", 0);
  run_both(scope, "elementwise_add", {{"X", {"x"}}, {"Y", {"row"}}}, {"Out"}, "row");
  compare<T>(scope, "row", "Out", 0);
  run_both(scope, "elementwise_add", {{"X", {"x"}}, {"Y", {"middle"}}}, {"Out"}, "middle", {{"axis", 1}});
  compare<T>(scope, "middle", "Out", 0);
}

TEMPLATE_LIST_TEST_CASE("mul and fc on the device: against the CPU kernels; a sliced input; no bias",
                        "[ops][device]", device_types) {
  using T = TestType;
  Scope scope;
  scope.var("x").set(LoDTensor(random_tensor<T>({9, 4, 5}), {{0, 4, 9}}));
  scope.var("w").set(LoDTensor(random_tensor<T>({20, 33})));
  scope.var("b").set(LoDTensor(random_tensor<T>({33})));
  // Rows 2..6 of a larger tensor already on the device: the kernel reads it where it is
  // (nothing to move), so it must honour the buffer offset.
  scope.var("part").set(LoDTensor(copy_to(random_tensor<T>({12, 20}), device).slice(2, 7)));
  REQUIRE(scope.get("part").get<LoDTensor>().offset() > 0);
  run_both(scope, "mul", {{"X", {"x"}}, {"Y", {"w"}}}, {"Out"}, "mul");
  compare<T>(scope, "mul", "Out", product_tolerance<T>());
  CHECK(scope.get("mul_Out_dev").get<LoDTensor>().dims() == dims{9, 33});
  CHECK(scope.get("mul_Out_dev").get<LoDTensor>().lod() == lod{{0, 4, 9}});
  run_both(scope, "fc", {{"Input", {"x"}}, {"W", {"w"}}, {"Bias", {"b"}}}, {"Out"}, "fc");
  compare<T>(scope, "fc", "Out", product_tolerance<T>());
  run_both(scope, "fc", {{"Input", {"part"}}, {"W", {"w"}}}, {"Out"}, "fc_part");
  compare<T>(scope, "fc_part", "Out", product_tolerance<T>());
  // Fluid's activation_type relu, after the bias, on the device too.
  run_both(scope, "fc", {{"Input", {"x"}}, {"W", {"w"}}, {"Bias", {"b"}}}, {"Out"}, "fc_relu",
           {{"activation_type", std::string("relu")}});
  compare<T>(scope, "fc_relu", "Out", product_tolerance<T>());
  const std::vector<T> relu_dev = values<T>(scope.get("fc_relu_Out_dev"));
  CHECK(std::none_of(relu_dev.begin(), relu_dev.end(), [](T v) { return v < T(0); }));
  CHECK(std::count(relu_dev.begin(), relu_dev.end(), T(0)) > 0);
  run_both(scope, "mul", {{"X", {"x"}}, {"Y", {"w"}}}, {"Out"}, "mul3", {{"x_num_col_dims", 1}});
  compare<T>(scope, "mul3", "Out", product_tolerance<T>());
  // An empty sum (K = 0): zeros, or the bias on every row.
  scope.var("x0").set(LoDTensor(random_tensor<T>({3, 0})));
  scope.var("w0").set(LoDTensor(random_tensor<T>({0, 4})));
  scope.var("b0").set(LoDTensor(random_tensor<T>({4})));
  run_both(scope, "mul", {{"X", {"x0"}}, {"Y", {"w0"}}}, {"Out"}, "mul_k0");
  compare<T>(scope, "mul_k0", "Out", 0);
  CHECK(values<T>(scope.get("mul_k0_Out_dev")) == std::vector<T>(12, T(0)));
  run_both(scope, "fc", {{"Input", {"x0"}}, {"W", {"w0"}}, {"Bias", {"b0"}}}, {"Out"}, "fc_k0");
  compare<T>(scope, "fc_k0", "Out", 0);
}

TEST_CASE("a device without a kernel for the call: the CPU kernel runs, counted as a fallback",
          "[ops][device][fallback]") {
  Scope scope;
  scope.var("logits").set(LoDTensor(random_tensor<float>({4, 6})));
  Tensor labels({4, 1}, data_type::int64);
  for (std::int64_t i = 0; i < 4; ++i) labels.data<std::int64_t>()[i] = i;
  scope.var("label").set(LoDTensor(labels));
  // crf_decoding always runs on the CPU (its kernels' place), in any program.
  scope.var("emission").set(LoDTensor(random_tensor<float>({5, 3}), {{0, 2, 5}}));
  scope.var("transition").set(LoDTensor(random_tensor<float>({5, 3})));
  const kernel_choice crf =
      run_at(device, scope, "crf_decoding", {{"Emission", {"emission"}}, {"Transition", {"transition"}}},
             {{"ViterbiPath", {"path"}}});
  CHECK(crf.chosen.place() == cpu_place);
  CHECK_FALSE(crf.fell_back);
#if !(defined(FLUIDK_OPS_TEST_CUDA) && FLUIDK_OPS_TEST_CUDA)
  // double on OpenCL: the float-only device kernels do not apply; relu falls back to the CPU.
  scope.var("xd").set(LoDTensor(random_tensor<double>({3, 4})));
  const std::uint64_t before = operator_registry::instance().fallback_count(
      "relu", kernel_key{device, data_type::float64, data_layout::any, library_type::plain});
  const kernel_choice relu = run_at(device, scope, "relu", {{"X", {"xd"}}}, {{"Out", {"yd"}}});
  CHECK(relu.fell_back);
  CHECK(relu.chosen.place() == cpu_place);
  CHECK(operator_registry::instance().fallback_count(
            "relu", kernel_key{device, data_type::float64, data_layout::any, library_type::plain}) ==
        before + 1);
  // softmax_with_cross_entropy has no OpenCL kernel and no fallback policy: a clear error.
  CHECK_THROWS_WITH(
      run_at(device, scope, "softmax_with_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"label"}}},
             {{"Softmax", {"p"}}, {"Loss", {"l"}}}),
      Catch::Contains("Operator (softmax_with_cross_entropy) does not have kernel for") &&
          Catch::Contains("opencl"));
#endif
}

TEST_CASE(
    "a program run again on the device asks the driver for no buffer: its freed activations serve the next "
    "runs",
    "[ops][device][memory_cache]") {
  Scope scope;
  scope.var("x").set(LoDTensor(random_tensor<float>({32, 48})));
  scope.var("y").set(LoDTensor(random_tensor<float>({32, 48})));
  // a and b die before out is made (eager deletion): later activations can take their buffers.
  const std::vector<op_invocation> ops{
      {"relu", {{"X", {"x"}}}, {{"Out", {"a"}}}, {}},
      {"elementwise_add", {{"X", {"a"}}, {"Y", {"y"}}}, {{"Out", {"b"}}}, {}},
      {"relu", {{"X", {"b"}}}, {{"Out", {"c"}}}, {}},
      {"elementwise_add", {{"X", {"c"}}, {"Y", {"x"}}}, {{"Out", {"out"}}}, {}}};
  std::vector<std::vector<float>> results;
  for (const place& where : {cpu_place, device}) {
    Executor executor(where);
    Executor::prepared p = executor.prepare(ops, scope, {.eager_deletion = true, .keep = {"out"}});
    executor.run(p);
    results.push_back(values<float>(scope.get("out")));
    if (where == cpu_place) continue;
    CHECK(scope.get("out").get<LoDTensor>().place() == device);
    CHECK(scope.get("a").get<LoDTensor>().handle() == nullptr);  // released after its last use
    // The second run makes one buffer more: the first run's out, kept, is alive while the
    // second's is made. From the third run on, the driver makes none.
    device_memory_cache& cache = context_of<device_place_kind>(0).memory_cache();
    executor.run(p);
    const device_memory_cache::statistics before = cache.stats();
    for (int run = 0; run < 3; ++run) {
      executor.run(p);
      CHECK(values<float>(scope.get("out")) == results.back());
    }
    const device_memory_cache::statistics after = cache.stats();
    CHECK(after.driver_allocations == before.driver_allocations);
    CHECK(after.reuses >= before.reuses + 3 * 4);  // a, b, c and out in each run
  }
  CHECK(results[0] == results[1]);  // relu and elementwise_add: one rounding each, exact
}

#if !(defined(FLUIDK_OPS_TEST_CUDA) && FLUIDK_OPS_TEST_CUDA)
TEST_CASE(
    "OpenCL kernels are made once per thread and kept; two threads launching at once get the CPU's results",
    "[ops][device][opencl]") {
  Scope scope;
  scope.var("x").set(LoDTensor(random_tensor<float>({64, 33})));
  scope.var("y").set(LoDTensor(random_tensor<float>({64, 33})));
  run_both(scope, "relu", {{"X", {"x"}}}, {"Out"}, "relu");
  run_both(scope, "elementwise_add", {{"X", {"relu_Out_cpu"}}, {"Y", {"y"}}}, {"Out"}, "sum");
  const std::size_t kept = ops::detail::opencl_kernels_kept();
  CHECK(kept >= 2);  // relu's and elementwise_add's
  for (int i = 0; i < 3; ++i) {
    run_both(scope, "relu", {{"X", {"x"}}}, {"Out"}, "relu");
    run_both(scope, "elementwise_add", {{"X", {"relu_Out_cpu"}}, {"Y", {"y"}}}, {"Out"}, "sum");
  }
  CHECK(ops::detail::opencl_kernels_kept() == kept);
  compare<float>(scope, "relu", "Out", 0);
  compare<float>(scope, "sum", "Out", 0);

  // Each thread keeps kernels of its own: setting the arguments of one kernel from two threads
  // at once would launch one thread's kernel on the other's buffers. (No Catch assertions in
  // the threads: they count what went wrong.)
  const std::vector<float> expected = values<float>(scope.get("sum_Out_cpu"));
  const operator_info& relu = find_operator("relu");
  const operator_info& add = find_operator("elementwise_add");
  std::vector<int> wrong(2, 0), failed(2, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      try {
        Scope own;
        Variable &x = own.var("x"), &y = own.var("y"), &r = own.var("r"), &sum = own.var("sum");
        x.set(LoDTensor(scope.get("x").get<LoDTensor>()));
        y.set(LoDTensor(scope.get("y").get<LoDTensor>()));
        const std::vector<std::vector<Variable*>> relu_in{{&x}}, relu_out{{&r}}, add_in{{&r}, {&y}},
            add_out{{&sum}};
        for (int i = 0; i < 20; ++i) {
          run_operator(relu, device, relu_in, relu_out, {});
          run_operator(add, device, add_in, add_out, {});
          if (values<float>(sum) != expected) ++wrong[std::size_t(t)];
        }
        if (ops::detail::opencl_kernels_kept() < 2) ++failed[std::size_t(t)];
      } catch (...) {
        ++failed[std::size_t(t)];
      }
    });
  for (std::thread& t : threads) t.join();
  CHECK(wrong == std::vector<int>{0, 0});
  CHECK(failed == std::vector<int>{0, 0});
}
#endif

#if defined(FLUIDK_OPS_TEST_CUDA) && FLUIDK_OPS_TEST_CUDA
TEMPLATE_LIST_TEST_CASE("conv2d with cuDNN: against the plain CPU conv", "[ops][device][cudnn]",
                        device_types) {
  using T = TestType;
  Scope scope;
  scope.var("input").set(LoDTensor(random_tensor<T>({2, 4, 9, 8})));
  scope.var("filter").set(LoDTensor(random_tensor<T>({6, 2, 3, 3})));
  const attribute_map attrs{{"use_cudnn", true},
                            {"strides", std::vector<std::int32_t>{2, 1}},
                            {"paddings", std::vector<std::int32_t>{1, 0}},
                            {"dilations", std::vector<std::int32_t>{1, 2}},
                            {"groups", 2}};
  const kernel_choice gpu = run_at(device, scope, "conv2d", {{"Input", {"input"}}, {"Filter", {"filter"}}},
                                   {{"Output", {"conv_dev"}}}, attrs);
  CHECK(gpu.chosen.library() == library_type_of<library::cudnn>);
  CHECK_FALSE(gpu.fell_back);
  run_at(cpu_place, scope, "conv2d", {{"Input", {"input"}}, {"Filter", {"filter"}}},
         {{"Output", {"conv_cpu"}}}, attrs);
  check_close(values<T>(scope.get("conv_dev")), values<T>(scope.get("conv_cpu")), product_tolerance<T>());
}

TEMPLATE_LIST_TEST_CASE("softmax_with_cross_entropy on CUDA: labels read where they are; bad labels",
                        "[ops][device]", device_types) {
  using T = TestType;
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  Scope scope;
  scope.var("logits").set(LoDTensor(random_tensor<T>({6, 300}, -50, 50), {{0, 2, 6}}));
  Tensor labels({6, 1}, data_type::int64);
  const std::int64_t given[] = {0, 299, 17, -100, 1, 150};
  std::copy(std::begin(given), std::end(given), labels.data<std::int64_t>());
  scope.var("label").set(LoDTensor(labels));
  run_both(scope, "softmax_with_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"label"}}},
           {"Softmax", "Loss"}, "sce");
  compare<T>(scope, "sce", "Softmax", tol);
  compare<T>(scope, "sce", "Loss", tol);
  CHECK(scope.get("label").get<LoDTensor>().place() == cpu_place);  // exempt: never moved
  labels.data<std::int64_t>()[4] = 300;
  scope.var("bad").set(LoDTensor(labels));
  CHECK_THROWS_WITH(
      run_at(device, scope, "softmax_with_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"bad"}}},
             {{"Softmax", {"p"}}, {"Loss", {"l"}}}),
      Catch::Contains("Label 300 of row 4 is outside [0, 300)"));
}
#endif

TEMPLATE_LIST_TEST_CASE("fill_constant and uniform_random on the device: the CPU's numbers, drawn there",
                        "[ops][device]", device_types) {
  using T = TestType;
  Scope scope;
  const std::string dtype(name_of(data_type_of<T>));
  run_both(scope, "fill_constant", {}, {"Out"}, "fill",
           {{"shape", std::vector<std::int64_t>{3, 70}}, {"value", -1.25}, {"dtype", dtype}});
  compare<T>(scope, "fill", "Out", 0);
  run_both(scope, "uniform_random", {}, {"Out"}, "uniform",
           {{"shape", std::vector<std::int64_t>{1000}}, {"seed", std::int64_t(3)}, {"dtype", dtype}});
  // The same draw, bit for bit (lo + (hi - lo) * u is one fma on every device: it once
  // differed in the last bit of a fifth of the draws on OpenCL, which fused it alone).
  compare<T>(scope, "uniform", "Out", 0);
  run_both(scope, "uniform_random", {}, {"Out"}, "uniform_narrow",
           {{"shape", std::vector<std::int64_t>{4096}},
            {"seed", std::int64_t(7)},
            {"min", 0.1},
            {"max", 0.7},
            {"dtype", dtype}});
  compare<T>(scope, "uniform_narrow", "Out", 0);
  run_both(scope, "uniform_random", {}, {"Out"}, "uniform_empty",
           {{"shape", std::vector<std::int64_t>{0, 4}}, {"dtype", dtype}});
  CHECK(scope.get("uniform_empty_Out_dev").get<LoDTensor>().numel() == 0);
  // A value the type cannot hold is refused on both places, whatever the shape, empty too.
  if constexpr (std::is_same_v<T, float>)
    for (const place& where : {cpu_place, device})
      for (const std::vector<std::int64_t>& shape :
           {std::vector<std::int64_t>{2}, std::vector<std::int64_t>{0}})
        CHECK_THROWS_WITH(run_at(where, scope, "fill_constant", {}, {{"Out", {"too_big"}}},
                                 {{"shape", shape}, {"value", 1e40}, {"dtype", dtype}}),
                          Catch::Contains("is beyond the largest value of float"));
}
