// expect: fluidk: kernel_type<Place, DType, Layout, Library>: the layout is not a layout tag
#include <fluidk/kernel_type.hpp>

struct nchw {};  // looks like a layout, but does not declare itself one
int main() { return int(fluidk::kernel_type<fluidk::cpu, float, nchw>::key().ordinal()); }
