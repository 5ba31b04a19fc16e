// The plan table that the example programs print (the demo, run-onnx): per operator of one
// run, the kernel it ran and the inputs that had to move, with what moving them cost, read
// from the executor's traces (Executor::trace_into). One rule for the table, in one place.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fluidk/control_flow.hpp>
#include <fluidk/kernel_type.hpp>
#include <fluidk/trace.hpp>
#include <string>
#include <vector>

namespace fluidk::example {

// "Place(opencl:0)" -> "opencl:0", in a place's name or in a text naming places.
inline std::string without_place_prefix(std::string text) {
  for (std::size_t at = text.find("Place("); at != std::string::npos; at = text.find("Place(", at)) {
    const std::size_t close = text.find(')', at);
    if (close == std::string::npos) break;
    text.erase(close, 1);
    text.erase(at, 6);
  }
  return text;
}
inline std::string short_name(const place& p) { return without_place_prefix(p.to_string()); }

// A kernel key without its place: "float NCHW ONEDNN".
inline std::string key_text(const kernel_key& k) {
  return std::string(name_of(k.dtype())) + " " + std::string(name_of(k.layout())) + " " +
         std::string(name_of(k.library()));
}

// A byte count for people: "512 B", "3.1 KB", "6.6 MB".
inline std::string bytes_text(std::uint64_t bytes) {
  char out[32];
  if (bytes >= 1'000'000)
    std::snprintf(out, sizeof out, "%.1f MB", double(bytes) / 1e6);
  else if (bytes >= 1'000)
    std::snprintf(out, sizeof out, "%.1f KB", double(bytes) / 1e3);
  else
    std::snprintf(out, sizeof out, "%llu B", static_cast<unsigned long long>(bytes));
  return out;
}

// The table: one row per operator run (its place, its kernel, "(fallback)" when it fell
// back), and under it one line per input that moved: slot and variable, the bytes copied
// between places (or "cached" when the transfer cache served it, "on host" when only the
// layout or type changed on the host), and the chain of transforms. A control-flow operator's
// row counts the runs of its block (a loop's steps), whose operators' rows follow it; its moved
// inputs are its condition's copies to the host.
inline void print_plan(const std::vector<op_trace>& trace) {
  std::printf("  %-2s %-14s %-10s %-26s %s\n", "#", "operator", "runs on", "kernel", "inputs moved");
  int n = 0;
  for (const op_trace& t : trace) {
    std::string kernel = key_text(t.chosen);
    if (t.fell_back) kernel += " (fallback)";
    std::string where = short_name(t.chosen.place());
    if (is_control_flow(t.op)) {  // no kernel: its block's runs, whose rows follow
      where = "-";
      kernel = "block, " + std::to_string(t.block_runs) + (t.block_runs == 1 ? " run" : " runs");
    }
    std::printf("  %-2d %-14s %-10s %-26s %s\n", ++n, t.op.c_str(), where.c_str(), kernel.c_str(),
                t.inputs.empty() ? "-" : "");
    for (const input_trace& in : t.inputs)
      std::printf("       %-12s %9s  %s\n", (in.slot + " " + in.variable).c_str(),
                  in.cached             ? "cached"
                  : in.bytes_copied > 0 ? bytes_text(in.bytes_copied).c_str()
                                        : "on host",
                  without_place_prefix(in.chain).c_str());
  }
}

}  // namespace fluidk::example
