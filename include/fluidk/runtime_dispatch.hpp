// The runtime path of dispatch: register_operator<Op>() reads an operator's kernels off the
// same Hana map the static path uses (no second registration) into the runtime registry
// (fluidk/operator_registry.hpp); the calls that apply the rules to tensors and attributes
// are in fluidk/runtime_call.hpp, which this header brings.
#pragma once

#include <boost/hana/first.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/second.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "fluidk/operator.hpp"
#include "fluidk/operator_registry.hpp"
#include "fluidk/runtime_call.hpp"

namespace fluidk {

namespace detail {

template <class K>
void call_kernel(const void* kernel, execution_context& context) {
  (*static_cast<const K*>(kernel))(context);
}

// A name for an operator type in registration errors.
template <class Op>
std::string type_name_of() {
#if defined(__GNUG__)
  const std::string_view f = __PRETTY_FUNCTION__;  // "... [with Op = ns::type; ...]"
  std::string_view name = typeid(Op).name();
  if (const auto at = f.find("Op = "); at != std::string_view::npos) {
    name = f.substr(at + 5);
    name = name.substr(0, name.find_first_of(";]"));
  }
#else
  const std::string_view name = typeid(Op).name();
#endif
  std::string out(1, '\'');
  out.append(name);
  out.push_back('\'');
  return out;
}
}  // namespace detail

namespace detail {
// The runtime face of operator type Op, read off its declaration.
template <class Op>
std::unique_ptr<operator_info> make_operator_info() {
  static_assert(fluidk::registered_keys<Op>.size() <= operator_info::max_kernels,
                "fluidk: an operator has at most 65534 kernels");
  std::vector<kernel_entry> entries;
  boost::hana::for_each(Op::kernels, [&](const auto& pair) {
    using key_type = typename std::decay_t<decltype(boost::hana::first(pair))>::type;
    using kernel_t = std::decay_t<decltype(boost::hana::second(pair))>;
    entries.push_back({key_type::key(), &call_kernel<kernel_t>, &boost::hana::second(pair)});
  });
  infer_var_type_function infer = nullptr;
  if constexpr (requires { &Op::infer_var_type; }) infer = &Op::infer_var_type;
  return std::make_unique<operator_info>(Op::name, Op::inputs, Op::outputs, rules_of<Op>,
                                         data_type_attribute_of<Op>(), typeid(Op), &type_name_of<Op>, infer,
                                         std::move(entries));
}
}  // namespace detail

// Registers an operator for the runtime path, from its kernel map. Returns its info.
template <class Op>
const operator_info& register_operator() {
  static_assert(detail::operator_check<Op>::value);
  return operator_registry::instance().add(Op::name, typeid(Op), &detail::type_name_of<Op>,
                                           &detail::make_operator_info<Op>);
}

}  // namespace fluidk
