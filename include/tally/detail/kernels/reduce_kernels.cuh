// Kernels of reduce, count_if and find_first_if: thin __global__ functions, one per strategy,
// built from the folds (block/reduce_fold.cuh): the naive atomic per sample, an atomic per
// thread, the hybrid (block reduction, one atomic per block), two passes with no atomics,
// the deterministic fixed-point sum, and the early-exit search (atomic min on the index).
#pragma once

#include <cstdint>

#include <cuda/atomic>

#include "tally/detail/block/last_block.cuh"
#include "tally/detail/block/reduce_fold.cuh"
#include "tally/detail/block/warp_fixed_point.cuh"
#include "tally/detail/block/warp_sum.cuh"
#include "tally/detail/fixed_point_sum.hpp"
#include "tally/detail/kernels/common_kernels.cuh"
#include "tally/detail/tuning/reduce_tuning.cuh"

namespace tally::detail {

/// The naive reduction: one device atomic per sample into the one result (count_if: per
/// matching sample). Scalar loads, grid-stride: slow by design, as contended as it gets.
template <class Fold>
__global__ void __launch_bounds__(tuning::reduce_max_block_threads)
atomic_per_element_kernel(const typename Fold::input_type* samples, std::int64_t num_samples, Fold fold,
                          typename Fold::value_type* result) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < num_samples;
       i += stride) {
    const typename Fold::value_type value = fold.lift(samples[i]);
    if (!Fold::skip_identity || value != fold.identity()) fold.atomic(result, value);
  }
}

/// Each thread folds its share of the vectorized walk, then one atomic per thread.
template <int Unroll, class Fold>
__global__ void __launch_bounds__(tuning::reduce_max_block_threads)
atomic_per_thread_kernel(const typename Fold::input_type* samples, std::int64_t num_samples, Fold fold,
                         typename Fold::value_type* result) {
  fold.atomic(result, thread_fold<Unroll>(samples, num_samples, fold));
}

/// The block's fold of its samples, in thread 0: per-thread folds of the vectorized walk, then a
/// shuffle-then-shared-memory block reduction.
template <int Unroll, class Fold>
__device__ __forceinline__ typename Fold::value_type block_fold(const typename Fold::input_type* samples,
                                                                std::int64_t num_samples, const Fold& fold) {
  __shared__ typename Fold::value_type scratch[32];
  return block_combine(thread_fold<Unroll>(samples, num_samples, fold), fold, fold.identity(), scratch);
}

/// Words of the workspace (workspace_slots.hpp) with which one launch starts its result itself,
/// so the call needs no launch before it to set the result to the identity.
struct fold_start_words {
  std::uint64_t* started;          ///< 0 between calls, 1 while a block stores, 2 once it has
  std::uint64_t* blocks_finished;  ///< 0 between calls
};

/// Thread 0 of each block, with its block's fold: the first block to get here stores its fold
/// as the result, the others wait for that store (the first waits on nothing, so the wait ends)
/// and combine theirs into it with the fold's atomic; the last block puts the words back.
template <class Fold>
__device__ __forceinline__ void first_stores_then_atomics(typename Fold::value_type* result,
                                                          typename Fold::value_type value, const Fold& fold,
                                                          const fold_start_words& words) {
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device> started(*words.started);
  std::uint64_t expected = 0;
  if (started.compare_exchange_strong(expected, 1, cuda::memory_order_relaxed)) {
    *result = fold.first_store(value);
    started.store(2, cuda::memory_order_release);
  } else {
    while (started.load(cuda::memory_order_acquire) != 2) __nanosleep(32);
    fold.atomic(result, value);
  }
  if (last_block_to_finish(words.blocks_finished)) started.store(0, cuda::memory_order_relaxed);
}

/// The hybrid (reduce first, then one atomic): the block's fold, one atomic per block, into a
/// result the first finished block sets (first_stores_then_atomics): one launch a call.
template <int Unroll, class Fold>
__global__ void __launch_bounds__(tuning::reduce_max_block_threads)
block_reduce_atomic_kernel(const typename Fold::input_type* samples, std::int64_t num_samples, Fold fold,
                           typename Fold::value_type* result, fold_start_words words) {
  const auto block_total = block_fold<Unroll>(samples, num_samples, fold);
  if (threadIdx.x == 0) first_stores_then_atomics(result, block_total, fold, words);
}

/// two_phase, first pass: each block writes its fold to block_results[blockIdx.x]; no atomics.
template <int Unroll, class Fold>
__global__ void __launch_bounds__(tuning::reduce_max_block_threads)
block_results_kernel(const typename Fold::input_type* samples, std::int64_t num_samples, Fold fold,
                     typename Fold::value_type* block_results) {
  const auto block_total = block_fold<Unroll>(samples, num_samples, fold);
  if (threadIdx.x == 0) block_results[blockIdx.x] = block_total;
}

/// two_phase, second pass: one block of a fixed size combines the block results in a fixed order
/// (thread t takes results t, t + blockDim.x, ..., then the block tree), so a float sum has the
/// same bits on every run with the same number of first-pass blocks.
template <class Fold>
__global__ void __launch_bounds__(tuning::combine_block_threads)
combine_block_results_kernel(const typename Fold::value_type* block_results, int num_results, Fold fold,
                             typename Fold::value_type* result) {
  using V = typename Fold::value_type;
  __shared__ V scratch[32];
  V mine = fold.identity();
  for (int b = static_cast<int>(threadIdx.x); b < num_results; b += blockDim.x) mine = fold(mine, block_results[b]);
  const V total = block_combine(mine, fold, fold.identity(), scratch);
  if (threadIdx.x == 0) *result = total;
}

/// floats[i] = samples[i], widened exactly (float16, bfloat16).
template <class T>
__global__ void widen_to_float_kernel(const T* samples, std::int64_t num_samples, float* floats) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < num_samples; i += stride) {
    floats[i] = static_cast<float>(samples[i]);
  }
}

/// The deterministic sum's one pass. Each warp sums whole chunks (chunk = global warp index,
/// striding over the grid's warps) and its lane 0 adds each chunk's exact sum into the warp's own
/// slots in shared memory; the block then adds its warps' slots, slot by slot, and either adds
/// them to `slots` with 64-bit integer atomics (BlockResults false: block_reduce_atomic) or
/// writes them to `block_slots[j * gridDim.x + blockIdx.x]` (true: two_phase). Integer additions
/// in any order give the same slots, so the launch shape cannot change the result. Dynamic
/// shared memory: warps x digits slots, then one flags word per warp.
template <bool BlockResults, class T>
__global__ void __launch_bounds__(tuning::reduce_max_block_threads)
deterministic_sum_kernel(const T* samples, std::int64_t num_samples, std::int64_t* slots, std::uint32_t* flags,
                         std::int64_t* block_slots, std::uint32_t* block_flags) {
  constexpr int digits = fixed_point::digits<T>;
  extern __shared__ std::int64_t warp_slots[];
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warps = static_cast<int>(blockDim.x / 32);
  auto* warp_flags = reinterpret_cast<std::uint32_t*>(warp_slots + warps * digits);
  std::int64_t* mine = warp_slots + warp * digits;
  for (int j = lane; j < digits; j += 32) mine[j] = 0;
  __syncwarp();  // zeroed by every lane before lane 0 adds

  std::uint32_t lane_flags = 0;
  const vector_split<T> split(samples, num_samples);
  const std::int64_t chunks = (num_samples + chunk_shape<T>::size - 1) / chunk_shape<T>::size;
  const std::int64_t warp_stride = static_cast<std::int64_t>(gridDim.x) * warps;
  for (std::int64_t chunk = static_cast<std::int64_t>(blockIdx.x) * warps + warp; chunk < chunks;
       chunk += warp_stride) {
    T value[chunk_shape<T>::values];
    load_chunk(samples, num_samples, split, chunk, lane, value);
    int exponent = 1;
    const auto sum = warp_chunk_sum(value, lane_flags, exponent);
    if (lane == 0) fixed_point::add_chunk(mine, exponent, sum);  // only lane 0 touches the warp's slots
  }
  lane_flags = __reduce_or_sync(0xffffffffu, lane_flags);
  if (lane == 0) warp_flags[warp] = lane_flags;
  __syncthreads();  // every warp's slots and flags are in

  for (int j = static_cast<int>(threadIdx.x); j < digits; j += blockDim.x) {
    std::int64_t total = 0;
    for (int w = 0; w < warps; ++w) total += warp_slots[w * digits + j];
    if constexpr (BlockResults) {
      block_slots[static_cast<std::int64_t>(j) * gridDim.x + blockIdx.x] = total;
    } else if (total != 0) {
      // Two's complement: adding the int64 as unsigned is the same addition.
      cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(*reinterpret_cast<unsigned long long*>(slots + j))
          .fetch_add(static_cast<unsigned long long>(total), cuda::memory_order_relaxed);
    }
  }
  if (threadIdx.x == 0) {
    std::uint32_t block_flag = 0;
    for (int w = 0; w < warps; ++w) block_flag |= warp_flags[w];
    if constexpr (BlockResults) {
      block_flags[blockIdx.x] = block_flag;
    } else if (block_flag != 0) {
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(*flags).fetch_or(block_flag, cuda::memory_order_relaxed);
    }
  }
}

/// The deterministic sum's last step: with `block_slots` null, rounds `slots` and `flags` (one
/// thread); else first adds the `num_blocks` block results of each slot (one block, any order:
/// they are integers) and ORs the block flags.
template <class T>
__global__ void __launch_bounds__(tuning::combine_block_threads)
deterministic_finish_kernel(const std::int64_t* slots, const std::uint32_t* flags, const std::int64_t* block_slots,
                            const std::uint32_t* block_flags, int num_blocks, T* result) {
  constexpr int digits = fixed_point::digits<T>;
  if (block_slots == nullptr) {
    if (threadIdx.x == 0) *result = fixed_point::round_slots<T>(slots, *flags);
    return;
  }
  __shared__ std::int64_t totals[digits];
  __shared__ std::int64_t scratch[32];
  __shared__ std::uint32_t flag_scratch[32];
  const auto plus = [](std::int64_t a, std::int64_t b) { return a + b; };
  for (int j = 0; j < digits; ++j) {
    std::int64_t part = 0;
    for (int b = static_cast<int>(threadIdx.x); b < num_blocks; b += blockDim.x) {
      part += block_slots[static_cast<std::int64_t>(j) * num_blocks + b];
    }
    const std::int64_t total = block_combine(part, plus, std::int64_t{0}, scratch);
    if (threadIdx.x == 0) totals[j] = total;
    __syncthreads();  // scratch is reused by the next slot
  }
  std::uint32_t part_flags = 0;
  for (int b = static_cast<int>(threadIdx.x); b < num_blocks; b += blockDim.x) part_flags |= block_flags[b];
  const auto bit_or = [](std::uint32_t a, std::uint32_t b) { return a | b; };
  const std::uint32_t all_flags = block_combine(part_flags, bit_or, 0u, flag_scratch);
  if (threadIdx.x == 0) *result = fixed_point::round_slots<T>(totals, all_flags);
}

/// The words find_first_if works with: where its answer goes, and two words of the workspace that
/// keep their values between calls (workspace_slots.hpp): the running minimum of matching indices
/// (all ones between calls) and the count of blocks that finished (zero between calls).
struct find_words {
  std::uint64_t* first;
  std::uint64_t* running_minimum;
  std::uint64_t* blocks_finished;
};

/// find_first_if in one launch, with early exit: blocks take tiles of blockDim.x x Items samples in
/// order and stop at the first tile that starts after a match already found; a match lowers the
/// running minimum with an atomic min. The last block to finish writes the answer (num_samples
/// when nothing matched) and puts both words back, so no launch resets them before the next call.
/// Each thread loads its Items samples of a tile before it tests any (coalesced, Items loads in
/// flight), then reports its first match.
template <int Items, class T, class Predicate>
__global__ void __launch_bounds__(tuning::reduce_max_block_threads)
find_first_kernel(const T* samples, std::int64_t num_samples, Predicate predicate, find_words words) {
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device> found(*words.running_minimum);
  const std::int64_t tile = static_cast<std::int64_t>(blockDim.x) * Items;
  for (std::int64_t begin = blockIdx.x * tile; begin < num_samples; begin += gridDim.x * tile) {
    // A thread that sees an earlier match stops; the others stop at their next tile. The threads
    // of a block need not agree until the barrier below.
    if (found.load(cuda::memory_order_relaxed) < static_cast<std::uint64_t>(begin)) break;
    T value[Items];
#pragma unroll
    for (int k = 0; k < Items; ++k) {
      const std::int64_t i = begin + k * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
      value[k] = i < num_samples ? samples[i] : T{};
    }
    bool matched = false;
#pragma unroll
    for (int k = 0; k < Items; ++k) {
      const std::int64_t i = begin + k * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
      if (!matched && i < num_samples && predicate(value[k])) {
        found.fetch_min(static_cast<std::uint64_t>(i), cuda::memory_order_relaxed);
        matched = true;  // this thread's later samples have larger indices
      }
    }
    if (matched) {
      __threadfence();  // the minimum is visible device-wide before this block reports it finished
      break;
    }
  }
  // The last block: every block's matches are ordered before its increment (fence, barrier, then
  // the acq_rel increment), and the block that takes the last ticket acquires them all.
  __syncthreads();
  if (threadIdx.x != 0 || !last_block_to_finish(words.blocks_finished)) return;
  const std::uint64_t minimum = found.exchange(~std::uint64_t{0}, cuda::memory_order_relaxed);
  *words.first = minimum < static_cast<std::uint64_t>(num_samples) ? minimum : static_cast<std::uint64_t>(num_samples);
}

}  // namespace tally::detail
