// Tuning of reduce, count_if and find_first_if kept apart from logic: block sizes, loads in
// flight, the deterministic sum's chunk shape. Values are for sm_90 (H100); safe elsewhere.
#pragma once

#include <cstdint>

namespace tally::detail::tuning {

/// Threads per block of the reduction and count kernels (reduce_options::block_threads overrides).
inline constexpr int reduce_block_threads = 512;
/// The largest block any reduction kernel is compiled for; it caps registers at 64 per thread.
inline constexpr int reduce_max_block_threads = 1024;
/// 16-byte loads each thread has in flight per step of the vectorized walk: four, as the
/// histograms (measured there: enough to reach the read bandwidth on an H100 at full occupancy);
/// two for 8-byte samples, whose folds need more registers (four spilled under the 64-register
/// cap of 1024-thread blocks).
template <class Sample>
inline constexpr int reduce_unroll = sizeof(Sample) == 8 ? 2 : 4;
/// Threads per block of the deterministic sum: 8 warps, each summing its own chunks.
inline constexpr int deterministic_block_threads = 256;
/// Threads of the one block that combines two_phase's block results (a fixed shape, so the
/// combination order depends only on the number of block results).
inline constexpr int combine_block_threads = 1024;
/// find_first_if: samples each thread loads per tile (all in flight before it tests them), threads
/// per block, and resident blocks per multiprocessor at most. Blocks check for an earlier match
/// between tiles of 512 x 16 samples; two blocks a multiprocessor keep 64 KiB of loads in flight,
/// enough for the read bandwidth, and make the first wave small.
/// (A match at 1%: docs/performance.md, "Reductions, find_first_if, weighted histograms")
inline constexpr int find_items_per_thread = 16;
inline constexpr int find_block_threads = 512;
inline constexpr int find_blocks_per_multiprocessor = 2;

}  // namespace tally::detail::tuning
