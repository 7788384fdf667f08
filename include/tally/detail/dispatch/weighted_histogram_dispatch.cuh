// The weighted histogram dispatch: the only code that chooses a weighted strategy's launch shape
// and launches its kernels. CUB's temporary-storage contract, as histogram_dispatch.cuh: called
// with `temp == nullptr` it only sets `temp_bytes`. It returns cudaError_t and never throws.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include <cuda_runtime.h>

#include "tally/detail/dispatch/device_properties.cuh"
#include "tally/detail/dispatch/histogram_dispatch.cuh"
#include "tally/detail/kernels/weighted_histogram_kernels.cuh"
#include "tally/detail/tuning/histogram_tuning.cuh"
#include "tally/strategy.hpp"

namespace tally::detail {

/// Shared memory a block's copy of the bins takes with strategy `s`: shared_atomic's limbs (24
/// bytes a bin, 16 deterministic, with one replica of the limbs), warp_aggregated's double or
/// fixed-point words (8, 20).
inline std::size_t weighted_copy_bytes(strategy s, std::int64_t num_bins, bool deterministic, int replicas = 1) {
  if (s == strategy::shared_atomic) {
    return deterministic ? fixed_limb_copy::bytes(num_bins, replicas) : exact_limb_copy::bytes(num_bins, replicas);
  }
  return deterministic ? fixed_point_bins::bytes(num_bins) : static_cast<std::size_t>(num_bins) * sizeof(double);
}

/// The slots of shared_atomic's cache of bins (where its whole copy does not fit) on this device:
/// tuning::weighted_cache_slots, or the largest power of two below that fits a block's shared
/// memory; 0 where not even tuning::weighted_cache_min_slots fit, or where bins do not fit the
/// cache's 32-bit tags (2^32 - 1 and up: one tag marks a free slot).
inline std::uint32_t weighted_cache_slots(std::int64_t num_bins, bool deterministic, const device_properties& props) {
  if (num_bins >= std::int64_t{bin_cache<limb_sum::fixed_limbs>::no_bin}) return 0;
  for (std::uint32_t slots = tuning::weighted_cache_slots; slots >= tuning::weighted_cache_min_slots; slots /= 2) {
    const std::size_t bytes = deterministic ? bin_cache<limb_sum::fixed_limbs>::bytes(slots)
                                            : bin_cache<limb_sum::exact_limbs>::bytes(slots);
    if (bytes <= props.shared_memory_per_block_optin) return slots;
  }
  return 0;
}

/// Whether a block keeps a whole shared-memory copy of the sums: shared_atomic and warp_aggregated
/// while it fits (else shared_atomic keeps a cache of bins, and warp_aggregated adds into the
/// global sums).
inline bool weighted_copy_in_shared(strategy s, std::int64_t num_bins, bool deterministic,
                                    const device_properties& props) {
  return (s == strategy::shared_atomic || s == strategy::warp_aggregated) &&
         weighted_copy_bytes(s, num_bins, deterministic) <= props.shared_memory_per_block_optin;
}

/// Why strategy `s` cannot sum `num_bins` bins on this device, or nullptr if it can.
inline const char* weighted_strategy_unfit(strategy s, std::int64_t num_bins, bool deterministic,
                                           const device_properties& props) {
  if (s == strategy::shared_atomic && !weighted_copy_in_shared(s, num_bins, deterministic, props) &&
      weighted_cache_slots(num_bins, deterministic, props) == 0) {
    return "needs a block's shared memory for its copy of the bins, or for a cache of some of them (fewer than 2^32 - "
           "1 bins)";
  }
  return nullptr;
}

/// automatic: shared_atomic (integer atomics, which lanes of one bin do not wait on each other
/// for), with a whole copy of the sums per block where it fits, else a cache of the bins each
/// block meets; warp_aggregated into the global sums only where not even the cache fits.
inline choice choose_gpu_weighted(strategy requested, std::int64_t num_bins, bool deterministic,
                                  const device_properties& props) {
  if (requested != strategy::automatic) return {requested, "asked for"};
  if (weighted_copy_in_shared(strategy::shared_atomic, num_bins, deterministic, props)) {
    return {strategy::shared_atomic,
            "the sums fit in shared memory: each block sums its weights exactly as integers in 32-bit parts, added "
            "with integer atomics (lanes of one bin need not take turns), then one global atomic per bin per block"};
  }
  if (weighted_cache_slots(num_bins, deterministic, props) != 0) {
    return {strategy::shared_atomic,
            "too many bins for shared memory: each block keeps the bins it meets in a cache, summed exactly as "
            "integers in 32-bit parts with integer atomics and emptied into the global sums every 65536 samples; "
            "a sample whose two cache slots other bins hold adds straight to the global sums"};
  }
  return {strategy::warp_aggregated,
          "too many bins for shared memory: lanes of a warp with one bin add their weights with shuffles, then one "
          "global atomic per bin per warp"};
}

/**
 * Runs weighted strategy `s` (atomic, shared_atomic or warp_aggregated) over `samples` and
 * `weights` into `sums`, and adds the samples it leaves out to `*left_out`, which the caller
 * zeroes. shared_atomic maps with `fast` (the cheapest mapper that bins as `map` does: its kernel
 * is held by its instructions a sample), the others with `map`. With `deterministic`
 * the weights are summed as fixed-point words in `temp`, converted into `sums` at the end, and
 * `*out_of_range` (zeroed by the caller) is set to 1 if a weight was beyond range. `*claimed`
 * (zeroed by the caller) is the word shared_atomic's copies in limbs claim their steps from.
 */
template <class Sample, class Weight, class Mapper, class FastMapper>
cudaError_t dispatch_weighted_histogram(void* temp, std::size_t& temp_bytes, strategy s, bool deterministic,
                                        const Sample* samples, const Weight* weights, std::int64_t num_samples,
                                        double* sums, const Mapper& map, const FastMapper& fast,
                                        std::uint64_t* left_out, std::uint64_t* out_of_range,
                                        std::uint64_t* claimed, cudaStream_t stream) {
  const std::int64_t num_bins = map.num_bins();
  if (temp == nullptr) {
    // One byte when nothing is needed: a null `temp` is how callers ask for the size.
    temp_bytes = deterministic ? fixed_point_bins::bytes(num_bins) : 1;
    return cudaSuccess;
  }
  device_properties props;
  if (cudaError_t e = current_device_properties(props); e != cudaSuccess) return e;
  constexpr int threads = tuning::weighted_block_threads;
  static_assert(threads % 32 == 0, "warp_aggregated walks by whole warps");
  if (s != strategy::shared_atomic && s != strategy::atomic && s != strategy::warp_aggregated) {
    return cudaErrorInvalidValue;
  }
  const bool in_shared = weighted_copy_in_shared(s, num_bins, deterministic, props);
  const std::size_t copy_bytes = in_shared ? weighted_copy_bytes(s, num_bins, deterministic) : 0;
  // shared_atomic whose copy does not fit keeps a cache of bins (weighted_cache_kernel).
  const bool cached = s == strategy::shared_atomic && !in_shared;
  const std::uint32_t slots = cached ? weighted_cache_slots(num_bins, deterministic, props) : 0;
  if (cached && slots == 0) return cudaErrorInvalidValue;
  // Shared memory of shared_atomic's copy, or of its cache where the copy does not fit, with
  // `replicas` replicas of the limbs.
  const auto limb_bytes = [&](int replicas) {
    if (!cached) return weighted_copy_bytes(s, num_bins, deterministic, replicas);
    return deterministic ? bin_cache<limb_sum::fixed_limbs>::bytes(slots, replicas)
                         : bin_cache<limb_sum::exact_limbs>::bytes(slots, replicas);
  };
  // shared_atomic's block size, the replicas of its limbs (up to tuning::weighted_max_replicas) and
  // its walk: narrow blocks (weighted_limb_block_threads) of steps of weighted_limb_items_per_lane
  // samples a lane or of long steps (weighted_limb_long_step_items), wide ones (twice the threads on
  // one copy or cache), and wide ones whose lanes load their next step ahead (the copy only; the
  // cache comes in wide blocks that do not: `narrow_kernel`, `long_kernel` and `ahead_kernel`
  // nullptr). A warp's lanes of one bin take turns on a word, so two replicas or more let crowded
  // data run as spread data does, but each is a whole copy of the limbs, and fewer blocks fit;
  // spread data wants threads enough to keep the adds in flight. Of the shapes that fit, the most
  // threads a multiprocessor up to tuning::weighted_limb_enough_threads, then two replicas or
  // more, then the most threads up to weighted_limb_long_step_threads, then long steps where they
  // hold that many, then the most threads, then the walk that loads ahead, then narrow blocks
  // (their code is the faster), then the most replicas. So long steps run where the copy and their
  // registers leave room for three narrow blocks or more: with that many threads, twice a lane's
  // loads hid more of the memory's wait than a quarter more warps did (docs/performance.md). The
  // ahead walk runs only where it holds as many threads as the plain one: where the copy, or the
  // plain kernel's registers, leave room for one wide block or two narrow ones, its loads in
  // flight stand in for the warps that do not fit (one wide block of it beat two narrow plain ones,
  // docs/performance.md); where more fit, its registers would cost warps. Where none fits (no
  // device does so today), one replica in the blocks of the plain kernel.
  constexpr int narrow_threads = tuning::weighted_limb_block_threads;
  constexpr int wide_threads = tuning::weighted_limb_wide_block_threads;
  constexpr int items = tuning::weighted_limb_items_per_lane;
  constexpr int long_items = tuning::weighted_limb_long_step_items;
  enum class limb_walk { plain, long_steps, ahead };
  struct limb_shape {
    int block_threads = narrow_threads;
    int replicas = 1;
    limb_walk walk = limb_walk::plain;
  };
  const auto choose_limb_shape = [&](auto narrow_kernel, auto long_kernel, auto wide_kernel, auto ahead_kernel,
                                     limb_shape& shape) {
    constexpr bool only_wide = std::is_null_pointer_v<decltype(narrow_kernel)>;
    constexpr bool can_take_long_steps = !std::is_null_pointer_v<decltype(long_kernel)>;
    constexpr bool can_load_ahead = !std::is_null_pointer_v<decltype(ahead_kernel)>;
    shape = {only_wide ? wide_threads : narrow_threads, 1, limb_walk::plain};
    auto best = std::make_tuple(-1, false, -1, false, -1, false, false, 0);
    const auto consider = [&](auto kernel, int block_threads, int replicas, limb_walk walk) {
      const std::size_t bytes = limb_bytes(replicas);
      if (bytes > props.shared_memory_per_block_optin) return cudaSuccess;
      int blocks = 0;
      if (cudaError_t e = resident_blocks_per_multiprocessor(kernel, block_threads, bytes, blocks); e != cudaSuccess) {
        return e;
      }
      const int held = blocks * block_threads;
      if (held == 0) return cudaSuccess;
      const int enough_for_long_steps = std::min(held, tuning::weighted_limb_long_step_threads);
      const auto key = std::make_tuple(
          std::min(held, tuning::weighted_limb_enough_threads), replicas > 1, enough_for_long_steps,
          walk == limb_walk::long_steps && enough_for_long_steps == tuning::weighted_limb_long_step_threads, held,
          walk == limb_walk::ahead, block_threads == narrow_threads, replicas);
      if (key > best) {
        best = key;
        shape = {block_threads, replicas, walk};
      }
      return cudaSuccess;
    };
    for (int r = 1; r <= tuning::weighted_max_replicas; r *= 2) {
      if constexpr (!only_wide) {
        if (cudaError_t e = consider(narrow_kernel, narrow_threads, r, limb_walk::plain); e != cudaSuccess) return e;
      }
      if constexpr (can_take_long_steps) {
        if (cudaError_t e = consider(long_kernel, narrow_threads, r, limb_walk::long_steps); e != cudaSuccess) {
          return e;
        }
      }
      if (cudaError_t e = consider(wide_kernel, wide_threads, r, limb_walk::plain); e != cudaSuccess) return e;
      if constexpr (can_load_ahead) {
        if (cudaError_t e = consider(ahead_kernel, wide_threads, r, limb_walk::ahead); e != cudaSuccess) return e;
      }
    }
    return cudaSuccess;
  };
  int blocks = 1;
  // Sizes the grid of a kernel taking `shared_bytes` a block in blocks of `block_threads` and
  // launches it with `args` after the samples, the weights and their count.
  const auto launch_with = [&](auto kernel, int block_threads, std::size_t shared_bytes, const auto&... args) {
    if (cudaError_t e = histogram_grid(kernel, num_samples, shared_bytes, props, 1 << 30, blocks, block_threads);
        e != cudaSuccess) {
      return e;
    }
    kernel<<<blocks, block_threads, shared_bytes, stream>>>(samples, weights, num_samples, args...);
    return cudaGetLastError();
  };
  // The kernels for shared_atomic (a copy in narrow blocks, of short or long steps, or in wide
  // ones, which also load ahead, or a cache, whose policy `cached_sums` holds where its sums go),
  // atomic, and warp_aggregated with a shared copy or without, into `out`.
  const auto launch = [&](auto narrow_copy_kernel, auto long_copy_kernel, auto wide_copy_kernel,
                          auto ahead_copy_kernel, auto cache_kernel, auto cached_sums, auto atomic_kernel,
                          auto in_warps_shared_kernel, auto in_warps_global_kernel, auto out) {
    if (s != strategy::shared_atomic) {
      return launch_with(
          s == strategy::atomic ? atomic_kernel : in_shared ? in_warps_shared_kernel : in_warps_global_kernel,
          threads, copy_bytes, out, map, left_out);
    }
    limb_shape shape;
    if (cudaError_t e = cached ? choose_limb_shape(nullptr, nullptr, cache_kernel, nullptr, shape)
                               : choose_limb_shape(narrow_copy_kernel, long_copy_kernel, wide_copy_kernel,
                                                   ahead_copy_kernel, shape);
        e != cudaSuccess) {
      return e;
    }
    const std::size_t bytes = limb_bytes(shape.replicas);
    if (cached) {
      return launch_with(cache_kernel, shape.block_threads, bytes, cached_sums, fast, left_out, slots, shape.replicas);
    }
    if (shape.block_threads == narrow_threads) {
      if constexpr (!std::is_null_pointer_v<decltype(long_copy_kernel)>) {
        if (shape.walk == limb_walk::long_steps) {
          return launch_with(long_copy_kernel, narrow_threads, bytes, out, fast, left_out, claimed, shape.replicas);
        }
      }
      return launch_with(narrow_copy_kernel, narrow_threads, bytes, out, fast, left_out, claimed, shape.replicas);
    }
    return shape.walk == limb_walk::ahead
               ? launch_with(ahead_copy_kernel, shape.block_threads, bytes, out, fast, left_out, claimed, shape.replicas)
               : launch_with(wide_copy_kernel, shape.block_threads, bytes, out, fast, left_out, claimed, shape.replicas);
  };

  // The long-step kernel of a copy where a step's loads are 4 bytes a weight and at most 4 a sample
  // (nullptr: none). With 8-byte ones it takes 40-64 registers: past 40 two narrow blocks fit, so
  // the rank would not take it, and of those at 40 some spill; they were not measured. (Some of
  // the 4-byte ones take more than 40 too, and are not taken either.)
  const auto long_copy_kernel_of = [](auto copy, auto sums_type) {
    if constexpr (sizeof(Weight) == 4 && sizeof(Sample) <= 4) {
      return weighted_limb_kernel<narrow_threads, long_items, false, typename decltype(copy)::type, Sample, Weight,
                                  FastMapper, typename decltype(sums_type)::type>;
    } else {
      return nullptr;
    }
  };

  if (!deterministic) {
    if (cudaError_t e = cudaMemsetAsync(sums, 0, sizeof(double) * num_bins, stream); e != cudaSuccess) return e;
    if (num_samples == 0) return cudaSuccess;
    return launch(
        weighted_limb_kernel<narrow_threads, items, false, exact_limb_copy, Sample, Weight, FastMapper, double*>,
        long_copy_kernel_of(std::type_identity<exact_limb_copy>{}, std::type_identity<double*>{}),
        weighted_limb_kernel<wide_threads, items, false, exact_limb_copy, Sample, Weight, FastMapper, double*>,
        weighted_limb_kernel<wide_threads, items, true, exact_limb_copy, Sample, Weight, FastMapper, double*>,
        weighted_cache_kernel<exact_cached_sums, Sample, Weight, FastMapper>, exact_cached_sums{sums},
        weighted_atomic_kernel<Sample, Weight, Mapper>, weighted_warp_aggregated_kernel<true, Sample, Weight, Mapper>,
        weighted_warp_aggregated_kernel<false, Sample, Weight, Mapper>, sums);
  }

  const fixed_point_bins bins = fixed_point_bins::at(static_cast<std::uint64_t*>(temp), num_bins);
  if (cudaError_t e = cudaMemsetAsync(temp, 0, fixed_point_bins::bytes(num_bins), stream); e != cudaSuccess) return e;
  if (num_samples > 0) {
    if (cudaError_t e = launch(
            weighted_limb_kernel<narrow_threads, items, false, fixed_limb_copy, Sample, Weight, FastMapper,
                                 fixed_point_bins>,
            long_copy_kernel_of(std::type_identity<fixed_limb_copy>{}, std::type_identity<fixed_point_bins>{}),
            weighted_limb_kernel<wide_threads, items, false, fixed_limb_copy, Sample, Weight, FastMapper,
                                 fixed_point_bins>,
            weighted_limb_kernel<wide_threads, items, true, fixed_limb_copy, Sample, Weight, FastMapper,
                                 fixed_point_bins>,
            weighted_cache_kernel<fixed_cached_sums, Sample, Weight, FastMapper>, fixed_cached_sums{bins},
            fixed_atomic_kernel<Sample, Weight, Mapper>, fixed_warp_aggregated_kernel<true, Sample, Weight, Mapper>,
            fixed_warp_aggregated_kernel<false, Sample, Weight, Mapper>, bins);
        e != cudaSuccess) {
      return e;
    }
  }
  const std::int64_t needed = (num_bins + tuning::merge_block_threads - 1) / tuning::merge_block_threads;
  const int finish_blocks = static_cast<int>(std::min<std::int64_t>(needed, std::int64_t{props.multiprocessors} * 8));
  fixed_to_sum_kernel<double><<<finish_blocks, tuning::merge_block_threads, 0, stream>>>(bins, num_bins, sums,
                                                                                          out_of_range);
  return cudaGetLastError();
}

}  // namespace tally::detail
