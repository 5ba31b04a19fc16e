// The runtime tables of the example operators, compiled once for the programs and tests that link
// fluidk_ops_dep (meson.build): each register_operator<Op>() compiles every kernel of Op.
#include "ops/ops.hpp"

namespace fluidk::ops {

void register_all() {
  fluidk::register_operator<conv2d>();
  fluidk::register_operator<mul>();
  fluidk::register_operator<fc>();
  fluidk::register_operator<relu>();
  fluidk::register_operator<elementwise_add>();
  fluidk::register_operator<softmax_with_cross_entropy>();
  fluidk::register_operator<lookup_table>();
  fluidk::register_operator<lookup_table_grad>();
  fluidk::register_operator<sum>();
  fluidk::register_operator<crf_decoding>();
  fluidk::register_operator<fill_constant>();
  fluidk::register_operator<uniform_random>();
  fluidk::register_operator<matmul>();
  fluidk::register_operator<gemm>();
  fluidk::register_operator<flatten2>();
  fluidk::register_operator<reshape2>();
  fluidk::register_operator<concat>();
  fluidk::register_operator<elementwise_mul>();
  fluidk::register_operator<softmax>();
  fluidk::register_operator<dropout>();
  fluidk::register_operator<assign>();
  fluidk::register_operator<pool2d>();
  fluidk::register_operator<batch_norm>();
  fluidk::register_operator<clip>();
  fluidk::register_operator<sigmoid>();
  // What control flow needs (ONNX If and Loop): counters, comparisons and logic, arrays of
  // per-step values, and the operators of the node tests' loop bodies.
  fluidk::register_operator<increment>();
  fluidk::register_operator<less_than>();
  fluidk::register_operator<less_equal>();
  fluidk::register_operator<greater_than>();
  fluidk::register_operator<greater_equal>();
  fluidk::register_operator<equal>();
  fluidk::register_operator<not_equal>();
  fluidk::register_operator<logical_and>();
  fluidk::register_operator<logical_or>();
  fluidk::register_operator<logical_xor>();
  fluidk::register_operator<logical_not>();
  fluidk::register_operator<write_to_array>();
  fluidk::register_operator<read_from_array>();
  fluidk::register_operator<tensor_array_to_tensor>();
  fluidk::register_operator<cast>();
  fluidk::register_operator<ceil>();
  fluidk::register_operator<elementwise_sub>();
  fluidk::register_operator<elementwise_div>();
  fluidk::register_operator<slice>();
  fluidk::register_operator<unsqueeze2>();
}

}  // namespace fluidk::ops
