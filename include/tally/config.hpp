// Macros shared by host and device code: the host/device annotation used by every piece of
// tally that must compile under both g++ and nvcc, and the library version.
#pragma once

#if defined(__CUDACC__)
#define TALLY_HOST_DEVICE __host__ __device__
#else
#define TALLY_HOST_DEVICE
#endif

#define TALLY_VERSION_MAJOR 0
#define TALLY_VERSION_MINOR 1
#define TALLY_VERSION_PATCH 0
#define TALLY_VERSION_STRING "0.1.0"

namespace tally {
/** @brief The library version as "major.minor.patch". */
inline constexpr const char* version = TALLY_VERSION_STRING;
}  // namespace tally
