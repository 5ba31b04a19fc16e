// The one record of fallbacks, for both paths: every call that falls back is counted, and the
// first of each (operator, expected key) is reported. operator_registry (set_fallback_reporter,
// fallback_count) and the static path (fluidk/static_dispatch.hpp) both write here, so that a
// static call's fallback is as visible as a runtime one's.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
  // One (operator, expected key) that fell back. Few ever do, so a list searched in order
  // serves (and compiles faster than a map in every file of the static path).
  struct entry {
    std::string op;
    kernel_key expected;
    std::size_t count;
  };
  template <class Entries>
  static auto* find(Entries& entries, std::string_view op, const kernel_key& expected) noexcept {
    for (auto& e : entries)
      if (e.expected == expected && e.op == op) return &e;
    return static_cast<decltype(&entries[0])>(nullptr);
  }

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
      if (entry* e = find(counts_, event.op, event.expected)) {
        ++e->count;
        return;
      }
      counts_.push_back({std::string(event.op), event.expected, 1});
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
    const entry* e = find(counts_, op, expected);
    return e != nullptr ? e->count : 0;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<entry> counts_;
  std::shared_ptr<const std::function<void(const fallback_event&)>> reporter_;
};

// The static path's note, out of line: a call that falls back is counted every time (under
// the log's lock, as on the runtime path), and the first one's report builds long text.
[[gnu::cold, gnu::noinline]] inline void note_fallback(std::string_view op, const kernel_key& expected,
                                                       const kernel_key& chosen) {
  fallback_log::instance().note({op, expected, chosen});
}

}  // namespace detail
}  // namespace fluidk
