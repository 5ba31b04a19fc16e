// Every header whose larger runtime functions FLUIDK_SEPARATE_RUNTIME compiles once
// (fluidk/detail/runtime_linkage.hpp): the one file of a program that defines
// FLUIDK_RUNTIME_DEFINE includes this header, before any other of fluidk's, and so compiles
// them all (docs/getting-started.md, "Compiling the runtime once"). Elsewhere it is the
// runtime path's headers together.
// No #pragma once: the checks below run at every inclusion, before the include guard, so that a
// file that includes this header again after it defines FLUIDK_RUNTIME_DEFINE is refused too.

#include "fluidk/detail/runtime_linkage.hpp"

// Without these, the file would compile the functions inline, or not at all, and the program
// would fail to link with a list of undefined references.
#if defined(FLUIDK_RUNTIME_DEFINE) && !defined(FLUIDK_SEPARATE_RUNTIME)
#error "fluidk: FLUIDK_RUNTIME_DEFINE needs FLUIDK_SEPARATE_RUNTIME, defined for every file of the program"
#elif defined(FLUIDK_RUNTIME_DEFINE) && !FLUIDK_DETAIL_RUNTIME_HERE
#error "fluidk: FLUIDK_RUNTIME_DEFINE must come before fluidk's headers: define it first in its file"
#endif

#ifndef FLUIDK_SEPARATE_RUNTIME_HPP
#define FLUIDK_SEPARATE_RUNTIME_HPP
#include "fluidk/dot.hpp"
#include "fluidk/executor.hpp"
#include "fluidk/layout.hpp"
#include "fluidk/library.hpp"
#include "fluidk/place.hpp"
#include "fluidk/program/text_reader.hpp"
#include "fluidk/program/text_writer.hpp"
#include "fluidk/runtime_call.hpp"
#include "fluidk/transforms/runtime.hpp"
#endif  // FLUIDK_SEPARATE_RUNTIME_HPP
