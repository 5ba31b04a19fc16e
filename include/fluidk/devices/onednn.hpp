// oneDNN: a compute library on the CPU place (not a place of its own). Gives kernels an
// engine and a stream, and describes fluidk tensors to oneDNN as memory objects; its library
// tag and layouts are in fluidk/devices/onednn_tags.hpp, included here. Needs
// FLUIDK_HAS_ONEDNN, which Meson's fluidk_onednn_dep defines.
#pragma once

#if !defined(FLUIDK_HAS_ONEDNN) || !FLUIDK_HAS_ONEDNN
#error \
    "fluidk/devices/onednn.hpp needs the oneDNN backend: use fluidk_onednn_dep (Meson), or define FLUIDK_HAS_ONEDNN=1 and link dnnl"
#else

#include <dnnl.hpp>
#include <string>

#include "fluidk/devices/onednn_tags.hpp"
#include "fluidk/tensor.hpp"

namespace fluidk {

// The oneDNN engine and stream of the CPU place. A stream is not thread-safe, so each
// thread has its own context.
class onednn_context final : public device_context {
 public:
  onednn_context() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}
  fluidk::place place() const noexcept override { return cpu_place; }
  void wait() override { stream_.wait(); }

  const dnnl::engine& engine() const noexcept { return engine_; }
  dnnl::stream& stream() noexcept { return stream_; }

  static onednn_context& this_thread() {
    thread_local onednn_context context;
    return context;
  }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
};

inline dnnl::memory::data_type onednn_data_type(data_type d) {
  switch (d) {
    case data_type::float32:
      return dnnl::memory::data_type::f32;
    case data_type::float16:
      return dnnl::memory::data_type::f16;
    case data_type::bfloat16:
      return dnnl::memory::data_type::bf16;
    case data_type::int8:
      return dnnl::memory::data_type::s8;
    case data_type::uint8:
      return dnnl::memory::data_type::u8;
    case data_type::int32:
      return dnnl::memory::data_type::s32;
    default:
      break;
  }
  throw error("oneDNN has no data type for " + std::string(name_of(d)));
}

inline dnnl::memory::format_tag onednn_format(data_layout l) {
  using tag = dnnl::memory::format_tag;
  if (l == data_layout::nchw) return tag::nchw;
  if (l == data_layout::nhwc) return tag::nhwc;
  if (l == data_layout_of<layout::nChw8c>) return tag::nChw8c;
  if (l == data_layout_of<layout::nChw16c>) return tag::nChw16c;
  if (l == data_layout_of<layout::nc>) return tag::nc;
  throw error("layout " + std::string(name_of(l)) +
              " has no oneDNN format; give the tensor a concrete layout");
}

// A oneDNN memory object over a host tensor's storage (no copy).
inline dnnl::memory onednn_memory(const Tensor& t, const dnnl::engine& engine) {
  if (!t.place().is<cpu>())
    throw error("oneDNN works on " + cpu_place.to_string() + ", not on " + t.describe());
  const dnnl::memory::dims shape(t.dims().begin(), t.dims().end());
  const dnnl::memory::desc desc(shape, onednn_data_type(t.dtype()), onednn_format(t.layout()));
  return dnnl::memory(desc, engine, static_cast<std::byte*>(t.handle()) + t.offset());
}

}  // namespace fluidk

#endif  // the backend's feature macro
