// The histogram dispatch: the one place that decides how a histogram runs (histogram_policy: the
// strategy and why, the kernel, its launch shape, its storage, made once per call from the device,
// the sample type and the bins) and the only code that launches its kernels, CUB's included.
// CUB's temporary-storage contract: the policy says how many bytes a launch needs; the launch gets
// that much. It returns cudaError_t and never throws; the owning layer (src/) validates
// arguments and turns errors into exceptions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cub/device/device_histogram.cuh>
#include <cuda_runtime.h>

#include "tally/detail/dispatch/device_properties.cuh"
#include "tally/detail/dispatch/large_bins_dispatch.cuh"
#include "tally/detail/kernels/histogram_kernels.cuh"
#include "tally/detail/shared_kernel_grid.hpp"
#include "tally/detail/tuning/histogram_tuning.cuh"
#include "tally/detail/workspace_slots.hpp"
#include "tally/strategy.hpp"

namespace tally::detail {

/// Bytes of one block's copy of 32-bit counters in shared memory: whole rows of banks, as the
/// swizzle (bank_swizzled) needs.
inline std::size_t shared_copy_bytes(std::int64_t num_bins) {
  return static_cast<std::size_t>(swizzled_words(num_bins)) * 4;
}
/// Bytes of a block's copy in shared memory as count_vectorized counts into it: the bins and the
/// word after them that takes the left-out samples.
inline std::size_t counting_copy_bytes(std::int64_t num_bins) { return shared_copy_bytes(num_bins + 1); }
inline std::size_t packed_copy_bytes(std::int64_t num_bins) {
  return static_cast<std::size_t>(packed_copy_words(num_bins) + packed_mode_words) * 4;
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
  const bool shared = s == strategy::shared_atomic || s == strategy::two_phase ||
                      s == strategy::warp_aggregated || s == strategy::replicated;
  if (shared && counting_copy_bytes(num_bins) > props.shared_memory_per_block_optin) {
    return "needs num_bins * 4 bytes of shared memory per block, more than this GPU gives a block";
  }
  if (s == strategy::packed16 && packed_copy_bytes(num_bins) > props.shared_memory_per_block_optin) {
    return "needs num_bins * 2 bytes of shared memory per block, more than this GPU gives a block";
  }
  if ((s == strategy::global_privatized || s == strategy::two_phase) &&
      shared_copy_bytes(num_bins) > tuning::block_copies_budget_bytes) {
    return "needs num_bins * 4 bytes of global memory per block, more than its budget";
  }
  if (s == strategy::partitioned) {
    if (num_bins > tuning::max_partitioned_bins) {
      return "takes at most 2^26 bins (2^11 buckets of 2^15): its per-tile tables grow with the number of buckets";
    }
    if (bucket_slices(num_bins, props) == 0) {
      return "needs min(num_bins, 2^15) bytes of shared memory per block (a quarter of a bucket's counters), more "
             "than this GPU gives a block";
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
    // Sixteen bytes a load make the shared-memory atomic unit the limit: a replica per lane, each
    // in its own bank, lifts uniform bytes from 0.72 to 0.92 of the read bandwidth (standalone
    // kernel; docs/performance.md, "Bytes at 256 bins"). Bytes that pile into few values count
    // faster in one copy, whose increments of one word the hardware merges: the byte kernel's
    // blocks sample their first bytes and choose (histogram_policy::adapt_to_data). From 385 bins
    // (replica_count) the choice is shared_atomic, not measured against replicas.
    return {strategy::replicated,
            "byte samples: the shared-memory atomics are the limit, so each lane counts into a replica of its own, "
            "in its own bank; over all 256 byte values, 64 replicas, and each block samples its first bytes and, "
            "where they pile into few values, counts into one plain copy instead, whose increments of one value "
            "the hardware merges"};
  }
  if (counting_copy_bytes(num_bins) <= props.shared_memory_per_block_optin) {
    // The hardware merges a warp's increments of one word, so one plain copy keeps up with the
    // reads; replicas and software aggregation add work without gaining speed.
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
  return {strategy::atomic, "too many bins to partition: one global atomic per sample"};
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

/// How one histogram call runs, decided once (make_histogram_policy) and read by the launch.
struct histogram_policy {
  choice chosen;                  ///< the strategy and why
  const char* unfit = nullptr;    ///< why the strategy cannot run here; then nothing below is set
  int block_threads = 0;          ///< of the counting kernel
  int blocks = 0;                 ///< of the counting kernel
  int copies = 1;                 ///< interleaved replicas of each block's copy (replicated)
  std::size_t shared_bytes = 0;   ///< per block: the copy, and the mapper's tables when they fit
  int table_words = -1;           ///< the word of shared memory the tables start at, or -1 (global)
  std::size_t copy_bytes = 0;     ///< one block's copy of 32-bit counters
  bool all_bytes = false;         ///< the byte kernel (all_bytes_histogram_kernel)
  bool fold_bytes = false;        ///< bytes counted over all 256 values, then folded into the bins
  bool adapt_to_data = false;     ///< the byte kernel's blocks sample their input to choose a layout
  bool zero_counts_first = true;  ///< a memset zeroes the counts before the launch (else start_output)
  std::size_t temp_bytes = 1;     ///< temporary storage the launch needs (never 0: a null one asks for the size)
};

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

/// The grid of the shared-memory kernels (shared_kernel_blocks) for this kernel's occupancy.
template <class Kernel>
cudaError_t shared_kernel_grid(Kernel kernel, std::int64_t num_samples, std::size_t sample_bytes, std::int64_t copy_bins,
                               std::size_t shared_bytes, const device_properties& props, int threads, int& blocks) {
  int per_sm = 0;
  if (cudaError_t e = resident_blocks_per_multiprocessor(kernel, threads, shared_bytes, per_sm); e != cudaSuccess) {
    return e;
  }
  blocks = static_cast<int>(shared_kernel_blocks(num_samples, sample_bytes, copy_bins, per_sm, props.multiprocessors));
  return cudaSuccess;
}

/// The shared-memory kernel that shared_atomic, warp_aggregated and replicated launch, in one
/// function so that the policy (its occupancy) and the launch take the same one. Bytes over all
/// 256 values take the byte kernel, but for warp_aggregated.
template <class Sample, class Counter, class Mapper>
auto shared_atomic_kernel_for(strategy s) {
  using privatized = typename tuning::histogram_tuning<Sample>::privatized;
  if constexpr (std::is_same_v<Mapper, byte_shift_mapper>) {
    return shared_atomic_histogram_kernel<privatized, aggregation::warp, false, Sample, Counter, Mapper>;
  } else {
    switch (s) {
      case strategy::warp_aggregated:
        return shared_atomic_histogram_kernel<privatized, aggregation::warp, false, Sample, Counter, Mapper>;
      case strategy::replicated:
        return shared_atomic_histogram_kernel<privatized, aggregation::none, true, Sample, Counter, Mapper>;
      default:
        return shared_atomic_histogram_kernel<privatized, aggregation::none, false, Sample, Counter, Mapper>;
    }
  }
}

/// Byte values whose counts are folded into the bins (fold_value_counts_kernel).
inline constexpr int byte_values = 256;

/// Whether automatic counts `Sample`s with `Mapper` over all 256 byte values first, then folds
/// the counts into the bins: bytes in any bins but those of width one (which byte_shift_mapper
/// counts directly). The count then costs a permute and a shared-memory atomic a byte, whatever
/// the bins; the mapping, once per byte value.
template <class Sample, class Mapper>
inline constexpr bool folds_bytes = std::is_same_v<Sample, std::uint8_t> && !std::is_same_v<Mapper, byte_shift_mapper>;

/// The byte kernel's part of a policy whose `copies` and `shared_bytes` are set: its block shape,
/// its grid (one block a multiprocessor in replicas), and whether its blocks sample their input
/// (automatic, in replicas). `ByteCounter` is the counter it counts into.
template <class ByteCounter>
cudaError_t plan_byte_kernel(bool automatic, std::int64_t num_samples, const device_properties& props,
                             histogram_policy& policy) {
  const bool in_replicas = policy.copies == tuning::byte_replicas;
  policy.all_bytes = true;
  policy.block_threads = tuning::all_bytes_tuning::block_threads;
  policy.adapt_to_data = automatic && in_replicas;
  const int max_blocks = in_replicas ? props.multiprocessors * tuning::byte_replica_blocks_per_multiprocessor : 1 << 30;
  return histogram_grid(all_bytes_histogram_kernel<tuning::all_bytes_tuning, ByteCounter>, num_samples,
                        policy.shared_bytes, props, max_blocks, policy.blocks, policy.block_threads);
}

/**
 * Decides how strategy `requested` (automatic included) runs over `num_samples` samples with
 * `map` on this device: the one place that knows which kernel, launch shape and storage a
 * histogram takes. Sets `policy.unfit` (and returns cudaSuccess) where the strategy cannot run.
 */
template <class Sample, class Counter, class Mapper>
cudaError_t make_histogram_policy(strategy requested, const Mapper& map, std::int64_t num_samples,
                                  const device_properties& props, histogram_policy& policy) {
  using privatized = typename tuning::histogram_tuning<Sample>::privatized;
  using packed = typename tuning::histogram_tuning<Sample>::packed;
  const std::int64_t num_bins = map.num_bins();
  policy = histogram_policy{};
  if constexpr (folds_bytes<Sample, Mapper>) {
    if (requested == strategy::automatic) {
      policy.chosen = {strategy::replicated,
                       "byte samples: counted over all 256 byte values first, each lane into a replica of its own "
                       "(one permute and one shared-memory atomic a byte, whatever the bins), then each byte value "
                       "mapped to its bin once and its count added there"};
      policy.fold_bytes = true;
      policy.copies = byte_replica_count(byte_values, props);
      policy.shared_bytes = shared_copy_bytes(byte_values) * policy.copies;
      policy.temp_bytes = sizeof(std::uint64_t) * byte_values;
      return plan_byte_kernel<std::uint64_t>(true, num_samples, props, policy);
    }
  }
  policy.chosen = choose_gpu_histogram(requested, num_bins, sizeof(Sample), props);
  const strategy s = policy.chosen.used;
  policy.unfit = histogram_strategy_unfit(s, num_bins, props);
  if (policy.unfit != nullptr) return cudaSuccess;
  policy.copy_bytes = shared_copy_bytes(num_bins);
  policy.block_threads = privatized::block_threads;
  const int max_copies =
      static_cast<int>(std::max<std::size_t>(1, tuning::block_copies_budget_bytes / policy.copy_bytes));
  int& blocks = policy.blocks;

  switch (s) {
    case strategy::cub: policy.temp_bytes = 0; return cudaSuccess;  // CUB sizes its own (dispatch_cub_histogram)
    case strategy::partitioned:
    case strategy::radix_sort: {
      if (num_samples == 0) return cudaSuccess;  // the launch only zeroes the counts
      const large_bins_call<Sample, Counter, Mapper> sizing{
          nullptr, num_samples, nullptr, map, num_bins, nullptr, nullptr};
      return s == strategy::partitioned ? dispatch_partitioned(nullptr, policy.temp_bytes, sizing, props)
                                        : dispatch_radix_sort(nullptr, policy.temp_bytes, sizing, props);
    }
    case strategy::atomic:
      return histogram_grid(atomic_histogram_kernel<Sample, Counter, Mapper>, num_samples, 0, props, 1 << 30,
                            blocks, policy.block_threads);
    case strategy::global_privatized:
      if (cudaError_t e = histogram_grid(global_privatized_histogram_kernel<privatized, Sample, Mapper>, num_samples, 0,
                                         props, max_copies, blocks, policy.block_threads);
          e != cudaSuccess) {
        return e;
      }
      policy.temp_bytes = policy.copy_bytes * blocks;
      return cudaSuccess;
    case strategy::two_phase:
      policy.shared_bytes = counting_copy_bytes(num_bins);
      policy.table_words = place_tables(map, policy.shared_bytes, props);
      if (cudaError_t e = histogram_grid(two_phase_histogram_kernel<privatized, Sample, Mapper>, num_samples,
                                         policy.shared_bytes, props, max_copies, blocks, policy.block_threads);
          e != cudaSuccess) {
        return e;
      }
      policy.temp_bytes = policy.copy_bytes * blocks;
      return cudaSuccess;
    case strategy::packed16:
      policy.block_threads = packed::block_threads;
      policy.shared_bytes = packed_copy_bytes(num_bins);
      policy.table_words = place_tables(map, policy.shared_bytes, props);
      return histogram_grid(packed16_histogram_kernel<packed, Sample, Counter, Mapper>, num_samples,
                            policy.shared_bytes, props, 1 << 30, blocks, policy.block_threads);
    case strategy::shared_atomic:
    case strategy::warp_aggregated:
    case strategy::replicated: break;
    default: return cudaErrorInvalidValue;
  }
  constexpr bool bytes = std::is_same_v<Mapper, byte_shift_mapper>;
  if (s == strategy::replicated) policy.copies = bytes ? byte_replica_count(num_bins, props) : replica_count(num_bins);
  policy.shared_bytes = (bytes ? policy.copy_bytes : counting_copy_bytes(num_bins)) * policy.copies;
  if constexpr (bytes) {
    if (s != strategy::warp_aggregated) {
      // Bytes over all 256 values: the byte kernel, no tables, its counts zeroed by a memset.
      return plan_byte_kernel<Counter>(requested == strategy::automatic, num_samples, props, policy);
    }
  }
  policy.table_words = place_tables(map, policy.shared_bytes, props);
  policy.zero_counts_first = num_samples == 0;  // start_output zeroes them in the launch
  return shared_kernel_grid(shared_atomic_kernel_for<Sample, Counter, Mapper>(s), num_samples, sizeof(Sample),
                            num_bins * policy.copies, policy.shared_bytes, props, policy.block_threads, blocks);
}

/// Zeroes `counts` and `*left_out` and folds `value_counts` (one per value of `Sample`) into them
/// by `map` (fold_value_counts_kernel, which zeroes a byte type's few counts itself): the values
/// left out are the call's left-out count, since counting per value leaves none out.
template <class Sample, class Counter, class Mapper>
cudaError_t dispatch_value_fold(const std::uint64_t* value_counts, Counter* counts, std::int64_t num_bins,
                                const Mapper& map, std::uint64_t* left_out, cudaStream_t stream) {
  constexpr std::uint32_t threads = 256;
  constexpr std::uint32_t blocks = (small_values<Sample>::count + threads - 1) / threads;
  // One block zeroes a few thousand counts in less time than a memset launch takes; more bins
  // (a bincount's minlength of millions) take the memset.
  constexpr std::int64_t zeroed_by_the_block = 4096;
  if (blocks == 1 && num_bins <= zeroed_by_the_block) {
    fold_value_counts_kernel<true, Sample><<<1, threads, 0, stream>>>(value_counts, counts, map, left_out);
  } else {
    if (cudaError_t e = cudaMemsetAsync(counts, 0, sizeof(Counter) * num_bins, stream); e != cudaSuccess) return e;
    if (cudaError_t e = cudaMemsetAsync(left_out, 0, sizeof(std::uint64_t), stream); e != cudaSuccess) return e;
    fold_value_counts_kernel<false, Sample><<<blocks, threads, 0, stream>>>(value_counts, counts, map, left_out);
  }
  return cudaGetLastError();
}

/// Fills the value table of `window` at `table` by `map`, the type's own mapper, on `stream`.
template <class Sample, class Mapper>
cudaError_t dispatch_value_table(const Mapper& map, value_window window, std::byte* table, cudaStream_t stream) {
  constexpr std::uint32_t threads = 256;
  fill_value_table_kernel<Sample><<<(window.span + 1 + threads - 1) / threads, threads, 0, stream>>>(
      reinterpret_cast<std::uint16_t*>(table), window, map);
  return cudaGetLastError();
}

/// Fills the float table `shape` describes at `table` by `map`, the bins' own mapper, on `stream`.
template <class Mapper>
cudaError_t dispatch_float_table(const float_table_mapper& shape, const Mapper& map, std::byte* table,
                                 cudaStream_t stream) {
  constexpr std::uint32_t threads = 256;
  fill_float_table_kernel<<<(shape.span() + 1 + threads - 1) / threads, threads, 0, stream>>>(
      reinterpret_cast<std::int32_t*>(table), shape, map);
  return cudaGetLastError();
}

/// Fills the integer table `shape` describes at `table` by `map`, the bins' own mapper, on `stream`.
template <class Sample, class Mapper>
cudaError_t dispatch_integer_table(const integer_table_mapper<Sample>& shape, const Mapper& map, std::byte* table,
                                   cudaStream_t stream) {
  constexpr std::uint32_t threads = 256;
  fill_integer_table_kernel<<<(shape.span() + 1 + threads - 1) / threads, threads, 0, stream>>>(
      reinterpret_cast<std::uint16_t*>(table), shape, map);
  return cudaGetLastError();
}

/// Where the edges of a grid's tables come from on the device: range bins' edges, copied there.
struct edges_in_memory {
  const double* edges;
  __device__ double operator()(std::int64_t i) const { return edges[i]; }
};

/// Even bins' edges, computed on the device as numpy computes them (even_bin_mapper::edge).
template <class Sample>
struct computed_even_edges {
  even_bin_mapper<Sample> map;
  __device__ double operator()(std::int64_t i) const { return static_cast<double>(map.edge(i)); }
};

/// Fills `map`'s tables at `tables` (its table_bytes) on `stream`, from the edges `edge_at` gives
/// on the device (edges_in_memory, computed_even_edges).
template <class Sample, grid_entries Entries, class EdgeAt>
cudaError_t dispatch_grid_tables(const grid_range_bin_mapper<Sample, Entries>& map, EdgeAt edge_at, std::byte* tables,
                                 cudaStream_t stream) {
  constexpr int threads = 256;
  const std::int64_t blocks = std::min<std::int64_t>((map.table_entries() + threads - 1) / threads, 4096);
  fill_grid_tables_kernel<<<static_cast<int>(blocks), threads, 0, stream>>>(map, edge_at, tables);
  return cudaGetLastError();
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

/**
 * Runs `policy` (made by make_histogram_policy for these types and a mapper of the same size)
 * over `samples` into `counts`, and sets `*left_out` to the samples it leaves out. `left_out` is
 * the result word of a workspace's scalar block, whose other words (workspace_slots.hpp) the
 * launch may use; `temp` holds policy.temp_bytes. Counts need not be zeroed by the caller.
 */
template <class Sample, class Counter, class Mapper>
cudaError_t dispatch_histogram(void* temp, const histogram_policy& policy, const Sample* samples,
                               std::int64_t num_samples, Counter* counts, const Mapper& map, std::uint64_t* left_out,
                               const device_properties& props, cudaStream_t stream, bool zero_left_out = true) {
  using privatized = typename tuning::histogram_tuning<Sample>::privatized;
  using packed = typename tuning::histogram_tuning<Sample>::packed;
  const std::int64_t num_bins = map.num_bins();
  const strategy s = policy.chosen.used;
  const int blocks = policy.blocks;
  const int threads = policy.block_threads;
  const std::size_t shared = policy.shared_bytes;
  // The shared-memory kernels zero the left-out count in their own start (start_output): a
  // memset fewer, which a small call's latency shows.
  const bool zeroed_by_start_output = zero_left_out && num_samples > 0 && !policy.all_bytes && !policy.fold_bytes &&
                                      (s == strategy::shared_atomic || s == strategy::warp_aggregated ||
                                       s == strategy::replicated);
  if (zero_left_out && !zeroed_by_start_output) {
    if (cudaError_t e = cudaMemsetAsync(left_out, 0, sizeof(std::uint64_t), stream); e != cudaSuccess) return e;
  }
  if constexpr (folds_bytes<Sample, Mapper>) {
    if (policy.fold_bytes) {
      auto* byte_counts = static_cast<std::uint64_t*>(temp);
      if (cudaError_t e = cudaMemsetAsync(byte_counts, 0, policy.temp_bytes, stream); e != cudaSuccess) return e;
      if (num_samples > 0) {
        all_bytes_histogram_kernel<tuning::all_bytes_tuning><<<blocks, threads, shared, stream>>>(
            samples, num_samples, byte_counts, byte_shift_mapper(0, byte_values), policy.copies, policy.adapt_to_data);
      }
      return dispatch_value_fold<Sample>(byte_counts, counts, num_bins, map, left_out, stream);
    }
  }
  std::size_t temp_bytes = policy.temp_bytes;
  switch (s) {
    case strategy::partitioned:
    case strategy::radix_sort: {
      if (cudaError_t e = cudaMemsetAsync(counts, 0, sizeof(Counter) * num_bins, stream); e != cudaSuccess) return e;
      if (num_samples == 0) return cudaSuccess;
      const large_bins_call<Sample, Counter, Mapper> call{
          samples, num_samples, counts, map, num_bins, left_out, stream};
      return s == strategy::partitioned ? dispatch_partitioned(temp, temp_bytes, call, props)
                                        : dispatch_radix_sort(temp, temp_bytes, call, props);
    }
    case strategy::global_privatized:
    case strategy::two_phase: {
      auto* copies = static_cast<std::uint32_t*>(temp);
      if (s == strategy::global_privatized || num_samples == 0) {
        if (cudaError_t e = cudaMemsetAsync(copies, 0, policy.copy_bytes * blocks, stream); e != cudaSuccess) return e;
      }
      if (num_samples > 0) {
        if (s == strategy::global_privatized) {
          global_privatized_histogram_kernel<privatized, Sample, Mapper>
              <<<blocks, threads, 0, stream>>>(samples, num_samples, copies, map, left_out);
        } else {
          two_phase_histogram_kernel<privatized, Sample, Mapper>
              <<<blocks, threads, shared, stream>>>(samples, num_samples, copies, map, left_out, policy.table_words);
        }
      }
      if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
      return launch_merge(copies, blocks, num_bins, counts, sizeof(Counter) == 8, props, stream);
    }
    default: break;
  }

  // The remaining strategies count straight into `counts`.
  if (policy.zero_counts_first) {
    if (cudaError_t e = cudaMemsetAsync(counts, 0, sizeof(Counter) * num_bins, stream); e != cudaSuccess) return e;
  }
  if (num_samples == 0) return cudaSuccess;
  switch (s) {
    case strategy::atomic:
      atomic_histogram_kernel<<<blocks, threads, 0, stream>>>(samples, num_samples, counts, map, left_out);
      break;
    case strategy::shared_atomic:
    case strategy::warp_aggregated:
    case strategy::replicated: {
      if constexpr (std::is_same_v<Mapper, byte_shift_mapper>) {
        if (policy.all_bytes) {
          all_bytes_histogram_kernel<tuning::all_bytes_tuning><<<blocks, threads, shared, stream>>>(
              samples, num_samples, counts, map, policy.copies, policy.adapt_to_data);
          break;
        }
      }
      const output_start_words output{left_out, left_out + scalar_slot::output_zeroed,
                                      left_out + scalar_slot::output_blocks_finished, zeroed_by_start_output};
      const auto kernel = shared_atomic_kernel_for<Sample, Counter, Mapper>(s);
      kernel<<<blocks, threads, shared, stream>>>(
          samples, num_samples, counts, map, output, policy.copies, policy.table_words);
      break;
    }
    case strategy::packed16:
      packed16_histogram_kernel<packed><<<blocks, threads, shared, stream>>>(samples, num_samples, counts, map,
                                                                             left_out, policy.table_words);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

/// CUB's DeviceHistogram::HistogramEven over `num_levels` even levels from `lower` to `upper`.
template <class Sample, class Level, class CubCounter>
struct cub_even_histogram {
  const Sample* samples;
  CubCounter* counts;
  int num_levels;
  Level lower;
  Level upper;
  std::int64_t num_samples;
  cudaError_t operator()(void* temp, std::size_t& bytes, const double*, cudaStream_t stream) const {
    return cub::DeviceHistogram::HistogramEven(temp, bytes, samples, counts, num_levels, lower, upper, num_samples,
                                               stream);
  }
};

/// CUB's DeviceHistogram::HistogramRange over `num_levels` edges, which the launch finds on the device.
template <class Sample, class CubCounter>
struct cub_range_histogram {
  const Sample* samples;
  CubCounter* counts;
  int num_levels;
  std::int64_t num_samples;
  cudaError_t operator()(void* temp, std::size_t& bytes, const double* device_edges, cudaStream_t stream) const {
    return cub::DeviceHistogram::HistogramRange(temp, bytes, samples, counts, num_levels, device_edges, num_samples,
                                                stream);
  }
};

/**
 * The cub strategy: `cub_histogram` (cub_even_histogram or cub_range_histogram) into `counts`,
 * then *left_out = the samples it dropped (num_samples less the sum of the counts). CUB's own
 * contract: a null `temp` only sets `temp_bytes`.
 */
template <class CubHistogram, class Counter>
cudaError_t dispatch_cub_histogram(void* temp, std::size_t& temp_bytes, const CubHistogram& cub_histogram,
                                   Counter* counts, std::int64_t num_bins, const double* device_edges,
                                   std::uint64_t* left_out, const device_properties& props, cudaStream_t stream) {
  if (temp == nullptr) return cub_histogram(nullptr, temp_bytes, device_edges, stream);
  set_value_kernel<<<1, 1, 0, stream>>>(left_out, static_cast<std::uint64_t>(cub_histogram.num_samples));
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (cub_histogram.num_samples == 0) return cudaMemsetAsync(counts, 0, sizeof(Counter) * num_bins, stream);
  if (cudaError_t e = cub_histogram(temp, temp_bytes, device_edges, stream); e != cudaSuccess) return e;
  const int blocks =
      static_cast<int>(std::min<std::int64_t>((num_bins + 255) / 256, std::int64_t{props.multiprocessors} * 4));
  subtract_counts_kernel<<<blocks, 256, 0, stream>>>(counts, num_bins, left_out);
  return cudaGetLastError();
}

}  // namespace tally::detail
