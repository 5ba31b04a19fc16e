// Runs the Catch2 tests linked into the executable (catch_impl.cpp): the one call of the tests'
// mains, main.cpp and cuda/cuda_test_main.cpp.
#pragma once

namespace fluidk_test {
int run_catch(int argc, char* argv[]);
}  // namespace fluidk_test
