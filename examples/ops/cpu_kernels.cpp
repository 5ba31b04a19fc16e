// The CPU kernels, compiled here once for the programs that link the example operators and for
// the tests: their files are built with FLUIDK_SEPARATE_CPU_KERNELS and call reorder, cast,
// reorder_cast and transform_threads as compiled here (docs/transforms.md, "Compiling the
// kernels once").
#define FLUIDK_CPU_KERNELS_DEFINE
#include "fluidk/transforms/cpu_kernels.hpp"
