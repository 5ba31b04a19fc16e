// expect: fluidk: FLUIDK_RUNTIME_DEFINE must come before fluidk's headers
// The file that compiles the runtime once, with a fluidk header included before the macro: that
// header's functions would not be compiled anywhere. (FLUIDK_SEPARATE_RUNTIME comes from the
// build's flags in a program.)
#define FLUIDK_SEPARATE_RUNTIME
#include <fluidk/place.hpp>
#define FLUIDK_RUNTIME_DEFINE
#include <fluidk/separate_runtime.hpp>
