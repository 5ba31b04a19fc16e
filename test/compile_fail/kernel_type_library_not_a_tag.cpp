// expect: fluidk: kernel_type<Place, DType, Layout, Library>: the library is not a library tag
#include <fluidk/kernel_type.hpp>

int main() {
  using key = fluidk::kernel_type<fluidk::cpu, float, fluidk::layout::nchw, fluidk::layout::nchw>;
  return int(key::key().ordinal());
}
