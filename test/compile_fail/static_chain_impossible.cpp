// expect: fluidk: no transform chain between these kernel types (see the instantiation above): no layout
// transform
#include <fluidk/transforms/cpu.hpp>
#include <fluidk/transforms/static_chain.hpp>

int main() {
  using from = fluidk::kernel_type<fluidk::cpu, float, fluidk::layout::nchw>;
  using to = fluidk::kernel_type<fluidk::cpu, float, fluidk::layout::nc>;
  return int(boost::mp11::mp_size<fluidk::transform_chain<from, to>>::value);
}
