// What the oneDNN kernels share: the engine and stream of the calling thread, and fluidk
// tensors described to oneDNN in place, the wildcard layout read as plain row-major.
#pragma once

#if !defined(FLUIDK_HAS_ONEDNN) || !FLUIDK_HAS_ONEDNN
#error "ops/detail/onednn.hpp needs the oneDNN backend (FLUIDK_HAS_ONEDNN=1)"
#else

#include <bit>
#include <cstddef>
#include <cstdint>
#include <fluidk/devices/onednn.hpp>
#include <fluidk/execution_context.hpp>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#if FLUIDK_OPS_OPENMP
#include <omp.h>
#endif

#include "ops/detail/common.hpp"
#include "ops/detail/network_activation.hpp"

namespace fluidk::ops::detail {

// The kernel's oneDNN context: the device context when the caller gave one, else the
// calling thread's.
inline onednn_context& onednn_of(const execution_context& ctx) {
  if (auto* c = dynamic_cast<onednn_context*>(&ctx.device())) return *c;
  return onednn_context::this_thread();
}

// Whether oneDNN runs its AVX-512 code on this CPU (avx512_core in its effective ISA): its
// direct convolutions then produce nChw16c (nChw8c with AVX2), and its brgemm-based NHWC ones
// exist.
inline bool onednn_avx512() {
  static const bool avx512 = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto core = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
    return (isa & core) == core;
  }();
  return avx512;
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

// A fused activation as an eltwise post-op. oneDNN's clip returns min where min is above max;
// clip to [max, max] gives what the comparisons give there: max.
inline void append_onednn_activation(dnnl::post_ops& post, const fused_activation& act) {
  if (act.kind == fused_activation::relu) post.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  if (act.kind == fused_activation::sigmoid)
    post.append_eltwise(1.f, dnnl::algorithm::eltwise_logistic, 0.f, 0.f);
  if (act.kind == fused_activation::clip)
    post.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, act.lo > act.hi ? act.hi : act.lo, act.hi);
}

// The key of an object in the oneDNN cache (onednn_cache): its kind, then every value that
// defines it, each written in full and separated, so that two different lists of values
// never give the same text.
class onednn_key {
 public:
  explicit onednn_key(std::string_view kind) : text_(kind) {}
  onednn_key& operator<<(std::int64_t v) { return add(std::to_string(v)); }
  onednn_key& operator<<(int v) { return *this << std::int64_t(v); }
  onednn_key& operator<<(bool v) { return add(v ? "1" : "0"); }
  // A float by its bits: the same bits, the same key.
  onednn_key& operator<<(float v) { return *this << std::int64_t(std::bit_cast<std::uint32_t>(v)); }
  onednn_key& operator<<(std::string_view v) {
    *this << std::int64_t(v.size());
    return add(v);
  }
  onednn_key& operator<<(const dnnl::memory::dims& d) {
    *this << std::int64_t(d.size());
    for (const auto v : d) *this << std::int64_t(v);
    return *this;
  }
  onednn_key& operator<<(data_layout l) { return add(name_of(l)); }
  onednn_key& operator<<(data_type t) { return add(name_of(t)); }
  // A memory description by what defines it: shape, data type, offset and the blocking (the
  // strides and the inner blocks) of a blocked format.
  onednn_key& operator<<(const dnnl::memory::desc& md) {
    const dnnl_memory_desc_t& d = md.data;
    *this << std::int64_t(d.ndims) << std::int64_t(d.data_type) << std::int64_t(d.format_kind)
          << std::int64_t(d.offset0) << std::int64_t(d.extra.flags);
    for (int i = 0; i < d.ndims; ++i) *this << std::int64_t(d.dims[i]) << std::int64_t(d.padded_dims[i]);
    if (d.format_kind == dnnl_blocked) {
      const dnnl_blocking_desc_t& b = d.format_desc.blocking;
      for (int i = 0; i < d.ndims; ++i) *this << std::int64_t(b.strides[i]);
      *this << std::int64_t(b.inner_nblks);
      for (int i = 0; i < b.inner_nblks; ++i)
        *this << std::int64_t(b.inner_blks[i]) << std::int64_t(b.inner_idxs[i]);
    }
    return *this;
  }
  const std::string& str() const noexcept { return text_; }

 private:
  onednn_key& add(std::string_view v) {
    text_ += '|';
    text_ += v;
    return *this;
  }
  std::string text_;
};

// The primitive descriptor and primitive kept under `key`, made by make() (which returns the
// primitive descriptor) the first time: oneDNN walks its implementations and generates code
// once per key, not per call.
template <class Primitive>
struct onednn_kept {
  typename Primitive::primitive_desc pd;
  Primitive primitive;
};
// What a kept primitive is created with: the attributes `attr` (post-ops), its scratchpad
// the user's. A kept primitive serves every thread sharing the cache, each running it with
// its own context's scratchpad (onednn_context::scratchpad, run_kept); with the library's
// scratchpad, threads running it at once would share its temporary buffers.
inline dnnl::primitive_attr kept_attr(dnnl::primitive_attr attr = {}) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// The number of threads oneDNN plans a primitive for when its descriptor is made, and keys
// its own primitive cache by: with its OpenMP runtime (Debian's), the calling thread's
// omp_get_max_threads(), which omp_set_num_threads (or OMP_NUM_THREADS) sets. (Inside an
// OpenMP parallel region oneDNN runs on one thread; the count is still what it plans and keys
// with.) 0 where the operators were built without OpenMP (FLUIDK_OPS_OPENMP undefined: no
// OpenMP found for the compiler): the count is then unknown here, and one primitive serves
// every count.
inline int onednn_threads() {
#if FLUIDK_OPS_OPENMP && DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  return omp_get_max_threads();
#else
  return 0;
#endif
}

// A primitive is kept per number of threads as well (onednn_threads), as oneDNN's own
// primitive cache keys it: oneDNN splits the work, and sizes the scratchpad, for the threads
// it was made for (a 64-channel 3x3 brgemm convolution: 8 KiB of scratchpad for 1 thread, 68
// KiB for 16). One made for 1 thread would go on running on 1 after omp_set_num_threads(8),
// and one made for 8 on 8 after the count is lowered.
template <class Primitive, class Make>
std::shared_ptr<const onednn_kept<Primitive> > kept_primitive(onednn_context& dnn, const onednn_key& key,
                                                              Make&& make) {
  onednn_key keyed = key;
  keyed << std::string_view("threads") << onednn_threads();
  return dnn.cache().get<onednn_kept<Primitive> >(keyed.str(), [&] {
    typename Primitive::primitive_desc pd = std::forward<Make>(make)();
    if (pd.get_primitive_attr().get_scratchpad_mode() != dnnl::scratchpad_mode::user)
      throw error("a oneDNN primitive kept in the cache (" + keyed.str() +
                  ") must be created with kept_attr(): threads share it");
    return onednn_kept<Primitive>{pd, Primitive(pd)};
  });
}

// Runs a kept primitive on `dnn`'s stream with `args` and `dnn`'s scratchpad.
template <class Primitive>
void run_kept(onednn_context& dnn, const onednn_kept<Primitive>& kept,
              std::unordered_map<int, dnnl::memory> args) {
  const dnnl::memory::desc scratch = kept.pd.scratchpad_desc();
  if (scratch.get_size() > 0) args.insert_or_assign(DNNL_ARG_SCRATCHPAD, dnn.scratchpad(scratch));
  kept.primitive.execute(dnn.stream(), args);
}

// A weight (`user`, a oneDNN memory over `source`'s storage) in the format a primitive wants:
// itself when the descriptions agree; else reordered once into memory the cache keeps while
// source's content is unchanged (a weight written in place is reordered again).
inline dnnl::memory prepared_weights(onednn_context& dnn, const Tensor& source, const dnnl::memory& user,
                                     const dnnl::memory::desc& wanted) {
  if (user.get_desc() == wanted) return user;
  onednn_key key("weights");
  key << user.get_desc() << wanted;
  return dnn.cache().prepared(source, key.str(), [&] {
    dnnl::memory out = reordered(user, wanted, dnn);
    dnn.wait();  // another thread may take it from the cache and run on its own stream
    return out;
  });
}

// A weight a kernel read as `used` (over `given`'s storage, or a row-major copy of it that
// row_major made), described as `user`, in the format `wanted`: reordered once and kept while
// the storage's content is unchanged where `used` shares `given`'s buffer; a copy is new at
// every call, so it is reordered per call.
inline dnnl::memory weights_for(onednn_context& dnn, const Tensor& used, const Tensor& given,
                                const dnnl::memory& user, const dnnl::memory::desc& wanted) {
  return used.shares_buffer_with(given) ? prepared_weights(dnn, used, user, wanted)
                                        : reordered(user, wanted, dnn);
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
