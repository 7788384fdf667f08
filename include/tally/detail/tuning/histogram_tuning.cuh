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
/// Blocks per multiprocessor the privatized kernels are compiled to fit, which caps their
/// registers (64 for two blocks of 512 threads; half of that, one block, for 1- and 8-byte
/// samples), and the 16-byte loads each thread issues before it counts them: four, one for bytes
/// (16 samples a load already). Measured on an H100 against 4 blocks x 2 loads, 3 x 2 and
/// 1024-thread blocks (results/2026-11-22-h100-tuning): 4 x 2 dips to 0.94 of the read bandwidth
/// at 16384 int32 bins, 3 x 2 and this one hold 0.95-0.97, 1024-thread blocks are slower.
template <class Sample>
inline constexpr int histogram_min_blocks = sizeof(Sample) == 4 ? TALLY_HISTOGRAM_MIN_BLOCKS : (TALLY_HISTOGRAM_MIN_BLOCKS + 1) / 2;
template <class Sample>
inline constexpr int histogram_unroll = sizeof(Sample) == 1 ? 1 : TALLY_HISTOGRAM_UNROLL;
/// Threads per block of packed16, which runs one large block per multiprocessor (65536 bins
/// take 128 KiB), and its 16-byte loads per thread per tile (one for bytes, whose 16 samples a
/// load would otherwise make a tile longer than one period of the packed counters).
inline constexpr int packed_block_threads = 1024;
template <class Sample>
inline constexpr int packed_unroll = sizeof(Sample) == 1 ? 1 : 2;
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

}  // namespace tally::detail::tuning
