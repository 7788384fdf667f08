// The kernels of the lab's GPU experiments (tally::lab, tally/lab.hpp): atomic contention on global
// memory, shared memory or a global slice per block at a chosen cuda::thread_scope, with or without
// warp aggregation, and the deliberately racy counter, naive histogram and block histogram of
// `tally race` beside their correct versions. Launched only by lab_dispatch.cuh.
//
// The racy kernels (counter_kernel<true>, naive_histogram_kernel, block_histogram_kernel<false>) are
// wrong on purpose: compute-sanitizer racecheck flags the last, and none belongs in a sanitized test.
#pragma once

#include <cstddef>
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

/**
 * The atomics on the contended words, one intrinsic per scope: atomicAdd_block / atomicAdd /
 * atomicAdd_system (and atomicCAS_*, atomicExch_*) are relaxed atomics at PTX scope cta / gpu / sys,
 * the operation and scope that cuda::atomic_ref<unsigned, thread_scope_block|device|system> with
 * memory_order_relaxed gives. The difference is the state space: cuda::atomic_ref's inline PTX takes
 * a generic address (`atom.relaxed.cta.add.u32 [generic]`, a generic ATOM in SASS, which resolves the
 * window at run time), while the intrinsics are compiler built-ins, so on a pointer the compiler can
 * trace to `extern __shared__` or to a kernel parameter (after inlining: everything here is
 * __forceinline__) they become `atom.shared.<scope>.*` and `atom.global.<scope>.*` (checked in the
 * PTX of lab.cu, nvcc 13, sm_90: no generic atom is left in the contention kernels). A
 * result left unused (add) is ptxas' to turn into a reduction (RED) with no round trip.
 *
 * Scope on shared memory: a shared word is visible to the threads of its block only (no cluster is
 * launched here, so no other block can map it), so `.gpu` or `.sys` on an `atom.shared` orders it
 * against no more threads than `.cta` does: a wider scope buys nothing there, and relaxed atomics at
 * any of the three scopes need no fence. Whether the hardware then runs the three as the same ATOMS
 * is what the shared rows of the three scopes measure.
 */
template <cuda::thread_scope Scope>
struct scoped_atomic;

// One specialization per scope: the intrinsics of a scope are the device-scope ones with the
// scope's suffix (atomicAdd_block, atomicAdd, atomicAdd_system).
#define TALLY_LAB_SCOPED_ATOMIC(scope, suffix)                                                           \
  template <>                                                                                             \
  struct scoped_atomic<scope> {                                                                           \
    static __device__ __forceinline__ unsigned add(unsigned* word, unsigned value) {                     \
      return atomicAdd##suffix(word, value);                                                              \
    }                                                                                                     \
    static __device__ __forceinline__ unsigned cas(unsigned* word, unsigned expected, unsigned desired) { \
      return atomicCAS##suffix(word, expected, desired);                                                  \
    }                                                                                                     \
    static __device__ __forceinline__ unsigned exch(unsigned* word, unsigned value) {                    \
      return atomicExch##suffix(word, value);                                                             \
    }                                                                                                     \
  };
TALLY_LAB_SCOPED_ATOMIC(cuda::thread_scope_block, _block)
TALLY_LAB_SCOPED_ATOMIC(cuda::thread_scope_device, )
TALLY_LAB_SCOPED_ATOMIC(cuda::thread_scope_system, _system)
#undef TALLY_LAB_SCOPED_ATOMIC

/// The first guess of a compare-and-swap loop: a volatile load (ld.volatile in the word's state
/// space; PTX treats it as a relaxed load). A stale guess only costs one failed swap, which returns
/// the word's value for the next try.
__device__ __forceinline__ unsigned first_guess(const unsigned* word) {
  return *static_cast<const volatile unsigned*>(word);
}

/// One update of `*word` with `value`, one atomic (or a CAS loop), at scope Scope. Returns the old
/// value for exch.
template <atomic_op Op, cuda::thread_scope Scope>
__device__ __forceinline__ unsigned update_word(unsigned* word, unsigned value) {
  using atomic = scoped_atomic<Scope>;
  if constexpr (Op == atomic_op::add) {
    atomic::add(word, value);  // result unused: may become a RED, no round trip
    return 0;
  } else if constexpr (Op == atomic_op::cas) {
    // A compare-and-swap loop: on failure the swap returns the value found, and we retry.
    unsigned seen = first_guess(word);
    for (;;) {
      const unsigned found = atomic::cas(word, seen, seen + value);
      if (found == seen) break;
      seen = found;
    }
    return 0;
  } else if constexpr (Op == atomic_op::max) {
    // Max as a CAS loop (not atomicMax): stops as soon as the word is already >= value, a
    // larger value landed and ours has nothing to do.
    unsigned seen = first_guess(word);
    while (seen < value) {
      const unsigned found = atomic::cas(word, seen, value);
      if (found == seen) break;
      seen = found;
    }
    return 0;
  } else {
    return atomic::exch(word, value);
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
    if (below == 0) update_word<Op, Scope>(words + address, sum);
    return 0;
  } else if constexpr (Op == atomic_op::max) {
    const unsigned best = group_max(group, value);
    if (below == 0) update_word<Op, Scope>(words + address, best);
    return 0;
  } else {
    const unsigned last = 31u - static_cast<unsigned>(__clz(static_cast<int>(group)));
    unsigned old = 0;
    if (lane == last) old = update_word<Op, Scope>(words + address, value);
    const unsigned from_memory = __shfl_sync(group, old, static_cast<int>(last));
    const unsigned previous_lane = below != 0 ? 31u - static_cast<unsigned>(__clz(static_cast<int>(below))) : lane;
    const unsigned previous_value = __shfl_sync(group, value, static_cast<int>(previous_lane));
    return below != 0 ? previous_value : from_memory;
  }
}

/// The value of thread t's i-th update (the layout in tally/lab/contention.hpp); T K < 2^32 keeps it exact.
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
      old = update_word<Op, Scope>(words + address, value);
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
    atomicAdd(returned, sum);  // device scope, relaxed: atom.global, as the contended words
    atomicAdd(returned + 1, square_sum);
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
 * Global memory, a slice per block (a per-block histogram privatized in global memory): block b
 * updates only its own A words, `words[b A .. (b + 1) A)` (the host zeroed them), with the global
 * kernel's addresses and values. No other block touches the slice during the kernel and the host
 * reads it after the kernel, so block scope is enough and legal here: the case where narrowing the
 * scope pays (or not), on the same global memory as the device-scope rows.
 */
template <atomic_op Op, cuda::thread_scope Scope, bool Aggregate>
__global__ void contention_global_private_kernel(unsigned* words, unsigned addresses, unsigned threads,
                                                 unsigned ops_per_thread, unsigned long long* returned) {
  unsigned* const slice = words + static_cast<std::size_t>(blockIdx.x) * addresses;
  const returned_sums mine = make_updates<Op, Scope, Aggregate>(slice, addresses, threads, ops_per_thread);
  if constexpr (Op == atomic_op::exch) add_returned(mine, returned);
}

/**
 * Shared memory: each block zeroes its own A words (dynamic shared memory), makes the same updates
 * as the global kernel there, then folds them into global memory: add and cas by a device-scope add
 * of each non-zero word into `words`, max by a device-scope max, exch by writing the block's words
 * to its own row of `block_words` (blocks x A). The barriers order the zeroing, the updates and the
 * fold; the updates themselves are atomics at scope Scope (block is enough: only this block sees
 * them), `atom.shared.*` in PTX (scoped_atomic), and so is the fold into global memory
 * (`atom.global.*`: atomicAdd, and atomicMax for max, which is what folding maxima needs).
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
      if constexpr (Op == atomic_op::max) {
        atomicMax(words + a, word);
      } else {
        atomicAdd(words + a, word);
      }
    }
  }
  if constexpr (Op == atomic_op::exch) add_returned(mine, returned);
}

/**
 * The racy counter: each of `threads` threads adds 1 to *counter once. Racy: a relaxed atomic
 * load, then a relaxed atomic store of the value + 1, the read-modify-write of an unsynchronized
 * `counter[0] = counter[0] + 1` split in two as plain code does (updates are lost), but defined in
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
 * The naive histogram: one sample per thread, `histogram[bin] = histogram[bin] + 1` with no
 * synchronization. Through a volatile pointer every increment is a real load and a real store the
 * compiler may not merge, so threads that read one bin at the same time write back the same value
 * and lose updates: the data race itself, on purpose.
 */
__global__ void naive_histogram_kernel(const std::int32_t* samples, long long n, unsigned* histogram) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  volatile unsigned* const racy_histogram = histogram;
  const std::int32_t bin = samples[i];
  racy_histogram[bin] = racy_histogram[bin] + 1;
}

/**
 * The block histogram: one sample per thread; each block counts its samples in a shared
 * histogram of `bins` words (block-scope atomics), then adds it to `histogram` (device-scope
 * atomics). The zeroing is always followed by a barrier. With Barrier the counting is too (the
 * fix); without it (the bug) a thread may read a bin before the other warps of its block have
 * added to it, and those increments are never flushed. The racy read is a relaxed atomic load
 * (defined behaviour, still the race).
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
