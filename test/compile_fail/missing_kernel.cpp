// expect: fluidk: operator has no kernel for the expected kernel type
#include <fluidk/static_dispatch.hpp>

template <class T>
struct viterbi {
  using dtype = T;
  void operator()(fluidk::execution_context&) const {}
};

struct crf_decoding {
  static constexpr std::string_view name = "crf_decoding";
  static constexpr std::array<std::string_view, 1> inputs{"Emission"};
  static constexpr std::array<std::string_view, 1> outputs{"ViterbiPath"};
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<fluidk::cpu>(viterbi<float>{}));
};

int main() {
  fluidk::typed_tensor<fluidk::cpu, double> emission({4, 3});
  fluidk::Tensor path;
  fluidk::run<crf_decoding>(fluidk::target<fluidk::cpu>(), fluidk::inputs(emission), fluidk::outputs(path));
}
