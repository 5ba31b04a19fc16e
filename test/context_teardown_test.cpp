// A device kind whose runtime starts with its first context, not when its devices are counted,
// and is torn down at exit: the contexts of its devices are destroyed before its runtime, so
// that they can release what they hold through it (as CUDA's contexts release their cuDNN and
// cuBLAS handles). The device count is read before the first context is made, and the first call
// of the program asks for a context; a context destroyed after its runtime ends the process with
// code 1, and so does a context given to a destructor that runs after the pool was destroyed. Its own
// executable: what it checks happens after main returns. Without Catch2, which would add static objects of
// its own.
#include <cstdio>
#include <cstdlib>
#include <fluidk/device.hpp>
#include <fluidk/devices/cpu.hpp>
#include <string_view>

namespace {

// The runtime: started by the first call that needs it, torn down by the static destructors.
bool runtime_alive = false;
struct runtime {
  runtime() noexcept { runtime_alive = true; }
  ~runtime() { runtime_alive = false; }
};
void start_runtime() { static const runtime started; }

struct late_runtime_kind {
  using place_tag = late_runtime_kind;
  static constexpr fluidk::place_kind_id id = 6;
  static constexpr std::string_view name = "late_runtime";
  static constexpr bool has_device_id = true;
  static constexpr bool host_accessible = true;
};

class late_runtime_context final : public fluidk::device_context {
 public:
  explicit late_runtime_context(int device) : device_(device) { start_runtime(); }
  ~late_runtime_context() override {
    if (!runtime_alive) {
      std::fputs("FAIL: a context was destroyed after its device's runtime was torn down\n", stderr);
      std::_Exit(1);
    }
  }
  fluidk::place place() const noexcept override { return fluidk::place::of<late_runtime_kind>(device_); }
  void wait() override {}

 private:
  int device_;
};

}  // namespace

template <>
struct fluidk::device_traits<late_runtime_kind> : fluidk::device_traits<fluidk::cpu> {
  using context_type = late_runtime_context;
  static int device_count() noexcept { return 1; }
};

namespace {
// Made before main, so destroyed after the pool of contexts: a destructor that asks for a
// device then (as one that flushes a tensor to the host would) gets device_unavailable, not a
// context out of the destroyed pool.
struct late_user {
  ~late_user() {
    try {
      (void)fluidk::context_of<late_runtime_kind>(0);
      std::fputs("FAIL: a context was given after the pool of contexts was destroyed\n", stderr);
      std::_Exit(1);
    } catch (const fluidk::device_unavailable&) {
    }
  }
} late_user_at_exit;
}  // namespace

int main() {
  auto& context = fluidk::context_of<late_runtime_kind>(0);
  if (!(context.place() == fluidk::place::of<late_runtime_kind>(0))) {
    std::puts("FAIL: context_of gave another place's context");
    return 1;
  }
  std::puts("ok: the context is made; the check runs at exit");
  return 0;
}
