// sigmoid (X -> Out): Out = 1 / (1 + exp(-X)), elementwise.
//
// Kernels (float): CPU plain, CPU oneDNN (eltwise_logistic), OpenCL, CUDA. The CPU kernels
// are declared for the wildcard layout and the oneDNN one also for nChw8c and nChw16c, so
// blocked data from a oneDNN conv2d stays blocked; its padding lanes stay zero (not
// sigmoid(0) = 0.5). The device kernels run over row-major data.
#pragma once

#include <array>
#include <boost/mp11/list.hpp>
#include <cmath>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/operator.hpp>
#include <string_view>
#include <utility>

#include "ops/detail/common.hpp"
#include "ops/detail/network_activation.hpp"
#if FLUIDK_OPS_ONEDNN
#include "ops/detail/onednn.hpp"
#endif
#if FLUIDK_OPS_OPENCL
#include "ops/detail/opencl.hpp"
#endif
#if FLUIDK_OPS_CUDA
#include "ops/detail/cuda.hpp"
#include "ops/detail/cuda_launch_spatial.hpp"
#endif

namespace fluidk::ops {

struct sigmoid_cpu {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const Tensor x = detail::activation_storage_input(detail::input(ctx, "X"));
    Tensor out(x.dims(), data_type::float32, ctx.place(), x.layout());
    const float* in = x.data<float>();
    float* y = out.data<float>();
    const std::int64_t n = detail::storage_elements(x);
    for (std::int64_t i = 0; i < n; ++i) y[i] = detail::activation_sigmoid_of(in[i]);
    detail::activation_zero_padding(out);
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};

#if FLUIDK_OPS_ONEDNN
struct sigmoid_onednn {
  using dtype = float;
  using layouts = boost::mp11::mp_list<layout::any, layout::nChw8c, layout::nChw16c>;

  void operator()(execution_context& ctx) const {
    using dnnl::memory;
    const Tensor x = detail::activation_storage_input(detail::input(ctx, "X"));
    Tensor out(x.dims(), data_type::float32, ctx.place(), x.layout());
    if (x.numel() > 0) {
      onednn_context& dnn = detail::onednn_of(ctx);
      // Unblocked data as its flat storage (any rank); blocked data in its own layout with the
      // logical dims, where oneDNN computes the channels that exist and writes the padding
      // lanes as zeros (the tests check).
      const bool flat = !x.layout().blocked();
      const memory::dims shape{detail::storage_elements(x)};
      const memory src = flat ? detail::onednn_plain_memory(x, shape, dnn.engine())
                              : detail::onednn_memory_of(x, dnn.engine());
      const memory dst = flat ? detail::onednn_plain_memory(out, shape, dnn.engine())
                              : detail::onednn_memory_of(out, dnn.engine());
      detail::onednn_key key("sigmoid.fwd");
      key << src.get_desc();
      const auto kept = detail::kept_primitive<dnnl::eltwise_forward>(dnn, key, [&] {
        return dnnl::eltwise_forward::primitive_desc(
            dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_logistic,
                                        src.get_desc(), 0.f, 0.f),
            detail::kept_attr(), dnn.engine());
      });
      detail::run_kept(dnn, *kept, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
      dnn.wait();
      // oneDNN's reference logistic maps NaN to 0 (its overflow test fails): put the NaNs back.
      const float* in = x.data<float>();
      float* y = out.data<float>();
      for (std::int64_t i = 0, n = detail::storage_elements(x); i < n; ++i)
        if (std::isnan(in[i])) y[i] = in[i];
    }
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto sigmoid_onednn_kernels = fluidk::kernels_on<cpu, library::onednn>(sigmoid_onednn{});
}
#else
namespace detail {
inline constexpr auto sigmoid_onednn_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_OPENCL
struct sigmoid_opencl {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    Tensor out(x.dims(), data_type::float32, ctx.place(), x.layout());
    const std::int64_t n = x.numel();
    if (n > 0)
      detail::opencl_launch_from(ctx, detail::activation_opencl_source, "activation_sigmoid_f32",
                                 std::size_t(n), 1, detail::cl_arg<float>(x), detail::cl_buffer(out),
                                 cl_ulong(n));
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto sigmoid_opencl_kernels = fluidk::kernels_on<opencl>(sigmoid_opencl{});
}
#else
namespace detail {
inline constexpr auto sigmoid_opencl_kernels = no_kernels();
}
#endif

#if FLUIDK_OPS_CUDA
struct sigmoid_cuda {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    detail::cuda_call call(ctx);
    const Tensor x = detail::row_major(detail::input(ctx, "X"));
    Tensor out(x.dims(), data_type::float32, ctx.place(), x.layout());
    detail::cuda_require(cuda_launch::sigmoid_f32(call.stream(), detail::device_data<float>(x),
                                                  detail::device_data<float>(out), x.numel()),
                         ctx, "the sigmoid kernel");
    ctx.set_output("Out", std::move(out), ctx.input_lod("X"));
  }
};
namespace detail {
inline constexpr auto sigmoid_cuda_kernels = fluidk::kernels_on<cuda>(sigmoid_cuda{});
}
#else
namespace detail {
inline constexpr auto sigmoid_cuda_kernels = no_kernels();
}
#endif

struct sigmoid {
  static constexpr std::string_view name = "sigmoid";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // Where the expected kernel type has none (use_onednn without oneDNN, double data), the CPU
  // kernel runs, reported as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels =
      fluidk::make_kernels(fluidk::kernels_on<cpu>(sigmoid_cpu{}), detail::sigmoid_onednn_kernels,
                           detail::sigmoid_cuda_kernels, detail::sigmoid_opencl_kernels);
};

}  // namespace fluidk::ops
