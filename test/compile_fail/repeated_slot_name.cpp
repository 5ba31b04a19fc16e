// expect: fluidk: an operator's input slots have names that differ
#include <fluidk/static_dispatch.hpp>

template <class T>
struct add_kernel {
  using dtype = T;
  void operator()(fluidk::execution_context&) const {}
};

// Two input slots named X: a program names its variables per slot name, so the second X
// would be given the first's variables too.
struct add {
  static constexpr std::string_view name = "add";
  static constexpr std::array<std::string_view, 2> inputs{"X", "X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<fluidk::cpu>(add_kernel<float>{}));
};

int main() {
  fluidk::typed_tensor<fluidk::cpu, float> x({2}), y({2});
  fluidk::Tensor out;
  fluidk::run<add>(fluidk::target<fluidk::cpu>(), fluidk::inputs(x, y), fluidk::outputs(out));
}
