// The example operator library: every operator of examples/ops, and register_all() to make
// them known to fluidk's runtime path (programs, the executor, run_operator). The static
// path (fluidk::run<fluidk::ops::conv2d>(...)) needs no registration.
#pragma once

#include <fluidk/runtime_dispatch.hpp>

#include "ops/conv2d.hpp"
#include "ops/crf_decoding.hpp"
#include "ops/elementwise_add.hpp"
#include "ops/fc.hpp"
#include "ops/fill_constant.hpp"
#include "ops/lookup_table.hpp"
#include "ops/lookup_table_grad.hpp"
#include "ops/mul.hpp"
#include "ops/relu.hpp"
#include "ops/softmax_with_cross_entropy.hpp"
#include "ops/sum.hpp"
#include "ops/uniform_random.hpp"

namespace fluidk::ops {

// Registers every operator of the library; calling it again changes nothing.
inline void register_all() {
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
}

}  // namespace fluidk::ops
