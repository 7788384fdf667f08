// What one thread does in a weighted histogram: walk its share of the samples and their weights
// (grid-stride, one sample and one weight a step, so any alignment and any size work) and add each
// counted sample's weight to its bin, in double (order-dependent) or as fixed-point words
// (detail/fixed_point_weight.hpp: exact, so order-independent). The bins live in global memory
// (device-scope atomics) or in a block's shared-memory copy (shared-memory atomics), then flushed.
// With warp_aggregated, the lanes of a warp that hold one bin first add their weights with
// shuffles, so that a crowded bin takes one atomic a warp rather than 32 that wait on each other.
// With shared_atomic, a block's copy holds its sums as integers in 32-bit limbs (limb_sum.hpp), so
// that every add is a native integer atomic, which lanes of one bin do not wait on each other for.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda/atomic>

#include "tally/detail/block/block_histogram.cuh"
#include "tally/detail/block/vectorized_walk.cuh"
#include "tally/detail/fixed_point_weight.hpp"
#include "tally/detail/limb_sum.hpp"
#include "tally/detail/tuning/histogram_tuning.cuh"

namespace tally::detail {

/// The fixed-point bins of a weighted histogram as three arrays of num_bins: the low and high
/// words (added modulo 2^64) and the flags of NaN, infinite and out-of-range weights.
struct fixed_point_bins {
  std::uint64_t* low;
  std::uint64_t* high;
  std::uint32_t* flags;

  /// The arrays laid out one after the other from `words` (2 * num_bins words, then the flags).
  __host__ __device__ static fixed_point_bins at(std::uint64_t* words, std::int64_t num_bins) {
    return {words, words + num_bins, reinterpret_cast<std::uint32_t*>(words + 2 * num_bins)};
  }
  /// Bytes taken by `at` for num_bins bins.
  __host__ __device__ static std::size_t bytes(std::int64_t num_bins) {
    return static_cast<std::size_t>(num_bins) * (2 * sizeof(std::uint64_t) + sizeof(std::uint32_t));
  }
};

__device__ __forceinline__ void atomic_add_word(std::uint64_t* word, std::uint64_t value) {
  static_assert(sizeof(unsigned long long) == sizeof(std::uint64_t));
  atomicAdd(reinterpret_cast<unsigned long long*>(word), static_cast<unsigned long long>(value));
}

/// Adds one weight to bin `bin` of `bins` with atomics (shared or global: the same instructions
/// apply to both; on shared memory they are block-local by nature). Zero words are skipped: a
/// weight with a zero low or high part adds nothing there.
__device__ __forceinline__ void add_fixed_weight(const fixed_point_bins& bins, std::int64_t bin, double weight) {
  const fixed_point_weight::fixed_weight f = fixed_point_weight::to_fixed(weight);
  if (f.flags != 0) {
    atomicOr(bins.flags + bin, f.flags);
    return;
  }
  if (f.low != 0) atomic_add_word(bins.low + bin, f.low);
  if (f.high != 0) atomic_add_word(bins.high + bin, f.high);
}

/// Grid-stride walk (for_each_bin): `add(bin, weight)` for each counted sample; returns how many
/// this thread left out.
template <class Sample, class Weight, class Mapper, class Add>
__device__ __forceinline__ std::uint64_t for_each_weighted(const Sample* samples, const Weight* weights,
                                                           std::int64_t num_samples, const Mapper& map, Add add) {
  return for_each_bin(samples, num_samples, map,
                      [&](std::int64_t bin, std::int64_t i) { add(bin, static_cast<double>(weights[i])); });
}

/// The fixed-point words of weights added together (flags travel apart, by atomicOr).
struct fixed_words {
  std::uint64_t low;
  std::uint64_t high;
};

__device__ __forceinline__ double shuffle_from(double value, int lane) { return __shfl_sync(0xffffffffu, value, lane); }
__device__ __forceinline__ fixed_words shuffle_from(fixed_words value, int lane) {
  return {__shfl_sync(0xffffffffu, static_cast<unsigned long long>(value.low), lane),
          __shfl_sync(0xffffffffu, static_cast<unsigned long long>(value.high), lane)};
}
__device__ __forceinline__ double plus(double a, double b) { return a + b; }
/// Modulo 2^64, as the bins add them (detail/fixed_point_weight.hpp: the final sums are in range).
__device__ __forceinline__ fixed_words plus(fixed_words a, fixed_words b) { return {a.low + b.low, a.high + b.high}; }

/**
 * The sum of `value` over the lanes in `peers` (this lane included, all lanes of the warp calling),
 * valid in the lowest lane of `peers`. A tree over each group's lanes in lane order: every lane
 * adds the value of the next lane of its group still in play, then every second one leaves, so a
 * group of k lanes takes ceil(log2 k) rounds of shuffles, all groups at once.
 */
template <class Value>
__device__ __forceinline__ Value sum_over_peers(unsigned peers, Value value) {
  const unsigned lane = threadIdx.x % 32;
  unsigned position = __popc(peers & ((1u << lane) - 1));  // this lane's place in its group
  unsigned later = peers & ~((2u << lane) - 1);            // the group's lanes above this one (2u << 31 is 0)
  while (__any_sync(0xffffffffu, later != 0)) {
    const int next = __ffs(later) - 1;
    const Value theirs = shuffle_from(value, next >= 0 ? next : static_cast<int>(lane));
    if (next >= 0) value = plus(value, theirs);
    later &= ~__ballot_sync(0xffffffffu, (position & 1) != 0);  // odd places are summed into even ones: they leave
    position >>= 1;
  }
  return value;
}

/// The sum of `value` over all 32 lanes, in every lane (a butterfly of shuffles).
template <class Value>
__device__ __forceinline__ Value sum_over_warp(Value value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    value = plus(value, shuffle_from(value, static_cast<int>((threadIdx.x % 32) ^ offset)));
  }
  return value;
}

/// A lane's share of one step of the walks: `Items` samples and their weights, the warp's
/// `Items` x 32 consecutive ones from `base` (sample k of lane l at base + k * 32 + l).
template <int Items, class Sample, class Weight>
struct weighted_step {
  Sample sample[Items]{};
  Weight weight[Items]{};
};

/// Whether every sample of a lane's step from `base` is in range (no test a sample then).
template <int Items>
__device__ __forceinline__ bool whole_step(std::int64_t base, std::int64_t num_samples) {
  return base + (Items - 1) * 32 + static_cast<std::int64_t>(threadIdx.x % 32) < num_samples;
}

/// Issues the loads of a lane's step from `base`, all before any is used; `Whole`: every sample of
/// the step is in range (whole_step), so none is tested.
template <int Items, bool Whole, class Sample, class Weight>
__device__ __forceinline__ void load_weighted_step(const Sample* samples, const Weight* weights,
                                                   std::int64_t num_samples, std::int64_t base,
                                                   weighted_step<Items, Sample, Weight>& step) {
  const unsigned lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < Items; ++k) {
    const std::int64_t i = base + k * 32 + lane;
    if (Whole || i < num_samples) {
      step.sample[k] = samples[i];
      step.weight[k] = weights[i];
    }
  }
}

/// Visits a lane's loaded step from `base` in order: `visit(sample, weight, valid)`, `valid` false
/// past the end (never where `Whole`).
template <int Items, bool Whole, class Sample, class Weight, class Visit>
__device__ __forceinline__ void visit_loaded_step(const weighted_step<Items, Sample, Weight>& step,
                                                  std::int64_t num_samples, std::int64_t base, Visit& visit) {
  if constexpr (Whole && requires { visit.visit_whole_step(step); }) {
    visit.visit_whole_step(step);  // a visitor that takes a whole step at once (limb_copy_visitor)
    return;
  }
  const unsigned lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < Items; ++k) visit(step.sample[k], step.weight[k], Whole || base + k * 32 + lane < num_samples);
}

/// One step of the walks: loaded (all loads before any is used), then visited in order; a whole
/// step without a test a sample.
template <int Items, class Sample, class Weight, class Visit>
__device__ __forceinline__ void visit_weighted_step(const Sample* samples, const Weight* weights,
                                                    std::int64_t num_samples, std::int64_t base, Visit& visit) {
  weighted_step<Items, Sample, Weight> step;
  if (whole_step<Items>(base, num_samples)) {
    load_weighted_step<Items, true>(samples, weights, num_samples, base, step);
    visit_loaded_step<Items, true>(step, num_samples, base, visit);
    return;
  }
  load_weighted_step<Items, false>(samples, weights, num_samples, base, step);
  visit_loaded_step<Items, false>(step, num_samples, base, visit);
}

/**
 * Grid-stride walk by whole warps: each step a lane loads `Items` samples and their weights (a
 * warp's 32 x Items consecutive ones, all loads issued before any is used, so a lane waits for
 * memory once a step, not twice a sample), then calls `visit(sample, weight, valid)` for each, in
 * order; `valid` is false past the end, where every lane still calls (visitors may vote).
 */
template <int Items, class Sample, class Weight, class Visit>
__device__ __forceinline__ void walk_weighted_steps(const Sample* samples, const Weight* weights,
                                                    std::int64_t num_samples, Visit visit) {
  const unsigned lane = threadIdx.x % 32;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x * Items;
  for (std::int64_t base = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + (threadIdx.x - lane)) * Items;
       base < num_samples; base += stride) {
    visit_weighted_step<Items>(samples, weights, num_samples, base, visit);
  }
}

/**
 * walk_weighted_steps whose warps claim their steps: `ClaimSteps` consecutive steps at a time, the
 * next claim taken from `*claimed` (a device word, zero before the launch), so a warp that runs
 * faster takes more of the data, as OpenMP's schedule(dynamic) hands out chunks of a loop. With
 * a fixed share each (the grid-stride walk), a multiprocessor's warps finished far apart and its
 * last ones ran with the other warps' slots empty (docs/performance.md). One atomic a claim.
 */
template <int Items, int ClaimSteps, class Sample, class Weight, class Visit>
__device__ __forceinline__ void walk_claimed_weighted_steps(const Sample* samples, const Weight* weights,
                                                            std::int64_t num_samples, std::uint64_t* claimed,
                                                            Visit visit) {
  constexpr std::int64_t warp_step = std::int64_t{32} * Items;
  constexpr std::int64_t claim = warp_step * ClaimSteps;
  const unsigned lane = threadIdx.x % 32;
  for (;;) {
    std::uint64_t claim_index = 0;
    if (lane == 0) {
      claim_index = cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(*claimed).fetch_add(
          1, cuda::memory_order_relaxed);
    }
    std::int64_t base = static_cast<std::int64_t>(__shfl_sync(0xffffffffu, claim_index, 0)) * claim;
    if (base >= num_samples) return;
    const std::int64_t end = base + claim < num_samples ? base + claim : num_samples;
    for (; base < end; base += warp_step) visit_weighted_step<Items>(samples, weights, num_samples, base, visit);
  }
}

/**
 * walk_weighted_steps that issues the loads of a lane's next step before it visits this one, so
 * that its memory is in flight while the lane works: for kernels that hold few warps a
 * multiprocessor (a large shared copy), where a lane that loads only when it needs its samples
 * leaves the memory system idle between its steps. Twice the step's registers.
 */
template <int Items, class Sample, class Weight, class Visit>
__device__ __forceinline__ void walk_weighted_steps_loading_ahead(const Sample* samples, const Weight* weights,
                                                                  std::int64_t num_samples, Visit visit) {
  const unsigned lane = threadIdx.x % 32;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x * Items;
  std::int64_t base = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + (threadIdx.x - lane)) * Items;
  if (base >= num_samples) return;
  const auto load = [&](std::int64_t from, weighted_step<Items, Sample, Weight>& step) {
    if (whole_step<Items>(from, num_samples)) {
      load_weighted_step<Items, true>(samples, weights, num_samples, from, step);
    } else {
      load_weighted_step<Items, false>(samples, weights, num_samples, from, step);
    }
  };
  weighted_step<Items, Sample, Weight> step;
  load(base, step);
  for (;;) {
    const std::int64_t next_base = base + stride;
    weighted_step<Items, Sample, Weight> next;
    if (next_base < num_samples) load(next_base, next);
    if (whole_step<Items>(base, num_samples)) {
      visit_loaded_step<Items, true>(step, num_samples, base, visit);
    } else {
      visit_loaded_step<Items, false>(step, num_samples, base, visit);
    }
    if (next_base >= num_samples) return;
    step = next;
    base = next_base;
  }
}

/**
 * walk_weighted_steps with the steps counted by whole blocks: every thread of a block takes the
 * same steps (past the end its lanes visit with `valid` false), and after every `Period` of them
 * the whole block calls `every_period()`, which may synchronize the block.
 */
template <int Items, int Period, class Sample, class Weight, class Visit, class EveryPeriod>
__device__ __forceinline__ void walk_weighted_block_steps(const Sample* samples, const Weight* weights,
                                                          std::int64_t num_samples, Visit visit,
                                                          EveryPeriod every_period) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x * Items;
  const std::int64_t warp_offset = static_cast<std::int64_t>(threadIdx.x - threadIdx.x % 32) * Items;
  int steps = 0;
  for (std::int64_t block_base = static_cast<std::int64_t>(blockIdx.x) * blockDim.x * Items; block_base < num_samples;
       block_base += stride) {
    visit_weighted_step<Items>(samples, weights, num_samples, block_base + warp_offset, visit);
    if (++steps == Period) {
      steps = 0;
      every_period();
    }
  }
}

/**
 * Grid-stride walk by whole warps for warp_aggregated: each step a warp loads `Items` x 32
 * samples and their weights (all loads issued before any is used, so a lane waits for memory once
 * a step, not twice a sample). `weigh(bin, weight)` turns a counted sample's weight into a Value
 * (a lane's own work, such as flags). For each 32 samples, each bin gets one `add(bin, value)`
 * with its lanes' values summed: a shuffle and a ballot tell whether neighbouring lanes share
 * bins; none do: each lane adds its own; all do: one butterfly sums the warp; else the lanes are
 * grouped (match_any on `Key`, the bin's type: 32 bits where the bins fit shared memory) and each
 * group sums in a tree. Returns how many this thread left out. Every lane of the block's warps
 * must call it (blockDim.x a multiple of 32).
 */
template <class Value, class Key, int Items, class Sample, class Weight, class Mapper, class Weigh, class Add>
__device__ __forceinline__ std::uint64_t for_each_weighted_in_warps(const Sample* samples, const Weight* weights,
                                                                    std::int64_t num_samples, const Mapper& map,
                                                                    Weigh weigh, Add add) {
  std::uint64_t left_out = 0;
  const unsigned lane = threadIdx.x % 32;
  walk_weighted_steps<Items>(samples, weights, num_samples, [&](Sample sample, Weight weight, bool valid) {
    std::int64_t bin = -1;  // no sample, or one left out
    Value value{};
    if (valid) {
      bin = map(sample);
      if (bin < 0) {
        ++left_out;
      } else {
        value = weigh(bin, static_cast<double>(weight));
      }
    }
    const Key key = static_cast<Key>(bin);
    const bool same_as_below = __shfl_up_sync(0xffffffffu, key, 1) == key && lane > 0 && key >= 0;
    const unsigned same = __ballot_sync(0xffffffffu, same_as_below);
    if (same == 0) {
      if (key >= 0) add(bin, value);
    } else if (same == 0xfffffffeu) {  // every lane holds the bin of lane 0
      const Value total = sum_over_warp(value);
      if (lane == 0) add(bin, total);
    } else {
      const unsigned peers = __match_any_sync(0xffffffffu, key);
      const Value total = sum_over_peers(peers, value);
      if (key >= 0 && (peers & ((1u << lane) - 1)) == 0) add(bin, total);  // the group's lowest lane
    }
  });
  return left_out;
}

/// The fixed-point words of one weight for for_each_weighted_in_warps: a weight that raises a flag
/// (NaN, infinite, out of range) sets it in `bins` at once and adds no words.
__device__ __forceinline__ fixed_words fixed_words_of(const fixed_point_bins& bins, std::int64_t bin, double weight) {
  const fixed_point_weight::fixed_weight f = fixed_point_weight::to_fixed(weight);
  if (f.flags != 0) {
    atomicOr(bins.flags + bin, f.flags);
    return {0, 0};
  }
  return {f.low, f.high};
}

/// Adds summed fixed-point words to bin `bin` of `bins`, skipping zero words.
__device__ __forceinline__ void add_fixed_words(const fixed_point_bins& bins, std::int64_t bin, fixed_words words) {
  if (words.low != 0) atomic_add_word(bins.low + bin, words.low);
  if (words.high != 0) atomic_add_word(bins.high + bin, words.high);
}

/// Adds a block's shared copy of double sums to the global sums: one atomic per non-zero bin
/// (NaN is non-zero, so it reaches the result). Needs a __syncthreads before.
__device__ __forceinline__ void flush_double_copy(const double* copy, std::int64_t num_bins, double* sums) {
  for (std::int64_t bin = threadIdx.x; bin < num_bins; bin += blockDim.x) {
    const double value = copy[bin];
    if (value != 0.0) atomicAdd(sums + bin, value);
  }
}

/// Adds a block's shared fixed-point copy to the global bins: one atomic per non-zero word.
/// Needs a __syncthreads before.
__device__ __forceinline__ void flush_fixed_copy(const fixed_point_bins& copy, std::int64_t num_bins,
                                                 const fixed_point_bins& bins) {
  for (std::int64_t bin = threadIdx.x; bin < num_bins; bin += blockDim.x) {
    if (copy.low[bin] != 0) atomic_add_word(bins.low + bin, copy.low[bin]);
    if (copy.high[bin] != 0) atomic_add_word(bins.high + bin, copy.high[bin]);
    if (copy.flags[bin] != 0) atomicOr(bins.flags + bin, copy.flags[bin]);
  }
}

/// Atomic adds to a shared-memory word at a shared-window address (__cvta_generic_to_shared's),
/// which the copies compute once: through a generic pointer the compiler rebuilds the window's
/// base before each atomic. The first returns the word's old value.
__device__ __forceinline__ std::uint32_t shared_fetch_add(std::uint32_t address, std::uint32_t value) {
  std::uint32_t old;
  asm volatile("atom.shared.add.u32 %0, [%1], %2;" : "=r"(old) : "r"(address), "r"(value) : "memory");
  return old;
}
__device__ __forceinline__ void shared_add(std::uint32_t address, std::uint32_t value) {
  asm volatile("red.shared.add.u32 [%0], %1;" ::"r"(address), "r"(value) : "memory");
}

/// Adds a limb_sum window to word `word` of each of `Limbs` arrays of 32-bit words that start at
/// shared-window address `limbs_address`, `stride` bytes apart.
template <int Limbs, int Width>
__device__ __forceinline__ void add_to_shared_limbs(std::uint32_t limbs_address, std::uint32_t stride,
                                                    std::uint32_t word, const limb_sum::window<Width>& value) {
  const std::uint32_t first = limbs_address + 4 * word;
  limb_sum::add_window<Limbs>(
      value, [&](int i, std::uint32_t a) { return shared_fetch_add(first + i * stride, a); },
      [&](int i, std::uint32_t a) { shared_add(first + i * stride, a); });
}

/// Adds a lane's `Items` weights of one bin as one value to word `word` of `Limbs` limb arrays
/// (add_to_shared_limbs), where `common_window(w, window)` takes each (a common float's window of
/// two): their windows summed in 128 bits. False, nothing added, where one is not (and for double
/// weights).
template <int Limbs, int Items, class Weight, class CommonWindow>
__device__ __forceinline__ bool add_common_sum_to_shared_limbs(std::uint32_t limbs_address, std::uint32_t stride,
                                                               std::uint32_t word, const Weight (&weight)[Items],
                                                               CommonWindow common_window) {
  if constexpr (std::is_same_v<Weight, float>) {
    fixed_point_weight::wide_int sum = 0;
    bool common = true;
#pragma unroll
    for (int k = 0; k < Items; ++k) {
      limb_sum::window<2> value;
      common = common_window(weight[k], value) && common;
      sum += limb_sum::wide_of(value);
    }
    if (!common) return false;
    add_to_shared_limbs<Limbs>(limbs_address, stride, word, limb_sum::window_of_wide<Limbs>(sum));
    return true;
  } else {
    return false;
  }
}

/// Words from one replica of a limb array to the next: a replica's words (whole rows of 32) and,
/// with more than one replica, one word more, so that a bin's replicas sit in different banks. In
/// `Words`: 32 bits in shared memory, std::size_t where a copy is sized for any number of bins.
template <class Words = std::uint32_t>
__host__ __device__ constexpr Words limb_replica_pitch(std::int64_t num_bins, int replicas) {
  return static_cast<Words>(swizzled_words(num_bins)) + static_cast<Words>(replicas > 1 ? 1 : 0);
}

/// The shared-window address of this lane's replica of the limb arrays at `limbs`: lane l adds to
/// replica l mod `replicas` (a power of two), so the lanes of a warp that hold one bin take turns
/// on `replicas` words, not one: a returning atomic on one word serves its lanes one at a time.
__device__ __forceinline__ std::uint32_t lane_replica_address(const std::uint32_t* limbs, std::uint32_t pitch,
                                                              int replicas) {
  const auto lane = static_cast<std::uint32_t>(threadIdx.x % 32);
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(limbs)) +
         4 * pitch * (lane & static_cast<std::uint32_t>(replicas - 1));
}

/// Reads replica `r` of word `word` of `Limbs` limb arrays `array` words apart, whose replicas are
/// `pitch` words apart, into `limb`; with `Clear`, zeroes the words read.
template <int Limbs, bool Clear = false>
__device__ __forceinline__ void read_limb_replica(std::uint32_t* limbs, std::uint32_t array, std::uint32_t pitch, int r,
                                                  std::uint32_t word, std::uint32_t (&limb)[Limbs]) {
#pragma unroll
  for (int i = 0; i < Limbs; ++i) {
    std::uint32_t& at = limbs[i * array + static_cast<std::uint32_t>(r) * pitch + word];
    limb[i] = at;
    if constexpr (Clear) at = 0;
  }
}

/**
 * A block's shared-memory copy of double sums (shared_atomic): each bin's weights that lie on the
 * grid of 2^-64 (limb_sum::exact_window_of: every float from 2^-41 up) summed exactly in four 32-bit
 * limbs, the rest (NaN, infinities, finer or larger weights) in a double added by compare-and-swap.
 * Bin b sits at word bank_swizzled(b) of swizzled_words(num_bins) (bins 32 apart would share a
 * bank). Each limb array holds `replicas` replicas of those words, `pitch` apart (lane_replica_address);
 * the flush sums a bin's replicas exactly and rounds once.
 */
struct exact_limb_copy {
  double* rest;
  std::uint32_t* limbs;  // exact_limbs arrays of `replicas` replicas, `pitch` words apart
  std::uint32_t words;
  std::uint32_t pitch;
  int replicas;
  std::uint32_t limbs_address;  // of this lane's replica of `limbs` in the shared window

  /// Shared-memory bytes for num_bins bins in `replicas` replicas.
  __host__ __device__ static std::size_t bytes(std::int64_t num_bins, int replicas = 1) {
    return static_cast<std::size_t>(swizzled_words(num_bins)) * sizeof(double) +
           limb_replica_pitch<std::size_t>(num_bins, replicas) * replicas * limb_sum::exact_limbs * 4;
  }
  __device__ static exact_limb_copy at(void* shared, std::int64_t num_bins, int replicas) {
    const auto words = static_cast<std::uint32_t>(swizzled_words(num_bins));
    const std::uint32_t pitch = limb_replica_pitch(num_bins, replicas);
    double* rest = static_cast<double*>(shared);
    auto* limbs = reinterpret_cast<std::uint32_t*>(rest + words);
    return {rest, limbs, words, pitch, replicas, lane_replica_address(limbs, pitch, replicas)};
  }
  /// Zeroes the copy (the block's threads together; a __syncthreads must follow).
  __device__ void zero() const {
    for (std::uint32_t w = threadIdx.x; w < words; w += blockDim.x) rest[w] = 0.0;
    const std::uint32_t limb_words = pitch * static_cast<std::uint32_t>(replicas) * limb_sum::exact_limbs;
    for (std::uint32_t w = threadIdx.x; w < limb_words; w += blockDim.x) limbs[w] = 0;
  }
  /// Adds a float or double weight (a float's window comes from its own bits).
  template <class Weight>
  __device__ __forceinline__ void add(std::uint32_t bin, Weight weight) const {
    const std::uint32_t word = bank_swizzled(bin);
    limb_sum::exact_window<Weight> value;
    // The common float weights add on a path of their own: as a first test inside exact_window_of
    // the compiler merges both paths' windows, and the common one pays for the merge in the SASS.
    if constexpr (std::is_same_v<Weight, float>) {
      if (limb_sum::exact_window_of_common_float(weight, value)) {
        add_to_shared_limbs<limb_sum::exact_limbs>(limbs_address, 4 * pitch * replicas, word, value);
        return;
      }
    }
    if (limb_sum::exact_window_of(weight, value)) {
      add_to_shared_limbs<limb_sum::exact_limbs>(limbs_address, 4 * pitch * replicas, word, value);
    } else {
      atomicAdd(rest + word, static_cast<double>(weight));
    }
  }
  /// Adds a lane's `Items` weights of one bin as one value, where each is a common float
  /// (exact_window_of_common_float): their windows summed in 128 bits (below 2^98), four limbs'
  /// adds for them all. False, nothing added, where one is not (or the weights are doubles).
  template <int Items, class Weight>
  __device__ __forceinline__ bool add_common_sum(std::uint32_t bin, const Weight (&weight)[Items]) const {
    return add_common_sum_to_shared_limbs<limb_sum::exact_limbs>(
        limbs_address, 4 * pitch * replicas, bank_swizzled(bin), weight,
        [](float w, limb_sum::window<2>& value) { return limb_sum::exact_window_of_common_float(w, value); });
  }
  /// Adds each bin's sum, rounded once, to `sums` (one atomic per non-zero bin; NaN is non-zero).
  /// The block's threads together, after a __syncthreads.
  __device__ void flush(std::int64_t num_bins, double* sums) const {
    const std::uint32_t array = pitch * static_cast<std::uint32_t>(replicas);
    for (std::uint32_t w = threadIdx.x; w < words; w += blockDim.x) {
      const std::uint32_t bin = bank_swizzled(w);
      if (bin >= num_bins) continue;
      fixed_point_weight::wide_int sum = 0;  // each replica below 2^127, and so are they together
      for (int r = 0; r < replicas; ++r) {
        std::uint32_t limb[limb_sum::exact_limbs];
        read_limb_replica(limbs, array, pitch, r, w, limb);
        sum += limb_sum::to_wide(limb);
      }
      const double value = fixed_point_weight::scaled_to_double(sum, limb_sum::exact_fraction_bits) + rest[w];
      if (value != 0.0) atomicAdd(sums + bin, value);
    }
  }
};

/**
 * A block's shared-memory copy of deterministic (fixed-point) sums (shared_atomic): each bin's
 * fixed-point values summed exactly in three 32-bit limbs, in replicas, and its flags; laid out and
 * swizzled as exact_limb_copy. Flushed into the global fixed-point words, so every grouping gives
 * one sum.
 */
struct fixed_limb_copy {
  std::uint32_t* limbs;  // fixed_limbs arrays of `replicas` replicas, `pitch` words apart, then the flags
  std::uint32_t words;
  std::uint32_t pitch;
  int replicas;
  std::uint32_t limbs_address;  // of this lane's replica of `limbs` in the shared window

  __host__ __device__ static std::size_t bytes(std::int64_t num_bins, int replicas = 1) {
    return (limb_replica_pitch<std::size_t>(num_bins, replicas) * replicas * limb_sum::fixed_limbs +
            static_cast<std::size_t>(swizzled_words(num_bins))) *
           4;
  }
  __device__ static fixed_limb_copy at(void* shared, std::int64_t num_bins, int replicas) {
    auto* limbs = static_cast<std::uint32_t*>(shared);
    const std::uint32_t pitch = limb_replica_pitch(num_bins, replicas);
    return {limbs, static_cast<std::uint32_t>(swizzled_words(num_bins)), pitch, replicas,
            lane_replica_address(limbs, pitch, replicas)};
  }
  __device__ std::uint32_t* flags() const {
    return limbs + pitch * static_cast<std::uint32_t>(replicas) * limb_sum::fixed_limbs;
  }
  __device__ void zero() const {
    const std::uint32_t all = pitch * static_cast<std::uint32_t>(replicas) * limb_sum::fixed_limbs + words;
    for (std::uint32_t w = threadIdx.x; w < all; w += blockDim.x) limbs[w] = 0;
  }
  /// Adds a float or double weight (a float's fixed-point value from its own bits, in integers).
  template <class Weight>
  __device__ __forceinline__ void add(std::uint32_t bin, Weight weight) const {
    const std::uint32_t word = bank_swizzled(bin);
    limb_sum::window<2> value;
    // On a path of their own, as in exact_limb_copy (merged into fixed_window_of, the common
    // weights would also take its test of the flags).
    if constexpr (std::is_same_v<Weight, float>) {
      if (limb_sum::fixed_window_of_common_float(weight, value)) {
        add_to_shared_limbs<limb_sum::fixed_limbs>(limbs_address, 4 * pitch * replicas, word, value);
        return;
      }
    }
    if (const std::uint32_t raised = limb_sum::fixed_window_of(weight, value); raised != 0) {
      atomicOr(flags() + word, raised);
      return;
    }
    add_to_shared_limbs<limb_sum::fixed_limbs>(limbs_address, 4 * pitch * replicas, word, value);
  }
  /// Adds a lane's `Items` weights of one bin as one value, where each is a common float
  /// (fixed_window_of_common_float): their fixed-point values summed in 128 bits (below 2^66),
  /// three limbs' adds for them all. False, nothing added, where one is not (or the weights are
  /// doubles).
  template <int Items, class Weight>
  __device__ __forceinline__ bool add_common_sum(std::uint32_t bin, const Weight (&weight)[Items]) const {
    return add_common_sum_to_shared_limbs<limb_sum::fixed_limbs>(
        limbs_address, 4 * pitch * replicas, bank_swizzled(bin), weight,
        [](float w, limb_sum::window<2>& value) { return limb_sum::fixed_window_of_common_float(w, value); });
  }
  /// Adds each bin's words to `bins` (one atomic per non-zero word), after a __syncthreads.
  __device__ void flush(std::int64_t num_bins, const fixed_point_bins& bins) const {
    const std::uint32_t array = pitch * static_cast<std::uint32_t>(replicas);
    for (std::uint32_t w = threadIdx.x; w < words; w += blockDim.x) {
      const std::uint32_t bin = bank_swizzled(w);
      if (bin >= num_bins) continue;
      std::uint64_t low = 0;  // the replicas' words, added modulo 2^64 as the global words are
      std::uint64_t high = 0;
      for (int r = 0; r < replicas; ++r) {
        std::uint32_t limb[limb_sum::fixed_limbs];
        read_limb_replica(limbs, array, pitch, r, w, limb);
        std::uint64_t replica_low = 0;
        std::uint64_t replica_high = 0;
        limb_sum::fixed_words_of_limbs(limb, replica_low, replica_high);
        low += replica_low;
        high += replica_high;
      }
      add_fixed_words(bins, bin, {low, high});
      if (flags()[w] != 0) atomicOr(bins.flags + bin, flags()[w]);
    }
  }
};

/// What shared_atomic's kernels do with each sample their walk visits: a valid one is mapped, and
/// `add(bin, weight)` called where it is counted (bins below 2^32); one left out is counted in
/// `left_out`.
template <class Sample, class Weight, class Mapper, class Add>
__device__ __forceinline__ void add_counted(Sample sample, Weight weight, bool valid, const Mapper& map,
                                            std::uint64_t& left_out, const Add& add) {
  if (!valid) return;
  const std::int64_t bin = map(sample);
  if (bin < 0) {
    ++left_out;
  } else {
    add(static_cast<std::uint32_t>(bin), weight);
  }
}

/**
 * What shared_atomic's copy kernels do with the samples their walks visit: a sample's word from
 * the mapper (`left_out_word` where it is left out, counted in `left_out`), its weight added to
 * `copy` there. Where every lane's whole step has its samples in one bin (data of one value, sorted
 * data), each lane adds its step's weights as one value (the copy's add_common_sum) where each is a
 * common float: the lanes of one bin take turns on a word for each add, so a step of `Items`
 * samples costs one turn, not `Items`. The warp decides together (a vote a step): where only some
 * lanes did so (a hot bin among others), the warp ran both paths one after the other, and crowded
 * data of several bins lost up to two thirds. Only copies of few replicas test their steps
 * (tuning::weighted_one_bin_steps_max_replicas): with more, lanes of one bin share a word few at a
 * time, and the test cost spread data more than it saved (docs/performance.md).
 */
template <class Copy, class Mapper>
struct limb_copy_visitor {
  const Copy& copy;
  const Mapper& map;
  int left_out_word;
  std::uint64_t& left_out;

  template <class Weight>
  __device__ __forceinline__ void add(int word, Weight weight) const {
    if (word == left_out_word) {
      ++left_out;
    } else {
      copy.add(static_cast<std::uint32_t>(word), weight);
    }
  }
  template <class Sample, class Weight>
  __device__ __forceinline__ void operator()(Sample sample, Weight weight, bool valid) const {
    if (valid) add(slot_of(map, sample, left_out_word), weight);
  }
  template <int Items, class Sample, class Weight>
  __device__ __forceinline__ void visit_whole_step(const weighted_step<Items, Sample, Weight>& step) const {
    if constexpr (!std::is_same_v<Weight, float>) {  // no step of double weights is one value
#pragma unroll
      for (int k = 0; k < Items; ++k) (*this)(step.sample[k], step.weight[k], true);
      return;
    }
    int word[Items];
    bool one_word = true;
#pragma unroll
    for (int k = 0; k < Items; ++k) {
      word[k] = slot_of(map, step.sample[k], left_out_word);
      if (k > 0) one_word = one_word && word[k] == word[0];
    }
    // The lanes here: a step is whole in every lane but at the data's end, where some vote alone.
    if (copy.replicas <= tuning::weighted_one_bin_steps_max_replicas &&
        __all_sync(__activemask(), one_word && word[0] != left_out_word) &&
        copy.add_common_sum(static_cast<std::uint32_t>(word[0]), step.weight)) {
      return;
    }
#pragma unroll
    for (int k = 0; k < Items; ++k) add(word[k], step.weight[k]);
  }
};

/**
 * A block's cache of the bins it meets, for weighted sums whose bins do not fit its shared memory
 * (shared_atomic past the copy): `slots` slots (a power of two), each a bin's tag and its sum in
 * `Limbs` 32-bit limbs (limb_sum.hpp, added to with integer atomics as a whole copy's are), the
 * limbs in `replicas` replicas as a copy's are (lane l adds to replica l mod replicas, a bin's
 * replicas in different banks). The slots form sets of two; bin b may sit only in the set hash(b)
 * names (a multiplicative hash: bins a stride apart spread over the sets), in whichever of its two
 * slots the first of its samples to find one free claims. A sample whose set two other bins hold
 * adds straight to the global sums; two ways keep a hot bin from missing just because one other
 * bin took its slot first. A claimed slot keeps its bin until the block empties the cache
 * (`empty_into`, after a __syncthreads), so every add to a slot is to its bin's sum, and the sums
 * stay exact in any order. Crowded data (a few hot bins, sorted runs) then adds in shared memory,
 * as a whole copy would; spread data mostly misses, and costs what global atomics cost.
 */
template <int Limbs>
struct bin_cache {
  static constexpr std::uint32_t no_bin = 0xffffffffu;
  std::uint32_t* tags;           // `slots` words, then Limbs arrays of `replicas` replicas, `pitch` words apart
  std::uint32_t slots;
  std::uint32_t pitch;
  int replicas;
  std::uint32_t tags_address;    // of `tags` in the shared window
  std::uint32_t limbs_address;   // of this lane's replica of the limb arrays in the shared window
  int hash_shift;                // 33 - log2(slots): the hash's top bits name one of slots / 2 sets

  /// Words from one replica of a limb array to the next: one more than the slots with more than
  /// one replica, so that a slot's replicas sit in different banks.
  __host__ __device__ static constexpr std::uint32_t replica_pitch(std::uint32_t slots, int replicas) {
    return slots + (replicas > 1 ? 1u : 0u);
  }
  /// Shared-memory bytes for `slots` slots in `replicas` replicas.
  __host__ __device__ static std::size_t bytes(std::uint32_t slots, int replicas = 1) {
    return (static_cast<std::size_t>(slots) +
            static_cast<std::size_t>(replica_pitch(slots, replicas)) * static_cast<std::size_t>(replicas) * Limbs) *
           sizeof(std::uint32_t);
  }
  __device__ static bin_cache at(void* shared, std::uint32_t slots, int replicas) {
    auto* tags = static_cast<std::uint32_t*>(shared);
    const std::uint32_t pitch = replica_pitch(slots, replicas);
    return {tags,
            slots,
            pitch,
            replicas,
            static_cast<std::uint32_t>(__cvta_generic_to_shared(shared)),
            lane_replica_address(tags + slots, pitch, replicas),
            33 - (31 - __clz(static_cast<int>(slots)))};
  }
  /// Marks every slot free and its limbs zero (the block's threads together; a __syncthreads must
  /// follow).
  __device__ void clear() const {
    for (std::uint32_t s = threadIdx.x; s < slots; s += blockDim.x) tags[s] = no_bin;
    const std::uint32_t limb_words = pitch * static_cast<std::uint32_t>(replicas) * Limbs;
    for (std::uint32_t w = threadIdx.x; w < limb_words; w += blockDim.x) tags[slots + w] = 0;
  }
  /// The slot that holds `bin` now, claimed if it was free, or -1 if other bins hold both slots of
  /// its set.
  __device__ __forceinline__ int slot_of(std::uint32_t bin) const {
    const std::uint32_t first = ((bin * 0x9e3779b9u) >> hash_shift) * 2;
    if (holds(first, bin)) return static_cast<int>(first);
    if (holds(first + 1, bin)) return static_cast<int>(first + 1);
    return -1;
  }
  /// Whether slot `slot` holds `bin`, claiming it if it was free.
  __device__ __forceinline__ bool holds(std::uint32_t slot, std::uint32_t bin) const {
    const std::uint32_t address = tags_address + 4 * slot;
    std::uint32_t tag;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(tag) : "r"(address) : "memory");  // other lanes claim as it runs
    if (tag == no_bin) {  // claim it: the old tag is no_bin (now ours) or the bin that won it
      asm volatile("atom.shared.cas.b32 %0, [%1], %2, %3;" : "=r"(tag) : "r"(address), "r"(no_bin), "r"(bin) : "memory");
    }
    return tag == no_bin || tag == bin;
  }
  /// Adds a value to this lane's replica of slot `slot`'s sum.
  template <int Width>
  __device__ __forceinline__ void add(int slot, const limb_sum::window<Width>& value) const {
    add_to_shared_limbs<Limbs>(limbs_address, 4 * pitch * static_cast<std::uint32_t>(replicas),
                               static_cast<std::uint32_t>(slot), value);
  }
  /// Calls visit(bin, limb) for each claimed slot, with its limbs (its replicas summed exactly,
  /// modulo 2^(32 Limbs), where the sum lies), and frees it (the block's threads together, after a
  /// __syncthreads; another must follow before the cache is used again).
  template <class Visit>
  __device__ void empty_into(Visit visit) const {
    std::uint32_t* const limbs = tags + slots;
    const std::uint32_t array = pitch * static_cast<std::uint32_t>(replicas);
    for (std::uint32_t s = threadIdx.x; s < slots; s += blockDim.x) {
      const std::uint32_t bin = tags[s];
      if (bin == no_bin) continue;
      fixed_point_weight::wide_uint sum = 0;  // modulo 2^128: the replicas' sum, whose low limbs are the slot's
      for (int r = 0; r < replicas; ++r) {
        std::uint32_t limb[Limbs];
        read_limb_replica<Limbs, true>(limbs, array, pitch, r, s, limb);
        sum += static_cast<fixed_point_weight::wide_uint>(limb_sum::to_wide(limb));
      }
      std::uint32_t limb[Limbs];
#pragma unroll
      for (int i = 0; i < Limbs; ++i) limb[i] = static_cast<std::uint32_t>(sum >> (32 * i));
      tags[s] = no_bin;
      visit(bin, limb);
    }
  }
};

/// Double sums through a bin_cache: a weight on the grid of 2^-64 (limb_sum::exact_window_of) adds to
/// its bin's slot; any other weight, and any weight whose bin has no slot, adds to the global
/// double. A slot's sum is rounded once when the cache is emptied.
struct exact_cached_sums {
  static constexpr int limbs = limb_sum::exact_limbs;
  double* sums;

  template <class Weight>
  __device__ __forceinline__ void add(const bin_cache<limbs>& cache, std::uint32_t bin, Weight weight) const {
    limb_sum::exact_window<Weight> value;
    if (limb_sum::exact_window_of(weight, value)) {
      if (const int slot = cache.slot_of(bin); slot >= 0) {
        cache.add(slot, value);
        return;
      }
    }
    atomicAdd(sums + bin, static_cast<double>(weight));
  }
  __device__ void empty(const bin_cache<limbs>& cache) const {
    cache.empty_into([this](std::uint32_t bin, const std::uint32_t(&limb)[limbs]) {
      const double value = limb_sum::exact_to_double(limb);
      if (value != 0.0) atomicAdd(sums + bin, value);
    });
  }
};

/// Deterministic sums through a bin_cache: a weight's fixed-point value adds to its bin's slot, or
/// where other bins hold its set to the global words (integers: the same bits either way). A
/// weight that raises a flag sets it in the global flags at once.
struct fixed_cached_sums {
  static constexpr int limbs = limb_sum::fixed_limbs;
  fixed_point_bins bins;

  template <class Weight>
  __device__ __forceinline__ void add(const bin_cache<limbs>& cache, std::uint32_t bin, Weight weight) const {
    limb_sum::window<2> value;
    if (const std::uint32_t raised = limb_sum::fixed_window_of(weight, value); raised != 0) {
      atomicOr(bins.flags + bin, raised);
      return;
    }
    if (const int slot = cache.slot_of(bin); slot >= 0) {
      cache.add(slot, value);
      return;
    }
    // The value's fixed-point words, as fixed_point_weight::to_fixed gives them: its window at
    // limb 0 holds v's two's complement bits.
    const auto v = static_cast<std::int64_t>((static_cast<std::uint64_t>(value.part[1]) << 32) | value.part[0]);
    add_fixed_words(bins, bin, {static_cast<std::uint64_t>(v) & 0xffffffffull, static_cast<std::uint64_t>(v >> 32)});
  }
  __device__ void empty(const bin_cache<limbs>& cache) const {
    cache.empty_into([this](std::uint32_t bin, const std::uint32_t(&limb)[limbs]) {
      std::uint64_t low = 0;
      std::uint64_t high = 0;
      limb_sum::fixed_words_of_limbs(limb, low, high);
      add_fixed_words(bins, bin, {low, high});
    });
  }
};

}  // namespace tally::detail
