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
#define TALLY_HISTOGRAM_MIN_BLOCKS 4
#endif
#ifndef TALLY_HISTOGRAM_UNROLL
#define TALLY_HISTOGRAM_UNROLL 2
#endif
inline constexpr int histogram_block_threads = TALLY_HISTOGRAM_BLOCK_THREADS;
/// Blocks per multiprocessor the privatized kernels are compiled to fit, which caps their
/// registers: full occupancy (4 x 512 threads, 32 registers) for 4-byte samples, whose walk fits
/// that without spilling; half for 1- and 8-byte samples, whose 16 or 2 samples per load and
/// general mappers need more registers (measured with -Xptxas -v: spills otherwise).
template <class Sample>
inline constexpr int histogram_min_blocks = sizeof(Sample) == 4 ? TALLY_HISTOGRAM_MIN_BLOCKS : TALLY_HISTOGRAM_MIN_BLOCKS / 2;
/// 16-byte loads each thread issues before it counts them: two (measured on an H100: as fast as
/// four, without spills), one for bytes (16 samples a load already).
template <class Sample>
inline constexpr int histogram_unroll = sizeof(Sample) == 1 ? 1 : TALLY_HISTOGRAM_UNROLL;
/// `replicated` keeps up to this many copies of the bins per block...
inline constexpr int max_replicas = 8;
/// ...within this much shared memory, so several blocks still fit one multiprocessor.
inline constexpr std::size_t replicated_shared_budget = std::size_t{48} << 10;
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
