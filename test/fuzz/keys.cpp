// libFuzzer harness: the parsers of kernel keys, places, data types, layouts and libraries.
// Every input is either accepted or refused with a fluidk::parse_error; what is accepted,
// printed and parsed again gives the same value.
#include <cstddef>
#include <cstdint>
#include <fluidk/kernel_type.hpp>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto check = [&](auto parse, auto print) {
    try {
      const auto value = parse(text);
      if (parse(print(value)) != value) __builtin_trap();
    } catch (const fluidk::parse_error&) {
    }
  };
  check([](std::string_view t) { return fluidk::parse_kernel_key(t); },
        [](const fluidk::kernel_key& k) { return k.to_string(); });
  check([](std::string_view t) { return fluidk::parse_place(t); },
        [](const fluidk::place& p) { return p.to_string(); });
  check([](std::string_view t) { return fluidk::parse_data_type(t); },
        [](fluidk::data_type d) { return std::string(fluidk::name_of(d)); });
  check([](std::string_view t) { return fluidk::parse_data_layout(t); },
        [](fluidk::data_layout l) { return std::string(fluidk::name_of(l)); });
  check([](std::string_view t) { return fluidk::parse_library_type(t); },
        [](fluidk::library_type l) { return std::string(fluidk::name_of(l)); });
  return 0;
}
