// expect: fluidk: no input given decides this operator's data type
#include <fluidk/static_dispatch.hpp>

template <class T>
struct loss_kernel {
  using dtype = T;
  void operator()(fluidk::execution_context&) const {}
};

struct cross_entropy {
  static constexpr std::string_view name = "cross_entropy";
  static constexpr std::array<std::string_view, 2> inputs{"Logits", "Label"};
  static constexpr std::array<std::string_view, 1> outputs{"Loss"};
  static constexpr std::string_view data_type_input = "Logits";
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<fluidk::cpu>(loss_kernel<float>{}));
};

int main() {
  fluidk::typed_tensor<fluidk::cpu, std::int64_t> label({4, 1});
  fluidk::Tensor loss;
  fluidk::run<cross_entropy>(fluidk::target<fluidk::cpu>(), fluidk::inputs(fluidk::no_input, label),
                             fluidk::outputs(loss));
}
