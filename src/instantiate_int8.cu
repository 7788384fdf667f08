// The GPU backend for std::int8_t samples: counted by their bits with the byte kernels, then
// folded into the bins (small_samples.cuh).
#include "operations.cuh"

namespace tally::gpu::detail {
TALLY_INSTANTIATE_INTEGER(std::int8_t)
}  // namespace tally::gpu::detail
