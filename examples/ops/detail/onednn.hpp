// What the oneDNN kernels share: the engine and stream of the calling thread, and fluidk
// tensors described to oneDNN in place, the wildcard layout read as plain row-major.
#pragma once

#if !defined(FLUIDK_HAS_ONEDNN) || !FLUIDK_HAS_ONEDNN
#error "ops/detail/onednn.hpp needs the oneDNN backend (FLUIDK_HAS_ONEDNN=1)"
#else

#include <cstddef>
#include <fluidk/devices/onednn.hpp>
#include <fluidk/execution_context.hpp>
#include <initializer_list>
#include <string>

#include "ops/detail/common.hpp"

namespace fluidk::ops::detail {

// The kernel's oneDNN context: the device context when the caller gave one, else the
// calling thread's.
inline onednn_context& onednn_of(const execution_context& ctx) {
  if (auto* c = dynamic_cast<onednn_context*>(&ctx.device())) return *c;
  return onednn_context::this_thread();
}

// The plain row-major format of a rank.
inline dnnl::memory::format_tag plain_format(std::size_t rank) {
  using tag = dnnl::memory::format_tag;
  switch (rank) {
    case 1:
      return tag::a;
    case 2:
      return tag::ab;
    case 3:
      return tag::abc;
    case 4:
      return tag::abcd;
    case 5:
      return tag::abcde;
    case 6:
      return tag::abcdef;
    default:
      break;
  }
  throw error("oneDNN kernels take tensors of rank 1 to 6, not " + std::to_string(rank));
}

// The oneDNN description of a host tensor in its own layout (ANY_LAYOUT read as row-major).
inline dnnl::memory::desc onednn_desc(const Tensor& t, const dnnl::memory::dims& shape) {
  const dnnl::memory::data_type dt = onednn_data_type(t.dtype());
  if (t.layout() == data_layout::any) return {shape, dt, plain_format(shape.size())};
  return {shape, dt, onednn_format(t.layout())};
}
inline dnnl::memory::dims onednn_dims(const dims& d) { return dnnl::memory::dims(d.begin(), d.end()); }

// A oneDNN memory over a host tensor's storage (no copy), in the tensor's shape and layout.
inline dnnl::memory onednn_memory_of(const Tensor& t, const dnnl::engine& engine) {
  return {onednn_desc(t, onednn_dims(t.dims())), engine, static_cast<std::byte*>(t.handle()) + t.offset()};
}
// A row-major view of a host tensor's storage in another shape of the same size (a matrix
// view of a tensor in row-major order, or the flat storage of an elementwise operation).
inline dnnl::memory onednn_plain_memory(const Tensor& t, const dnnl::memory::dims& shape,
                                        const dnnl::engine& engine) {
  return {{shape, onednn_data_type(t.dtype()), plain_format(shape.size())},
          engine,
          static_cast<std::byte*>(t.handle()) + t.offset()};
}

// `user` in the format the primitive wants: itself when the descriptions agree, else a
// reorder into new memory (executed on the stream).
inline dnnl::memory reordered(dnnl::memory user, const dnnl::memory::desc& wanted, onednn_context& dnn) {
  if (user.get_desc() == wanted) return user;
  dnnl::memory out(wanted, dnn.engine());
  dnnl::reorder(user, out).execute(dnn.stream(), user, out);
  return out;
}

// The fluidk layout of a oneDNN description of 4-D data, or ANY_LAYOUT when fluidk has no
// name for it.
inline data_layout fluidk_layout_of(const dnnl::memory::desc& md, const dnnl::memory::dims& shape,
                                    std::initializer_list<data_layout> candidates) {
  for (const data_layout l : candidates)
    if (md == dnnl::memory::desc(shape, md.data_type(), onednn_format(l))) return l;
  return data_layout::any;
}

}  // namespace fluidk::ops::detail

#endif  // FLUIDK_HAS_ONEDNN
