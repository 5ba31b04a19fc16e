// The transforms: primitive layout, data type and place transforms, the planner that
// chains them, the static path (chains as types) and the runtime path (memoised plans).
#pragma once

#include "fluidk/transforms/cpu.hpp"
#include "fluidk/transforms/planner.hpp"
#include "fluidk/transforms/registry.hpp"
#include "fluidk/transforms/runtime.hpp"
#include "fluidk/transforms/static_chain.hpp"
#include "fluidk/transforms/traits.hpp"
