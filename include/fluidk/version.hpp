// The library's version, for code that needs to test it at compile time.
#pragma once

#define FLUIDK_VERSION_MAJOR 0
#define FLUIDK_VERSION_MINOR 1
#define FLUIDK_VERSION_PATCH 0
#define FLUIDK_VERSION_STRING "0.1.0"

namespace fluidk {
inline constexpr int version_major = FLUIDK_VERSION_MAJOR;
inline constexpr int version_minor = FLUIDK_VERSION_MINOR;
inline constexpr int version_patch = FLUIDK_VERSION_PATCH;
}  // namespace fluidk
