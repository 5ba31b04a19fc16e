// Data integrity: storage versions that every alias and view shares (the transfer cache
// never serves a stale copy), checked sizes, allocation failures that leak nothing, and
// sequence offsets (LoD) through operators and transforms.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <fluidk/devices/onednn_tags.hpp>
#include <fluidk/executor.hpp>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/static_dispatch.hpp>
#include <fluidk/transforms/cpu.hpp>
#include <fluidk/typed_tensor.hpp>
#include <limits>
#include <string>
#include <vector>

#include "simulated_device.hpp"
#include "x_to_out.hpp"

using namespace fluidk;
using fluidk_test::accelerator;
using fluidk_test::x_to_out;

// A layout transform on the simulated accelerator (host memory underneath), registered only
// by the test below: plans made before it must not be served after it.
template <>
struct fluidk::layout_transform<accelerator, layout::nhwc, layout::nchw> {
  static void run(const Tensor& src, Tensor& dst) { fluidk::detail::cpu_reorder(src, dst); }
};

namespace {

// ---------------------------------------------------------------------------------------
// Operators of these tests.

// Out = 2 X, with a kernel for NCHW only: an input in another layout is transformed, and
// the executor keeps the transformed copy in its transfer cache. Out keeps X's offsets.
template <class T>
struct double_nchw {
  using dtype = T;
  using layouts = boost::mp11::mp_list<layout::nchw>;
  void operator()(execution_context& ctx) const {
    const Tensor& x = ctx.input("X");
    Tensor out(x.dims(), x.dtype(), ctx.place(), data_layout::nchw);
    T* o = out.data<T>();
    const T* in = x.data<T>();
    for (std::int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] * T(2);
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
struct double_op : x_to_out<double_nchw<float>> {
  static constexpr std::string_view name = "integrity_double";
};

// Writes `value` into every element of Out's existing storage (an output written in place,
// as a kernel that reuses its output buffer does); allocates only when Out holds nothing.
struct fill_in_place {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    Tensor& out = ctx.output("Out");
    if (!out.initialized()) out = Tensor({1, 4, 1, 1}, data_type::float32);
    const float value = ctx.attr<float>("value");
    float* o = out.data<float>();
    for (std::int64_t i = 0; i < out.numel(); ++i) o[i] = value;
  }
};
struct fill_op {
  static constexpr std::string_view name = "integrity_fill";
  static constexpr std::array<std::string_view, 0> inputs{};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr std::string_view data_type_attribute = "dtype";
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(fill_in_place{}));
};

// Out = X, then scribbles over the input it was given (the transformed copy): a kernel that
// writes its input must not corrupt what the transfer cache keeps.
struct scribble {
  using dtype = float;
  using layouts = boost::mp11::mp_list<layout::nchw>;
  void operator()(execution_context& ctx) const {
    const Tensor& x = ctx.input("X");
    ctx.set_output("Out", copy_to(x, ctx.place()));
    Tensor& mine = ctx.inputs("X")[0].mutable_tensor();
    float* m = mine.data<float>();
    for (std::int64_t i = 0; i < mine.numel(); ++i) m[i] = -1;
  }
};
struct scribble_op : x_to_out<scribble> {
  static constexpr std::string_view name = "integrity_scribble";
};

// Writes a dense Out with no offsets, as most kernels do: Out must not keep the offsets it
// had from an earlier run.
struct write_dense {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const Tensor& x = ctx.input("X");
    ctx.output("Out") = copy_to(x, ctx.place());
  }
};
struct dense_op : x_to_out<write_dense> {
  static constexpr std::string_view name = "integrity_dense";
};

// Fluid's ShareLoD: Out takes X's tensor and offsets, set in that order.
struct share {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    ctx.output("Out") = copy_to(ctx.input("X"), ctx.place());
    ctx.share_lod("X", "Out");
  }
};
struct share_op : x_to_out<share> {
  static constexpr std::string_view name = "integrity_share";
};

// Sets Out's offsets from the attribute "offsets" (one level), after writing its tensor.
struct set_offsets {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    ctx.output("Out") = copy_to(ctx.input("X"), ctx.place());
    const auto& level = ctx.attr<std::vector<std::int64_t>>("offsets");
    ctx.set_output_lod("Out", {std::vector<std::size_t>(level.begin(), level.end())});
  }
};
struct set_offsets_op : x_to_out<set_offsets> {
  static constexpr std::string_view name = "integrity_set_offsets";
};

// Out = X with X's offsets; refuses an X without offsets before it writes anything, as a
// sequence kernel checks its input first.
struct sequences_only {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    if (ctx.input_lod("X").empty()) throw error("integrity_sequences takes sequences only");
    ctx.set_output("Out", copy_to(ctx.input("X"), ctx.place()), ctx.input_lod("X"));
  }
};
struct sequences_op : x_to_out<sequences_only> {
  static constexpr std::string_view name = "integrity_sequences";
};

// Sets Out's offsets from the attribute "offsets" first, then writes its tensor: offsets
// refused there leave Out as it was.
struct offsets_first {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const auto& level = ctx.attr<std::vector<std::int64_t>>("offsets");
    ctx.set_output_lod("Out", {std::vector<std::size_t>(level.begin(), level.end())});
    ctx.output("Out") = copy_to(ctx.input("X"), ctx.place());
  }
};
struct offsets_first_op : x_to_out<offsets_first> {
  static constexpr std::string_view name = "integrity_offsets_first";
};

// Out = X without its last row, written through output() as a whole tensor: run in place on
// sequences, Out keeps offsets its rows no longer fit.
struct drop_row {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const Tensor& x = ctx.input("X");
    Tensor out({x.dims()[0] - 1, 1}, data_type::float32);
    std::copy(x.data<float>(), x.data<float>() + out.numel(), out.data<float>());
    ctx.output("Out") = std::move(out);
  }
};
struct drop_row_op : x_to_out<drop_row> {
  static constexpr std::string_view name = "integrity_drop_row";
};

const bool registered =
    (register_operator<double_op>(), register_operator<fill_op>(), register_operator<scribble_op>(),
     register_operator<dense_op>(), register_operator<share_op>(), register_operator<set_offsets_op>(),
     register_operator<sequences_op>(), register_operator<offsets_first_op>(),
     register_operator<drop_row_op>(), true);

// [1, 4, 1, 1] float in NHWC: the same bytes as NCHW, so values are easy to read, but a
// layout the NCHW kernel needs transformed.
Tensor nhwc_input(float first) {
  Tensor t({1, 4, 1, 1}, data_type::float32, cpu_place, data_layout::nhwc);
  for (int i = 0; i < 4; ++i) t.data<float>()[i] = first + float(i);
  return t;
}

std::vector<float> values(const Tensor& t) {
  const Tensor host = t.place() == cpu_place ? t : copy_to(t, cpu_place);
  const float* p = host.data<float>();
  return std::vector<float>(p, p + host.numel());
}

// A program of one integrity_double, x → y, and the executor that runs it.
struct doubling {
  Scope scope;
  Executor executor{cpu_place};
  Executor::prepared program;
  explicit doubling(const Tensor& x) {
    static_cast<void>(registered);
    scope.var("x").set(LoDTensor(x));
    const std::vector<op_invocation> ops{{"integrity_double", {{"X", {"x"}}}, {{"Out", {"y"}}}, {}}};
    program = executor.prepare(ops, scope);
  }
  std::vector<float> run() {
    executor.run(program);
    return values(scope.get("y").get<LoDTensor>());
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------
// Storage versions.

TEST_CASE("the storage version moves on every mutable route and never on a read", "[integrity][version]") {
  Tensor t({2, 3}, data_type::float32);
  const std::uint64_t id = t.storage_id();
  CHECK(id != 0);
  CHECK(Tensor().storage_id() == 0);
  CHECK(Tensor({2, 3}, data_type::float32).storage_id() != id);  // never reused

  std::uint64_t seen = t.version();
  auto moved = [&] {
    const bool m = t.version() > seen;
    seen = t.version();
    return m;
  };

  const Tensor& read = t;
  static_cast<void>(read.data<float>());
  static_cast<void>(read.handle());
  static_cast<void>(read.memory());
  static_cast<void>(copy_to(t, cpu_place));
  CHECK_FALSE(moved());

  t.data<float>()[0] = 1;  // mutable typed access
  CHECK(moved());

  Tensor alias = t;  // a second Tensor sharing the buffer
  CHECK(alias.storage_id() == id);
  alias.data<float>()[1] = 2;
  CHECK(moved());

  Tensor view = t.slice(1, 2);  // a view: same storage, an offset
  CHECK(view.storage_id() == id);
  view.data<float>()[0] = 3;
  CHECK(moved());

  typed_tensor<cpu, float> typed(alias);  // the static path's typed view
  typed.data()[2] = 4;
  CHECK(moved());

  static_cast<void>(alias.mutable_handle());
  CHECK(moved());
  static_cast<void>(alias.mutable_memory());
  CHECK(moved());

  copy_into(alias, Tensor({2, 3}, data_type::float32));  // a copy in
  CHECK(moved());

  alias.reshape({3, 2});  // metadata of `alias` alone: t still reads [2, 3]
  alias.set_layout(data_layout_of<layout::nc>);
  CHECK_FALSE(moved());
  CHECK(t.dims() == dims{2, 3});

  read.mark_modified();  // the explicit mark, through any tensor of the storage
  CHECK(moved());

  // A kernel's output: every mutable accessor of an output counts as a write.
  Tensor out = t;
  std::array<kernel_arg, 1> outs{kernel_arg(&out)};
  static constexpr std::array<std::uint32_t, 2> one{0, 1};
  static constexpr std::array<std::string_view, 1> names{"Out"};
  const execution_context ctx("integrity", {}, names, context_of(cpu_place), kernel_type<cpu, float>::key(),
                              {}, {outs, one});
  static_cast<void>(ctx.output("Out"));
  CHECK(moved());

  Variable v("v");
  v.set(LoDTensor(t));
  const std::uint64_t variable_version = v.version();
  v.mark_modified();  // the variable's version and its storage's
  CHECK(v.version() > variable_version);
  CHECK(moved());
}

TEST_CASE("the transfer cache never serves a copy older than the source's bytes",
          "[integrity][version][executor]") {
  Tensor x = nhwc_input(1);
  doubling program(x);
  CHECK(program.run() == std::vector<float>{2, 4, 6, 8});
  CHECK(program.run() == std::vector<float>{2, 4, 6, 8});
  CHECK(program.executor.stats().transforms == 1);
  CHECK(program.executor.stats().cache_hits == 1);

  SECTION("a read changes nothing: the copy is served") {
    const Tensor& read = program.scope.get("x").get<LoDTensor>();
    CHECK(read.data<float>()[0] == 1);
    static_cast<void>(program.run());
    CHECK(program.executor.stats().cache_hits == 2);
  }
  SECTION("the setter") {
    program.scope.var("x").set(LoDTensor(nhwc_input(10)));
    CHECK(program.run() == std::vector<float>{20, 22, 24, 26});
  }
  SECTION("a second Tensor sharing the buffer") {
    x.data<float>()[0] = 100;  // `x` is not the variable's tensor, only shares its bytes
    CHECK(program.run() == std::vector<float>{200, 4, 6, 8});
  }
  SECTION("a view") {
    Tensor row = x.slice(0, 1);
    row.data<float>()[3] = 50;
    CHECK(program.run() == std::vector<float>{2, 4, 6, 100});
  }
  SECTION("a typed view") {
    typed_tensor<cpu, float, layout::nhwc> typed(x);
    typed.data()[1] = 7;
    CHECK(program.run() == std::vector<float>{2, 14, 6, 8});
  }
  SECTION("a copy in") {
    copy_into(x, nhwc_input(5));
    CHECK(program.run() == std::vector<float>{10, 12, 14, 16});
  }
  SECTION("a resize of the variable's tensor") {
    program.scope.var("x").get_mutable<LoDTensor>().reshape({1, 2, 2, 1});  // C = 2, H = 2 in NHWC
    CHECK(program.run() == std::vector<float>{2, 6, 4, 8});
    CHECK(program.scope.get("y").get<LoDTensor>().dims() == dims{1, 2, 2, 1});
  }
  SECTION("another kernel's output written in place, through an alias variable") {
    program.scope.var("alias").set(LoDTensor(x));
    const std::vector<op_invocation> fill{
        {"integrity_fill", {}, {{"Out", {"alias"}}}, {{"value", 3.0f}, {"dtype", std::string("float32")}}}};
    program.executor.run(fill, program.scope);
    CHECK(program.run() == std::vector<float>{6, 6, 6, 6});
  }
  SECTION("a pointer kept from an earlier access is not seen, until marked") {
    float* kept = x.data<float>();
    static_cast<void>(program.run());
    kept[0] = 9;                                             // no accessor saw this write
    CHECK(program.run() == std::vector<float>{2, 4, 6, 8});  // the documented limit
    x.mark_modified();
    CHECK(program.run() == std::vector<float>{18, 4, 6, 8});
    kept[0] = 11;
    program.scope.var("x").mark_modified();  // the variable's mark reaches its storage too
    CHECK(program.run() == std::vector<float>{22, 4, 6, 8});
  }
}

// Under FLUIDK_DEBUG such a kernel stops the program at its first run instead (debug_test).
#if !FLUIDK_DEBUG_ENABLED
TEST_CASE("a kernel that writes its transformed input does not spoil the cached copy",
          "[integrity][version][executor]") {
  static_cast<void>(registered);
  Scope scope;
  scope.var("x").set(LoDTensor(nhwc_input(1)));
  Executor executor(cpu_place);
  const std::vector<op_invocation> ops{{"integrity_scribble", {{"X", {"x"}}}, {{"Out", {"y"}}}, {}}};
  auto program = executor.prepare(ops, scope);
  for (int run = 0; run < 3; ++run) {
    executor.run(program);
    CHECK(values(scope.get("y").get<LoDTensor>()) == std::vector<float>{1, 2, 3, 4});
  }
  CHECK(values(scope.get("x").get<LoDTensor>()) == std::vector<float>{1, 2, 3, 4});  // the source
  CHECK(executor.stats().transforms == 3);  // each run made the copy anew
}
#endif

// ---------------------------------------------------------------------------------------
// Checked sizes.

TEST_CASE("element counts are checked: no shape wraps, none is negative", "[integrity][sizes]") {
  constexpr std::int64_t big = std::int64_t(1) << 61;
  CHECK_THROWS_WITH((dims{big, 8}), Catch::Contains("[2305843009213693952, 8] has more elements than int64"));
  CHECK_THROWS_WITH((dims{big, 2, 2, 2}), Catch::Contains("more elements than int64"));
  CHECK_THROWS_WITH((dims{3, -1}), Catch::Contains("negative extent -1 in shape [3, -1]"));
  CHECK((dims{big, 2}).numel() == 2 * big);
  CHECK_THROWS((dims{0, big, 8}));  // with a 0 extent, the others still count
  dims d{2, 3};
  CHECK_THROWS_WITH(d.set(1, -2), Catch::Contains("negative extent -2"));
  CHECK_THROWS_WITH(d.set(0, big * 2), Catch::Contains("more elements than int64"));
  CHECK_THROWS_WITH(d.set(2, 1), Catch::Contains("dimension 2 of shape [2, 3] does not exist"));
  CHECK(d == dims{2, 3});  // a refused set leaves the shape as it was
  CHECK(d.with(1, 5) == dims{2, 5});
}

TEST_CASE("byte counts are checked and name the shape and the place", "[integrity][sizes]") {
  constexpr std::int64_t big = std::int64_t(1) << 61;
  // 2^61 floats are 2^63 bytes: one more than int64 holds. Once this wrapped to 0 bytes.
  CHECK_THROWS_WITH(
      Tensor({big}, data_type::float32),
      Catch::Contains("a tensor of shape [2305843009213693952], float, ANY_LAYOUT on Place(cpu)") &&
          Catch::Contains("need more bytes than the address space holds"));
  CHECK_THROWS_WITH(Tensor({big / 2, 2}, data_type::float64, place::of<accelerator>(1)),
                    Catch::Contains("on Place(acc:1)"));
  // Blocked layouts pad C up: the padded count is checked too.
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  CHECK_THROWS_WITH(storage_numel({1, max - 2, 1, 1}, data_layout_of<layout::nChw8c>),
                    Catch::Contains("padded to nChw8c has more elements than int64"));
  CHECK_THROWS_WITH(Tensor({0, max - 2, 1, 1}, data_type::float32, cpu_place, data_layout_of<layout::nChw8c>),
                    Catch::Contains("on Place(cpu)") && Catch::Contains("padded to nChw8c"));
  // A transform's output is allocated through the same checks: an empty source whose padded
  // target would not fit is refused, not wrapped.
  const Tensor empty({0, max - 2, 1, 1}, data_type::float32, cpu_place, data_layout::nchw);
  CHECK(empty.storage_bytes() == 0);
  CHECK_THROWS_AS(transform(empty, kernel_key(cpu_place, data_type::float32, data_layout_of<layout::nChw8c>,
                                              library_type::plain)),
                  error);
  // Reshape and slices go through them as well.
  Tensor t({4, 4}, data_type::float32);
  CHECK_THROWS_WITH(t.reshape({big, 8}), Catch::Contains("more elements than int64"));
  CHECK_THROWS_WITH(t.reshape({big}),
                    Catch::Contains("need more bytes") || Catch::Contains("cannot reshape"));
  CHECK(t.dims() == dims{4, 4});
}

TEST_CASE("SelectedRows refuses a negative height and computes dense shapes checked", "[integrity][sizes]") {
  CHECK_THROWS_WITH(SelectedRows({}, -1), Catch::Contains("height -1 is negative"));
  SelectedRows rows({0, 2}, 3, Tensor({2, 5}, data_type::float32));
  CHECK_THROWS_WITH(rows.set_height(-4), Catch::Contains("negative"));
  CHECK(rows.height() == 3);
  CHECK(rows.dense_dims() == dims{3, 5});
  rows.set_height(std::int64_t(1) << 62);
  CHECK_THROWS_WITH(rows.dense_dims(), Catch::Contains("more elements than int64"));
}

// ---------------------------------------------------------------------------------------
// Allocation failures: a device whose allocator fails on demand.

namespace {
struct flaky {
  using place_tag = flaky;
  static constexpr place_kind_id id = 5;
  static constexpr std::string_view name = "flaky";
  static constexpr bool has_device_id = false;
  static constexpr bool host_accessible = true;
};
class flaky_context final : public device_context {
 public:
  explicit flaky_context(int) {}
  fluidk::place place() const noexcept override { return place::of<flaky>(); }
  void wait() override {}
};
std::atomic<int> flaky_live{0};        // buffers allocated and not yet freed
std::atomic<int> flaky_successes{-1};  // allocations left before the next failure; -1: never fail
}  // namespace

template <>
struct fluidk::device_traits<flaky> {
  using context_type = flaky_context;
  static int device_count() noexcept { return 1; }
  static void* allocate(int device, std::size_t bytes) {
    if (flaky_successes.load() == 0)
      throw allocation_error(place::of<flaky>(), bytes, "the test's allocator failed on demand");
    if (flaky_successes.load() > 0) --flaky_successes;
    void* p = device_traits<cpu>::allocate(device, bytes);
    if (p != nullptr) ++flaky_live;
    return p;
  }
  static void deallocate(int device, void* handle, std::size_t bytes) noexcept {
    if (handle != nullptr) --flaky_live;
    device_traits<cpu>::deallocate(device, handle, bytes);
  }
};
template <>
struct fluidk::copy_traits<cpu, flaky> : copy_traits<cpu, cpu> {};
template <>
struct fluidk::copy_traits<flaky, cpu> : copy_traits<cpu, cpu> {};
template <>
struct fluidk::copy_traits<flaky, flaky> : copy_traits<cpu, cpu> {};
namespace {
const bool flaky_registered = register_device<flaky>() && register_copy<cpu, flaky>() &&
                              register_copy<flaky, cpu>() && register_copy<flaky, flaky>();

// Out = X on the flaky device (its only kernel): a CPU input is moved there first.
struct copy_on_flaky {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const Tensor& x = ctx.input("X");
    Tensor out(x.dims(), x.dtype(), ctx.place(), x.layout());
    copy_into(out, x);
    ctx.set_output("Out", std::move(out));
  }
};
struct flaky_op {
  static constexpr std::string_view name = "integrity_flaky";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<flaky>(copy_on_flaky{}));
};

struct fail_after {
  explicit fail_after(int successes) { flaky_successes = successes; }
  ~fail_after() { flaky_successes = -1; }
};
}  // namespace

TEST_CASE("an allocation failure names the bytes and the place, and leaks nothing",
          "[integrity][allocation]") {
  REQUIRE(flaky_registered);
  const place where = place::of<flaky>();
  SECTION("a tensor") {
    const fail_after failing(0);
    try {
      Tensor t({3, 5}, data_type::float32, where);
      FAIL("the allocation did not fail");
    } catch (const allocation_error& e) {
      CHECK(e.bytes() == 60);
      CHECK(e.where() == where);
      CHECK_THAT(e.what(), Catch::Contains("cannot allocate 60 bytes on Place(flaky)"));
    }
  }
  SECTION("the second step of a transform chain: the first step's tensor is freed") {
    const Tensor src = nhwc_input(1);
    const fail_after failing(0);  // layout on the CPU succeeds, the copy to flaky fails
    const kernel_key to(where, data_type::float32, data_layout::nchw, library_type::plain);
    CHECK(plan_transform(key_of(src), to).steps().size() == 2);
    CHECK_THROWS_AS(transform(src, to), allocation_error);
    CHECK(values(src) == std::vector<float>{1, 2, 3, 4});
  }
  SECTION("an executor's input transfer: the error names the operator, nothing is kept") {
    register_operator<flaky_op>();
    Scope scope;
    scope.var("x").set(LoDTensor(nhwc_input(1)));
    Executor executor(where);
    const std::vector<op_invocation> ops{{"integrity_flaky", {{"X", {"x"}}}, {{"Out", {"y"}}}, {}}};
    auto program = executor.prepare(ops, scope);
    {
      const fail_after failing(0);
      // Its kind, place and size are kept (it was once a plain fluidk::error).
      try {
        executor.run(program);
        FAIL("the transfer did not fail");
      } catch (const allocation_error& e) {
        CHECK(e.where() == where);
        CHECK(e.bytes() == 16);
        CHECK_THAT(e.what(),
                   Catch::StartsWith("fluidk: operator 'integrity_flaky' input X ('x') for kernel ") &&
                       Catch::Contains("cannot allocate 16 bytes on Place(flaky)"));
      }
    }
    CHECK(executor.cache().size() == 0);
    CHECK(scope.kid_count() == 0);
    CHECK(values(scope.get("x").get<LoDTensor>()) == std::vector<float>{1, 2, 3, 4});
    executor.run(program);  // and once the allocator works again, so does the run
    CHECK(values(scope.get("y").get<LoDTensor>()) == std::vector<float>{1, 2, 3, 4});
    executor.cache().clear();
    scope.erase("y");
  }
  SECTION("a runtime call's and a static call's input transfer: the same kind, naming the operator") {
    const operator_info& op = register_operator<flaky_op>();
    Variable x("x"), y("y");
    x.set(LoDTensor(nhwc_input(1)));
    const std::vector<std::vector<Variable*>> in{{&x}}, out{{&y}};
    const fail_after failing(0);
    try {
      run_operator(op, where, in, out);
      FAIL("the transfer did not fail");
    } catch (const allocation_error& e) {
      CHECK(e.bytes() == 16);
      CHECK_THAT(e.what(), Catch::StartsWith("fluidk: operator 'integrity_flaky' input X ('x') for kernel "));
    }
    const typed_tensor<cpu, float, layout::nhwc> typed(nhwc_input(1));
    Tensor result;
    try {
      run<flaky_op>(target<flaky>(), inputs(typed), outputs(result));
      FAIL("the transfer did not fail");
    } catch (const allocation_error& e) {
      CHECK(e.where() == where);
      CHECK_THAT(e.what(), Catch::StartsWith("fluidk: operator 'integrity_flaky' input X for kernel "));
    }
    CHECK(values(x.get<LoDTensor>()) == std::vector<float>{1, 2, 3, 4});
    CHECK(!result.initialized());
  }
  CHECK(flaky_live == 0);
}

// ---------------------------------------------------------------------------------------
// Sequence offsets through operators.

namespace {
Variable& with_lod(Scope& scope, const std::string& name, Tensor t, lod offsets) {
  Variable& v = scope.var(name);
  v.set(LoDTensor(std::move(t), std::move(offsets)));
  return v;
}
const lod& lod_of(Scope& scope, const std::string& name) { return scope.get(name).get<LoDTensor>().lod(); }
// n rows of one float.
Tensor rows(std::int64_t n) {
  Tensor t({n, 1}, data_type::float32);
  for (std::int64_t i = 0; i < n; ++i) t.data<float>()[i] = float(i);
  return t;
}
}  // namespace

TEST_CASE("an output never keeps the offsets of an earlier run", "[integrity][lod]") {
  static_cast<void>(registered);
  Scope scope;
  with_lod(scope, "seq", rows(4), {{0, 1, 4}});
  scope.var("dense").set(LoDTensor(rows(4)));
  with_lod(scope, "y", rows(4), {{0, 3, 4}});  // offsets left from an earlier run
  Executor executor(cpu_place);
  SECTION("a kernel that writes a dense output") {
    executor.run(std::vector<op_invocation>{{"integrity_dense", {{"X", {"dense"}}}, {{"Out", {"y"}}}, {}}},
                 scope);
    CHECK(lod_of(scope, "y").empty());
  }
  SECTION("run_operator, the same rule") {
    const std::vector<std::vector<Variable*>> in{{&scope.var("dense")}}, out{{&scope.var("y")}};
    run_operator(find_operator("integrity_dense"), cpu_place, in, out);
    CHECK(lod_of(scope, "y").empty());
  }
  SECTION("offsets from this run's input, then none from the next") {
    const std::vector<op_invocation> ops{{"integrity_share", {{"X", {"seq"}}}, {{"Out", {"y"}}}, {}}};
    auto program = executor.prepare(ops, scope);
    executor.run(program);
    CHECK(lod_of(scope, "y") == lod{{0, 1, 4}});
    scope.var("seq").set(LoDTensor(rows(4)));
    executor.run(program);
    CHECK(lod_of(scope, "y").empty());
  }
  SECTION("an output that is also the input keeps this run's offsets") {
    executor.run(std::vector<op_invocation>{{"integrity_share", {{"X", {"seq"}}}, {{"Out", {"seq"}}}, {}}},
                 scope);
    CHECK(lod_of(scope, "seq") == lod{{0, 1, 4}});
  }
}

TEST_CASE("a kernel that fails before it writes an output leaves the output's offsets", "[integrity][lod]") {
  static_cast<void>(registered);
  Scope scope;
  with_lod(scope, "seq", rows(3), {{0, 1, 3}});
  scope.var("dense").set(LoDTensor(rows(4)));
  Variable& y = with_lod(scope, "y", rows(4), {{0, 3, 4}});  // an earlier run's result
  y.get_mutable<LoDTensor>().data<float>()[0] = 7;
  auto unchanged = [&] {
    CHECK(lod_of(scope, "y") == lod{{0, 3, 4}});
    CHECK(y.get<LoDTensor>().dims() == dims{4, 1});
    CHECK(y.get<LoDTensor>().data<float>()[0] == 7);
  };
  const auto refused = Catch::Contains("integrity_sequences takes sequences only");
  Executor executor(cpu_place);
  // An operator that sets Out's offsets from its attribute, run on X = dense, Out = y.
  auto run_setting = [&](const char* type, std::vector<std::int64_t> offsets) {
    executor.run(
        std::vector<op_invocation>{
            {type, {{"X", {"dense"}}}, {{"Out", {"y"}}}, {{"offsets", std::move(offsets)}}}},
        scope);
  };
  SECTION("the executor: the first run, which chooses, and the next, which does not") {
    const std::vector<op_invocation> ops{{"integrity_sequences", {{"X", {"dense"}}}, {{"Out", {"y"}}}, {}}};
    auto program = executor.prepare(ops, scope);
    CHECK_THROWS_WITH(executor.run(program), refused);
    unchanged();
    CHECK_THROWS_WITH(executor.run(program), refused);
    unchanged();
    CHECK(executor.stats().ops_run == 0);
    // And a run that succeeds sets them.
    scope.var("dense").set(LoDTensor(rows(4), {{0, 2, 4}}));
    executor.run(program);
    CHECK(lod_of(scope, "y") == lod{{0, 2, 4}});
  }
  SECTION("run_operator, the same rule") {
    const std::vector<std::vector<Variable*>> in{{&scope.var("dense")}}, out{{&y}};
    CHECK_THROWS_WITH(run_operator(find_operator("integrity_sequences"), cpu_place, in, out), refused);
    unchanged();
  }
  SECTION("offsets the kernel sets that are refused do not count as a write") {
    CHECK_THROWS_WITH(run_setting("integrity_offsets_first", {0, 1, 99}),
                      Catch::Contains("LoD level 0 ends at 99"));
    unchanged();
  }
  SECTION("an output the kernel wrote before it failed keeps what it wrote, without offsets") {
    // The tensor is written, then offsets that do not fit it are refused: the old offsets
    // need not fit the new tensor, so they are not given back.
    with_lod(scope, "y", rows(2), {{0, 2}});
    CHECK_THROWS_WITH(run_setting("integrity_set_offsets", {0, 2, 3}),
                      Catch::Contains("LoD level 0 ends at 3"));
    CHECK(lod_of(scope, "y").empty());
    CHECK(y.get<LoDTensor>().dims() == dims{4, 1});
  }
}

TEST_CASE("an output that is also an input keeps its offsets only while its rows fit them",
          "[integrity][lod][regression]") {
  static_cast<void>(registered);
  Scope scope;
  with_lod(scope, "seq", rows(4), {{0, 1, 4}});
  Executor executor(cpu_place);
  SECTION("rows kept: the offsets stay") {
    executor.run(std::vector<op_invocation>{{"integrity_dense", {{"X", {"seq"}}}, {{"Out", {"seq"}}}, {}}},
                 scope);
    CHECK(lod_of(scope, "seq") == lod{{0, 1, 4}});
  }
  // A row dropped by a kernel that assigns the tensor and leaves the offsets: once accepted,
  // with offsets ending at 4 on 3 rows, which the next sequence kernel read past.
  const auto refused = [&](auto&& run) {
    CHECK_THROWS_WITH(run(),
                      Catch::StartsWith("fluidk: operator 'integrity_drop_row', kernel {") &&
                          Catch::Contains("output 'seq', also an input, keeps its sequence offsets, which "
                                          "its tensor no longer fits (") &&
                          Catch::Contains("set_output"));
    CHECK(scope.get("seq").get<LoDTensor>().dims() == dims{3, 1});
    CHECK(lod_of(scope, "seq").empty());
  };
  SECTION("the executor") {
    refused([&] {
      executor.run(
          std::vector<op_invocation>{{"integrity_drop_row", {{"X", {"seq"}}}, {{"Out", {"seq"}}}, {}}},
          scope);
    });
  }
  SECTION("run_operator") {
    const std::vector<std::vector<Variable*>> in{{&scope.var("seq")}}, out{{&scope.var("seq")}};
    refused([&] { run_operator(find_operator("integrity_drop_row"), cpu_place, in, out); });
  }
}

TEST_CASE("kernels set and share offsets through the context, checked", "[integrity][lod]") {
  static_cast<void>(registered);
  Scope scope;
  scope.var("x").set(LoDTensor(nhwc_input(1)));
  Executor executor(cpu_place);
  auto run = [&](std::vector<std::int64_t> offsets) {
    executor.run(
        std::vector<op_invocation>{
            {"integrity_set_offsets", {{"X", {"x"}}}, {{"Out", {"y"}}}, {{"offsets", std::move(offsets)}}}},
        scope);
  };
  run({0, 1});
  CHECK(lod_of(scope, "y") == lod{{0, 1}});
  // [1, 4, 1, 1] has one row: the last offset must be 1.
  CHECK_THROWS_WITH(run({0, 2, 3}), Catch::Contains("LoD level 0 ends at 3, but the tensor has 1 entries"));
}

TEST_CASE("offsets survive every transform and device copy", "[integrity][lod]") {
  const lod offsets{{0, 2}, {0, 2, 3}};
  Tensor t({3, 16, 1, 2}, data_type::float32, cpu_place, data_layout::nhwc);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(i);
  const LoDTensor src(t, offsets);
  auto to = [](const place& where, data_type dtype, data_layout layout) {
    return kernel_key(where, dtype, layout, library_type::plain);
  };
  const place acc = place::of<accelerator>(1);
  SECTION("layout") {
    CHECK(transform(src, to(cpu_place, data_type::float32, data_layout::nchw)).lod() == offsets);
  }
  SECTION("data type") {
    CHECK(transform(src, to(cpu_place, data_type::float16, data_layout::nhwc)).lod() == offsets);
  }
  SECTION("place") { CHECK(transform(src, to(acc, data_type::float32, data_layout::nhwc)).lod() == offsets); }
  SECTION("a chain: blocked layout, type and place in one plan") {
    const LoDTensor blocked =
        transform(src, to(cpu_place, data_type::float32, data_layout_of<layout::nChw8c>));
    CHECK(blocked.lod() == offsets);
    const kernel_key target = to(acc, data_type::float16, data_layout::nchw);
    CHECK(plan_transform(key_of(blocked), target).steps().size() >= 2);
    const LoDTensor moved = transform(blocked, target);
    CHECK(moved.lod() == offsets);
    CHECK(key_of(moved) == target);
  }
  SECTION("copy_to") { CHECK(copy_to(src, acc).lod() == offsets); }
  SECTION("the executor's transformed input, as its kernel sees it") {
    static_cast<void>(registered);
    Scope scope;
    with_lod(scope, "x", nhwc_input(1), {{0, 1}});
    Executor executor(cpu_place);
    const std::vector<op_invocation> ops{{"integrity_double", {{"X", {"x"}}}, {{"Out", {"y"}}}, {}}};
    auto program = executor.prepare(ops, scope);
    executor.run(program);
    executor.run(program);  // from the transfer cache
    CHECK(executor.stats().cache_hits == 1);
    CHECK(lod_of(scope, "y") == lod{{0, 1}});
  }
}

TEST_CASE("a plan counts the bytes its copies write, a blocked layout's padding included", "[integrity]") {
  // 3 channels in nChw8c hold 8: the copy to the accelerator writes 128 bytes, not 48.
  const data_layout blocked = data_layout_of<layout::nChw8c>;
  const Tensor x({1, 3, 2, 2}, data_type::float32, cpu_place, blocked);
  const kernel_key to(place::of<accelerator>(0), data_type::float32, blocked, library_type::plain);
  const transform_plan& plan = plan_transform(key_of(x), to);
  REQUIRE(plan.describe() == "copy Place(cpu)->Place(acc:0)");
  CHECK(plan.bytes_copied(x.dims()) == 128);
  CHECK(plan.bytes_copied(x.dims()) == transform(x, to).storage_bytes());
  // Cast and re-laid out on the CPU first: the bytes of the tensor that is copied.
  const kernel_key half(place::of<accelerator>(0), data_type::float16, data_layout::nchw,
                        library_type::plain);
  const transform_plan& cast_first = plan_transform(key_of(x), half);
  REQUIRE(cast_first.describe().ends_with("copy Place(cpu)->Place(acc:0)"));
  CHECK(cast_first.bytes_copied(x.dims()) == 24);
  CHECK(cast_first.bytes_copied(x.dims()) == transform(x, half).storage_bytes());
}

// ---------------------------------------------------------------------------------------
// Registration: the result does not depend on when a plan was first asked for.

TEST_CASE("a plan made before a registration is not served after it", "[integrity][registration]") {
  const place acc = place::of<accelerator>(0);
  const kernel_key from(acc, data_type::float32, data_layout::nhwc, library_type::plain);
  const kernel_key to(acc, data_type::float32, data_layout::nchw, library_type::plain);
  Tensor x({2, 3, 2, 2}, data_type::float32, acc, data_layout::nhwc);
  const Tensor host = [] {
    Tensor t({2, 3, 2, 2}, data_type::float32, cpu_place, data_layout::nhwc);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(i);
    return t;
  }();
  copy_into(x, copy_to(host, acc));
  const transform_plan& through_host = plan_transform(from, to);
  CHECK(through_host.steps().size() == 3);  // to the host, re-laid out there, back
  const std::vector<float> expected = values(transform(x, to));

  register_layout_transform<accelerator, layout::nhwc, layout::nchw>();
  const transform_plan& direct = plan_transform(from, to);
  CHECK(direct.steps().size() == 1);
  CHECK(through_host.steps().size() == 3);  // the old plan is still valid for whoever holds it
  CHECK(values(transform(x, to)) == expected);
}
