// The places compiled into this build: the same test body runs over each of them.
#include <boost/mp11/algorithm.hpp>
#include <catch2/catch.hpp>
#include <fluidk/devices/enabled.hpp>
#include <fluidk/kernel_type.hpp>
#include <set>
#include <string>

using namespace fluidk;

static_assert(boost::mp11::mp_contains<enabled_places, cpu>::value);
static_assert(std::is_same_v<boost::mp11::mp_front<enabled_places>, cpu>);
#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
static_assert(boost::mp11::mp_contains<enabled_places, opencl>::value);
#endif
#if defined(FLUIDK_HAS_CUDA) && FLUIDK_HAS_CUDA
static_assert(boost::mp11::mp_contains<enabled_places, cuda>::value);
#endif

TEMPLATE_LIST_TEST_CASE("each enabled place kind is known to the runtime", "[places]", enabled_places) {
  using P = TestType;
  const int device = P::has_device_id ? 1 : 0;
  const place p = place::of<P>(device);
  const std::string text = p.to_string();
  CHECK(parse_place(text) == p);
  CHECK(parse_place(std::string(P::name)) == place::of<P>(0));
  for (std::string_view alias : P::aliases) CHECK(parse_place(alias).is<P>());

  const kernel_key key = kernel_type<P, float, layout::nchw>::key(device);
  CHECK(parse_kernel_key(key.to_string()) == key);
  CHECK(kernel_key::from_ordinal(key.ordinal(), device).place() == p);
  CHECK(p.host_accessible() == P::host_accessible);
}

TEST_CASE("enabled place kinds print as Fluid printed them", "[places]") {
  CHECK(place::of<cpu>().to_string() == "Place(cpu)");
#if defined(FLUIDK_HAS_CUDA) && FLUIDK_HAS_CUDA
  CHECK(place::of<cuda>(0).to_string() == "Place(gpu:0)");
  CHECK(parse_place("cuda:1") == place::of<cuda>(1));
#endif
#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
  CHECK(place::of<opencl>(0).to_string() == "Place(opencl:0)");
#endif
  std::set<std::string> names;
  boost::mp11::mp_for_each<enabled_places>([&](auto tag) { names.insert(std::string(decltype(tag)::name)); });
  CHECK(names.size() == boost::mp11::mp_size<enabled_places>::value);
}
