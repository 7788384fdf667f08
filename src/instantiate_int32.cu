// The GPU backend for std::int32_t samples (one file per type: the types compile in parallel).
#include "operations.cuh"

namespace tally::gpu::detail {
TALLY_INSTANTIATE_INTEGER(std::int32_t)
}  // namespace tally::gpu::detail
