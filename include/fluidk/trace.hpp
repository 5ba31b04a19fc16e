// What one operator run did, for people: the kernel chosen and, for each input that had to
// move, the chain and what it cost. Executor::trace_into collects these; the demo's plan table
// and fluidk::to_dot (dot.hpp) read them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fluidk/kernel_type.hpp"

namespace fluidk {

struct input_trace {
  std::string slot, variable;
  kernel_key from, to;
  std::string chain;               // transform_plan::describe()
  std::uint64_t bytes_copied = 0;  // written by copies between places in this run
  bool cached = false;             // served by the transfer cache: nothing moved
};

struct op_trace {
  std::string op;
  kernel_key expected, chosen;
  bool fell_back = false;
  std::vector<input_trace> inputs;  // the inputs that were transformed (or served cached)
  // A control-flow operator (fluidk/control_flow.hpp), which runs no kernel: how many times it
  // ran its sub-block (a while's steps); the traces of those runs follow its own, in order. Its
  // inputs are its condition's copies to the host, one per test of a condition on a device.
  std::uint64_t block_runs = 0;
};

}  // namespace fluidk
