// The rules of kernel choice (kernel_choice.hpp), one regression test per way the paths
// used to disagree or go wrong: the static path, the runtime call (run_operator) and the
// executor pick the same kernel and prepare inputs the same way.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <fluidk/devices/onednn_tags.hpp>
#include <fluidk/dot.hpp>
#include <fluidk/executor.hpp>
#include <fluidk/program.hpp>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/static_dispatch.hpp>
#include <fluidk/transforms/cpu.hpp>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "simulated_device.hpp"

using namespace fluidk;
using npu = fluidk_test::accelerator;

namespace {

// What the last kernel saw.
struct seen {
  std::string kernel;
  kernel_key key;
  std::vector<kernel_key> inputs;  // the key of each input tensor, in slot order (arrays flattened)
};
thread_local seen last;

void record(std::string name, execution_context& ctx) {
  last = {std::move(name), ctx.kernel(), {}};
  for (std::size_t s = 0; s < ctx.input_slot_count(); ++s)
    for (const kernel_arg& a : ctx.inputs(s)) {
      if (a.empty()) continue;
      if (a.variable() != nullptr && a.variable()->is<LoDTensorArray>()) {
        for (const LoDTensor& t : a.variable()->get<LoDTensorArray>()) last.inputs.push_back(key_of(t));
      } else if (a.variable() != nullptr && tensor_of(*a.variable()) == nullptr) {
        continue;  // holds nothing
      } else {
        last.inputs.push_back(key_of(a.tensor()));
      }
    }
  for (std::size_t s = 0; s < ctx.output_slot_count(); ++s)
    for (kernel_arg& a : ctx.outputs(s))
      if (!a.empty()) a.mutable_tensor() = Tensor({1}, ctx.kernel().dtype(), ctx.place());
}

template <class T>
struct any_kernel {
  using dtype = T;
  void operator()(execution_context& ctx) const { record("any", ctx); }
};
template <class T>
struct blocked_kernel {
  using dtype = T;
  using layouts = boost::mp11::mp_list<layout::nChw8c>;
  void operator()(execution_context& ctx) const { record("nChw8c", ctx); }
};

Tensor filled(const dims& shape, data_type dtype, data_layout layout = data_layout::any,
              const place& where = cpu_place) {
  Tensor t(shape, dtype, cpu_place, layout);
  std::memset(t.memory().handle, 0, t.storage_bytes());  // a fresh CPU buffer: offset 0
  return where == cpu_place ? t : copy_to(t, where);
}

// Runs an operator through the executor on one-variable slots named after the slots.
kernel_key run_in_executor(Executor& executor, Scope& scope, std::string_view op,
                           std::vector<std::pair<std::string, std::vector<std::string>>> in,
                           const attribute_map& attrs = {}) {
  std::vector<op_trace> traces;
  executor.trace_into(&traces);
  const op_invocation call{std::string(op), std::move(in), {{"Out", {"out"}}}, attrs};
  executor.run(std::span(&call, 1), scope);
  executor.trace_into(nullptr);
  return traces.at(0).chosen;
}

// 1. Kernels for layouts {ANY, nChw8c}, an nChw8c input.
struct two_layouts {
  static constexpr std::string_view name = "kc_two_layouts";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(any_kernel<float>{}, blocked_kernel<float>{}));
};

// 2. An exempt input does not decide the data type on either path.
struct with_labels {
  static constexpr std::string_view name = "kc_with_labels";
  static constexpr std::array<std::string_view, 2> inputs{"X", "Label"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr std::array<std::string_view, 1> no_transform_inputs{"Label"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(any_kernel<float>{}, any_kernel<double>{}));
};

// 3. No tensor inputs: the data type comes from an attribute.
struct filler {
  static constexpr std::string_view name = "kc_filler";
  static constexpr std::array<std::string_view, 0> inputs{};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr std::string_view data_type_attribute = "dtype";
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(any_kernel<float>{}, any_kernel<double>{}));
};

// 4. The first slot optional and empty: the deciding input's layout is the preferred one.
struct optional_first {
  static constexpr std::string_view name = "kc_optional_first";
  static constexpr std::array<std::string_view, 2> inputs{"Bias", "X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(any_kernel<float>{}, blocked_kernel<float>{}));
};

// 5. A CPU-only operator that may fall back.
struct falls_back {
  static constexpr std::string_view name = "kc_falls_back";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr fallback_policy fallback = fallback_policy::cpu;
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(any_kernel<float>{}));
};

// 7. Two slots, the second keeping its layout: one blocked variable in both needs two copies.
struct keeps_second {
  static constexpr std::string_view name = "kc_keeps_second";
  static constexpr std::array<std::string_view, 2> inputs{"X", "Y"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr std::array<std::string_view, 1> keep_layout_inputs{"Y"};
  static constexpr auto kernels = make_kernels(kernels_on<npu>(any_kernel<float>{}));
};

// 8. An array input on an accelerator kernel.
struct takes_array {
  static constexpr std::string_view name = "kc_takes_array";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<npu>(any_kernel<float>{}));
};

// 11. A blocked-layout kernel: a 2-D input cannot be laid out for it.
struct blocked_only {
  static constexpr std::string_view name = "kc_blocked_only";
  static constexpr std::array<std::string_view, 2> inputs{"X", "Y"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(blocked_kernel<float>{}));
};

const operator_info& two_layouts_info = register_operator<two_layouts>();
const operator_info& with_labels_info = register_operator<with_labels>();
const operator_info& filler_info = register_operator<filler>();
const operator_info& optional_first_info = register_operator<optional_first>();
const operator_info& falls_back_info = register_operator<falls_back>();
const operator_info& keeps_second_info = register_operator<keeps_second>();
const operator_info& takes_array_info = register_operator<takes_array>();
const operator_info& blocked_only_info = register_operator<blocked_only>();

}  // namespace

TEST_CASE("1. kernels for {ANY, nChw8c} and an nChw8c input: every path runs the nChw8c kernel",
          "[kernel_choice]") {
  using blocked = typed_tensor<cpu, float, layout::nChw8c>;
  static_assert(std::is_same_v<static_kernel_type<two_layouts, target<cpu>, blocked>,
                               kernel_type<cpu, float, layout::nChw8c>>);
  blocked x({1, 8, 2, 2});
  Tensor y;
  run<two_layouts>(target<cpu>(), inputs(x), outputs(y));
  CHECK(last.kernel == "nChw8c");

  Scope scope;
  scope.var("x").set(LoDTensor(x.tensor()));
  const std::vector<std::vector<Variable*>> in{{&scope.get("x")}}, out{{&scope.var("out")}};
  CHECK(run_operator(two_layouts_info, cpu_place, in, out).chosen.layout() == data_layout_of<layout::nChw8c>);
  CHECK(last.kernel == "nChw8c");
  Executor executor(cpu_place);
  CHECK(run_in_executor(executor, scope, "kc_two_layouts", {{"X", {"x"}}}).layout() ==
        data_layout_of<layout::nChw8c>);
  CHECK(last.kernel == "nChw8c");
  // An NCHW input: the ANY kernel, on every path.
  using plain = typed_tensor<cpu, float, layout::nchw>;
  static_assert(std::is_same_v<static_kernel_type<two_layouts, target<cpu>, plain>, kernel_type<cpu, float>>);
  scope.var("x").set(LoDTensor(filled({1, 8, 2, 2}, data_type::float32, data_layout::nchw)));
  CHECK(run_operator(two_layouts_info, cpu_place, in, out).chosen.layout() == data_layout::any);
}

TEST_CASE("2. an exempt input does not decide the data type, statically or at run time", "[kernel_choice]") {
  using x_t = typed_tensor<cpu, double>;
  using label_t = typed_tensor<cpu, std::int64_t>;
  static_assert(
      std::is_same_v<static_kernel_type<with_labels, target<cpu>, x_t, label_t>, kernel_type<cpu, double>>);
  x_t x({3});
  label_t label({3});
  Tensor y;
  run<with_labels>(target<cpu>(), inputs(x, label), outputs(y));
  CHECK(last.key == kernel_type<cpu, double>::key());
  Scope scope;
  scope.var("x").set(LoDTensor(x.tensor()));
  scope.var("label").set(LoDTensor(label.tensor()));
  const std::vector<std::vector<Variable*>> in{{&scope.get("x")}, {&scope.get("label")}},
      out{{&scope.var("out")}};
  CHECK(run_operator(with_labels_info, cpu_place, in, out).chosen == kernel_type<cpu, double>::key());
  CHECK(last.inputs.at(1).dtype() == data_type::int64);  // and it is not cast
}

TEST_CASE("3. an operator without tensor inputs takes its data type from its attribute", "[kernel_choice]") {
  Tensor y;
  run<filler, double>(target<cpu>(), inputs(), outputs(y));
  CHECK(last.key == kernel_type<cpu, double>::key());
  static_assert(static_selection<filler, target<cpu>, void>.status() == selection_status::no_data_type);
  static_assert(static_selection<filler, target<cpu>, float>.status() == selection_status::chosen);
  const attribute_map says_float{{"dtype", std::string("float32")}};
  CHECK_THROWS_WITH(
      (run<filler, double>(target<cpu>(), inputs(), outputs(y), says_float)),
      Catch::Contains("attribute 'dtype' asks for float but the static call runs it in double"));

  Scope scope;
  const std::vector<std::vector<Variable*>> none{}, out{{&scope.var("out")}};
  CHECK(run_operator(filler_info, cpu_place, none, out, {{"dtype", std::string("float64")}}).chosen ==
        kernel_type<cpu, double>::key());
  CHECK_THROWS_WITH(
      run_operator(filler_info, cpu_place, none, out),
      Catch::Contains("operator 'kc_filler' takes its data type from attribute 'dtype', which is "
                      "not set"));
  CHECK_THROWS_WITH(run_operator(filler_info, cpu_place, none, out, {{"dtype", std::string("float99")}}),
                    Catch::Contains("operator 'kc_filler' attribute 'dtype'"));
  // A program can start from it.
  Executor executor(cpu_place);
  CHECK(run_in_executor(executor, scope, "kc_filler", {}, {{"dtype", std::string("float32")}}) ==
        kernel_type<cpu, float>::key());
  CHECK(scope.get("out").get<LoDTensor>().dtype() == data_type::float32);
}

TEST_CASE("4. the preferred layout is the deciding input's on every path, whatever the slot order",
          "[kernel_choice]") {
  using blocked = typed_tensor<cpu, float, layout::nChw8c>;
  static_assert(std::is_same_v<static_kernel_type<optional_first, target<cpu>, no_input_t, blocked>,
                               kernel_type<cpu, float, layout::nChw8c>>);
  Scope scope;
  scope.var("x").set(LoDTensor(filled({1, 8, 2, 2}, data_type::float32, data_layout_of<layout::nChw8c>)));
  Variable& bias = scope.var("bias");  // declared, never written: holds nothing
  const std::vector<std::vector<Variable*>> in{{&bias}, {&scope.get("x")}}, out{{&scope.var("out")}};
  CHECK(run_operator(optional_first_info, cpu_place, in, out).chosen.layout() ==
        data_layout_of<layout::nChw8c>);
  Executor executor(cpu_place);
  CHECK(run_in_executor(executor, scope, "kc_optional_first", {{"Bias", {"bias"}}, {"X", {"x"}}}).layout() ==
        data_layout_of<layout::nChw8c>);
}

TEST_CASE("5. set_global_fallback reaches programs prepared before it", "[kernel_choice]") {
  Scope scope;
  scope.var("x").set(LoDTensor(filled({4}, data_type::float32, data_layout::any, place::of<npu>(0))));
  const op_invocation call{"kc_falls_back", {{"X", {"x"}}}, {{"Out", {"out"}}}, {}};
  Executor executor(place::of<npu>(0));
  auto prepared = executor.prepare(std::span(&call, 1), scope);
  operator_registry::instance().set_fallback_reporter([](const fallback_event&) {});
  executor.run(prepared);
  CHECK(executor.stats().fallbacks == 1);
  operator_registry::instance().set_global_fallback(fallback_policy::none);
  CHECK_THROWS_AS(executor.run(prepared), not_registered);
  operator_registry::instance().set_global_fallback(std::nullopt);
  executor.run(prepared);
  CHECK(executor.stats().fallbacks == 2);
  operator_registry::instance().set_fallback_reporter(nullptr);
}

namespace {
thread_local int cast_device = -1;
}  // namespace

// A cast on the accelerator, so that a chain from it has a step before the copy.
template <>
struct fluidk::cast_transform<npu, float, fluidk::float16> {
  static void run(const Tensor& src, Tensor& dst) {
    cast_device = dst.place().device();
    REQUIRE(src.place() == dst.place());
    Tensor host_src = copy_to(src, cpu_place);
    Tensor host_dst(src.dims(), data_type::float16, cpu_place, src.layout());
    cast_transform<cpu, float, float16>::run(host_src, host_dst);
    copy_bytes(dst.memory(), host_dst.memory(), host_dst.storage_bytes());
  }
};

TEST_CASE("6. a static chain from device 1 keeps its intermediates on device 1", "[kernel_choice]") {
  Tensor src = filled({4}, data_type::float32, data_layout::any, place::of<npu>(1));
  const auto x = tensor_cast<npu, float>(src);
  using to = kernel_type<cpu, float16>;
  static_assert(boost::mp11::mp_size<transform_chain<kernel_type<npu, float>, to>>::value == 2);
  const auto y = transform<to>(x);
  CHECK(cast_device == 1);
  CHECK(y.tensor().place() == cpu_place);
}

TEST_CASE("7. one variable in two slots that need different transforms: each slot gets its own",
          "[kernel_choice]") {
  Scope scope;
  scope.var("v").set(LoDTensor(filled({1, 8, 2, 2}, data_type::float32, data_layout_of<layout::nChw8c>)));
  Executor executor(place::of<npu>(0));
  run_in_executor(executor, scope, "kc_keeps_second", {{"X", {"v"}}, {"Y", {"v"}}});
  REQUIRE(last.inputs.size() == 2);
  CHECK(last.inputs[0] ==
        kernel_key(place::of<npu>(0), data_type::float32, data_layout::nchw, library_type::plain));
  CHECK(last.inputs[1] == kernel_key(place::of<npu>(0), data_type::float32, data_layout_of<layout::nChw8c>,
                                     library_type::plain));
  CHECK(scope.kid_count() == 0);
  // The same on the runtime call.
  const std::vector<std::vector<Variable*>> in{{&scope.get("v")}, {&scope.get("v")}},
      out{{&scope.var("out")}};
  run_operator(keeps_second_info, place::of<npu>(0), in, out);
  CHECK(last.inputs[0].layout() == data_layout::nchw);
  CHECK(last.inputs[1].layout() == data_layout_of<layout::nChw8c>);
}

TEST_CASE("8. LoDTensorArray inputs move to the kernel's place", "[kernel_choice]") {
  Scope scope;
  LoDTensorArray array;
  array.emplace_back(filled({2}, data_type::float32));
  array.emplace_back(filled({3}, data_type::float32));
  scope.var("a").set(std::move(array));
  const kernel_key on_npu(place::of<npu>(1), data_type::float32, data_layout::any, library_type::plain);
  Executor executor(place::of<npu>(1));
  CHECK(run_in_executor(executor, scope, "kc_takes_array", {{"X", {"a"}}}) == on_npu);
  REQUIRE(last.inputs.size() == 2);
  CHECK(last.inputs[0] == on_npu);
  CHECK(last.inputs[1] == on_npu);
  CHECK(scope.get("a").get<LoDTensorArray>()[0].place() == cpu_place);  // the source stays
  const std::vector<std::vector<Variable*>> in{{&scope.get("a")}}, out{{&scope.var("out")}};
  run_operator(takes_array_info, place::of<npu>(1), in, out);
  CHECK(last.inputs[1] == on_npu);
}

namespace {
struct impostor {
  static constexpr std::string_view name = "kc_two_layouts";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(any_kernel<double>{}));
};
}  // namespace

TEST_CASE("9. another operator type under a name already taken is an error naming both", "[kernel_choice]") {
  CHECK_THROWS_AS(register_operator<impostor>(), registration_error);
  CHECK_THROWS_WITH(register_operator<impostor>(),
                    Catch::Contains("operator name 'kc_two_layouts' is taken by") &&
                        Catch::Contains("two_layouts'") && Catch::Contains("impostor'"));
  CHECK(&register_operator<two_layouts>() == &two_layouts_info);  // the same type again is fine
}

TEST_CASE("10. a fallback reporter may ask the registry for counts", "[kernel_choice]") {
  Scope scope;
  scope.var("x").set(LoDTensor(filled({4}, data_type::float32, data_layout::any, place::of<npu>(1))));
  const std::vector<std::vector<Variable*>> in{{&scope.get("x")}}, out{{&scope.var("out")}};
  std::size_t seen_count = 99;
  operator_registry::instance().set_fallback_reporter([&](const fallback_event& e) {
    seen_count = operator_registry::instance().fallback_count(e.op, e.expected);
  });
  run_operator(falls_back_info, place::of<npu>(1), in, out);
  CHECK(seen_count >= 1);
  operator_registry::instance().set_fallback_reporter(nullptr);
}

TEST_CASE("11. a failing transform leaves no child scope and names the operator, input and kernel",
          "[kernel_choice]") {
  Scope scope;
  scope.var("x").set(LoDTensor(filled({1, 8, 2, 2}, data_type::float32)));
  scope.var("y").set(LoDTensor(filled({3, 5}, data_type::float32)));  // 2-D: no blocked layout
  Executor executor(cpu_place);
  const op_invocation call{"kc_blocked_only", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}}, {}};
  CHECK_THROWS_WITH(executor.run(std::span(&call, 1), scope),
                    Catch::Contains("operator 'kc_blocked_only' input Y ('y') for kernel {data_type[float]; "
                                    "data_layout[nChw8c]; place[Place(cpu)]; library_type[PLAIN]}: "));
  CHECK(scope.kid_count() == 0);
  CHECK(scope.get("y").get<LoDTensor>().dims() == dims{3, 5});  // the input is untouched
  const std::vector<std::vector<Variable*>> in{{&scope.get("x")}, {&scope.get("y")}},
      out{{&scope.var("out")}};
  CHECK_THROWS_WITH(run_operator(blocked_only_info, cpu_place, in, out),
                    Catch::Contains("operator 'kc_blocked_only' input Y ('y') for kernel"));
}

namespace {
template <class T>
struct conv_plain {
  using dtype = T;
  void operator()(execution_context& ctx) const { record("plain", ctx); }
};
template <class T>
struct conv_onednn {
  using dtype = T;
  using layouts = boost::mp11::mp_list<layout::nChw8c, layout::nChw16c>;
  void operator()(execution_context& ctx) const { record("onednn", ctx); }
};
// The operator of docs/dispatch.md's worked cases.
struct doc_conv {
  static constexpr std::string_view name = "kc_doc_conv";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr fallback_policy fallback = fallback_policy::cpu;
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(conv_plain<float>{}, conv_plain<double>{}),
                                               kernels_on<cpu, library::onednn>(conv_onednn<float>{}),
                                               kernels_on<npu>(conv_plain<float>{}));
};

std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  std::size_t start = row.find('|') + 1;
  for (std::size_t bar; (bar = row.find('|', start)) != std::string::npos; start = bar + 1) {
    std::string cell = row.substr(start, bar - start);
    const auto first = cell.find_first_not_of(' '), last = cell.find_last_not_of(' ');
    out.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
  }
  return out;
}
// "cpu float NCHW" (library plain) or "acc:1 float ANY PLAIN".
kernel_key key_from_words(const std::string& text) {
  std::istringstream words(text);
  std::string p, d, l, lib = "PLAIN";
  words >> p >> d >> l >> lib;
  return {parse_place(p), parse_data_type(d), parse_data_layout(l), parse_library_type(lib)};
}
}  // namespace

namespace {
// 12. An operator with only plain kernels and the default policy (none).
struct plain_only {
  static constexpr std::string_view name = "kc_plain_only";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(any_kernel<float>{}));
};
}  // namespace

TEST_CASE(
    "12. a library request without a kernel of that library runs the plain kernel on every path, "
    "counted once, unless the policy is strict",
    "[kernel_choice]") {
  const operator_info& op = register_operator<plain_only>();
  const kernel_key asked = kernel_type<cpu, float, layout::any, library::onednn>::key();
  const kernel_key plain = kernel_type<cpu, float>::key();
  std::vector<fallback_event> reported;
  operator_registry::instance().set_fallback_reporter(
      [&](const fallback_event& e) { reported.push_back(e); });

  // Static: use_onednn as the target's library compiles and runs the plain kernel.
  using x_type = typed_tensor<cpu, float>;
  static_assert(std::is_same_v<static_kernel_type<plain_only, target<cpu, library::onednn>, x_type>,
                               kernel_type<cpu, float>>);
  static_assert(
      std::is_void_v<static_kernel_type<
          plain_only, target<cpu, library::onednn, with_fallback<fallback_policy::strict>>, x_type>>);
  x_type x({4});
  Tensor y;
  last = {};
  run<plain_only>(target<cpu, library::onednn>(), inputs(x), outputs(y));
  CHECK(last.kernel == "any");
  CHECK(last.key == plain);

  // Runtime call and explain.
  Scope scope;
  scope.var("x").set(LoDTensor(filled({4}, data_type::float32)));
  const std::vector<std::vector<Variable*>> in{{&scope.get("x")}}, out{{&scope.var("out")}};
  const attribute_map onednn{{"use_onednn", true}};
  const kernel_choice choice = run_operator(op, cpu_place, in, out, onednn);
  CHECK(choice.chosen == plain);
  CHECK(choice.fell_back);
  const std::string text = explain(op, cpu_place, in, onednn);
  INFO(text);
  CHECK(text.find("(fallback)") != std::string::npos);
  CHECK(text.find(asked.to_string()) != std::string::npos);

  // Executor: the plain kernel, counted as a fallback on each run.
  Executor executor(cpu_place);
  CHECK(run_in_executor(executor, scope, "kc_plain_only", {{"X", {"x"}}}, onednn) == plain);
  CHECK(executor.stats().fallbacks == 1);

  // Counted every time, reported once per operator and expected key.
  CHECK(operator_registry::instance().fallback_count("kc_plain_only", asked) == 3);
  CHECK(std::count_if(reported.begin(), reported.end(),
                      [](const fallback_event& e) { return e.op == "kc_plain_only"; }) == 1);

  // A plain request is no fallback; strict refuses the library request on both run-time paths.
  CHECK_FALSE(run_operator(op, cpu_place, in, out).fell_back);
  operator_registry::instance().set_global_fallback(fallback_policy::strict);
  CHECK_THROWS_AS(run_operator(op, cpu_place, in, out, onednn), not_registered);
  CHECK_THROWS_AS(run_in_executor(executor, scope, "kc_plain_only", {{"X", {"x"}}}, onednn), not_registered);
  CHECK_FALSE(run_operator(op, cpu_place, in, out).fell_back);
  operator_registry::instance().set_global_fallback(std::nullopt);
  operator_registry::instance().set_fallback_reporter(nullptr);
}

namespace {
// 13. A program that asks every operator for oneDNN (Paddle's FLAGS_use_mkldnn): one operator
// has a oneDNN kernel, the other only plain ones (and the default policy, none).
template <class T>
struct onednn_kernel {
  using dtype = T;
  void operator()(execution_context& ctx) const { record("onednn", ctx); }
};
struct has_onednn {
  static constexpr std::string_view name = "kc_has_onednn";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(any_kernel<float>{}),
                                               kernels_on<cpu, library::onednn>(onednn_kernel<float>{}));
};
struct no_onednn {
  static constexpr std::string_view name = "kc_no_onednn";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(any_kernel<float>{}));
};

std::size_t occurrences(const std::string& text, std::string_view what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}
}  // namespace

TEST_CASE(
    "13. use_onednn on every operator of a prepared program: the plain kernel where there is no oneDNN "
    "one, counted on every run, reported once, traced, drawn, explained; strict refuses it",
    "[kernel_choice]") {
  register_operator<has_onednn>();
  const operator_info& op = register_operator<no_onednn>();
  auto& registry = operator_registry::instance();
  const kernel_key asked = kernel_type<cpu, float, layout::any, library::onednn>::key();
  const kernel_key plain = kernel_type<cpu, float>::key();
  std::vector<fallback_event> reported;
  registry.set_fallback_reporter([&](const fallback_event& e) {
    if (e.op == "kc_no_onednn") reported.push_back(e);
  });

  const ProgramDesc program = parse_program(
      "block 0\n"
      "  var x : LoDTensor float [4]\n"
      "  op kc_has_onednn (X: x) -> (Out: a) {use_onednn: bool true}\n"
      "  op kc_no_onednn (X: a) -> (Out: b) {use_mkldnn: bool true}\n");
  Scope scope;
  scope.var("x").set(LoDTensor(filled({4}, data_type::float32)));
  Executor executor(cpu_place);
  auto prepared = executor.prepare(program.block(0), scope);
  std::vector<op_trace> first, second;
  executor.trace_into(&first);
  executor.run(prepared);
  CHECK(last.kernel == "any");
  executor.trace_into(&second);
  executor.run(prepared);
  executor.trace_into(nullptr);
  CHECK(last.kernel == "any");

  // The operator with a oneDNN kernel runs it; the other runs its plain kernel as a fallback.
  REQUIRE(first.size() == 2);
  CHECK(first[0].chosen == asked);
  CHECK_FALSE(first[0].fell_back);
  CHECK(first[1].expected == asked);
  CHECK(first[1].chosen == plain);
  CHECK(first[1].fell_back);
  REQUIRE(second.size() == 2);
  CHECK(second[1].fell_back);  // the second run chose from its memo: still a fallback
  CHECK(executor.stats().fallbacks == 2);
  CHECK(registry.fallback_count("kc_no_onednn", asked) == 2);
  REQUIRE(reported.size() == 1);
  CHECK(reported[0].expected == asked);
  CHECK(reported[0].chosen == plain);
  const std::string dot = to_dot(program, first);
  CHECK(occurrences(dot, "class=\"fallback\"") == 1);
  CHECK_THAT(dot, Catch::Contains("fallback: no kernel for\\nfloat ANY_LAYOUT ONEDNN"));

  // explain says which kernel and that it is a fallback.
  const std::vector<std::vector<Variable*>> in{{&scope.get("a")}};
  const attribute_map onednn{{"use_onednn", true}};
  CHECK_THAT(explain(op, cpu_place, in, onednn),
             Catch::Contains("  expected: " + asked.to_string() + "\n  kernel:   " + plain.to_string() +
                             " (fallback)\n"));

  // The static path, with the request as the target's library and as an attribute.
  using x_type = typed_tensor<cpu, float>;
  static_assert(static_selection<no_onednn, target<cpu, library::onednn>, void, x_type>.fell_back);
  static_assert(static_selection<no_onednn, target<cpu, library::onednn, with_fallback<fallback_policy::none>>,
                                 void, x_type>
                    .fell_back);
  static_assert(static_selection<no_onednn, target<cpu, library::onednn, with_fallback<fallback_policy::strict>>,
                                 void, x_type>
                    .status() == selection_status::no_kernel);
  x_type x({4});
  Tensor y;
  run<no_onednn>(target<cpu, library::onednn>(), inputs(x), outputs(y), onednn);
  CHECK(last.key == plain);
  CHECK(registry.fallback_count("kc_no_onednn", asked) == 3);
  CHECK(reported.size() == 1);

  // Strict, set after the program was prepared, turns the fallback off: the executor, the
  // runtime call and explain all say there is no kernel.
  registry.set_global_fallback(fallback_policy::strict);
  CHECK_THROWS_WITH(executor.run(prepared),
                    Catch::Contains("Operator (kc_no_onednn) does not have kernel for " + asked.to_string()));
  const std::vector<std::vector<Variable*>> out{{&scope.var("b")}};
  CHECK_THROWS_AS(run_operator(op, cpu_place, in, out, onednn), not_registered);
  CHECK_THAT(explain(op, cpu_place, in, onednn),
             Catch::Contains("  kernel:   none (no kernel for " + asked.to_string()));
  CHECK(executor.stats().fallbacks == 2);
  // None, set globally, is the default's rule: the library request falls back again.
  registry.set_global_fallback(fallback_policy::none);
  executor.run(prepared);
  CHECK(executor.stats().fallbacks == 3);
  registry.set_global_fallback(std::nullopt);
  executor.run(prepared);
  CHECK(executor.stats().fallbacks == 4);
  CHECK(registry.fallback_count("kc_no_onednn", asked) == 5);
  CHECK(reported.size() == 1);
  registry.set_fallback_reporter(nullptr);
}

TEST_CASE("docs/dispatch.md's worked cases hold on the runtime path and in the executor",
          "[kernel_choice][docs]") {
  const char* docs = std::getenv("FLUIDK_DOCS");
  REQUIRE(docs != nullptr);
  std::ifstream page(std::string(docs) + "/dispatch.md");
  REQUIRE(page);
  const operator_info& op = register_operator<doc_conv>();
  operator_registry::instance().set_fallback_reporter([](const fallback_event&) {});
  std::string line;
  bool in_table = false;
  int rows = 0;
  while (std::getline(page, line)) {
    if (line.rfind("| input X |", 0) == 0) {
      in_table = true;
      continue;
    }
    if (!in_table || line.rfind("|---", 0) == 0) continue;
    if (line.rfind("|", 0) != 0) break;
    const std::vector<std::string> c = cells(line);
    REQUIRE(c.size() == 6);
    INFO(line);
    const kernel_key x = key_from_words(c[0]);
    const place where = parse_place(c[2]);
    attribute_map attrs;
    if (c[1] == "use_onednn") attrs.set("use_onednn", true);
    if (c[1].rfind("op_device=", 0) == 0) attrs.set("op_device", c[1].substr(10));
    Scope scope;
    scope.var("x").set(LoDTensor(filled(x.layout() == data_layout::any ? dims{1, 8, 1, 1} : dims{1, 16, 1, 1},
                                        x.dtype(), x.layout(), x.place())));
    const std::vector<std::vector<Variable*>> in{{&scope.get("x")}}, out{{&scope.var("out")}};
    CHECK(expected_kernel_key(op, where, in, attrs) == key_from_words(c[3]));
    // The operator's own policy (cpu), then, as the page says, none (no kernel for the rows by
    // step 2.5) and strict (none for those by 2.4 either), set globally.
    const std::optional<fallback_policy> policies[] = {std::nullopt, fallback_policy::none,
                                                       fallback_policy::strict};
    for (const std::optional<fallback_policy> policy : policies) {
      INFO("global policy " << (policy ? int(*policy) : -1));
      const std::string step = c[5].substr(0, 3);
      const bool refused = c[4] == "none" ||
                           (policy == fallback_policy::none && (step == "2.5" || step == "2.6")) ||
                           (policy == fallback_policy::strict && c[5].find("fallback") != std::string::npos);
      operator_registry::instance().set_global_fallback(policy);
      Executor executor(where);
      if (refused) {
        CHECK_THROWS_AS(run_operator(op, where, in, out, attrs), not_registered);
        CHECK_THROWS_AS(run_in_executor(executor, scope, "kc_doc_conv", {{"X", {"x"}}}, attrs),
                        not_registered);
      } else {
        const kernel_choice choice = run_operator(op, where, in, out, attrs);
        CHECK(choice.chosen == key_from_words(c[4]));
        CHECK(choice.fell_back == (c[5].find("fallback") != std::string::npos));
        CHECK(run_in_executor(executor, scope, "kc_doc_conv", {{"X", {"x"}}}, attrs) == key_from_words(c[4]));
      }
    }
    operator_registry::instance().set_global_fallback(std::nullopt);
    ++rows;
  }
  operator_registry::instance().set_fallback_reporter(nullptr);
  CHECK(rows == 10);
}
