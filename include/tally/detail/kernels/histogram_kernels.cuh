// The histogram kernels: thin __global__ functions, one per strategy, each built from the block
// pieces. Every kernel adds the samples it leaves out to `left_out` (one atomic per warp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cuda/atomic>

#include "tally/detail/block/block_histogram.cuh"
#include "tally/detail/block/packed_histogram.cuh"
#include "tally/detail/block/warp_sum.cuh"
#include "tally/detail/kernels/common_kernels.cuh"
#include "tally/detail/tuning/histogram_tuning.cuh"
#include "tally/detail/value_tables.hpp"

namespace tally::detail {

/// One device-scope atomic per sample: correct, and as slow as the hottest bin is contended.
template <class Sample, class Counter, class Mapper>
__global__ void atomic_histogram_kernel(const Sample* samples, std::int64_t num_samples, Counter* counts,
                                               Mapper map, std::uint64_t* left_out) {
  const std::uint64_t mine = for_each_bin(samples, num_samples, map, [counts](std::int64_t bin, std::int64_t) {
    cuda::atomic_ref<Counter, cuda::thread_scope_device>(counts[bin]).fetch_add(1, cuda::memory_order_relaxed);
  });
  warp_add_to(mine, left_out);
}

/// Each block counts into its own zeroed slice of `block_copies` (num_bins counters) in global
/// memory with block-scope atomics; merge_block_copies_kernel adds the slices up.
template <class Tuning, class Sample, class Mapper>
__global__ void __launch_bounds__(Tuning::block_threads, Tuning::min_blocks)
global_privatized_histogram_kernel(const Sample* samples, std::int64_t num_samples, std::uint32_t* block_copies,
                                   Mapper map, std::uint64_t* left_out) {
  std::uint32_t* copy = block_copies + static_cast<std::int64_t>(blockIdx.x) * map.num_bins();
  warp_add_to(count_vectorized<aggregation::none, Tuning, copy_memory::global, 0u>(samples, num_samples, map, copy)
                  .left_out,
              left_out);
}

/// A shared-memory histogram per block, then one device-scope atomic per non-zero bin. With
/// aggregation::warp, equal bins within a lane or across a whole warp add as one (warp_aggregated);
/// with `Replicated` the block keeps `copies` interleaved replicas (replicated), else one copy,
/// known when compiled (no replica arithmetic a sample). The launch zeroes `counts` itself
/// (start_output), so they need no memset before it; a launch of one block stores its copy as
/// the counts instead (launch_is_one_block). Mappers that compute swizzle their copy only
/// where the block's first samples crowd its banks: for them the swizzle's instructions show.
template <class Tuning, aggregation Aggregate, bool Replicated, class Sample, class Counter, class Mapper>
__global__ void __launch_bounds__(Tuning::block_threads, Tuning::min_blocks)
shared_atomic_histogram_kernel(const Sample* samples, std::int64_t num_samples, Counter* counts, Mapper map,
                               output_start_words output, int copies, int table_words) {
  extern __shared__ __align__(16) std::uint32_t shared_copy[];
  if constexpr (!Replicated) copies = 1;
  zero_counters(shared_copy, swizzled_words(map.num_bins() * copies));
  const Mapper block_map = tables_in_block(map, shared_copy, table_words);
  const bool owns_output = launch_is_one_block();
  start_output(counts, map.num_bins(), output, owns_output);  // its barrier also orders the copy's zeroing before counting
  constexpr int loads = Tuning::loads_per_thread;
  std::uint32_t mask = swizzle_mask(copies);
  walk_tally tally;
  if constexpr (maps_with_arithmetic<Sample, Mapper>) {
    const int replica = static_cast<int>(threadIdx.x) % copies;
    // A table in the block's shared memory (value, float and integer tables, the range-bin grid's
    // cell words) is swizzled where the block's samples crowd its own banks (values 32 words apart
    // read one bank), the copy where they crowd the copy's or the table is swizzled.
    bool swizzle_table = false;
    if constexpr (has_bank_swizzled_table<Mapper, Sample>) swizzle_table = table_words >= 0;
    // Even bins over 16-bit integers also carry a ratio (value_ratio_mapper): where a block's
    // samples spread over the table's banks, each table read takes turns on them, and the ratio's
    // arithmetic costs less than the read (uniform data: docs/performance.md, "16-bit general
    // ranges: the ratio where a block's samples spread"). Where they crowd few values the reads
    // broadcast and the table stays.
    bool by_ratio = false;
    if constexpr (Aggregate == aggregation::none && has_ratio_twin<Mapper>) by_ratio = map.has_ratio();
    // A launch of one block (a small call) keeps the copy's swizzle, and a plain table, rather
    // than wait for a first load to choose: the swizzle costs its few samples little, the load a
    // round trip to memory.
    if (mask == 0u || owns_output) {
      swizzle_table = false;
      by_ratio = false;
    } else {
      const crowded_banks crowded = block_crowds_banks(
          samples, num_samples, block_map, loads, [copies, replica](int bin) { return bin * copies + replica; },
          swizzle_table, by_ratio);
      by_ratio = by_ratio && crowded.spread;
      swizzle_table = swizzle_table && crowded.table && !by_ratio;
      if (!crowded.copy && !swizzle_table) mask = 0u;  // a swizzled table's loop swizzles the copy too
    }
    // One loop per layout: a swizzle chosen at run time would cost its instructions in both.
    if constexpr (Aggregate == aggregation::none && has_ratio_twin<Mapper>) {
      if (by_ratio) {
        const auto ratio_map = map.ratio_mapper();
        tally = mask != 0u ? count_vectorized<Aggregate, Tuning, copy_memory::shared, 31u>(samples, num_samples,
                                                                                           ratio_map, shared_copy, copies)
                           : count_vectorized<Aggregate, Tuning, copy_memory::shared, 0u>(samples, num_samples,
                                                                                          ratio_map, shared_copy, copies);
      }
    }
    if constexpr (has_bank_swizzled_table<Mapper, Sample>) {
      if (swizzle_table) {
        const auto swizzled_map = swizzle_table_in_block(map, shared_copy, table_words);
        __syncthreads();  // the swizzled copy is in before any sample is mapped
        tally = count_vectorized<Aggregate, Tuning, copy_memory::shared, 31u>(samples, num_samples, swizzled_map,
                                                                              shared_copy, copies);
      }
    }
    if (!swizzle_table && !by_ratio) {
      tally = mask != 0u ? count_vectorized<Aggregate, Tuning, copy_memory::shared, 31u>(samples, num_samples,
                                                                                         block_map, shared_copy, copies)
                         : count_vectorized<Aggregate, Tuning, copy_memory::shared, 0u>(samples, num_samples,
                                                                                        block_map, shared_copy, copies);
    }
  } else {
    tally = count_vectorized<Aggregate, Tuning, copy_memory::shared, 31u>(samples, num_samples, block_map,
                                                                          shared_copy, copies);
  }
  __syncthreads();  // every count is in before the copy is read
  wait_for_zeroed_output(output, owns_output);
  const std::uint64_t handed = add_block_copy(shared_copy, map.num_bins(), counts, copies, mask, owns_output);
  warp_add_to(left_out_by_difference(tally, handed), output.left_out);
  finish_output(output, owns_output);
}

/// The byte kernel: bytes over all 256 values (byte_shift_mapper), none left out, into one plain
/// copy or tuning::byte_replicas replicas per block (count_all_bytes). Its counts are zeroed by a
/// memset before the launch (cheaper than start_output's protocol for so short a kernel), and it
/// hands them on with one bulk reduction per block where it can (add_byte_copy). With
/// `adapt_to_data` (histogram_policy), a block in replicas looks at its first bytes and, where they
/// pile into few values, counts into one plain copy instead (block_bytes_pile_up), whose
/// increments of one word the hardware merges.
template <class Tuning, class Counter>
__global__ void __launch_bounds__(Tuning::block_threads, Tuning::min_blocks)
all_bytes_histogram_kernel(const std::uint8_t* samples, std::int64_t num_samples, Counter* counts,
                           byte_shift_mapper map, int copies, bool adapt_to_data) {
  extern __shared__ __align__(16) std::uint32_t shared_copy[];  // add_byte_copy_in_bulk reads it as uint4
  constexpr int loads = Tuning::loads_per_thread;
  const std::int64_t copy_words = swizzled_words(map.num_bins() * copies);  // as launched
  // The sample of the input is loaded first, so that its latency hides behind the zeroing; the
  // choice holds for the whole block, and one plain copy uses the start of the zeroed replicas.
  const bool sample = adapt_to_data && copies == tuning::byte_replicas;
  const int first_byte = sample ? lane_first_byte(samples, num_samples, loads) : 0;
  zero_counters(shared_copy, copy_words);
  if (sample && block_bytes_pile_up(first_byte)) copies = 1;
  __syncthreads();  // the copy is zeroed before counting
  count_all_bytes<loads>(samples, num_samples, map, shared_copy, copies);
  __syncthreads();  // every count is in before the copy is read
  add_byte_copy<Tuning::block_threads>(shared_copy, map, copies, copy_words, counts);
}

/// Folds per-value counts into the bins: the count of the value with bits v (value_counts[v], one
/// entry per value of `Sample`, a byte or a 16-bit type) goes to bin map(value), mapped once by
/// the type's own mapper, or to the left-out count. A thread a value, into counts and a left-out
/// count zeroed before it, or, with `ZeroFirst` (one block: bytes), zeroed by the block first:
/// two memsets fewer.
template <bool ZeroFirst, class Sample, class Counter, class Mapper>
__global__ void fold_value_counts_kernel(const std::uint64_t* value_counts, Counter* counts, Mapper map,
                                         std::uint64_t* left_out) {
  if constexpr (ZeroFirst) {
    for (std::int64_t bin = threadIdx.x; bin < map.num_bins(); bin += blockDim.x) counts[bin] = 0;
    if (threadIdx.x == 0) *left_out = 0;
    __syncthreads();  // the block's own atomics below see the zeros: one block, block order
  }
  const std::uint32_t bits = blockIdx.x * blockDim.x + threadIdx.x;
  const std::uint64_t count = bits < small_values<Sample>::count ? value_counts[bits] : 0;
  std::uint64_t dropped = 0;
  if (count != 0) {
    const std::int64_t bin = map(small_values<Sample>::from_bits(bits));
    if (bin >= 0) {
      cuda::atomic_ref<Counter, cuda::thread_scope_device>(counts[bin])
          .fetch_add(static_cast<Counter>(count), cuda::memory_order_relaxed);
    } else {
      dropped = count;
    }
  }
  warp_add_to(dropped, left_out);
}

/// Fills a value table (value_table_mapper, `window.span` + 1 entries): entry p is the entry of
/// the bin of the value at position window.first + p, by the type's own mapper; the last, read by
/// every value outside the window, leaves out.
template <class Sample, class Mapper>
__global__ void fill_value_table_kernel(std::uint16_t* table, value_window window, Mapper map) {
  using table_mapper = value_table_mapper<small_values<Sample>::order>;
  const std::uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p > window.span) return;
  const std::int64_t bin = p < window.span ? map(small_values<Sample>::at(window.first + p)) : left_out_bin;
  table[p] = table_mapper::entry_of(bin, map.num_bins());
}

/// Fills a float table (float_table_mapper `shape`, span() + 1 entries): entry p is the entry of
/// the bin of the float keyed shape.key_at(p), by the bins' own mapper `map`; the last leaves out.
template <class Mapper>
__global__ void fill_float_table_kernel(std::int32_t* table, float_table_mapper shape, Mapper map) {
  const std::uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p > shape.span()) return;
  const std::int64_t bin =
      p < shape.span() ? map(__uint_as_float(float_table_mapper::bits_of_key(shape.key_at(p)))) : left_out_bin;
  table[p] = float_table_mapper::entry_of(bin, map.num_bins());
}

/// Fills an integer table (integer_table_mapper `shape`, span() + 1 entries): entry p is the entry
/// of the bin of the integer shape.value_at(p), by the bins' own mapper `map`; the last leaves out.
template <class Sample, class Mapper>
__global__ void fill_integer_table_kernel(std::uint16_t* table, integer_table_mapper<Sample> shape, Mapper map) {
  const std::uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p > shape.span()) return;
  const std::int64_t bin = p < shape.span() ? map(shape.value_at(p)) : left_out_bin;
  table[p] = integer_table_mapper<Sample>::entry_of(bin, map.num_bins());
}

/// A shared-memory histogram per block, written out whole to the block's slice of
/// `block_copies`; merge_block_copies_kernel adds the slices up, with no atomics.
template <class Tuning, class Sample, class Mapper>
__global__ void __launch_bounds__(Tuning::block_threads, Tuning::min_blocks)
two_phase_histogram_kernel(const Sample* samples, std::int64_t num_samples, std::uint32_t* block_copies,
                                  Mapper map, std::uint64_t* left_out, int table_words) {
  extern __shared__ __align__(16) std::uint32_t shared_copy[];
  const std::int64_t num_bins = map.num_bins();
  zero_counters(shared_copy, swizzled_words(num_bins));
  const Mapper block_map = tables_in_block(map, shared_copy, table_words);
  __syncthreads();
  const walk_tally tally =
      count_vectorized<aggregation::none, Tuning, copy_memory::shared, 31u>(samples, num_samples, block_map, shared_copy);
  __syncthreads();
  std::uint32_t* copy = block_copies + static_cast<std::int64_t>(blockIdx.x) * num_bins;
  std::uint64_t handed = 0;
  for (std::int64_t bin = threadIdx.x; bin < num_bins; bin += blockDim.x) {
    const std::uint32_t value = shared_copy[bank_swizzled(static_cast<std::uint32_t>(bin))];
    copy[bin] = value;
    handed += value;
  }
  warp_add_to(left_out_by_difference(tally, handed), left_out);
}

/// Whether packed16 always swizzles its copy for this mapper, rather than choosing per block: for
/// mappers that compute, whose arithmetic or tables already fill the kernel's 64 registers, where
/// a second counting loop spilled (the estimate over int32 samples, 65536 bins over the data's
/// range, one value: 0.878 of an H100's read bandwidth always swizzled, 0.776 choosing); the
/// swizzle's instructions weigh little beside theirs. The quotient of 32-bit integers over whole or
/// half bounds (rational_step_bin_mapper) is light enough to choose, as the exact shortcuts do.
template <class Sample, class Mapper>
inline constexpr bool packed_swizzle_always = maps_with_arithmetic<Sample, Mapper> && !is_rational_step<Sample, Mapper>;

/// A packed copy of 16-bit counters per block in shared memory (twice the bins of 32-bit ones),
/// swizzled where the block's first samples crowd banks, spilling into `counts` as it goes, then
/// one device-scope atomic per non-zero counter.
template <class Tuning, class Sample, class Counter, class Mapper>
__global__ void __launch_bounds__(Tuning::block_threads, Tuning::min_blocks)
packed16_histogram_kernel(const Sample* samples, std::int64_t num_samples, Counter* counts, Mapper map,
                          std::uint64_t* left_out, int table_words) {
  extern __shared__ __align__(16) std::uint32_t packed_copy[];  // scan mode reads it as uint4
  const std::int64_t num_bins = map.num_bins();
  zero_counters(packed_copy, packed_copy_words(num_bins) + packed_mode_words);
  const Mapper block_map = tables_in_block(map, packed_copy, table_words);
  __syncthreads();
  constexpr int threads = Tuning::block_threads;
  constexpr int loads = Tuning::loads_per_thread;
  bool swizzle = true;
  std::uint64_t mine = 0;
  if constexpr (packed_swizzle_always<Sample, Mapper>) {
    mine = count_packed<threads, loads, 31u>(samples, num_samples, block_map, packed_copy, counts);
  } else {
    swizzle = packed_block_swizzles(samples, num_samples, block_map, loads);  // a barrier
    // One loop per layout: a swizzle chosen at run time would cost its instructions in both.
    mine = swizzle ? count_packed<threads, loads, 31u>(samples, num_samples, block_map, packed_copy, counts)
                   : count_packed<threads, loads, 0u>(samples, num_samples, block_map, packed_copy, counts);
  }
  __syncthreads();  // every count and spill is in before the copy is read
  mine += add_packed_copy(packed_copy, num_bins, counts, swizzle ? 31u : 0u);
  warp_add_to(mine, left_out);
}

/// Fills a range-bin grid's tables (grid_range_bin_mapper::fill_entry), one entry a thread: the
/// host plans the grid and the device builds its keys and cells, which took the host 0.6-1.5 ms a
/// call at 65536 bins (docs/performance.md, "Grid tables filled on the device").
template <class Grid, class EdgeAt>
__global__ void fill_grid_tables_kernel(Grid map, EdgeAt edge_at, std::byte* tables) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < map.table_entries();
       i += stride) {
    map.fill_entry(edge_at, i, tables);
  }
}

/// counts[bin] = the sum of bin over `num_copies` slices; one thread per bin, in a fixed order,
/// so the result is deterministic.
template <class Counter>
__global__ void merge_block_copies_kernel(const std::uint32_t* block_copies, int num_copies, std::int64_t num_bins,
                                          Counter* counts) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t bin = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; bin < num_bins;
       bin += stride) {
    std::uint64_t total = 0;
    for (int copy = 0; copy < num_copies; ++copy) total += block_copies[copy * num_bins + bin];
    counts[bin] = static_cast<Counter>(total);
  }
}

/// Subtracts the sum of `counts` from `*left_out` (which holds the number of samples): for
/// strategies that cannot report what they left out, such as CUB.
template <class Counter>
__global__ void subtract_counts_kernel(const Counter* counts, std::int64_t num_bins, std::uint64_t* left_out) {
  std::uint64_t mine = 0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t bin = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; bin < num_bins;
       bin += stride) {
    mine += counts[bin];
  }
  warp_add_to(~mine + 1, left_out);  // adding -mine modulo 2^64
}

}  // namespace tally::detail
