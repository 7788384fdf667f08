// The histogram dispatch: the only code that chooses a strategy's launch shape and launches the
// histogram kernels. CUB's temporary-storage contract: called with `temp == nullptr` it only
// sets `temp_bytes`; called again with that much storage it runs. It returns cudaError_t and
// never throws; the owning layer (src/gpu) validates arguments and turns errors into exceptions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "tally/detail/dispatch/device_properties.cuh"
#include "tally/detail/dispatch/large_bins_dispatch.cuh"
#include "tally/detail/kernels/histogram_kernels.cuh"
#include "tally/detail/tuning/histogram_tuning.cuh"
#include "tally/detail/workspace_slots.hpp"
#include "tally/strategy.hpp"

namespace tally::detail {

/// Bytes of one block's copy of 32-bit counters in shared memory: whole rows of banks, as the
/// swizzle (bank_swizzled) needs.
inline std::size_t shared_copy_bytes(std::int64_t num_bins) {
  return static_cast<std::size_t>(swizzled_words(num_bins)) * 4;
}
inline std::size_t packed_copy_bytes(std::int64_t num_bins) {
  return static_cast<std::size_t>(swizzled_words(packed_words(num_bins)) + packed_mode_words) * 4;
}

/// Replicas of the shared copy for `replicated`: the largest power of two up to
/// tuning::max_replicas whose copies fit tuning::replicated_shared_budget (at least one).
inline int replica_count(std::int64_t num_bins) {
  int copies = 1;
  while (copies < tuning::max_replicas && shared_copy_bytes(num_bins) * copies * 2 <= tuning::replicated_shared_budget) {
    copies *= 2;
  }
  return copies;
}

/// Replicas for `replicated` over bytes that all map (byte_shift_mapper), whose kernels are built
/// for one copy or tuning::byte_replicas only: those when they fit their budget and what this
/// device gives a block (up to 512 bins on an H100; 99 KiB chips take up to 396), else one.
inline int byte_replica_count(std::int64_t num_bins, const device_properties& props) {
  const std::size_t bytes = shared_copy_bytes(num_bins) * tuning::byte_replicas;
  return bytes <= tuning::byte_replicas_shared_budget && bytes <= props.shared_memory_per_block_optin
             ? tuning::byte_replicas
             : 1;
}

/// Why strategy `s` cannot count `num_bins` bins on this device, or nullptr if it can.
inline const char* histogram_strategy_unfit(strategy s, std::int64_t num_bins, const device_properties& props) {
  // CUB's sweep finds each block's global copy of the bins at blockId * num_bins, computed in int
  // (cub/agent/agent_histogram.cuh), which wraps past 2^31 counters: 2^24 int32 bins crashed with
  // an illegal address on an H100, leaving the context unusable. Its blocks have 384 threads or
  // more, so a multiprocessor (at most 2048 threads) holds at most 5 of them; refuse where 8 a
  // multiprocessor, a margin over that, could pass 2^31 (2^20 bins ran on the H100's 132).
  constexpr std::int64_t cub_blocks_per_multiprocessor = 8;
  if (s == strategy::cub &&
      num_bins * props.multiprocessors * cub_blocks_per_multiprocessor >= (std::int64_t{1} << 31)) {
    return "CUB's DeviceHistogram offsets each block's copy of the bins in 32-bit arithmetic, which wraps at this many "
           "bins";
  }
  const bool shared = s == strategy::shared_atomic || s == strategy::shared_two_phase ||
                      s == strategy::warp_aggregated || s == strategy::replicated;
  if (shared && shared_copy_bytes(num_bins) > props.shared_memory_per_block_optin) {
    return "needs num_bins * 4 bytes of shared memory per block, more than this GPU gives a block";
  }
  if (s == strategy::packed16 && packed_copy_bytes(num_bins) > props.shared_memory_per_block_optin) {
    return "needs num_bins * 2 bytes of shared memory per block, more than this GPU gives a block";
  }
  if ((s == strategy::global_privatized || s == strategy::shared_two_phase) &&
      shared_copy_bytes(num_bins) > tuning::block_copies_budget_bytes) {
    return "needs num_bins * 4 bytes of global memory per block, more than its budget";
  }
  if (s == strategy::partitioned) {
    if (num_bins > tuning::max_partitioned_bins) {
      return "takes at most 2^26 bins (2^11 buckets of 2^15): its per-tile tables grow with the number of buckets";
    }
    if (bucket_copy_bytes(num_bins) > props.shared_memory_per_block_optin) {
      return "needs min(num_bins, 2^15) * 4 bytes of shared memory per block, more than this GPU gives a block";
    }
  }
  if (s == strategy::radix_sort && num_bins >= (std::int64_t{1} << 31)) {
    return "sorts 32-bit bin keys with one key kept for left-out samples: at most 2^31 - 1 bins";
  }
  return nullptr;
}

/// automatic: keep the counting on chip, in 32-bit counters while they fit one block's shared
/// memory (in replicas for bytes, when they fit), then in 16-bit ones.
inline choice choose_gpu_histogram(strategy requested, std::int64_t num_bins, std::size_t sample_bytes,
                                   const device_properties& props) {
  if (requested != strategy::automatic) return {requested, "asked for"};
  if (sample_bytes == 1 && replica_count(num_bins) == tuning::max_replicas) {
    // Measured on an H100 (results/2026-11-22-h100-probes): 16 bytes a load make the shared-memory
    // atomic unit the limit, and one copy per lane, each lane in its own bank, lifts uniform bytes
    // from 0.72 to 0.92 of the read bandwidth in a standalone kernel on 2026-11-22 (0.85 on
    // 2026-11-23's machine; tally bench 0.81, results/2026-11-23-h100-bytes); hot bins lose a
    // little (0.93 to 0.90), as the merged increments no longer share a word. Bytes over all 256
    // values (byte_shift_mapper) take 64 replicas, a row of 256 bytes per bin, so that one byte
    // permute addresses a count (tuning::byte_replicas); other byte bins take 32. Up to 384 bins
    // (replica_count): from 385 bins, where `replicated` by name still takes 64 (up to 512), the
    // choice is shared_atomic, not measured against it.
    // Bytes that pile into few values count faster in one copy, where the hardware merges a warp's
    // increments of one word (shared_atomic 0.90-0.93 on one value against 0.86-0.90): each block
    // samples its first bytes and chooses (block_bytes_pile_up).
    return {strategy::replicated,
            "byte samples: the shared-memory atomics are the limit, so each lane counts into a replica of its own, "
            "in its own bank; over all 256 byte values, 64 replicas, and each block samples its first bytes and, "
            "where they pile into few values, counts into one plain copy instead, whose increments of one value "
            "the hardware merges"};
  }
  if (shared_copy_bytes(num_bins) <= props.shared_memory_per_block_optin) {
    // Measured on an H100 (results/): with increments the hardware merges per warp, the plain
    // shared-memory histogram runs at the read bandwidth on every distribution up to 16384 bins;
    // replicas and software aggregation add work without gaining speed.
    return {strategy::shared_atomic,
            "the bins fit in shared memory: one shared-memory increment per sample (the hardware merges a warp's "
            "increments of one bin), one global atomic per bin per block"};
  }
  if (packed_copy_bytes(num_bins) <= props.shared_memory_per_block_optin) {
    return {strategy::packed16,
            "the bins fit in shared memory as 16-bit counters: two per word, spilling to global memory before they "
            "overflow"};
  }
  if (histogram_strategy_unfit(strategy::partitioned, num_bins, props) == nullptr) {
    return {strategy::partitioned,
            "too many bins for one block's shared memory: the samples are partitioned by ranges of 2^15 bins, then "
            "each range is counted in shared memory"};
  }
  return {strategy::global_atomic, "too many bins to partition: one global atomic per sample"};
}

/// Where a launch whose blocks' copies take `shared_bytes` of shared memory puts the mapper's
/// tables (has_tables): right after the copy, 16-byte aligned, when both fit one block, and then
/// `shared_bytes` grows by them; returns that word, or -1 (the tables stay in global memory).
template <class Mapper>
int place_tables(const Mapper& map, std::size_t& shared_bytes, const device_properties& props) {
  if constexpr (has_tables<Mapper>) {
    const std::size_t start = (shared_bytes + 15) / 16 * 16;
    if (start + map.tables_bytes() <= props.shared_memory_per_block_optin) {
      shared_bytes = start + map.tables_bytes();
      return static_cast<int>(start / 4);
    }
  }
  return -1;
}

/// A kernel launch shape: enough blocks to fill the GPU, no block with more than 2^31 samples.
template <class Kernel>
cudaError_t histogram_grid(Kernel kernel, std::int64_t num_samples, std::size_t shared_bytes,
                           const device_properties& props, int max_blocks, int& blocks, int threads) {
  int per_sm = 0;
  if (cudaError_t e = resident_blocks_per_multiprocessor(kernel, threads, shared_bytes, per_sm); e != cudaSuccess) {
    return e;
  }
  const std::int64_t needed = (num_samples + threads - 1) / threads;
  std::int64_t count = std::min<std::int64_t>(std::max(per_sm, 1) * std::int64_t{props.multiprocessors}, needed);
  count = std::min<std::int64_t>(count, max_blocks);
  count = std::max<std::int64_t>(count, (num_samples + tuning::max_samples_per_block - 1) / tuning::max_samples_per_block);
  blocks = static_cast<int>(std::max<std::int64_t>(count, 1));
  return cudaSuccess;
}

inline cudaError_t launch_merge(const std::uint32_t* copies, int num_copies, std::int64_t num_bins, void* counts,
                                bool wide_counters, const device_properties& props, cudaStream_t stream) {
  const std::int64_t needed = (num_bins + tuning::merge_block_threads - 1) / tuning::merge_block_threads;
  const int blocks = static_cast<int>(std::min<std::int64_t>(needed, std::int64_t{props.multiprocessors} * 8));
  if (wide_counters) {
    merge_block_copies_kernel<<<blocks, tuning::merge_block_threads, 0, stream>>>(
        copies, num_copies, num_bins, static_cast<std::uint64_t*>(counts));
  } else {
    merge_block_copies_kernel<<<blocks, tuning::merge_block_threads, 0, stream>>>(
        copies, num_copies, num_bins, static_cast<std::uint32_t*>(counts));
  }
  return cudaGetLastError();
}

/// Whether strategy `s` counts bytes over all 256 values with the byte kernel (is_byte_kernel):
/// shared_atomic and replicated launch the kernel without aggregation.
template <class Mapper>
inline bool counts_all_bytes(strategy s) {
  return (s == strategy::shared_atomic || s == strategy::replicated) && is_byte_kernel<aggregation::none, Mapper>;
}

/// Whether strategy `s` zeroes its own counts in its launch (start_output): the shared-memory
/// strategies, which write the counts only after counting, but for the byte kernel, whose counts a
/// memset zeroes before it. Measured on an H100 in GPU time (results/2026-11-23-h100-byte-layout),
/// 2^28 uniform bytes: start_output and its wait and finish, device-scope atomics at the start and
/// end of every block, took 3.5 microseconds of the 100-microsecond count; a memset before it 1.5.
template <class Mapper>
inline bool zeroes_own_output(strategy s, std::int64_t num_samples) {
  return num_samples > 0 &&
         (s == strategy::shared_atomic || s == strategy::warp_aggregated || s == strategy::replicated) &&
         !counts_all_bytes<Mapper>(s);
}

/**
 * Runs strategy `s` (not automatic, not cub) over `samples` into `counts` and adds the samples it
 * leaves out to `*left_out`, which the caller zeroes.
 * `left_out` is the result word of a workspace's scalar block, whose other words
 * (workspace_slots.hpp) those strategies use. Counts need not be zeroed by the caller.
 * `sample_input` (set when automatic chose `s`) lets the kernel look at the input before it picks
 * its layout: bytes in replicas only, for now (block_bytes_pile_up).
 */
template <class Sample, class Counter, class Mapper>
cudaError_t dispatch_histogram(void* temp, std::size_t& temp_bytes, strategy s, const Sample* samples,
                               std::int64_t num_samples, Counter* counts, const Mapper& map,
                               std::uint64_t* left_out, cudaStream_t stream, bool sample_input = false) {
  device_properties props;
  if (cudaError_t e = current_device_properties(props); e != cudaSuccess) return e;
  const std::int64_t num_bins = map.num_bins();
  const std::size_t copy_bytes = shared_copy_bytes(num_bins);
  const int max_copies = static_cast<int>(std::max<std::size_t>(1, tuning::block_copies_budget_bytes / copy_bytes));
  constexpr int threads = tuning::histogram_block_threads<Sample>;
  int blocks = 1;

  switch (s) {
    case strategy::partitioned:
      return dispatch_partitioned(temp, temp_bytes, samples, num_samples, counts, map, left_out, props, stream);
    case strategy::radix_sort:
      return dispatch_radix_sort(temp, temp_bytes, samples, num_samples, counts, map, left_out, props, stream);
    case strategy::global_privatized: {
      auto kernel = global_privatized_histogram_kernel<Sample, Mapper>;
      if (cudaError_t e = histogram_grid(kernel, num_samples, 0, props, max_copies, blocks, threads); e != cudaSuccess) return e;
      if (temp == nullptr) {
        temp_bytes = copy_bytes * blocks;
        return cudaSuccess;
      }
      auto* copies = static_cast<std::uint32_t*>(temp);
      if (cudaError_t e = cudaMemsetAsync(copies, 0, copy_bytes * blocks, stream); e != cudaSuccess) return e;
      if (num_samples > 0) kernel<<<blocks, threads, 0, stream>>>(samples, num_samples, copies, map, left_out);
      if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
      return launch_merge(copies, blocks, num_bins, counts, sizeof(Counter) == 8, props, stream);
    }
    case strategy::shared_two_phase: {
      auto kernel = shared_two_phase_histogram_kernel<Sample, Mapper>;
      std::size_t shared_bytes = copy_bytes;
      const int table_words = place_tables(map, shared_bytes, props);
      if (cudaError_t e = histogram_grid(kernel, num_samples, shared_bytes, props, max_copies, blocks, threads);
          e != cudaSuccess) {
        return e;
      }
      if (temp == nullptr) {
        temp_bytes = copy_bytes * blocks;
        return cudaSuccess;
      }
      auto* copies = static_cast<std::uint32_t*>(temp);
      if (num_samples == 0) {
        if (cudaError_t e = cudaMemsetAsync(copies, 0, copy_bytes * blocks, stream); e != cudaSuccess) return e;
      } else {
        kernel<<<blocks, threads, shared_bytes, stream>>>(samples, num_samples, copies, map, left_out, table_words);
      }
      if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
      return launch_merge(copies, blocks, num_bins, counts, sizeof(Counter) == 8, props, stream);
    }
    default: break;
  }

  // The remaining strategies count straight into `counts`, which start at zero. They need no
  // storage, but ask for one byte: a null `temp` is how callers ask for the size, so the run call
  // must get a non-null one (CUB's contract, which never reports zero bytes either).
  if (temp == nullptr) {
    temp_bytes = 1;
    return cudaSuccess;
  }
  if (!zeroes_own_output<Mapper>(s, num_samples)) {
    if (cudaError_t e = cudaMemsetAsync(counts, 0, sizeof(Counter) * num_bins, stream); e != cudaSuccess) return e;
  }
  if (num_samples == 0) return cudaSuccess;
  switch (s) {
    case strategy::racy: {
      auto kernel = racy_histogram_kernel<Sample, Counter, Mapper>;
      if (cudaError_t e = histogram_grid(kernel, num_samples, 0, props, 1 << 30, blocks, threads); e != cudaSuccess) return e;
      kernel<<<blocks, threads, 0, stream>>>(samples, num_samples, counts, map, left_out);
      break;
    }
    case strategy::global_atomic: {
      auto kernel = global_atomic_histogram_kernel<Sample, Counter, Mapper>;
      if (cudaError_t e = histogram_grid(kernel, num_samples, 0, props, 1 << 30, blocks, threads); e != cudaSuccess) return e;
      kernel<<<blocks, threads, 0, stream>>>(samples, num_samples, counts, map, left_out);
      break;
    }
    case strategy::shared_atomic:
    case strategy::warp_aggregated:
    case strategy::replicated: {
      int copies = 1;
      if (s == strategy::replicated) {
        copies = std::is_same_v<Mapper, byte_shift_mapper> ? byte_replica_count(num_bins, props) : replica_count(num_bins);
      }
      auto kernel = s == strategy::warp_aggregated
                        ? shared_atomic_histogram_kernel<aggregation::warp, Sample, Counter, Mapper>
                        : shared_atomic_histogram_kernel<aggregation::none, Sample, Counter, Mapper>;
      std::size_t bytes = copy_bytes * copies;
      const int table_words = place_tables(map, bytes, props);
      const bool byte_replicas = std::is_same_v<Mapper, byte_shift_mapper> && copies == tuning::byte_replicas;
      const int max_blocks = byte_replicas ? props.multiprocessors * tuning::byte_replica_blocks_per_multiprocessor : 1 << 30;
      if (cudaError_t e = histogram_grid(kernel, num_samples, bytes, props, max_blocks, blocks, threads); e != cudaSuccess) {
        return e;
      }
      const output_start_words output{left_out, left_out + scalar_slot::output_zeroed,
                                      left_out + scalar_slot::output_blocks_finished};
      kernel<<<blocks, threads, bytes, stream>>>(samples, num_samples, counts, map, output, copies, sample_input,
                                                 table_words);
      break;
    }
    case strategy::packed16: {
      auto kernel = packed16_histogram_kernel<Sample, Counter, Mapper>;
      std::size_t bytes = packed_copy_bytes(num_bins);
      const int table_words = place_tables(map, bytes, props);
      if (cudaError_t e = histogram_grid(kernel, num_samples, bytes, props, 1 << 30, blocks, tuning::packed_block_threads);
          e != cudaSuccess) {
        return e;
      }
      kernel<<<blocks, tuning::packed_block_threads, bytes, stream>>>(samples, num_samples, counts, map, left_out,
                                                                      table_words);
      break;
    }
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace tally::detail
