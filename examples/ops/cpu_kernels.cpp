// The CPU's vector kernels, compiled here once for the programs that link the example operators
// and for the tests: their files are built with FLUIDK_SEPARATE_CPU_KERNELS and only call the
// kernel choice compiled here (docs/transforms.md, "Compiling the kernels once").
#define FLUIDK_CPU_KERNELS_DEFINE
#include "fluidk/transforms/cpu_kernels.hpp"
