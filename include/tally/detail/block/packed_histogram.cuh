// The packed16 block histogram: 16-bit counters, two to a 32-bit word of shared memory, so a
// block holds twice the bins that 32-bit counters allow. Counters hand 2^12 to the global counts
// each time they pass a multiple of 2^12, so they can never overflow:
// - the thread whose addition carries a counter over a multiple of 2^12 (atomicAdd returns the
//   old value, so exactly one thread sees each crossing) subtracts 2^12 and adds it to the global
//   counts; one addition is smaller than 2^12, so it crosses at most one multiple;
// - the block moves in tiles with a __syncthreads between periods of at most 2^16 - 2^12 samples.
//   At a barrier every spill of the period is done, so every counter is below 2^12; within a
//   period it climbs by at most the period's samples, so it stays below 2^16.
// A threshold of 2^12 rather than 2^15 makes periods (and barriers, which drain the loads in
// flight) twice as rare; the extra spills are one global atomic per 4096 samples of one bin.
#pragma once

#include <cstdint>

#include "tally/detail/block/block_histogram.cuh"
#include "tally/detail/block/vectorized_walk.cuh"

namespace tally::detail {

/// What a counter hands to the global counts each time it passes a multiple of it: 2^12.
inline constexpr std::uint32_t packed_spill = 0x1000u;

/// Words of a packed copy (half_bins). Bin b is the low half of word b when b < half_bins, else the
/// high half of word b - half_bins: neighbouring bins, often hot together, sit in different words.
__host__ __device__ constexpr std::int64_t packed_words(std::int64_t num_bins) { return (num_bins + 1) / 2; }

/// Samples a block may count between two barriers: every counter is below 2^12 at a barrier, so it
/// stays below 2^16 until the next.
inline constexpr std::int64_t packed_period_samples = 0x10000 - packed_spill;

/// Tiles of `threads` x `unroll` vectors of `items` samples a block may walk between checks; the
/// first period also holds one head and one tail sample per thread.
__host__ __device__ constexpr int packed_tiles_per_period(int threads, int unroll, int items) {
  return static_cast<int>((packed_period_samples - 2 * items) / (static_cast<std::int64_t>(threads) * unroll * items));
}

/// Adds `count` (fewer than packed_spill) to bin `bin` of the packed copy `words`, moving
/// packed_spill to `counts[bin]` if this addition carried the counter over a multiple of it.
/// Everything is 32-bit: a copy fits shared memory, and every instruction per sample shows (on an
/// H100, 65536 int32 bins ran at 0.85 of the read bandwidth with `half_bins` as a 64-bit value,
/// 0.90 with it as an int).
template <class Counter>
__device__ __forceinline__ void add_packed(std::uint32_t* words, int half_bins, Counter* counts, int bin,
                                           std::uint32_t count) {
  const int high = bin >= half_bins ? 1 : 0;
  const int word = bin - high * half_bins;
  const std::uint32_t shift = 16u * static_cast<std::uint32_t>(high);
  const std::uint32_t before = (atomicAdd(words + word, count << shift) >> shift) & 0xffffu;
  if (before / packed_spill != (before + count) / packed_spill) {
    atomicSub(words + word, packed_spill << shift);
    add_to_global_count(counts + bin, Counter{packed_spill});
  }
}

/// Counts this thread's share of the samples into the packed copy (zeroed, `packed_words(num_bins)`
/// words), with the warp-wide vote; returns how many samples it left out. Every thread of the block
/// must call it, with blockDim.x == Threads: it synchronizes the block between periods.
template <int Threads, int Unroll, class Sample, class Counter, class Mapper>
__device__ __forceinline__ std::uint64_t count_packed(const Sample* samples, std::int64_t num_samples,
                                                      const Mapper& map, std::uint32_t* words, Counter* counts) {
  constexpr int items = sample_vector<Sample>::items;
  const int half_bins = static_cast<int>(packed_words(map.num_bins()));  // a shared-memory copy: far below 2^31
  constexpr int tiles_per_period = packed_tiles_per_period(Threads, Unroll, items);
  static_assert(tiles_per_period >= 1, "a tile must fit in one period of the packed counters");
  static_assert(32 * items < packed_spill, "one addition (at most a warp's vector) crosses at most one multiple");
  std::uint32_t left_out = 0;
  const auto add = [&](int bin, std::uint32_t count) { add_packed(words, half_bins, counts, bin, count); };
  const auto visit_one = [&](Sample x) {
    const int bin = static_cast<int>(map(x));
    if (bin < 0) {
      ++left_out;
    } else {
      add(bin, 1);
    }
  };
  const auto visit = [&](const sample_vector<Sample>& v, bool valid) {
    int bins[items];
    left_out += map_vector(map, v, valid, bins);
    if (warp_adds_once(bins, add)) return;
#pragma unroll
    for (int j = 0; j < items; ++j) {
      if (bins[j] >= 0) add(bins[j], 1);
    }
  };
  int tiles = 0;
  const auto end_of_tile = [&] {
    if (++tiles == tiles_per_period) {
      tiles = 0;
      __syncthreads();  // every spill of this period is done before the next period counts
    }
  };
  walk_tiles<Unroll>(samples, num_samples, visit, visit_one, end_of_tile);
  return left_out;
}

/// Adds the packed copy (every counter below 2^12 after the block's last __syncthreads) into the
/// global counts: one device-scope atomic per non-zero counter.
template <class Counter>
__device__ __forceinline__ void add_packed_copy(const std::uint32_t* words, std::int64_t num_bins, Counter* counts) {
  const std::int64_t half_bins = packed_words(num_bins);
  for (std::int64_t word = threadIdx.x; word < half_bins; word += blockDim.x) {
    const std::uint32_t value = words[word];
    const std::uint32_t low = value & 0xffffu;
    const std::uint32_t high = value >> 16;
    if (low != 0) add_to_global_count(counts + word, Counter{low});
    // Only bins below num_bins are ever counted, so word + half_bins < num_bins here.
    if (high != 0) add_to_global_count(counts + word + half_bins, Counter{high});
  }
}

}  // namespace tally::detail
