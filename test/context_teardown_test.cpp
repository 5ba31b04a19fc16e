// A device kind whose runtime starts with its first context, not when its devices are counted,
// and is torn down at exit: the contexts of its devices are destroyed before its runtime, so
// that they can release what they hold through it (as CUDA's contexts release their cuDNN and
// cuBLAS handles). The device count is read before the first context is made, and the first call
// of the program asks for a context; a context destroyed after its runtime ends the process with
// code 1, and so does a context given to a destructor that runs after the pool was destroyed. Its
// buffers go through a device_memory_cache in the context, as CUDA's and OpenCL's do: the context
// gives its cached buffers back when it is destroyed, and a buffer freed after that goes straight
// back to the device, not into the destroyed cache. A copy or an allocation asked for then fails
// with an error that names the copy or the allocation once (a single "fluidk: " prefix); with the
// OpenCL backend, its allocator and copies are checked so too. Its own executable: what it checks
// happens after main returns. Without Catch2, which would add static objects of its own.
#include <cstdio>
#include <cstdlib>
#include <fluidk/device.hpp>
#include <fluidk/device_memory_cache.hpp>
#include <fluidk/devices/cpu.hpp>
#include <string>
#include <string_view>
#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
#include <fluidk/devices/opencl.hpp>
#include <fluidk/tensor.hpp>
#endif

namespace {

// The runtime: started by the first call that needs it, torn down by the static destructors.
bool runtime_alive = false;
struct runtime {
  runtime() noexcept { runtime_alive = true; }
  ~runtime() { runtime_alive = false; }
};
void start_runtime() { static const runtime started; }

int raw_releases = 0;  // buffers given back to the device (std::free) rather than to the cache

struct late_runtime_kind {
  using place_tag = late_runtime_kind;
  static constexpr fluidk::place_kind_id id = 6;
  static constexpr std::string_view name = "late_runtime";
  static constexpr bool has_device_id = true;
  static constexpr bool host_accessible = true;
};

class late_runtime_context final : public fluidk::device_context {
 public:
  explicit late_runtime_context(int device) : device_(device), memory_(device, &release_buffer) {
    start_runtime();
  }
  ~late_runtime_context() override {
    if (!runtime_alive) {
      std::fputs("FAIL: a context was destroyed after its device's runtime was torn down\n", stderr);
      std::_Exit(1);
    }
  }
  fluidk::place place() const noexcept override { return fluidk::place::of<late_runtime_kind>(device_); }
  void wait() override {}
  fluidk::device_memory_cache& memory_cache() noexcept { return memory_; }
  static void release_buffer(int, void* handle) noexcept {
    std::free(handle);
    ++raw_releases;
  }

 private:
  int device_;
  fluidk::device_memory_cache memory_;
};

}  // namespace

template <>
struct fluidk::device_traits<late_runtime_kind> : fluidk::device_traits<fluidk::cpu> {
  using context_type = late_runtime_context;
  static int device_count() noexcept { return 1; }
  static void* allocate(int device, std::size_t bytes) {
    return fluidk::context_of<late_runtime_kind>(device).memory_cache().allocate(
        bytes, [](std::size_t n) { return std::malloc(n); }, [] {});
  }
  static void deallocate(int device, void* handle, std::size_t bytes) noexcept {
    fluidk::deallocate_to_cache<late_runtime_kind>(device, handle, bytes);
  }
};

namespace {

// `call` throws an E whose message begins with `begin`, holds `part` and has one "fluidk: "
// prefix; else the process ends with code 1, naming `check`.
template <class E, class Call>
void expect_error(const char* check, Call call, std::string_view begin, std::string_view part) {
  try {
    call();
  } catch (const E& e) {
    const std::string_view what = e.what();
    const bool prefixed_once = what.find("fluidk: ", 1) == std::string_view::npos;
    if (what.substr(0, begin.size()) == begin && what.find(part) != std::string_view::npos && prefixed_once)
      return;
    std::fprintf(stderr, "FAIL: %s: the message is \"%.*s\"\n", check, int(what.size()), what.data());
    std::_Exit(1);
  }
  std::fprintf(stderr, "FAIL: %s: no error\n", check);
  std::_Exit(1);
}

// Made before main, so destroyed after the pool of contexts: a destructor that asks for a
// device then (as one that flushes a tensor to the host would) gets device_unavailable, not a
// context out of the destroyed pool.
struct late_user {
  void* buffer = nullptr;  // allocated in main, freed here
  ~late_user() {
    if (raw_releases != 1) {
      std::fputs("FAIL: the destroyed context did not give its cached buffer back to the device\n", stderr);
      std::_Exit(1);
    }
    fluidk::device_traits<late_runtime_kind>::deallocate(0, buffer, 32);
    if (raw_releases != 2) {
      std::fputs("FAIL: a buffer freed after its context was destroyed did not go back to the device\n",
                 stderr);
      std::_Exit(1);
    }
    try {
      (void)fluidk::context_of<late_runtime_kind>(0);
      std::fputs("FAIL: a context was given after the pool of contexts was destroyed\n", stderr);
      std::_Exit(1);
    } catch (const fluidk::device_unavailable&) {
    }
    const fluidk::memory_ref host{fluidk::cpu_place, nullptr, 0};
    const fluidk::memory_ref device{fluidk::place::of<late_runtime_kind>(0), nullptr, 0};
    expect_error<fluidk::device_unavailable>(
        "a copy's context after the pool",
        [&] { (void)fluidk::copy_context_of<late_runtime_kind>(0, host, device); },
        "fluidk: copy from Place(late_runtime:0) to Place(cpu): no device Place(late_runtime:0)",
        "destroyed at exit");
#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
    if (opencl_kept.initialized()) check_opencl();
#endif
  }
#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
  // An OpenCL tensor made in main, freed here, after the OpenCL contexts (and maybe the list of
  // OpenCL devices) are gone.
  fluidk::Tensor opencl_kept;
  void check_opencl() const {
    expect_error<fluidk::allocation_error>(
        "an OpenCL allocation after the contexts",
        [] {
          const fluidk::Tensor late({4}, fluidk::data_type::float32, fluidk::place::of<fluidk::opencl>(0));
        },
        "fluidk: cannot allocate 16 bytes on Place(opencl:0): no device Place(opencl:0)",
        "destroyed at exit");
    expect_error<fluidk::device_unavailable>(
        "an OpenCL copy after the contexts", [&] { (void)fluidk::copy_to(opencl_kept, fluidk::cpu_place); },
        "fluidk: copy from Place(opencl:0) to Place(cpu): no device Place(opencl:0)", "destroyed at exit");
  }
#endif
} late_user_at_exit;
}  // namespace

int main() {
  auto& context = fluidk::context_of<late_runtime_kind>(0);
  if (!(context.place() == fluidk::place::of<late_runtime_kind>(0))) {
    std::puts("FAIL: context_of gave another place's context");
    return 1;
  }
  using traits = fluidk::device_traits<late_runtime_kind>;
  void* first = traits::allocate(0, 64);
  traits::deallocate(0, first, 64);
  void* again = traits::allocate(0, 64);
  if (again != first || context.memory_cache().stats().reuses != 1) {
    std::puts("FAIL: a freed buffer was not reused for the next allocation of its size");
    return 1;
  }
  traits::deallocate(0, again, 64);  // cached until the context is destroyed
  late_user_at_exit.buffer = traits::allocate(0, 32);
#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
  const int opencl_devices = fluidk::device_traits<fluidk::opencl>::device_count();
  if (opencl_devices > 0)
    late_user_at_exit.opencl_kept =
        fluidk::Tensor({4}, fluidk::data_type::float32, fluidk::place::of<fluidk::opencl>(0));
  else
    std::puts("skipped: the OpenCL checks at exit (no OpenCL device)");
#endif
  std::puts("ok: the context is made; the check runs at exit");
  return 0;
}
