// The mixed-device executor, with OpenCL (PoCL) as the accelerator: Fluid's device case,
// CPU-only operators inside accelerator programs, a two-step chain, the in-place regression,
// the transfer cache (reuse, and no stale data after a write), SelectedRows and LoD through
// transforms, executors running concurrently on scopes that share their weights, eager deletion
// (releases, views, peak activation bytes) and the executor's own timing.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fluidk/devices/onednn_tags.hpp>
#include <fluidk/devices/opencl.hpp>
#include <fluidk/dot.hpp>
#include <fluidk/executor.hpp>
#include <fluidk/program.hpp>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/transforms/cpu.hpp>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "opencl_map.hpp"

using namespace fluidk;
using fluidk_test::cpu_map;
using fluidk_test::opencl_map;

namespace {

template <class T>
struct double_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    cpu_map(ctx, [](float x) { return x + x; });
  }
};
template <class T>
struct double_opencl {
  using dtype = T;
  void operator()(execution_context& ctx) const { opencl_map(ctx, "x + x"); }
};
struct double_op {
  static constexpr std::string_view name = "double";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels =
      make_kernels(kernels_on<cpu>(double_cpu<float>{}), kernels_on<opencl>(double_opencl<float>{}));
};

template <class T>
struct increment_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    cpu_map(ctx, [](float x) { return x + 1; });
  }
};
struct increment_op {  // runs on the CPU only, like crf_decoding
  static constexpr std::string_view name = "increment";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  using run_on = cpu;
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(increment_cpu<float>{}));
};

template <class T>
struct fill_zero_opencl {
  using dtype = T;
  void operator()(execution_context& ctx) const { opencl_map(ctx, "0.0f * x"); }
};
struct fill_zero_op {
  static constexpr std::string_view name = "fill_zero";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<opencl>(fill_zero_opencl<float>{}));
};

// Sums the rows of a SelectedRows input on the CPU (reads its rows and LoD of a LoDTensor).
template <class T>
struct describe_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const kernel_arg& rows = ctx.input_arg("Rows");
    const kernel_arg& sequences = ctx.input_arg("Sequences");
    REQUIRE(rows.selected_rows().value().place() == cpu_place);
    REQUIRE(sequences.lod_tensor().place() == cpu_place);
    Tensor out({3}, data_type::float32);
    out.data<float>()[0] = float(rows.selected_rows().rows().size());
    out.data<float>()[1] = float(rows.selected_rows().height());
    out.data<float>()[2] = float(sequences.lod_tensor().lod().at(0).size());
    ctx.output(0) = std::move(out);
  }
};
struct describe_op {
  static constexpr std::string_view name = "describe";
  static constexpr std::array<std::string_view, 2> inputs{"Rows", "Sequences"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  using run_on = cpu;
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(describe_cpu<float>{}));
};

// Reads an array of NCHW tensors on the CPU: counts the elements it receives in NCHW.
template <class T>
struct count_elements_cpu {
  using dtype = T;
  using layouts = boost::mp11::mp_list<layout::nchw>;
  void operator()(execution_context& ctx) const {
    Tensor out({1}, data_type::float32);
    out.data<float>()[0] = 0;
    for (const LoDTensor& t : ctx.input_arg("X").variable()->get<LoDTensorArray>())
      out.data<float>()[0] += t.layout() == data_layout::nchw ? 1.f : 0.f;
    ctx.output(0) = std::move(out);
  }
};
struct count_elements_op {
  static constexpr std::string_view name = "count_elements";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(count_elements_cpu<float>{}));
};

// For each variable of slot X: 1 when the kernel receives it in NCHW, 0 when it is empty, -1
// in another layout.
struct layouts_seen_cpu {
  using dtype = float;
  using layouts = boost::mp11::mp_list<layout::nchw>;
  void operator()(execution_context& ctx) const {
    const auto args = ctx.inputs("X");
    Tensor out({std::int64_t(args.size())}, data_type::float32);
    for (std::size_t i = 0; i < args.size(); ++i) {
      const Tensor& t = args[i].tensor();
      out.data<float>()[i] = !t.initialized() ? 0.f : t.layout() == data_layout::nchw ? 1.f : -1.f;
    }
    ctx.output(0) = std::move(out);
  }
};
struct layouts_seen_op {
  static constexpr std::string_view name = "layouts_seen";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(layouts_seen_cpu{}));
};

// Arrays in slots 1 and 2, cast to float; D decides the data type. For each of those slots,
// how many elements the kernel receives as float NCHW.
struct arrays_seen_cpu {
  using dtype = float;
  using layouts = boost::mp11::mp_list<layout::nchw>;
  void operator()(execution_context& ctx) const {
    Tensor out({2}, data_type::float32);
    for (std::size_t s = 1; s <= 2; ++s) {
      float n = 0;
      for (const kernel_arg& a : ctx.inputs(s))
        for (const LoDTensor& t : a.variable()->get<LoDTensorArray>())
          n += t.layout() == data_layout::nchw && t.dtype() == data_type::float32 ? 1.f : 0.f;
      out.data<float>()[s - 1] = n;
    }
    ctx.output(0) = std::move(out);
  }
};
// X keeps its elements' layouts; Y's are re-laid out.
struct arrays_seen_op {
  static constexpr std::string_view name = "arrays_seen";
  static constexpr std::array<std::string_view, 3> inputs{"D", "X", "Y"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr std::string_view data_type_input = "D";
  static constexpr std::array<std::string_view, 2> cast_inputs{"X", "Y"};
  static constexpr std::array<std::string_view, 1> keep_layout_inputs{"X"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(arrays_seen_cpu{}));
};

const bool registered = [] {
  register_operator<layouts_seen_op>();
  register_operator<arrays_seen_op>();
  register_operator<count_elements_op>();
  register_operator<double_op>();
  register_operator<increment_op>();
  register_operator<fill_zero_op>();
  register_operator<describe_op>();
  return true;
}();

const place accelerator = place::of<opencl>(0);

Tensor iota(const dims& shape, float scale = 1, data_layout layout = data_layout::any) {
  Tensor t(shape, data_type::float32, cpu_place, layout);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * float(i);
  return t;
}
std::vector<float> values(const Variable& v) {
  const Tensor host = copy_to(v.get<LoDTensor>(), cpu_place);
  return std::vector<float>(host.data<float>(), host.data<float>() + host.numel());
}
std::vector<float> iota_values(std::int64_t n, float scale) {
  std::vector<float> out;
  for (std::int64_t i = 0; i < n; ++i) out.push_back(scale * float(i));
  return out;
}
op_invocation op(std::string type, std::string in, std::string out, attribute_map attrs = {}) {
  return {std::move(type), {{"X", {std::move(in)}}}, {{"Out", {std::move(out)}}}, std::move(attrs)};
}

}  // namespace

TEST_CASE("Fluid's device case: a CPU result moves to the accelerator, the CPU copy stays", "[executor]") {
  REQUIRE(registered);
  Scope scope;
  scope.var("in").set(LoDTensor(iota({8})));
  const std::vector<op_invocation> program{op("double", "in", "a"),
                                           op("double", "a", "b", {{"op_device", std::string("opencl:0")}})};
  Executor executor(cpu_place);
  executor.run(program, scope);
  CHECK(scope.get("a").get<LoDTensor>().place() == cpu_place);
  CHECK(values(scope.get("a")) == iota_values(8, 2));  // the source of the move is unchanged
  CHECK(scope.get("b").get<LoDTensor>().place() == accelerator);
  CHECK(values(scope.get("b")) == iota_values(8, 4));
  CHECK(executor.stats().transforms == 1);
  CHECK(executor.stats().bytes_copied == 8 * sizeof(float));
  CHECK(executor.stats().child_scopes == 1);
  CHECK(scope.kid_count() == 0);  // the child scope lived for one operator run
}

TEST_CASE("a CPU-only operator inside an accelerator program", "[executor]") {
  Scope scope;
  scope.var("in").set(LoDTensor(iota({5})));
  const std::vector<op_invocation> program{op("double", "in", "a"), op("increment", "a", "b"),
                                           op("double", "b", "c")};
  Executor executor(accelerator);
  executor.run(program, scope);
  CHECK(scope.get("a").get<LoDTensor>().place() == accelerator);
  CHECK(scope.get("b").get<LoDTensor>().place() == cpu_place);
  CHECK(scope.get("c").get<LoDTensor>().place() == accelerator);
  std::vector<float> expected;
  for (int i = 0; i < 5; ++i) expected.push_back(2 * (2 * float(i) + 1));
  CHECK(values(scope.get("c")) == expected);
  CHECK(executor.stats().transforms == 3);  // in -> acc, a -> cpu, b -> acc
}

TEST_CASE("nChw8c on the CPU to NCHW on the accelerator: a two-step chain", "[executor]") {
  const Tensor plain = iota({1, 3, 2, 2}, 1, data_layout::nchw);
  Tensor blocked({1, 3, 2, 2}, data_type::float32, cpu_place, data_layout_of<layout::nChw8c>);
  transforms::cpu_kernels::reorder(static_cast<const std::byte*>(plain.handle()), data_layout::nchw,
                                   static_cast<std::byte*>(blocked.handle()), data_layout_of<layout::nChw8c>,
                                   plain.dims(), 4);
  Scope scope;
  scope.var("image").set(LoDTensor(blocked));
  Executor executor(accelerator);
  const std::vector<op_invocation> program{op("double", "image", "out")};
  executor.run(program, scope);
  const Variable& out = scope.get("out");
  CHECK(out.get<LoDTensor>().layout() == data_layout::nchw);
  CHECK(out.get<LoDTensor>().place() == accelerator);
  CHECK(values(out) == iota_values(12, 2));
  const auto& plan = plan_transform(key_of(blocked), kernel_type<opencl, float>::key(0));
  CHECK(plan.describe() == "layout nChw8c->NCHW on Place(cpu), copy Place(cpu)->Place(opencl:0)");
  CHECK(scope.get("image").get<LoDTensor>().layout() == data_layout_of<layout::nChw8c>);
}

TEST_CASE("in place: a transformed input is never copied back over the output", "[executor][regression]") {
  // Fluid's bug: a value filled with 0 on the device and incremented on the CPU came back 0.
  Scope scope;
  scope.var("x").set(LoDTensor(iota({4}, 3)));
  const std::vector<op_invocation> program{op("fill_zero", "x", "x"), op("increment", "x", "x")};
  Executor executor(accelerator);
  executor.run(program, scope);
  CHECK(values(scope.get("x")) == std::vector<float>{1, 1, 1, 1});
  CHECK(scope.get("x").get<LoDTensor>().place() == cpu_place);
}

TEST_CASE("the transfer cache reuses unchanged weights and never serves stale data", "[executor][cache]") {
  Scope scope;
  scope.var("w").set(LoDTensor(iota({1000})));
  const std::vector<op_invocation> program{op("double", "w", "out")};
  Executor executor(accelerator);
  auto prepared = executor.prepare(program, scope);
  executor.run(prepared);
  CHECK(executor.stats().bytes_copied == 4000);
  executor.reset_stats();
  executor.run(prepared);
  CHECK(executor.stats().bytes_copied == 0);  // the second run copies nothing
  CHECK(executor.stats().cache_hits == 1);
  CHECK(values(scope.get("out")) == iota_values(1000, 2));

  scope.get("w").set(LoDTensor(iota({1000}, 5)));  // a new weight between runs
  executor.reset_stats();
  executor.run(prepared);
  CHECK(executor.stats().transforms == 1);
  CHECK(values(scope.get("out")) == iota_values(1000, 10));

  // Writing through get_mutable counts as a write too.
  scope.get("w").get_mutable<LoDTensor>().data<float>()[1] = 100;
  executor.run(prepared);
  CHECK(values(scope.get("out"))[1] == 200);

  // The cache is bounded: a budget smaller than one tensor keeps only the latest entry.
  Executor small(accelerator, 100);
  scope.var("v").set(LoDTensor(iota({1000})));
  const std::vector<op_invocation> two{op("double", "w", "o1"), op("double", "v", "o2")};
  small.run(two, scope);
  CHECK(small.cache().size() == 1);

  // A moved executor takes its cache along; the one moved from holds nothing, and caches again
  // when it runs (its table is made anew).
  Executor moved(std::move(small));
  CHECK(moved.cache().size() == 1);
  CHECK(small.cache().size() == 0);
  CHECK(small.cache().bytes() == 0);
  small.cache().clear();
  small.run(two, scope);
  CHECK(small.cache().size() == 1);
  CHECK(values(scope.get("o2")) == iota_values(1000, 2));
  moved = std::move(small);
  CHECK(moved.cache().size() == 1);
  CHECK(small.cache().size() == 0);

  // Least recently used first out: with room for two copies, a, b, a, c, a evicts b for c and
  // serves a twice (first in, first out would evict a for c, and copy it again).
  for (const char* name : {"a", "b", "c"}) scope.var(name).set(LoDTensor(iota({10})));
  Executor two_copies(accelerator, 80);
  const std::vector<op_invocation> turns{op("double", "a", "o1"), op("double", "b", "o2"),
                                         op("double", "a", "o3"), op("double", "c", "o4"),
                                         op("double", "a", "o5")};
  two_copies.run(turns, scope);
  CHECK(two_copies.stats().transforms == 3);
  CHECK(two_copies.stats().cache_hits == 2);

  // Bounded in entries too, the same way: room for two entries, bytes to spare. (Copies of
  // variables that are gone, or of no bytes, are never hit again, and the bytes alone would
  // keep them all.)
  Executor two_entries(accelerator);
  two_entries.cache() = transfer_cache(std::size_t(1) << 20, 2);
  two_entries.run(turns, scope);
  CHECK(two_entries.stats().transforms == 3);
  CHECK(two_entries.stats().cache_hits == 2);
  CHECK(two_entries.cache().size() == 2);
  CHECK(values(scope.get("o4")) == iota_values(10, 2));
}

TEST_CASE("the transfer cache drops the copies of variables that are gone", "[executor][cache]") {
  // A request per scope, as a server runs them: each request's input is copied to the device,
  // and its copy is never served again once the request's scope is gone.
  Scope root;
  root.var("w").set(LoDTensor(iota({100}, 1)));
  const std::vector<op_invocation> program{op("double", "x", "y"), op("double", "w", "v")};
  Executor executor(accelerator);
  for (int request = 0; request < 5; ++request) {
    Scope& s = root.new_scope();
    s.var("x").set(LoDTensor(iota({1000}, request)));
    executor.run(program, s);
    CHECK(values(s.get("y")) == iota_values(1000, 2 * request));
    // This request's input and the weight: the last request's input was dropped as the run began.
    CHECK(executor.cache().size() == 2);
    CHECK(executor.cache().bytes() == 4400);
    root.delete_scope(s);
  }
  CHECK(executor.stats().transforms == 6);  // the weight once, every request's input
  CHECK(executor.stats().cache_hits == 4);
  executor.cache().drop_gone();
  CHECK(executor.cache().size() == 1);
  CHECK(executor.cache().bytes() == 400);

  // Two executors that copied one variable both drop their copies; a cache moved to another
  // executor keeps hearing of its sources.
  Executor other(accelerator);
  {
    Scope& s = root.new_scope();
    s.var("x").set(LoDTensor(iota({1000})));
    executor.run(program, s);
    other.run(program, s);
    Executor moved(std::move(executor));
    CHECK(moved.cache().size() == 2);
    CHECK(other.cache().size() == 2);
    root.delete_scope(s);
    moved.cache().drop_gone();
    other.cache().drop_gone();
    CHECK(moved.cache().size() == 1);
    CHECK(other.cache().size() == 1);
    executor = std::move(moved);
  }
  // A cache that is gone before the variable it copied hears nothing of it.
  {
    Scope& s = root.new_scope();
    s.var("x").set(LoDTensor(iota({1000})));
    {
      Executor brief(accelerator);
      brief.run(program, s);
      CHECK(brief.cache().size() == 2);
    }
    root.delete_scope(s);
  }
  executor.cache().drop_gone();
  CHECK(executor.cache().size() == 1);
}

namespace {
struct gone_test_kind;  // objects of a kind of their own, told only to these lists
struct gone_test_object {
  explicit gone_test_object(std::uint64_t i) : id(i) {}
  std::uint64_t id;
  fluidk::detail::gone_notice<gone_test_kind> notice;
  ~gone_test_object() { notice.tell(id); }
};
}  // namespace

TEST_CASE("only a list that holds a copy of an object hears of its destruction", "[executor][cache]") {
  // An idle cache collects no ids of objects it never copied, nor of those it dropped.
  detail::gone_list<gone_test_kind> holder, other, dropped;
  auto a = std::make_unique<gone_test_object>(1);
  auto b = std::make_unique<gone_test_object>(2);
  holder.watch(a->notice, 1);
  holder.watch(a->notice, 1);  // two copies of a
  other.watch(a->notice, 1);
  dropped.watch(b->notice, 2);
  holder.unwatch(1);  // one copy of a left
  dropped.unwatch(2);
  a.reset();
  b.reset();
  CHECK(holder.any());
  CHECK(other.any());
  CHECK_FALSE(dropped.any());
  CHECK(holder.take() == std::vector<std::uint64_t>{1});
  CHECK_FALSE(holder.any());
  CHECK(holder.take().empty());
  CHECK(other.take() == std::vector<std::uint64_t>{1});
  // Dropped all at once, or watched by a list that is gone: nothing to tell.
  auto c = std::make_unique<gone_test_object>(3);
  holder.watch(c->notice, 3);
  {
    detail::gone_list<gone_test_kind> brief;
    brief.watch(c->notice, 3);
  }
  holder.unwatch_all();
  c.reset();
  CHECK_FALSE(holder.any());
}

TEST_CASE("SelectedRows and sequence offsets survive the executor's transforms", "[executor]") {
  Scope scope;
  scope.var("rows").set(copy_to(SelectedRows({1, 4}, 6, iota({2, 3})), accelerator));
  scope.var("seq").set(copy_to(LoDTensor(iota({5, 2}), {{0, 2, 5}}), accelerator));
  const std::vector<op_invocation> program{
      {"describe", {{"Rows", {"rows"}}, {"Sequences", {"seq"}}}, {{"Out", {"d"}}}, {}}};
  Executor executor(accelerator);
  executor.run(program, scope);
  CHECK(values(scope.get("d")) == std::vector<float>{2, 6, 3});
}

TEST_CASE("errors name the operator and the slot", "[executor][errors]") {
  Scope scope;
  Executor executor(cpu_place);
  const std::vector<op_invocation> unknown{op("conv9d", "x", "y")};
  CHECK_THROWS_WITH(executor.run(unknown, scope), Catch::Contains("unknown operator 'conv9d'"));
  const std::vector<op_invocation> bad_slot{{"double", {{"Input", {"x"}}}, {{"Out", {"y"}}}, {}}};
  CHECK_THROWS_WITH(executor.run(bad_slot, scope),
                    Catch::Contains("operator 'double' has no input slot 'Input'"));
  const std::vector<op_invocation> empty{op("double", "nothing", "y")};
  CHECK_THROWS_WITH(executor.run(empty, scope),
                    Catch::Contains("operator 'double': no input that decides the data type holds data"));

  // A block refused when it is prepared leaves the scope as it was: no variable is made for
  // the operators before the one refused.
  Scope untouched;
  const std::vector<op_invocation> refused_second{op("double", "a", "b"), op("conv9d", "x", "y")};
  CHECK_THROWS_WITH(executor.prepare(refused_second, untouched),
                    Catch::Contains("unknown operator 'conv9d'"));
  const std::vector<op_invocation> bad_attribute{op("double", "a", "b"),
                                                 op("double", "b", "c", {{"op_device", std::int32_t(1)}})};
  CHECK_THROWS_WITH(executor.prepare(bad_attribute, untouched),
                    Catch::Contains("operator 'double' attribute 'op_device' holds int, not string"));
  for (const char* name : {"a", "b", "c", "x", "y"}) CHECK(untouched.find_var(name) == nullptr);

  // op_device naming a device that is not present: the operator, the kernel and the
  // attribute are named, and nothing is copied to it.
  scope.var("x").set(LoDTensor(iota({4})));
  const std::vector<op_invocation> absent{op("double", "x", "y", {{"op_device", std::string("opencl:9")}})};
  CHECK_THROWS_WITH(
      executor.run(absent, scope),
      Catch::Contains("operator 'double' kernel {") &&
          Catch::Contains("(the place attribute 'op_device' asks for): no device Place(opencl:9)"));
  CHECK(executor.stats().bytes_copied == 0);
}

TEST_CASE("a prepared program runs on executors of the place it was prepared for", "[executor][errors]") {
  Scope scope;
  scope.var("x").set(LoDTensor(iota({4})));
  const std::vector<op_invocation> ops{op("double", "x", "y")};
  Executor on_cpu(cpu_place), on_accelerator(accelerator), another_on_cpu(cpu_place);
  auto program = on_cpu.prepare(ops, scope);
  CHECK_THROWS_WITH(on_accelerator.run(program),
                    "fluidk: a program prepared by an executor on Place(cpu) cannot run on an executor on "
                    "Place(opencl:0); prepare it on this one");
  CHECK_FALSE(scope.get("y").initialized());  // nothing ran
  another_on_cpu.run(program);
  CHECK(values(scope.get("y")) == iota_values(4, 2));
}

TEST_CASE("a rerun chooses again when another variable of a slot is the empty one",
          "[executor][regression]") {
  Scope scope;
  scope.var("a").set(LoDTensor());
  scope.var("b").set(LoDTensor(iota({1, 2, 2, 2}, 1, data_layout::nhwc)));
  const std::vector<op_invocation> program{{"layouts_seen", {{"X", {"a", "b"}}}, {{"Out", {"seen"}}}, {}}};
  Executor executor(cpu_place);
  auto prepared = executor.prepare(program, scope);
  executor.run(prepared);
  CHECK(values(scope.get("seen")) == std::vector<float>{0, 1});
  // The same states, one tensor NHWC and one empty, but in the other variable.
  scope.get("a").set(LoDTensor(iota({1, 2, 2, 2}, 1, data_layout::nhwc)));
  scope.get("b").set(LoDTensor());
  executor.run(prepared);
  CHECK(values(scope.get("seen")) == std::vector<float>{1, 0});
}

TEST_CASE("an array's elements that need no transform are passed as they are when another moves",
          "[executor][regression]") {
  // Element 0 has layout any and rank 2: the NCHW kernel reads it as it is (as it would a
  // dense input), and relabelled NCHW it would not fit. Element 1 is NHWC and moves.
  Scope scope;
  const Tensor plain = iota({2, 3});
  scope.var("x").set(LoDTensorArray{LoDTensor(plain), LoDTensor(iota({1, 2, 1, 1}, 1, data_layout::nhwc))});
  Executor executor(cpu_place);
  const std::vector<op_invocation> ops{op("count_elements", "x", "n")};
  executor.run(ops, scope);
  CHECK(values(scope.get("n")) == std::vector<float>{1});  // element 1 arrives in NCHW
  CHECK(executor.stats().transforms == 1);
  const std::vector<std::vector<Variable*>> in{{&scope.get("x")}}, out{{&scope.var("m")}};
  run_operator(find_operator("count_elements"), cpu_place, in, out);
  CHECK(values(scope.get("m")) == std::vector<float>{1});
  CHECK(scope.get("x").get<LoDTensorArray>()[0].layout() == data_layout::any);
}

TEST_CASE("copies of an array are kept apart by what moves each element", "[executor][cache][regression]") {
  // Element 0 is double NCHW (cast to float in both slots), element 1 float NHWC (kept in X,
  // re-laid out in Y): the first element that moves has the same target in both slots.
  Scope scope;
  scope.var("d").set(LoDTensor(iota({1, 2, 2, 2}, 1, data_layout::nchw)));
  scope.var("arrays").set(LoDTensorArray{
      LoDTensor(transform(iota({1, 2, 2, 2}, 1, data_layout::nchw),
                          kernel_key(cpu_place, data_type::float64, data_layout::nchw, library_type::plain))),
      LoDTensor(iota({1, 2, 2, 2}, 1, data_layout::nhwc))});
  Executor executor(cpu_place);
  // The same array in both slots of one operator.
  const std::vector<op_invocation> both{
      {"arrays_seen", {{"D", {"d"}}, {"X", {"arrays"}}, {"Y", {"arrays"}}}, {{"Out", {"seen"}}}, {}}};
  executor.run(both, scope);
  CHECK(values(scope.get("seen")) == std::vector<float>{1, 2});
  // In X by one operator, then in Y by the next: the second is not served the first's copy.
  const std::vector<op_invocation> in_turn{
      {"arrays_seen", {{"D", {"d"}}, {"X", {"arrays"}}}, {{"Out", {"first"}}}, {}},
      {"arrays_seen", {{"D", {"d"}}, {"Y", {"arrays"}}}, {{"Out", {"second"}}}, {}}};
  executor.run(in_turn, scope);
  CHECK(values(scope.get("first")) == std::vector<float>{1, 0});
  CHECK(values(scope.get("second")) == std::vector<float>{0, 2});
}

TEST_CASE("the transfer cache sees shape, offsets and rows changed through a kept reference",
          "[executor][cache][regression]") {
  Scope scope;
  scope.var("w").set(LoDTensor(iota({1000})));
  LoDTensor& kept = scope.get("w").get_mutable<LoDTensor>();
  const std::vector<op_invocation> program{op("double", "w", "out")};
  Executor executor(accelerator);
  auto prepared = executor.prepare(program, scope);
  executor.run(prepared);
  kept.reshape({10, 100});  // metadata only: no version moves
  executor.run(prepared);
  CHECK(scope.get("out").get<LoDTensor>().dims() == dims{10, 100});
  kept = LoDTensor(kept.slice(5, 10));  // the same storage, another offset
  executor.run(prepared);
  CHECK(scope.get("out").get<LoDTensor>().dims() == dims{5, 100});
  CHECK(values(scope.get("out"))[0] == 1000.f);  // 2 * element 500

  scope.var("rows").set(SelectedRows({1, 4}, 6, iota({2, 3})));
  scope.var("seq").set(LoDTensor(iota({5, 2}), {{0, 2, 5}}));
  SelectedRows& kept_rows = scope.get("rows").get_mutable<SelectedRows>();
  LoDTensor& kept_seq = scope.get("seq").get_mutable<LoDTensor>();
  scope.get("rows").set(copy_to(kept_rows, accelerator));
  scope.get("seq").set(copy_to(kept_seq, accelerator));
  SelectedRows& rows_on_device = scope.get("rows").get_mutable<SelectedRows>();
  LoDTensor& seq_on_device = scope.get("seq").get_mutable<LoDTensor>();
  const std::vector<op_invocation> describe{
      {"describe", {{"Rows", {"rows"}}, {"Sequences", {"seq"}}}, {{"Out", {"d"}}}, {}}};
  auto described = executor.prepare(describe, scope);
  executor.run(described);
  CHECK(values(scope.get("d")) == std::vector<float>{2, 6, 3});
  rows_on_device.set_height(9);
  seq_on_device.set_lod({{0, 1, 3, 5}});
  executor.run(described);
  CHECK(values(scope.get("d")) == std::vector<float>{2, 9, 4});
}

TEST_CASE("the trace of an array input names the element that moves", "[executor][trace]") {
  // The first element is read as it is; the second moves from NHWC to NCHW.
  Scope scope;
  scope.var("arrays").set(LoDTensorArray{LoDTensor(iota({1, 2, 2, 2}, 1, data_layout::nchw)),
                                         LoDTensor(iota({1, 2, 2, 2}, 1, data_layout::nhwc))});
  const std::vector<op_invocation> program{op("count_elements", "arrays", "n")};
  Executor executor(cpu_place);
  std::vector<op_trace> trace;
  executor.trace_into(&trace);
  executor.run(program, scope);
  executor.trace_into(nullptr);
  REQUIRE(trace.size() == 1);
  REQUIRE(trace[0].inputs.size() == 1);
  const input_trace& moved = trace[0].inputs[0];
  CHECK(moved.from.layout() == data_layout::nhwc);
  CHECK(moved.to.layout() == data_layout::nchw);
  CHECK(moved.chain == "first element that moves: layout NHWC->NCHW on Place(cpu)");
  CHECK(values(scope.get("n")) == std::vector<float>{2});
  // The variable itself is unchanged.
  CHECK(scope.get("arrays").get<LoDTensorArray>()[1].layout() == data_layout::nhwc);
}

TEST_CASE("executors run concurrently on scopes that share read-only weights", "[executor][threads]") {
  Scope weights;
  weights.var("w").set(LoDTensor(iota({256})));
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Scope& local = weights.new_scope();
      const std::vector<op_invocation> program{op("double", "w", "a"), op("increment", "a", "b")};
      Executor executor(t % 2 ? accelerator : cpu_place);
      auto prepared = executor.prepare(program, local);
      for (int i = 0; i < 20; ++i) executor.run(prepared);
      const auto result = values(local.get("b"));
      ok[std::size_t(t)] = result.size() == 256 && result[10] == 21.f && !local.has_local("w");
    });
  for (auto& thread : threads) thread.join();
  CHECK(ok == std::vector<int>{1, 1, 1, 1});
}

TEST_CASE("a prepared program finds its variables by name again after one is erased or shadowed",
          "[executor][regression]") {
  Scope scope;
  scope.var("x").set(LoDTensor(iota({4}, 1)));
  Executor executor(cpu_place);
  const std::vector<op_invocation> program{op("double", "x", "y")};
  auto prepared = executor.prepare(program, scope);
  executor.run(prepared);
  CHECK(values(scope.get("y")) == iota_values(4, 2));
  // x erased and made again (a variable made in between may take the old one's memory): the
  // run reads the new x, not freed memory or the variable made in between.
  REQUIRE(scope.erase("x"));
  scope.var("decoy").set(LoDTensor(iota({4}, 100)));
  scope.var("x").set(LoDTensor(iota({4}, 10)));
  executor.run(prepared);
  CHECK(values(scope.get("y")) == iota_values(4, 20));
  // The output erased: the run makes it again.
  REQUIRE(scope.erase("y"));
  executor.run(prepared);
  REQUIRE(scope.has_local("y"));
  CHECK(values(scope.get("y")) == iota_values(4, 20));
  // On a child scope, x is the parent's until the child makes its own, which shadows it.
  Scope& kid = scope.new_scope();
  auto on_kid = executor.prepare(std::vector<op_invocation>{op("double", "x", "z")}, kid);
  executor.run(on_kid);
  CHECK(values(kid.get("z")) == iota_values(4, 20));
  kid.var("x").set(LoDTensor(iota({4}, 5)));
  executor.run(on_kid);
  CHECK(values(kid.get("z")) == iota_values(4, 10));
  CHECK(values(scope.get("x")) == iota_values(4, 10));
  // And the parent's again once the child's is erased.
  REQUIRE(kid.erase("x"));
  executor.run(on_kid);
  CHECK(values(kid.get("z")) == iota_values(4, 20));
}

TEST_CASE("a block from the program text runs as its operators would", "[executor][program]") {
  const ProgramDesc program = parse_program(
      "block 0\n"
      "  var in : LoDTensor float [8]\n"
      "  op double (X: in) -> (Out: a)\n"
      "  op double (X: a) -> (Out: b) {op_device: string \"opencl:0\"}\n"
      "  op increment (X: b) -> (Out: c)\n");
  Scope scope;
  scope.var("in").set(LoDTensor(iota({8})));
  Executor executor(cpu_place);
  executor.run(program.block(0), scope);
  CHECK(scope.get("b").get<LoDTensor>().place() == accelerator);
  std::vector<float> expected;
  for (int i = 0; i < 8; ++i) expected.push_back(4 * float(i) + 1);
  CHECK(values(scope.get("c")) == expected);
}

TEST_CASE("a block's outputs are its scope's own unless persistable: sibling scopes never write the parent's",
          "[executor][program][regression]") {
  const ProgramDesc program = parse_program(
      "block 0\n"
      "  var x : LoDTensor float [4]\n"
      "  var total : LoDTensor float [4] persistable\n"
      "  op double (X: x) -> (Out: y)\n"
      "  op increment (X: y) -> (Out: total)\n");
  Scope parent;
  parent.var("y").set(LoDTensor(iota({4}, 7)));
  parent.var("total").set(LoDTensor(iota({4}, 7)));
  Scope& k1 = parent.new_scope();
  Scope& k2 = parent.new_scope();
  k1.var("x").set(LoDTensor(iota({4}, 1)));
  k2.var("x").set(LoDTensor(iota({4}, 50)));
  Executor e1(cpu_place), e2(cpu_place);
  auto p1 = e1.prepare(program.block(0), k1);
  auto p2 = e2.prepare(program.block(0), k2);
  e1.run(p1);
  e2.run(p2);
  // y is each child's own; the parent's is untouched.
  CHECK(k1.has_local("y"));
  CHECK(values(k1.get("y")) == iota_values(4, 2));
  CHECK(values(k2.get("y")) == iota_values(4, 100));
  CHECK(values(parent.get("y")) == iota_values(4, 7));
  // total is persistable: the parent's, written by the last run (k2's).
  CHECK_FALSE(k1.has_local("total"));
  CHECK(values(parent.get("total")) == std::vector<float>{1, 101, 201, 301});
  // y erased from k1: the next run makes it in k1 again, and leaves the parent's.
  REQUIRE(k1.erase("y"));
  e1.run(p1);
  CHECK(values(k1.get("y")) == iota_values(4, 2));
  CHECK(values(parent.get("y")) == iota_values(4, 7));
  // The same on the path that prepares and runs at once.
  Scope& k3 = parent.new_scope();
  k3.var("x").set(LoDTensor(iota({4}, 3)));
  Executor(cpu_place).run(program.block(0), k3);
  CHECK(values(k3.get("y")) == iota_values(4, 6));
  CHECK(values(parent.get("y")) == iota_values(4, 7));
  // A list of op_invocations declares nothing: its output y, which only the parent holds, is
  // the parent's (docs/programs.md, "Threads").
  Scope& k4 = parent.new_scope();
  k4.var("x").set(LoDTensor(iota({4}, 4)));
  Executor(cpu_place).run(std::vector<op_invocation>{op("double", "x", "y")}, k4);
  CHECK_FALSE(k4.has_local("y"));
  CHECK(values(parent.get("y")) == iota_values(4, 8));
}

TEST_CASE("a sub-block writes its parent block's variables in the parent's scope, and its own in its scope",
          "[executor][program][regression]") {
  // Fluid runs a sub-block (a loop's or a condition's body) on a child scope: the variables it
  // declares are the child's, those of the blocks above are found in the parent.
  const ProgramDesc program = parse_program(
      "block 0\n"
      "  var x : LoDTensor float [4]\n"
      "  var total : LoDTensor float [4]\n"
      "block 1 parent 0\n"
      "  var y : LoDTensor float [4]\n"
      "  op double (X: x) -> (Out: y)\n"
      "  op increment (X: y) -> (Out: total)\n");
  Scope outer;
  outer.var("x").set(LoDTensor(iota({4}, 1)));
  outer.var("total");
  Scope& inner = outer.new_scope();
  Executor(cpu_place).run(program.block(1), inner);
  CHECK(inner.has_local("y"));
  CHECK_FALSE(outer.has_local("y"));
  CHECK_FALSE(inner.has_local("total"));
  CHECK(values(outer.get("total")) == std::vector<float>{1, 3, 5, 7});
}

namespace {
// The edges of a DOT text that carry a moved input (class "transfer" or "transfer cached").
std::size_t transfer_edges(const std::string& dot, bool cached) {
  std::size_t n = 0;
  const std::string needle = cached ? "class=\"transfer cached\"" : "class=\"transfer\"";
  for (std::size_t at = dot.find(needle); at != std::string::npos; at = dot.find(needle, at + 1)) ++n;
  return n;
}
}  // namespace

// docs/programs.md, "A picture of the plan".
TEST_CASE("to_dot draws a transfer edge exactly where the trace has a moved input", "[executor][dot][docs]") {
  const ProgramDesc program = parse_program(
      "block 0\n"
      "  var in : LoDTensor float [8]\n"
      "  var w : LoDTensor float [8] persistable\n"
      "  op double (X: in) -> (Out: a)\n"
      "  op double (X: a) -> (Out: b) {op_device: string \"opencl:0\"}\n"
      "  op double (X: w) -> (Out: c) {op_device: string \"opencl:0\"}\n"
      "  op increment (X: b) -> (Out: d)\n");
  Scope scope;
  scope.var("in").set(LoDTensor(iota({8})));
  scope.var("w").set(LoDTensor(iota({8})));
  Executor executor(cpu_place);
  auto prepared = executor.prepare(program.block(0), scope);
  std::vector<op_trace> first, second;
  executor.trace_into(&first);
  executor.run(prepared);
  executor.trace_into(&second);
  executor.run(prepared);
  executor.trace_into(nullptr);

  std::size_t moved = 0, cached = 0;
  for (const op_trace& t : first) moved += t.inputs.size();
  CHECK(moved == 3);  // a -> opencl, w -> opencl, b -> cpu
  const std::string dot = to_dot(program, first);
  CHECK(transfer_edges(dot, false) == moved);
  CHECK(transfer_edges(dot, true) == 0);
  CHECK_THAT(dot, Catch::Contains("shape=cylinder"));  // the persistable weight
  CHECK_THAT(dot, Catch::Contains("on Place(opencl:0)") && Catch::Contains("on Place(cpu)"));
  CHECK_THAT(dot, Catch::Contains("copy Place(cpu)->Place(opencl:0)") && Catch::Contains("32 B copied"));

  // The second run: the unchanged weight comes from the transfer cache, a is new again.
  for (const op_trace& t : second)
    for (const input_trace& in : t.inputs) cached += in.cached;
  CHECK(cached == 1);
  const std::string again = to_dot(program, second);
  CHECK(transfer_edges(again, true) == cached);
  CHECK(transfer_edges(again, false) == 2);

  // Without traces: the block alone, no transfer edge; traces of another block are refused.
  CHECK(transfer_edges(to_dot(program), false) + transfer_edges(to_dot(program), true) == 0);
  CHECK_THROWS_WITH(to_dot(program, std::span(first).first(2)), Catch::Contains("2 traces for a block of 4"));

  // One variable twice in a slot: moved for the first edge, served cached for the second, and
  // drawn so, edge by edge.
  const ProgramDesc twice = parse_program(
      "block 0\n"
      "  var n : LoDTensor float [1, 2, 2, 2]\n"
      "  op layouts_seen (X: n, n) -> (Out: seen)\n");
  scope.var("n").set(LoDTensor(iota({1, 2, 2, 2}, 1, data_layout::nhwc)));
  std::vector<op_trace> repeated;
  executor.trace_into(&repeated);
  executor.run(twice.block(0), scope);
  executor.trace_into(nullptr);
  REQUIRE(repeated.size() == 1);
  REQUIRE(repeated[0].inputs.size() == 2);
  CHECK_FALSE(repeated[0].inputs[0].cached);
  CHECK(repeated[0].inputs[1].cached);
  const std::string both = to_dot(twice, repeated);
  CHECK(transfer_edges(both, false) == 1);
  CHECK(transfer_edges(both, true) == 1);

  // Graphviz reads it (where it is installed: scripts/deps installs it).
  if (std::system("command -v dot >/dev/null 2>&1") == 0) {
    // A name of this run's own (another user's earlier run may have left its files), removed after.
    const std::string path =
        (std::filesystem::temp_directory_path() / ("fluidk_executor_test_plan." + std::to_string(::getpid())))
            .string();
    std::ofstream(path + ".dot") << dot;
    CHECK(std::system(("dot -Tsvg '" + path + ".dot' -o '" + path + ".svg'").c_str()) == 0);
    std::ifstream svg(path + ".svg");
    const std::string drawn((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
    std::size_t edges = 0;
    for (std::size_t at = drawn.find("class=\"edge transfer\""); at != std::string::npos;
         at = drawn.find("class=\"edge transfer\"", at + 1))
      ++edges;
    std::error_code ignored;
    std::filesystem::remove(path + ".dot", ignored);
    std::filesystem::remove(path + ".svg", ignored);
    CHECK(edges == moved);
  } else {
    WARN("Graphviz's dot is not installed: the DOT text was not drawn");
  }
}

namespace {
// Out = X + Y on the CPU; and Out viewing X's storage without a copy, as reshape2 does.
struct eager_add_cpu {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const Tensor& x = ctx.input(0);
    const Tensor& y = ctx.input(1);
    Tensor out(x.dims(), x.dtype());
    for (std::int64_t i = 0; i < x.numel(); ++i)
      out.data<float>()[i] = x.data<float>()[i] + y.data<float>()[i];
    ctx.output(0) = std::move(out);
  }
};
struct eager_add_op {
  static constexpr std::string_view name = "eager_add";
  static constexpr std::array<std::string_view, 2> inputs{"X", "Y"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(eager_add_cpu{}));
};
struct eager_view_cpu {
  using dtype = float;
  void operator()(execution_context& ctx) const { ctx.output(0) = ctx.input(0); }
};
struct eager_view_op {
  static constexpr std::string_view name = "eager_view";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(eager_view_cpu{}));
};
// Out: X (NCHW) reordered to nChw8c, as a oneDNN convolution leaves its output.
struct eager_block_cpu {
  using dtype = float;
  using layouts = boost::mp11::mp_list<layout::nchw>;
  void operator()(execution_context& ctx) const {
    const Tensor& x = ctx.input(0);
    Tensor out(x.dims(), x.dtype(), cpu_place, data_layout_of<layout::nChw8c>);
    transforms::cpu_kernels::reorder(static_cast<const std::byte*>(x.handle()), data_layout::nchw,
                                     static_cast<std::byte*>(out.handle()), out.layout(), x.dims(), 4);
    ctx.output(0) = std::move(out);
  }
};
struct eager_block_op {
  static constexpr std::string_view name = "eager_block";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(eager_block_cpu{}));
};
const bool eager_registered = [] {
  register_operator<eager_block_op>();
  register_operator<eager_add_op>();
  register_operator<eager_view_op>();
  return true;
}();

bool holds_storage(const Scope& scope, const std::string& name) {
  return scope.get(name).get<LoDTensor>().initialized();
}
std::vector<float> plus(std::vector<float> v, float k) {
  for (float& x : v) x += k;
  return v;
}
}  // namespace

// docs/programs.md, "Eager deletion".
TEST_CASE("eager deletion releases each activation after its last use; kept outputs and persistables stay",
          "[executor][eager]") {
  const ProgramDesc program = parse_program(
      "block 0\n"
      "  var in : LoDTensor float [8]\n"
      "  var w : LoDTensor float [8] persistable\n"
      "  var total : LoDTensor float [8] persistable\n"
      "  var a : LoDTensor float [8]\n"
      "  var b : LoDTensor float [8]\n"
      "  var c : LoDTensor float [8]\n"
      "  var d : LoDTensor float [8]\n"
      "  op double (X: in) -> (Out: a)\n"
      "  op double (X: a) -> (Out: b)\n"
      "  op eager_add (X: b; Y: w) -> (Out: c)\n"
      "  op increment (X: c) -> (Out: total)\n"
      "  op double (X: c) -> (Out: d)\n");
  Scope scope;
  scope.var("in").set(LoDTensor(iota({8})));
  scope.var("w").set(LoDTensor(iota({8}, 10)));
  Executor executor(cpu_place);
  auto prepared = executor.prepare(program.block(0), scope, {.eager_deletion = true, .keep = {"d"}});
  // c = 4i + 10i; d = 2c; total = c + 1.
  const std::vector<float> c = iota_values(8, 14);
  for (int run = 0; run < 2; ++run) {  // a rerun fills the released variables again
    executor.run(prepared);
    CHECK_FALSE(holds_storage(scope, "a"));
    CHECK_FALSE(holds_storage(scope, "b"));
    CHECK_FALSE(holds_storage(scope, "c"));
    CHECK(scope.get("c").is<LoDTensor>());  // the variable stays, empty
    CHECK(values(scope.get("d")) == iota_values(8, 28));
    CHECK(values(scope.get("total")) == plus(c, 1));
    CHECK(values(scope.get("in")) == iota_values(8, 1));  // fed, not written: the caller's
    CHECK(values(scope.get("w")) == iota_values(8, 10));
  }
  // Without the option nothing is released.
  Scope other;
  other.var("in").set(LoDTensor(iota({8})));
  other.var("w").set(LoDTensor(iota({8}, 10)));
  executor.run(program.block(0), other);
  CHECK(holds_storage(other, "a"));
  CHECK(values(other.get("c")) == c);
}

TEST_CASE("eager deletion: a variable read twice is released after its second read", "[executor][eager]") {
  // a is read by the increment and by the add after it: released after the add only (a
  // release after the increment would leave the add an input with no data, an error).
  const std::vector<op_invocation> program{op("double", "in", "a"),
                                           op("increment", "a", "b"),
                                           {"eager_add", {{"X", {"a"}}, {"Y", {"b"}}}, {{"Out", {"c"}}}, {}},
                                           op("double", "c", "d")};
  Scope scope;
  scope.var("in").set(LoDTensor(iota({6})));
  Executor executor(cpu_place);
  auto prepared = executor.prepare(program, scope, {.eager_deletion = true, .keep = {"d"}});
  for (int run = 0; run < 2; ++run) {
    executor.run(prepared);
    CHECK(values(scope.get("d")) == plus(iota_values(6, 8), 2));  // 2 (2i + 2i + 1)
    for (const char* name : {"a", "b", "c"}) CHECK_FALSE(holds_storage(scope, name));
  }
}

TEST_CASE("eager deletion: a view keeps the storage it shares alive", "[executor][eager]") {
  // v views a's storage (reshape2-like); a's release after the view drops one reference only.
  const std::vector<op_invocation> program{op("double", "in", "a"), op("eager_view", "a", "v"),
                                           op("increment", "v", "d")};
  Scope scope;
  scope.var("in").set(LoDTensor(iota({1000})));
  Executor executor(cpu_place);
  auto prepared = executor.prepare(program, scope, {.eager_deletion = true, .keep = {"v", "d"}});
  executor.run(prepared);
  CHECK_FALSE(holds_storage(scope, "a"));
  CHECK(values(scope.get("v")) == iota_values(1000, 2));
  CHECK(values(scope.get("d")) == plus(iota_values(1000, 2), 1));
  // a and v share one storage: counted once. After the view: a (= v) 4000; after d: 8000.
  CHECK(executor.stats().peak_activation_bytes == 8000);
  CHECK(executor.stats().live_bytes == 8000);  // v and d, kept
}

TEST_CASE("peak activation bytes of a chain, with and without eager deletion", "[executor][eager]") {
  const std::vector<op_invocation> program{op("double", "in", "a"), op("double", "a", "b"),
                                           op("double", "b", "c")};
  Scope scope;
  scope.var("in").set(LoDTensor(iota({1000})));
  Executor executor(cpu_place);
  // Each activation holds 4000 bytes. Eager: a; a and b, then a released; b and c, then b.
  auto eager = executor.prepare(program, scope, {.eager_deletion = true, .keep = {"c"}});
  executor.run(eager);
  CHECK(executor.stats().peak_activation_bytes == 8000);
  CHECK(executor.stats().live_bytes == 4000);
  // A rerun starts with the last run's c alive until the new one replaces it.
  executor.reset_stats();
  executor.run(eager);
  CHECK(executor.stats().peak_activation_bytes == 12000);
  CHECK(values(scope.get("c")) == iota_values(1000, 8));
  // Counting alone: all three stay.
  Scope kept;
  kept.var("in").set(LoDTensor(iota({1000})));
  executor.reset_stats();
  auto counted = executor.prepare(program, kept, {.count_memory = true});
  executor.run(counted);
  CHECK(executor.stats().peak_activation_bytes == 12000);
  CHECK(holds_storage(kept, "a"));
  // Neither: nothing counted.
  executor.reset_stats();
  executor.run(program, kept);
  CHECK(executor.stats().peak_activation_bytes == 0);
}

TEST_CASE("eager deletion keeps an activation's reordered copy out of the transfer cache",
          "[executor][eager][cache]") {
  // a comes out nChw8c; layouts_seen wants NCHW: a reorder on the CPU. Cached, the copy would
  // outlive a's release and never serve again.
  const std::vector<op_invocation> program{op("eager_block", "image", "a"), op("layouts_seen", "a", "seen")};
  for (const bool eager : {false, true}) {
    Scope scope;
    scope.var("image").set(LoDTensor(iota({1, 8, 2, 2}, 1, data_layout::nchw)));
    Executor executor(cpu_place);
    auto prepared = executor.prepare(program, scope, {.eager_deletion = eager, .keep = {"seen"}});
    executor.run(prepared);
    CHECK(values(scope.get("seen")) == std::vector<float>{1});
    CHECK(executor.stats().transforms == 1);
    CHECK(executor.stats().reorders == 1);  // on the host: no bytes between places
    CHECK(executor.stats().bytes_copied == 0);
    CHECK(executor.stats().bytes_transformed == 4 * 32);
    CHECK(executor.cache().size() == (eager ? 0u : 1u));
    CHECK(holds_storage(scope, "a") == !eager);
    if (eager) CHECK(executor.stats().peak_activation_bytes == 2 * 4 * 32 + 4);  // a, its copy, seen
  }
}

TEST_CASE("eager deletion: a variable read twice by one operator is reordered once", "[executor][eager]") {
  // The copy made for the first read serves the second, as the transfer cache serves it
  // without eager deletion (the second copy was made, counted and thrown away).
  const std::vector<op_invocation> program{op("eager_block", "image", "a"),
                                           {"layouts_seen", {{"X", {"a", "a"}}}, {{"Out", {"seen"}}}, {}}};
  for (const bool eager : {false, true}) {
    INFO("eager " << eager);
    Scope scope;
    scope.var("image").set(LoDTensor(iota({1, 8, 2, 2}, 1, data_layout::nchw)));
    Executor executor(cpu_place);
    auto prepared = executor.prepare(program, scope, {.eager_deletion = eager, .keep = {"seen"}});
    executor.run(prepared);
    CHECK(values(scope.get("seen")) == std::vector<float>{1, 1});
    CHECK(executor.stats().transforms == 1);
    CHECK(executor.stats().reorders == 1);
    CHECK(executor.stats().bytes_transformed == 4 * 32);
    if (eager) CHECK(executor.stats().peak_activation_bytes == 2 * 4 * 32 + 8);  // a, one copy, seen
  }
}

TEST_CASE("the executor times its runs, kernels and transforms when asked", "[executor][timing]") {
  const std::vector<op_invocation> program{op("double", "in", "a"), op("double", "a", "b")};
  Scope scope;
  scope.var("in").set(LoDTensor(iota({1000})));
  Executor executor(cpu_place);
  auto prepared = executor.prepare(program, scope);
  executor.run(prepared);
  CHECK(executor.stats().run_ns == 0);  // off by default
  executor.time_runs(true);
  executor.run(prepared);
  const executor_stats& s = executor.stats();
  CHECK(s.run_ns > 0);
  CHECK(s.kernel_ns > 0);
  CHECK(s.kernel_ns + s.transform_ns <= s.run_ns);
  CHECK(values(scope.get("b")) == iota_values(1000, 4));
  executor.time_runs(false);
  const std::uint64_t run_ns = s.run_ns;
  executor.run(prepared);
  CHECK(executor.stats().run_ns == run_ns);
}
