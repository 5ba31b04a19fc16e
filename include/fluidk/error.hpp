// The exceptions fluidk throws. Every message starts with "fluidk: " and names what was
// asked for and what would have been accepted, so that a log line is enough to act on.
#pragma once

#include <stdexcept>
#include <string>

namespace fluidk {

// Base of every fluidk exception; catch this to catch them all.
class error : public std::runtime_error {
 public:
  explicit error(const std::string& what) : std::runtime_error(prefixed(what)) {}

 private:
  static std::string prefixed(const std::string& what) {
    return what.rfind("fluidk: ", 0) == 0 ? what : "fluidk: " + what;
  }
};

// A word that names no known place, data type, layout or library.
class parse_error : public error {
 public:
  using error::error;
};

// A request that cannot be served with what is registered (no kernel, no transform).
class not_registered : public error {
 public:
  using error::error;
};

// A conflicting declaration, such as two place kinds with the same id.
class registration_error : public error {
 public:
  using error::error;
};

}  // namespace fluidk
