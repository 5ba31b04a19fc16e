// expect: fluidk: not a place tag
#include <fluidk/place.hpp>

struct gpu {};  // a name alone does not make a place kind
int main() { return fluidk::place::of<gpu>(0).device(); }
