// reshape2 (X, Shape -> Out, XShape): Fluid's reshape2. Out is X with the dims that the
// attribute shape (ints) gives, or the optional input Shape (a 1-D int32 or int64 tensor, read
// on the host; it overrides the attribute): a 0 copies X's dim at that index, one -1 is
// inferred from the element count, every other value is the extent itself. Two -1s, a 0 past
// X's rank, another negative value or a shape of another element count are refused. XShape,
// optional, is Fluid's [0, X's dims...], which holds no elements. Out keeps X's sequence
// offsets when its rows are X's.
//
// Out is a view: it shares X's storage, with other dims (layout ANY), when X is in row-major
// order; an NHWC X is brought to that order first (a copy). fluidk never writes an input, and a
// write to X's storage through any tensor moves the version that Out shares, so a cached copy
// of Out is never served stale.
//
// Kernels: one view for every place and data type it is registered for: CPU (float, double,
// int32, int64), OpenCL (float) and CUDA (float, double), the last two a view of the device
// buffer (a Shape there is copied to the host: a few values). No oneDNN kernel: use_onednn
// falls back to the CPU's (policy cpu). Each is declared for layout ANY, so fluidk brings
// blocked (nChw8c, nChw16c) data to NCHW first; Shape is exempt from every transform.
#pragma once

#include <array>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ops/detail/common.hpp"
#include "ops/detail/network_shape.hpp"

namespace fluidk::ops {

// The shape asked for: input Shape's values when given, else attribute shape's.
inline std::vector<std::int64_t> reshape2_request(const execution_context& ctx) {
  if (detail::has_input(ctx, "Shape")) {
    const Tensor& given = ctx.input("Shape");
    detail::require(given.dtype() == data_type::int32 || given.dtype() == data_type::int64, ctx,
                    "input Shape holds " + std::string(name_of(given.dtype())) + ", not int32 or int64");
    detail::require(given.dims().rank() <= 1, ctx,
                    "input Shape must be 1-D, not " + given.dims().to_string());
    const Tensor shape = given.place().host_accessible() ? given : copy_to(given, cpu_place);
    if (shape.dtype() == data_type::int32) {
      const std::int32_t* v = shape.data<std::int32_t>();
      return {v, v + shape.numel()};
    }
    const std::int64_t* v = shape.data<std::int64_t>();
    return {v, v + shape.numel()};
  }
  const attribute* a = ctx.attributes().find("shape");
  detail::require(a != nullptr, ctx, "needs attribute 'shape' (ints) or input Shape");
  return detail::int_list(ctx, "shape", *a);
}

// Out's dims for X's, as Fluid's ReshapeOp::ValidateShape makes them.
inline dims reshape2_dims(const execution_context& ctx, const dims& x) {
  const std::vector<std::int64_t> request = reshape2_request(ctx);
  auto asked = [&] {
    std::string s = "[";
    for (std::size_t i = 0; i < request.size(); ++i) s += (i ? ", " : "") + std::to_string(request[i]);
    return s + "] for X " + x.to_string();
  };
  detail::require(request.size() <= max_rank, ctx,
                  "shape " + asked() + " has more than fluidk's " + std::to_string(max_rank) + " dims");
  std::vector<std::int64_t> out(request.size());
  std::size_t inferred = request.size();  // the index of the -1, if any
  std::int64_t known = 1;                 // the product of the other extents
  bool overflow = false;
  for (std::size_t i = 0; i < request.size(); ++i) {
    const std::int64_t v = request[i];
    if (v == -1) {
      detail::require(inferred == request.size(), ctx, "shape " + asked() + " has more than one -1");
      inferred = i;
      continue;
    }
    detail::require(v >= 0, ctx,
                    "shape " + asked() + " has " + std::to_string(v) + " at index " + std::to_string(i) +
                        " (only -1 is inferred)");
    detail::require(v != 0 || i < x.rank(), ctx,
                    "shape " + asked() + " has 0 at index " + std::to_string(i) +
                        ", which copies X's dim there, but X has " + std::to_string(x.rank()));
    out[i] = v == 0 ? x[i] : v;
    overflow = overflow || checked_mul(known, out[i], known);
  }
  if (inferred < request.size()) {
    detail::require(!overflow && known != 0, ctx,
                    "shape " + asked() + ": the -1 cannot be inferred when the other extents multiply to " +
                        (overflow ? std::string("more than int64 holds") : std::string("0")));
    detail::require(x.numel() % known == 0, ctx,
                    "shape " + asked() + ": " + std::to_string(x.numel()) + " elements do not divide into " +
                        std::to_string(known));
    out[inferred] = x.numel() / known;
    known = x.numel();
  }
  detail::require(!overflow && known == x.numel(), ctx,
                  "shape " + asked() + " does not hold X's " + std::to_string(x.numel()) + " elements");
  return dims(std::span<const std::int64_t>(out));
}

template <class T>
struct reshape2_view {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    const dims out = reshape2_dims(ctx, x.dims());
    detail::set_xshape(ctx, x);
    detail::set_output_sharing_input(ctx, "Out", detail::reshaped_view(x, out),
                                     detail::offsets_if_rows_kept(ctx, "X", x.dims(), out));
  }
};

struct reshape2 {
  static constexpr std::string_view name = "reshape2";
  static constexpr std::array<std::string_view, 2> inputs{"X", "Shape"};
  static constexpr std::array<std::string_view, 2> outputs{"Out", "XShape"};
  // Shape is read where it is (on the host, or copied there), in its own data type.
  static constexpr std::array<std::string_view, 1> no_transform_inputs{"Shape"};
  // Where the expected kernel type has no kernel (use_onednn; another data type on a device),
  // the CPU kernel of the same data type runs, counted and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(reshape2_view<float>{}, reshape2_view<double>{}, reshape2_view<std::int32_t>{},
                              reshape2_view<std::int64_t>{}),
#if FLUIDK_OPS_OPENCL
      fluidk::kernels_on<opencl>(reshape2_view<float>{}),
#endif
#if FLUIDK_OPS_CUDA
      fluidk::kernels_on<cuda>(reshape2_view<float>{}, reshape2_view<double>{}),
#endif
      detail::no_kernels());
};

}  // namespace fluidk::ops
