// The compare-and-swap update the reduce kernels use to fold a block's result into the global one:
// tally::atomic_update (tally/atomic.cuh, the seeds' CAS loop for any 4- or 8-byte value) with a
// two-argument combine function (float min/max with tally's NaN rule, for example).
#pragma once

#include <cuda/atomic>

#include "tally/atomic.cuh"

namespace tally::detail {

/// `*target = combine(*target, value)` atomically at device scope; returns the old value.
template <class T, class Combine>
__device__ T atomic_combine(T* target, T value, Combine combine) {
  return tally::atomic_update<cuda::thread_scope_device>(target, [=](T old) { return combine(old, value); });
}

}  // namespace tally::detail
