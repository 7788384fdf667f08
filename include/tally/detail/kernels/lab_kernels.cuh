// The kernels of the seeds' experiments (tally::lab, tally/lab.hpp): atomic contention on global
// or shared memory at a chosen cuda::thread_scope, with or without warp aggregation, and the
// deliberately racy counter and block histogram of `tally race` beside their correct versions.
// Launched only by detail/dispatch/lab_dispatch.cuh.
//
// The racy kernels (racy_counter_kernel, block_histogram_kernel<false>) are wrong on purpose:
// compute-sanitizer racecheck flags the second, and neither belongs in a sanitized test.
#pragma once

#include <cstdint>

#include <cuda/atomic>

#include "tally/lab.hpp"

namespace tally::detail::lab {

using tally::lab::atomic_op;

/// All 32 lanes: every contention kernel runs whole warps (block_threads is a multiple of 32 and
/// every thread makes the same K updates), so the warp intrinsics below always see a full warp.
inline constexpr unsigned full_warp = 0xffffffffu;

__device__ __forceinline__ unsigned lanes_below(unsigned lane) { return (1u << lane) - 1u; }

/// The lanes of `group` (a __match_any_sync mask containing this lane) sum their values; every
/// lane of the group gets the sum. __reduce_add_sync is one instruction from sm_80 on.
__device__ __forceinline__ unsigned group_sum(unsigned group, unsigned value) {
#if __CUDA_ARCH__ >= 800
  return __reduce_add_sync(group, value);
#else
  unsigned sum = 0;
  for (unsigned rest = group; rest != 0; rest &= rest - 1) sum += __shfl_sync(group, value, __ffs(rest) - 1);
  return sum;
#endif
}

__device__ __forceinline__ unsigned group_max(unsigned group, unsigned value) {
#if __CUDA_ARCH__ >= 800
  return __reduce_max_sync(group, value);
#else
  unsigned best = 0;
  for (unsigned rest = group; rest != 0; rest &= rest - 1) best = max(best, __shfl_sync(group, value, __ffs(rest) - 1));
  return best;
#endif
}

/// The old values an exchange returned, summed and squared mod 2^64 (see the exch check).
struct returned_sums {
  unsigned long long sum = 0;
  unsigned long long square_sum = 0;
  __device__ void add(unsigned old) {
    sum += old;
    square_sum += static_cast<unsigned long long>(old) * old;
  }
};

/// One update of `word` with `value`, one atomic, at scope Scope. Returns the old value for exch.
template <atomic_op Op, cuda::thread_scope Scope>
__device__ __forceinline__ unsigned update_word(unsigned& word, unsigned value) {
  cuda::atomic_ref<unsigned, Scope> ref(word);
  if constexpr (Op == atomic_op::add) {
    ref.fetch_add(value, cuda::memory_order_relaxed);  // result unused: may become a RED, no round trip
    return 0;
  } else if constexpr (Op == atomic_op::cas) {
    // The seed's compare-and-swap loop: on failure `seen` becomes the value found, and we retry.
    unsigned seen = ref.load(cuda::memory_order_relaxed);
    while (!ref.compare_exchange_weak(seen, seen + value, cuda::memory_order_relaxed)) {
    }
    return 0;
  } else if constexpr (Op == atomic_op::max) {
    // Stops as soon as the word is already >= value: a larger value landed, ours has nothing to do.
    unsigned seen = ref.load(cuda::memory_order_relaxed);
    while (seen < value && !ref.compare_exchange_weak(seen, value, cuda::memory_order_relaxed)) {
    }
    return 0;
  } else {
    return ref.exchange(value, cuda::memory_order_relaxed);
  }
}

/**
 * One update per lane, warp-aggregated: the lanes on the same word (__match_any_sync on the
 * address) combine and the lowest (add, cas, max) or highest (exch) of them makes one atomic.
 *   add, cas: the group's values are summed (__reduce_add_sync), the leader adds the sum;
 *   max:      the group's maximum (__reduce_max_sync), the leader's CAS-loop max;
 *   exch:     the group's exchanges are linearized in lane order inside the one atomic: the highest
 *             lane exchanges its own value in (the last write wins), the lowest lane "returns" what
 *             the atomic returned and every other lane the value of the lane below it in the group.
 *             The returned values and the final word are then those of lane-ordered exchanges, so
 *             the exch check (each value once, the last write of some thread) holds unchanged.
 * Must be called by the whole warp (full_warp). Returns this lane's old value for exch.
 */
template <atomic_op Op, cuda::thread_scope Scope>
__device__ __forceinline__ unsigned update_word_aggregated(unsigned* words, unsigned address, unsigned value) {
  const unsigned lane = threadIdx.x & 31u;
  const unsigned group = __match_any_sync(full_warp, address);
  const unsigned below = group & lanes_below(lane);
  if constexpr (Op == atomic_op::add || Op == atomic_op::cas) {
    const unsigned sum = group_sum(group, value);
    if (below == 0) update_word<Op, Scope>(words[address], sum);
    return 0;
  } else if constexpr (Op == atomic_op::max) {
    const unsigned best = group_max(group, value);
    if (below == 0) update_word<Op, Scope>(words[address], best);
    return 0;
  } else {
    const unsigned last = 31u - static_cast<unsigned>(__clz(static_cast<int>(group)));
    unsigned old = 0;
    if (lane == last) old = update_word<Op, Scope>(words[address], value);
    const unsigned from_memory = __shfl_sync(group, old, static_cast<int>(last));
    const unsigned previous_lane = below != 0 ? 31u - static_cast<unsigned>(__clz(static_cast<int>(below))) : lane;
    const unsigned previous_value = __shfl_sync(group, value, static_cast<int>(previous_lane));
    return below != 0 ? previous_value : from_memory;
  }
}

/// The value of thread t's i-th update (the layout in tally/lab.hpp); T K < 2^32 keeps it exact.
template <atomic_op Op>
__device__ __forceinline__ unsigned update_value(unsigned t, unsigned i, unsigned threads) {
  if constexpr (Op == atomic_op::add || Op == atomic_op::cas) {
    return 1u + ((t ^ i) & 7u);
  } else {
    return i * threads + t + 1u;
  }
}

/// Thread t's K updates of `words` (A of them): the i-th to (t + i T) mod A, walked by adding
/// T mod A (no division per update). Returns the exchanges' old values (exch).
template <atomic_op Op, cuda::thread_scope Scope, bool Aggregate>
__device__ __forceinline__ returned_sums make_updates(unsigned* words, unsigned addresses, unsigned threads,
                                                      unsigned ops_per_thread) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned step = threads % addresses;
  unsigned address = t % addresses;
  returned_sums returned;
  for (unsigned i = 0; i < ops_per_thread; ++i) {
    const unsigned value = update_value<Op>(t, i, threads);
    unsigned old = 0;
    if constexpr (Aggregate) {
      old = update_word_aggregated<Op, Scope>(words, address, value);
    } else {
      old = update_word<Op, Scope>(words[address], value);
    }
    if constexpr (Op == atomic_op::exch) returned.add(old);
    address += step;
    if (address >= addresses) address -= addresses;
  }
  return returned;
}

/// The exchanges' returned sums, one device atomic per warp (the warp sums them by shuffles first).
__device__ __forceinline__ void add_returned(const returned_sums& mine, unsigned long long* returned) {
  unsigned long long sum = mine.sum;
  unsigned long long square_sum = mine.square_sum;
  for (int offset = 16; offset > 0; offset /= 2) {
    sum += __shfl_xor_sync(full_warp, sum, offset);
    square_sum += __shfl_xor_sync(full_warp, square_sum, offset);
  }
  if ((threadIdx.x & 31u) == 0) {
    using returned_ref = cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>;
    returned_ref(returned[0]).fetch_add(sum, cuda::memory_order_relaxed);
    returned_ref(returned[1]).fetch_add(square_sum, cuda::memory_order_relaxed);
  }
}

/// Global memory: every thread of the grid updates the one array of A words.
template <atomic_op Op, cuda::thread_scope Scope, bool Aggregate>
__global__ void contention_global_kernel(unsigned* words, unsigned addresses, unsigned threads,
                                         unsigned ops_per_thread, unsigned long long* returned) {
  const returned_sums mine = make_updates<Op, Scope, Aggregate>(words, addresses, threads, ops_per_thread);
  if constexpr (Op == atomic_op::exch) add_returned(mine, returned);
}

/**
 * Shared memory: each block zeroes its own A words (dynamic shared memory), makes the same updates
 * as the global kernel there, then folds them into global memory: add and cas by a device-scope add
 * of each non-zero word into `words`, max by a device-scope max, exch by writing the block's words
 * to its own row of `block_words` (blocks x A). The barriers order the zeroing, the updates and the
 * fold; the updates themselves are atomics at scope Scope (block is enough: only this block sees
 * them).
 */
template <atomic_op Op, cuda::thread_scope Scope, bool Aggregate>
__global__ void contention_shared_kernel(unsigned* words, unsigned* block_words, unsigned addresses, unsigned threads,
                                         unsigned ops_per_thread, unsigned long long* returned) {
  extern __shared__ unsigned shared_words[];
  for (unsigned a = threadIdx.x; a < addresses; a += blockDim.x) shared_words[a] = 0;
  __syncthreads();
  const returned_sums mine = make_updates<Op, Scope, Aggregate>(shared_words, addresses, threads, ops_per_thread);
  __syncthreads();
  for (unsigned a = threadIdx.x; a < addresses; a += blockDim.x) {
    const unsigned word = shared_words[a];
    if constexpr (Op == atomic_op::exch) {
      block_words[static_cast<std::size_t>(blockIdx.x) * addresses + a] = word;
    } else if (word != 0) {
      cuda::atomic_ref<unsigned, cuda::thread_scope_device> out(words[a]);
      if constexpr (Op == atomic_op::max) {
        out.fetch_max(word, cuda::memory_order_relaxed);
      } else {
        out.fetch_add(word, cuda::memory_order_relaxed);
      }
    }
  }
  if constexpr (Op == atomic_op::exch) add_returned(mine, returned);
}

/**
 * The seed's counter (000, Part 1): each of `threads` threads adds 1 to *counter once. Racy: a
 * relaxed atomic load, then a relaxed atomic store of the value + 1, the read-modify-write of
 * `counter[0] = counter[0] + 1` split in two exactly as the seed's plain code does, but defined in
 * C++ and impossible for the compiler to merge across threads. Correct: a device-scope fetch_add.
 */
template <bool Racy>
__global__ void counter_kernel(unsigned long long* counter, long long threads) {
  const long long t = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= threads) return;
  cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> ref(*counter);
  if constexpr (Racy) {
    const unsigned long long seen = ref.load(cuda::memory_order_relaxed);
    ref.store(seen + 1, cuda::memory_order_relaxed);
  } else {
    ref.fetch_add(1, cuda::memory_order_relaxed);
  }
}

/**
 * The block histogram of seed 001: one sample per thread; each block counts its samples in a
 * shared histogram of `bins` words (block-scope atomics, as the seed's solution), then adds it to
 * `histogram` (device-scope atomics). The zeroing is always followed by a barrier. With Barrier the
 * counting is too (the seed's fix); without it, the seed's bug: a thread may read a bin before the
 * other warps of its block have added to it, and those increments are never flushed. The racy read
 * is a relaxed atomic load (defined behaviour, still the race the seed shows).
 */
template <bool Barrier>
__global__ void block_histogram_kernel(const std::int32_t* samples, long long n, unsigned* histogram, int bins) {
  extern __shared__ unsigned block_bins[];
  for (int b = static_cast<int>(threadIdx.x); b < bins; b += static_cast<int>(blockDim.x)) block_bins[b] = 0;
  __syncthreads();
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    cuda::atomic_ref<unsigned, cuda::thread_scope_block>(block_bins[samples[i]]).fetch_add(1, cuda::memory_order_relaxed);
  }
  if constexpr (Barrier) __syncthreads();
  for (int b = static_cast<int>(threadIdx.x); b < bins; b += static_cast<int>(blockDim.x)) {
    const unsigned count =
        cuda::atomic_ref<unsigned, cuda::thread_scope_block>(block_bins[b]).load(cuda::memory_order_relaxed);
    if (count != 0) {
      cuda::atomic_ref<unsigned, cuda::thread_scope_device>(histogram[b]).fetch_add(count, cuda::memory_order_relaxed);
    }
  }
}

}  // namespace tally::detail::lab
