// oneDNN as a library on the CPU place: engine and stream per thread, fluidk tensors handed
// to oneDNN without copies, and the cache of primitives and prepared weights.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <fluidk/devices/onednn.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

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

// --- the oneDNN cache (onednn_cache): kept objects, prepared weights, bounds, threads --------

TEST_CASE("onednn_cache keeps an object per key and counts hits and misses", "[onednn][cache]") {
  onednn_cache cache;
  int made = 0;
  auto make = [&] { return ++made; };
  CHECK(*cache.get<int>("a|1", make) == 1);
  CHECK(*cache.get<int>("a|1", make) == 1);  // kept: not made again
  CHECK(*cache.get<int>("a|2", make) == 2);
  CHECK(made == 2);
  CHECK(cache.stats().hits == 1);
  CHECK(cache.stats().misses == 2);
  CHECK(cache.size() == 2);
  CHECK_THROWS_WITH(cache.get<double>("a|1", [] { return 1.0; }), Catch::Contains("another type"));
}

TEST_CASE("onednn_cache prepares a weight again when its source is written in place", "[onednn][cache]") {
  onednn_cache cache;
  auto& context = onednn_context::this_thread();
  Tensor source({4, 4, 1, 1}, data_type::float32, cpu_place, data_layout::nchw);
  for (int i = 0; i < 16; ++i) source.data<float>()[i] = float(i);
  const Tensor& read = source;  // reads through a const tensor do not count as writes
  int prepared = 0;
  auto prepare = [&] {
    ++prepared;
    dnnl::memory m(dnnl::memory::desc({16}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a),
                   context.engine());
    std::copy(read.data<float>(), read.data<float>() + 16, static_cast<float*>(m.get_data_handle()));
    return m;
  };
  const dnnl::memory first = cache.prepared(read, "weights|x", prepare);
  CHECK(cache.prepared(read, "weights|x", prepare).get_data_handle() == first.get_data_handle());
  CHECK(prepared == 1);
  CHECK(cache.stats().prepared_hits == 1);
  source.data<float>()[0] = 100.f;  // a write through the same tensor moves its version
  const dnnl::memory second = cache.prepared(read, "weights|x", prepare);
  CHECK(prepared == 2);
  CHECK(static_cast<const float*>(second.get_data_handle())[0] == 100.f);
  CHECK(cache.stats().prepared_misses == 2);
  CHECK(cache.size() == 1);  // the stale entry was replaced, not kept beside the new one
  CHECK(cache.prepared_bytes() == 16 * sizeof(float));
  // Another tensor of the same shape is another source.
  Tensor other({4, 4, 1, 1}, data_type::float32, cpu_place, data_layout::nchw);
  cache.prepared(other, "weights|x", prepare);
  CHECK(prepared == 3);
}

TEST_CASE("onednn_cache drops a prepared weight once its source storage is gone", "[onednn][cache]") {
  // A model unloaded: its weights' reordered copies are dropped at each cache's next use, not
  // kept until they are the least recently used.
  auto& context = onednn_context::this_thread();
  auto prepare = [&] {
    return dnnl::memory(dnnl::memory::desc({16}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a),
                        context.engine());
  };
  onednn_cache cache, other;
  auto weight = std::make_unique<Tensor>(dims{16}, data_type::float32);
  const Tensor kept({16}, data_type::float32);
  cache.prepared(*weight, "weights|z", prepare);
  cache.prepared(*weight, "weights|z2", prepare);  // one source, two uses
  cache.prepared(kept, "weights|z", prepare);
  other.prepared(*weight, "weights|z", prepare);
  cache.get<int>("k|primitive", [] { return 1; });
  Tensor alias = *weight;  // shares the storage, which outlives the first tensor
  weight.reset();
  cache.drop_gone();
  CHECK(cache.size() == 4);
  CHECK(cache.stats().dropped == 0);

  // The last tensor of the storage goes on another thread: both caches drop their copies of
  // it, at their next use, and keep the rest.
  std::thread([moved = std::move(alias)]() mutable { moved = Tensor(); }).join();
  CHECK(cache.prepared_bytes() == 192);  // not yet used since
  cache.get<int>("k|primitive", [] { return 2; });
  CHECK(cache.size() == 2);
  CHECK(cache.prepared_bytes() == 64);
  CHECK(cache.stats().dropped == 2);
  CHECK(cache.stats().hits == 1);  // the primitive stays
  other.drop_gone();
  CHECK(other.size() == 0);
  CHECK(other.prepared_bytes() == 0);
  CHECK(other.stats().dropped == 1);
  const auto misses = cache.stats().prepared_misses;
  cache.prepared(kept, "weights|z", prepare);
  CHECK(cache.stats().prepared_misses == misses);  // the live source's copy was kept
}

TEST_CASE("onednn_cache is bounded: the least recently used entry goes first", "[onednn][cache]") {
  onednn_cache cache(2);
  auto one = [] { return 1; };
  cache.get<int>("k|a", one);
  cache.get<int>("k|b", one);
  cache.get<int>("k|a", one);  // a is now the most recently used
  cache.get<int>("k|c", one);  // evicts b
  CHECK(cache.size() == 2);
  CHECK(cache.stats().evictions == 1);
  const auto misses = cache.stats().misses;
  cache.get<int>("k|a", one);
  CHECK(cache.stats().misses == misses);  // a was kept
  cache.get<int>("k|b", one);
  CHECK(cache.stats().misses == misses + 1);  // b was made again

  // The bound on prepared bytes: a second weight of 64 bytes over a 100-byte bound evicts the first.
  auto& context = onednn_context::this_thread();
  onednn_cache small(100, 100);
  const Tensor w1({16}, data_type::float32), w2({16}, data_type::float32);
  auto prepare = [&] {
    return dnnl::memory(dnnl::memory::desc({16}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a),
                        context.engine());
  };
  small.prepared(w1, "weights|y", prepare);
  small.prepared(w2, "weights|y", prepare);
  CHECK(small.size() == 1);
  CHECK(small.prepared_bytes() == 64);
  CHECK(small.stats().evictions == 1);
}

TEST_CASE("onednn_cache serves several threads at once", "[onednn][cache]") {
  onednn_cache cache(8);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        const int k = (i + t) % 12;  // more keys than the bound: evictions race with lookups
        if (*cache.get<int>("t|" + std::to_string(k), [k] { return k; }) != k) ++wrong;
      }
    });
  for (std::thread& t : threads) t.join();
  CHECK(wrong == 0);
  CHECK(cache.stats().hits + cache.stats().misses == 2000);
  CHECK(cache.size() <= 8);
}
