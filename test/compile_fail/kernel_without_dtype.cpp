// expect: fluidk: a kernel states the data type it computes in
#include <fluidk/operator.hpp>

// float is a template argument, but the kernel does not say that it computes in it.
template <class T>
struct relu_kernel {
  void operator()(fluidk::execution_context&) const {}
};

struct relu {
  static constexpr std::string_view name = "relu";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<fluidk::cpu>(relu_kernel<float>{}));
};

int main() { return sizeof(relu::kernels) > 0 ? 0 : 1; }
