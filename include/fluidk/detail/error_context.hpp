// The context a fluidk error is reported in once it leaves a kernel or an input's preparation
// (its transforms, its move to the kernel's device), on every path: the runtime call, the
// executor and the static call.
#pragma once

#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>

#include "fluidk/device.hpp"
#include "fluidk/error.hpp"
#include "fluidk/kernel_type.hpp"

namespace fluidk::detail {

// Throws the exception being handled, `e`, again with `context` leading its message and of
// its own kind: error, not_registered, parse_error, registration_error, device_unavailable
// and allocation_error (its place and size kept) are made again; an exception of a type
// derived from them (a backend's own) leaves as it is. Only called from a handler.
[[noreturn, gnu::cold, gnu::noinline]] inline void rethrow_in_context(const error& e,
                                                                      const std::string& context) {
  const std::string what = context + ": " + unprefixed(e);
  const std::type_info& kind = typeid(e);
  if (kind == typeid(error)) throw error(what);
  if (kind == typeid(not_registered)) throw not_registered(what);
  if (kind == typeid(parse_error)) throw parse_error(what);
  if (kind == typeid(registration_error)) throw registration_error(what);
  if (kind == typeid(device_unavailable)) throw device_unavailable(what);
  if (kind == typeid(allocation_error))
    throw allocation_error(context, static_cast<const allocation_error&>(e));
  throw;
}

// Runs `f`, which prepares input `slot` of a call to operator `op` for the kernel of key
// `kernel`; a fluidk error it throws names the operator, the input (and its variable, when it
// has one) and the kernel key, by rethrow_in_context.
template <class F>
decltype(auto) preparing_input(std::string_view op, std::string_view slot, std::string_view variable,
                               const kernel_key& kernel, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const error& e) {
    rethrow_in_context(e, "operator '" + std::string(op) + "' input " + std::string(slot) +
                              (variable.empty() ? "" : " ('" + std::string(variable) + "')") +
                              " for kernel " + kernel.to_string());
  }
}

}  // namespace fluidk::detail
