// What a call's attributes ask for, read one way for both paths: the place op_device forces
// and the library a request attribute asks for. The runtime path chooses by them
// (fluidk/runtime_call.hpp); the static path, whose place and library are its target's,
// refuses attributes that ask for others (fluidk/static_dispatch.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "fluidk/attribute.hpp"
#include "fluidk/error.hpp"
#include "fluidk/library.hpp"
#include "fluidk/place.hpp"

namespace fluidk {

// The place an `op_device` attribute forces ("opencl:0"), if any (an empty string forces
// none). An attribute of another kind, or a place that does not parse, is an error naming the
// operator `op`.
inline std::optional<place> op_device_of(const attribute_map& attrs, std::string_view op) {
  if (!attrs.contains("op_device")) return std::nullopt;
  const std::string& text = attrs.get<std::string>("op_device", op);
  if (text.empty()) return std::nullopt;
  try {
    return parse_place(text);
  } catch (const parse_error& e) {
    throw parse_error("operator '" + std::string(op) + "' attribute 'op_device': " + detail::unprefixed(e));
  }
}

// A library that a call's attributes ask for, and the attribute that asks.
struct library_request {
  library_type library = library_type::plain;
  std::string_view attribute;  // empty when none asks
};

// The library a call's attributes ask for: the registered library of lowest id with one of
// its request attributes true (use_onednn or Fluid's use_mkldnn, use_cudnn, a user library's
// own), else plain. `op` names the operator in the error for an attribute of the wrong kind.
inline library_request library_asked(const attribute_map& attrs, std::string_view op) {
  library_request asked;
  for_each_library([&](const library_info& library) {
    for (const std::string_view attribute : library_type(library).request_attributes())
      if (asked.attribute.empty() && attrs.get_or<bool>(attribute, false, op))
        asked = {library_type(library), attribute};
  });
  return asked;
}
inline library_type requested_library(const attribute_map& attrs, std::string_view op) {
  return library_asked(attrs, op).library;
}

}  // namespace fluidk
