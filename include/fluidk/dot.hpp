// A picture of a block and of what one run of it did, as Graphviz DOT: an operator per node,
// coloured by the place its kernel ran on and labelled with the kernel key; a variable per
// node, persistable ones (weights) drawn as cylinders; an edge per input and output, and for
// each input that moved, the edge labelled with its chain and the bytes it copied (or "cached"
// when the transfer cache served it); a control-flow operator's sub-block as a cluster inside
// it. `dot -Tsvg plan.dot -o plan.svg` draws it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fluidk/control_flow.hpp"
#include "fluidk/detail/runtime_linkage.hpp"
#include "fluidk/error.hpp"
#include "fluidk/program/desc.hpp"
#include "fluidk/trace.hpp"

namespace fluidk {

namespace detail {
// A DOT string literal: quoted, with quotes and backslashes escaped and line breaks as \n
// (centred lines).
inline std::string dot_quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

inline std::string dot_bytes(std::uint64_t bytes) {
  char text[32];
  if (bytes >= (std::uint64_t(1) << 20))
    std::snprintf(text, sizeof text, "%.1f MB", double(bytes) / (1 << 20));
  else if (bytes >= 1024)
    std::snprintf(text, sizeof text, "%.1f KB", double(bytes) / 1024);
  else
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  return text;
}

// A fill colour per place kind: the CPU blue, CUDA green, OpenCL orange, others from a palette.
inline const char* dot_place_colour(place_kind_id kind) noexcept {
  static constexpr const char* palette[] = {"#cfe2f3", "#d9ead3", "#fce5cd", "#ead1dc",
                                            "#fff2cc", "#d0e0e3", "#e6d0f5", "#f4cccc"};
  return palette[kind % (sizeof palette / sizeof palette[0])];
}

// The kernel key in three words and the place: "float NCHW ONEDNN on Place(cpu)".
inline std::string dot_key(const kernel_key& key) {
  return std::string(name_of(key.dtype())) + " " + std::string(name_of(key.layout())) + " " +
         std::string(name_of(key.library())) + "\non " + key.place().to_string();
}
}  // namespace detail

// The block as DOT. With `traces` (what Executor::trace_into collected over one run of the
// block: one op_trace per operator in order, a control-flow operator's followed by its
// sub-block's, step by step), operators show the kernel they ran and the inputs that moved;
// without, the block alone. Edges that carry a moved input have class "transfer" (and
// "transfer cached" when nothing was copied), which SVG output keeps. The sub-blocks of
// control-flow operators (fluidk/control_flow.hpp) are drawn inside the block as clusters,
// with the traces of their first run, and an edge from the operator to its cluster; a
// variable is drawn in the cluster of the block that declares it.
FLUIDK_DETAIL_RUNTIME_LINKAGE std::string to_dot(const BlockDesc& block,
                                                 std::span<const op_trace> traces = {});
#if FLUIDK_DETAIL_RUNTIME_HERE
namespace detail {
class dot_writer {
 public:
  dot_writer(const BlockDesc& root, std::span<const op_trace> traces) : root_(root), traces_(traces) {}

  std::string write() {
    std::size_t next = 0;
    draw(root_, traces_.empty() ? nullptr : &next);
    if (!traces_.empty() && next != traces_.size()) too_many_or_few();
    std::string out =
        "digraph fluidk_plan {\n  rankdir=TB;\n  compound=true;\n  node [fontname=\"Helvetica\", "
        "fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=9];\n";
    out += nodes_of(root_.idx());
    out += edges_;
    if (!kind_names_.empty()) {
      out +=
          "  subgraph cluster_legend {\n    label=\"places\"; fontname=\"Helvetica\"; fontsize=10; "
          "color=gray;\n";
      for (const auto& [kind, name] : kind_names_)
        out += "    legend" + std::to_string(kind) + " [label=" + dot_quoted(name) +
               ", shape=box, style=\"rounded,filled\", fillcolor=\"" + dot_place_colour(kind) + "\"];\n";
      out += "  }\n";
    }
    return out + "}\n";
  }

 private:
  // The node lines of block `idx`, then its sub-blocks' clusters, in the order drawn.
  std::string nodes_of(std::size_t idx) const {
    std::string out;
    if (const auto it = nodes_.find(idx); it != nodes_.end()) out += it->second;
    if (const auto it = clusters_.find(idx); it != clusters_.end())
      for (const auto& [sub, label] : it->second)
        out += "  subgraph cluster_b" + std::to_string(sub) + " {\n  label=" + dot_quoted(label) +
               "; fontname=\"Helvetica\"; fontsize=10; style=dashed; color=gray40;\n" + nodes_of(sub) +
               "  }\n";
    return out;
  }

  [[noreturn]] void too_many_or_few() const {
    throw error("to_dot: " + std::to_string(traces_.size()) + " traces for a block of " +
                std::to_string(root_.ops().size()) + " operators; give the traces of one run");
  }
  const op_trace& take(std::size_t& next, const OpDesc& op, std::size_t index) const {
    if (next >= traces_.size()) too_many_or_few();
    const op_trace& t = traces_[next];
    if (t.op != op.type())
      throw error("to_dot: trace " + std::to_string(next) + " is of operator '" + t.op +
                  "', the block's is '" + op.type() + "'" +
                  (index == 0 && &op != &root_.ops().front() ? " (a sub-block's first)" : ""));
    ++next;
    return t;
  }
  // Consumes the traces of one run of block `b` without drawing it (a loop's later steps).
  void skip(const BlockDesc& b, std::size_t& next) const {
    for (std::size_t i = 0; i < b.ops().size(); ++i) {
      const OpDesc& op = b.ops()[i];
      const op_trace& t = take(next, op, i);
      if (b.program() != nullptr && is_control_flow(op.type()))
        for (std::uint64_t step = 0; step < t.block_runs; ++step)
          for (const std::size_t sub : b.child_blocks(op.type(), op.attrs()))
            skip(b.program()->block(sub), next);
    }
  }

  // The node id of variable `name` as block `b` sees it, its node line added to the block that
  // declares it (the root's when that block is not drawn).
  const std::string& variable(const BlockDesc& b, const std::string& name) {
    const VarDesc* desc = b.find_var_recursive(name);
    const auto key = std::make_pair(desc, desc == nullptr ? name : std::string());
    auto [it, added] = variables_.emplace(key, "v" + std::to_string(variables_.size()));
    if (!added) return it->second;
    std::size_t home = root_.idx();
    for (const BlockDesc* up = &b; up != nullptr && desc != nullptr; up = up->parent_block())
      if (up->find_var(name) == desc) {
        if (drawn_.contains(up->idx())) home = up->idx();
        break;
      }
    std::string label = name;
    if (desc != nullptr && !desc->shape.empty()) {
      label += "\n[";
      for (std::size_t d = 0; d < desc->shape.size(); ++d)
        label += (d ? ", " : "") + std::to_string(desc->shape[d]);
      label += "]";
    }
    std::string& out = nodes_[home];
    out += "  " + it->second + " [label=" + dot_quoted(label);
    if (desc != nullptr && desc->persistable)
      out += ", shape=cylinder, style=filled, fillcolor=\"#eeeeee\", class=\"persistable\"";
    else
      out += ", shape=ellipse";
    out += "];\n";
    return it->second;
  }

  // Draws block `b`: with traces from `next` on (consuming one run's), or without (null).
  void draw(const BlockDesc& b, std::size_t* next) {
    drawn_.insert(b.idx());
    const auto& ops = b.ops();
    std::vector<std::string> ids;
    for (std::size_t i = 0; i < ops.size(); ++i)
      ids.push_back("b" + std::to_string(b.idx()) + "op" + std::to_string(i));
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const OpDesc& op = ops[i];
      const op_trace* t = next != nullptr ? &take(*next, op, i) : nullptr;
      const bool control = b.program() != nullptr && is_control_flow(op.type());
      std::string label = op.type();
      std::string style = "shape=box, style=\"rounded,filled\"";
      if (control) {
        style += ", fillcolor=\"#f3f3f3\", class=\"control\"";
        if (t != nullptr)
          label += "\n" + std::to_string(t->block_runs) + (op.type() == "while" ? " steps" : " runs");
      } else if (t != nullptr) {
        label += "\n" + dot_key(t->chosen);
        const place_kind_id kind = t->chosen.place().kind_id();
        kind_names_[kind] = std::string(t->chosen.place().kind().name);
        style += ", fillcolor=\"" + std::string(dot_place_colour(kind)) + "\"";
        if (t->fell_back) {
          label += "\nfallback: no kernel for\n" + dot_key(t->expected);
          style += ", color=red, penwidth=2, class=\"fallback\"";
        }
      } else {
        style += ", fillcolor=white";
      }
      for (const auto& [slot, names] : op.inputs())
        for (const std::string& name : names) variable(b, name);
      for (const auto& [slot, names] : op.outputs())
        for (const std::string& name : names) variable(b, name);
      nodes_[b.idx()] += "  " + ids[i] + " [label=" + dot_quoted(label) + ", " + style + "];\n";
      input_edges(b, op, ids[i], t, control);
      for (const auto& [slot, names] : op.outputs())
        for (const std::string& name : names)
          edges_ += "  " + ids[i] + " -> " + variables_.find(key_of(b, name))->second +
                    " [label=" + dot_quoted(slot) + ", color=gray40];\n";
      if (!control) continue;
      // The sub-blocks: drawn with their first run's traces, the later runs' consumed.
      for (const std::size_t sub : b.child_blocks(op.type(), op.attrs())) {
        const BlockDesc& inner = b.program()->block(sub);
        clusters_[b.idx()].emplace_back(sub, "block " + std::to_string(sub) + " (" + op.type() + ")");
        const bool ran = t != nullptr && t->block_runs > 0;
        draw(inner, ran ? next : nullptr);
        if (!inner.ops().empty())
          edges_ += "  " + ids[i] + " -> b" + std::to_string(sub) + "op0 [lhead=cluster_b" +
                    std::to_string(sub) + ", label=\"sub_block\", style=dashed, color=gray40];\n";
      }
      if (t != nullptr)
        for (std::uint64_t step = 1; step < t->block_runs; ++step)
          for (const std::size_t sub : b.child_blocks(op.type(), op.attrs()))
            skip(b.program()->block(sub), *next);
    }
  }

  std::pair<const VarDesc*, std::string> key_of(const BlockDesc& b, const std::string& name) const {
    const VarDesc* desc = b.find_var_recursive(name);
    return {desc, desc == nullptr ? name : std::string()};
  }

  // An operator's input edges; each input that moved labelled with its chain and what it copied.
  // A control-flow operator's moved inputs are its condition's copies to the host, one per test.
  void input_edges(const BlockDesc& b, const OpDesc& op, const std::string& id, const op_trace* t,
                   bool control) {
    // An input named twice in a slot is moved (or served cached) once per edge, in order: the
    // k-th edge of a slot and name is drawn from the k-th trace entry of them.
    std::map<std::pair<std::string, std::string>, std::size_t> edges_drawn;
    for (const auto& [slot, names] : op.inputs())
      for (const std::string& name : names) {
        std::string attrs = "label=" + dot_quoted(slot);
        std::size_t skip = edges_drawn[{slot, name}]++;
        if (t != nullptr && control) {
          std::uint64_t tests = 0, bytes = 0;
          std::string chain;
          for (const input_trace& in : t->inputs)
            if (in.slot == slot && in.variable == name) {
              ++tests;
              bytes += in.bytes_copied;
              chain = in.chain;
            }
          if (tests > 0)
            attrs = "label=" +
                    dot_quoted(slot + ": " + chain + "\n" + std::to_string(tests) + " tests, " +
                               dot_bytes(bytes) + " copied") +
                    ", color=red, fontcolor=red, penwidth=2, class=\"transfer\"";
        } else if (t != nullptr) {
          for (const input_trace& in : t->inputs) {
            if (in.slot != slot || in.variable != name || skip-- != 0) continue;
            if (in.cached)
              attrs = "label=" + dot_quoted(slot + ": " + in.chain + "\ncached, nothing copied") +
                      ", color=darkgreen, fontcolor=darkgreen, style=dashed, class=\"transfer cached\"";
            else
              attrs = "label=" +
                      dot_quoted(slot + ": " + in.chain +
                                 (in.bytes_copied > 0 ? "\n" + dot_bytes(in.bytes_copied) + " copied"
                                                      : std::string("\non the host"))) +
                      ", color=red, fontcolor=red, penwidth=2, class=\"transfer\"";
          }
        }
        edges_ += "  " + variables_.find(key_of(b, name))->second + " -> " + id + " [" + attrs + "];\n";
      }
  }

  const BlockDesc& root_;
  std::span<const op_trace> traces_;
  std::set<std::size_t> drawn_;
  std::map<std::pair<const VarDesc*, std::string>, std::string> variables_;           // -> node id
  std::map<std::size_t, std::string> nodes_;                                          // block -> node lines
  std::map<std::size_t, std::vector<std::pair<std::size_t, std::string>>> clusters_;  // block -> sub-blocks
  std::string edges_;
  std::map<place_kind_id, std::string> kind_names_;
};
}  // namespace detail

FLUIDK_DETAIL_RUNTIME_LINKAGE std::string to_dot(const BlockDesc& block, std::span<const op_trace> traces) {
  return detail::dot_writer(block, traces).write();
}
#endif

// The program's main block (block 0).
FLUIDK_DETAIL_RUNTIME_LINKAGE std::string to_dot(const ProgramDesc& program,
                                                 std::span<const op_trace> traces = {});
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE std::string to_dot(const ProgramDesc& program,
                                                 std::span<const op_trace> traces) {
  return to_dot(program.block(0), traces);
}
#endif

}  // namespace fluidk
