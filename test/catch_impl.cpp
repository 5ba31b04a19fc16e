// Catch2's implementation, compiled once for every test executable, and run_catch, which its
// mains call: main.cpp for the tests, cuda/cuda_test_main.cpp for the CUDA tests (which skip
// without a device).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_run.hpp"

int fluidk_test::run_catch(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
