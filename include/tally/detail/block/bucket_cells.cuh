// What one block of the partitioned strategy's second pass does: it owns an even share of the
// in-range samples in bucket order (positions [lo, hi) of the scanned cell table), finds its
// first and last cells, and for each bucket it touches counts that bucket's offsets into a shared
// copy of 2^15 counters, then adds the non-zero ones to the global counts.
#pragma once

#include <cstdint>

#include "tally/detail/block/block_histogram.cuh"
#include "tally/detail/tuning/large_bins_tuning.hpp"

namespace tally::detail {

/// The scanned cell table of one chunk: cell (bucket b, tile t) is index b * tiles + t;
/// first[c] is the position of the cell's first sample in bucket order, first[cells] the total.
struct cell_table {
  const std::uint16_t* offsets;  ///< tile t's offsets start at t * partition_tile
  const std::uint32_t* first;
  const std::uint16_t* start;  ///< where the cell's offsets start within its tile's
  std::int64_t tiles;
  std::int64_t cells;
};

/// The last cell c in [0, cells) with first[c] <= position, searched by a whole warp 32 ways at a
/// time (about five rounds of loads for 2^24 cells, not 24). Every lane of the warp must call it
/// and gets the same answer. first[0] = 0 <= position, which the search keeps as its invariant:
/// first[low] <= position.
__device__ __forceinline__ std::int64_t last_cell_at_or_before(const std::uint32_t* first, std::int64_t cells,
                                                               std::uint32_t position) {
  constexpr unsigned all_lanes = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x % 32);
  std::int64_t low = 0;
  std::int64_t high = cells;  // the answer is in [low, high)
  while (true) {
    const std::int64_t step = high - low > 32 ? (high - low + 31) / 32 : 1;
    const std::int64_t probe = low + lane * step;
    const bool at_or_before = probe < high && first[probe] <= position;
    const unsigned lanes = __ballot_sync(all_lanes, at_or_before);  // lane 0 always: first[low] <= position
    const int last = 31 - __clz(static_cast<int>(lanes));
    if (step == 1) return low + last;
    low += last * step;
    high = low + step < high ? low + step : high;
  }
}

/// Counts the offsets of cells [chunk_first, chunk_first + 32) (none beyond `last_cell`), clipped
/// to positions [lo, hi), into the shared `copy`. One warp; every lane must call it. Lane l reads
/// cell chunk_first + l's bounds, then the warp walks the cells' samples as one flat list (lane k
/// takes samples k, k + 32, ... of the list and finds its cell by a binary search over the lanes'
/// prefix sums), so cells of a few samples keep every lane busy and loads coalesced.
template <int Unroll>
__device__ __forceinline__ void count_cells(const cell_table& table, std::int64_t chunk_first, std::int64_t last_cell,
                                            std::uint32_t lo, std::uint32_t hi, std::uint32_t* copy) {
  constexpr unsigned all_lanes = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t cell = chunk_first + lane;
  std::uint32_t size = 0;
  std::int64_t source = 0;  // index in `offsets` of the cell's first sample at or after lo
  if (cell <= last_cell) {
    const std::uint32_t begin = table.first[cell];
    const std::uint32_t end = table.first[cell + 1];
    const std::uint32_t from = begin > lo ? begin : lo;
    const std::uint32_t to = end < hi ? end : hi;
    if (to > from) {
      size = to - from;
      source = (cell % table.tiles) * tuning::partition_tile + table.start[cell] + (from - begin);
    }
  }
  std::uint32_t inclusive = size;
  for (int offset = 1; offset < 32; offset *= 2) {
    const std::uint32_t below = __shfl_up_sync(all_lanes, inclusive, offset);
    if (lane >= offset) inclusive += below;
  }
  const std::uint32_t exclusive = inclusive - size;
  const std::uint32_t total = __shfl_sync(all_lanes, inclusive, 31);  // < 32 * partition_tile

  for (std::uint32_t base = 0; base < total; base += 32 * Unroll) {
    std::uint16_t local[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      const std::uint32_t k = base + static_cast<std::uint32_t>(u * 32 + lane);
      // The last lane whose exclusive prefix is <= k holds sample k: prefixes never decrease, and
      // a lane with no samples shares its prefix with the next lane, which is then the later one
      // (k < total rules out an empty last lane).
      int owner = 0;
#pragma unroll
      for (int step = 16; step > 0; step /= 2) {
        const std::uint32_t prefix = __shfl_sync(all_lanes, exclusive, owner + step);
        if (prefix <= k) owner += step;
      }
      const std::int64_t owner_source = __shfl_sync(all_lanes, source, owner);
      const std::uint32_t owner_prefix = __shfl_sync(all_lanes, exclusive, owner);
      local[u] = k < total ? __ldcs(table.offsets + owner_source + (k - owner_prefix)) : std::uint16_t{0xffff};
    }
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      // The result unused and the increment the constant 1: the hardware merges a warp's
      // increments of one word (see add_to_copy in block_histogram.cuh).
      if (base + static_cast<std::uint32_t>(u * 32 + lane) < total) atomicAdd(copy + local[u], 1u);
    }
  }
}

/// The block's share of one chunk: positions [lo, hi) of bucket order, counted bucket by bucket
/// into the shared `copy` (min(num_bins, 2^15) counters, zero on entry and left zero) and added
/// to `counts`. Every thread of the block must call it.
/// Within a bucket each warp takes an equal run of the block's positions and walks the cells that
/// hold it, 32 at a time. (Handing out 32 cells a warp instead starved most warps when cells are
/// whole tiles, as with sorted input: a block's share of 2^28 sorted samples is about 280 cells,
/// 9 warps' worth.)
template <int Threads, int Unroll, class Counter>
__device__ __forceinline__ void count_block_share(const cell_table& table, std::uint32_t lo, std::uint32_t hi,
                                                  std::int64_t num_bins, std::uint32_t* copy, Counter* counts) {
  if (lo >= hi) return;  // the same for every thread of the block
  const int warp = static_cast<int>(threadIdx.x / 32);
  constexpr int warps = Threads / 32;
  const std::int64_t first_cell = last_cell_at_or_before(table.first, table.cells, lo);
  const std::int64_t last_cell = last_cell_at_or_before(table.first, table.cells, hi - 1);
  for (std::int64_t bucket = first_cell / table.tiles; bucket <= last_cell / table.tiles; ++bucket) {
    // The bucket's positions within the block's share (table.first has an entry past the last
    // cell, the chunk's total), split evenly over the warps.
    const std::uint32_t bucket_begin_at = table.first[bucket * table.tiles];
    const std::uint32_t bucket_end_at = table.first[(bucket + 1) * table.tiles];
    const std::uint32_t share_lo = bucket_begin_at > lo ? bucket_begin_at : lo;
    const std::uint32_t share_hi = bucket_end_at < hi ? bucket_end_at : hi;
    if (share_lo < share_hi) {  // the same for every thread of the block
      const std::uint64_t share = share_hi - share_lo;
      const auto warp_lo = static_cast<std::uint32_t>(share_lo + share * warp / warps);
      const auto warp_hi = static_cast<std::uint32_t>(share_lo + share * (warp + 1) / warps);
      if (warp_lo < warp_hi) {  // the same for every lane of the warp
        // The cells holding the warp's first and last positions: both in this bucket, as its
        // positions are.
        const std::int64_t warp_first = last_cell_at_or_before(table.first, table.cells, warp_lo);
        const std::int64_t warp_last = last_cell_at_or_before(table.first, table.cells, warp_hi - 1);
        for (std::int64_t chunk = warp_first; chunk <= warp_last; chunk += 32) {
          count_cells<Unroll>(table, chunk, warp_last, warp_lo, warp_hi, copy);
        }
      }
    }
    __syncthreads();  // the bucket is counted
    // The last bucket may be partial: only bins below num_bins exist.
    const std::int64_t bucket_begin = bucket * tuning::bucket_bins;
    const std::int64_t bins_here = num_bins - bucket_begin < tuning::bucket_bins ? num_bins - bucket_begin : tuning::bucket_bins;
    for (std::int64_t i = threadIdx.x; i < bins_here; i += Threads) {
      const std::uint32_t value = copy[i];
      if (value != 0) {
        copy[i] = 0;  // zero again for the next bucket, in the same pass
        add_to_global_count(counts + bucket_begin + i, Counter{value});
      }
    }
    __syncthreads();  // the copy is zero again before the next bucket is counted
  }
}

}  // namespace tally::detail
