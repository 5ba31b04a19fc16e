// expect: fluidk: FLUIDK_CPU_KERNELS_DEFINE must come before fluidk's headers
// One file that compiles both the runtime and the CPU kernels once, the kernels' macro after
// <fluidk/separate_runtime.hpp>, which had read the kernels' header as declarations: the
// kernels would be compiled nowhere. (The FLUIDK_SEPARATE_* macros come from the build's flags
// in a program.)
#define FLUIDK_SEPARATE_RUNTIME
#define FLUIDK_SEPARATE_CPU_KERNELS
#define FLUIDK_RUNTIME_DEFINE
#include <fluidk/separate_runtime.hpp>
#define FLUIDK_CPU_KERNELS_DEFINE
#include <fluidk/transforms/cpu_kernels.hpp>
