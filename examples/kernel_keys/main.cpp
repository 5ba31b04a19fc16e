// kernel_keys: prints the places compiled in and the kernel keys of a sample operator, or
// reads the kernel keys given on the command line and prints each in canonical form.
//
//   kernel_keys                                     the overview
//   kernel_keys '{data_type[fp16]; data_layout[nchw8c]; place[gpu:1]; library_type[mkldnn]}'
#include <boost/mp11/algorithm.hpp>
#include <cstdio>
#include <fluidk/devices/cudnn_tags.hpp>
#include <fluidk/devices/enabled.hpp>
#include <fluidk/devices/onednn_tags.hpp>
#include <fluidk/fluidk.hpp>
#include <string>

namespace {

void print_overview() {
  std::printf("fluidk %s\n\nplaces compiled in:\n", FLUIDK_VERSION_STRING);
  boost::mp11::mp_for_each<fluidk::enabled_places>([](auto tag) {
    using P = decltype(tag);
    std::printf("  %-8.*s id %d  %s  %s\n", int(P::name.size()), P::name.data(), int(P::id),
                fluidk::place::of<P>(0).to_string().c_str(),
                P::host_accessible ? "host memory" : "device memory");
  });

  // The kernels Fluid registered for conv2d, as fluidk's compile-time keys.
  std::printf("\nconv2d's kernels as kernel keys (ordinal: key):\n");
  using namespace fluidk;
  const kernel_key keys[] = {
    kernel_type<cpu, float, layout::any, library::plain>{},
    kernel_type<cpu, double, layout::any, library::plain>{},
    kernel_type<cpu, float, layout::nChw8c, library::onednn>{},
    kernel_type<cpu, float, layout::nChw16c, library::onednn>{},
#if defined(FLUIDK_HAS_CUDA) && FLUIDK_HAS_CUDA
    kernel_type<cuda, float, layout::any, library::plain>{},
    kernel_type<cuda, float16, layout::nchw, library::cudnn>{},
#endif
#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
    kernel_type<opencl, float, layout::nchw, library::plain>{},
#endif
  };
  for (const kernel_key& key : keys) std::printf("  %5zu: %s\n", key.ordinal(), key.to_string().c_str());
  std::printf(
      "\n%zu ordinals in the key space (%zu place kinds x %zu data types x %zu layout ids x %zu library "
      "ids)\n",
      kernel_key::ordinal_count, max_place_kinds, data_type_count, max_layouts, max_libraries);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 1) {
    print_overview();
    return 0;
  }
  int status = 0;
  for (int i = 1; i < argc; ++i) {
    try {
      const fluidk::kernel_key key = fluidk::parse_kernel_key(argv[i]);
      std::printf("%5zu: %s\n", key.ordinal(), key.to_string().c_str());
    } catch (const fluidk::parse_error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      status = 1;
    }
  }
  return status;
}
