// FLUIDK_DEBUG (fluidk/debug.hpp): this file is compiled with it defined. Each failing check
// aborts, so each one runs in a child process, whose stderr and end the test reads.
#include <fluidk/debug.hpp>

#if !FLUIDK_DEBUG_ENABLED
#error "debug_test is compiled with -DFLUIDK_DEBUG"
#endif

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>
#include <fluidk/executor.hpp>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/static_dispatch.hpp>
#include <fluidk/typed_tensor.hpp>
#include <string>
#include <utility>
#include <vector>

#include "x_to_out.hpp"

using namespace fluidk;

namespace {

struct child_result {
  bool aborted = false;
  std::string stderr_text;
};

// Runs f in a child process and reports whether it aborted and what it wrote to stderr.
template <class F>
child_result in_child(F f) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGABRT, SIG_DFL);  // not Catch's handler: the child's abort is the result
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    f();
    ::_exit(0);
  }
  ::close(fds[1]);
  child_result r;
  char buffer[512];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;)
    r.stderr_text.append(buffer, std::size_t(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  return r;
}

// Kernels: one that reads X and writes Out, one that writes X too (through a cast-away const,
// as a buggy kernel would), one that works in place on Out.
template <class T>
struct copy_kernel {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor& x = ctx.input(0);
    Tensor& out = ctx.output(0);
    out = Tensor(x.dims(), x.dtype());
    for (std::int64_t i = 0; i < x.numel(); ++i) out.data<T>()[i] = x.data<T>()[i];
  }
};
template <class T>
struct writes_input_kernel {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const_cast<Tensor&>(ctx.input(0)).data<T>()[0] = T(42);
    ctx.output(0) = Tensor(ctx.input(0).dims(), ctx.input(0).dtype());
  }
};
// Replaces, or reshapes, the variable of its input X (the bytes stay as they were).
template <class T>
struct replaces_input_kernel {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    ctx.input_arg("X").variable()->set(LoDTensor(Tensor({7}, data_type_of<T>)));
    ctx.output(0) = Tensor({1}, data_type_of<T>);
  }
};
template <class T>
struct reshapes_input_kernel {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    ctx.input_arg("X").variable()->get_mutable<LoDTensor>().reshape({4, 1});
    ctx.output(0) = Tensor({1}, data_type_of<T>);
  }
};
template <class T>
struct in_place_kernel {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    Tensor& out = ctx.output(0);
    for (std::int64_t i = 0; i < out.numel(); ++i) out.data<T>()[i] *= T(2);
  }
};
template <class T>
struct reads_slot_3_kernel {
  using dtype = T;
  void operator()(execution_context& ctx) const { (void)ctx.inputs(3).size(); }
};

struct copy_op : fluidk_test::x_to_out<copy_kernel<float>> {
  static constexpr std::string_view name = "debug_copy";
};
struct bad_op : fluidk_test::x_to_out<writes_input_kernel<float>> {
  static constexpr std::string_view name = "debug_writes_input";
};
struct replaces_op : fluidk_test::x_to_out<replaces_input_kernel<float>> {
  static constexpr std::string_view name = "debug_replaces_input";
};
struct reshapes_op : fluidk_test::x_to_out<reshapes_input_kernel<float>> {
  static constexpr std::string_view name = "debug_reshapes_input";
};
struct in_place_op : fluidk_test::x_to_out<in_place_kernel<float>> {
  static constexpr std::string_view name = "debug_in_place";
};
struct slot_op : fluidk_test::x_to_out<reads_slot_3_kernel<float>> {
  static constexpr std::string_view name = "debug_slot";
};

using f32 = typed_tensor<cpu, float>;
f32 ones(std::int64_t n) {
  f32 t({n});
  for (std::int64_t i = 0; i < n; ++i) t.data()[i] = 1.0f;
  return t;
}

const std::string failed = "fluidk: FLUIDK_DEBUG check failed: ";

}  // namespace

TEST_CASE("FLUIDK_DEBUG: a shape's extent past its rank", "[debug]") {
  const dims shape{2, 3};
  CHECK(shape[1] == 3);
  const child_result r = in_child([&] { std::printf("%lld\n", static_cast<long long>(shape[2])); });
  CHECK(r.aborted);
  CHECK_THAT(r.stderr_text, Catch::StartsWith(failed + "extent 2 of shape [2, 3], which has 2"));
}

TEST_CASE("FLUIDK_DEBUG: a kernel's slot past the operator's", "[debug]") {
  const f32 x = ones(4);
  Tensor y;
  const child_result r = in_child([&] { run<slot_op>(target<cpu>(), inputs(x), outputs(y)); });
  CHECK(r.aborted);
  CHECK_THAT(r.stderr_text, Catch::StartsWith(failed + "operator 'debug_slot': input slot 3 of 1"));
}

TEST_CASE("FLUIDK_DEBUG: a kernel that writes its input, on every path", "[debug]") {
  const f32 x = ones(4);
  const std::string message =
      "operator 'debug_writes_input', kernel {data_type[float]; data_layout[ANY_LAYOUT]; place[Place(cpu)]; "
      "library_type[PLAIN]}: the kernel wrote input X[0] (its storage's version moved from ";

  SECTION("static") {
    Tensor y;
    const child_result r = in_child([&] { run<bad_op>(target<cpu>(), inputs(x), outputs(y)); });
    CHECK(r.aborted);
    CHECK_THAT(r.stderr_text, Catch::StartsWith(failed + message));
  }
  SECTION("runtime") {
    const operator_info& info = register_operator<bad_op>();
    Variable in("x"), out("y");
    in.set(LoDTensor(x.tensor()));
    const std::vector<std::vector<Variable*>> ins{{&in}}, outs{{&out}};
    const child_result r = in_child([&] { run_operator(info, cpu_place, ins, outs); });
    CHECK(r.aborted);
    CHECK_THAT(r.stderr_text, Catch::StartsWith(failed + message));
  }
  SECTION("executor") {
    register_operator<bad_op>();
    ProgramDesc program;
    BlockDesc& block = program.global_block();
    block.var("x") = VarDesc{"x", var_kind::lod_tensor, data_type::float32, {4}};
    block.append_op(OpDesc("debug_writes_input", {{"X", {"x"}}}, {{"Out", {"y"}}}));
    Scope scope;
    scope.var("x").set(LoDTensor(x.tensor()));
    const child_result r = in_child([&] {
      Executor executor(cpu_place);
      executor.run(block, scope);
    });
    CHECK(r.aborted);
    CHECK_THAT(r.stderr_text, Catch::StartsWith(failed + message));
  }
  // The parent's input never moved: the writes happened in the children.
  CHECK(x.data()[0] == 1.0f);
}

TEST_CASE("FLUIDK_DEBUG: a kernel that replaces or reshapes its input variable", "[debug]") {
  const operator_info& replaces = register_operator<replaces_op>();
  const operator_info& reshapes = register_operator<reshapes_op>();
  for (const operator_info* info : {&replaces, &reshapes}) {
    INFO(info->name());
    Variable in("x"), out("y");
    in.set(LoDTensor(ones(4).tensor()));
    const std::vector<std::vector<Variable*>> ins{{&in}}, outs{{&out}};
    const child_result r = in_child([&] { run_operator(*info, cpu_place, ins, outs); });
    CHECK(r.aborted);
    CHECK_THAT(r.stderr_text,
               Catch::StartsWith(failed + "operator '" + std::string(info->name())) &&
                   Catch::Contains("the kernel wrote input X[0] (variable 'x': its version moved"));
    CHECK(in.get<LoDTensor>().dims() == dims{4});  // written in the child only
  }
}

TEST_CASE("FLUIDK_DEBUG: kernels that keep to their outputs pass, in place included", "[debug]") {
  const operator_info& copy = register_operator<copy_op>();
  const operator_info& in_place = register_operator<in_place_op>();
  Variable x("x"), y("y");
  x.set(LoDTensor(ones(4).tensor()));
  const std::vector<std::vector<Variable*>> xs{{&x}}, ys{{&y}};
  run_operator(copy, cpu_place, xs, ys);
  CHECK(y.get<LoDTensor>().data<float>()[3] == 1.0f);
  // Out is X's variable: the write to X is the operator's output.
  run_operator(in_place, cpu_place, xs, xs);
  CHECK(std::as_const(x).get<LoDTensor>().data<float>()[0] == 2.0f);
  // Static: the output shares the input's storage.
  const f32 t = ones(4);
  Tensor alias = t.tensor();
  run<in_place_op>(target<cpu>(), inputs(t), outputs(alias));
  CHECK(t.data()[0] == 2.0f);
}
