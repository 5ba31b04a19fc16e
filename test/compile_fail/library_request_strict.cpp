// expect: fluidk: operator has no kernel for the expected kernel type
// A library request falls back to the plain kernel of the same place, unless the call's policy
// is strict: then a oneDNN request on an operator without a oneDNN kernel is a missing kernel.
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
      fluidk::make_kernels(fluidk::kernels_on<fluidk::cpu>(scale_kernel<float>{}));
};

int main() {
  fluidk::typed_tensor<fluidk::cpu, float> x({4});
  fluidk::Tensor y;
  using strict = fluidk::with_fallback<fluidk::fallback_policy::strict>;
  fluidk::run<scale>(fluidk::target<fluidk::cpu, fluidk::library::onednn, strict>(), fluidk::inputs(x),
                     fluidk::outputs(y));
}
