// conv2d: the OpenCL kernel (PoCL), the CPU plain kernel and the oneDNN kernel (NCHW and
// blocked inputs) against a naive reference written here, on grouped, depthwise, dilated,
// strided and asymmetrically padded convolutions, SAME and VALID, odd sizes and batches, and
// ONNX's node tests of Conv; each refusal of the OpenCL kernel; and network-sized convolutions
// on PoCL, which must finish in reasonable time on a 2-core CPU.
//
// Tolerance: 1e-4 relative (floor 1e-4 absolute): the kernels sum in float, in their orders.
#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/scope.hpp>
#include <fluidk/transforms/cpu.hpp>
#include <iostream>
#include <ops/ops.hpp>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>
#if FLUIDK_OPS_OPENMP
#include <omp.h>
#endif

#include "ops_test_support.hpp"

using namespace fluidk;
using fluidk_test::check_close;

namespace {

const bool registered = (ops::register_all(), true);

std::mt19937& rng() {
  static std::mt19937 engine(20250307);
  return engine;
}

Tensor random_tensor(const dims& shape) {
  Tensor t(shape, data_type::float32, cpu_place, shape.rank() == 4 ? data_layout::nchw : data_layout::any);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng());
  return t;
}
Tensor tensor_of(const dims& shape, const std::vector<float>& v) {
  Tensor t(shape, data_type::float32, cpu_place, data_layout::nchw);
  REQUIRE(std::int64_t(v.size()) == t.numel());
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// The elements in logical NCHW order, wherever the tensor lives and whatever its layout.
std::vector<float> values(const Tensor& t) {
  Tensor h = t.place().host_accessible() ? t : copy_to(t, cpu_place);
  if (h.layout() != data_layout::any && h.layout() != data_layout::nchw)
    h = transform(h, kernel_key{cpu_place, h.dtype(), data_layout::nchw, library_type::plain});
  // Read through a const tensor: a mutable one's data() counts as a write to its storage.
  const Tensor& read = h;
  return std::vector<float>(read.data<float>(), read.data<float>() + read.numel());
}

// A kernel to check: where it runs, whether the call asks for oneDNN, Input's layout, and the
// attribute onednn_layout when given (the layout a oneDNN kernel gives an NCHW input's output).
struct variant {
  std::string name;
  place where;
  bool use_onednn;
  data_layout layout;
  std::string onednn_layout = "";
};
std::vector<variant> float_variants() {
  std::vector<variant> v{{"CPU plain", cpu_place, false, data_layout::nchw}};
#if FLUIDK_OPS_ONEDNN
  v.push_back({"CPU oneDNN, NCHW", cpu_place, true, data_layout::nchw});
  v.push_back({"CPU oneDNN, NCHW, onednn_layout NHWC", cpu_place, true, data_layout::nchw, "NHWC"});
  v.push_back({"CPU oneDNN, NHWC", cpu_place, true, data_layout::nhwc});
  v.push_back({"CPU oneDNN, nChw8c", cpu_place, true, data_layout_of<layout::nChw8c>});
  v.push_back({"CPU oneDNN, nChw16c", cpu_place, true, data_layout_of<layout::nChw16c>});
#endif
#if FLUIDK_OPS_OPENCL
  v.push_back({"OpenCL", place::of<opencl>(0), false, data_layout::nchw});
#endif
  return v;
}

// One convolution as the attributes give it.
struct conv_case {
  std::int64_t n, c, h, w, oc, kh, kw, groups = 1;
  std::array<std::int64_t, 2> s{1, 1}, d{1, 1};
  std::array<std::int64_t, 4> pads{0, 0, 0, 0};  // top, bottom, left, right
  std::string algorithm = "EXPLICIT";

  dims input_dims() const { return {n, c, h, w}; }
  dims filter_dims() const { return {oc, groups == 0 ? 0 : c / groups, kh, kw}; }
  attribute_map attrs() const {
    auto ints = [](auto... v) { return std::vector<std::int32_t>{std::int32_t(v)...}; };
    return {{"strides", ints(s[0], s[1])},
            {"dilations", ints(d[0], d[1])},
            {"paddings", ints(pads[0], pads[1], pads[2], pads[3])},
            {"groups", std::int32_t(groups)},
            {"padding_algorithm", algorithm}};
  }
  // Whether an output row or column lies wholly in the padding, no tap of its window on the
  // input (explicit paddings): the oneDNN kernel then runs a convolution with ResidualData
  // blocked, not NHWC (oneDNN 2.6's NHWC one is wrong there). Every tap of every window tried.
  bool output_in_padding() const {
    const std::int64_t size[2] = {h, w}, k[2] = {kh, kw}, begin[2] = {pads[0], pads[2]},
                       end[2] = {pads[1], pads[3]};
    for (std::size_t i = 0; i < 2; ++i) {
      const std::int64_t extent = d[i] * (k[i] - 1) + 1;
      const std::int64_t out = (size[i] + begin[i] + end[i] - extent) / s[i] + 1;
      for (std::int64_t o = 0; o < out; ++o) {
        bool touches = false;
        for (std::int64_t t = 0; t < k[i]; ++t) {
          const std::int64_t at = o * s[i] - begin[i] + t * d[i];
          touches = touches || (at >= 0 && at < size[i]);
        }
        if (!touches) return true;
      }
    }
    return false;
  }
  std::string text() const {
    auto str = [](std::int64_t v) { return std::to_string(v); };
    return "Input [" + str(n) + "," + str(c) + "," + str(h) + "," + str(w) + "] oc " + str(oc) + " k " +
           str(kh) + "x" + str(kw) + " groups " + str(groups) + " s " + str(s[0]) + "," + str(s[1]) + " d " +
           str(d[0]) + "," + str(d[1]) + " pads " + str(pads[0]) + "," + str(pads[1]) + "," + str(pads[2]) +
           "," + str(pads[3]) + " " + algorithm;
  }
};

// The naive convolution, in double: every tap of every input channel of the group, the
// padding read as zeros. SAME is Fluid's: ceil(size / stride) outputs, the padding they need
// split with its odd unit at the end, dilations 1.
struct reference_result {
  dims shape;
  std::vector<float> values;
};
reference_result reference(const conv_case& c, const std::vector<float>& x, const std::vector<float>& w) {
  std::array<std::int64_t, 2> s = c.s, d = c.d, begin{c.pads[0], c.pads[2]}, end{c.pads[1], c.pads[3]};
  const std::int64_t size[2] = {c.h, c.w}, k[2] = {c.kh, c.kw};
  for (int i = 0; i < 2; ++i) {
    if (c.algorithm == "VALID") begin[i] = end[i] = 0;
    if (c.algorithm != "SAME") continue;
    const std::int64_t out = (size[i] + s[i] - 1) / s[i];
    const std::int64_t sum = std::max<std::int64_t>((out - 1) * s[i] + k[i] - size[i], 0);
    begin[i] = sum / 2;
    end[i] = sum - sum / 2;
    d[i] = 1;
  }
  const std::int64_t oh = (c.h + begin[0] + end[0] - (d[0] * (c.kh - 1) + 1)) / s[0] + 1;
  const std::int64_t ow = (c.w + begin[1] + end[1] - (d[1] * (c.kw - 1) + 1)) / s[1] + 1;
  const std::int64_t cg = c.c / c.groups, ocg = c.oc / c.groups;
  reference_result r{{c.n, c.oc, oh, ow}, {}};
  for (std::int64_t b = 0; b < c.n; ++b)
    for (std::int64_t o = 0; o < c.oc; ++o)
      for (std::int64_t y = 0; y < oh; ++y)
        for (std::int64_t xo = 0; xo < ow; ++xo) {
          double sum = 0;
          const std::int64_t g = o / ocg;
          for (std::int64_t ci = 0; ci < cg; ++ci)
            for (std::int64_t ky = 0; ky < c.kh; ++ky)
              for (std::int64_t kx = 0; kx < c.kw; ++kx) {
                const std::int64_t iy = y * s[0] - begin[0] + ky * d[0],
                                   ix = xo * s[1] - begin[1] + kx * d[1];
                if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                sum += double(x[std::size_t(((b * c.c + g * cg + ci) * c.h + iy) * c.w + ix)]) *
                       double(w[std::size_t(((o * cg + ci) * c.kh + ky) * c.kw + kx)]);
              }
          r.values.push_back(float(sum));
        }
  return r;
}

// Runs conv2d as `v` says (Input in v.layout, Filter row-major); Output's dims and values.
reference_result run_conv(const variant& v, const Tensor& x, const Tensor& w, attribute_map attrs) {
  REQUIRE(registered);
  Scope scope;
  scope.var("x").set(LoDTensor(
      v.layout == data_layout::nchw
          ? x
          : transform(x, kernel_key{cpu_place, data_type::float32, v.layout, library_type::plain})));
  scope.var("w").set(LoDTensor(w));
  if (v.use_onednn) attrs.set("use_onednn", true);
  if (!v.onednn_layout.empty()) attrs.set("onednn_layout", v.onednn_layout);
  const kernel_choice choice = fluidk_test::run_named(
      v.where, scope, "conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, {{"Output", {"y"}}}, attrs);
  INFO(v.name << " chose " << choice.chosen.to_string());
  CHECK(choice.chosen.place() == v.where);
  CHECK(choice.chosen.library() == (v.use_onednn ? library_type_of<library::onednn> : library_type::plain));
  const LoDTensor& y = scope.get("y").get<LoDTensor>();
  // An NHWC input keeps its layout, and onednn_layout NHWC gives an NCHW input's output NHWC
  // (an empty input takes the plain kernel, its output NCHW).
  if (v.use_onednn && (v.layout == data_layout::nhwc || v.onednn_layout == "NHWC") && x.numel() > 0)
    CHECK(y.layout() == data_layout::nhwc);
  return {y.dims(), values(y)};
}

// Every kernel against the reference, and the OpenCL kernel against the CPU plain kernel.
void check_all(const conv_case& c, const Tensor& x, const Tensor& w) {
  const reference_result expected = reference(c, values(x), values(w));
  std::vector<float> plain;
  for (const variant& v : float_variants()) {
    INFO(v.name << ": " << c.text());
    const reference_result r = run_conv(v, x, w, c.attrs());
    CHECK(r.shape == expected.shape);
    check_close(r.values, expected.values, 1e-4);
    if (v.name == "CPU plain") plain = r.values;
    if (v.where != cpu_place) check_close(r.values, plain, 1e-4);
  }
}
void check_all(const conv_case& c) {
  check_all(c, random_tensor(c.input_dims()), random_tensor(c.filter_dims()));
}

}  // namespace

TEST_CASE("conv2d, every kernel on grouped, depthwise, dilated, strided and padded convolutions",
          "[ops][conv2d][onednn][opencl]") {
  std::vector<conv_case> cases;
  // n, c, h, w, oc, kh, kw, groups, strides, dilations, paddings (top, bottom, left, right)
  cases.push_back({1, 3, 7, 5, 4, 3, 3});
  cases.push_back({2, 3, 9, 11, 5, 3, 2, 1, {2, 2}, {1, 1}, {1, 0, 2, 1}});
  cases.push_back({2, 4, 8, 9, 6, 3, 3, 2, {1, 2}, {1, 1}, {1, 1, 0, 2}});
  cases.push_back({1, 6, 10, 7, 6, 3, 3, 6, {1, 1}, {1, 1}, {1, 1, 1, 1}});      // depthwise
  cases.push_back({2, 5, 9, 9, 10, 3, 3, 5, {2, 2}, {1, 1}, {1, 0, 2, 1}});      // depthwise x2
  cases.push_back({1, 16, 13, 11, 16, 3, 3, 16, {2, 1}, {2, 2}, {2, 1, 0, 3}});  // depthwise, dilated
  cases.push_back({2, 3, 11, 13, 4, 3, 3, 1, {1, 1}, {2, 2}, {2, 2, 2, 2}});
  cases.push_back({1, 4, 12, 10, 8, 2, 3, 2, {2, 3}, {3, 2}, {0, 3, 1, 0}});
  cases.push_back({2, 9, 7, 7, 12, 1, 1});  // pointwise
  cases.push_back({1, 8, 6, 5, 8, 1, 1, 4, {2, 2}});
  cases.push_back({1, 3, 15, 17, 7, 7, 7, 1, {2, 2}, {1, 1}, {3, 3, 3, 3}});  // ResNet's stem, small
  cases.push_back({1, 2, 3, 3, 3, 5, 5, 1, {1, 1}, {1, 1}, {2, 2, 2, 2}});    // taps past every side
  cases.push_back({1, 2, 4, 4, 2, 3, 3, 2, {3, 3}, {1, 1}, {4, 0, 0, 4}});    // rows of padding only
  conv_case same{2, 4, 9, 8, 6, 3, 2, 2, {2, 3}};
  same.algorithm = "SAME";
  cases.push_back(same);
  conv_case same_dw{1, 5, 7, 6, 5, 3, 3, 5, {1, 2}, {2, 2}, {9, 9, 9, 9}};  // SAME ignores both
  same_dw.algorithm = "SAME";
  cases.push_back(same_dw);
  conv_case valid{1, 3, 8, 7, 2, 3, 2, 1, {2, 1}, {1, 2}, {1, 1, 1, 1}};
  valid.algorithm = "VALID";
  cases.push_back(valid);
  for (const conv_case& c : cases) check_all(c);

  // Drawn: every group count that divides C, in odd sizes.
  std::uniform_int_distribution<std::int64_t> one_to3(1, 3), small(0, 2), size(1, 9);
  for (int i = 0; i < 24; ++i) {
    conv_case c{one_to3(rng()), 0, 0, 0, 0, one_to3(rng()), one_to3(rng())};
    c.groups = one_to3(rng());
    c.c = c.groups * one_to3(rng());
    c.oc = c.groups * one_to3(rng());
    c.s = {one_to3(rng()), one_to3(rng())};
    c.d = {one_to3(rng()), one_to3(rng())};
    for (auto& p : c.pads) p = small(rng());
    c.h = (c.kh - 1) * c.d[0] + size(rng());
    c.w = (c.kw - 1) * c.d[1] + size(rng());
    check_all(c);
  }
}

// ONNX's node tests of Conv (/usr/share/libonnx-testdata/data/node/test_conv_with_*), written
// by /usr/bin/python3 with onnx.numpy_helper.to_array(onnx.load_tensor(...)) of
// test_data_set_0/{input_0,input_1,output_0}.pb; ONNX's pads (begins, then ends) and auto_pad
// SAME_LOWER resolved to Fluid's paddings (top, bottom, left, right).
struct onnx_case {
  const char* name;
  std::array<std::int64_t, 2> strides;
  std::array<std::int64_t, 4> pads;
  std::vector<std::int64_t> x_dims;
  std::vector<float> x;
  std::vector<std::int64_t> w_dims;
  std::vector<float> w;
  std::vector<std::int64_t> y_dims;
  std::vector<float> y;
};
const onnx_case onnx_cases[] = {
    {"test_conv_with_autopad_same",
     {2, 2},
     {1, 1, 1, 1},
     {1, 1, 5, 5},
     {0.f,  1.f,  2.f,  3.f,  4.f,  5.f,  6.f,  7.f,  8.f,  9.f,  10.f, 11.f, 12.f,
      13.f, 14.f, 15.f, 16.f, 17.f, 18.f, 19.f, 20.f, 21.f, 22.f, 23.f, 24.f},
     {1, 1, 3, 3},
     {1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f},
     {1, 1, 3, 3},
     {12.f, 27.f, 24.f, 63.f, 108.f, 81.f, 72.f, 117.f, 84.f}},
    {"test_conv_with_strides_and_asymmetric_padding",
     {2, 2},
     {1, 1, 0, 0},
     {1, 1, 7, 5},
     {0.f,  1.f,  2.f,  3.f,  4.f,  5.f,  6.f,  7.f,  8.f,  9.f,  10.f, 11.f,
      12.f, 13.f, 14.f, 15.f, 16.f, 17.f, 18.f, 19.f, 20.f, 21.f, 22.f, 23.f,
      24.f, 25.f, 26.f, 27.f, 28.f, 29.f, 30.f, 31.f, 32.f, 33.f, 34.f},
     {1, 1, 3, 3},
     {1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f},
     {1, 1, 4, 2},
     {21.f, 33.f, 99.f, 117.f, 189.f, 207.f, 171.f, 183.f}},
    {"test_conv_with_strides_no_padding",
     {2, 2},
     {0, 0, 0, 0},
     {1, 1, 7, 5},
     {0.f,  1.f,  2.f,  3.f,  4.f,  5.f,  6.f,  7.f,  8.f,  9.f,  10.f, 11.f,
      12.f, 13.f, 14.f, 15.f, 16.f, 17.f, 18.f, 19.f, 20.f, 21.f, 22.f, 23.f,
      24.f, 25.f, 26.f, 27.f, 28.f, 29.f, 30.f, 31.f, 32.f, 33.f, 34.f},
     {1, 1, 3, 3},
     {1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f},
     {1, 1, 3, 2},
     {54.f, 72.f, 144.f, 162.f, 234.f, 252.f}},
    {"test_conv_with_strides_padding",
     {2, 2},
     {1, 1, 1, 1},
     {1, 1, 7, 5},
     {0.f,  1.f,  2.f,  3.f,  4.f,  5.f,  6.f,  7.f,  8.f,  9.f,  10.f, 11.f,
      12.f, 13.f, 14.f, 15.f, 16.f, 17.f, 18.f, 19.f, 20.f, 21.f, 22.f, 23.f,
      24.f, 25.f, 26.f, 27.f, 28.f, 29.f, 30.f, 31.f, 32.f, 33.f, 34.f},
     {1, 1, 3, 3},
     {1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f},
     {1, 1, 4, 3},
     {12.f, 27.f, 24.f, 63.f, 108.f, 81.f, 123.f, 198.f, 141.f, 112.f, 177.f, 124.f}},
};

TEST_CASE("conv2d, every kernel on ONNX's node tests of Conv", "[ops][conv2d][onnx][onednn][opencl]") {
  for (const onnx_case& o : onnx_cases) {
    INFO(o.name);
    const dims x_dims(o.x_dims), w_dims(o.w_dims);
    conv_case c{x_dims[0], x_dims[1], x_dims[2], x_dims[3], w_dims[0], w_dims[2], w_dims[3], 1, o.strides};
    c.pads = o.pads;
    const Tensor x = tensor_of(x_dims, o.x), w = tensor_of(w_dims, o.w);
    const reference_result expected = reference(c, o.x, o.w);
    CHECK(expected.shape == dims(o.y_dims));
    check_close(expected.values, o.y, 1e-6);
    for (const variant& v : float_variants()) {
      INFO(v.name);
      const reference_result r = run_conv(v, x, w, c.attrs());
      CHECK(r.shape == dims(o.y_dims));
      check_close(r.values, o.y, 1e-5);
    }
  }
}

#if FLUIDK_OPS_OPENCL
TEST_CASE("conv2d on OpenCL: empty outputs, inputs without channels or pixels", "[ops][conv2d][opencl]") {
  const variant ocl{"OpenCL", place::of<opencl>(0), false, data_layout::nchw};
  // No image, no output channel: an empty output, nothing launched.
  for (const conv_case& c : {conv_case{0, 3, 5, 5, 4, 3, 3}, conv_case{2, 3, 5, 5, 0, 3, 3}}) {
    INFO(c.text());
    const reference_result r =
        run_conv(ocl, random_tensor(c.input_dims()), random_tensor(c.filter_dims()), c.attrs());
    CHECK(r.shape == reference(c, {}, {}).shape);
    CHECK(r.values.empty());
  }
  // No input channel, or no input rows but padding: every output is an empty sum.
  for (const conv_case& c :
       {conv_case{2, 0, 5, 5, 4, 3, 3}, conv_case{1, 2, 0, 4, 3, 1, 3, 1, {1, 1}, {1, 1}, {1, 1, 0, 0}}}) {
    INFO(c.text());
    const Tensor x = random_tensor(c.input_dims()), w = random_tensor(c.filter_dims());
    const reference_result expected = reference(c, values(x), values(w));
    const reference_result r = run_conv(ocl, x, w, c.attrs());
    CHECK(r.shape == expected.shape);
    CHECK(!r.values.empty());
    check_close(r.values, expected.values, 0);
  }
}

TEST_CASE("conv2d on OpenCL refuses a filter that is not in row-major order, and bad geometries",
          "[ops][conv2d][opencl][errors]") {
  REQUIRE(registered);
  const place at = place::of<opencl>(0);
  Scope scope;
  scope.var("x").set(LoDTensor(random_tensor({1, 8, 5, 5})));
  scope.var("w").set(LoDTensor(random_tensor({8, 8, 3, 3})));
  // The filter keeps its layout on the way to the device: a blocked one arrives blocked.
  scope.var("w8").set(LoDTensor(transform(
      random_tensor({8, 8, 3, 3}),
      kernel_key{cpu_place, data_type::float32, data_layout_of<layout::nChw8c>, library_type::plain})));
  const fluidk_test::slot_names out{{"Output", {"y"}}};
  CHECK_THROWS_WITH(
      fluidk_test::run_named(at, scope, "conv2d", {{"Input", {"x"}}, {"Filter", {"w8"}}}, out),
      Catch::Contains("conv2d") && Catch::Contains("Filter in row-major order") && Catch::Contains("nChw8c"));
  CHECK_THROWS_WITH(fluidk_test::run_named(at, scope, "conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, out,
                                           {{"groups", 3}}),
                    Catch::Contains("conv2d") && Catch::Contains("groups (3)"));
  CHECK_THROWS_WITH(fluidk_test::run_named(at, scope, "conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, out,
                                           {{"groups", 2}}),
                    Catch::Contains("conv2d") && Catch::Contains("C / groups"));
  CHECK_THROWS_WITH(fluidk_test::run_named(at, scope, "conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, out,
                                           {{"dilations", std::vector<std::int32_t>{3, 1}}}),
                    Catch::Contains("conv2d") && Catch::Contains("does not fit"));
  CHECK_THROWS_WITH(fluidk_test::run_named(at, scope, "conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, out,
                                           {{"padding_algorithm", std::string("FULL")}}),
                    Catch::Contains("conv2d") && Catch::Contains("padding_algorithm"));
}

// The convolutions of ResNet-18 and MobileNetV2 at 224x224 on PoCL, checked against the CPU
// plain kernel: each must run in seconds, not minutes, on 2 cores.
TEST_CASE("conv2d on OpenCL, network-sized convolutions in reasonable time", "[ops][conv2d][opencl][size]") {
  const variant ocl{"OpenCL", place::of<opencl>(0), false, data_layout::nchw};
  const variant plain{"CPU plain", cpu_place, false, data_layout::nchw};
  struct sized {
    const char* name;
    conv_case c;
  };
  const sized cases[] = {
      {"ResNet-18 stem 7x7/2 pad 3, 3->64 at 224",
       {1, 3, 224, 224, 64, 7, 7, 1, {2, 2}, {1, 1}, {3, 3, 3, 3}}},
      {"MobileNetV2 3x3 depthwise, 32 at 112", {1, 32, 112, 112, 32, 3, 3, 32, {1, 1}, {1, 1}, {1, 1, 1, 1}}},
      {"MobileNetV2 3x3/2 depthwise, 96 at 112",
       {1, 96, 112, 112, 96, 3, 3, 96, {2, 2}, {1, 1}, {0, 1, 0, 1}}},
      {"MobileNetV2 1x1, 32->16 at 112", {1, 32, 112, 112, 16, 1, 1}},
      {"ResNet-18 3x3, 64->64 at 56", {1, 64, 56, 56, 64, 3, 3, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}}},
  };
  for (const sized& s : cases) {
    INFO(s.name);
    const Tensor x = random_tensor(s.c.input_dims()), w = random_tensor(s.c.filter_dims());
    const reference_result expected = run_conv(plain, x, w, s.c.attrs());
    run_conv(ocl, x, w, s.c.attrs());  // builds the program
    const auto start = std::chrono::steady_clock::now();
    const reference_result r = run_conv(ocl, x, w, s.c.attrs());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "conv2d OpenCL, " << s.name << ": " << seconds << " s\n";
    CHECK(r.shape == expected.shape);
    check_close(r.values, expected.values, 1e-4);
    CHECK(seconds < 10.0);
  }
}
#endif

// --- the fused conv2d: Bias, ResidualData and fuse_activation -------------------------------

namespace {

// What a fused conv2d adds, computed naively in double on the unfused result (NCHW values):
// per output channel the bias, then the residual, then the activation.
struct epilogue_case {
  bool bias = false, residual = false;
  std::string activation;  // "", "relu", "clip", "sigmoid"
  float lo = 0, hi = 0;    // clip's

  attribute_map attrs(attribute_map a) const {
    if (!activation.empty()) a.set("fuse_activation", activation);
    if (activation == "clip") {
      a.set("fuse_alpha", lo);
      a.set("fuse_beta", hi);
    }
    return a;
  }
  std::string text() const {
    return std::string(bias ? "Bias " : "") + (residual ? "ResidualData " : "") + "act '" + activation + "'" +
           (activation == "clip" ? " [" + std::to_string(lo) + ", " + std::to_string(hi) + "]" : "");
  }
  std::vector<float> apply(const reference_result& conv, const std::vector<float>& b,
                           const std::vector<float>& r) const {
    const std::int64_t oc = conv.shape[1], plane = conv.shape[2] * conv.shape[3];
    std::vector<float> out(conv.values.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      double v = conv.values[i];
      if (bias) v += b[std::size_t((std::int64_t(i) / plane) % oc)];
      if (residual) v += r[i];
      if (activation == "relu") v = v > 0 ? v : 0;
      if (activation == "clip") {
        const double low = v < lo ? lo : v;
        v = hi < low ? hi : low;
      }
      if (activation == "sigmoid") v = 1 / (1 + std::exp(-v));
      out[i] = float(v);
    }
    return out;
  }
};

// Runs conv2d as `v` says with the optional inputs of `e`; Output's values in NCHW order.
std::vector<float> run_fused(const variant& v, const Tensor& x, const Tensor& w, const Tensor& b,
                             const Tensor& r, const epilogue_case& e, attribute_map attrs,
                             bool output_in_padding = false) {
  REQUIRE(registered);
  Scope scope;
  scope.var("x").set(LoDTensor(
      v.layout == data_layout::nchw
          ? x
          : transform(x, kernel_key{cpu_place, data_type::float32, v.layout, library_type::plain})));
  scope.var("w").set(LoDTensor(w));
  scope.var("b").set(LoDTensor(b));
  scope.var("r").set(LoDTensor(r));
  fluidk_test::slot_names in{{"Input", {"x"}}, {"Filter", {"w"}}};
  if (e.bias) in.push_back({"Bias", {"b"}});
  if (e.residual) in.push_back({"ResidualData", {"r"}});
  if (v.use_onednn) attrs.set("use_onednn", true);
  if (!v.onednn_layout.empty()) attrs.set("onednn_layout", v.onednn_layout);
  const kernel_choice choice =
      fluidk_test::run_named(v.where, scope, "conv2d", in, {{"Output", {"y"}}}, e.attrs(attrs));
  INFO(v.name << " chose " << choice.chosen.to_string());
  CHECK(choice.chosen.place() == v.where);
  CHECK(choice.chosen.library() == (v.use_onednn ? library_type_of<library::onednn> : library_type::plain));
  const LoDTensor& y = scope.get("y").get<LoDTensor>();
  // An NCHW input with onednn_layout NHWC: ResidualData (NCHW) reordered into the NHWC output;
  // blocked where an output row or column lies wholly in the padding.
  if (v.use_onednn && (v.layout == data_layout::nhwc || v.onednn_layout == "NHWC") && x.numel() > 0)
    CHECK((e.residual && output_in_padding ? y.layout().blocked() : y.layout() == data_layout::nhwc));
  return values(y);
}

}  // namespace

TEST_CASE(
    "conv2d fused with Bias, ResidualData and each activation, every kernel, against the unfused result",
    "[ops][conv2d][fused][onednn][opencl]") {
  std::vector<conv_case> cases;
  cases.push_back({1, 3, 7, 5, 4, 3, 3, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}});
  cases.push_back({2, 5, 9, 8, 18, 3, 3, 1, {2, 2}, {1, 1}, {1, 0, 2, 1}});     // strided, OC not a block
  cases.push_back({2, 4, 8, 9, 6, 3, 3, 2, {1, 2}, {1, 1}, {1, 1, 0, 2}});      // grouped
  cases.push_back({1, 16, 10, 7, 16, 3, 3, 16, {2, 2}, {1, 1}, {1, 1, 1, 1}});  // depthwise, strided
  cases.push_back({2, 32, 6, 6, 32, 1, 1});                                     // pointwise
  // An output row, or column, wholly in the padding: oneDNN 2.6's NHWC convolution gave wrong
  // values there with ResidualData and Bias, and crashed with ResidualData and clip.
  cases.push_back({1, 8, 6, 8, 12, 1, 1, 1, {2, 1}, {1, 1}, {1, 0, 0, 0}});
  cases.push_back({1, 8, 6, 8, 12, 3, 3, 1, {2, 1}, {1, 1}, {1, 4, 1, 1}});
  cases.push_back({1, 8, 5, 6, 16, 1, 1, 1, {1, 2}, {1, 1}, {0, 0, 2, 0}});
  // ... and rows, or a column, whose dilated taps step over the input: the only row of a
  // one-row input, the last of two rows, the first column.
  cases.push_back({1, 8, 1, 8, 12, 2, 1, 1, {1, 1}, {3, 1}, {2, 1, 0, 0}});
  cases.push_back({1, 8, 2, 8, 12, 2, 1, 1, {1, 1}, {4, 1}, {3, 1, 0, 0}});
  cases.push_back({1, 8, 6, 2, 12, 1, 2, 1, {1, 1}, {1, 4}, {0, 0, 3, 1}});
  std::vector<epilogue_case> epilogues;
  for (const char* act : {"", "relu", "clip", "sigmoid"})
    for (int mask = 0; mask < 4; ++mask)
      epilogues.push_back({bool(mask & 1), bool(mask & 2), act, -0.3f, 0.4f});
  epilogues.push_back({true, true, "clip", 0.5f, -0.5f});  // min above max: every value is max
  epilogues.push_back({true, false, "clip", 0.f, 6.f});    // relu6
  for (const conv_case& c : cases) {
    const Tensor x = random_tensor(c.input_dims()), w = random_tensor(c.filter_dims());
    const reference_result conv = reference(c, values(x), values(w));
    const Tensor b = random_tensor({c.oc}), r = random_tensor(conv.shape);
    const std::vector<float> r_before = values(r), b_before = values(b);
    for (const epilogue_case& e : epilogues) {
      const std::vector<float> expected = e.apply(conv, b_before, r_before);
      std::vector<float> plain;
      for (const variant& v : float_variants()) {
        INFO(v.name << ": " << c.text() << ", " << e.text());
        const std::vector<float> got = run_fused(v, x, w, b, r, e, c.attrs(), c.output_in_padding());
        check_close(got, expected, 1e-4);
        if (v.name == "CPU plain") plain = got;
        if (v.where != cpu_place) check_close(got, plain, 1e-4);
        // The inputs are read, never written.
        CHECK(values(r) == r_before);
        CHECK(values(b) == b_before);
      }
    }
  }
}

TEST_CASE("conv2d refuses a bad Bias, ResidualData or fuse_activation, naming itself",
          "[ops][conv2d][fused][errors]") {
  REQUIRE(registered);
  Scope scope;
  scope.var("x").set(LoDTensor(random_tensor({1, 4, 5, 5})));
  scope.var("w").set(LoDTensor(random_tensor({6, 4, 3, 3})));
  scope.var("b").set(LoDTensor(random_tensor({6})));
  scope.var("b5").set(LoDTensor(random_tensor({5})));
  scope.var("b16").set(LoDTensor(random_tensor({1, 6})));
  scope.var("r").set(LoDTensor(random_tensor({1, 6, 3, 3})));
  scope.var("r_bad").set(LoDTensor(random_tensor({1, 6, 5, 5})));
  const fluidk_test::slot_names out{{"Output", {"y"}}};
  for (const variant& v : float_variants()) {
    INFO(v.name);
    attribute_map on;
    if (v.use_onednn) on.set("use_onednn", true);
    auto run = [&](const fluidk_test::slot_names& extra, attribute_map attrs) {
      fluidk_test::slot_names in{{"Input", {"x"}}, {"Filter", {"w"}}};
      in.insert(in.end(), extra.begin(), extra.end());
      if (v.use_onednn) attrs.set("use_onednn", true);
      if (!v.onednn_layout.empty() && !attrs.find("onednn_layout"))
        attrs.set("onednn_layout", v.onednn_layout);
      fluidk_test::run_named(v.where, scope, "conv2d", in, out, attrs);
    };
    CHECK_THROWS_WITH(run({{"Bias", {"b5"}}}, {}),
                      Catch::Contains("conv2d") && Catch::Contains("Bias must be [6]"));
    CHECK_THROWS_WITH(run({{"Bias", {"b16"}}}, {}),
                      Catch::Contains("conv2d") && Catch::Contains("Bias must be [6]"));
    CHECK_THROWS_WITH(run({{"ResidualData", {"r_bad"}}}, {}),
                      Catch::Contains("conv2d") && Catch::Contains("ResidualData must have Output's dims"));
    CHECK_THROWS_WITH(run({}, {{"fuse_activation", std::string("tanh")}}),
                      Catch::Contains("conv2d") && Catch::Contains("\"tanh\""));
    CHECK_THROWS_WITH(run({}, {{"fuse_activation", std::string("clip")}, {"fuse_alpha", 0.f}}),
                      Catch::Contains("conv2d") && Catch::Contains("fuse_beta"));
    // The oneDNN kernel refuses a wrong onednn_layout wherever it is given.
    if (v.use_onednn)
      CHECK_THROWS_WITH(
          run({}, {{"onednn_layout", std::string("NCHW")}}),
          Catch::Contains("conv2d") && Catch::Contains("onednn_layout must be \"blocked\" or \"NHWC\""));
    // The same call with valid inputs runs; reading its output back also waits for a device's
    // kernels (none may still be queued when the process ends).
    REQUIRE_NOTHROW(
        run({{"Bias", {"b"}}, {"ResidualData", {"r"}}}, {{"fuse_activation", std::string("relu")}}));
    const std::vector<float> y = values(scope.get("y").get<LoDTensor>());
    CHECK(y.size() == 54);
    CHECK(std::all_of(y.begin(), y.end(), [](float e) { return e >= 0; }));
  }
}

#if FLUIDK_OPS_ONEDNN
// --- the oneDNN kernel's cache ---------------------------------------------------------------

namespace {

// Runs the oneDNN kernel directly on a oneDNN context of the caller's (and so its cache),
// Input in NCHW; Output as the kernel leaves it.
Tensor onednn_conv(onednn_context& dnn, const Tensor& x, const Tensor& w, const attribute_map& attrs) {
  return fluidk_test::run_kernel<ops::conv2d>(
      dnn, ops::conv2d_onednn<float>{},
      kernel_key{cpu_place, data_type::float32, data_layout::nchw, library_type_of<library::onednn>},
      {&x, &w}, attrs);
}

}  // namespace

TEST_CASE("conv2d (oneDNN): a second call hits the cache; a filter written in place is prepared again",
          "[ops][conv2d][onednn][cache]") {
  onednn_cache cache;
  onednn_context dnn(cache);
  const conv_case c{1, 16, 9, 9, 32, 3, 3, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}};
  const Tensor x = random_tensor(c.input_dims());
  Tensor w = random_tensor(c.filter_dims());

  check_close(values(onednn_conv(dnn, x, w, c.attrs())), reference(c, values(x), values(w)).values, 1e-4);
  const onednn_cache::statistics first = cache.stats();
  CHECK(first.misses == 1);
  CHECK(first.hits == 0);
  CHECK(first.prepared_misses == 1);  // the filter, reordered into oneDNN's blocked format

  check_close(values(onednn_conv(dnn, x, w, c.attrs())), reference(c, values(x), values(w)).values, 1e-4);
  const onednn_cache::statistics second = cache.stats();
  CHECK(second.misses == 1);
  CHECK(second.hits == 1);
  CHECK(second.prepared_misses == 1);
  CHECK(second.prepared_hits == 1);

  // Written in place through the same tensor: the kept reorder is stale, the result is new.
  float* data = w.data<float>();
  for (std::int64_t i = 0; i < w.numel(); ++i) data[i] = -2 * data[i] + 0.25f;
  check_close(values(onednn_conv(dnn, x, w, c.attrs())), reference(c, values(x), values(w)).values, 1e-4);
  const onednn_cache::statistics third = cache.stats();
  CHECK(third.hits == 2);
  CHECK(third.prepared_misses == 2);
  CHECK(third.prepared_hits == 1);

  // Another epilogue is another primitive.
  attribute_map relu = c.attrs();
  relu.set("fuse_activation", std::string("relu"));
  onednn_conv(dnn, x, w, relu);
  CHECK(cache.stats().misses == 2);
}

#if FLUIDK_OPS_OPENMP
TEST_CASE("conv2d (oneDNN): a primitive is kept per number of OpenMP threads",
          "[ops][conv2d][onednn][cache]") {
  // oneDNN splits the work, and sizes the scratchpad, for the threads of a primitive's
  // creation: one made for 1 thread would run on 1 thread after omp_set_num_threads(2).
  // The count this thread had, given back however the test ends.
  struct restore_threads {
    int count = omp_get_max_threads();
    ~restore_threads() { omp_set_num_threads(count); }
  } restore;
  onednn_cache cache;
  onednn_context dnn(cache);
  const conv_case c{1, 64, 14, 14, 64, 3, 3, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}};
  const Tensor x = random_tensor(c.input_dims()), w = random_tensor(c.filter_dims());
  const std::vector<float> expected = reference(c, values(x), values(w)).values;
  const struct {
    int threads;
    std::uint64_t misses, hits;
  } steps[] = {{1, 1, 0}, {1, 1, 1}, {2, 2, 1}, {1, 2, 2}, {2, 2, 3}};
  for (const auto& step : steps) {
    INFO(step.threads << " threads");
    omp_set_num_threads(step.threads);
    check_close(values(onednn_conv(dnn, x, w, c.attrs())), expected, 1e-4);
    CHECK(cache.stats().misses == step.misses);
    CHECK(cache.stats().hits == step.hits);
  }
}
#endif

TEST_CASE("conv2d (oneDNN) on a bounded cache evicts and still computes right",
          "[ops][conv2d][onednn][cache]") {
  onednn_cache cache(3);
  onednn_context dnn(cache);
  const conv_case cases[] = {{1, 8, 7, 7, 16, 3, 3, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}},
                             {1, 16, 6, 5, 16, 1, 1},
                             {1, 16, 9, 9, 16, 3, 3, 16, {2, 2}, {1, 1}, {1, 1, 1, 1}},
                             {2, 3, 8, 8, 8, 3, 3, 1, {2, 2}}};
  std::vector<Tensor> xs, ws;
  for (const conv_case& c : cases) {
    xs.push_back(random_tensor(c.input_dims()));
    ws.push_back(random_tensor(c.filter_dims()));
  }
  for (int round = 0; round < 3; ++round)
    for (std::size_t i = 0; i < std::size(cases); ++i) {
      INFO("round " << round << ": " << cases[i].text());
      check_close(values(onednn_conv(dnn, xs[i], ws[i], cases[i].attrs())),
                  reference(cases[i], values(xs[i]), values(ws[i])).values, 1e-4);
      CHECK(cache.size() <= 3);
    }
  CHECK(cache.stats().evictions > 0);
  CHECK(cache.stats().misses > std::size(cases));  // evicted primitives were made again
}

TEST_CASE("conv2d (oneDNN) from two threads at once, sharing one cache", "[ops][conv2d][onednn][cache]") {
  onednn_cache cache;
  const conv_case c{1, 16, 12, 12, 32, 3, 3, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}};
  const Tensor x = random_tensor(c.input_dims()), w = random_tensor(c.filter_dims());
  const std::vector<float> expected = reference(c, values(x), values(w)).values;
  std::vector<int> failures(2, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      onednn_context dnn(cache);  // a stream of its own, the cache shared
      for (int i = 0; i < 8; ++i) {
        const std::vector<float> got = values(onednn_conv(dnn, x, w, c.attrs()));
        bool same = got.size() == expected.size();
        for (std::size_t k = 0; same && k < got.size(); ++k)
          same = std::abs(got[k] - expected[k]) <= 1e-4 * std::max(1.f, std::abs(expected[k]));
        if (!same) ++failures[std::size_t(t)];
      }
    });
  for (std::thread& t : threads) t.join();
  CHECK(failures == std::vector<int>{0, 0});
  CHECK(cache.stats().hits + cache.stats().misses == 16);
  CHECK(cache.stats().misses <= 2);
}

TEST_CASE("conv2d (oneDNN): four threads running one kept primitive at once, each with its own scratchpad",
          "[ops][conv2d][onednn][cache]") {
  // Shapes for which oneDNN's convolutions use a scratchpad (its brgemm-based ones, in NHWC, on
  // AVX-512): with the library's scratchpad, threads running the primitive at once shared it,
  // and some of their results were wrong.
  const conv_case c{1, 64, 28, 28, 64, 3, 3, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}};
  const Tensor x = random_tensor(c.input_dims()), w = random_tensor(c.filter_dims());
  const std::vector<float> expected = reference(c, values(x), values(w)).values;
  for (const std::string layout : {"blocked", "NHWC"}) {
    INFO("onednn_layout " << layout);
    onednn_cache cache;
    attribute_map attrs = c.attrs();
    attrs.set("onednn_layout", layout);
    std::vector<int> failures(4, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        onednn_context dnn(cache);
        for (int i = 0; i < 25; ++i) {
          const std::vector<float> got = values(onednn_conv(dnn, x, w, attrs));
          bool same = got.size() == expected.size();
          for (std::size_t k = 0; same && k < got.size(); ++k)
            same = std::abs(got[k] - expected[k]) <= 1e-4 * std::max(1.f, std::abs(expected[k]));
          if (!same) ++failures[std::size_t(t)];
        }
      });
    for (std::thread& t : threads) t.join();
    CHECK(failures == std::vector<int>{0, 0, 0, 0});
    CHECK(cache.stats().misses <= 4);
  }
}
#endif

#if FLUIDK_OPS_ONEDNN
TEST_CASE("conv2d (oneDNN) fused: the lanes past the last channel of a blocked output stay zero",
          "[ops][conv2d][onednn][fused]") {
  // 18 channels fill two blocks of 8 or 16 only in part; sigmoid(0) and a clip above 0 are not
  // zero, so an activation applied to the padding lanes would show there.
  onednn_cache cache;
  onednn_context dnn(cache);
  const conv_case c{1, 16, 7, 7, 18, 3, 3, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}};
  const Tensor x = random_tensor(c.input_dims()), w = random_tensor(c.filter_dims());
  for (const char* act : {"sigmoid", "clip"}) {
    INFO(act);
    attribute_map attrs = c.attrs();
    attrs.set("fuse_activation", std::string(act));
    attrs.set("fuse_alpha", 0.5f);
    attrs.set("fuse_beta", 2.f);
    const Tensor y = onednn_conv(dnn, x, w, attrs);
    const std::int64_t block = y.layout() == data_layout_of<layout::nChw16c> ? 16 : 8;
    REQUIRE((y.layout() == data_layout_of<layout::nChw16c> || y.layout() == data_layout_of<layout::nChw8c>));
    const std::int64_t blocks = (c.oc + block - 1) / block, plane = 7 * 7;
    const float* data = y.data<float>();
    int nonzero = 0;
    for (std::int64_t p = 0; p < plane; ++p)
      for (std::int64_t lane = c.oc - (blocks - 1) * block; lane < block; ++lane)
        if (data[((blocks - 1) * plane + p) * block + lane] != 0.f) ++nonzero;
    CHECK(nonzero == 0);
  }
}
#endif
