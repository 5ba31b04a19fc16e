// The CUDA backend header compiled by the host compiler alone (no nvcc): without a device it
// reports 0 devices, refuses allocations and contexts with clear errors and never crashes;
// with a device it runs a small host -> GPU -> host round trip instead (the no-device checks
// are then skipped, and say so). Exit 0 on success, 1 on failure.
#include <cstdint>
#include <cstdio>
#include <fluidk/devices/cuda.hpp>
#include <fluidk/tensor.hpp>
#include <string>

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  if (!ok) ++failures;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Runs `body`, which must throw E; `inspect` checks the caught exception's message.
template <class E, class Body, class Inspect>
void check_throws(const std::string& what, Body body, Inspect inspect) {
  try {
    body();
    check(false, what + " (nothing thrown)");
  } catch (const E& e) {
    check(inspect(e), what + " [" + e.what() + "]");
  } catch (const std::exception& e) {
    check(false, what + " (wrong exception: " + e.what() + ")");
  }
}

void without_device() {
  using namespace fluidk;
  const place gpu0 = place::of<cuda>(0);
  check(device_count(gpu0) == 0, "device_count(Place(gpu:0)) == 0");
  check(device_traits<cuda>::device_count() == 0, "device_traits<cuda>::device_count() == 0");
  check(!cuda_available(), "cuda_available() is false");
  check(cuda_unavailable_reason().rfind("no CUDA device (", 0) == 0,
        "cuda_unavailable_reason() says why: " + cuda_unavailable_reason());
  check(parse_place("cuda:1") == place::of<cuda>(1) && parse_place("Place(gpu:0)") == gpu0,
        "the gpu place kind is registered for parsing");

  check_throws<allocation_error>(
      "allocating on Place(gpu:0) throws allocation_error", [&] { Tensor t({4}, data_type::float32, gpu0); },
      [&](const allocation_error& e) {
        const std::string what = e.what();
        return e.where() == gpu0 && e.bytes() == 16 && contains(what, "16 bytes on Place(gpu:0)") &&
               contains(what, "no CUDA device");
      });
  check_throws<allocation_error>(
      "allocating on Place(gpu:3) throws allocation_error",
      [] { static_cast<void>(device_traits<cuda>::allocate(3, 1)); },
      [](const allocation_error& e) {
        return contains(e.what(), "1 bytes on Place(gpu:3)") && contains(e.what(), "no CUDA device");
      });
  check(device_traits<cuda>::allocate(0, 0) == nullptr, "allocating 0 bytes gives nullptr without a device");
  device_traits<cuda>::deallocate(0, nullptr, 0);  // a no-op, never throws

  check_throws<device_unavailable>(
      "context_of<cuda>(0) throws device_unavailable", [] { static_cast<void>(context_of<cuda>(0)); },
      [](const device_unavailable& e) { return contains(e.what(), "Place(gpu:0)"); });
  check_throws<device_unavailable>(
      "context_of(Place(gpu:0)) throws device_unavailable", [&] { static_cast<void>(context_of(gpu0)); },
      [](const device_unavailable& e) { return contains(e.what(), "Place(gpu:0)"); });

  // Empty tensors need no memory, so they can be made and "moved" without a device.
  const Tensor empty({0}, data_type::float32);
  check(copy_to(empty, gpu0).place() == gpu0, "an empty tensor moves to Place(gpu:0) without a device");

  // A copy to a device that is not there names both ends.
  Tensor host({4}, data_type::float32);
  std::byte fake[16]{};
  check_throws<device_unavailable>(
      "copying to Place(gpu:0) throws device_unavailable",
      [&] {
        copy_bytes(memory_ref{gpu0, fake, 0}, host.memory(), 16);
      },
      [](const device_unavailable& e) {
        return contains(e.what(), "copy from Place(cpu) to Place(gpu:0)") &&
               contains(e.what(), "0 device(s)");
      });
}

void with_device() {
  using namespace fluidk;
  std::printf("skipped: the no-device checks (%d CUDA device(s) present); running a round trip instead\n",
              device_count(place::of<cuda>(0)));
  const place gpu0 = place::of<cuda>(0);
  Tensor host({1000}, data_type::int64);
  for (std::int64_t i = 0; i < 1000; ++i) host.data<std::int64_t>()[i] = i * i - 17;
  const Tensor on_device = copy_to(host, gpu0);
  check(on_device.place() == gpu0, "the copy is on Place(gpu:0)");
  const Tensor on_device_again = copy_to(on_device, gpu0);
  const Tensor back = copy_to(on_device_again, cpu_place);
  bool same = true;
  for (std::int64_t i = 0; i < 1000; ++i) same = same && back.data<std::int64_t>()[i] == i * i - 17;
  check(same, "host -> gpu:0 -> gpu:0 -> host round trip is exact");
  cuda_context& context = context_of<cuda>(0);
  check(context.place() == gpu0 && context.stream() != nullptr, "context_of<cuda>(0) has a stream");
  context.wait();
  // 4 EiB of doubles: the byte count fits, the device's memory does not. (2^60 doubles would not
  // fit the address space, and the tensor refuses them before it asks the allocator.)
  check_throws<allocation_error>(
      "a 4 EiB allocation throws allocation_error",
      [&] { Tensor t({std::int64_t(1) << 59}, data_type::float64, gpu0); },
      [](const allocation_error& e) { return contains(e.what(), "bytes on Place(gpu:0)"); });
}

}  // namespace

int main() {
  try {
    if (fluidk::cuda_available())
      with_device();
    else
      without_device();
  } catch (const std::exception& e) {
    check(false, std::string("unexpected exception: ") + e.what());
  }
  std::printf("%s\n", failures == 0 ? "all checks passed" : "some checks FAILED");
  return failures == 0 ? 0 : 1;
}
