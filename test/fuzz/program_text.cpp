// libFuzzer harness: the program text reader. Any input either parses or throws a
// fluidk::error (anything else escapes and is a crash); what parses is written back and read
// again: the two programs compare equal and write the same text.
#include <cstddef>
#include <cstdint>
#include <fluidk/program.hpp>
#include <fluidk/runtime_dispatch.hpp>
#include <ops/lookup_table_grad.hpp>  // the rules of sum and lookup_table_grad
#include <ops/sum.hpp>
#include <string>
#include <string_view>

namespace {

template <class T>
struct noop {
  using dtype = T;
  void operator()(fluidk::execution_context&) const {}
};

// Operators for the programs to use: duplicable inputs with Fluid's sum rule, a sparse
// gradient with lookup_table_grad's, and the default rule (lookup_table as docs/programs.md
// uses it; relu with two outputs).
struct fuzz_sum {
  static constexpr std::string_view name = "sum";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<fluidk::cpu>(noop<float>{}));
  static void infer_var_type(const fluidk::OpDesc& op, fluidk::BlockDesc& block) {
    fluidk::ops::sum::infer_var_type(op, block);
  }
};
struct fuzz_lookup_table_grad {
  static constexpr std::string_view name = "lookup_table_grad";
  static constexpr std::array<std::string_view, 3> inputs{"W", "Ids", "Out@GRAD"};
  static constexpr std::array<std::string_view, 1> outputs{"W@GRAD"};
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<fluidk::cpu>(noop<float>{}));
  static void infer_var_type(const fluidk::OpDesc& op, fluidk::BlockDesc& block) {
    fluidk::ops::lookup_table_grad::infer_var_type(op, block);
  }
};
struct fuzz_lookup_table {
  static constexpr std::string_view name = "lookup_table";
  static constexpr std::array<std::string_view, 2> inputs{"Ids", "W"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<fluidk::cpu>(noop<float>{}));
};
struct fuzz_relu {
  static constexpr std::string_view name = "relu";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 2> outputs{"Out", "Mask"};
  static constexpr auto kernels = fluidk::make_kernels(fluidk::kernels_on<fluidk::cpu>(noop<float>{}));
};

const bool registered = [] {
  fluidk::register_operator<fuzz_sum>();
  fluidk::register_operator<fuzz_lookup_table_grad>();
  fluidk::register_operator<fuzz_lookup_table>();
  fluidk::register_operator<fuzz_relu>();
  return true;
}();

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static_cast<void>(registered);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  fluidk::ProgramDesc program;
  try {
    program = fluidk::parse_program(text);
  } catch (const fluidk::error&) {
    return 0;  // refused, with a fluidk error: fine
  }
  // Accepted: the writer's text must read back (any exception here escapes: a crash) to an
  // equal program (NaN attributes equal to NaN), which writes the same text.
  const std::string written = fluidk::to_text(program);
  const fluidk::ProgramDesc again = fluidk::parse_program(written);
  if (!(again == program)) __builtin_trap();
  if (fluidk::to_text(again) != written) __builtin_trap();
  return 0;
}
