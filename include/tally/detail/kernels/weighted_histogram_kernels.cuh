// The weighted histogram kernels: one per strategy (atomic, shared_atomic, warp_aggregated) and per
// arithmetic (double sums, or the exact fixed-point words of `deterministic`; shared_atomic's
// copies in integer limbs for both), plus the kernel
// that turns fixed-point bins into doubles. Every accumulating kernel adds the samples it leaves
// out to `left_out` (one atomic per warp).
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda/atomic>

#include "tally/detail/block/weighted_bins.cuh"
#include "tally/detail/block/warp_sum.cuh"
#include "tally/detail/tuning/histogram_tuning.cuh"

namespace tally::detail {

/// One device-scope double atomicAdd per counted sample, into `sums` (zeroed by the caller).
template <class Sample, class Weight, class Mapper>
__global__ void weighted_atomic_kernel(const Sample* samples, const Weight* weights, std::int64_t num_samples,
                                              double* sums, Mapper map, std::uint64_t* left_out) {
  const std::uint64_t mine = for_each_weighted(samples, weights, num_samples, map, [sums](std::int64_t bin, double w) {
    atomicAdd(sums + bin, w);
  });
  warp_add_to(mine, left_out);
}

/**
 * shared_atomic: a shared-memory copy of the sums per block in 32-bit integer limbs, added to with
 * integer atomics only, then one global atomic per non-zero bin (or word). `Copy` is
 * exact_limb_copy for double sums (weights on the grid of 2^-64 summed exactly, the others in
 * double; each bin rounded once) into `Sums` = double*, or fixed_limb_copy for deterministic's
 * fixed-point words into `Sums` = fixed_point_bins. The limbs in `replicas` replicas, lane l adding to
 * replica l mod replicas (a power of two). Blocks of `BlockThreads` (the dispatch launches that
 * many): the bound shapes the code, so each block size is a kernel of its own. A lane's step is
 * `Items` samples and their weights, loaded before any is visited; its warps claim their steps
 * from `claimed`, zero before the launch (walk_claimed_weighted_steps). `LoadsAhead`: a
 * lane loads its next step before it visits this one (walk_weighted_steps_loading_ahead, a fixed
 * share of the steps; `claimed` unused), for
 * copies so large that a multiprocessor holds one block; it takes more registers a thread, and
 * says so (one block a multiprocessor: left to itself the compiler held some of these kernels to
 * 32 registers, as for two blocks, and spilled).
 */
template <int BlockThreads, int Items, bool LoadsAhead, class Copy, class Sample, class Weight, class Mapper,
          class Sums>
__global__ void __launch_bounds__(BlockThreads, LoadsAhead ? 1 : 0)
weighted_limb_kernel(const Sample* samples, const Weight* weights, std::int64_t num_samples, Sums sums, Mapper map,
                     std::uint64_t* left_out, std::uint64_t* claimed, int replicas) {
  extern __shared__ std::uint64_t shared_words[];
  const std::int64_t num_bins = map.num_bins();
  const Copy copy = Copy::at(shared_words, num_bins, replicas);
  copy.zero();
  __syncthreads();  // the copy is zero before anyone adds to it
  std::uint64_t mine = 0;
  // A sample's word from the mapper where it gives one (num_bins where the sample is left out): one
  // compare, where a bin of -1 took two selects and a compare more. A warp's steps of one bin add
  // as one value a lane where the copy's replicas are few (limb_copy_visitor).
  const limb_copy_visitor<Copy, Mapper> visit{copy, map, static_cast<int>(num_bins), mine};
  if constexpr (LoadsAhead) {
    walk_weighted_steps_loading_ahead<Items>(samples, weights, num_samples, visit);
  } else {
    walk_claimed_weighted_steps<Items, tuning::weighted_limb_claim_steps>(samples, weights, num_samples, claimed,
                                                                          visit);
  }
  warp_add_to(mine, left_out);
  __syncthreads();  // every weight is in before the copy is read
  copy.flush(num_bins, sums);
}

/**
 * shared_atomic where a block's copy of the sums does not fit its shared memory: a cache of
 * `slots` bins per block (bin_cache) with its limbs in `replicas` replicas, `Sums`
 * exact_cached_sums (double sums) or fixed_cached_sums (deterministic), in wide blocks (a cache
 * large enough to hit takes the room that leaves narrow blocks fewer threads than one wide one).
 * The cache is emptied into the global sums every tuning::weighted_cache_period_steps steps of
 * the block, and at the end, so that each stretch of the data gets slots for its own bins (sorted
 * data moves from bin to bin).
 */
template <class Sums, class Sample, class Weight, class Mapper>
__global__ void __launch_bounds__(tuning::weighted_limb_wide_block_threads)
weighted_cache_kernel(const Sample* samples, const Weight* weights, std::int64_t num_samples, Sums sums, Mapper map,
                      std::uint64_t* left_out, std::uint32_t slots, int replicas) {
  extern __shared__ std::uint64_t shared_words[];
  const auto cache = bin_cache<Sums::limbs>::at(shared_words, slots, replicas);
  cache.clear();
  __syncthreads();  // every slot is free before anyone claims one
  std::uint64_t mine = 0;
  const auto add = [&](Sample sample, Weight weight, bool valid) {
    add_counted(sample, weight, valid, map, mine, [&](std::uint32_t bin, Weight w) { sums.add(cache, bin, w); });
  };
  const auto empty_cache = [&] {
    __syncthreads();  // every add of the period is in
    sums.empty(cache);
    __syncthreads();  // every slot is free again
  };
  walk_weighted_block_steps<tuning::weighted_limb_items_per_lane, tuning::weighted_cache_period_steps>(
      samples, weights, num_samples, add, empty_cache);
  warp_add_to(mine, left_out);
  __syncthreads();
  sums.empty(cache);
}

/// deterministic, atomic: the fixed-point words of each counted sample's weight added to
/// `bins` (zeroed by the caller) with device-scope integer atomics.
template <class Sample, class Weight, class Mapper>
__global__ void fixed_atomic_kernel(const Sample* samples, const Weight* weights, std::int64_t num_samples,
                                           fixed_point_bins bins, Mapper map, std::uint64_t* left_out) {
  const std::uint64_t mine = for_each_weighted(samples, weights, num_samples, map, [bins](std::int64_t bin, double w) {
    add_fixed_weight(bins, bin, w);
  });
  warp_add_to(mine, left_out);
}

/// The type warp_aggregated groups lanes by: a shared copy's bins fit 32 bits, global ones may not.
template <bool InShared>
using bin_key = std::conditional_t<InShared, int, long long>;

/// warp_aggregated, double sums: the lanes of a warp that hold one bin add their weights with
/// shuffles first, then one atomic per bin per warp, into a shared-memory copy per block
/// (`InShared`, flushed as shared_atomic's) or straight into `sums` (zeroed by the caller).
template <bool InShared, class Sample, class Weight, class Mapper>
__global__ void __launch_bounds__(tuning::weighted_block_threads, tuning::weighted_in_warps_min_blocks)
weighted_warp_aggregated_kernel(const Sample* samples, const Weight* weights, std::int64_t num_samples,
                                                double* sums, Mapper map, std::uint64_t* left_out) {
  extern __shared__ double shared_sums[];
  const std::int64_t num_bins = map.num_bins();
  double* target = sums;
  if constexpr (InShared) {
    for (std::int64_t bin = threadIdx.x; bin < num_bins; bin += blockDim.x) shared_sums[bin] = 0.0;
    __syncthreads();
    target = shared_sums;
  }
  const std::uint64_t mine = for_each_weighted_in_warps<double, bin_key<InShared>, tuning::weighted_items_per_lane>(
      samples, weights, num_samples, map, [](std::int64_t, double w) { return w; },
      [target](std::int64_t bin, double w) { atomicAdd(target + bin, w); });
  warp_add_to(mine, left_out);
  if constexpr (InShared) {
    __syncthreads();
    flush_double_copy(shared_sums, num_bins, sums);
  }
}

/// deterministic, warp_aggregated: the fixed-point words of a warp's weights of one bin added with
/// shuffles (integers: the grouping changes no bit), then one atomic per word per bin per warp,
/// into a shared-memory copy per block (`InShared`) or straight into `bins`.
template <bool InShared, class Sample, class Weight, class Mapper>
__global__ void __launch_bounds__(tuning::weighted_block_threads, tuning::weighted_in_warps_min_blocks)
fixed_warp_aggregated_kernel(const Sample* samples, const Weight* weights, std::int64_t num_samples,
                                             fixed_point_bins bins, Mapper map, std::uint64_t* left_out) {
  extern __shared__ std::uint64_t shared_words[];
  const std::int64_t num_bins = map.num_bins();
  fixed_point_bins target = bins;
  if constexpr (InShared) {
    target = fixed_point_bins::at(shared_words, num_bins);
    for (std::int64_t bin = threadIdx.x; bin < num_bins; bin += blockDim.x) {
      target.low[bin] = 0;
      target.high[bin] = 0;
      target.flags[bin] = 0;
    }
    __syncthreads();
  }
  const std::uint64_t mine = for_each_weighted_in_warps<fixed_words, bin_key<InShared>, tuning::weighted_items_per_lane>(
      samples, weights, num_samples, map,
      [target](std::int64_t bin, double w) { return fixed_words_of(target, bin, w); },
      [target](std::int64_t bin, fixed_words words) { add_fixed_words(target, bin, words); });
  warp_add_to(mine, left_out);
  if constexpr (InShared) {
    __syncthreads();
    flush_fixed_copy(target, num_bins, bins);
  }
}

/// sums[bin] = the value the fixed-point bin stands for; sets *out_of_range to 1 when a bin saw
/// a weight beyond the fixed-point range (that bin's sum is NaN). Sum is double (a template, so
/// that every translation unit may hold its own copy).
template <class Sum>
__global__ void fixed_to_sum_kernel(fixed_point_bins bins, std::int64_t num_bins, Sum* sums,
                                    std::uint64_t* out_of_range) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t bin = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; bin < num_bins;
       bin += stride) {
    const std::uint32_t flags = bins.flags[bin];
    sums[bin] = static_cast<Sum>(fixed_point_weight::to_double(bins.low[bin], bins.high[bin], flags));
    if ((flags & fixed_point_weight::saw_out_of_range) != 0) {
      cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(*out_of_range).store(1, cuda::memory_order_relaxed);
    }
  }
}

}  // namespace tally::detail
