// expect: fluidk/devices/cuda.hpp needs the CUDA backend
#include <fluidk/devices/cuda.hpp>

int main() { return 0; }
