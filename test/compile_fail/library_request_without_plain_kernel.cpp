// expect: fluidk: operator has no kernel for the expected kernel type
// A library request falls back only to a plain kernel of the same place and data type: with
// neither a oneDNN nor a plain kernel for double, the call is a missing kernel.
#include <fluidk/devices/onednn_tags.hpp>
#include <fluidk/static_dispatch.hpp>

template <class T>
struct scale_kernel {
  using dtype = T;
  void operator()(fluidk::execution_context&) const {}
};

struct scale {
  static constexpr std::string_view name = "scale";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels =
      fluidk::make_kernels(fluidk::kernels_on<fluidk::cpu>(scale_kernel<float>{}),
                           fluidk::kernels_on<fluidk::cpu, fluidk::library::onednn>(scale_kernel<float>{}));
};

int main() {
  fluidk::typed_tensor<fluidk::cpu, double> x({4});
  fluidk::Tensor y;
  fluidk::run<scale>(fluidk::target<fluidk::cpu, fluidk::library::onednn>(), fluidk::inputs(x),
                     fluidk::outputs(y));
}
