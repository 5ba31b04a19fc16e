// The declaration of a test operator of one input X and one output Out, with kernel K on the
// CPU; each operator adds its name:
//   struct copy_op : fluidk_test::x_to_out<copy_kernel<float>> {
//     static constexpr std::string_view name = "copy";
//   };
#pragma once

#include <array>
#include <fluidk/operator.hpp>
#include <string_view>

namespace fluidk_test {

template <class K>
struct x_to_out {
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<fluidk::cpu>(K{}));
};

}  // namespace fluidk_test
