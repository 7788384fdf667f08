// Explicit instantiations of the GPU backend for std::uint32_t samples (one file per type, so builds
// compile the types in parallel).
#include "operations.cuh"

namespace tally::gpu::detail {
TALLY_INSTANTIATE_HISTOGRAMS(std::uint32_t)
TALLY_INSTANTIATE_WEIGHTED(std::uint32_t)
TALLY_INSTANTIATE_BINCOUNT(std::uint32_t)
TALLY_INSTANTIATE_REDUCE(std::uint32_t)
}  // namespace tally::gpu::detail
