// How many blocks the shared-memory histogram kernels launch for an input: host arithmetic over
// the tuning's thresholds, kept apart from the CUDA dispatch so that the CPU tests check it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tally/detail/tuning/histogram_tuning.cuh"

namespace tally::detail {

/**
 * Blocks for `num_samples` samples of `sample_bytes` bytes each into a copy of `copy_bins` counters
 * a block (bins times replicas), on a GPU of `multiprocessors` that each hold `resident` blocks of
 * the kernel. One block while a lone block reads the samples sooner than more blocks would start
 * (the zeroing protocol) and hand off their copies; else a block for every few KiB of samples, up
 * to one a multiprocessor, and as many as a multiprocessor holds only where each still gets plenty
 * of samples (two blocks a multiprocessor read 2^20 to 2^22 samples 5-30% slower than one). Never
 * fewer blocks than keep each under tuning::max_samples_per_block. The tuning has the figures.
 */
inline std::int64_t shared_kernel_blocks(std::int64_t num_samples, std::size_t sample_bytes, std::int64_t copy_bins,
                                         int resident, int multiprocessors) {
  const std::int64_t bytes = num_samples * static_cast<std::int64_t>(sample_bytes);
  const std::int64_t sms = std::max(multiprocessors, 1);
  std::int64_t count = 1;
  if (bytes > tuning::one_block_bytes + tuning::one_block_bytes_per_bin * copy_bins) {
    const std::int64_t full = std::max(resident, 1) * sms;
    const bool fill =
        bytes / full >= std::max(tuning::full_occupancy_block_bytes, tuning::full_occupancy_bytes_per_bin * copy_bins);
    count = std::min((bytes + tuning::min_block_bytes - 1) / tuning::min_block_bytes, fill ? full : sms);
  }
  count = std::max(count, (num_samples + tuning::max_samples_per_block - 1) / tuning::max_samples_per_block);
  return std::max<std::int64_t>(count, 1);
}

}  // namespace tally::detail
