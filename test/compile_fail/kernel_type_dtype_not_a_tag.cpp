// expect: fluidk: kernel_type<Place, DType, Layout, Library>: the data type is not one of float
#include <fluidk/kernel_type.hpp>

int main() { return int(fluidk::kernel_type<fluidk::cpu, long double>::key().ordinal()); }
