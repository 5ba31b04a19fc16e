// A picture of a block and of what one run of it did, as Graphviz DOT: an operator per node,
// coloured by the place its kernel ran on and labelled with the kernel key; a variable per
// node, persistable ones (weights) drawn as cylinders; an edge per input and output, and for
// each input that moved, the edge labelled with its chain and the bytes it copied (or "cached"
// when the transfer cache served it). `dot -Tsvg plan.dot -o plan.svg` draws it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>

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

// The block as DOT. With `traces` (one op_trace per operator of the block, in order: what
// Executor::trace_into collects over one run), operators show the kernel they ran and the
// inputs that moved; without, the block alone. Edges that carry a moved input have class
// "transfer" (and "transfer cached" when nothing was copied), which SVG output keeps.
FLUIDK_DETAIL_RUNTIME_LINKAGE std::string to_dot(const BlockDesc& block,
                                                 std::span<const op_trace> traces = {});
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE std::string to_dot(const BlockDesc& block, std::span<const op_trace> traces) {
  const auto& ops = block.ops();
  if (!traces.empty() && traces.size() != ops.size())
    throw error("to_dot: " + std::to_string(traces.size()) + " traces for a block of " +
                std::to_string(ops.size()) + " operators; give the traces of one run");
  for (std::size_t i = 0; i < traces.size(); ++i)
    if (traces[i].op != ops[i].type())
      throw error("to_dot: trace " + std::to_string(i) + " is of operator '" + traces[i].op +
                  "', the block's is '" + ops[i].type() + "'");

  std::string out =
      "digraph fluidk_plan {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
      "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  // Variables, each once, in the order the operators name them.
  std::map<std::string, std::string, std::less<>> variables;  // name -> node id
  auto variable = [&](const std::string& name) -> const std::string& {
    auto [it, added] = variables.emplace(name, "v" + std::to_string(variables.size()));
    if (added) {
      const VarDesc* desc = block.find_var_recursive(name);
      std::string label = name;
      if (desc != nullptr && !desc->shape.empty()) {
        label += "\n[";
        for (std::size_t d = 0; d < desc->shape.size(); ++d)
          label += (d ? ", " : "") + std::to_string(desc->shape[d]);
        label += "]";
      }
      out += "  " + it->second + " [label=" + detail::dot_quoted(label);
      if (desc != nullptr && desc->persistable)
        out += ", shape=cylinder, style=filled, fillcolor=\"#eeeeee\", class=\"persistable\"";
      else
        out += ", shape=ellipse";
      out += "];\n";
    }
    return it->second;
  };
  std::set<place_kind_id> kinds;
  std::map<place_kind_id, std::string> kind_names;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const OpDesc& op = ops[i];
    const std::string id = "op" + std::to_string(i);
    std::string label = op.type();
    std::string style = "shape=box, style=\"rounded,filled\"";
    if (!traces.empty()) {
      const op_trace& t = traces[i];
      label += "\n" + detail::dot_key(t.chosen);
      const place_kind_id kind = t.chosen.place().kind_id();
      kinds.insert(kind);
      kind_names[kind] = std::string(t.chosen.place().kind().name);
      style += ", fillcolor=\"" + std::string(detail::dot_place_colour(kind)) + "\"";
      if (t.fell_back) {
        label += "\nfallback: no kernel for\n" + detail::dot_key(t.expected);
        style += ", color=red, penwidth=2, class=\"fallback\"";
      }
    } else {
      style += ", fillcolor=white";
    }
    for (const auto& [slot, names] : op.inputs())
      for (const std::string& name : names) variable(name);
    for (const auto& [slot, names] : op.outputs())
      for (const std::string& name : names) variable(name);
    out += "  " + id + " [label=" + detail::dot_quoted(label) + ", " + style + "];\n";
    // An input named twice in a slot is moved (or served cached) once per edge, in order: the
    // k-th edge of a slot and name is drawn from the k-th trace entry of them.
    std::map<std::pair<std::string, std::string>, std::size_t> edges_drawn;
    for (const auto& [slot, names] : op.inputs())
      for (const std::string& name : names) {
        std::string attrs = "label=" + detail::dot_quoted(slot);
        std::size_t skip = edges_drawn[{slot, name}]++;
        if (!traces.empty())
          for (const input_trace& in : traces[i].inputs) {
            if (in.slot != slot || in.variable != name || skip-- != 0) continue;
            if (in.cached)
              attrs = "label=" + detail::dot_quoted(slot + ": " + in.chain + "\ncached, nothing copied") +
                      ", color=darkgreen, fontcolor=darkgreen, style=dashed, class=\"transfer cached\"";
            else
              attrs = "label=" +
                      detail::dot_quoted(slot + ": " + in.chain +
                                         (in.bytes_copied > 0
                                              ? "\n" + detail::dot_bytes(in.bytes_copied) + " copied"
                                              : std::string("\non the host"))) +
                      ", color=red, fontcolor=red, penwidth=2, class=\"transfer\"";
          }
        out += "  " + variables.find(name)->second + " -> " + id + " [" + attrs + "];\n";
      }
    for (const auto& [slot, names] : op.outputs())
      for (const std::string& name : names)
        out += "  " + id + " -> " + variables.find(name)->second + " [label=" + detail::dot_quoted(slot) +
               ", color=gray40];\n";
  }
  if (!kinds.empty()) {
    out +=
        "  subgraph cluster_legend {\n    label=\"places\"; fontname=\"Helvetica\"; fontsize=10; "
        "color=gray;\n";
    for (const place_kind_id kind : kinds)
      out += "    legend" + std::to_string(kind) + " [label=" + detail::dot_quoted(kind_names[kind]) +
             ", shape=box, style=\"rounded,filled\", fillcolor=\"" + detail::dot_place_colour(kind) +
             "\"];\n";
    out += "  }\n";
  }
  return out + "}\n";
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
