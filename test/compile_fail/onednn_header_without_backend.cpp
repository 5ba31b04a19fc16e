// expect: fluidk/devices/onednn.hpp needs the oneDNN backend
#include <fluidk/devices/onednn.hpp>

int main() { return 0; }
