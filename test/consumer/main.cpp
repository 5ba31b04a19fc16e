// A program that uses fluidk the way a client would: through the installed or subproject
// headers only, with each backend module its build found (the module's macro is then
// defined). Prints the version, then one line per backend it was built with.
#include <cstdio>
#include <fluidk/fluidk.hpp>
#if defined(FLUIDK_HAS_ONEDNN) && FLUIDK_HAS_ONEDNN
#include <fluidk/devices/onednn.hpp>
#endif
#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
#include <fluidk/devices/opencl.hpp>
#endif
#if defined(FLUIDK_HAS_CUDA) && FLUIDK_HAS_CUDA
#include <fluidk/devices/cuda.hpp>
#endif

static_assert(__cplusplus >= 202002L, "fluidk's build flags must select C++20");
static_assert(fluidk::version_major == FLUIDK_VERSION_MAJOR);

int main() {
  std::printf("fluidk %s\n", FLUIDK_VERSION_STRING);
#if defined(FLUIDK_HAS_ONEDNN) && FLUIDK_HAS_ONEDNN
  // A oneDNN engine made through the backend: the library linked and usable.
  std::printf("backend onednn: %s\n",
              fluidk::onednn_context::this_thread().engine().get_kind() == dnnl::engine::kind::cpu
                  ? "ok"
                  : "no engine");
#endif
#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
  // The loader linked; the number of devices is this machine's (PoCL gives one).
  std::printf("backend opencl: ok (%d devices)\n", fluidk::device_traits<fluidk::opencl>::device_count());
#endif
#if defined(FLUIDK_HAS_CUDA) && FLUIDK_HAS_CUDA
  // The runtime linked; without a GPU it counts none.
  std::printf("backend cuda: ok (%d devices)\n", fluidk::device_traits<fluidk::cuda>::device_count());
#endif
  return 0;
}
