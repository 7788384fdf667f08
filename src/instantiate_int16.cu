// The GPU backend for std::int16_t and std::uint16_t samples, in one file: both are counted by
// their 16 bits, through the same kernels (small_samples.cuh), which one file compiles once.
#include "operations.cuh"

namespace tally::gpu::detail {
TALLY_INSTANTIATE_INTEGER(std::int16_t)
TALLY_INSTANTIATE_INTEGER(std::uint16_t)
}  // namespace tally::gpu::detail
