// Explicit instantiations of the GPU backend for std::uint8_t samples (one file per type, so builds
// compile the types in parallel).
#include "operations.cuh"

namespace tally::gpu::detail {
TALLY_INSTANTIATE_HISTOGRAMS(std::uint8_t)
TALLY_INSTANTIATE_WEIGHTED(std::uint8_t)
TALLY_INSTANTIATE_BINCOUNT(std::uint8_t)
}  // namespace tally::gpu::detail
