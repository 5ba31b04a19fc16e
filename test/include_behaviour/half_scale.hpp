// The operator of the include-behaviour tests, written against fluidk/operator.hpp alone:
// Out = 2 X in float16 and NCHW, X cast to float16 (its data type comes from the attribute
// "dtype"), so that float NHWC data needs a layout change and a cast on the CPU first.
#pragma once

#include <cstdint>
#include <fluidk/operator.hpp>
#include <string>
#include <vector>

namespace include_behaviour {

struct half_scale_kernel {
  using dtype = fluidk::float16;
  using layouts = boost::mp11::mp_list<fluidk::layout::nchw>;
  void operator()(fluidk::execution_context& ctx) const {
    const fluidk::Tensor& x = ctx.input(0);
    fluidk::Tensor out(x.dims(), x.dtype(), ctx.place(), x.layout());
    for (std::int64_t i = 0; i < x.numel(); ++i)
      out.data<fluidk::float16>()[i] = fluidk::float16(2 * float(x.data<fluidk::float16>()[i]));
    ctx.output(0) = std::move(out);
  }
};

struct half_scale {
  static constexpr std::string_view name = "half_scale";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr std::string_view data_type_attribute = "dtype";
  static constexpr std::array<std::string_view, 1> cast_inputs{"X"};
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<fluidk::cpu>(half_scale_kernel{}));
};

// X: N = 1, C = 2, H = 1, W = 2, in NHWC, holding 0 1 2 3.
inline fluidk::Tensor nhwc_input() {
  fluidk::Tensor x({1, 2, 1, 2}, fluidk::data_type::float32, fluidk::cpu_place, fluidk::data_layout::nhwc);
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = float(i);
  return x;
}

// "<data type> <layout>: v0 v1 ..." of a CPU tensor of float16.
inline std::string describe(const fluidk::Tensor& t) {
  // Appended piece by piece: `" " + temporary` makes g++ 12 at -O3 report a false -Wrestrict.
  std::string out(fluidk::name_of(t.dtype()));
  out += ' ';
  out += fluidk::name_of(t.layout());
  out += ':';
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    out += ' ';
    out += std::to_string(int(float(t.data<fluidk::float16>()[i])));
  }
  return out;
}

}  // namespace include_behaviour
