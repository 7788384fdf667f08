// The kernels of the large-bin strategies: partitioned's two passes (partition the tiles by
// bucket; count each bucket in shared memory) and radix_sort's two helpers around CUB (samples to
// bin keys; runs to counts). Thin __global__ functions over the block pieces.
#pragma once

#include <cstdint>

#include "tally/bins.hpp"
#include "tally/detail/block/bucket_cells.cuh"
#include "tally/detail/block/tile_partition.cuh"
#include "tally/detail/block/warp_sum.cuh"
#include "tally/detail/tuning/large_bins_tuning.hpp"

namespace tally::detail {

/// partition_tile straight from global memory, as a function of its own: a staged kernel calls it
/// for its one partial tile, and with both kinds of tile inlined its registers spilled. Arguments
/// by value: an address taken for the call would keep them in local memory in the caller too.
template <class Sample, class Mapper, class Ranks>
__device__ __noinline__ std::uint32_t partition_tile_unstaged(const Sample* tile_samples, int size, std::int64_t tile,
                                                              Mapper map, partition_output out,
                                                              partition_shared<tuning::partition_threads>& shared,
                                                              Ranks ranks, cell_group group, int slot) {
  return partition_tile<tuning::partition_threads, tuning::partition_items, false>(tile_samples, size, tile, map, out,
                                                                                   shared, ranks, group, slot);
}

/// partitioned, pass 1: block j of G partitions tiles [j * T / G, (j + 1) * T / G) of the
/// chunk's T, one after the other, each by bucket into `out`, ranking as `Ranking` says
/// (tile_ranking_for(out.buckets)), and writes their cells out out.group_tiles tiles at a time.
/// Dynamic shared memory: partition_smem_layout; when `Staged`, two tile buffers after the rest:
/// each block copies its next whole tile into one (asynchronously) while it partitions the one
/// before from the other, so the reads go on while it ranks, scans and writes. `Staged` needs
/// 16-byte aligned samples (then every tile is: a tile is a multiple of 16 bytes); a tile that is
/// not whole (the chunk's last) is read straight from global memory.
template <class Sample, class Mapper, bool Staged, tile_ranking Ranking>
__global__ void __launch_bounds__(tuning::partition_threads, sizeof(Sample) == 8 ? 1 : 2)
partition_kernel(const Sample* samples, std::int64_t num_samples, Mapper map, partition_output out,
                 std::uint64_t* left_out) {
  constexpr int threads = tuning::partition_threads;
  constexpr int items = tuning::partition_items;
  __shared__ partition_shared<threads> shared;
  extern __shared__ uint4 dynamic_words[];  // uint4: each part is 16-byte aligned
  const partition_smem_layout layout(out.buckets, out.group_tiles);
  auto* const counters = reinterpret_cast<std::uint32_t*>(dynamic_words);
  auto ranks = [&] {
    if constexpr (Ranking == tile_ranking::thread_columns) {
      return thread_column_ranks<threads>(counters);
    } else {
      return block_atomic_ranks{counters, counters + out.buckets, out.buckets};
    }
  }();
  const cell_group group{reinterpret_cast<std::uint32_t*>(dynamic_words + layout.group_count_at),
                         reinterpret_cast<std::uint16_t*>(dynamic_words + layout.group_start_at)};
  // The two tile buffers, `buffer` * partition_tile samples past the first: an offset from the
  // shared array rather than a pointer picked from an array of two, so the compiler still knows
  // the reads are shared-memory loads.
  auto* const buffers = reinterpret_cast<Sample*>(dynamic_words + layout.tiles_at);
  const auto tile_buffer = [&](int buffer) { return buffers + buffer * tuning::partition_tile; };
  // Tile indices fit an int: a chunk has at most 2^28 samples.
  int tile = static_cast<int>(out.tiles * blockIdx.x / gridDim.x);
  const int end_tile = static_cast<int>(out.tiles * (blockIdx.x + 1) / gridDim.x);
  int slot = 0;  // the tile's place in its group of out.group_tiles
  const auto after_tile = [&] {  // the group's cells out when it is full or the block's last
    if (slot + 1 == out.group_tiles || tile + 1 == end_tile) {
      write_cell_group<threads>(group, tile - slot, slot + 1, out);
      slot = 0;
    } else {
      ++slot;
    }
  };
  std::uint32_t mine = 0;  // below 2^28, the samples of a chunk
  if constexpr (Staged) {
    // Whole tiles from the staged copies, then (at most one: the chunk's last) the rest. Two
    // loops rather than one with both kinds of tile in it, which spilled registers.
    const int whole_tiles = static_cast<int>(num_samples / tuning::partition_tile);
    const int staged_end = end_tile < whole_tiles ? end_tile : whole_tiles;
    int buffer = 0;
    if (tile < staged_end) stage_tile_async(tile_buffer(0), samples + std::int64_t{tile} * tuning::partition_tile);
    for (; tile < staged_end; ++tile) {
      // The other buffer was last read by the previous tile's partition_tile, before its barrier
      // after the offsets are staged (a staged tile reads its samples twice: to rank them, and to
      // map them again where it stages their offsets).
      const bool next_staged = tile + 1 < staged_end;
      if (next_staged) {
        stage_tile_async(tile_buffer(buffer ^ 1), samples + std::int64_t{tile + 1} * tuning::partition_tile);
        __pipeline_wait_prior(1);  // this tile's copies are in; the next tile's may still be in flight
      } else {
        __pipeline_wait_prior(0);
      }
      __syncthreads();  // every thread's copies are in
      mine += partition_tile<threads, items, true>(tile_buffer(buffer), tuning::partition_tile, tile, map, out, shared,
                                                   ranks, group, slot);
      after_tile();
      buffer ^= 1;
    }
  }
  for (; tile < end_tile; ++tile) {
    const std::int64_t begin = std::int64_t{tile} * tuning::partition_tile;
    const std::int64_t rest = num_samples - begin;
    const int size = static_cast<int>(rest < tuning::partition_tile ? rest : tuning::partition_tile);
    if constexpr (Staged) {
      mine += partition_tile_unstaged(samples + begin, size, tile, map, out, shared, ranks, group, slot);
    } else {
      mine += partition_tile<threads, items, false>(samples + begin, size, tile, map, out, shared, ranks, group, slot);
    }
    after_tile();
  }
  warp_add_to(mine, left_out);
}

/// partitioned, pass 2: block j of G counts work units [j * W / G, (j + 1) * W / G) of bucket
/// order, where W is the chunk's whole work: its in-range samples (the scanned table's last entry)
/// and cell_work for each cell (work_before_cell). Dynamic shared memory: min(num_bins,
/// slice.bins) counters. `Sliced`: each bucket's bins in `slice` only (bucket_slice).
template <class Counter, bool Sliced>
__global__ void __launch_bounds__(tuning::bucket_threads, 1)
bucket_histogram_kernel(cell_table table, std::int64_t num_bins, Counter* counts, bucket_slice slice) {
  extern __shared__ std::uint32_t copy[];
  const std::int64_t copy_bins = num_bins < slice.bins ? num_bins : slice.bins;
  zero_counters(copy, copy_bins);
  __syncthreads();
  // Below 2^31: 2^28 samples a chunk, and cell_work for each of at most 2^11 x 37450 cells.
  const std::uint64_t whole = work_before_cell(table, table.cells);
  count_block_share<tuning::bucket_threads, tuning::bucket_unroll, Sliced>(
      table, whole * blockIdx.x / gridDim.x, whole * (blockIdx.x + 1) / gridDim.x, num_bins, copy, counts, slice);
}

/// radix_sort, first step: keys[i] = the bin of sample i, or num_bins (a key past every bin,
/// sorted last and never counted) for a sample left out, which is counted in `left_out`.
template <class Sample, class Mapper>
__global__ void bin_keys_kernel(const Sample* samples, std::int64_t num_samples, Mapper map, std::uint32_t* keys,
                                std::uint64_t* left_out) {
  const auto outside = static_cast<std::uint32_t>(map.num_bins());
  std::uint64_t mine = 0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < num_samples;
       i += stride) {
    const std::int64_t bin = map(samples[i]);
    if (bin < 0) ++mine;
    keys[i] = bin < 0 ? outside : static_cast<std::uint32_t>(bin);
  }
  warp_add_to(mine, left_out);
}

/// radix_sort, last step: counts[unique[i]] += lengths[i] for each run of the sorted keys but the
/// left-out key. Within one launch the keys are distinct, so no two threads touch one counter;
/// chunks follow each other on the stream. No atomics: the result is the same every time.
template <class Counter>
__global__ void add_runs_kernel(const std::uint32_t* unique, const std::uint32_t* lengths, const int* num_runs,
                                std::uint32_t num_bins, Counter* counts) {
  const std::int64_t runs = *num_runs;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < runs; i += stride) {
    const std::uint32_t key = unique[i];
    if (key < num_bins) counts[key] += lengths[i];
  }
}

}  // namespace tally::detail
