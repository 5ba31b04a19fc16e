// The exceptions fluidk throws. Every message starts with "fluidk: " and names what was
// asked for and what would have been accepted, so that a log line is enough to act on.
#pragma once

#include <atomic>
#include <exception>
#include <mutex>
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

namespace detail {
// An exception's message without the "fluidk: " prefix: for a message that wraps it in
// another fluidk error, which adds the prefix once.
inline std::string unprefixed(const std::exception& e) {
  std::string what = e.what();
  if (what.rfind("fluidk: ", 0) == 0) what.erase(0, 8);
  return what;
}
}  // namespace detail

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

namespace detail {
// Registration errors raised before main, kept to be thrown by the first lookup of a
// registry instead of ending the program (an exception leaving the initialiser of an inline
// variable calls std::terminate before main has run).
class startup_errors {
 public:
  static startup_errors& instance() {
    static startup_errors errors;
    return errors;
  }
  void defer(const std::string& what) noexcept {
    try {
      const std::lock_guard lock(mutex_);
      what_ += (what_.empty() ? "" : "; and ") + what;
    } catch (...) {
    }
    failed_.store(true, std::memory_order_release);
  }
  // Throws the kept errors, if any: every lookup of a registry calls it (a load on their path).
  void check() const {
    if (failed_.load(std::memory_order_acquire)) [[unlikely]]
      raise();
  }

 private:
  [[noreturn, gnu::cold, gnu::noinline]] void raise() const {
    const std::lock_guard lock(mutex_);
    throw registration_error("a registration made during static initialisation failed: " + what_);
  }
  std::atomic<bool> failed_{false};
  mutable std::mutex mutex_;
  std::string what_;
};
}  // namespace detail

// Runs `registration` (a callable returning bool) for an inline variable's initialiser: a
// registration_error (or any other exception) it throws is kept, not thrown, and every later
// lookup of the place kinds, devices, copies and operators throws it as a registration_error
// naming both sides. Returns what `registration` returned, false when it threw.
template <class Registration>
bool register_at_startup(Registration&& registration) noexcept {
  try {
    return static_cast<bool>(registration());
  } catch (const std::exception& e) {
    detail::startup_errors::instance().defer(detail::unprefixed(e));
  } catch (...) {
    detail::startup_errors::instance().defer("an exception that is not a std::exception");
  }
  return false;
}

}  // namespace fluidk
