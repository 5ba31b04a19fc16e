// elementwise_add (X, Y -> Out): Out = X + Y with Fluid's broadcasting. Y has X's shape, or
// its dimensions (trailing 1s dropped) match X's from dimension `axis` on (attribute, int,
// default -1: rank(X) - rank(Y), Y's rank counted with its trailing 1s, as Fluid's
// elementwise_op_function.h does before it drops them), and Y is repeated over the others:
// a row vector [D] adds to every row of X [..., D], and Y [C, 1] to X [N, C, H, W] along C.
// Out has X's shape, layout (when X and Y share it) and sequence offsets.
//
// Kernels: CPU plain (float, double), CPU oneDNN (float: the binary primitive, with its own
// broadcasting of Y), CUDA (float, double) and OpenCL (float).
#pragma once

#include <array>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/detail/common.hpp"
#if FLUIDK_OPS_ONEDNN
#include "ops/detail/onednn.hpp"
#endif
#if FLUIDK_OPS_OPENCL
#include "ops/detail/opencl.hpp"
#endif
#if FLUIDK_OPS_CUDA
#include "ops/detail/cuda.hpp"
#endif

namespace fluidk::ops {

// How Y lines up with X: X as [pre, n, post] and Y as [n], or the same shape and layout
// (then the storage adds elementwise, whatever the layout).
struct elementwise_geometry {
  bool same;  // same dims, and the same layout or both in row-major order
  std::int64_t pre = 1, n = 1, post = 1;
  std::size_t axis = 0;    // where Y's dims start in X's
  std::size_t y_rank = 0;  // Y's rank without trailing 1s

  // The device kernels' view: c[i] = a[i] + b[(i / post) % n] for i < total.
  struct flat {
    std::int64_t total, n, post;
  };
  flat flattened(const Tensor& x) const {
    if (same) {
      const std::int64_t all = detail::storage_elements(x);
      return {all, all > 0 ? all : 1, 1};
    }
    return {pre * n * post, n, post};
  }

  static elementwise_geometry of(const execution_context& ctx, const Tensor& x, const Tensor& y) {
    elementwise_geometry g{};
    // Equal dims add elementwise whatever the layouts' names, when the bytes are in one order.
    g.same = x.dims() == y.dims() && (x.layout() == y.layout() || (detail::row_major_order(x.layout()) &&
                                                                   detail::row_major_order(y.layout())));
    if (g.same) return g;
    // The default axis from Y's rank as given; then Fluid drops Y's trailing 1s.
    const std::int64_t axis_attr = detail::int_attr(ctx, "axis", -1);
    const std::int64_t axis =
        axis_attr == -1 ? std::int64_t(x.dims().rank()) - std::int64_t(y.dims().rank()) : axis_attr;
    std::size_t ry = y.dims().rank();
    while (ry > 0 && y.dims()[ry - 1] == 1) --ry;
    bool fits = axis >= 0 && std::size_t(axis) + ry <= x.dims().rank();
    for (std::size_t i = 0; fits && i < ry; ++i) fits = x.dims()[std::size_t(axis) + i] == y.dims()[i];
    detail::require(fits, ctx,
                    "Y " + y.dims().to_string() + " does not broadcast to X " + x.dims().to_string() +
                        " at axis " + std::to_string(axis));
    g.axis = std::size_t(axis);
    g.y_rank = ry;
    g.pre = detail::product(x.dims(), 0, g.axis);
    g.n = detail::product(x.dims(), g.axis, g.axis + ry);
    g.post = detail::product(x.dims(), g.axis + ry, x.dims().rank());
    return g;
  }
};

namespace detail {
// X and Y as the kernels read them: as given when they share dims and layout, else both in
// row-major order (the broadcast is defined on logical dimensions).
inline std::pair<Tensor, Tensor> elementwise_operands(const execution_context& ctx) {
  const Tensor& x = input(ctx, "X");
  const Tensor& y = input(ctx, "Y");
  if (x.dims() == y.dims() && x.layout() == y.layout()) return {x, y};
  return {row_major(x), row_major(y)};
}
}  // namespace detail

template <class T>
struct elementwise_add_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const auto [x, y] = detail::elementwise_operands(ctx);
    const elementwise_geometry g = elementwise_geometry::of(ctx, x, y);
    Tensor out(x.dims(), data_type_of<T>, ctx.place(), x.layout());
    const T* a = x.data<T>();
    const T* b = y.data<T>();
    T* c = out.data<T>();
    if (g.same) {
      const std::int64_t n = detail::storage_elements(x);
      for (std::int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
    } else {
      for (std::int64_t i = 0; i < g.pre; ++i)
        for (std::int64_t j = 0; j < g.n; ++j) {
          const std::int64_t base = (i * g.n + j) * g.post;
          for (std::int64_t k = 0; k < g.post; ++k) c[base + k] = a[base + k] + b[j];
        }
    }
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};

#if FLUIDK_OPS_ONEDNN
template <class T>
struct elementwise_add_onednn {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the oneDNN elementwise_add kernel computes in float");

  void operator()(execution_context& ctx) const {
    using dnnl::memory;
    const auto [x, y] = detail::elementwise_operands(ctx);
    const elementwise_geometry g = elementwise_geometry::of(ctx, x, y);
    Tensor out(x.dims(), data_type::float32, ctx.place(), x.layout());
    if (x.numel() > 0) {
      onednn_context& dnn = detail::onednn_of(ctx);
      // The same shape and layout: flat vectors over the storage. Broadcasting: X as
      // [pre, n, post] and Y as [1, n, 1], which oneDNN broadcasts.
      const memory::dims x_shape =
          g.same ? memory::dims{detail::storage_elements(x)} : memory::dims{g.pre, g.n, g.post};
      const memory::dims y_shape = g.same ? x_shape : memory::dims{1, g.n, 1};
      memory src0 = detail::onednn_plain_memory(x, x_shape, dnn.engine());
      memory src1 = detail::onednn_plain_memory(y, y_shape, dnn.engine());
      memory dst = detail::onednn_plain_memory(out, x_shape, dnn.engine());
      const dnnl::binary::primitive_desc pd(
          dnnl::binary::desc(dnnl::algorithm::binary_add, src0.get_desc(), src1.get_desc(), dst.get_desc()),
          dnn.engine());
      dnnl::binary(pd).execute(dnn.stream(),
                               {{DNNL_ARG_SRC_0, src0}, {DNNL_ARG_SRC_1, src1}, {DNNL_ARG_DST, dst}});
      dnn.wait();
    }
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto elementwise_add_onednn_kernels =
    fluidk::kernels_on<cpu, library::onednn>(elementwise_add_onednn<float>{});
}
#else
namespace detail {
inline constexpr auto elementwise_add_onednn_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_OPENCL
template <class T>
struct elementwise_add_opencl {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the OpenCL elementwise_add kernel computes in float");

  void operator()(execution_context& ctx) const {
    const auto [x, y] = detail::elementwise_operands(ctx);
    const elementwise_geometry g = elementwise_geometry::of(ctx, x, y);
    Tensor out(x.dims(), data_type::float32, ctx.place(), x.layout());
    const auto f = g.flattened(x);
    if (f.total > 0)
      detail::opencl_launch(ctx, "add_f32", std::size_t(f.total), 1, detail::cl_arg<float>(x),
                            detail::cl_arg<float>(y), detail::cl_buffer(out), cl_ulong(f.total),
                            cl_ulong(f.n), cl_ulong(f.post));
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto elementwise_add_opencl_kernels =
    fluidk::kernels_on<opencl>(elementwise_add_opencl<float>{});
}
#else
namespace detail {
inline constexpr auto elementwise_add_opencl_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_CUDA
template <class T>
struct elementwise_add_cuda {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    detail::cuda_call call(ctx);
    const auto [x, y] = detail::elementwise_operands(ctx);
    const elementwise_geometry g = elementwise_geometry::of(ctx, x, y);
    Tensor out(x.dims(), data_type_of<T>, ctx.place(), x.layout());
    const auto f = g.flattened(x);
    detail::cuda_require(
        cuda_launch::add<T>(call.stream(), detail::device_data<T>(x), detail::device_data<T>(y),
                            detail::device_data<T>(out), f.total, f.n, f.post),
        ctx, "the elementwise_add kernel");
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto elementwise_add_cuda_kernels =
    fluidk::kernels_on<cuda>(elementwise_add_cuda<float>{}, elementwise_add_cuda<double>{});
}
#else
namespace detail {
inline constexpr auto elementwise_add_cuda_kernels = no_kernels();
}
#endif

struct elementwise_add {
  static constexpr std::string_view name = "elementwise_add";
  static constexpr std::array<std::string_view, 2> inputs{"X", "Y"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // Where the expected kernel type has no kernel (use_onednn with double data or in a build
  // without oneDNN; double on OpenCL), the CPU kernel of the same data type runs, counted
  // and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(elementwise_add_cpu<float>{}, elementwise_add_cpu<double>{}),
      detail::elementwise_add_onednn_kernels, detail::elementwise_add_cuda_kernels,
      detail::elementwise_add_opencl_kernels);
};

}  // namespace fluidk::ops
