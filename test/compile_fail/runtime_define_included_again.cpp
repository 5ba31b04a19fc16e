// expect: fluidk: FLUIDK_RUNTIME_DEFINE must come before fluidk's headers
// <fluidk/separate_runtime.hpp> included as declarations, then again after the macro: the
// second inclusion would add nothing, and the runtime would be compiled nowhere.
#define FLUIDK_SEPARATE_RUNTIME
#include <fluidk/separate_runtime.hpp>
#define FLUIDK_RUNTIME_DEFINE
#include <fluidk/separate_runtime.hpp>
