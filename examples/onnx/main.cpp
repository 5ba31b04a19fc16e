// run-onnx: runs an ONNX model with fluidk. The importer (importer.hpp) makes the model a
// program of the example operators; fluidk's executor runs it at the place asked for, moving
// data between places and layouts as each operator's kernel needs; the outputs come back to
// the CPU in row-major order, to be written, compared with expected ones, or both.
//
//   run_onnx MODEL.onnx [--input F.pb]... [--output-dir D] [--expect D] [--rtol R] [--atol A]
//            [--place cpu|opencl:0|cuda:0] [--library plain|onednn|cudnn]
//            [--op-device OPTYPE=PLACE]... [--threads N] [--repeat N] [--plan] [--dot FILE]
//            [--no-fuse PASS]... [--no-eager-deletion] [--onednn-layout auto|blocked|NHWC]
//
// Exit status: 0 when it ran (and every output matched), 1 when an output did not match,
// 2 when the command line, the model or an input is refused (nothing ran), 3 when the run
// itself failed (an operator's kernel refused or failed). usage() says what each option does.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <common/plan_table.hpp>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fluidk/bfloat16.hpp>
#include <fluidk/control_flow.hpp>
#include <fluidk/devices/enabled.hpp>
#include <fluidk/dot.hpp>
#include <fluidk/executor.hpp>
#include <fluidk/float16.hpp>
#include <fluidk/transforms/runtime.hpp>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <ops/ops.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuse_passes.hpp"
#include "importer.hpp"
#if FLUIDK_OPS_ONEDNN
#include "ops/detail/onednn.hpp"
#endif
#if FLUIDK_ONNX_OPENMP
#include <omp.h>
#endif

namespace {

using namespace fluidk;
namespace fs = std::filesystem;

constexpr const char* usage_text =
    R"(usage: run-onnx MODEL.onnx [options]
  --input FILE.pb          a TensorProto for the next graph input (repeat, in graph-input order);
                           default: test_data_set_0/input_*.pb beside the model, in numeric order
  --output-dir DIR         writes each output as DIR/output_K.pb (a TensorProto with the output's name)
  --expect DIR             compares each output with DIR/output_K.pb: shape and data type exactly,
                           values by |a - e| <= atol + rtol |e|; exit 1 on a mismatch
  --rtol R, --atol A       the tolerances of --expect (defaults 1e-4 and 1e-5)
  --place PLACE            where the program runs: cpu (default), opencl:0, cuda:0
  --library LIB            plain (default), onednn or cudnn: use_onednn / use_cudnn on every operator
  --op-device OPTYPE=PLACE op_device PLACE on every operator made from nodes of ONNX op type OPTYPE
                           (repeat for several op types)
  --threads N              threads of oneDNN and the CPU kernels (OpenMP)
  --repeat N               after the first run and 2 warm-up runs, N timed runs: prints median_ms M,
                           then overhead_percent P (of one more run, timed inside the executor: the
                           share outside kernels and transforms), peak_rss_kb and start_rss_kb
  --plan                   prints the plan of the first run: kernel per operator, inputs moved and
                           their cost, transforms, reorders and bytes moved (of one more run, and of
                           the first), device buffers made by the drivers (of the third run, and of
                           the first), peak activation bytes and fallbacks
  --no-eager-deletion      keeps every variable after its last use (by default each activation's
                           storage is released after its last use; the graph outputs are kept)
  --dot FILE               writes the plan of the first run as Graphviz DOT
  --no-fuse PASS           does not run fuse pass PASS (repeat for several; all: none runs): conv_bn,
                           conv_bias, conv_residual, conv_activation, gemm_activation (docs/onnx.md)
  --onednn-layout L        with --library onednn, the layout of the convolutions' activations: blocked
                           (nChw16c or nChw8c), NHWC, or auto (default): NHWC on AVX-512 CPUs where
                           every Conv is ungrouped and only Conv, pooling, Flatten or Reshape read the
                           outputs of Conv and pooling (after the fuse passes), else blocked (docs/onnx.md)
exit status: 0 ran (and matched), 1 mismatch, 2 refused (nothing ran), 3 the run failed
)";

// A refused command line: exit 2, with the usage.
struct usage_error {
  std::string what;
};
// A refused model, input or option value: exit 2.
struct refusal {
  std::string what;
};

struct arguments {
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir, expect_dir, dot;
  double rtol = 1e-4, atol = 1e-5;
  std::string place = "cpu", library = "plain";
  std::vector<std::pair<std::string, std::string>> op_device;  // ONNX op type, place text
  int threads = 0, repeat = 0;
  bool plan = false;
  bool eager_deletion = true;                  // --no-eager-deletion: false
  std::set<std::string, std::less<>> no_fuse;  // fuse passes switched off ("all": every one)
  std::string onednn_layout;                   // --onednn-layout; empty: auto
};

double number(std::string_view option, const std::string& text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(value) || value < 0)
    throw usage_error{std::string(option) + " takes a non-negative number, not '" + text + "'"};
  return value;
}
int count(std::string_view option, const std::string& text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < 1)
    throw usage_error{std::string(option) + " takes a positive integer, not '" + text + "'"};
  return value;
}

arguments parse_arguments(int argc, char** argv) {
  arguments args;
  const std::set<std::string_view> with_value{
      "--input",     "--output-dir", "--expect", "--rtol", "--atol",    "--place",        "--library",
      "--op-device", "--threads",    "--repeat", "--dot",  "--no-fuse", "--onednn-layout"};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    if (arg == "-h" || arg == "--help") throw usage_error{};
    if (arg == "--plan") {
      args.plan = true;
      continue;
    }
    if (arg == "--no-eager-deletion") {
      args.eager_deletion = false;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      if (!args.model.empty()) throw usage_error{"one model only ('" + args.model + "', then '" + arg + "')"};
      args.model = arg;
      continue;
    }
    if (const auto eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.erase(eq);
      if (!with_value.contains(arg)) throw usage_error{"unknown option " + arg};
    } else {
      if (!with_value.contains(arg)) throw usage_error{"unknown option " + arg};
      if (i + 1 >= argc) throw usage_error{arg + " needs a value"};
      value = argv[++i];
    }
    if (arg == "--input") {
      args.inputs.push_back(value);
    } else if (arg == "--output-dir") {
      args.output_dir = value;
    } else if (arg == "--expect") {
      args.expect_dir = value;
    } else if (arg == "--rtol") {
      args.rtol = number(arg, value);
    } else if (arg == "--atol") {
      args.atol = number(arg, value);
    } else if (arg == "--place") {
      args.place = value;
    } else if (arg == "--library") {
      if (value != "plain" && value != "onednn" && value != "cudnn")
        throw usage_error{"--library takes plain, onednn or cudnn, not '" + value + "'"};
      args.library = value;
    } else if (arg == "--op-device") {
      const auto eq = value.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == value.size())
        throw usage_error{"--op-device takes OPTYPE=PLACE (as Gemm=opencl:0), not '" + value + "'"};
      args.op_device.emplace_back(value.substr(0, eq), value.substr(eq + 1));
    } else if (arg == "--threads") {
      args.threads = count(arg, value);
    } else if (arg == "--repeat") {
      args.repeat = count(arg, value);
    } else if (arg == "--dot") {
      args.dot = value;
    } else if (arg == "--no-fuse") {
      const std::vector<std::string>& passes = onnx_import::fuse_pass_names();
      if (value != "all" && std::find(passes.begin(), passes.end(), value) == passes.end()) {
        std::string names;
        for (const std::string& pass : passes) names += pass + ", ";
        throw usage_error{"--no-fuse takes a fuse pass (" + names + "or all), not '" + value + "'"};
      }
      args.no_fuse.insert(value);
    } else if (arg == "--onednn-layout") {
      if (!onnx_import::onednn_layout_mode(value))
        throw usage_error{"--onednn-layout takes auto, blocked or NHWC, not '" + value + "'"};
      args.onednn_layout = value;
    }
  }
  if (!args.onednn_layout.empty() && args.library != "onednn")
    throw usage_error{"--onednn-layout is the layout of oneDNN's convolutions: it needs --library onednn"};
  if (args.model.empty()) throw usage_error{"no model given"};
  return args;
}

// A place of the command line that this build has and this machine has a device for.
place usable_place(const std::string& option, const std::string& text) {
  const std::string kind = text.substr(0, text.find(':'));
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
  };
  [[maybe_unused]] const std::string k = lower(kind);  // read where a backend is not built
  place p = cpu_place;
  try {
    p = parse_place(text);
  } catch (const error& e) {
#if !defined(FLUIDK_HAS_CUDA) || !FLUIDK_HAS_CUDA
    if (k == "cuda" || k == "gpu") throw refusal{option + ": this build has no CUDA backend"};
#endif
#if !defined(FLUIDK_HAS_OPENCL) || !FLUIDK_HAS_OPENCL
    if (k == "opencl" || k == "cl") throw refusal{option + ": this build has no OpenCL backend"};
#endif
    throw refusal{option + ": " + detail::unprefixed(e)};
  }
  if (p == cpu_place) return p;
  const int devices = device_count(p);
#if defined(FLUIDK_HAS_CUDA) && FLUIDK_HAS_CUDA
  if (p.kind_id() == cuda::id && devices == 0) {
    // "no CUDA device (what cudaGetDeviceCount said)"
    const std::string reason = cuda_unavailable_reason();
    const std::size_t why = reason.find('(');
    throw refusal{option + ": there is no CUDA device on this machine" +
                  (why == std::string::npos ? std::string() : " " + reason.substr(why))};
  }
#endif
  if (devices == 0)
    throw refusal{option + ": there is no " + std::string(p.kind().name) + " device on this machine"};
  if (p.device() >= devices)
    throw refusal{option + ": there is no device " + std::to_string(p.device()) + "; this machine has " +
                  std::to_string(devices) + " " + std::string(p.kind().name) + " device" +
                  (devices == 1 ? "" : "s")};
  return p;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw refusal{path + ": cannot open it"};
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// test_data_set_0/input_K.pb beside the model, in the order of K.
std::vector<std::string> default_inputs(const std::string& model, std::size_t wanted) {
  const fs::path dir = fs::path(model).parent_path() / "test_data_set_0";
  std::vector<std::pair<long, std::string>> found;
  std::error_code ec;
  if (fs::is_directory(dir, ec))
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("input_", 0) != 0 || name.size() <= 9 || name.substr(name.size() - 3) != ".pb") continue;
      const std::string digits = name.substr(6, name.size() - 9);
      long k = 0;
      const auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
      if (err == std::errc{} && end == digits.data() + digits.size())
        found.emplace_back(k, entry.path().string());
    }
  std::sort(found.begin(), found.end());
  if (found.empty() && wanted > 0)
    throw refusal{"the model takes " + std::to_string(wanted) + " input" + (wanted == 1 ? "" : "s") +
                  ": give them with --input, or put input_0.pb... in " + dir.string()};
  std::vector<std::string> paths;
  for (const auto& [k, path] : found) paths.push_back(path);
  return paths;
}

// A tensor on the CPU in row-major order: fluidk::transform to the CPU, in the plain layout of
// the tensor's own (NCHW for a blocked or NHWC one), when it is elsewhere.
Tensor on_host(const Tensor& t) {
  const kernel_key host(cpu_place, t.dtype(), t.layout().plain(), library_type::plain);
  return key_of(t) == host ? t : transform(t, host);
}

std::string shape_text(const dims& d) {
  std::string out = "[";
  for (std::size_t i = 0; i < d.rank(); ++i) out += (i ? ", " : "") + std::to_string(d[i]);
  return out + "]";
}

// Where a host tensor's elements start.
const void* elements(const Tensor& t) { return static_cast<const char*>(t.handle()) + t.offset(); }

double element(const Tensor& t, std::int64_t i) {
  const void* base = elements(t);
  switch (t.dtype()) {
    case data_type::float32:
      return static_cast<const float*>(base)[i];
    case data_type::float64:
      return static_cast<const double*>(base)[i];
    case data_type::int8:
      return static_cast<const std::int8_t*>(base)[i];
    case data_type::uint8:
      return static_cast<const std::uint8_t*>(base)[i];
    case data_type::int16:
      return static_cast<const std::int16_t*>(base)[i];
    case data_type::int32:
      return static_cast<const std::int32_t*>(base)[i];
    case data_type::int64:
      return double(static_cast<const std::int64_t*>(base)[i]);
    case data_type::boolean:
      return static_cast<const bool*>(base)[i] ? 1 : 0;
    case data_type::float16:
      return float(static_cast<const float16*>(base)[i]);
    case data_type::bfloat16:
      return float(static_cast<const bfloat16*>(base)[i]);
  }
  return 0;
}

// One output against its expected value: the contract's line, and whether it matched.
bool compare(std::size_t k, const std::string& name, const Tensor& actual, const Tensor& expected,
             double rtol, double atol) {
  std::printf("output %zu %s: ", k, name.c_str());
  if (actual.dtype() != expected.dtype()) {
    std::printf("MISMATCH (data type %s, expected %s)\n", std::string(name_of(actual.dtype())).c_str(),
                std::string(name_of(expected.dtype())).c_str());
    return false;
  }
  if (actual.dims() != expected.dims()) {
    std::printf("MISMATCH (shape %s, expected %s)\n", shape_text(actual.dims()).c_str(),
                shape_text(expected.dims()).c_str());
    return false;
  }
  // numpy.isclose's rule, |a - e| <= atol + rtol |e|; equal values (infinities) and NaN
  // against NaN match, and an infinity matches only itself (rtol |e| of an infinite e would
  // let any finite value pass). The relative error is over elements whose expected value is
  // not 0. int64 elements are compared as integers, their difference taken exactly: a double
  // holds them exactly only up to 2^53, and two that differ above it could round to one.
  double max_abs = 0, max_rel = 0;
  bool close = true;
  const bool int64 = actual.dtype() == data_type::int64;
  const auto int64_at = [](const Tensor& t, std::int64_t i) {
    return static_cast<const std::int64_t*>(elements(t))[i];
  };
  for (std::int64_t i = 0; i < actual.numel(); ++i) {
    const double a = element(actual, i), e = element(expected, i);
    double diff = std::abs(a - e);
    if (int64) {
      const std::int64_t ai = int64_at(actual, i), ei = int64_at(expected, i);
      if (ai == ei) continue;
      diff = double(ai > ei ? std::uint64_t(ai) - std::uint64_t(ei) : std::uint64_t(ei) - std::uint64_t(ai));
    } else if (a == e || (std::isnan(a) && std::isnan(e))) {
      continue;
    }
    if (std::isinf(a) || std::isinf(e) || !(diff <= atol + rtol * std::abs(e))) close = false;
    max_abs = std::isnan(diff) || std::isnan(max_abs) ? std::numeric_limits<double>::quiet_NaN()
                                                      : std::max(max_abs, diff);
    if (e != 0)
      max_rel = std::isnan(diff) || std::isnan(max_rel) ? std::numeric_limits<double>::quiet_NaN()
                                                        : std::max(max_rel, diff / std::abs(e));
  }
  std::printf("max_abs_error %.3g max_rel_error %.3g (rtol %g, atol %g) %s\n", max_abs, max_rel, rtol, atol,
              close ? "ok" : "MISMATCH");
  return close;
}

// The origin of each entry of one run's trace: the node of its block-0 operator, or, for the
// operators of a sub-block (an If's branch, a Loop's body) and their runs, the If or Loop
// that ran them. A control-flow operator's entry counts its sub-block's runs, whose entries
// follow it (op_trace::block_runs).
std::vector<std::string> trace_origins(const onnx_import::imported_model& model,
                                       const std::vector<op_trace>& trace) {
  std::vector<std::string> out;
  std::function<void(const BlockDesc&, const std::string*)> walk = [&](const BlockDesc& block,
                                                                       const std::string* inside) {
    for (std::size_t i = 0; i < block.ops().size() && out.size() < trace.size(); ++i) {
      const std::string& origin = inside != nullptr          ? *inside
                                  : i < model.origins.size() ? model.origins[i]
                                                             : block.ops()[i].type();
      const op_trace& t = trace[out.size()];
      out.push_back(inside != nullptr ? "in " + origin : origin);
      for (std::uint64_t run = 0; run < t.block_runs; ++run)
        for (const std::size_t sub : block.child_blocks(block.ops()[i].type(), block.ops()[i].attrs()))
          walk(model.program.block(sub), &origin);
    }
  };
  walk(model.program.block(0), nullptr);
  out.resize(trace.size(), "?");
  return out;
}

// The process's resident set in KB now (/proc/self/statm; 0 where there is none), and the
// largest it has been (getrusage).
long resident_kb() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}
long peak_resident_kb() {
  rusage usage{};
  return getrusage(RUSAGE_SELF, &usage) == 0 ? usage.ru_maxrss : 0;  // KB on Linux
}
long start_rss_kb = 0;  // at the start of main, before the model is read

// Waits for the work queued on every device context the program may use.
void wait_all(const std::vector<place>& places) {
  for (const place& p : places) context_of(p).wait();
}

// The buffers that the drivers of the run's devices have made so far: their memory caches'
// count (fluidk/device_memory_cache.hpp). The CPU has no such cache.
std::uint64_t driver_buffers_made(const std::vector<place>& places) {
  std::uint64_t made = 0;
  for ([[maybe_unused]] const place& p : places) {
#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
    if (p.kind_id() == opencl::id)
      made += context_of<opencl>(p.device()).memory_cache().stats().driver_allocations;
#endif
#if defined(FLUIDK_HAS_CUDA) && FLUIDK_HAS_CUDA
    if (p.kind_id() == cuda::id)
      made += context_of<cuda>(p.device()).memory_cache().stats().driver_allocations;
#endif
  }
  return made;
}

int run(const arguments& args) {
  ops::register_all();
#if FLUIDK_ONNX_OPENMP
  if (args.threads > 0) omp_set_num_threads(args.threads);
#else
  if (args.threads > 0) throw refusal{"--threads: this build has no OpenMP to set the threads of"};
#endif

  // The command line's places and library, before the model is read.
  const place where = usable_place("--place " + args.place, args.place);
  std::vector<place> places{where};
  onnx_import::options options;
  for (const auto& [op_type, text] : args.op_device) {
    const place p = usable_place("--op-device " + op_type + "=" + text, text);
    if (std::find(places.begin(), places.end(), p) == places.end()) places.push_back(p);
    if (!options.op_device.emplace(op_type, text).second)
      throw refusal{"--op-device names " + op_type + " twice"};
  }
  if (args.library == "onednn") {
#if !defined(FLUIDK_HAS_ONEDNN) || !FLUIDK_HAS_ONEDNN
    throw refusal{"--library onednn: this build has no oneDNN"};
#endif
    options.library_attribute = "use_onednn";
  } else if (args.library == "cudnn") {
#if !defined(FLUIDK_HAS_CUDA) || !FLUIDK_HAS_CUDA
    throw refusal{"--library cudnn: this build has no CUDA backend (and so no cuDNN)"};
#endif
    options.library_attribute = "use_cudnn";
  }

  // The model, its inputs (checked against their declared types), the program.
  onnx_import::imported_model model;
  std::vector<onnx_import::fuse_report> fusions;
  std::optional<onnx_import::layout_choice> conv_layout;  // with --library onednn
  std::vector<Tensor> inputs;
  try {
    onnx::ModelProto proto = onnx_import::parse_model(read_file(args.model), args.model);
    const std::vector<onnx_import::graph_value> declared = onnx_import::model_inputs(proto);
    const std::vector<std::string> files =
        args.inputs.empty() ? default_inputs(args.model, declared.size()) : args.inputs;
    for (const std::string& file : files) inputs.push_back(onnx_import::read_tensor_file(file));
    onnx_import::check_inputs(declared, inputs, files);
    std::vector<dims> input_dims;
    for (const Tensor& t : inputs) input_dims.push_back(t.dims());
    model = onnx_import::translate(std::move(proto), &input_dims, options);
    fusions = onnx_import::fuse(model, args.no_fuse);
    if (args.library == "onednn") {
#if FLUIDK_OPS_ONEDNN
      const bool nhwc_convolutions = ops::detail::onednn_avx512();
#else
      const bool nhwc_convolutions = false;
#endif
      conv_layout = onnx_import::choose_onednn_layout(
          model, args.onednn_layout.empty() ? "auto" : args.onednn_layout, nhwc_convolutions);
    }
  } catch (const onnx_import::refused& e) {
    throw refusal{args.model + ": " + detail::unprefixed(e)};
  }

  // Weights and inputs in the scope; the prepared program; the first run, traced.
  Scope scope;
  for (auto& [name, tensor] : model.weights) scope.var(name).set(LoDTensor(std::move(tensor)));
  for (std::size_t k = 0; k < inputs.size(); ++k) scope.var(model.inputs[k].name).set(LoDTensor(inputs[k]));
  Executor executor(where);
  std::vector<op_trace> trace;
  executor_stats first{};
  executor_stats later{};                              // of the second run (--plan)
  std::uint64_t buffers_first = 0, buffers_later = 0;  // made by the devices' drivers (--plan)
  std::vector<double> times_ms;
  executor_stats timed{};
  executor_stats timing{};  // of the run timed inside the executor (--repeat)
  try {
    // Eager deletion keeps the graph outputs, read after the runs; the weights are persistable.
    prepare_options eager{.eager_deletion = args.eager_deletion, .count_memory = true};
    for (const onnx_import::graph_value& output : model.outputs) eager.keep.push_back(output.name);
    Executor::prepared prepared = executor.prepare(model.program.block(0), scope, eager);
    if (args.plan || !args.dot.empty()) executor.trace_into(&trace);
    const std::uint64_t buffers_before = driver_buffers_made(places);
    executor.run(prepared);
    wait_all(places);
    executor.trace_into(nullptr);
    first = executor.stats();
    buffers_first = driver_buffers_made(places) - buffers_before;
    // Each run as a new request: the inputs count as written (their moves are made again),
    // the weights' moved copies are the transfer cache's.
    auto once = [&] {
      for (const onnx_import::graph_value& input : model.inputs) scope.get(input.name).mark_modified();
      executor.run(prepared);
      wait_all(places);
    };
    if (args.plan) {
      // The plan's transforms of a later run: the first made the weights' copies too. The
      // buffers of the third: the second makes one more for each graph output, as the first
      // run's outputs are alive while it makes its own.
      executor.reset_stats();
      once();
      later = executor.stats();
      const std::uint64_t buffers_before = driver_buffers_made(places);
      once();
      buffers_later = driver_buffers_made(places) - buffers_before;
    }
    if (args.repeat > 0) {
      for (int i = 0; i < 2; ++i) once();
      executor.reset_stats();
      for (int i = 0; i < args.repeat; ++i) {
        const auto start = std::chrono::steady_clock::now();
        once();
        times_ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      }
      timed = executor.stats();
      // One more run, timed inside the executor: the timed runs above leave timing off, as
      // it takes every operator off the executor's shortest path.
      executor.reset_stats();
      executor.time_runs(true);
      once();
      executor.time_runs(false);
      timing = executor.stats();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "run-onnx: %s: the run failed: %s\n", args.model.c_str(),
                 detail::unprefixed(e).c_str());
    return 3;
  }

  if (args.plan) {
    for (const onnx_import::fuse_report& f : fusions)
      if (f.ran)
        std::printf("pass %s: %zu fused\n", f.pass.c_str(), f.fused);
      else
        std::printf("pass %s: off\n", f.pass.c_str());
    if (conv_layout)
      std::printf("onednn_layout %s (%s)\n", conv_layout->layout.c_str(), conv_layout->why.c_str());
    std::printf("operators made from the model's nodes:\n");
    for (std::size_t i = 0; i < model.origins.size(); ++i)
      std::printf("  %-2zu %-16s <- %s\n", i + 1, model.program.block(0).ops()[i].type().c_str(),
                  model.origins[i].c_str());
    std::printf("plan of the first run on %s:\n", example::short_name(where).c_str());
    example::print_plan(trace);
    // Each figure of a later run (the second), then of the first, which also moved the
    // weights: the transforms, those on one place (layout or data type: reorders) and those
    // that copy between places; the bytes copied, and the bytes of every transform made.
    using ull = unsigned long long;
    auto figure = [](const char* name, std::uint64_t then, std::uint64_t at_first) {
      std::printf("%s %llu (first run %llu)\n", name, ull(then), ull(at_first));
    };
    figure("transforms per run", later.transforms, first.transforms);
    figure("reorders per run", later.reorders, first.reorders);
    figure("device copies per run", later.transforms - later.reorders, first.transforms - first.reorders);
    figure("bytes_moved", later.bytes_copied, first.bytes_copied);
    figure("bytes_transformed", later.bytes_transformed, first.bytes_transformed);
    figure("device buffers made per run", buffers_later, buffers_first);
    std::printf("peak_activation_bytes %llu%s\n",
                static_cast<unsigned long long>(first.peak_activation_bytes),
                args.eager_deletion ? "" : " (no eager deletion)");
    std::size_t fell_back = 0;
    for (const op_trace& t : trace) fell_back += t.fell_back;
    std::printf("fallbacks %zu\n", fell_back);
    // Each trace entry's origin: its operator of block 0, or the If or Loop whose sub-block ran it.
    const std::vector<std::string> origin = trace_origins(model, trace);
    for (std::size_t i = 0; i < trace.size(); ++i)
      if (trace[i].fell_back)
        std::printf("  %zu %s (%s): no kernel for %s; ran %s\n", i + 1, trace[i].op.c_str(),
                    origin[i].c_str(), example::without_place_prefix(trace[i].expected.to_string()).c_str(),
                    example::without_place_prefix(trace[i].chosen.to_string()).c_str());
  }
  if (!args.dot.empty()) {
    std::ofstream out(args.dot);
    out << to_dot(model.program, trace);
    if (!out.flush()) throw refusal{"--dot: cannot write " + args.dot};
  }
  if (args.repeat > 0) {
    std::vector<double> sorted = times_ms;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t n = sorted.size();
    const double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    std::printf(
        "timed runs %d (after 2 warm-up runs): transforms_per_run %.1f reorders_per_run %.1f "
        "bytes_moved_per_run %.0f bytes_transformed_per_run %.0f\n",
        args.repeat, double(timed.transforms) / args.repeat, double(timed.reorders) / args.repeat,
        double(timed.bytes_copied) / args.repeat, double(timed.bytes_transformed) / args.repeat);
    std::printf("median_ms %.4f\n", median);
    const std::uint64_t outside = timing.run_ns - timing.kernel_ns - timing.transform_ns;
    std::printf("overhead_percent %.3f\n",
                timing.run_ns == 0 ? 0.0 : 100.0 * double(outside) / double(timing.run_ns));
    std::printf("peak_rss_kb %ld\nstart_rss_kb %ld\n", peak_resident_kb(), start_rss_kb);
  }

  // The outputs, on the CPU in row-major order.
  if (!args.output_dir.empty()) {
    std::error_code ec;
    fs::create_directories(args.output_dir, ec);
    if (ec) throw refusal{"--output-dir: cannot make " + args.output_dir + ": " + ec.message()};
  }
  bool matched = true;
  for (std::size_t k = 0; k < model.outputs.size(); ++k) {
    const std::string& name = model.outputs[k].name;
    Tensor out;
    try {
      out = on_host(scope.get(name).get<LoDTensor>());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "run-onnx: output %zu %s: %s\n", k, name.c_str(), detail::unprefixed(e).c_str());
      return 3;
    }
    const std::string file = "output_" + std::to_string(k) + ".pb";
    if (!args.output_dir.empty())
      onnx_import::write_tensor_file((fs::path(args.output_dir) / file).string(), out, name);
    if (!args.expect_dir.empty()) {
      Tensor expected;
      try {
        expected = onnx_import::read_tensor_file((fs::path(args.expect_dir) / file).string());
      } catch (const onnx_import::refused& e) {
        throw refusal{"--expect: " + detail::unprefixed(e)};
      }
      matched = compare(k, name, out, expected, args.rtol, args.atol) && matched;
    } else {
      std::printf("output %zu %s: %s %s\n", k, name.c_str(), std::string(name_of(out.dtype())).c_str(),
                  shape_text(out.dims()).c_str());
    }
  }
  return matched ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  start_rss_kb = resident_kb();
  try {
    return run(parse_arguments(argc, argv));
  } catch (const usage_error& e) {
    if (e.what.empty()) {  // --help
      std::printf("%s", usage_text);
      return 0;
    }
    std::fprintf(stderr, "run-onnx: %s (run-onnx --help lists the options)\n", e.what.c_str());
    return 2;
  } catch (const refusal& e) {
    std::fprintf(stderr, "run-onnx: refused: %s\n", e.what.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "run-onnx: %s\n", detail::unprefixed(e).c_str());
    return 2;
  }
}
