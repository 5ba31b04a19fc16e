// The spatial family (conv2d, batch_norm, pool2d) as CNNs imported from ONNX use it: every kernel
// (CPU plain, oneDNN, OpenCL on PoCL; CUDA where a device exists) on NCHW and on blocked nChw8c
// and nChw16c inputs, against naive references written here from ONNX's rules, on odd channel
// counts (3, 17, 33: the blocked layouts' padding lanes matter); ONNX's node tests, read from
// libonnx-testdata where it is installed; a oneDNN conv2d -> batch_norm -> pool2d chain that
// stays blocked; and the refusals of attributes and ranks the operators do not support.
//
// Tolerances: 1e-4 relative (floor 1e-4 absolute) for conv2d, whose kernels sum hundreds of
// products in float in their own orders; 1e-5 for batch_norm and average pooling (a handful of
// float operations per element); max pooling selects an input value, so it must be exact.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
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
  static std::mt19937 engine(20250417);
  return engine;
}

// Random values in [lo, hi), drawn in NCHW order, then laid out as asked.
Tensor random_tensor(const dims& shape, data_layout layout = data_layout::any, double lo = -1,
                     double hi = 1) {
  Tensor t(shape, data_type::float32, cpu_place,
           layout == data_layout::any ? data_layout::any : data_layout::nchw);
  fluidk_test::fill_uniform<float>(t, rng(), lo, hi);
  if (layout == data_layout::any || layout == data_layout::nchw) return t;
  return transform(t, kernel_key{cpu_place, data_type::float32, layout, library_type::plain});
}

Tensor tensor_of(const dims& shape, const std::vector<float>& v) {
  Tensor t(shape, data_type::float32, cpu_place);
  REQUIRE(std::int64_t(v.size()) == t.numel());
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// The elements in logical row-major order, wherever the tensor lives and whatever its layout.
std::vector<float> values(const Tensor& t) {
  const Tensor host = [&] {
    Tensor h = t.place().host_accessible() ? t : copy_to(t, cpu_place);
    if (h.layout() == data_layout::any || h.layout() == data_layout::nchw ||
        h.layout() == data_layout_of<layout::nc>)
      return h;
    return transform(h, kernel_key{cpu_place, h.dtype(), data_layout::nchw, library_type::plain});
  }();
  return std::vector<float>(host.data<float>(), host.data<float>() + host.numel());
}
std::vector<float> values(const Variable& v) { return values(v.get<LoDTensor>()); }

bool blocked(data_layout l) { return l.block_size() > 1; }

// The layouts each kernel is given its 4-D input in: NCHW, and the blocked ones where oneDNN
// is built (fluidk re-lays them out for the kernels not declared for them).
std::vector<data_layout> input_layouts() {
  std::vector<data_layout> l{data_layout::nchw};
#if FLUIDK_OPS_ONEDNN
  l.push_back(data_layout_of<layout::nChw8c>);
  l.push_back(data_layout_of<layout::nChw16c>);
#endif
  return l;
}

// A kernel to check: where it runs, and whether the call asks for oneDNN.
struct variant {
  std::string name;
  place where;
  bool use_onednn;
};
std::vector<variant> float_variants() {
  std::vector<variant> v{{"CPU plain", cpu_place, false}};
#if FLUIDK_OPS_ONEDNN
  v.push_back({"CPU oneDNN", cpu_place, true});
#endif
#if FLUIDK_OPS_OPENCL
  v.push_back({"OpenCL", place::of<opencl>(0), false});
#endif
#if FLUIDK_OPS_CUDA
  if (cuda_available()) v.push_back({"CUDA", place::of<cuda>(0), false});
#endif
  return v;
}

// Runs an operator through the runtime path as `v` says, and checks the kernel it chose.
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

// Where an output lies and how it is laid out: on the kernel's place; a oneDNN kernel given a
// blocked input answers in a blocked layout (`same_blocked`: the input's), its padding lanes
// zero; every other kernel answers in row-major order.
void check_layout(const variant& v, const Tensor& out, data_layout in, bool same_blocked) {
  CHECK(out.place() == v.where);
  if (v.use_onednn && blocked(in)) {
    if (same_blocked) CHECK(out.layout() == in);
    CHECK(blocked(out.layout()));
    if (blocked(out.layout())) CHECK(padding_is_zero(out));
  } else if (!v.use_onednn) {
    CHECK((out.layout() == data_layout::any || out.layout() == data_layout::nchw));
  }
}

std::vector<std::int32_t> ints(std::initializer_list<std::int32_t> v) { return v; }

// Fluid's paddings (2: both sides alike; 4: top, bottom, left, right) as [begin, end] per axis.
struct pads {
  std::array<std::int64_t, 2> begin{}, end{};
};
pads pads_of(const std::vector<std::int32_t>& p) {
  if (p.empty()) return {};
  if (p.size() == 2) return {{p[0], p[1]}, {p[0], p[1]}};
  return {{p[0], p[2]}, {p[1], p[3]}};
}

// --- ONNX's node tests --------------------------------------------------------------------------

const std::filesystem::path onnx_node_tests = "/usr/share/libonnx-testdata/data/node";

// A float TensorProto as ONNX's node tests store them: dims (field 1), data_type (2, FLOAT = 1),
// the values in float_data (4) or raw_data (9, little-endian, as the host here).
struct onnx_tensor {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};
std::optional<onnx_tensor> read_onnx_tensor(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t at = 0;
  bool broken = false;
  const auto varint = [&] {
    std::uint64_t v = 0;
    for (int shift = 0; at < bytes.size() && shift < 64; shift += 7) {
      const auto byte = std::uint8_t(bytes[at++]);
      v |= std::uint64_t(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return v;
    }
    broken = true;
    return v;
  };
  onnx_tensor t;
  std::uint64_t type = 0;
  const auto floats = [&](std::size_t begin, std::size_t n) {
    for (std::size_t i = 0; i + 4 <= n; i += 4) {
      float f = 0;
      std::memcpy(&f, bytes.data() + begin + i, 4);
      t.values.push_back(f);
    }
  };
  while (at < bytes.size() && !broken) {
    const std::uint64_t key = varint(), field = key >> 3, wire = key & 7;
    if (wire == 0) {
      const std::uint64_t v = varint();
      if (field == 1) t.shape.push_back(std::int64_t(v));
      if (field == 2) type = v;
    } else if (wire == 1) {
      at += 8;
    } else if (wire == 5) {
      if (field == 4 && at + 4 <= bytes.size()) floats(at, 4);
      at += 4;
    } else if (wire == 2) {
      const std::size_t n = std::size_t(varint()), end = at + n;
      if (end > bytes.size()) return std::nullopt;
      if (field == 1)
        while (at < end && !broken) t.shape.push_back(std::int64_t(varint()));
      else if (field == 4 || field == 9)
        floats(at, n);
      at = end;
    } else {
      return std::nullopt;
    }
  }
  if (broken || type != 1) return std::nullopt;
  return t;
}

// The inputs and the expected output of a node test, or nothing when libonnx-testdata is not
// installed (the test then says so).
struct node_test_data {
  std::vector<onnx_tensor> inputs;
  onnx_tensor output;
};
std::optional<node_test_data> node_test(const std::string& name, int inputs) {
  const std::filesystem::path set = onnx_node_tests / name / "test_data_set_0";
  if (!std::filesystem::exists(set)) return std::nullopt;
  node_test_data d;
  for (int i = 0; i < inputs; ++i) {
    std::optional<onnx_tensor> t = read_onnx_tensor(set / ("input_" + std::to_string(i) + ".pb"));
    REQUIRE(t);
    d.inputs.push_back(std::move(*t));
  }
  std::optional<onnx_tensor> out = read_onnx_tensor(set / "output_0.pb");
  REQUIRE(out);
  d.output = std::move(*out);
  return d;
}
dims dims_of(const std::vector<std::int64_t>& d) { return dims(std::span<const std::int64_t>(d)); }

}  // namespace

// --- conv2d -------------------------------------------------------------------------------------

namespace {

struct conv_case {
  dims x, w;
  std::vector<std::int32_t> strides, paddings, dilations;  // paddings: top, bottom, left, right
  std::int32_t groups;
};

attribute_map conv_attrs(const conv_case& c) {
  return {{"strides", c.strides}, {"paddings", c.paddings}, {"dilations", c.dilations}, {"groups", c.groups}};
}

// A direct convolution in long double.
std::vector<long double> naive_conv(const std::vector<float>& x, const std::vector<float>& w,
                                    const conv_case& c, dims& out_dims) {
  const std::int64_t n = c.x[0], ch = c.x[1], h = c.x[2], wd = c.x[3];
  const std::int64_t oc = c.w[0], cg = c.w[1], kh = c.w[2], kw = c.w[3], ocg = oc / c.groups;
  const pads p = pads_of(c.paddings);
  const std::int64_t oh = (h + p.begin[0] + p.end[0] - (c.dilations[0] * (kh - 1) + 1)) / c.strides[0] + 1;
  const std::int64_t ow = (wd + p.begin[1] + p.end[1] - (c.dilations[1] * (kw - 1) + 1)) / c.strides[1] + 1;
  out_dims = {n, oc, oh, ow};
  std::vector<long double> out(std::size_t(n * oc * oh * ow), 0);
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t o = 0; o < oc; ++o)
      for (std::int64_t y = 0; y < oh; ++y)
        for (std::int64_t z = 0; z < ow; ++z) {
          long double acc = 0;
          for (std::int64_t ci = 0; ci < cg; ++ci)
            for (std::int64_t i = 0; i < kh; ++i)
              for (std::int64_t j = 0; j < kw; ++j) {
                const std::int64_t iy = y * c.strides[0] - p.begin[0] + i * c.dilations[0];
                const std::int64_t ix = z * c.strides[1] - p.begin[1] + j * c.dilations[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                const std::int64_t channel = o / ocg * cg + ci;
                acc += (long double)x[std::size_t(((b * ch + channel) * h + iy) * wd + ix)] *
                       w[std::size_t(((o * cg + ci) * kh + i) * kw + j)];
              }
          out[std::size_t(((b * oc + o) * oh + y) * ow + z)] = acc;
        }
  return out;
}

const std::vector<conv_case> conv_cases{
    // ResNet's stem: 7x7, stride 2, padding 3.
    {{1, 3, 23, 19}, {17, 3, 7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1},
    // MobileNetV2's depthwise convolutions: stride 2 padded 1, and padded at the end only (as
    // TensorFlow's SAME gives for an even input).
    {{2, 33, 9, 8}, {33, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 33},
    {{1, 17, 8, 7}, {17, 1, 3, 3}, {2, 2}, {0, 1, 0, 1}, {1, 1}, 17},
    {{1, 3, 6, 6}, {6, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3},  // depth multiplier 2
    // Groups, dilations and four different paddings.
    {{2, 6, 7, 9}, {9, 2, 3, 3}, {1, 1}, {1, 0, 2, 1}, {2, 1}, 3},
    {{1, 3, 11, 10}, {5, 3, 3, 2}, {1, 2}, {2, 2, 1, 3}, {2, 3}, 1},
    {{1, 33, 5, 5}, {16, 33, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},  // pointwise
    {{1, 3, 9, 9}, {4, 3, 2, 2}, {3, 3}, {0, 0, 0, 0}, {1, 1}, 1},     // stride past the window
};

void check_conv(const variant& v, const conv_case& c, data_layout layout) {
  INFO(v.name << ", Input " << c.x << " in " << name_of(layout) << ", Filter " << c.w << ", groups "
              << c.groups);
  Scope scope;
  scope.var("x").set(LoDTensor(random_tensor(c.x, layout)));
  scope.var("w").set(LoDTensor(random_tensor(c.w)));
  const std::vector<float> x = values(scope.get("x")), w = values(scope.get("w"));
  run_as(v, scope, "conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, {{"Output", {"y"}}}, conv_attrs(c));
  dims out_dims;
  const std::vector<long double> expected = naive_conv(x, w, c, out_dims);
  const LoDTensor& y = scope.get("y").get<LoDTensor>();
  CHECK(y.dims() == out_dims);
  check_layout(v, y, layout, false);
  check_close(values(y), expected, 1e-4);
  CHECK(scope.get("x").get<LoDTensor>().layout() == layout);  // the input untouched
  CHECK(values(scope.get("x")) == x);
}

}  // namespace

TEST_CASE("conv2d, every kernel and input layout: groups, depthwise, dilations, strides, four paddings",
          "[ops][conv2d][onednn][opencl]") {
  for (const variant& v : float_variants())
    for (const data_layout layout : input_layouts())
      for (const conv_case& c : conv_cases) check_conv(v, c, layout);
}

TEST_CASE("conv2d against ONNX's node tests of Conv", "[ops][conv2d][onnx]") {
  // auto_pad SAME_LOWER resolved as the importer resolves it: 2 cells of padding, 1 at each end.
  const std::pair<const char*, conv_case> tests[] = {
      {"test_conv_with_strides_no_padding", {{1, 1, 7, 5}, {1, 1, 3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1}},
      {"test_conv_with_strides_padding", {{1, 1, 7, 5}, {1, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1}},
      {"test_conv_with_strides_and_asymmetric_padding",
       {{1, 1, 7, 5}, {1, 1, 3, 3}, {2, 2}, {1, 1, 0, 0}, {1, 1}, 1}},
      {"test_conv_with_autopad_same", {{1, 1, 5, 5}, {1, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1}},
  };
  for (const auto& [name, c] : tests) {
    const std::optional<node_test_data> d = node_test(name, 2);
    if (!d) {
      WARN("ONNX's node tests are not installed (" << onnx_node_tests << "): " << name << " skipped");
      continue;
    }
    INFO(name);
    REQUIRE(dims_of(d->inputs[0].shape) == c.x);
    dims out_dims;
    check_close(naive_conv(d->inputs[0].values, d->inputs[1].values, c, out_dims), d->output.values, 1e-6);
    CHECK(out_dims == dims_of(d->output.shape));
    for (const variant& v : float_variants())
      for (const data_layout layout : input_layouts()) {
        INFO(v.name << ", " << name_of(layout));
        Scope scope;
        Tensor x = tensor_of(c.x, d->inputs[0].values);
        if (layout != data_layout::nchw)
          x = transform(x, kernel_key{cpu_place, data_type::float32, layout, library_type::plain});
        scope.var("x").set(LoDTensor(std::move(x)));
        scope.var("w").set(LoDTensor(tensor_of(c.w, d->inputs[1].values)));
        run_as(v, scope, "conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, {{"Output", {"y"}}}, conv_attrs(c));
        CHECK(scope.get("y").get<LoDTensor>().dims() == dims_of(d->output.shape));
        check_close(values(scope.get("y")), d->output.values, 1e-5);
      }
  }
}

TEST_CASE("conv2d refuses filters, groups and paddings that do not fit, on every kernel",
          "[ops][conv2d][errors]") {
  for (const variant& v : float_variants()) {
    INFO(v.name);
    Scope scope;
    scope.var("x").set(LoDTensor(random_tensor({1, 6, 5, 5}, data_layout::nchw)));
    scope.var("x3").set(LoDTensor(random_tensor({6, 5, 5})));
    scope.var("w").set(LoDTensor(random_tensor({4, 3, 3, 3})));
    const slot_names out{{"Output", {"y"}}};
    const auto refused = Catch::Contains("operator 'conv2d'");
    CHECK_THROWS_WITH(run_as(v, scope, "conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, out, {{"groups", 4}}),
                      refused);  // 4 groups do not divide 6 channels
    CHECK_THROWS_WITH(run_as(v, scope, "conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, out), refused);
    CHECK_THROWS_WITH(
        run_as(v, scope, "conv2d", {{"Input", {"x3"}}, {"Filter", {"w"}}}, out, {{"groups", 2}}), refused);
    CHECK_THROWS_WITH(run_as(v, scope, "conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, out,
                             {{"groups", 2}, {"paddings", ints({1, 1, 1})}}),
                      refused);
    CHECK_THROWS_WITH(run_as(v, scope, "conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, out,
                             {{"groups", 2}, {"strides", ints({0, 1})}}),
                      refused);
    CHECK_FALSE(scope.get("y").initialized());
  }
}

// --- batch_norm ---------------------------------------------------------------------------------

namespace {

struct batch_norm_inputs {
  std::vector<float> x, scale, bias, mean, variance;
};

// ONNX's BatchNormalization in inference: (x - mean) / sqrt(variance + epsilon) * scale + bias.
std::vector<long double> naive_batch_norm(const batch_norm_inputs& in, const dims& x, float epsilon) {
  const std::int64_t c = x[1], inner = x.numel() / (x[0] * c);
  std::vector<long double> out(in.x.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto k = std::size_t((std::int64_t(i) / inner) % c);
    out[i] =
        ((long double)in.x[i] - in.mean[k]) / std::sqrt((long double)in.variance[k] + epsilon) * in.scale[k] +
        in.bias[k];
  }
  return out;
}

slot_names batch_norm_slots() {
  return {
      {"X", {"x"}}, {"Scale", {"scale"}}, {"Bias", {"bias"}}, {"Mean", {"mean"}}, {"Variance", {"variance"}}};
}

// X and its statistics as variables of the scope; returns what they hold.
batch_norm_inputs set_batch_norm_inputs(Scope& scope, Tensor x) {
  const std::int64_t c = x.dims()[1];
  scope.var("x").set(LoDTensor(std::move(x)));
  scope.var("scale").set(LoDTensor(random_tensor({c}, data_layout::any, 0.5, 2)));
  scope.var("bias").set(LoDTensor(random_tensor({c})));
  scope.var("mean").set(LoDTensor(random_tensor({c}, data_layout::any, -0.5, 0.5)));
  scope.var("variance").set(LoDTensor(random_tensor({c}, data_layout::any, 0.05, 3)));
  return {values(scope.get("x")), values(scope.get("scale")), values(scope.get("bias")),
          values(scope.get("mean")), values(scope.get("variance"))};
}

}  // namespace

TEST_CASE("batch_norm, every kernel and input layout: X of rank 2 to 5, odd channel counts",
          "[ops][batch_norm][onednn][opencl]") {
  const dims shapes[] = {{2, 3, 5, 7}, {1, 17, 4, 3}, {3, 33, 2, 5},  {1, 16, 3, 3},
                         {5, 17},      {2, 3, 7},     {1, 3, 2, 3, 4}};
  for (const variant& v : float_variants())
    for (const dims& shape : shapes)
      for (const data_layout layout : input_layouts()) {
        if (shape.rank() != 4 && layout != data_layout::nchw) continue;
        INFO(v.name << ", X " << shape << " in " << name_of(shape.rank() == 4 ? layout : data_layout::any));
        Scope scope;
        const batch_norm_inputs in =
            set_batch_norm_inputs(scope, random_tensor(shape, shape.rank() == 4 ? layout : data_layout::any));
        const float epsilon = 1e-3f;
        run_as(v, scope, "batch_norm", batch_norm_slots(), {{"Y", {"y"}}},
               {{"epsilon", epsilon}, {"is_test", true}, {"momentum", 0.9f}});
        const LoDTensor& y = scope.get("y").get<LoDTensor>();
        CHECK(y.dims() == shape);
        if (shape.rank() == 4) check_layout(v, y, layout, true);
        check_close(values(y), naive_batch_norm(in, shape, epsilon), 1e-5);
        CHECK(values(scope.get("x")) == in.x);
      }
}

TEST_CASE("batch_norm: the default epsilon is 1e-5; X's sequence offsets are kept", "[ops][batch_norm]") {
  for (const variant& v : float_variants()) {
    INFO(v.name);
    Scope scope;
    const batch_norm_inputs in = set_batch_norm_inputs(scope, random_tensor({3, 5}));
    scope.get("variance").get_mutable<LoDTensor>().data<float>()[2] = 0;  // epsilon alone
    batch_norm_inputs with_zero = in;
    with_zero.variance[2] = 0;
    scope.get("x").get_mutable<LoDTensor>().set_lod({{0, 1, 3}});
    run_as(v, scope, "batch_norm", batch_norm_slots(), {{"Y", {"y"}}}, {{"is_test", true}});
    check_close(values(scope.get("y")), naive_batch_norm(with_zero, {3, 5}, 1e-5f), 1e-5);
    CHECK(scope.get("y").get<LoDTensor>().lod() == lod{{0, 1, 3}});
  }
}

TEST_CASE("batch_norm against ONNX's node tests of BatchNormalization", "[ops][batch_norm][onnx]") {
  const std::pair<const char*, float> tests[] = {{"test_batchnorm_example", 1e-5f},
                                                 {"test_batchnorm_epsilon", 0.01f}};
  for (const auto& [name, epsilon] : tests) {
    const std::optional<node_test_data> d = node_test(name, 5);
    if (!d) {
      WARN("ONNX's node tests are not installed (" << onnx_node_tests << "): " << name << " skipped");
      continue;
    }
    INFO(name);
    const dims shape = dims_of(d->inputs[0].shape);
    check_close(naive_batch_norm({d->inputs[0].values, d->inputs[1].values, d->inputs[2].values,
                                  d->inputs[3].values, d->inputs[4].values},
                                 shape, epsilon),
                d->output.values, 1e-6);
    for (const variant& v : float_variants())
      for (const data_layout layout : input_layouts()) {
        INFO(v.name << ", " << name_of(layout));
        Scope scope;
        Tensor x = tensor_of(shape, d->inputs[0].values);
        if (layout != data_layout::nchw)
          x = transform(x, kernel_key{cpu_place, data_type::float32, layout, library_type::plain});
        scope.var("x").set(LoDTensor(std::move(x)));
        const char* stats[] = {"scale", "bias", "mean", "variance"};
        for (std::size_t i = 0; i < 4; ++i)
          scope.var(stats[i]).set(
              LoDTensor(tensor_of(dims_of(d->inputs[i + 1].shape), d->inputs[i + 1].values)));
        run_as(v, scope, "batch_norm", batch_norm_slots(), {{"Y", {"y"}}},
               {{"epsilon", epsilon}, {"is_test", true}});
        check_close(values(scope.get("y")), d->output.values, 1e-5);
      }
  }
}

TEST_CASE("batch_norm refuses training, other data layouts, statistics of another size and X below rank 2",
          "[ops][batch_norm][errors]") {
  for (const variant& v : float_variants()) {
    INFO(v.name);
    Scope scope;
    set_batch_norm_inputs(scope, random_tensor({2, 3, 4, 4}, data_layout::nchw));
    scope.var("four").set(LoDTensor(random_tensor({4})));
    scope.var("x1").set(LoDTensor(random_tensor({3})));
    const slot_names out{{"Y", {"y"}}};
    const auto refused = Catch::Contains("operator 'batch_norm'");
    CHECK_THROWS_WITH(run_as(v, scope, "batch_norm", batch_norm_slots(), out, {{"is_test", false}}), refused);
    CHECK_THROWS_WITH(run_as(v, scope, "batch_norm", batch_norm_slots(), out), refused);  // Fluid's default
    CHECK_THROWS_WITH(run_as(v, scope, "batch_norm", batch_norm_slots(), out,
                             {{"is_test", true}, {"data_layout", std::string("NHWC")}}),
                      refused);
    for (const char* slot : {"Scale", "Bias", "Mean", "Variance"}) {
      slot_names in = batch_norm_slots();
      for (auto& [name, vars] : in)
        if (name == slot) vars = {"four"};
      INFO(slot << " of 4 values for 3 channels");
      CHECK_THROWS_WITH(run_as(v, scope, "batch_norm", in, out, {{"is_test", true}}), refused);
    }
    slot_names rank1 = batch_norm_slots();
    rank1[0].second = {"x1"};
    CHECK_THROWS_WITH(run_as(v, scope, "batch_norm", rank1, out, {{"is_test", true}}), refused);
    CHECK_FALSE(scope.get("y").initialized());
  }
}

// --- pool2d -------------------------------------------------------------------------------------

namespace {

struct pool_case {
  dims x;
  std::string type;
  std::vector<std::int32_t> ksize, strides, paddings, dilations;
  bool ceil, exclusive, global;
  std::string algorithm;
};

attribute_map pool_attrs(const pool_case& c) {
  attribute_map a{{"pooling_type", c.type},
                  {"ksize", c.ksize},
                  {"strides", c.strides},
                  {"ceil_mode", c.ceil},
                  {"exclusive", c.exclusive},
                  {"global_pooling", c.global},
                  {"padding_algorithm", c.algorithm}};
  if (!c.paddings.empty()) a.set("paddings", c.paddings);
  if (c.dilations != ints({1, 1})) a.set("dilations", c.dilations);
  return a;
}

// ONNX's pooling (its reference and ONNX Runtime) with Fluid's global_pooling and SAME/VALID:
//   floor mode: (in + pads - extent) / stride + 1 outputs, extent = (k - 1) * dilation + 1;
//   ceil mode: the division rounded up, less a last window that would start in the end padding;
//   max over the input cells of the window; average over them (exclusive) or over the window's
//   cells up to the end of the end padding (count_include_pad: a ceil-mode window may reach past it).
std::vector<long double> naive_pool(const std::vector<float>& x, const pool_case& c, dims& out_dims) {
  const std::int64_t n = c.x[0], ch = c.x[1], size[2] = {c.x[2], c.x[3]};
  std::int64_t k[2], s[2] = {c.strides[0], c.strides[1]}, d[2] = {c.dilations[0], c.dilations[1]}, out[2];
  pads p = pads_of(c.paddings);
  for (int a = 0; a < 2; ++a) {
    k[a] = c.global ? size[a] : c.ksize[std::size_t(a)];
    if (c.global) d[a] = 1;
    if (c.global || c.algorithm == "VALID") p.begin[a] = p.end[a] = 0;
    if (!c.global && c.algorithm == "SAME") {
      const std::int64_t wanted = (size[a] + s[a] - 1) / s[a];
      const std::int64_t sum = std::max<std::int64_t>((wanted - 1) * s[a] + k[a] - size[a], 0);
      p.begin[a] = sum / 2;
      p.end[a] = sum - sum / 2;
    }
    const std::int64_t span = size[a] + p.begin[a] + p.end[a] - ((k[a] - 1) * d[a] + 1);
    out[a] = (c.ceil ? (span + s[a] - 1) / s[a] : span / s[a]) + 1;
    if (c.ceil && (out[a] - 1) * s[a] >= size[a] + p.begin[a]) --out[a];
  }
  out_dims = {n, ch, out[0], out[1]};
  std::vector<long double> result;
  for (std::int64_t plane = 0; plane < n * ch; ++plane)
    for (std::int64_t oy = 0; oy < out[0]; ++oy)
      for (std::int64_t ox = 0; ox < out[1]; ++ox) {
        const std::int64_t y0 = oy * s[0] - p.begin[0], x0 = ox * s[1] - p.begin[1];
        long double acc = c.type == "max" ? -std::numeric_limits<long double>::infinity() : 0;
        std::int64_t count = 0;
        for (std::int64_t i = 0; i < k[0]; ++i)
          for (std::int64_t j = 0; j < k[1]; ++j) {
            const std::int64_t iy = y0 + i * d[0], ix = x0 + j * d[1];
            if (iy < 0 || iy >= size[0] || ix < 0 || ix >= size[1]) continue;
            const long double v = x[std::size_t((plane * size[0] + iy) * size[1] + ix)];
            acc = c.type == "max" ? std::max(acc, v) : acc + v;
            ++count;
          }
        if (c.type == "avg") {
          const std::int64_t rows = std::min(y0 + k[0], size[0] + p.end[0]) - y0;
          const std::int64_t cols = std::min(x0 + k[1], size[1] + p.end[1]) - x0;
          acc /= c.exclusive ? count : rows * cols;
        }
        result.push_back(acc);
      }
  return result;
}

const std::vector<pool_case> pool_cases{
    // ResNet's 3x3 max pooling, stride 2, padding 1; MobileNetV2's and ResNet's global average.
    {{2, 3, 9, 7}, "max", {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, true, false, "EXPLICIT"},
    {{1, 33, 7, 7}, "avg", {1, 1}, {1, 1}, {}, {1, 1}, false, true, true, "EXPLICIT"},
    {{2, 17, 4, 5}, "max", {1, 1}, {1, 1}, {}, {1, 1}, false, true, true, "EXPLICIT"},
    // Ceil mode: an extra window (kept); one that would start in the end padding (dropped).
    {{1, 17, 8, 8}, "max", {3, 3}, {2, 2}, {}, {1, 1}, true, true, false, "EXPLICIT"},
    {{1, 5, 5, 5}, "max", {3, 3}, {3, 3}, {1, 1}, {1, 1}, true, true, false, "EXPLICIT"},
    {{1, 5, 5, 5}, "avg", {3, 3}, {3, 3}, {1, 1}, {1, 1}, true, false, false, "EXPLICIT"},
    {{1, 3, 6, 6}, "max", {1, 1}, {2, 2}, {}, {1, 1}, true, true, false, "EXPLICIT"},
    // Average with and without the padding, a ceil-mode window past the end padding.
    {{1, 3, 6, 6}, "avg", {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, false, false, "EXPLICIT"},
    {{1, 3, 6, 6}, "avg", {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, true, false, "EXPLICIT"},
    {{2, 17, 7, 7}, "avg", {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, false, false, "EXPLICIT"},
    // Four different paddings, rectangular windows and strides.
    {{1, 33, 7, 6}, "avg", {3, 2}, {2, 1}, {0, 2, 1, 0}, {1, 1}, false, true, false, "EXPLICIT"},
    {{1, 33, 7, 6}, "avg", {3, 2}, {2, 1}, {0, 2, 1, 0}, {1, 1}, true, false, false, "EXPLICIT"},
    {{2, 3, 8, 9}, "max", {2, 3}, {2, 2}, {1, 0, 0, 2}, {1, 1}, true, true, false, "EXPLICIT"},
    // Dilated max pooling (ONNX's MaxPool).
    {{1, 3, 9, 10}, "max", {2, 3}, {1, 2}, {1, 0, 2, 1}, {2, 3}, false, true, false, "EXPLICIT"},
    {{1, 17, 7, 7}, "max", {2, 2}, {2, 2}, {1, 1}, {2, 2}, true, true, false, "EXPLICIT"},
    // Fluid's padding algorithms: SAME pads for ceil(size / stride) outputs; VALID drops paddings.
    {{1, 3, 7, 8}, "max", {3, 3}, {2, 2}, {}, {1, 1}, false, true, false, "SAME"},
    {{1, 17, 6, 7}, "avg", {2, 3}, {2, 2}, {}, {1, 1}, false, true, false, "SAME"},
    {{1, 3, 7, 7}, "avg", {2, 2}, {2, 2}, {1, 1}, {1, 1}, false, false, false, "VALID"},
};

void check_pool(const variant& v, const pool_case& c, data_layout layout, const Tensor& given) {
  INFO(v.name << ", X " << c.x << " in " << name_of(layout) << ", " << c.type << " ksize " << c.ksize[0]
              << "x" << c.ksize[1] << ", strides " << c.strides[0] << "x" << c.strides[1] << ", paddings "
              << c.paddings.size() << ", ceil " << c.ceil << ", exclusive " << c.exclusive << ", global "
              << c.global << ", " << c.algorithm);
  Scope scope;
  Tensor x = given;
  if (layout != data_layout::nchw)
    x = transform(x, kernel_key{cpu_place, data_type::float32, layout, library_type::plain});
  scope.var("x").set(LoDTensor(std::move(x)));
  const std::vector<float> in = values(scope.get("x"));
  run_as(v, scope, "pool2d", {{"X", {"x"}}}, {{"Out", {"out"}}}, pool_attrs(c));
  dims out_dims;
  const std::vector<long double> expected = naive_pool(in, c, out_dims);
  const LoDTensor& out = scope.get("out").get<LoDTensor>();
  CHECK(out.dims() == out_dims);
  check_layout(v, out, layout, true);
  check_close(values(out), expected, c.type == "max" ? 0 : 1e-5);
  CHECK(values(scope.get("x")) == in);
}

}  // namespace

TEST_CASE("pool2d, every kernel and input layout: max, average, ceil mode, paddings, dilations, global",
          "[ops][pool2d][onednn][opencl]") {
  for (const pool_case& c : pool_cases) {
    const Tensor x = random_tensor(c.x, data_layout::nchw);
    for (const variant& v : float_variants())
      for (const data_layout layout : input_layouts()) check_pool(v, c, layout, x);
  }
}

TEST_CASE("pool2d against ONNX's node tests of MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool",
          "[ops][pool2d][onnx]") {
  // ONNX's pads [top, left, bottom, right] as Fluid's [top, bottom, left, right]; auto_pad
  // resolved as the importer does (SAME_UPPER: the odd cell at the end; SAME_LOWER: at the start).
  const auto max = [](std::vector<std::int32_t> k, std::vector<std::int32_t> s, std::vector<std::int32_t> p,
                      bool ceil = false, std::vector<std::int32_t> d = {1, 1}) {
    return pool_case{{},           "max", std::move(k), std::move(s), std::move(p),
                     std::move(d), ceil,  true,         false,        "EXPLICIT"};
  };
  const auto avg = [](std::vector<std::int32_t> k, std::vector<std::int32_t> s, std::vector<std::int32_t> p,
                      bool ceil = false, bool include_pad = false) {
    return pool_case{{},     "avg", std::move(k), std::move(s), std::move(p),
                     {1, 1}, ceil,  !include_pad, false,        "EXPLICIT"};
  };
  const auto global = [](std::string type) {
    return pool_case{{}, std::move(type), {1, 1}, {1, 1}, {}, {1, 1}, false, true, true, "EXPLICIT"};
  };
  const std::pair<const char*, pool_case> tests[] = {
      {"test_maxpool_2d_default", max({2, 2}, {1, 1}, {})},
      {"test_maxpool_2d_ceil", max({3, 3}, {2, 2}, {}, true)},
      {"test_maxpool_2d_dilations", max({2, 2}, {1, 1}, {}, false, {2, 2})},
      {"test_maxpool_2d_pads", max({3, 3}, {1, 1}, {2, 2, 2, 2})},
      {"test_maxpool_2d_precomputed_pads", max({5, 5}, {1, 1}, {2, 2, 2, 2})},
      {"test_maxpool_2d_precomputed_same_upper", max({3, 3}, {2, 2}, {1, 1, 1, 1})},
      {"test_maxpool_2d_precomputed_strides", max({2, 2}, {2, 2}, {})},
      {"test_maxpool_2d_same_lower", max({2, 2}, {1, 1}, {1, 0, 1, 0})},
      {"test_maxpool_2d_same_upper", max({2, 2}, {1, 1}, {0, 1, 0, 1})},
      {"test_maxpool_2d_strides", max({5, 5}, {3, 3}, {})},
      {"test_averagepool_2d_default", avg({2, 2}, {1, 1}, {})},
      {"test_averagepool_2d_ceil", avg({3, 3}, {2, 2}, {}, true)},
      {"test_averagepool_2d_pads", avg({3, 3}, {1, 1}, {2, 2, 2, 2})},
      {"test_averagepool_2d_pads_count_include_pad", avg({3, 3}, {1, 1}, {2, 2, 2, 2}, false, true)},
      {"test_averagepool_2d_precomputed_pads", avg({5, 5}, {1, 1}, {2, 2, 2, 2})},
      {"test_averagepool_2d_precomputed_pads_count_include_pad",
       avg({5, 5}, {1, 1}, {2, 2, 2, 2}, false, true)},
      {"test_averagepool_2d_precomputed_same_upper", avg({3, 3}, {2, 2}, {1, 1, 1, 1})},
      {"test_averagepool_2d_precomputed_strides", avg({2, 2}, {2, 2}, {})},
      {"test_averagepool_2d_same_lower", avg({2, 2}, {1, 1}, {1, 0, 1, 0})},
      {"test_averagepool_2d_same_upper", avg({2, 2}, {1, 1}, {0, 1, 0, 1})},
      {"test_averagepool_2d_strides", avg({5, 5}, {3, 3}, {})},
      {"test_globalaveragepool", global("avg")},
      {"test_globalaveragepool_precomputed", global("avg")},
      {"test_globalmaxpool", global("max")},
      {"test_globalmaxpool_precomputed", global("max")},
  };
  for (const auto& [name, geometry] : tests) {
    const std::optional<node_test_data> d = node_test(name, 1);
    if (!d) {
      WARN("ONNX's node tests are not installed (" << onnx_node_tests << "): " << name << " skipped");
      continue;
    }
    INFO(name);
    pool_case c = geometry;
    c.x = dims_of(d->inputs[0].shape);
    dims out_dims;
    // The reference written here agrees with ONNX's, then every kernel with both.
    check_close(naive_pool(d->inputs[0].values, c, out_dims), d->output.values, 1e-6);
    CHECK(out_dims == dims_of(d->output.shape));
    const Tensor x = tensor_of(c.x, d->inputs[0].values);
    for (const variant& v : float_variants())
      for (const data_layout layout : input_layouts()) check_pool(v, c, layout, x);
  }
}

TEST_CASE("pool2d refuses what it does not compute: other types, adaptive, bad windows, X not 4-D",
          "[ops][pool2d][errors]") {
  const pool_case fine{{1, 3, 5, 5}, "max", {2, 2}, {1, 1}, {}, {1, 1}, false, true, false, "EXPLICIT"};
  for (const variant& v : float_variants()) {
    INFO(v.name);
    Scope scope;
    scope.var("x").set(LoDTensor(random_tensor({1, 3, 5, 5}, data_layout::nchw)));
    scope.var("x3").set(LoDTensor(random_tensor({3, 5, 5})));
    const slot_names in{{"X", {"x"}}}, out{{"Out", {"out"}}};
    const auto refused = Catch::Contains("operator 'pool2d'");
    const auto with = [&](const char* name, attribute value) {
      attribute_map a = pool_attrs(fine);
      a.set(name, std::move(value));
      return a;
    };
    CHECK_THROWS_WITH(run_as(v, scope, "pool2d", in, out, with("pooling_type", std::string("min"))), refused);
    CHECK_THROWS_WITH(run_as(v, scope, "pool2d", in, out, with("adaptive", true)), refused);
    CHECK_THROWS_WITH(run_as(v, scope, "pool2d", in, out, with("ksize", ints({2, 2, 2}))), refused);
    CHECK_THROWS_WITH(run_as(v, scope, "pool2d", in, out, with("ksize", ints({0, 2}))), refused);
    CHECK_THROWS_WITH(run_as(v, scope, "pool2d", in, out, with("strides", ints({1, 0}))), refused);
    CHECK_THROWS_WITH(run_as(v, scope, "pool2d", in, out, with("paddings", ints({1, 1, 1}))), refused);
    CHECK_THROWS_WITH(run_as(v, scope, "pool2d", in, out, with("paddings", ints({0, -1}))), refused);
    CHECK_THROWS_WITH(run_as(v, scope, "pool2d", in, out, with("padding_algorithm", std::string("FULL"))),
                      refused);
    CHECK_THROWS_WITH(run_as(v, scope, "pool2d", in, out, with("ksize", ints({7, 7}))), refused);  // past X
    CHECK_THROWS_WITH(run_as(v, scope, "pool2d", in, out, {{"pooling_type", std::string("max")}}),
                      refused);  // no ksize
    CHECK_THROWS_WITH(run_as(v, scope, "pool2d", {{"X", {"x3"}}}, out, pool_attrs(fine)), refused);
    CHECK_FALSE(scope.get("out").initialized());
  }
}

// --- the three together -------------------------------------------------------------------------

TEST_CASE("conv2d -> batch_norm -> pool2d on every kernel: device data stays there, oneDNN's stays blocked",
          "[ops][conv2d][batch_norm][pool2d][onednn][opencl]") {
  for (const variant& v : float_variants())
    for (const data_layout layout : input_layouts())
      for (const conv_case& c : {conv_case{{1, 3, 15, 13}, {17, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
                                 conv_case{{2, 17, 9, 9}, {17, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 17}}) {
        INFO(v.name << ", Input " << c.x << " in " << name_of(layout) << ", Filter " << c.w);
        Scope scope;
        scope.var("image").set(LoDTensor(random_tensor(c.x, layout)));
        scope.var("w").set(LoDTensor(random_tensor(c.w)));
        run_as(v, scope, "conv2d", {{"Input", {"image"}}, {"Filter", {"w"}}}, {{"Output", {"x"}}},
               conv_attrs(c));
        const Tensor conv = scope.get("x").get<LoDTensor>();
        check_layout(v, conv, layout, false);
        dims conv_dims;
        check_close(values(conv),
                    naive_conv(values(scope.get("image")), values(scope.get("w")), c, conv_dims), 1e-4);

        const batch_norm_inputs bn = set_batch_norm_inputs(scope, conv);
        const kernel_choice bn_choice =
            run_as(v, scope, "batch_norm", batch_norm_slots(), {{"Y", {"y"}}}, {{"is_test", true}});
        const LoDTensor& y = scope.get("y").get<LoDTensor>();
        check_layout(v, y, conv.layout(), true);
        if (v.use_onednn && blocked(conv.layout())) CHECK(bn_choice.chosen.layout() == conv.layout());
        check_close(values(y), naive_batch_norm(bn, conv.dims(), 1e-5f), 1e-5);

        const pool_case p{conv.dims(), "max", {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, true, false, "EXPLICIT"};
        const kernel_choice pool_choice =
            run_as(v, scope, "pool2d", {{"X", {"y"}}}, {{"Out", {"out"}}}, pool_attrs(p));
        const LoDTensor& out = scope.get("out").get<LoDTensor>();
        check_layout(v, out, y.layout(), true);
        if (v.use_onednn && blocked(y.layout())) CHECK(pool_choice.chosen.layout() == y.layout());
        dims pool_dims;
        check_close(values(out), naive_pool(values(y), p, pool_dims), 0);
      }
}

TEST_CASE("conv2d, batch_norm and pool2d on an empty batch: empty outputs of the right dims, every kernel",
          "[ops][conv2d][batch_norm][pool2d]") {
  for (const variant& v : float_variants()) {
    INFO(v.name);
    Scope scope;
    scope.var("w").set(LoDTensor(random_tensor({5, 3, 3, 3})));
    const Tensor empty = random_tensor({0, 3, 6, 5}, data_layout::nchw);
    scope.var("image").set(LoDTensor(empty));
    run_as(v, scope, "conv2d", {{"Input", {"image"}}, {"Filter", {"w"}}}, {{"Output", {"conv"}}},
           {{"paddings", ints({1, 1})}});
    CHECK(scope.get("conv").get<LoDTensor>().dims() == dims{0, 5, 6, 5});
    set_batch_norm_inputs(scope, empty);
    run_as(v, scope, "batch_norm", batch_norm_slots(), {{"Y", {"y"}}}, {{"is_test", true}});
    CHECK(scope.get("y").get<LoDTensor>().dims() == dims{0, 3, 6, 5});
    const pool_case p{{0, 3, 6, 5}, "avg", {2, 2}, {2, 2}, {}, {1, 1}, true, true, false, "EXPLICIT"};
    run_as(v, scope, "pool2d", {{"X", {"x"}}}, {{"Out", {"out"}}}, pool_attrs(p));
    CHECK(scope.get("out").get<LoDTensor>().dims() == dims{0, 3, 3, 3});
  }
}

#if FLUIDK_OPS_ONEDNN
namespace {
// One call of an operator with its inputs, for the oneDNN cache checks.
struct cached_call {
  std::string what;
  std::string type;
  std::vector<std::pair<std::string, Tensor>> inputs;  // variable names x0, x1, ... in slot order
  slot_names in;
  attribute_map attrs;
  double tolerance;  // against the plain kernel: 0 where both compute each element alike
  // Whether oneDNN computes it: blocked data broadcast and blocked channels concatenated at
  // whole blocks are loops of the kernel's own, which keep nothing.
  bool primitive = true;
};

// Runs `call` with the plain kernel, then twice with oneDNN's: the second oneDNN call finds
// its primitive in the cache (a hit, no miss; neither where no primitive runs) and gives the first call's
// numbers exactly, and both the plain kernel's; the inputs are untouched.
void check_cached(const cached_call& call) {
  INFO(call.what);
  const variant plain{"CPU plain", cpu_place, false}, dnn{"CPU oneDNN", cpu_place, true};
  Scope scope;
  std::vector<std::vector<float>> before;
  for (const auto& [name, t] : call.inputs) {
    scope.var(name).set(LoDTensor(t));
    before.push_back(values(t));
  }
  run_as(plain, scope, call.type, call.in, {{"Out", {"plain"}}}, call.attrs);
  run_as(dnn, scope, call.type, call.in, {{"Out", {"first"}}}, call.attrs);
  const onednn_cache::statistics after_first = onednn_context::shared_cache().stats();
  run_as(dnn, scope, call.type, call.in, {{"Out", {"second"}}}, call.attrs);
  const onednn_cache::statistics after_second = onednn_context::shared_cache().stats();
  CHECK(after_second.misses == after_first.misses);
  if (call.primitive)
    CHECK(after_second.hits > after_first.hits);
  else
    CHECK(after_second.hits == after_first.hits);
  const LoDTensor& first = scope.get("first").get<LoDTensor>();
  const LoDTensor& second = scope.get("second").get<LoDTensor>();
  CHECK(second.layout() == first.layout());
  // A blocked input keeps Out blocked (the activations of a oneDNN network stay blocked).
  for (const auto& input : call.inputs)
    if (blocked(input.second.layout())) CHECK(first.layout() == input.second.layout());
  if (blocked(first.layout())) CHECK(padding_is_zero(first));
  if (blocked(second.layout())) CHECK(padding_is_zero(second));
  CHECK(values(second) == values(first));
  if (call.tolerance == 0)
    CHECK(values(first) == values(scope.get("plain")));
  else
    check_close(values(first), values(scope.get("plain")), call.tolerance);
  for (std::size_t i = 0; i < call.inputs.size(); ++i) {
    CHECK(scope.get(call.inputs[i].first).get<LoDTensor>().layout() == call.inputs[i].second.layout());
    CHECK(values(scope.get(call.inputs[i].first)) == before[i]);
  }
}
}  // namespace

TEST_CASE(
    "oneDNN kernels keep their primitives: a second call hits the cache, the same numbers as the "
    "first and the plain kernel's, inputs untouched",
    "[ops][onednn][cache][pool2d][batch_norm][relu][clip][sigmoid][softmax][concat][elementwise_add]"
    "[elementwise_mul][mul]") {
  std::vector<cached_call> calls;
  const auto one = [](std::string what, std::string type, std::vector<Tensor> xs,
                      std::vector<std::string> slots, attribute_map attrs = {}, double tolerance = 0) {
    cached_call c{std::move(what), std::move(type), {}, {}, std::move(attrs), tolerance};
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const std::string name = "x" + std::to_string(i);
      c.inputs.push_back({name, std::move(xs[i])});
      if (c.in.empty() || c.in.back().first != slots[i]) c.in.push_back({slots[i], {}});
      c.in.back().second.push_back(name);
    }
    return c;
  };
  for (const data_layout l : input_layouts()) {
    const std::string in = std::string(" in ") + std::string(name_of(l));
    calls.push_back(one("pool2d max" + in, "pool2d", {random_tensor({2, 19, 9, 8}, l)}, {"X"},
                        {{"pooling_type", std::string("max")},
                         {"ksize", ints({3, 3})},
                         {"strides", ints({2, 2})},
                         {"paddings", ints({1, 1})}}));
    calls.push_back(
        one("pool2d global average" + in, "pool2d", {random_tensor({2, 19, 9, 8}, l)}, {"X"},
            {{"pooling_type", std::string("avg")}, {"ksize", ints({1, 1})}, {"global_pooling", true}}, 1e-5));
    calls.push_back(one("relu" + in, "relu", {random_tensor({2, 19, 3, 4}, l)}, {"X"}));
    calls.push_back(
        one("clip" + in, "clip", {random_tensor({2, 19, 3, 4}, l)}, {"X"}, {{"min", -0.25f}, {"max", 0.5f}}));
    calls.push_back(one("sigmoid" + in, "sigmoid", {random_tensor({2, 19, 3, 4}, l)}, {"X"}, {}, 1e-6));
    // Equal shapes (ResNet's residual add), a per-channel bias and scale (MobileNet's), a
    // [N, C, 1, W] operand, and a [C] bias at Fluid's axis 1: Out in X's layout.
    for (const char* op : {"elementwise_add", "elementwise_mul"}) {
      const std::string type = op;
      calls.push_back(one(type + " equal shapes" + in, type,
                          {random_tensor({2, 19, 3, 4}, l), random_tensor({2, 19, 3, 4}, l)}, {"X", "Y"}));
      calls.push_back(one(type + " per channel" + in, type,
                          {random_tensor({2, 19, 3, 4}, l), random_tensor({1, 19, 1, 1})}, {"X", "Y"}));
      calls.back().primitive = !blocked(l);
      calls.push_back(one(type + " per channel, X repeating" + in, type,
                          {random_tensor({1, 19, 1, 1}), random_tensor({2, 19, 3, 4}, l)}, {"X", "Y"}));
      calls.back().primitive = !blocked(l);
      calls.push_back(one(type + " [N, C, 1, W]" + in, type,
                          {random_tensor({2, 19, 3, 4}, l), random_tensor({2, 19, 1, 4})}, {"X", "Y"}));
      calls.back().primitive = !blocked(l);
      calls.push_back(one(type + " [C] at axis 1" + in, type,
                          {random_tensor({2, 32, 3, 4}, l), random_tensor({32})}, {"X", "Y"}, {{"axis", 1}}));
      calls.back().primitive = !blocked(l);
    }
    calls.push_back(one("concat along channels" + in, "concat",
                        {random_tensor({2, 16, 3, 4}, l), random_tensor({2, 32, 3, 4}, l)}, {"X", "X"},
                        {{"axis", 1}}));
    calls.back().primitive = !blocked(l);
    calls.push_back(one("concat along H" + in, "concat",
                        {random_tensor({2, 5, 3, 4}, l), random_tensor({2, 5, 2, 4}, l)}, {"X", "X"},
                        {{"axis", 2}}));
  }
  calls.push_back(one("softmax", "softmax", {random_tensor({3, 7, 5})}, {"X"}, {{"axis", 1}}, 1e-6));
  calls.push_back(one("mul", "mul", {random_tensor({4, 6}), random_tensor({6, 5})}, {"X", "Y"}, {}, 1e-5));
  for (const cached_call& c : calls) check_cached(c);

  // batch_norm, its statistics in four inputs.
  for (const data_layout l : input_layouts()) {
    INFO("batch_norm in " << name_of(l));
    const variant plain{"CPU plain", cpu_place, false}, dnn{"CPU oneDNN", cpu_place, true};
    Scope scope;
    const batch_norm_inputs in = set_batch_norm_inputs(scope, random_tensor({2, 19, 3, 4}, l));
    const attribute_map attrs{{"epsilon", 1e-3f}, {"is_test", true}};
    run_as(plain, scope, "batch_norm", batch_norm_slots(), {{"Y", {"plain"}}}, attrs);
    run_as(dnn, scope, "batch_norm", batch_norm_slots(), {{"Y", {"first"}}}, attrs);
    const onednn_cache::statistics after_first = onednn_context::shared_cache().stats();
    run_as(dnn, scope, "batch_norm", batch_norm_slots(), {{"Y", {"second"}}}, attrs);
    const onednn_cache::statistics after_second = onednn_context::shared_cache().stats();
    CHECK(after_second.misses == after_first.misses);
    CHECK(after_second.hits > after_first.hits);
    CHECK(values(scope.get("second")) == values(scope.get("first")));
    check_close(values(scope.get("first")), values(scope.get("plain")), 1e-5);
    CHECK(values(scope.get("x")) == in.x);
  }
}
#endif
