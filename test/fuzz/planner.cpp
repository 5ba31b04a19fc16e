// libFuzzer harness: the runtime planner and the CPU transforms. The input chooses a source
// and a target kernel key on the CPU (every data type; ANY, NCHW, NHWC, nChw8c, nChw16c), a
// small NCHW shape and the source's bytes; fluidk's transform (planned, fused, vectorised)
// must give the bytes of a step-by-step reference: each element read at its place in the
// source layout, converted by itself, and written at its place in the target layout, with
// the padding lanes of a blocked target zero.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fluidk/transforms/cpu.hpp>
#include <fluidk/transforms/runtime.hpp>
#include <vector>

namespace {

using fluidk::data_layout;
using fluidk::data_type;

// Reads the fuzz input a byte at a time; zeros once it runs out.
struct input {
  const std::uint8_t* data;
  std::size_t size;
  std::uint8_t next() { return size == 0 ? 0 : (--size, *data++); }
};

constexpr std::array<data_layout, 5> layouts{data_layout::any, data_layout::nchw, data_layout::nhwc,
                                             data_layout::nChw8c, data_layout::nChw16c};

// Byte offset of element (n, c, h, w) of a [N, C, H, W] tensor in `layout` (ANY is the
// row-major order of the logical shape, which for rank 4 is NCHW's).
std::size_t element_index(data_layout layout, const fluidk::dims& d, std::int64_t n, std::int64_t c,
                          std::int64_t h, std::int64_t w) {
  const std::int64_t C = d[1], H = d[2], W = d[3];
  switch (layout) {
    case data_layout::nhwc:
      return std::size_t(((n * H + h) * W + w) * C + c);
    case data_layout::nChw8c:
    case data_layout::nChw16c: {
      const std::int64_t b = layout == data_layout::nChw8c ? 8 : 16, blocks = (C + b - 1) / b;
      return std::size_t((((n * blocks + c / b) * H + h) * W + w) * b + c % b);
    }
    default:
      return std::size_t(((n * C + c) * H + h) * W + w);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  input in{data, size};
  const auto from_type = data_type(in.next() % fluidk::data_type_count);
  const auto to_type = data_type(in.next() % fluidk::data_type_count);
  const data_layout from_layout = layouts[in.next() % layouts.size()];
  const data_layout to_layout = layouts[1 + in.next() % (layouts.size() - 1)];  // a concrete one
  const fluidk::dims shape{in.next() % 4, in.next() % 20, in.next() % 5, in.next() % 5};

  fluidk::Tensor src(shape, from_type, fluidk::cpu_place, from_layout);
  std::byte* s = static_cast<std::byte*>(src.mutable_handle());
  for (std::size_t i = 0; i < src.storage_bytes(); ++i) s[i] = std::byte(in.next());
  // A blocked tensor's padding lanes hold zeros (every transform into a blocked layout writes
  // them so, docs/transforms.md): keep that invariant in the source too.
  if (const int b = fluidk::block_of(from_layout); b > 1)
    for (std::int64_t n = 0; n < shape[0]; ++n)
      for (std::int64_t c = shape[1]; c % b != 0; ++c)
        for (std::int64_t h = 0; h < shape[2]; ++h)
          for (std::int64_t w = 0; w < shape[3]; ++w)
            std::memset(s + element_index(from_layout, shape, n, c, h, w) * fluidk::size_of(from_type), 0,
                        fluidk::size_of(from_type));
  const std::vector<std::byte> before(s, s + src.storage_bytes());

  const fluidk::kernel_key to(fluidk::cpu_place, to_type, to_layout, fluidk::library_type::plain);
  const fluidk::Tensor out = fluidk::transform(src, to);
  // The source is never written. (memcmp only over bytes that exist: an empty tensor has
  // no buffer.)
  if (!before.empty() && std::memcmp(before.data(), s, before.size()) != 0) __builtin_trap();
  if (fluidk::key_of(out) != to || !(out.dims() == shape)) __builtin_trap();

  // The reference, one element at a time.
  std::vector<std::byte> expected(out.storage_bytes(), std::byte{0});
  const std::size_t from_size = fluidk::size_of(from_type), to_size = fluidk::size_of(to_type);
  const auto convert = fluidk::transforms::cpu::detail::convert_fn(from_type, to_type);
  for (std::int64_t n = 0; n < shape[0]; ++n)
    for (std::int64_t c = 0; c < shape[1]; ++c)
      for (std::int64_t h = 0; h < shape[2]; ++h)
        for (std::int64_t w = 0; w < shape[3]; ++w) {
          const std::byte* from = s + element_index(from_layout, shape, n, c, h, w) * from_size;
          std::byte* into = expected.data() + element_index(to_layout, shape, n, c, h, w) * to_size;
          if (from_type == to_type)
            std::memcpy(into, from, from_size);  // a layout change moves bits, whatever they are
          else
            convert(from, 1, into, 1, 1);
        }
  if (!expected.empty() && std::memcmp(expected.data(), out.handle(), expected.size()) != 0) __builtin_trap();
  return 0;
}
