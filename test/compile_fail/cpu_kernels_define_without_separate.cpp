// expect: fluidk: FLUIDK_CPU_KERNELS_DEFINE needs FLUIDK_SEPARATE_CPU_KERNELS
// The file that compiles the CPU kernels once, in a program that does not declare them
// separate: the kernels would stay inline here, and the other files' calls would find none.
#define FLUIDK_CPU_KERNELS_DEFINE
#include <fluidk/transforms/cpu_kernels.hpp>
