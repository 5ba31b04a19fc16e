// A place-kind clash found while registering before main (as a backend's inline variable
// registers): the program reaches main, and the first lookup throws the registration_error,
// naming both kinds (docs/new-device.md, "Registration"). Its own executable: the clash
// stays for the life of the process.
#include <catch2/catch.hpp>
#include <fluidk/device.hpp>
#include <fluidk/devices/cpu.hpp>
#include <fluidk/tensor.hpp>
#include <string_view>

namespace {
// Two kinds that claim the same id, each with the device members of the CPU's.
struct first_kind {
  using place_tag = first_kind;
  static constexpr fluidk::place_kind_id id = 7;
  static constexpr std::string_view name = "first_kind";
  static constexpr bool has_device_id = false;
  static constexpr bool host_accessible = true;
};
struct second_kind {
  using place_tag = second_kind;
  static constexpr fluidk::place_kind_id id = 7;
  static constexpr std::string_view name = "second_kind";
  static constexpr bool has_device_id = false;
  static constexpr bool host_accessible = true;
};
}  // namespace

template <>
struct fluidk::device_traits<first_kind> : fluidk::device_traits<fluidk::cpu> {};
template <>
struct fluidk::device_traits<second_kind> : fluidk::device_traits<fluidk::cpu> {};

namespace {
const bool first_registered =
    fluidk::register_at_startup([] { return fluidk::register_device<first_kind>(); });
const bool second_registered =
    fluidk::register_at_startup([] { return fluidk::register_device<second_kind>(); });
}  // namespace

TEST_CASE("a clash before main is thrown by the first lookup, naming both kinds", "[docs][registration]") {
  CHECK(first_registered);
  CHECK_FALSE(second_registered);
  CHECK_THROWS_AS(fluidk::parse_place("cpu"), fluidk::registration_error);
  CHECK_THROWS_WITH(fluidk::parse_place("cpu"), Catch::Contains("static initialisation") &&
                                                    Catch::Contains("second_kind") &&
                                                    Catch::Contains("first_kind") && Catch::Contains("id 7"));
  CHECK_THROWS_AS(fluidk::Tensor({4}, fluidk::data_type::float32, fluidk::place::of<first_kind>()),
                  fluidk::registration_error);
}

namespace {
struct third_kind {
  using place_tag = third_kind;
  static constexpr fluidk::place_kind_id id = 7;
  static constexpr std::string_view name = "third_kind";
  static constexpr bool has_device_id = false;
  static constexpr bool host_accessible = true;
};
}  // namespace

TEST_CASE("a registration at run time throws at once", "[docs][registration]") {
  CHECK_THROWS_AS(fluidk::register_place_kind<third_kind>(), fluidk::registration_error);
}
