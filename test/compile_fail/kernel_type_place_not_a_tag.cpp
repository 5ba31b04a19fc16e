// expect: fluidk: kernel_type<Place, DType, Layout, Library>: the place is not a place tag
#include <fluidk/kernel_type.hpp>

int main() { return int(fluidk::kernel_type<int, float>::key().ordinal()); }
