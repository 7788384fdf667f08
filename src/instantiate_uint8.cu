// The GPU backend for std::uint8_t samples (one file per type: the types compile in parallel).
#include "operations.cuh"

namespace tally::gpu::detail {
TALLY_INSTANTIATE_BYTE(std::uint8_t)
}  // namespace tally::gpu::detail
