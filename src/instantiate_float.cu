// Explicit instantiations of the GPU backend for float samples (one file per type, so builds
// compile the types in parallel).
#include "operations.cuh"

namespace tally::gpu::detail {
TALLY_INSTANTIATE_HISTOGRAMS(float)
TALLY_INSTANTIATE_WEIGHTED(float)
TALLY_INSTANTIATE_REDUCE(float)
}  // namespace tally::gpu::detail
