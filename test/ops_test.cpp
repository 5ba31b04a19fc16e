// The example operator library (examples/ops): every kernel checked on random inputs, the
// plain CPU kernels against straightforward references written here (a direct convolution,
// a naive matrix product, a softmax and cross entropy in long double, a brute-force CRF over
// all tag paths), each oneDNN kernel against the plain kernel of its operator; the runtime
// path (run_operator, the executor over a ProgramDesc) and the static path (fluidk::run).
//
// Tolerances, per data type of the kernel:
//   float:  1e-4 relative (floor 1e-4 absolute) for GEMM-based results (conv2d, mul, fc) and
//           oneDNN against plain; 1e-5 for softmax and cross entropy.
//   double: 1e-10 relative (floor 1e-10) for GEMM-based results; 1e-12 for softmax.
//   exact:  relu, elementwise_add (one rounding, same in both), lookup_table, crf paths.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <fluidk/devices/onednn_tags.hpp>
#include <fluidk/executor.hpp>
#include <fluidk/program.hpp>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/scope.hpp>
#include <fluidk/static_dispatch.hpp>
#include <fluidk/transforms/cpu.hpp>
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
  static std::mt19937 engine(20240611);
  return engine;
}

template <class T>
Tensor random_tensor(const dims& shape, double lo = -1, double hi = 1,
                     data_layout layout = data_layout::any) {
  Tensor t(shape, data_type_of<T>, cpu_place,
           layout == data_layout::any ? data_layout::any : data_layout::nchw);
  fluidk_test::fill_uniform<T>(t, rng(), lo, hi);
  if (layout == data_layout::any || layout == data_layout::nchw) return t;
  return transform(t, kernel_key{cpu_place, data_type_of<T>, layout, library_type::plain});
}

Tensor ids_tensor(const std::vector<std::int64_t>& ids) {
  Tensor t({std::int64_t(ids.size()), 1}, data_type::int64);
  std::copy(ids.begin(), ids.end(), t.data<std::int64_t>());
  return t;
}

// The elements in logical row-major order, whatever the layout.
template <class T>
std::vector<T> values(const Tensor& t) {
  const Tensor plain =
      t.layout() == data_layout::any || t.layout() == data_layout::nchw ||
              t.layout() == data_layout_of<layout::nc>
          ? t
          : transform(t, kernel_key{cpu_place, t.dtype(), data_layout::nchw, library_type::plain});
  return std::vector<T>(plain.data<T>(), plain.data<T>() + plain.numel());
}
template <class T>
std::vector<T> values(const Variable& v) {
  return values<T>(v.get<LoDTensor>());
}

template <class T>
double tolerance() {
  return std::is_same_v<T, float> ? 1e-4 : 1e-10;
}

using fluidk_test::check_close;
using fluidk_test::slot_names;

// Runs an operator once through the runtime path on variables of the scope, by name.
kernel_choice run_rt(Scope& scope, std::string_view type, const slot_names& in, const slot_names& out,
                     const attribute_map& attrs = {}, const place& where = cpu_place) {
  REQUIRE(registered);
  return fluidk_test::run_named(where, scope, type, in, out, attrs);
}

// --- references -----------------------------------------------------------------------------

struct conv_case {
  dims input, filter;
  std::vector<std::int32_t> strides, paddings, dilations;
  std::int32_t groups;
};

// A direct convolution, accumulated in long double.
template <class T>
std::vector<long double> naive_conv(const Tensor& x, const Tensor& w, const conv_case& c) {
  const auto& xd = x.dims();
  const auto& wd = w.dims();
  const std::int64_t n = xd[0], ch = xd[1], h = xd[2], wi = xd[3], oc = wd[0], cg = wd[1], kh = wd[2],
                     kw = wd[3];
  // paddings: 2 (both sides alike) or 4 (top, bottom, left, right), as Fluid's attribute.
  const bool four = c.paddings.size() == 4;
  const std::int64_t top = c.paddings[0], bottom = four ? c.paddings[1] : top;
  const std::int64_t left = four ? c.paddings[2] : c.paddings[1], right = four ? c.paddings[3] : left;
  const std::int64_t oh = (h + top + bottom - (c.dilations[0] * (kh - 1) + 1)) / c.strides[0] + 1;
  const std::int64_t ow = (wi + left + right - (c.dilations[1] * (kw - 1) + 1)) / c.strides[1] + 1;
  const std::int64_t ocg = oc / c.groups;
  const std::vector<T> xv = values<T>(x), wv = values<T>(w);
  std::vector<long double> out(std::size_t(n * oc * oh * ow), 0);
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t o = 0; o < oc; ++o) {
      const std::int64_t g = o / ocg;
      for (std::int64_t y = 0; y < oh; ++y)
        for (std::int64_t z = 0; z < ow; ++z) {
          long double acc = 0;
          for (std::int64_t ci = 0; ci < cg; ++ci)
            for (std::int64_t i = 0; i < kh; ++i)
              for (std::int64_t j = 0; j < kw; ++j) {
                const std::int64_t iy = y * c.strides[0] - top + i * c.dilations[0];
                const std::int64_t ix = z * c.strides[1] - left + j * c.dilations[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= wi) continue;
                acc += (long double)xv[std::size_t(((b * ch + g * cg + ci) * h + iy) * wi + ix)] *
                       wv[std::size_t(((o * cg + ci) * kh + i) * kw + j)];
              }
          out[std::size_t(((b * oc + o) * oh + y) * ow + z)] = acc;
        }
    }
  return out;
}

// A naive matrix product of row-major [m, k] x [k, n], in long double.
template <class T>
std::vector<long double> naive_matmul(const std::vector<T>& a, const std::vector<T>& b, std::int64_t m,
                                      std::int64_t k, std::int64_t n) {
  std::vector<long double> c(std::size_t(m * n), 0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      long double acc = 0;
      for (std::int64_t p = 0; p < k; ++p)
        acc += (long double)a[std::size_t(i * k + p)] * b[std::size_t(p * n + j)];
      c[std::size_t(i * n + j)] = acc;
    }
  return c;
}

attribute_map conv_attrs(const conv_case& c) {
  return {{"strides", c.strides}, {"paddings", c.paddings}, {"dilations", c.dilations}, {"groups", c.groups}};
}

const std::vector<conv_case> conv_cases{
    {{2, 3, 7, 6}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1},
    {{1, 5, 9, 8}, {10, 5, 3, 2}, {2, 1}, {1, 2}, {1, 1}, 1},
    {{2, 4, 8, 8}, {6, 2, 3, 3}, {1, 2}, {1, 1}, {2, 1}, 2},
    {{1, 16, 6, 5}, {16, 16, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},
    {{1, 8, 5, 5}, {9, 8, 5, 5}, {1, 1}, {2, 2}, {1, 1}, 1},
};

}  // namespace

// --- conv2d ---------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("conv2d, plain CPU: im2col + GEMM against a direct convolution", "[ops][conv2d]", float,
                   double) {
  for (const conv_case& c : conv_cases) {
    INFO("input " << c.input << ", filter " << c.filter << ", groups " << c.groups);
    Scope scope;
    scope.var("x").set(LoDTensor(random_tensor<TestType>(c.input)));
    scope.var("w").set(LoDTensor(random_tensor<TestType>(c.filter)));
    const kernel_choice choice =
        run_rt(scope, "conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, {{"Output", {"y"}}}, conv_attrs(c));
    CHECK(choice.chosen ==
          kernel_key{cpu_place, data_type_of<TestType>, data_layout::nchw, library_type::plain});
    const LoDTensor& y = scope.get("y").get<LoDTensor>();
    CHECK(y.layout() == data_layout::nchw);
    check_close(values<TestType>(y),
                naive_conv<TestType>(scope.get("x").get<LoDTensor>(), scope.get("w").get<LoDTensor>(), c),
                tolerance<TestType>());
  }
}

TEST_CASE("conv2d through the static path: typed tensors, the kernel chosen at compile time",
          "[ops][conv2d][static]") {
  const conv_case& c = conv_cases[1];
  const typed_tensor<cpu, float, layout::nchw> x(random_tensor<float>(c.input, -1, 1, data_layout::nchw));
  const typed_tensor<cpu, float> w(random_tensor<float>(c.filter));
  static_assert(std::is_same_v<static_kernel_type<ops::conv2d, target<cpu>, decltype(x), decltype(w)>,
                               kernel_type<cpu, float, layout::nchw>>);
  Tensor y;
  run<ops::conv2d>(target<cpu>(), inputs(x, w, no_input, no_input), outputs(y), conv_attrs(c));
  CHECK(y.dims() == dims{1, 10, 5, 11});
  check_close(values<float>(y), naive_conv<float>(x.tensor(), w.tensor(), c), 1e-4);

  // NHWC input: fluidk brings it to NCHW for the plain kernel (declared for NCHW).
  const Tensor nhwc = transform(
      x.tensor(), kernel_key{cpu_place, data_type::float32, data_layout::nhwc, library_type::plain});
  Tensor y2;
  run<ops::conv2d>(target<cpu>(), inputs(typed_tensor<cpu, float, layout::nhwc>(nhwc), w, no_input, no_input),
                   outputs(y2), conv_attrs(c));
  CHECK(values<float>(y2) == values<float>(y));
}

TEST_CASE("conv2d rejects shapes and attributes that do not fit, naming the operator",
          "[ops][conv2d][errors]") {
  Scope scope;
  scope.var("x").set(LoDTensor(random_tensor<float>({1, 4, 5, 5})));
  scope.var("w").set(LoDTensor(random_tensor<float>({2, 3, 3, 3})));
  const slot_names in{{"Input", {"x"}}, {"Filter", {"w"}}}, out{{"Output", {"y"}}};
  CHECK_THROWS_WITH(
      run_rt(scope, "conv2d", in, out),
      Catch::Contains("operator 'conv2d': Filter [2, 3, 3, 3] does not fit Input [1, 4, 5, 5]"));
  scope.var("w2").set(LoDTensor(random_tensor<float>({2, 4, 3, 3})));
  const slot_names in2{{"Input", {"x"}}, {"Filter", {"w2"}}};
  CHECK_THROWS_WITH(run_rt(scope, "conv2d", in2, out, {{"strides", std::vector<std::int32_t>{1}}}),
                    Catch::Contains("attribute 'strides' needs 2 values, but has 1"));
  CHECK_THROWS_WITH(run_rt(scope, "conv2d", in2, out, {{"strides", 1.5f}}),
                    Catch::Contains("attribute 'strides' holds float, not ints or int64s"));
  // Geometry that overflows 64 bits: a dilated filter's extent, a padded input (the filter
  // would have "fit" and the output been wrong).
  constexpr std::int64_t huge = std::numeric_limits<std::int64_t>::max();
  for (const attribute_map& attrs :
       {attribute_map{{"dilations", std::vector<std::int64_t>{std::int64_t(1) << 62, 1}}},
        attribute_map{{"paddings", std::vector<std::int64_t>{huge, 0}}},
        attribute_map{{"paddings", std::vector<std::int64_t>{0, huge / 2}}}}) {
    CHECK_THROWS_WITH(run_rt(scope, "conv2d", in2, out, attrs),
                      Catch::Contains("operator 'conv2d': the dilations, paddings and filter [2, 4, 3, 3] on "
                                      "Input [1, 4, 5, 5] make positions that overflow a 64-bit integer"));
  }
  CHECK_FALSE(scope.get("y").initialized());
}

TEST_CASE("conv2d: Fluid's padding_algorithm and four paddings, on every CPU kernel", "[ops][conv2d]") {
  struct padding_case {
    conv_case given;        // the attributes given
    std::string algorithm;  // padding_algorithm
    conv_case same_as;      // explicit attributes of the same convolution (Fluid's paddings)
    dims output;
  };
  const std::vector<padding_case> cases{
      // SAME, stride 1: an output of the input's size.
      {{{1, 2, 5, 5}, {3, 2, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1},
       "SAME",
       {{1, 2, 5, 5}, {3, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
       {1, 3, 5, 5}},
      // SAME, stride 2: ceil(size / 2), the odd padding at the end; dilations become 1.
      {{{1, 3, 8, 7}, {4, 3, 3, 2}, {2, 2}, {5, 5}, {2, 2}, 1},
       "SAME",
       {{1, 3, 8, 7}, {4, 3, 3, 2}, {2, 2}, {0, 1, 0, 1}, {1, 1}, 1},
       {1, 4, 4, 4}},
      // VALID: the paddings given are ignored.
      {{{2, 2, 6, 5}, {2, 1, 3, 3}, {1, 2}, {2, 2}, {1, 1}, 2},
       "VALID",
       {{2, 2, 6, 5}, {2, 1, 3, 3}, {1, 2}, {0, 0}, {1, 1}, 2},
       {2, 2, 4, 2}},
      // EXPLICIT with four values: top, bottom, left, right.
      {{{1, 4, 5, 6}, {8, 4, 2, 3}, {1, 1}, {1, 0, 2, 1}, {1, 2}, 1},
       "EXPLICIT",
       {{1, 4, 5, 6}, {8, 4, 2, 3}, {1, 1}, {1, 0, 2, 1}, {1, 2}, 1},
       {1, 8, 5, 5}},
  };
  for (const padding_case& p : cases) {
    INFO(p.algorithm << ", input " << p.given.input << ", paddings given " << p.given.paddings.size());
    Scope scope;
    scope.var("x").set(LoDTensor(random_tensor<float>(p.given.input, -1, 1, data_layout::nchw)));
    scope.var("w").set(LoDTensor(random_tensor<float>(p.given.filter)));
    attribute_map attrs = conv_attrs(p.given);
    attrs.set("padding_algorithm", p.algorithm);
    const slot_names in{{"Input", {"x"}}, {"Filter", {"w"}}};
    run_rt(scope, "conv2d", in, {{"Output", {"plain"}}}, attrs);
    const LoDTensor& plain = scope.get("plain").get<LoDTensor>();
    CHECK(plain.dims() == p.output);
    check_close(
        values<float>(plain),
        naive_conv<float>(scope.get("x").get<LoDTensor>(), scope.get("w").get<LoDTensor>(), p.same_as), 1e-4);
#if FLUIDK_OPS_ONEDNN
    attrs.set("use_onednn", true);
    run_rt(scope, "conv2d", in, {{"Output", {"dnn"}}}, attrs);
    const Tensor back =
        transform(scope.get("dnn").get<LoDTensor>().tensor(),
                  kernel_key{cpu_place, data_type::float32, data_layout::nchw, library_type::plain});
    CHECK(back.dims() == p.output);
    check_close(values<float>(back), values<float>(plain), 1e-4);
#endif
  }
  // What Fluid's conv2d does not take, or these kernels cannot read, is refused by name.
  Scope scope;
  scope.var("x").set(LoDTensor(random_tensor<float>({1, 4, 5, 5})));
  scope.var("w").set(LoDTensor(random_tensor<float>({2, 4, 3, 3})));
  const slot_names in{{"Input", {"x"}}, {"Filter", {"w"}}}, out{{"Output", {"y"}}};
  CHECK_THROWS_WITH(run_rt(scope, "conv2d", in, out, {{"padding_algorithm", std::string("FULL")}}),
                    Catch::Contains("operator 'conv2d': padding_algorithm must be \"EXPLICIT\", \"SAME\" or "
                                    "\"VALID\", not \"FULL\""));
  CHECK_THROWS_WITH(run_rt(scope, "conv2d", in, out, {{"data_format", std::string("NHWC")}}),
                    Catch::Contains("operator 'conv2d': data_format must be \"NCHW\" or \"AnyLayout\""));
  CHECK_THROWS_WITH(run_rt(scope, "conv2d", in, out, {{"paddings", std::vector<std::int32_t>{1, 1, 1}}}),
                    Catch::Contains("attribute 'paddings' needs 2 values (both sides alike) or 4"));
  // SAME and VALID check the attributes they then replace, as Fluid does.
  const std::string same = "SAME";
  CHECK_THROWS_WITH(run_rt(scope, "conv2d", in, out,
                           {{"padding_algorithm", same}, {"paddings", std::vector<std::int32_t>{1, 1, 1}}}),
                    Catch::Contains("attribute 'paddings' needs 2 values"));
  CHECK_THROWS_WITH(run_rt(scope, "conv2d", in, out,
                           {{"padding_algorithm", std::string("VALID")}, {"paddings", std::string("junk")}}),
                    Catch::Contains("attribute 'paddings' holds string"));
  CHECK_THROWS_WITH(run_rt(scope, "conv2d", in, out,
                           {{"padding_algorithm", same}, {"dilations", std::vector<std::int32_t>{0, -3}}}),
                    Catch::Contains("operator 'conv2d': dilations must be positive"));
  // An empty axis under SAME: no output (ceil(0 / stride)), refused as the other modes refuse
  // it; it once gave one row, padded by the whole filter.
  scope.var("empty").set(LoDTensor(random_tensor<float>({1, 4, 0, 5})));
  CHECK_THROWS_WITH(
      run_rt(scope, "conv2d", {{"Input", {"empty"}}, {"Filter", {"w"}}}, out, {{"padding_algorithm", same}}),
      Catch::Contains("does not fit the padded input"));
  CHECK_FALSE(scope.get("y").initialized());
}

#if FLUIDK_OPS_ONEDNN
TEST_CASE("conv2d, oneDNN: against the plain conv; the output stays in oneDNN's blocked layout",
          "[ops][conv2d][onednn]") {
  for (const conv_case& c : conv_cases) {
    INFO("input " << c.input << ", filter " << c.filter << ", groups " << c.groups);
    Scope scope;
    scope.var("x").set(LoDTensor(random_tensor<float>(c.input, -1, 1, data_layout::nchw)));
    scope.var("w").set(LoDTensor(random_tensor<float>(c.filter)));
    attribute_map attrs = conv_attrs(c);
    run_rt(scope, "conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, {{"Output", {"plain"}}}, attrs);
    attrs.set("use_onednn", true);
    const kernel_choice choice =
        run_rt(scope, "conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, {{"Output", {"dnn"}}}, attrs);
    CHECK(choice.chosen ==
          kernel_key{cpu_place, data_type::float32, data_layout::nchw, library_type_of<library::onednn>});
    // The kernel takes the NCHW input as it is (it reorders it into the blocked layout of
    // this CPU's fastest implementations itself); the filter keeps its layout
    // (keep_layout_inputs): the kernel reorders the weights for oneDNN itself.
    const std::vector<std::vector<Variable*>> call{{&scope.get("x")}, {&scope.get("w")}, {}, {}};
    const std::string plan = explain(find_operator("conv2d"), cpu_place, call, attrs);
    CHECK_THAT(plan, Catch::Contains("input Input[0]: none") && Catch::Contains("input Filter[0]: none"));
    const LoDTensor& dnn = scope.get("dnn").get<LoDTensor>();
    // The kernel's own layout when oneDNN has an implementation producing it (AVX2 and
    // AVX-512 CPUs both do), else the other blocked one.
    CHECK(
        (dnn.layout() == data_layout_of<layout::nChw8c> || dnn.layout() == data_layout_of<layout::nChw16c>));
    CHECK(dnn.dims() == scope.get("plain").get<LoDTensor>().dims());
    // Back to NCHW through fluidk's transform, then compared.
    const Tensor back = transform(
        dnn.tensor(), kernel_key{cpu_place, data_type::float32, data_layout::nchw, library_type::plain});
    check_close(values<float>(back), values<float>(scope.get("plain")), 1e-4);
    CHECK(scope.get("x").get<LoDTensor>().layout() == data_layout::nchw);  // the input is untouched
  }
}

TEST_CASE("conv2d, oneDNN: input already nChw16c selects that kernel; the static path agrees",
          "[ops][conv2d][onednn][static]") {
  const conv_case& c = conv_cases[3];
  Scope scope;
  scope.var("x").set(LoDTensor(random_tensor<float>(c.input, -1, 1, data_layout_of<layout::nChw16c>)));
  scope.var("w").set(LoDTensor(random_tensor<float>(c.filter)));
  attribute_map attrs = conv_attrs(c);
  attrs.set("use_onednn", true);
  const kernel_choice choice =
      run_rt(scope, "conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, {{"Output", {"y"}}}, attrs);
  CHECK(choice.chosen.layout() == data_layout_of<layout::nChw16c>);
  const std::vector<long double> expected =
      naive_conv<float>(scope.get("x").get<LoDTensor>(), scope.get("w").get<LoDTensor>(), c);
  check_close(values<float>(scope.get("y")), expected, 1e-4);

  const typed_tensor<cpu, float, layout::nChw16c> x(scope.get("x").get<LoDTensor>().tensor());
  const typed_tensor<cpu, float> w(scope.get("w").get<LoDTensor>().tensor());
  static_assert(
      std::is_same_v<static_kernel_type<ops::conv2d, target<cpu, library::onednn>, decltype(x), decltype(w)>,
                     kernel_type<cpu, float, layout::nChw16c, library::onednn>>);
  Tensor y;
  run<ops::conv2d>(target<cpu, library::onednn>(), inputs(x, w, no_input, no_input), outputs(y),
                   conv_attrs(c));
  check_close(values<float>(y), expected, 1e-4);
}

TEST_CASE("conv2d (oneDNN) then relu: the plain relu gets the layout transform, oneDNN's relu does not",
          "[ops][conv2d][onednn][executor]") {
  const conv_case& c = conv_cases[0];
  Scope scope;
  scope.var("image").set(LoDTensor(random_tensor<float>(c.input, -1, 1, data_layout::nchw)));
  scope.var("filter").set(LoDTensor(random_tensor<float>(c.filter)));
  ProgramDesc program;
  BlockDesc& block = program.global_block();
  block.var("image").shape = {c.input.begin(), c.input.end()};
  block.var("filter").shape = {c.filter.begin(), c.filter.end()};
  attribute_map attrs = conv_attrs(c);
  attrs.set("use_onednn", true);
  block.append_op(
      OpDesc("conv2d", {{"Input", {"image"}}, {"Filter", {"filter"}}}, {{"Output", {"conv"}}}, attrs));
  block.append_op(OpDesc("relu", {{"X", {"conv"}}}, {{"Out", {"plain_relu"}}}));
  block.append_op(OpDesc("relu", {{"X", {"conv"}}}, {{"Out", {"dnn_relu"}}}, {{"use_onednn", true}}));

  Executor executor(cpu_place);
  auto prepared = executor.prepare(program.block(0), scope);
  executor.run(prepared);
  const data_layout blocked = scope.get("conv").get<LoDTensor>().layout();
  CHECK((blocked == data_layout_of<layout::nChw8c> || blocked == data_layout_of<layout::nChw16c>));
  // Transforms: none for conv2d (its oneDNN kernel takes NCHW; the filter keeps its layout),
  // then conv's output blocked->NCHW for the plain relu; oneDNN's relu reads it as it is.
  CHECK(executor.stats().transforms == 1);
  CHECK(scope.get("plain_relu").get<LoDTensor>().layout() != blocked);
  CHECK(scope.get("dnn_relu").get<LoDTensor>().layout() == blocked);

  std::vector<long double> expected =
      naive_conv<float>(scope.get("image").get<LoDTensor>(), scope.get("filter").get<LoDTensor>(), c);
  for (long double& v : expected) v = std::max(v, 0.0L);
  check_close(values<float>(scope.get("plain_relu")), expected, 1e-4);
  check_close(values<float>(scope.get("dnn_relu")), expected, 1e-4);

  executor.reset_stats();
  executor.run(prepared);  // nothing cached to serve: the conv's output is new each run
  CHECK(executor.stats().transforms == 1);
}
#endif

// --- mul and fc -----------------------------------------------------------------------------

TEMPLATE_TEST_CASE("mul, plain CPU: against a naive product; num_col_dims flatten; X's LoD kept",
                   "[ops][mul]", float, double) {
  struct mul_case {
    dims x, y;
    std::int32_t x_cols, y_cols;
    dims out;
  };
  const mul_case cases[] = {{{5, 7}, {7, 3}, 1, 1, {5, 3}},
                            {{2, 3, 4}, {4, 6}, 2, 1, {2, 3, 6}},
                            {{4, 2, 3}, {6, 5}, 1, 1, {4, 5}},
                            {{3, 10}, {2, 5, 9}, 1, 2, {3, 9}},
                            {{33, 130}, {130, 70}, 1, 1, {33, 70}}};  // crosses the GEMM's blocks
  for (const mul_case& c : cases) {
    INFO("X " << c.x << ", Y " << c.y);
    Scope scope;
    const Tensor x = random_tensor<TestType>(c.x);
    scope.var("x").set(LoDTensor(x, {{0, 1, std::size_t(c.x[0])}}));
    scope.var("y").set(LoDTensor(random_tensor<TestType>(c.y)));
    run_rt(scope, "mul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}},
           {{"x_num_col_dims", c.x_cols}, {"y_num_col_dims", c.y_cols}});
    const LoDTensor& out = scope.get("out").get<LoDTensor>();
    CHECK(out.dims() == c.out);
    CHECK(out.lod() == lod{{0, 1, std::size_t(c.x[0])}});
    std::int64_t m = 1, n = 1;
    for (std::size_t i = 0; i < std::size_t(c.x_cols); ++i) m *= c.x[i];
    for (std::size_t i = std::size_t(c.y_cols); i < c.y.rank(); ++i) n *= c.y[i];
    check_close(values<TestType>(out),
                naive_matmul(values<TestType>(x), values<TestType>(scope.get("y")), m, x.numel() / m, n),
                tolerance<TestType>());
  }
  Scope scope;
  scope.var("x").set(LoDTensor(random_tensor<TestType>({2, 3})));
  scope.var("y").set(LoDTensor(random_tensor<TestType>({4, 2})));
  CHECK_THROWS_WITH(
      run_rt(scope, "mul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}}),
      Catch::Contains("operator 'mul': X [2, 3] read as [2, 3] and Y [4, 2] read as [4, 2] cannot be "
                      "multiplied"));
}

TEMPLATE_TEST_CASE("fc, plain CPU: Input x W + Bias against a naive product; Bias optional", "[ops][fc]",
                   float, double) {
  for (const bool bias : {true, false}) {
    INFO("bias " << bias);
    Scope scope;
    const Tensor input = random_tensor<TestType>({3, 2, 5});  // in_num_col_dims 2: [6, 5]
    const Tensor w = random_tensor<TestType>({5, 4});
    const Tensor b = random_tensor<TestType>({4});
    scope.var("in").set(LoDTensor(input));
    scope.var("w").set(LoDTensor(w));
    scope.var("b").set(LoDTensor(b));
    const slot_names in = bias ? slot_names{{"Input", {"in"}}, {"W", {"w"}}, {"Bias", {"b"}}}
                               : slot_names{{"Input", {"in"}}, {"W", {"w"}}, {"Bias", {}}};
    run_rt(scope, "fc", in, {{"Out", {"out"}}}, {{"in_num_col_dims", 2}});
    CHECK(scope.get("out").get<LoDTensor>().dims() == dims{3, 2, 4});
    std::vector<long double> expected = naive_matmul(values<TestType>(input), values<TestType>(w), 6, 5, 4);
    if (bias)
      for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += b.data<TestType>()[i % 4];
    check_close(values<TestType>(scope.get("out")), expected, tolerance<TestType>());

    // The static path gives the same bits; an optional input is left out with no_input.
    const auto typed = [](const Tensor& t) { return tensor_cast<cpu, TestType>(t); };
    Tensor out;
    const attribute_map attrs{{"in_num_col_dims", 2}};
    if (bias)
      run<ops::fc>(target<cpu>(), inputs(typed(input), typed(w), typed(b)), outputs(out), attrs);
    else
      run<ops::fc>(target<cpu>(), inputs(typed(input), typed(w), no_input), outputs(out), attrs);
    CHECK(values<TestType>(out) == values<TestType>(scope.get("out")));
  }
  // A Bias of another kind is refused, not taken for no Bias; an empty variable is no Bias.
  Scope scope;
  scope.var("in").set(LoDTensor(random_tensor<TestType>({6, 5})));
  scope.var("w").set(LoDTensor(random_tensor<TestType>({5, 4})));
  scope.var("rows").set(SelectedRows({0}, 1, random_tensor<TestType>({1, 4})));
  scope.var("nothing");
  CHECK_THROWS_WITH(
      run_rt(scope, "fc", {{"Input", {"in"}}, {"W", {"w"}}, {"Bias", {"rows"}}}, {{"Out", {"out"}}}),
      Catch::Contains("operator 'fc'") && Catch::Contains("input 'Bias' holds SelectedRows, not LoDTensor"));
  CHECK_FALSE(scope.get("out").initialized());
  run_rt(scope, "fc", {{"Input", {"in"}}, {"W", {"w"}}, {"Bias", {"nothing"}}}, {{"Out", {"out"}}});
  CHECK(scope.get("out").get<LoDTensor>().dims() == dims{6, 4});
}

TEST_CASE("fc: Fluid's activation_type relu, after the bias, on every CPU kernel", "[ops][fc]") {
  Scope scope;
  scope.var("in").set(LoDTensor(random_tensor<float>({6, 5})));
  scope.var("w").set(LoDTensor(random_tensor<float>({5, 4})));
  scope.var("b").set(LoDTensor(random_tensor<float>({4})));
  const slot_names in{{"Input", {"in"}}, {"W", {"w"}}, {"Bias", {"b"}}};
  run_rt(scope, "fc", in, {{"Out", {"linear"}}});
  const std::vector<float> linear = values<float>(scope.get("linear"));
  REQUIRE(std::count_if(linear.begin(), linear.end(), [](float v) { return v < 0; }) > 0);
  std::vector<float> expected = linear;
  for (float& v : expected) v = std::max(v, 0.0f);
  attribute_map attrs{{"activation_type", std::string("relu")}};
  run_rt(scope, "fc", in, {{"Out", {"plain"}}}, attrs);
  CHECK(values<float>(scope.get("plain")) == expected);
#if FLUIDK_OPS_ONEDNN
  attrs.set("use_onednn", true);
  run_rt(scope, "fc", in, {{"Out", {"dnn"}}}, attrs);
  const std::vector<float> dnn = values<float>(scope.get("dnn"));
  check_close(dnn, std::vector<long double>(expected.begin(), expected.end()), 1e-5);
  CHECK(std::none_of(dnn.begin(), dnn.end(), [](float v) { return v < 0; }));
#endif
  // Fluid's fc takes "" and "relu" only; another is refused, not ignored (it once was).
  CHECK_THROWS_WITH(
      run_rt(scope, "fc", in, {{"Out", {"sigmoid"}}}, {{"activation_type", std::string("sigmoid")}}),
      Catch::Contains("operator 'fc': activation_type must be \"\" (none) or \"relu\", as in "
                      "Fluid, not \"sigmoid\""));
  CHECK_FALSE(scope.get("sigmoid").initialized());
}

#if FLUIDK_OPS_ONEDNN
TEST_CASE("mul and fc, oneDNN (matmul, inner product): against the plain kernels", "[ops][mul][fc][onednn]") {
  Scope scope;
  scope.var("x").set(LoDTensor(random_tensor<float>({6, 4, 5})));
  scope.var("y").set(LoDTensor(random_tensor<float>({20, 9})));
  scope.var("b").set(LoDTensor(random_tensor<float>({1, 9})));
  for (const bool dnn : {false, true}) {
    const std::string suffix = dnn ? "_dnn" : "_plain";
    attribute_map attrs{{"use_onednn", dnn}};
    const kernel_choice m =
        run_rt(scope, "mul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"mul" + suffix}}}, attrs);
    CHECK(m.chosen.library() == (dnn ? library_type_of<library::onednn> : library_type::plain));
    const kernel_choice f = run_rt(scope, "fc", {{"Input", {"x"}}, {"W", {"y"}}, {"Bias", {"b"}}},
                                   {{"Out", {"fc" + suffix}}}, attrs);
    CHECK(f.chosen.library() == (dnn ? library_type_of<library::onednn> : library_type::plain));
    run_rt(scope, "fc", {{"Input", {"x"}}, {"W", {"y"}}, {"Bias", {}}}, {{"Out", {"fc_nobias" + suffix}}},
           attrs);
  }
  CHECK(scope.get("mul_dnn").get<LoDTensor>().dims() == dims{6, 9});
  check_close(values<float>(scope.get("mul_dnn")), values<float>(scope.get("mul_plain")), 1e-4);
  check_close(values<float>(scope.get("fc_dnn")), values<float>(scope.get("fc_plain")), 1e-4);
  check_close(values<float>(scope.get("fc_nobias_dnn")), values<float>(scope.get("fc_nobias_plain")), 1e-4);

  // fc's primitive and W's reorder are kept: the same call again only hits the cache; W written
  // in place (through a tensor sharing its storage) is prepared again, never served stale.
  const slot_names fc_in{{"Input", {"x"}}, {"W", {"y"}}, {"Bias", {"b"}}};
  onednn_cache& cache = onednn_context::this_thread().cache();
  const onednn_cache::statistics before = cache.stats();
  run_rt(scope, "fc", fc_in, {{"Out", {"fc_again"}}}, {{"use_onednn", true}});
  CHECK(cache.stats().misses == before.misses);
  CHECK(cache.stats().hits > before.hits);
  check_close(values<float>(scope.get("fc_again")), values<float>(scope.get("fc_plain")), 1e-4);
  Tensor w = scope.get("y").get<LoDTensor>();
  float* data = w.data<float>();
  for (std::int64_t i = 0; i < w.numel(); ++i) data[i] = -2 * data[i] + 0.25f;
  run_rt(scope, "fc", fc_in, {{"Out", {"fc_written"}}}, {{"use_onednn", true}});
  run_rt(scope, "fc", fc_in, {{"Out", {"fc_written_plain"}}}, {{"use_onednn", false}});
  check_close(values<float>(scope.get("fc_written")), values<float>(scope.get("fc_written_plain")), 1e-4);
}

TEST_CASE("mul, fc and conv2d, oneDNN, on empty dimensions: what the plain kernels give", "[ops][onednn]") {
  Scope scope;
  // K = 0 (zeros, or fc's bias in every row), M = 0 (an empty output); conv2d without an input
  // channel (zeros) and without an image.
  scope.var("x_k0").set(LoDTensor(Tensor({3, 0}, data_type::float32)));
  scope.var("y_k0").set(LoDTensor(Tensor({0, 4}, data_type::float32)));
  scope.var("x_m0").set(LoDTensor(Tensor({0, 5}, data_type::float32)));
  scope.var("y").set(LoDTensor(random_tensor<float>({5, 4})));
  scope.var("bias").set(LoDTensor(random_tensor<float>({4})));
  scope.var("in_c0").set(
      LoDTensor(Tensor({1, 0, 4, 4}, data_type::float32, place(cpu_place), data_layout::nchw)));
  scope.var("w_c0").set(LoDTensor(Tensor({3, 0, 3, 3}, data_type::float32)));
  scope.var("in_n0").set(
      LoDTensor(Tensor({0, 2, 4, 4}, data_type::float32, place(cpu_place), data_layout::nchw)));
  scope.var("w").set(LoDTensor(random_tensor<float>({3, 2, 3, 3})));
  scope.var("in_h0").set(
      LoDTensor(Tensor({1, 2, 0, 4}, data_type::float32, place(cpu_place), data_layout::nchw)));
  scope.var("w_1x1").set(LoDTensor(random_tensor<float>({3, 2, 1, 1})));
  struct call {
    std::string op;
    slot_names in;
    attribute_map attrs;
  };
  const std::vector<call> calls{
      {"mul", {{"X", {"x_k0"}}, {"Y", {"y_k0"}}}, {}},
      {"mul", {{"X", {"x_m0"}}, {"Y", {"y"}}}, {}},
      {"fc", {{"Input", {"x_k0"}}, {"W", {"y_k0"}}, {"Bias", {"bias"}}}, {}},
      {"fc", {{"Input", {"x_m0"}}, {"W", {"y"}}, {"Bias", {"bias"}}}, {}},
      {"conv2d", {{"Input", {"in_c0"}}, {"Filter", {"w_c0"}}}, {}},
      {"conv2d", {{"Input", {"in_n0"}}, {"Filter", {"w"}}}, {}},
      // No pixel, but padding: an output of zeros.
      {"conv2d",
       {{"Input", {"in_h0"}}, {"Filter", {"w_1x1"}}},
       {{"paddings", std::vector<std::int32_t>{1, 1}}}},
  };
  for (const call& c : calls) {
    INFO(c.op << " of " << scope.get(c.in[0].second[0]).get<LoDTensor>().dims().to_string());
    const std::string out_slot = c.op == "conv2d" ? "Output" : "Out";
    run_rt(scope, c.op, c.in, {{out_slot, {"plain"}}}, c.attrs);
    attribute_map dnn_attrs = c.attrs;
    dnn_attrs.set("use_onednn", true);
    const kernel_choice dnn = run_rt(scope, c.op, c.in, {{out_slot, {"dnn"}}}, dnn_attrs);
    CHECK(dnn.chosen.library() == library_type_of<library::onednn>);
    const Tensor& p = scope.get("plain").get<LoDTensor>();
    const Tensor& d = scope.get("dnn").get<LoDTensor>();
    CHECK(d.dims() == p.dims());
    CHECK(values<float>(d) == values<float>(p));
  }
  // K = 0 gives zeros, and fc the bias.
  run_rt(scope, "fc", calls[2].in, {{"Out", {"fc_k0"}}}, {{"use_onednn", true}});
  const std::vector<float> b = values<float>(scope.get("bias")), fc = values<float>(scope.get("fc_k0"));
  REQUIRE(fc.size() == 12);
  for (std::size_t i = 0; i < fc.size(); ++i) CHECK(fc[i] == b[i % 4]);
}
#endif

TEST_CASE("use_onednn where oneDNN has no kernel (double data): the plain kernel runs, as a counted fallback",
          "[ops][fallback]") {
  Scope scope;
  scope.var("x").set(LoDTensor(random_tensor<double>({3, 4})));
  scope.var("y").set(LoDTensor(random_tensor<double>({4, 2})));
  std::vector<std::string> reports;
  operator_registry::instance().set_fallback_reporter(
      [&](const fallback_event& e) { reports.push_back(std::string(e.op) + ": " + e.chosen.to_string()); });
  for (int i = 0; i < 2; ++i) {
    const kernel_choice choice =
        run_rt(scope, "mul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}}, {{"use_onednn", true}});
    CHECK(choice.fell_back);
    CHECK(choice.chosen == kernel_key{cpu_place, data_type::float64, data_layout::any, library_type::plain});
  }
  operator_registry::instance().set_fallback_reporter(nullptr);
  CHECK(reports ==
        std::vector<std::string>{"mul: {data_type[double]; data_layout[ANY_LAYOUT]; place[Place(cpu)]; "
                                 "library_type[PLAIN]}"});
  CHECK(operator_registry::instance().fallback_count(
            "mul", kernel_key{cpu_place, data_type::float64, data_layout::any,
                              library_type_of<library::onednn>}) == 2);
  check_close(values<double>(scope.get("out")),
              naive_matmul(values<double>(scope.get("x")), values<double>(scope.get("y")), 3, 4, 2), 1e-10);
}

// --- relu and elementwise_add ---------------------------------------------------------------

TEMPLATE_TEST_CASE("relu, plain CPU: max(x, 0) in the input's layout, LoD kept", "[ops][relu]", float,
                   double) {
  Scope scope;
  const Tensor x = random_tensor<TestType>({7, 5});
  scope.var("x").set(LoDTensor(x, {{0, 3, 7}}));
  run_rt(scope, "relu", {{"X", {"x"}}}, {{"Out", {"y"}}});
  std::vector<TestType> expected = values<TestType>(x);
  for (TestType& v : expected) v = std::max(v, TestType(0));
  CHECK(values<TestType>(scope.get("y")) == expected);
  CHECK(scope.get("y").get<LoDTensor>().lod() == lod{{0, 3, 7}});

  // The static path, with a typed tensor.
  const typed_tensor<cpu, TestType> tx(x);
  Tensor y;
  run<ops::relu>(target<cpu>(), inputs(tx), outputs(y));
  CHECK(values<TestType>(y) == expected);
}

TEMPLATE_TEST_CASE("elementwise_add, plain CPU: same shape, row vector, Fluid's axis",
                   "[ops][elementwise_add]", float, double) {
  struct add_case {
    dims x, y;
    std::int32_t axis;
  };
  // The default axis counts Y's trailing 1s (Fluid): Y [2, 1] lines up with X's dimension 2
  // of 4, not 3; Y [1] adds everywhere.
  const add_case cases[] = {{{4, 6}, {4, 6}, -1},          {{4, 6}, {6}, -1},
                            {{2, 3, 4}, {4}, -1},          {{2, 3, 4, 5}, {3}, 1},
                            {{2, 3, 4, 5}, {3, 4, 1}, 1},  {{3, 4}, {3, 1}, 0},
                            {{1, 1, 2, 2}, {2, 1}, -1},    {{1, 1, 2, 3}, {2, 1}, -1},
                            {{2, 3, 4, 5}, {3, 4, 1}, -1}, {{2, 3}, {1}, -1}};
  for (const add_case& c : cases) {
    INFO("X " << c.x << ", Y " << c.y << ", axis " << c.axis);
    Scope scope;
    const Tensor x = random_tensor<TestType>(c.x), y = random_tensor<TestType>(c.y);
    scope.var("x").set(LoDTensor(x));
    scope.var("y").set(LoDTensor(y));
    run_rt(scope, "elementwise_add", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}}, {{"axis", c.axis}});
    // Reference: Y's index is X's index restricted to the dimensions Y covers.
    const std::vector<TestType> xv = values<TestType>(x), yv = values<TestType>(y);
    std::size_t ry = c.y.rank();
    while (ry > 0 && c.y[ry - 1] == 1) --ry;
    const std::size_t axis = c.x == c.y ? 0 : c.axis == -1 ? c.x.rank() - c.y.rank() : std::size_t(c.axis);
    std::vector<TestType> expected(xv.size());
    for (std::size_t i = 0; i < xv.size(); ++i) {
      std::size_t rest = i, yi = 0, stride = 1;
      for (std::size_t d = c.x.rank(); d-- > 0;) {
        const std::size_t coord = rest % std::size_t(c.x[d]);
        rest /= std::size_t(c.x[d]);
        if (c.x == c.y || (d >= axis && d < axis + ry)) {
          yi += coord * stride;
          stride *= std::size_t(c.x[d]);
        }
      }
      expected[i] = xv[i] + yv[yi];
    }
    CHECK(values<TestType>(scope.get("out")) == expected);
  }
  Scope scope;
  // X in NHWC, Y in NCHW: the kernel adds them in logical order.
  const Tensor x4 = random_tensor<TestType>({2, 3, 2, 4}, -1, 1, data_layout::nhwc);
  const Tensor y4 = random_tensor<TestType>({2, 3, 2, 4}, -1, 1, data_layout::nchw);
  scope.var("x4").set(LoDTensor(x4));
  scope.var("y4").set(LoDTensor(y4));
  run_rt(scope, "elementwise_add", {{"X", {"x4"}}, {"Y", {"y4"}}}, {{"Out", {"out4"}}});
  std::vector<TestType> expected = values<TestType>(x4);
  const std::vector<TestType> y4v = values<TestType>(y4);
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += y4v[i];
  CHECK(values<TestType>(scope.get("out4")) == expected);
  // The same dims, X labelled NCHW and Y any (a conv2d output and a parameter): elementwise.
  const Tensor xl = random_tensor<TestType>({2, 3, 4, 1}, -1, 1, data_layout::nchw);
  const Tensor yl = random_tensor<TestType>({2, 3, 4, 1});
  scope.var("xl").set(LoDTensor(xl));
  scope.var("yl").set(LoDTensor(yl));
  run_rt(scope, "elementwise_add", {{"X", {"xl"}}, {"Y", {"yl"}}}, {{"Out", {"outl"}}});
  expected = values<TestType>(xl);
  const std::vector<TestType> ylv = values<TestType>(yl);
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += ylv[i];
  CHECK(values<TestType>(scope.get("outl")) == expected);

  scope.var("x").set(LoDTensor(random_tensor<TestType>({4, 6})));
  scope.var("y").set(LoDTensor(random_tensor<TestType>({4})));
  CHECK_THROWS_WITH(
      run_rt(scope, "elementwise_add", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}}),
      Catch::Contains("operator 'elementwise_add': Y [4] does not broadcast to X [4, 6] at axis 1"));
}

#if FLUIDK_OPS_ONEDNN
TEST_CASE("relu and elementwise_add, oneDNN (eltwise, binary): against the plain kernels",
          "[ops][relu][elementwise_add][onednn]") {
  Scope scope;
  scope.var("x").set(LoDTensor(random_tensor<float>({3, 20, 4, 5}, -1, 1, data_layout::nchw)));
  scope.var("same").set(LoDTensor(random_tensor<float>({3, 20, 4, 5}, -1, 1, data_layout::nchw)));
  scope.var("row").set(LoDTensor(random_tensor<float>({5})));
  scope.var("channel").set(LoDTensor(random_tensor<float>({20})));
  scope.var("blocked").set(
      LoDTensor(random_tensor<float>({3, 20, 4, 5}, -1, 1, data_layout_of<layout::nChw16c>)));
  for (const bool dnn : {false, true}) {
    const std::string s = dnn ? "_dnn" : "_plain";
    const attribute_map attrs{{"use_onednn", dnn}};
    run_rt(scope, "relu", {{"X", {"x"}}}, {{"Out", {"relu" + s}}}, attrs);
    const kernel_choice blocked =
        run_rt(scope, "relu", {{"X", {"blocked"}}}, {{"Out", {"relu_blocked" + s}}}, attrs);
    // oneDNN's relu reads blocked data as it is; the plain one gets it in NCHW from fluidk.
    CHECK(blocked.chosen.layout() == (dnn ? data_layout_of<layout::nChw16c> : data_layout::any));
    CHECK(scope.get("relu_blocked" + s).get<LoDTensor>().layout() ==
          (dnn ? data_layout_of<layout::nChw16c> : data_layout::nchw));
    run_rt(scope, "elementwise_add", {{"X", {"x"}}, {"Y", {"same"}}}, {{"Out", {"same" + s}}}, attrs);
    run_rt(scope, "elementwise_add", {{"X", {"x"}}, {"Y", {"row"}}}, {{"Out", {"row" + s}}}, attrs);
    attribute_map axis1 = attrs;
    axis1.set("axis", 1);
    run_rt(scope, "elementwise_add", {{"X", {"x"}}, {"Y", {"channel"}}}, {{"Out", {"channel" + s}}}, axis1);
  }
  for (const std::string name : {"relu", "relu_blocked", "same", "row", "channel"}) {
    INFO(name);
    CHECK(values<float>(scope.get(name + "_dnn")) == values<float>(scope.get(name + "_plain")));
  }
}

TEST_CASE("elementwise_sub and _div, oneDNN, X the broadcast operand: X - Y and X / Y, not Y - X",
          "[ops][elementwise_sub][elementwise_div][onednn][regression]") {
  // oneDNN 2 broadcasts its second source only: the full operand goes first, which for sub and
  // div must not swap the operation (ONNX's 1 - x, a per-channel constant over a conv output).
  Scope scope;
  scope.var("row").set(LoDTensor(random_tensor<float>({5}, 0.5, 2)));
  scope.var("channel").set(LoDTensor(random_tensor<float>({20, 1, 1}, 0.5, 2)));
  scope.var("full").set(LoDTensor(random_tensor<float>({3, 20, 4, 5}, 0.5, 2, data_layout::nchw)));
  scope.var("full8").set(
      LoDTensor(random_tensor<float>({3, 20, 4, 5}, 0.5, 2, data_layout_of<layout::nChw8c>)));
  scope.var("full16").set(
      LoDTensor(random_tensor<float>({3, 20, 4, 5}, 0.5, 2, data_layout_of<layout::nChw16c>)));
  for (const std::string op : {"elementwise_sub", "elementwise_div"})
    for (const std::string x : {"row", "channel"})
      for (const std::string y : {"full", "full8", "full16"}) {
        INFO(op << " X " << x << " Y " << y);
        for (const bool dnn : {false, true})
          run_rt(scope, op, {{"X", {x}}, {"Y", {y}}}, {{"Out", {dnn ? "dnn" : "plain"}}},
                 attribute_map{{"use_onednn", dnn}});
        const std::vector<float> dnn = values<float>(scope.get("dnn")),
                                 plain = values<float>(scope.get("plain"));
        CHECK(dnn == plain);
        // The plain kernel's first element in NCHW order: X's first element against Y's.
        const float x0 = values<float>(scope.get(x))[0], y0 = values<float>(scope.get(y))[0];
        CHECK(plain[0] == (op == "elementwise_sub" ? x0 - y0 : x0 / y0));
      }
}

TEST_CASE(
    "elementwise ops, oneDNN, a blocked operand against one of a higher rank: a row-major Out of that rank",
    "[ops][elementwise][onednn][regression]") {
  // [3, 20, 4, 5] in nChw8c or nChw16c with [1, 1, 1, 1, 5] broadcasts to [1, 3, 20, 4, 5]:
  // Out has the blocked operand's elements but not its rank, so no 4-D blocked layout holds it
  // (the oneDNN kernel made Out in the operand's layout and failed).
  Scope scope;
  scope.var("row5").set(LoDTensor(random_tensor<float>({1, 1, 1, 1, 5}, 0.5, 2)));
  scope.var("full8").set(
      LoDTensor(random_tensor<float>({3, 20, 4, 5}, 0.5, 2, data_layout_of<layout::nChw8c>)));
  scope.var("full16").set(
      LoDTensor(random_tensor<float>({3, 20, 4, 5}, 0.5, 2, data_layout_of<layout::nChw16c>)));
  for (const std::string op : {"elementwise_add", "elementwise_mul", "elementwise_sub", "elementwise_div"})
    for (const std::string full : {"full8", "full16"})
      for (const bool full_is_x : {true, false}) {
        const std::string x = full_is_x ? full : "row5", y = full_is_x ? "row5" : full;
        INFO(op << " X " << x << " Y " << y);
        for (const bool dnn : {false, true})
          run_rt(scope, op, {{"X", {x}}, {"Y", {y}}}, {{"Out", {dnn ? "dnn" : "plain"}}},
                 attribute_map{{"use_onednn", dnn}});
        const Tensor& out = scope.get("dnn").get<LoDTensor>();
        CHECK(out.dims() == dims{1, 3, 20, 4, 5});
        CHECK(!out.layout().blocked());
        CHECK(values<float>(scope.get("dnn")) == values<float>(scope.get("plain")));
      }
}
#endif

// --- softmax_with_cross_entropy -------------------------------------------------------------

TEMPLATE_TEST_CASE("softmax_with_cross_entropy: against softmax and cross entropy in long double",
                   "[ops][softmax_with_cross_entropy]", float, double) {
  const double tol = std::is_same_v<TestType, float> ? 1e-5 : 1e-12;
  const std::int64_t rows = 6, classes = 5;
  for (const double scale : {1.0, 1000.0}) {  // 1000: exp would overflow without the shift
    INFO("scale " << scale);
    Scope scope;
    const Tensor logits = random_tensor<TestType>({rows, classes}, -scale, scale);
    const std::vector<std::int64_t> labels{0, 4, 2, -100, 1, 3};
    scope.var("logits").set(LoDTensor(logits, {{0, 2, 6}}));
    scope.var("label").set(LoDTensor(ids_tensor(labels)));
    run_rt(scope, "softmax_with_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"label"}}},
           {{"Softmax", {"softmax"}}, {"Loss", {"loss"}}});
    const std::vector<TestType> x = values<TestType>(logits);
    std::vector<long double> softmax, loss;
    for (std::int64_t r = 0; r < rows; ++r) {
      long double max = x[std::size_t(r * classes)], sum = 0;
      for (std::int64_t j = 0; j < classes; ++j)
        max = std::max<long double>(max, x[std::size_t(r * classes + j)]);
      for (std::int64_t j = 0; j < classes; ++j)
        sum += std::exp((long double)x[std::size_t(r * classes + j)] - max);
      for (std::int64_t j = 0; j < classes; ++j)
        softmax.push_back(std::exp((long double)x[std::size_t(r * classes + j)] - max) / sum);
      const std::int64_t l = labels[std::size_t(r)];  // -log softmax[l], without underflow
      loss.push_back(l == -100 ? 0.0L : max + std::log(sum) - x[std::size_t(r * classes + l)]);
    }
    check_close(values<TestType>(scope.get("softmax")), softmax, tol);
    check_close(values<TestType>(scope.get("loss")), loss, tol);
    CHECK(scope.get("loss").get<LoDTensor>().dims() == dims{rows, 1});
    CHECK(scope.get("loss").get<LoDTensor>().lod() == lod{{0, 2, 6}});
  }
}

TEST_CASE("softmax_with_cross_entropy: soft labels, Logits decide the data type, bad labels",
          "[ops][softmax_with_cross_entropy]") {
  Scope scope;
  const Tensor logits = random_tensor<double>({4, 3}, -3, 3);
  Tensor soft = random_tensor<double>({4, 3}, 0, 1);
  for (int r = 0; r < 4; ++r) {
    double* row = soft.data<double>() + r * 3;
    const double total = row[0] + row[1] + row[2];
    for (int j = 0; j < 3; ++j) row[j] /= total;
  }
  scope.var("logits").set(LoDTensor(logits));
  scope.var("soft").set(LoDTensor(soft));
  scope.var("hard").set(LoDTensor(ids_tensor({2, 0, 1, 7})));
  const kernel_choice choice =
      run_rt(scope, "softmax_with_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"soft"}}},
             {{"Softmax", {"p"}}, {"Loss", {"loss"}}}, {{"soft_label", true}});
  CHECK(choice.chosen.dtype() == data_type::float64);
  const std::vector<double> p = values<double>(scope.get("p")), loss = values<double>(scope.get("loss"));
  for (int r = 0; r < 4; ++r) {
    long double expected = 0;
    for (int j = 0; j < 3; ++j)
      expected -= soft.data<double>()[r * 3 + j] * std::log((long double)p[std::size_t(r * 3 + j)]);
    CHECK(loss[std::size_t(r)] == Approx(double(expected)).epsilon(1e-12));
  }
  // Int64 labels next to float logits: Logits decide, the labels are never transformed.
  CHECK_THROWS_WITH(
      run_rt(scope, "softmax_with_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"hard"}}},
             {{"Softmax", {"p2"}}, {"Loss", {"loss2"}}}),
      Catch::Contains("operator 'softmax_with_cross_entropy': Label 7 of row 3 is outside [0, 3)"));
  // 1-D Logits with sequence offsets: Loss has one row, which the offsets do not fit. Refused
  // before either output is written.
  scope.var("seq_logits").set(LoDTensor(random_tensor<double>({5}), {{0, 2, 5}}));
  scope.var("one_label").set(LoDTensor(ids_tensor({1})));
  scope.var("p3").set(LoDTensor(logits));
  CHECK_THROWS_WITH(
      run_rt(scope, "softmax_with_cross_entropy", {{"Logits", {"seq_logits"}}, {"Label", {"one_label"}}},
             {{"Softmax", {"p3"}}, {"Loss", {"loss3"}}}),
      Catch::Contains("LoD level 0 ends at 5, but the tensor has 1 entries"));
  CHECK(scope.get("p3").get<LoDTensor>().shares_buffer_with(logits));
  const Variable* loss3 = scope.find_var("loss3");
  CHECK((loss3 == nullptr || !loss3->initialized()));
}

// --- lookup_table and lookup_table_grad -----------------------------------------------------

TEMPLATE_TEST_CASE("lookup_table: rows of W by id, padding_idx rows zero, Ids' LoD kept",
                   "[ops][lookup_table]", float, double) {
  Scope scope;
  const Tensor w = random_tensor<TestType>({10, 4});
  const std::vector<std::int64_t> ids{3, 0, 9, 3, 7, 2};
  scope.var("w").set(LoDTensor(w));
  scope.var("ids").set(LoDTensor(ids_tensor(ids), {{0, 4, 6}}));
  run_rt(scope, "lookup_table", {{"W", {"w"}}, {"Ids", {"ids"}}}, {{"Out", {"out"}}},
         {{"padding_idx", std::int64_t(7)}});
  const LoDTensor& out = scope.get("out").get<LoDTensor>();
  CHECK(out.dims() == dims{6, 4});
  CHECK(out.lod() == lod{{0, 4, 6}});
  const std::vector<TestType> table = values<TestType>(w), got = values<TestType>(out);
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (std::size_t j = 0; j < 4; ++j)
      CHECK(got[i * 4 + j] == (ids[i] == 7 ? TestType(0) : table[std::size_t(ids[i]) * 4 + j]));

  scope.var("bad").set(LoDTensor(ids_tensor({1, 10})));
  CHECK_THROWS_WITH(
      run_rt(scope, "lookup_table", {{"W", {"w"}}, {"Ids", {"bad"}}}, {{"Out", {"out2"}}}),
      Catch::Contains("operator 'lookup_table': Ids[1] = 10 is outside the table's rows [0, 10)"));
}

TEMPLATE_TEST_CASE("lookup_table_grad: the sparse and the dense gradient describe the same matrix",
                   "[ops][lookup_table_grad]", float, double) {
  Scope scope;
  const std::int64_t rows = 12, width = 3;
  const std::vector<std::int64_t> ids{5, 1, 5, 11, 0, 5, 4};  // repeats, and 4 is the padding row
  scope.var("w").set(LoDTensor(random_tensor<TestType>({rows, width})));
  scope.var("ids").set(LoDTensor(ids_tensor(ids)));
  scope.var("dout").set(LoDTensor(random_tensor<TestType>({std::int64_t(ids.size()), width})));
  const slot_names in{{"W", {"w"}}, {"Ids", {"ids"}}, {"Out@GRAD", {"dout"}}};
  run_rt(scope, "lookup_table_grad", in, {{"W@GRAD", {"sparse"}}},
         {{"is_sparse", true}, {"padding_idx", std::int64_t(4)}});
  run_rt(scope, "lookup_table_grad", in, {{"W@GRAD", {"dense"}}},
         {{"is_sparse", false}, {"padding_idx", std::int64_t(4)}});
  const SelectedRows& sparse = scope.get("sparse").get<SelectedRows>();
  CHECK(sparse.rows() == ids);
  CHECK(sparse.height() == rows);
  CHECK(sparse.value().dims() == dims{std::int64_t(ids.size()), width});
  const LoDTensor& dense = scope.get("dense").get<LoDTensor>();
  CHECK(dense.dims() == dims{rows, width});

  // Densify the SelectedRows (repeated rows add up) and compare; and both against the sum
  // of the gradient rows per id.
  std::vector<TestType> from_sparse(std::size_t(rows * width), 0), expected(std::size_t(rows * width), 0);
  const std::vector<TestType> value = values<TestType>(sparse.value()),
                              dout = values<TestType>(scope.get("dout"));
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (std::size_t j = 0; j < std::size_t(width); ++j) {
      from_sparse[std::size_t(ids[i] * width) + j] += value[i * std::size_t(width) + j];
      if (ids[i] != 4) expected[std::size_t(ids[i] * width) + j] += dout[i * std::size_t(width) + j];
    }
  CHECK(values<TestType>(dense) == from_sparse);
  CHECK(from_sparse == expected);
}

TEST_CASE("lookup_table_grad and sum in a program: InferVarType, then the kinds the kernels write",
          "[ops][lookup_table_grad][sum][program]") {
  ProgramDesc program;
  BlockDesc& block = program.global_block();
  block.var("emb") = VarDesc{"emb", var_kind::lod_tensor, data_type::float32, {20, 4}, true};
  block.var("ids") = VarDesc{"ids", var_kind::lod_tensor, data_type::int64, {-1, 1}};
  block.var("dout") = VarDesc{"dout", var_kind::lod_tensor, data_type::float32, {-1, 4}};
  block.var("dense_grad_in") = VarDesc{"dense_grad_in", var_kind::lod_tensor, data_type::float32, {20, 4}};
  const slot_map in{{"W", {"emb"}}, {"Ids", {"ids"}}, {"Out@GRAD", {"dout"}}};
  block.append_op(OpDesc("lookup_table_grad", in, {{"W@GRAD", {"g_sparse"}}}, {{"is_sparse", true}}));
  block.append_op(OpDesc("lookup_table_grad", in, {{"W@GRAD", {"g_sparse2"}}}, {{"is_sparse", true}}));
  block.append_op(OpDesc("lookup_table_grad", in, {{"W@GRAD", {"g_dense"}}}, {{"is_sparse", false}}));
  block.append_op(OpDesc("sum", {{"X", {"g_sparse", "g_sparse2"}}}, {{"Out", {"sum_sparse"}}}));
  block.append_op(OpDesc("sum", {{"X", {"g_sparse", "dense_grad_in", "g_dense"}}}, {{"Out", {"sum_mixed"}}}));
  CHECK(block.get_var("g_sparse").kind == var_kind::selected_rows);
  CHECK(block.get_var("g_dense").kind == var_kind::lod_tensor);
  CHECK(block.get_var("sum_sparse").kind == var_kind::selected_rows);
  CHECK(block.get_var("sum_mixed").kind == var_kind::lod_tensor);

  Scope scope;
  scope.var("emb").set(LoDTensor(random_tensor<float>({20, 4})));
  scope.var("ids").set(LoDTensor(ids_tensor({3, 19, 3})));
  scope.var("dout").set(LoDTensor(random_tensor<float>({3, 4})));
  scope.var("dense_grad_in").set(LoDTensor(random_tensor<float>({20, 4})));
  Executor executor(cpu_place);
  executor.run(program.block(0), scope);
  for (const VarDesc& v : block.vars()) {
    INFO(v.name);
    CHECK(scope.get(v.name).kind() == v.kind);
  }
  const SelectedRows& s = scope.get("sum_sparse").get<SelectedRows>();
  CHECK(s.rows() == std::vector<std::int64_t>{3, 19, 3, 3, 19, 3});
  CHECK(s.height() == 20);
  // dense_grad_in + 2 x the dense gradient (the sparse one densified is the same matrix).
  const std::vector<float> mixed = values<float>(scope.get("sum_mixed")),
                           in_dense = values<float>(scope.get("dense_grad_in")),
                           grad = values<float>(scope.get("g_dense"));
  for (std::size_t i = 0; i < mixed.size(); ++i)
    CHECK(mixed[i] == Approx(in_dense[i] + 2 * grad[i]).epsilon(1e-6));
}

// --- sum ------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("sum over LoDTensor and SelectedRows inputs, Fluid's semantics", "[ops][sum]", float,
                   double) {
  Scope scope;
  const Tensor a = random_tensor<TestType>({5, 3}), b = random_tensor<TestType>({5, 3});
  scope.var("a").set(LoDTensor(a, {{0, 2, 5}}));
  scope.var("b").set(LoDTensor(b));
  scope.var("empty").set(LoDTensor(Tensor({0, 3}, data_type_of<TestType>)));
  scope.var("s1").set(SelectedRows({4, 0, 4}, 5, random_tensor<TestType>({3, 3})));
  scope.var("s2").set(SelectedRows({2}, 5, random_tensor<TestType>({1, 3})));
  scope.var("s_none").set(SelectedRows({}, 5));
  const std::vector<TestType> av = values<TestType>(a), bv = values<TestType>(b);
  auto add_rows = [](std::vector<TestType>& dense, const SelectedRows& s) {
    const std::vector<TestType> v = values<TestType>(s.value());
    for (std::size_t r = 0; r < s.rows().size(); ++r)
      for (std::size_t j = 0; j < 3; ++j) dense[std::size_t(s.rows()[r]) * 3 + j] += v[r * 3 + j];
  };

  SECTION("dense inputs add elementwise; empty ones are skipped; the first's LoD is kept") {
    run_rt(scope, "sum", {{"X", {"a", "empty", "b"}}}, {{"Out", {"out"}}});
    std::vector<TestType> expected(av.size());
    for (std::size_t i = 0; i < av.size(); ++i) expected[i] = TestType(0) + av[i] + bv[i];
    CHECK(values<TestType>(scope.get("out")) == expected);
    CHECK(scope.get("out").get<LoDTensor>().lod() == lod{{0, 2, 5}});
  }
  SECTION("a dense input makes the output dense: SelectedRows rows add into it") {
    run_rt(scope, "sum", {{"X", {"s1", "a", "s2", "s_none", "b"}}}, {{"Out", {"out"}}});
    std::vector<TestType> expected(av.size());
    for (std::size_t i = 0; i < av.size(); ++i) expected[i] = TestType(0) + av[i] + bv[i];
    add_rows(expected, scope.get("s1").get<SelectedRows>());
    add_rows(expected, scope.get("s2").get<SelectedRows>());
    check_close(values<TestType>(scope.get("out")), expected, tolerance<TestType>());
  }
  SECTION("all SelectedRows: rows and values concatenated") {
    run_rt(scope, "sum", {{"X", {"s1", "s_none", "s2"}}}, {{"Out", {"out"}}});
    const SelectedRows& out = scope.get("out").get<SelectedRows>();
    CHECK(out.rows() == std::vector<std::int64_t>{4, 0, 4, 2});
    CHECK(out.height() == 5);
    std::vector<TestType> expected = values<TestType>(scope.get("s1").get<SelectedRows>().value());
    const std::vector<TestType> v2 = values<TestType>(scope.get("s2").get<SelectedRows>().value());
    expected.insert(expected.end(), v2.begin(), v2.end());
    CHECK(values<TestType>(out.value()) == expected);
    CHECK(out.value().dims() == dims{4, 3});
  }
  SECTION("in place: Out is X[0], as gradient accumulation does") {
    run_rt(scope, "sum", {{"X", {"a", "b", "s2"}}}, {{"Out", {"a"}}});
    std::vector<TestType> expected(av.size());
    for (std::size_t i = 0; i < av.size(); ++i) expected[i] = TestType(0) + av[i] + bv[i];
    add_rows(expected, scope.get("s2").get<SelectedRows>());
    check_close(values<TestType>(scope.get("a")), expected, tolerance<TestType>());
  }
  SECTION("LoDTensorArray inputs add element by element, as long as the longest; Out may be X[0]") {
    const Tensor c = random_tensor<TestType>({2, 3});
    const std::vector<TestType> cv = values<TestType>(c);
    scope.var("arr1").set(LoDTensorArray{LoDTensor(a, {{0, 2, 5}}), LoDTensor(c)});
    // Element 0 shares arr1's offsets; element 1 is empty and adds nothing; element 2 only
    // this array has.
    scope.var("arr2").set(LoDTensorArray{LoDTensor(b, {{0, 2, 5}}), LoDTensor(), LoDTensor(c)});
    // In place, Out keeps at least X[0]'s length, as Fluid's sum into X[0] does: X[0]'s empty
    // last element stays.
    scope.var("arr_short").set(LoDTensorArray{LoDTensor(c)});
    scope.var("arr_long").set(LoDTensorArray{LoDTensor(c), LoDTensor(), LoDTensor(), LoDTensor()});
    run_rt(scope, "sum", {{"X", {"arr_long", "arr_short"}}}, {{"Out", {"arr_long"}}});
    CHECK(scope.get("arr_long").get<LoDTensorArray>().size() == 4);
    run_rt(scope, "sum", {{"X", {"arr_short", "arr_long"}}}, {{"Out", {"arr_short_sum"}}});
    CHECK(scope.get("arr_short_sum").get<LoDTensorArray>().size() == 1);
    // Still in place when the executor moves X[0] (its element in nChw8c, which the kernel
    // does not take) into a child scope: the copy keeps X[0]'s name.
    {
      const Tensor blocked = transform(
          random_tensor<TestType>({1, 8, 1, 1}, -1, 1, data_layout::nchw),
          kernel_key{cpu_place, data_type_of<TestType>, data_layout_of<layout::nChw8c>, library_type::plain});
      scope.var("arr_blocked").set(LoDTensorArray{LoDTensor(blocked), LoDTensor()});
      scope.var("arr_one").set(LoDTensorArray{LoDTensor(random_tensor<TestType>({1, 8, 1, 1}))});
      Executor executor(cpu_place);
      executor.run(
          std::vector<op_invocation>{
              {"sum", {{"X", {"arr_blocked", "arr_one"}}}, {{"Out", {"arr_blocked"}}}, {}}},
          scope);
      CHECK(executor.stats().transforms > 0);
      CHECK(scope.get("arr_blocked").get<LoDTensorArray>().size() == 2);
    }
    for (const std::string out : {"arr_out", "arr1"}) {
      run_rt(scope, "sum", {{"X", {"arr1", "arr2"}}}, {{"Out", {out}}});
      const LoDTensorArray& sum = scope.get(out).get<LoDTensorArray>();
      REQUIRE(sum.size() == 3);
      std::vector<TestType> e0(av.size());
      for (std::size_t i = 0; i < av.size(); ++i) e0[i] = TestType(0) + av[i] + bv[i];
      CHECK(values<TestType>(sum[0]) == e0);
      CHECK(sum[0].lod() == lod{{0, 2, 5}});
      CHECK(values<TestType>(sum[1]) == cv);
      CHECK(values<TestType>(sum[2]) == cv);
    }
    // The inputs' own elements are not written (arr2's element 0 was added into a new tensor).
    CHECK(values<TestType>(scope.get("arr2").get<LoDTensorArray>()[0]) == bv);
    scope.var("arr3").set(LoDTensorArray{LoDTensor(b, {{0, 5}})});
    CHECK_THROWS_WITH(run_rt(scope, "sum", {{"X", {"arr2", "arr3"}}}, {{"Out", {"out"}}}),
                      Catch::Contains("operator 'sum': the elements 0 of the arrays of X must share their "
                                      "offsets"));
    CHECK_THROWS_WITH(run_rt(scope, "sum", {{"X", {"arr2", "b"}}}, {{"Out", {"out"}}}),
                      Catch::Contains("operator 'sum': if any input of X is a LoDTensorArray, all must be"));
    CHECK_THROWS_WITH(run_rt(scope, "sum", {{"X", {"b", "arr2"}}}, {{"Out", {"out"}}}),
                      Catch::Contains("operator 'sum': if any input of X is a LoDTensorArray, all must be"));
    CHECK_FALSE((scope.find_var("out") != nullptr && scope.get("out").initialized()));
  }
  SECTION("mismatches are errors naming the operator") {
    scope.var("tall").set(SelectedRows({7}, 8, random_tensor<TestType>({1, 3})));
    CHECK_THROWS_WITH(
        run_rt(scope, "sum", {{"X", {"a", "tall"}}}, {{"Out", {"out"}}}),
        Catch::Contains("operator 'sum': a SelectedRows input of height 8 cannot be added into the "
                        "dense sum's 5 rows"));
    CHECK_THROWS_WITH(run_rt(scope, "sum", {{"X", {"s1", "tall"}}}, {{"Out", {"out"}}}),
                      Catch::Contains("the SelectedRows inputs of X must share one height: 5 and 8"));
    // Rows set apart from the value: one index left for a value of two rows is refused, by
    // the concatenation and by the dense sum alike.
    SelectedRows apart({0, 1}, 5, random_tensor<TestType>({2, 3}));
    apart.set_rows({2});
    scope.var("apart").set(apart);
    for (const char* other : {"s2", "a"})
      CHECK_THROWS_WITH(
          run_rt(scope, "sum", {{"X", {other, "apart"}}}, {{"Out", {"out"}}}),
          Catch::Contains("operator 'sum'") && Catch::Contains("must have one row per index (1)"));
  }
}

// --- crf_decoding ---------------------------------------------------------------------------

namespace {
// The best path of one sequence by trying every path.
template <class T>
std::vector<std::int64_t> brute_force_path(const T* x, std::int64_t length, std::int64_t tags, const T* w) {
  std::vector<std::int64_t> path(std::size_t(length), 0), best;
  long double best_score = -INFINITY;
  while (true) {
    long double score = (long double)w[path[0]] + w[tags + path.back()];
    for (std::int64_t k = 0; k < length; ++k) {
      score += x[k * tags + path[std::size_t(k)]];
      if (k > 0) score += w[(2 + path[std::size_t(k - 1)]) * tags + path[std::size_t(k)]];
    }
    if (score > best_score) {
      best_score = score;
      best = path;
    }
    std::size_t d = 0;  // the next path, as a number in base `tags`
    while (d < path.size() && ++path[d] == tags) path[d++] = 0;
    if (d == path.size()) break;
  }
  return best;
}
}  // namespace

TEMPLATE_TEST_CASE("crf_decoding: Viterbi against every path of short sequences", "[ops][crf_decoding]",
                   float, double) {
  for (const std::int64_t tags : {1, 3, 4}) {
    INFO("tags " << tags);
    const lod offsets{{0, 3, 4, 4, 8, 10}};  // lengths 3, 1, 0, 4, 2
    Scope scope;
    const Tensor emission = random_tensor<TestType>({10, tags}, -2, 2);
    const Tensor transition = random_tensor<TestType>({tags + 2, tags}, -2, 2);
    scope.var("emission").set(LoDTensor(emission, offsets));
    scope.var("transition").set(LoDTensor(transition));
    const kernel_choice choice =
        run_rt(scope, "crf_decoding", {{"Emission", {"emission"}}, {"Transition", {"transition"}}},
               {{"ViterbiPath", {"path"}}});
    CHECK(choice.chosen ==
          kernel_key{cpu_place, data_type_of<TestType>, data_layout::any, library_type::plain});
    const LoDTensor& path = scope.get("path").get<LoDTensor>();
    CHECK(path.dims() == dims{10, 1});
    CHECK(path.dtype() == data_type::int64);
    CHECK(path.lod() == offsets);
    const std::vector<std::int64_t> got = values<std::int64_t>(path);
    for (std::size_t s = 0; s + 1 < offsets[0].size(); ++s) {
      const auto begin = std::int64_t(offsets[0][s]), length = std::int64_t(offsets[0][s + 1]) - begin;
      if (length == 0) continue;
      INFO("sequence " << s);
      const std::vector<std::int64_t> expected = brute_force_path(emission.data<TestType>() + begin * tags,
                                                                  length, tags, transition.data<TestType>());
      CHECK(std::vector<std::int64_t>(got.begin() + begin, got.begin() + begin + length) == expected);
    }
  }
}

TEST_CASE("crf_decoding: the static path reads a bare tensor as one sequence; it always runs on the CPU",
          "[ops][crf_decoding][static]") {
  const typed_tensor<cpu, double> emission(random_tensor<double>({5, 3}));
  const typed_tensor<cpu, double> transition(random_tensor<double>({5, 3}));
  static_assert(std::is_same_v<
                static_kernel_type<ops::crf_decoding, target<cpu>, decltype(emission), decltype(transition)>,
                kernel_type<cpu, double>>);
  Tensor path;
  run<ops::crf_decoding>(target<cpu>(), inputs(emission, transition), outputs(path));
  CHECK(values<std::int64_t>(path) == brute_force_path(emission.data(), 5, 3, transition.data()));
  CHECK(find_operator("crf_decoding").run_on() == cpu_place);
  Scope scope;
  scope.var("e").set(LoDTensor(random_tensor<double>({4, 3})));
  scope.var("t").set(LoDTensor(random_tensor<double>({4, 3})));
  CHECK_THROWS_WITH(
      run_rt(scope, "crf_decoding", {{"Emission", {"e"}}, {"Transition", {"t"}}}, {{"ViterbiPath", {"p"}}}),
      Catch::Contains("operator 'crf_decoding': Transition must be [tags + 2, tags] = [5, 3], not [4, 3]"));
}

// --- a network through the executor ---------------------------------------------------------

namespace {
// A small sequence tagger: embedding, fc + relu, fc to tag scores, elementwise_add of a
// bias row, the loss against gold tags, and Viterbi decoding. `dnn` asks for oneDNN's
// kernels where an operator has them.
ProgramDesc tagger(bool dnn) {
  ProgramDesc program;
  BlockDesc& b = program.global_block();
  b.var("emb") = VarDesc{"emb", var_kind::lod_tensor, data_type::float32, {50, 8}, true};
  b.var("w1") = VarDesc{"w1", var_kind::lod_tensor, data_type::float32, {8, 16}, true};
  b.var("b1") = VarDesc{"b1", var_kind::lod_tensor, data_type::float32, {16}, true};
  b.var("w2") = VarDesc{"w2", var_kind::lod_tensor, data_type::float32, {16, 4}, true};
  b.var("tag_bias") = VarDesc{"tag_bias", var_kind::lod_tensor, data_type::float32, {4}, true};
  b.var("transition") = VarDesc{"transition", var_kind::lod_tensor, data_type::float32, {6, 4}, true};
  b.var("words") = VarDesc{"words", var_kind::lod_tensor, data_type::int64, {-1, 1}};
  b.var("gold") = VarDesc{"gold", var_kind::lod_tensor, data_type::int64, {-1, 1}};
  const attribute_map use{{"use_onednn", dnn}};
  b.append_op(OpDesc("lookup_table", {{"W", {"emb"}}, {"Ids", {"words"}}}, {{"Out", {"x"}}},
                     {{"padding_idx", std::int64_t(0)}}));
  b.append_op(OpDesc("fc", {{"Input", {"x"}}, {"W", {"w1"}}, {"Bias", {"b1"}}}, {{"Out", {"h"}}}, use));
  b.append_op(OpDesc("relu", {{"X", {"h"}}}, {{"Out", {"h_relu"}}}, use));
  b.append_op(OpDesc("mul", {{"X", {"h_relu"}}, {"Y", {"w2"}}}, {{"Out", {"scores"}}}, use));
  b.append_op(
      OpDesc("elementwise_add", {{"X", {"scores"}}, {"Y", {"tag_bias"}}}, {{"Out", {"emission"}}}, use));
  b.append_op(OpDesc("softmax_with_cross_entropy", {{"Logits", {"emission"}}, {"Label", {"gold"}}},
                     {{"Softmax", {"probs"}}, {"Loss", {"loss"}}}));
  b.append_op(OpDesc("crf_decoding", {{"Emission", {"emission"}}, {"Transition", {"transition"}}},
                     {{"ViterbiPath", {"path"}}}));
  return program;
}
}  // namespace

TEST_CASE("a sequence tagger as a program: plain and oneDNN kernels agree, LoD flows to the path",
          "[ops][executor][program]") {
  Scope weights;
  weights.var("emb").set(LoDTensor(random_tensor<float>({50, 8})));
  weights.var("w1").set(LoDTensor(random_tensor<float>({8, 16})));
  weights.var("b1").set(LoDTensor(random_tensor<float>({16})));
  weights.var("w2").set(LoDTensor(random_tensor<float>({16, 4})));
  weights.var("tag_bias").set(LoDTensor(random_tensor<float>({4})));
  weights.var("transition").set(LoDTensor(random_tensor<float>({6, 4})));
  const lod sentences{{0, 4, 5, 9}};
  weights.var("words").set(LoDTensor(ids_tensor({3, 17, 0, 42, 8, 1, 1, 49, 23}), sentences));
  weights.var("gold").set(LoDTensor(ids_tensor({0, 3, 2, 1, 1, 0, 2, 3, 3})));

  const std::vector<std::string> outputs{"x", "h", "h_relu", "scores", "emission", "probs", "loss"};
  std::vector<std::vector<float>> results[2];
  std::vector<std::int64_t> paths[2];
  for (const bool dnn : {false, true}) {
    Scope& scope = weights.new_scope();
    Executor executor(cpu_place);
    executor.run(tagger(dnn).block(0), scope);
    CHECK(executor.stats().fallbacks ==
          (dnn && !FLUIDK_OPS_ONEDNN ? 4 : 0));  // without oneDNN: plain kernels
    for (const std::string& name : outputs) results[dnn].push_back(values<float>(scope.get(name)));
    paths[dnn] = values<std::int64_t>(scope.get("path"));
    CHECK(scope.get("path").get<LoDTensor>().lod() == sentences);
    CHECK(scope.get("emission").get<LoDTensor>().dims() == dims{9, 4});
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    INFO(outputs[i]);
    check_close(results[1][i], results[0][i], 1e-4);
  }
  CHECK(paths[1] == paths[0]);
  // The padding word (id 0) embeds as zeros.
  CHECK(std::all_of(results[0][0].begin() + 2 * 8, results[0][0].begin() + 3 * 8,
                    [](float v) { return v == 0; }));
}

TEMPLATE_TEST_CASE("fill_constant: the dtype attribute decides the kernel; every element is value",
                   "[ops][fill_constant]", float, double, std::int32_t, std::int64_t) {
  using T = TestType;
  Scope scope;
  const attribute_map attrs{{"shape", std::vector<std::int64_t>{2, 3}},
                            {"value", 2.5},
                            {"dtype", std::string(name_of(data_type_of<T>))}};
  const kernel_choice choice = run_rt(scope, "fill_constant", {}, {{"Out", {"out"}}}, attrs);
  CHECK(choice.chosen == kernel_type<cpu, T>::key());
  const Tensor& out = scope.get("out").get<LoDTensor>();
  CHECK(out.dims() == dims{2, 3});
  for (std::int64_t i = 0; i < out.numel(); ++i) CHECK(out.data<T>()[i] == T(2.5));
  // The static path: the data type is the call's.
  Tensor y;
  run<ops::fill_constant, T>(target<cpu>(), inputs(), outputs(y), {{"shape", std::vector<std::int32_t>{4}}});
  REQUIRE(y.dtype() == data_type_of<T>);
  for (std::int64_t i = 0; i < 4; ++i) CHECK(y.data<T>()[i] == T(0));
}

TEST_CASE("fill_constant: an integer value is exact, a value out of the data type's range an error",
          "[ops][fill_constant]") {
  Scope scope;
  auto fill = [&](const std::string& dtype, attribute value) {
    run_rt(scope, "fill_constant", {}, {{"Out", {"out"}}},
           {{"shape", std::vector<std::int64_t>{2}}, {"value", std::move(value)}, {"dtype", dtype}});
    return scope.get("out").get<LoDTensor>();
  };
  // 2^53 + 1 has no double: read as the int64 it is.
  const std::int64_t odd = (std::int64_t(1) << 53) + 1;
  CHECK(fill("int64", odd).data<std::int64_t>()[1] == odd);
  CHECK(fill("int64", std::numeric_limits<std::int64_t>::min()).data<std::int64_t>()[0] ==
        std::numeric_limits<std::int64_t>::min());
  CHECK(fill("int64", -9223372036854775808.0).data<std::int64_t>()[0] ==
        std::numeric_limits<std::int64_t>::min());
  CHECK(fill("int32", -2147483648.5).data<std::int32_t>()[0] == std::numeric_limits<std::int32_t>::min());
  CHECK(fill("int32", std::int64_t(-7)).data<std::int32_t>()[1] == -7);
  CHECK(fill("float32", odd).data<float>()[0] == float(odd));
  // FLT_MAX as printed (3.4028235e38, a double above it) rounds to it.
  CHECK(fill("float32", 3.4028235e38).data<float>()[0] == std::numeric_limits<float>::max());
  const std::vector<std::pair<std::string, attribute>> refused{
      {"int32", std::int64_t(1) << 40},
      {"int32", 2147483648.0},
      {"int32", -2147483649.0},
      {"int64", 9223372036854775808.0},
      {"int64", std::nan("")},
      {"int64", std::numeric_limits<double>::infinity()},
      {"float32", 1e300},
      {"float32", -1e39},
      {"float32", 0x1.ffffffp127}};
  for (std::size_t k = 0; k < refused.size(); ++k) {
    const auto& [dtype, value] = refused[k];
    INFO("refused[" << k << "], " << dtype);
    CHECK_THROWS_WITH(fill(dtype, value), Catch::Contains("operator 'fill_constant': attribute 'value' = ") &&
                                              Catch::Contains(std::string(name_of(parse_data_type(dtype)))));
  }
}

TEST_CASE("fill_constant: str_value, as Fluid writes it beside value, is the value read",
          "[ops][fill_constant]") {
  Scope scope;
  auto fill = [&](const std::string& dtype, float value, const std::string& text) {
    run_rt(
        scope, "fill_constant", {}, {{"Out", {"out"}}},
        {{"shape", std::vector<std::int64_t>{2}}, {"value", value}, {"str_value", text}, {"dtype", dtype}});
    return scope.get("out").get<LoDTensor>();
  };
  // A float holds neither 123456789 nor 2^53 + 1; the text does.
  CHECK(fill("int64", 123456789.f, "123456789").data<std::int64_t>()[1] == 123456789);
  CHECK(fill("int64", 9007199254740993.f, "9007199254740993").data<std::int64_t>()[0] == 9007199254740993);
  CHECK(fill("int32", -2147483648.f, "-2147483648").data<std::int32_t>()[0] ==
        std::numeric_limits<std::int32_t>::min());
  CHECK(fill("float64", 0.1f, "0.1").data<double>()[0] == 0.1);
  CHECK(fill("float32", 0.1f, "0.1").data<float>()[1] == 0.1f);
  CHECK(std::isinf(fill("float32", 0.f, "-inf").data<float>()[0]));
  CHECK(std::isnan(fill("float64", 0.f, "nan").data<double>()[0]));
  CHECK(fill("bool", 0.f, "1.0").data<bool>()[0]);
  CHECK(fill("int64", 2.f, "").data<std::int64_t>()[0] == 2);  // empty: value is read
  for (const auto& [dtype, text, why] :
       std::vector<std::array<std::string, 3>>{{"int32", "2147483648", "is out of the range of"},
                                               {"int64", "9223372036854775808", "is out of the range of"},
                                               {"float32", "1e39", "is beyond the largest value of"},
                                               {"float64", "1e999", "is out of the range of"},
                                               {"int64", "12abc", "is not a number"},
                                               {"float32", " 1", "is not a number"}}) {
    INFO(dtype << " \"" << text << "\"");
    CHECK_THROWS_WITH(
        fill(dtype, 0.f, text),
        Catch::Contains("operator 'fill_constant': attribute 'str_value' = \"" + text + "\" " + why) &&
            Catch::Contains(std::string(why == "is not a number" ? "" : name_of(parse_data_type(dtype)))));
  }
}

TEST_CASE("fill_constant and uniform_random: a missing or bad attribute names the operator",
          "[ops][fill_constant][uniform_random]") {
  Scope scope;
  CHECK_THROWS_WITH(
      run_rt(scope, "fill_constant", {}, {{"Out", {"out"}}}, {{"shape", std::vector<std::int32_t>{2}}}),
      Catch::Contains("operator 'fill_constant' takes its data type from attribute 'dtype'"));
  CHECK_THROWS_WITH(
      run_rt(scope, "uniform_random", {}, {{"Out", {"out"}}}, {{"dtype", std::string("float32")}}),
      Catch::Contains("operator 'uniform_random': needs attribute 'shape'"));
  CHECK_THROWS_WITH(run_rt(scope, "fill_constant", {}, {{"Out", {"out"}}},
                           {{"dtype", std::string("float32")}, {"shape", std::vector<std::int32_t>{2, -1}}}),
                    Catch::Contains("operator 'fill_constant': attribute 'shape' has a negative extent"));
}

TEMPLATE_TEST_CASE("uniform_random: in [min, max), a function of (seed, index), spread evenly",
                   "[ops][uniform_random]", float, double) {
  using T = TestType;
  Scope scope;
  auto draw = [&](std::int64_t seed, const std::string& name) {
    run_rt(scope, "uniform_random", {}, {{"Out", {name}}},
           {{"shape", std::vector<std::int64_t>{100, 100}},
            {"min", -2.0},
            {"max", 3.0},
            {"seed", seed},
            {"dtype", std::string(name_of(data_type_of<T>))}});
    const Tensor& t = scope.get(name).get<LoDTensor>();
    return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
  };
  const std::vector<T> a = draw(7, "a"), b = draw(7, "b"), c = draw(8, "c");
  CHECK(a == b);
  CHECK(a != c);
  double sum = 0;
  std::array<int, 10> buckets{};
  for (T v : a) {
    REQUIRE(v >= T(-2));
    REQUIRE(v < T(3));
    sum += double(v);
    ++buckets[std::size_t((double(v) + 2.0) / 0.5)];
  }
  CHECK(std::abs(sum / double(a.size()) - 0.5) < 0.05);   // mean 0.5, sd of the mean 0.0144
  for (int n : buckets) CHECK(std::abs(n - 1000) < 150);  // 1000 each, sd about 30
  // Element i depends on (seed, i) only: a smaller draw is a prefix of a larger one.
  run_rt(scope, "uniform_random", {}, {{"Out", {"small"}}},
         {{"shape", std::vector<std::int64_t>{10}},
          {"min", -2.0},
          {"max", 3.0},
          {"seed", std::int64_t(7)},
          {"dtype", std::string(name_of(data_type_of<T>))}});
  const Tensor& small = scope.get("small").get<LoDTensor>();
  for (std::int64_t i = 0; i < 10; ++i) CHECK(small.data<T>()[i] == a[std::size_t(i)]);
  // min must lie below max.
  CHECK_THROWS_WITH(run_rt(scope, "uniform_random", {}, {{"Out", {"empty_range"}}},
                           {{"shape", std::vector<std::int64_t>{4}},
                            {"min", 1.0},
                            {"max", 1.0},
                            {"dtype", std::string(name_of(data_type_of<T>))}}),
                    Catch::Contains("operator 'uniform_random': needs attribute min below max"));
  // A range whose width overflows: every draw would be infinite.
  CHECK_THROWS_WITH(
      run_rt(scope, "uniform_random", {}, {{"Out", {"wide_range"}}},
             {{"shape", std::vector<std::int64_t>{4}},
              {"min", -double(std::numeric_limits<T>::max())},
              {"max", double(std::numeric_limits<T>::max())},
              {"dtype", std::string(name_of(data_type_of<T>))}}),
      Catch::Contains("operator 'uniform_random': needs attributes min and max finite, and max - "
                      "min too"));
}

TEST_CASE("uniform_random: the draw whose sum rounds up to max gives the value below it",
          "[ops][uniform_random]") {
  // Seed 0, element 14790804: u = 1 - 2^-24, the largest float draw; 1 + (2 - 1) * u rounds
  // to 2 in float.
  constexpr std::uint64_t i = 14790804;
  REQUIRE((ops::random::bits(0, i) >> 40) == 0xffffffu);
  CHECK(ops::random::uniform(0, i, 1.0f, 2.0f) == std::nextafter(2.0f, 1.0f));
  // In double the same draw lies below max as it is.
  CHECK(ops::random::uniform(0, i, 1.0, 2.0) < 2.0);
}
