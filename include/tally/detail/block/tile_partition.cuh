// What one block of the partitioned strategy's first pass does with one tile of samples: map each
// sample to its bin, split the bin into a bucket (a range of 2^15 bins) and a 16-bit offset within
// it, group the tile's offsets by bucket in shared memory and write them out in one coalesced
// copy, with the tile's count and start per bucket in the bucket-major cell tables.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include <cub/block/block_scan.cuh>
#include <cuda_pipeline.h>

#include "tally/bins.hpp"
#include "tally/detail/tuning/large_bins_tuning.hpp"

namespace tally::detail {

/// Loads a sample that is read once, with the streaming hint (__ldcs knows unsigned integers of
/// each width; the bits come back as the sample type).
template <class Sample>
__device__ __forceinline__ Sample load_streaming(const Sample* p) {
  using bits = std::conditional_t<sizeof(Sample) == 1, unsigned char,
                                  std::conditional_t<sizeof(Sample) == 4, unsigned int, unsigned long long>>;
  static_assert(sizeof(bits) == sizeof(Sample));
  const bits raw = __ldcs(reinterpret_cast<const bits*>(p));
  Sample value;
  memcpy(&value, &raw, sizeof(value));
  return value;
}

/// Where one tile's results go in global memory (see large_bins_layout.hpp).
struct partition_output {
  std::uint16_t* offsets;     ///< tile t's offsets start at t * partition_tile
  std::uint32_t* cell_count;  ///< cell (bucket b, tile t) at b * tiles + t: the tile's samples in b
  std::uint16_t* cell_start;  ///< same cells: where b's offsets start within the tile's
  std::int64_t tiles;
  int buckets;
};

/// A sample's rank among the tile's samples of its bucket, from the bucket's shared counter. In
/// each of `Rounds` rounds the lanes whose bucket is that of the first lane still waiting take
/// consecutive ranks from one atomic by that lane; the lanes left after that take one atomic each.
/// A returning shared atomic per lane on one word would serialize up to 32 deep: sorted input and
/// one hot bin (one round), two hot buckets or a bucket holding most samples where the first lane
/// happens to be elsewhere (loguniform: 3 in 4 samples in bucket 0 at 2^20 bins; the second
/// round). Ranks come in any order between warps, which is fine: only how many samples a bucket
/// gets matters, not which slot each one lands in. Every lane of the warp must call it; `bin` < 0
/// means left out.
/// The leader's atomic names the leader's own bucket, not the bucket it shuffled to every lane:
/// an atomic on an address the compiler knows to be the same in every lane gets wrapped in the
/// compiler's own warp aggregation (a vote, two population counts, a multiply, a shuffle and a
/// branch), which this function already is: about a dozen instructions more a round.
template <int Rounds>
__device__ __forceinline__ std::uint32_t rank_in_bucket(int bin, std::uint32_t* bucket_count) {
  constexpr unsigned all_lanes = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int bucket = bin >> tuning::bucket_bits;
  bool waiting = bin >= 0;
  unsigned waiting_lanes = __ballot_sync(all_lanes, waiting);
  std::uint32_t rank = 0;
#pragma unroll
  for (int round = 0; round < Rounds; ++round) {
    if (waiting_lanes == 0) return rank;  // the same in every lane
    const int leader = __ffs(static_cast<int>(waiting_lanes)) - 1;
    const int leader_bucket = __shfl_sync(all_lanes, bucket, leader);
    const bool joins = waiting && bucket == leader_bucket;  // the leader joins its own group
    const unsigned joined = __ballot_sync(all_lanes, joins);
    std::uint32_t base = 0;
    if (lane == leader) base = atomicAdd(bucket_count + bucket, static_cast<std::uint32_t>(__popc(joined)));
    base = __shfl_sync(all_lanes, base, leader);
    if (joins) {
      rank = base + static_cast<std::uint32_t>(__popc(joined & ((1u << lane) - 1u)));
      waiting = false;
    }
    waiting_lanes &= ~joined;
  }
  return waiting ? atomicAdd(bucket_count + bucket, 1u) : rank;
}

/// 16-byte words of a partition block's two per-bucket arrays (counts, starts: a word each per
/// bucket), rounded up so that what follows them in dynamic shared memory is 16-byte aligned.
__host__ __device__ constexpr std::int64_t partition_bucket_words(std::int64_t buckets) { return (buckets * 2 + 3) / 4; }

/// The shared memory of a partition block besides its per-bucket arrays (dynamic: 2 x 4 bytes per
/// bucket): the staged offsets of one tile, 16-byte aligned for the copy out, and the scan's.
template <int Threads>
struct partition_shared {
  using scan = cub::BlockScan<std::uint32_t, Threads>;
  alignas(16) std::uint16_t staging[tuning::partition_tile];
  typename scan::TempStorage scan_storage;
};

/// Copies one whole tile of samples from global to shared memory asynchronously (16-byte
/// cp.async copies, no registers held), as one committed batch of this thread's copies: wait for
/// it with __pipeline_wait_prior, then a barrier, before reading `staged`. Both pointers 16-byte
/// aligned. Every thread of the block must call it.
template <class Sample>
__device__ __forceinline__ void stage_tile_async(Sample* staged, const Sample* tile_samples) {
  constexpr int words = static_cast<int>(tuning::partition_tile * sizeof(Sample) / 16);
  static_assert(tuning::partition_tile * sizeof(Sample) % 16 == 0);
  for (int w = static_cast<int>(threadIdx.x); w < words; w += static_cast<int>(blockDim.x)) {
    __pipeline_memcpy_async(reinterpret_cast<uint4*>(staged) + w, reinterpret_cast<const uint4*>(tile_samples) + w, 16);
  }
  __pipeline_commit();
}

/// Whether a mapper searches edges in memory for a sample's bin (range_bin_mapper): too dear to
/// map a sample twice.
template <class Mapper>
inline constexpr bool searches_edges = false;
template <class Sample>
inline constexpr bool searches_edges<range_bin_mapper<Sample>> = true;

/// Partitions tile `tile` (`size` samples from `tile_samples`, at most partition_tile) into
/// `out`; returns how many of its samples this thread left out. `Staged`: `tile_samples` is a whole
/// tile's copy in shared memory (stage_tile_async; `size` is partition_tile), not the input in
/// global memory, and no sample needs a bounds check. Every thread
/// of the block must call it. Calls may follow each other with no barrier between them: a call's
/// last shared-memory reads (the staging buffer, in the copy out) come before the next call's
/// first barrier, and the next call writes the staging buffer only after it; the counts and starts
/// it zeroes and rewrites were last read before the previous call's last barrier.
/// `bucket_count` and `bucket_start` are shared arrays of out.buckets words.
template <int Threads, int Items, bool Staged, class Sample, class Mapper>
__device__ __forceinline__ std::uint32_t partition_tile(const Sample* tile_samples, int size, std::int64_t tile,
                                                        const Mapper& map, const partition_output& out,
                                                        partition_shared<Threads>& shared,
                                                        std::uint32_t* bucket_count, std::uint32_t* bucket_start) {
  static_assert(Threads * Items == tuning::partition_tile, "a tile is what the block holds in registers");
  const int thread = static_cast<int>(threadIdx.x);
  for (int b = thread; b < out.buckets; b += Threads) bucket_count[b] = 0;
  __syncthreads();  // the counters are zero

  // Bins below 2^26 (max_partitioned_bins) travel as ints, and ranks, below partition_tile <=
  // 2^16, two to a register: fewer registers, which keeps the kernel within the 64 of two blocks
  // a multiprocessor without spilling.
  static_assert(tuning::partition_tile <= 65536 && Items % 2 == 0 && tuning::partition_tile % 8 == 0);
  int bins[Items];
  std::uint32_t rank_pairs[Items / 2];
  std::uint32_t left_out = 0;
  // Samples are loaded load_group at a time, all in flight at once, then ranked: sample
  // j * Threads + thread, so each warp reads 32 consecutive samples (coalesced) and the samples of
  // sorted input share buckets across a warp. Groups of half the items keep the loaded samples,
  // bins and ranks within the registers.
  constexpr int load_group = Items / 2;
#pragma unroll
  for (int group = 0; group < Items; group += load_group) {
    Sample x[load_group];
#pragma unroll
    for (int g = 0; g < load_group; ++g) {
      const int i = (group + g) * Threads + thread;
      if constexpr (Staged) {
        x[g] = tile_samples[i];
      } else {
        x[g] = i < size ? load_streaming(tile_samples + i) : Sample{};
      }
    }
#pragma unroll
    for (int g = 0; g < load_group; ++g) {
      const int j = group + g;
      int bin = -1;
      if (Staged || j * Threads + thread < size) {
        bin = static_cast<int>(map(x[g]));
        if constexpr (!maps_every_sample<Mapper>) left_out += bin < 0 ? 1u : 0u;
      }
      bins[j] = bin;
      const std::uint32_t rank = rank_in_bucket<tuning::partition_rank_rounds>(bin, bucket_count);
      if (j % 2 == 0) {
        rank_pairs[j / 2] = rank;
      } else {
        rank_pairs[j / 2] |= rank << 16;
      }
    }
  }
  __syncthreads();  // every sample has its rank: the counts are final

  // Exclusive scan of the counts into bucket starts: each thread takes a run of consecutive
  // buckets, the block scans the runs' sums. The cell tables get the counts and starts.
  const int per_thread = (out.buckets + Threads - 1) / Threads;
  const int first = thread * per_thread;
  const int last = first + per_thread < out.buckets ? first + per_thread : out.buckets;
  std::uint32_t run_sum = 0;
  for (int b = first; b < last; ++b) run_sum += bucket_count[b];
  std::uint32_t running = 0;
  std::uint32_t tile_total = 0;
  typename partition_shared<Threads>::scan(shared.scan_storage).ExclusiveSum(run_sum, running, tile_total);
  for (int b = first; b < last; ++b) {
    const std::uint32_t count = bucket_count[b];
    bucket_start[b] = running;
    const std::int64_t cell = b * out.tiles + tile;
    out.cell_count[cell] = count;
    out.cell_start[cell] = static_cast<std::uint16_t>(running);  // < partition_tile <= 2^16
    running += count;
  }
  __syncthreads();  // the starts are in

  // A staged tile maps its samples again rather than hold their bins in registers across the
  // scan: a shared-memory load and the mapper cost less than the registers (14 of the 64 two
  // blocks a multiprocessor allow), whose lack spilled the ranking to local memory. Not where
  // mapping is a binary search over edges in memory. The staged buffer is next written (the tile
  // after next, staged by partition_kernel) only after the barrier below.
  constexpr bool map_again = Staged && !searches_edges<Mapper>;
#pragma unroll
  for (int j = 0; j < Items; ++j) {
    const int bin = map_again ? static_cast<int>(map(tile_samples[j * Threads + thread])) : bins[j];
    if (bin >= 0) {
      const int bucket = bin >> tuning::bucket_bits;
      const std::uint32_t rank = (rank_pairs[j / 2] >> (16 * (j % 2))) & 0xffffu;
      shared.staging[bucket_start[bucket] + rank] =
          static_cast<std::uint16_t>(bin & static_cast<int>(tuning::bucket_bins - 1));
    }
  }
  __syncthreads();  // the tile's offsets are staged, grouped by bucket

  // The copy out: whole 16-byte words, then the last few offsets one by one. Only the tile_total
  // staged offsets are written (the rest of the staging buffer holds an older tile's or nothing).
  std::uint16_t* tile_offsets = out.offsets + tile * tuning::partition_tile;  // 14 KiB apart: 16-byte aligned
  const int words = static_cast<int>(tile_total / 8);
  const auto* staged_words = reinterpret_cast<const uint4*>(shared.staging);
  auto* out_words = reinterpret_cast<uint4*>(tile_offsets);
  for (int w = thread; w < words; w += Threads) __stcs(out_words + w, staged_words[w]);
  const int rest = static_cast<int>(tile_total) - words * 8;
  if (thread < rest) tile_offsets[words * 8 + thread] = shared.staging[words * 8 + thread];
  return left_out;
}

}  // namespace tally::detail
