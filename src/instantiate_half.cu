// The GPU backend for float16 and bfloat16 samples, in one file: both are counted by their 16
// bits in sign-and-magnitude order, through the same kernels (small_samples.cuh).
#include "operations.cuh"

namespace tally::gpu::detail {
TALLY_INSTANTIATE_FLOATING(tally::float16)
TALLY_INSTANTIATE_FLOATING(tally::bfloat16)
}  // namespace tally::gpu::detail
