// What one block does with a privatized histogram: zero its copy, count its share of the samples
// into it with block-scope atomics, and hand the copy on (to global atomics or to a merge
// kernel). The copy lives in shared memory or in the block's own slice of global memory.
#pragma once

#include <cstdint>

#include <cuda/atomic>

namespace tally::detail {

/// Grid-stride walk over the samples: `count(bin)` for each counted sample; returns how many this
/// thread left out.
template <class Sample, class Mapper, class Count>
__device__ __forceinline__ std::uint64_t for_each_bin(const Sample* samples, std::int64_t num_samples,
                                                      const Mapper& map, Count count) {
  std::uint64_t left_out = 0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < num_samples;
       i += stride) {
    const std::int64_t bin = map(samples[i]);
    if (bin < 0) {
      ++left_out;
    } else {
      count(bin);
    }
  }
  return left_out;
}

template <class Counter>
__device__ __forceinline__ void zero_block_copy(Counter* copy, std::int64_t num_bins) {
  for (std::int64_t bin = threadIdx.x; bin < num_bins; bin += blockDim.x) copy[bin] = 0;
}

/// Counts into the block's private copy; block scope is enough because only this block touches it.
template <class Sample, class Mapper>
__device__ __forceinline__ std::uint64_t count_into_block_copy(const Sample* samples, std::int64_t num_samples,
                                                               const Mapper& map, std::uint32_t* copy) {
  return for_each_bin(samples, num_samples, map, [copy](std::int64_t bin) {
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_block>(copy[bin]).fetch_add(1u, cuda::memory_order_relaxed);
  });
}

/// Adds the block's copy into the global counts: one device-scope atomic per non-zero bin.
template <class Counter>
__device__ __forceinline__ void add_block_copy(const std::uint32_t* copy, std::int64_t num_bins, Counter* counts) {
  for (std::int64_t bin = threadIdx.x; bin < num_bins; bin += blockDim.x) {
    const std::uint32_t value = copy[bin];
    if (value != 0) {
      cuda::atomic_ref<Counter, cuda::thread_scope_device>(counts[bin]).fetch_add(value, cuda::memory_order_relaxed);
    }
  }
}

}  // namespace tally::detail
