// The example operators that control flow and the ONNX If / Loop mapping use (examples/ops):
// increment, the comparisons, the logical operators, write_to_array, read_from_array,
// tensor_array_to_tensor, cast, ceil, elementwise_sub and elementwise_div, slice, unsqueeze2, and
// the data types added to assign, fill_constant and elementwise_add. Each CPU kernel against
// values computed here element by element; their refusals (the operator named, the inputs and
// outputs untouched); the InferVarType of the array operators; and, where OpenCL is built, the
// OpenCL kernels (increment, the comparisons, elementwise_sub and elementwise_div, the views)
// against the CPU kernels on the same inputs, read back before each test ends.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <fluidk/program.hpp>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/scope.hpp>
#include <limits>
#include <ops/ops.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ops_test_support.hpp"

using namespace fluidk;

namespace {

const bool registered = (ops::register_all(), true);

std::mt19937& rng() {
  static std::mt19937 engine(20261129);
  return engine;
}

template <class T>
Tensor make(const dims& shape, const std::vector<T>& values) {
  Tensor t(shape, data_type_of<T>);
  REQUIRE(std::size_t(t.numel()) == values.size());
  for (std::size_t i = 0; i < values.size(); ++i) t.data<T>()[i] = values[i];
  return t;
}

template <class T>
Tensor random_tensor(const dims& shape, double lo = -4, double hi = 4) {
  Tensor t(shape, data_type_of<T>);
  fluidk_test::fill_uniform<T>(t, rng(), lo, hi);
  return t;
}

// The elements of a tensor, brought to the CPU, in row-major order.
template <class T>
std::vector<T> values_of(const Tensor& given) {
  const Tensor t = given.place().host_accessible() ? given : copy_to(given, cpu_place);
  std::vector<T> out;
  for (std::int64_t i = 0; i < t.numel(); ++i) out.push_back(t.data<T>()[i]);
  return out;
}
template <class T>
std::vector<T> values(Scope& scope, const std::string& name) {
  return values_of<T>(scope.get(name).get<LoDTensor>());
}
std::vector<std::int64_t> dims_of(Scope& scope, const std::string& name) {
  const dims d = scope.get(name).get<LoDTensor>().dims();
  return {d.begin(), d.end()};
}

using fluidk_test::slot_names;

kernel_choice run(Scope& scope, std::string_view type, const slot_names& in, const slot_names& out,
                  const attribute_map& attrs = {}, const place& where = cpu_place) {
  REQUIRE(registered);
  return fluidk_test::run_named(where, scope, type, in, out, attrs);
}

// Runs an operator that must fail, with `words` in its message, and checks that its first
// input and its output variable kept their versions.
void run_refused(Scope& scope, std::string_view type, const slot_names& in, const slot_names& out,
                 const attribute_map& attrs, const std::string& words) {
  const std::string input = in.front().second.front(), output = out.front().second.front();
  const std::uint64_t in_version = scope.var(input).version(), out_version = scope.var(output).version();
  CHECK_THROWS_WITH(run(scope, type, in, out, attrs),
                    Catch::Contains("operator '" + std::string(type) + "'") && Catch::Contains(words));
  CHECK(scope.var(input).version() == in_version);
  CHECK(scope.var(output).version() == out_version);
}

}  // namespace

TEMPLATE_TEST_CASE("increment adds step to its one element", "[ops][control]", float, double, std::int32_t,
                   std::int64_t) {
  using T = TestType;
  Scope scope;
  scope.var("x").set(LoDTensor(make<T>({1}, {T(41)})));
  run(scope, "increment", {{"X", {"x"}}}, {{"Out", {"y"}}});
  CHECK(values<T>(scope, "y") == std::vector<T>{T(42)});
  CHECK(dims_of(scope, "y") == std::vector<std::int64_t>{1});
  run(scope, "increment", {{"X", {"x"}}}, {{"Out", {"z"}}}, {{"step", -3.0f}});
  CHECK(values<T>(scope, "z") == std::vector<T>{T(38)});
  // In place, as a loop counter: Out is X.
  run(scope, "increment", {{"X", {"x"}}}, {{"Out", {"x"}}}, {{"step", 2.0f}});
  run(scope, "increment", {{"X", {"x"}}}, {{"Out", {"x"}}}, {{"step", 2.0f}});
  CHECK(values<T>(scope, "x") == std::vector<T>{T(45)});
  // A scalar (rank 0) counter keeps its rank.
  scope.var("s").set(LoDTensor(make<T>({}, {T(0)})));
  run(scope, "increment", {{"X", {"s"}}}, {{"Out", {"s1"}}});
  CHECK(dims_of(scope, "s1").empty());
  CHECK(values<T>(scope, "s1") == std::vector<T>{T(1)});
  scope.var("two").set(LoDTensor(make<T>({2}, {T(1), T(2)})));
  run_refused(scope, "increment", {{"X", {"two"}}}, {{"Out", {"bad"}}}, {}, "exactly one element");
}

TEST_CASE("increment: a fractional step, and an integer sum out of range", "[ops][control]") {
  Scope scope;
  scope.var("f").set(LoDTensor(make<float>({1}, {1.25f})));
  run(scope, "increment", {{"X", {"f"}}}, {{"Out", {"g"}}}, {{"step", 0.5f}});
  CHECK(values<float>(scope, "g") == std::vector<float>{1.75f});
  // An integer counter takes the step's whole part, as Fluid's static_cast.
  scope.var("i").set(LoDTensor(make<std::int64_t>({1}, {10})));
  run(scope, "increment", {{"X", {"i"}}}, {{"Out", {"j"}}}, {{"step", 2.75f}});
  CHECK(values<std::int64_t>(scope, "j") == std::vector<std::int64_t>{12});
  scope.var("top").set(LoDTensor(make<std::int32_t>({1}, {std::numeric_limits<std::int32_t>::max()})));
  scope.var("out").set(LoDTensor(make<std::int32_t>({1}, {7})));
  run_refused(scope, "increment", {{"X", {"top"}}}, {{"Out", {"out"}}}, {}, "beyond the range of int");
  CHECK(values<std::int32_t>(scope, "out") == std::vector<std::int32_t>{7});
}

namespace {
// Every comparison on X and Y (numpy broadcasting of a Y of one element or of the same dims),
// against the comparison computed here.
template <class T>
void check_comparisons(Scope& scope, const std::string& x, const std::string& y) {
  const std::vector<T> a = values<T>(scope, x), b = values<T>(scope, y);
  struct named {
    const char* op;
    bool (*f)(T, T);
  };
  const named all[] = {
      {"less_than", [](T p, T q) { return p < q; }},    {"less_equal", [](T p, T q) { return p <= q; }},
      {"greater_than", [](T p, T q) { return p > q; }}, {"greater_equal", [](T p, T q) { return p >= q; }},
      {"equal", [](T p, T q) { return p == q; }},       {"not_equal", [](T p, T q) { return p != q; }}};
  for (const named& c : all) {
    INFO(c.op << " " << x << " " << y);
    run(scope, c.op, {{"X", {x}}, {"Y", {y}}}, {{"Out", {"cmp"}}});
    const Tensor& out = scope.get("cmp").get<LoDTensor>();
    CHECK(out.dtype() == data_type::boolean);
    // Out has the dims of the operand of higher rank (here every operand of lower rank has one
    // element).
    const dims& dx = scope.get(x).get<LoDTensor>().dims();
    const dims& dy = scope.get(y).get<LoDTensor>().dims();
    CHECK(out.dims() == (dx.rank() >= dy.rank() ? dx : dy));
    std::vector<bool> expected;
    for (std::size_t i = 0; i < a.size(); ++i) expected.push_back(c.f(a[i], b.size() == 1 ? b[0] : b[i]));
    CHECK(values<bool>(scope, "cmp") == expected);
  }
}
}  // namespace

TEMPLATE_TEST_CASE("the comparisons: same shapes and a Y of one element", "[ops][control]", float, double,
                   std::int32_t, std::int64_t) {
  using T = TestType;
  Scope scope;
  // Small integers, so that equal values occur.
  Tensor a = random_tensor<T>({3, 4}), b = random_tensor<T>({3, 4});
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    a.data<T>()[i] = T(std::round(double(a.data<T>()[i])));
    b.data<T>()[i] = T(std::round(double(b.data<T>()[i])));
  }
  scope.var("a").set(LoDTensor(a));
  scope.var("b").set(LoDTensor(b));
  scope.var("one").set(LoDTensor(make<T>({1}, {T(1)})));
  scope.var("scalar").set(LoDTensor(make<T>({}, {T(-1)})));
  check_comparisons<T>(scope, "a", "b");
  check_comparisons<T>(scope, "a", "one");
  check_comparisons<T>(scope, "a", "scalar");
  check_comparisons<T>(scope, "scalar", "one");
}

TEST_CASE("the comparisons: broadcasting, and refusals", "[ops][control]") {
  Scope scope;
  scope.var("col").set(LoDTensor(make<float>({3, 1}, {1, 2, 3})));
  scope.var("row").set(LoDTensor(make<float>({2}, {2, 3})));
  run(scope, "less_than", {{"X", {"col"}}, {"Y", {"row"}}}, {{"Out", {"lt"}}});
  CHECK(dims_of(scope, "lt") == std::vector<std::int64_t>{3, 2});
  CHECK(values<bool>(scope, "lt") == std::vector<bool>{true, true, false, true, false, false});
  scope.var("ints").set(LoDTensor(make<std::int64_t>({2}, {2, 3})));
  CHECK_THROWS_WITH(run(scope, "less_than", {{"X", {"row"}}, {"Y", {"ints"}}}, {{"Out", {"mixed"}}}),
                    Catch::Contains("operator 'less_than'") && Catch::Contains("disagree"));
  scope.var("three").set(LoDTensor(make<float>({3}, {1, 2, 3})));
  run_refused(scope, "equal", {{"X", {"row"}}, {"Y", {"three"}}}, {{"Out", {"bad"}}}, {},
              "does not broadcast");
}

TEST_CASE("logical_and, logical_or, logical_xor and logical_not", "[ops][control]") {
  Scope scope;
  scope.var("p").set(LoDTensor(make<bool>({2, 2}, {true, true, false, false})));
  scope.var("q").set(LoDTensor(make<bool>({2, 2}, {true, false, true, false})));
  scope.var("t").set(LoDTensor(make<bool>({}, {true})));
  run(scope, "logical_and", {{"X", {"p"}}, {"Y", {"q"}}}, {{"Out", {"and"}}});
  run(scope, "logical_or", {{"X", {"p"}}, {"Y", {"q"}}}, {{"Out", {"or"}}});
  run(scope, "logical_xor", {{"X", {"p"}}, {"Y", {"q"}}}, {{"Out", {"xor"}}});
  run(scope, "logical_not", {{"X", {"q"}}}, {{"Out", {"not"}}});
  run(scope, "logical_and", {{"X", {"q"}}, {"Y", {"t"}}}, {{"Out", {"and_t"}}});
  CHECK(values<bool>(scope, "and") == std::vector<bool>{true, false, false, false});
  CHECK(values<bool>(scope, "or") == std::vector<bool>{true, true, true, false});
  CHECK(values<bool>(scope, "xor") == std::vector<bool>{false, true, true, false});
  CHECK(values<bool>(scope, "not") == std::vector<bool>{false, true, false, true});
  CHECK(values<bool>(scope, "and_t") == values<bool>(scope, "q"));
  run(scope, "logical_not", {{"X", {"t"}}}, {{"Out", {"f"}}});
  CHECK(dims_of(scope, "f").empty());
  CHECK(values<bool>(scope, "f") == std::vector<bool>{false});
  scope.var("floats").set(LoDTensor(make<float>({1}, {1})));
  CHECK_THROWS_WITH(run(scope, "logical_not", {{"X", {"floats"}}}, {{"Out", {"nf"}}}),
                    Catch::Contains("logical_not") && Catch::Contains("float"));
}

TEST_CASE("write_to_array grows the array, read_from_array reads an element back", "[ops][control]") {
  Scope scope;
  scope.var("x0").set(LoDTensor(make<float>({2}, {1, 2}), {{0, 1, 2}}));
  scope.var("x2").set(LoDTensor(make<float>({3}, {3, 4, 5})));
  scope.var("i0").set(LoDTensor(make<std::int64_t>({1}, {0})));
  scope.var("i1").set(LoDTensor(make<std::int64_t>({}, {1})));
  scope.var("i2").set(LoDTensor(make<std::int32_t>({1}, {2})));
  scope.var("i9").set(LoDTensor(make<std::int64_t>({1}, {9})));
  scope.var("minus").set(LoDTensor(make<std::int64_t>({1}, {-1})));
  run(scope, "write_to_array", {{"X", {"x2"}}, {"I", {"i2"}}}, {{"Out", {"array"}}});
  run(scope, "write_to_array", {{"X", {"x0"}}, {"I", {"i0"}}}, {{"Out", {"array"}}});
  const LoDTensorArray& array = scope.get("array").get<LoDTensorArray>();
  REQUIRE(array.size() == 3);
  CHECK(values_of<float>(array[0]) == std::vector<float>{1, 2});
  CHECK(array[0].lod() == lod{{0, 1, 2}});
  CHECK_FALSE(array[1].initialized());
  CHECK(values_of<float>(array[2]) == std::vector<float>{3, 4, 5});
  // Overwriting an element keeps the others.
  run(scope, "write_to_array", {{"X", {"x0"}}, {"I", {"i2"}}}, {{"Out", {"array"}}});
  CHECK(scope.get("array").get<LoDTensorArray>().size() == 3);
  CHECK(values_of<float>(scope.get("array").get<LoDTensorArray>()[2]) == std::vector<float>{1, 2});

  run(scope, "read_from_array", {{"X", {"array"}}, {"I", {"i0"}}}, {{"Out", {"r0"}}});
  CHECK(values<float>(scope, "r0") == std::vector<float>{1, 2});
  CHECK(scope.get("r0").get<LoDTensor>().lod() == lod{{0, 1, 2}});
  run_refused(scope, "read_from_array", {{"X", {"array"}}, {"I", {"i1"}}}, {{"Out", {"r1"}}}, {},
              "element 1 of the array is empty");
  run_refused(scope, "read_from_array", {{"X", {"array"}}, {"I", {"i9"}}}, {{"Out", {"r9"}}}, {},
              "past the array's 3 element(s)");
  run_refused(scope, "write_to_array", {{"X", {"x0"}}, {"I", {"minus"}}}, {{"Out", {"array"}}}, {},
              "not negative");
  CHECK(scope.get("array").get<LoDTensorArray>().size() == 3);
  run_refused(scope, "read_from_array", {{"X", {"x0"}}, {"I", {"i0"}}}, {{"Out", {"r2"}}}, {},
              "not a LoDTensorArray");
  // Out must be an array, or nothing yet.
  run_refused(scope, "write_to_array", {{"X", {"x0"}}, {"I", {"i0"}}}, {{"Out", {"x2"}}}, {},
              "output Out holds LoDTensor, not a LoDTensorArray");
}

TEMPLATE_TEST_CASE("write_to_array and read_from_array keep each data type", "[ops][control]", double,
                   std::int32_t, std::int64_t, bool) {
  using T = TestType;
  Scope scope;
  scope.var("x").set(LoDTensor(make<T>({2}, {T(1), T(0)})));
  scope.var("i").set(LoDTensor(make<std::int64_t>({1}, {1})));
  run(scope, "write_to_array", {{"X", {"x"}}, {"I", {"i"}}}, {{"Out", {"array"}}});
  run(scope, "read_from_array", {{"X", {"array"}}, {"I", {"i"}}}, {{"Out", {"y"}}});
  CHECK(scope.get("y").get<LoDTensor>().dtype() == data_type_of<T>);
  CHECK(values<T>(scope, "y") == std::vector<T>{T(1), T(0)});
}

TEST_CASE("the array operators' InferVarType", "[ops][control][program]") {
  REQUIRE(registered);
  ProgramDesc program;
  BlockDesc& block = program.block(0);
  block.var("x") = VarDesc{"x", var_kind::lod_tensor, data_type::int32, {2}};
  block.var("i") = VarDesc{"i", var_kind::lod_tensor, data_type::int64, {1}};
  block.append_op(OpDesc("write_to_array", {{"X", {"x"}}, {"I", {"i"}}}, {{"Out", {"array"}}}));
  CHECK(block.get_var("array").kind == var_kind::lod_tensor_array);
  CHECK(block.get_var("array").dtype == data_type::int32);
  block.append_op(OpDesc("read_from_array", {{"X", {"array"}}, {"I", {"i"}}}, {{"Out", {"back"}}}));
  CHECK(block.get_var("back").kind == var_kind::lod_tensor);
  CHECK(block.get_var("back").dtype == data_type::int32);
  block.append_op(OpDesc("tensor_array_to_tensor", {{"X", {"array"}}},
                         {{"Out", {"stacked"}}, {"OutIndex", {"idx"}}},
                         {{"axis", std::int32_t(0)}, {"use_stack", true}}));
  CHECK(block.get_var("stacked").kind == var_kind::lod_tensor);
  CHECK(block.get_var("stacked").dtype == data_type::int32);
  CHECK(block.get_var("idx").dtype == data_type::int32);
  block.append_op(
      OpDesc("cast", {{"X", {"x"}}}, {{"Out", {"as_bool"}}}, {{"out_dtype", std::string("bool")}}));
  CHECK(block.get_var("as_bool").dtype == data_type::boolean);
  CHECK_THROWS_WITH(block.append_op(OpDesc("cast", {{"X", {"x"}}}, {{"Out", {"bad"}}},
                                           {{"out_dtype", std::string("quad")}})),
                    Catch::Contains("operator 'cast' attribute 'out_dtype'") && Catch::Contains("quad"));
  CHECK_FALSE(block.has_var("bad"));
  // A variable that an array operator made an array stays one.
  CHECK_THROWS_WITH(block.append_op(OpDesc("relu", {{"X", {"x"}}}, {{"Out", {"array"}}})),
                    Catch::Contains("array"));
}

TEST_CASE("tensor_array_to_tensor stacks or concatenates the elements", "[ops][control]") {
  Scope scope;
  LoDTensorArray array;
  array.emplace_back(make<float>({2, 3}, {0, 1, 2, 3, 4, 5}));
  array.emplace_back(make<float>({2, 3}, {10, 11, 12, 13, 14, 15}));
  scope.var("array").set(std::move(array));
  // Stacked along a new axis 0: [2 elements, 2, 3], the elements one after the other.
  run(scope, "tensor_array_to_tensor", {{"X", {"array"}}}, {{"Out", {"s0"}}, {"OutIndex", {"idx"}}},
      {{"axis", std::int32_t(0)}, {"use_stack", true}});
  CHECK(dims_of(scope, "s0") == std::vector<std::int64_t>{2, 2, 3});
  CHECK(values<float>(scope, "s0") == std::vector<float>{0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15});
  CHECK(values<std::int32_t>(scope, "idx") == std::vector<std::int32_t>{1, 1});
  // Stacked along axis 1 (and -2): [2, 2 elements, 3], the rows interleaved.
  for (const std::int32_t axis : {1, -2}) {
    run(scope, "tensor_array_to_tensor", {{"X", {"array"}}}, {{"Out", {"s1"}}},
        {{"axis", axis}, {"use_stack", true}});
    CHECK(dims_of(scope, "s1") == std::vector<std::int64_t>{2, 2, 3});
    CHECK(values<float>(scope, "s1") == std::vector<float>{0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15});
  }
  // Concatenated along axis 1: [2, 6].
  run(scope, "tensor_array_to_tensor", {{"X", {"array"}}}, {{"Out", {"c1"}}, {"OutIndex", {"cidx"}}},
      {{"axis", std::int32_t(1)}});
  CHECK(dims_of(scope, "c1") == std::vector<std::int64_t>{2, 6});
  CHECK(values<float>(scope, "c1") == std::vector<float>{0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15});
  CHECK(values<std::int32_t>(scope, "cidx") == std::vector<std::int32_t>{3, 3});
  // Elements of different extents along the axis concatenate; stacked they are refused.
  LoDTensorArray uneven;
  uneven.emplace_back(make<std::int64_t>({1, 2}, {1, 2}));
  uneven.emplace_back(make<std::int64_t>({2, 2}, {3, 4, 5, 6}));
  scope.var("uneven").set(std::move(uneven));
  run(scope, "tensor_array_to_tensor", {{"X", {"uneven"}}}, {{"Out", {"c0"}}, {"OutIndex", {"c0idx"}}},
      {{"axis", std::int32_t(0)}});
  CHECK(dims_of(scope, "c0") == std::vector<std::int64_t>{3, 2});
  CHECK(values<std::int64_t>(scope, "c0") == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});
  CHECK(values<std::int32_t>(scope, "c0idx") == std::vector<std::int32_t>{1, 2});
  run_refused(scope, "tensor_array_to_tensor", {{"X", {"uneven"}}}, {{"Out", {"bad"}}}, {{"use_stack", true}},
              "stacked elements share one shape");
  run_refused(scope, "tensor_array_to_tensor", {{"X", {"array"}}}, {{"Out", {"bad"}}},
              {{"axis", std::int32_t(3)}, {"use_stack", true}}, "axis 3 is outside [-3, 2]");
  scope.var("empty").set(LoDTensorArray());
  CHECK_THROWS_WITH(run(scope, "tensor_array_to_tensor", {{"X", {"empty"}}}, {{"Out", {"bad"}}}),
                    Catch::Contains("tensor_array_to_tensor"));
  // Scalars stack into a vector (an ONNX Loop's scan output of scalars).
  LoDTensorArray scalars;
  for (const bool b : {true, false, true}) scalars.emplace_back(make<bool>({}, {b}));
  scope.var("scalars").set(std::move(scalars));
  run(scope, "tensor_array_to_tensor", {{"X", {"scalars"}}}, {{"Out", {"v"}}}, {{"use_stack", true}});
  CHECK(dims_of(scope, "v") == std::vector<std::int64_t>{3});
  CHECK(values<bool>(scope, "v") == std::vector<bool>{true, false, true});
}

TEST_CASE("cast converts between float, double, int32, int64 and bool", "[ops][control]") {
  Scope scope;
  const std::vector<float> f{-2.7f, -0.5f, 0.0f, 0.5f, 2.7f, 1e6f};
  scope.var("f").set(LoDTensor(make<float>({2, 3}, f), {{0, 1, 2}}));
  run(scope, "cast", {{"X", {"f"}}}, {{"Out", {"i"}}}, {{"out_dtype", std::string("int32")}});
  CHECK(dims_of(scope, "i") == std::vector<std::int64_t>{2, 3});
  CHECK(scope.get("i").get<LoDTensor>().lod() == lod{{0, 1, 2}});
  CHECK(values<std::int32_t>(scope, "i") == std::vector<std::int32_t>{-2, 0, 0, 0, 2, 1000000});
  run(scope, "cast", {{"X", {"f"}}}, {{"Out", {"b"}}}, {{"out_dtype", std::string("bool")}});
  CHECK(values<bool>(scope, "b") == std::vector<bool>{true, true, false, true, true, true});
  run(scope, "cast", {{"X", {"f"}}}, {{"Out", {"d"}}}, {{"out_dtype", std::string("float64")}});
  std::vector<double> widened(f.begin(), f.end());
  CHECK(values<double>(scope, "d") == widened);
  run(scope, "cast", {{"X", {"b"}}}, {{"Out", {"bi"}}}, {{"out_dtype", std::string("int64")}});
  CHECK(values<std::int64_t>(scope, "bi") == std::vector<std::int64_t>{1, 1, 0, 1, 1, 1});
  // An int64 narrowed to int32 keeps its low bits.
  scope.var("big").set(LoDTensor(make<std::int64_t>({2}, {(std::int64_t(1) << 32) + 5, -1})));
  run(scope, "cast", {{"X", {"big"}}}, {{"Out", {"low"}}}, {{"out_dtype", std::string("int32")}});
  CHECK(values<std::int32_t>(scope, "low") == std::vector<std::int32_t>{5, -1});
  run(scope, "cast", {{"X", {"big"}}}, {{"Out", {"bf"}}}, {{"out_dtype", std::string("float32")}});
  CHECK(values<float>(scope, "bf") == std::vector<float>{float((std::int64_t(1) << 32) + 5), -1.0f});
  // Same type: a copy of the values.
  run(scope, "cast", {{"X", {"f"}}}, {{"Out", {"same"}}}, {{"out_dtype", std::string("float32")}});
  CHECK(values<float>(scope, "same") == f);
  // A float out of the integer type's range, or NaN: refused.
  scope.var("huge").set(LoDTensor(make<float>({1}, {3e9f})));
  run_refused(scope, "cast", {{"X", {"huge"}}}, {{"Out", {"bad"}}}, {{"out_dtype", std::string("int32")}},
              "out of the range of int");
  scope.var("nan").set(LoDTensor(make<double>({1}, {std::nan("")})));
  run_refused(scope, "cast", {{"X", {"nan"}}}, {{"Out", {"bad"}}}, {{"out_dtype", std::string("int64")}},
              "out of the range of int64_t");
  run_refused(scope, "cast", {{"X", {"f"}}}, {{"Out", {"bad"}}}, {{"out_dtype", std::string("float16")}},
              "cast converts to float32, float64, int32, int64 and bool");
  run_refused(scope, "cast", {{"X", {"f"}}}, {{"Out", {"bad"}}}, {}, "needs attribute 'out_dtype'");
}

TEST_CASE("ceil", "[ops][control]") {
  Scope scope;
  const std::vector<double> x{-2.5, -0.0, 0.1, 2.0, 1e300};
  scope.var("x").set(LoDTensor(make<double>({5}, x)));
  run(scope, "ceil", {{"X", {"x"}}}, {{"Out", {"y"}}});
  CHECK(values<double>(scope, "y") == std::vector<double>{-2.0, 0.0, 1.0, 2.0, 1e300});
  scope.var("s").set(LoDTensor(make<float>({}, {1.5f})));
  run(scope, "ceil", {{"X", {"s"}}}, {{"Out", {"t"}}});
  CHECK(dims_of(scope, "t").empty());
  CHECK(values<float>(scope, "t") == std::vector<float>{2.0f});
}

TEMPLATE_TEST_CASE("elementwise_sub, elementwise_div and elementwise_add with broadcasting", "[ops][control]",
                   float, double, std::int32_t, std::int64_t) {
  using T = TestType;
  Scope scope;
  scope.var("x").set(LoDTensor(make<T>({2, 3}, {T(7), T(-7), T(9), T(1), T(0), T(-8)})));
  scope.var("y").set(LoDTensor(make<T>({3}, {T(2), T(2), T(-4)})));
  run(scope, "elementwise_sub", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"sub"}}});
  run(scope, "elementwise_div", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"div"}}});
  run(scope, "elementwise_add", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"add"}}});
  const std::vector<T> x = values<T>(scope, "x"), y = values<T>(scope, "y");
  std::vector<T> sub, div, add;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sub.push_back(T(x[i] - y[i % 3]));
    div.push_back(T(x[i] / y[i % 3]));  // integers: towards zero (-7 / 2 = -3)
    add.push_back(T(x[i] + y[i % 3]));
  }
  CHECK(values<T>(scope, "sub") == sub);
  CHECK(values<T>(scope, "div") == div);
  CHECK(values<T>(scope, "add") == add);
  // Scalars, as ONNX's Range body subtracts them.
  scope.var("a").set(LoDTensor(make<T>({}, {T(10)})));
  scope.var("b").set(LoDTensor(make<T>({}, {T(4)})));
  run(scope, "elementwise_sub", {{"X", {"a"}}, {"Y", {"b"}}}, {{"Out", {"ab"}}});
  CHECK(dims_of(scope, "ab").empty());
  CHECK(values<T>(scope, "ab") == std::vector<T>{T(6)});
}

TEST_CASE("elementwise_div: an integer zero divisor is refused, a float one gives infinity",
          "[ops][control]") {
  Scope scope;
  scope.var("x").set(LoDTensor(make<std::int64_t>({2}, {1, 2})));
  scope.var("zero").set(LoDTensor(make<std::int64_t>({2}, {1, 0})));
  run_refused(scope, "elementwise_div", {{"X", {"x"}}, {"Y", {"zero"}}}, {{"Out", {"bad"}}}, {},
              "division by zero");
  scope.var("min").set(LoDTensor(make<std::int32_t>({1}, {std::numeric_limits<std::int32_t>::min()})));
  scope.var("minus_one").set(LoDTensor(make<std::int32_t>({1}, {-1})));
  run(scope, "elementwise_div", {{"X", {"min"}}, {"Y", {"minus_one"}}}, {{"Out", {"wrapped"}}});
  CHECK(values<std::int32_t>(scope, "wrapped") ==
        std::vector<std::int32_t>{std::numeric_limits<std::int32_t>::min()});
  scope.var("f").set(LoDTensor(make<float>({1}, {1})));
  scope.var("fz").set(LoDTensor(make<float>({1}, {0})));
  run(scope, "elementwise_div", {{"X", {"f"}}, {"Y", {"fz"}}}, {{"Out", {"inf"}}});
  CHECK(std::isinf(values<float>(scope, "inf")[0]));
}

TEMPLATE_TEST_CASE("slice with attribute bounds, negative and clamped, and with bound tensors",
                   "[ops][control]", float, std::int64_t, bool) {
  using T = TestType;
  Scope scope;
  // x[i][j] = (3 * i + j) % 5, [4, 3]
  std::vector<T> x;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) x.push_back(T((3 * i + j) % 5));
  scope.var("x").set(LoDTensor(make<T>({4, 3}, x)));
  auto expect = [&](std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
    std::vector<T> out;
    for (std::int64_t i = r0; i < r1; ++i)
      for (std::int64_t j = c0; j < c1; ++j) out.push_back(x[std::size_t(i * 3 + j)]);
    return out;
  };
  run(scope, "slice", {{"Input", {"x"}}}, {{"Out", {"a"}}},
      {{"axes", std::vector<std::int32_t>{0, 1}},
       {"starts", std::vector<std::int32_t>{1, -2}},
       {"ends", std::vector<std::int32_t>{3, 100}}});
  CHECK(dims_of(scope, "a") == std::vector<std::int64_t>{2, 2});
  CHECK(values<T>(scope, "a") == expect(1, 3, 1, 3));
  // Only axis 1, from -100 (clamped to 0) to -1.
  run(scope, "slice", {{"Input", {"x"}}}, {{"Out", {"b"}}},
      {{"axes", std::vector<std::int64_t>{1}},
       {"starts", std::vector<std::int64_t>{-100}},
       {"ends", std::vector<std::int64_t>{-1}}});
  CHECK(dims_of(scope, "b") == std::vector<std::int64_t>{4, 2});
  CHECK(values<T>(scope, "b") == expect(0, 4, 0, 2));
  // An end before the start: an empty dimension.
  run(scope, "slice", {{"Input", {"x"}}}, {{"Out", {"e"}}},
      {{"axes", std::vector<std::int32_t>{0}},
       {"starts", std::vector<std::int32_t>{3}},
       {"ends", std::vector<std::int32_t>{1}}});
  CHECK(dims_of(scope, "e") == std::vector<std::int64_t>{0, 3});
  // Bounds from tensors override the attributes (an ONNX Loop's counter).
  scope.var("st").set(LoDTensor(make<std::int64_t>({1}, {2})));
  scope.var("en").set(LoDTensor(make<std::int32_t>({1}, {3})));
  run(scope, "slice", {{"Input", {"x"}}, {"StartsTensor", {"st"}}, {"EndsTensor", {"en"}}}, {{"Out", {"t"}}},
      {{"axes", std::vector<std::int32_t>{0}},
       {"starts", std::vector<std::int32_t>{0}},
       {"ends", std::vector<std::int32_t>{1}}});
  CHECK(dims_of(scope, "t") == std::vector<std::int64_t>{1, 3});
  CHECK(values<T>(scope, "t") == expect(2, 3, 0, 3));
  run_refused(scope, "slice", {{"Input", {"x"}}}, {{"Out", {"bad"}}},
              {{"axes", std::vector<std::int32_t>{2}},
               {"starts", std::vector<std::int32_t>{0}},
               {"ends", std::vector<std::int32_t>{1}}},
              "axis 2 is outside [-2, 1]");
  run_refused(scope, "slice", {{"Input", {"x"}}}, {{"Out", {"bad"}}},
              {{"axes", std::vector<std::int32_t>{0, 1}},
               {"starts", std::vector<std::int32_t>{0}},
               {"ends", std::vector<std::int32_t>{1, 1}}},
              "2 axes need as many starts and ends");
  // Fluid's decrease_axis, as x[2] and x[1, 2] write it: the dims of extent 1 dropped, [1]
  // where none is left.
  run(scope, "slice", {{"Input", {"x"}}}, {{"Out", {"row"}}},
      {{"axes", std::vector<std::int32_t>{0}},
       {"starts", std::vector<std::int32_t>{2}},
       {"ends", std::vector<std::int32_t>{3}},
       {"decrease_axis", std::vector<std::int32_t>{0}}});
  CHECK(dims_of(scope, "row") == std::vector<std::int64_t>{3});
  CHECK(values<T>(scope, "row") == expect(2, 3, 0, 3));
  run(scope, "slice", {{"Input", {"x"}}}, {{"Out", {"one"}}},
      {{"axes", std::vector<std::int32_t>{0, 1}},
       {"starts", std::vector<std::int32_t>{1, 2}},
       {"ends", std::vector<std::int32_t>{2, 3}},
       {"decrease_axis", std::vector<std::int32_t>{0, -1}}});
  CHECK(dims_of(scope, "one") == std::vector<std::int64_t>{1});
  CHECK(values<T>(scope, "one") == expect(1, 2, 2, 3));
  run(scope, "slice", {{"Input", {"x"}}}, {{"Out", {"kept"}}},
      {{"axes", std::vector<std::int32_t>{1}},
       {"starts", std::vector<std::int32_t>{0}},
       {"ends", std::vector<std::int32_t>{2}},
       {"decrease_axis", std::vector<std::int32_t>{}}});
  CHECK(dims_of(scope, "kept") == std::vector<std::int64_t>{4, 2});
  run_refused(scope, "slice", {{"Input", {"x"}}}, {{"Out", {"bad"}}},
              {{"axes", std::vector<std::int32_t>{0}},
               {"starts", std::vector<std::int32_t>{0}},
               {"ends", std::vector<std::int32_t>{2}},
               {"decrease_axis", std::vector<std::int32_t>{0}}},
              "decrease_axis drops axis 0, whose extent in the slice is 2, not 1");
  run_refused(scope, "slice", {{"Input", {"x"}}}, {{"Out", {"bad"}}},
              {{"axes", std::vector<std::int32_t>{0}},
               {"starts", std::vector<std::int32_t>{0}},
               {"ends", std::vector<std::int32_t>{1}},
               {"decrease_axis", std::vector<std::int32_t>{0, 0}}},
              "decrease_axis names axis 0 twice");
}

TEST_CASE("unsqueeze2 inserts dimensions of extent 1 at Out's axes", "[ops][control]") {
  Scope scope;
  scope.var("s").set(LoDTensor(make<std::int64_t>({}, {4})));
  run(scope, "unsqueeze2", {{"X", {"s"}}}, {{"Out", {"v"}}, {"XShape", {"xs"}}},
      {{"axes", std::vector<std::int32_t>{0}}});
  CHECK(dims_of(scope, "v") == std::vector<std::int64_t>{1});
  CHECK(values<std::int64_t>(scope, "v") == std::vector<std::int64_t>{4});
  CHECK(dims_of(scope, "xs") == std::vector<std::int64_t>{0});
  const std::vector<float> data{1, 2, 3, 4, 5, 6};
  scope.var("m").set(LoDTensor(make<float>({2, 3}, data)));
  run(scope, "unsqueeze2", {{"X", {"m"}}}, {{"Out", {"u"}}}, {{"axes", std::vector<std::int64_t>{-1, 0}}});
  CHECK(dims_of(scope, "u") == std::vector<std::int64_t>{1, 2, 3, 1});
  CHECK(values<float>(scope, "u") == data);
  run(scope, "unsqueeze2", {{"X", {"m"}}}, {{"Out", {"w"}}}, {{"axes", std::vector<std::int32_t>{1}}});
  CHECK(dims_of(scope, "w") == std::vector<std::int64_t>{2, 1, 3});
  run_refused(scope, "unsqueeze2", {{"X", {"m"}}}, {{"Out", {"bad"}}},
              {{"axes", std::vector<std::int32_t>{0, -4}}}, "named twice");
  run_refused(scope, "unsqueeze2", {{"X", {"m"}}}, {{"Out", {"bad"}}},
              {{"axes", std::vector<std::int32_t>{3}}}, "outside [-3, 2]");
}

TEST_CASE("assign and fill_constant of bool", "[ops][control]") {
  Scope scope;
  run(scope, "fill_constant", {}, {{"Out", {"t"}}},
      {{"shape", std::vector<std::int64_t>{}}, {"dtype", std::string("bool")}, {"value", 1.0f}});
  CHECK(scope.get("t").get<LoDTensor>().dtype() == data_type::boolean);
  CHECK(values<bool>(scope, "t") == std::vector<bool>{true});
  run(scope, "fill_constant", {}, {{"Out", {"f"}}},
      {{"shape", std::vector<std::int64_t>{2}}, {"dtype", std::string("bool")}, {"value", false}});
  CHECK(values<bool>(scope, "f") == std::vector<bool>{false, false});
  run(scope, "assign", {{"X", {"f"}}}, {{"Out", {"g"}}});
  CHECK(values<bool>(scope, "g") == std::vector<bool>{false, false});
}

TEST_CASE("assign of a SelectedRows and of a LoDTensorArray: Out of X's kind, a view of its values",
          "[ops][control][regression]") {
  // As Fluid's assign; Out was declared a LoDTensor and the kernel refused X at run time.
  Scope scope;
  const Tensor value = make<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  scope.var("rows").set(SelectedRows({4, 1}, 6, value));
  LoDTensorArray array(3);
  array[0] = LoDTensor(make<float>({2}, {0.5f, -1}), {{0, 1, 2}});
  array[2] = LoDTensor(make<float>({1}, {7}));
  scope.var("array").set(array);
  run(scope, "assign", {{"X", {"rows"}}}, {{"Out", {"rows_copy"}}});
  const SelectedRows& copy = scope.get("rows_copy").get<SelectedRows>();
  CHECK(copy.rows() == std::vector<std::int64_t>{4, 1});
  CHECK(copy.height() == 6);
  CHECK(copy.value().storage_id() == value.storage_id());
  CHECK(values_of<double>(copy.value()) == std::vector<double>{1, 2, 3, 4, 5, 6});
  run(scope, "assign", {{"X", {"array"}}}, {{"Out", {"array_copy"}}});
  const LoDTensorArray& elements = scope.get("array_copy").get<LoDTensorArray>();
  REQUIRE(elements.size() == 3);
  CHECK(values_of<float>(elements[0]) == std::vector<float>{0.5f, -1});
  CHECK(elements[0].lod() == lod{{0, 1, 2}});
  CHECK(!elements[1].initialized());
  CHECK(values_of<float>(elements[2]) == std::vector<float>{7});
  // The inputs are as they were.
  CHECK(scope.get("rows").get<SelectedRows>().rows() == std::vector<std::int64_t>{4, 1});
  CHECK(scope.get("array").get<LoDTensorArray>().size() == 3);

  // In a program, Out takes X's kind and data type.
  ProgramDesc program;
  BlockDesc& block = program.global_block();
  VarDesc& rows = block.var("rows");
  rows.kind = var_kind::selected_rows;
  rows.dtype = data_type::float64;
  block.var("array").kind = var_kind::lod_tensor_array;
  block.append_op(OpDesc("assign").set_input("X", {"rows"}).set_output("Out", {"rows_copy"}));
  block.append_op(OpDesc("assign").set_input("X", {"array"}).set_output("Out", {"array_copy"}));
  CHECK(block.get_var("rows_copy").kind == var_kind::selected_rows);
  CHECK(block.get_var("rows_copy").dtype == data_type::float64);
  CHECK(block.get_var("array_copy").kind == var_kind::lod_tensor_array);
}

#if FLUIDK_OPS_OPENCL
namespace {
const place device = place::of<opencl>(0);

// Runs the operator on the OpenCL device (outputs "<out>_dev") and on the CPU ("<out>_cpu");
// the device kernel must be the one chosen, its output on the device, and both outputs equal
// (read back here, so nothing is left queued when the test ends).
template <class R>
void check_on_device(Scope& scope, std::string_view type, const slot_names& in, const std::string& out,
                     const attribute_map& attrs = {}) {
  INFO(type);
  const kernel_choice on_device = run(scope, type, in, {{"Out", {out + "_dev"}}}, attrs, device);
  CHECK_FALSE(on_device.fell_back);
  CHECK(on_device.chosen.place() == device);
  CHECK(scope.get(out + "_dev").get<LoDTensor>().place() == device);
  run(scope, type, in, {{"Out", {out + "_cpu"}}}, attrs);
  CHECK(scope.get(out + "_dev").get<LoDTensor>().dims() == scope.get(out + "_cpu").get<LoDTensor>().dims());
  CHECK(values<R>(scope, out + "_dev") == values<R>(scope, out + "_cpu"));
}
}  // namespace

TEMPLATE_TEST_CASE("OpenCL: an integer increment beyond its type's range is an error, as on the CPU",
                   "[ops][control][opencl][regression]", std::int32_t, std::int64_t) {
  // The device kernel added with no check (signed overflow, undefined in OpenCL C): -2^31.
  using T = TestType;
  Scope scope;
  for (const auto& [start, step] : {std::pair{std::numeric_limits<T>::max(), 1.0f},
                                    std::pair{std::numeric_limits<T>::min() + 1, -2.0f}}) {
    scope.var("edge").set(LoDTensor(make<T>({1}, {start})));
    const std::string words =
        std::to_string(start) + " + step " + std::to_string(T(step)) + " is beyond the range of";
    for (const place& where : {device, cpu_place})
      CHECK_THROWS_WITH(
          run(scope, "increment", {{"X", {"edge"}}}, {{"Out", {"after"}}}, {{"step", step}}, where),
          Catch::Contains("operator 'increment'") && Catch::Contains(words));
    CHECK(values<T>(scope, "edge") == std::vector<T>{start});
    CHECK(!scope.var("after").initialized());
  }
  // Within the range: the sum.
  scope.var("edge").set(LoDTensor(make<T>({1}, {std::numeric_limits<T>::max() - 1})));
  run(scope, "increment", {{"X", {"edge"}}}, {{"Out", {"after"}}}, {}, device);
  CHECK(values<T>(scope, "after") == std::vector<T>{std::numeric_limits<T>::max()});
}

TEMPLATE_TEST_CASE("OpenCL: increment and the comparisons equal the CPU kernels", "[ops][control][opencl]",
                   float, std::int64_t) {
  using T = TestType;
  Scope scope;
  scope.var("counter").set(LoDTensor(make<T>({1}, {T(5)})));
  check_on_device<T>(scope, "increment", {{"X", {"counter"}}}, "inc");
  check_on_device<T>(scope, "increment", {{"X", {"counter"}}}, "dec", {{"step", -2.0f}});
  CHECK(values<T>(scope, "dec_dev") == std::vector<T>{T(3)});
  Tensor a = random_tensor<T>({4, 5}), b = random_tensor<T>({4, 5});
  for (std::int64_t i = 0; i < a.numel(); i += 3) b.data<T>()[i] = a.data<T>()[i];  // some equal pairs
  scope.var("a").set(LoDTensor(a));
  scope.var("b").set(LoDTensor(b));
  scope.var("col").set(LoDTensor(random_tensor<T>({4, 1})));
  scope.var("limit").set(LoDTensor(make<T>({}, {T(1)})));
  for (const char* op : {"less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal"}) {
    check_on_device<bool>(scope, op, {{"X", {"a"}}, {"Y", {"b"}}}, std::string(op) + "_same");
    check_on_device<bool>(scope, op, {{"X", {"a"}}, {"Y", {"col"}}}, std::string(op) + "_col");
    check_on_device<bool>(scope, op, {{"X", {"counter"}}, {"Y", {"limit"}}}, std::string(op) + "_scalar");
  }
}

TEST_CASE("OpenCL: elementwise_sub, elementwise_div and the views equal the CPU kernels",
          "[ops][control][opencl]") {
  Scope scope;
  scope.var("x").set(LoDTensor(random_tensor<float>({3, 4, 5})));
  scope.var("y").set(LoDTensor(random_tensor<float>({4, 1}, 0.5, 2)));
  check_on_device<float>(scope, "elementwise_sub", {{"X", {"x"}}, {"Y", {"y"}}}, "sub");
  check_on_device<float>(scope, "elementwise_div", {{"X", {"x"}}, {"Y", {"y"}}}, "div");
  check_on_device<float>(scope, "elementwise_add", {{"X", {"x"}}, {"Y", {"y"}}}, "add");
  scope.var("i").set(LoDTensor(make<std::int64_t>({}, {3})));
  check_on_device<std::int64_t>(scope, "unsqueeze2", {{"X", {"i"}}}, "unsq",
                                {{"axes", std::vector<std::int32_t>{0}}});
  check_on_device<std::int64_t>(scope, "assign", {{"X", {"i"}}}, "copy");
  scope.var("flag").set(LoDTensor(make<bool>({2}, {true, false})));
  check_on_device<bool>(scope, "assign", {{"X", {"flag"}}}, "flag_copy");
}
#endif
