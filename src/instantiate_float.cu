// The GPU backend for float samples (one file per type: the types compile in parallel).
#include "operations.cuh"

namespace tally::gpu::detail {
TALLY_INSTANTIATE_FLOATING(float)
}  // namespace tally::gpu::detail
