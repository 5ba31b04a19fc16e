// The umbrella header: fluidk's vocabulary and data types, without dispatch. Optional backends
// (fluidk/devices/) are left out; include them one by one (each needs its feature macro), or
// fluidk/devices/enabled.hpp for every place built (CUDA, OpenCL; not oneDNN, a CPU library).
#pragma once

#include "fluidk/bfloat16.hpp"
#include "fluidk/device.hpp"
#include "fluidk/devices/cpu.hpp"
#include "fluidk/dims.hpp"
#include "fluidk/dtype.hpp"
#include "fluidk/error.hpp"
#include "fluidk/float16.hpp"
#include "fluidk/kernel_type.hpp"
#include "fluidk/layout.hpp"
#include "fluidk/library.hpp"
#include "fluidk/lod_tensor.hpp"
#include "fluidk/place.hpp"
#include "fluidk/scope.hpp"
#include "fluidk/selected_rows.hpp"
#include "fluidk/tensor.hpp"
#include "fluidk/typed_tensor.hpp"
#include "fluidk/variable.hpp"
#include "fluidk/version.hpp"
