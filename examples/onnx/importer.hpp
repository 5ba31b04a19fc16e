// The ONNX importer: an ONNX model, read with libonnx's protobuf classes, made into a fluidk
// program of the example operators (examples/ops), with its weights and its graph inputs and
// outputs; and ONNX tensors (TensorProto) to and from fluidk tensors. Everything the importer
// cannot map exactly (an op type, an attribute or its value, a data type, a rank, an opset or
// domain, sparse or external data) is refused before anything runs, with an error naming the
// node, its op type and the attribute: it never maps a node to something close but different.
// The core (include/fluidk) knows nothing of ONNX; this is a program built on it.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <fluidk/error.hpp>
#include <fluidk/program/desc.hpp>
#include <fluidk/tensor.hpp>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fluidk::onnx_import {

// A model or an input that the importer refuses (run-onnx exits 2 on it). Found before
// anything runs; the message names the node (its name, or its index and first output), its
// op type and the attribute or value refused.
class refused : public error {
 public:
  using error::error;
};

// A graph input or output: its name, its data type and its dimensions (-1 where the model
// leaves one open, as a symbolic batch size); no dims when the model declares no shape.
struct graph_value {
  std::string name;
  data_type dtype = data_type::float32;
  std::optional<std::vector<std::int64_t>> dims;
};

// What the command line asks of every operator the importer makes.
struct options {
  // "use_onednn" or "use_cudnn": set true on every operator (as Fluid's FLAGS_use_mkldnn
  // does); empty for none.
  std::string library_attribute;
  // ONNX op type -> the place text set as op_device on every operator made from a node of
  // that type ("Gemm" -> "opencl:0").
  std::map<std::string, std::string, std::less<>> op_device;
};

// A model made into fluidk's terms.
struct imported_model {
  // Block 0: a VarDesc (data type, dims) per variable, the operators in order; If and Loop nodes
  // add sub-blocks (their branches and bodies), children of the block the node is in.
  ProgramDesc program;
  // The persistable variables (initializers and folded Constant nodes that operators read or
  // the graph outputs), on the CPU, in row-major order.
  std::vector<std::pair<std::string, Tensor>> weights;
  std::vector<graph_value> inputs;   // the inputs the model takes data for, in graph order
  std::vector<graph_value> outputs;  // the graph outputs, in order (variables of block 0)
  // Per operator of block 0: the node it was made from, "node 2 'conv1' (Conv)" (the operators of
  // sub-blocks are not listed).
  std::vector<std::string> origins;
};

// The ONNX op types the importer maps (the keys options::op_device accepts; for If and Loop it is
// set on the conditional_block or while operator, their branches' and body's nodes taking their
// own op types' settings).
const std::vector<std::string>& supported_op_types();

// Reads a serialised ModelProto; `source` (the file name) is named when it is no model.
onnx::ModelProto parse_model(std::string_view bytes, std::string_view source);

// The inputs a model takes data for (graph inputs that no initializer gives), in graph order,
// as declared; refused when one is not a tensor of a data type fluidk has.
std::vector<graph_value> model_inputs(const onnx::ModelProto& model);

// Checks tensors given for a model's inputs, in order: their count, and each one's data type
// and shape against the declared type (a dimension the model leaves open takes any extent).
// `sources` names where each tensor came from (a file), for the errors.
void check_inputs(const std::vector<graph_value>& declared, const std::vector<Tensor>& given,
                  const std::vector<std::string>& sources);

// Checks the model, infers the shape of every value (with `input_dims`, when given, in place
// of the declared dims of model_inputs, which check_inputs has checked) and maps each node to
// fluidk operators. Refuses (class refused) what it cannot map; needs the example operators
// registered (fluidk::ops::register_all).
imported_model translate(onnx::ModelProto model, const std::vector<dims>* input_dims, const options& opts);

// parse_model and translate.
imported_model import_model(std::string_view bytes, std::string_view source,
                            const std::vector<dims>* input_dims, const options& opts);

// A TensorProto as a CPU tensor in row-major order (raw_data or the typed fields); `what`
// names it in errors (a bad size, a data type fluidk has not, external data).
Tensor tensor_from_proto(const onnx::TensorProto& proto, std::string_view what);
// A CPU tensor in row-major order (a plain layout) as a TensorProto named `name` (raw_data).
onnx::TensorProto tensor_to_proto(const Tensor& tensor, const std::string& name);

// A file holding one serialised TensorProto, as read by tensor_from_proto; the TensorProto's
// name, if any, goes to `name`.
Tensor read_tensor_file(const std::string& path, std::string* name = nullptr);
void write_tensor_file(const std::string& path, const Tensor& tensor, const std::string& name);

// The ONNX name of a data type ("FLOAT", "INT64") and fluidk's data type of an ONNX one.
std::string onnx_type_name(int elem_type);
std::optional<data_type> data_type_of_onnx(int elem_type);

}  // namespace fluidk::onnx_import
