// Where the runtime path's larger functions are compiled: running an operator (run_operator,
// explain), the executor's preparing and running, transform plans and their application, the
// open axes' registrations, parsing and printing places and programs, and the members that copy,
// compare and grow program descriptions, attribute maps, scopes and the operator registry (the
// instantiations of their containers and of the attribute variant). Header-only by
// default: every file that calls them compiles them, several seconds of each such file. A
// program of many files can compile them once: FLUIDK_SEPARATE_RUNTIME defined for every file of
// the program, and one file that defines FLUIDK_RUNTIME_DEFINE before it includes
// <fluidk/separate_runtime.hpp> (docs/getting-started.md, "Compiling the runtime once"). The
// other files then see only their declarations and call them as compiled there.
#pragma once

#if defined(FLUIDK_SEPARATE_RUNTIME) && !defined(FLUIDK_RUNTIME_DEFINE)
#define FLUIDK_DETAIL_RUNTIME_HERE 0
#else
#define FLUIDK_DETAIL_RUNTIME_HERE 1
#endif
#if defined(FLUIDK_SEPARATE_RUNTIME)
#define FLUIDK_DETAIL_RUNTIME_LINKAGE
#else
#define FLUIDK_DETAIL_RUNTIME_LINKAGE inline
#endif
