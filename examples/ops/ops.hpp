// The example operator library: every operator of examples/ops, and register_all() to make
// them known to fluidk's runtime path (programs, the executor, run_operator). The static
// path (fluidk::run<fluidk::ops::conv2d>(...)) needs no registration.
#pragma once

#include <fluidk/runtime_dispatch.hpp>

#include "ops/assign.hpp"
#include "ops/batch_norm.hpp"
#include "ops/cast.hpp"
#include "ops/ceil.hpp"
#include "ops/clip.hpp"
#include "ops/compare.hpp"
#include "ops/concat.hpp"
#include "ops/conv2d.hpp"
#include "ops/crf_decoding.hpp"
#include "ops/dropout.hpp"
#include "ops/elementwise_add.hpp"
#include "ops/elementwise_div.hpp"
#include "ops/elementwise_mul.hpp"
#include "ops/elementwise_sub.hpp"
#include "ops/fc.hpp"
#include "ops/fill_constant.hpp"
#include "ops/flatten2.hpp"
#include "ops/gemm.hpp"
#include "ops/increment.hpp"
#include "ops/logical.hpp"
#include "ops/lookup_table.hpp"
#include "ops/lookup_table_grad.hpp"
#include "ops/matmul.hpp"
#include "ops/mul.hpp"
#include "ops/pool2d.hpp"
#include "ops/relu.hpp"
#include "ops/reshape2.hpp"
#include "ops/sigmoid.hpp"
#include "ops/slice.hpp"
#include "ops/softmax.hpp"
#include "ops/softmax_with_cross_entropy.hpp"
#include "ops/sum.hpp"
#include "ops/tensor_array.hpp"
#include "ops/tensor_array_to_tensor.hpp"
#include "ops/uniform_random.hpp"
#include "ops/unsqueeze2.hpp"

namespace fluidk::ops {

// Registers every operator of the library; calling it again changes nothing. Defined in ops.cpp,
// which fluidk_ops_dep compiles once: registering an operator compiles every kernel it has (its
// runtime table calls each), and the files that only call register_all() need none of that.
void register_all();

}  // namespace fluidk::ops
