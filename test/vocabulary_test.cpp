// The kernel-type vocabulary: tags and concepts, printing and parsing, equality, hashing,
// ordinals and ordering of kernel keys.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fluidk/devices/cudnn_tags.hpp>
#include <fluidk/devices/onednn_tags.hpp>
#include <fluidk/fluidk.hpp>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

using namespace fluidk;

// A device declared the way a user adds one: through the public extension point only.
struct test_device {
  using place_tag = test_device;
  static constexpr place_kind_id id = 7;
  static constexpr std::string_view name = "testdev";
  static constexpr bool has_device_id = true;
  static constexpr bool host_accessible = false;
};
static const bool test_device_registered = register_place_kind<test_device>();

static_assert(Place<cpu> && Place<test_device>);
static_assert(!Place<int> && !Place<layout::nchw>);
static_assert(DType<float> && DType<float16> && DType<bfloat16> && DType<bool> && DType<std::int64_t>);
static_assert(!DType<const float> && !DType<long double> && !DType<char>);
static_assert(Layout<layout::nChw8c> && !Layout<cpu> && !Layout<library::plain>);
static_assert(Library<library::onednn> && !Library<layout::any>);
static_assert(data_type_of<float16> == data_type::float16 && data_type_of<std::int32_t> == data_type::int32);
static_assert(std::is_same_v<type_of<data_type::bfloat16>, bfloat16>);
static_assert(KernelType<kernel_type<cpu, float>> && !KernelType<kernel_key>);

// The compile-time key converts to the runtime key in a constant expression.
static_assert(kernel_key(kernel_type<cpu, double, layout::nchw, library::onednn>{}) ==
              kernel_key(cpu_place, data_type::float64, data_layout::nchw, library_type_of<library::onednn>));
static_assert(kernel_type<cpu, float>::key().ordinal() == 0);

TEST_CASE("kernel keys print in Fluid's format", "[vocabulary]") {
  CHECK(kernel_key(kernel_type<cpu, float, layout::nchw>{}).to_string() ==
        "{data_type[float]; data_layout[NCHW]; place[Place(cpu)]; library_type[PLAIN]}");
  CHECK(kernel_type<cpu, float16, layout::nChw8c, library::onednn>::key().to_string() ==
        "{data_type[float16]; data_layout[nChw8c]; place[Place(cpu)]; library_type[ONEDNN]}");
  CHECK(kernel_type<test_device, std::int64_t>::key(3).to_string() ==
        "{data_type[int64_t]; data_layout[ANY_LAYOUT]; place[Place(testdev:3)]; library_type[PLAIN]}");
  std::ostringstream os;
  os << kernel_type<cpu, bfloat16, layout::nhwc, library::cudnn>::key();
  CHECK(os.str() == "{data_type[bfloat16]; data_layout[NHWC]; place[Place(cpu)]; library_type[CUDNN]}");
  CHECK(place::of<test_device>(1).to_string() == "Place(testdev:1)");
  CHECK(cpu_place.to_string() == "Place(cpu)");
}

TEST_CASE("each axis parses case-insensitively", "[vocabulary][parse]") {
  CHECK(parse_data_type("FLOAT") == data_type::float32);
  CHECK(parse_data_type(" fp16 ") == data_type::float16);
  CHECK(parse_data_type("BFloat16") == data_type::bfloat16);
  CHECK(parse_data_type("int") == data_type::int32);
  CHECK(parse_data_type("Int64_T") == data_type::int64);
  CHECK(parse_data_type("bool") == data_type::boolean);
  CHECK(parse_data_layout("nchw8c") == data_layout_of<layout::nChw8c>);
  CHECK(parse_data_layout("NCHW16C") == data_layout_of<layout::nChw16c>);
  CHECK(parse_data_layout("any_layout") == data_layout::any);
  CHECK(parse_data_layout("Nhwc") == data_layout::nhwc);
  CHECK(parse_library_type("mkldnn") == library_type_of<library::onednn>);
  CHECK(parse_library_type("cuDNN") == library_type_of<library::cudnn>);
  CHECK(parse_place("CPU") == cpu_place);
  CHECK(parse_place("Place(cpu)") == cpu_place);
  CHECK(parse_place("host") == cpu_place);
  CHECK(parse_place("TestDev:2") == place::of<test_device>(2));
  CHECK(parse_place(" place(testdev:4)\t") == place::of<test_device>(4));
  CHECK(parse_place("testdev:007") == place::of<test_device>(7));
  CHECK(parse_place("testdev") == place::of<test_device>(0));
}

TEST_CASE("a bad word is named in the error with the accepted ones", "[vocabulary][parse]") {
  CHECK_THROWS_AS(parse_data_type("flaot"), parse_error);
  CHECK_THROWS_WITH(parse_data_type("flaot"), Catch::Contains("unknown data type 'flaot'") &&
                                                  Catch::Contains("accepted: float, float32") &&
                                                  Catch::Contains("bfloat16") &&
                                                  Catch::StartsWith("fluidk: "));
  CHECK_THROWS_WITH(parse_data_layout("nchw4c"),
                    Catch::Contains("unknown data layout 'nchw4c'") && Catch::Contains("nChw16c"));
  CHECK_THROWS_WITH(parse_library_type("cublas"),
                    Catch::Contains("unknown library 'cublas'") &&
                        Catch::Contains("PLAIN, CPU, CUDA, ONEDNN, MKLDNN, DNNL, CUDNN"));
  CHECK_THROWS_WITH(parse_place("tpu:0"), Catch::Contains("unknown place 'tpu:0'") &&
                                              Catch::Contains("cpu") && Catch::Contains("testdev"));
  CHECK_THROWS_WITH(parse_place("testdev:x"), Catch::Contains("bad device id in place 'testdev:x'"));
  CHECK_THROWS_WITH(parse_place("testdev:-1"), Catch::Contains("bad device id"));
  CHECK_THROWS_WITH(parse_place("cpu:1"), Catch::Contains("kind 'cpu' has no device ids"));
}

TEST_CASE("words read from lines with CRLF ends parse", "[vocabulary][parse]") {
  CHECK(parse_data_type("float\r") == data_type::float32);
  CHECK(parse_data_layout("\tNHWC\r\n") == data_layout::nhwc);
  CHECK(parse_library_type("PLAIN\r") == library_type::plain);
  CHECK(parse_place("testdev:2\r\n") == place::of<test_device>(2));
  CHECK(
      parse_kernel_key("{data_type[float]; data_layout[NCHW]; place[Place(cpu)]; library_type[PLAIN]}\r\n") ==
      kernel_key(cpu_place, data_type::float32, data_layout::nchw, library_type::plain));
  CHECK_THROWS_WITH(parse_place("testdev:\r2"), Catch::Contains("has a blank inside"));
}

TEST_CASE("a place is one word: no blanks, signs or empty parts inside", "[vocabulary][parse][place]") {
  for (const char* text : {"testdev:", "testdev:+1", "testdev:-0", "testdev:1x", "testdev:0x1", "testdev::1"})
    CHECK_THROWS_WITH(parse_place(text),
                      Catch::Contains(std::string("bad device id in place '") + text + "'"));
  for (const char* text : {"testdev: 1", "testdev :1", "Place( testdev:1)", "Place(testdev:1 )", "test dev"})
    CHECK_THROWS_WITH(parse_place(text),
                      Catch::Contains(std::string("place '") + text + "' has a blank inside") &&
                          Catch::Contains("accepted: <kind>, <kind>:<device id> or Place(...)"));
  CHECK_THROWS_WITH(parse_place("Place()"), Catch::Contains("place 'Place()' names no kind"));
  CHECK_THROWS_WITH(parse_place(":1"), Catch::Contains("place ':1' names no kind"));
  CHECK_THROWS_WITH(parse_place("Place(testdev:1"),
                    Catch::Contains("place 'Place(testdev:1' does not end with ')'"));
  CHECK_THROWS_WITH(parse_place("Place(testdev:1))"), Catch::Contains("bad device id"));
  CHECK_THROWS_WITH(parse_place("Place(Place(cpu))"), Catch::Contains("unknown place 'Place(Place(cpu))'"));
  // The device id is an int: one past its largest value is refused, not wrapped.
  CHECK(parse_place("testdev:2147483647") == place::of<test_device>(2147483647));
  CHECK_THROWS_WITH(parse_place("testdev:2147483648"),
                    Catch::Contains("device id in place 'testdev:2147483648' is out of range; the largest is "
                                    "2147483647"));
  CHECK_THROWS_WITH(parse_place("testdev:99999999999999999999999"), Catch::Contains("is out of range"));
  CHECK_THROWS_AS(parse_place("testdev: 1"), parse_error);
  // Inside a kernel key the value may have blanks around it, as every field's may.
  CHECK(parse_kernel_key(
            "{data_type[float]; data_layout[NCHW]; place[ Place(testdev:3) ]; library_type[PLAIN]}")
            .place() == place::of<test_device>(3));
  CHECK_THROWS_WITH(parse_kernel_key("{data_type[float]; data_layout[NCHW]; place[Place(cpu)]}"),
                    Catch::Contains("missing field 'library_type'"));
  CHECK_THROWS_WITH(parse_kernel_key("{data_type[float]; layout[NCHW]}"),
                    Catch::Contains("unknown field 'layout'"));
  CHECK_THROWS_WITH(parse_kernel_key("data_type[float]"), Catch::Contains("is not of the form"));
  // Fields are separated by one ';' each, as printed; no more, no less.
  CHECK_THROWS_WITH(parse_kernel_key("{data_type[float]data_layout[NCHW]; place[cpu]; library_type[PLAIN]}"),
                    Catch::Contains("expected ';' between fields, found 'd' after field 'data_type'"));
  CHECK_THROWS_WITH(
      parse_kernel_key("{data_type[float];; data_layout[NCHW]; place[cpu]; library_type[PLAIN]}"),
      Catch::Contains("unknown field '; data_layout'"));
  CHECK_THROWS_WITH(
      parse_kernel_key("{data_type[float]; data_layout[NCHW]; place[cpu]; library_type[PLAIN];}"),
      Catch::Contains("a ';' with no field after it"));
  CHECK(parse_kernel_key(" { data_type[float] ;data_layout[NCHW];  place[cpu] ; library_type[PLAIN] } ") ==
        kernel_key(cpu_place, data_type::float32, data_layout::nchw, library_type::plain));
  CHECK_THROWS_WITH(
      parse_kernel_key(
          "{data_type[float]; data_type[int]; data_layout[NCHW]; place[cpu]; library_type[PLAIN]}"),
      Catch::Contains("field 'data_type' given twice"));
  CHECK_THROWS_WITH(
      parse_kernel_key("{data_type[half-float]; data_layout[NCHW]; place[cpu]; library_type[PLAIN]}"),
      Catch::Contains("unknown data type 'half-float'"));
}

namespace {
// Every key over the place kinds this test knows and the registered layouts and libraries,
// in ordinal order (place kind, layout, library, data type).
std::vector<kernel_key> all_keys(int device = 0) {
  std::vector<kernel_key> keys;
  for (place p : {cpu_place, place::of<test_device>(device)})
    for (std::size_t l = 0; l < max_layouts; ++l)
      for (std::size_t b = 0; b < max_libraries; ++b)
        if (find_layout(layout_id(l)) && find_library(library_id(b)))
          for (data_type d : all_data_types)
            keys.emplace_back(p, d, data_layout(*find_layout(layout_id(l))),
                              library_type(*find_library(library_id(b))));
  return keys;
}
}  // namespace

TEST_CASE("every key prints and parses back to itself", "[vocabulary][parse]") {
  for (const kernel_key& key : all_keys(5)) {
    const kernel_key back = parse_kernel_key(key.to_string());
    REQUIRE(back == key);
    REQUIRE(back.to_string() == key.to_string());
  }
  // Fields in another order and other spellings read the same.
  CHECK(parse_kernel_key("{ library_type[mkldnn];place[CPU]; data_layout[nchw8c]; data_type[fp32] }") ==
        kernel_type<cpu, float, layout::nChw8c, library::onednn>::key());
}

TEST_CASE("ordinals are unique, invert, and lie in the place kind's range", "[vocabulary][ordinal]") {
  const auto keys = all_keys();
  // The core's 3 layouts and oneDNN's 3; PLAIN, ONEDNN and CUDNN.
  REQUIRE(keys.size() == 2 * data_type_count * 6 * 3);
  std::set<std::size_t> ordinals;
  for (const kernel_key& key : keys) {
    REQUIRE(key.ordinal() < kernel_key::ordinal_count);
    REQUIRE(ordinals.insert(key.ordinal()).second);
    REQUIRE(kernel_key::from_ordinal(key.ordinal()) == key);
    // Over the ids each axis reserves: a layout's ordinals do not move when another registers.
    REQUIRE(key.ordinal() == std::size_t(key.place().kind_id()) * kernel_key::keys_per_place_kind +
                                 (key.layout().id() * max_libraries + key.library().id()) * data_type_count +
                                 index_of(key.dtype()));
  }
  const std::size_t per_kind = kernel_key::keys_per_place_kind;
  CHECK(per_kind == data_type_count * max_layouts * max_libraries);
  CHECK(*ordinals.begin() == 0);
  CHECK(*std::next(ordinals.begin(), keys.size() / 2) == test_device::id * per_kind);
  // An id no layout or library has registered does not turn back into a key.
  CHECK_THROWS_WITH(kernel_key::from_ordinal((max_libraries - 1) * data_type_count),
                    Catch::Contains("library id 7") && Catch::Contains("PLAIN, ONEDNN, CUDNN"));
  CHECK_THROWS_WITH(kernel_key::from_ordinal((max_layouts - 1) * max_libraries * data_type_count),
                    Catch::Contains("layout id 31") && Catch::Contains("ANY_LAYOUT, NCHW, NHWC, nChw8c"));
  CHECK(kernel_key::from_ordinal(test_device::id * per_kind, 2).place() == place::of<test_device>(2));
  CHECK_THROWS_WITH(kernel_key::from_ordinal(3 * per_kind),
                    Catch::Contains("place kind id 3") && Catch::Contains("registered: cpu"));
  CHECK_THROWS_WITH(kernel_key::from_ordinal(kernel_key::ordinal_count), Catch::Contains("out of range"));
}

TEST_CASE(
    "keys are regular: equality, order and hashing compare every field, the device id too; "
    "same_kernel() ignores it",
    "[vocabulary][hash]") {
  const kernel_key on0 = kernel_type<test_device, float, layout::nchw>::key(0);
  const kernel_key on1 = kernel_type<test_device, float, layout::nchw>::key(1);
  CHECK(on0 != on1);
  CHECK((on0 < on1 || on1 < on0));
  CHECK(std::hash<kernel_key>{}(on0) != std::hash<kernel_key>{}(on1));
  CHECK(same_kernel(on0, on1));
  CHECK(on1 == kernel_type<test_device, float, layout::nchw>::key(1));
  CHECK(std::hash<kernel_key>{}(on1) ==
        std::hash<kernel_key>{}(kernel_type<test_device, float, layout::nchw>::key(1)));
  CHECK(on0.place() != on1.place());
  CHECK(on0.place().same_kind(on1.place()));
  CHECK(on0 != on0.with_dtype(data_type::float64));
  CHECK(on0 != on0.with_layout(data_layout::any));
  CHECK(on0 != on0.with_library(library_type_of<library::cudnn>));
  CHECK(on0 != on0.with_place(cpu_place));

  // No two distinct keys collide, so an unordered table needs no collision handling.
  const auto keys = all_keys();
  std::unordered_set<std::size_t> hashes;
  for (const kernel_key& key : keys) hashes.insert(std::hash<kernel_key>{}(key));
  CHECK(hashes.size() == keys.size());
  std::unordered_set<kernel_key> set(keys.begin(), keys.end());
  CHECK(set.size() == keys.size());
}

TEST_CASE("ordering is strict and agrees with equality", "[vocabulary][order]") {
  const auto keys = all_keys(1);
  for (std::size_t i = 0; i + 1 < keys.size(); ++i) {
    REQUIRE(keys[i] < keys[i + 1]);
    REQUIRE_FALSE(keys[i + 1] < keys[i]);
  }
  const kernel_key a = kernel_type<test_device, float>::key(0);
  const kernel_key b = kernel_type<test_device, float>::key(9);
  CHECK(a < b);  // the device id orders keys that are otherwise the same
  CHECK_FALSE(b < a);
  CHECK((a <=> b) == std::strong_ordering::less);
  CHECK((a <=> kernel_type<test_device, float>::key(0)) == std::strong_ordering::equal);
  CHECK(std::set<kernel_key>(keys.begin(), keys.end()).size() == keys.size());
}

namespace {
struct impostor {
  using place_tag = impostor;
  static constexpr place_kind_id id = 7;
  static constexpr std::string_view name = "impostor";
  static constexpr bool has_device_id = false;
  static constexpr bool host_accessible = true;
};
}  // namespace

TEST_CASE("a place kind id cannot be taken twice", "[vocabulary][place]") {
  CHECK_THROWS_AS(register_place_kind<impostor>(), registration_error);
  CHECK_THROWS_WITH(register_place_kind<impostor>(),
                    Catch::Contains("'impostor' declares id 7, which place kind 'testdev' already uses"));
  CHECK(parse_place("testdev:1").kind().name == "testdev");
  CHECK(register_place_kind<test_device>());  // registering the same kind again is harmless
  CHECK(test_device_registered);
}

namespace {
// Another tag with testdev's id and name, and other contents: keys of the two would compare
// equal and mean different things.
struct namesake {
  using place_tag = namesake;
  static constexpr place_kind_id id = 7;
  static constexpr std::string_view name = "testdev";
  static constexpr bool has_device_id = true;
  static constexpr bool host_accessible = true;
};
struct attribute_thief {
  using library_tag = attribute_thief;
  static constexpr library_id id = 7;
  static constexpr std::string_view name = "THIEF";
  static constexpr std::array<std::string_view, 1> request_attributes{"use_onednn"};
};
}  // namespace

TEST_CASE("a tag of another type is refused under a taken id, even with the same name", "[vocabulary]") {
  CHECK_THROWS_WITH(
      register_place_kind<namesake>(),
      "fluidk: place kind 'testdev' declares id 7, which place kind 'testdev' already uses (another tag "
      "of the same name); give it an unused id below 8");
  CHECK(parse_place("testdev:1").kind().host_accessible == test_device::host_accessible);
  // A library whose request attribute another library answers to: that attribute could select
  // only one of them.
  CHECK_THROWS_WITH(
      register_library<attribute_thief>(),
      Catch::Contains("library 'THIEF' (id 7) is asked for by attribute 'use_onednn', which asks "
                      "for library 'ONEDNN'"));
  CHECK(find_library(7) == nullptr);
}

TEST_CASE("places compare kind and device", "[vocabulary][place]") {
  constexpr place gpu0 = place::of<test_device>(0);
  constexpr place gpu1 = place::of<test_device>(1);
  static_assert(gpu0 != gpu1 && gpu0.same_kind(gpu1) && gpu1.device() == 1);
  static_assert(place::of<cpu>(5) == cpu_place);  // the host has one device
  static_assert(cpu_place.is<cpu>() && !gpu0.is<cpu>() && gpu0.is<test_device>());
  static_assert(cpu_place.host_accessible() && !gpu0.host_accessible());
  CHECK(std::hash<place>{}(gpu0) != std::hash<place>{}(gpu1));
}

// docs/programs.md, "Words a program may use": every word of the table reads as its row says.
TEST_CASE("the words docs/programs.md lists read as it says", "[vocabulary][parse][docs]") {
  const char* docs = std::getenv("FLUIDK_DOCS");
  REQUIRE(docs != nullptr);
  std::ifstream page(std::string(docs) + "/programs.md");
  REQUIRE(page);
  auto trim = [](std::string s) {
    const auto first = s.find_first_not_of(' '), last = s.find_last_not_of(' ');
    return first == std::string::npos ? std::string() : s.substr(first, last - first + 1);
  };
  std::string line;
  bool in_table = false;
  int words = 0;
  std::set<std::string> fields;
  while (std::getline(page, line)) {
    if (line == "| field | words | means |") {
      in_table = true;
      continue;
    }
    if (!in_table || line.rfind("|---", 0) == 0) continue;
    if (line.rfind("|", 0) != 0) break;
    std::vector<std::string> cells;
    std::stringstream row(line.substr(1));
    for (std::string cell; std::getline(row, cell, '|');) cells.push_back(trim(cell));
    REQUIRE(cells.size() == 3);
    const std::string& field = cells[0];
    const std::string& means = cells[2];
    fields.insert(field);
    std::stringstream list(cells[1]);
    for (std::string word; std::getline(list, word, ',');) {
      word = trim(word);
      INFO(field << ": '" << word << "' should mean " << means);
      if (field == "data type")
        CHECK(name_of(parse_data_type(word)) == means);
      else if (field == "layout")
        CHECK(name_of(parse_data_layout(word)) == means);
      else if (field == "library")
        CHECK(name_of(parse_library_type(word)) == means);
      else if (field == "place")
        CHECK(parse_place(word).to_string() == means);
      else
        FAIL("unknown field " << field);
      ++words;
    }
  }
  CHECK(fields == std::set<std::string>{"data type", "layout", "library", "place"});
  CHECK(words == 47);
}
