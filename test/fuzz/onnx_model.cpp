// libFuzzer harness: the ONNX importer's reader (examples/onnx/importer.hpp). Any bytes are a
// model that translates to a program, or are refused with a fluidk error (anything else that
// escapes, or a crash in the parse, the checks or the mapping, fails): the model parsed, checked
// by onnx::checker, shapes inferred, every node mapped and appended to a block, as run-onnx
// does before it runs anything.
#include <cstddef>
#include <cstdint>
#include <fluidk/error.hpp>
#include <onnx/importer.hpp>
#include <ops/ops.hpp>
#include <string_view>

namespace {
const bool registered = [] {
  fluidk::ops::register_all();
  return true;
}();
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static_cast<void>(registered);
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const fluidk::onnx_import::imported_model model =
        fluidk::onnx_import::import_model(bytes, "fuzz input", nullptr, {});
    // A program that translated names an origin per operator.
    if (model.origins.size() != model.program.block(0).ops().size()) __builtin_trap();
  } catch (const fluidk::error&) {
    // refused, with a fluidk error: fine
  }
  return 0;
}
