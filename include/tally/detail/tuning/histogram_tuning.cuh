// Tuning kept apart from logic: block sizes, grid limits and the budget for per-block copies in
// global memory. Values are for sm_90 (H100); they are safe, if not optimal, elsewhere.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tally::detail::tuning {

/// Threads per block of the histogram kernels.
#ifndef TALLY_HISTOGRAM_BLOCK_THREADS
#define TALLY_HISTOGRAM_BLOCK_THREADS 512
#endif
#ifndef TALLY_HISTOGRAM_MIN_BLOCKS
#define TALLY_HISTOGRAM_MIN_BLOCKS 2
#endif
#ifndef TALLY_HISTOGRAM_UNROLL
#define TALLY_HISTOGRAM_UNROLL 4
#endif
inline constexpr int histogram_block_threads = TALLY_HISTOGRAM_BLOCK_THREADS;
/// Blocks per multiprocessor the privatized kernels are compiled to fit (caps their registers):
/// full occupancy keeps enough 16-byte loads in flight to reach the read bandwidth.
inline constexpr int histogram_min_blocks = TALLY_HISTOGRAM_MIN_BLOCKS;
/// 16-byte loads each thread issues before it counts them.
inline constexpr int histogram_unroll = TALLY_HISTOGRAM_UNROLL;
/// Threads per block of the merge and helper kernels.
inline constexpr int merge_block_threads = 256;
/// Global-memory budget for per-block histogram copies (global_privatized, shared_two_phase).
inline constexpr std::size_t block_copies_budget_bytes = std::size_t{512} << 20;
/// A block counts at most this many samples, so its 32-bit private counters cannot overflow.
inline constexpr std::int64_t max_samples_per_block = std::int64_t{1} << 31;
/// Threads per block of the reduction kernels.
inline constexpr int reduce_block_threads = 512;
/// Elements of one find_first_if tile: blocks check for an earlier match between tiles.
inline constexpr int find_tile_items = 8192;

}  // namespace tally::detail::tuning
