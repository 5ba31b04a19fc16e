// The results of the other translation units, during their static initialisation and in
// main, which must not depend on the order in which the link puts them (the test is built
// twice, in both orders). Includes nothing of fluidk, so that it registers nothing itself.
#include <catch2/catch.hpp>
#include <cstddef>
#include <string>

namespace include_behaviour {
std::string run_by_runtime_dispatch();
std::string run_by_executor();
std::string run_by_static_dispatch();
std::string describe_cpu_plan();
std::size_t accelerator_plan_steps();
extern const std::string runtime_dispatch_at_static_init, executor_at_static_init,
    static_dispatch_at_static_init, cpu_plan_at_static_init, call_before_any_fluidk_unit;
extern const bool accelerator_layout_registered;
}  // namespace include_behaviour

using namespace include_behaviour;

TEST_CASE("each dispatch header brings the CPU's transforms", "[include_behaviour]") {
  const std::string expected = "float16 NCHW: 0 4 2 6";
  CHECK(run_by_runtime_dispatch() == expected);
  CHECK(run_by_executor() == expected);
  CHECK(run_by_static_dispatch() == expected);
}

TEST_CASE("calls during static initialisation give what later calls give", "[include_behaviour]") {
  CHECK(runtime_dispatch_at_static_init == run_by_runtime_dispatch());
  CHECK(executor_at_static_init == run_by_executor());
  CHECK(static_dispatch_at_static_init == run_by_static_dispatch());
}

TEST_CASE("a plan asked for before any fluidk translation unit was initialised", "[include_behaviour]") {
  const std::string one_pass = "layout+cast NHWC/float->NCHW/float16 on Place(cpu)";
  CHECK(cpu_plan_at_static_init == one_pass);
  CHECK(describe_cpu_plan() == one_pass);
}

TEST_CASE("a call, with its allocations, before any fluidk translation unit was initialised",
          "[include_behaviour]") {
  CHECK(call_before_any_fluidk_unit == run_by_runtime_dispatch());
}

TEST_CASE("a plan made before a registration is not served after it", "[include_behaviour]") {
  REQUIRE(accelerator_layout_registered);
  CHECK(accelerator_plan_steps() == 1);  // the registered transform, whichever came first
}
