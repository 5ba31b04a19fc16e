// Tensors on the host: shapes, storage of blocked layouts, shared buffers, slices, checked
// typed access, the statically typed view, LoDTensor and SelectedRows.
#include <catch2/catch.hpp>
#include <cstdint>
#include <fluidk/devices/onednn_tags.hpp>
#include <fluidk/lod_tensor.hpp>
#include <fluidk/selected_rows.hpp>
#include <fluidk/typed_tensor.hpp>

using namespace fluidk;

TEST_CASE("dims hold up to eight extents inline", "[tensor][dims]") {
  constexpr dims d{2, 3, 1, 2};
  static_assert(d.rank() == 4 && d.numel() == 12 && d[1] == 3);
  static_assert(dims{}.numel() == 1 && dims{4, 0}.numel() == 0);
  CHECK(d.to_string() == "[2, 3, 1, 2]");
  CHECK_THROWS_WITH((dims{1, 1, 1, 1, 1, 1, 1, 1, 1}), Catch::Contains("at most 8 dimensions, got 9"));
  CHECK_THROWS_WITH((dims{2, -1}), Catch::Contains("negative extent -1"));
}

TEST_CASE("blocked layouts pad the channels to whole blocks", "[tensor][layout]") {
  CHECK(storage_numel({2, 17, 3, 3}, data_layout_of<layout::nChw8c>) == 2 * 24 * 9);
  CHECK(storage_numel({2, 17, 3, 3}, data_layout_of<layout::nChw16c>) == 2 * 32 * 9);
  CHECK(storage_numel({2, 16, 3, 3}, data_layout_of<layout::nChw16c>) == 2 * 16 * 9);
  CHECK(storage_numel({2, 17, 3, 3}, data_layout::nchw) == 2 * 17 * 9);
  CHECK(storage_numel({5}, data_layout::any) == 5);
  const Tensor blocked({1, 3, 2, 2}, data_type::float32, cpu_place, data_layout_of<layout::nChw8c>);
  CHECK(blocked.storage_bytes() == 8 * 4 * sizeof(float));
  CHECK(blocked.numel() == 12);
  CHECK_THROWS_WITH(Tensor({3, 4}, data_type::float32, cpu_place, data_layout::nchw),
                    Catch::Contains("layout NCHW needs rank 4, but the shape [3, 4] has rank 2"));
  CHECK_THROWS_WITH(Tensor({3, 4, 5}, data_type::float32, cpu_place, data_layout_of<layout::nc>),
                    Catch::Contains("layout NC needs rank 2"));
}

TEST_CASE("host buffers come from the CPU allocator, 64-byte aligned", "[tensor][cpu]") {
  for (std::int64_t n : {1, 3, 17, 1000}) {
    const Tensor t({n}, data_type::int8);
    CHECK(reinterpret_cast<std::uintptr_t>(t.handle()) % cpu_alignment == 0);
  }
  const Tensor empty({0, 3}, data_type::float32);
  CHECK(empty.initialized());
  CHECK(empty.storage_bytes() == 0);
}

TEST_CASE("large host blocks are kept when freed and reused by the next of their size class",
          "[tensor][cpu]") {
  using cache = detail::host_block_cache;
  // Size classes: an eighth of a power of two, at most 12.5 % above the request; small
  // requests are themselves.
  CHECK(cache::size_class(1000) == 1000);
  CHECK(cache::size_class(cache::min_bytes) == cache::min_bytes);
  for (const std::size_t bytes : {std::size_t(1) << 20, std::size_t(3) << 20, (std::size_t(38) << 20) + 12345,
                                  std::size_t(1) << 33, (std::size_t(1) << 40) + 1}) {
    const std::size_t size = cache::size_class(bytes);
    CHECK(size >= bytes);
    CHECK(size - bytes <= bytes / 8);
    CHECK(cache::size_class(size) == size);
  }
  if (!detail::reuse_host_blocks) return;  // under AddressSanitizer: every block is freed
  const dims shape{1, 96, 112, 112};       // 4.6 MiB of float
  void* first = nullptr;
  {
    Tensor a(shape, data_type::float32);
    first = a.handle();
    a.data<float>()[0] = 1;
  }
  CHECK(cache::instance().stats().cached_bytes >=
        cache::size_class(std::size_t(shape.numel()) * sizeof(float)));
  // The same size again, and a size of the same class: the kept block.
  {
    Tensor b(shape, data_type::float32);
    CHECK(b.handle() == first);
  }
  {
    Tensor c(dims{1, 96, 112, 111}, data_type::float32);
    CHECK(c.handle() == first);
  }
  // empty() gives every kept block back.
  cache::instance().empty();
  CHECK(cache::instance().stats().cached_bytes == 0);
}

TEST_CASE("typed access checks the data type and that there is data", "[tensor][errors]") {
  Tensor t({2, 3}, data_type::float32);
  CHECK_NOTHROW(t.data<float>());
  CHECK_THROWS_WITH(t.data<double>(), Catch::Contains("typed access as double to Tensor([2, 3], float, "
                                                      "ANY_LAYOUT, Place(cpu)), which holds float"));
  const Tensor nothing;
  CHECK_THROWS_WITH(nothing.data<float>(), Catch::Contains("typed access to a tensor that holds no data"));
  CHECK_THROWS_WITH(copy_to(nothing, cpu_place), Catch::Contains("copy of a tensor that holds no data"));
}

TEST_CASE("share_data_with shares the buffer; copies do not", "[tensor]") {
  Tensor a({4}, data_type::int32);
  for (int i = 0; i < 4; ++i) a.data<std::int32_t>()[i] = i;
  Tensor b;
  b.share_data_with(a);
  CHECK(b.shares_buffer_with(a));
  b.data<std::int32_t>()[2] = 42;
  CHECK(a.data<std::int32_t>()[2] == 42);
  Tensor c = copy_to(a, cpu_place);
  CHECK_FALSE(c.shares_buffer_with(a));
  c.data<std::int32_t>()[0] = -7;
  CHECK(a.data<std::int32_t>()[0] == 0);
}

TEST_CASE("slices view rows of dimension 0 through an offset", "[tensor]") {
  Tensor t({4, 3}, data_type::int64);
  for (int i = 0; i < 12; ++i) t.data<std::int64_t>()[i] = i;
  const Tensor rows = t.slice(1, 3);
  CHECK(rows.dims() == dims{2, 3});
  CHECK(rows.offset() == 3 * sizeof(std::int64_t));
  CHECK(rows.data<std::int64_t>()[0] == 3);
  CHECK(rows.data<std::int64_t>()[5] == 8);
  CHECK(rows.storage_bytes() == 6 * sizeof(std::int64_t));
  CHECK(t.slice(4, 4).storage_bytes() == 0);
  CHECK_THROWS_WITH(t.slice(2, 5), Catch::Contains("slice [2, 5) is out of range for shape [4, 3]"));
  CHECK_THROWS_WITH(t.slice(-1, 1), Catch::Contains("out of range"));
  // A blocked slice keeps whole padded images.
  const Tensor blocked({3, 3, 2, 2}, data_type::float32, cpu_place, data_layout_of<layout::nChw8c>);
  CHECK(blocked.slice(1, 2).offset() == 8 * 4 * sizeof(float));
}

namespace {
// A layout that blocks dimension 0 by 8 rows: physically [rows / 8][columns][8].
struct nc8n {
  using layout_tag = nc8n;
  static constexpr layout_id id = 21;
  static constexpr std::string_view name = "NC8n";
  static constexpr int rank = 2;
  static constexpr int block_axis = 0;
  static constexpr int block_size = 8;
};
}  // namespace

TEST_CASE("a layout that blocks dimension 0 is sliced in whole blocks", "[tensor][regression]") {
  static_assert(detail::layout_check<nc8n>::value);
  const Tensor t({20, 4}, data_type::float32, cpu_place, data_layout_of<nc8n>);  // 3 blocks: 24 rows stored
  REQUIRE(t.storage_bytes() == 24 * 4 * sizeof(float));
  const Tensor second = t.slice(8, 16);
  CHECK(second.offset() == 8 * 4 * sizeof(float));
  CHECK(second.storage_bytes() == 8 * 4 * sizeof(float));
  const Tensor last = t.slice(16, 20);  // the padded last block, within the storage
  CHECK(last.offset() == 16 * 4 * sizeof(float));
  CHECK(last.offset() + last.storage_bytes() == t.storage_bytes());
  CHECK(t.slice(0, 20).storage_bytes() == t.storage_bytes());
  CHECK_THROWS_WITH(t.slice(1, 3), Catch::Contains("keeps dimension 0 in blocks of 8, so a slice begins at a "
                                                   "multiple of 8 and ends at one or at the last row"));
  CHECK_THROWS_WITH(t.slice(8, 12), Catch::Contains("blocks of 8"));
  CHECK(t.slice(20, 20).storage_bytes() == 0);  // empty slices anywhere, as unblocked
  CHECK(t.slice(3, 3).storage_bytes() == 0);
}

TEST_CASE("reshape and set_layout keep the storage size, or leave the tensor as it was", "[tensor][errors]") {
  Tensor t({2, 6}, data_type::float32);
  t.reshape({3, 4});
  CHECK(t.dims() == dims{3, 4});
  CHECK_THROWS_WITH(t.reshape({5, 5}), Catch::Contains("cannot reshape [3, 4] to [5, 5]"));
  CHECK(t.dims() == dims{3, 4});
  Tensor image({1, 8, 2, 2}, data_type::float32, cpu_place, data_layout::nchw);
  image.set_layout(data_layout_of<layout::nChw8c>);  // 8 channels: no padding, same storage
  CHECK(image.layout() == data_layout_of<layout::nChw8c>);
  Tensor odd({1, 3, 2, 2}, data_type::float32, cpu_place, data_layout::nchw);
  CHECK_THROWS_WITH(odd.set_layout(data_layout_of<layout::nChw8c>),
                    Catch::Contains("needs a different storage size"));
  CHECK(odd.layout() == data_layout::nchw);
  // A blocked tensor's padding is no room for more elements: 3 and 5 channels both pad to 8.
  Tensor padded({1, 3, 2, 2}, data_type::float32, cpu_place, data_layout_of<layout::nChw8c>);
  CHECK_THROWS_WITH(
      padded.reshape({1, 5, 2, 2}),
      Catch::Contains("cannot reshape [1, 3, 2, 2] to [1, 5, 2, 2]: the number of elements differs"));
  CHECK_THROWS_WITH(padded.reshape({1, 12, 1, 1}),
                    Catch::Contains("in layout nChw8c: its padded storage size differs"));
  CHECK(padded.dims() == dims{1, 3, 2, 2});
}

TEST_CASE("typed_tensor carries place, data type and layout in its type", "[tensor][typed]") {
  using image = typed_tensor<cpu, float, layout::nchw>;
  static_assert(std::is_same_v<image::dtype_t, float> && std::is_same_v<image::place_t, cpu>);
  static_assert(image::key() == kernel_type<cpu, float, layout::nchw>::key());
  static_assert(is_typed_tensor<image> && !is_typed_tensor<Tensor>);
  image x({1, 2, 2, 2});
  x.data()[3] = 1.5f;
  const Tensor& plain = x;
  CHECK(plain.data<float>()[3] == 1.5f);
  const image back = tensor_cast<cpu, float, layout::nchw>(plain);
  CHECK(back.tensor().shares_buffer_with(plain));
  CHECK_THROWS_WITH((tensor_cast<cpu, double, layout::nchw>(plain)),
                    Catch::Contains("is not a typed_tensor<cpu, double, NCHW>: the data type differs"));
  CHECK_THROWS_WITH((tensor_cast<cpu, float, layout::nhwc>(plain)), Catch::Contains("the layout differs"));
  CHECK_THROWS_WITH((tensor_cast<cpu, float, layout::nchw>(Tensor())), Catch::Contains("it holds no data"));
}

TEST_CASE("LoDTensor keeps several levels of sequence offsets, checked", "[tensor][lod]") {
  LoDTensor t({5, 2}, data_type::float32);
  t.set_lod({{0, 2}, {0, 2, 5}});
  CHECK(t.lod_levels() == 2);
  CHECK(t.sequence_count(0) == 1);
  CHECK(t.sequence_count(1) == 2);
  CHECK_THROWS_WITH(t.set_lod({{0, 2, 4}}), Catch::Contains("LoD level 0 ends at 4, but the tensor has 5"));
  CHECK_THROWS_WITH(t.set_lod({{1, 5}}), Catch::Contains("must start with offset 0"));
  CHECK_THROWS_WITH(t.set_lod({{0, 3, 2, 5}}), Catch::Contains("decreasing offsets"));
  CHECK_THROWS_WITH(t.set_lod({{0, 3}, {0, 2, 5}}), Catch::Contains("the next level has 2 entries"));
  CHECK_THROWS_WITH(t.set_lod({{0, 1}, {}}), Catch::Contains("LoD level 1 must start with offset 0"));
  CHECK(t.lod() == lod{{0, 2}, {0, 2, 5}});  // a rejected LoD leaves the old one
  CHECK_THROWS_WITH(t.sequence_count(2), Catch::Contains("LoD level 2 does not exist"));
}

TEST_CASE("a LoDTensor's reshape and shared data keep rows its offsets fit", "[tensor][lod]") {
  LoDTensor t(Tensor({4, 2}, data_type::float32), {{0, 1, 4}});
  const Tensor before = t;
  CHECK_THROWS_WITH(
      t.reshape({2, 4}),
      "fluidk: cannot reshape to [2, 4] keeping the sequence offsets of Tensor([4, 2], float, ANY_LAYOUT, "
      "Place(cpu)): LoD level 0 ends at 4, but the tensor has 2 entries");
  CHECK(t.dims() == dims{4, 2});
  CHECK_THROWS_WITH(t.share_data_with(Tensor({3, 2}, data_type::float32)),
                    Catch::Contains("cannot share the data of [3, 2] keeping the sequence offsets"));
  CHECK(t.shares_buffer_with(before));
  CHECK(t.lod() == lod{{0, 1, 4}});
  // The same rows: allowed, offsets kept.
  t.reshape({4, 1, 2});
  CHECK(t.dims() == dims{4, 1, 2});
  const Tensor other({4, 3}, data_type::float32);
  t.share_data_with(other);
  CHECK(t.shares_buffer_with(other));
  CHECK(t.lod() == lod{{0, 1, 4}});
  // Without offsets, any reshape Tensor allows.
  LoDTensor plain(Tensor({4, 2}, data_type::float32));
  plain.reshape({2, 4});
  CHECK(plain.dims() == dims{2, 4});
}

TEST_CASE("SelectedRows checks its rows, height and value, and rejects without change", "[tensor][rows]") {
  Tensor value({2, 4}, data_type::float32);
  SelectedRows rows({1, 8}, 10, value);
  CHECK(rows.dense_dims() == dims{10, 4});
  CHECK_THROWS_WITH(SelectedRows({1, 10}, 10), Catch::Contains("row index 10 is outside [0, 10)"));
  CHECK_THROWS_WITH(rows.set_rows({3, 12}), Catch::Contains("row index 12"));
  CHECK(rows.rows() == std::vector<std::int64_t>{1, 8});
  CHECK_THROWS_WITH(rows.set_height(5), Catch::Contains("height 5 is below row index 8"));
  CHECK(rows.height() == 10);
  CHECK_THROWS_WITH(rows.set_value(Tensor({3, 4}, data_type::float32)),
                    Catch::Contains("one row per index (2)"));
  CHECK(rows.value().shares_buffer_with(value));
}
