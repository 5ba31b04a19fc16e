// Links one of the *_only.cpp translation units into a program of its own, with nothing
// else of fluidk: the one header it includes must give its call what it needs.
#include <cstdio>
#include <string>

namespace include_behaviour {
std::string FLUIDK_TEST_CALL();
}

int main() {
  const std::string result = include_behaviour::FLUIDK_TEST_CALL();
  if (result == "float16 NCHW: 0 4 2 6") return 0;
  std::printf("the call gave '%s', not 2 X in NCHW\n", result.c_str());
  return 1;
}
