// Test bodies shared by every device: the including file defines `test_places`, an Mp11
// list of the place kinds to run them on (the host-compiled test and the nvcc-compiled CUDA
// test include this same file).
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <fluidk/device.hpp>
#include <fluidk/lod_tensor.hpp>
#include <fluidk/selected_rows.hpp>
#include <random>
#include <vector>

namespace device_tests {

// Random bytes, so that every bit pattern (NaNs and subnormals included) must survive.
inline void fill_random(fluidk::Tensor& host, unsigned seed) {
  std::mt19937 rng(seed);
  auto* bytes = static_cast<unsigned char*>(host.handle()) + host.offset();
  for (std::size_t i = 0; i < host.storage_bytes(); ++i) bytes[i] = static_cast<unsigned char>(rng());
}

inline bool same_bytes(const fluidk::Tensor& a, const fluidk::Tensor& b) {
  return a.storage_bytes() == b.storage_bytes() &&
         (a.storage_bytes() == 0 ||
          std::memcmp(static_cast<const unsigned char*>(a.handle()) + a.offset(),
                      static_cast<const unsigned char*>(b.handle()) + b.offset(), a.storage_bytes()) == 0);
}

inline fluidk::Tensor host_copy(const fluidk::Tensor& t) { return fluidk::copy_to(t, fluidk::cpu_place); }

}  // namespace device_tests

TEMPLATE_LIST_TEST_CASE("host -> place -> host round trips are bit-exact for every data type and size",
                        "[devices]", test_places) {
  using namespace fluidk;
  const place where = place::of<TestType>(0);
  unsigned seed = 1;
  for (data_type dtype : all_data_types) {
    for (std::int64_t n : {0, 1, 7, 1'000'003}) {
      Tensor host({n}, dtype);
      device_tests::fill_random(host, seed++);
      const Tensor before = device_tests::host_copy(host);
      const Tensor on_device = copy_to(host, where);
      REQUIRE(on_device.place() == where);
      REQUIRE(on_device.dims() == host.dims());
      REQUIRE(on_device.dtype() == dtype);
      const Tensor back = copy_to(on_device, cpu_place);
      INFO(name_of(dtype) << " x " << n);
      REQUIRE(device_tests::same_bytes(back, host));
      REQUIRE(device_tests::same_bytes(host, before));  // the source is never written
    }
  }
}

TEMPLATE_LIST_TEST_CASE("copies on the place and of slices move exactly the bytes asked for", "[devices]",
                        test_places) {
  using namespace fluidk;
  const place where = place::of<TestType>(0);
  Tensor host({6, 5}, data_type::int32);
  for (int i = 0; i < 30; ++i) host.data<std::int32_t>()[i] = i;
  const Tensor on_device = copy_to(host, where);
  const Tensor second = copy_to(on_device, where);  // place to same place
  CHECK_FALSE(second.shares_buffer_with(on_device));
  CHECK(device_tests::same_bytes(device_tests::host_copy(second), host));

  const Tensor rows = on_device.slice(2, 4);  // rows 2 and 3: values 10..19
  CHECK(rows.shares_buffer_with(on_device));
  CHECK(rows.dims() == dims{2, 5});
  const Tensor rows_back = device_tests::host_copy(rows);
  for (int i = 0; i < 10; ++i) CHECK(rows_back.data<std::int32_t>()[i] == 10 + i);

  // Writing into a slice on the device leaves the rest of the buffer alone.
  Tensor target = copy_to(host, where);
  Tensor ones({2, 5}, data_type::int32);
  for (int i = 0; i < 10; ++i) ones.data<std::int32_t>()[i] = -1;
  Tensor target_rows = target.slice(1, 3);
  copy_into(target_rows, ones);
  const Tensor target_back = device_tests::host_copy(target);
  for (int i = 0; i < 30; ++i) CHECK(target_back.data<std::int32_t>()[i] == (i >= 5 && i < 15 ? -1 : i));

  // Between overlapping rows of one buffer, either way, as memmove would.
  Tensor down = copy_to(host, where);
  Tensor rows_1_to_5 = down.slice(1, 6);
  copy_into(rows_1_to_5, down.slice(0, 5));
  const Tensor down_back = device_tests::host_copy(down);
  for (int i = 0; i < 30; ++i) CHECK(down_back.data<std::int32_t>()[i] == (i < 5 ? i : i - 5));
  Tensor up = copy_to(host, where);
  Tensor rows_0_to_4 = up.slice(0, 5);
  copy_into(rows_0_to_4, up.slice(1, 6));
  const Tensor up_back = device_tests::host_copy(up);
  for (int i = 0; i < 30; ++i) CHECK(up_back.data<std::int32_t>()[i] == (i < 25 ? i + 5 : i));
}

TEMPLATE_LIST_TEST_CASE("tensors that share data share the device buffer", "[devices]", test_places) {
  using namespace fluidk;
  const place where = place::of<TestType>(0);
  Tensor a({4}, data_type::float32, where);
  Tensor b;
  b.share_data_with(a);
  CHECK(b.shares_buffer_with(a));
  CHECK(b.handle() == a.handle());
  Tensor values({4}, data_type::float32);
  for (int i = 0; i < 4; ++i) values.data<float>()[i] = float(i) + 0.5f;
  copy_into(b, values);
  CHECK(device_tests::same_bytes(device_tests::host_copy(a), values));
}

TEMPLATE_LIST_TEST_CASE("sequence offsets and selected rows survive the move to the place", "[devices]",
                        test_places) {
  using namespace fluidk;
  const place where = place::of<TestType>(0);
  LoDTensor sequences({5, 2}, data_type::float32);
  sequences.set_lod({{0, 2}, {0, 2, 5}});
  const LoDTensor moved = copy_to(sequences, where);
  CHECK(moved.lod() == sequences.lod());
  CHECK(moved.place() == where);

  Tensor value({2, 3}, data_type::float64);
  for (int i = 0; i < 6; ++i) value.data<double>()[i] = i * 1.25;
  const SelectedRows rows({3, 7}, 10, value);
  const SelectedRows moved_rows = copy_to(rows, where);
  CHECK(moved_rows.rows() == rows.rows());
  CHECK(moved_rows.height() == 10);
  CHECK(moved_rows.value().place() == where);
  CHECK(device_tests::same_bytes(device_tests::host_copy(moved_rows.value()), value));
}

TEMPLATE_LIST_TEST_CASE("a failed allocation names the place and the byte count, and leaks nothing",
                        "[devices]", test_places) {
  using namespace fluidk;
  const place where = place::of<TestType>(0);
  // 4 EiB of doubles: a size that fits the byte count but no place's memory. (One more
  // doubling does not fit int64 at all: refused before any allocator is asked, integrity_test.)
  const std::int64_t huge = std::int64_t(1) << 59;
  CHECK_THROWS_AS(Tensor({huge}, data_type::float64, where), allocation_error);
  try {
    Tensor t({huge}, data_type::float64, where);
    FAIL("allocation of 4 EiB succeeded");
  } catch (const allocation_error& e) {
    CHECK(e.where() == where);
    CHECK(e.bytes() == std::size_t(huge) * 8);
    CHECK_THAT(e.what(),
               Catch::Contains(std::to_string(std::size_t(huge) * 8) + " bytes on " + where.to_string()));
  }
}

TEMPLATE_LIST_TEST_CASE("each place gives its context, and host access is checked", "[devices]",
                        test_places) {
  using namespace fluidk;
  const place where = place::of<TestType>(0);
  auto& context = context_of<TestType>(0);
  CHECK(context.place() == where);
  CHECK(&context_of(where) == &context);  // the runtime pool gives the same object
  context.wait();
  CHECK(device_count(where) >= 1);
  CHECK_THROWS_AS(context_of<TestType>(device_count(where)), device_unavailable);

  Tensor values({3}, data_type::float32);
  for (int i = 0; i < 3; ++i) values.data<float>()[i] = float(i);
  const Tensor t = copy_to(values, where);  // set, so that the copy below reads set bytes
  if constexpr (!TestType::host_accessible) {
    CHECK_THROWS_WITH(t.data<float>(), Catch::Contains("host access to Tensor([3], float, ANY_LAYOUT, " +
                                                       where.to_string() + ")"));
  } else {
    CHECK_NOTHROW(t.data<float>());
  }
  CHECK_THROWS_WITH(copy_to(t, where).data<double>(), Catch::Contains("typed access as double"));
}
