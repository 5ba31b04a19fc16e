// expect: fluidk: no_transform_inputs, keep_layout_inputs and cast_inputs name only input slots
#include <fluidk/runtime_dispatch.hpp>

template <class T>
struct conv_kernel {
  using dtype = T;
  void operator()(fluidk::execution_context&) const {}
};

// "Filter" misspelt: the filter would be re-laid-out with the input, silently.
struct conv {
  static constexpr std::string_view name = "conv";
  static constexpr std::array<std::string_view, 2> inputs{"Input", "Filter"};
  static constexpr std::array<std::string_view, 1> outputs{"Output"};
  static constexpr std::array<std::string_view, 1> keep_layout_inputs{"Filters"};
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<fluidk::cpu>(conv_kernel<float>{}));
};

int main() { return &fluidk::register_operator<conv>() != nullptr ? 0 : 1; }
