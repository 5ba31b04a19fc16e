// Executors running concurrently on sibling scopes that share a parent of read-only
// weights, with transfers to a second place: built under ThreadSanitizer by scripts/test.
#include <atomic>
#include <catch2/catch.hpp>
#include <fluidk/executor.hpp>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/transforms/cpu.hpp>
#include <thread>
#include <vector>

#include "simulated_device.hpp"

using namespace fluidk;
using fluidk_test::accelerator;

namespace {
// Adds the weight to its input, on whichever place it runs; the accelerator's memory is host
// memory underneath, so one kernel body serves both places.
template <class T>
struct add_weight {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor& x = ctx.input("X");
    const Tensor& w = ctx.input("W");
    // Catch2's assertions are not thread-safe: a wrong place is an exception instead.
    if (x.place() != ctx.place() || w.place() != ctx.place())
      throw error("add_weight: an input was not moved");
    Tensor out(x.dims(), x.dtype(), ctx.place());
    const T* a = static_cast<const T*>(x.handle());
    const T* b = static_cast<const T*>(w.handle());
    T* c = static_cast<T*>(out.handle());
    for (std::int64_t i = 0; i < x.numel(); ++i) c[i] = a[i] + b[i];
    ctx.output("Out") = std::move(out);
  }
};
struct add_weight_op {
  static constexpr std::string_view name = "add_weight";
  static constexpr std::array<std::string_view, 2> inputs{"X", "W"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(fluidk::kernels_on<cpu>(add_weight<float>{}),
                                               fluidk::kernels_on<accelerator>(add_weight<float>{}));
};
// 64 floats: 0, 1, ..., 63 (the weight), or all `value` (an input).
LoDTensor weight64() {
  Tensor w({64}, data_type::float32);
  for (int i = 0; i < 64; ++i) w.data<float>()[i] = float(i);
  return LoDTensor(w);
}
LoDTensor filled64(float value) {
  Tensor x({64}, data_type::float32);
  for (int i = 0; i < 64; ++i) x.data<float>()[i] = value;
  return LoDTensor(x);
}
}  // namespace

TEST_CASE("executors share a parent scope of weights across threads", "[executor][threads]") {
  register_operator<add_weight_op>();
  Scope weights;
  weights.var("w").set(weight64());
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Scope& local = weights.new_scope();
      local.var("x").set(filled64(float(t)));
      const std::vector<op_invocation> program{
          {"add_weight", {{"X", {"x"}}, {"W", {"w"}}}, {{"Out", {"y"}}}, {}},
          {"add_weight", {{"X", {"y"}}, {"W", {"w"}}}, {{"Out", {"z"}}}, {}}};
      Executor executor(t % 2 ? place::of<accelerator>(t / 2) : cpu_place);
      auto prepared = executor.prepare(program, local);
      for (int i = 0; i < 50; ++i) executor.run(prepared);
      const Tensor z = copy_to(local.get("z").get<LoDTensor>(), cpu_place);
      ok[std::size_t(t)] =
          z.data<float>()[10] == float(t + 20) && executor.stats().cache_hits >= (t % 2 ? 98u : 0u);
      weights.delete_scope(local);
    });
  for (auto& thread : threads) thread.join();
  CHECK(ok == std::vector<int>{1, 1, 1, 1});
  CHECK(weights.kid_count() == 0);
}

TEST_CASE("executors on threads drop the copies of their requests' inputs", "[executor][threads][cache]") {
  // Four executors on the device copy one shared weight (each keeps its copy) and a new input
  // per request, whose scope each thread deletes after the run. Each first runs on a scope of
  // the main thread's, which the main thread deletes while the executors go on: their caches
  // hear of it from another thread.
  register_operator<add_weight_op>();
  Scope weights;
  weights.var("w").set(weight64());
  std::vector<Scope*> firsts, locals;
  for (int t = 0; t < 4; ++t) {
    firsts.push_back(&weights.new_scope());
    firsts.back()->var("x").set(filled64(-1));
    locals.push_back(&weights.new_scope());
  }
  std::atomic<int> started{0};
  std::atomic<bool> deleted{false};
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Executor executor(place::of<accelerator>(t / 2));
      const std::vector<op_invocation> program{
          {"add_weight", {{"X", {"x"}}, {"W", {"w"}}}, {{"Out", {"y"}}}, {}}};
      executor.run(program, *firsts[std::size_t(t)]);
      ++started;
      bool right = true;
      for (int request = 0; request < 20; ++request) {
        Scope& s = locals[std::size_t(t)]->new_scope();
        s.var("x").set(filled64(float(request)));
        executor.run(program, s);
        const Tensor y = copy_to(s.get("y").get<LoDTensor>(), cpu_place);
        // The weight, this request's input, and perhaps the first scope's input still.
        const std::size_t entries = executor.cache().size();
        right = right && y.data<float>()[10] == float(request + 10) && (entries == 2 || entries == 3);
        locals[std::size_t(t)]->delete_scope(s);
      }
      while (!deleted) std::this_thread::yield();
      executor.cache().drop_gone();
      ok[std::size_t(t)] = right && executor.cache().size() == 1 && executor.stats().transforms == 22;
    });
  while (started < 4) std::this_thread::yield();
  for (Scope* first : firsts) weights.delete_scope(*first);
  deleted = true;
  for (auto& thread : threads) thread.join();
  CHECK(ok == std::vector<int>{1, 1, 1, 1});
}
