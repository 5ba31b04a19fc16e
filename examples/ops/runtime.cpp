// The runtime path's larger functions (run_operator, the executor, transform plans, parsing and
// printing), compiled here once for the programs that link the example operators and for the
// tests: their files are built with FLUIDK_SEPARATE_RUNTIME and call them as compiled here
// (docs/getting-started.md, "Compiling the runtime once").
#define FLUIDK_RUNTIME_DEFINE
#include "fluidk/separate_runtime.hpp"
