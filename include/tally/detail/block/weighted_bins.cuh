// What one thread does in a weighted histogram: walk its share of the samples and their weights
// (grid-stride, one sample and one weight a step, so any alignment and any size work) and add each
// counted sample's weight to its bin, in double (order-dependent) or as fixed-point words
// (detail/fixed_point_weight.hpp: exact, so order-independent). The bins live in global memory
// (device-scope atomics) or in a block's shared-memory copy (shared-memory atomics), then flushed.
#pragma once

#include <cstdint>

#include "tally/detail/block/vectorized_walk.cuh"
#include "tally/detail/fixed_point_weight.hpp"

namespace tally::detail {

/// The fixed-point bins of a weighted histogram as three arrays of num_bins: the low and high
/// words (added modulo 2^64) and the flags of NaN, infinite and out-of-range weights.
struct fixed_point_bins {
  std::uint64_t* low;
  std::uint64_t* high;
  std::uint32_t* flags;

  /// The arrays laid out one after the other from `words` (2 * num_bins words, then the flags).
  __host__ __device__ static fixed_point_bins at(std::uint64_t* words, std::int64_t num_bins) {
    return {words, words + num_bins, reinterpret_cast<std::uint32_t*>(words + 2 * num_bins)};
  }
  /// Bytes taken by `at` for num_bins bins.
  __host__ __device__ static std::size_t bytes(std::int64_t num_bins) {
    return static_cast<std::size_t>(num_bins) * (2 * sizeof(std::uint64_t) + sizeof(std::uint32_t));
  }
};

__device__ __forceinline__ void atomic_add_word(std::uint64_t* word, std::uint64_t value) {
  static_assert(sizeof(unsigned long long) == sizeof(std::uint64_t));
  atomicAdd(reinterpret_cast<unsigned long long*>(word), static_cast<unsigned long long>(value));
}

/// Adds one weight to bin `bin` of `bins` with atomics (shared or global: the same instructions
/// apply to both; on shared memory they are block-local by nature). Zero words are skipped: a
/// weight with a zero low or high part adds nothing there.
__device__ __forceinline__ void add_fixed_weight(const fixed_point_bins& bins, std::int64_t bin, double weight) {
  const fixed_point_weight::fixed_weight f = fixed_point_weight::to_fixed(weight);
  if (f.flags != 0) {
    atomicOr(bins.flags + bin, f.flags);
    return;
  }
  if (f.low != 0) atomic_add_word(bins.low + bin, f.low);
  if (f.high != 0) atomic_add_word(bins.high + bin, f.high);
}

/// Grid-stride walk (for_each_bin): `add(bin, weight)` for each counted sample; returns how many
/// this thread left out.
template <class Sample, class Weight, class Mapper, class Add>
__device__ __forceinline__ std::uint64_t for_each_weighted(const Sample* samples, const Weight* weights,
                                                           std::int64_t num_samples, const Mapper& map, Add add) {
  return for_each_bin(samples, num_samples, map,
                      [&](std::int64_t bin, std::int64_t i) { add(bin, static_cast<double>(weights[i])); });
}

/// Adds a block's shared copy of double sums to the global sums: one atomic per non-zero bin
/// (NaN is non-zero, so it reaches the result). Needs a __syncthreads before.
__device__ __forceinline__ void flush_double_copy(const double* copy, std::int64_t num_bins, double* sums) {
  for (std::int64_t bin = threadIdx.x; bin < num_bins; bin += blockDim.x) {
    const double value = copy[bin];
    if (value != 0.0) atomicAdd(sums + bin, value);
  }
}

/// Adds a block's shared fixed-point copy to the global bins: one atomic per non-zero word.
/// Needs a __syncthreads before.
__device__ __forceinline__ void flush_fixed_copy(const fixed_point_bins& copy, std::int64_t num_bins,
                                                 const fixed_point_bins& bins) {
  for (std::int64_t bin = threadIdx.x; bin < num_bins; bin += blockDim.x) {
    if (copy.low[bin] != 0) atomic_add_word(bins.low + bin, copy.low[bin]);
    if (copy.high[bin] != 0) atomic_add_word(bins.high + bin, copy.high[bin]);
    if (copy.flags[bin] != 0) atomicOr(bins.flags + bin, copy.flags[bin]);
  }
}

}  // namespace tally::detail
