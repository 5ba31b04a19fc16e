// The shape family of the example operators (matmul, gemm, flatten2, reshape2, concat): every
// kernel (CPU plain, oneDNN with blocked inputs where declared, OpenCL on PoCL) against naive
// references written here, on odd shapes, broadcasting, empty dimensions and views, and each
// refusal. The CUDA kernels run where a CUDA device exists (none where the tests are built).
//
// Tolerances: float 1e-4 relative (floor 1e-4 absolute) for products, double 1e-10; the
// shape operators and concat move elements, so they must match exactly.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <fluidk/executor.hpp>
#include <fluidk/program.hpp>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/scope.hpp>
#include <fluidk/transforms/cpu.hpp>
#include <limits>
#include <ops/ops.hpp>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ops_test_support.hpp"

using namespace fluidk;
using fluidk_test::check_close;
using fluidk_test::padding_is_zero;
using fluidk_test::slot_names;

namespace {

const bool registered = (ops::register_all(), true);

std::mt19937& rng() {
  static std::mt19937 engine(20250301);
  return engine;
}

// Random values in [-1, 1) (integers: in [-50, 50]), in `layout` (the values drawn in NCHW order).
template <class T>
Tensor random_tensor(const dims& shape, data_layout layout = data_layout::any) {
  Tensor t(shape, data_type_of<T>, cpu_place,
           layout == data_layout::any ? data_layout::any : data_layout::nchw);
  std::uniform_real_distribution<double> dist(-1, 1);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t.data<T>()[i] = std::is_integral_v<T> ? T(std::lround(dist(rng()) * 50)) : T(dist(rng()));
  if (layout == data_layout::any || layout == data_layout::nchw) return t;
  return transform(t, kernel_key{cpu_place, data_type_of<T>, layout, library_type::plain});
}

// The elements in logical row-major order, wherever the tensor lives and whatever its layout.
template <class T>
std::vector<T> values(const Tensor& t) {
  // Read through a const tensor: a read must not move the storage's version (the tests of
  // views compare versions).
  const Tensor host = [&] {
    Tensor h = t.place().host_accessible() ? t : copy_to(t, cpu_place);
    if (h.layout() == data_layout::any || h.layout() == data_layout::nchw ||
        h.layout() == data_layout_of<layout::nc>)
      return h;
    return transform(h, kernel_key{cpu_place, h.dtype(), data_layout::nchw, library_type::plain});
  }();
  return std::vector<T>(host.data<T>(), host.data<T>() + host.numel());
}
template <class T>
std::vector<T> values(const Variable& v) {
  return values<T>(v.get<LoDTensor>());
}

const place cpu_at = cpu_place;
#if FLUIDK_OPS_OPENCL
const place opencl_at = place::of<opencl>(0);
#endif

// A kernel of the family to check: where it runs, and whether the call asks for oneDNN (then
// the library it must run, else plain).
struct variant {
  std::string name;
  place where;
  bool use_onednn;
};
// The CPU and every device place built: OpenCL (PoCL, always there), CUDA where a device is.
std::vector<variant> places() {
  std::vector<variant> v{{"CPU", cpu_at, false}};
#if FLUIDK_OPS_OPENCL
  v.push_back({"OpenCL", opencl_at, false});
#endif
#if FLUIDK_OPS_CUDA
  if (cuda_available()) v.push_back({"CUDA", place::of<cuda>(0), false});
#endif
  return v;
}
// Every float kernel built: CPU plain, oneDNN, each device's.
std::vector<variant> float_variants() {
  std::vector<variant> v = places();
  v[0].name = "CPU plain";
#if FLUIDK_OPS_ONEDNN
  v.insert(v.begin() + 1, {"CPU oneDNN", cpu_at, true});
#endif
  return v;
}

// Runs an operator through the runtime path as `v` says, and checks the kernel chosen.
kernel_choice run_as(const variant& v, Scope& scope, std::string_view type, const slot_names& in,
                     const slot_names& out, attribute_map attrs = {}) {
  REQUIRE(registered);
  if (v.use_onednn) attrs.set("use_onednn", true);
  const kernel_choice choice = fluidk_test::run_named(v.where, scope, type, in, out, attrs);
  INFO(v.name << ": " << type << " chose " << choice.chosen.to_string());
  CHECK(choice.chosen.place() == v.where);
  CHECK(choice.chosen.library() == (v.use_onednn ? library_type_of<library::onednn> : library_type::plain));
  return choice;
}
kernel_choice run_cpu(Scope& scope, std::string_view type, const slot_names& in, const slot_names& out,
                      const attribute_map& attrs = {}) {
  REQUIRE(registered);
  return fluidk_test::run_named(cpu_place, scope, type, in, out, attrs);
}

template <class T>
double product_tolerance() {
  return std::is_same_v<T, float> ? 1e-4 : 1e-10;
}

// --- references -------------------------------------------------------------------------------

// numpy's matmul of row-major operands, in long double: 1-D operands promoted (X a row, Y a
// column) and the added dims removed, transposes of the last two dims, batch dims broadcast.
struct product_result {
  dims shape;
  std::vector<long double> values;
};
template <class T>
product_result naive_matmul(const std::vector<T>& x, const dims& xd, const std::vector<T>& y, const dims& yd,
                            bool tx, bool ty, long double alpha) {
  std::vector<std::int64_t> xs(xd.begin(), xd.end()), ys(yd.begin(), yd.end());
  const bool x_vector = xs.size() == 1, y_vector = ys.size() == 1;
  if (x_vector) {
    xs.insert(xs.begin(), 1);
    tx = false;
  }
  if (y_vector) {
    ys.push_back(1);
    ty = false;
  }
  const std::int64_t m = tx ? xs.back() : xs[xs.size() - 2], k = tx ? xs[xs.size() - 2] : xs.back();
  const std::int64_t n = ty ? ys[ys.size() - 2] : ys.back();
  const std::size_t rank = std::max(xs.size(), ys.size());
  xs.insert(xs.begin(), rank - xs.size(), 1);
  ys.insert(ys.begin(), rank - ys.size(), 1);
  std::vector<std::int64_t> batch(rank - 2);
  std::int64_t count = 1;
  for (std::size_t d = 0; d + 2 < rank; ++d) count *= batch[d] = xs[d] == 1 ? ys[d] : xs[d];
  product_result r;
  r.values.assign(std::size_t(count * m * n), 0);
  for (std::int64_t b = 0; b < count; ++b) {
    // The batch index in each operand: its own index per dim, 0 where it has extent 1.
    std::int64_t rest = b, xb = 0, yb = 0, xstep = 1, ystep = 1;
    for (std::size_t d = rank - 2; d-- > 0;) {
      const std::int64_t i = rest % batch[d];
      rest /= batch[d];
      xb += (xs[d] == 1 ? 0 : i) * xstep;
      yb += (ys[d] == 1 ? 0 : i) * ystep;
      xstep *= xs[d];
      ystep *= ys[d];
    }
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        long double acc = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          const T a = x[std::size_t(xb * m * k + (tx ? p * m + i : i * k + p))];
          const T c = y[std::size_t(yb * k * n + (ty ? j * k + p : p * n + j))];
          acc += (long double)a * c;
        }
        r.values[std::size_t((b * m + i) * n + j)] = alpha * acc;
      }
  }
  std::vector<std::int64_t> shape(batch);
  if (!x_vector) shape.push_back(m);
  if (!y_vector) shape.push_back(n);
  r.shape = dims(std::span<const std::int64_t>(shape));
  return r;
}

// ONNX Gemm: alpha A' B' + beta C, C broadcast from the right.
template <class T>
std::vector<long double> naive_gemm(const std::vector<T>& a, const dims& ad, const std::vector<T>& b,
                                    const dims& bd, const std::vector<T>* c, const dims& cd, bool ta, bool tb,
                                    long double alpha, long double beta) {
  product_result p = naive_matmul(a, ad, b, bd, ta, tb, alpha);
  const std::int64_t m = p.shape[0], n = p.shape[1];
  if (c != nullptr) {
    const std::int64_t rows = cd.rank() == 2 ? cd[0] : 1, cols = cd.rank() >= 1 ? cd[cd.rank() - 1] : 1;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        p.values[std::size_t(i * n + j)] +=
            beta * (*c)[std::size_t((rows == 1 ? 0 : i) * cols + (cols == 1 ? 0 : j))];
  }
  return p.values;
}

// The inputs one after the other along axis.
template <class T>
std::vector<T> naive_concat(const std::vector<std::vector<T>>& xs, const std::vector<dims>& ds,
                            std::size_t axis) {
  std::int64_t outer = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= ds[0][d];
  std::vector<T> out;
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const std::int64_t inner = ds[i].numel() / std::max<std::int64_t>(outer, 1);
      out.insert(out.end(), xs[i].begin() + o * inner, xs[i].begin() + (o + 1) * inner);
    }
  return out;
}

}  // namespace

// --- matmul -----------------------------------------------------------------------------------

namespace {
struct matmul_case {
  dims x, y;
  bool tx, ty;
  float alpha;
  dims out;
};
const std::vector<matmul_case> matmul_cases{
    {{3, 4}, {4, 5}, false, false, 1, {3, 5}},
    {{2, 3, 4, 5}, {5, 6}, false, false, 1, {2, 3, 4, 6}},        // Y the same for the whole batch
    {{3, 4}, {2, 4, 5}, false, false, 1, {2, 3, 5}},              // X broadcast
    {{2, 1, 3, 4}, {1, 5, 4, 6}, false, false, 1, {2, 5, 3, 6}},  // both broadcast
    {{1, 3, 1, 5}, {2, 1, 5, 3}, false, false, -2, {2, 3, 1, 3}},
    {{2, 6, 3}, {4, 6}, true, true, 0.5f, {2, 3, 4}},  // stored [K, M] and [N, K]
    {{3, 2, 7}, {3, 7, 5}, false, false, 1, {3, 2, 5}},
    {{5, 3}, {2, 5, 4}, true, false, 1.5f, {2, 3, 4}},
    {{7}, {7}, false, false, 1, {}},           // both vectors: a scalar
    {{7}, {3, 7, 2}, true, false, 1, {3, 2}},  // a vector's transpose changes nothing
    {{2, 5, 7}, {7}, false, true, 1, {2, 5}},
    {{37, 129}, {129, 300}, false, false, 1, {37, 300}},  // crosses the GEMM's blocks
    {{0, 4}, {4, 3}, false, false, 1, {0, 3}},
    {{3, 0}, {0, 2}, false, false, 1, {3, 2}},  // K = 0: zeros
    {{2, 0, 3, 4}, {4, 2}, false, false, 1, {2, 0, 3, 2}},
};
attribute_map matmul_attrs(const matmul_case& c) {
  return {{"transpose_X", c.tx}, {"transpose_Y", c.ty}, {"alpha", c.alpha}};
}
}  // namespace

TEMPLATE_TEST_CASE("matmul, CPU plain: numpy's semantics against a naive product", "[ops][matmul]", float,
                   double) {
  for (const matmul_case& c : matmul_cases) {
    INFO("X " << c.x << (c.tx ? "^T" : "") << ", Y " << c.y << (c.ty ? "^T" : "") << ", alpha " << c.alpha);
    Scope scope;
    scope.var("x").set(LoDTensor(random_tensor<TestType>(c.x)));
    scope.var("y").set(LoDTensor(random_tensor<TestType>(c.y)));
    const kernel_choice choice =
        run_cpu(scope, "matmul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}}, matmul_attrs(c));
    CHECK(choice.chosen ==
          kernel_key{cpu_place, data_type_of<TestType>, data_layout::any, library_type::plain});
    const product_result expected = naive_matmul(values<TestType>(scope.get("x")), c.x,
                                                 values<TestType>(scope.get("y")), c.y, c.tx, c.ty, c.alpha);
    REQUIRE(expected.shape == c.out);
    CHECK(scope.get("out").get<LoDTensor>().dims() == c.out);
    check_close(values<TestType>(scope.get("out")), expected.values, product_tolerance<TestType>());
  }
}

TEST_CASE("matmul, every float kernel (oneDNN, OpenCL) against a naive product",
          "[ops][matmul][onednn][opencl]") {
  for (const variant& v : float_variants()) {
    for (const matmul_case& c : matmul_cases) {
      INFO(v.name << ": X " << c.x << (c.tx ? "^T" : "") << ", Y " << c.y << (c.ty ? "^T" : "") << ", alpha "
                  << c.alpha);
      Scope scope;
      scope.var("x").set(LoDTensor(random_tensor<float>(c.x)));
      scope.var("y").set(LoDTensor(random_tensor<float>(c.y)));
      run_as(v, scope, "matmul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}}, matmul_attrs(c));
      const product_result expected = naive_matmul(values<float>(scope.get("x")), c.x,
                                                   values<float>(scope.get("y")), c.y, c.tx, c.ty, c.alpha);
      const LoDTensor& out = scope.get("out").get<LoDTensor>();
      CHECK(out.dims() == c.out);
      CHECK(out.place() == v.where);
      check_close(values<float>(out), expected.values, 1e-4);
    }
  }
}

TEST_CASE("matmul refuses operands that do not multiply, naming the operator", "[ops][matmul][errors]") {
  for (const variant& v : float_variants()) {
    INFO(v.name);
    Scope scope;
    scope.var("a").set(LoDTensor(random_tensor<float>({2, 3})));
    scope.var("b").set(LoDTensor(random_tensor<float>({4, 2})));
    scope.var("batch3").set(LoDTensor(random_tensor<float>({3, 2, 3})));
    scope.var("batch2").set(LoDTensor(random_tensor<float>({2, 3, 5})));
    scope.var("scalar").set(LoDTensor(Tensor(dims{}, data_type::float32)));
    const slot_names out{{"Out", {"out"}}};
    CHECK_THROWS_WITH(
        run_as(v, scope, "matmul", {{"X", {"a"}}, {"Y", {"b"}}}, out),
        Catch::Contains("operator 'matmul': X [2, 3] and Y [4, 2] cannot be multiplied: 3 columns "
                        "against 4 rows"));
    CHECK_THROWS_WITH(run_as(v, scope, "matmul", {{"X", {"a"}}, {"Y", {"b"}}}, out, {{"transpose_Y", true}}),
                      Catch::Contains("Y [4, 2] transposed cannot be multiplied: 3 columns against 2 rows"));
    CHECK_THROWS_WITH(
        run_as(v, scope, "matmul", {{"X", {"batch3"}}, {"Y", {"batch2"}}}, out),
        Catch::Contains("operator 'matmul': the batch dims of X [3, 2, 3] and Y [2, 3, 5] do not "
                        "broadcast"));
    CHECK_THROWS_WITH(
        run_as(v, scope, "matmul", {{"X", {"scalar"}}, {"Y", {"b"}}}, out),
        Catch::Contains("operator 'matmul': X [] and Y [4, 2] must each have at least one dim"));
    CHECK_THROWS_WITH(run_as(v, scope, "matmul", {{"X", {"a"}}, {"Y", {"b"}}}, out,
                             {{"transpose_X", true}, {"transpose_Y", true}, {"alpha", std::string("two")}}),
                      Catch::Contains("operator 'matmul'") && Catch::Contains("alpha"));
    CHECK_FALSE(scope.get("out").initialized());
  }
}

// --- gemm -------------------------------------------------------------------------------------

namespace {
struct gemm_case {
  dims a, b;
  std::optional<dims> c;
  bool ta, tb;
  float alpha, beta;
};
const std::vector<gemm_case> gemm_cases{
    {{3, 5}, {5, 4}, std::nullopt, false, false, 1, 1},
    {{3, 5}, {5, 4}, dims{4}, false, false, 1, 1},  // oneDNN: C as the bias
    {{3, 5}, {5, 4}, dims{1, 4}, false, false, 1, 1},
    {{3, 5}, {5, 4}, dims{4}, false, false, 0.5f, 2},
    {{3, 5}, {5, 4}, dims{3, 1}, false, false, 1, 1},
    {{3, 5}, {5, 4}, dims{3, 4}, false, false, 0.25f, 0.35f},
    {{3, 5}, {5, 4}, dims{}, false, false, 1, -1},  // a scalar
    {{3, 5}, {5, 4}, dims{1}, false, false, 1, 1},
    {{3, 5}, {5, 4}, dims{1, 1}, false, false, 2, 1},
    {{5, 3}, {4, 5}, dims{3, 4}, true, true, 0.25f, 0.35f},
    {{5, 3}, {5, 4}, dims{4}, true, false, 1, 0},
    {{3, 5}, {4, 5}, std::nullopt, false, true, 1, 1},
    {{1, 7}, {7, 1}, dims{1}, false, false, 1, 1},
    {{33, 130}, {130, 270}, dims{270}, false, false, 1, 1},
    {{3, 0}, {0, 4}, dims{3, 4}, false, false, 1, 0.5f},  // K = 0: beta C
    {{0, 5}, {5, 4}, dims{4}, false, false, 1, 1},
};
attribute_map gemm_attrs(const gemm_case& c) {
  return {{"trans_a", c.ta}, {"trans_b", c.tb}, {"alpha", c.alpha}, {"beta", c.beta}};
}

template <class T>
void check_gemm(const variant& v, const gemm_case& c) {
  INFO(v.name << ": A " << c.a << (c.ta ? "^T" : "") << ", B " << c.b << (c.tb ? "^T" : "") << ", C "
              << (c.c ? c.c->to_string() : "none") << ", alpha " << c.alpha << ", beta " << c.beta);
  Scope scope;
  scope.var("a").set(LoDTensor(random_tensor<T>(c.a)));
  scope.var("b").set(LoDTensor(random_tensor<T>(c.b)));
  if (c.c) scope.var("c").set(LoDTensor(random_tensor<T>(*c.c)));
  run_as(
      v, scope, "gemm",
      {{"A", {"a"}}, {"B", {"b"}}, {"C", c.c ? std::vector<std::string>{"c"} : std::vector<std::string>{}}},
      {{"Out", {"out"}}}, gemm_attrs(c));
  const std::vector<T> cv = c.c ? values<T>(scope.get("c")) : std::vector<T>{};
  const std::vector<long double> expected =
      naive_gemm(values<T>(scope.get("a")), c.a, values<T>(scope.get("b")), c.b, c.c ? &cv : nullptr,
                 c.c.value_or(dims{}), c.ta, c.tb, c.alpha, c.beta);
  const LoDTensor& out = scope.get("out").get<LoDTensor>();
  CHECK(out.dims() == dims{c.ta ? c.a[1] : c.a[0], c.tb ? c.b[0] : c.b[1]});
  CHECK(out.place() == v.where);
  check_close(values<T>(out), expected, product_tolerance<T>());
}
}  // namespace

TEST_CASE("gemm (ONNX Gemm), every kernel against a naive alpha A B + beta C, C broadcast",
          "[ops][gemm][onednn][opencl]") {
  for (const gemm_case& c : gemm_cases) check_gemm<double>({"CPU plain, double", cpu_at, false}, c);
  for (const variant& v : float_variants())
    for (const gemm_case& c : gemm_cases) check_gemm<float>(v, c);
}

TEST_CASE("gemm with beta 0 leaves C out, its infinities and NaN too (as BLAS and ONNX Runtime do)",
          "[ops][gemm][onednn][opencl]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const variant& v : float_variants())
    for (const dims& c_dims : {dims{4}, dims{3, 4}}) {
      INFO(v.name << ", C " << c_dims.to_string());
      Scope scope;
      scope.var("a").set(LoDTensor(random_tensor<float>({3, 5})));
      scope.var("b").set(LoDTensor(random_tensor<float>({5, 4})));
      Tensor c(c_dims, data_type::float32);
      for (std::int64_t i = 0; i < c.numel(); ++i) c.data<float>()[i] = i % 2 == 0 ? inf : nan;
      scope.var("c").set(LoDTensor(c));
      run_as(v, scope, "gemm", {{"A", {"a"}}, {"B", {"b"}}, {"C", {"c"}}}, {{"Out", {"out"}}},
             {{"alpha", 0.5f}, {"beta", 0.f}});
      const std::vector<long double> expected =
          naive_gemm<float>(values<float>(scope.get("a")), {3, 5}, values<float>(scope.get("b")), {5, 4},
                            nullptr, {}, false, false, 0.5f, 0.f);
      check_close(values<float>(scope.get("out").get<LoDTensor>()), expected, product_tolerance<float>());
    }
}

#if FLUIDK_OPS_ONEDNN
namespace {
// Runs the oneDNN gemm kernel directly on a oneDNN context of the caller's (and so its cache),
// without C.
Tensor onednn_gemm(onednn_context& dnn, const Tensor& a, const Tensor& b, const attribute_map& attrs) {
  return fluidk_test::run_kernel<ops::gemm>(
      dnn, ops::gemm_onednn<float>{},
      kernel_key{cpu_place, data_type::float32, data_layout::any, library_type_of<library::onednn>}, {&a, &b},
      attrs);
}
}  // namespace

TEST_CASE("gemm (oneDNN): the primitive and B's reorder are kept; a B written in place is prepared again",
          "[ops][gemm][onednn][cache]") {
  for (const bool tb : {false, true}) {
    INFO("trans_b " << tb);
    onednn_cache cache;
    onednn_context dnn(cache);
    const gemm_case c{{3, 40}, tb ? dims{24, 40} : dims{40, 24}, std::nullopt, false, tb, 1, 1};
    const Tensor a = random_tensor<float>(c.a);
    Tensor b = random_tensor<float>(c.b);
    auto expected = [&] {
      return naive_gemm<float>(values<float>(a), c.a, values<float>(b), c.b, nullptr, dims{}, false, tb, 1,
                               1);
    };
    check_close(values<float>(onednn_gemm(dnn, a, b, gemm_attrs(c))), expected(), product_tolerance<float>());
    const onednn_cache::statistics first = cache.stats();
    CHECK(first.misses == 1);
    CHECK(first.hits == 0);
    // B reordered into oneDNN's format where it wants another than B's own (on AVX-512, a
    // blocked one): at most once.
    CHECK(first.prepared_misses <= 1);

    check_close(values<float>(onednn_gemm(dnn, a, b, gemm_attrs(c))), expected(), product_tolerance<float>());
    const onednn_cache::statistics second = cache.stats();
    CHECK(second.misses == 1);
    CHECK(second.hits == 1);
    CHECK(second.prepared_misses == first.prepared_misses);
    CHECK(second.prepared_hits == first.prepared_misses);

    // Written in place through the same tensor: a kept reorder is stale, the result is new.
    float* data = b.data<float>();
    for (std::int64_t i = 0; i < b.numel(); ++i) data[i] = -2 * data[i] + 0.25f;
    check_close(values<float>(onednn_gemm(dnn, a, b, gemm_attrs(c))), expected(), product_tolerance<float>());
    CHECK(cache.stats().hits == 2);
    CHECK(cache.stats().prepared_misses == 2 * first.prepared_misses);

    // Another alpha is another primitive.
    attribute_map half = gemm_attrs(c);
    half.set("alpha", 0.5f);
    onednn_gemm(dnn, a, b, half);
    CHECK(cache.stats().misses == 2);
  }
}

TEST_CASE("matmul (oneDNN): a second call of the same shapes takes the kept primitive",
          "[ops][matmul][onednn][cache]") {
  Scope scope;
  scope.var("x").set(LoDTensor(random_tensor<float>({2, 3, 5})));
  scope.var("y").set(LoDTensor(random_tensor<float>({5, 4})));
  const attribute_map attrs{{"use_onednn", true}};
  onednn_cache& cache = onednn_context::this_thread().cache();
  const onednn_cache::statistics before = cache.stats();
  for (int i = 0; i < 2; ++i)
    run_cpu(scope, "matmul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}}, attrs);
  CHECK(cache.stats().misses <= before.misses + 1);
  CHECK(cache.stats().hits >= before.hits + 1);
  check_close(values<float>(scope.get("out")),
              naive_matmul(values<float>(scope.get("x")), {2, 3, 5}, values<float>(scope.get("y")), {5, 4},
                           false, false, 1.0)
                  .values,
              product_tolerance<float>());
}
#endif

TEST_CASE("gemm refuses what is not ONNX's Gemm, naming the operator", "[ops][gemm][errors]") {
  for (const variant& v : float_variants()) {
    INFO(v.name);
    Scope scope;
    scope.var("a").set(LoDTensor(random_tensor<float>({3, 5})));
    scope.var("b").set(LoDTensor(random_tensor<float>({5, 4})));
    scope.var("a3").set(LoDTensor(random_tensor<float>({1, 3, 5})));
    scope.var("b1").set(LoDTensor(random_tensor<float>({5})));
    scope.var("c24").set(LoDTensor(random_tensor<float>({2, 4})));
    scope.var("c5").set(LoDTensor(random_tensor<float>({5})));
    scope.var("c3").set(LoDTensor(random_tensor<float>({1, 3, 4})));
    const slot_names out{{"Out", {"out"}}};
    CHECK_THROWS_WITH(run_as(v, scope, "gemm", {{"A", {"a3"}}, {"B", {"b"}}}, out),
                      Catch::Contains("operator 'gemm': A [1, 3, 5] and B [5, 4] must be 2-D"));
    CHECK_THROWS_WITH(run_as(v, scope, "gemm", {{"A", {"a"}}, {"B", {"b1"}}}, out),
                      Catch::Contains("operator 'gemm': A [3, 5] and B [5] must be 2-D"));
    CHECK_THROWS_WITH(
        run_as(v, scope, "gemm", {{"A", {"a"}}, {"B", {"b"}}}, out, {{"trans_a", true}}),
        Catch::Contains("operator 'gemm': A [3, 5] transposed and B [5, 4] cannot be multiplied: 3 "
                        "columns against 5 rows"));
    for (const std::string c : {"c24", "c5", "c3"})
      CHECK_THROWS_WITH(run_as(v, scope, "gemm", {{"A", {"a"}}, {"B", {"b"}}, {"C", {c}}}, out),
                        Catch::Contains("operator 'gemm': C") &&
                            Catch::Contains("does not broadcast to the output [3, 4]"));
    CHECK_THROWS_WITH(run_as(v, scope, "gemm", {{"A", {"a"}}, {"B", {"b"}}}, out, {{"trans_b", 1}}),
                      Catch::Contains("operator 'gemm'") && Catch::Contains("trans_b"));
    CHECK_FALSE(scope.get("out").initialized());
  }
}

namespace {
// gemm's fuse_activation (set by run-onnx's gemm_activation pass), on the product's result.
struct gemm_fused {
  std::string activation;
  float lo = 0, hi = 0;  // clip's bounds
  long double operator()(long double v) const {
    if (activation == "relu") return v > 0 ? v : 0;
    if (activation == "clip") return std::min<long double>(std::max<long double>(v, lo), hi);
    return 1 / (1 + std::exp(-v));
  }
};

template <class T>
void check_gemm_fused(const variant& v, const gemm_case& c, const gemm_fused& f) {
  INFO(v.name << ": A " << c.a << ", B " << c.b << ", C " << (c.c ? c.c->to_string() : "none") << ", alpha "
              << c.alpha << ", beta " << c.beta << ", fuse_activation " << f.activation << " [" << f.lo
              << ", " << f.hi << "]");
  Scope scope;
  scope.var("a").set(LoDTensor(random_tensor<T>(c.a)));
  scope.var("b").set(LoDTensor(random_tensor<T>(c.b)));
  if (c.c) scope.var("c").set(LoDTensor(random_tensor<T>(*c.c)));
  attribute_map attrs = gemm_attrs(c);
  attrs.set("fuse_activation", f.activation);
  if (f.activation == "clip") {
    attrs.set("fuse_alpha", f.lo);
    attrs.set("fuse_beta", f.hi);
  }
  run_as(
      v, scope, "gemm",
      {{"A", {"a"}}, {"B", {"b"}}, {"C", c.c ? std::vector<std::string>{"c"} : std::vector<std::string>{}}},
      {{"Out", {"out"}}}, attrs);
  const std::vector<T> cv = c.c ? values<T>(scope.get("c")) : std::vector<T>{};
  std::vector<long double> expected =
      naive_gemm(values<T>(scope.get("a")), c.a, values<T>(scope.get("b")), c.b, c.c ? &cv : nullptr,
                 c.c.value_or(dims{}), c.ta, c.tb, c.alpha, c.beta);
  for (long double& e : expected) e = f(e);
  check_close(values<T>(scope.get("out").get<LoDTensor>()), expected, product_tolerance<T>());
}
}  // namespace

TEST_CASE("gemm fuse_activation: relu, clip or sigmoid on Out last, every kernel; an unknown one refused",
          "[ops][gemm][onednn][opencl]") {
  // Without C, C as oneDNN's bias, and alpha, beta and C [M, N] (oneDNN's sum post-op); clip
  // with min above max gives max everywhere (computed apart from oneDNN's clip).
  const std::vector<gemm_case> cases{gemm_cases[0], gemm_cases[1], gemm_cases[5], gemm_cases[13]};
  const std::vector<gemm_fused> activations{
      {"relu"}, {"clip", -0.3f, 0.4f}, {"clip", 0.5f, -0.5f}, {"sigmoid"}};
  for (const gemm_case& c : cases)
    for (const gemm_fused& f : activations) {
      check_gemm_fused<double>({"CPU plain, double", cpu_at, false}, c, f);
      for (const variant& v : float_variants()) check_gemm_fused<float>(v, c, f);
    }
  for (const variant& v : float_variants()) {
    INFO(v.name);
    Scope scope;
    scope.var("a").set(LoDTensor(random_tensor<float>({3, 5})));
    scope.var("b").set(LoDTensor(random_tensor<float>({5, 4})));
    CHECK_THROWS_WITH(run_as(v, scope, "gemm", {{"A", {"a"}}, {"B", {"b"}}}, {{"Out", {"out"}}},
                             {{"fuse_activation", std::string("tanh")}}),
                      Catch::Contains("operator 'gemm'") && Catch::Contains("fuse_activation") &&
                          Catch::Contains("\"tanh\""));
    CHECK_THROWS_WITH(run_as(v, scope, "gemm", {{"A", {"a"}}, {"B", {"b"}}}, {{"Out", {"out"}}},
                             {{"fuse_activation", std::string("clip")}, {"fuse_alpha", std::nanf("")}}),
                      Catch::Contains("operator 'gemm'") && Catch::Contains("NaN"));
    CHECK_FALSE(scope.get("out").initialized());
  }
}

// --- flatten2 and reshape2 --------------------------------------------------------------------

TEST_CASE("flatten2: Out views X's storage as a matrix; XShape; every place", "[ops][flatten2][opencl]") {
  struct flatten_case {
    dims x;
    std::int32_t axis;
    dims out;
  };
  const flatten_case cases[] = {
      {{2, 3, 4, 5}, 1, {2, 60}},
      {{2, 3, 4, 5}, 0, {1, 120}},
      {{2, 3, 4, 5}, 4, {120, 1}},
      {{2, 3, 4, 5}, -1, {24, 5}},
      {{2, 3, 4, 5}, -4, {1, 120}},
      {{3, 0, 2}, 2, {0, 2}},
      {{7}, 1, {7, 1}},
      {{}, 0, {1, 1}},
  };
  for (const variant& v : places())
    for (const flatten_case& c : cases) {
      INFO(v.name << ": X " << c.x << ", axis " << c.axis);
      Scope scope;
      scope.var("x").set(LoDTensor(random_tensor<float>(c.x)));
      run_as(v, scope, "flatten2", {{"X", {"x"}}}, {{"Out", {"out"}}, {"XShape", {"xshape"}}},
             {{"axis", c.axis}});
      const LoDTensor& out = scope.get("out").get<LoDTensor>();
      CHECK(out.dims() == c.out);
      CHECK(out.place() == v.where);
      CHECK(out.layout() == data_layout::any);
      CHECK(values<float>(out) == values<float>(scope.get("x")));
      std::vector<std::int64_t> xshape{0};
      xshape.insert(xshape.end(), c.x.begin(), c.x.end());
      CHECK(scope.get("xshape").get<LoDTensor>().dims() == dims(std::span<const std::int64_t>(xshape)));
      // On the CPU, X's own storage; on a device, that of X's copy there.
      if (v.where == cpu_place) CHECK(out.shares_buffer_with(scope.get("x").get<LoDTensor>()));
    }

  // Without XShape; integers; X's offsets kept when the rows are X's.
  Scope scope;
  scope.var("ids").set(LoDTensor(random_tensor<std::int64_t>({4, 3, 2}), {{0, 1, 4}}));
  run_cpu(scope, "flatten2", {{"X", {"ids"}}}, {{"Out", {"rows"}}});
  run_cpu(scope, "flatten2", {{"X", {"ids"}}}, {{"Out", {"all"}}}, {{"axis", 0}});
  CHECK(scope.get("rows").get<LoDTensor>().lod() == lod{{0, 1, 4}});
  CHECK(scope.get("all").get<LoDTensor>().lod().empty());
  CHECK(values<std::int64_t>(scope.get("rows")) == values<std::int64_t>(scope.get("ids")));

  CHECK_THROWS_WITH(run_cpu(scope, "flatten2", {{"X", {"ids"}}}, {{"Out", {"bad"}}}, {{"axis", 4}}),
                    Catch::Contains("operator 'flatten2': axis (4) must be in [-3, 3] for X [4, 3, 2]"));
  CHECK_THROWS_WITH(run_cpu(scope, "flatten2", {{"X", {"ids"}}}, {{"Out", {"bad"}}}, {{"axis", -4}}),
                    Catch::Contains("operator 'flatten2': axis (-4) must be in [-3, 3]"));
  scope.var("rank8").set(LoDTensor(random_tensor<float>({1, 1, 1, 1, 1, 1, 1, 2})));
  CHECK_THROWS_WITH(
      run_cpu(scope, "flatten2", {{"X", {"rank8"}}}, {{"Out", {"bad"}}, {"XShape", {"bad_shape"}}}),
      Catch::Contains("operator 'flatten2': XShape [0, dims of X] needs rank 9, beyond fluidk's 8"));
  CHECK_FALSE(scope.get("bad").initialized());
}

TEST_CASE("flatten2 and reshape2 on blocked and NHWC inputs: Out in X's logical order",
          "[ops][flatten2][reshape2][onednn][opencl]") {
  REQUIRE(registered);
  std::vector<variant> variants = places();
  variants.insert(variants.begin() + 1, {"CPU, use_onednn", cpu_at, true});
  for (const data_layout layout :
       {data_layout_of<layout::nChw8c>, data_layout_of<layout::nChw16c>, data_layout::nhwc}) {
    Scope scope;
    scope.var("x").set(LoDTensor(random_tensor<float>({2, 5, 3, 3}, layout)));
    const std::vector<float> expected = values<float>(scope.get("x"));
    for (const variant& v : variants) {
      INFO(name_of(layout) << ", " << v.name);
      // No oneDNN kernel: the plain one serves use_onednn.
      attribute_map attrs{{"use_onednn", v.use_onednn}};
      const kernel_choice f =
          fluidk_test::run_named(v.where, scope, "flatten2", {{"X", {"x"}}}, {{"Out", {"flat"}}}, attrs);
      CHECK(f.chosen == kernel_key{v.where, data_type::float32, data_layout::any, library_type::plain});
      attrs.set("shape", std::vector<std::int32_t>{0, -1});
      fluidk_test::run_named(v.where, scope, "reshape2", {{"X", {"x"}}}, {{"Out", {"reshaped"}}}, attrs);
      for (const char* name : {"flat", "reshaped"}) {
        const LoDTensor& out = scope.get(name).get<LoDTensor>();
        CHECK(out.dims() == dims{2, 45});
        CHECK(out.layout() == data_layout::any);
        CHECK(out.place() == v.where);
        CHECK(values<float>(out) == expected);
        CHECK_FALSE(out.shares_buffer_with(scope.get("x").get<LoDTensor>()));  // a copy in NCHW
      }
    }
    CHECK(scope.get("x").get<LoDTensor>().layout() == layout);  // untouched
    CHECK(values<float>(scope.get("x")) == expected);
  }
}

TEST_CASE("reshape2: 0 copies a dim, -1 is inferred; attribute or Shape input (int32, int64); every place",
          "[ops][reshape2][opencl]") {
  struct reshape_case {
    dims x;
    std::vector<std::int64_t> shape;
    dims out;
  };
  const reshape_case cases[] = {
      {{2, 3, 4}, {4, 6}, {4, 6}},
      {{2, 3, 4}, {0, -1}, {2, 12}},
      {{2, 3, 4}, {-1}, {24}},
      {{2, 3, 4}, {0, 0, 2, 2}, {2, 3, 2, 2}},
      {{2, 3, 4}, {-1, 0, 1}, {8, 3, 1}},
      {{1}, {}, {}},
      {{0, 3}, {3, -1}, {3, 0}},
      {{0, 3}, {-1, 0}, {0, 3}},
      {{2, 3, 4, 5}, {2, 0, -1}, {2, 3, 20}},
  };
  for (const variant& v : places())
    for (const reshape_case& c : cases)
      for (const char* source : {"attribute", "int32", "int64", "both"}) {
        INFO(v.name << ": X " << c.x << ", shape from " << source);
        Scope scope;
        scope.var("x").set(LoDTensor(random_tensor<float>(c.x)));
        const std::string from(source);
        attribute_map attrs;
        slot_names in{{"X", {"x"}}};
        if (from == "attribute") attrs.set("shape", c.shape);
        if (from == "both") attrs.set("shape", std::vector<std::int64_t>{7, 7});  // the input overrides it
        if (from != "attribute") {
          const bool wide = from != "int32";
          Tensor s(dims{std::int64_t(c.shape.size())}, wide ? data_type::int64 : data_type::int32);
          for (std::size_t i = 0; i < c.shape.size(); ++i) {
            if (wide)
              s.data<std::int64_t>()[i] = c.shape[i];
            else
              s.data<std::int32_t>()[i] = std::int32_t(c.shape[i]);
          }
          // On a device, the shape too: it is read from there (exempt from transforms).
          scope.var("s").set(LoDTensor(v.where == cpu_place ? s : copy_to(s, v.where)));
          in.push_back({"Shape", {"s"}});
        }
        run_as(v, scope, "reshape2", in, {{"Out", {"out"}}, {"XShape", {"xshape"}}}, attrs);
        const LoDTensor& out = scope.get("out").get<LoDTensor>();
        CHECK(out.dims() == c.out);
        CHECK(out.place() == v.where);
        CHECK(values<float>(out) == values<float>(scope.get("x")));
        CHECK(scope.get("xshape").get<LoDTensor>().dims().rank() == c.x.rank() + 1);
        if (v.where == cpu_place) CHECK(out.shares_buffer_with(scope.get("x").get<LoDTensor>()));
      }
}

TEST_CASE("reshape2 refuses shapes that do not fit, naming the operator", "[ops][reshape2][errors]") {
  Scope scope;
  scope.var("x").set(LoDTensor(random_tensor<float>({2, 3, 4})));
  scope.var("empty").set(LoDTensor(random_tensor<float>({0, 3})));
  Tensor floats({2}, data_type::float32);
  scope.var("floats").set(LoDTensor(floats));
  Tensor matrix({1, 2}, data_type::int64);
  scope.var("matrix").set(LoDTensor(matrix));
  const slot_names in{{"X", {"x"}}}, out{{"Out", {"out"}}};
  auto with = [](std::vector<std::int64_t> shape) { return attribute_map{{"shape", std::move(shape)}}; };
  CHECK_THROWS_WITH(
      run_cpu(scope, "reshape2", in, out, with({-1, 2, -1})),
      Catch::Contains("operator 'reshape2': shape [-1, 2, -1] for X [2, 3, 4] has more than one -1"));
  CHECK_THROWS_WITH(
      run_cpu(scope, "reshape2", in, out, with({5, 5})),
      Catch::Contains("operator 'reshape2': shape [5, 5] for X [2, 3, 4] does not hold X's 24 elements"));
  CHECK_THROWS_WITH(
      run_cpu(scope, "reshape2", in, out, with({5, -1})),
      Catch::Contains("operator 'reshape2': shape [5, -1] for X [2, 3, 4]: 24 elements do not divide "
                      "into 5"));
  CHECK_THROWS_WITH(
      run_cpu(scope, "reshape2", in, out, with({-2, -12})),
      Catch::Contains("operator 'reshape2': shape [-2, -12] for X [2, 3, 4] has -2 at index 0 (only -1 "
                      "is inferred)"));
  CHECK_THROWS_WITH(run_cpu(scope, "reshape2", in, out, with({2, 3, 2, 0})),
                    Catch::Contains("has 0 at index 3, which copies X's dim there, but X has 3"));
  CHECK_THROWS_WITH(run_cpu(scope, "reshape2", {{"X", {"empty"}}}, out, with({0, -1})),
                    Catch::Contains("the -1 cannot be inferred when the other extents multiply to 0"));
  CHECK_THROWS_WITH(run_cpu(scope, "reshape2", in, out),
                    Catch::Contains("operator 'reshape2': needs attribute 'shape' (ints) or input Shape"));
  CHECK_THROWS_WITH(run_cpu(scope, "reshape2", {{"X", {"x"}}, {"Shape", {"floats"}}}, out),
                    Catch::Contains("operator 'reshape2': input Shape holds float, not int32 or int64"));
  CHECK_THROWS_WITH(run_cpu(scope, "reshape2", {{"X", {"x"}}, {"Shape", {"matrix"}}}, out),
                    Catch::Contains("operator 'reshape2': input Shape must be 1-D, not [1, 2]"));
  CHECK_THROWS_WITH(run_cpu(scope, "reshape2", in, out, {{"shape", 1.5f}}),
                    Catch::Contains("attribute 'shape' holds float, not ints or int64s"));
  CHECK_FALSE(scope.get("out").initialized());
}

TEST_CASE("flatten2 and reshape2 views: X untouched, reruns keep X's version, writes to X are seen",
          "[ops][flatten2][reshape2][versions]") {
  for (const char* type : {"flatten2", "reshape2"}) {
    INFO(type);
    Scope scope;
    scope.var("x").set(LoDTensor(random_tensor<float>({2, 3, 4})));
    const attribute_map attrs{{"axis", 1}, {"shape", std::vector<std::int32_t>{2, 12}}};
    const slot_names in{{"X", {"x"}}}, out{{"Out", {"out"}}};
    const Variable& x_var = scope.get("x");
    const std::uint64_t x_version = x_var.version();
    const std::uint64_t storage_version = x_var.get<LoDTensor>().version();
    const std::vector<float> before = values<float>(x_var);
    run_cpu(scope, type, in, out, attrs);
    const LoDTensor& x = x_var.get<LoDTensor>();
    CHECK(scope.get("out").get<LoDTensor>().storage_id() == x.storage_id());
    CHECK(scope.get("out").get<LoDTensor>().dims() == dims{2, 12});
    CHECK(x.dims() == dims{2, 3, 4});  // X keeps its own dims and layout
    CHECK(x.layout() == data_layout::any);
    CHECK(x_var.version() == x_version);
    CHECK(x.version() == storage_version);
    // A rerun, Out holding the last run's view, writes nothing of X either: cached copies of
    // X stay valid.
    run_cpu(scope, type, in, out, attrs);
    CHECK(x.version() == storage_version);
    CHECK(values<float>(x_var) == before);

    // A write to X's bytes through any tensor moves the version Out shares: an executor's copy
    // of Out on another place is made again, not served stale.
#if FLUIDK_OPS_OPENCL
    ProgramDesc program;
    BlockDesc& block = program.global_block();
    block.var("out");
    block.var("product");
    block.append_op(OpDesc("matmul", {{"X", {"out"}}, {"Y", {"out"}}}, {{"Out", {"product"}}},
                           {{"transpose_Y", true}, {"op_device", std::string("opencl:0")}}));
    Executor executor(cpu_place);
    auto prepared = executor.prepare(program.block(0), scope);
    executor.run(prepared);
    const std::uint64_t copies = executor.stats().transforms;
    executor.run(prepared);
    CHECK(executor.stats().transforms == copies);  // served by the transfer cache
    Tensor alias = x;
    const std::uint64_t out_version = scope.get("out").get<LoDTensor>().version();
    alias.data<float>()[0] = 100;
    CHECK(scope.get("out").get<LoDTensor>().version() != out_version);
    executor.run(prepared);
    CHECK(executor.stats().transforms > copies);
    CHECK(values<float>(scope.get("product"))[0] > 1000);  // 100 * 100 + the rest of row 0
#endif

    // An operator that writes X gives it new storage: Out keeps what X held.
    const std::vector<float> out_before = values<float>(scope.get("out"));
    run_cpu(scope, "relu", {{"X", {"x"}}}, {{"Out", {"x"}}});
    CHECK(scope.get("x").get<LoDTensor>().storage_id() != scope.get("out").get<LoDTensor>().storage_id());
    CHECK(values<float>(scope.get("out")) == out_before);
  }
}

// --- concat -----------------------------------------------------------------------------------

namespace {
struct concat_case {
  std::vector<dims> xs;
  std::int32_t axis;
};
const std::vector<concat_case> concat_cases{
    {{{2, 3, 4}, {2, 5, 4}, {2, 1, 4}}, 1},
    {{{2, 3, 4}, {2, 3, 1}}, -1},
    {{{2, 3}, {4, 3}, {1, 3}}, 0},
    {{{3}, {2}}, 0},
    {{{2, 3, 4}, {2, 0, 4}, {2, 2, 4}}, -2},  // an empty input adds nothing
    {{{2, 7, 3, 5}}, 1},                      // one input: a copy
    {{{1, 3, 5, 5}, {1, 5, 5, 5}}, 1},
    {{{0, 4}, {0, 2}}, 1},  // an empty output
};

template <class T>
void check_concat(const variant& v, const concat_case& c, data_layout layout = data_layout::any) {
  INFO(v.name << ": axis " << c.axis << ", " << c.xs.size() << " inputs, first " << c.xs[0] << ", layout "
              << name_of(layout));
  Scope scope;
  std::vector<std::string> names;
  std::vector<std::vector<T>> xs;
  for (std::size_t i = 0; i < c.xs.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    scope.var(names.back())
        .set(LoDTensor(random_tensor<T>(c.xs[i], c.xs[i].rank() == 4 ? layout : data_layout::any)));
    xs.push_back(values<T>(scope.get(names.back())));
  }
  run_as(v, scope, "concat", {{"X", names}}, {{"Out", {"out"}}}, {{"axis", c.axis}});
  const std::size_t axis = std::size_t(c.axis < 0 ? c.axis + std::int32_t(c.xs[0].rank()) : c.axis);
  std::int64_t extent = 0;
  for (const dims& d : c.xs) extent += d[axis];
  const LoDTensor& out = scope.get("out").get<LoDTensor>();
  CHECK(out.dims() == c.xs[0].with(axis, extent));
  CHECK(out.place() == v.where);
  CHECK(values<T>(out) == naive_concat(xs, c.xs, axis));
}
}  // namespace

TEST_CASE("concat, every kernel against the inputs one after the other", "[ops][concat][onednn][opencl]") {
  for (const concat_case& c : concat_cases) {
    check_concat<double>({"CPU plain, double", cpu_at, false}, c);
    check_concat<std::int64_t>({"CPU plain, int64", cpu_at, false}, c);
    for (const variant& v : float_variants()) check_concat<float>(v, c);
  }
  // NCHW inputs: Out NCHW (each kernel, each place).
  for (const variant& v : float_variants()) check_concat<float>(v, concat_cases[6], data_layout::nchw);

  // X[0]'s offsets when the rows are kept.
  Scope scope;
  scope.var("a").set(LoDTensor(random_tensor<float>({3, 2}), {{0, 1, 3}}));
  scope.var("b").set(LoDTensor(random_tensor<float>({3, 4})));
  run_cpu(scope, "concat", {{"X", {"a", "b"}}}, {{"Out", {"columns"}}}, {{"axis", 1}});
  CHECK(scope.get("columns").get<LoDTensor>().lod() == lod{{0, 1, 3}});
  run_cpu(scope, "concat", {{"X", {"a", "b"}}}, {{"Out", {"columns"}}}, {{"axis", -1}});
  CHECK(scope.get("columns").get<LoDTensor>().lod() == lod{{0, 1, 3}});
}

#if FLUIDK_OPS_ONEDNN
TEST_CASE("concat, oneDNN, blocked inputs: channels of whole blocks stay blocked, others go to NCHW",
          "[ops][concat][onednn]") {
  const variant dnn{"CPU oneDNN", cpu_at, true};
  const data_layout n8 = data_layout_of<layout::nChw8c>, n16 = data_layout_of<layout::nChw16c>;
  struct blocked_case {
    concat_case c;
    data_layout layout;
    data_layout out;  // Out's layout
  };
  const blocked_case cases[] = {
      {{{{2, 16, 3, 5}, {2, 8, 3, 5}}, 1}, n8, n8},  // SqueezeNet's fire module, in small
      {{{{1, 16, 4, 4}, {1, 32, 4, 4}, {1, 16, 4, 4}}, 1}, n16, n16},
      {{{{1, 3, 4, 4}, {1, 5, 4, 4}}, 1}, n8, data_layout::nchw},  // padded blocks: NCHW
      {{{{1, 16, 4, 4}, {1, 8, 4, 4}}, 1}, n16, data_layout::nchw},
      {{{{2, 3, 4, 5}, {2, 3, 2, 5}}, 2}, n8, data_layout::any},  // another axis: blocked or NCHW
      {{{{2, 20, 4, 5}, {1, 20, 4, 5}}, 0}, n16, data_layout::any},
      {{{{2, 8, 4, 5}, {1, 8, 4, 5}}, 0}, n8, n8},
      {{{{1, 8, 2, 2}, {1, 0, 2, 2}, {1, 8, 2, 2}}, 1}, n8, n8},
  };
  for (const blocked_case& b : cases) {
    Scope scope;
    std::vector<std::string> names;
    std::vector<std::vector<float>> xs;
    for (std::size_t i = 0; i < b.c.xs.size(); ++i) {
      names.push_back("x" + std::to_string(i));
      scope.var(names.back()).set(LoDTensor(random_tensor<float>(b.c.xs[i], b.layout)));
      xs.push_back(values<float>(scope.get(names.back())));
    }
    INFO("first " << b.c.xs[0] << ", axis " << b.c.axis << ", " << name_of(b.layout));
    const kernel_choice choice =
        run_as(dnn, scope, "concat", {{"X", names}}, {{"Out", {"out"}}}, {{"axis", b.c.axis}});
    CHECK(choice.chosen.layout() == b.layout);
    const LoDTensor& out = scope.get("out").get<LoDTensor>();
    if (b.out != data_layout::any) CHECK(out.layout() == b.out);
    CHECK((out.layout() == b.layout || out.layout() == data_layout::nchw));
    if (out.layout() == b.layout) CHECK(padding_is_zero(out));
    CHECK(values<float>(out) == naive_concat(xs, b.c.xs, std::size_t(b.c.axis)));
    for (std::size_t i = 0; i < names.size(); ++i) {  // the inputs are untouched
      CHECK(scope.get(names[i]).get<LoDTensor>().layout() == b.layout);
      CHECK(values<float>(scope.get(names[i])) == xs[i]);
    }
  }

  // NHWC inputs (of oneDNN's NHWC convolutions) stay NHWC along every axis; with an input in
  // another layout, Out is NCHW.
  const concat_case nhwc_cases[] = {
      {{{2, 3, 4, 5}, {2, 5, 4, 5}, {2, 0, 4, 5}}, 1},
      {{{2, 3, 4, 5}, {1, 3, 4, 5}}, 0},
      {{{2, 3, 4, 5}, {2, 3, 2, 5}}, 2},
      {{{2, 3, 4, 5}, {2, 3, 4, 1}}, -1},
  };
  for (const concat_case& c : nhwc_cases)
    for (const bool all_nhwc : {true, false}) {
      Scope scope;
      std::vector<std::string> names;
      std::vector<std::vector<float>> xs;
      for (std::size_t i = 0; i < c.xs.size(); ++i) {
        names.push_back("x" + std::to_string(i));
        const data_layout l = all_nhwc || i > 0 ? data_layout::nhwc : data_layout::nchw;
        scope.var(names.back()).set(LoDTensor(random_tensor<float>(c.xs[i], l)));
        xs.push_back(values<float>(scope.get(names.back())));
      }
      INFO("first " << c.xs[0] << ", axis " << c.axis << (all_nhwc ? ", NHWC" : ", NCHW then NHWC"));
      run_as(dnn, scope, "concat", {{"X", names}}, {{"Out", {"out"}}}, {{"axis", c.axis}});
      const LoDTensor& out = scope.get("out").get<LoDTensor>();
      CHECK(out.layout() == (all_nhwc ? data_layout::nhwc : data_layout::nchw));
      const std::size_t axis = std::size_t(c.axis < 0 ? c.axis + 4 : c.axis);
      CHECK(values<float>(out) == naive_concat(xs, c.xs, axis));
      for (std::size_t i = 0; i < names.size(); ++i) CHECK(values<float>(scope.get(names[i])) == xs[i]);
    }

  // A plain input beside a blocked first one is brought to the kernel's blocked layout.
  Scope scope;
  scope.var("blocked").set(LoDTensor(random_tensor<float>({1, 8, 3, 3}, n8)));
  scope.var("plain").set(LoDTensor(random_tensor<float>({1, 16, 3, 3}, data_layout::nchw)));
  const attribute_map attrs{{"axis", 1}, {"use_onednn", true}};
  const std::vector<std::vector<Variable*>> call{{&scope.get("blocked"), &scope.get("plain")}};
  CHECK_THAT(explain(find_operator("concat"), cpu_place, call, attrs),
             Catch::Contains("input X[0]: none") && Catch::Contains("input X[1]: layout NCHW->nChw8c"));
  run_cpu(scope, "concat", {{"X", {"blocked", "plain"}}}, {{"Out", {"out"}}}, attrs);
  CHECK(scope.get("out").get<LoDTensor>().layout() == n8);
  CHECK(values<float>(scope.get("out")) ==
        naive_concat<float>({values<float>(scope.get("blocked")), values<float>(scope.get("plain"))},
                            {{1, 8, 3, 3}, {1, 16, 3, 3}}, 1));
  // Blocked inputs to the plain kernel: brought to NCHW by fluidk, Out NCHW.
  const kernel_choice plain =
      run_cpu(scope, "concat", {{"X", {"blocked", "blocked"}}}, {{"Out", {"twice"}}}, {{"axis", 1}});
  CHECK(plain.chosen.library() == library_type::plain);
  CHECK(scope.get("twice").get<LoDTensor>().layout() == data_layout::nchw);
  const std::vector<float> once = values<float>(scope.get("blocked"));
  CHECK(values<float>(scope.get("twice")) ==
        naive_concat<float>({once, once}, {{1, 8, 3, 3}, {1, 8, 3, 3}}, 1));
}
#endif

TEST_CASE("concat refuses inputs that do not line up, naming the operator", "[ops][concat][errors]") {
  for (const variant& v : float_variants()) {
    INFO(v.name);
    Scope scope;
    scope.var("a").set(LoDTensor(random_tensor<float>({2, 3, 4})));
    scope.var("b").set(LoDTensor(random_tensor<float>({2, 5, 5})));
    scope.var("flat").set(LoDTensor(random_tensor<float>({24})));
    scope.var("scalar").set(LoDTensor(Tensor(dims{}, data_type::float32)));
    const slot_names out{{"Out", {"out"}}};
    CHECK_THROWS_WITH(
        run_as(v, scope, "concat", {{"X", {"a", "b"}}}, out, {{"axis", 1}}),
        Catch::Contains("operator 'concat': X[1] [2, 5, 5] does not fit X[0] [2, 3, 4]: the inputs "
                        "differ only along axis 1"));
    CHECK_THROWS_WITH(run_as(v, scope, "concat", {{"X", {"a", "flat"}}}, out),
                      Catch::Contains("operator 'concat': X[1] [24] does not fit X[0] [2, 3, 4]"));
    CHECK_THROWS_WITH(run_as(v, scope, "concat", {{"X", {"a", "a"}}}, out, {{"axis", 3}}),
                      Catch::Contains("operator 'concat': axis (3) must be in [-3, 3) for X[0] [2, 3, 4]"));
    CHECK_THROWS_WITH(run_as(v, scope, "concat", {{"X", {"a", "a"}}}, out, {{"axis", -4}}),
                      Catch::Contains("operator 'concat': axis (-4) must be in [-3, 3)"));
    CHECK_THROWS_WITH(run_as(v, scope, "concat", {{"X", {"scalar"}}}, out),
                      Catch::Contains("operator 'concat': X[0] [] has no axis to concatenate along"));
    CHECK_FALSE(scope.get("out").initialized());
  }
  Scope scope;
  CHECK_THROWS_WITH(run_cpu(scope, "concat", {{"X", {}}}, {{"Out", {"out"}}}), Catch::Contains("concat"));
}
