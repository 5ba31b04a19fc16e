// The one record of fallbacks, for both paths: every call that falls back is counted, and the
// first of each (operator, expected key) is reported. operator_registry (set_fallback_reporter,
// fallback_count) and the static path (fluidk/static_dispatch.hpp) both write here, so that a
// static call's fallback is as visible as a runtime one's.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "fluidk/kernel_type.hpp"

namespace fluidk {

// What a fallback was: reported once per operator and expected key, counted every time.
struct fallback_event {
  std::string_view op;
  kernel_key expected;
  kernel_key chosen;
};

namespace detail {

class fallback_log {
 public:
  static fallback_log& instance() {
    static fallback_log log;
    return log;
  }

  // Called once per (operator, expected key) that falls back; by default one line on stderr.
  // The reporter runs outside the lock: it may call back into fluidk.
  void set_reporter(std::function<void(const fallback_event&)> reporter) {
    const std::lock_guard lock(mutex_);
    reporter_ = std::make_shared<const std::function<void(const fallback_event&)>>(std::move(reporter));
  }

  void note(const fallback_event& event) {
    std::shared_ptr<const std::function<void(const fallback_event&)>> reporter;
    {
      const std::lock_guard lock(mutex_);
      if (counts_[{std::string(event.op), event.expected}]++ != 0) return;
      reporter = reporter_;
    }
    if (reporter && *reporter)
      (*reporter)(event);
    else
      std::fprintf(stderr, "fluidk: operator '%.*s' has no kernel for %s; falling back to %s\n",
                   int(event.op.size()), event.op.data(), event.expected.to_string().c_str(),
                   event.chosen.to_string().c_str());
  }

  std::size_t count(std::string_view op, const kernel_key& expected) const {
    const std::lock_guard lock(mutex_);
    const auto it = counts_.find({std::string(op), expected});
    return it == counts_.end() ? 0 : it->second;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, kernel_key>, std::size_t> counts_;
  std::shared_ptr<const std::function<void(const fallback_event&)>> reporter_;
};

// The static path's note, out of line: a fallback is rare, and its key's text is long.
[[gnu::cold, gnu::noinline]] inline void note_fallback(std::string_view op, const kernel_key& expected,
                                                       const kernel_key& chosen) {
  fallback_log::instance().note({op, expected, chosen});
}

}  // namespace detail
}  // namespace fluidk
