// assign (X -> Out): Out = X, a view of X's storage (fluidk never writes an input in place, and
// a write to X's bytes through any tensor moves the version Out shares, so no stale copy of
// Out is served). Out keeps X's dims, layout and sequence offsets. As Fluid's assign, X may be a
// LoDTensor, a SelectedRows (Out: its rows and height, and a view of its value) or a
// LoDTensorArray (Out: views of its elements); the operator's InferVarType gives Out X's kind
// and data type (Fluid's SyncTypeAndDataType).
//
// Kernels: one view for every place and data type it is registered for: CPU (float, double,
// int32, int64, bool), OpenCL (float, int32, int64, bool) and CUDA (float, double). No oneDNN kernel:
// use_onednn falls back to the CPU's (policy cpu). Each is declared for layout ANY, so fluidk brings blocked
// data to NCHW first.
#pragma once

#include <array>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/lod_tensor.hpp>
#include <fluidk/operator.hpp>
#include <fluidk/program/desc.hpp>
#include <fluidk/selected_rows.hpp>
#include <fluidk/variable.hpp>
#include <string>
#include <string_view>

#include "ops/detail/common.hpp"
#include "ops/detail/network_shape.hpp"

namespace fluidk::ops {

template <class T>
struct assign_view {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Variable* x = ctx.input_arg("X").variable();
    if (x == nullptr || x->is<LoDTensor>())
      return detail::set_output_sharing_input(ctx, "Out", detail::input(ctx, "X"), ctx.input_lod("X"));
    // A SelectedRows or a LoDTensorArray: replaced whole, as set_output_sharing_input replaces
    // a tensor (no mutable accessor, which would count a write to the storage Out held, on a
    // rerun X's own).
    Variable* out = ctx.output_arg("Out").variable();
    detail::require(out != nullptr, ctx,
                    "a " + std::string(name_of(x->kind())) + " X needs an output variable");
    if (x->is<SelectedRows>()) {
      const SelectedRows& rows = x->get<SelectedRows>();
      rows.check();  // rows and value may have been set apart
      SelectedRows copy(rows.rows(), rows.height(), rows.value());
      out->get_mutable<SelectedRows>() = std::move(copy);
    } else {
      detail::require(x->is<LoDTensorArray>(), ctx, "X holds " + std::string(name_of(x->kind())));
      LoDTensorArray copy = x->get<LoDTensorArray>();
      out->get_mutable<LoDTensorArray>() = std::move(copy);
    }
  }
};

struct assign {
  static constexpr std::string_view name = "assign";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // Where the expected kernel type has no kernel (use_onednn; another data type on a device),
  // the CPU kernel of the same data type runs, counted and reported once as a fallback.
  static constexpr fluidk::fallback_policy fallback = fluidk::fallback_policy::cpu;
  static constexpr auto kernels = fluidk::make_kernels(
      fluidk::kernels_on<cpu>(assign_view<float>{}, assign_view<double>{}, assign_view<std::int32_t>{},
                              assign_view<std::int64_t>{}, assign_view<bool>{}),
#if FLUIDK_OPS_OPENCL
      fluidk::kernels_on<opencl>(assign_view<float>{}, assign_view<std::int32_t>{},
                                 assign_view<std::int64_t>{}, assign_view<bool>{}),
#endif
#if FLUIDK_OPS_CUDA
      fluidk::kernels_on<cuda>(assign_view<float>{}, assign_view<double>{}),
#endif
      detail::no_kernels());

  // Out takes X's kind and data type.
  static void infer_var_type(const OpDesc& op, BlockDesc& block) {
    const VarDesc& x =
        input_var_desc(op, block, "X", first_input_name(op, "X", "Out takes its kind and data type"));
    const var_kind kind = x.kind;
    const data_type dtype = x.dtype;
    for (const std::string& name : op.output("Out")) {
      VarDesc& out = block.var_recursive(name);
      out.kind = kind;
      out.dtype = dtype;
    }
  }
};

}  // namespace fluidk::ops
