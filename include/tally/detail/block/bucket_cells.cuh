// What one block of the partitioned strategy's second pass does: it owns an even share of the
// chunk's work in bucket order (its in-range samples, plus cell_work for each cell walked), finds
// the cells and positions where its share starts and ends, and for each bucket it touches counts
// that bucket's offsets, read in 16-byte granules, into a shared copy of 2^15 counters, then adds
// the non-zero ones to the global counts. Where a block's shared memory cannot hold 2^15 counters
// (99 KiB chips: sm_86, sm_89, sm_120), a bucket is counted in slices, one launch per slice, each
// walking the bucket's offsets and counting those in its slice (bucket_slice).
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

/// The work of a block of the second pass is measured in samples plus tuning::cell_work for each
/// cell it walks, so a block whose share lies in sparse buckets (many cells of a sample or none:
/// the tail of loguniform data at 2^24 bins) walks about as long as one in a dense bucket. work(c)
/// = first[c] + cell_work * c never decreases; work(cells) is the chunk's whole work.
__device__ __forceinline__ std::uint64_t work_before_cell(const cell_table& table, std::int64_t cell) {
  return std::uint64_t{table.first[cell]} + static_cast<std::uint64_t>(tuning::cell_work) * static_cast<std::uint64_t>(cell);
}

/// The last index c in [low, high) for which `at_or_before(c)` holds, where it holds for low and,
/// once it fails, for no later index. Searched by a whole warp 32 ways at a time (about five rounds
/// of loads for 2^24 cells, not 24). Every lane of the warp must call it and gets the same answer.
template <class AtOrBefore>
__device__ __forceinline__ std::int64_t last_index_where(std::int64_t low, std::int64_t high, AtOrBefore at_or_before) {
  constexpr unsigned all_lanes = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x % 32);
  while (true) {  // the answer is in [low, high)
    const std::int64_t step = high - low > 32 ? (high - low + 31) / 32 : 1;
    const std::int64_t probe = low + lane * step;
    const unsigned lanes = __ballot_sync(all_lanes, probe < high && at_or_before(probe));  // lane 0 always
    const int last = 31 - __clz(static_cast<int>(lanes));
    if (step == 1) return low + last;
    low += last * step;
    high = low + step < high ? low + step : high;
  }
}

/// A point of a chunk's work: the cell holding it, and the position (in bucket order) of the first
/// sample at or after it.
struct work_point {
  std::int64_t cell;
  std::uint32_t position;
};

/// The point of work unit `unit`, searching cells [low, high) (high <= cells + 1), where
/// work_before_cell(low) <= unit. Units past a cell's samples (its walking cost) take the position
/// after them. Every lane of the warp must call it and gets the same answer.
__device__ __forceinline__ work_point point_at_work(const cell_table& table, std::uint64_t unit, std::int64_t low,
                                                    std::int64_t high) {
  const std::int64_t cell =
      last_index_where(low, high, [&](std::int64_t c) { return work_before_cell(table, c) <= unit; });
  if (cell >= table.cells) return {cell, table.first[table.cells]};
  const std::uint32_t begin = table.first[cell];
  const std::uint32_t size = table.first[cell + 1] - begin;
  const std::uint64_t into = unit - work_before_cell(table, cell);
  return {cell, begin + static_cast<std::uint32_t>(into < size ? into : size)};
}

/// Offsets are read in granules: 8 of them, one aligned 16-byte word. Tiles start at multiples of
/// partition_tile offsets, a multiple of 8, so a granule never leaves its tile.
inline constexpr int granule = 8;
static_assert(tuning::partition_tile % granule == 0);

/// One cell's bounds as a lane of count_cells reads them: its first position and the next cell's
/// (in bucket order), and where its offsets start within its tile's.
struct cell_bounds {
  std::uint32_t begin = 0;
  std::uint32_t end = 0;  ///< begin == end: empty, or beyond the cells walked
  std::uint32_t start = 0;
};

/// The bounds of `cell`, or an empty cell when it is beyond `last_cell`.
__device__ __forceinline__ cell_bounds read_cell_bounds(const cell_table& table, std::int64_t cell,
                                                        std::int64_t last_cell) {
  if (cell > last_cell) return {};
  return {table.first[cell], table.first[cell + 1], table.start[cell]};
}

/// The bins of each bucket one launch of the second pass counts: [first, first + bins) of the
/// bucket's 2^15, all of them unless the block's shared memory is too small for that.
struct bucket_slice {
  std::uint32_t first = 0;
  std::uint32_t bins = tuning::bucket_bins;
};

/// Counts the offsets of 32 cells starting at `chunk_first` (lane l holds cell chunk_first + l's
/// `bounds`, empty beyond the cells walked), clipped to positions [lo, hi), into the shared `copy`;
/// `Sliced`: only the offsets in `slice`, at their place in it.
/// One warp; every lane must call it. The warp walks the granules that hold the cells' samples as
/// one flat list (lane k takes granules k, k + 32, ... and finds its cell by a binary search over
/// the lanes' prefix sums) and counts the slots of each granule that belong to its cell. Cells of
/// a few samples keep every lane busy, and every load is a whole 16-byte word.
template <int Unroll, bool Sliced>
__device__ __forceinline__ void count_cells(const cell_table& table, std::int64_t chunk_first, cell_bounds bounds,
                                            std::uint32_t lo, std::uint32_t hi, std::uint32_t* copy,
                                            bucket_slice slice) {
  constexpr unsigned all_lanes = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t cell = chunk_first + lane;
  std::uint32_t granules = 0;
  std::uint32_t source = 0;  // index in `offsets` of the granule holding the cell's first sample at or after lo
  std::uint32_t window = 0;  // (samples << 3) | the slot of that first sample in its granule
  const std::uint32_t from = bounds.begin > lo ? bounds.begin : lo;
  const std::uint32_t to = bounds.end < hi ? bounds.end : hi;
  if (to > from) {
    // Below 2^32: a chunk's tiles hold at most 2^28 + partition_tile offsets.
    const auto at = static_cast<std::uint32_t>((cell % table.tiles) * tuning::partition_tile) + bounds.start +
                    (from - bounds.begin);
    const std::uint32_t head = at % granule;
    source = at - head;
    window = (to - from) << 3 | head;
    granules = (head + (to - from) + granule - 1) / granule;
  }
  std::uint32_t inclusive = granules;
  for (int offset = 1; offset < 32; offset *= 2) {
    const std::uint32_t below = __shfl_up_sync(all_lanes, inclusive, offset);
    if (lane >= offset) inclusive += below;
  }
  const std::uint32_t exclusive = inclusive - granules;
  const std::uint32_t total = __shfl_sync(all_lanes, inclusive, 31);

  for (std::uint32_t base = 0; base < total; base += 32 * Unroll) {
    uint4 words[Unroll];
    std::uint32_t first_slot[Unroll];
    std::uint32_t end_slot[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      const std::uint32_t k = base + static_cast<std::uint32_t>(u * 32 + lane);
      // The last lane whose exclusive prefix is <= k holds granule k: prefixes never decrease, and
      // a lane with no granules shares its prefix with the next lane, which is then the later one
      // (k < total rules out an empty last lane).
      int owner = 0;
#pragma unroll
      for (int step = 16; step > 0; step /= 2) {
        const std::uint32_t prefix = __shfl_sync(all_lanes, exclusive, owner + step);
        if (prefix <= k) owner += step;
      }
      const std::uint32_t owner_source = __shfl_sync(all_lanes, source, owner);
      const std::uint32_t owner_window = __shfl_sync(all_lanes, window, owner);
      const std::uint32_t g = k - __shfl_sync(all_lanes, exclusive, owner);  // the granule's index in its cell
      first_slot[u] = 0;
      end_slot[u] = 0;
      words[u] = make_uint4(0, 0, 0, 0);
      if (k < total) {
        const std::uint32_t head = owner_window & (granule - 1);
        const std::uint32_t past = head + (owner_window >> 3) - g * granule;  // > 0 for every granule of the cell
        first_slot[u] = g == 0 ? head : 0;
        end_slot[u] = past < granule ? past : granule;
        words[u] = __ldcs(reinterpret_cast<const uint4*>(table.offsets + owner_source) + g);
      }
    }
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      const std::uint32_t pairs[4] = {words[u].x, words[u].y, words[u].z, words[u].w};
#pragma unroll
      for (int slot = 0; slot < granule; ++slot) {
        // The result unused and the increment the constant 1: the hardware merges a warp's
        // increments of one word (see add_to_copy in block_histogram.cuh).
        const std::uint32_t offset = (pairs[slot / 2] >> (16 * (slot % 2))) & 0xffffu;
        if (first_slot[u] <= static_cast<std::uint32_t>(slot) && static_cast<std::uint32_t>(slot) < end_slot[u]) {
          if constexpr (Sliced) {
            // Below the slice, the difference wraps past it.
            if (offset - slice.first < slice.bins) atomicAdd(copy + (offset - slice.first), 1u);
          } else {
            atomicAdd(copy + offset, 1u);
          }
        }
      }
    }
  }
}

/// The block's share of one chunk: work units [work_lo, work_hi) (see work_before_cell), counted
/// bucket by bucket into the shared `copy` (min(num_bins, slice.bins) counters, zero on entry and
/// left zero) and added to `counts`; `Sliced`: only each bucket's bins in `slice`. Every thread of
/// the block must call it.
/// Within a bucket each warp takes an equal run of the block's work there and walks the cells that
/// hold it, 32 at a time. (Handing out 32 cells a warp instead starved most warps when cells are
/// whole tiles, as with sorted input: a block's share of 2^28 sorted samples is about 280 cells,
/// 9 warps' worth; splitting samples alone starved them in sparse buckets.)
template <int Threads, int Unroll, bool Sliced, class Counter>
__device__ __forceinline__ void count_block_share(const cell_table& table, std::uint64_t work_lo,
                                                  std::uint64_t work_hi, std::int64_t num_bins, std::uint32_t* copy,
                                                  Counter* counts, bucket_slice slice) {
  if (work_lo >= work_hi) return;  // the same for every thread of the block
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  constexpr int warps = Threads / 32;
  const work_point start = point_at_work(table, work_lo, 0, table.cells + 1);
  const work_point end = point_at_work(table, work_hi, start.cell, table.cells + 1);
  const std::int64_t last_cell = end.cell < table.cells ? end.cell : table.cells - 1;
  for (std::int64_t bucket = start.cell / table.tiles; bucket <= last_cell / table.tiles; ++bucket) {
    const std::int64_t bucket_first = bucket * table.tiles;       // the bucket's cells
    const std::int64_t bucket_past = bucket_first + table.tiles;  // <= cells: first[cells] is the chunk's total
    // Skipped (with the flush) where the block has no samples in the bucket, only walking.
    const std::uint32_t first_position = table.first[bucket_first] > start.position ? table.first[bucket_first] : start.position;
    const std::uint32_t past_position = table.first[bucket_past] < end.position ? table.first[bucket_past] : end.position;
    if (first_position >= past_position) continue;  // the same for every thread of the block

    const std::uint64_t bucket_lo = work_before_cell(table, bucket_first) > work_lo ? work_before_cell(table, bucket_first) : work_lo;
    const std::uint64_t bucket_hi = work_before_cell(table, bucket_past) < work_hi ? work_before_cell(table, bucket_past) : work_hi;
    const std::uint64_t share = bucket_hi - bucket_lo;  // > 0: the block has samples here
    const std::uint64_t warp_lo = bucket_lo + share * warp / warps;
    const std::uint64_t warp_hi = bucket_lo + share * (warp + 1) / warps;
    if (warp_lo < warp_hi) {  // the same for every lane of the warp
      const work_point from = point_at_work(table, warp_lo, bucket_first, bucket_past + 1);
      const work_point to = point_at_work(table, warp_hi, from.cell, bucket_past + 1);
      // The cell of warp_hi may be the next bucket's first, where the clipped range is empty.
      const std::int64_t warp_last = to.cell < bucket_past ? to.cell : bucket_past - 1;
      if (from.position < to.position) {
        // The next 32 cells' bounds are read before this 32's samples are counted, so the walk
        // does not wait on them in turn (cells of 14 samples on uniform data at 2^24 bins).
        cell_bounds bounds = read_cell_bounds(table, from.cell + lane, warp_last);
        for (std::int64_t chunk = from.cell; chunk <= warp_last; chunk += 32) {
          const cell_bounds next = read_cell_bounds(table, chunk + 32 + lane, warp_last);
          count_cells<Unroll, Sliced>(table, chunk, bounds, from.position, to.position, copy, slice);
          bounds = next;
        }
      }
    }
    __syncthreads();  // the bucket is counted
    // The last bucket may be partial: only bins below num_bins exist.
    const std::int64_t bucket_begin = bucket * tuning::bucket_bins + slice.first;
    const std::int64_t bins_here = num_bins - bucket_begin < slice.bins ? num_bins - bucket_begin : slice.bins;
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
