// expect: fluidk/devices/opencl.hpp needs the OpenCL backend
#include <fluidk/devices/opencl.hpp>

int main() { return 0; }
