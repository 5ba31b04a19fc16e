// The transform planner and both paths that use it: which chain is chosen (cost = bytes
// moved), that the static and runtime paths agree, that plans are memoised and shared,
// that no transform writes its source, and what happens when no chain exists.
#include <catch2/catch.hpp>
#include <cstring>
#include <fluidk/devices/onednn_tags.hpp>
#include <fluidk/transforms.hpp>
#include <string>
#include <thread>
#include <vector>

#include "simulated_device.hpp"

using namespace fluidk;
using detail::planning::step_kind;

using fluidk_test::accelerator;

// The accelerator casts between float and float16 on its own, and has no layout transforms.
// The device of its last cast, to see where a chain cast.
inline int last_accelerator_cast_device = -1;
template <class From, class To>
requires((std::is_same_v<From, float> && std::is_same_v<To, float16>) ||
         (std::is_same_v<From, float16> &&
          std::is_same_v<To, float>)) struct fluidk::cast_transform<accelerator, From, To> {
  static void run(const Tensor& src, Tensor& dst) {
    last_accelerator_cast_device = src.place().device();
    const auto* in = static_cast<const From*>(src.handle());
    auto* out = static_cast<To*>(dst.handle());
    for (std::size_t i = 0; i < src.storage_bytes() / sizeof(From); ++i) out[i] = To(in[i]);
  }
};

static const bool accelerator_casts_registered = register_cast_transform<accelerator, float, float16>() &&
                                                 register_cast_transform<accelerator, float16, float>();

namespace {
template <class Chain>
std::vector<step_kind> kinds_of() {
  std::vector<step_kind> kinds;
  boost::mp11::mp_for_each<Chain>([&](auto step) { kinds.push_back(decltype(step)::kind); });
  return kinds;
}
std::vector<step_kind> kinds_of(const transform_plan& plan) {
  std::vector<step_kind> kinds;
  for (const auto& step : plan.steps()) kinds.push_back(step.kind);
  return kinds;
}
template <class From, class To>
void check_paths_agree(std::vector<step_kind> expected, std::size_t cost) {
  INFO(From::key().to_string() << " -> " << To::key().to_string());
  CHECK(kinds_of<transform_chain<From, To>>() == expected);
  CHECK(transform_chain_cost<From, To> == cost);
  const transform_plan& plan = plan_transform(From::key(), To::key());
  CHECK(kinds_of(plan) == expected);
  CHECK(plan.cost_per_element() == cost);
}

Tensor random_tensor(const dims& shape, data_type dtype, data_layout layout, unsigned seed) {
  Tensor t(shape, dtype, cpu_place, layout);
  auto* bytes = static_cast<unsigned char*>(t.handle());
  std::uint32_t x = seed * 2654435761u + 1;
  for (std::size_t i = 0; i < t.storage_bytes(); ++i) bytes[i] = (x = x * 1664525u + 1013904223u) >> 24;
  if (dtype == data_type::float32)  // keep the values finite and the padding lanes zero
    for (std::size_t i = 0; i < t.storage_bytes() / 4; ++i)
      t.data<float>()[i] = float(int(bytes[i * 4]) - 128) / 7;
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.storage_bytes() == b.storage_bytes() &&
         std::memcmp(static_cast<const std::byte*>(a.handle()) + a.offset(),
                     static_cast<const std::byte*>(b.handle()) + b.offset(), a.storage_bytes()) == 0;
}
}  // namespace

TEST_CASE("the planner picks the chain that moves the fewest bytes", "[transforms][planner]") {
  using cpu_blocked_f32 = kernel_type<cpu, float, layout::nChw8c>;
  using cpu_nchw_f32 = kernel_type<cpu, float, layout::nchw>;
  using cpu_nchw_f16 = kernel_type<cpu, float16, layout::nchw>;
  using acc_nchw_f32 = kernel_type<accelerator, float, layout::nchw>;
  using acc_nchw_f16 = kernel_type<accelerator, float16, layout::nchw>;
  using acc_blocked_f32 = kernel_type<accelerator, float, layout::nChw8c>;

  check_paths_agree<cpu_blocked_f32, cpu_nchw_f32>({step_kind::layout}, 8);
  // Layout and cast on the same place run fused: 4 bytes read, 2 written.
  check_paths_agree<cpu_blocked_f32, cpu_nchw_f16>({step_kind::fused}, 6);
  // Narrowing before the copy (6 + 4 beats 8 + 6) ...
  check_paths_agree<kernel_type<cpu, float, layout::nchw>, acc_nchw_f16>({step_kind::cast, step_kind::copy},
                                                                         10);
  check_paths_agree<acc_nchw_f32, cpu_nchw_f16>({step_kind::cast, step_kind::copy}, 10);
  // ... widening after it.
  check_paths_agree<cpu_nchw_f16, acc_nchw_f32>({step_kind::copy, step_kind::cast}, 10);
  // The accelerator has no layout transform: the layout changes on the host.
  check_paths_agree<acc_blocked_f32, acc_nchw_f32>({step_kind::copy, step_kind::layout, step_kind::copy}, 24);
  check_paths_agree<cpu_blocked_f32, acc_nchw_f16>({step_kind::fused, step_kind::copy}, 10);
  // Nothing to change: no steps; a target of any layout accepts plain layouts as they are,
  // and blocked data is unblocked for it.
  check_paths_agree<cpu_nchw_f32, cpu_nchw_f32>({}, 0);
  check_paths_agree<kernel_type<cpu, float, layout::nhwc>, kernel_type<cpu, float>>({}, 0);
  check_paths_agree<cpu_blocked_f32, kernel_type<cpu, float>>({step_kind::layout}, 8);
  check_paths_agree<kernel_type<cpu, float>, cpu_nchw_f32>({}, 0);
  check_paths_agree<kernel_type<cpu, float>, kernel_type<cpu, float, layout::nhwc>>({step_kind::layout}, 8);
}

TEST_CASE("a chain gives the same bytes as its steps done by hand", "[transforms][chain]") {
  const Tensor src = random_tensor({2, 17, 3, 5}, data_type::float32, data_layout_of<layout::nChw8c>, 7);
  const Tensor before = copy_to(src, cpu_place);
  const kernel_key target = kernel_type<accelerator, float16, layout::nchw>::key(1);

  const Tensor result = transform(src, target);
  CHECK(result.place() == place::of<accelerator>(1));
  CHECK(result.dtype() == data_type::float16);
  CHECK(result.layout() == data_layout::nchw);
  CHECK(result.dims() == src.dims());

  Tensor plain(src.dims(), data_type::float32, cpu_place, data_layout::nchw);
  transforms::cpu_kernels::reorder(static_cast<const std::byte*>(src.handle()),
                                   data_layout_of<layout::nChw8c>, static_cast<std::byte*>(plain.handle()),
                                   data_layout::nchw, src.dims(), 4);
  Tensor half(src.dims(), data_type::float16, cpu_place, data_layout::nchw);
  for (std::int64_t i = 0; i < plain.numel(); ++i) half.data<float16>()[i] = float16(plain.data<float>()[i]);
  Tensor back(src.dims(), data_type::float16, cpu_place, data_layout::nchw);
  copy_into(back, result);
  CHECK(same_bytes(back, half));
  CHECK(same_bytes(src, before));  // the source is never written

  // The static path gives the same bytes.
  const auto typed = tensor_cast<cpu, float, layout::nChw8c>(src);
  const auto static_result = fluidk::transform<kernel_type<accelerator, float16, layout::nchw>>(typed, 1);
  static_assert(
      std::is_same_v<decltype(static_result), const typed_tensor<accelerator, float16, layout::nchw>>);
  CHECK(static_result.place() == place::of<accelerator>(1));
  Tensor static_back(src.dims(), data_type::float16, cpu_place, data_layout::nchw);
  copy_into(static_back, static_result.tensor());
  CHECK(same_bytes(static_back, half));
}

TEST_CASE("a transform where none is needed is a no-op that shares the buffer", "[transforms]") {
  const Tensor src = random_tensor({2, 3, 4, 5}, data_type::float32, data_layout::nchw, 3);
  const Tensor same = transform(src, key_of(src));
  CHECK(same.shares_buffer_with(src));
  // A plain target accepts NCHW as it is, and ANY_LAYOUT data is relabelled for NCHW.
  CHECK(transform(src, kernel_type<cpu, float>::key()).shares_buffer_with(src));
  Tensor unlabelled = src;
  unlabelled.set_layout(data_layout::any);
  const Tensor relabelled = transform(unlabelled, kernel_type<cpu, float, layout::nchw>::key());
  CHECK(relabelled.shares_buffer_with(src));
  CHECK(relabelled.layout() == data_layout::nchw);
  CHECK(unlabelled.layout() == data_layout::any);
  const auto typed = tensor_cast<cpu, float, layout::nchw>(src);
  CHECK(fluidk::transform<kernel_type<cpu, float, layout::nchw>>(typed).tensor().shares_buffer_with(src));
}

TEST_CASE("a tensor on another device of the same kind is moved", "[transforms][devices]") {
  Tensor on0 =
      copy_to(random_tensor({4}, data_type::float32, data_layout::any, 5), place::of<accelerator>(0));
  const kernel_key on1 = kernel_type<accelerator, float>::key(1);
  const transform_plan& plan = plan_transform(key_of(on0), on1);
  REQUIRE(kinds_of(plan) == std::vector<step_kind>{step_kind::copy});
  const Tensor moved = transform(on0, on1);
  CHECK(moved.place() == place::of<accelerator>(1));
  CHECK_FALSE(moved.shares_buffer_with(on0));
  CHECK(plan.describe() == "copy Place(acc:0)->Place(acc:1)");
  // Statically, the chain is empty (same kind) and the device move happens at run time.
  const auto typed = tensor_cast<accelerator, float>(on0);
  CHECK(fluidk::transform<kernel_type<accelerator, float>>(typed, 1).place() == place::of<accelerator>(1));
  CHECK(fluidk::transform<kernel_type<accelerator, float>>(typed, 0).tensor().shares_buffer_with(on0));
  // With a widening cast, the static path moves the narrow data first (as the runtime plan
  // does), with the same bytes as the runtime path.
  const kernel_key half_on0 = kernel_type<accelerator, float16>::key(0);
  const Tensor narrow = transform(on0, half_on0);
  const Tensor widened = transform(narrow, on1);
  CHECK(plan_transform(half_on0, on1).describe() ==
        "copy Place(acc:0)->Place(acc:1), cast float16->float on Place(acc:1)");
  const auto typed_half = tensor_cast<accelerator, float16>(narrow);
  last_accelerator_cast_device = -1;
  const Tensor statically = fluidk::transform<kernel_type<accelerator, float>>(typed_half, 1).tensor();
  CHECK(last_accelerator_cast_device == 1);  // the cast ran on the target device, after the move
  CHECK(statically.place() == place::of<accelerator>(1));
  CHECK(same_bytes(copy_to(statically, cpu_place), copy_to(widened, cpu_place)));
}

namespace {
// Devices with ids that copy to and from the host and between themselves, and cast nothing:
// a cast between two of them goes through the host. Each copy is logged.
struct courier {
  using place_tag = courier;
  static constexpr place_kind_id id = 4;
  static constexpr std::string_view name = "courier";
  static constexpr bool has_device_id = true;
  static constexpr bool host_accessible = false;
};
std::vector<std::string> courier_copies;
struct logged_copy {
  static void copy(const memory_ref& dst, const memory_ref& src, std::size_t bytes) {
    courier_copies.push_back(src.place.to_string() + "->" + dst.place.to_string());
    copy_traits<cpu, cpu>::copy(dst, src, bytes);
  }
};
}  // namespace
template <>
struct fluidk::device_traits<courier> : device_traits<cpu> {  // host memory underneath
  using context_type = fluidk_test::host_memory_context<courier>;
  static int device_count() noexcept { return 2; }
};
template <>
struct fluidk::copy_traits<cpu, courier> : logged_copy {};
template <>
struct fluidk::copy_traits<courier, cpu> : logged_copy {};
template <>
struct fluidk::copy_traits<courier, courier> : logged_copy {};

TEST_CASE("a widening cast through the host between two devices: the same copies on both paths",
          "[transforms][devices]") {
  REQUIRE((register_device<courier>() && register_copy<cpu, courier>() && register_copy<courier, cpu>() &&
           register_copy<courier, courier>()));
  const Tensor host = random_tensor({1, 2, 1, 2}, data_type::float32, data_layout::nchw, 4);
  const Tensor on0 = copy_to(host, place::of<courier>(0));
  const kernel_key to = kernel_type<courier, double, layout::nchw>::key(1);
  CHECK(plan_transform(key_of(on0), to).describe() ==
        "copy Place(courier:0)->Place(cpu), cast float->double on Place(cpu), copy "
        "Place(cpu)->Place(courier:1)");
  const std::vector<std::string> expected{"Place(courier:0)->Place(cpu)", "Place(cpu)->Place(courier:1)"};
  courier_copies.clear();
  const Tensor at_run_time = transform(on0, to);
  CHECK(courier_copies == expected);
  // The static chain goes through the host too: the copy back writes device 1, so the data is
  // not first moved from device 0 to device 1.
  courier_copies.clear();
  const Tensor statically = fluidk::transform<kernel_type<courier, double, layout::nchw>>(
                                tensor_cast<courier, float, layout::nchw>(on0), 1)
                                .tensor();
  CHECK(courier_copies == expected);
  CHECK(statically.place() == place::of<courier>(1));
  CHECK(same_bytes(copy_to(statically, cpu_place), copy_to(at_run_time, cpu_place)));
}

TEST_CASE("plans are memoised, shared between threads, and described", "[transforms][runtime]") {
  const kernel_key from = kernel_type<cpu, float, layout::nChw16c>::key();
  const kernel_key to = kernel_type<accelerator, float16, layout::nhwc>::key(0);
  const transform_plan& first = plan_transform(from, to);
  CHECK(&plan_transform(from, to) == &first);
  CHECK(first.describe() ==
        "layout+cast nChw16c/float->NHWC/float16 on Place(cpu), copy Place(cpu)->Place(acc:0)");
  CHECK(first.bytes_moved(100) == 1000);

  std::vector<std::thread> threads;
  std::vector<const transform_plan*> seen(8);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i)
        seen[std::size_t(t)] = &plan_transform(kernel_type<cpu, double, layout::nhwc>::key(),
                                               kernel_type<accelerator, float16, layout::nchw>::key(i % 2));
    });
  for (auto& thread : threads) thread.join();
  for (const auto* plan : seen)
    CHECK(plan == &plan_transform(kernel_type<cpu, double, layout::nhwc>::key(),
                                  kernel_type<accelerator, float16, layout::nchw>::key(1)));
}

namespace {
// A place with no copies to or from anywhere.
struct island {
  using place_tag = island;
  static constexpr place_kind_id id = 5;
  static constexpr std::string_view name = "island";
  static constexpr bool has_device_id = false;
  static constexpr bool host_accessible = true;
};
}  // namespace

TEST_CASE("no chain: a clear error naming both keys and the missing axis", "[transforms][errors]") {
  // The accelerator casts only between float and float16, and the host cannot help after
  // the data has left it... but it can before: int8 on the host reaches the accelerator.
  CHECK_NOTHROW(plan_transform(kernel_type<cpu, std::int8_t>::key(), kernel_type<accelerator, float>::key()));
  CHECK_THROWS_WITH(
      plan_transform(kernel_type<cpu, float, layout::nchw>::key(),
                     kernel_type<cpu, float, layout::nc>::key()),
      Catch::Contains("no transform chain from {data_type[float]; data_layout[NCHW]; place[Place(cpu)]; "
                      "library_type[PLAIN]} to {data_type[float]; data_layout[NC]; place[Place(cpu)]; "
                      "library_type[PLAIN]}: no layout transform"));
  register_place_kind<island>();
  CHECK_THROWS_WITH(plan_transform(kernel_type<cpu, float>::key(), kernel_type<island, float>::key()),
                    Catch::Contains("no copy between the places"));
  const Tensor src = random_tensor({1, 2, 3, 4}, data_type::float32, data_layout::nchw, 1);
  const Tensor before = copy_to(src, cpu_place);
  CHECK_THROWS_AS(transform(src, kernel_type<cpu, float, layout::nc>::key()), not_registered);
  CHECK(same_bytes(src, before));
  // A tensor that holds no data: an error, not a read through a null handle.
  CHECK_THROWS_WITH(
      transform(Tensor(), kernel_type<cpu, float16>::key()),
      Catch::Contains("transform of a tensor that holds no data (cast float->float16 on Place(cpu))"));
}

TEST_CASE("a CPU transform called on a target of the caller's own checks it before writing",
          "[transforms][errors][regression]") {
  // A backend may call run() itself. A target that overlaps the source, of other dims, or of
  // another layout or data type than the step keeps is refused, and neither tensor changes:
  // the overlap had scrambled both, the smaller target had been written past (ASan).
  const Tensor src = random_tensor({1, 3, 2, 2}, data_type::float32, data_layout::nchw, 5);
  const Tensor before = copy_to(src, cpu_place);
  Tensor alias = src;  // shares the bytes: the same storage size in NHWC
  alias.set_layout(data_layout::nhwc);
  CHECK_THROWS_WITH((layout_transform<cpu, layout::nchw, layout::nhwc>::run(src, alias)),
                    Catch::Contains("CPU layout transform from Tensor([1, 3, 2, 2], float, NCHW") &&
                        Catch::Contains("the target overlaps the source, which a transform never writes"));
  CHECK(same_bytes(src, before));
  Tensor small({1, 3, 1, 2}, data_type::float32, cpu_place, data_layout_of<layout::nChw8c>);
  CHECK_THROWS_WITH((layout_transform<cpu, layout::nchw, layout::nChw8c>::run(src, small)),
                    Catch::Contains("the target must have the source's dims"));
  Tensor other_layout({1, 3, 2, 2}, data_type::float16, cpu_place, data_layout_of<layout::nChw8c>);
  CHECK_THROWS_WITH((cast_transform<cpu, float, float16>::run(src, other_layout)),
                    Catch::Contains("CPU cast") && Catch::Contains("a cast keeps the layout"));
  Tensor other_type({1, 3, 2, 2}, data_type::float16, cpu_place, data_layout::nhwc);
  CHECK_THROWS_WITH((layout_transform<cpu, layout::nchw, layout::nhwc>::run(src, other_type)),
                    Catch::Contains("a layout transform keeps the data type"));
  CHECK(same_bytes(src, before));
  // A target of its own that fits: written, and its version moves on (a cache keyed on it
  // sees the write).
  Tensor target({1, 3, 2, 2}, data_type::float32, cpu_place, data_layout::nhwc);
  const std::uint64_t version = target.version();
  layout_transform<cpu, layout::nchw, layout::nhwc>::run(src, target);
  CHECK(target.version() != version);
  CHECK(same_bytes(target, transform(src, kernel_type<cpu, float, layout::nhwc>::key())));
  // Two halves of one buffer that do not overlap are two tensors like any others.
  const Tensor both = random_tensor({2, 3, 2, 2}, data_type::float32, data_layout::nchw, 6);
  Tensor second = both.slice(1, 2);
  second.set_layout(data_layout::nhwc);
  CHECK_NOTHROW(layout_transform<cpu, layout::nchw, layout::nhwc>::run(both.slice(0, 1), second));
}

TEST_CASE("sequence offsets and selected rows survive a transform", "[transforms]") {
  LoDTensor sequences(random_tensor({5, 2}, data_type::float32, data_layout::any, 9), {{0, 2, 5}});
  const LoDTensor moved = transform(sequences, kernel_type<accelerator, float16>::key(0));
  CHECK(moved.lod() == sequences.lod());
  CHECK(moved.dtype() == data_type::float16);
  const SelectedRows rows({1, 3}, 4, random_tensor({2, 3}, data_type::float32, data_layout::any, 2));
  const SelectedRows moved_rows = transform(rows, kernel_type<accelerator, float>::key(1));
  CHECK(moved_rows.rows() == rows.rows());
  CHECK(moved_rows.height() == 4);
  CHECK(moved_rows.value().place() == place::of<accelerator>(1));
}
