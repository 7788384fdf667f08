// Kernels of reduce, count_if and find_first_if: the seeds' hybrid (block reduction, then one
// atomic per block) and the early-exit search (atomicMin on the index).
#pragma once

#include <cstdint>

#include <cuda/atomic>

#include "tally/detail/block/atomic_combine.cuh"
#include "tally/detail/block/warp_sum.cuh"
#include "tally/reduce.hpp"

namespace tally::detail {

template <class T>
struct reduce_combine_fn {
  reduce_op op;
  __host__ __device__ accumulator_t<T> operator()(accumulator_t<T> a, accumulator_t<T> b) const {
    return reduce_combine<T>(op, a, b);
  }
};

/// Each thread folds its grid-stride share, the block combines, thread 0 does one atomic.
template <class T>
__global__ void block_reduce_atomic_kernel(const T* samples, std::int64_t num_samples, reduce_op op,
                                           accumulator_t<T>* result) {
  using A = accumulator_t<T>;
  __shared__ A scratch[32];
  const reduce_combine_fn<T> combine{op};
  const A identity = reduce_identity<T>(op);
  A mine = identity;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < num_samples;
       i += stride) {
    mine = combine(mine, static_cast<A>(samples[i]));
  }
  const A block_total = block_combine(mine, combine, identity, scratch);
  if (threadIdx.x == 0) atomic_combine(result, block_total, combine);
}

/// count_if's hybrid: per-thread counts, a block sum, one atomicAdd per block.
template <class T, class Predicate>
__global__ void block_count_atomic_kernel(const T* samples, std::int64_t num_samples, Predicate predicate,
                                          std::uint64_t* count) {
  __shared__ std::uint64_t scratch[32];
  std::uint64_t mine = 0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < num_samples;
       i += stride) {
    mine += predicate(samples[i]) ? 1 : 0;
  }
  const auto plus = [](std::uint64_t a, std::uint64_t b) { return a + b; };
  const std::uint64_t block_total = block_combine(mine, plus, std::uint64_t{0}, scratch);
  if (threadIdx.x == 0 && block_total != 0) {
    cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(*count).fetch_add(block_total,
                                                                                 cuda::memory_order_relaxed);
  }
}

/// find_first_if: blocks take tiles in order and skip every tile that starts after a match
/// already found; a match lowers `*first` with an atomic min. `*first` starts at num_samples.
template <class T, class Predicate>
__global__ void find_first_kernel(const T* samples, std::int64_t num_samples, Predicate predicate, int tile_items,
                                  std::uint64_t* first) {
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device> found(*first);
  const std::int64_t num_tiles = (num_samples + tile_items - 1) / tile_items;
  for (std::int64_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    const std::int64_t begin = tile * tile_items;
    if (found.load(cuda::memory_order_relaxed) < static_cast<std::uint64_t>(begin)) return;  // uniform per block
    const std::int64_t end = begin + tile_items < num_samples ? begin + tile_items : num_samples;
    for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      if (predicate(samples[i])) {
        found.fetch_min(static_cast<std::uint64_t>(i), cuda::memory_order_relaxed);
        break;  // later elements of this thread are larger
      }
    }
  }
}

}  // namespace tally::detail
