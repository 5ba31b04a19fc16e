// expect: fluidk: an operator registers the same kernel type twice
#include <fluidk/operator.hpp>

template <class T>
struct relu_kernel {
  using dtype = T;
  void operator()(fluidk::execution_context&) const {}
};
template <class T>
struct relu_kernel_again {
  using dtype = T;
  void operator()(fluidk::execution_context&) const {}
};

struct relu {
  static constexpr std::string_view name = "relu";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels =
      fluidk::make_kernels(fluidk::kernels_on<fluidk::cpu>(relu_kernel<float>{}, relu_kernel<double>{}),
                           fluidk::kernels_on<fluidk::cpu>(relu_kernel_again<float>{}));
};

int main() { return sizeof(relu::kernels) > 0 ? 0 : 1; }
