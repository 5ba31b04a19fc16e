// Catch2's implementation, compiled once for every test executable, and run_catch, which its
// mains call: main.cpp for the tests, cuda/cuda_test_main.cpp for the CUDA tests (which skip
// without a device).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_run.hpp"

// Catch2 returns the number of failed assertions (at most 255): 77 of them would read as
// Meson's "skipped". Any failure is status 1.
int fluidk_test::run_catch(int argc, char* argv[]) { return Catch::Session().run(argc, argv) == 0 ? 0 : 1; }
