// A program that uses fluidk the way a client would: through the installed or
// subproject headers only. Prints the version and checks the language level.
#include <cstdio>
#include <fluidk/fluidk.hpp>

static_assert(__cplusplus >= 202002L, "fluidk's build flags must select C++20");
static_assert(fluidk::version_major == FLUIDK_VERSION_MAJOR);

int main() {
  std::printf("fluidk %s\n", FLUIDK_VERSION_STRING);
  return 0;
}
