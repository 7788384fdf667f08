// The weighted histogram dispatch: the only code that chooses a weighted strategy's launch shape
// and launches its kernels. CUB's temporary-storage contract, as histogram_dispatch.cuh: called
// with `temp == nullptr` it only sets `temp_bytes`. It returns cudaError_t and never throws.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "tally/detail/dispatch/device_properties.cuh"
#include "tally/detail/dispatch/histogram_dispatch.cuh"
#include "tally/detail/kernels/weighted_histogram_kernels.cuh"
#include "tally/detail/tuning/histogram_tuning.cuh"
#include "tally/strategy.hpp"

namespace tally::detail {

/// Shared memory a block's copy of the bins takes with strategy `s`: shared_atomic's limbs (24
/// bytes a bin, 16 deterministic), warp_aggregated's double or fixed-point words (8, 20).
inline std::size_t weighted_copy_bytes(strategy s, std::int64_t num_bins, bool deterministic) {
  if (s == strategy::shared_atomic) {
    return deterministic ? fixed_limb_copy::bytes(num_bins) : exact_limb_copy::bytes(num_bins);
  }
  return deterministic ? fixed_point_bins::bytes(num_bins) : static_cast<std::size_t>(num_bins) * sizeof(double);
}

/// Why strategy `s` cannot sum `num_bins` bins on this device, or nullptr if it can.
inline const char* weighted_strategy_unfit(strategy s, std::int64_t num_bins, bool deterministic,
                                           const device_properties& props) {
  if (s == strategy::shared_atomic &&
      weighted_copy_bytes(s, num_bins, deterministic) > props.shared_memory_per_block_optin) {
    return deterministic ? "needs num_bins * 16 bytes of shared memory per block (deterministic), more than this GPU "
                           "gives a block"
                         : "needs num_bins * 24 bytes of shared memory per block, more than this GPU gives a block";
  }
  return nullptr;
}

/// Whether a block keeps a shared-memory copy of the sums: always for shared_atomic, for
/// warp_aggregated while the copy fits (else it adds into the global sums).
inline bool weighted_copy_in_shared(strategy s, std::int64_t num_bins, bool deterministic,
                                    const device_properties& props) {
  return s == strategy::shared_atomic ||
         (s == strategy::warp_aggregated &&
          weighted_copy_bytes(s, num_bins, deterministic) <= props.shared_memory_per_block_optin);
}

/// automatic: shared_atomic while its copy fits a block's shared memory (integer atomics, which
/// lanes of one bin do not wait on each other for), else warp_aggregated into the global sums.
inline choice choose_gpu_weighted(strategy requested, std::int64_t num_bins, bool deterministic,
                                  const device_properties& props) {
  if (requested != strategy::automatic) return {requested, "asked for"};
  if (weighted_strategy_unfit(strategy::shared_atomic, num_bins, deterministic, props) == nullptr) {
    return {strategy::shared_atomic,
            "the sums fit in shared memory: each block sums its weights exactly as integers in 32-bit parts, added "
            "with integer atomics (lanes of one bin need not take turns), then one global atomic per bin per block"};
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
 * `*out_of_range` (zeroed by the caller) is set to 1 if a weight was beyond range.
 */
template <class Sample, class Weight, class Mapper, class FastMapper>
cudaError_t dispatch_weighted_histogram(void* temp, std::size_t& temp_bytes, strategy s, bool deterministic,
                                        const Sample* samples, const Weight* weights, std::int64_t num_samples,
                                        double* sums, const Mapper& map, const FastMapper& fast,
                                        std::uint64_t* left_out, std::uint64_t* out_of_range, cudaStream_t stream) {
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
  const int block_threads = s == strategy::shared_atomic ? tuning::weighted_limb_block_threads : threads;
  int blocks = 1;
  // Sizes the grid of a kernel and launches it into `out` with mapper `with`.
  const auto launch_one = [&](auto kernel, const auto& with, auto out) {
    if (cudaError_t e = histogram_grid(kernel, num_samples, copy_bytes, props, 1 << 30, blocks, block_threads);
        e != cudaSuccess) {
      return e;
    }
    kernel<<<blocks, block_threads, copy_bytes, stream>>>(samples, weights, num_samples, out, with, left_out);
    return cudaGetLastError();
  };
  // The kernels for shared_atomic, atomic, and warp_aggregated with a shared copy or without.
  const auto launch = [&](auto shared_atomic_kernel, auto atomic_kernel, auto in_warps_shared_kernel,
                          auto in_warps_global_kernel, auto out) {
    if (s == strategy::shared_atomic) return launch_one(shared_atomic_kernel, fast, out);
    return launch_one(s == strategy::atomic ? atomic_kernel : in_shared ? in_warps_shared_kernel : in_warps_global_kernel,
                      map, out);
  };

  if (!deterministic) {
    if (cudaError_t e = cudaMemsetAsync(sums, 0, sizeof(double) * num_bins, stream); e != cudaSuccess) return e;
    if (num_samples == 0) return cudaSuccess;
    return launch(weighted_limb_kernel<exact_limb_copy, Sample, Weight, FastMapper, double*>,
                  weighted_atomic_kernel<Sample, Weight, Mapper>,
                  weighted_warp_aggregated_kernel<true, Sample, Weight, Mapper>,
                  weighted_warp_aggregated_kernel<false, Sample, Weight, Mapper>, sums);
  }

  const fixed_point_bins bins = fixed_point_bins::at(static_cast<std::uint64_t*>(temp), num_bins);
  if (cudaError_t e = cudaMemsetAsync(temp, 0, fixed_point_bins::bytes(num_bins), stream); e != cudaSuccess) return e;
  if (num_samples > 0) {
    if (cudaError_t e = launch(weighted_limb_kernel<fixed_limb_copy, Sample, Weight, FastMapper, fixed_point_bins>,
                               fixed_atomic_kernel<Sample, Weight, Mapper>,
                               fixed_warp_aggregated_kernel<true, Sample, Weight, Mapper>,
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
