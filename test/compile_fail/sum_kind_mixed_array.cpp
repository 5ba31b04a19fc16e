// expect: fluidk: sum: if any input is a LoDTensorArray, all must be
#include <fluidk/var_kind_traits.hpp>

// A sum over a LoDTensorArray and a LoDTensor: one error, at the rule, and none after it.
using out = fluidk::sum_output_kind<fluidk::kinds::lod_tensor_array, fluidk::kinds::lod_tensor>;
static_assert(out::value == fluidk::var_kind::lod_tensor_array);

int main() { return int(out::value); }
