// libFuzzer harness: the runtime planner and the CPU transforms. The input chooses a source
// and a target kernel key on the CPU (every data type, layout and library), a small shape (the
// rank a layout needs, or now and then another one), whether the source is a slice of a larger
// tensor, and the source's bytes. fluidk's transform (planned, fused, vectorised) must give the
// bytes of a step-by-step reference written here: each element read at its place in the source
// layout, converted by itself and written at its place in the target layout, the padding lanes
// of a blocked target zero. Where the reference says no transform exists (a layout the CPU does
// not reorder, a rank the layout cannot take), fluidk must throw a fluidk::error
// (not_registered when no chain exists); anything else that escapes is a crash.
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fluidk/bfloat16.hpp>
#include <fluidk/devices/cudnn_tags.hpp>
#include <fluidk/devices/onednn_tags.hpp>
#include <fluidk/float16.hpp>
#include <fluidk/transforms/runtime.hpp>
#include <limits>
#include <type_traits>
#include <vector>

namespace {

using fluidk::data_layout;
using fluidk::data_layout_of;
using fluidk::data_type;
namespace layout = fluidk::layout;
namespace library = fluidk::library;

// Reads the fuzz input a byte at a time; zeros once it runs out.
struct input {
  const std::uint8_t* data;
  std::size_t size;
  std::uint8_t next() { return size == 0 ? 0 : (--size, *data++); }
};

// --- the reference's own rules, from the documentation rather than the library's code ------

// The rank a layout takes (0: any rank) and its channel block (1: unblocked).
int needed_rank(data_layout l) {
  if (l == data_layout::any) return 0;
  return l == data_layout_of<layout::nc> ? 2 : 4;
}
int block(data_layout l) {
  return l == data_layout_of<layout::nChw8c> ? 8 : l == data_layout_of<layout::nChw16c> ? 16 : 1;
}
bool cpu_reorders(data_layout l) {
  return l == data_layout::nchw || l == data_layout::nhwc || l == data_layout_of<layout::nChw8c> ||
         l == data_layout_of<layout::nChw16c>;
}

// docs/transforms.md: a target of ANY_LAYOUT takes plain data as it is and unblocks blocked
// data to NCHW; a source of ANY_LAYOUT is row-major data, NCHW's order for a 4-D target and
// NC's for an NC one.
data_layout target_layout(data_layout from, data_layout to) {
  if (to != data_layout::any) return to;
  return block(from) > 1 ? data_layout::nchw : from;
}
data_layout source_layout(data_layout from, data_layout target) {
  if (from != data_layout::any || target == data_layout::any) return from;
  return target == data_layout_of<layout::nc> ? data_layout_of<layout::nc> : data_layout::nchw;
}

// Elements a tensor of `shape` occupies in `layout`, channels padded to the block.
std::size_t storage_elements(data_layout layout, const std::vector<std::int64_t>& shape) {
  std::size_t n = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    std::int64_t extent = shape[i];
    if (i == 1 && block(layout) > 1) extent = (extent + block(layout) - 1) / block(layout) * block(layout);
    n *= std::size_t(extent);
  }
  return n;
}

// Where element `index` (a logical multi-index) lies, in elements, in `layout`. Every layout
// other than NHWC and the blocked ones is row-major over the logical shape.
std::size_t element_offset(data_layout layout, const std::vector<std::int64_t>& shape,
                           const std::vector<std::int64_t>& index) {
  if (shape.size() == 4 && layout == data_layout::nhwc) {
    const std::int64_t C = shape[1], H = shape[2], W = shape[3];
    return std::size_t(((index[0] * H + index[2]) * W + index[3]) * C + index[1]);
  }
  if (shape.size() == 4 && block(layout) > 1) {
    const std::int64_t b = block(layout), blocks = (shape[1] + b - 1) / b, H = shape[2], W = shape[3];
    const std::int64_t c = index[1];
    return std::size_t((((index[0] * blocks + c / b) * H + index[2]) * W + index[3]) * b + c % b);
  }
  std::size_t offset = 0;
  for (std::size_t i = 0; i < shape.size(); ++i)
    offset = offset * std::size_t(shape[i]) + std::size_t(index[i]);
  return offset;
}

// The element conversions, one rule at a time as cpu_convert.hpp's comment states them; the
// rounding to float16 and bfloat16 is their own classes'.
template <class T>
constexpr bool is_half = std::is_same_v<T, fluidk::float16> || std::is_same_v<T, fluidk::bfloat16>;

template <class I>
I saturate_to_integer(double v) {  // v: the source value, exactly
  if (std::isnan(v)) return I{0};
  const double t = std::trunc(v);
  if (t >= std::ldexp(1.0, std::numeric_limits<I>::digits)) return std::numeric_limits<I>::max();
  if (t < double(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  return static_cast<I>(t);
}

template <class D, class S>
D convert(S s) {
  if constexpr (std::is_same_v<D, bool>) {
    if constexpr (is_half<S>)
      return static_cast<float>(s) != 0.0f;  // NaN too
    else
      return s != S(0);
  } else if constexpr (std::is_same_v<S, bool>) {
    if constexpr (is_half<D>)
      return D(s ? 1.0f : 0.0f);
    else
      return D(s ? 1 : 0);
  } else if constexpr (std::is_integral_v<S>) {
    return D(s);  // modular for integers (C++20); halves round from the integer itself
  } else if constexpr (std::is_integral_v<D>) {
    if constexpr (is_half<S>)
      return saturate_to_integer<D>(double(static_cast<float>(s)));
    else
      return saturate_to_integer<D>(double(s));
  } else if constexpr (is_half<S> && is_half<D>) {
    return D(static_cast<float>(s));
  } else if constexpr (is_half<S>) {
    return static_cast<D>(s);  // exact
  } else {
    return D(s);  // float <-> double by the hardware; float or double to a half by its class
  }
}

template <class T>
T load(const std::byte* p) {
  if constexpr (std::is_same_v<T, bool>) {
    return *reinterpret_cast<const unsigned char*>(p) != 0;
  } else {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }
}
template <class T>
void store(std::byte* p, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    *reinterpret_cast<unsigned char*>(p) = v ? 1 : 0;
  } else {
    std::memcpy(p, &v, sizeof(T));
  }
}

template <class F>
void with_type(data_type t, F f) {
  switch (t) {
    case data_type::float32:
      return f(float{});
    case data_type::float64:
      return f(double{});
    case data_type::float16:
      return f(fluidk::float16{});
    case data_type::bfloat16:
      return f(fluidk::bfloat16{});
    case data_type::int8:
      return f(std::int8_t{});
    case data_type::uint8:
      return f(std::uint8_t{});
    case data_type::int16:
      return f(std::int16_t{});
    case data_type::int32:
      return f(std::int32_t{});
    case data_type::int64:
      return f(std::int64_t{});
    case data_type::boolean:
      return f(bool{});
  }
  __builtin_trap();
}

void convert_element(data_type from, const std::byte* src, data_type to, std::byte* dst) {
  with_type(from, [&](auto s) {
    using S = decltype(s);
    with_type(to, [&](auto d) {
      using D = decltype(d);
      store<D>(dst, convert<D>(load<S>(src)));
    });
  });
}

std::size_t element_size(data_type t) {
  std::size_t size = 0;
  with_type(t, [&](auto v) { size = sizeof(v); });
  return size;
}

constexpr std::array<data_type, 10> data_types{
    data_type::float32, data_type::float64, data_type::float16, data_type::bfloat16, data_type::int8,
    data_type::uint8,   data_type::int16,   data_type::int32,   data_type::int64,    data_type::boolean};
constexpr std::array<data_layout, 6> layouts{data_layout::any,
                                             data_layout::nchw,
                                             data_layout::nhwc,
                                             data_layout_of<layout::nChw8c>,
                                             data_layout_of<layout::nChw16c>,
                                             data_layout_of<layout::nc>};
constexpr std::array<fluidk::library_type, 3> libraries{fluidk::library_type::plain,
                                                        fluidk::library_type_of<library::onednn>,
                                                        fluidk::library_type_of<library::cudnn>};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  input in{data, size};
  const data_type from_type = data_types[in.next() % data_types.size()];
  const data_type to_type = data_types[in.next() % data_types.size()];
  const data_layout from_layout = layouts[in.next() % layouts.size()];
  const data_layout to_layout = layouts[in.next() % layouts.size()];
  const fluidk::library_type library = libraries[in.next() % libraries.size()];
  // Mostly the rank the layouts need; now and then any rank up to 5.
  const std::uint8_t rank_byte = in.next();
  std::size_t rank = std::size_t(needed_rank(from_layout) != 0 ? needed_rank(from_layout)
                                 : needed_rank(to_layout) != 0 ? needed_rank(to_layout)
                                                               : 1 + rank_byte / 8 % 4);
  if (rank_byte % 8 == 7) rank = rank_byte / 8 % 6;
  std::vector<std::int64_t> shape(rank);
  for (std::size_t i = 0; i < rank; ++i) shape[i] = in.next() % (rank == 4 && i == 1 ? 20 : 10);  // C past 16
  // A slice [first, first + N) of a tensor with `extra` rows more.
  const std::uint8_t slice_byte = in.next();
  const bool sliced = rank > 0 && slice_byte % 2 == 1;
  const std::int64_t first = sliced ? slice_byte / 2 % 3 : 0, extra = sliced ? first + slice_byte / 8 % 2 : 0;

  // What the reference expects.
  const data_layout to_eff = target_layout(from_layout, to_layout);
  const data_layout from_eff = source_layout(from_layout, to_eff);
  const bool source_builds = needed_rank(from_layout) == 0 || std::size_t(needed_rank(from_layout)) == rank;
  const bool chain_exists = from_eff == to_eff || (cpu_reorders(from_eff) && cpu_reorders(to_eff));
  const bool relabel_fits = needed_rank(from_eff) == 0 || std::size_t(needed_rank(from_eff)) == rank;

  // The source, filled from the input, with zeros in its padding lanes (every transform into a
  // blocked layout writes them so, docs/transforms.md: the invariant holds for sources too).
  std::vector<std::int64_t> parent_shape = shape;
  if (sliced) parent_shape[0] += extra;
  fluidk::Tensor parent;
  try {
    parent = fluidk::Tensor(fluidk::dims(parent_shape), from_type, fluidk::cpu_place, from_layout);
  } catch (const fluidk::error&) {
    if (source_builds) __builtin_trap();
    return 0;
  }
  if (!source_builds) __builtin_trap();
  const std::size_t from_size = element_size(from_type), to_size = element_size(to_type);
  const std::size_t parent_bytes = storage_elements(from_layout, parent_shape) * from_size;
  if (parent.storage_bytes() != parent_bytes) __builtin_trap();
  std::byte* p = parent_bytes == 0 ? nullptr : static_cast<std::byte*>(parent.mutable_handle());
  for (std::size_t i = 0; i < parent_bytes; ++i) p[i] = std::byte(in.next());
  if (const int b = block(from_layout); b > 1 && parent_bytes > 0) {
    const std::vector<std::int64_t> padded{parent_shape[0], (parent_shape[1] + b - 1) / b * b,
                                           parent_shape[2], parent_shape[3]};
    for (std::int64_t n = 0; n < padded[0]; ++n)
      for (std::int64_t c = parent_shape[1]; c < padded[1]; ++c)
        for (std::int64_t h = 0; h < padded[2]; ++h)
          for (std::int64_t w = 0; w < padded[3]; ++w)
            std::memset(p + element_offset(from_layout, padded, {n, c, h, w}) * from_size, 0, from_size);
  }
  const std::vector<std::byte> before(p, p + parent_bytes);
  const fluidk::Tensor src = sliced ? parent.slice(first, first + shape[0]) : parent;
  const std::byte* s = p == nullptr ? nullptr : p + src.offset();

  const fluidk::kernel_key to(fluidk::cpu_place, to_type, to_layout, library);
  fluidk::Tensor out;
  try {
    out = fluidk::transform(src, to);
  } catch (const fluidk::not_registered&) {
    if (chain_exists) __builtin_trap();
    return 0;
  } catch (const fluidk::error&) {
    if (chain_exists && relabel_fits) __builtin_trap();
    return 0;
  }
  if (!chain_exists || !relabel_fits) __builtin_trap();
  // The source is never written.
  if (parent_bytes > 0 && std::memcmp(before.data(), p, parent_bytes) != 0) __builtin_trap();
  if (out.dtype() != to_type || out.layout() != to_eff || !(out.place() == fluidk::cpu_place) ||
      !(out.dims() == src.dims()))
    __builtin_trap();

  // The reference, one element at a time.
  std::vector<std::byte> expected(storage_elements(to_eff, shape) * to_size, std::byte{0});
  if (out.storage_bytes() != expected.size()) __builtin_trap();
  std::vector<std::int64_t> index(rank, 0);
  for (std::size_t e = 0, count = storage_elements(data_layout::any, shape); e < count; ++e) {
    for (std::size_t i = rank, rest = e; i-- > 0; rest /= std::size_t(shape[i]))
      index[i] = std::int64_t(rest % std::size_t(shape[i]));
    const std::byte* from = s + element_offset(from_eff, shape, index) * from_size;
    std::byte* into = expected.data() + element_offset(to_eff, shape, index) * to_size;
    if (from_type == to_type)
      std::memcpy(into, from, from_size);  // a layout change moves bits, whatever they are
    else
      convert_element(from_type, from, to_type, into);
  }
  if (!expected.empty() &&
      std::memcmp(expected.data(), static_cast<const std::byte*>(out.handle()) + out.offset(),
                  expected.size()) != 0)
    __builtin_trap();
  return 0;
}
