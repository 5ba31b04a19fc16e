// Every header whose larger runtime functions FLUIDK_SEPARATE_RUNTIME compiles once
// (fluidk/detail/runtime_linkage.hpp): the one file of a program that defines
// FLUIDK_RUNTIME_DEFINE includes this header, before any other of fluidk's, and so compiles
// them all (docs/getting-started.md, "Compiling the runtime once"). Elsewhere it is the
// runtime path's headers together.
#pragma once

#include "fluidk/detail/runtime_linkage.hpp"
#include "fluidk/dot.hpp"
#include "fluidk/executor.hpp"
#include "fluidk/layout.hpp"
#include "fluidk/library.hpp"
#include "fluidk/place.hpp"
#include "fluidk/program/text_reader.hpp"
#include "fluidk/program/text_writer.hpp"
#include "fluidk/runtime_call.hpp"
#include "fluidk/transforms/runtime.hpp"
