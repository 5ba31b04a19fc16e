// oneDNN as a library on the CPU place: engine and stream per thread, and fluidk tensors
// handed to oneDNN without copies.
#include <catch2/catch.hpp>
#include <fluidk/devices/onednn.hpp>
#include <thread>

using namespace fluidk;

TEST_CASE("a oneDNN reorder reads and writes fluidk tensors in place", "[onednn]") {
  Tensor plain({2, 3, 4, 5}, data_type::float32, cpu_place, data_layout::nchw);
  for (int i = 0; i < 120; ++i) plain.data<float>()[i] = float(i);
  Tensor blocked({2, 3, 4, 5}, data_type::float32, cpu_place, data_layout_of<layout::nChw8c>);
  auto& context = onednn_context::this_thread();
  CHECK(context.place() == cpu_place);
  auto source = onednn_memory(plain, context.engine());
  auto target = onednn_memory(blocked, context.engine());
  CHECK(source.get_data_handle() == plain.handle());
  dnnl::reorder(source, target).execute(context.stream(), source, target);
  context.wait();
  // nChw8c: [n][c/8][h][w][c%8]; channel 1 of pixel (0,0) sits right after channel 0.
  CHECK(blocked.data<float>()[1] == 20.f);
  CHECK(blocked.data<float>()[8] == 1.f);  // next pixel, channel 0
}

TEST_CASE("each thread has its own oneDNN stream", "[onednn]") {
  onednn_context* other = nullptr;
  std::thread([&] { other = &onednn_context::this_thread(); }).join();
  CHECK(other != &onednn_context::this_thread());
}

TEST_CASE("tensors oneDNN cannot describe are rejected by name", "[onednn][errors]") {
  auto& context = onednn_context::this_thread();
  CHECK_THROWS_WITH(onednn_memory(Tensor({4}, data_type::float32), context.engine()),
                    Catch::Contains("layout ANY_LAYOUT has no oneDNN format"));
  CHECK_THROWS_WITH(onednn_memory(Tensor({4, 4}, data_type::int64, cpu_place, data_layout_of<layout::nc>),
                                  context.engine()),
                    Catch::Contains("oneDNN has no data type for int64_t"));
}
