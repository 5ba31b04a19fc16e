// The ONNX importer (importer.hpp): the model's checks, shape inference, and the mapping of
// each node to the example operators, attribute by attribute.
#include "importer.hpp"

#include <google/protobuf/stubs/logging.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fluidk/control_flow.hpp>
#include <fluidk/operator_registry.hpp>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <sstream>

#include "ops/detail/window.hpp"

namespace fluidk::onnx_import {

static_assert(std::endian::native == std::endian::little,
              "ONNX's raw_data is little-endian, and the importer copies it as it is");

namespace {

using onnx::AttributeProto;
using onnx::TensorProto;

std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

std::string dims_text(const std::vector<std::int64_t>& extents) {
  std::string out = "[";
  for (std::size_t i = 0; i < extents.size(); ++i)
    out += (i ? ", " : "") + (extents[i] < 0 ? std::string("?") : std::to_string(extents[i]));
  return out + "]";
}

// A float as people write it: "0.5", "1e-05", "-3.40282e+38".
std::string number_text(double value) {
  char out[32];
  std::snprintf(out, sizeof out, "%g", value);
  return out;
}

// A message of libonnx's on one line (the checker prints nodes over several).
std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

std::string attribute_type_name(int type) {
  return AttributeProto::AttributeType_IsValid(type)
             ? AttributeProto::AttributeType_Name(static_cast<AttributeProto::AttributeType>(type))
             : "attribute type " + std::to_string(type);
}

// Protobuf's own log lines (a parse that fails says why on stderr) would precede the
// importer's error, which names the file: silenced once, for the whole program.
void silence_protobuf_log() {
  static const bool silenced = [] {
    google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int, const std::string&) {});
    return true;
  }();
  static_cast<void>(silenced);
}

// ---------------------------------------------------------------------------------------
// A node as the mapping reads it: its label for errors, its attributes (each read marks it
// mapped; one left unread is refused), its inputs and outputs with absent optional ones "".

class node_view {
 public:
  // `where`: for a node of a subgraph, the graph it is in ("the body of node 0 (Loop, output
  // 'y')"); empty for the model's graph.
  node_view(const onnx::NodeProto& proto, std::size_t index, int version, const std::string& where = {})
      : proto(proto), version(version) {
    label = "node " + std::to_string(index);
    if (!proto.name().empty())
      label += " " + quoted(proto.name()) + " (" + proto.op_type() + ")";
    else if (proto.output_size() > 0)
      label += " (" + proto.op_type() + ", output " + quoted(proto.output(0)) + ")";
    else
      label += " (" + proto.op_type() + ")";
    if (!where.empty()) label += " in " + where;
  }

  const onnx::NodeProto& proto;
  int version;  // the since_version of the op type's definition at the model's opset
  std::string label;

  [[noreturn]] void refuse(const std::string& why) const { throw refused(label + ": " + why); }
  [[noreturn]] void refuse_attribute(std::string_view name, const std::string& why) const {
    refuse("attribute " + quoted(name) + " " + why);
  }

  const AttributeProto* attribute(std::string_view name) const {
    for (const AttributeProto& a : proto.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  bool has(std::string_view name) const { return attribute(name) != nullptr; }
  std::int64_t int_or(std::string_view name, std::int64_t fallback) const {
    const AttributeProto* a = attribute(name);
    return a == nullptr ? fallback : a->i();
  }
  float float_or(std::string_view name, float fallback) const {
    const AttributeProto* a = attribute(name);
    return a == nullptr ? fallback : a->f();
  }
  std::string string_or(std::string_view name, std::string fallback) const {
    const AttributeProto* a = attribute(name);
    return a == nullptr ? fallback : a->s();
  }
  std::optional<std::vector<std::int64_t>> ints(std::string_view name) const {
    const AttributeProto* a = attribute(name);
    if (a == nullptr) return std::nullopt;
    return std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
  }
  // An attribute that is 0 or 1, as a bool.
  bool flag(std::string_view name, bool fallback) const {
    const std::int64_t v = int_or(name, fallback ? 1 : 0);
    if (v != 0 && v != 1) refuse_attribute(name, "is " + std::to_string(v) + "; it must be 0 or 1");
    return v == 1;
  }

  // The inputs and outputs, without the absent optional ones at the end.
  int input_count() const {
    int n = proto.input_size();
    while (n > 0 && proto.input(n - 1).empty()) --n;
    return n;
  }
  int output_count() const {
    int n = proto.output_size();
    while (n > 0 && proto.output(n - 1).empty()) --n;
    return n;
  }
  std::string input(int i) const { return i < proto.input_size() ? proto.input(i) : std::string(); }
  std::string output(int i) const { return i < proto.output_size() ? proto.output(i) : std::string(); }

  void require_inputs(int low, int high) const {
    const int n = input_count();
    if (n < low || n > high)
      refuse("has " + std::to_string(n) + " inputs; " + proto.op_type() + " takes " +
             (low == high ? std::to_string(low) : std::to_string(low) + " to " + std::to_string(high)));
  }
};

// ---------------------------------------------------------------------------------------
// What the importer maps: per ONNX op type, its attributes (with their type, and the versions
// of the op's definition that have them) and the function that maps a node.

struct attribute_spec {
  std::string_view name;
  AttributeProto::AttributeType type;
  int first = 1, last = 1 << 30;  // since_version of the definitions that have it
};

class translator;
struct op_spec {
  std::string_view type;
  std::vector<attribute_spec> attributes;
  void (translator::*map)(const node_view&);
};

const std::vector<op_spec>& op_specs();

// ---------------------------------------------------------------------------------------
// Types of values after shape inference.

struct value_type {
  bool tensor = true;                             // false: a sequence, a map, an optional
  int elem_type = 0;                              // TensorProto::DataType; 0 when unknown
  std::optional<std::vector<std::int64_t>> dims;  // -1 for an unknown extent; none when the rank is unknown
};

value_type type_of_proto(const onnx::TypeProto& type) {
  value_type out;
  if (!type.has_tensor_type()) {
    out.tensor = false;
    return out;
  }
  const auto& tensor = type.tensor_type();
  out.elem_type = tensor.elem_type();
  if (tensor.has_shape()) {
    std::vector<std::int64_t> extents;
    for (const auto& d : tensor.shape().dim())
      extents.push_back(d.has_dim_value() && d.dim_value() >= 0 ? d.dim_value() : -1);
    out.dims = std::move(extents);
  }
  return out;
}

std::string type_text(const value_type& t) {
  if (!t.tensor) return "not a tensor";
  return onnx_type_name(t.elem_type) + " " + (t.dims ? dims_text(*t.dims) : std::string("of unknown rank"));
}

bool known(const std::vector<std::int64_t>& extents) {
  return std::all_of(extents.begin(), extents.end(), [](std::int64_t e) { return e >= 0; });
}

// ---------------------------------------------------------------------------------------

// The schemas that the importer's shape inference reads: libonnx's, except that Conv's,
// MaxPool's, AveragePool's, Reshape's, Unsqueeze's and Slice's inference (each version) first
// refuses what libonnx 1.12 reads or writes out of bounds, traps on or takes too long over,
// and only that (the last three: check_parsed_inputs, and check_reshape). For the windows
// (convPoolShapeInference):
// - a kernel_shape, strides, dilations or pads whose length is not X's spatial rank (checked
//   here for every version, whatever each version's own inference checks), or a Conv's W whose
//   rank is not X's, as ONNX defines W (without kernel_shape it reads one kernel extent per
//   spatial dim of W, and indexes X's spatial dims and the dilations with them: a crash for a
//   Conv in an If branch over a rank-3 value, or over a value declared of rank 4 and of rank 3);
// - for auto_pad SAME and a stride above 1, an X extent over the stride beyond 2^24 (libonnx
//   counts the extent down by the stride, one step at a time: an extent near 2^63 did not end,
//   and 2^31 over stride 2 took 0.6 s per node).
// Where X's shape is unknown, libonnx's inference returns before reading any of it. A check
// here sees the ranks that the inference knows, whatever declaration or op they came from.
class guarded_schemas final : public onnx::ISchemaRegistry {
 public:
  static const guarded_schemas& instance() {
    static const guarded_schemas schemas;
    return schemas;
  }

  const onnx::OpSchema* GetSchema(const std::string& key, const int max_version,
                                  const std::string& domain) const override {
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Instance()->GetSchema(key, max_version, domain);
    const bool window = key == "Conv" || key == "MaxPool" || key == "AveragePool";
    const bool parsing = key == "Reshape" || key == "Unsqueeze" || key == "Slice";
    if (schema == nullptr || (!domain.empty() && domain != "ai.onnx") || (!window && !parsing)) return schema;
    const std::lock_guard lock(mutex_);
    const auto [at, added] = guarded_.try_emplace(schema, *schema);
    if (added) {
      onnx::InferenceFunction infer = schema->GetTypeAndShapeInferenceFunction();
      const bool conv = key == "Conv";
      const bool reshape = key == "Reshape";
      at->second.TypeAndShapeInferenceFunction([infer, window, conv, reshape](onnx::InferenceContext& ctx) {
        if (window) {
          check_window(ctx, conv);
        } else {
          check_parsed_inputs(ctx);
          if (reshape) check_reshape(ctx);
        }
        infer(ctx);
      });
    }
    return &at->second;
  }

 private:
  // The shape of input `input` as the inference holds it, or null where it holds none.
  static const onnx::TensorShapeProto* known_shape(onnx::InferenceContext& ctx, std::size_t input) {
    const onnx::TypeProto* type = input < ctx.getNumInputs() ? ctx.getInputType(input) : nullptr;
    return type != nullptr && type->has_tensor_type() && type->tensor_type().has_shape()
               ? &type->tensor_type().shape()
               : nullptr;
  }

  static void check_window(onnx::InferenceContext& ctx, bool conv) {
    const onnx::TensorShapeProto* x = known_shape(ctx, 0);
    if (x == nullptr) return;
    if (x->dim_size() < 2)
      fail_shape_inference("X has rank ", x->dim_size(), "; a window's X has at least 2");
    const int spatial = x->dim_size() - 2;
    for (const auto& [name, per_axis] :
         {std::pair<const char*, int>{"kernel_shape", 1}, {"strides", 1}, {"dilations", 1}, {"pads", 2}})
      if (const AttributeProto* a = ctx.getAttribute(name);
          a != nullptr && a->ints_size() != per_axis * spatial)
        fail_shape_inference("attribute ", name, " has ", a->ints_size(), " values; X has ", spatial,
                             " spatial dims");
    if (conv)
      if (const onnx::TensorShapeProto* w = known_shape(ctx, 1);
          w != nullptr && w->dim_size() != x->dim_size())
        fail_shape_inference("W has rank ", w->dim_size(), " and X rank ", x->dim_size(),
                             "; ONNX's Conv takes a W of X's rank [M, C / group, kernel...]");
    const AttributeProto* auto_pad = ctx.getAttribute("auto_pad");
    if (auto_pad == nullptr || (auto_pad->s() != "SAME_UPPER" && auto_pad->s() != "SAME_LOWER")) return;
    const AttributeProto* strides = ctx.getAttribute("strides");
    for (int i = 0; i < spatial; ++i) {
      const std::int64_t stride = strides != nullptr ? strides->ints(i) : 1;
      if (stride > 1 && x->dim(2 + i).has_dim_value() && x->dim(2 + i).dim_value() / stride > same_steps)
        fail_shape_inference("X's extent ", x->dim(2 + i).dim_value(), " along axis ", 2 + i, " over stride ",
                             stride, " is beyond 2^24 with auto_pad ", auto_pad->s(),
                             " (ONNX's shape inference steps through it)");
    }
  }

  // Reshape's inference (libonnx 1.12, opset 5 on) multiplies X's extents and the shape's
  // without a check, then takes the remainder of one product by the other: INT64_MIN % -1
  // traps (X [2^30, 2^30, 8] against a shape whose positive entries multiply to 2^64 - 1). It
  // runs only where neither product passes 64 bits and X's extents are not negative.
  static void check_reshape(onnx::InferenceContext& ctx) {
    const auto fits = [](const auto& values, const char* what) {
      std::int64_t product = 1;
      for (const std::int64_t v : values) {
        if (v < 0) continue;  // -1 (inferred), or refused by the inference itself
        if (__builtin_mul_overflow(product, v, &product))
          fail_shape_inference(what, " multiply past 64 bits");
      }
    };
    if (const onnx::TensorShapeProto* x = known_shape(ctx, 0)) {
      std::vector<std::int64_t> extents;
      for (const auto& dim : x->dim()) {
        if (!dim.has_dim_value()) continue;
        if (dim.dim_value() < 0) fail_shape_inference("X has the negative extent ", dim.dim_value());
        extents.push_back(dim.dim_value());
      }
      fits(extents, "X's extents");
    }
    if (const TensorProto* shape = ctx.getNumInputs() > 1 ? ctx.getInputData(1) : nullptr;
        shape != nullptr && shape->data_type() == TensorProto::INT64) {
      std::vector<std::int64_t> entries(shape->int64_data().begin(), shape->int64_data().end());
      if (shape->has_raw_data()) {  // whole values (check_parsed_inputs)
        entries.resize(shape->raw_data().size() / sizeof(std::int64_t));
        std::memcpy(entries.data(), shape->raw_data().data(), entries.size() * sizeof(std::int64_t));
      }
      fits(entries, "the shape's entries");
    }
  }

  // libonnx's inference of Reshape, Unsqueeze and Slice reads the values of their inputs from 1
  // on (a shape, axes, starts...) with ParseData, which copies all of a raw_data into whole
  // values: past the end of its vector when the bytes are not a whole number of them.
  static void check_parsed_inputs(onnx::InferenceContext& ctx) {
    for (std::size_t i = 1; i < ctx.getNumInputs(); ++i) {
      const TensorProto* value = ctx.getInputData(i);
      if (value == nullptr || !value->has_raw_data()) continue;
      const std::size_t size = value->data_type() == TensorProto::INT32 ? 4 : 8;
      if (value->raw_data().size() % size != 0)
        fail_shape_inference("input ", i, " holds ", value->raw_data().size(), " bytes, not whole ", size,
                             "-byte values");
    }
  }

  // The steps that libonnx's inference of a SAME padding takes per axis, at most.
  static constexpr std::int64_t same_steps = std::int64_t(1) << 24;

  mutable std::mutex mutex_;
  mutable std::map<const onnx::OpSchema*, onnx::OpSchema> guarded_;
};

class translator {
 public:
  translator(onnx::ModelProto model, const std::vector<dims>* input_dims, const options& opts)
      : model_(std::move(model)), input_dims_(input_dims), options_(opts) {}

  imported_model run() {
    check_model();
    check_nodes();
    run_checker();
    infer_shapes();
    rename_subgraph_values();
    collect_types();
    declare_inputs();
    translate_graph(model_.graph(), {});
    declare_outputs();
    return std::move(result_);
  }

  // The node mappings (op_specs names them).
  void conv(const node_view& n);
  void batch_normalization(const node_view& n);
  void relu(const node_view& n) { unary(n, "relu"); }
  void clip(const node_view& n);
  void sigmoid(const node_view& n) { unary(n, "sigmoid"); }
  void add(const node_view& n) { elementwise(n, "elementwise_add"); }
  void mul(const node_view& n) { elementwise(n, "elementwise_mul"); }
  void max_pool(const node_view& n) { pool(n, true); }
  void average_pool(const node_view& n) { pool(n, false); }
  void global_average_pool(const node_view& n);
  void flatten(const node_view& n);
  void reshape(const node_view& n);
  void gemm(const node_view& n);
  void matmul(const node_view& n);
  void softmax(const node_view& n);
  void concat(const node_view& n);
  void dropout(const node_view& n);
  void identity(const node_view& n);
  void constant(const node_view& n);
  void sub(const node_view& n) { elementwise(n, "elementwise_sub"); }
  void div(const node_view& n) { elementwise(n, "elementwise_div"); }
  void cast(const node_view& n);
  void ceil(const node_view& n);
  void unsqueeze(const node_view& n);
  void slice(const node_view& n);
  void less(const node_view& n) { comparison(n, "less_than"); }
  void less_or_equal(const node_view& n) { comparison(n, "less_equal"); }
  void greater(const node_view& n) { comparison(n, "greater_than"); }
  void greater_or_equal(const node_view& n) { comparison(n, "greater_equal"); }
  void equal(const node_view& n) { comparison(n, "equal"); }
  void logical_and(const node_view& n) { logical(n, "logical_and"); }
  void logical_or(const node_view& n) { logical(n, "logical_or"); }
  void logical_xor(const node_view& n) { logical(n, "logical_xor"); }
  void logical_not(const node_view& n);
  void if_node(const node_view& n);
  void loop(const node_view& n);

 private:
  static const op_spec* spec_of(std::string_view type) {
    for (const op_spec& s : op_specs())
      if (s.type == type) return &s;
    return nullptr;
  }

  // ---- the model as a whole, before any node

  void check_model() {
    const std::int64_t ir = model_.ir_version();
    if (ir < 3 || ir > onnx::IR_VERSION)
      throw refused("the model has IR version " + std::to_string(ir) +
                    "; the importer reads IR versions 3 to " + std::to_string(int(onnx::IR_VERSION)));
    const int newest =
        onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at(onnx::ONNX_DOMAIN).second;
    bool found = false;
    for (const auto& import : model_.opset_import()) {
      if (!import.domain().empty() && import.domain() != "ai.onnx") continue;  // unused domains are fine
      if (found && import.version() != opset_)
        throw refused("the model imports the ONNX domain twice, at opsets " + std::to_string(opset_) +
                      " and " + std::to_string(import.version()));
      if (import.version() < 1 || import.version() > newest)
        throw refused("the model imports opset " + std::to_string(import.version()) +
                      " of the ONNX domain; the importer knows opsets 1 to " + std::to_string(newest));
      opset_ = int(import.version());
      found = true;
    }
    if (!found) throw refused("the model imports no opset of the ONNX domain (opset_import)");
    const auto& graph = model_.graph();
    if (graph.sparse_initializer_size() > 0)
      throw refused("sparse initializer " + quoted(graph.sparse_initializer(0).values().name()) +
                    ": sparse initializers are not supported");
    for (const TensorProto& init : graph.initializer()) {
      if (init.name().empty()) throw refused("the model has an initializer without a name");
      if (init.data_location() == TensorProto::EXTERNAL || init.external_data_size() > 0)
        throw refused("initializer " + quoted(init.name()) +
                      ": its data is external (data_location EXTERNAL); the importer reads data inside the "
                      "model only");
      if (!constants_.emplace(init.name(), &init).second)
        throw refused("the model has two initializers named " + quoted(init.name()));
    }
    for (const auto* values : {&graph.input(), &graph.output()})
      for (const auto& value : *values) {
        if (value.name().empty()) throw refused("the model has a graph input or output without a name");
        if (!value.type().has_tensor_type())
          throw refused("graph input or output " + quoted(value.name()) +
                        " is not a tensor (a sequence, map or optional); the importer maps tensors only");
      }
  }

  // Every node: of the ONNX domain, of an op type the importer maps, defined at the model's
  // opset, with attributes the importer maps, of their types; and so for the nodes of every
  // subgraph (If's branches, Loop's body), whose inputs and outputs must be tensors.
  void check_nodes() {
    const auto& graph = model_.graph();
    for (int i = 0; i < graph.node_size(); ++i)
      versions_.push_back(check_node(graph.node(i), std::size_t(i), {}));
  }

  // The since_version of a node's op type at the model's opset (0 when the opset has none).
  int version_of(const onnx::NodeProto& proto) const {
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(proto.op_type(), opset_, onnx::ONNX_DOMAIN);
    return schema == nullptr ? 0 : schema->since_version();
  }

  int check_node(const onnx::NodeProto& proto, std::size_t index, const std::string& where) {
    const node_view partial(proto, index, 0, where);
    if (!proto.domain().empty() && proto.domain() != "ai.onnx")
      partial.refuse("domain " + quoted(proto.domain()) +
                     " is not supported; the importer maps the ONNX domain only");
    const op_spec* spec = spec_of(proto.op_type());
    if (spec == nullptr) {
      std::string supported;
      for (const std::string& t : supported_op_types()) supported += (supported.empty() ? "" : ", ") + t;
      partial.refuse("op type " + quoted(proto.op_type()) + " is not supported; the importer maps " +
                     supported);
    }
    const int version = version_of(proto);
    if (version == 0)
      partial.refuse("op type " + quoted(proto.op_type()) + " is not defined at opset " +
                     std::to_string(opset_));
    const node_view node(proto, index, version, where);
    std::set<std::string, std::less<>> seen;
    for (const AttributeProto& a : proto.attribute()) {
      if (!seen.insert(a.name()).second) node.refuse_attribute(a.name(), "is given twice");
      if (!a.ref_attr_name().empty())
        node.refuse_attribute(a.name(), "refers to a function's attribute; functions are not supported");
      const attribute_spec* known_attribute = nullptr;
      for (const attribute_spec& s : spec->attributes)
        if (s.name == a.name() && s.first <= version && version <= s.last) known_attribute = &s;
      if (known_attribute == nullptr)
        node.refuse_attribute(a.name(), "is not supported (" + proto.op_type() + " version " +
                                            std::to_string(version) + " as the importer maps it)");
      if (a.type() != known_attribute->type)
        node.refuse_attribute(a.name(), "is of type " + attribute_type_name(a.type()) + "; " +
                                            proto.op_type() + " defines it as " +
                                            attribute_type_name(known_attribute->type));
      if (a.type() == AttributeProto::GRAPH) check_subgraph(node, a.name(), a.g());
    }
    if (proto.op_type() == "Conv" || proto.op_type() == "MaxPool" || proto.op_type() == "AveragePool")
      check_window_attributes(node);
    return version;
  }

  // A subgraph (attribute `attribute` of node n): tensors in and out, initializers the importer
  // reads, and its nodes checked as the model's.
  void check_subgraph(const node_view& n, const std::string& attribute, const onnx::GraphProto& graph) {
    const std::string where = "the " + attribute + " of " + n.label;
    for (const auto* values : {&graph.input(), &graph.output()})
      for (const auto& value : *values)
        if (!value.type().has_tensor_type() && value.type().value_case() != onnx::TypeProto::VALUE_NOT_SET)
          n.refuse_attribute(attribute, "has input or output " + quoted(value.name()) +
                                            ", which is not a tensor (a sequence, map or optional); the "
                                            "importer maps tensors only");
    if (graph.sparse_initializer_size() > 0)
      n.refuse_attribute(attribute, "has a sparse initializer; sparse initializers are not supported");
    for (const TensorProto& init : graph.initializer()) {
      if (init.name().empty()) n.refuse_attribute(attribute, "has an initializer without a name");
      if (init.data_location() == TensorProto::EXTERNAL || init.external_data_size() > 0)
        n.refuse_attribute(attribute,
                           "has initializer " + quoted(init.name()) +
                               ", whose data is external; the importer reads data inside the model only");
    }
    for (int i = 0; i < graph.node_size(); ++i) check_node(graph.node(i), std::size_t(i), where);
  }

  // The attributes of a 2-D window (Conv, MaxPool, AveragePool), before ONNX's shape
  // inference reads them: it divides by the strides, and trusts the rest.
  static void check_window_attributes(const node_view& n) {
    const std::string auto_pad = n.string_or("auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
      n.refuse_attribute("auto_pad",
                         "is \"" + auto_pad + "\"; ONNX defines NOTSET, SAME_UPPER, SAME_LOWER and VALID");
    pair_attribute(n, "kernel_shape", {1, 1});
    pair_attribute(n, "strides", {1, 1});
    pair_attribute(n, "dilations", {1, 1});
    if (const auto pads = n.ints("pads")) {
      if (pads->size() != 4)
        n.refuse_attribute("pads", "has " + std::to_string(pads->size()) +
                                       " values; a 2-D window takes 4 (top, left, bottom, right)");
      for (const std::int64_t p : *pads)
        if (p < 0 || p > std::numeric_limits<std::int32_t>::max())
          n.refuse_attribute(
              "pads", "has the value " + std::to_string(p) + "; the importer maps pads from 0 to 2^31 - 1");
    }
  }

  void run_checker() {
    try {
      onnx::checker::check_model(model_);
    } catch (const std::exception& e) {
      throw refused("the model is not valid ONNX (onnx::checker): " + one_line(e.what()));
    }
  }

  // The graph inputs' dims from the tensors given (checked against the declared ones by
  // check_inputs), then ONNX's shape inference, strict: every shape is known from here on
  // (where the model's inputs are).
  void infer_shapes() {
    auto* graph = model_.mutable_graph();
    if (input_dims_ != nullptr) {
      std::size_t k = 0;
      for (auto& input : *graph->mutable_input()) {
        if (constants_.contains(input.name())) continue;
        if (k >= input_dims_->size()) throw refused("fewer input shapes than the model has inputs");
        auto* shape = input.mutable_type()->mutable_tensor_type()->mutable_shape();
        shape->clear_dim();
        for (const std::int64_t extent : (*input_dims_)[k]) shape->add_dim()->set_dim_value(extent);
        ++k;
      }
      if (k != input_dims_->size()) throw refused("more input shapes than the model has inputs");
    }
    try {
      onnx::shape_inference::InferShapes(model_, &guarded_schemas::instance(),
                                         onnx::ShapeInferenceOptions(true, 1, false));
    } catch (const std::exception& e) {
      throw refused("ONNX shape inference failed: " + one_line(e.what()));
    }
  }

  // Every value of a subgraph given a name of its own. Sibling subgraphs (an If's two branches,
  // the bodies of two Loops) may use the same names, and ONNX's IR lets a subgraph's names shadow
  // an enclosing graph's (the checker of libonnx refuses that); the importer keeps one map of
  // types and values by name, and a fluidk sub-block reads its enclosing blocks' variables by
  // name. So a subgraph value whose name another value of the model has is renamed "name@2"
  // (the first free number), in the subgraph and in the subgraphs inside it that read it; the
  // model's own graph keeps its names, so its inputs and outputs are named as the model names
  // them. Run after shape inference (which reads the model as written), so that the inferred
  // types are renamed with their values.
  void rename_subgraph_values() {
    const auto& graph = model_.graph();
    auto note = [&](const std::string& name) {
      if (!name.empty()) all_names_.insert(name);
    };
    name_map outer;
    for (const auto* values : {&graph.input(), &graph.value_info(), &graph.output()})
      for (const auto& v : *values) note(v.name());
    for (const TensorProto& init : graph.initializer()) note(init.name());
    for (const auto& node : graph.node()) {
      for (const auto& name : node.input()) note(name);
      for (const auto& name : node.output()) note(name);
    }
    for (const std::string& name : all_names_) outer.emplace(name, name);
    for (auto& node : *model_.mutable_graph()->mutable_node())
      for (auto& a : *node.mutable_attribute())
        if (a.type() == AttributeProto::GRAPH) rename_graph(*a.mutable_g(), outer);
  }

  using name_map = std::map<std::string, std::string, std::less<>>;

  void rename_graph(onnx::GraphProto& graph, const name_map& outer) {
    name_map names = outer;
    auto define = [&](const std::string& name) {
      if (name.empty()) return;
      std::string fresh = name;
      for (int k = 2; all_names_.contains(fresh); ++k) fresh = name + "@" + std::to_string(k);
      all_names_.insert(fresh);
      names[name] = fresh;
    };
    for (const auto& v : graph.input()) define(v.name());
    for (const TensorProto& init : graph.initializer()) define(init.name());
    for (const auto& node : graph.node())
      for (const auto& name : node.output()) define(name);
    auto rename = [&](std::string* name) {
      if (const auto it = names.find(*name); it != names.end()) *name = it->second;
    };
    for (auto* values : {graph.mutable_input(), graph.mutable_value_info(), graph.mutable_output()})
      for (auto& v : *values) rename(v.mutable_name());
    for (TensorProto& init : *graph.mutable_initializer()) rename(init.mutable_name());
    for (auto& node : *graph.mutable_node()) {
      for (auto& name : *node.mutable_input()) rename(&name);
      for (auto& name : *node.mutable_output()) rename(&name);
      for (auto& a : *node.mutable_attribute())
        if (a.type() == AttributeProto::GRAPH) rename_graph(*a.mutable_g(), names);
    }
  }

  void collect_types() { collect_graph_types(model_.graph(), true); }

  // The inferred types of a graph's values and of its subgraphs' (whose names are the model's
  // own after rename_subgraph_values), and the subgraphs' initializers as constants.
  void collect_graph_types(const onnx::GraphProto& graph, bool model_graph) {
    for (const auto* values : {&graph.input(), &graph.value_info(), &graph.output()})
      for (const auto& v : *values) types_[v.name()] = type_of_proto(v.type());
    if (!model_graph)
      for (const TensorProto& init : graph.initializer()) constants_[init.name()] = &init;
    for (const auto& node : graph.node())
      for (const auto& a : node.attribute())
        if (a.type() == AttributeProto::GRAPH) collect_graph_types(a.g(), false);
    if (!model_graph) return;
    for (const auto& [name, proto] : constants_) {
      value_type t;
      t.elem_type = proto->data_type();
      t.dims = std::vector<std::int64_t>(proto->dims().begin(), proto->dims().end());
      types_[name] = t;
      defined_.insert(name);  // an initializer is defined before every node
    }
    for (const auto& [name, _] : types_) all_names_.insert(name);
    for (const auto& node : graph.node())
      for (const auto& name : node.output()) all_names_.insert(name);
  }

  // Maps the nodes of a graph, in order, to operators of the current block (block_).
  void translate_graph(const onnx::GraphProto& graph, const std::string& where) {
    const bool model_graph = &graph == &model_.graph();
    for (int i = 0; i < graph.node_size(); ++i) {
      const onnx::NodeProto& proto = graph.node(i);
      const node_view node(proto, std::size_t(i), model_graph ? versions_[std::size_t(i)] : version_of(proto),
                           where);
      (this->*spec_of(proto.op_type())->map)(node);
      for (int k = 0; k < proto.output_size(); ++k)
        if (!proto.output(k).empty()) defined_.insert(proto.output(k));
    }
  }

  void declare_inputs() {
    for (const graph_value& v : model_inputs(model_)) {
      const value_type& t = type(v.name, nullptr);
      declare(v.name, *data_type_of_onnx(t.elem_type), t.dims.value_or(std::vector<std::int64_t>{}), false);
      defined_.insert(v.name);
      result_.inputs.push_back(v);
    }
  }

  void declare_outputs() {
    for (const auto& output : model_.graph().output()) {
      if (!defined_.contains(output.name()))
        throw refused("graph output " + quoted(output.name()) +
                      " is made by no node and is no input or initializer");
      make_available(output.name(), nullptr, "graph output");
      const VarDesc& v = block().get_var(output.name());
      result_.outputs.push_back({v.name, v.dtype, v.shape});
    }
  }

  // ---- helpers of the mappings

  // The block the current graph's operators go to: block 0 for the model's graph, a sub-block for
  // a branch of If or the body of Loop.
  BlockDesc& block() { return result_.program.block(block_); }

  const value_type& type(const std::string& name, const node_view* node) {
    const auto it = types_.find(name);
    if (it == types_.end()) {
      const std::string what = "the type of " + quoted(name) + " is unknown after shape inference";
      if (node != nullptr) node->refuse(what);
      throw refused(what);
    }
    return it->second;
  }

  // The dims of a value whose rank is known (refused otherwise).
  const std::vector<std::int64_t>& shape(const node_view& n, const std::string& name) {
    const value_type& t = type(name, &n);
    if (!t.dims) n.refuse("the rank of " + quoted(name) + " is unknown after shape inference");
    return *t.dims;
  }
  // The dims of a value whose every extent is known (refused otherwise).
  const std::vector<std::int64_t>& known_shape(const node_view& n, const std::string& name,
                                               std::string_view why) {
    const std::vector<std::int64_t>& d = shape(n, name);
    if (!known(d))
      n.refuse("the shape of " + quoted(name) + " is " + dims_text(d) + " after shape inference; " +
               std::string(why) + " needs every extent");
    return d;
  }
  void require_rank(const node_view& n, const std::string& name, std::size_t rank, std::string_view why) {
    const auto& d = shape(n, name);
    if (d.size() != rank)
      n.refuse(quoted(name) + " has rank " + std::to_string(d.size()) + " " + dims_text(d) + "; " +
               std::string(why));
  }

  void require_float(const node_view& n, const std::string& name, std::string_view role) {
    const value_type& t = type(name, &n);
    if (!t.tensor) n.refuse(std::string(role) + " " + quoted(name) + " is not a tensor");
    if (t.elem_type != TensorProto::FLOAT)
      n.refuse(std::string(role) + " " + quoted(name) + " is " + onnx_type_name(t.elem_type) +
               "; the importer maps FLOAT tensors (the operators compute in float32)");
    if (t.dims && t.dims->size() > max_rank)
      n.refuse(std::string(role) + " " + quoted(name) + " has rank " + std::to_string(t.dims->size()) +
               "; fluidk's tensors have at most " + std::to_string(max_rank) + " dimensions");
  }

  // A value an operator reads as a tensor: a graph input, an earlier node's output, or an
  // initializer or folded Constant, declared persistable and loaded on first use.
  void make_available(const std::string& name, const node_view* n, std::string_view role) {
    if (block().find_var_recursive(name) != nullptr) return;
    if (!defined_.contains(name)) {
      const std::string what = std::string(role) + " " + quoted(name) + " is made by no earlier node";
      if (n != nullptr) n->refuse(what);
      throw refused(what);
    }
    const auto it = constants_.find(name);
    if (it == constants_.end()) {
      const std::string what = std::string(role) + " " + quoted(name) + " is not declared";
      if (n != nullptr) n->refuse(what);
      throw refused(what);
    }
    Tensor tensor = tensor_from_proto(*it->second, "initializer " + quoted(name));
    // In the global block, whichever block reads it: the weights are loaded into the scope the
    // program runs in, and a sub-block's own variables start empty at every step.
    result_.program.block(0).var(name) =
        VarDesc{name, var_kind::lod_tensor, tensor.dtype(),
                std::vector<std::int64_t>(tensor.dims().begin(), tensor.dims().end()), true};
    result_.weights.emplace_back(name, std::move(tensor));
  }

  // A FLOAT tensor that an operator reads: its variable's name.
  std::string data_input(const node_view& n, int index, std::string_view role) {
    const std::string name = n.input(index);
    if (name.empty()) n.refuse(std::string(role) + " (input " + std::to_string(index) + ") is missing");
    require_float(n, name, role);
    make_available(name, &n, role);
    return name;
  }

  // A node's FLOAT output, declared with its inferred type.
  std::string data_output(const node_view& n, int index) {
    const std::string name = n.output(index);
    if (name.empty()) n.refuse("output " + std::to_string(index) + " has no name");
    require_float(n, name, "output");
    declare(name, data_type::float32, type(name, &n).dims.value_or(std::vector<std::int64_t>{}), false);
    return name;
  }

  // A variable for an intermediate result of a node mapped to several operators: a name no
  // value of the model has, of the given type.
  std::string intermediate(const std::string& base, std::string_view what,
                           std::vector<std::int64_t> extents) {
    std::string name = base + "@" + std::string(what);
    for (int k = 2; all_names_.contains(name); ++k) name = base + "@" + std::string(what) + std::to_string(k);
    all_names_.insert(name);
    declare(name, data_type::float32, std::move(extents), false);
    return name;
  }

  // The same, of another data type.
  std::string intermediate_of(const std::string& base, std::string_view what, data_type dtype,
                              std::vector<std::int64_t> extents) {
    const std::string name = intermediate(base, what, std::move(extents));
    block().var(name).dtype = dtype;
    return name;
  }

  // A tensor of one of the element types `allowed` (ONNX's), or a refusal naming them.
  void require_type(const node_view& n, const std::string& name, std::string_view role,
                    std::initializer_list<int> allowed) {
    const value_type& t = type(name, &n);
    if (!t.tensor)
      n.refuse(std::string(role) + " " + quoted(name) +
               " is not a tensor (a sequence, map or optional); the importer maps tensors only");
    if (std::find(allowed.begin(), allowed.end(), t.elem_type) == allowed.end()) {
      std::string names;
      for (const int e : allowed) names += (names.empty() ? "" : ", ") + onnx_type_name(e);
      n.refuse(std::string(role) + " " + quoted(name) + " is " + onnx_type_name(t.elem_type) +
               "; the importer maps " + n.proto.op_type() + " on " + names);
    }
    if (t.dims && t.dims->size() > max_rank)
      n.refuse(std::string(role) + " " + quoted(name) + " has rank " + std::to_string(t.dims->size()) +
               "; fluidk's tensors have at most " + std::to_string(max_rank) + " dimensions");
  }
  // An input tensor of one of the element types `allowed`: its variable's name.
  std::string value_input(const node_view& n, int index, std::string_view role,
                          std::initializer_list<int> allowed) {
    const std::string name = n.input(index);
    if (name.empty()) n.refuse(std::string(role) + " (input " + std::to_string(index) + ") is missing");
    require_type(n, name, role, allowed);
    make_available(name, &n, role);
    return name;
  }
  // An output of one of the element types `allowed`, declared in the current block with its
  // inferred type.
  std::string value_output(const node_view& n, int index, std::initializer_list<int> allowed) {
    const std::string name = n.output(index);
    if (name.empty()) n.refuse("output " + std::to_string(index) + " has no name");
    require_type(n, name, "output", allowed);
    const value_type& t = type(name, &n);
    declare(name, *data_type_of_onnx(t.elem_type), t.dims.value_or(std::vector<std::int64_t>{}), false);
    return name;
  }
  // A value that must hold one element (a condition, a trip count): refused when its shape says
  // otherwise (an unknown extent is checked when the program runs).
  void require_one_element(const node_view& n, const std::string& name, std::string_view role) {
    const value_type& t = type(name, &n);
    if (!t.dims) return;
    for (const std::int64_t e : *t.dims)
      if (e >= 0 && e != 1)
        n.refuse(std::string(role) + " " + quoted(name) + " is " + dims_text(*t.dims) +
                 "; it must hold one element");
  }

  // The names that the operators of block `root` and of the blocks inside it read (reads) or
  // write (!reads) and that an enclosing block of `root` declares: a control-flow operator's X
  // and Out (Input and Out).
  std::vector<std::string> outer_names(std::size_t root, bool reads) {
    std::set<std::string, std::less<>> found;
    const ProgramDesc& program = result_.program;
    auto inside = [&](std::size_t b) {  // whether block b is root or inside it
      for (std::optional<std::size_t> at = b; at; at = program.block(*at).parent_idx())
        if (*at == root) return true;
      return false;
    };
    auto declaring = [&](std::size_t from, const std::string& name) -> std::optional<std::size_t> {
      for (std::optional<std::size_t> at = from; at; at = program.block(*at).parent_idx())
        if (program.block(*at).has_var(name)) return at;
      return std::nullopt;
    };
    std::vector<std::size_t> pending{root};
    while (!pending.empty()) {
      const std::size_t b = pending.back();
      pending.pop_back();
      for (const OpDesc& op : program.block(b).ops()) {
        for (const auto& [slot, names] : reads ? op.inputs() : op.outputs())
          for (const std::string& name : names) {
            const auto at = declaring(b, name);
            if (at && !inside(*at)) found.insert(name);
          }
        for (const std::size_t sub : program.block(b).child_blocks(op.type(), op.attrs()))
          pending.push_back(sub);
      }
    }
    return {found.begin(), found.end()};
  }

  // The graph of attribute `name` (If's branches, Loop's body).
  static const onnx::GraphProto& graph_attribute(const node_view& n, std::string_view name) {
    const AttributeProto* a = n.attribute(name);
    if (a == nullptr) n.refuse_attribute(name, "is missing; ONNX requires it");
    return a->g();
  }

  // Maps a subgraph's nodes (none without one) into a new child block of the current one and
  // returns its index;
  // `before` and `after` append the block's first and last operators (the current block is the
  // child while they run).
  template <class Before, class After>
  std::size_t sub_block(const onnx::GraphProto* graph, const std::string& where, Before before, After after) {
    const std::size_t parent = block_;
    block_ = result_.program.append_block(parent).idx();
    const std::size_t made = block_;
    before();
    if (graph != nullptr) translate_graph(*graph, where);
    after();
    block_ = parent;
    return made;
  }

  void declare(const std::string& name, data_type dtype, std::vector<std::int64_t> extents,
               bool persistable) {
    block().var(name) = VarDesc{name, var_kind::lod_tensor, dtype, std::move(extents), persistable};
  }

  // Appends an operator made from node n, with the attributes the command line asks of every
  // operator; an operator the build has not registered, or one append_op refuses, is refused
  // naming the node.
  void append(const node_view& n, std::string type, slot_map inputs, slot_map outputs, attribute_map attrs) {
    if (!is_control_flow(type) && operator_registry::instance().find(type) == nullptr)
      n.refuse("maps to fluidk operator " + quoted(type) + ", which this build has not registered");
    if (!options_.library_attribute.empty()) attrs.set(options_.library_attribute, true);
    if (const auto it = options_.op_device.find(n.proto.op_type()); it != options_.op_device.end())
      attrs.set("op_device", it->second);
    try {
      block().append_op(OpDesc(std::move(type), std::move(inputs), std::move(outputs), std::move(attrs)));
    } catch (const error& e) {
      n.refuse(detail::unprefixed(e));
    }
    if (block_ == 0) result_.origins.push_back(n.label);
  }

  // The value of a constant input (initializer or folded Constant), or null when the input is
  // computed or given at run time.
  const TensorProto* constant_input(const node_view& n, int index) const {
    const auto it = constants_.find(n.input(index));
    return it == constants_.end() ? nullptr : it->second;
  }

  static std::int32_t to_int32(const node_view& n, std::string_view what, std::int64_t v) {
    if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max())
      n.refuse(std::string(what) + " " + std::to_string(v) +
               " does not fit a 32-bit int, as fluidk's attribute");
    return std::int32_t(v);
  }
  static std::vector<std::int32_t> to_int32s(const node_view& n, std::string_view what,
                                             const std::vector<std::int64_t>& v) {
    std::vector<std::int32_t> out;
    for (const std::int64_t x : v) out.push_back(to_int32(n, what, x));
    return out;
  }

  // An axis attribute in [-rank, rank - 1 + extra] (extra 1 for Flatten's), as a
  // non-negative one; `negative` false for the versions that take no negative axis.
  static std::int64_t resolve_axis(const node_view& n, std::string_view attribute, std::int64_t axis,
                                   std::size_t rank, bool negative, std::int64_t extra = 0) {
    const std::int64_t r = std::int64_t(rank);
    const std::int64_t low = negative ? -r : 0, high = r - 1 + extra;
    if (axis < low || axis > high)
      n.refuse_attribute(attribute, "is " + std::to_string(axis) + "; for rank " + std::to_string(r) + " " +
                                        n.proto.op_type() + " version " + std::to_string(n.version) +
                                        " takes " + std::to_string(low) + " to " + std::to_string(high));
    return axis < 0 ? axis + r : axis;
  }

  void check_output_shape(const node_view& n, const std::string& name,
                          const std::vector<std::int64_t>& computed) {
    const value_type& t = type(name, &n);
    if (!t.dims) return;
    bool same = t.dims->size() == computed.size();
    for (std::size_t i = 0; same && i < computed.size(); ++i)
      same = (*t.dims)[i] < 0 || computed[i] < 0 || (*t.dims)[i] == computed[i];
    if (!same)
      n.refuse("the mapped operator would make " + quoted(name) + " " + dims_text(computed) +
               ", but ONNX shape inference says " + dims_text(*t.dims));
  }

  // The only output, or outputs past the first that are absent.
  void require_one_output(const node_view& n, std::string_view others) {
    if (n.output_count() < 1 || n.output(0).empty()) n.refuse("has no output");
    if (n.output_count() > 1)
      n.refuse("output 1 " + quoted(n.output(1)) + " is asked for; the importer maps only the first output" +
               (others.empty() ? std::string() : " (" + std::string(others) + ")"));
  }

  void unary(const node_view& n, std::string type) {
    n.require_inputs(1, 1);
    require_one_output(n, "");
    const std::string x = data_input(n, 0, "input");
    const std::string out = data_output(n, 0);
    append(n, std::move(type), {{"X", {x}}}, {{"Out", {out}}}, {});
  }

  std::int32_t binary_axis(const node_view& n, const std::string& a, const std::string& b);
  void elementwise(const node_view& n, std::string type);
  void comparison(const node_view& n, std::string type);
  void logical(const node_view& n, std::string type);
  void pool(const node_view& n, bool max);

  // The paddings of a 2-D window operator (Conv, MaxPool, AveragePool): ONNX's pads
  // [top, left, bottom, right], or auto_pad resolved to explicit ones from the input's
  // spatial size, as [begin, end] per axis.
  std::array<std::array<std::int64_t, 2>, 2> paddings(const node_view& n, const std::vector<std::int64_t>& x,
                                                      const std::array<std::int64_t, 2>& kernel,
                                                      const std::array<std::int64_t, 2>& strides,
                                                      const std::array<std::int64_t, 2>& dilations) {
    // The bounds under which the window arithmetic of paddings(), conv and pool fits 64 bits:
    // kernels, strides, dilations and pads 32-bit (the attributes are checked before shape
    // inference; a kernel read from W's dims is checked here), spatial sizes below 2^62.
    for (std::size_t i = 0; i < 2; ++i) {
      if (kernel[i] > std::numeric_limits<std::int32_t>::max())
        n.refuse("the window " + dims_text({kernel[0], kernel[1]}) + " is beyond 2^31 - 1 along axis " +
                 std::to_string(2 + i));
      if (x[2 + i] >= std::int64_t(1) << 62)
        n.refuse("the input " + dims_text(x) + " is beyond 2^62 along axis " + std::to_string(2 + i));
    }
    const std::string auto_pad = n.string_or("auto_pad", "NOTSET");
    std::array<std::array<std::int64_t, 2>, 2> out{};
    if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
      n.refuse_attribute("auto_pad",
                         "is \"" + auto_pad + "\"; ONNX defines NOTSET, SAME_UPPER, SAME_LOWER and VALID");
    if (const auto pads = n.ints("pads")) {
      if (auto_pad != "NOTSET")
        n.refuse_attribute("pads", "is given with auto_pad \"" + auto_pad + "\"; ONNX allows one of the two");
      if (pads->size() != 4)
        n.refuse_attribute("pads", "has " + std::to_string(pads->size()) +
                                       " values; a 2-D window takes 4 (top, left, bottom, right)");
      for (const std::int64_t p : *pads)
        if (p < 0) n.refuse_attribute("pads", "has a negative value; the importer maps non-negative pads");
      out = {{{(*pads)[0], (*pads)[2]}, {(*pads)[1], (*pads)[3]}}};
    }
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      // With dilations the ONNX Runtime of reference refuses Conv, and pads MaxPool by the
      // undilated kernel (a smaller output than ONNX's shape inference gives).
      if (dilations[0] != 1 || dilations[1] != 1)
        n.refuse_attribute("auto_pad", "\"" + auto_pad + "\" with dilations " +
                                           dims_text({dilations[0], dilations[1]}) +
                                           " is refused: ONNX Runtime does not pad it as ONNX defines");
      for (int i = 0; i < 2; ++i) {
        const std::int64_t size = x[std::size_t(2 + i)];
        if (size < 0)
          n.refuse_attribute("auto_pad", "\"" + auto_pad + "\" needs the input's spatial size, which is " +
                                             dims_text(x) + " after shape inference");
        // ceil(size / stride) outputs; the padding they need, its odd unit at the end
        // (SAME_UPPER) or the beginning (SAME_LOWER).
        const std::int64_t outputs = (size + strides[std::size_t(i)] - 1) / strides[std::size_t(i)];
        const std::int64_t extent = (kernel[std::size_t(i)] - 1) * dilations[std::size_t(i)] + 1;
        const std::int64_t total =
            std::max<std::int64_t>((outputs - 1) * strides[std::size_t(i)] + extent - size, 0);
        const std::int64_t small = total / 2, large = total - small;
        out[std::size_t(i)] = auto_pad == "SAME_UPPER" ? std::array<std::int64_t, 2>{small, large}
                                                       : std::array<std::int64_t, 2>{large, small};
      }
    }
    return out;
  }

  // strides, dilations or kernel_shape: 2 positive values (or the fallback when absent).
  static std::array<std::int64_t, 2> pair_attribute(const node_view& n, std::string_view name,
                                                    std::array<std::int64_t, 2> fallback) {
    const auto values = n.ints(name);
    if (!values) return fallback;
    if (values->size() != 2)
      n.refuse_attribute(name, "has " + std::to_string(values->size()) +
                                   " values; the importer maps 2-D windows (2 values: height, width)");
    for (const std::int64_t v : *values)
      if (v < 1 || v > std::numeric_limits<std::int32_t>::max())
        n.refuse_attribute(name, "has the value " + std::to_string(v) + "; each must be positive");
    return {(*values)[0], (*values)[1]};
  }

  onnx::ModelProto model_;
  const std::vector<dims>* input_dims_;
  options options_;
  int opset_ = 0;
  std::vector<int> versions_;  // of each node's op definition (the model's graph)
  std::size_t block_ = 0;      // the block that the nodes being mapped go to
  std::map<std::string, const TensorProto*, std::less<>> constants_;
  std::deque<TensorProto> folded_;  // the values of Constant nodes
  std::map<std::string, value_type, std::less<>> types_;
  std::set<std::string, std::less<>> all_names_;  // every value of the model, and each intermediate made
  std::set<std::string, std::less<>> defined_;    // values defined so far, in node order
  imported_model result_;
};

// ---------------------------------------------------------------------------------------
// The mappings.

// Conv -> conv2d (+ elementwise_add on axis 1 for the bias B); auto_pad resolved to explicit
// paddings from the inferred input shape.
void translator::conv(const node_view& n) {
  n.require_inputs(2, 3);
  require_one_output(n, "");
  const std::string x = data_input(n, 0, "X");
  const std::string w = data_input(n, 1, "W");
  require_rank(n, x, 4, "Conv maps to conv2d, whose input is 4-D [N, C, H, W]");
  require_rank(n, w, 4, "Conv maps to conv2d, whose filter is 4-D [M, C / group, kH, kW]");
  const auto& xs = shape(n, x);
  const auto& ws = shape(n, w);
  std::array<std::int64_t, 2> kernel{ws[2], ws[3]};
  if (n.has("kernel_shape")) {
    const auto given = pair_attribute(n, "kernel_shape", {1, 1});
    for (int i = 0; i < 2; ++i)
      if (kernel[std::size_t(i)] >= 0 && kernel[std::size_t(i)] != given[std::size_t(i)])
        n.refuse_attribute("kernel_shape", dims_text({given[0], given[1]}) +
                                               " differs from W's spatial dims " + dims_text({ws[2], ws[3]}));
    kernel = given;
  }
  if (kernel[0] < 1 || kernel[1] < 1)
    n.refuse("W's spatial dims " + dims_text({ws[2], ws[3]}) + " are unknown or empty after shape inference");
  const auto strides = pair_attribute(n, "strides", {1, 1});
  const auto dilations = pair_attribute(n, "dilations", {1, 1});
  const std::int64_t group = n.int_or("group", 1);
  if (group < 1) n.refuse_attribute("group", "is " + std::to_string(group) + "; it must be positive");
  // W [M, C / group, kH, kW] against X's C channels (ONNX Runtime fails such a model when it
  // runs; conv2d would too).
  if (ws[0] >= 0 && ws[0] % group != 0)
    n.refuse("W " + dims_text(ws) + " has " + std::to_string(ws[0]) + " output channels, which group (" +
             std::to_string(group) + ") does not divide");
  // (Compared as C / group: W's dims are the model's, and their product with group may pass 64 bits.)
  if (xs[1] >= 0 && ws[1] >= 0 && (xs[1] % group != 0 || xs[1] / group != ws[1]))
    n.refuse("X " + dims_text(xs) + " has " + std::to_string(xs[1]) + " channels; W " + dims_text(ws) +
             " with group " + std::to_string(group) + " takes " + std::to_string(ws[1]) +
             " per group (W's dim 1 is C / group)");
  const auto pads = paddings(n, xs, kernel, strides, dilations);

  std::vector<std::int64_t> computed{xs[0], ws[0], -1, -1};
  for (int i = 0; i < 2; ++i) {
    const std::int64_t size = xs[std::size_t(2 + i)];
    const std::int64_t extent = (kernel[std::size_t(i)] - 1) * dilations[std::size_t(i)] + 1;
    const std::int64_t padded = size + pads[std::size_t(i)][0] + pads[std::size_t(i)][1];
    if (size >= 0 && padded < extent)
      n.refuse("the kernel (extent " + std::to_string(extent) + ") does not fit the padded input " +
               dims_text(xs));
    if (size >= 0) computed[std::size_t(2 + i)] = (padded - extent) / strides[std::size_t(i)] + 1;
  }
  const std::string y = data_output(n, 0);
  check_output_shape(n, y, computed);

  attribute_map attrs{
      {"strides", to_int32s(n, "a stride", {strides[0], strides[1]})},
      {"dilations", to_int32s(n, "a dilation", {dilations[0], dilations[1]})},
      {"paddings", to_int32s(n, "a padding", {pads[0][0], pads[0][1], pads[1][0], pads[1][1]})},
      {"groups", to_int32(n, "group", group)},
      {"padding_algorithm", std::string("EXPLICIT")},
      {"data_format", std::string("NCHW")},
  };
  if (n.input_count() < 3 || n.input(2).empty()) {
    append(n, "conv2d", {{"Input", {x}}, {"Filter", {w}}}, {{"Output", {y}}}, std::move(attrs));
    return;
  }
  const std::string b = data_input(n, 2, "B");
  require_rank(n, b, 1, "Conv's bias B is 1-D [M]");
  const auto& bs = shape(n, b);
  if (bs[0] >= 0 && ws[0] >= 0 && bs[0] != ws[0])
    n.refuse("B " + dims_text(bs) + " does not have one value per output channel (" + std::to_string(ws[0]) +
             ")");
  const std::string convolved =
      intermediate(y, "conv2d", type(y, &n).dims.value_or(std::vector<std::int64_t>{}));
  append(n, "conv2d", {{"Input", {x}}, {"Filter", {w}}}, {{"Output", {convolved}}}, std::move(attrs));
  append(n, "elementwise_add", {{"X", {convolved}}, {"Y", {b}}}, {{"Out", {y}}}, {{"axis", std::int32_t(1)}});
}

// BatchNormalization -> batch_norm, inference only (is_test true).
void translator::batch_normalization(const node_view& n) {
  n.require_inputs(5, 5);
  require_one_output(n, "the running mean and variance, and the saved statistics, are training outputs");
  if (n.version <= 6 && !n.flag("is_test", false))
    n.refuse_attribute("is_test",
                       "is 0 (absent: 0), which asks for training; the importer maps inference (is_test 1)");
  if (n.version <= 7 && !n.flag("spatial", true))
    n.refuse_attribute("spatial", "is 0 (statistics per activation); batch_norm keeps them per channel");
  if (n.version >= 14 && n.flag("training_mode", false))
    n.refuse_attribute("training_mode", "is 1; the importer maps inference");
  const float epsilon = n.float_or("epsilon", 1e-5f), momentum = n.float_or("momentum", 0.9f);
  if (!(epsilon >= 0) || std::isinf(epsilon))
    n.refuse_attribute("epsilon", "is " + number_text(epsilon) + "; it must be finite and non-negative");
  const std::string x = data_input(n, 0, "X");
  const auto& xs = shape(n, x);
  if (xs.size() < 2)
    n.refuse("X " + dims_text(xs) + " has rank below 2; batch_norm's channel is dimension 1");
  std::string in[4];
  const char* roles[4] = {"scale", "B", "input_mean", "input_var"};
  for (int i = 0; i < 4; ++i) {
    in[i] = data_input(n, 1 + i, roles[i]);
    require_rank(n, in[i], 1, "batch_norm's statistics are 1-D [C]");
    const std::int64_t c = shape(n, in[i])[0];
    if (c >= 0 && xs[1] >= 0 && c != xs[1])
      n.refuse(std::string(roles[i]) + " " + quoted(in[i]) + " has " + std::to_string(c) + " values for " +
               std::to_string(xs[1]) + " channels");
  }
  const std::string y = data_output(n, 0);
  append(n, "batch_norm",
         {{"X", {x}}, {"Scale", {in[0]}}, {"Bias", {in[1]}}, {"Mean", {in[2]}}, {"Variance", {in[3]}}},
         {{"Y", {y}}},
         {{"epsilon", epsilon},
          {"momentum", momentum},
          {"is_test", true},
          {"data_layout", std::string("NCHW")}});
}

// Clip -> clip: min and max from the attributes (before version 11) or from constant inputs;
// absent ones are the float range's ends (as ONNX Runtime takes them).
void translator::clip(const node_view& n) {
  float bounds[2] = {std::numeric_limits<float>::lowest(), std::numeric_limits<float>::max()};
  const char* names[2] = {"min", "max"};
  if (n.version < 11) {
    n.require_inputs(1, 1);
    bounds[0] = n.float_or("min", bounds[0]);
    bounds[1] = n.float_or("max", bounds[1]);
  } else {
    n.require_inputs(1, 3);
    for (int i = 0; i < 2; ++i) {
      if (n.input(1 + i).empty()) continue;
      const TensorProto* value = constant_input(n, 1 + i);
      if (value == nullptr)
        n.refuse(std::string(names[i]) + " (input " + std::to_string(1 + i) + ") " + quoted(n.input(1 + i)) +
                 " is computed or given at run time; the importer maps constant bounds (initializers, "
                 "Constant nodes)");
      const Tensor t = tensor_from_proto(*value, std::string(names[i]) + " " + quoted(n.input(1 + i)));
      if (t.dtype() != data_type::float32 || t.numel() != 1 || t.dims().rank() > 1)
        n.refuse(std::string(names[i]) + " " + quoted(n.input(1 + i)) +
                 " must be one FLOAT value (a scalar)");
      bounds[i] = t.data<float>()[0];
    }
  }
  require_one_output(n, "");
  for (int i = 0; i < 2; ++i)
    if (std::isnan(bounds[i])) n.refuse(std::string(names[i]) + " is NaN");
  if (bounds[0] > bounds[1])
    n.refuse("min " + number_text(bounds[0]) + " is above max " + number_text(bounds[1]) +
             "; ONNX Runtime and clip order the two bounds differently, so the importer refuses it");
  const std::string x = data_input(n, 0, "input");
  const std::string out = data_output(n, 0);
  append(n, "clip", {{"X", {x}}}, {{"Out", {out}}}, {{"min", bounds[0]}, {"max", bounds[1]}});
}

// The axis attribute of a binary operator of two inputs of one kind: numpy broadcasting (-1)
// from version 7; before it, broadcast and axis as ONNX defined them then: without broadcast,
// A and B of one shape; with it, B's dims a contiguous part of A's.
std::int32_t translator::binary_axis(const node_view& n, const std::string& a, const std::string& b) {
  if (n.version >= 7) return -1;
  const auto& as = known_shape(n, a, "broadcasting as ONNX defined it before version 7");
  const auto& bs = known_shape(n, b, "broadcasting as ONNX defined it before version 7");
  if (!n.flag("broadcast", false)) {
    if (n.has("axis")) n.refuse_attribute("axis", "is given without broadcast 1");
    if (as != bs) n.refuse("A " + dims_text(as) + " and B " + dims_text(bs) + " differ, and broadcast is 0");
    return -1;
  }
  // B's dims are A's from `start` on (B a scalar: none of them).
  const std::int64_t start = n.has("axis") ? resolve_axis(n, "axis", n.int_or("axis", 0), as.size(), true)
                                           : std::int64_t(as.size()) - std::int64_t(bs.size());
  const bool scalar = bs.empty() || (bs.size() == 1 && bs[0] == 1);
  const bool fits = start >= 0 && start + std::int64_t(bs.size()) <= std::int64_t(as.size()) &&
                    std::equal(bs.begin(), bs.end(), as.begin() + start);
  if (!scalar && !fits)
    n.refuse("B " + dims_text(bs) + " is not A's dims " + dims_text(as) + " from axis " +
             std::to_string(start));
  return scalar ? -1 : to_int32(n, "axis", start);
}

// Add, Mul, Sub, Div -> elementwise_add, elementwise_mul, elementwise_sub, elementwise_div, on
// FLOAT, INT32 and INT64 (integers divide towards zero), broadcast as binary_axis says.
void translator::elementwise(const node_view& n, std::string type) {
  n.require_inputs(2, 2);
  require_one_output(n, "");
  const std::string a = value_input(n, 0, "A", {TensorProto::FLOAT, TensorProto::INT32, TensorProto::INT64});
  const std::string b = value_input(n, 1, "B", {TensorProto::FLOAT, TensorProto::INT32, TensorProto::INT64});
  const std::int32_t axis = binary_axis(n, a, b);
  const std::string c = value_output(n, 0, {TensorProto::FLOAT, TensorProto::INT32, TensorProto::INT64});
  append(n, std::move(type), {{"X", {a}}, {"Y", {b}}}, {{"Out", {c}}}, {{"axis", axis}});
}

// MaxPool, AveragePool -> pool2d with explicit paddings. What pool2d and ONNX Runtime do
// differently is refused: a window wholly in the padding, and with count_include_pad a window
// past the padded input (ceil_mode).
void translator::pool(const node_view& n, bool max) {
  n.require_inputs(1, 1);
  if (n.output_count() < 1 || n.output(0).empty()) n.refuse("has no output");
  if (n.output_count() > 1)
    n.refuse("output 1 " + quoted(n.output(1)) + " (Indices) is asked for; pool2d has none");
  const std::string x = data_input(n, 0, "X");
  require_rank(n, x, 4, "the importer maps 2-D pooling, over a 4-D input [N, C, H, W]");
  const auto& xs = shape(n, x);
  if (!n.has("kernel_shape")) n.refuse_attribute("kernel_shape", "is missing; ONNX requires it");
  const auto kernel = pair_attribute(n, "kernel_shape", {1, 1});
  const auto strides = pair_attribute(n, "strides", {1, 1});
  const auto dilations = pair_attribute(n, "dilations", {1, 1});
  const bool ceil_mode = n.flag("ceil_mode", false);
  if (max && n.int_or("storage_order", 0) != 0)
    n.refuse_attribute("storage_order", "is " + std::to_string(n.int_or("storage_order", 0)) +
                                            " (column-major Indices); the importer maps 0");
  const bool count_include_pad = !max && n.flag("count_include_pad", false);
  const auto pads = paddings(n, xs, kernel, strides, dilations);

  std::vector<std::int64_t> computed{xs[0], xs[1], -1, -1};
  for (int i = 0; i < 2; ++i) {
    const auto k = std::size_t(i);
    const std::int64_t size = xs[2 + k];
    const std::int64_t extent = (kernel[k] - 1) * dilations[k] + 1;
    if (pads[k][0] >= extent || pads[k][1] >= extent)
      n.refuse("a padding (" + std::to_string(std::max(pads[k][0], pads[k][1])) +
               ") is not below the window's extent (" + std::to_string(extent) +
               "): a window would lie wholly in the padding");
    if (size < 0) continue;
    const std::int64_t padded = size + pads[k][0] + pads[k][1];
    if (padded < extent)
      n.refuse("the window (extent " + std::to_string(extent) + ") does not fit the padded input " +
               dims_text(xs));
    const std::int64_t out = (padded - extent + (ceil_mode ? strides[k] - 1 : 0)) / strides[k] + 1;
    const std::int64_t last = (out - 1) * strides[k];  // where the last window starts, in the padded input
    if (last >= size + pads[k][0])
      n.refuse_attribute("ceil_mode", "makes a last window that starts in the end padding (axis " +
                                          std::to_string(2 + i) +
                                          "); ONNX Runtime drops such a window, pool2d keeps it");
    if (const std::int64_t empty = ops::detail::first_window_without_input(out, size, kernel[k], strides[k],
                                                                           pads[k][0], dilations[k]);
        empty >= 0)
      n.refuse("window " + std::to_string(empty) + " of axis " + std::to_string(2 + i) +
               " reads no input cell, its dilated taps stepping over the input " + dims_text(xs) +
               "; pool2d refuses such a window");
    if (count_include_pad && last + extent > padded)
      n.refuse_attribute("count_include_pad",
                         "is 1 with ceil_mode, and the last window runs past the padded input "
                         "(axis " +
                             std::to_string(2 + i) +
                             "): its divisor differs between ONNX Runtime and pool2d");
    computed[2 + k] = out;
  }
  const std::string y = data_output(n, 0);
  check_output_shape(n, y, computed);
  attribute_map attrs{
      {"pooling_type", std::string(max ? "max" : "avg")},
      {"ksize", to_int32s(n, "a kernel extent", {kernel[0], kernel[1]})},
      {"strides", to_int32s(n, "a stride", {strides[0], strides[1]})},
      {"paddings", to_int32s(n, "a padding", {pads[0][0], pads[0][1], pads[1][0], pads[1][1]})},
      {"global_pooling", false},
      {"ceil_mode", ceil_mode},
      {"exclusive", !count_include_pad},
      {"padding_algorithm", std::string("EXPLICIT")},
      {"adaptive", false},
  };
  if (max) attrs.set("dilations", to_int32s(n, "a dilation", {dilations[0], dilations[1]}));
  append(n, "pool2d", {{"X", {x}}}, {{"Out", {y}}}, std::move(attrs));
}

// GlobalAveragePool -> pool2d, global_pooling avg.
void translator::global_average_pool(const node_view& n) {
  n.require_inputs(1, 1);
  require_one_output(n, "");
  const std::string x = data_input(n, 0, "X");
  require_rank(n, x, 4, "the importer maps 2-D pooling, over a 4-D input [N, C, H, W]");
  const auto& xs = shape(n, x);
  if (xs[2] == 0 || xs[3] == 0)
    n.refuse("X " + dims_text(xs) + " has an empty spatial dimension: no average");
  const std::string y = data_output(n, 0);
  check_output_shape(n, y, {xs[0], xs[1], 1, 1});
  append(n, "pool2d", {{"X", {x}}}, {{"Out", {y}}},
         {{"pooling_type", std::string("avg")},
          {"global_pooling", true},
          {"ksize", to_int32s(n, "a spatial extent",
                              {std::max<std::int64_t>(xs[2], 1), std::max<std::int64_t>(xs[3], 1)})},
          {"strides", std::vector<std::int32_t>{1, 1}},
          {"paddings", std::vector<std::int32_t>{0, 0, 0, 0}},
          {"exclusive", true},
          {"ceil_mode", false},
          {"adaptive", false},
          {"padding_algorithm", std::string("EXPLICIT")}});
}

// Flatten -> flatten2 (a negative axis counted from the end, from version 11).
void translator::flatten(const node_view& n) {
  n.require_inputs(1, 1);
  require_one_output(n, "");
  const std::string x = data_input(n, 0, "input");
  const std::size_t rank = shape(n, x).size();
  const std::int64_t axis = resolve_axis(n, "axis", n.int_or("axis", 1), rank, n.version >= 11, 1);
  const std::string out = data_output(n, 0);
  append(n, "flatten2", {{"X", {x}}}, {{"Out", {out}}}, {{"axis", to_int32(n, "axis", axis)}});
}

// Reshape -> reshape2: a constant shape as the attribute, else the Shape input.
void translator::reshape(const node_view& n) {
  const bool allow_zero = n.version >= 14 && n.flag("allowzero", false);
  std::optional<std::vector<std::int64_t>> wanted;
  std::string shape_input;
  if (n.version < 5) {
    n.require_inputs(1, 1);
    wanted = n.ints("shape");
    if (!wanted) n.refuse_attribute("shape", "is missing");
  } else {
    n.require_inputs(2, 2);
    if (const TensorProto* value = constant_input(n, 1)) {
      const Tensor t = tensor_from_proto(*value, "shape " + quoted(n.input(1)));
      if (t.dtype() != data_type::int64 || t.dims().rank() != 1)
        n.refuse("shape " + quoted(n.input(1)) + " must be a 1-D INT64 tensor");
      wanted = std::vector<std::int64_t>(t.data<std::int64_t>(), t.data<std::int64_t>() + t.numel());
    } else {
      shape_input = n.input(1);
      const value_type& t = type(shape_input, &n);
      if (!t.tensor || t.elem_type != TensorProto::INT64 || !t.dims || t.dims->size() != 1)
        n.refuse("shape " + quoted(shape_input) + " is " + type_text(t) +
                 "; Reshape takes a 1-D INT64 tensor");
      if (allow_zero)
        n.refuse_attribute("allowzero",
                           "is 1 and the shape is given at run time: a 0 in it would mean an empty "
                           "dimension, where reshape2 copies the input's");
      make_available(shape_input, &n, "shape");
    }
  }
  require_one_output(n, "");
  const std::string x = data_input(n, 0, "data");
  const std::string out = data_output(n, 0);
  if (!wanted) {
    append(n, "reshape2", {{"X", {x}}, {"Shape", {shape_input}}}, {{"Out", {out}}}, {});
    return;
  }
  int inferred = 0;
  for (const std::int64_t d : *wanted) {
    if (d < -1)
      n.refuse("the shape " + dims_text(*wanted) + " has " + std::to_string(d) +
               "; ONNX takes -1, 0 or more");
    if (d == 0 && allow_zero)
      n.refuse_attribute("allowzero",
                         "is 1 and the shape has a 0 (an empty dimension), where reshape2 copies the "
                         "input's dimension");
    inferred += d == -1;
  }
  if (inferred > 1) n.refuse("the shape has more than one -1");
  append(n, "reshape2", {{"X", {x}}}, {{"Out", {out}}}, {{"shape", to_int32s(n, "a shape extent", *wanted)}});
}

// Gemm -> gemm.
void translator::gemm(const node_view& n) {
  n.require_inputs(n.version >= 11 ? 2 : 3, 3);
  require_one_output(n, "");
  const std::string a = data_input(n, 0, "A");
  const std::string b = data_input(n, 1, "B");
  require_rank(n, a, 2, "Gemm's A is 2-D");
  require_rank(n, b, 2, "Gemm's B is 2-D");
  const bool trans_a = n.flag("transA", false), trans_b = n.flag("transB", false);
  slot_map inputs{{"A", {a}}, {"B", {b}}};
  const std::string y = data_output(n, 0);
  if (n.input_count() >= 3 && !n.input(2).empty()) {
    const std::string c = data_input(n, 2, "C");
    if (n.version < 7 && !n.flag("broadcast", false)) {
      const auto& cs = shape(n, c);
      const auto& ys = known_shape(n, y, "Gemm without broadcast");
      if (cs != ys)
        n.refuse("C " + dims_text(cs) + " is not [M, N] " + dims_text(ys) + ", and broadcast is 0");
    }
    inputs.emplace("C", std::vector<std::string>{c});
  }
  append(n, "gemm", std::move(inputs), {{"Out", {y}}},
         {{"alpha", n.float_or("alpha", 1.0f)},
          {"beta", n.float_or("beta", 1.0f)},
          {"trans_a", trans_a},
          {"trans_b", trans_b}});
}

// MatMul -> matmul (numpy semantics).
void translator::matmul(const node_view& n) {
  n.require_inputs(2, 2);
  require_one_output(n, "");
  const std::string a = data_input(n, 0, "A");
  const std::string b = data_input(n, 1, "B");
  if (shape(n, a).empty() || shape(n, b).empty()) n.refuse("MatMul's operands are at least 1-D");
  const std::string y = data_output(n, 0);
  append(n, "matmul", {{"X", {a}}, {"Y", {b}}}, {{"Out", {y}}},
         {{"transpose_X", false}, {"transpose_Y", false}, {"alpha", 1.0f}});
}

// Softmax -> softmax along one axis (version 13 on); before 13, the input coerced to 2-D at
// the axis: the last axis is the same softmax, another is flatten2, softmax, reshape2 back.
void translator::softmax(const node_view& n) {
  n.require_inputs(1, 1);
  require_one_output(n, "");
  const std::string x = data_input(n, 0, "input");
  const auto& xs = shape(n, x);
  const std::int64_t axis =
      resolve_axis(n, "axis", n.int_or("axis", n.version >= 13 ? -1 : 1), xs.size(), n.version >= 11);
  const std::string y = data_output(n, 0);
  if (n.version >= 13 || axis == std::int64_t(xs.size()) - 1) {
    append(n, "softmax", {{"X", {x}}}, {{"Out", {y}}}, {{"axis", to_int32(n, "axis", axis)}});
    return;
  }
  const auto& dims = known_shape(n, x, "Softmax before version 13 on an axis other than the last");
  if (std::find(dims.begin(), dims.end(), 0) != dims.end())
    n.refuse("the input " + dims_text(dims) + " is empty; reshape2 would read its 0 as 'copy the dimension'");
  std::int64_t rows = 1, columns = 1;
  for (std::size_t i = 0; i < dims.size(); ++i) (std::int64_t(i) < axis ? rows : columns) *= dims[i];
  const std::string flat = intermediate(y, "2d", {rows, columns});
  const std::string normalised = intermediate(y, "softmax", {rows, columns});
  append(n, "flatten2", {{"X", {x}}}, {{"Out", {flat}}}, {{"axis", to_int32(n, "axis", axis)}});
  append(n, "softmax", {{"X", {flat}}}, {{"Out", {normalised}}}, {{"axis", std::int32_t(1)}});
  append(n, "reshape2", {{"X", {normalised}}}, {{"Out", {y}}}, {{"shape", to_int32s(n, "an extent", dims)}});
}

// Concat -> concat.
void translator::concat(const node_view& n) {
  if (n.input_count() < 1) n.refuse("has no inputs");
  require_one_output(n, "");
  std::vector<std::string> xs;
  for (int i = 0; i < n.input_count(); ++i) xs.push_back(data_input(n, i, "input"));
  if (n.version >= 4 && !n.has("axis")) n.refuse_attribute("axis", "is missing; ONNX requires it");
  const std::size_t rank = shape(n, xs[0]).size();
  const std::int64_t axis = resolve_axis(n, "axis", n.int_or("axis", 1), rank, n.version >= 11);
  const std::string y = data_output(n, 0);
  append(n, "concat", {{"X", xs}}, {{"Out", {y}}}, {{"axis", to_int32(n, "axis", axis)}});
}

// Dropout -> dropout, inference: is_test true, upscale_in_train (the output is the input).
void translator::dropout(const node_view& n) {
  float ratio = 0.5f;
  if (n.version < 12) {
    n.require_inputs(1, 1);
    ratio = n.float_or("ratio", 0.5f);
    if (n.version < 7 && !n.flag("is_test", false) && ratio != 0)
      n.refuse_attribute("is_test", "is 0 (absent: 0), which asks for training; the importer maps inference");
  } else {
    n.require_inputs(1, 3);
    // seed: only training draws. ratio: only training reads it; a constant one is kept.
    if (const TensorProto* value = constant_input(n, 1)) {
      const Tensor t = tensor_from_proto(*value, "ratio " + quoted(n.input(1)));
      if (t.numel() != 1 || t.dims().rank() > 1)
        n.refuse("ratio " + quoted(n.input(1)) + " is not one value");
      if (t.dtype() == data_type::float32)
        ratio = t.data<float>()[0];
      else if (t.dtype() == data_type::float64)
        ratio = float(t.data<double>()[0]);
    }
    if (!n.input(2).empty()) {
      const TensorProto* mode = constant_input(n, 2);
      if (mode == nullptr)
        n.refuse("training_mode " + quoted(n.input(2)) +
                 " is given at run time; the importer maps inference (training_mode a constant false)");
      const Tensor t = tensor_from_proto(*mode, "training_mode " + quoted(n.input(2)));
      if (t.dtype() != data_type::boolean || t.numel() != 1)
        n.refuse("training_mode " + quoted(n.input(2)) + " is not one BOOL value");
      if (t.data<bool>()[0]) n.refuse("training_mode is true; the importer maps inference");
    }
  }
  if (!(ratio >= 0 && ratio < 1)) n.refuse("ratio " + number_text(ratio) + " is outside [0, 1)");
  if (n.output_count() < 1 || n.output(0).empty()) n.refuse("has no output");
  const std::string x = data_input(n, 0, "data");
  const std::string y = data_output(n, 0);
  slot_map outputs{{"Out", {y}}};
  if (n.output_count() > 1) {
    const std::string mask = n.output(1);
    const value_type& t = type(mask, &n);
    if (t.elem_type != TensorProto::BOOL)
      n.refuse("mask " + quoted(mask) + " is " + type_text(t) + "; dropout's Mask is BOOL");
    declare(mask, data_type::boolean, t.dims.value_or(std::vector<std::int64_t>{}), false);
    outputs.emplace("Mask", std::vector<std::string>{mask});
  }
  append(n, "dropout", {{"X", {x}}}, std::move(outputs),
         {{"dropout_prob", ratio},
          {"is_test", true},
          {"dropout_implementation", std::string("upscale_in_train")}});
}

// Constant: folded into a persistable value (declared when an operator or the graph output
// reads it).
void translator::constant(const node_view& n) {
  n.require_inputs(0, 0);
  require_one_output(n, "");
  if (n.proto.attribute_size() != 1) n.refuse("needs exactly one value attribute");
  const AttributeProto& a = n.proto.attribute(0);
  TensorProto value;
  if (a.name() == "value") {
    value = a.t();
  } else if (a.name() == "value_float" || a.name() == "value_floats") {
    value.set_data_type(TensorProto::FLOAT);
    if (a.name() == "value_float")
      value.add_float_data(a.f());
    else {
      value.add_dims(a.floats_size());
      for (const float f : a.floats()) value.add_float_data(f);
    }
  } else {  // value_int, value_ints
    value.set_data_type(TensorProto::INT64);
    if (a.name() == "value_int")
      value.add_int64_data(a.i());
    else {
      value.add_dims(a.ints_size());
      for (const std::int64_t i : a.ints()) value.add_int64_data(i);
    }
  }
  // Checked now, whoever reads it: a value the importer cannot read is refused here.
  const Tensor checked = tensor_from_proto(value, n.label + " value");
  static_cast<void>(checked);
  value.set_name(n.output(0));
  folded_.push_back(std::move(value));
  constants_[n.output(0)] = &folded_.back();
}

// The element types of the values that assign, cast and the control-flow mappings carry.
constexpr std::initializer_list<int> any_tensor{TensorProto::FLOAT, TensorProto::DOUBLE, TensorProto::INT32,
                                                TensorProto::INT64, TensorProto::BOOL};

// Identity -> assign (a view), of FLOAT, DOUBLE, INT32, INT64 or BOOL.
void translator::identity(const node_view& n) {
  n.require_inputs(1, 1);
  require_one_output(n, "");
  const std::string x = value_input(n, 0, "input", any_tensor);
  const std::string out = value_output(n, 0, any_tensor);
  append(n, "assign", {{"X", {x}}}, {{"Out", {out}}}, {});
}

// Less, LessOrEqual, Greater, GreaterOrEqual, Equal -> less_than, less_equal, greater_than,
// greater_equal, equal, on FLOAT, INT32 and INT64, broadcast as binary_axis says; Out is BOOL.
void translator::comparison(const node_view& n, std::string type) {
  n.require_inputs(2, 2);
  require_one_output(n, "");
  const std::string a = value_input(n, 0, "A", {TensorProto::FLOAT, TensorProto::INT32, TensorProto::INT64});
  const std::string b = value_input(n, 1, "B", {TensorProto::FLOAT, TensorProto::INT32, TensorProto::INT64});
  const std::int32_t axis = binary_axis(n, a, b);
  const std::string c = value_output(n, 0, {TensorProto::BOOL});
  append(n, std::move(type), {{"X", {a}}, {"Y", {b}}}, {{"Out", {c}}}, {{"axis", axis}});
}

// And, Or, Xor -> logical_and, logical_or, logical_xor, on BOOL, broadcast as binary_axis says.
void translator::logical(const node_view& n, std::string type) {
  n.require_inputs(2, 2);
  require_one_output(n, "");
  const std::string a = value_input(n, 0, "A", {TensorProto::BOOL});
  const std::string b = value_input(n, 1, "B", {TensorProto::BOOL});
  const std::int32_t axis = binary_axis(n, a, b);
  const std::string c = value_output(n, 0, {TensorProto::BOOL});
  append(n, std::move(type), {{"X", {a}}, {"Y", {b}}}, {{"Out", {c}}}, {{"axis", axis}});
}

// Not -> logical_not.
void translator::logical_not(const node_view& n) {
  n.require_inputs(1, 1);
  require_one_output(n, "");
  const std::string x = value_input(n, 0, "X", {TensorProto::BOOL});
  const std::string y = value_output(n, 0, {TensorProto::BOOL});
  append(n, "logical_not", {{"X", {x}}}, {{"Out", {y}}}, {});
}

// Cast -> cast, attribute to (an ONNX element type) as out_dtype (fluidk's name of it), between
// FLOAT, DOUBLE, INT32, INT64 and BOOL. A float out of the integer type's range is an error when
// the program runs (ONNX leaves it undefined).
void translator::cast(const node_view& n) {
  n.require_inputs(1, 1);
  require_one_output(n, "");
  if (!n.has("to")) n.refuse_attribute("to", "is missing; ONNX requires it");
  const std::int64_t to = n.int_or("to", 0);
  if (std::find(any_tensor.begin(), any_tensor.end(), int(to)) == any_tensor.end())
    n.refuse_attribute("to", "is " + onnx_type_name(int(to)) +
                                 "; the importer maps Cast to FLOAT, DOUBLE, INT32, "
                                 "INT64 and BOOL");
  const std::string x = value_input(n, 0, "input", any_tensor);
  const std::string y = value_output(n, 0, any_tensor);
  append(n, "cast", {{"X", {x}}}, {{"Out", {y}}},
         {{"out_dtype", std::string(name_of(*data_type_of_onnx(int(to))))}});
}

// Ceil -> ceil.
void translator::ceil(const node_view& n) {
  n.require_inputs(1, 1);
  require_one_output(n, "");
  const std::string x = value_input(n, 0, "X", {TensorProto::FLOAT, TensorProto::DOUBLE});
  const std::string y = value_output(n, 0, {TensorProto::FLOAT, TensorProto::DOUBLE});
  append(n, "ceil", {{"X", {x}}}, {{"Out", {y}}}, {});
}

// Unsqueeze -> unsqueeze2: axes from the attribute (before version 13) or a constant input.
void translator::unsqueeze(const node_view& n) {
  std::vector<std::int64_t> axes;
  if (n.version < 13) {
    n.require_inputs(1, 1);
    const auto given = n.ints("axes");
    if (!given) n.refuse_attribute("axes", "is missing; ONNX requires it");
    axes = *given;
  } else {
    n.require_inputs(2, 2);
    const TensorProto* value = constant_input(n, 1);
    if (value == nullptr)
      n.refuse("axes " + quoted(n.input(1)) +
               " is computed or given at run time; the importer maps constant axes (initializers, Constant "
               "nodes)");
    const Tensor t = tensor_from_proto(*value, "axes " + quoted(n.input(1)));
    if (t.dtype() != data_type::int64 || t.dims().rank() > 1)
      n.refuse("axes " + quoted(n.input(1)) + " must be a 1-D INT64 tensor");
    axes.assign(t.data<std::int64_t>(), t.data<std::int64_t>() + t.numel());
  }
  require_one_output(n, "");
  const std::string x = value_input(n, 0, "data", any_tensor);
  const std::size_t rank = shape(n, x).size() + axes.size();
  // Negative axes from version 11; each axis of the output named once.
  std::vector<char> named(rank, 0);
  for (const std::int64_t axis : axes) {
    const std::int64_t at = resolve_axis(n, "axes", axis, rank, n.version >= 11);
    if (named[std::size_t(at)]) n.refuse("axes name axis " + std::to_string(at) + " twice");
    named[std::size_t(at)] = 1;
  }
  const std::string y = value_output(n, 0, any_tensor);
  append(n, "unsqueeze2", {{"X", {x}}}, {{"Out", {y}}}, {{"axes", to_int32s(n, "an axis", axes)}});
}

// Slice -> slice: starts and ends from the attributes (before version 10), or from inputs:
// constant ones become slice's attributes, computed ones its StartsTensor and EndsTensor. axes
// must be constant (absent: the first dims), steps constant 1s.
void translator::slice(const node_view& n) {
  const std::string x = value_input(n, 0, "data", any_tensor);
  const std::size_t rank = shape(n, x).size();
  slot_map inputs{{"Input", {x}}};
  attribute_map attrs;
  std::optional<std::vector<std::int64_t>> axes;
  std::size_t count = 0;  // how many axes are sliced
  auto constant_ints = [&](int index, std::string_view role) -> std::optional<std::vector<std::int64_t>> {
    if (n.input(index).empty()) return std::nullopt;
    const TensorProto* value = constant_input(n, index);
    if (value == nullptr) return std::nullopt;
    const Tensor t = tensor_from_proto(*value, std::string(role) + " " + quoted(n.input(index)));
    if ((t.dtype() != data_type::int64 && t.dtype() != data_type::int32) || t.dims().rank() != 1)
      n.refuse(std::string(role) + " " + quoted(n.input(index)) + " must be a 1-D INT64 or INT32 tensor");
    std::vector<std::int64_t> out;
    for (std::int64_t i = 0; i < t.numel(); ++i)
      out.push_back(t.dtype() == data_type::int64 ? t.data<std::int64_t>()[i] : t.data<std::int32_t>()[i]);
    return out;
  };
  if (n.version < 10) {
    n.require_inputs(1, 1);
    const auto starts = n.ints("starts"), ends = n.ints("ends");
    if (!starts || !ends) n.refuse_attribute(starts ? "ends" : "starts", "is missing; ONNX requires it");
    count = starts->size();
    axes = n.ints("axes");
    attrs.set("starts", *starts);
    attrs.set("ends", *ends);
  } else {
    n.require_inputs(3, 5);
    const char* roles[2] = {"starts", "ends"};
    const char* slots[2] = {"StartsTensor", "EndsTensor"};
    for (int i = 0; i < 2; ++i) {
      if (const auto values = constant_ints(1 + i, roles[i])) {
        attrs.set(roles[i], *values);
        count = values->size();
        continue;
      }
      const std::string bound = value_input(n, 1 + i, roles[i], {TensorProto::INT64, TensorProto::INT32});
      const auto& d = shape(n, bound);
      if (d.size() != 1 || d[0] < 0)
        n.refuse(std::string(roles[i]) + " " + quoted(bound) + " is " + dims_text(d) +
                 "; a computed bound is a 1-D tensor of a known length");
      count = std::size_t(d[0]);
      inputs.emplace(slots[i], std::vector<std::string>{bound});
    }
    if (!n.input(3).empty()) {
      axes = constant_ints(3, "axes");
      if (!axes)
        n.refuse("axes " + quoted(n.input(3)) +
                 " is computed or given at run time; the importer maps constant axes");
    }
    if (!n.input(4).empty()) {
      const auto steps = constant_ints(4, "steps");
      if (!steps)
        n.refuse("steps " + quoted(n.input(4)) +
                 " is computed or given at run time; the importer maps steps of 1");
      for (const std::int64_t step : *steps)
        if (step != 1)
          n.refuse("steps " + quoted(n.input(4)) + " has " + std::to_string(step) +
                   "; slice takes steps of 1");
    }
  }
  std::vector<std::int64_t> resolved;
  if (axes) {
    if (axes->size() != count)
      n.refuse("axes has " + std::to_string(axes->size()) + " values for " + std::to_string(count) +
               " starts");
    for (const std::int64_t axis : *axes)
      resolved.push_back(resolve_axis(n, "axes", axis, rank, n.version >= 10));
  } else {
    if (count > rank) n.refuse(std::to_string(count) + " starts for data of rank " + std::to_string(rank));
    for (std::size_t i = 0; i < count; ++i) resolved.push_back(std::int64_t(i));
  }
  attrs.set("axes", to_int32s(n, "an axis", resolved));
  require_one_output(n, "");
  const std::string y = value_output(n, 0, any_tensor);
  append(n, "slice", std::move(inputs), {{"Out", {y}}}, std::move(attrs));
}

// If -> two conditional_blocks, each running its branch as a sub-block of the current block:
// the then branch when cond holds, the else branch when logical_not(cond) does. Each branch
// ends by assigning its outputs to the If's outputs, which are declared here, in the enclosing
// block, before the branches' operators: so a branch writes the enclosing block's variables.
// A branch reads the values of enclosing graphs directly (ONNX's scoping).
void translator::if_node(const node_view& n) {
  n.require_inputs(1, 1);
  const std::string cond = value_input(n, 0, "cond", {TensorProto::BOOL});
  require_one_element(n, cond, "cond");
  if (n.output_count() < 1) n.refuse("has no output");
  const onnx::GraphProto* branches[2] = {&graph_attribute(n, "then_branch"),
                                         &graph_attribute(n, "else_branch")};
  const char* names[2] = {"then_branch", "else_branch"};
  const int count = n.proto.output_size();
  for (int b = 0; b < 2; ++b) {
    if (branches[b]->input_size() != 0)
      n.refuse_attribute(names[b],
                         "has " + std::to_string(branches[b]->input_size()) + " inputs; a branch takes none");
    if (branches[b]->output_size() != count)
      n.refuse_attribute(names[b], "has " + std::to_string(branches[b]->output_size()) +
                                       " outputs for the If's " + std::to_string(count));
  }
  std::vector<std::string> outputs;
  for (int k = 0; k < count; ++k) outputs.push_back(value_output(n, k, any_tensor));
  const std::string otherwise = intermediate_of(outputs.front(), "else", data_type::boolean,
                                                type(cond, &n).dims.value_or(std::vector<std::int64_t>{}));
  append(n, "logical_not", {{"X", {cond}}}, {{"Out", {otherwise}}}, {});
  for (int b = 0; b < 2; ++b) {
    const onnx::GraphProto& branch = *branches[b];
    const std::size_t sub = sub_block(
        &branch, "the " + std::string(names[b]) + " of " + n.label, [] {},
        [&] {
          for (int k = 0; k < count; ++k) {
            const std::string out = branch.output(k).name();
            require_type(n, out, std::string(names[b]) + " output", any_tensor);
            make_available(out, &n, std::string(names[b]) + " output");
            append(n, "assign", {{"X", {out}}}, {{"Out", {outputs[std::size_t(k)]}}}, {});
          }
        });
    slot_map inputs{{"Cond", {b == 0 ? cond : otherwise}}};
    if (auto read = outer_names(sub, true); !read.empty()) inputs.emplace("Input", std::move(read));
    append(n, "conditional_block", std::move(inputs), {{"Out", outer_names(sub, false)}},
           {{"sub_block", block_ref{sub}}, {"is_scalar_condition", true}});
  }
}

// Loop -> while. In the enclosing block: the iteration number (INT64, 0), the condition (cond,
// and iteration < M when the trip count M is given; true when neither is), the loop-carried
// values (assigned from their initial values; the Loop's outputs themselves where it names
// them) and an array per scan output. The body, a sub-block: its graph inputs assigned from
// those variables; its nodes; then the carried values assigned from the body's outputs, each
// scan output written into its array at the iteration number, the iteration number
// incremented, and the condition recomputed (the body's cond output, and iteration < M). After
// the loop, each scan output is its array stacked along a new first axis
// (tensor_array_to_tensor), or empty when the loop ran no step. The body's cond output counts
// whether or not the Loop has a cond input, as ONNX Runtime runs it: a Loop with neither M nor
// cond runs until it is false (the executor's set_max_steps bounds a loop that never ends).
void translator::loop(const node_view& n) {
  const int given = n.proto.input_size();
  if (given < 2)
    n.refuse("has " + std::to_string(given) + " inputs; Loop takes M, cond and the loop-carried values");
  const onnx::GraphProto& body = graph_attribute(n, "body");
  const int carried = given - 2;
  if (body.input_size() != carried + 2)
    n.refuse_attribute("body", "takes " + std::to_string(body.input_size()) + " inputs; with " +
                                   std::to_string(carried) + " loop-carried values it takes " +
                                   std::to_string(carried + 2) + " (iteration number, condition, values)");
  if (body.output_size() < carried + 1)
    n.refuse_attribute("body", "has " + std::to_string(body.output_size()) + " outputs; with " +
                                   std::to_string(carried) + " loop-carried values it has at least " +
                                   std::to_string(carried + 1) + " (condition, values, scan outputs)");
  const int scans = body.output_size() - 1 - carried;
  if (n.proto.output_size() > carried + scans)
    n.refuse("has " + std::to_string(n.proto.output_size()) + " outputs; its body gives " +
             std::to_string(carried + scans));
  const std::string trips = n.input(0), cond = n.input(1);
  if (!trips.empty()) {
    value_input(n, 0, "M", {TensorProto::INT64});
    require_one_element(n, trips, "M");
  }
  if (!cond.empty()) {
    value_input(n, 1, "cond", {TensorProto::BOOL});
    require_one_element(n, cond, "cond");
  }
  std::vector<std::string> initial;
  for (int k = 0; k < carried; ++k) initial.push_back(value_input(n, 2 + k, "v_initial", any_tensor));
  std::string base = "loop";
  for (int k = 0; k < n.proto.output_size(); ++k)
    if (!n.output(k).empty()) {
      base = n.output(k);
      break;
    }

  const std::string iteration = intermediate_of(base, "iteration", data_type::int64, {});
  append(n, "fill_constant", {}, {{"Out", {iteration}}},
         {{"shape", std::vector<std::int64_t>{}}, {"dtype", std::string("int64")}, {"value", 0.0f}});
  const std::string condition = intermediate_of(base, "condition", data_type::boolean, {});
  if (!trips.empty() && !cond.empty()) {
    const std::string in_range = intermediate_of(base, "in_range", data_type::boolean, {});
    append(n, "less_than", {{"X", {iteration}}, {"Y", {trips}}}, {{"Out", {in_range}}}, {});
    append(n, "logical_and", {{"X", {cond}}, {"Y", {in_range}}}, {{"Out", {condition}}}, {});
  } else if (!trips.empty()) {
    append(n, "less_than", {{"X", {iteration}}, {"Y", {trips}}}, {{"Out", {condition}}}, {});
  } else if (!cond.empty()) {
    append(n, "assign", {{"X", {cond}}}, {{"Out", {condition}}}, {});
  } else {  // neither: the body's cond output alone ends the loop
    append(n, "fill_constant", {}, {{"Out", {condition}}},
           {{"shape", std::vector<std::int64_t>{}}, {"dtype", std::string("bool")}, {"value", true}});
  }
  std::vector<std::string> state;
  for (int k = 0; k < carried; ++k) {
    const data_type dtype = block().find_var_recursive(initial[std::size_t(k)])->dtype;
    std::string name;
    if (k < n.proto.output_size() && !n.output(k).empty()) {
      name = value_output(n, k, any_tensor);
      if (block().get_var(name).dtype != dtype)
        n.refuse("output " + quoted(name) + " is " + std::string(name_of(block().get_var(name).dtype)) +
                 ", its initial value " + quoted(initial[std::size_t(k)]) + " " +
                 std::string(name_of(dtype)));
    } else {
      name = intermediate_of(base, "carried", dtype, {});
    }
    append(n, "assign", {{"X", {initial[std::size_t(k)]}}}, {{"Out", {name}}}, {});
    state.push_back(name);
  }
  std::vector<std::string> arrays;
  for (int j = 0; j < scans; ++j) {
    const std::string& out = body.output(1 + carried + j).name();
    require_type(n, out, "the body's scan output", any_tensor);
    const std::string array = intermediate_of(base, "scan", *data_type_of_onnx(type(out, &n).elem_type), {});
    block().var(array).kind = var_kind::lod_tensor_array;
    arrays.push_back(array);
  }

  const std::string where = "the body of " + n.label;
  const std::size_t sub = sub_block(
      &body, where,
      [&] {
        // The body's inputs, its own variables, from the loop's state.
        const std::string sources[2] = {iteration, condition};
        for (int i = 0; i < body.input_size(); ++i) {
          const std::string& name = body.input(i).name();
          const value_type& t = type(name, &n);
          const std::string& source = i < 2 ? sources[i] : state[std::size_t(i - 2)];
          const data_type dtype = block().find_var_recursive(source)->dtype;
          if (t.elem_type != 0 && data_type_of_onnx(t.elem_type) != dtype)
            n.refuse_attribute("body", "input " + quoted(name) + " is " + onnx_type_name(t.elem_type) +
                                           ", but the loop gives it " + std::string(name_of(dtype)));
          declare(name, dtype, t.dims.value_or(std::vector<std::int64_t>{}), false);
          defined_.insert(name);
          append(n, "assign", {{"X", {source}}}, {{"Out", {name}}}, {});
        }
      },
      [&] {
        for (int i = 0; i < body.output_size(); ++i) {
          const std::string& name = body.output(i).name();
          require_type(n, name, "the body's output",
                       i == 0 ? std::initializer_list<int>{TensorProto::BOOL} : any_tensor);
          make_available(name, &n, "the body's output");
        }
        for (int k = 0; k < carried; ++k)
          append(n, "assign", {{"X", {body.output(1 + k).name()}}}, {{"Out", {state[std::size_t(k)]}}}, {});
        for (int j = 0; j < scans; ++j)
          append(n, "write_to_array", {{"X", {body.output(1 + carried + j).name()}}, {"I", {iteration}}},
                 {{"Out", {arrays[std::size_t(j)]}}}, {});
        append(n, "increment", {{"X", {iteration}}}, {{"Out", {iteration}}}, {{"step", 1.0f}});
        const std::string& cond_out = body.output(0).name();
        if (!trips.empty()) {
          const std::string in_range = intermediate_of(base, "in_range", data_type::boolean, {});
          append(n, "less_than", {{"X", {iteration}}, {"Y", {trips}}}, {{"Out", {in_range}}}, {});
          append(n, "logical_and", {{"X", {cond_out}}, {"Y", {in_range}}}, {{"Out", {condition}}}, {});
        } else {
          append(n, "assign", {{"X", {cond_out}}}, {{"Out", {condition}}}, {});
        }
      });
  slot_map inputs{{"Condition", {condition}}};
  if (auto read = outer_names(sub, true); !read.empty()) inputs.emplace("X", std::move(read));
  append(n, "while", std::move(inputs), {{"Out", outer_names(sub, false)}}, {{"sub_block", block_ref{sub}}});
  // The scan outputs. A loop that ran no step leaves its arrays empty, and ONNX's scan outputs
  // are then empty, [0, element dims...]: where shape inference knows the element's dims, that
  // empty tensor is made first (fill_constant) and the stacked array replaces it when the loop
  // ran a step (a conditional_block on 0 < iteration); else the array is stacked as it is.
  std::string ran;  // 0 < iteration, made for the first scan output that needs it
  for (int j = 0; j < scans; ++j) {
    if (carried + j >= n.proto.output_size() || n.output(carried + j).empty()) continue;
    const std::string out = value_output(n, carried + j, any_tensor);
    const attribute_map stack{{"axis", std::int32_t(0)}, {"use_stack", true}};
    const value_type& element = type(body.output(1 + carried + j).name(), &n);
    if (!element.dims || !known(*element.dims) || element.dims->size() + 1 > max_rank) {
      append(n, "tensor_array_to_tensor", {{"X", {arrays[std::size_t(j)]}}}, {{"Out", {out}}}, stack);
      continue;
    }
    if (ran.empty()) {
      const std::string zero = intermediate_of(base, "zero", data_type::int64, {});
      append(n, "fill_constant", {}, {{"Out", {zero}}},
             {{"shape", std::vector<std::int64_t>{}}, {"dtype", std::string("int64")}, {"value", 0.0f}});
      ran = intermediate_of(base, "ran", data_type::boolean, {});
      append(n, "less_than", {{"X", {zero}}, {"Y", {iteration}}}, {{"Out", {ran}}}, {});
    }
    std::vector<std::int64_t> empty{0};
    empty.insert(empty.end(), element.dims->begin(), element.dims->end());
    append(n, "fill_constant", {}, {{"Out", {out}}},
           {{"shape", empty}, {"dtype", std::string(name_of(block().get_var(out).dtype))}, {"value", 0.0f}});
    const std::size_t stacked = sub_block(
        nullptr, where, [] {},
        [&] {
          append(n, "tensor_array_to_tensor", {{"X", {arrays[std::size_t(j)]}}}, {{"Out", {out}}}, stack);
        });
    append(n, "conditional_block", {{"Cond", {ran}}, {"Input", {arrays[std::size_t(j)]}}}, {{"Out", {out}}},
           {{"sub_block", block_ref{stacked}}, {"is_scalar_condition", true}});
  }
}

const std::vector<op_spec>& op_specs() {
  using A = AttributeProto;
  static const std::vector<op_spec> specs{
      {"Conv",
       {{"auto_pad", A::STRING},
        {"dilations", A::INTS},
        {"group", A::INT},
        {"kernel_shape", A::INTS},
        {"pads", A::INTS},
        {"strides", A::INTS}},
       &translator::conv},
      {"BatchNormalization",
       {{"epsilon", A::FLOAT},
        {"momentum", A::FLOAT},
        {"is_test", A::INT, 1, 6},
        {"spatial", A::INT, 1, 7},
        {"training_mode", A::INT, 14}},
       &translator::batch_normalization},
      {"Relu", {}, &translator::relu},
      {"Clip", {{"min", A::FLOAT, 1, 10}, {"max", A::FLOAT, 1, 10}}, &translator::clip},
      {"Sigmoid", {}, &translator::sigmoid},
      {"Add", {{"broadcast", A::INT, 1, 6}, {"axis", A::INT, 1, 6}}, &translator::add},
      {"Mul", {{"broadcast", A::INT, 1, 6}, {"axis", A::INT, 1, 6}}, &translator::mul},
      {"MaxPool",
       {{"auto_pad", A::STRING},
        {"kernel_shape", A::INTS},
        {"pads", A::INTS},
        {"strides", A::INTS},
        {"storage_order", A::INT, 8},
        {"ceil_mode", A::INT, 10},
        {"dilations", A::INTS, 10}},
       &translator::max_pool},
      {"AveragePool",
       {{"auto_pad", A::STRING},
        {"kernel_shape", A::INTS},
        {"pads", A::INTS},
        {"strides", A::INTS},
        {"count_include_pad", A::INT, 7},
        {"ceil_mode", A::INT, 10}},
       &translator::average_pool},
      {"GlobalAveragePool", {}, &translator::global_average_pool},
      {"Flatten", {{"axis", A::INT}}, &translator::flatten},
      {"Reshape", {{"shape", A::INTS, 1, 4}, {"allowzero", A::INT, 14}}, &translator::reshape},
      {"Gemm",
       {{"alpha", A::FLOAT},
        {"beta", A::FLOAT},
        {"transA", A::INT},
        {"transB", A::INT},
        {"broadcast", A::INT, 1, 6}},
       &translator::gemm},
      {"MatMul", {}, &translator::matmul},
      {"Softmax", {{"axis", A::INT}}, &translator::softmax},
      {"Concat", {{"axis", A::INT}}, &translator::concat},
      {"Dropout",
       {{"is_test", A::INT, 1, 6}, {"ratio", A::FLOAT, 1, 11}, {"seed", A::INT, 12}},
       &translator::dropout},
      {"Identity", {}, &translator::identity},
      {"Sub", {{"broadcast", A::INT, 1, 6}, {"axis", A::INT, 1, 6}}, &translator::sub},
      {"Div", {{"broadcast", A::INT, 1, 6}, {"axis", A::INT, 1, 6}}, &translator::div},
      {"Cast", {{"to", A::INT, 6}}, &translator::cast},
      {"Ceil", {}, &translator::ceil},
      {"Unsqueeze", {{"axes", A::INTS, 1, 12}}, &translator::unsqueeze},
      {"Slice",
       {{"axes", A::INTS, 1, 9}, {"starts", A::INTS, 1, 9}, {"ends", A::INTS, 1, 9}},
       &translator::slice},
      {"Less", {{"broadcast", A::INT, 1, 6}, {"axis", A::INT, 1, 6}}, &translator::less},
      {"LessOrEqual", {}, &translator::less_or_equal},
      {"Greater", {{"broadcast", A::INT, 1, 6}, {"axis", A::INT, 1, 6}}, &translator::greater},
      {"GreaterOrEqual", {}, &translator::greater_or_equal},
      {"Equal", {{"broadcast", A::INT, 1, 6}, {"axis", A::INT, 1, 6}}, &translator::equal},
      {"And", {{"broadcast", A::INT, 1, 6}, {"axis", A::INT, 1, 6}}, &translator::logical_and},
      {"Or", {{"broadcast", A::INT, 1, 6}, {"axis", A::INT, 1, 6}}, &translator::logical_or},
      {"Xor", {{"broadcast", A::INT, 1, 6}, {"axis", A::INT, 1, 6}}, &translator::logical_xor},
      {"Not", {}, &translator::logical_not},
      {"If", {{"then_branch", A::GRAPH}, {"else_branch", A::GRAPH}}, &translator::if_node},
      {"Loop", {{"body", A::GRAPH}}, &translator::loop},
      {"Constant",
       {{"value", A::TENSOR},
        {"value_float", A::FLOAT, 12},
        {"value_floats", A::FLOATS, 12},
        {"value_int", A::INT, 12},
        {"value_ints", A::INTS, 12}},
       &translator::constant},
  };
  return specs;
}

// The values of a typed field of a TensorProto into a tensor's storage; integers checked
// against their data type's range first.
template <class T, class Field>
void copy_values(const Field& field, Tensor& out) {
  T* to = static_cast<T*>(out.mutable_handle());
  std::int64_t i = 0;
  for (const auto value : field) to[i++] = static_cast<T>(value);
}
template <class T, class Field>
void copy_integers(const Field& field, Tensor& out, const std::string& what, std::int64_t low,
                   std::int64_t high) {
  for (const auto value : field)
    if (std::int64_t(value) < low || std::int64_t(value) > high)
      throw refused(what + ": the value " + std::to_string(value) + " does not fit its data type");
  copy_values<T>(field, out);
}

}  // namespace

// ---------------------------------------------------------------------------------------

const std::vector<std::string>& supported_op_types() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> out;
    for (const op_spec& s : op_specs()) out.emplace_back(s.type);
    return out;
  }();
  return types;
}

std::string onnx_type_name(int elem_type) {
  return TensorProto::DataType_IsValid(elem_type)
             ? TensorProto::DataType_Name(static_cast<TensorProto::DataType>(elem_type))
             : "data type " + std::to_string(elem_type);
}

std::optional<data_type> data_type_of_onnx(int elem_type) {
  switch (elem_type) {
    case TensorProto::FLOAT:
      return data_type::float32;
    case TensorProto::DOUBLE:
      return data_type::float64;
    case TensorProto::FLOAT16:
      return data_type::float16;
    case TensorProto::BFLOAT16:
      return data_type::bfloat16;
    case TensorProto::INT8:
      return data_type::int8;
    case TensorProto::UINT8:
      return data_type::uint8;
    case TensorProto::INT16:
      return data_type::int16;
    case TensorProto::INT32:
      return data_type::int32;
    case TensorProto::INT64:
      return data_type::int64;
    case TensorProto::BOOL:
      return data_type::boolean;
    default:
      return std::nullopt;
  }
}

namespace {
TensorProto::DataType onnx_type_of(data_type d) {
  switch (d) {
    case data_type::float32:
      return TensorProto::FLOAT;
    case data_type::float64:
      return TensorProto::DOUBLE;
    case data_type::float16:
      return TensorProto::FLOAT16;
    case data_type::bfloat16:
      return TensorProto::BFLOAT16;
    case data_type::int8:
      return TensorProto::INT8;
    case data_type::uint8:
      return TensorProto::UINT8;
    case data_type::int16:
      return TensorProto::INT16;
    case data_type::int32:
      return TensorProto::INT32;
    case data_type::int64:
      return TensorProto::INT64;
    case data_type::boolean:
      return TensorProto::BOOL;
  }
  return TensorProto::UNDEFINED;
}
}  // namespace

onnx::ModelProto parse_model(std::string_view bytes, std::string_view source) {
  silence_protobuf_log();
  onnx::ModelProto model;
  if (bytes.size() > std::size_t(std::numeric_limits<int>::max()))
    throw refused(
        std::string(source) + ": " + std::to_string(bytes.size()) +
        " bytes; protobuf reads models below 2 GiB (larger ones keep their weights as external data, "
        "which the importer does not read)");
  if (!model.ParseFromArray(bytes.data(), int(bytes.size())))
    throw refused(std::string(source) + ": not an ONNX model: protobuf could not parse it as a ModelProto (" +
                  std::to_string(bytes.size()) + " bytes; truncated or corrupt?)");
  if (!model.has_graph())
    throw refused(std::string(source) + ": not an ONNX model: it has no graph (truncated or corrupt?)");
  return model;
}

std::vector<graph_value> model_inputs(const onnx::ModelProto& model) {
  std::set<std::string, std::less<>> initialized;
  for (const TensorProto& init : model.graph().initializer()) initialized.insert(init.name());
  std::vector<graph_value> out;
  for (const auto& input : model.graph().input()) {
    if (initialized.contains(input.name())) continue;
    const value_type t = type_of_proto(input.type());
    if (!t.tensor)
      throw refused("graph input " + quoted(input.name()) + " is not a tensor (a sequence, map or optional)");
    const auto dtype = data_type_of_onnx(t.elem_type);
    if (!dtype)
      throw refused("graph input " + quoted(input.name()) + " is " + onnx_type_name(t.elem_type) +
                    ", a data type fluidk has not");
    if (t.dims && t.dims->size() > max_rank)
      throw refused("graph input " + quoted(input.name()) + " has rank " + std::to_string(t.dims->size()) +
                    "; fluidk's tensors have at most " + std::to_string(max_rank) + " dimensions");
    out.push_back({input.name(), *dtype, t.dims});
  }
  return out;
}

void check_inputs(const std::vector<graph_value>& declared, const std::vector<Tensor>& given,
                  const std::vector<std::string>& sources) {
  if (given.size() != declared.size()) {
    std::string names;
    for (const graph_value& v : declared) names += (names.empty() ? "" : ", ") + quoted(v.name);
    throw refused("the model takes " + std::to_string(declared.size()) + " input" +
                  (declared.size() == 1 ? "" : "s") + (names.empty() ? "" : " (" + names + ")") + ", but " +
                  std::to_string(given.size()) + (given.size() == 1 ? " was" : " were") + " given");
  }
  for (std::size_t k = 0; k < given.size(); ++k) {
    const graph_value& want = declared[k];
    const Tensor& t = given[k];
    const std::vector<std::int64_t> have(t.dims().begin(), t.dims().end());
    const std::string label = "input " + std::to_string(k) + " " + quoted(want.name) +
                              (k < sources.size() ? " (from " + sources[k] + ")" : std::string());
    if (t.dtype() != want.dtype)
      throw refused(label + " is " + onnx_type_name(onnx_type_of(t.dtype())) + "; the model declares " +
                    onnx_type_name(onnx_type_of(want.dtype)));
    if (!want.dims) continue;
    bool fits = want.dims->size() == have.size();
    for (std::size_t i = 0; fits && i < have.size(); ++i)
      fits = (*want.dims)[i] < 0 || (*want.dims)[i] == have[i];
    if (!fits)
      throw refused(label + " has shape " + dims_text(have) + "; the model declares " +
                    dims_text(*want.dims) + " (? takes any extent)");
  }
}

imported_model translate(onnx::ModelProto model, const std::vector<dims>* input_dims, const options& opts) {
  for (const auto& [op_type, place_text] : opts.op_device) {
    const auto& types = supported_op_types();
    if (std::find(types.begin(), types.end(), op_type) == types.end())
      throw refused("--op-device " + op_type + "=" + place_text + ": " + quoted(op_type) +
                    " is not an ONNX op type the importer maps");
  }
  return translator(std::move(model), input_dims, opts).run();
}

imported_model import_model(std::string_view bytes, std::string_view source,
                            const std::vector<dims>* input_dims, const options& opts) {
  return translate(parse_model(bytes, source), input_dims, opts);
}

Tensor tensor_from_proto(const TensorProto& proto, std::string_view what) {
  const std::string label(what);
  if (proto.data_location() == TensorProto::EXTERNAL || proto.external_data_size() > 0)
    throw refused(
        label +
        ": its data is external (data_location EXTERNAL); the importer reads data inside the model only");
  if (proto.has_segment()) throw refused(label + ": a segment of a tensor is not supported");
  const auto dtype = data_type_of_onnx(proto.data_type());
  if (!dtype)
    throw refused(label + ": data type " + onnx_type_name(proto.data_type()) + " is not one fluidk has");
  if (std::size_t(proto.dims_size()) > max_rank)
    throw refused(label + ": rank " + std::to_string(proto.dims_size()) + "; fluidk's tensors have at most " +
                  std::to_string(max_rank) + " dimensions");
  const std::vector<std::int64_t> extents(proto.dims().begin(), proto.dims().end());
  for (const std::int64_t e : extents)
    if (e < 0) throw refused(label + ": negative dimension in " + dims_text(extents));
  dims shape;
  try {
    shape = dims(std::span<const std::int64_t>(extents));
  } catch (const error& e) {
    throw refused(label + ": " + detail::unprefixed(e));
  }
  const std::uint64_t count = std::uint64_t(shape.numel());
  const std::size_t element = size_of(*dtype);
  const std::string type_name = onnx_type_name(proto.data_type());

  if (proto.has_raw_data()) {
    const std::string& raw = proto.raw_data();
    if (raw.size() % element != 0 || raw.size() / element != count)
      throw refused(label + ": raw_data holds " + std::to_string(raw.size()) + " bytes; " +
                    dims_text(extents) + " of " + type_name + " takes " + std::to_string(count) + " x " +
                    std::to_string(element));
    Tensor out(shape, *dtype);
    if (count > 0) std::memcpy(out.mutable_handle(), raw.data(), raw.size());
    if (*dtype == data_type::boolean) {
      const auto* bytes = static_cast<const unsigned char*>(out.handle());
      for (std::uint64_t i = 0; i < count; ++i)
        if (bytes[i] > 1)
          throw refused(label + ": a BOOL byte is " + std::to_string(bytes[i]) + ", not 0 or 1");
    }
    return out;
  }
  auto check_count = [&](int have, const char* field) {
    if (std::uint64_t(have) != count)
      throw refused(label + ": " + field + " holds " + std::to_string(have) + " values; " +
                    dims_text(extents) + " of " + type_name + " takes " + std::to_string(count));
  };
  Tensor out;
  switch (*dtype) {
    case data_type::float32:
      check_count(proto.float_data_size(), "float_data");
      out = Tensor(shape, *dtype);
      copy_values<float>(proto.float_data(), out);
      break;
    case data_type::float64:
      check_count(proto.double_data_size(), "double_data");
      out = Tensor(shape, *dtype);
      copy_values<double>(proto.double_data(), out);
      break;
    case data_type::int64:
      check_count(proto.int64_data_size(), "int64_data");
      out = Tensor(shape, *dtype);
      copy_values<std::int64_t>(proto.int64_data(), out);
      break;
    default: {
      check_count(proto.int32_data_size(), "int32_data");
      out = Tensor(shape, *dtype);
      const auto& field = proto.int32_data();
      switch (*dtype) {
        case data_type::int32:
          copy_integers<std::int32_t>(field, out, label, INT32_MIN, INT32_MAX);
          break;
        case data_type::int16:
          copy_integers<std::int16_t>(field, out, label, INT16_MIN, INT16_MAX);
          break;
        case data_type::int8:
          copy_integers<std::int8_t>(field, out, label, INT8_MIN, INT8_MAX);
          break;
        case data_type::uint8:
          copy_integers<std::uint8_t>(field, out, label, 0, UINT8_MAX);
          break;
        case data_type::boolean:
          copy_integers<bool>(field, out, label, 0, 1);
          break;
        default:
          copy_integers<std::uint16_t>(field, out, label, 0, UINT16_MAX);
          break;  // float16, bfloat16 bits
      }
    }
  }
  return out;
}

TensorProto tensor_to_proto(const Tensor& tensor, const std::string& name) {
  if (tensor.place() != cpu_place) throw error("tensor_to_proto: " + name + " is not on the CPU");
  if (tensor.layout().plain() != tensor.layout())
    throw error("tensor_to_proto: " + name + " is in layout " + std::string(name_of(tensor.layout())) +
                ", not row-major");
  TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(onnx_type_of(tensor.dtype()));
  for (const std::int64_t d : tensor.dims()) proto.add_dims(d);
  const std::size_t bytes = std::size_t(tensor.numel()) * size_of(tensor.dtype());
  if (bytes > 0)
    proto.set_raw_data(static_cast<const char*>(tensor.handle()) + tensor.offset(), bytes);
  else
    proto.set_raw_data(std::string());
  return proto;
}

Tensor read_tensor_file(const std::string& path, std::string* name) {
  silence_protobuf_log();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw refused(path + ": cannot open it");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TensorProto proto;
  if (bytes.size() > std::size_t(std::numeric_limits<int>::max()) ||
      !proto.ParseFromArray(bytes.data(), int(bytes.size())))
    throw refused(
        path + ": not an ONNX tensor: protobuf could not parse it as a TensorProto (truncated or corrupt?)");
  if (name != nullptr) *name = proto.name();
  return tensor_from_proto(proto, path);
}

void write_tensor_file(const std::string& path, const Tensor& tensor, const std::string& name) {
  const TensorProto proto = tensor_to_proto(tensor, name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !proto.SerializeToOstream(&out) || !out.flush()) throw error("cannot write " + path);
}

}  // namespace fluidk::onnx_import
