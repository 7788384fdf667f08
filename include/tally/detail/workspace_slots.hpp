// The layout of a workspace's block of scalar words (tally::gpu::workspace::scalar()): word 0 is
// the public result of the last call; the others belong to the library. Some of them keep a value
// between calls (the workspace sets it when it allocates the block, and every call that uses the
// word puts it back before it finishes), so a call needs no launch of its own to reset them.
#pragma once

#include <cstdint>

namespace tally::detail::scalar_slot {

/// The words in the block (128 bytes; the last seven unused).
inline constexpr int count = 16;
/// The result of the last call: a left-out count, a count, a reduction's bits, an index.
inline constexpr int result = 0;
/// Weighted histograms with `deterministic`: 1 when a weight was too large for the fixed point.
inline constexpr int out_of_range = 1;
/// Weighted histograms: the claims of shared_atomic's warps (walk_claimed_weighted_steps), zeroed
/// with the two words above by the call's one memset.
inline constexpr int weighted_steps_claimed = 2;
/// Reductions whose first finished block stores its fold (reduce_kernels.cuh,
/// first_stores_then_atomics): 0 between calls, 1 while that block stores, 2 once it has.
inline constexpr int fold_started = 3;
/// Those reductions' count of finished blocks: zero between calls.
inline constexpr int fold_blocks_finished = 4;
/// Histograms that zero their own counts: 0 between calls, 1 while a block zeroes them, 2 once it
/// has (block_histogram.cuh, start_output). A launch that dies part-way leaves it at 1 or 2; that
/// takes a sticky CUDA error, after which the workspace must be made anew with its context.
inline constexpr int output_zeroed = 5;
/// Those histograms' count of blocks past their flush: zero between calls.
inline constexpr int output_blocks_finished = 6;
/// find_first_if's running minimum of matching indices: all ones between calls.
inline constexpr int search_minimum = 7;
/// find_first_if's count of finished blocks: zero between calls.
inline constexpr int blocks_finished = 8;

/// The value every word holds when the block is allocated.
constexpr std::uint64_t initial_value(int slot) { return slot == search_minimum ? ~std::uint64_t{0} : 0; }

}  // namespace tally::detail::scalar_slot
