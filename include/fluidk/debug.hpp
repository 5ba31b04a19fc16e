// FLUIDK_DEBUG: checks that cost too much for every build, in the manner of libstdc++'s
// _GLIBCXX_ASSERTIONS. Define it (-DFLUIDK_DEBUG) in every translation unit of a program, or in
// none: the checks are in inline functions, and mixing the two is an ODR violation, as it is
// for _GLIBCXX_ASSERTIONS. The ASan test build defines it.
//
// What it checks:
// - bounds: an extent of a shape by index (dims::operator[]), a slot of a kernel's inputs or
//   outputs by index (execution_context::inputs(slot), outputs(slot)), and that the bytes a
//   tensor addresses lie inside its storage whenever its data is taken;
// - versions: a kernel does not write its inputs. The version of every input's storage is
//   read before the kernel runs and compared after it; a storage that an output shares (an
//   operator that works in place) is exempt. A write to an input is what makes a cached copy
//   of it stale without anything saying so (docs/programs.md, "What the transfer cache sees").
//
// A failed check prints one line, "fluidk: FLUIDK_DEBUG check failed: ...", naming what failed
// and where (the operator and the kernel key, for a kernel), and aborts, as a failed
// assertion does: it can fire inside noexcept functions, and the state it found is wrong.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace fluidk::detail {

[[noreturn, gnu::cold, gnu::noinline]] inline void debug_check_failed(const std::string& what,
                                                                      const char* file, int line) noexcept {
  std::fprintf(stderr, "fluidk: FLUIDK_DEBUG check failed: %s (%s:%d)\n", what.c_str(), file, line);
  std::fflush(stderr);
  std::abort();
}

}  // namespace fluidk::detail

#if defined(FLUIDK_DEBUG)
// Checks `condition`; on failure reports `what` (an expression giving a std::string, evaluated
// only then) and aborts.
#define FLUIDK_DEBUG_CHECK(condition, what)                             \
  do {                                                                  \
    if (!(condition)) [[unlikely]]                                      \
      ::fluidk::detail::debug_check_failed((what), __FILE__, __LINE__); \
  } while (false)
#define FLUIDK_DEBUG_ENABLED 1
#else
#define FLUIDK_DEBUG_CHECK(condition, what) \
  do {                                      \
  } while (false)
#define FLUIDK_DEBUG_ENABLED 0
#endif
