// expect: fluidk: not a data type tag
#include <fluidk/dtype.hpp>

int main() { return int(fluidk::data_type_of<const float>); }
