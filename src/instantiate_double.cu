// The GPU backend for double samples (one file per type: the types compile in parallel).
#include "operations.cuh"

namespace tally::gpu::detail {
TALLY_INSTANTIATE_FLOATING(double)
}  // namespace tally::gpu::detail
