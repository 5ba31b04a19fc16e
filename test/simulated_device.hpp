// A device declared the way a user adds one, through the public extension points only, and
// simulated in host memory: tests that need a second place without running device code
// (selection, planning, concurrency under the sanitizers) use it.
#pragma once

#include <array>
#include <fluidk/device.hpp>
#include <fluidk/devices/cpu.hpp>
#include <string_view>

namespace fluidk_test {

struct accelerator {
  using place_tag = accelerator;
  static constexpr fluidk::place_kind_id id = 6;
  static constexpr std::string_view name = "acc";
  static constexpr bool has_device_id = true;
  static constexpr bool host_accessible = false;
};

// The context of a device of kind P simulated in host memory: it has nothing to wait for.
template <class P>
class host_memory_context final : public fluidk::device_context {
 public:
  explicit host_memory_context(int device) : device_(device) {}
  fluidk::place place() const noexcept override { return fluidk::place::of<P>(device_); }
  void wait() override {}

 private:
  int device_;
};
using accelerator_context = host_memory_context<accelerator>;

}  // namespace fluidk_test

template <>
struct fluidk::device_traits<fluidk_test::accelerator> {
  using context_type = fluidk_test::accelerator_context;
  static int device_count() noexcept { return 2; }
  static void* allocate(int device, std::size_t bytes) { return device_traits<cpu>::allocate(device, bytes); }
  static void deallocate(int device, void* handle, std::size_t bytes) noexcept {
    device_traits<cpu>::deallocate(device, handle, bytes);
  }
};
template <>
struct fluidk::copy_traits<fluidk::cpu, fluidk_test::accelerator> : copy_traits<cpu, cpu> {};
template <>
struct fluidk::copy_traits<fluidk_test::accelerator, fluidk::cpu> : copy_traits<cpu, cpu> {};
template <>
struct fluidk::copy_traits<fluidk_test::accelerator, fluidk_test::accelerator> : copy_traits<cpu, cpu> {};

namespace fluidk_test {
inline const bool accelerator_registered =
    fluidk::register_device<accelerator>() && fluidk::register_copy<fluidk::cpu, accelerator>() &&
    fluidk::register_copy<accelerator, fluidk::cpu>() && fluidk::register_copy<accelerator, accelerator>();
}  // namespace fluidk_test
