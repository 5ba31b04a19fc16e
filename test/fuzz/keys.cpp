// libFuzzer harness: the parsers of kernel keys, places, data types, layouts and libraries.
// Every input is either accepted or refused with a fluidk::parse_error (any other exception
// escapes and is a crash); what is accepted, printed and parsed again gives the same value,
// which prints the same text; a key's ordinal gives the key back.
#include <array>
#include <cstddef>
#include <cstdint>
#include <fluidk/kernel_type.hpp>
#include <string>
#include <string_view>

namespace {

// A place kind with device ids and an alias, as a GPU backend declares one, so that device
// ids are read and printed as well (the core knows only the CPU).
struct fuzz_gpu {
  using place_tag = fuzz_gpu;
  static constexpr fluidk::place_kind_id id = 5;
  static constexpr std::string_view name = "gpu";
  static constexpr bool has_device_id = true;
  static constexpr bool host_accessible = false;
  static constexpr std::array<std::string_view, 1> aliases{"cuda"};
};
const bool registered = fluidk::register_place_kind<fuzz_gpu>();

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static_cast<void>(registered);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto check = [&](auto parse, auto print) {
    try {
      const auto value = parse(text);
      const std::string printed = print(value);
      const auto again = parse(printed);
      if (!(again == value) || print(again) != printed) __builtin_trap();
    } catch (const fluidk::parse_error&) {
    }
  };
  check(
      [](std::string_view t) {
        const fluidk::kernel_key key = fluidk::parse_kernel_key(t);
        // A parsed key is one the ordinal table can hold and give back.
        if (key.ordinal() >= fluidk::kernel_key::ordinal_count ||
            !(fluidk::kernel_key::from_ordinal(key.ordinal(), key.place().device()) == key))
          __builtin_trap();
        return key;
      },
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
