// Warp- and block-level sums built on shuffles: how a kernel turns one value per thread into one
// atomic per warp or per block ("reduce first, then one atomic").
#pragma once

#include <cstdint>

#include <cuda/atomic>

namespace tally::detail {

/// Sum over the 32 lanes of a full warp; every lane gets the total.
template <class T>
__device__ __forceinline__ T warp_sum(T value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

/// Adds each warp's total of `value` to `*target` with one device-scope atomic per warp (skipped
/// when the total is zero). Every thread of the block must call it.
__device__ __forceinline__ void warp_add_to(std::uint64_t value, std::uint64_t* target) {
  const std::uint64_t total = warp_sum(value);
  if ((threadIdx.x % 32) == 0 && total != 0) {
    cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(*target).fetch_add(total, cuda::memory_order_relaxed);
  }
}

/// `value` from the lane `offset` above in a full warp: a shuffle for arithmetic types, the
/// value's own `shuffled_down` for the others (a pair of extremes).
template <class T>
__device__ __forceinline__ T shuffle_down(const T& value, int offset) {
  if constexpr (requires { value.shuffled_down(offset); }) {
    return value.shuffled_down(offset);
  } else {
    return __shfl_down_sync(0xffffffffu, value, offset);
  }
}

/// Combines one value per thread with `combine` over the block; the result is valid in thread 0.
/// `identity` is combine's neutral element; `scratch` needs one slot per warp (at most 32). Every
/// thread of the block must call it, and `scratch` must not be reused before a __syncthreads.
template <class T, class Combine>
__device__ T block_combine(T value, Combine combine, T identity, T* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) value = combine(value, shuffle_down(value, offset));
  const int warp = threadIdx.x / 32;
  const int warps = (blockDim.x + 31) / 32;
  if (threadIdx.x % 32 == 0) scratch[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = static_cast<int>(threadIdx.x) < warps ? scratch[threadIdx.x] : identity;
    for (int offset = 16; offset > 0; offset /= 2) value = combine(value, shuffle_down(value, offset));
  }
  return value;
}

}  // namespace tally::detail
