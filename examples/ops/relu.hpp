// relu (X -> Out): Out = max(X, 0), elementwise, in X's layout and with X's sequence offsets.
//
// Kernels: CPU plain (float, double), CPU oneDNN (float: the eltwise primitive), CUDA
// (float, double) and OpenCL (float). The oneDNN kernel is declared for the wildcard layout
// and for nChw8c and nChw16c, so that blocked data from a oneDNN conv2d stays blocked; the
// device kernels run over NCHW-or-plain data (fluidk brings blocked data to NCHW first).
#pragma once

#include <array>
#include <boost/mp11/list.hpp>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <string_view>
#include <type_traits>
#include <utility>

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

// Elementwise over the storage, so any layout works (a blocked layout's padding lanes are
// zero, and stay zero).
template <class T>
struct relu_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    detail::map_storage<T>(ctx, [](T v) { return detail::relu_of(v); });
  }
};

#if FLUIDK_OPS_ONEDNN
template <class T>
struct relu_onednn {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the oneDNN relu kernel computes in float");
  using layouts = boost::mp11::mp_list<layout::any, layout::nChw8c, layout::nChw16c>;

  void operator()(execution_context& ctx) const {
    using dnnl::memory;
    const Tensor& x = detail::input(ctx, "X");
    Tensor out(x.dims(), data_type::float32, ctx.place(), x.layout());
    if (x.numel() > 0) {
      onednn_context& dnn = detail::onednn_of(ctx);
      // Elementwise over the storage: any layout, padding lanes included (relu keeps 0 at 0).
      const memory::dims shape{detail::storage_elements(x)};
      memory src = detail::onednn_plain_memory(x, shape, dnn.engine());
      memory dst = detail::onednn_plain_memory(out, shape, dnn.engine());
      detail::onednn_key key("relu.fwd");
      key << src.get_desc();
      const auto kept = detail::kept_primitive<dnnl::eltwise_forward>(dnn, key, [&] {
        return dnnl::eltwise_forward::primitive_desc(
            dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_relu,
                                        src.get_desc(), 0.f, 0.f),
            detail::kept_attr(), dnn.engine());
      });
      detail::run_kept(dnn, *kept, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
      dnn.wait();
    }
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto relu_onednn_kernels = fluidk::kernels_on<cpu, library::onednn>(relu_onednn<float>{});
}
#else
namespace detail {
inline constexpr auto relu_onednn_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_OPENCL
template <class T>
struct relu_opencl {
  using dtype = T;
  static_assert(std::is_same_v<T, float>, "the OpenCL relu kernel computes in float");

  void operator()(execution_context& ctx) const {
    const Tensor& x = detail::input(ctx, "X");
    Tensor out(x.dims(), data_type::float32, ctx.place(), x.layout());
    const std::int64_t n = detail::storage_elements(x);
    if (n > 0)
      detail::opencl_launch(ctx, "relu_f32", std::size_t(n), 1, detail::cl_arg<float>(x),
                            detail::cl_buffer(out), cl_ulong(n));
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto relu_opencl_kernels = fluidk::kernels_on<opencl>(relu_opencl<float>{});
}
#else
namespace detail {
inline constexpr auto relu_opencl_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_CUDA
template <class T>
struct relu_cuda {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    detail::cuda_call call(ctx);
    const Tensor& x = detail::input(ctx, "X");
    Tensor out(x.dims(), data_type_of<T>, ctx.place(), x.layout());
    detail::cuda_require(cuda_launch::relu<T>(call.stream(), detail::device_data<T>(x),
                                              detail::device_data<T>(out), detail::storage_elements(x)),
                         ctx, "the relu kernel");
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto relu_cuda_kernels = fluidk::kernels_on<cuda>(relu_cuda<float>{}, relu_cuda<double>{});
}
#else
namespace detail {
inline constexpr auto relu_cuda_kernels = no_kernels();
}
#endif

struct relu {
  static constexpr std::string_view name = "relu";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // Where the expected kernel type has no kernel (use_onednn with double data or in a build
  // without oneDNN; double on OpenCL), the CPU kernel of the same data type runs, counted
  // and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(relu_cpu<float>{}, relu_cpu<double>{}), detail::relu_onednn_kernels,
      detail::relu_cuda_kernels, detail::relu_opencl_kernels);
};

}  // namespace fluidk::ops
