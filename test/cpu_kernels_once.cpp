// The CPU's vector kernels for every test executable, compiled here once: the tests' files are
// built with FLUIDK_SEPARATE_CPU_KERNELS and only call the kernel choice compiled here.
#define FLUIDK_CPU_KERNELS_DEFINE
#include "fluidk/transforms/cpu_kernels.hpp"
