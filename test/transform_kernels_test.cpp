// The CPU transform kernels: layout transforms against oneDNN's reorder and a naive reference,
// casts against a scalar reference written here from fluidk::float16/bfloat16 and the documented
// semantics, and the fused pass against the two steps; every case on every instruction-set level
// this CPU supports, and none of them ever writes its source.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fluidk/devices/onednn.hpp>
#include <fluidk/transforms/cpu_kernels.hpp>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace fluidk;
namespace kernels = fluidk::transforms::cpu_kernels;
using bytes = std::vector<std::byte>;

namespace {

std::vector<kernels::isa> supported_isas() {
  std::vector<kernels::isa> out;
  for (auto level :
       {kernels::isa::scalar, kernels::isa::avx2, kernels::isa::avx512, kernels::isa::avx512_bf16})
    if (kernels::isa_supported(level)) out.push_back(level);
  return out;
}

bytes random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  bytes out(n);
  for (auto& b : out) b = std::byte(rng() & 0xFF);
  return out;
}

// "" when equal, else where they first differ (Catch would print every byte of both).
std::string difference(const bytes& got, const bytes& expected) {
  if (got.size() != expected.size())
    return "sizes differ: " + std::to_string(got.size()) + " vs " + std::to_string(expected.size());
  const auto mismatch = std::mismatch(got.begin(), got.end(), expected.begin());
  if (mismatch.first == got.end()) return "";
  return "first difference at byte " + std::to_string(mismatch.first - got.begin()) + ": " +
         std::to_string(int(*mismatch.first)) + " vs " + std::to_string(int(*mismatch.second));
}

const std::byte* cp(const bytes& b) { return b.data(); }
std::byte* mp(bytes& b) { return b.data(); }

const std::vector<data_layout> layouts4d{data_layout::nchw, data_layout::nhwc, data_layout_of<layout::nChw8c>,
                                         data_layout_of<layout::nChw16c>};

// Shapes [N, C, H, W]: the channel counts of the issue (1, 3, 8, 17, 64), extents of 1, pixel
// counts that leave vector tails, and images of 2-7 pixels (fewer than one vector step).
const std::vector<dims> shapes{{1, 1, 1, 1},  {2, 3, 5, 7},  {1, 8, 4, 4},  {3, 17, 3, 5}, {1, 64, 7, 9},
                               {2, 64, 1, 1}, {3, 20, 1, 1}, {1, 33, 9, 1}, {4, 24, 2, 8}, {1, 16, 5, 5},
                               {2, 40, 6, 6}, {3, 20, 2, 2}, {2, 9, 1, 7},  {1, 64, 2, 3}, {4, 16, 1, 2}};

std::int64_t padded_c(data_layout l, std::int64_t c) {
  const std::int64_t b = block_of(l);
  return (c + b - 1) / b * b;
}

// Element index of logical (n, c, h, w) in layout l: written out from the layouts' definitions.
std::int64_t index_in(data_layout l, const dims& s, std::int64_t n, std::int64_t c, std::int64_t h,
                      std::int64_t w) {
  const std::int64_t C = s[1], H = s[2], W = s[3];
  if (l == data_layout::nchw) return ((n * C + c) * H + h) * W + w;
  if (l == data_layout::nhwc) return ((n * H + h) * W + w) * C + c;
  const std::int64_t b = block_of(l), cp = padded_c(l, C);
  return (((n * (cp / b) + c / b) * H + h) * W + w) * b + c % b;
}

std::int64_t storage_of(data_layout l, const dims& s) { return s[0] * padded_c(l, s[1]) * s[2] * s[3]; }

// The naive transform: every logical element moved, padding lanes of a blocked target zero; the
// same layout is a plain copy.
bytes naive_reorder(const bytes& src, data_layout from, data_layout to, const dims& s, std::size_t elem) {
  if (from == to) return src;
  bytes dst(std::size_t(storage_of(to, s)) * elem, std::byte{0});
  for (std::int64_t n = 0; n < s[0]; ++n)
    for (std::int64_t c = 0; c < s[1]; ++c)
      for (std::int64_t h = 0; h < s[2]; ++h)
        for (std::int64_t w = 0; w < s[3]; ++w)
          std::memcpy(&dst[std::size_t(index_in(to, s, n, c, h, w)) * elem],
                      &src[std::size_t(index_in(from, s, n, c, h, w)) * elem], elem);
  return dst;
}

// Runs `reorder` into a target full of garbage (so that unwritten padding shows), checking that
// the source is left as it was.
bytes run_reorder(const bytes& src, data_layout from, data_layout to, const dims& s, std::size_t elem,
                  int threads = 0) {
  const bytes before = src;
  bytes dst(std::size_t(storage_of(to, s)) * elem, std::byte{0xAB});
  kernels::reorder(cp(src), from, mp(dst), to, s, elem, threads);
  REQUIRE(difference(src, before) == "");
  return dst;
}

std::string describe(data_layout a, data_layout b, const dims& s, std::size_t elem = 4) {
  return std::string(name_of(a)) + " -> " + std::string(name_of(b)) + " " + s.to_string() + " elem " +
         std::to_string(elem) + " isa " + std::string(kernels::name_of(kernels::active_isa()));
}

}  // namespace

TEST_CASE("layout transforms of float match oneDNN's reorder bit for bit, padding included",
          "[transforms][onednn]") {
  auto& ctx = onednn_context::this_thread();
  const std::vector<std::pair<data_layout, data_layout>> pairs{
      {data_layout::nchw, data_layout_of<layout::nChw8c>},
      {data_layout_of<layout::nChw8c>, data_layout::nchw},
      {data_layout::nchw, data_layout_of<layout::nChw16c>},
      {data_layout_of<layout::nChw16c>, data_layout::nchw},
      {data_layout::nchw, data_layout::nhwc},
      {data_layout::nhwc, data_layout::nchw}};
  std::vector<dims> cases = shapes;
  std::mt19937 rng(7);
  for (int i = 0; i < 6; ++i)  // random shapes as well
    cases.push_back({std::int64_t(rng() % 3 + 1), std::int64_t(rng() % 70 + 1), std::int64_t(rng() % 9 + 1),
                     std::int64_t(rng() % 11 + 1)});
  for (kernels::isa level : supported_isas()) {
    kernels::isa_scope scope(level);
    for (const auto& [from, to] : pairs)
      for (const dims& s : cases) {
        INFO(describe(from, to, s));
        Tensor src(s, data_type::float32, cpu_place, from);
        Tensor expected(s, data_type::float32, cpu_place, to);
        // Random floats everywhere, the source's padding too (both must ignore it).
        const bytes init = random_bytes(src.storage_bytes(), 11);
        std::memcpy(src.handle(), init.data(), init.size());
        std::memset(expected.handle(), 0xAB, expected.storage_bytes());  // oneDNN must zero the padding
        auto sm = onednn_memory(src, ctx.engine()), dm = onednn_memory(expected, ctx.engine());
        dnnl::reorder(sm, dm).execute(ctx.stream(), sm, dm);
        ctx.wait();
        const bytes got = run_reorder(init, from, to, s, 4);
        REQUIRE(got.size() == expected.storage_bytes());
        CHECK(std::memcmp(got.data(), expected.handle(), got.size()) == 0);
        // The oracle really zero-fills the padding (else the comparison above would prove little).
        if (block_of(to) > 1 && s[1] % block_of(to) != 0) {
          const auto* e = static_cast<const std::byte*>(expected.handle());
          CHECK(std::all_of(
              e + std::size_t(index_in(to, s, 0, s[1] - 1, 0, 0) + 1) * 4,
              e + std::size_t(index_in(to, s, 0, s[1] - 1, 0, 0) + block_of(to) - (s[1] - 1) % block_of(to)) *
                      4,
              [](std::byte b) { return b == std::byte{0}; }));
        }
      }
  }
}

TEST_CASE("every pair of 4-D layouts, every element size, matches the naive transform", "[transforms]") {
  for (kernels::isa level : supported_isas()) {
    kernels::isa_scope scope(level);
    for (std::size_t elem : {1, 2, 4, 8})
      for (data_layout from : layouts4d)
        for (data_layout to : layouts4d)
          for (const dims& s : shapes) {
            INFO(describe(from, to, s, elem));
            const bytes src = random_bytes(std::size_t(storage_of(from, s)) * elem, 3);
            CHECK(difference(run_reorder(src, from, to, s, elem), naive_reorder(src, from, to, s, elem)) ==
                  "");
          }
  }
}

TEST_CASE("NCHW -> blocked -> NCHW round trips are bit-exact for every element size", "[transforms]") {
  for (kernels::isa level : supported_isas()) {
    kernels::isa_scope scope(level);
    for (std::size_t elem : {1, 2, 4, 8})
      for (data_layout blocked :
           {data_layout_of<layout::nChw8c>, data_layout_of<layout::nChw16c>, data_layout::nhwc})
        for (const dims& s : shapes) {
          INFO(describe(data_layout::nchw, blocked, s, elem));
          const bytes src = random_bytes(std::size_t(s.numel()) * elem, 5);
          const bytes mid = run_reorder(src, data_layout::nchw, blocked, s, elem);
          CHECK(difference(run_reorder(mid, blocked, data_layout::nchw, s, elem), src) == "");
        }
  }
}

TEST_CASE("the kernels this test links spread large transforms over two threads", "[transforms][threads]") {
  // The tests below compare one thread with two; they only do so where the kernels' own file
  // (examples/ops/cpu_kernels.cpp, compiled once) is built with OpenMP. Meson gives this test
  // OpenMP exactly when it gives that file OpenMP (test/meson.build).
#ifdef _OPENMP
  CHECK(kernels::transform_threads(std::size_t{8} << 20, 2) == 2);
#else
  CHECK(kernels::transform_threads(std::size_t{8} << 20, 2) == 1);
#endif
  CHECK(kernels::transform_threads(std::size_t{256} << 10, 2) == 1);  // below 512 KB: one
  CHECK(kernels::transform_threads(std::size_t{8} << 20, 1) == 1);
}

TEST_CASE("large layout transforms give the same bytes on one thread and on several",
          "[transforms][threads]") {
  // Above the size where a transform goes parallel, odd extents; the second has 9 chunks (NCHW ->
  // NHWC of float: four groups of two and one more); the third many images of 6 pixels, fewer
  // than a vector step, which threads share image by image.
  for (const dims& s : {dims{3, 40, 37, 41}, dims{2, 72, 37, 47}, dims{600, 44, 2, 3}})
    for (kernels::isa level : supported_isas()) {
      kernels::isa_scope scope(level);
      for (data_layout from : layouts4d)
        for (data_layout to : layouts4d) {
          INFO(describe(from, to, s));
          const bytes src = random_bytes(std::size_t(storage_of(from, s)) * 4, 9);
          const bytes one = run_reorder(src, from, to, s, 4, 1);
          CHECK(difference(run_reorder(src, from, to, s, 4, 2), one) == "");
          CHECK(difference(one, naive_reorder(src, from, to, s, 4)) == "");
        }
    }
}

TEST_CASE("Fluid's layout case: NHWC [2,3,1,2] becomes NCHW [2,2,3,1], input unchanged", "[transforms]") {
  // Logical dims [N, C, H, W] = [2, 2, 3, 1]; the NHWC tensor's memory order is N, H, W, C.
  const dims s{2, 2, 3, 1};
  Tensor nhwc(s, data_type::float32, cpu_place, data_layout::nhwc);
  Tensor nchw(s, data_type::float32, cpu_place, data_layout::nchw);
  for (int i = 0; i < 12; ++i) nhwc.data<float>()[i] = float(i);
  for (kernels::isa level : supported_isas()) {
    kernels::isa_scope scope(level);
    std::memset(nchw.handle(), 0, nchw.storage_bytes());
    kernels::reorder(static_cast<const std::byte*>(nhwc.handle()), data_layout::nhwc,
                     static_cast<std::byte*>(nchw.handle()), data_layout::nchw, s, 4);
    // NHWC memory: n0: (h0: c0 c1) (h1: c0 c1) (h2: c0 c1) = 0 1 | 2 3 | 4 5; n1: 6..11.
    const std::vector<float> expected{0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11};
    CHECK(std::vector<float>(nchw.data<float>(), nchw.data<float>() + 12) == expected);
    for (int i = 0; i < 12; ++i) CHECK(nhwc.data<float>()[i] == float(i));
  }
}

TEST_CASE("layout transforms that cannot be done say so, naming the layouts and the shape",
          "[transforms][errors]") {
  std::vector<std::byte> a(64), b(64);
  CHECK_THROWS_WITH(
      kernels::reorder(a.data(), data_layout::nchw, b.data(), data_layout_of<layout::nc>, {2, 3}, 4),
      "fluidk: no layout transform from NCHW to NC for shape [2, 3]");
  CHECK_THROWS_AS(
      kernels::reorder(a.data(), data_layout::nchw, b.data(), data_layout_of<layout::nc>, {2, 3}, 4), error);
  CHECK_THROWS_WITH(kernels::reorder(a.data(), data_layout::nchw, b.data(), data_layout::nhwc, {2, 3, 4}, 4),
                    Catch::StartsWith("fluidk: no layout transform from NCHW to NHWC for shape [2, 3, 4]") &&
                        Catch::Contains("rank 4"));
  CHECK_THROWS_WITH(kernels::reorder(a.data(), data_layout::nchw, b.data(), data_layout_of<layout::nChw8c>,
                                     {1, 1, 1, 1}, 3),
                    Catch::Contains("1, 2, 4 or 8"));
  CHECK_THROWS_WITH(kernels::reorder_cast(a.data(), data_layout::any, data_type::float32, b.data(),
                                          data_layout::nchw, data_type::float16, {1, 2, 2, 2}),
                    "fluidk: no layout transform from ANY_LAYOUT to NCHW for shape [1, 2, 2, 2]");
  // The same layout is a copy, nothing to refuse.
  std::iota(reinterpret_cast<unsigned char*>(a.data()), reinterpret_cast<unsigned char*>(a.data()) + 64, 0);
  kernels::reorder(a.data(), data_layout_of<layout::nc>, b.data(), data_layout_of<layout::nc>, {4, 4}, 4);
  CHECK(a == b);
}

// ---- Casts ------------------------------------------------------------------------------------------

namespace {

template <class T>
constexpr bool is_half = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;
template <class T>
constexpr bool is_float = std::is_floating_point_v<T> || is_half<T>;

// The documented semantics, written independently of the library's conversion code.
template <class D, class S>
D reference(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (std::is_same_v<D, bool>) {
    if constexpr (is_half<S>)
      return !(float(s) == 0.0f);  // NaN != 0
    else
      return s != S(0);
  } else if constexpr (std::is_same_v<S, bool>) {
    return D(s ? 1 : 0);
  } else if constexpr (!is_float<S> && !is_float<D>) {
    return static_cast<D>(s);  // modular (C++20)
  } else if constexpr (!is_float<S>) {
    return static_cast<D>(s);  // float16(int64) rounds once from the integer
  } else if constexpr (!is_float<D>) {
    const double v = static_cast<double>(s);  // exact for every floating source
    if (std::isnan(v)) return D(0);
    const double top = std::ldexp(1.0, std::numeric_limits<D>::digits);  // one past the maximum
    if (v >= top) return std::numeric_limits<D>::max();
    if (std::is_signed_v<D> ? v <= -top : v <= -1.0) return std::numeric_limits<D>::min();
    return static_cast<D>(std::trunc(v));
  } else if constexpr (is_half<S> && is_half<D>) {
    return D(float(s));
  } else {
    return static_cast<D>(s);
  }
}

template <class T>
T from_bits(std::uint64_t bits) {
  if constexpr (std::is_same_v<T, float>)
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits));
  else if constexpr (std::is_same_v<T, double>)
    return std::bit_cast<double>(bits);
  else
    return T::from_bits(static_cast<std::uint16_t>(bits));
}

// Values of type T that exercise the conversions: limits, ties, overflow, NaN payloads,
// subnormals, then random ones.
template <class T>
std::vector<T> samples(std::size_t n, std::uint32_t seed) {
  std::vector<T> out;
  std::mt19937_64 rng(seed);
  if constexpr (std::is_same_v<T, bool>) {
    for (std::size_t i = 0; i < n; ++i) out.push_back((rng() & 1) != 0);
  } else if constexpr (std::is_integral_v<T>) {
    using L = std::numeric_limits<T>;
    for (T v : {T(0),    T(1),     T(2),     T(3),       L::max(), L::min(), T(L::max() - 1), T(L::min() + 1),
                T(100),  T(127),   T(-1),    T(-128),    T(-129),  T(255),   T(256),          T(2049),
                T(2051), T(65535), T(65536), T(16777217)})
      out.push_back(v);
    while (out.size() < n) {
      const std::uint64_t r = rng();
      out.push_back(static_cast<T>(r >> (rng() % 64)));
    }
  } else {
    std::vector<double> values{0.0,
                               -0.0,
                               1.0,
                               -1.0,
                               0.5,
                               1.5,
                               2.5,
                               -2.5,
                               0.49999,
                               127.9,
                               128.0,
                               -128.7,
                               255.5,
                               256.0,
                               -129.0,
                               32767.9,
                               32768.0,
                               65504.0,
                               65519.9,
                               65520.0,
                               1e10,
                               -1e10,
                               2147483647.0,
                               2147483648.0,
                               -2147483648.0,
                               -2147483649.0,
                               4294967296.0,
                               9.2233720368547758e18,
                               -9.2233720368547758e18,
                               1e30,
                               1.0 / 3.0,
                               1e-5,
                               6e-8,
                               1e-40,
                               1e-310};
    for (double v : values) {
      if constexpr (std::is_same_v<T, float>) {
        if (std::fabs(v) <= std::numeric_limits<float>::max()) out.push_back(static_cast<float>(v));
      } else if constexpr (std::is_same_v<T, double>) {
        out.push_back(v);
      } else {
        out.push_back(T(v));
      }
    }
    if constexpr (std::is_same_v<T, float>) {
      for (std::uint32_t b : {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7FA00000u, 0x7F800001u,
                              0x7F802000u, 0x00000001u, 0x80000001u, 0x007FFFFFu, 0x33800000u, 0x33000000u,
                              0x33C00000u, 0x3F801000u, 0x3F803000u, 0x3F808000u, 0x3F818000u, 0x477FF000u,
                              0x477FEFFFu, 0x7F7FFFFFu, 0x7F7F8000u, 0x387FC000u, 0x38800000u, 0x3F800FFFu})
        out.push_back(from_bits<float>(b));
    } else if constexpr (std::is_same_v<T, double>) {
      for (std::uint64_t b :
           {0x7FF0000000000000ull, 0x7FF8000000000000ull, 0x7FF4000000000000ull, 0x7FF0000000000001ull,
            0xFFF8000000000123ull, 0x0000000000000001ull, 0x3FF0020000000000ull, 0x3FF0020000000001ull,
            0x3FF0060000000000ull, 0x3FF0010000000000ull, 0x3FF0010000000001ull, 0x40EFFE0000000000ull})
        out.push_back(from_bits<double>(b));
    } else {
      for (std::uint16_t b : {0x7C00, 0xFC00, 0x7E00, 0x7D00, 0x7C01, 0xFE01, 0x0001, 0x8001, 0x03FF, 0x0400,
                              0x7BFF, 0x7F80, 0x7FC0, 0x7FA0, 0x7F81, 0x0080, 0x007F, 0x7F7F})
        out.push_back(T::from_bits(b));
    }
    while (out.size() < n) {
      // Random bit patterns: every exponent, NaNs and subnormals included.
      out.push_back(from_bits<T>(rng() >> (std::is_same_v<T, double>  ? 0
                                           : std::is_same_v<T, float> ? 32
                                                                      : 48)));
    }
  }
  out.resize(n);
  return out;
}

template <class T>
bytes to_bytes(const std::vector<T>& v) {
  bytes out(v.size() * sizeof(T));
  if constexpr (std::is_same_v<T, bool>) {
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = std::byte(v[i] ? 1 : 0);
  } else if (!v.empty()) {
    std::memcpy(out.data(), v.data(), out.size());
  }
  return out;
}

template <class S, class D>
bytes reference_cast(const std::vector<S>& src) {
  std::vector<D> out;
  out.reserve(src.size());
  for (const S& s : src) out.push_back(reference<D>(s));
  return to_bytes(out);
}

bytes run_cast(const bytes& src, data_type from, data_type to, std::size_t n, int threads = 0) {
  const bytes before = src;
  bytes dst(n * size_of(to), std::byte{0xCD});
  kernels::cast(cp(src), from, mp(dst), to, n, threads);
  REQUIRE(difference(src, before) == "");
  return dst;
}

template <class S, class D>
void check_pair(std::size_t n) {
  const std::vector<S> values = samples<S>(n, 1234 + std::uint32_t(n));
  const bytes src = to_bytes(values), expected = reference_cast<S, D>(values);
  for (kernels::isa level : supported_isas()) {
    kernels::isa_scope scope(level);
    INFO(std::string(name_of(data_type_of<S>))
         << " -> " << name_of(data_type_of<D>) << ", n = " << n << ", isa " << kernels::name_of(level));
    const bytes got = run_cast(src, data_type_of<S>, data_type_of<D>, n);
    if (got != expected) {
      std::size_t i = 0;
      while (i < n && std::memcmp(&got[i * sizeof(D)], &expected[i * sizeof(D)], sizeof(D)) == 0) ++i;
      FAIL_CHECK("first difference at element " << i);
    }
  }
}

template <class S>
void check_from(std::size_t n) {
  boost::mp11::mp_for_each<boost::mp11::mp_transform<boost::mp11::mp_identity, dtypes>>(
      [&](auto d) { check_pair<S, typename decltype(d)::type>(n); });
}

}  // namespace

TEST_CASE("casts between every pair of data types match the reference, on every path and tail",
          "[transforms][cast]") {
  for (std::size_t n : {0, 1, 7, 33, 1000}) {
    boost::mp11::mp_for_each<boost::mp11::mp_transform<boost::mp11::mp_identity, dtypes>>(
        [&](auto s) { check_from<typename decltype(s)::type>(n); });
  }
}

TEST_CASE("long casts of the vectorised pairs match the reference", "[transforms][cast]") {
  constexpr std::size_t n = 1000003;
  check_pair<float, float16>(n);
  check_pair<float, bfloat16>(n);
  check_pair<float16, float>(n);
  check_pair<bfloat16, float>(n);
  check_pair<float16, bfloat16>(n);
  check_pair<bfloat16, float16>(n);
  check_pair<double, float16>(n);
  check_pair<std::int32_t, float>(n);
}

// A cast of n elements on one thread against `expected`, on every level and with stores through the
// caches and streamed.
void check_cast_every_level_and_store(const bytes& src, data_type from, data_type to, std::size_t n,
                                      const bytes& expected) {
  for (kernels::isa level : supported_isas()) {
    kernels::isa_scope scope(level);
    for (kernels::store_policy policy : {kernels::store_policy::cached, kernels::store_policy::streaming}) {
      kernels::store_policy_scope stores(policy);
      INFO("isa " << kernels::name_of(level) << ", stores " << kernels::name_of(policy));
      CHECK(difference(run_cast(src, from, to, n, 1), expected) == "");
    }
  }
}

TEST_CASE("float -> float16 takes one kernel from the L1 and another beyond it, both exact",
          "[transforms][cast]") {
  // On the AVX-512 levels the cast runs the 512-bit kernel while what a thread reads and writes
  // fits in the L1, the AVX2 one beyond (vector_cast): both against the reference, with tails.
  // (An L1 size the machine did not report is taken as 4 KiB, so that the lengths stay positive.)
  // That is the choice on CPUs other than AMD Zen 5, which takes the 512-bit kernel at every size:
  // both choices forced, so that each runs on every machine.
  const std::size_t l1_elements = std::max<std::size_t>(kernels::detected_caches().l1d, 4096) / 6;
  for (unsigned family : {0x19u, kernels::zen5_family}) {
    kernels::amd_family_scope tuned(family);
    for (kernels::isa level : {kernels::isa::avx512, kernels::isa::avx512_bf16})
      if (kernels::isa_supported(level)) {
        kernels::isa_scope scope(level);
        CHECK((kernels::detail::vector_cast(data_type::float32, data_type::float16, l1_elements * 4 - 64) ==
               kernels::detail::vector_cast(data_type::float32, data_type::float16, l1_elements * 4 + 64)) ==
              (family >= kernels::zen5_family));
      }
    check_pair<float, float16>(l1_elements - 29);
    check_pair<float, float16>(l1_elements + 29);
  }
  // Beyond the L2 (what one thread reads) AMD Zen 5 reads the source ahead through the caches
  // (cast_reads_ahead), other CPUs take the AVX2 kernel: a kernel of its own either way, exact
  // through the caches and streamed.
  const std::size_t beyond_l2 = kernels::detected_caches().l2 / sizeof(float) * 2 + 45;
  const std::vector<float> values = samples<float>(beyond_l2, 77);
  const bytes src = to_bytes(values), expected = reference_cast<float, float16>(values);
  for (unsigned family : {0x19u, kernels::zen5_family}) {
    kernels::amd_family_scope tuned(family);
    INFO("family " << family);
    for (kernels::isa level : {kernels::isa::avx512, kernels::isa::avx512_bf16})
      if (kernels::isa_supported(level)) {
        kernels::isa_scope scope(level);
        CHECK(kernels::detail::vector_cast(data_type::float32, data_type::float16, beyond_l2 * 4) !=
              kernels::detail::vector_cast(data_type::float32, data_type::float16, 1024));
      }
    check_cast_every_level_and_store(src, data_type::float32, data_type::float16, beyond_l2, expected);
  }
}

TEST_CASE("the integer-division pattern survives float -> double -> int", "[transforms][cast]") {
  const std::vector<float> f{0.f / 3, 1.f / 3, 2.f / 3, 3.f / 3, 4.f / 3, 5.f / 3};
  for (kernels::isa level : supported_isas()) {
    kernels::isa_scope scope(level);
    const bytes d = run_cast(to_bytes(f), data_type::float32, data_type::float64, 6);
    const bytes i = run_cast(d, data_type::float64, data_type::int32, 6);
    std::vector<std::int32_t> out(6);
    std::memcpy(out.data(), i.data(), i.size());
    CHECK(out == std::vector<std::int32_t>{0, 0, 0, 1, 1, 1});
  }
}

TEST_CASE("half-precision rounding: ties to even, overflow to infinity, NaN payloads, subnormals",
          "[transforms][cast]") {
  struct expect {
    std::uint32_t in;
    std::uint16_t f16, bf16;
  };
  const std::vector<expect> cases{
      {0x3F801000, 0x3C00, 0x3F80},  // 1 + 2^-11: f16 tie -> even (1)
      {0x3F803000, 0x3C02, 0x3F80},  // 1 + 3 * 2^-11: f16 tie -> even (1 + 2^-9)
      {0x3F808000, 0x3C04, 0x3F80},  // 1 + 2^-8: bf16 tie -> even (1)
      {0x3F818000, 0x3C0C, 0x3F82},  // 1 + 3 * 2^-8: bf16 tie -> even (1 + 2^-6)
      {0x477FF000, 0x7C00, 0x4780},  // 65520: f16 overflows to infinity
      {0x477FEFFF, 0x7BFF, 0x4780},  // just below: 65504
      {0x7F7FFFFF, 0x7C00, 0x7F80},  // FLT_MAX: infinity in both
      {0xFF800000, 0xFC00, 0xFF80},  // -infinity kept
      {0x7FC00000, 0x7E00, 0x7FC0},  // quiet NaN
      {0x7FA00000, 0x7D00, 0x7FA0},  // signalling NaN: payload kept, still signalling
      {0x7F800001, 0x7E00, 0x7FC0},  // NaN whose payload is only in the dropped bits: quiet bit set
      {0xFFC00001, 0xFE00, 0xFFC0},  // negative NaN keeps its sign
      {0x33800000, 0x0001, 0x3380},  // 2^-24: smallest f16 subnormal
      {0x33000000, 0x0000, 0x3300},  // 2^-25: tie between 0 and 2^-24 -> even (0)
      {0x33C00000, 0x0002, 0x33C0},  // 1.5 * 2^-24: tie -> even (2 * 2^-24)
      {0x00000001, 0x0000, 0x0000},  // float subnormal: 0 in f16, and ties to even 0 in bf16
      {0x007FFFFF, 0x0000, 0x0080},  // largest float subnormal rounds up to bf16's smallest normal
      {0x00018000, 0x0000, 0x0002},  // bf16 subnormal tie -> even
  };
  std::vector<float> in;
  for (const auto& c : cases) in.push_back(std::bit_cast<float>(c.in));
  for (std::size_t pad : {0, 5, 29}) {  // the same values at every position of a vector
    std::vector<float> shifted(pad, 1.0f);
    shifted.insert(shifted.end(), in.begin(), in.end());
    for (kernels::isa level : supported_isas()) {
      kernels::isa_scope scope(level);
      INFO("isa " << kernels::name_of(level) << ", offset " << pad);
      const bytes h = run_cast(to_bytes(shifted), data_type::float32, data_type::float16, shifted.size());
      const bytes b = run_cast(to_bytes(shifted), data_type::float32, data_type::bfloat16, shifted.size());
      for (std::size_t i = 0; i < cases.size(); ++i) {
        std::uint16_t hv, bv;
        std::memcpy(&hv, &h[(pad + i) * 2], 2);
        std::memcpy(&bv, &b[(pad + i) * 2], 2);
        INFO("input bits " << std::hex << cases[i].in);
        CHECK(hv == cases[i].f16);
        CHECK(bv == cases[i].bf16);
      }
      // Back to float: exact, NaN payloads included (a signalling NaN stays signalling).
      const bytes hf = run_cast(h, data_type::float16, data_type::float32, shifted.size());
      const bytes bf = run_cast(b, data_type::bfloat16, data_type::float32, shifted.size());
      for (std::size_t i = 0; i < cases.size(); ++i) {
        std::uint32_t x, y;
        std::memcpy(&x, &hf[(pad + i) * 4], 4);
        std::memcpy(&y, &bf[(pad + i) * 4], 4);
        CHECK(x == std::bit_cast<std::uint32_t>(static_cast<float>(float16::from_bits(cases[i].f16))));
        CHECK(y == std::uint32_t(cases[i].bf16) << 16);
      }
      std::vector<float> nan_back(cases.size());
      std::memcpy(nan_back.data(), &hf[pad * 4], cases.size() * 4);
      CHECK(std::isnan(nan_back[9]));
      CHECK((std::bit_cast<std::uint32_t>(nan_back[9]) & 0x00400000u) == 0);  // still signalling
    }
  }
}

TEST_CASE(
    "float -> bfloat16 in blocks of 32 rounds as fluidk::bfloat16 does, with or without NaNs and subnormals",
    "[transforms][cast]") {
  // Blocks of normal values only (AVX512_BF16's conversion takes them), and the same blocks with
  // one subnormal or one NaN (the integer rounding takes those): ties to even both ways, the
  // carry into the exponent, overflow to infinity, zeros and infinities, at every offset.
  std::vector<std::uint32_t> normal{0x3F808000u, 0x3F818000u, 0x3F807FFFu, 0x3F808001u, 0xBF808000u,
                                    0xBF818000u, 0x3FFF8000u, 0x7F7F8000u, 0x7F7FFFFFu, 0xFF7FFFFFu,
                                    0x00800000u, 0x80800000u, 0x00FF8000u, 0x7F800000u, 0xFF800000u,
                                    0x00000000u, 0x80000000u, 0x3F800000u};
  std::mt19937 rng(7);
  while (normal.size() < 32 * 8) {
    const std::uint32_t bits = rng();
    const std::uint32_t exponent = (bits >> 23) & 0xFF;
    if (exponent != 0 && exponent != 0xFF) normal.push_back(bits);
  }
  for (std::uint32_t special : {0u, 0x00000001u, 0x807FFFFFu, 0x7FC00000u, 0x7F800001u, 0xFFA00000u})
    for (std::size_t at : {0, 5, 31, 100}) {
      std::vector<std::uint32_t> bits = normal;
      if (special != 0) bits[at] = special;
      std::vector<float> values;
      for (std::uint32_t b : bits) values.push_back(from_bits<float>(b));
      const bytes src = to_bytes(values), expected = reference_cast<float, bfloat16>(values);
      for (kernels::isa level : supported_isas()) {
        kernels::isa_scope scope(level);
        for (kernels::store_policy policy :
             {kernels::store_policy::cached, kernels::store_policy::streaming}) {
          kernels::store_policy_scope stores(policy);
          INFO("special " << special << " at " << at << ", isa " << kernels::name_of(level) << ", stores "
                          << kernels::name_of(policy));
          CHECK(difference(run_cast(src, data_type::float32, data_type::bfloat16, values.size()), expected) ==
                "");
        }
      }
    }
}

TEST_CASE("float -> bfloat16 beyond the L2 takes its own blocks, which round as the others do",
          "[transforms][cast]") {
  // With AVX512_BF16, a thread that reads more than its L2 holds converts through 256-bit blocks
  // (vector_cast), or on AMD Zen 5 through 512-bit blocks that read the source ahead
  // (cast_reads_ahead): normal blocks, and blocks holding a subnormal or a NaN at several offsets,
  // long enough for that path and with a tail, against the reference on every level and store
  // policy.
  const std::size_t n = kernels::detected_caches().l2 / sizeof(float) * 2 + 45;
  std::mt19937 rng(11);
  std::vector<float> values(n);
  for (float& v : values) {
    std::uint32_t bits = rng();
    while (((bits >> 23) & 0xFF) == 0 || ((bits >> 23) & 0xFF) == 0xFF) bits = rng();
    v = from_bits<float>(bits);
  }
  const std::uint32_t specials[] = {0x00000001u, 0x807FFFFFu, 0x7FC00000u, 0x7F800001u, 0xFFA00000u};
  for (std::size_t k = 0; k < 200; ++k)
    values[(k * 7919 * 32 + (k % 4) * 9) % n] = from_bits<float>(specials[k % 5]);
  values[n - 1] = from_bits<float>(0x7F800001u);
  const bytes src = to_bytes(values), expected = reference_cast<float, bfloat16>(values);
  // (Both families' choices forced, so that each runs on every machine.)
  for (unsigned family : {0x19u, kernels::zen5_family}) {
    kernels::amd_family_scope tuned(family);
    if (kernels::isa_supported(kernels::isa::avx512_bf16)) {
      kernels::isa_scope scope(kernels::isa::avx512_bf16);
      CHECK(kernels::detail::vector_cast(data_type::float32, data_type::bfloat16, n * 4) !=
            kernels::detail::vector_cast(data_type::float32, data_type::bfloat16, 1024));
    }
    INFO("family " << family);
    check_cast_every_level_and_store(src, data_type::float32, data_type::bfloat16, n, expected);
  }
}

TEST_CASE("large casts give the same bytes on one thread and on several", "[transforms][cast][threads]") {
  const std::size_t n = 700001;
  const bytes src = to_bytes(samples<float>(n, 99));
  for (kernels::isa level : supported_isas()) {
    kernels::isa_scope scope(level);
    for (data_type to : {data_type::float16, data_type::bfloat16, data_type::int8, data_type::float64})
      CHECK(difference(run_cast(src, data_type::float32, to, n, 2),
                       run_cast(src, data_type::float32, to, n, 1)) == "");
  }
}

// ---- Fused --------------------------------------------------------------------------------------------

TEST_CASE("reorder_cast gives the bytes of reorder then cast, in one pass", "[transforms][fused]") {
  const std::vector<std::pair<data_type, data_type>> types{
      {data_type::float32, data_type::float16},  {data_type::float32, data_type::bfloat16},
      {data_type::float16, data_type::float32},  {data_type::bfloat16, data_type::float32},
      {data_type::float16, data_type::bfloat16}, {data_type::bfloat16, data_type::float16},
      {data_type::float64, data_type::float16},  {data_type::int32, data_type::float32},
      {data_type::float32, data_type::int8},     {data_type::uint8, data_type::float32},
      {data_type::boolean, data_type::float16},  {data_type::float32, data_type::float32}};
  const std::vector<dims> odd{{1, 3, 5, 7},  {2, 17, 3, 3}, {1, 8, 4, 4},  {2, 64, 3, 5},
                              {1, 1, 1, 1},  {3, 40, 1, 9}, {3, 20, 1, 1}, {2, 24, 1, 1},
                              {2, 24, 2, 2}, {3, 9, 1, 3},  {1, 64, 1, 7}};
  for (kernels::isa level : supported_isas()) {
    kernels::isa_scope scope(level);
    for (const auto& [ft, tt] : types)
      for (data_layout from : layouts4d)
        for (data_layout to : layouts4d)
          for (const dims& s : odd) {
            INFO(describe(from, to, s) << " " << name_of(ft) << " -> " << name_of(tt));
            const std::size_t sn = std::size_t(storage_of(from, s)), dn = std::size_t(storage_of(to, s));
            bytes src(sn * size_of(ft));
            // Valid values of the source type (bool as 0/1), via a cast from random floats.
            const bytes f = to_bytes(samples<float>(sn, 17));
            kernels::cast(cp(f), data_type::float32, mp(src), ft, sn);
            const bytes mid = run_reorder(src, from, to, s, size_of(ft));
            const bytes expected = run_cast(mid, ft, tt, dn);
            const bytes before = src;
            bytes got(dn * size_of(tt), std::byte{0xEE});
            kernels::reorder_cast(cp(src), from, ft, mp(got), to, tt, s);
            CHECK(difference(src, before) == "");
            CHECK(difference(got, expected) == "");
          }
  }
}

TEST_CASE("the fused path of a large tensor is the same on one thread and on several",
          "[transforms][fused][threads]") {
  const dims s{2, 24, 61, 67};
  const std::size_t sn = std::size_t(storage_of(data_layout_of<layout::nChw8c>, s));
  const bytes src = to_bytes(samples<float>(sn, 23));
  bytes one(std::size_t(s.numel()) * 2), two(one.size());
  kernels::reorder_cast(cp(src), data_layout_of<layout::nChw8c>, data_type::float32, mp(one),
                        data_layout::nchw, data_type::float16, s, 1);
  kernels::reorder_cast(cp(src), data_layout_of<layout::nChw8c>, data_type::float32, mp(two),
                        data_layout::nchw, data_type::float16, s, 2);
  CHECK(difference(one, two) == "");
}

TEST_CASE("the instruction-set level can be forced and restored", "[transforms]") {
  const kernels::isa before = kernels::active_isa();
  {
    kernels::isa_scope scope(kernels::isa::scalar);
    CHECK(kernels::active_isa() == kernels::isa::scalar);
  }
  CHECK(kernels::active_isa() == before);
  if (!kernels::isa_supported(kernels::isa::avx512))
    CHECK_THROWS_WITH(kernels::force_isa(kernels::isa::avx512), Catch::Contains("cannot force the avx512"));
}

// ---- Store policies ---------------------------------------------------------------------------------

namespace {
// A buffer whose data starts `offset` bytes past a 64-byte boundary, full of garbage (so that
// unwritten bytes show), for targets the streaming stores cannot or can write aligned.
struct placed {
  bytes storage;
  std::size_t offset;
  placed(std::size_t size, std::size_t at) : storage(size + 128, std::byte{0x5A}) {
    const auto base = reinterpret_cast<std::uintptr_t>(storage.data());
    offset = (64 - base % 64) % 64 + at;
  }
  std::byte* data() { return storage.data() + offset; }
  bytes content(std::size_t size) const {
    return bytes(storage.begin() + std::ptrdiff_t(offset), storage.begin() + std::ptrdiff_t(offset + size));
  }
  // The bytes around the target, which no kernel may touch.
  bool untouched_around(std::size_t size) const {
    for (std::size_t i = 0; i < storage.size(); ++i)
      if ((i < offset || i >= offset + size) && storage[i] != std::byte{0x5A}) return false;
    return true;
  }
};

const std::vector<kernels::store_policy> policies{
    kernels::store_policy::cached, kernels::store_policy::prefetched, kernels::store_policy::streaming};

// Runs write(target, threads) on every instruction-set level and store policy, under each of
// `walks`, on each of `threads`, into a target each of `offsets` bytes off a 64-byte boundary:
// each time the target must hold `expected`, and no byte around it may change.
template <class Write>
void check_paths(const bytes& expected, const std::vector<kernels::nhwc_walk>& walks,
                 const std::vector<int>& threads, const std::vector<std::size_t>& offsets, Write&& write) {
  const std::size_t size = expected.size();
  for (kernels::isa level : supported_isas()) {
    kernels::isa_scope isa(level);
    for (kernels::nhwc_walk walk : walks) {
      kernels::nhwc_walk_scope walking(walk);
      for (kernels::store_policy policy : policies) {
        kernels::store_policy_scope stores(policy);
        for (int t : threads)
          for (std::size_t at : offsets) {
            INFO("isa " << kernels::name_of(level) << " walk " << kernels::name_of(walk) << " stores "
                        << kernels::name_of(policy) << " threads " << t << " at +" << at);
            placed dst(size, at);
            write(dst.data(), t);
            CHECK(difference(dst.content(size), expected) == "");
            CHECK(dst.untouched_around(size));
          }
      }
    }
  }
}

const std::vector<kernels::nhwc_walk> both_walks{kernels::nhwc_walk::long_runs,
                                                 kernels::nhwc_walk::short_blocks};

// check_paths on the walk in force, one thread and two, a target on a line and 32 bytes off it.
template <class Write>
void check_on_every_path(const bytes& expected, Write&& write) {
  check_paths(expected, {kernels::active_nhwc_walk()}, {1, 2}, {0, 32}, std::forward<Write>(write));
}

// The job of NCHW -> NHWC of two images of 196 pixels and c channels, elements of se -> de bytes.
kernels::detail::layout_job nhwc_job(std::int64_t c, std::size_t se, std::size_t de,
                                     kernels::nhwc_walk walk) {
  return kernels::detail::make_layout_job(data_layout::nchw, data_layout::nhwc, 2, c, 196, se, de, walk);
}
}  // namespace

TEST_CASE("on AMD Zen 5 the fused pass through the caches beyond the L2 reads its source ahead, exactly",
          "[transforms][fused]") {
  namespace d = kernels::detail;
  const kernels::cache_sizes caches = kernels::detected_caches();
  // What one thread reads: twice the L2, with a tail of pixels; what it writes (half of it) at
  // most an eighth of the last-level cache, so that it goes through the caches.
  const std::int64_t w = std::int64_t(2 * caches.l2 / 4 / 64 / 8) + 3;
  const dims s{1, 64, 8, w};
  const std::size_t sn = std::size_t(storage_of(data_layout_of<layout::nChw8c>, s));
  if (sn * 2 > caches.llc / 8) {
    WARN("an L2 of " << (caches.l2 >> 10) << " KiB and a last-level cache of " << (caches.llc >> 10)
                     << " KiB: such a pass would stream");
    return;
  }
  const bytes src = to_bytes(samples<float>(sn, 31));
  const bytes expected = run_cast(run_reorder(src, data_layout_of<layout::nChw8c>, data_layout::nchw, s, 4),
                                  data_type::float32, data_type::float16, std::size_t(s.numel()));
  for (unsigned family : {0x19u, kernels::zen5_family}) {
    kernels::amd_family_scope tuned(family);
    placed at(std::size_t(s.numel()) * 2, 0);
    CHECK(d::plan_layout(data_layout_of<layout::nChw8c>, 4, at.data(), data_layout::nchw, 2, s, 1)
              .job.source_ahead == (family >= kernels::zen5_family));
    for (kernels::isa level : supported_isas()) {
      kernels::isa_scope scope(level);
      INFO("isa " << kernels::name_of(level) << ", family " << family);
      bytes got(std::size_t(s.numel()) * 2, std::byte{0xEE});
      kernels::reorder_cast(cp(src), data_layout_of<layout::nChw8c>, data_type::float32, mp(got),
                            data_layout::nchw, data_type::float16, s, 1);
      CHECK(difference(got, expected) == "");
    }
  }
}

TEST_CASE("every store policy on every instruction-set level gives the naive transform's bytes",
          "[transforms][stores]") {
  // Shapes whose rows are whole lines (where streaming applies) and shapes whose are not; a
  // channel count that is not a multiple of 8 or 16; targets at and off a 64-byte boundary;
  // pixel counts around the AVX-512 engine's steps of 8 and 16 pixels, and odd ones, which put
  // every other nChw8c chunk half a line off (2x16x7x9, 2x24x5x13, 1x32x9x9).
  const std::vector<dims> cases{{1, 64, 8, 8}, {2, 32, 16, 4}, {1, 16, 4, 8},  {1, 24, 8, 4},
                                {3, 17, 8, 2}, {1, 8, 5, 7},   {2, 40, 3, 16}, {1, 72, 16, 16},
                                {2, 16, 7, 9}, {2, 24, 5, 13}, {1, 32, 9, 9},  {3, 20, 1, 3}};
  for (kernels::isa level : supported_isas()) {
    kernels::isa_scope isa(level);
    for (kernels::store_policy policy : policies) {
      kernels::store_policy_scope stores(policy);
      for (std::size_t elem : {1, 2, 4, 8})
        for (data_layout from : layouts4d)
          for (data_layout to : layouts4d)
            for (const dims& s : cases)
              for (std::size_t at : {0, 4, 16, 32}) {
                if (at % elem != 0) continue;
                INFO(describe(from, to, s, elem) << " stores " << kernels::name_of(policy) << " at +" << at);
                const bytes src = random_bytes(std::size_t(storage_of(from, s)) * elem, 31);
                const std::size_t size = std::size_t(storage_of(to, s)) * elem;
                placed dst(size, at);
                kernels::reorder(cp(src), from, dst.data(), to, s, elem, 1);
                CHECK(difference(dst.content(size), naive_reorder(src, from, to, s, elem)) == "");
                CHECK(dst.untouched_around(size));
              }
    }
  }
}

TEST_CASE(
    "nChw8c -> NCHW of 4-byte elements stores rows off a line a line at a time on the cores whose walk is "
    "short blocks, with the naive transform's bytes",
    "[transforms][stores][threads]") {
  // The job asks for it on those cores only, from a blocked source into a planar target.
  namespace d = kernels::detail;
  const data_layout blocked = data_layout_of<layout::nChw8c>;
  CHECK(d::make_layout_job(blocked, data_layout::nchw, 1, 64, 196, 4, 4, kernels::nhwc_walk::short_blocks)
            .line_rows);
  CHECK_FALSE(d::make_layout_job(blocked, data_layout::nchw, 1, 64, 196, 4, 4, kernels::nhwc_walk::long_runs)
                  .line_rows);
  CHECK_FALSE(
      d::make_layout_job(data_layout::nchw, blocked, 1, 64, 196, 4, 4, kernels::nhwc_walk::short_blocks)
          .line_rows);
  CHECK_FALSE(
      d::make_layout_job(blocked, data_layout::nhwc, 1, 64, 196, 4, 4, kernels::nhwc_walk::short_blocks)
          .line_rows);
  // Rows of 196 pixels (784 bytes: each row starts 16 bytes further into a line), of 135 with a
  // partial last chunk (4 rows of 8 written), of 65 (four steps of 16, then the last 8 pixels
  // again), of 64 (the fewest a chunk takes them from), of 100, of 256 (rows on lines, written
  // as they were unless the target is off a line), of 1028 (two threads cut them into pieces of
  // more than 64 pixels, which start inside a line); targets on a line, 4, 12, 36 and 60 bytes
  // off one, and 2 off (not 4-byte aligned: the stores as they fall); both walks, every level
  // and store policy, one thread and two.
  const std::vector<dims> cases{{1, 64, 14, 14}, {2, 20, 9, 15},  {1, 16, 5, 13}, {1, 8, 8, 8},
                                {3, 24, 10, 10}, {1, 16, 16, 16}, {1, 12, 4, 257}};
  for (const dims& s : cases) {
    const bytes src = random_bytes(std::size_t(storage_of(blocked, s)) * 4, 57);
    INFO(describe(blocked, data_layout::nchw, s, 4));
    check_paths(naive_reorder(src, blocked, data_layout::nchw, s, 4), both_walks, {1, 2},
                {0, 2, 4, 12, 36, 60}, [&](std::byte* dst, int threads) {
                  kernels::reorder(cp(src), blocked, dst, data_layout::nchw, s, 4, threads);
                });
  }
}

TEST_CASE("NCHW -> nChw8c reads its rows ahead beyond the L2 only, and gives the naive transform's bytes",
          "[transforms][stores][threads]") {
  // reads_rows_ahead: through the caches, where a thread moves more than its L2 holds. Then a
  // transform that large on one and two threads (so more than that per thread on both), with a
  // partial last chunk and a pixel count that is not a multiple of 8 or of the 64-pixel bursts,
  // on every level and store policy.
  const std::size_t l2 = kernels::detected_caches().l2;
  CHECK_FALSE(kernels::reads_rows_ahead(kernels::store_policy::cached, l2 / 2));
  CHECK(kernels::reads_rows_ahead(kernels::store_policy::cached, 2 * l2));
  CHECK_FALSE(kernels::reads_rows_ahead(kernels::store_policy::streaming, 2 * l2));
  CHECK_FALSE(kernels::reads_rows_ahead(kernels::store_policy::prefetched, 2 * l2));
  const std::int64_t c = 20, w = std::int64_t(2 * l2 / ((20 + 24) * 4) / 7) | 1;
  const dims s{1, c, 7, w + 2};
  const bytes src = random_bytes(std::size_t(storage_of(data_layout::nchw, s)) * 4, 53);
  const std::size_t size = std::size_t(storage_of(data_layout_of<layout::nChw8c>, s)) * 4;
  REQUIRE(std::size_t(storage_of(data_layout::nchw, s)) * 4 + size > 2 * l2);
  const bytes expected = naive_reorder(src, data_layout::nchw, data_layout_of<layout::nChw8c>, s, 4);
  // The plan that reorder follows reads ahead at this size through the caches, on one thread and
  // on two, and not for a small transform or when streaming.
  {
    namespace d = kernels::detail;
    placed at(size, 0);
    const auto plan = [&](const dims& shape, int threads) {
      return d::plan_layout(data_layout::nchw, 4, at.data(), data_layout_of<layout::nChw8c>, 4, shape,
                            threads);
    };
    kernels::store_policy_scope cached(kernels::store_policy::cached);
    CHECK(plan(s, 1).job.read_ahead);
    CHECK(plan(s, 2).job.read_ahead);
    CHECK_FALSE(plan(dims{1, c, 7, 9}, 1).job.read_ahead);
    kernels::store_policy_scope streaming(kernels::store_policy::streaming);
    CHECK_FALSE(plan(s, 1).job.read_ahead);
  }
  check_on_every_path(expected, [&](std::byte* dst, int threads) {
    kernels::reorder(cp(src), data_layout::nchw, dst, data_layout_of<layout::nChw8c>, s, 4, threads);
  });
}

TEST_CASE(
    "on AMD Zen 5 a float layout transform on two threads that fits in the last-level cache stays in "
    "the caches",
    "[transforms][stores][threads]") {
  namespace d = kernels::detail;
  const std::size_t llc = kernels::detected_caches().llc;
  if (llc > (std::size_t(64) << 20)) {
    WARN("a last-level cache of " << (llc >> 20)
                                  << " MiB: the plans of this case would take too much memory");
    return;
  }
  // What it writes: a third of the LLC (a sixth as float16), more than the eighth from which the
  // automatic choice streams; reads and writes together two thirds of it. Nothing runs: only the
  // plans are compared.
  const std::int64_t w = std::int64_t(llc / 3 / 4 / 64 / 8) / 64 * 64;  // whole lines, which may stream
  const dims shape{1, 64, 8, w};
  const std::size_t size = std::size_t(storage_of(data_layout::nchw, shape)) * 4;
  REQUIRE(size / 2 > llc / 8);
  REQUIRE(2 * size <= llc);
  placed at(size, 0);
  const auto plan = [&](data_layout from, data_layout to, std::size_t se, std::size_t de, int threads) {
    return d::plan_layout(from, se, at.data(), to, de, shape, threads);
  };
  const data_layout nchw = data_layout::nchw, blocked = data_layout_of<layout::nChw8c>;
  const bool two_threads = plan(nchw, blocked, 4, 4, 2).threads == 2;  // without OpenMP, one
  for (unsigned family : {0x19u, kernels::zen5_family}) {
    kernels::amd_family_scope tuned(family);
    CAPTURE(family);
    const bool zen5 = family >= kernels::zen5_family;
    for (const auto& [from, to] :
         {std::pair{nchw, blocked}, std::pair{blocked, nchw}, std::pair{nchw, data_layout::nhwc}}) {
      CHECK(plan(from, to, 4, 4, 1).job.stream);  // one thread streams
      if (two_threads) CHECK(plan(from, to, 4, 4, 2).job.stream == !zen5);
      // A forced policy is kept.
      kernels::store_policy_scope streaming(kernels::store_policy::streaming);
      if (two_threads) CHECK(plan(from, to, 4, 4, 2).job.stream);
    }
    // The fused float -> float16 pass streams on two threads as well.
    if (two_threads) CHECK(plan(blocked, nchw, 4, 2, 2).job.stream);
  }
}

TEST_CASE(
    "every store policy gives the same bytes for casts and fused passes, at any alignment and on two threads",
    "[transforms][stores][threads]") {
  const std::vector<std::pair<data_type, data_type>> types{
      {data_type::float32, data_type::float16},  {data_type::float32, data_type::bfloat16},
      {data_type::float16, data_type::float32},  {data_type::bfloat16, data_type::float32},
      {data_type::float16, data_type::bfloat16}, {data_type::bfloat16, data_type::float16}};
  for (kernels::isa level : supported_isas()) {
    kernels::isa_scope isa(level);
    for (const auto& [from, to] : types) {
      // Casts: lengths with heads and tails around the 64-byte lines, and one long enough for two
      // threads.
      for (std::size_t n : {std::size_t(1), std::size_t(31), std::size_t(1000), std::size_t(200003)})
        for (std::size_t at : {0, 2, 6, 36}) {
          bytes src(n * size_of(from));
          const bytes f = to_bytes(samples<float>(n, 41));
          kernels::cast(cp(f), data_type::float32, mp(src), from, n);
          const bytes expected = run_cast(src, from, to, n, 1);
          for (kernels::store_policy policy : policies) {
            kernels::store_policy_scope stores(policy);
            for (int threads : {1, 2}) {
              INFO(name_of(from) << " -> " << name_of(to) << " n " << n << " at +" << at << " stores "
                                 << kernels::name_of(policy) << " threads " << threads << " isa "
                                 << kernels::name_of(level));
              const std::size_t size = n * size_of(to);
              placed dst(size, at);
              kernels::cast(cp(src), from, dst.data(), to, n, threads);
              CHECK(difference(dst.content(size), expected) == "");
              CHECK(dst.untouched_around(size));
            }
          }
        }
      // Fused: large enough to split between two threads, rows of whole lines and not, and a
      // last chunk of 5 channels in rows of several 16-pixel blocks.
      for (const dims& s : {dims{2, 24, 48, 32}, dims{1, 40, 61, 67}, dims{1, 21, 7, 9}})
        for (data_layout a : layouts4d)
          for (data_layout b : layouts4d) {
            if (a == b) continue;
            const std::size_t sn = std::size_t(storage_of(a, s)), dn = std::size_t(storage_of(b, s));
            bytes src(sn * size_of(from));
            const bytes f = to_bytes(samples<float>(sn, 43));
            kernels::cast(cp(f), data_type::float32, mp(src), from, sn);
            const bytes expected = run_cast(run_reorder(src, a, b, s, size_of(from)), from, to, dn);
            for (kernels::store_policy policy : policies) {
              kernels::store_policy_scope stores(policy);
              for (int threads : {1, 2}) {
                INFO(describe(a, b, s) << " " << name_of(from) << " -> " << name_of(to) << " stores "
                                       << kernels::name_of(policy) << " threads " << threads);
                bytes got(dn * size_of(to), std::byte{0xEE});
                kernels::reorder_cast(cp(src), a, from, mp(got), b, to, s, threads);
                CHECK(difference(got, expected) == "");
              }
            }
          }
    }
  }
}

TEST_CASE("AMD's legacy cache leaves give L1d and L2, and their package's L3 is bounded by one CCX's",
          "[transforms][stores]") {
  namespace d = kernels::detail;
  kernels::cache_sizes out;
  const d::amd_cpu zen1{0x17, 0x01}, zen2{0x17, 0x31}, zen4{0x19, 0x11}, zen5{0x1A, 0x02}, k10{0x10, 0x04};
  // A Zen 5 core's registers in a VM: 48 KiB L1d (0x80000005 ECX), 1 MiB L2 (0x80000006 ECX),
  // and an L3 field (0x80000006 EDX) of 768 units of 512 KiB, 384 MiB: the package of 12 CCDs,
  // where one CCD has 32. The last level is one CCD's, and said to be from the family.
  REQUIRE(d::caches_from_amd_legacy(0x300c0140, 0x04008140, 0x0c009140, zen5, out));
  CHECK(out.l1d == 48 << 10);
  CHECK(out.l2 == 1 << 20);
  CHECK(out.llc == 32 << 20);
  CHECK(out.llc_sharing == 0);
  CHECK(out.source == "CPUID 0x80000005/6, L3 of one CCX by the family");
  // A field of one CCD's size (a Zen 4 of one CCD, 64 units) is believed.
  REQUIRE(d::caches_from_amd_legacy(0x200c0140, 0x04008140, (64u << 18) | 0x9140, zen4, out));
  CHECK(out.l1d == 32 << 10);
  CHECK(out.l2 == 1 << 20);
  CHECK(out.llc == 32 << 20);
  CHECK(out.source == "CPUID 0x80000005/6");
  // Two CCDs (128 units, 64 MiB) give one's 32; a Zen 1 EPYC of 8 CCXs (64 MiB) one CCX's 8, and
  // a Zen 2 of 16 CCXs (256 MiB) one CCX's 16. A Zen 1 APU's field of 4 MiB is its one CCX's.
  REQUIRE(d::caches_from_amd_legacy(0x200c0140, 0x04008140, 128u << 18, zen4, out));
  CHECK(out.llc == 32 << 20);
  REQUIRE(d::caches_from_amd_legacy(0x200c0140, 0x02008140, 128u << 18, zen1, out));
  CHECK(out.llc == 8 << 20);
  CHECK(out.source == "CPUID 0x80000005/6, L3 of one CCX by the family");
  REQUIRE(d::caches_from_amd_legacy(0x200c0140, 0x02008140, 512u << 18, zen2, out));
  CHECK(out.llc == 16 << 20);
  REQUIRE(d::caches_from_amd_legacy(0x200c0140, 0x02008140, 8u << 18, zen1, out));
  CHECK(out.llc == 4 << 20);
  CHECK(out.source == "CPUID 0x80000005/6");
  // An L3 no larger than L2 is no L3 either: one CCX's on a Zen; before Zen, the assumed 32 MiB,
  // as for a field over 1 GiB.
  REQUIRE(d::caches_from_amd_legacy(0x300c0140, 0x04008140, 2u << 18, zen5, out));
  CHECK(out.llc == 32 << 20);
  REQUIRE(d::caches_from_amd_legacy(0x400c0140, 0x02008140, 1u << 18, k10, out));
  CHECK(out.llc == 32 << 20);
  CHECK(out.source == "CPUID 0x80000005/6, L3 assumed");
  REQUIRE(d::caches_from_amd_legacy(0x400c0140, 0x02008140, 12u << 18, k10, out));
  CHECK(out.llc == 6 << 20);
  CHECK(out.source == "CPUID 0x80000005/6");
  REQUIRE(d::caches_from_amd_legacy(0x400c0140, 0x02008140, 0x3000u << 18, k10, out));
  CHECK(out.llc == 32 << 20);
  CHECK(out.source == "CPUID 0x80000005/6, L3 assumed");
  // Without a plausible L1d or L2 (zeros, as some hypervisors give, or an L2 under L1d), no answer.
  CHECK_FALSE(d::caches_from_amd_legacy(0, 0x04008140, 0x0c009140, zen5, out));
  CHECK_FALSE(d::caches_from_amd_legacy(0x300c0140, 0, 0x0c009140, zen5, out));
  CHECK_FALSE(d::caches_from_amd_legacy(0xff0c0140, 0x00408140, 0x0c009140, zen5, out));
}

TEST_CASE("every source's cache sizes pass one check, and Linux's CPU lists are counted",
          "[transforms][stores]") {
  namespace d = kernels::detail;
  constexpr std::size_t kib = 1024, mib = kib * kib;
  // What Linux's folder gives without the topology leaf on the Zen 5 VM above: the package's
  // L3, 384 MiB, bounded as the legacy leaf's.
  kernels::cache_sizes out{48 * kib, mib, 384 * mib, 2, "sysfs"};
  REQUIRE(d::believed(out, {32 * mib, 32 * mib, "sysfs, L3 of one CCX by the family"}));
  CHECK(out.llc == 32 * mib);
  CHECK(out.llc_sharing == 0);
  CHECK(out.source == "sysfs, L3 of one CCX by the family");
  // Sapphire Rapids' 2 MiB L2 and 105 MiB L3, and a CPU without an L3 (its L2 the last level).
  out = {48 * kib, 2 * mib, 105 * mib, 112, "CPUID 4"};
  REQUIRE(d::believed(out, {1024 * mib, 32 * mib, "CPUID 4, L3 assumed"}));
  CHECK(out.llc == 105 * mib);
  CHECK(out.llc_sharing == 112);
  CHECK(out.source == "CPUID 4");
  out = {32 * kib, 4 * mib, 4 * mib, 4, "sysfs"};
  REQUIRE(d::believed(out, {1024 * mib, 32 * mib, "sysfs, L3 assumed"}));
  CHECK(out.llc == 4 * mib);
  // An L1d over 1 MiB, an L2 under 64 KiB or over 64 MiB: no answer from that source.
  out = {2 * mib, 4 * mib, 32 * mib, 1, "sysfs"};
  CHECK_FALSE(d::believed(out, {1024 * mib, 32 * mib, "sysfs, L3 assumed"}));
  out = {32 * kib, 48 * kib, 32 * mib, 1, "sysfs"};
  CHECK_FALSE(d::believed(out, {1024 * mib, 32 * mib, "sysfs, L3 assumed"}));
  out = {32 * kib, 128 * mib, 256 * mib, 1, "sysfs"};
  CHECK_FALSE(d::believed(out, {1024 * mib, 32 * mib, "sysfs, L3 assumed"}));

  CHECK(d::cpu_list_count("0") == 1);
  CHECK(d::cpu_list_count("0-1") == 2);
  CHECK(d::cpu_list_count("0-7,64-71") == 16);
  CHECK(d::cpu_list_count("0-1,4-5,8") == 5);
  CHECK(d::cpu_list_count("") == 0);
  CHECK(d::cpu_list_count("x") == 0);
  CHECK(d::cpu_list_count("3-1") == 0);
  CHECK(d::cpu_list_count("0-") == 0);
  CHECK(d::cpu_list_count("0-1x") == 0);
}

TEST_CASE("the store policy follows the cache sizes, and can be forced and restored",
          "[transforms][stores]") {
  const kernels::cache_sizes& caches = kernels::detected_caches();
  CHECK(caches.l2 > 0);
  CHECK(caches.llc >= caches.l2);
  CHECK(kernels::automatic_store_policy(caches.l2 / 2) == kernels::store_policy::cached);
  CHECK(kernels::automatic_store_policy(caches.llc) == kernels::store_policy::streaming);
  CHECK(kernels::active_store_policy(caches.llc) == kernels::store_policy::streaming);
  {
    kernels::store_policy_scope scope(kernels::store_policy::cached);
    CHECK(kernels::active_store_policy(caches.llc) == kernels::store_policy::cached);
    {
      kernels::store_policy_scope inner(kernels::store_policy::streaming);
      CHECK(kernels::active_store_policy(1) == kernels::store_policy::streaming);
    }
    CHECK(kernels::active_store_policy(caches.llc) == kernels::store_policy::cached);
  }
  CHECK(kernels::active_store_policy(caches.llc) == kernels::store_policy::streaming);
  // `prefetched` is only ever forced.
  for (std::size_t bytes = 1; bytes <= 4 * caches.llc; bytes *= 2)
    CHECK(kernels::automatic_store_policy(bytes) != kernels::store_policy::prefetched);
  kernels::store_policy_scope forced(kernels::store_policy::prefetched);
  CHECK(kernels::active_store_policy(caches.llc) == kernels::store_policy::prefetched);
  CHECK(kernels::name_of(kernels::store_policy::prefetched) == "prefetched");
}

TEST_CASE("NCHW -> NHWC walks whole images or blocks of 32 pixels, and both give the naive transform's bytes",
          "[transforms][stores]") {
  // Pixel counts below, at and around the 32-pixel blocks (a last block of 1, 7 or 8 pixels),
  // channel counts that fill target lines and that do not, and threads that split the blocks.
  // 1- and 2-byte elements go four chunks a step from 32 channels on, 2-byte ones two chunks a
  // step from 16 (gather_packed_chunks), the chunks left one at a time: 96 and 128 channels too,
  // odd pixel counts.
  const std::vector<dims> cases{{1, 64, 5, 13}, {2, 16, 8, 4}, {1, 24, 7, 9}, {2, 40, 5, 8}, {1, 48, 1, 33},
                                {1, 8, 3, 13},  {3, 72, 9, 9}, {2, 96, 3, 7}, {1, 128, 3, 5}};
  for (kernels::isa level : supported_isas()) {
    kernels::isa_scope isa(level);
    for (kernels::nhwc_walk walk : {kernels::nhwc_walk::long_runs, kernels::nhwc_walk::short_blocks}) {
      kernels::nhwc_walk_scope walking(walk);
      REQUIRE(kernels::active_nhwc_walk() == walk);
      for (kernels::store_policy policy : policies) {
        kernels::store_policy_scope stores(policy);
        for (const dims& s : cases) {
          for (std::size_t elem : {1, 2, 4, 8})
            for (int threads : {1, 2}) {
              INFO(describe(data_layout::nchw, data_layout::nhwc, s, elem)
                   << " walk " << kernels::name_of(walk) << " stores " << kernels::name_of(policy)
                   << " threads " << threads);
              const bytes src = random_bytes(std::size_t(storage_of(data_layout::nchw, s)) * elem, 37);
              CHECK(difference(run_reorder(src, data_layout::nchw, data_layout::nhwc, s, elem, threads),
                               naive_reorder(src, data_layout::nchw, data_layout::nhwc, s, elem)) == "");
            }
          // float into the half types, fused.
          const std::size_t n = std::size_t(storage_of(data_layout::nchw, s));
          const bytes src = to_bytes(samples<float>(n, 39));
          for (data_type to : {data_type::float16, data_type::bfloat16}) {
            INFO(describe(data_layout::nchw, data_layout::nhwc, s)
                 << " float -> " << name_of(to) << " walk " << kernels::name_of(walk));
            const bytes expected = run_cast(run_reorder(src, data_layout::nchw, data_layout::nhwc, s, 4),
                                            data_type::float32, to, n);
            bytes got(n * size_of(to), std::byte{0xEE});
            kernels::reorder_cast(cp(src), data_layout::nchw, data_type::float32, mp(got), data_layout::nhwc,
                                  to, s, 2);
            CHECK(difference(got, expected) == "");
          }
        }
      }
    }
  }
  // The walk is detected once (long runs on AMD's Zen cores, short blocks elsewhere) and the
  // forced one is restored.
  const kernels::nhwc_walk detected = kernels::detected_nhwc_walk();
  CHECK(kernels::active_nhwc_walk() == detected);
  {
    kernels::nhwc_walk_scope outer(kernels::nhwc_walk::short_blocks);
    {
      kernels::nhwc_walk_scope inner(kernels::nhwc_walk::long_runs);
      CHECK(kernels::active_nhwc_walk() == kernels::nhwc_walk::long_runs);
    }
    CHECK(kernels::active_nhwc_walk() == kernels::nhwc_walk::short_blocks);
  }
  CHECK(kernels::active_nhwc_walk() == detected);
  CHECK(kernels::name_of(kernels::nhwc_walk::short_blocks) == "short blocks");
}

TEST_CASE(
    "NCHW -> NHWC of float with many channels goes two pairs of chunks a step where the walk is long "
    "runs, and every level, policy and thread count gives the naive transform's bytes",
    "[transforms][stores]") {
  namespace d = kernels::detail;
  const auto job = [](std::int64_t c, std::size_t elem, kernels::nhwc_walk walk) {
    return nhwc_job(c, elem, elem, walk);
  };
  // Through the caches from 256 channels (a pixel of 1 KiB), in blocks of 64 pixels; streamed
  // from the last-level cache from 128, over all pixels; never from memory, nor on cores whose
  // walk is short blocks, nor for 1-byte elements (2-byte ones: the next test).
  const kernels::nhwc_walk long_runs = kernels::nhwc_walk::long_runs;
  CHECK(job(256, 4, long_runs).pair_block == 64);
  CHECK(job(256, 4, long_runs).streamed_pair_block == 196);
  // A pixel a multiple of 4 KiB in blocks of 8 pixels, of 2 KiB in blocks of 16.
  CHECK(job(1024, 4, long_runs).pair_block == 8);
  CHECK(job(2048, 4, long_runs).pair_block == 8);
  CHECK(job(512, 4, long_runs).pair_block == 16);
  CHECK(job(1536, 4, long_runs).pair_block == 16);
  CHECK(job(768, 4, long_runs).pair_block == 64);
  CHECK(job(128, 4, long_runs).pair_block == 0);
  CHECK(job(128, 4, long_runs).streamed_pair_block == 196);
  CHECK(job(64, 4, long_runs).streamed_pair_block == 0);
  CHECK(job(2048, 4, kernels::nhwc_walk::short_blocks).pair_block == 0);
  CHECK(job(2048, 4, kernels::nhwc_walk::short_blocks).streamed_pair_block == 0);
  CHECK(job(256, 4, long_runs).memory_pair_block == 0);
  CHECK(job(2048, 1, long_runs).streamed_pair_block == 0);
  for (bool from_llc : {true, false}) {
    d::layout_job streamed = job(256, 4, long_runs), cached = streamed;
    d::set_streaming(streamed, true, from_llc);
    d::set_streaming(cached, false, from_llc);
    CHECK(streamed.pair_block == (from_llc ? 196 : 0));
    CHECK(cached.pair_block == 64);
  }
  {
    // The plan: the whole transform fits in the last-level cache.
    kernels::nhwc_walk_scope walk(long_runs);
    kernels::store_policy_scope streaming(kernels::store_policy::streaming);
    placed at(std::size_t(256 * 196) * 4, 0);
    const auto plan =
        d::plan_layout(data_layout::nchw, 4, at.data(), data_layout::nhwc, 4, dims{1, 256, 14, 14}, 1);
    CHECK(plan.job.stream);
    CHECK(plan.job.pair_block == (std::size_t(256 * 196 * 8) <= kernels::detected_caches().llc ? 196 : 0));
  }
  // An image's pixels left after the steps (1 at 7 x 7, 4 at 14 x 14, 7 at 3 x 5), several
  // blocks of 64 and a part of one, an odd number of pairs (272 and 144 channels), a full
  // chunk left after the pairs (264) and a partial one (260), at a target on a line and 32
  // bytes off one, on one thread and two.
  const std::vector<dims> cases{{1, 256, 7, 7},
                                {2, 272, 14, 14},
                                {1, 264, 5, 13},
                                {1, 260, 9, 9},
                                {1, 128, 3, 5},
                                {1, 144, 16, 16},
                                {1, 256, 1, 130},
                                {1, 512, 16, 20},
                                // Blocks of 8 pixels (and a part of one) and of 16.
                                {1, 1024, 7, 7},
                                {2, 2048, 3, 5},
                                {1, 512, 5, 9},
                                {1, 1536, 6, 6}};
  kernels::nhwc_walk_scope walk(long_runs);
  for (const dims& s : cases) {
    INFO(describe(data_layout::nchw, data_layout::nhwc, s, 4));
    const bytes src = random_bytes(std::size_t(storage_of(data_layout::nchw, s)) * 4, 45);
    check_on_every_path(naive_reorder(src, data_layout::nchw, data_layout::nhwc, s, 4),
                        [&](std::byte* dst, int threads) {
                          kernels::reorder(cp(src), data_layout::nchw, dst, data_layout::nhwc, s, 4, threads);
                        });
  }
}

TEST_CASE(
    "NCHW -> NHWC of 2-byte elements streams where each step writes a line of each pixel, and every "
    "level, policy and thread count gives the naive transform's bytes",
    "[transforms][stores]") {
  namespace d = kernels::detail;
  // From a pixel of 1 KiB (512 channels) on, where the walk is long runs, two groups of four
  // chunks a step (two lines of each pixel), only streamed, from the last-level cache and from
  // memory alike; not on cores whose walk is short blocks.
  const auto job = nhwc_job;
  const kernels::nhwc_walk long_runs = kernels::nhwc_walk::long_runs;
  for (std::size_t se : {2, 4}) {
    const d::layout_job pairs = job(512, se, 2, long_runs);
    CHECK(pairs.pair_block == 0);
    CHECK(pairs.streamed_pair_block == 196);
    CHECK(pairs.memory_pair_block == 196);
    for (bool from_llc : {true, false}) {
      d::layout_job streamed = pairs, cached = pairs;
      d::set_streaming(streamed, true, from_llc);
      d::set_streaming(cached, false, from_llc);
      CHECK(streamed.pair_block == 196);
      CHECK(cached.pair_block == 0);
    }
    CHECK(job(480, se, 2, long_runs).memory_pair_block == 0);
    CHECK(job(2048, se, 2, kernels::nhwc_walk::short_blocks).memory_pair_block == 0);
  }
  // 32 and 64 channels a pixel, 96 (a group of four chunks, then the rest: none), 480 (a pixel
  // of 960 bytes), 512 (1 KiB: two groups a step where the walk is long runs), 1024 (several
  // pairs of groups), 672 and 544 (an odd group left after the pairs), 48 (a group and two
  // chunks left: not streamed), the pixels left after the steps (5 x 13, 7 x 7, 3 x 5), at a
  // target on a line and 32 bytes off one, on both walks; copies, and float into float16 and
  // bfloat16 on the way.
  const std::vector<dims> cases{{1, 32, 5, 13}, {2, 64, 7, 7},   {1, 96, 4, 6},  {1, 480, 3, 5},
                                {1, 512, 2, 9}, {1, 1024, 3, 5}, {1, 672, 7, 7}, {2, 544, 4, 6},
                                {1, 48, 8, 8},  {2, 128, 32, 32}};
  for (kernels::nhwc_walk walk : {long_runs, kernels::nhwc_walk::short_blocks})
    for (const dims& s : cases) {
      kernels::nhwc_walk_scope walking(walk);
      INFO("walk " << kernels::name_of(walk));
      const std::size_t n = std::size_t(storage_of(data_layout::nchw, s));
      const bytes halves = random_bytes(n * 2, 47);
      const bytes floats = to_bytes(samples<float>(n, 49));
      INFO(describe(data_layout::nchw, data_layout::nhwc, s, 2));
      check_on_every_path(naive_reorder(halves, data_layout::nchw, data_layout::nhwc, s, 2),
                          [&](std::byte* dst, int threads) {
                            kernels::reorder(cp(halves), data_layout::nchw, dst, data_layout::nhwc, s, 2,
                                             threads);
                          });
      const bytes in_nhwc = naive_reorder(floats, data_layout::nchw, data_layout::nhwc, s, 4);
      for (data_type to : {data_type::float16, data_type::bfloat16}) {
        INFO("float -> " << name_of(to));
        check_on_every_path(run_cast(in_nhwc, data_type::float32, to, n), [&](std::byte* dst, int threads) {
          kernels::reorder_cast(cp(floats), data_layout::nchw, data_type::float32, dst, data_layout::nhwc, to,
                                s, threads);
        });
      }
    }
}

TEST_CASE("NCHW -> nChw8c of 2-byte elements, 16 pixels a step, gives the naive transform's bytes",
          "[transforms][stores]") {
  // Images of 16 pixels and more (the last step over the last 16: 5 x 13, 3 x 8), exactly 16,
  // and under 16 (8 pixels: the chunk alone), a partial last chunk (20 channels), on every
  // level, policy and thread count, at a target on a line and 32 bytes off one; copies, and
  // float into float16 and bfloat16 on the way.
  const data_layout b8 = data_layout_of<layout::nChw8c>;
  for (const dims& s :
       {dims{1, 16, 5, 13}, dims{2, 24, 3, 8}, dims{1, 8, 4, 4}, dims{1, 20, 2, 4}, dims{2, 64, 28, 28}}) {
    const std::size_t n = std::size_t(storage_of(data_layout::nchw, s));
    const bytes halves = random_bytes(n * 2, 59);
    INFO(describe(data_layout::nchw, b8, s, 2));
    check_on_every_path(naive_reorder(halves, data_layout::nchw, b8, s, 2), [&](std::byte* dst, int threads) {
      kernels::reorder(cp(halves), data_layout::nchw, dst, b8, s, 2, threads);
    });
    const bytes floats = to_bytes(samples<float>(n, 61));
    const bytes in_b8 = naive_reorder(floats, data_layout::nchw, b8, s, 4);
    for (data_type to : {data_type::float16, data_type::bfloat16}) {
      INFO("float -> " << name_of(to));
      check_on_every_path(
          run_cast(in_b8, data_type::float32, to, in_b8.size() / 4), [&](std::byte* dst, int threads) {
            kernels::reorder_cast(cp(floats), data_layout::nchw, data_type::float32, dst, b8, to, s, threads);
          });
    }
  }
}

TEST_CASE(
    "1-byte copies between NCHW and the blocked layouts or NHWC, 32 pixels a step, give the naive "
    "transform's bytes",
    "[transforms][stores]") {
  // Images of 32 pixels and more (a last step over the last 32: 7 x 7, 5 x 13, 33 x 35),
  // nChw16c blocks whole and not (20 channels: a full block and a partial one; 24: a full
  // chunk in a partial block), images under 32 pixels (the chunks alone), on every level and
  // policy, at a target on a line and 32 bytes off one, on one thread and two (33 x 35). From
  // NHWC, two chunks of a pixel at a time, then one left (24 channels), and 8 channels (the
  // pixels one after the other, as in nChw8c). Into NHWC, eight chunks a step from 128
  // channels on (128 and 192: a line of each pixel per step).
  const std::vector<dims> cases{{2, 16, 7, 7},  {1, 64, 5, 13},  {1, 20, 8, 8},   {1, 24, 9, 9}, {1, 8, 4, 6},
                                {1, 32, 6, 32}, {4, 64, 33, 35}, {1, 128, 5, 13}, {2, 192, 3, 5}};
  const data_layout blocked[] = {data_layout_of<layout::nChw8c>, data_layout_of<layout::nChw16c>,
                                 data_layout::nhwc};
  for (const dims& s : cases)
    for (data_layout b : blocked) {
      INFO(describe(data_layout::nchw, b, s, 1));
      const bytes planar = random_bytes(std::size_t(storage_of(data_layout::nchw, s)), 51);
      const bytes in_blocks = naive_reorder(planar, data_layout::nchw, b, s, 1);
      check_on_every_path(in_blocks, [&](std::byte* dst, int threads) {
        kernels::reorder(cp(planar), data_layout::nchw, dst, b, s, 1, threads);
      });
      check_on_every_path(planar, [&](std::byte* dst, int threads) {
        kernels::reorder(cp(in_blocks), b, dst, data_layout::nchw, s, 1, threads);
      });
    }
}

TEST_CASE(
    "chunks that lie together on one side and apart on the other go a line of them at a time, and "
    "give the naive transform's bytes",
    "[transforms][stores]") {
  // NHWC or nChw16c -> nChw8c (a source line's worth of chunks: 8 of bytes, 4 of 2-byte
  // elements, 2 of float, then pairs, then one) and back, nChw8c or nChw16c -> NHWC (a target
  // line's worth), nChw8c <-> nChw16c (pairs, a partial block last), and NHWC or nChw16c ->
  // NCHW (float: both chunks of a source line each step): 88 channels (bytes: a line, a pair
  // and a chunk), 40 (2-byte: a line and a chunk), 20 and 24 (a partial block), 1024 and 2048
  // (a pixel a multiple of 4 KiB for float: blocks of 8 pixels, the last taking the rest), 640,
  // 1024 and 2048 (NHWC -> NCHW of 2 and 4 bytes: 8 pairs of chunks a step; [1, 1024, 9, 9] on
  // two threads too), the pixels left after the steps, on every level, policy and thread
  // count, at a target on a line and 32 bytes off one; float cast to float16 on the way.
  const std::vector<dims> cases{{1, 88, 5, 13},  {2, 40, 3, 3},   {1, 20, 8, 8},  {1, 24, 9, 9},
                                {1, 1024, 5, 5}, {1, 2048, 2, 9}, {1, 640, 3, 7}, {1, 1024, 9, 9}};
  const data_layout nhwc = data_layout::nhwc, b8 = data_layout_of<layout::nChw8c>,
                    b16 = data_layout_of<layout::nChw16c>;
  const data_layout nchw = data_layout::nchw;
  const std::pair<data_layout, data_layout> pairs[] = {{nhwc, b8}, {b16, b8},    {b8, nhwc}, {b16, nhwc},
                                                       {b8, b16},  {nhwc, nchw}, {b16, nchw}};
  for (const dims& s : cases)
    for (const auto& pair : pairs) {
      const data_layout from = pair.first, to = pair.second;  // (clang 14 captures no bindings)
      for (std::size_t elem : {1, 2, 4}) {
        INFO(describe(from, to, s, elem));
        const bytes src = random_bytes(std::size_t(storage_of(from, s)) * elem, 55);
        check_on_every_path(naive_reorder(src, from, to, s, elem), [&](std::byte* dst, int threads) {
          kernels::reorder(cp(src), from, dst, to, s, elem, threads);
        });
      }
      INFO(describe(from, to, s, 4) << " float -> float16");
      const bytes floats = to_bytes(samples<float>(std::size_t(storage_of(from, s)), 57));
      const bytes moved = naive_reorder(floats, from, to, s, 4);
      check_on_every_path(run_cast(moved, data_type::float32, data_type::float16, moved.size() / 4),
                          [&](std::byte* dst, int threads) {
                            kernels::reorder_cast(cp(floats), from, data_type::float32, dst, to,
                                                  data_type::float16, s, threads);
                          });
    }
}

TEST_CASE(
    "streamed from NHWC, cores taking long runs read blocks of 1024 pixels and stream planar rows; "
    "every walk, policy and level gives the naive transform's bytes",
    "[transforms][stores]") {
  namespace d = kernels::detail;
  const dims large{1, 24, 32, 40};  // 1280 pixels: a block of 1024 and the rest
  const auto plan = [&](const std::byte* dst, data_layout to, const dims& shape, int threads,
                        std::size_t elem = 4) {
    return d::plan_layout(data_layout::nhwc, elem, dst, to, elem, shape, threads);
  };
  {
    placed at(std::size_t(storage_of(data_layout_of<layout::nChw8c>, dims{4, 24, 64, 64})) * 4, 0);
    kernels::store_policy_scope streaming(kernels::store_policy::streaming);
    {
      kernels::nhwc_walk_scope walk(kernels::nhwc_walk::long_runs);
      const auto planar = plan(at.data(), data_layout::nchw, large, 1);
      CHECK(planar.job.stream);
      CHECK(planar.job.p_block == 1024);
      CHECK(plan(at.data(), data_layout_of<layout::nChw8c>, large, 1).job.p_block == 1024);
      CHECK(plan(at.data(), data_layout::nchw, large, 1, 2).job.p_block == 1024);
      // Elements the vector engines never stream keep blocks of 64 (and rows that are not whole
      // lines never stream).
      CHECK(plan(at.data(), data_layout::nchw, large, 1, 1).job.p_block == 64);
      CHECK(plan(at.data(), data_layout::nchw, large, 1, 8).job.p_block == 64);
      CHECK_FALSE(plan(at.data(), data_layout::nchw, dims{1, 24, 5, 13}, 1).job.stream);
      // Two threads: enough pieces as they are, or blocks cut finer, to whole vector steps.
      const auto shared = plan(at.data(), data_layout::nchw, dims{4, 24, 64, 64}, 2);
      CHECK(shared.threads == 2);
      CHECK(shared.job.stream);
      CHECK(shared.job.p_block == 1024);
      const auto one_image = plan(at.data(), data_layout::nchw, dims{1, 64, 64, 64}, 2);
      CHECK(one_image.threads == 2);
      CHECK(one_image.job.p_block % 8 == 0);
      CHECK(one_image.job.p_block < 1024);
      // Through the caches, blocks of 64 pixels.
      kernels::store_policy_scope cached(kernels::store_policy::cached);
      CHECK(plan(at.data(), data_layout::nchw, large, 1).job.p_block == 64);
    }
    kernels::nhwc_walk_scope walk(kernels::nhwc_walk::short_blocks);
    const auto planar = plan(at.data(), data_layout::nchw, large, 1);
    CHECK_FALSE(planar.job.stream);
    CHECK(planar.job.p_block == 64);
    const auto blocked = plan(at.data(), data_layout_of<layout::nChw8c>, large, 1);
    CHECK(blocked.job.stream);
    CHECK(blocked.job.p_block == 64);
  }
  // A partial last chunk (20 channels), an image of exactly 1024 pixels, rows that are and are
  // not whole lines, on every level, into every layout, at a target on a line and 32 bytes off
  // one (streaming needs 32-byte alignment, and starts at the next line).
  const std::vector<dims> cases{large, {2, 20, 16, 64}, {2, 16, 8, 4}, {1, 24, 5, 13}};
  for (const dims& s : cases)
    for (data_layout to : layouts4d)
      for (std::size_t elem : {1, 2, 4, 8}) {
        const bytes src = random_bytes(std::size_t(storage_of(data_layout::nhwc, s)) * elem, 41);
        INFO(describe(data_layout::nhwc, to, s, elem));
        check_paths(naive_reorder(src, data_layout::nhwc, to, s, elem), both_walks, {1}, {0, 32},
                    [&](std::byte* dst, int threads) {
                      kernels::reorder(cp(src), data_layout::nhwc, dst, to, s, elem, threads);
                    });
      }
  // Two threads sharing streamed pieces (1.5 MiB moved: more than one thread is given).
  const dims shared{2, 32, 48, 64};
  const bytes src = random_bytes(std::size_t(storage_of(data_layout::nhwc, shared)) * 4, 43);
  kernels::nhwc_walk_scope walk(kernels::nhwc_walk::long_runs);
  kernels::store_policy_scope streaming(kernels::store_policy::streaming);
  for (kernels::isa level : supported_isas()) {
    kernels::isa_scope isa(level);
    for (data_layout to :
         {data_layout::nchw, data_layout_of<layout::nChw8c>, data_layout_of<layout::nChw16c>})
      for (std::size_t at : {0, 32}) {
        INFO(describe(data_layout::nhwc, to, shared) << " isa " << kernels::name_of(level) << " at +" << at);
        const std::size_t size = std::size_t(storage_of(to, shared)) * 4;
        placed dst(size, at);
        REQUIRE(plan(dst.data(), to, shared, 2).threads == 2);
        REQUIRE(plan(dst.data(), to, shared, 2).job.stream);
        kernels::reorder(cp(src), data_layout::nhwc, dst.data(), to, shared, 4, 2);
        CHECK(difference(dst.content(size), naive_reorder(src, data_layout::nhwc, to, shared, 4)) == "");
        CHECK(dst.untouched_around(size));
      }
  }
}

TEST_CASE("layout transforms stream only where their stores write whole target lines one after another",
          "[transforms][stores]") {
  namespace d = kernels::detail;
  const data_layout nchw = data_layout::nchw, nhwc = data_layout::nhwc, b8 = data_layout_of<layout::nChw8c>,
                    b16 = data_layout_of<layout::nChw16c>;
  alignas(64) static std::byte target[64];
  struct stream_case {
    data_layout from, to;
    std::int64_t c;
    std::size_t se, de;
    bool streams;
    bool on_long_runs = false;  // streams where the walk is long runs
  };
  for (const stream_case& k : {
           // A planar target a line at a time, from blocked sources, and from NHWC where the walk
           // is long runs (in blocks of 1024 pixels; on other cores, 64-pixel blocks streamed their
           // rows in pieces).
           stream_case{b8, nchw, 64, 4, 4, true},
           {b16, nchw, 64, 4, 2, true},
           {nhwc, nchw, 64, 4, 4, false, true},
           {nhwc, nchw, 64, 2, 2, false, true},
           // nChw8c from anything.
           {nchw, b8, 64, 4, 4, true},
           {nchw, b8, 17, 2, 2, true},
           {nhwc, b8, 64, 4, 2, true},
           {b16, b8, 64, 4, 4, true},
           // NHWC and nChw16c from planar: 4-byte copies moving a line per pixel, and 2-byte
           // elements written into NHWC four chunks a step (a line per pixel) with a pixel under
           // 1 KiB.
           {nchw, nhwc, 64, 4, 4, true},
           {nchw, b16, 32, 4, 4, true},
           {nchw, nhwc, 24, 4, 4, false},
           {nchw, b16, 24, 4, 4, false},
           {nchw, nhwc, 64, 2, 2, true},
           {nchw, nhwc, 64, 4, 2, true},
           {nchw, nhwc, 480, 4, 2, true},
           {nchw, nhwc, 48, 2, 2, false},
           // From a pixel of 1 KiB, where the walk is long runs (two groups a step), C a multiple
           // of 32.
           {nchw, nhwc, 512, 2, 2, false, true},
           {nchw, nhwc, 1024, 4, 2, false, true},
           {nchw, nhwc, 544, 2, 2, false, true},
           {nchw, nhwc, 520, 2, 2, false},
           {nchw, nhwc, 64, 1, 1, false},
           {nchw, b16, 64, 4, 2, false},
           // nChw16c from NHWC or nChw8c, and NHWC of 4-byte elements from a blocked layout: both
           // chunks of each pixel at once, with every block (or 16 channels) full.
           {nhwc, b16, 64, 4, 4, true},
           {nhwc, b16, 64, 2, 2, true},
           {b8, b16, 64, 4, 4, true},
           {b8, b16, 64, 2, 2, true},
           {nhwc, b16, 24, 4, 4, false},
           {b8, b16, 24, 4, 4, false},
           {b8, nhwc, 64, 4, 4, true},
           {b16, nhwc, 32, 4, 4, true},
           {b8, nhwc, 64, 2, 2, false},
           {b8, nhwc, 24, 4, 4, false},
       }) {
    INFO(name_of(k.from) << " -> " << name_of(k.to) << " C " << k.c << " elements of " << k.se << " -> "
                         << k.de << " bytes");
    for (kernels::nhwc_walk walk : {kernels::nhwc_walk::long_runs, kernels::nhwc_walk::short_blocks}) {
      const d::layout_job j = d::make_layout_job(k.from, k.to, 2, k.c, 3136, k.se, k.de, walk);
      CHECK(d::streams_whole_lines(j, target, k.se, k.de) ==
            (k.streams || (k.on_long_runs && walk == kernels::nhwc_walk::long_runs)));
      // Never to a target off its vector width, nor NHWC from a blocked layout or of 2-byte
      // elements off a line.
      CHECK_FALSE(d::streams_whole_lines(j, target + 16, k.se, k.de));
      if (k.to == nhwc && (k.from != nchw || k.de == 2))
        CHECK_FALSE(d::streams_whole_lines(j, target + 32, k.se, k.de));
    }
  }
}

TEST_CASE(
    "NCHW -> NHWC of float moves the two chunks that fill a target line per step, over whole images "
    "or 32 pixels at a time",
    "[transforms]") {
  namespace d = kernels::detail;
  const d::layout_job j = d::make_layout_job(data_layout::nchw, data_layout::nhwc, 2, 64, 12544, 4, 4);
  CHECK(j.group == 2);
  CHECK(j.p_block == 12544);
  // Or 32 pixels at a time, where the CPU's walk is short blocks.
  const d::layout_job s = d::make_layout_job(data_layout::nchw, data_layout::nhwc, 2, 64, 12544, 4, 4,
                                             kernels::nhwc_walk::short_blocks);
  CHECK(s.group == 2);
  CHECK(s.p_block == 32);
  // Other element sizes, and too few channels to fill a line: blocks of pixels that stay in L2
  // while the chunks go by.
  struct other_case {
    std::int64_t c;
    std::size_t elem;
    std::int64_t group;  // full chunks taken together: 4 from 32 channels, 1 under 16, 8 for
                         // 1-byte copies of 128 channels or more, a multiple of 64
  };
  for (const other_case& k : {other_case{64, 2, 4}, {64, 1, 4}, {8, 4, 1}, {128, 1, 8}, {160, 1, 4}}) {
    const d::layout_job other =
        d::make_layout_job(data_layout::nchw, data_layout::nhwc, 1, k.c, 1 << 20, k.elem, k.elem);
    CHECK(other.group == k.group);
    CHECK(other.p_block < (1 << 20));
  }
}

TEST_CASE(
    "a pixel of the NHWC side a multiple of 4 KiB goes in blocks of 8 pixels, and NHWC -> NCHW of many "
    "channels 8 chunk pairs a step over all pixels, where that was measured faster",
    "[transforms]") {
  namespace d = kernels::detail;
  const data_layout nhwc = data_layout::nhwc, nchw = data_layout::nchw, b8 = data_layout_of<layout::nChw8c>,
                    b16 = data_layout_of<layout::nChw16c>;
  const auto block = [](data_layout from, data_layout to, std::int64_t c, std::size_t se, std::size_t de,
                        kernels::nhwc_walk walk = kernels::nhwc_walk::long_runs) {
    return d::make_layout_job(from, to, 2, c, 196, se, de, walk).p_block;
  };
  const auto scatter_pairs = [](data_layout from, data_layout to, std::int64_t c, std::size_t se,
                                kernels::nhwc_walk walk = kernels::nhwc_walk::long_runs) {
    return d::make_layout_job(from, to, 2, c, 196, se, se, walk).scatter_pairs;
  };
  // Copies of float from and into NHWC, 1024, 2048 and 3072 channels (into NCHW: below).
  for (std::int64_t c : {1024, 2048, 3072}) {
    INFO(c << " channels");
    CHECK(block(nhwc, b8, c, 4, 4) == 8);
    CHECK(block(nhwc, b16, c, 4, 4) == 8);
    CHECK(block(b8, nhwc, c, 4, 4) == 8);
    CHECK(block(b16, nhwc, c, 4, 4) == 8);
  }
  // 2-byte copies: not in blocks of 8 (a pixel of 4 KiB into or out of blocked layouts).
  CHECK(block(nhwc, b8, 2048, 2, 2) == 64);
  CHECK(block(b8, nhwc, 2048, 2, 2) == 64);
  // NHWC -> NCHW of 2- and 4-byte elements, 512 channels or more, a multiple of 128: all pixels,
  // 8 pairs of chunks a step.
  for (std::int64_t c : {512, 640, 768, 1024, 2048, 3072})
    for (std::size_t e : {2, 4}) {
      INFO(c << " channels of " << e << " bytes");
      CHECK(block(nhwc, nchw, c, e, e) == 196);
      CHECK(scatter_pairs(nhwc, nchw, c, e) == 8);
    }
  // Not for fewer channels or a count off 128, bytes, casts, another source, or the cores that
  // take short blocks.
  for (std::int64_t c : {128, 256, 384, 576, 1000}) CHECK(scatter_pairs(nhwc, nchw, c, 4) == 1);
  CHECK(scatter_pairs(nhwc, nchw, 4096, 1) == 1);
  CHECK(d::make_layout_job(nhwc, nchw, 2, 1024, 196, 4, 2).scatter_pairs == 1);
  CHECK(scatter_pairs(b16, nchw, 1024, 4) == 1);
  CHECK(scatter_pairs(nhwc, nchw, 1024, 4, kernels::nhwc_walk::short_blocks) == 1);
  // Other pixel sizes, bytes, casts, blocked <-> blocked, and the cores that take short blocks:
  // 64.
  CHECK(block(nhwc, nchw, 4096, 1, 1) == 64);
  CHECK(block(nhwc, nchw, 1024, 4, 2) == 64);
  CHECK(block(b8, b16, 1024, 4, 4) == 64);
  CHECK(block(nhwc, nchw, 1024, 4, 4, kernels::nhwc_walk::short_blocks) == 64);
  // Streamed from NHWC, the streamed blocks (1024 pixels) win.
  d::layout_job streamed = d::make_layout_job(nhwc, b8, 16, 1024, 196, 4, 4);
  d::set_streaming(streamed, true, true);
  CHECK(streamed.p_block == 196);
}

TEST_CASE("an image's last piece takes the pixels left, so no piece of 8 pixels or more leaves fewer than 8",
          "[transforms]") {
  namespace d = kernels::detail;
  // NCHW -> NHWC of float in short blocks: pieces of 32 pixels, the last one taking the rest.
  d::layout_job j = d::make_layout_job(data_layout::nchw, data_layout::nhwc, 2, 64, 70, 4, 4,
                                       kernels::nhwc_walk::short_blocks);
  REQUIRE(j.p_block == 32);
  CHECK(j.p_blocks == 2);
  CHECK(j.items() == 4);
  const auto first = j.piece(0), last = j.piece(1), second_image = j.piece(2);
  CHECK((first.n == 0 && first.p0 == 0 && first.p1 == 32));
  CHECK((last.n == 0 && last.p0 == 32 && last.p1 == 70));  // 38 pixels, not 32 and then 6
  CHECK((second_image.n == 1 && second_image.p0 == 0 && second_image.p1 == 32));
  // Fewer pixels than a piece: one piece of all of them.
  j = d::make_layout_job(data_layout::nchw, data_layout::nhwc, 1, 64, 20, 4, 4,
                         kernels::nhwc_walk::short_blocks);
  CHECK(j.p_blocks == 1);
  CHECK(j.piece(0).p1 == 20);
  // Cut finer for two threads, the pieces still cover every pixel once.
  j = d::make_layout_job(data_layout::nchw, data_layout_of<layout::nChw8c>, 1, 64, 1517, 4, 4);
  d::split_for_threads(j, 2);
  std::int64_t covered = 0;
  for (std::int64_t item = 0; item < j.items(); ++item) {
    const auto p = j.piece(item);
    CHECK(p.p0 == covered);
    CHECK(p.p1 - p.p0 >= 8);
    covered = p.p1;
  }
  CHECK(covered == 1517);
  CHECK(j.items() >= 8);
  // A small image of many channels still gives each of two threads a few pieces.
  j = d::make_layout_job(data_layout::nchw, data_layout_of<layout::nChw8c>, 1, 1024, 196, 4, 4);
  d::split_for_threads(j, 2);
  CHECK(j.items() == 6);
  CHECK(j.piece(5).p1 == 196);
  // An image of fewer than 8 pixels is one piece, whatever the pair, the walk and the threads:
  // the vector engines move such an image whole (run_small_images).
  for (data_layout from : layouts4d)
    for (data_layout to : layouts4d)
      for (std::int64_t hw = 1; hw < 8; ++hw)
        for (kernels::nhwc_walk walk : {kernels::nhwc_walk::long_runs, kernels::nhwc_walk::short_blocks})
          for (const auto& [se, de] : {std::pair<std::size_t, std::size_t>{4, 4}, {2, 2}, {4, 2}, {1, 1}})
            for (int threads : {1, 2, 8}) {
              if (from == to) continue;
              j = d::make_layout_job(from, to, 3, 2048, hw, se, de, walk);
              d::split_for_threads(j, threads);
              INFO(name_of(from) << " -> " << name_of(to) << ", " << hw << " pixels, elements " << se
                                 << " -> " << de << ", " << threads << " threads");
              CHECK(j.p_blocks == 1);
              CHECK((j.piece(2).n == 2 && j.piece(2).p0 == 0 && j.piece(2).p1 == hw));
            }
}
