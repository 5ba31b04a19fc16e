// The one main shared by the Catch2 test executables (Catch2 itself: catch_impl.cpp).
#include "catch_run.hpp"

int main(int argc, char* argv[]) { return fluidk_test::run_catch(argc, argv); }
