// expect: fluidk: FLUIDK_RUNTIME_DEFINE needs FLUIDK_SEPARATE_RUNTIME
// The file that compiles the runtime once, in a program that does not declare it separate.
#define FLUIDK_RUNTIME_DEFINE
#include <fluidk/separate_runtime.hpp>
