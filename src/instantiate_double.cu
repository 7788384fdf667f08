// Explicit instantiations of the GPU backend for double samples (one file per type, so builds
// compile the types in parallel).
#include "operations.cuh"

namespace tally::gpu::detail {
TALLY_INSTANTIATE_HISTOGRAMS(double)
TALLY_INSTANTIATE_WEIGHTED(double)
TALLY_INSTANTIATE_REDUCE(double)
}  // namespace tally::gpu::detail
