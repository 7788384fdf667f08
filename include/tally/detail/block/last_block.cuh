// Which block of a launch finishes last: the ticket with which launches that keep words of the
// workspace between calls (zeroing the output, starting a result, a search) put them back.
#pragma once

#include <cstdint>

#include <cuda/atomic>

namespace tally::detail {

/// Thread 0 of each block, once the block is done: takes a ticket from `blocks_finished` (0
/// between calls) and returns true in the last block of the launch, having put the counter back
/// to 0. The acq_rel increment orders each block's writes before its ticket and makes the last
/// block acquire them all.
__device__ __forceinline__ bool last_block_to_finish(std::uint64_t* blocks_finished) {
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device> finished(*blocks_finished);
  if (finished.fetch_add(1, cuda::memory_order_acq_rel) != gridDim.x - 1) return false;
  finished.store(0, cuda::memory_order_relaxed);
  return true;
}

}  // namespace tally::detail
