// Control flow (fluidk/control_flow.hpp) as the executor runs it: a counting loop, a loop that
// accumulates into its parent's variable, nested loops, a conditional inside a loop, the
// variables of a step starting empty, step scopes kept only when asked for, the failures (a
// condition of the wrong kind, a body that throws, a loop that does not end), a decoder loop on
// OpenCL with a CPU-only operator and a condition on the device against the same program on
// the CPU, the transfer cache serving a weight across steps, eager deletion, and the text form
// of the new attribute kinds.
#include <boost/mp11/list.hpp>
#include <catch2/catch.hpp>
#include <cstdint>
#include <fluidk/devices/opencl.hpp>
#include <fluidk/dot.hpp>
#include <fluidk/executor.hpp>
#include <fluidk/program.hpp>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/transforms/cpu.hpp>
#include <string>
#include <vector>

#include "opencl_map.hpp"

using namespace fluidk;
using fluidk_test::cpu_map;
using fluidk_test::opencl_map;

namespace {

float first(const Variable& v) {
  const Tensor& t = v.get<LoDTensor>();
  return t.place() == cpu_place
             ? t.data<float>()[0]
             : transform(t, kernel_key(cpu_place, data_type::float32, data_layout::any, library_type::plain))
                   .data<float>()[0];
}

// x * 0.5 + 1, on the CPU and on OpenCL.
template <class T>
struct halve_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    cpu_map(ctx, [](float x) { return x * 0.5f + 1.0f; });
  }
};
template <class T>
struct halve_opencl {
  using dtype = T;
  void operator()(execution_context& ctx) const { opencl_map(ctx, "x * 0.5f + 1.0f"); }
};
struct cf_halve {
  static constexpr std::string_view name = "cf_halve";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels =
      make_kernels(kernels_on<cpu>(halve_cpu<float>{}), kernels_on<opencl>(halve_opencl<float>{}));
};

// x + 1 on the CPU only (as crf_decoding runs in a GPU network).
template <class T>
struct increment_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    cpu_map(ctx, [](float x) { return x + 1.0f; });
  }
};
struct cf_increment {
  static constexpr std::string_view name = "cf_increment";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  using run_on = cpu;
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(increment_cpu<float>{}));
};

// Out (bool, one element) = X[0] < limit; on OpenCL the result is made on the device.
bool less(execution_context& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor host =
      x.place() == cpu_place
          ? x
          : transform(x, kernel_key(cpu_place, data_type::float32, data_layout::any, library_type::plain));
  return host.data<float>()[0] < ctx.attr<float>("limit");
}
template <class T>
struct less_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    Tensor out({1}, data_type::boolean);
    out.data<bool>()[0] = less(ctx);
    ctx.output(0) = std::move(out);
  }
};
template <class T>
struct less_opencl {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    Tensor host({1}, data_type::boolean);
    host.data<bool>()[0] = less(ctx);
    ctx.output(0) =
        transform(host, kernel_key(ctx.place(), data_type::boolean, data_layout::any, library_type::plain));
  }
};
struct cf_less {
  static constexpr std::string_view name = "cf_less";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels =
      make_kernels(kernels_on<cpu>(less_cpu<float>{}), kernels_on<opencl>(less_opencl<float>{}));
};

// Out (bool) = X[0] is an even integer.
template <class T>
struct even_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    Tensor out({1}, data_type::boolean);
    out.data<bool>()[0] = std::int64_t(ctx.input(0).data<float>()[0]) % 2 == 0;
    ctx.output(0) = std::move(out);
  }
};
struct cf_even {
  static constexpr std::string_view name = "cf_even";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(even_cpu<float>{}));
};

// Out = X + Y, elementwise (float, CPU).
template <class T>
struct add_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor& x = ctx.input(0);
    const Tensor& y = ctx.input(1);
    REQUIRE(x.numel() == y.numel());
    Tensor out(x.dims(), data_type::float32);
    for (std::int64_t i = 0; i < x.numel(); ++i)
      out.data<float>()[i] = x.data<float>()[i] + y.data<float>()[i];
    ctx.output(0) = std::move(out);
  }
};
struct cf_add {
  static constexpr std::string_view name = "cf_add";
  static constexpr std::array<std::string_view, 2> inputs{"X", "Y"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr fallback_policy fallback = fallback_policy::cpu;  // on OpenCL too
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(add_cpu<float>{}));
};

// Out = Prev + X when Prev holds a tensor, X when it is empty: tells a step whether it sees the
// last step's value of Prev.
template <class T>
struct bump_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Variable* prev = ctx.input_arg("Prev").variable();
    // A new scope's variable holds nothing; one emptied for a new step, an empty tensor.
    const bool holds = prev != nullptr && prev->initialized() && prev->get<LoDTensor>().initialized();
    const float before = holds ? prev->get<LoDTensor>().data<float>()[0] : 0.f;
    Tensor out({1}, data_type::float32);
    out.data<float>()[0] = before + ctx.input(0).data<float>()[0];
    ctx.output(0) = std::move(out);
  }
};
struct cf_bump {
  static constexpr std::string_view name = "cf_bump";
  static constexpr std::array<std::string_view, 2> inputs{"X", "Prev"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(bump_cpu<float>{}));
};

// Out = value (attribute), in X's shape.
template <class T>
struct fill_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const float value = ctx.attr<float>("value");
    Tensor out(ctx.input(0).dims(), data_type::float32);
    for (std::int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] = value;
    ctx.output(0) = std::move(out);
  }
};
struct cf_fill {
  static constexpr std::string_view name = "cf_fill";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(fill_cpu<float>{}));
};

// Out = X, a view of X's storage (as assign and reshape do).
template <class T>
struct view_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const { ctx.output(0) = ctx.input(0); }
};
struct cf_view {
  static constexpr std::string_view name = "cf_view";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(view_cpu<float>{}));
};

// Throws when X[0] is attribute `at`; else Out = X.
template <class T>
struct fail_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    if (ctx.input(0).data<float>()[0] == ctx.attr<float>("at")) throw error("cf_fail was asked to fail");
    cpu_map(ctx, [](float x) { return x; });
  }
};
struct cf_fail {
  static constexpr std::string_view name = "cf_fail";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(fail_cpu<float>{}));
};

// Out[I] = X: Out, an array, grows to I + 1 elements (float I, CPU).
template <class T>
struct write_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    auto& array = ctx.output_arg("Out").variable()->get_mutable<LoDTensorArray>();
    const auto at = std::size_t(ctx.input(1).data<float>()[0]);
    if (array.size() <= at) array.resize(at + 1);
    array[at] = LoDTensor(ctx.input(0));
  }
};
struct cf_write {
  static constexpr std::string_view name = "cf_write";
  static constexpr std::array<std::string_view, 2> inputs{"X", "I"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(write_cpu<float>{}));
  static void infer_var_type(const OpDesc& op, BlockDesc& block) {
    block.var_recursive(op.output("Out")[0]).kind = var_kind::lod_tensor_array;
  }
};

// Out: [1, 50, 50, 100] of 1 in NHWC (a million bytes), X's place.
template <class T>
struct make_nhwc_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    Tensor out({1, 50, 50, 100}, data_type::float32, ctx.place(), data_layout::nhwc);
    for (std::int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] = 1;
    ctx.output(0) = std::move(out);
  }
};
struct cf_make_nhwc {
  static constexpr std::string_view name = "cf_make_nhwc";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(make_nhwc_cpu<float>{}));
};
// Out = [X's first element], of NCHW data only (an NHWC X is reordered for it: a copy).
template <class T>
struct first_nchw_cpu {
  using dtype = T;
  using layouts = boost::mp11::mp_list<layout::nchw>;
  void operator()(execution_context& ctx) const {
    Tensor out({1}, data_type::float32);
    out.data<float>()[0] = ctx.input(0).data<float>()[0];
    ctx.output(0) = std::move(out);
  }
};
struct cf_first_nchw {
  static constexpr std::string_view name = "cf_first_nchw";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(first_nchw_cpu<float>{}));
};

const bool registered = [] {
  register_operator<cf_make_nhwc>();
  register_operator<cf_first_nchw>();
  register_operator<cf_halve>();
  register_operator<cf_increment>();
  register_operator<cf_less>();
  register_operator<cf_even>();
  register_operator<cf_add>();
  register_operator<cf_bump>();
  register_operator<cf_fill>();
  register_operator<cf_view>();
  register_operator<cf_fail>();
  register_operator<cf_write>();
  return true;
}();

OpDesc op(std::string type, slot_map inputs, slot_map outputs, attribute_map attrs = {}) {
  return OpDesc(std::move(type), std::move(inputs), std::move(outputs), std::move(attrs));
}

LoDTensor scalar(float value, std::initializer_list<std::int64_t> extents = {1}) {
  const dims dims(extents);
  LoDTensor t(Tensor(dims, data_type::float32));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = value;
  return t;
}

// i = 0 .. n - 1 as a loop of block 1: `i`, `c` and `one` in block 0; the body increments i and
// sets c = i < n. Returns the body.
// With `steps`, the while lists its step scopes in that variable.
BlockDesc& counting_loop(ProgramDesc& program, float n, std::vector<std::string> out = {"i", "c"},
                         const std::string& steps = "") {
  BlockDesc& global = program.global_block();
  global.var("i");
  global.var("c").dtype = data_type::boolean;
  BlockDesc& body = program.append_block(0);
  body.append_op(op("cf_increment", {{"X", {"i"}}}, {{"Out", {"i"}}}));
  body.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"c"}}}, {{"limit", n}}));
  global.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"c"}}}, {{"limit", n}}));
  slot_map outputs{{"Out", std::move(out)}};
  if (!steps.empty()) outputs["StepScopes"] = {steps};
  global.append_op(op("while", {{"X", {"i"}}, {"Condition", {"c"}}}, std::move(outputs),
                      {{"sub_block", block_ref{body.idx()}}}));
  return body;
}

}  // namespace

TEST_CASE("while: a counting loop", "[control_flow]") {
  REQUIRE(registered);
  ProgramDesc program;
  counting_loop(program, 10);
  Scope scope;
  scope.var("i").set(scalar(0));
  Executor executor(cpu_place);
  auto prepared = executor.prepare(program.global_block(), scope);
  executor.run(prepared);
  CHECK(first(scope.get("i")) == 10);
  CHECK(executor.stats().block_runs == 10);
  // Prepared once: a second run starts again from what i holds.
  scope.get("i").set(scalar(4));
  executor.reset_stats();
  executor.run(prepared);
  CHECK(first(scope.get("i")) == 10);
  CHECK(executor.stats().block_runs == 6);
  // A loop whose condition is false at once runs no step.
  executor.reset_stats();
  executor.run(prepared);
  CHECK(executor.stats().block_runs == 0);
  CHECK(first(scope.get("i")) == 10);
}

TEST_CASE("while: a body accumulates into its parent's variable; its own variables stay its own",
          "[control_flow]") {
  ProgramDesc program;
  BlockDesc& body = counting_loop(program, 5, {"i", "c", "acc"});
  program.global_block().var("acc");
  // t is the body's own: declared there, made in the steps' scope, never in the parent's.
  body.var("t");
  body.append_op(op("cf_halve", {{"X", {"i"}}}, {{"Out", {"t"}}}));
  body.append_op(op("cf_add", {{"X", {"acc"}}, {"Y", {"t"}}}, {{"Out", {"acc"}}}));
  Scope scope;
  scope.var("i").set(scalar(0));
  scope.var("acc").set(scalar(0));
  {
    Executor executor(cpu_place);
    auto prepared = executor.prepare(program.global_block(), scope);
    executor.run(prepared);
    // i = 1..5 when t is computed: sum of (i / 2 + 1) = 7.5 + 5.
    CHECK(first(scope.get("acc")) == 12.5f);
    CHECK(scope.find_local("t") == nullptr);
    CHECK(scope.kid_count() == 1);  // the steps' scope, the prepared program's
  }
  CHECK(scope.kid_count() == 0);  // dropped with the prepared program
}

TEST_CASE("while: a persistable variable of the program that only the body writes is the program's",
          "[control_flow]") {
  // Not among the while's outputs, and not in the scope when the program is prepared: the
  // body's write made it in the steps' scope, where the program's scope never saw it.
  for (const bool kept : {false, true}) {
    INFO((kept ? "step scopes kept" : "one scope for every step"));
    ProgramDesc program;
    BlockDesc& body = counting_loop(program, 3, {"i", "c"}, kept ? "steps" : "");
    program.global_block().var("w").persistable = true;
    body.append_op(op("cf_add", {{"X", {"i"}}, {"Y", {"i"}}}, {{"Out", {"w"}}}));
    Scope scope;
    Executor executor(cpu_place);
    prepare_options options;
    if (kept) options.keep = {"steps"};
    auto prepared = executor.prepare(program.global_block(), scope, options);
    for (int run = 0; run < 2; ++run) {
      scope.var("i").set(scalar(0));
      executor.run(prepared);
      REQUIRE(scope.find_local("w") != nullptr);
      CHECK(first(scope.get("w")) == 6.0f);  // i = 3 at the last step
      scope.var("w").set(scalar(-1));        // the program's value, written over by the next run
    }
  }
}

TEST_CASE("while: a step's own variables start empty, as in a new scope", "[control_flow]") {
  ProgramDesc program;
  BlockDesc& body = counting_loop(program, 3, {"i", "c", "acc"});
  program.global_block().var("acc");
  program.global_block().var("one").persistable = true;
  body.var("carried");
  // carried is read before it is written: each step must see it empty (1 + 1 + 1), not the last
  // step's value (1 + 2 + 3).
  body.append_op(op("cf_bump", {{"X", {"one"}}, {"Prev", {"carried"}}}, {{"Out", {"carried"}}}));
  body.append_op(op("cf_add", {{"X", {"acc"}}, {"Y", {"carried"}}}, {{"Out", {"acc"}}}));
  Scope scope;
  scope.var("i").set(scalar(0));
  scope.var("one").set(scalar(1));
  scope.var("acc").set(scalar(0));
  Executor executor(cpu_place);
  auto prepared = executor.prepare(program.global_block(), scope);
  executor.run(prepared);
  CHECK(first(scope.get("acc")) == 3);
}

TEST_CASE("while: an array a loop fills starts each run empty", "[control_flow]") {
  // values[i] = i for i from i0 + 1 to 5: a second run that starts at i0 = 3 must leave
  // values[1 .. 3] empty, not keep the first run's (as a new scope per run would not).
  ProgramDesc program;
  program.global_block().var("values").kind = var_kind::lod_tensor_array;
  BlockDesc& body = counting_loop(program, 5, {"i", "c", "values"});
  body.append_op(op("cf_write", {{"X", {"i"}}, {"I", {"i"}}}, {{"Out", {"values"}}}));
  CHECK(program.global_block().get_var("values").kind == var_kind::lod_tensor_array);
  Scope scope;
  scope.var("i");
  Executor executor(cpu_place);
  auto prepared = executor.prepare(program.global_block(), scope);
  for (const float start : {0.0f, 3.0f}) {
    scope.get("i").set(scalar(start));
    executor.run(prepared);
    const LoDTensorArray& values = scope.get("values").get<LoDTensorArray>();
    REQUIRE(values.size() == 6);
    for (std::size_t k = 1; k < values.size(); ++k) {
      INFO("start " << start << ", element " << k);
      if (float(k) <= start)
        CHECK(!values[k].initialized());
      else
        CHECK(values[k].data<float>()[0] == float(k));
    }
  }
}

TEST_CASE("while: nested loops, and a conditional inside a loop", "[control_flow]") {
  ProgramDesc program;
  BlockDesc& global = program.global_block();
  for (const char* name : {"i", "j", "acc", "evens", "zero", "one"}) global.var(name);
  global.var("ci").dtype = data_type::boolean;
  global.var("cj").dtype = data_type::boolean;
  BlockDesc& outer = program.append_block(0);
  BlockDesc& inner = program.append_block(outer.idx());
  BlockDesc& branch = program.append_block(outer.idx());
  // inner: j += 1; acc += one; cj = j < 4
  inner.append_op(op("cf_increment", {{"X", {"j"}}}, {{"Out", {"j"}}}));
  inner.append_op(op("cf_add", {{"X", {"acc"}}, {"Y", {"one"}}}, {{"Out", {"acc"}}}));
  inner.append_op(op("cf_less", {{"X", {"j"}}}, {{"Out", {"cj"}}}, {{"limit", 4.0f}}));
  // branch: evens += one
  branch.append_op(op("cf_add", {{"X", {"evens"}}, {"Y", {"one"}}}, {{"Out", {"evens"}}}));
  // outer: j = 0; cj = j < 4; while (inner); even = i is even; if (even) branch; i += 1; ci = i < 3
  outer.var("even").dtype = data_type::boolean;
  outer.append_op(op("cf_fill", {{"X", {"j"}}}, {{"Out", {"j"}}}, {{"value", 0.0f}}));
  outer.append_op(op("cf_less", {{"X", {"j"}}}, {{"Out", {"cj"}}}, {{"limit", 4.0f}}));
  outer.append_op(op("while", {{"X", {"j", "acc", "one"}}, {"Condition", {"cj"}}},
                     {{"Out", {"j", "acc", "cj"}}}, {{"sub_block", block_ref{inner.idx()}}}));
  outer.append_op(op("cf_even", {{"X", {"i"}}}, {{"Out", {"even"}}}));
  outer.append_op(op("conditional_block", {{"Cond", {"even"}}, {"Input", {"evens", "one"}}},
                     {{"Out", {"evens"}}},
                     {{"sub_block", block_ref{branch.idx()}}, {"is_scalar_condition", true}}));
  outer.append_op(op("cf_increment", {{"X", {"i"}}}, {{"Out", {"i"}}}));
  outer.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"ci"}}}, {{"limit", 5.0f}}));
  global.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"ci"}}}, {{"limit", 5.0f}}));
  global.append_op(op("while", {{"X", {"i", "j", "acc", "evens", "one"}}, {"Condition", {"ci"}}},
                      {{"Out", {"i", "j", "acc", "evens", "ci", "cj"}}},
                      {{"sub_block", block_ref{outer.idx()}}}));
  Scope scope;
  for (const char* name : {"i", "j", "acc", "evens"}) scope.var(name).set(scalar(0));
  scope.var("one").set(scalar(1));
  Executor executor(cpu_place);
  auto prepared = executor.prepare(global, scope);
  executor.run(prepared);
  CHECK(first(scope.get("i")) == 5);
  CHECK(first(scope.get("acc")) == 20);   // 5 outer steps x 4 inner steps
  CHECK(first(scope.get("evens")) == 3);  // i = 0, 2, 4
  CHECK(executor.stats().block_runs == 5 + 20 + 3);
  // The text form carries the blocks: read back, it runs the same.
  const ProgramDesc read = parse_program(to_text(program));
  CHECK(read == program);
  Scope again;
  for (const char* name : {"i", "j", "acc", "evens"}) again.var(name).set(scalar(0));
  again.var("one").set(scalar(1));
  auto reread = executor.prepare(read.global_block(), again);
  executor.run(reread);
  CHECK(first(again.get("acc")) == 20);
  CHECK(first(again.get("evens")) == 3);
}

TEST_CASE("while: a loop inside a loop whose step scopes are kept writes the step's variables",
          "[control_flow]") {
  // Outer: t = 0, then an inner loop adds one to t three times (j counts), then acc += t. t is
  // the outer body's own: with the outer step scopes kept, each step's t is in its own scope,
  // and the inner loop must write that one.
  ProgramDesc program;
  BlockDesc& global = program.global_block();
  for (const char* name : {"i", "j", "acc", "one"}) global.var(name);
  global.var("ci").dtype = data_type::boolean;
  global.var("cj").dtype = data_type::boolean;
  BlockDesc& outer = program.append_block(0);
  BlockDesc& inner = program.append_block(outer.idx());
  outer.var("t");
  inner.append_op(op("cf_add", {{"X", {"t"}}, {"Y", {"one"}}}, {{"Out", {"t"}}}));
  inner.append_op(op("cf_increment", {{"X", {"j"}}}, {{"Out", {"j"}}}));
  inner.append_op(op("cf_less", {{"X", {"j"}}}, {{"Out", {"cj"}}}, {{"limit", 3.0f}}));
  outer.append_op(op("cf_fill", {{"X", {"one"}}}, {{"Out", {"t"}}}, {{"value", 0.0f}}));
  outer.append_op(op("cf_fill", {{"X", {"one"}}}, {{"Out", {"j"}}}, {{"value", 0.0f}}));
  outer.append_op(op("cf_less", {{"X", {"j"}}}, {{"Out", {"cj"}}}, {{"limit", 3.0f}}));
  outer.append_op(op("while", {{"Condition", {"cj"}}}, {{"Out", {"t", "j", "cj"}}},
                     {{"sub_block", block_ref{inner.idx()}}}));
  outer.append_op(op("cf_add", {{"X", {"acc"}}, {"Y", {"t"}}}, {{"Out", {"acc"}}}));
  outer.append_op(op("cf_increment", {{"X", {"i"}}}, {{"Out", {"i"}}}));
  outer.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"ci"}}}, {{"limit", 4.0f}}));
  global.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"ci"}}}, {{"limit", 4.0f}}));
  global.append_op(op("while", {{"Condition", {"ci"}}}, {{"Out", {"i", "acc"}}, {"StepScopes", {"steps"}}},
                      {{"sub_block", block_ref{outer.idx()}}}));
  for (const bool keep : {false, true}) {
    Scope scope;
    for (const char* name : {"i", "j", "acc"}) scope.var(name).set(scalar(0));
    scope.var("one").set(scalar(1));
    Executor executor(cpu_place);
    auto prepared = executor.prepare(
        global, scope, {.keep = keep ? std::vector<std::string>{"steps"} : std::vector<std::string>{}});
    for (int run = 0; run < 2; ++run) {
      scope.get("i").set(scalar(0));
      scope.get("acc").set(scalar(0));
      executor.run(prepared);
      CHECK(first(scope.get("acc")) == 12);
      if (keep) {
        const auto& steps = scope.get("steps").get<StepScopes>().scopes;
        REQUIRE(steps.size() == 4);
        for (const Scope* step : steps) CHECK(first(*step->find_local("t")) == 3);
      }
    }
  }
}

TEST_CASE("while: kept step scopes keep their variables under eager deletion", "[control_flow]") {
  // The steps' scopes are kept for a reader after the loop (here a fetch): eager deletion must
  // not empty the variables in them, as it would a step's own variables otherwise.
  ProgramDesc program;
  BlockDesc& body = counting_loop(program, 3, {"i", "c", "acc"}, "steps");
  program.global_block().var("acc");
  body.var("t");
  body.append_op(op("cf_increment", {{"X", {"i"}}}, {{"Out", {"t"}}}));  // t = i + 1
  body.append_op(op("cf_add", {{"X", {"acc"}}, {"Y", {"t"}}}, {{"Out", {"acc"}}}));
  for (const bool eager : {false, true}) {
    Scope scope;
    scope.var("i").set(scalar(0));
    scope.var("acc").set(scalar(0));
    Executor executor(cpu_place);
    auto prepared =
        executor.prepare(program.global_block(), scope, {.eager_deletion = eager, .keep = {"steps", "acc"}});
    executor.run(prepared);
    CHECK(first(scope.get("acc")) == 2 + 3 + 4);
    const auto& steps = scope.get("steps").get<StepScopes>().scopes;
    REQUIRE(steps.size() == 3);
    for (std::size_t k = 0; k < steps.size(); ++k) {
      const Variable* t = steps[k]->find_local("t");
      REQUIRE(t != nullptr);
      REQUIRE(t->initialized());
      CHECK(first(*t) == float(k + 2));
    }
  }
}

TEST_CASE("while: a variable only a conditional_block in the body writes starts each step empty",
          "[control_flow]") {
  // t is written when i is even, inside a conditional_block: a step where i is odd must see it
  // empty (as in a new scope), not the last step's value. i = 1..4 in the steps: acc = 3 + 5.
  ProgramDesc program;
  BlockDesc& body = counting_loop(program, 4, {"i", "c", "acc"});
  program.global_block().var("acc");
  body.var("t");
  body.var("even").dtype = data_type::boolean;
  BlockDesc& branch = program.append_block(body.idx());
  branch.append_op(op("cf_increment", {{"X", {"i"}}}, {{"Out", {"t"}}}));
  body.append_op(op("cf_even", {{"X", {"i"}}}, {{"Out", {"even"}}}));
  body.append_op(op("conditional_block", {{"Cond", {"even"}}, {"Input", {"i"}}}, {{"Out", {"t"}}},
                    {{"sub_block", block_ref{branch.idx()}}, {"is_scalar_condition", true}}));
  // acc = acc + t where t holds a tensor, else acc.
  body.append_op(op("cf_bump", {{"X", {"acc"}}, {"Prev", {"t"}}}, {{"Out", {"acc"}}}));
  Scope scope;
  scope.var("i").set(scalar(0));
  Executor executor(cpu_place);
  auto prepared = executor.prepare(program.global_block(), scope);
  for (int run = 0; run < 2; ++run) {
    scope.get("i").set(scalar(0));
    scope.var("acc").set(scalar(0));
    executor.run(prepared);
    CHECK(first(scope.get("acc")) == 8);
  }
}

TEST_CASE("conditional_block: scalar and non-scalar conditions", "[control_flow]") {
  ProgramDesc program;
  BlockDesc& global = program.global_block();
  for (const char* name : {"x", "y", "gate"}) global.var(name);
  global.var("flag").dtype = data_type::boolean;
  BlockDesc& scalar_block = program.append_block(0);
  scalar_block.append_op(op("cf_increment", {{"X", {"y"}}}, {{"Out", {"y"}}}));
  BlockDesc& tensor_block = program.append_block(0);
  tensor_block.append_op(op("cf_halve", {{"X", {"y"}}}, {{"Out", {"y"}}}));
  global.append_op(op("cf_less", {{"X", {"x"}}}, {{"Out", {"flag"}}}, {{"limit", 1.0f}}));
  global.append_op(op("conditional_block", {{"Cond", {"flag"}}, {"Input", {"y"}}}, {{"Out", {"y"}}},
                      {{"sub_block", block_ref{scalar_block.idx()}}, {"is_scalar_condition", true}}));
  // Fluid's default: runs when every Cond tensor has elements.
  global.append_op(op("conditional_block", {{"Cond", {"gate"}}, {"Input", {"y"}}}, {{"Out", {"y"}}},
                      {{"sub_block", block_ref{tensor_block.idx()}}}));
  Executor executor(cpu_place);
  for (const float x : {0.0f, 2.0f}) {
    for (const bool gate : {true, false}) {
      Scope scope;
      scope.var("x").set(scalar(x));
      scope.var("y").set(scalar(4));
      scope.var("gate").set(gate ? scalar(0) : LoDTensor(Tensor({0}, data_type::float32)));
      auto prepared = executor.prepare(global, scope);
      executor.run(prepared);
      float expected = x < 1 ? 5 : 4;
      if (gate) expected = expected * 0.5f + 1;
      CHECK(first(scope.get("y")) == expected);
    }
  }
}

TEST_CASE("control flow: failures name the loop, the step and the operator", "[control_flow]") {
  SECTION("a condition that is not a one-element bool tensor") {
    ProgramDesc program;
    BlockDesc& global = program.global_block();
    global.var("c");
    BlockDesc& body = program.append_block(0);
    body.append_op(op("cf_increment", {{"X", {"c"}}}, {{"Out", {"c"}}}));
    global.append_op(op("while", {{"Condition", {"c"}}}, {{"Out", {"c"}}}, {{"sub_block", block_ref{1}}}));
    Executor executor(cpu_place);
    Scope scope;
    scope.var("c").set(scalar(1));
    auto prepared = executor.prepare(global, scope);
    CHECK_THROWS_WITH(executor.run(prepared),
                      "fluidk: operator 'while' (block 1), step 1: operator 'while' input Condition ('c'): a "
                      "condition is a bool tensor of one element; it holds float tensor of dims [1]");
    LoDTensor two(Tensor({2}, data_type::boolean));
    two.data<bool>()[0] = two.data<bool>()[1] = true;
    scope.get("c").set(two);
    CHECK_THROWS_WITH(executor.run(prepared), Catch::Contains("it holds bool tensor of dims [2]"));
  }
  SECTION("a body that throws, with step scopes dropped or kept") {
    for (const bool keep : {false, true}) {
      // i counts to 10, and the body's own `copy` takes i; cf_fail throws at i = 4.
      ProgramDesc program;
      BlockDesc& body = counting_loop(program, 10, {"i", "c"}, keep ? "steps" : "");
      body.var("copy");
      body.append_op(op("cf_fail", {{"X", {"i"}}}, {{"Out", {"copy"}}}, {{"at", 4.0f}}));
      if (keep) CHECK(program.global_block().get_var("steps").kind == var_kind::step_scopes);
      Scope scope;
      scope.var("i").set(scalar(0));
      Executor executor(cpu_place);
      auto prepared =
          executor.prepare(program.global_block(), scope,
                           {.keep = keep ? std::vector<std::string>{"steps"} : std::vector<std::string>{}});
      CHECK_THROWS_WITH(
          executor.run(prepared),
          "fluidk: operator 'while' (block 1), step 4: operator 'cf_fail', kernel {data_type[float]; "
          "data_layout[ANY_LAYOUT]; place[Place(cpu)]; library_type[PLAIN]}: cf_fail was asked to "
          "fail");
      // No step scope is left behind: only the shared one (the prepared program's) remains.
      CHECK(scope.kid_count() == 1);
      if (!keep) continue;
      CHECK(scope.get("steps").get<StepScopes>().scopes.empty());
      // A run that ends well keeps one scope per step, each with its step's own variables.
      scope.get("i").set(scalar(6));
      executor.run(prepared);
      const auto& steps = scope.get("steps").get<StepScopes>().scopes;
      REQUIRE(steps.size() == 4);
      CHECK(scope.kid_count() == 5);
      for (std::size_t k = 0; k < steps.size(); ++k)
        CHECK(first(*steps[k]->find_local("copy")) == float(7 + k));
      // The next run drops them first.
      scope.get("i").set(scalar(8));
      executor.run(prepared);
      CHECK(scope.get("steps").get<StepScopes>().scopes.size() == 2);
      CHECK(scope.kid_count() == 3);
    }
  }
  SECTION("a loop that does not end, with max_steps") {
    ProgramDesc program;
    BlockDesc& global = program.global_block();
    global.var("i");
    global.var("c").dtype = data_type::boolean;
    BlockDesc& body = program.append_block(0);
    body.append_op(op("cf_increment", {{"X", {"i"}}}, {{"Out", {"i"}}}));
    global.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"c"}}}, {{"limit", 1.0f}}));
    global.append_op(op("while", {{"X", {"i"}}, {"Condition", {"c"}}}, {{"Out", {"i"}}},
                        {{"sub_block", block_ref{body.idx()}}}));
    Scope scope;
    scope.var("i").set(scalar(0));
    Executor executor(cpu_place);
    executor.set_max_steps(100);
    auto prepared = executor.prepare(global, scope);
    CHECK_THROWS_WITH(
        executor.run(prepared),
        "fluidk: operator 'while' (block 1), step 101: its condition 'c' is still true after 100 "
        "steps, the most Executor::set_max_steps allows");
    CHECK(first(scope.get("i")) == 100);
  }
  SECTION("a control-flow operator is no kernel call") {
    ProgramDesc program;
    counting_loop(program, 3);  // registers while
    Variable c("c");
    const std::vector<std::vector<Variable*>> in{{}, {&c}}, out{{}, {}};
    CHECK_THROWS_WITH(
        run_operator(find_operator("while"), cpu_place, in, out),
        "fluidk: operator 'while' runs a sub-block of its program, not a kernel: run the program "
        "with an Executor");
  }
  SECTION("control flow needs its program") {
    ProgramDesc program;
    counting_loop(program, 3);
    Scope scope;
    Executor executor(cpu_place);
    const auto calls = Executor::invocations(program.global_block());
    CHECK_THROWS_WITH(
        executor.prepare(calls, scope),
        Catch::Contains("operator 'while' runs block 1 of its program: prepare the program's block"));
  }
}

TEST_CASE("control flow: a failed step empties the shared scopes of the loops inside its body too",
          "[control_flow][regression]") {
  // An outer loop whose body runs an inner loop (its own shared scope, where it writes b), then
  // fails at its second step: the inner loop's b was left in its scope.
  REQUIRE(registered);
  ProgramDesc program;
  BlockDesc& global = program.global_block();
  global.var("i");
  global.var("c").dtype = data_type::boolean;
  global.var("p1000").persistable = true;
  BlockDesc& outer = program.append_block(0);
  outer.var("j");
  outer.var("k");
  outer.var("c2").dtype = data_type::boolean;
  BlockDesc& inner = program.append_block(outer.idx());
  inner.var("b");
  inner.append_op(op("cf_increment", {{"X", {"j"}}}, {{"Out", {"j"}}}));
  inner.append_op(op("cf_fill", {{"X", {"p1000"}}}, {{"Out", {"b"}}}, {{"value", 1.0f}}));
  inner.append_op(op("cf_less", {{"X", {"j"}}}, {{"Out", {"c2"}}}, {{"limit", 2.0f}}));
  outer.append_op(op("cf_increment", {{"X", {"i"}}}, {{"Out", {"i"}}}));
  outer.append_op(op("cf_fill", {{"X", {"i"}}}, {{"Out", {"j"}}}, {{"value", 0.0f}}));
  outer.append_op(op("cf_less", {{"X", {"j"}}}, {{"Out", {"c2"}}}, {{"limit", 2.0f}}));
  outer.append_op(op("while", {{"X", {"j"}}, {"Condition", {"c2"}}}, {{"Out", {"j", "c2"}}},
                     {{"sub_block", block_ref{inner.idx()}}}));
  outer.append_op(op("cf_fail", {{"X", {"i"}}}, {{"Out", {"k"}}}, {{"at", 2.0f}}));
  outer.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"c"}}}, {{"limit", 3.0f}}));
  global.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"c"}}}, {{"limit", 3.0f}}));
  global.append_op(op("while", {{"X", {"i"}}, {"Condition", {"c"}}}, {{"Out", {"i", "c"}}},
                      {{"sub_block", block_ref{outer.idx()}}}));
  Scope scope;
  scope.var("i").set(scalar(0));
  scope.var("p1000").set(scalar(0, {1000}));
  Executor executor(cpu_place);
  auto prepared = executor.prepare(global, scope);
  CHECK_THROWS_WITH(executor.run(prepared), Catch::Contains("cf_fail was asked to fail"));
  // What the scopes under the program's hold: nothing of the failed step, at any depth.
  std::size_t held = 0;
  scope.for_each_kid([&](const Scope& kid) {
    kid.for_each_variable([&](const Variable& v) {
      if (v.is<LoDTensor>() && v.get<LoDTensor>().initialized()) held += v.get<LoDTensor>().storage_bytes();
    });
  });
  CHECK(held == 0);
  // And the program runs again, to its end.
  scope.var("i").set(scalar(3));
  CHECK_NOTHROW(executor.run(prepared));
}

TEST_CASE("control flow: a StepScopes variable that holds a tensor fails the loop and leaves no scope behind",
          "[control_flow][regression]") {
  REQUIRE(registered);
  ProgramDesc program;
  counting_loop(program, 3, {"i", "c"}, "steps");
  Scope scope;
  scope.var("i").set(scalar(0));
  Executor executor(cpu_place);
  auto prepared = executor.prepare(program.global_block(), scope, {.keep = {"steps"}});
  const std::size_t kids = scope.kid_count();
  scope.var("steps").set(scalar(1));
  for (int run = 0; run < 2; ++run) {
    scope.get("i").set(scalar(0));
    CHECK_THROWS_AS(executor.run(prepared), error);
    CHECK(scope.kid_count() == kids);  // the step's scope was made before the list was read
  }
}

TEST_CASE("program: a block attribute that names no child, made after append_op, is refused by prepare",
          "[control_flow][regression]") {
  // append_op checks block attributes; assigning a block of another program, or setting an
  // attribute on an operator appended before, can still make one name any block. prepare
  // follows the blocks as a tree: it refuses such an attribute, and never follows the cycle
  // (a body naming itself recursed until the stack ran out).
  ProgramDesc other;
  other.global_block().var("a");
  other.append_block(0);
  other.global_block().append_op(
      op("cf_halve", {{"X", {"a"}}}, {{"Out", {"b"}}}, {{"others", std::vector<block_ref>{block_ref{1}}}}));
  ProgramDesc program;
  program.global_block().var("c").dtype = data_type::boolean;
  program.append_block(0);
  program.block(1) = other.block(0);  // its operator now names block 1, its own block
  program.global_block().append_op(op("while", {{"Condition", {"c"}}}, {}, {{"sub_block", block_ref{1}}}));
  Scope scope;
  Executor executor(cpu_place);
  CHECK_THROWS_WITH(
      executor.prepare(program.global_block(), scope),
      "fluidk: operator 'cf_halve' attribute 'others' names block 1, which is not a child of block 1 "
      "(its parent is block 0)");

  // The body of an inner loop set, after it was appended, to the global block: to_dot, which
  // draws the sub-blocks of loops, refuses it too.
  ProgramDesc edited;
  edited.global_block().var("c").dtype = data_type::boolean;
  edited.append_block(0);
  edited.append_block(1);
  OpDesc& inner =
      edited.block(1).append_op(op("while", {{"Condition", {"c"}}}, {}, {{"sub_block", block_ref{2}}}));
  edited.global_block().append_op(op("while", {{"Condition", {"c"}}}, {}, {{"sub_block", block_ref{1}}}));
  inner.set_attr("sub_block", block_ref{0});
  const std::string refusal =
      "fluidk: operator 'while' attribute 'sub_block' names block 0, which is not a child of block 1 (its "
      "parent "
      "is none)";
  CHECK_THROWS_WITH(executor.prepare(edited.global_block(), scope), refusal);
  CHECK_THROWS_WITH(to_dot(edited), refusal);
}

TEST_CASE("program: block and bools attributes, checked and written", "[control_flow][text]") {
  ProgramDesc program;
  BlockDesc& global = program.global_block();
  global.var("c").dtype = data_type::boolean;
  BlockDesc& child = program.append_block(0);
  BlockDesc& grandchild = program.append_block(child.idx());
  // A block attribute names a child of the operator's block.
  CHECK_THROWS_WITH(
      global.append_op(op("while", {{"Condition", {"c"}}}, {}, {{"sub_block", block_ref{2}}})),
      "fluidk: operator 'while' attribute 'sub_block' names block 2, which is not a child of block 0 "
      "(its parent is block 1)");
  CHECK_THROWS_WITH(
      global.append_op(op("while", {{"Condition", {"c"}}}, {}, {{"sub_block", block_ref{7}}})),
      "fluidk: operator 'while' attribute 'sub_block' names block 7; the program has 3 block(s)");
  CHECK_THROWS_WITH(
      global.append_op(op("while", {{"Condition", {"c"}}}, {}, {{"sub_block", std::int32_t(1)}})),
      "fluidk: operator 'while' attribute 'sub_block' holds int, not block");
  CHECK_THROWS_WITH(global.append_op(op("while", {}, {}, {{"sub_block", block_ref{1}}})),
                    Catch::Contains("takes one variable in its input slot 'Condition'"));
  CHECK(global.ops().empty());
  BlockDesc standalone;
  CHECK_THROWS_WITH(standalone.append_op(op("while", {}, {}, {{"sub_block", block_ref{0}}})),
                    Catch::Contains("belongs to no program"));
  // Every new kind round-trips through the text form; the while's block comes after its own.
  child.append_op(op("conditional_block", {{"Cond", {"c"}}}, {{"Scope", {"scope"}}},
                     {{"sub_block", block_ref{grandchild.idx()}},
                      {"is_scalar_condition", true},
                      {"flags", std::vector<bool>{true, false, true}},
                      {"none", std::vector<bool>{}},
                      {"branches", std::vector<block_ref>{block_ref{2}, block_ref{2}}}}));
  global.append_op(
      op("while", {{"Condition", {"c"}}}, {{"Out", {"c"}}}, {{"sub_block", block_ref{child.idx()}}}));
  const std::string text = to_text(program);
  CHECK(text.find("{sub_block: block 1}") != std::string::npos);
  CHECK(
      text.find("branches: blocks [2, 2]; flags: bools [true, false, true]; is_scalar_condition: bool true; "
                "none: bools []; sub_block: block 2}") != std::string::npos);
  CHECK(text.find("var scope : StepScopes") != std::string::npos);
  const ProgramDesc read = parse_program(text);
  CHECK(read == program);
  CHECK(to_text(read) == text);
  CHECK(read.block(1).ops()[0].attr<std::vector<bool>>("flags") == std::vector<bool>{true, false, true});
  // Read back, a block attribute is checked like any other.
  CHECK_THROWS_WITH(
      parse_program("block 0\n  var c : LoDTensor bool []\n  op while (Condition: c) -> () "
                    "{sub_block: block 2}\nblock 1\nblock 2 parent 1\n"),
      "fluidk: program text, line 3: operator 'while' attribute 'sub_block' names block 2, which is "
      "not a child of block 0 (its parent is block 1)");
  CHECK_THROWS_WITH(
      parse_program("block 0\n  op while () -> () {sub_block: block x}\n"),
      "fluidk: program text, line 2: expected a block index for attribute 'sub_block', found 'x'");
}

TEST_CASE("while on OpenCL: a decoder loop with a CPU-only operator and a condition on the device",
          "[control_flow][opencl]") {
  // h = h / 2 + 1 until h >= 1.9 (a data-dependent number of steps), counting steps on the CPU
  // (cf_increment runs on the CPU only) and summing h into acc; w, a persistable weight on the
  // CPU, is read by the device operator each step.
  ProgramDesc program;
  BlockDesc& global = program.global_block();
  for (const char* name : {"h", "steps", "acc"}) global.var(name);
  global.var("w").persistable = true;
  global.var("c").dtype = data_type::boolean;
  BlockDesc& body = program.append_block(0);
  body.var("hw");
  body.append_op(op("cf_halve", {{"X", {"h"}}}, {{"Out", {"h"}}}));
  body.append_op(op("cf_halve", {{"X", {"w"}}}, {{"Out", {"hw"}}}));
  body.append_op(op("cf_increment", {{"X", {"steps"}}}, {{"Out", {"steps"}}}));
  body.append_op(op("cf_add", {{"X", {"acc"}}, {"Y", {"hw"}}}, {{"Out", {"acc"}}}));
  body.append_op(op("cf_less", {{"X", {"h"}}}, {{"Out", {"c"}}}, {{"limit", 1.99f}}));
  global.append_op(op("cf_less", {{"X", {"h"}}}, {{"Out", {"c"}}}, {{"limit", 1.99f}}));
  global.append_op(op("while", {{"X", {"h", "w", "steps", "acc"}}, {"Condition", {"c"}}},
                      {{"Out", {"h", "steps", "acc", "c"}}}, {{"sub_block", block_ref{body.idx()}}}));
  auto run_on = [&](const place& where, executor_stats& stats, std::vector<op_trace>* trace) {
    Scope scope;
    scope.var("h").set(scalar(0));
    scope.var("steps").set(scalar(0));
    scope.var("acc").set(scalar(0));
    scope.var("w").set(scalar(3));
    Executor executor(where);
    executor.trace_into(trace);
    auto prepared = executor.prepare(global, scope, {.eager_deletion = true, .keep = {"h", "steps", "acc"}});
    executor.run(prepared);
    stats = executor.stats();
    return std::vector<float>{first(scope.get("h")), first(scope.get("steps")), first(scope.get("acc"))};
  };
  executor_stats on_cpu{}, on_opencl{};
  std::vector<op_trace> trace;
  const std::vector<float> expected = run_on(cpu_place, on_cpu, nullptr);
  const std::vector<float> got = run_on(place::of<opencl>(0), on_opencl, &trace);
  // h: 0, 1, 1.5, 1.75, 1.875, 1.9375, 1.96875, 1.984375, 1.9921875: 8 steps.
  CHECK(expected == std::vector<float>{1.9921875f, 8.0f, 8 * 2.5f});
  CHECK(got == expected);
  CHECK(on_cpu.condition_copies == 0);
  // The condition, made on the device, is brought to the host once per test: 8 steps and the
  // last, false, test.
  CHECK(on_opencl.condition_copies == 9);
  // The trace: cf_less, then the while's entry (its 8 steps, its 9 copies of the condition),
  // then each step's 5 operators.
  REQUIRE(trace.size() == 2 + 8 * 5);
  const op_trace& loop = trace[1];
  CHECK(loop.op == "while");
  CHECK(loop.block_runs == 8);
  REQUIRE(loop.inputs.size() == 9);
  for (const input_trace& in : loop.inputs) {
    CHECK(in.slot == "Condition");
    CHECK(in.from.place() == place::of<opencl>(0));
    CHECK(in.to.place() == cpu_place);
    CHECK(in.bytes_copied == 1);
  }
  CHECK(trace[2].op == "cf_halve");
  CHECK(trace.back().op == "cf_less");
  // The plan: the body a cluster inside block 0, drawn with its first step's kernels; the
  // condition's edge counts its tests.
  const std::string dot = to_dot(program, trace);
  CHECK(dot.find("subgraph cluster_b1 {") != std::string::npos);
  CHECK(dot.find("label=\"block 1 (while)\"") != std::string::npos);
  CHECK(dot.find("while\\n8 steps") != std::string::npos);
  CHECK(dot.find("9 tests, 9 B copied") != std::string::npos);
  CHECK(dot.find("b0op1 -> b1op0 [lhead=cluster_b1") != std::string::npos);
  // hw, the body's own, is drawn in the cluster; h, block 0's, outside it.
  const std::size_t cluster = dot.find("subgraph cluster_b1 {");
  CHECK(dot.find("[label=\"hw\"") > cluster);
  CHECK(dot.find("[label=\"h\"") < cluster);
  CHECK_THROWS_WITH(to_dot(program, std::span(trace).first(10)),
                    Catch::Contains("10 traces for a block of 2"));
  // The weight went to the device once; the later steps were served by the transfer cache.
  std::size_t w_moves = 0, w_cached = 0;
  for (const op_trace& t : trace)
    for (const input_trace& in : t.inputs)
      if (in.variable == "w") (in.cached ? w_cached : w_moves) += 1;
  CHECK(w_moves == 1);
  CHECK(w_cached == 7);
}

// A counted loop: `body` (its operators so far a step's work) counts `counter` up by one and
// tests it against `limit` into `cond`; `block` starts the counter at 0 when `start` (else it
// comes from outside), tests it, and runs the while over `body` with `counter` and `reads` as X,
// keeping its steps in `steps` when one is named.
void add_counted_loop(BlockDesc& block, BlockDesc& body, const std::string& counter, const std::string& cond,
                      float limit, bool start, const std::string& steps = "",
                      const std::vector<std::string>& reads = {}) {
  body.append_op(op("cf_increment", {{"X", {counter}}}, {{"Out", {counter}}}));
  body.append_op(op("cf_less", {{"X", {counter}}}, {{"Out", {cond}}}, {{"limit", limit}}));
  if (start) block.append_op(op("cf_fill", {{"X", {"i"}}}, {{"Out", {counter}}}, {{"value", 0.0f}}));
  block.append_op(op("cf_less", {{"X", {counter}}}, {{"Out", {cond}}}, {{"limit", limit}}));
  std::vector<std::string> x{counter};
  x.insert(x.end(), reads.begin(), reads.end());
  slot_map outputs{{"Out", {counter, cond}}};
  if (!steps.empty()) outputs["StepScopes"] = {steps};
  block.append_op(op("while", {{"X", x}, {"Condition", {cond}}}, std::move(outputs),
                     {{"sub_block", block_ref{body.idx()}}}));
}

// A program whose global block has the counter i, its condition c and a persistable p50000,
// with a scope holding i = 0 and p50000 of 50000 floats (200000 bytes, what a fill of it makes).
struct counting_program {
  ProgramDesc program;
  BlockDesc& global = program.global_block();
  Scope scope;
  counting_program() {
    global.var("i");
    global.var("c").dtype = data_type::boolean;
    global.var("p50000").persistable = true;
    scope.var("i").set(scalar(0));
    scope.var("p50000").set(scalar(0, {50000}));
  }
};

TEST_CASE("memory counting: what a body writes of the enclosing block, and the blocks together",
          "[control_flow][memory][regression]") {
  REQUIRE(registered);
  for (const bool eager : {false, true}) {
    INFO("eager deletion " << eager);
    // A body writes the enclosing block's `big`, which the while's Out does not name: the count
    // sees it after every step, as the operator's own write.
    {
      ProgramDesc program;
      BlockDesc& body = counting_loop(program, 4);
      program.global_block().var("big");
      program.global_block().var("p400").persistable = true;
      body.append_op(op("cf_fill", {{"X", {"p400"}}}, {{"Out", {"big"}}}, {{"value", 1.0f}}));
      Scope scope;
      scope.var("i").set(scalar(0));
      scope.var("p400").set(scalar(0, {400}));
      Executor executor(cpu_place);
      auto prepared =
          executor.prepare(program.global_block(), scope,
                           {.eager_deletion = eager, .count_memory = !eager, .keep = {"i", "c", "big"}});
      executor.run(prepared);
      CHECK(executor.stats().live_bytes == 4 + 1 + 1600);  // i, c, big
      CHECK(executor.stats().peak_activation_bytes == 4 + 1 + 1600);
    }
    // The enclosing block's `a` (4000 bytes) lives across the loop, whose body makes its own
    // `t` (20000 bytes) at every step: the peak holds both, and with kept step scopes every
    // step's t until the last.
    for (const bool kept : {false, true}) {
      INFO("step scopes kept " << kept);
      ProgramDesc program;
      BlockDesc& global = program.global_block();
      for (const char* name : {"i", "a", "out"}) global.var(name);
      global.var("c").dtype = data_type::boolean;
      for (const char* name : {"p1000", "p5000"}) global.var(name).persistable = true;
      BlockDesc& body = program.append_block(0);
      body.var("t");
      body.append_op(op("cf_fill", {{"X", {"p5000"}}}, {{"Out", {"t"}}}, {{"value", 1.0f}}));
      body.append_op(op("cf_increment", {{"X", {"i"}}}, {{"Out", {"i"}}}));
      body.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"c"}}}, {{"limit", 4.0f}}));
      global.append_op(op("cf_fill", {{"X", {"p1000"}}}, {{"Out", {"a"}}}, {{"value", 2.0f}}));
      global.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"c"}}}, {{"limit", 4.0f}}));
      slot_map outputs{{"Out", {"i", "c"}}};
      if (kept) outputs["StepScopes"] = {"steps"};
      global.append_op(op("while", {{"X", {"i"}}, {"Condition", {"c"}}}, std::move(outputs),
                          {{"sub_block", block_ref{body.idx()}}}));
      global.append_op(op("cf_halve", {{"X", {"a"}}}, {{"Out", {"out"}}}));
      Scope scope;
      scope.var("i").set(scalar(0));
      scope.var("p1000").set(scalar(0, {1000}));
      scope.var("p5000").set(scalar(0, {5000}));
      Executor executor(cpu_place);
      auto prepared = executor.prepare(
          global, scope,
          {.eager_deletion = eager, .count_memory = !eager, .keep = {"i", "c", "out", "steps"}});
      for (int run = 0; run < 2; ++run) {
        scope.get("i").set(scalar(0));
        executor.reset_stats();
        executor.run(prepared);
        CHECK(first(scope.get("out")) == 2.f);
        // Without kept scopes: a, i and c with the body's t, and on the second run the first
        // run's out, which it keeps. With them: a, i, c and the four steps' t, alive after the
        // loop while cf_halve makes out (and as the second run starts, with its out).
        INFO("run " << run);
        const std::uint64_t expected =
            kept ? 4000u + 4 + 1 + 4 * 20000 + 4000 : 4000u + 4 + 1 + 20000 + run * 4000u;
        CHECK(executor.stats().peak_activation_bytes == expected);
        CHECK(executor.stats().live_bytes == 4 + 1 + 4000 + (kept ? 4 * 20000u : 0u) + (eager ? 0u : 4000u));
      }
    }
  }
}

TEST_CASE("memory counting: the copies of a body's last operator are gone when the loop ends",
          "[control_flow][memory][regression]") {
  // The body's last operator reads an NHWC t through an NCHW copy (a million bytes each); the
  // body writes the enclosing block's w (four million). The loop's own count added that copy
  // again, gone by then: 5,000,005 where 4,000,005 (w, i and c) is the most alive at once.
  REQUIRE(registered);
  ProgramDesc program;
  BlockDesc& body = counting_loop(program, 1);
  program.global_block().var("w");
  program.global_block().var("p1000000").persistable = true;
  body.append_op(op("cf_fill", {{"X", {"p1000000"}}}, {{"Out", {"w"}}}, {{"value", 1.0f}}));
  body.var("t");
  body.var("u");
  body.append_op(op("cf_make_nhwc", {{"X", {"i"}}}, {{"Out", {"t"}}}));
  body.append_op(op("cf_first_nchw", {{"X", {"t"}}}, {{"Out", {"u"}}}));
  Scope scope;
  scope.var("i").set(scalar(0));
  scope.var("p1000000").set(scalar(0, {1000000}));
  Executor executor(cpu_place);
  auto prepared =
      executor.prepare(program.global_block(), scope, {.eager_deletion = true, .keep = {"i", "c", "w"}});
  executor.run(prepared);
  CHECK(executor.stats().transforms == 1);  // t's copy
  CHECK(executor.stats().peak_activation_bytes == 4000000 + 4 + 1);
}

TEST_CASE("memory counting: a StepScopes that lists scopes gone with an enclosing loop's step",
          "[control_flow][memory][regression]") {
  // The inner loop's StepScopes is the global block's variable, its kept scopes children of the
  // outer loop's kept steps: when the outer loop drops its steps (on its next run, or after a
  // failed step), the inner list still names the scopes gone with them. The count must not
  // walk them (the ASan build of scripts/test runs this).
  REQUIRE(registered);
  for (const bool fail : {false, true})
    for (const bool outer_kept : {true, false}) {
      if (fail && !outer_kept) continue;
      INFO("a step fails " << fail << ", the outer loop keeps its steps " << outer_kept);
      ProgramDesc program;
      BlockDesc& global = program.global_block();
      for (const char* name : {"i", "steps1", "steps2"}) global.var(name);
      global.var("c").dtype = data_type::boolean;
      global.var("p500").persistable = true;
      BlockDesc& outer = program.append_block(0);
      BlockDesc& inner = program.append_block(outer.idx());
      outer.var("j");
      outer.var("cj").dtype = data_type::boolean;
      inner.var("t");
      inner.append_op(op("cf_fill", {{"X", {"p500"}}}, {{"Out", {"t"}}}, {{"value", 1.0f}}));
      inner.append_op(op("cf_increment", {{"X", {"j"}}}, {{"Out", {"j"}}}));
      inner.append_op(op("cf_less", {{"X", {"j"}}}, {{"Out", {"cj"}}}, {{"limit", 2.0f}}));
      outer.append_op(op("cf_fill", {{"X", {"i"}}}, {{"Out", {"j"}}}, {{"value", 0.0f}}));
      outer.append_op(op("cf_less", {{"X", {"j"}}}, {{"Out", {"cj"}}}, {{"limit", 2.0f}}));
      outer.append_op(op("while", {{"X", {"j"}}, {"Condition", {"cj"}}},
                         {{"Out", {"j", "cj"}}, {"StepScopes", {"steps2"}}},
                         {{"sub_block", block_ref{inner.idx()}}}));
      if (fail) {
        outer.var("f");
        outer.append_op(op("cf_fail", {{"X", {"i"}}}, {{"Out", {"f"}}}, {{"at", 1.0f}}));
      }
      outer.append_op(op("cf_increment", {{"X", {"i"}}}, {{"Out", {"i"}}}));
      outer.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"c"}}}, {{"limit", 3.0f}}));
      global.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"c"}}}, {{"limit", 3.0f}}));
      slot_map outputs{{"Out", {"i", "c"}}};
      if (outer_kept) outputs["StepScopes"] = {"steps1"};
      global.append_op(op("while", {{"X", {"i"}}, {"Condition", {"c"}}}, std::move(outputs),
                          {{"sub_block", block_ref{outer.idx()}}}));
      Scope scope;
      scope.var("p500").set(scalar(0, {500}));
      Executor executor(cpu_place);
      auto prepared =
          executor.prepare(global, scope, {.count_memory = true, .keep = {"i", "c", "steps1", "steps2"}});
      for (int run = 0; run < 2; ++run) {
        INFO("run " << run);
        // The second run of the loop that does not fail takes no step: it drops the first run's.
        scope.var("i").set(scalar(run == 0 || fail ? 0.f : 5.f));
        executor.reset_stats();
        if (fail) {
          CHECK_THROWS_WITH(executor.run(prepared), Catch::Contains("cf_fail was asked to fail"));
          CHECK(scope.get("steps1").get<StepScopes>().scopes.empty());
          continue;
        }
        executor.run(prepared);
        if (!outer_kept) {
          // The outer steps share one scope: the inner loop's last two kept steps live under it,
          // listed in steps2 (the second run takes no outer step and leaves them).
          CHECK(scope.get("steps2").get<StepScopes>().scopes.size() == 2);
          CHECK(executor.stats().live_bytes == 4 + 1 + 2 * 2000u);
          continue;
        }
        // Three outer steps kept, each with j, cj and two inner steps of t (2000 bytes); i and c.
        const std::uint64_t kept = 3 * (4 + 1 + 2 * 2000u);
        CHECK(scope.get("steps1").get<StepScopes>().scopes.size() == (run == 0 ? 3u : 0u));
        CHECK(executor.stats().live_bytes == 4 + 1 + (run == 0 ? kept : 0u));
        CHECK(executor.stats().peak_activation_bytes ==
              4 + 1 + kept);  // the second: the first's, as it starts
      }
    }
}

TEST_CASE("memory counting: an inner loop's kept steps under a shared scope count after the operator",
          "[control_flow][memory][regression]") {
  // The inner loop keeps its steps in steps2, a variable of the outer body (a while whose steps
  // share one scope, or a conditional_block): after the outer operator they are still alive,
  // in its shared scope, until the inner loop runs again. They count in live_bytes and in the
  // peak of what runs after the operator, as a StepScopes of the block itself does. Without
  // them: 4000 bytes short. Declared by the global block instead, steps2 is the global block's
  // to count, also while the inner loop drops the last run's steps and keeps new ones: counted
  // as last seen, the second run's peak held the dropped steps too (2000 bytes over).
  REQUIRE(registered);
  for (const bool conditional : {false, true})
    for (const bool steps_in_global : {false, true})
      for (const bool eager : {false, true}) {
        INFO("the outer operator is a conditional_block " << conditional << ", steps2 the global block's "
                                                          << steps_in_global << ", eager deletion " << eager);
        ProgramDesc program;
        BlockDesc& global = program.global_block();
        for (const char* name : {"i", "after"}) global.var(name);
        global.var("c").dtype = data_type::boolean;
        for (const char* name : {"p500", "p50000"}) global.var(name).persistable = true;
        BlockDesc& outer = program.append_block(0);
        BlockDesc& inner = program.append_block(outer.idx());
        outer.var("j");
        outer.var("cj").dtype = data_type::boolean;
        (steps_in_global ? global : outer).var("steps2").kind = var_kind::step_scopes;
        inner.var("t");
        inner.append_op(op("cf_fill", {{"X", {"p500"}}}, {{"Out", {"t"}}}, {{"value", 1.0f}}));
        add_counted_loop(outer, inner, "j", "cj", 2.0f, true, "steps2");
        if (conditional) {
          global.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"c"}}}, {{"limit", 3.0f}}));
          global.append_op(op("conditional_block", {{"Cond", {"c"}}}, {},
                              {{"sub_block", block_ref{outer.idx()}}, {"is_scalar_condition", true}}));
        } else {
          add_counted_loop(global, outer, "i", "c", 3.0f, false);  // three steps in one scope
        }
        // 200000 bytes made after the outer operator, while the inner loop's last steps live.
        global.append_op(op("cf_fill", {{"X", {"p50000"}}}, {{"Out", {"after"}}}, {{"value", 3.0f}}));
        Scope scope;
        scope.var("p500").set(scalar(0, {500}));
        scope.var("p50000").set(scalar(0, {50000}));
        Executor executor(cpu_place);
        auto prepared = executor.prepare(
            global, scope,
            {.eager_deletion = eager, .count_memory = !eager, .keep = {"i", "c", "after", "steps2"}});
        for (int run = 0; run < 2; ++run) {
          INFO("run " << run);
          scope.var("i").set(scalar(0));
          executor.reset_stats();
          executor.run(prepared);
          // The inner loop's last two steps are alive under the outer operator's scope, t of
          // 2000 bytes in each.
          const Variable* steps = steps_in_global ? scope.find_local("steps2") : nullptr;
          scope.for_each_kid([&](const Scope& kid) {
            if (steps == nullptr) steps = kid.find_local("steps2");
          });
          REQUIRE(steps != nullptr);
          REQUIRE(steps->get<StepScopes>().scopes.size() == 2);
          // The global block's activations: c, after, and i where the loop writes it; the kept steps.
          const std::uint64_t expected = (conditional ? 0u : 4u) + 1 + 200000 + 2 * 2000u;
          CHECK(executor.stats().live_bytes == expected);
          // The second run's peak comes while the body runs: the first run's after (kept), the
          // body's j and cj, and the inner loop's kept steps (the first run's, then its own).
          CHECK(executor.stats().peak_activation_bytes == expected + (run == 0 ? 0u : 5u));
        }
      }
}

TEST_CASE("memory counting: kept steps that view a body's variable count it once, whoever declares them",
          "[control_flow][memory][regression]") {
  // Each kept step of the inner loop holds an array whose element views the outer body's x
  // (cf_write keeps the tensor it is given). Declared by the global block, steps2 is counted
  // there: x's storage, which the body counts too, must count once (it counted twice: 400010).
  // Then x is written again as a view of itself (inside the inner loop, or after it) and the
  // body makes z: x's storage must still count once, in the body (it counted nowhere: 200010).
  REQUIRE(registered);
  for (const int rewrite : {0, 1, 2})  // none, in the inner body, after the inner loop
    for (const bool steps_in_global : {false, true})
      for (const bool eager : {false, true}) {
        INFO("x rewritten " << rewrite << ", steps2 the global block's " << steps_in_global
                            << ", eager deletion " << eager);
        counting_program fixture;
        ProgramDesc& program = fixture.program;
        BlockDesc& global = fixture.global;
        BlockDesc& outer = program.append_block(0);
        BlockDesc& inner = program.append_block(outer.idx());
        for (const char* name : {"x", "j", "z"}) outer.var(name);
        outer.var("cj").dtype = data_type::boolean;
        (steps_in_global ? global : outer).var("steps2").kind = var_kind::step_scopes;
        inner.var("views").kind = var_kind::lod_tensor_array;
        inner.append_op(op("cf_write", {{"X", {"x"}}, {"I", {"j"}}}, {{"Out", {"views"}}}));
        if (rewrite == 1) inner.append_op(op("cf_view", {{"X", {"x"}}}, {{"Out", {"x"}}}));
        outer.append_op(op("cf_fill", {{"X", {"p50000"}}}, {{"Out", {"x"}}}, {{"value", 1.0f}}));
        add_counted_loop(outer, inner, "j", "cj", 2.0f, true, "steps2", {"x"});
        if (rewrite == 2) outer.append_op(op("cf_view", {{"X", {"x"}}}, {{"Out", {"x"}}}));
        if (rewrite != 0)
          outer.append_op(op("cf_fill", {{"X", {"p50000"}}}, {{"Out", {"z"}}}, {{"value", 2.0f}}));
        add_counted_loop(global, outer, "i", "c", 1.0f, false);
        Scope& scope = fixture.scope;
        Executor executor(cpu_place);
        auto prepared = executor.prepare(
            global, scope, {.eager_deletion = eager, .count_memory = !eager, .keep = {"i", "c", "steps2"}});
        executor.run(prepared);
        // x (200000 bytes, one storage however many views; the kept steps keep it after the body
        // lets go of x), i and c; z where it is made, when eager deletion has released j and cj.
        if (rewrite == 0)
          CHECK(executor.stats().peak_activation_bytes == 200000u + 4 + 1 + 4 + 1);
        else
          CHECK(executor.stats().peak_activation_bytes == 2 * 200000u + 4 + 1 + (eager ? 0u : 4 + 1));
        // After the loop the kept steps still view x: with i and c.
        CHECK(executor.stats().live_bytes == 200000u + 4 + 1);
      }
}

TEST_CASE("memory counting: kept steps two blocks up keep a storage counted when its block's run ends",
          "[control_flow][memory][regression]") {
  // The global block declares steps2; the loop that keeps it runs in a body two levels down,
  // whose kept steps view that body's x. When that body's run ends its count leaves the sum,
  // and x's storage, still held (by x and the kept steps), counts in the global block: the
  // middle body's w then makes 400010 at most (200010 without the hand-over).
  REQUIRE(registered);
  for (const bool eager : {false, true}) {
    INFO("eager deletion " << eager);
    counting_program fixture;
    ProgramDesc& program = fixture.program;
    BlockDesc& global = fixture.global;
    global.var("steps2").kind = var_kind::step_scopes;
    BlockDesc& middle = program.append_block(0);
    BlockDesc& lower = program.append_block(middle.idx());
    BlockDesc& inner = program.append_block(lower.idx());
    for (const char* name : {"k", "w"}) middle.var(name);
    middle.var("ck").dtype = data_type::boolean;
    for (const char* name : {"x", "j"}) lower.var(name);
    lower.var("cj").dtype = data_type::boolean;
    inner.var("views").kind = var_kind::lod_tensor_array;
    inner.append_op(op("cf_write", {{"X", {"x"}}, {"I", {"j"}}}, {{"Out", {"views"}}}));
    lower.append_op(op("cf_fill", {{"X", {"p50000"}}}, {{"Out", {"x"}}}, {{"value", 1.0f}}));
    add_counted_loop(lower, inner, "j", "cj", 1.0f, true, "steps2", {"x"});
    add_counted_loop(middle, lower, "k", "ck", 1.0f, true);
    middle.append_op(op("cf_fill", {{"X", {"p50000"}}}, {{"Out", {"w"}}}, {{"value", 2.0f}}));
    add_counted_loop(global, middle, "i", "c", 1.0f, false);
    Scope& scope = fixture.scope;
    Executor executor(cpu_place);
    auto prepared = executor.prepare(
        global, scope, {.eager_deletion = eager, .count_memory = !eager, .keep = {"i", "c", "steps2"}});
    executor.run(prepared);
    // At w: x's storage and w, 200000 bytes each; i and c; k and ck unless eager deletion
    // released them.
    CHECK(executor.stats().peak_activation_bytes == 2 * 200000u + 4 + 1 + (eager ? 0u : 4 + 1));
    CHECK(executor.stats().live_bytes == 200000u + 4 + 1);  // the kept steps' views of x; i, c
  }
}

TEST_CASE("memory counting: a conditional_block's kept scope counts in the block that declares it",
          "[control_flow][memory][regression]") {
  // The conditional's Scope is kept (named in keep) and declared by the global block, around
  // the loop body that runs the conditional: the body's next operator makes z while the kept
  // scope's t is alive. The global block counted the scope only after the loop (200006).
  REQUIRE(registered);
  for (const bool scope_in_global : {false, true}) {
    INFO("the Scope the global block's " << scope_in_global);
    counting_program fixture;
    ProgramDesc& program = fixture.program;
    BlockDesc& global = fixture.global;
    BlockDesc& body = program.append_block(0);
    BlockDesc& branch = program.append_block(body.idx());
    body.var("z");
    body.var("yes").dtype = data_type::boolean;
    (scope_in_global ? global : body).var("kept").kind = var_kind::step_scopes;
    branch.var("t");
    branch.append_op(op("cf_fill", {{"X", {"p50000"}}}, {{"Out", {"t"}}}, {{"value", 1.0f}}));
    body.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"yes"}}}, {{"limit", 1.0f}}));
    body.append_op(op("conditional_block", {{"Cond", {"yes"}}}, {{"Scope", {"kept"}}},
                      {{"sub_block", block_ref{branch.idx()}}, {"is_scalar_condition", true}}));
    body.append_op(op("cf_fill", {{"X", {"p50000"}}}, {{"Out", {"z"}}}, {{"value", 2.0f}}));
    add_counted_loop(global, body, "i", "c", 1.0f, false);
    Scope& scope = fixture.scope;
    Executor executor(cpu_place);
    auto prepared = executor.prepare(global, scope, {.count_memory = true, .keep = {"i", "c", "kept"}});
    executor.run(prepared);
    // After z: t (in the kept scope) and z, 200000 bytes each; i, c and yes.
    CHECK(executor.stats().peak_activation_bytes == 2 * 200000u + 4 + 1 + 1);
  }
}

TEST_CASE("memory counting: eager deletion keeps counting step scopes that a later operator read",
          "[control_flow][memory][regression]") {
  // StepScopes read by a later operator (not named in keep): its last use is that operator's,
  // but the scopes live on until the loop runs again, and count until then.
  REQUIRE(registered);
  for (const bool eager : {false, true}) {
    INFO("eager deletion " << eager);
    ProgramDesc program;
    BlockDesc& global = program.global_block();
    for (const char* name : {"i", "after", "steps"}) global.var(name);
    global.var("c").dtype = data_type::boolean;
    global.var("e").dtype = data_type::boolean;
    for (const char* name : {"p5000", "p50000"}) global.var(name).persistable = true;
    BlockDesc& body = program.append_block(0);
    body.var("t");
    body.append_op(op("cf_fill", {{"X", {"p5000"}}}, {{"Out", {"t"}}}, {{"value", 1.0f}}));
    body.append_op(op("cf_increment", {{"X", {"i"}}}, {{"Out", {"i"}}}));
    body.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"c"}}}, {{"limit", 4.0f}}));
    BlockDesc& reader = program.append_block(0);  // never runs: e is false
    global.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"c"}}}, {{"limit", 4.0f}}));
    global.append_op(op("while", {{"X", {"i"}}, {"Condition", {"c"}}},
                        {{"Out", {"i", "c"}}, {"StepScopes", {"steps"}}},
                        {{"sub_block", block_ref{body.idx()}}}));
    global.append_op(op("cf_less", {{"X", {"i"}}}, {{"Out", {"e"}}}, {{"limit", -1.0f}}));
    global.append_op(op("conditional_block", {{"Cond", {"e"}}, {"Input", {"steps"}}}, {},
                        {{"sub_block", block_ref{reader.idx()}}, {"is_scalar_condition", true}}));
    global.append_op(op("cf_fill", {{"X", {"p50000"}}}, {{"Out", {"after"}}}, {{"value", 3.0f}}));
    Scope scope;
    scope.var("p5000").set(scalar(0, {5000}));
    scope.var("p50000").set(scalar(0, {50000}));
    Executor executor(cpu_place);
    auto prepared = executor.prepare(
        global, scope, {.eager_deletion = eager, .count_memory = !eager, .keep = {"i", "c", "e", "after"}});
    for (int run = 0; run < 2; ++run) {
      INFO("run " << run);
      scope.get("i").set(scalar(0));
      executor.reset_stats();
      executor.run(prepared);
      REQUIRE(scope.get("steps").get<StepScopes>().scopes.size() == 4);
      // i, c, e, the four kept steps' t and after: all alive at the end.
      CHECK(executor.stats().live_bytes == 4 + 1 + 1 + 4 * 20000u + 200000);
      CHECK(executor.stats().peak_activation_bytes == 4 + 1 + 1 + 4 * 20000u + 200000);
    }
  }
}
