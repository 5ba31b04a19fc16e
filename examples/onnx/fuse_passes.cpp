// The fuse passes (fuse_passes.hpp). Each pass works on a copy of block 0's operators, marks
// the operators it folds into another one as gone, and then builds block 0 anew from what is
// left (append_op checks every operator again against the registry).
#include "fuse_passes.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fluidk/control_flow.hpp>
#include <fluidk/operator_registry.hpp>
#include <initializer_list>
#include <map>
#include <optional>
#include <utility>
#include <variant>

namespace fluidk::onnx_import {

namespace {

// An attribute of kind T, or none when it is absent or of another kind (a pass then leaves
// the operator as it is: the kernel reports a bad attribute when it runs).
template <class T>
std::optional<T> attr_of(const OpDesc& op, std::string_view name) {
  if (const attribute* a = op.attrs().find(name))
    if (const T* v = std::get_if<T>(a)) return *v;
  return std::nullopt;
}

// A number attribute (float, double, int or int64), or none.
std::optional<double> number_of(const OpDesc& op, std::string_view name) {
  const attribute* a = op.attrs().find(name);
  if (a == nullptr) return std::nullopt;
  if (const auto* v = std::get_if<float>(a)) return *v;
  if (const auto* v = std::get_if<double>(a)) return *v;
  if (const auto* v = std::get_if<std::int32_t>(a)) return double(*v);
  if (const auto* v = std::get_if<std::int64_t>(a)) return double(*v);
  return std::nullopt;
}

// The one variable of a slot, or none when the slot is absent or holds another count.
std::optional<std::string> single(const slot_map& slots, std::string_view slot) {
  const auto it = slots.find(slot);
  if (it == slots.end() || it->second.size() != 1) return std::nullopt;
  return it->second.front();
}
bool has_value(const slot_map& slots, std::string_view slot) {
  const auto it = slots.find(slot);
  return it != slots.end() && !it->second.empty();
}

// Whether the registered operator `type` declares input slot `slot` (conv2d's Bias and
// ResidualData: a build whose conv2d lacks them fuses nothing into them).
bool declares_input(std::string_view type, std::string_view slot) {
  const operator_info* info = operator_registry::instance().find(type);
  if (info == nullptr) return false;
  const auto inputs = info->inputs();
  return std::find(inputs.begin(), inputs.end(), slot) != inputs.end();
}

class rewriter {
 public:
  explicit rewriter(imported_model& model) : model_(model) {
    const BlockDesc& block = model.program.block(0);
    ops_.assign(block.ops().begin(), block.ops().end());
    origins_ = model.origins;
    origins_.resize(ops_.size());
    gone_.assign(ops_.size(), false);
    vars_.assign(block.vars().begin(), block.vars().end());
    for (std::size_t i = 0; i < vars_.size(); ++i) var_index_.emplace(vars_[i].name, i);
    for (std::size_t i = 0; i < model.weights.size(); ++i) weight_index_.emplace(model.weights[i].first, i);
    for (const graph_value& v : model.inputs) graph_inputs_.insert(v.name);
    for (const graph_value& v : model.outputs) graph_outputs_.insert(v.name);
    // A control-flow operator (If, Loop) reads and writes what its sub-blocks use of block 0.
    sub_reads_.resize(ops_.size());
    sub_writes_.resize(ops_.size());
    for (std::size_t i = 0; i < ops_.size(); ++i)
      for (const std::size_t sub : block.child_blocks(ops_[i].type(), ops_[i].attrs()))
        collect_uses(model.program.block(sub), i);
  }

  std::size_t conv_bn();
  std::size_t conv_bias();
  std::size_t conv_residual();
  std::size_t conv_activation();
  std::size_t gemm_activation();
  void set_conv_layout(const std::string& layout) {
    for (OpDesc& op : ops_)
      if (op.type() == "conv2d") op.set_attr("onednn_layout", layout);
  }

  // Block 0 anew from the operators left, without the variables and weights no one uses.
  void commit();

 private:
  // The names of block 0 that the operators of block `b` (a sub-block of op i) and of the
  // blocks inside it read and write: op i's uses.
  void collect_uses(const BlockDesc& b, std::size_t i) {
    const BlockDesc& global = model_.program.block(0);
    for (const OpDesc& op : b.ops()) {
      for (const auto* slots : {&op.inputs(), &op.outputs()})
        for (const auto& [slot, names] : *slots)
          for (const std::string& name : names) {
            const VarDesc* outer = global.find_var(name);
            if (outer != nullptr && b.find_var_recursive(name) == outer)
              (slots == &op.inputs() ? sub_reads_ : sub_writes_)[i].insert(name);
          }
      for (const std::size_t sub : b.child_blocks(op.type(), op.attrs()))
        collect_uses(model_.program.block(sub), i);
    }
  }
  static bool names(const slot_map& slots, const std::string& name) {
    for (const auto& [slot, names] : slots)
      if (std::find(names.begin(), names.end(), name) != names.end()) return true;
    return false;
  }
  // The operators that read `name`, in order (an operator reading it twice counts once; one
  // whose sub-blocks read it counts).
  std::vector<std::size_t> readers(const std::string& name) const {
    std::vector<std::size_t> found;
    for (std::size_t i = 0; i < ops_.size(); ++i)
      if (!gone_[i] && (names(ops_[i].inputs(), name) || sub_reads_[i].contains(name))) found.push_back(i);
    return found;
  }
  // The operator that writes `name` (itself or in its sub-blocks), or none (a graph input, a
  // weight).
  std::optional<std::size_t> producer(const std::string& name) const {
    for (std::size_t i = 0; i < ops_.size(); ++i)
      if (!gone_[i] && (names(ops_[i].outputs(), name) || sub_writes_[i].contains(name))) return i;
    return std::nullopt;
  }
  // The operator after op i that alone reads its output `out` (no graph output), of one of
  // `types` and at the same place with the same library; or none.
  std::optional<std::size_t> only_reader(std::size_t i, const std::string& out,
                                         std::initializer_list<std::string_view> types) const {
    if (graph_outputs_.contains(out)) return std::nullopt;
    const std::vector<std::size_t> r = readers(out);
    if (r.size() != 1 || r[0] <= i) return std::nullopt;
    const OpDesc& next = ops_[r[0]];
    if (std::find(types.begin(), types.end(), next.type()) == types.end()) return std::nullopt;
    for (const char* attr : {"op_device", "use_onednn", "use_cudnn"}) {
      const attribute *a = ops_[i].attrs().find(attr), *b = next.attrs().find(attr);
      if ((a == nullptr) != (b == nullptr) || (a != nullptr && *a != *b)) return std::nullopt;
    }
    return r[0];
  }
  const VarDesc* var(const std::string& name) const {
    const auto it = var_index_.find(name);
    return it == var_index_.end() ? nullptr : &vars_[it->second];
  }
  // A persistable float32 weight of the given rank, or null.
  const Tensor* weight(const std::string& name, std::size_t rank) const {
    const VarDesc* v = var(name);
    const auto it = weight_index_.find(name);
    if (v == nullptr || !v->persistable || it == weight_index_.end()) return nullptr;
    const Tensor& t = model_.weights[it->second].second;
    return t.dtype() == data_type::float32 && t.dims().rank() == rank ? &t : nullptr;
  }
  // A conv2d's output channels: Filter's first dimension, or none when unknown.
  std::optional<std::int64_t> out_channels(const OpDesc& conv) const {
    const std::optional<std::string> filter = single(conv.inputs(), "Filter");
    const VarDesc* f = filter ? var(*filter) : nullptr;
    if (f == nullptr || f->shape.size() != 4 || f->shape[0] < 0) return std::nullopt;
    return f->shape[0];
  }
  // conv2d's existing Bias: absent (a null pointer in an engaged optional), a float32 [oc]
  // weight, or none when it is something else (the pass then leaves the conv).
  std::optional<const Tensor*> existing_bias(const OpDesc& conv, std::int64_t oc) const {
    if (!has_value(conv.inputs(), "Bias")) return static_cast<const Tensor*>(nullptr);
    const std::optional<std::string> b = single(conv.inputs(), "Bias");
    const Tensor* t = b ? weight(*b, 1) : nullptr;
    if (t == nullptr || t->dims()[0] != oc) return std::nullopt;
    return t;
  }
  // The bias that elementwise_add `add` adds to conv output `y` (4-D, NCHW) per output channel:
  // Y a persistable float32 weight of `oc` values, [OC] on axis 1 (what the importer makes of
  // Conv's B), or [OC, 1, 1] / [1, OC, 1, 1] on the trailing axes (an Add of such a constant);
  // its name, or none.
  std::optional<std::string> channel_bias(const OpDesc& add, const std::string& y, std::int64_t oc) const {
    const VarDesc* yv = var(y);
    const std::optional<std::string> b = single(add.inputs(), "Y");
    if (yv == nullptr || yv->shape.size() != 4 || single(add.inputs(), "X") != y || !b || *b == y) return {};
    const VarDesc* bv = var(*b);
    const auto it = weight_index_.find(*b);
    if (bv == nullptr || !bv->persistable || it == weight_index_.end()) return {};
    const Tensor& t = model_.weights[it->second].second;
    if (t.dtype() != data_type::float32 || t.numel() != oc) return {};
    const std::int64_t axis = std::int64_t(number_of(add, "axis").value_or(-1));
    const dims& d = t.dims();
    const bool per_channel = (d.rank() == 1 && d[0] == oc && axis == 1) ||
                             (d.rank() == 3 && d[0] == oc && (axis == -1 || axis == 1)) ||
                             (d.rank() == 4 && d[0] == 1 && d[1] == oc && (axis == -1 || axis == 0));
    if (!per_channel) return {};
    return b;
  }
  const Tensor& weight_tensor(const std::string& name) const {
    return model_.weights[weight_index_.at(name)].second;
  }

  // A conv2d (or gemm) the passes may extend: its output slot one variable, no activation yet.
  std::optional<std::string> open_output(const OpDesc& op, std::string_view slot) const {
    if (const attribute* a = op.attrs().find("fuse_activation")) {
      const auto* name = std::get_if<std::string>(a);
      if (name == nullptr || !name->empty()) return std::nullopt;
    }
    return single(op.outputs(), slot);
  }

  // A name no variable or weight has, from `base`.
  std::string fresh(const std::string& base) const {
    std::string name = base;
    for (int k = 2; var_index_.contains(name) || weight_index_.contains(name); ++k)
      name = base + std::to_string(k);
    return name;
  }
  void add_weight(const std::string& name, Tensor t) {
    const dims& d = t.dims();
    vars_.push_back(VarDesc{name, var_kind::lod_tensor, data_type::float32,
                            std::vector<std::int64_t>(d.begin(), d.end()), true});
    var_index_.emplace(name, vars_.size() - 1);
    model_.weights.emplace_back(name, std::move(t));
    weight_index_.emplace(name, model_.weights.size() - 1);
  }
  // Op j folded into op i: i's origin names j's nodes too (each once), j is gone.
  void fold(std::size_t i, std::size_t j) {
    std::vector<std::string> parts;
    for (const std::string* origin : {&origins_[i], &origins_[j]}) {
      std::size_t start = 0;
      while (start <= origin->size()) {
        const std::size_t end = std::min(origin->find(" + ", start), origin->size());
        std::string part = origin->substr(start, end - start);
        if (!part.empty() && std::find(parts.begin(), parts.end(), part) == parts.end())
          parts.push_back(std::move(part));
        start = end + 3;
      }
    }
    std::string joined;
    for (const std::string& part : parts) joined += (joined.empty() ? "" : " + ") + part;
    origins_[i] = joined;
    gone_[j] = true;
  }
  std::size_t activation(std::string_view type, std::string_view out_slot);

  imported_model& model_;
  std::vector<OpDesc> ops_;
  std::vector<std::string> origins_;
  std::vector<bool> gone_;
  std::vector<std::set<std::string, std::less<>>> sub_reads_, sub_writes_;  // per operator
  std::vector<VarDesc> vars_;
  std::map<std::string, std::size_t, std::less<>> var_index_, weight_index_;
  std::set<std::string, std::less<>> graph_inputs_, graph_outputs_;
};

// W' = W * s and b' = (b - mean) * s + beta per output channel, s = gamma / sqrt(var + eps),
// b the conv's Bias and the bias an elementwise_add between the two adds (0 without them):
// batch_norm of the conv's output is then the conv with W' and b'.
std::size_t rewriter::conv_bn() {
  if (!declares_input("conv2d", "Bias")) return 0;
  std::size_t fused = 0;
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    OpDesc& conv = ops_[i];
    if (gone_[i] || conv.type() != "conv2d" || has_value(conv.inputs(), "ResidualData")) continue;
    if (attr_of<std::string>(conv, "data_format").value_or("NCHW") != "NCHW") continue;
    const std::optional<std::string> y = open_output(conv, "Output");
    const std::optional<std::string> filter = single(conv.inputs(), "Filter");
    const std::optional<std::int64_t> oc = out_channels(conv);
    if (!y || !filter || !oc) continue;
    const Tensor* w = weight(*filter, 4);
    const std::optional<const Tensor*> bias = existing_bias(conv, *oc);
    if (w == nullptr || w->dims()[0] != *oc || !bias) continue;
    // The importer's Conv with B is conv2d, then elementwise_add of B: B folded in too.
    std::optional<std::size_t> j = only_reader(i, *y, {"batch_norm", "elementwise_add"});
    if (!j) continue;
    std::optional<std::size_t> add;
    const Tensor* add_bias = nullptr;
    std::optional<std::string> x = y;
    if (ops_[*j].type() == "elementwise_add") {
      const std::optional<std::string> b = channel_bias(ops_[*j], *y, *oc);
      x = single(ops_[*j].outputs(), "Out");
      if (!b || !x) continue;
      add_bias = &weight_tensor(*b);
      add = j;
      j = only_reader(*j, *x, {"batch_norm"});
      if (!j) continue;
    }
    const OpDesc& bn = ops_[*j];
    if (single(bn.inputs(), "X") != x || !attr_of<bool>(bn, "is_test").value_or(false) ||
        attr_of<std::string>(bn, "data_layout").value_or("NCHW") != "NCHW")
      continue;
    // Y alone: the training outputs (MeanOut, SavedMean...) have no place in a conv.
    const std::optional<std::string> out = single(bn.outputs(), "Y");
    if (!out || bn.outputs().size() != 1) continue;
    const std::optional<double> eps = number_of(bn, "epsilon");
    if (!eps || !(*eps >= 0) || std::isinf(*eps)) continue;
    const Tensor* stats[4] = {};
    bool all = true;
    const char* slots[4] = {"Scale", "Bias", "Mean", "Variance"};
    for (int k = 0; k < 4; ++k) {
      const std::optional<std::string> name = single(bn.inputs(), slots[k]);
      stats[k] = name ? weight(*name, 1) : nullptr;
      all = all && stats[k] != nullptr && stats[k]->dims()[0] == *oc;
    }
    if (!all) continue;

    const float *gamma = stats[0]->data<float>(), *beta = stats[1]->data<float>(),
                *mean = stats[2]->data<float>(), *variance = stats[3]->data<float>();
    const float* b = *bias ? (*bias)->data<float>() : nullptr;
    const float* b2 = add_bias != nullptr ? add_bias->data<float>() : nullptr;
    const float* wv = w->data<float>();
    const std::int64_t per_channel = w->numel() / *oc;
    Tensor new_w(w->dims(), data_type::float32), new_b(dims{*oc}, data_type::float32);
    float* nw = new_w.data<float>();
    float* nb = new_b.data<float>();
    for (std::int64_t c = 0; c < *oc; ++c) {
      // eps as batch_norm reads it: a float attribute, widened exactly.
      const double s = double(gamma[c]) / std::sqrt(double(variance[c]) + *eps);
      for (std::int64_t e = c * per_channel; e < (c + 1) * per_channel; ++e) nw[e] = float(double(wv[e]) * s);
      const double before = (b != nullptr ? double(b[c]) : 0.0) + (b2 != nullptr ? double(b2[c]) : 0.0);
      nb[c] = float((before - double(mean[c])) * s + double(beta[c]));
    }
    const std::string w_name = fresh(*filter + "@conv_bn"), b_name = fresh(*out + "@conv_bn_bias");
    add_weight(w_name, std::move(new_w));
    add_weight(b_name, std::move(new_b));
    conv.set_input("Filter", {w_name});
    conv.set_input("Bias", {b_name});
    conv.set_output("Output", {*out});
    if (add) fold(i, *add);
    fold(i, *j);
    ++fused;
  }
  return fused;
}

// elementwise_add(conv output, B) where B is a bias per output channel (channel_bias).
std::size_t rewriter::conv_bias() {
  if (!declares_input("conv2d", "Bias")) return 0;
  std::size_t fused = 0;
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    const OpDesc& conv = ops_[i];
    if (gone_[i] || conv.type() != "conv2d") continue;
    if (attr_of<std::string>(conv, "data_format").value_or("NCHW") != "NCHW") continue;
    const std::optional<std::string> y = open_output(conv, "Output");
    const std::optional<std::int64_t> oc = out_channels(conv);
    if (!y || !oc) continue;
    const std::optional<const Tensor*> bias = existing_bias(conv, *oc);
    if (!bias) continue;
    const std::optional<std::size_t> j = only_reader(i, *y, {"elementwise_add"});
    if (!j) continue;
    const OpDesc& add = ops_[*j];
    const std::optional<std::string> b = channel_bias(add, *y, *oc), out = single(add.outputs(), "Out");
    if (!b || !out) continue;
    const Tensor& t = weight_tensor(*b);
    std::string name = *b;
    if (*bias != nullptr || t.dims().rank() != 1) {  // a new [OC] weight: the sum, or B as 1-D
      Tensor sum(dims{*oc}, data_type::float32);
      float* s = sum.data<float>();
      const float* bp = t.data<float>();
      const float* old = *bias != nullptr ? (*bias)->data<float>() : nullptr;
      for (std::int64_t c = 0; c < *oc; ++c)
        s[c] = float(double(bp[c]) + (old != nullptr ? double(old[c]) : 0.0));
      name = fresh(*b + "@conv_bias");
      add_weight(name, std::move(sum));
    }
    OpDesc& c = ops_[i];
    c.set_input("Bias", {name});
    c.set_output("Output", {*out});
    fold(i, *j);
    ++fused;
  }
  return fused;
}

// elementwise_add(conv output, R) or (R, conv output), R of the output's dims, computed before
// the conv (or a graph input): conv2d's ResidualData. The conv then runs after R is ready.
std::size_t rewriter::conv_residual() {
  if (!declares_input("conv2d", "ResidualData")) return 0;
  std::size_t fused = 0;
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    const OpDesc& conv = ops_[i];
    if (gone_[i] || conv.type() != "conv2d" || has_value(conv.inputs(), "ResidualData")) continue;
    const std::optional<std::string> y = open_output(conv, "Output");
    if (!y) continue;
    const VarDesc* yv = var(*y);
    if (yv == nullptr || yv->shape.empty() ||
        std::any_of(yv->shape.begin(), yv->shape.end(), [](std::int64_t e) { return e < 0; }))
      continue;
    const std::optional<std::size_t> j = only_reader(i, *y, {"elementwise_add"});
    if (!j) continue;
    const OpDesc& add = ops_[*j];
    const std::optional<std::string> x = single(add.inputs(), "X"), other = single(add.inputs(), "Y"),
                                     out = single(add.outputs(), "Out");
    if (!x || !other || !out || *x == *other || (*x != *y && *other != *y)) continue;
    const std::string r = *x == *y ? *other : *x;
    const VarDesc *rv = var(r), *ov = var(*out);
    if (rv == nullptr || ov == nullptr || rv->persistable || weight_index_.contains(r) ||
        rv->shape != yv->shape || ov->shape != yv->shape || rv->dtype != yv->dtype ||
        rv->kind != var_kind::lod_tensor)
      continue;
    const std::optional<std::size_t> p = producer(r);
    if (p ? *p >= i : !graph_inputs_.contains(r)) continue;
    OpDesc& c = ops_[i];
    c.set_input("ResidualData", {r});
    c.set_output("Output", {*out});
    fold(i, *j);
    ++fused;
  }
  return fused;
}

// relu, clip (constant bounds: its min and max attributes) or sigmoid after op `type`.
std::size_t rewriter::activation(std::string_view type, std::string_view out_slot) {
  std::size_t fused = 0;
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    if (gone_[i] || ops_[i].type() != type) continue;
    const std::optional<std::string> y = open_output(ops_[i], out_slot);
    if (!y) continue;
    const std::optional<std::size_t> j = only_reader(i, *y, {"relu", "clip", "sigmoid"});
    if (!j) continue;
    const OpDesc& act = ops_[*j];
    const std::optional<std::string> out = single(act.outputs(), "Out");
    if (single(act.inputs(), "X") != y || !out) continue;
    OpDesc& op = ops_[i];
    if (act.type() == "clip") {
      // Bounds given as tensors (Min, Max) are known only when the program runs.
      if (has_value(act.inputs(), "Min") || has_value(act.inputs(), "Max")) continue;
      const std::optional<float> lo = attr_of<float>(act, "min"), hi = attr_of<float>(act, "max");
      if (!lo || !hi || std::isnan(*lo) || std::isnan(*hi)) continue;
      op.set_attr("fuse_alpha", *lo);
      op.set_attr("fuse_beta", *hi);
    }
    op.set_attr("fuse_activation", act.type());
    op.set_output(out_slot, {*out});
    fold(i, *j);
    ++fused;
  }
  return fused;
}
// (Only where conv2d takes the fused inputs: a conv2d without them reads no fuse_activation.)
std::size_t rewriter::conv_activation() {
  return declares_input("conv2d", "ResidualData") ? activation("conv2d", "Output") : 0;
}
std::size_t rewriter::gemm_activation() { return activation("gemm", "Out"); }

void rewriter::commit() {
  std::set<std::string, std::less<>> used(graph_inputs_.begin(), graph_inputs_.end());
  used.insert(graph_outputs_.begin(), graph_outputs_.end());
  std::set<std::string, std::less<>> read(graph_outputs_.begin(), graph_outputs_.end());
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    if (gone_[i]) continue;
    for (const auto& [slot, names] : ops_[i].inputs()) {
      used.insert(names.begin(), names.end());
      read.insert(names.begin(), names.end());
    }
    for (const auto& [slot, names] : ops_[i].outputs()) used.insert(names.begin(), names.end());
    used.insert(sub_reads_[i].begin(), sub_reads_[i].end());
    used.insert(sub_writes_[i].begin(), sub_writes_[i].end());
    read.insert(sub_reads_[i].begin(), sub_reads_[i].end());
  }
  // Block 0 made again in place, in a copy of the program: its sub-blocks stay its children,
  // which a control-flow operator's block attribute must name (append_op checks it).
  ProgramDesc program = model_.program;
  BlockDesc& block = program.block(0);
  block = BlockDesc();
  for (const VarDesc& v : vars_)
    if (used.contains(v.name)) block.var(v.name) = v;
  std::vector<std::string> origins;
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    if (gone_[i]) continue;
    block.append_op(ops_[i]);
    origins.push_back(origins_[i]);
  }
  model_.program = std::move(program);
  model_.origins = std::move(origins);
  std::erase_if(model_.weights, [&](const auto& w) { return !read.contains(w.first); });
}

}  // namespace

const std::vector<std::string>& fuse_pass_names() {
  static const std::vector<std::string> names{"conv_bn", "conv_bias", "conv_residual", "conv_activation",
                                              "gemm_activation"};
  return names;
}

std::size_t run_fuse_pass(imported_model& model, std::string_view name) {
  rewriter r(model);
  std::size_t fused = 0;
  if (name == "conv_bn") {
    fused = r.conv_bn();
  } else if (name == "conv_bias") {
    fused = r.conv_bias();
  } else if (name == "conv_residual") {
    fused = r.conv_residual();
  } else if (name == "conv_activation") {
    fused = r.conv_activation();
  } else if (name == "gemm_activation") {
    fused = r.gemm_activation();
  } else {
    std::string names;
    for (const std::string& n : fuse_pass_names()) names += (names.empty() ? "" : ", ") + n;
    throw error("no fuse pass '" + std::string(name) + "'; the passes are " + names);
  }
  if (fused > 0) r.commit();
  return fused;
}

bool onednn_layout_mode(std::string_view mode) {
  return mode == "auto" || mode == "blocked" || mode == "NHWC";
}

layout_choice choose_onednn_layout(imported_model& model, std::string_view mode, bool nhwc_convolutions) {
  if (!onednn_layout_mode(mode))
    throw error("the layout of oneDNN's convolutions is auto, blocked or NHWC, not '" + std::string(mode) +
                "'");
  layout_choice choice{std::string(mode), "given"};
  const BlockDesc& block = model.program.block(0);
  // The outputs of the convolutions and poolings, which keep the layout they are given.
  std::set<std::string, std::less<>> spatial;
  std::size_t convolutions = 0;
  std::string against;
  for (const OpDesc& op : block.ops()) {
    if (op.type() == "conv2d") {
      ++convolutions;
      if (attr_of<std::int32_t>(op, "groups").value_or(1) != 1 && against.empty())
        against = "a grouped conv2d";
    }
    if (op.type() == "conv2d" || op.type() == "pool2d")
      for (const auto& [slot, names] : op.outputs()) spatial.insert(names.begin(), names.end());
  }
  if (convolutions == 0) return {mode == "auto" ? "blocked" : std::string(mode), "no conv2d in block 0"};
  // What reads them: another convolution or pooling keeps NHWC; flatten2 and reshape2 read
  // NCHW (the network's end). Anything else rules NHWC out: a concat copies strided, a
  // control-flow operator's body is not looked at, and of the other oneDNN kernels, which
  // take the wildcard and the blocked layouts, some write NCHW for an NHWC input.
  for (const OpDesc& op : block.ops())
    for (const auto& [slot, names] : op.inputs())
      for (const std::string& name : names)
        if (against.empty() && spatial.contains(name) && op.type() != "conv2d" && op.type() != "pool2d" &&
            op.type() != "flatten2" && op.type() != "reshape2")
          against = op.type() + " reads the output of a conv2d or pool2d";
  if (mode == "auto") {
    if (!nhwc_convolutions) against = "no brgemm-based NHWC convolutions of oneDNN on this CPU (AVX-512)";
    choice = against.empty()
                 ? layout_choice{"NHWC", "auto: every conv2d ungrouped, read by conv2d, pool2d or the end"}
                 : layout_choice{"blocked", "auto: " + against};
  }
  // Set on a copy of each conv2d, block 0 made anew as the passes make it.
  rewriter r(model);
  r.set_conv_layout(choice.layout);
  r.commit();
  return choice;
}

std::vector<fuse_report> fuse(imported_model& model, const std::set<std::string, std::less<>>& off) {
  std::vector<fuse_report> reports;
  for (const std::string& name : fuse_pass_names()) {
    fuse_report report{name, false, 0};
    if (!off.contains(name) && !off.contains("all")) {
      report.ran = true;
      report.fused = run_fuse_pass(model, name);
    }
    reports.push_back(std::move(report));
  }
  return reports;
}

}  // namespace fluidk::onnx_import
