// What the operator tests share: random inputs, comparisons with a stated tolerance, and running
// an operator of examples/ops through the runtime path on variables named in a scope.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/scope.hpp>
#include <initializer_list>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fluidk_test {

// Fills a CPU tensor of T (its storage's elements, in order) with values drawn uniformly from
// [lo, hi) by `engine`, each converted to T.
template <class T>
void fill_uniform(fluidk::Tensor& t, std::mt19937& engine, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = T(dist(engine));
}

// |actual - expected| <= tol * max(1, |expected|), element by element; reports the first miss.
template <class T, class U>
void check_close(const std::vector<T>& actual, const std::vector<U>& expected, double tol) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double e = double(expected[i]), a = double(actual[i]);
    if (!(std::abs(a - e) <= tol * std::max(1.0, std::abs(e)))) {
      INFO("element " << i << ": " << a << " expected " << e << " (tolerance " << tol << ")");
      CHECK(false);
      return;
    }
  }
  SUCCEED();
}

// Slot name -> variable names, as an operator call gives them.
using slot_names = std::vector<std::pair<std::string, std::vector<std::string>>>;

// Runs a registered operator once through the runtime path at `where`, on variables of the
// scope by name (made when missing).
inline fluidk::kernel_choice run_named(const fluidk::place& where, fluidk::Scope& scope,
                                       std::string_view type, const slot_names& in, const slot_names& out,
                                       const fluidk::attribute_map& attrs = {}) {
  const fluidk::operator_info& op = fluidk::find_operator(type);
  auto bind = [&](const slot_names& given, std::span<const std::string_view> declared) {
    std::vector<std::vector<fluidk::Variable*>> vars(declared.size());
    for (const auto& [slot, names] : given) {
      const auto it = std::find(declared.begin(), declared.end(), slot);
      REQUIRE(it != declared.end());
      for (const std::string& name : names)
        vars[std::size_t(it - declared.begin())].push_back(&scope.var(name));
    }
    return vars;
  };
  return fluidk::run_operator(op, where, bind(in, op.inputs()), bind(out, op.outputs()), attrs);
}

// Runs `kernel`, a kernel of operator Op, directly on `device` (a context of the caller's, and so
// its caches) as kernel `key`: Op's first input slots given one tensor each, in order, the others
// empty; Op's first output as the kernel leaves it.
template <class Op, class Kernel>
fluidk::Tensor run_kernel(fluidk::device_context& device, const Kernel& kernel, const fluidk::kernel_key& key,
                          std::initializer_list<const fluidk::Tensor*> inputs,
                          const fluidk::attribute_map& attrs) {
  std::vector<fluidk::kernel_arg> ins;
  for (const fluidk::Tensor* t : inputs) ins.emplace_back(t);
  std::vector<std::uint32_t> in_offsets(Op::inputs.size() + 1, std::uint32_t(ins.size()));
  for (std::size_t i = 0; i < ins.size(); ++i) in_offsets[i] = std::uint32_t(i);
  fluidk::Tensor out;
  fluidk::kernel_arg outs[1] = {fluidk::kernel_arg(&out)};
  std::vector<std::uint32_t> out_offsets(Op::outputs.size() + 1, 1);
  out_offsets[0] = 0;
  fluidk::execution_context ctx(Op::name, Op::inputs, Op::outputs, device, key,
                                fluidk::slot_args{ins, in_offsets}, fluidk::slot_args{outs, out_offsets},
                                attrs);
  kernel(ctx);
  return out;
}

// Whether a tensor of T in nChw8c or nChw16c holds zeros (false for bool) in the padding lanes
// of its last channel block: what kernels that run over the storage, and oneDNN reading its
// blocked inputs, rely on (a lane of garbage poisons the next blocked primitive).
template <class T = float>
bool padding_is_zero(const fluidk::Tensor& t) {
  const std::int64_t block = t.layout().block_size(), c = t.dims()[1];
  const std::int64_t blocks = (c + block - 1) / block, plane = t.dims()[2] * t.dims()[3];
  const T* v = t.data<T>();
  for (std::int64_t n = 0; n < t.dims()[0]; ++n)
    for (std::int64_t p = 0; p < plane; ++p)
      for (std::int64_t lane = c - (blocks - 1) * block; lane < block; ++lane)
        if (v[((n * blocks + blocks - 1) * plane + p) * block + lane] != T(0)) return false;
  return true;
}

}  // namespace fluidk_test
