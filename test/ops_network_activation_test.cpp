// batch_norm, clip, sigmoid (and dropout on blocked data): every kernel (CPU plain, oneDNN with plain and
// blocked inputs, OpenCL on PoCL) against naive references written here, on odd shapes and channel counts,
// with NaN and infinities, ONNX's node tests, and each refusal. The CUDA kernels run where a
// CUDA device exists (none where the tests are built).
//
// Tolerance: 1e-5 relative (floor 1e-5 absolute): the kernels differ from the references in
// the last roundings only (batch_norm's CPU kernels take 1 / sqrt(variance + epsilon) * scale
// per channel, in double).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/scope.hpp>
#include <fluidk/transforms/cpu.hpp>
#include <limits>
#include <ops/ops.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "ops_test_support.hpp"

using namespace fluidk;
using fluidk_test::padding_is_zero;
using fluidk_test::slot_names;

namespace {

const bool registered = (ops::register_all(), true);
constexpr double tolerance = 1e-5;
constexpr float inf_f = std::numeric_limits<float>::infinity();
const float nan_f = std::numeric_limits<float>::quiet_NaN();

std::mt19937& rng() {
  static std::mt19937 engine(20250302);
  return engine;
}

// A float tensor of these values (logical order), in `layout`.
Tensor tensor_of(const dims& shape, const std::vector<float>& v, data_layout layout = data_layout::any) {
  Tensor t(shape, data_type::float32, cpu_place,
           layout == data_layout::any ? data_layout::any : data_layout::nchw);
  REQUIRE(std::size_t(t.numel()) == v.size());
  std::copy(v.begin(), v.end(), t.data<float>());
  if (layout == data_layout::any || layout == data_layout::nchw) return t;
  return transform(t, kernel_key{cpu_place, data_type::float32, layout, library_type::plain});
}
std::vector<float> random_values(std::int64_t n, float lo = -3, float hi = 3) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& e : v) e = dist(rng());
  return v;
}

// The elements, of T, in logical row-major order, wherever the tensor lives and whatever its
// layout.
template <class T = float>
std::vector<T> values(const Tensor& t) {
  Tensor h = t.place().host_accessible() ? t : copy_to(t, cpu_place);
  if (h.layout().blocked() || h.layout() == data_layout::nhwc)
    h = transform(h, kernel_key{cpu_place, h.dtype(), data_layout::nchw, library_type::plain});
  return std::vector<T>(h.data<T>(), h.data<T>() + h.numel());
}

// Like check_close, and a NaN expected must be a NaN, an infinity the same infinity.
void check_values(const std::vector<float>& actual, const std::vector<double>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    const bool ok = std::isnan(e)   ? std::isnan(a)
                    : std::isinf(e) ? a == e
                                    : std::abs(a - e) <= tolerance * std::max(1.0, std::abs(e));
    if (!ok) {
      INFO("element " << i << ": " << a << " expected " << e);
      CHECK(false);
      return;
    }
  }
  SUCCEED();
}

// A kernel to check: where it runs, and whether the call asks for oneDNN.
struct variant {
  std::string name;
  place where;
  bool use_onednn;
};
// The kernels on the CPU: plain, and oneDNN's where it is built.
std::vector<variant> cpu_variants() {
  std::vector<variant> v{{"CPU plain", cpu_place, false}};
#if FLUIDK_OPS_ONEDNN
  v.push_back({"CPU oneDNN", cpu_place, true});
#endif
  return v;
}
// Those and the devices' kernels.
std::vector<variant> variants() {
  std::vector<variant> v = cpu_variants();
#if FLUIDK_OPS_OPENCL
  v.push_back({"OpenCL", place::of<opencl>(0), false});
#endif
#if FLUIDK_OPS_CUDA
  if (cuda_available()) v.push_back({"CUDA", place::of<cuda>(0), false});
#endif
  return v;
}

// Runs an operator as `v` says, and checks the kernel chosen.
void run_as(const variant& v, Scope& scope, std::string_view type, const slot_names& in,
            const slot_names& out, attribute_map attrs = {}) {
  REQUIRE(registered);
  if (v.use_onednn) attrs.set("use_onednn", true);
  const kernel_choice choice = fluidk_test::run_named(v.where, scope, type, in, out, attrs);
  INFO(v.name << ": " << type << " chose " << choice.chosen.to_string());
  CHECK(choice.chosen.place() == v.where);
  CHECK(choice.chosen.library() == (v.use_onednn ? library_type_of<library::onednn> : library_type::plain));
}

const Tensor& tensor(Scope& scope, const std::string& name) { return scope.get(name).get<LoDTensor>(); }

// --- references ---------------------------------------------------------------------------------

struct statistics {
  std::vector<float> scale, bias, mean, variance;
};
statistics random_statistics(std::int64_t c) {
  return {random_values(c), random_values(c), random_values(c), random_values(c, 0.1f, 2)};
}
std::vector<double> naive_batch_norm(const std::vector<float>& x, const dims& d, const statistics& s,
                                     double eps) {
  const std::int64_t c = d[1];
  std::int64_t inner = 1;
  for (std::size_t i = 2; i < d.rank(); ++i) inner *= d[i];
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t k = std::size_t((std::int64_t(i) / inner) % c);
    y[i] = (double(x[i]) - s.mean[k]) / std::sqrt(double(s.variance[k]) + eps) * s.scale[k] + s.bias[k];
  }
  return y;
}
std::vector<double> naive_clip(const std::vector<float>& x, double lo, double hi) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    y[i] = std::isnan(x[i]) ? double(x[i]) : std::min(std::max(double(x[i]), lo), hi);
  return y;
}
std::vector<double> naive_sigmoid(const std::vector<float>& x) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = 1 / (1 + std::exp(-double(x[i])));
  return y;
}

// Random values with a NaN and both infinities among them (when there is room).
std::vector<float> values_with_specials(std::int64_t n) {
  std::vector<float> v = random_values(n);
  if (n >= 3) {
    v[0] = nan_f;
    v[std::size_t(n / 2)] = inf_f;
    v[std::size_t(n - 1)] = -inf_f;
  }
  return v;
}

void set_statistics(Scope& scope, const dims& d, const statistics& s) {
  const dims c{d[1]};
  scope.var("scale").set(LoDTensor(tensor_of(c, s.scale)));
  scope.var("bias").set(LoDTensor(tensor_of(c, s.bias)));
  scope.var("mean").set(LoDTensor(tensor_of(c, s.mean)));
  scope.var("variance").set(LoDTensor(tensor_of(c, s.variance)));
}
const slot_names batch_norm_in{
    {"X", {"x"}}, {"Scale", {"scale"}}, {"Bias", {"bias"}}, {"Mean", {"mean"}}, {"Variance", {"variance"}}};
attribute_map batch_norm_attrs(float eps) {
  return {{"epsilon", eps}, {"momentum", 0.9f}, {"is_test", true}, {"data_layout", std::string("NCHW")}};
}

}  // namespace

// --- batch_norm ---------------------------------------------------------------------------------

TEST_CASE("batch_norm, every kernel, ranks 2 to 6 and odd channel counts",
          "[ops][batch_norm][onednn][opencl]") {
  const std::vector<dims> shapes{{2, 3, 4, 5},       {3, 17, 2, 3},   {4, 5},      {2, 3, 7},
                                 {1, 2, 1, 2, 2, 3}, {2, 5, 1, 3, 2}, {0, 3, 2, 2}};
  for (const variant& v : variants())
    for (const dims& d : shapes) {
      INFO(v.name << " X " << d.to_string());
      Scope scope;
      const std::vector<float> x = random_values(d.numel());
      const statistics s = random_statistics(d[1]);
      scope.var("x").set(LoDTensor(tensor_of(d, x)));
      set_statistics(scope, d, s);
      run_as(v, scope, "batch_norm", batch_norm_in, {{"Y", {"y"}}}, batch_norm_attrs(1e-3f));
      CHECK(tensor(scope, "y").dims() == d);
      check_values(values(tensor(scope, "y")), naive_batch_norm(x, d, s, double(1e-3f)));
    }
}

TEST_CASE("batch_norm in ONNX's order: a mean large against the spread, and a variance and epsilon of 0",
          "[ops][batch_norm][onednn][opencl]") {
  // Folded into x * a + (bias - mean * a), the CPU kernels cancelled: 5e-4 off here, and NaN
  // where (x - mean) / 0 is an infinity.
  const dims d{1, 2, 4};
  const std::vector<float> x{10000.5f, 10000.25f, 9999.75f, 10001.f, 0.3f, -0.2f, 0.f, 1.f};
  const statistics s{{1.f, 2.f}, {0.1f, -1.f}, {10000.f, 0.f}, {1e-4f, 0.f}};
  for (const variant& v : variants()) {
    INFO(v.name);
    Scope scope;
    scope.var("x").set(LoDTensor(tensor_of(d, x)));
    set_statistics(scope, d, s);
    run_as(v, scope, "batch_norm", batch_norm_in, {{"Y", {"y"}}}, batch_norm_attrs(0.f));
    check_values(values(tensor(scope, "y")), naive_batch_norm(x, d, s, 0.0));
  }
}

TEST_CASE(
    "batch_norm, every kernel: the factor scale / sqrt(var + epsilon) first, so nothing overflows on the way",
    "[ops][batch_norm][onednn][opencl][regression]") {
  // (x - mean) / sqrt(var + epsilon) * scale overflowed to infinity at 2e36 / sqrt(1e-5) on
  // the OpenCL kernel, and underflowed to 0 at 1e-30 / 1e19, where the CPU kernels' factor
  // (in double) gives finite values.
  const dims d{1, 4, 1, 1};
  const std::vector<float> x{2e36f, -2e36f, 1.f, 1e-30f};
  const statistics s{
      {1e-3f, 1e-3f, 1.f, 1e20f}, {0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 1.f, 1e38f}};
  const std::vector<double> expected = naive_batch_norm(x, d, s, double(1e-5f));
  for (const variant& v : variants()) {
    INFO(v.name);
    Scope scope;
    scope.var("x").set(LoDTensor(tensor_of(d, x)));
    set_statistics(scope, d, s);
    run_as(v, scope, "batch_norm", batch_norm_in, {{"Y", {"y"}}}, batch_norm_attrs(1e-5f));
    const std::vector<float> y = values(tensor(scope, "y"));
    for (const float value : y) CHECK(std::isfinite(value));
    check_values(y, expected);
    CHECK(std::abs(y[3] - expected[3]) <= 1e-5 * expected[3]);  // 1e-29, not 0
  }
}

#if FLUIDK_OPS_ONEDNN
TEST_CASE("batch_norm, oneDNN, blocked X stays blocked with zero padding lanes",
          "[ops][batch_norm][onednn]") {
  for (const data_layout layout : {data_layout_of<layout::nChw8c>, data_layout_of<layout::nChw16c>})
    for (const dims& d : {dims{2, 3, 4, 5}, dims{1, 17, 3, 3}, dims{2, 16, 2, 1}}) {
      INFO(layout.name() << " X " << d.to_string());
      Scope scope;
      const std::vector<float> x = random_values(d.numel());
      // Random statistics map 0 elsewhere: a padding lane computed like a channel would show.
      const statistics s = random_statistics(d[1]);
      scope.var("x").set(LoDTensor(tensor_of(d, x, layout)));
      set_statistics(scope, d, s);
      run_as({"CPU oneDNN", cpu_place, true}, scope, "batch_norm", batch_norm_in, {{"Y", {"y"}}},
             batch_norm_attrs(1e-5f));
      const Tensor& y = tensor(scope, "y");
      CHECK(y.layout() == layout);
      CHECK(padding_is_zero(y));
      check_values(values(y), naive_batch_norm(x, d, s, double(1e-5f)));
    }
}
#endif

TEST_CASE("batch_norm refuses training, other layouts and statistics not of X's channels",
          "[ops][batch_norm][onednn][opencl]") {
  struct refusal {
    dims x;
    std::int64_t channels;
    attribute_map attrs;
    const char* message;
  };
  attribute_map training = batch_norm_attrs(1e-5f), nhwc = batch_norm_attrs(1e-5f), no_is_test;
  training.set("is_test", false);
  nhwc.set("data_layout", std::string("NHWC"));
  const std::vector<refusal> refusals{
      {{2, 3, 4, 4}, 3, training, "'is_test' must be true"},
      {{2, 3, 4, 4}, 3, no_is_test, "'is_test' must be true"},
      {{2, 3, 4, 4}, 3, nhwc, "data_layout \"NCHW\" only, not \"NHWC\""},
      {{6}, 6, batch_norm_attrs(1e-5f), "rank 2 or more"},
      {{2, 3, 4, 4}, 4, batch_norm_attrs(1e-5f), "input 'Scale' must be 1-D [3]"},
  };
  for (const variant& v : variants())
    for (const refusal& r : refusals) {
      INFO(v.name << ": " << r.message);
      Scope scope;
      scope.var("x").set(LoDTensor(tensor_of(r.x, random_values(r.x.numel()))));
      set_statistics(scope, dims{1, r.channels}, random_statistics(r.channels));
      attribute_map attrs = r.attrs;
      if (v.use_onednn) attrs.set("use_onednn", true);
      CHECK_THROWS_WITH(
          fluidk_test::run_named(v.where, scope, "batch_norm", batch_norm_in, {{"Y", {"y"}}}, attrs),
          Catch::Contains("operator 'batch_norm'") && Catch::Contains(r.message));
    }
  // A statistic of another rank.
  Scope scope;
  scope.var("x").set(LoDTensor(tensor_of({2, 3, 2, 2}, random_values(24))));
  set_statistics(scope, dims{1, 3}, random_statistics(3));
  scope.var("mean").set(LoDTensor(tensor_of({1, 3}, random_values(3))));
  CHECK_THROWS_WITH(fluidk_test::run_named(cpu_place, scope, "batch_norm", batch_norm_in, {{"Y", {"y"}}},
                                           batch_norm_attrs(1e-5f)),
                    Catch::Contains("input 'Mean' must be 1-D [3]"));
}

// --- clip and sigmoid ---------------------------------------------------------------------------

namespace {
struct bounds {
  std::optional<float> lo, hi;
};
attribute_map clip_attrs(const bounds& b) {
  attribute_map a;
  if (b.lo) a.set("min", *b.lo);
  if (b.hi) a.set("max", *b.hi);
  return a;
}
std::vector<double> naive_clip(const std::vector<float>& x, const bounds& b) {
  return naive_clip(x, b.lo.value_or(-FLT_MAX), b.hi.value_or(FLT_MAX));
}
// Bounds about 0, above it, below it, crossed (max wins), open on either side.
const std::vector<bounds> clip_bounds{{-0.5f, 0.75f},
                                      {0.25f, 2.f},
                                      {-2.f, -0.25f},
                                      {1.f, -1.f},
                                      {std::nullopt, 0.5f},
                                      {-0.5f, std::nullopt},
                                      {}};
}  // namespace

TEST_CASE("clip and sigmoid, every kernel, with NaN and infinities", "[ops][clip][sigmoid][onednn][opencl]") {
  const std::vector<dims> shapes{{2, 3, 4, 5}, {7}, {3, 17, 3, 1}, {2, 1, 2, 1, 3, 2, 2}, {0, 4}};
  for (const variant& v : variants())
    for (const dims& d : shapes) {
      INFO(v.name << " X " << d.to_string());
      Scope scope;
      const std::vector<float> x = values_with_specials(d.numel());
      scope.var("x").set(LoDTensor(tensor_of(d, x)));
      for (const bounds& b : clip_bounds) {
        INFO("min " << b.lo.value_or(-FLT_MAX) << " max " << b.hi.value_or(FLT_MAX));
        run_as(v, scope, "clip", {{"X", {"x"}}}, {{"Out", {"clip"}}}, clip_attrs(b));
        CHECK(tensor(scope, "clip").dims() == d);
        check_values(values(tensor(scope, "clip")), naive_clip(x, b));
      }
      run_as(v, scope, "sigmoid", {{"X", {"x"}}}, {{"Out", {"sigmoid"}}});
      CHECK(tensor(scope, "sigmoid").dims() == d);
      check_values(values(tensor(scope, "sigmoid")), naive_sigmoid(x));
    }
}

// The plain kernels get X in NCHW (fluidk re-lays it out for them); oneDNN keeps it blocked.
TEST_CASE("clip and sigmoid on blocked X: oneDNN's Out stays blocked, padding lanes zero",
          "[ops][clip][sigmoid][onednn]") {
  const std::vector<variant> cpu = cpu_variants();
  for (const variant& v : cpu)
    for (const data_layout layout : {data_layout_of<layout::nChw8c>, data_layout_of<layout::nChw16c>})
      for (const dims& d : {dims{2, 3, 4, 5}, dims{1, 17, 3, 3}, dims{2, 16, 1, 2}}) {
        INFO(v.name << " " << layout.name() << " X " << d.to_string());
        Scope scope;
        const std::vector<float> x = values_with_specials(d.numel());
        scope.var("x").set(LoDTensor(tensor_of(d, x, layout)));
        for (const bounds& b : clip_bounds) {
          INFO("min " << b.lo.value_or(-FLT_MAX) << " max " << b.hi.value_or(FLT_MAX));
          run_as(v, scope, "clip", {{"X", {"x"}}}, {{"Out", {"clip"}}}, clip_attrs(b));
          const Tensor& out = tensor(scope, "clip");
          if (v.use_onednn) {
            CHECK(out.layout() == layout);
            CHECK(padding_is_zero(out));
          }
          check_values(values(out), naive_clip(x, b));
        }
        run_as(v, scope, "sigmoid", {{"X", {"x"}}}, {{"Out", {"sigmoid"}}});
        const Tensor& out = tensor(scope, "sigmoid");
        if (v.use_onednn) {
          CHECK(out.layout() == layout);
          CHECK(padding_is_zero(out));
        }
        check_values(values(out), naive_sigmoid(x));
      }
}

TEST_CASE("clip refuses NaN bounds", "[ops][clip][onednn][opencl]") {
  for (const variant& v : variants())
    for (const char* bound : {"min", "max"}) {
      INFO(v.name << " " << bound);
      Scope scope;
      scope.var("x").set(LoDTensor(tensor_of({3}, {1, 2, 3})));
      attribute_map attrs{{bound, nan_f}};
      if (v.use_onednn) attrs.set("use_onednn", true);
      CHECK_THROWS_WITH(
          fluidk_test::run_named(v.where, scope, "clip", {{"X", {"x"}}}, {{"Out", {"y"}}}, attrs),
          Catch::Contains("operator 'clip'") && Catch::Contains("is NaN"));
    }
}

// --- ONNX's node tests ----------------------------------------------------------------------------

namespace {

struct onnx_case {
  const char* name;
  const char* op;
  std::vector<std::int64_t> x_dims;
  const char* x;
  std::vector<const char*> statistics;  // batch_norm: scale, B, mean, var
  std::optional<float> epsilon, lo, hi;
  const char* y;
};

// test_batchnorm_{epsilon,example}, test_clip* (float) and test_sigmoid* of
// /usr/share/libonnx-testdata, written by: load model.onnx and test_data_set_0/*.pb
// (onnx.numpy_helper); print the shape of X, base64 of each array as little-endian float32s,
// the node's epsilon, Clip's min and max inputs.
const onnx_case onnx_cases[] = {
    {"test_batchnorm_epsilon",
     "batch_norm",
     {2, 3, 4, 5},
     "1p7QPrMGrD/udlG/1GOpPWdBpb8gPim/gBCXv9ViSj6z6tM+2UGZP70R8T9f1zY/hTISQIM0yD9LcRw/4ppgv8x/z7+G6BS/"
     "fK8Jv8krx7+HFl+9/Nfnv7OUIb/Xm22/+s++P/owSD4gdvG+PfvnPybTEsCotSY/HLSQvzEAR78S144/MnOrP0Q74r+XTNk+e26LP/"
     "yzxL701yE/QLYMv39oBT9e5t09afmFPmgtar95tVs/VjLBPRkyvr9YRvO/MpyRv32K4b9sxpO+SCSGP9/"
     "0fz7lHkA9iiCEv1tuzj6CHi+/xpOhPwpbAMDj/6m+eZqXvp/5DcAu6Du+mtzIPh1vdz5a3NQ9x15Uv/VK/D4Ojbg9lmB/"
     "v07PTL+fC1Q+rAEGP4oLM7+g6Gk/oDssvziGCD4dkto+QYZSvORZtL6QyFE//aAFP9A/mT881cO+wRAxP2swtT5HF4Y/"
     "7QjZvvbxYMCP7Ku//Ha2P2cRaj6B7IO+hlFOPcCqsL/i+YW+T683vmpZMb9QpJE/jzctvtmPQ79wA/++3cy5vs4lhz42MCG/"
     "28vxvtG1wb+lxo0/7nc0PgK7cL/l+W0/qgmIv4XrYr+y7vU/Wmjrvntli78c73s/32CUv8qB377tLoE/",
     {"s6A2P/5hOr+N6lY/", "PZieP3R05L/W0ku/", "8ESzv2bGPL6eErK/", "Y7s2PWy/TD9Xm509"},
     0.009999999776482582f,
     std::nullopt,
     std::nullopt,
     "00PYQJ7fGUHzEEFAkYq4QNhfyT8qw19A8LH0P8HEw0DT5NhAJ7YSQSU4NEExO/ZA6c1HQU2gJEFpKOxA8II1QODVED/"
     "uR29AjNh3QJSuQz/e5/G/GOPvvqIutr9CbZe/P/ZIwFnlBcAJtca/"
     "q51ZwHB6n70Kfh3AEnmCv3cLp79IjjXAGCFBwFIGAb+4vxHATC00wJrCz78UghzAzZ++"
     "vwC9lEBaRF5AzjN6QIhpDz8sc7NAoLZbQNdsiL/ixA/AWOKXvREN7b/c7xVAarzEQJAReEBMElNAGCRnPmP+iUAPxps/"
     "R0PYQD7lIsAoBw5AcYmTQHX2oL87iZ5A3MjWQOQQyEBhnbpARNk+"
     "QOeY4ECxQ7lA6AYeQF2eRECmsMRAu5jjQA5IWEDg2wRB9npdQFB8vUDSKdpA2zSvQFENjkBiNCbAIs0WwD7EOcCo78+/"
     "QpYfwNcYDsA5BDLA1aXLv0DhaD9t5li/xpVFwOGbB8DX3Ny/LcP8v7w5Ub+Tcty/Pfjkv6zNr79tsDbAPwfmvyBZfT9xjN8/"
     "sGcIQLaeekCTmq8/p/ToP0lukr9pK8pAAKNqQACD+T5b87lA9BIOPtISJD+TJgpBs4DtP2Aogz3z6r5AoP0Kvgv59T/5NMFA"},
    {"test_batchnorm_example",
     "batch_norm",
     {2, 3, 4, 5},
     "eMzhP2jhzD6Tjno/y2oPQCQM7z/iLnq//zhzP2L9Gr5oZNO9+DnSPiiAEz6iJbo/"
     "XtNCP8Aw+T0LQuM+XdeqPvw9vz8CFVK+aUqgPgWmWr8vZCPAjFMnP7FLXT+H/j2/qUMRQKgour9IbTs9IK0/vhwyxD/zE7w/"
     "iqoePoWewT7tRWO/vYr9v4shsr7yGSA+KnqdP5XnmT+zT8a+bceavvw2hr8mw7W/EGfavwKz+T+ReAK/RkvgvplboL+cCUc/"
     "NJTOv5fYWb5MPWW/FhjGPiDEAr/1Hpe/a97mvFFO2z4uOog9md2aPu9iIr82ubm+XiYsv1oXuL5bKlC/"
     "1PbcvzOvNT47ts2+V6rQv8zx7D61RGi/ssRUPa6lOj8ZFAQ+4teRP8YOnr+5/80+t08vv5DsXr9+LxS/0IOfvqENZj2hI5W/"
     "kZxmP09r7j6io8S/DH++P3+s8j9A4pY/Nz44vmwOib9G+IY/NW3OvhR5nD8JRlU+BAV6P6h1tj774TQ/"
     "RwgsPGiX5D8+9QE+jdHNPhUL8T9eg6y/QZ+iv2IqeD/oKJa/lMj4P97F074zWT+/9yL2P4KBvT8sDO8/i/JnP0l5XL8CffQ/"
     "vTeJvshtTT8bf3I/97oevk40HT+9FWw/",
     {"2brAPiq5jL+tspg+", "A8epPzPPMb/MORm+", "cszevq207D+CGyw/", "x7t5P+4VWz9u7D88"},
     std::nullopt,
     std::nullopt,
     std::nullopt,
     "1ocKQL6G0j9SwO4/VikWQCYODUC5VI8/iFrtPzCftz9c+Lk/JAnTP0gIxj+C+QJAlSHkP+/wxD+QqNQ/ekjPPxDyA0BM/7Q/"
     "IkfOPxNXlT8QMJFAC/I5P5Kd8z6zpRhASd6Yv+bQTkA2cLk/aN/cP3AMo74263i+MtSoP8rfhj8RuSNA/dp2QHhS9T+cnag/"
     "QAsoPQD0lz1aUfs/WmLuP852nMB/NL3Ac2/"
     "WwFrLV0A67lnAE1BNwE13rsAaeg8+LEvOwEKXJcCU+I7A5Ipvv0EiWsAGG6jAkQ4FwG9UUr/8uei/"
     "xomVv0zob8B1CEDAazOePyV3rT94Vpc/opVVPy6pxz/JZ6s/hvVeP9WU1T+ovpI/H4rBP5yS4j8zTMU/vpb2P1nEgj8GotI/"
     "MZmdP4CGlD94xKI/mc6vP9K+wT+Z0ThAKnndPsEgcz8lC1VAk/SHvo7+P7+YZNE9usTbP5mjMUDA/n8+lLr9PwA8Tj2Et6A/"
     "ClivPpIwij+/1Sk/PM2+P+eFHr/wF60/"
     "7j+DP5rfS0AO1rbAdAawwLwvKz+YcafAf4hWQHYAScDd7IHAS+NSQIvlBED7H0lA+gf9Pvnzi8AunlBAKFUvwKbkVT5ekhs/"
     "B2obwO+1nr5r6Qk/"},
    {"test_clip",
     "clip",
     {3, 4, 5},
     "eMzhP2jhzD6Tjno/y2oPQCQM7z/iLnq//zhzP2L9Gr5oZNO9+DnSPiiAEz6iJbo/"
     "XtNCP8Aw+T0LQuM+XdeqPvw9vz8CFVK+aUqgPgWmWr8vZCPAjFMnP7FLXT+H/j2/qUMRQKgour9IbTs9IK0/vhwyxD/zE7w/"
     "iqoePoWewT7tRWO/vYr9v4shsr7yGSA+KnqdP5XnmT+zT8a+bceavvw2hr8mw7W/EGfavwKz+T+ReAK/RkvgvplboL+cCUc/"
     "NJTOv5fYWb5MPWW/FhjGPiDEAr/1Hpe/a97mvFFO2z4uOog9md2aPu9iIr82ubm+",
     {},
     std::nullopt,
     -1.0f,
     1.0f,
     "AACAP2jhzD6Tjno/AACAPwAAgD/iLnq//zhzP2L9Gr5oZNO9+DnSPiiAEz4AAIA/"
     "XtNCP8Aw+T0LQuM+XdeqPgAAgD8CFVK+aUqgPgWmWr8AAIC/jFMnP7FLXT+H/j2/AACAPwAAgL9IbTs9IK0/vgAAgD8AAIA/"
     "iqoePoWewT7tRWO/AACAv4shsr7yGSA+AACAPwAAgD+zT8a+bceavgAAgL8AAIC/AACAvwAAgD+ReAK/RkvgvgAAgL+cCUc/"
     "AACAv5fYWb5MPWW/FhjGPiDEAr8AAIC/a97mvFFO2z4uOog9md2aPu9iIr82ubm+"},
    {"test_clip_default_inbounds",
     "clip",
     {3},
     "AACAvwAAAAAAAIA/",
     {},
     std::nullopt,
     std::nullopt,
     std::nullopt,
     "AACAvwAAAAAAAIA/"},
    {"test_clip_default_max",
     "clip",
     {3, 4, 5},
     "XiYsv1oXuL5bKlC/1PbcvzOvNT47ts2+V6rQv8zx7D61RGi/ssRUPa6lOj8ZFAQ+4teRP8YOnr+5/80+t08vv5DsXr9+LxS/"
     "0IOfvqENZj2hI5W/kZxmP09r7j6io8S/DH++P3+s8j9A4pY/Nz44vmwOib9G+IY/NW3OvhR5nD8JRlU+BAV6P6h1tj774TQ/"
     "RwgsPGiX5D8+9QE+jdHNPhUL8T9eg6y/QZ+iv2IqeD/oKJa/lMj4P97F074zWT+/9yL2P4KBvT8sDO8/i/JnP0l5XL8CffQ/"
     "vTeJvshtTT8bf3I/97oevk40HT+9FWw/",
     {},
     std::nullopt,
     std::nullopt,
     0.0f,
     "XiYsv1oXuL5bKlC/1PbcvwAAAAA7ts2+V6rQvwAAAAC1RGi/AAAAAAAAAAAAAAAAAAAAAMYOnr8AAAAAt08vv5DsXr9+LxS/"
     "0IOfvgAAAAChI5W/AAAAAAAAAACio8S/"
     "AAAAAAAAAAAAAAAANz44vmwOib8AAAAANW3OvgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAABeg6y/"
     "QZ+ivwAAAADoKJa/AAAAAN7F074zWT+/AAAAAAAAAAAAAAAAAAAAAEl5XL8AAAAAvTeJvgAAAAAAAAAA97oevgAAAAAAAAAA"},
    {"test_clip_default_min",
     "clip",
     {3, 4, 5},
     "eMzhP2jhzD6Tjno/y2oPQCQM7z/iLnq//zhzP2L9Gr5oZNO9+DnSPiiAEz6iJbo/"
     "XtNCP8Aw+T0LQuM+XdeqPvw9vz8CFVK+aUqgPgWmWr8vZCPAjFMnP7FLXT+H/j2/qUMRQKgour9IbTs9IK0/vhwyxD/zE7w/"
     "iqoePoWewT7tRWO/vYr9v4shsr7yGSA+KnqdP5XnmT+zT8a+bceavvw2hr8mw7W/EGfavwKz+T+ReAK/RkvgvplboL+cCUc/"
     "NJTOv5fYWb5MPWW/FhjGPiDEAr/1Hpe/a97mvFFO2z4uOog9md2aPu9iIr82ubm+",
     {},
     std::nullopt,
     0.0f,
     std::nullopt,
     "eMzhP2jhzD6Tjno/y2oPQCQM7z8AAAAA/zhzPwAAAAAAAAAA+DnSPiiAEz6iJbo/"
     "XtNCP8Aw+T0LQuM+XdeqPvw9vz8AAAAAaUqgPgAAAAAAAAAAjFMnP7FLXT8AAAAAqUMRQAAAAABIbTs9AAAAABwyxD/zE7w/"
     "iqoePoWewT4AAAAAAAAAAAAAAADyGSA+KnqdP5XnmT8AAAAAAAAAAAAAAAAAAAAAAAAAAAKz+T8AAAAAAAAAAAAAAACcCUc/"
     "AAAAAAAAAAAAAAAAFhjGPgAAAAAAAAAAAAAAAFFO2z4uOog9md2aPgAAAAAAAAAA"},
    {"test_clip_example", "clip", {3}, "AAAAwAAAAAAAAABA", {}, std::nullopt, -1.0f, 1.0f, "AACAvwAAAAAAAIA/"},
    {"test_clip_inbounds",
     "clip",
     {3},
     "AACAvwAAAAAAAIA/",
     {},
     std::nullopt,
     -5.0f,
     5.0f,
     "AACAvwAAAAAAAIA/"},
    {"test_clip_outbounds",
     "clip",
     {3},
     "AADAwAAAAAAAAMBA",
     {},
     std::nullopt,
     -5.0f,
     5.0f,
     "AACgwAAAAAAAAKBA"},
    {"test_clip_splitbounds",
     "clip",
     {3},
     "AACAvwAAAAAAAMBA",
     {},
     std::nullopt,
     -5.0f,
     5.0f,
     "AACAvwAAAAAAAKBA"},
    {"test_sigmoid",
     "sigmoid",
     {3, 4, 5},
     "eMzhP2jhzD6Tjno/y2oPQCQM7z/iLnq//zhzP2L9Gr5oZNO9+DnSPiiAEz6iJbo/"
     "XtNCP8Aw+T0LQuM+XdeqPvw9vz8CFVK+aUqgPgWmWr8vZCPAjFMnP7FLXT+H/j2/qUMRQKgour9IbTs9IK0/vhwyxD/zE7w/"
     "iqoePoWewT7tRWO/vYr9v4shsr7yGSA+KnqdP5XnmT+zT8a+bceavvw2hr8mw7W/EGfavwKz+T+ReAK/RkvgvplboL+cCUc/"
     "NJTOv5fYWb5MPWW/FhjGPiDEAr/1Hpe/a97mvFFO2z4uOog9md2aPu9iIr82ubm+",
     {},
     std::nullopt,
     std::nullopt,
     std::nullopt,
     "Ko1aPxJGGT9aEzo/gmNnP629XT9Q/4s+K5w4P8ep7D65zPI+TeoZP/AzCT8ah08/9XsuPxHHBz8r8xs/wSgVP5QSUT/"
     "b1OU+0d8TP77emD4r65M9P2coP0IeND/FIqU+9gVoP+DfQT6T7QI/NRzoPqGJUj8kHlA/l+UJPwXrFz9FSJU+hEn4PT3p0z5q/Ak/"
     "TxxGP8XZRD9oCM8+55jZPpfdhD6hVEc+7lUdPtAiYD8OJMA+b87IPsKMYz5FZS8/"
     "hwgqPhnf5D6oeJQ+GXUYP6EAwD66k3A+lmT8Pm0AGz9rQQQ/QjYTP4hssT5XEtI+"},
    {"test_sigmoid_example",
     "sigmoid",
     {3},
     "AACAvwAAAAAAAIA/",
     {},
     std::nullopt,
     std::nullopt,
     std::nullopt,
     "sLKJPgAAAD+oJjs/"},
};

std::vector<float> decode(const char* base64) {
  static constexpr std::string_view alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> bytes;
  unsigned bits = 0;
  int count = 0;
  for (const char* p = base64; *p != '\0' && *p != '='; ++p) {
    bits = (bits << 6) | unsigned(alphabet.find(*p));
    if ((count += 6) >= 8) {
      count -= 8;
      bytes.push_back(static_cast<unsigned char>((bits >> count) & 0xffu));
    }
  }
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

}  // namespace

TEST_CASE("batch_norm, clip and sigmoid, every kernel on ONNX's node tests", "[ops][onnx][onednn][opencl]") {
  for (const variant& v : variants())
    for (const onnx_case& o : onnx_cases) {
      INFO(v.name << ": " << o.name);
      Scope scope;
      const dims d{std::span<const std::int64_t>(o.x_dims)};
      scope.var("x").set(LoDTensor(tensor_of(d, decode(o.x))));
      attribute_map attrs;
      slot_names in{{"X", {"x"}}}, out{{"Out", {"y"}}};
      if (std::string_view(o.op) == "batch_norm") {
        const char* names[] = {"scale", "bias", "mean", "variance"};
        for (std::size_t i = 0; i < 4; ++i)
          scope.var(names[i]).set(LoDTensor(tensor_of({d[1]}, decode(o.statistics[i]))));
        in = batch_norm_in;
        out = {{"Y", {"y"}}};
        attrs = batch_norm_attrs(o.epsilon.value_or(1e-5f));
      } else if (std::string_view(o.op) == "clip") {
        attrs = clip_attrs({o.lo, o.hi});
      }
      run_as(v, scope, o.op, in, out, attrs);
      const std::vector<float> expected = decode(o.y);
      check_values(values(tensor(scope, "y")), std::vector<double>(expected.begin(), expected.end()));
    }
}

// dropout's CPU kernel takes the blocked layouts as they are: a blocked network (use_onednn's
// convolutions) goes through it without a reorder, the view sharing X's storage, the scale
// keeping the padding lanes zero; Mask is row-major and all true. X is never changed.
TEST_CASE("dropout on blocked X: no reorder, Out in X's layout, padding lanes zero",
          "[ops][dropout][onednn]") {
  REQUIRE(registered);
  for (const bool use_onednn : {false, true})
    for (const data_layout layout : {data_layout_of<layout::nChw8c>, data_layout_of<layout::nChw16c>})
      for (const dims& d : {dims{2, 3, 4, 5}, dims{1, 17, 3, 3}}) {
        for (const bool view : {true, false}) {
          INFO((use_onednn ? "use_onednn " : "") << layout.name() << " X " << d.to_string()
                                                 << (view ? " upscale_in_train" : " downgrade_in_infer"));
          Scope scope;
          const std::vector<float> x = random_values(d.numel());
          scope.var("x").set(LoDTensor(tensor_of(d, x, layout)));
          const std::uint64_t version = tensor(scope, "x").version();
          attribute_map attrs;
          attrs.set("is_test", true);
          attrs.set("dropout_prob", 0.25f);
          attrs.set("dropout_implementation", std::string(view ? "upscale_in_train" : "downgrade_in_infer"));
          if (use_onednn) attrs.set("use_onednn", true);
          const kernel_choice choice = fluidk_test::run_named(cpu_place, scope, "dropout", {{"X", {"x"}}},
                                                              {{"Out", {"out"}}, {"Mask", {"mask"}}}, attrs);
          CHECK(choice.chosen.layout() == layout);
          const Tensor& out = tensor(scope, "out");
          CHECK(out.layout() == layout);
          CHECK(out.dims() == d);
          CHECK(padding_is_zero(out));
          CHECK(out.shares_buffer_with(tensor(scope, "x")) == view);
          std::vector<double> expected(x.begin(), x.end());
          if (!view)
            for (double& e : expected) e *= 0.75f;
          check_values(values(out), expected);
          CHECK(values(tensor(scope, "x")) == x);
          CHECK(tensor(scope, "x").version() == version);
          const Tensor& mask = tensor(scope, "mask");
          CHECK(mask.dims() == d);
          CHECK_FALSE(mask.layout().blocked());
          CHECK(std::all_of(mask.data<bool>(), mask.data<bool>() + mask.numel(), [](bool b) { return b; }));
        }
      }
}

TEST_CASE("elementwise_div and the comparisons on blocked X and Y: right values, padding lanes zero",
          "[ops][elementwise][compare][onednn]") {
  // A pass over blocked storage computes the operation on the padding lanes too: 0 / 0 is NaN
  // (an error for integers), 0 == 0 true. A oneDNN convolution reading such a tensor multiplies
  // the lanes by its zero-padded weights, and NaN times zero made every output NaN.
  const std::vector<variant> cpu = cpu_variants();
  for (const data_layout layout : {data_layout_of<layout::nChw8c>, data_layout_of<layout::nChw16c>})
    for (const dims& d : {dims{1, 3, 4, 4}, dims{2, 17, 3, 2}, dims{1, 16, 2, 2}}) {
      INFO(layout.name() << " " << d.to_string());
      const std::vector<float> x = random_values(d.numel()), y = random_values(d.numel(), 0.5f, 2.f);
      std::vector<double> quotient(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) quotient[i] = double(x[i] / y[i]);
      for (const variant& v : cpu) {
        INFO(v.name);
        Scope scope;
        scope.var("x").set(LoDTensor(tensor_of(d, x, layout)));
        scope.var("y").set(LoDTensor(tensor_of(d, y, layout)));
        run_as(v, scope, "elementwise_div", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"q"}}});
        const Tensor& q = tensor(scope, "q");
        if (q.layout().blocked()) CHECK(padding_is_zero<float>(q));
        check_values(values(q), quotient);
      }

      // The plain kernels on blocked storage, run directly (the runtime path hands plain kernels
      // NCHW; the oneDNN kernel hands its own cases to them): integers, where 0 / 0 in the
      // padding lanes was an error, and the comparisons, where 0 == 0 was true there.
      std::vector<float> xi(x.size()), yi(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) {
        xi[i] = std::round(x[i] * 10);
        yi[i] = std::round(y[i] * 3);  // 2 to 6
      }
      device_context& host = context_of(cpu_place);
      const kernel_key int32_blocked{cpu_place, data_type::int32, layout, library_type::plain};
      const Tensor xt = transform(tensor_of(d, xi, data_layout::nchw), int32_blocked);
      const Tensor yt = transform(tensor_of(d, yi, data_layout::nchw), int32_blocked);
      REQUIRE(xt.layout() == layout);
      const Tensor qi = fluidk_test::run_kernel<ops::elementwise_div>(
          host, ops::elementwise_binary_cpu<std::int32_t, ops::div_operation>{}, int32_blocked, {&xt, &yt},
          {});
      if (qi.layout().blocked()) CHECK(padding_is_zero<std::int32_t>(qi));
      const std::vector<std::int32_t> got = values<std::int32_t>(qi);
      for (std::size_t i = 0; i < got.size(); ++i)
        if (got[i] != std::int32_t(xi[i]) / std::int32_t(yi[i]))
          FAIL("int32 element " << i << ": " << got[i]);

      const kernel_key float_blocked{cpu_place, data_type::float32, layout, library_type::plain};
      const Tensor xf = tensor_of(d, x, layout), yf = tensor_of(d, y, layout);
      auto compare = [&]<class Op, class Cmp>(Op, Cmp, bool same, auto expected) {
        INFO(Op::name);
        for (const bool against_self : {true, false}) {
          const Tensor c = fluidk_test::run_kernel<Op>(host, ops::compare_cpu<float, Cmp>{}, float_blocked,
                                                       {&xf, against_self ? &xf : &yf}, {});
          if (c.layout().blocked()) CHECK(padding_is_zero<bool>(c));
          const std::vector<bool> cs = values<bool>(c);
          for (std::size_t i = 0; i < x.size(); ++i)
            if (cs[i] != (against_self ? same : expected(x[i], y[i]))) FAIL("element " << i);
        }
      };
      compare(ops::equal{}, ops::equal_comparison{}, true, [](float a, float b) { return a == b; });
      compare(ops::less_equal{}, ops::less_equal_comparison{}, true, [](float a, float b) { return a <= b; });
      compare(ops::less_than{}, ops::less_than_comparison{}, false, [](float a, float b) { return a < b; });
    }
}

TEST_CASE("softmax, every kernel: against the naive one, and empty axes or rows",
          "[ops][softmax][onednn][opencl]") {
  struct softmax_case {
    dims shape;
    std::int32_t axis;
  };
  // [5, 0] along its last axis: no element to take the maximum of (the CPU kernel read one).
  for (const softmax_case& c :
       {softmax_case{{3, 7, 5}, 1}, softmax_case{{4, 6}, -1}, softmax_case{{5, 0}, -1},
        softmax_case{{0, 3}, -1}, softmax_case{{2, 0, 3}, 1}, softmax_case{{2, 3, 0}, 1}}) {
    INFO("X " << c.shape.to_string() << " axis " << c.axis);
    const std::vector<float> x = random_values(c.shape.numel());
    const std::int64_t a = c.axis < 0 ? c.axis + std::int64_t(c.shape.rank()) : c.axis;
    const std::int64_t n = c.shape[std::size_t(a)],
                       inner = ops::detail::product(c.shape, std::size_t(a) + 1, c.shape.rank());
    std::vector<double> expected(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::int64_t at = std::int64_t(i), k = at / inner % n, base = at - k * inner;
      double max = -INFINITY, sum = 0;
      for (std::int64_t j = 0; j < n; ++j) max = std::max(max, double(x[std::size_t(base + j * inner)]));
      for (std::int64_t j = 0; j < n; ++j) sum += std::exp(double(x[std::size_t(base + j * inner)]) - max);
      expected[i] = std::exp(double(x[i]) - max) / sum;
    }
    for (const variant& v : variants()) {
      INFO(v.name);
      Scope scope;
      scope.var("x").set(LoDTensor(tensor_of(c.shape, x)));
      run_as(v, scope, "softmax", {{"X", {"x"}}}, {{"Out", {"y"}}}, {{"axis", c.axis}});
      CHECK(tensor(scope, "y").dims() == c.shape);
      check_values(values(tensor(scope, "y")), expected);
    }
  }
}
