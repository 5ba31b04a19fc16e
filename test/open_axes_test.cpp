// Open axes: a compute library and a blocked layout declared here, in the test alone, through
// the extension points every backend uses (tags, register_library, register_layout, transform
// traits), then used from the static path, the runtime path and program text. Nothing in
// include/fluidk/ knows them.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <fluidk/executor.hpp>
#include <fluidk/program.hpp>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/static_dispatch.hpp>
#include <fluidk/transforms/cpu.hpp>
#include <string>
#include <vector>

using namespace fluidk;

namespace open_axes {

// A library of fast kernels, asked for by the attribute use_fastlib.
struct fastlib {
  using library_tag = fastlib;
  static constexpr library_id id = 5;
  static constexpr std::string_view name = "FASTLIB";
  static constexpr std::array<std::string_view, 1> aliases{"FAST"};
  static constexpr std::array<std::string_view, 1> request_attributes{"use_fastlib"};
};

// Channels blocked by 32, as some accelerators' libraries store them.
struct nchw32c {
  using layout_tag = nchw32c;
  static constexpr layout_id id = 20;
  static constexpr std::string_view name = "NCHW32c";
  static constexpr int rank = 4;
  static constexpr int block_axis = 1;
  static constexpr int block_size = 32;
  using plain = layout::nchw;
};

inline const bool registered =
    register_at_startup([] { return register_library<fastlib>() && register_layout<nchw32c>(); });

// Element (n, c, h, w) of an NCHW32c tensor of logical dims s.
std::int64_t blocked_index(const dims& s, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  const std::int64_t blocks = (s[1] + 31) / 32;
  return (((n * blocks + c / 32) * s[2] + h) * s[3] + w) * 32 + c % 32;
}

// Moves every element between NCHW and NCHW32c (either way); padding lanes are zero.
void reorder(const Tensor& src, Tensor& dst, bool to_blocked) {
  const dims& s = src.dims();
  const std::size_t elem = size_of(src.dtype());
  const auto* from = static_cast<const std::byte*>(src.handle()) + src.offset();
  auto* to = static_cast<std::byte*>(dst.handle()) + dst.offset();
  if (to_blocked) std::memset(to, 0, dst.storage_bytes());
  for (std::int64_t n = 0; n < s[0]; ++n)
    for (std::int64_t c = 0; c < s[1]; ++c)
      for (std::int64_t h = 0; h < s[2]; ++h)
        for (std::int64_t w = 0; w < s[3]; ++w) {
          const std::int64_t plain = ((n * s[1] + c) * s[2] + h) * s[3] + w;
          const std::int64_t blocked = blocked_index(s, n, c, h, w);
          std::memcpy(to + std::size_t(to_blocked ? blocked : plain) * elem,
                      from + std::size_t(to_blocked ? plain : blocked) * elem, elem);
        }
}

int plain_runs = 0, fast_runs = 0;

// Out = 2 X: the plain kernel for any unblocked layout, the fast one on NCHW32c data.
struct scale_plain {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    ++plain_runs;
    const Tensor& x = ctx.input(0);
    Tensor out(x.dims(), x.dtype(), ctx.place(), x.layout());
    for (std::int64_t i = 0; i < x.numel(); ++i) out.data<float>()[i] = 2 * x.data<float>()[i];
    ctx.output(0) = std::move(out);
  }
};
struct scale_fast {
  using dtype = float;
  using layouts = boost::mp11::mp_list<nchw32c>;
  void operator()(execution_context& ctx) const {
    ++fast_runs;
    const Tensor& x = ctx.input(0);
    REQUIRE(x.layout() == data_layout_of<nchw32c>);
    REQUIRE(ctx.kernel().library() == library_type_of<fastlib>);
    Tensor out(x.dims(), x.dtype(), ctx.place(), x.layout());
    const std::int64_t n = x.storage_bytes() / std::int64_t(sizeof(float));  // padding lanes too
    for (std::int64_t i = 0; i < n; ++i) out.data<float>()[i] = 2 * x.data<float>()[i];
    ctx.output(0) = std::move(out);
  }
};
struct scale {
  static constexpr std::string_view name = "open_axes_scale";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels =
      make_kernels(kernels_on<cpu>(scale_plain{}), kernels_on<cpu, fastlib>(scale_fast{}));
};

}  // namespace open_axes

// The transforms, for both paths: trait specialisations for the static path, registered for
// the runtime planner.
template <>
struct fluidk::layout_transform<cpu, layout::nchw, open_axes::nchw32c> {
  static void run(const Tensor& src, Tensor& dst) { open_axes::reorder(src, dst, true); }
};
template <>
struct fluidk::layout_transform<cpu, open_axes::nchw32c, layout::nchw> {
  static void run(const Tensor& src, Tensor& dst) { open_axes::reorder(src, dst, false); }
};

namespace open_axes {
inline const bool transforms_registered = register_at_startup([] {
  return register_layout_transform<cpu, layout::nchw, nchw32c>() &&
         register_layout_transform<cpu, nchw32c, layout::nchw>();
});

// A 1x40x2x3 float NCHW tensor holding 0, 1, 2, ...: 40 channels pad to 64 in NCHW32c.
Tensor sample() {
  Tensor x({1, 40, 2, 3}, data_type::float32, cpu_place, data_layout::nchw);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(i);
  return x;
}

// The NCHW values of a tensor in NCHW or NCHW32c.
std::vector<float> logical(const Tensor& t) {
  Tensor plain(t.dims(), t.dtype(), cpu_place, data_layout::nchw);
  if (t.layout() == data_layout_of<nchw32c>)
    reorder(t, plain, false);
  else
    std::memcpy(plain.handle(), static_cast<const std::byte*>(t.handle()) + t.offset(),
                plain.storage_bytes());
  return {plain.data<float>(), plain.data<float>() + plain.numel()};
}

std::vector<float> doubled(const Tensor& x) {
  std::vector<float> v = logical(x);
  for (float& f : v) f *= 2;
  return v;
}
}  // namespace open_axes

using open_axes::fastlib;
using open_axes::nchw32c;

namespace {
// Tags the tests below register themselves: one under a taken id, one under a taken name,
// one registered late.
struct other_id_clash {
  using layout_tag = other_id_clash;
  static constexpr layout_id id = 20;
  static constexpr std::string_view name = "NCHW4c";
  static constexpr int rank = 4;
};
struct name_clash {
  using library_tag = name_clash;
  static constexpr library_id id = 6;
  static constexpr std::string_view name = "fastlib";
};
struct late {
  using layout_tag = late;
  static constexpr layout_id id = 27;
  static constexpr std::string_view name = "LATE";
  static constexpr int rank = 4;
};
}  // namespace

TEST_CASE("a library and a blocked layout declared outside the core are vocabulary like the core's",
          "[open_axes]") {
  STATIC_REQUIRE(Library<fastlib>);
  STATIC_REQUIRE(Layout<nchw32c>);
  STATIC_REQUIRE(data_layout_of<nchw32c>.blocked() && data_layout_of<nchw32c>.block_axis() == 1 &&
                 data_layout_of<nchw32c>.block_size() == 32 &&
                 data_layout_of<nchw32c>.plain() == data_layout::nchw);
  STATIC_REQUIRE(std::is_same_v<plain_layout_t<nchw32c>, layout::nchw>);

  CHECK(parse_data_layout("nchw32c") == data_layout_of<nchw32c>);
  CHECK(parse_library_type("fast") == library_type_of<fastlib>);
  const kernel_key key = kernel_type<cpu, float, nchw32c, fastlib>::key();
  CHECK(key.to_string() ==
        "{data_type[float]; data_layout[NCHW32c]; place[Place(cpu)]; library_type[FASTLIB]}");
  CHECK(parse_kernel_key(key.to_string()) == key);
  CHECK(kernel_key::from_ordinal(key.ordinal()) == key);

  // 40 channels pad to 64: the layout's block decides the storage, as for nChw8c.
  CHECK(storage_numel({1, 40, 2, 3}, data_layout_of<nchw32c>) == 64 * 6);
  const Tensor t({1, 40, 2, 3}, data_type::float32, cpu_place, data_layout_of<nchw32c>);
  CHECK(t.storage_bytes() == 64 * 6 * 4);
  CHECK_THROWS_WITH(Tensor({40, 6}, data_type::float32, cpu_place, data_layout_of<nchw32c>),
                    Catch::Contains("layout NCHW32c needs rank 4"));
}

TEST_CASE("ids and names are checked at registration, naming both tags", "[open_axes]") {
  CHECK_THROWS_WITH(register_layout<other_id_clash>(),
                    Catch::Contains("layout 'NCHW4c' declares id 20, which layout 'NCHW32c' already uses"));
  CHECK_THROWS_WITH(
      register_library<name_clash>(),
      Catch::Contains("library 'fastlib' (id 6) shares a name or alias with library 'FASTLIB'"));
  // Nothing changed: the names still read as before, the refused ones not at all.
  CHECK(parse_data_layout("NCHW32c") == data_layout_of<nchw32c>);
  CHECK_THROWS_WITH(parse_data_layout("NCHW4c"), Catch::Contains("unknown data layout"));
  CHECK(register_layout<nchw32c>());  // the same tag again is no error
}

TEST_CASE("the static path chooses the library's kernel and plans the transform at compile time",
          "[open_axes]") {
  using open_axes::fast_runs;
  using open_axes::plain_runs;
  typed_tensor<cpu, float, layout::nchw> x(open_axes::sample());
  Tensor y;
  STATIC_REQUIRE(std::is_same_v<static_kernel_type<open_axes::scale, target<cpu, fastlib>, decltype(x)>,
                                kernel_type<cpu, float, nchw32c, fastlib>>);
  STATIC_REQUIRE(std::is_same_v<static_kernel_type<open_axes::scale, target<cpu>, decltype(x)>,
                                kernel_type<cpu, float, layout::any, library::plain>>);
  const int fast_before = fast_runs, plain_before = plain_runs;
  run<open_axes::scale>(target<cpu, fastlib>(), inputs(x), outputs(y));
  CHECK(fast_runs == fast_before + 1);
  CHECK(y.layout() == data_layout_of<nchw32c>);
  CHECK(open_axes::logical(y) == open_axes::doubled(x));
  CHECK(open_axes::logical(x.tensor()) == open_axes::logical(open_axes::sample()));  // the source untouched

  // NCHW32c data for a plain kernel of any layout is unblocked to its plain layout first.
  typed_tensor<cpu, float, nchw32c> blocked(y);
  Tensor z;
  run<open_axes::scale>(target<cpu>(), inputs(blocked), outputs(z));
  CHECK(plain_runs == plain_before + 1);
  CHECK(z.layout() == data_layout::nchw);
  CHECK(open_axes::logical(z) == open_axes::doubled(y));
}

TEST_CASE("the runtime path reads the library's attribute and moves data through its layout", "[open_axes]") {
  const operator_info& op = register_operator<open_axes::scale>();
  Variable x("x"), y("y");
  x.set(LoDTensor(open_axes::sample()));
  const std::vector<std::vector<Variable*>> in{{&x}}, out{{&y}};
  attribute_map attrs;
  attrs.set("use_fastlib", true);
  CHECK(expected_kernel_key(op, cpu_place, in, attrs) ==
        kernel_type<cpu, float, layout::nchw, fastlib>::key());
  const kernel_choice fast = run_operator(op, cpu_place, in, out, attrs);
  CHECK(fast.chosen == kernel_type<cpu, float, nchw32c, fastlib>::key());
  CHECK(open_axes::logical(y.get<LoDTensor>()) == open_axes::doubled(x.get<LoDTensor>()));
  CHECK(explain(op, cpu_place, in, attrs).find("NCHW32c") != std::string::npos);

  const kernel_choice plain = run_operator(op, cpu_place, in, out);
  CHECK(plain.chosen == kernel_type<cpu, float, layout::any, library::plain>::key());
  // A wrong kind for the library's attribute is an error naming the operator.
  attribute_map wrong;
  wrong.set("use_fastlib", std::string("yes"));
  CHECK_THROWS_WITH(run_operator(op, cpu_place, in, out, wrong), Catch::Contains("use_fastlib"));
}

TEST_CASE("program text asks for the library by its attribute; the executor runs it", "[open_axes]") {
  register_operator<open_axes::scale>();
  const ProgramDesc program = parse_program(R"(
block 0
  var x : LoDTensor float [1, 40, 2, 3]
  op open_axes_scale (X: x) -> (Out: y) {use_fastlib: bool true}
  op open_axes_scale (X: y) -> (Out: z)
)");
  Scope scope;
  const Tensor x = open_axes::sample();
  scope.var("x").set(LoDTensor(x));
  Executor executor(cpu_place);
  const int fast_before = open_axes::fast_runs, plain_before = open_axes::plain_runs;
  executor.run(program.block(0), scope);
  CHECK(open_axes::fast_runs == fast_before + 1);
  CHECK(open_axes::plain_runs == plain_before + 1);
  const Tensor& y = scope.get("y").get<LoDTensor>();
  const Tensor& z = scope.get("z").get<LoDTensor>();
  CHECK(y.layout() == data_layout_of<nchw32c>);
  CHECK(z.layout() == data_layout::nchw);
  CHECK(open_axes::logical(y) == open_axes::doubled(x));
  CHECK(open_axes::logical(z) == open_axes::doubled(y));
  CHECK(executor.stats().transforms == 2);  // NCHW -> NCHW32c, and back
  // A program asking with the wrong kind is refused when it is read.
  CHECK_THROWS_WITH(parse_program(R"(
block 0
  var x : LoDTensor float [1, 40, 2, 3]
  op open_axes_scale (X: x) -> (Out: y) {use_fastlib: string "yes"}
)"),
                    Catch::Contains("use_fastlib"));
}

TEST_CASE("a layout registered after an operator's table was built is found", "[open_axes]") {
  const operator_info& op = register_operator<open_axes::scale>();
  const kernel_key before = kernel_type<cpu, float, layout::nhwc>::key();
  CHECK(op.lookup(before, fallback_policy::none).index == 0);  // the table exists now
  // An id beyond the table, not registered yet, then registered: both find the any-layout kernel.
  const kernel_key late_key = kernel_type<cpu, float, late>::key();
  CHECK(op.lookup(late_key, fallback_policy::none).index == 0);
  CHECK(register_layout<late>());
  CHECK(op.lookup(late_key, fallback_policy::none).index == 0);
  CHECK(op.lookup(kernel_type<cpu, float, nchw32c, fastlib>::key(), fallback_policy::none).index == 1);
  CHECK(op.lookup(kernel_type<cpu, double, nchw32c, fastlib>::key(), fallback_policy::none).index ==
        selection_rules::none);
}
