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

/// partitioned, pass 1: blocks stride over the chunk's tiles, each partitioned by bucket into
/// `out`. Dynamic shared memory: two words per bucket (counts, starts).
template <class Sample, class Mapper>
__global__ void __launch_bounds__(tuning::partition_threads, sizeof(Sample) == 8 ? 1 : 2)
partition_kernel(const Sample* samples, std::int64_t num_samples, Mapper map, partition_output out,
                 std::uint64_t* left_out) {
  constexpr int threads = tuning::partition_threads;
  __shared__ partition_shared<threads> shared;
  extern __shared__ std::uint32_t bucket_words[];
  std::uint32_t* bucket_count = bucket_words;
  std::uint32_t* bucket_start = bucket_words + out.buckets;
  std::uint64_t mine = 0;
  for (std::int64_t tile = blockIdx.x; tile < out.tiles; tile += gridDim.x) {
    const std::int64_t begin = tile * tuning::partition_tile;
    const std::int64_t rest = num_samples - begin;
    const int size = static_cast<int>(rest < tuning::partition_tile ? rest : tuning::partition_tile);
    mine += partition_tile<threads, tuning::partition_items>(samples + begin, size, tile, map, out, shared, bucket_count,
                                                             bucket_start);
  }
  warp_add_to(mine, left_out);
}

/// partitioned, pass 2: block j of G counts positions [j * total / G, (j + 1) * total / G) of
/// bucket order, where total (the chunk's in-range samples) is the scanned table's last entry.
/// Dynamic shared memory: min(num_bins, 2^15) counters.
template <class Counter>
__global__ void __launch_bounds__(tuning::bucket_threads, 1)
bucket_histogram_kernel(cell_table table, std::int64_t num_bins, Counter* counts) {
  extern __shared__ std::uint32_t copy[];
  const std::int64_t copy_bins = num_bins < tuning::bucket_bins ? num_bins : tuning::bucket_bins;
  zero_block_copy(copy, copy_bins);
  __syncthreads();
  const std::uint64_t total = table.first[table.cells];
  const auto lo = static_cast<std::uint32_t>(total * blockIdx.x / gridDim.x);  // total < 2^32: chunks
  const auto hi = static_cast<std::uint32_t>(total * (blockIdx.x + 1) / gridDim.x);
  count_block_share<tuning::bucket_threads, tuning::bucket_unroll>(table, lo, hi, num_bins, copy, counts);
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
