// The packed16 block histogram: 16-bit counters, two to a 32-bit word of shared memory, so a
// block holds twice the bins that 32-bit counters allow. Counters hand 2^12 to the global counts
// each time they pass a multiple of 2^12, so they can never overflow:
// - the thread whose addition carries a counter over a multiple of 2^12 (atomicAdd returns the
//   old value, so exactly one thread sees each crossing) subtracts 2^12 and adds it to the global
//   counts; one addition is smaller than 2^12, so it crosses at most one multiple;
// - the block moves in tiles with a __syncthreads between periods of at most 2^16 - 2^12 samples.
//   At a barrier every spill of the period is done, so every counter is below 2^12; within a
//   period it climbs by at most the period's samples, so it stays below 2^16.
// A threshold of 2^12 rather than 2^15 makes periods (and barriers, which drain the loads in
// flight) twice as rare; the extra spills are one global atomic per 4096 samples of one bin.
//
// Scan mode. An addition that must return the old value is not merged across the lanes of a warp
// on one word: with half the samples in one bin (geometric), 16 lanes take turns. Additions whose
// result is unused are merged.
// So a block whose first period shows lanes sharing bins (in most vectors, a lane's first sample
// has its neighbour's bin) counts from then on with unchecked additions and, at each period's
// barrier, scans every counter and spills those at 2^12 or more whole, between two barriers. The
// bound is the same: at every barrier every counter is below 2^12 (return mode proves it for the
// first period; the scan restores it after each later one), and a period adds at most
// 2^16 - 2^12. The scan costs a pass over the copy per period, so spread-out data stays in
// return mode.
// (Geometric 0.58 -> 0.81, uniform 0.88 -> 0.75; docs/performance.md, "65536 bins: packed16")
//
// Lean loops. After the first period, 16- and 32-bit samples count whole warp chunks in loops
// with no branch a sample: every addition of a vector issued before any returned value is looked
// at, the rare spills after them. 16-bit samples whose bins are the 65536 values themselves
// (uint16 over [0, 65536), int16 over [-32768, 32768), the value counts that other bins are folded
// from) leave nothing out: a sample is a subtraction, its word and half, the add and (in return
// mode) the spill test, about 15 instructions where the general loop's range tests and branches
// took 28 (docs/performance.md, "packed16: the 65536 values of 16-bit samples"). Other mappers
// add a left-out sample to a slot past the bins (num_bins: a counter of the copy that spills into
// the left-out count like a bin and is read into it at the end), so no sample tests whether it
// was left out: 4-byte samples at 65536 bins 0.67 -> 0.89 of the read bandwidth (docs/
// performance.md, "packed16: a lean loop for every mapper, and a slot for left-out samples").
#pragma once

#include <concepts>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tally/detail/block/block_histogram.cuh"
#include "tally/detail/block/vectorized_walk.cuh"

namespace tally::detail {

/// What a counter hands to the global counts each time it passes a multiple of it: 2^12.
inline constexpr std::uint32_t packed_spill = 0x1000u;

/// Words of a packed copy (half_bins). Bin b is the low half of word b when b < half_bins, else the
/// high half of word b - half_bins: neighbouring bins, often hot together, sit in different words.
/// A block whose samples would crowd banks swizzles its words over them (bank_swizzled, chosen by
/// packed_block_swizzles); with the left-out slot the copy takes packed_copy_words.
__host__ __device__ constexpr std::int64_t packed_words(std::int64_t num_bins) { return (num_bins + 1) / 2; }

/// Samples a block may count between two barriers: every counter is below 2^12 at a barrier, so it
/// stays below 2^16 until the next.
inline constexpr std::int64_t packed_period_samples = 0x10000 - packed_spill;

/// Tiles of `threads` x `unroll` vectors of `items` samples a block may walk between checks; the
/// first period also holds one head and one tail sample per thread.
__host__ __device__ constexpr int packed_tiles_per_period(int threads, int unroll, int items) {
  return static_cast<int>((packed_period_samples - 2 * items) / (static_cast<std::int64_t>(threads) * unroll * items));
}

/// Adds `count` (fewer than packed_spill) to bin `bin` of the packed copy `words`, moving
/// packed_spill to `counts[bin]` if this addition carried the counter over a multiple of it.
/// Everything is 32-bit: a copy fits shared memory, and every instruction per sample shows.
/// (64-bit half_bins 0.84, 32-bit 0.88; docs/performance.md, "65536 bins: packed16")
template <std::uint32_t Swizzle, class Counter>
__device__ __forceinline__ void add_packed(std::uint32_t* words, int half_bins, Counter* counts, int bin,
                                           std::uint32_t count) {
  const int high = bin >= half_bins ? 1 : 0;
  const std::uint32_t word = bank_swizzled(static_cast<std::uint32_t>(bin - high * half_bins), Swizzle);
  const std::uint32_t shift = 16u * static_cast<std::uint32_t>(high);
  const std::uint32_t before = (atomicAdd(words + word, count << shift) >> shift) & 0xffffu;
  if (before / packed_spill != (before + count) / packed_spill) {
    atomicSub(words + word, packed_spill << shift);
    add_to_global_count(counts + bin, Counter{packed_spill});
  }
}

/// Whether a mapper may count 16-bit samples as the 65536 values themselves (value_window_mapper:
/// `counts_every_value`, bin (bits - first_bits) mod 2^16, none left out).
template <class Mapper>
inline constexpr bool may_count_every_value = requires(const Mapper& map) {
  { map.counts_every_value() } -> std::same_as<bool>;
  { map.first_bits() } -> std::same_as<std::uint32_t>;
};

/// The bins of the eight 16-bit samples in `raw` where every value is a bin: (bits - first) mod 2^16.
__device__ __forceinline__ void every_value_bins(const uint4& raw, std::uint32_t first, int (&bins)[8]) {
  const std::uint32_t parts[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int j = 0; j < 8; ++j) bins[j] = static_cast<int>(((parts[j / 2] >> (16 * (j % 2))) - first) & 0xffffu);
}

/// Adds one to the counter of each of the eight 16-bit values in `raw` (bin (bits - first) mod
/// 2^16 of 65536, half_bins 32768: the bin's low 15 bits name its word, its top bit the half),
/// with add_packed's spill rule. Nothing is left out and the caller's chunk holds only samples,
/// so a sample costs about 15 instructions, where the general loop's tests and branches took 28
/// (an issue-bound loop: docs/performance.md, "packed16: the 65536 values of 16-bit samples").
/// Every addition is issued before any returned value is looked at, and a crossing's spill comes
/// after the vector's additions: a counter may pass another multiple of packed_spill before an
/// earlier spill subtracts, and the bound holds all the same (each crossing is seen by exactly one
/// addition and takes exactly packed_spill away, so at the period's barrier, every spill done,
/// every counter is below packed_spill again). All lanes of the warp must call it (the vote).
template <std::uint32_t Swizzle, class Counter>
__device__ __forceinline__ void add_every_value_vector(std::uint32_t* words, Counter* counts, std::uint32_t first,
                                                       const uint4& raw) {
  int bins[8];
  every_value_bins(raw, first, bins);
  const auto add_whole_warp = [&](int bin, std::uint32_t count) {
    add_packed<Swizzle>(words, 0x8000, counts, bin, count);
  };
  if (warp_adds_once(bins, add_whole_warp)) return;
  std::uint32_t crossed = 0;  // bit j: sample j carried its counter over a multiple of packed_spill
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const std::uint32_t word = bank_swizzled(static_cast<std::uint32_t>(bins[j]) & 0x7fffu, Swizzle);
    const std::uint32_t shift = static_cast<std::uint32_t>(bins[j] >> 11) & 16u;
    const std::uint32_t before = atomicAdd(words + word, 1u << shift) >> shift;
    crossed |= (before & (packed_spill - 1)) == packed_spill - 1 ? 1u << j : 0u;
  }
  // A rare path (one addition in 4096 of a bin), rolled, each bin again from the loaded words:
  // unrolled, it kept eight bins alive and spilled at the kernel's 64 registers.
#pragma unroll 1
  for (; crossed != 0; crossed &= crossed - 1) {
    const int j = __ffs(static_cast<int>(crossed)) - 1;
    const std::uint32_t part = j < 2 ? raw.x : j < 4 ? raw.y : j < 6 ? raw.z : raw.w;
    const std::uint32_t bin = ((part >> (16 * (j & 1))) - first) & 0xffffu;
    atomicSub(words + bank_swizzled(bin & 0x7fffu, Swizzle), packed_spill << ((bin >> 11) & 16u));
    add_to_global_count(counts + bin, Counter{packed_spill});
  }
}

/// Scan mode's add_every_value_vector: increments whose result is unused, a constant for each half
/// (merged across a warp's lanes on one word), no test; the period's scan spills.
template <std::uint32_t Swizzle>
__device__ __forceinline__ void add_every_value_vector_unchecked(std::uint32_t* words, std::uint32_t first,
                                                                 const uint4& raw) {
  int bins[8];
  every_value_bins(raw, first, bins);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    std::uint32_t* const word = words + bank_swizzled(static_cast<std::uint32_t>(bins[j]) & 0x7fffu, Swizzle);
    if (bins[j] >= 0x8000) {
      atomicAdd(word, 0x10000u);
    } else {
      atomicAdd(word, 1u);
    }
  }
}

/// Sample j of a 16-byte vector of samples of at most 4 bytes, by selects: j is known only at
/// run time in a rare path, where an array index would go through local memory.
template <class Sample>
__device__ __forceinline__ Sample sample_in_vector(const uint4& raw, int j) {
  static_assert(sizeof(Sample) <= 4);
  constexpr int per_word = 4 / static_cast<int>(sizeof(Sample));
  const int part = j / per_word;
  const std::uint32_t word = part == 0 ? raw.x : part == 1 ? raw.y : part == 2 ? raw.z : raw.w;
  const std::uint32_t bits = word >> (8 * static_cast<int>(sizeof(Sample)) * (j % per_word));
  Sample sample;
  memcpy(&sample, &bits, sizeof(Sample));  // the low bytes: the GPU is little-endian
  return sample;
}

/// The words of the samples of a whole vector in a block's copy: each one's bin, or num_bins
/// where it is left out (slot_of; a vector mapper's own slot_items where it has them).
template <class Sample, class Mapper>
__device__ __forceinline__ void vector_slots(const Mapper& map, const sample_vector<Sample>& v, int num_bins,
                                             int (&slots)[sample_vector<Sample>::items]) {
  if constexpr (gives_slot_items<Mapper, Sample>) {
    map.slot_items(v.item, slots);
  } else if constexpr (maps_vectors<Mapper, Sample>) {
    map.map_items(v.item, slots);
#pragma unroll
    for (int j = 0; j < sample_vector<Sample>::items; ++j) slots[j] = slots[j] >= 0 ? slots[j] : num_bins;
  } else {
#pragma unroll
    for (int j = 0; j < sample_vector<Sample>::items; ++j) slots[j] = slot_of(map, v.item[j], num_bins);
  }
}

/// A slot's word in the packed copy (bank_swizzled) and whether it is the word's high half: slot s
/// is the low half of word s below half_bins, else the high half of word s - half_bins. The
/// left-out slot, num_bins, is the high half of word num_bins - half_bins (packed_copy_words).
template <std::uint32_t Swizzle>
__device__ __forceinline__ std::uint32_t packed_slot_word(int slot, int half_bins, bool& high) {
  high = slot >= half_bins;
  return bank_swizzled(static_cast<std::uint32_t>(high ? slot - half_bins : slot), Swizzle);
}

/// add_packed for a slot: a spill of the left-out slot goes to `left_out`, not to the counts.
template <std::uint32_t Swizzle, class Counter>
__device__ __forceinline__ void add_packed_slot(std::uint32_t* words, int half_bins, int num_bins, Counter* counts,
                                                int slot, std::uint32_t count, std::uint32_t& left_out) {
  bool high;
  const std::uint32_t word = packed_slot_word<Swizzle>(slot, half_bins, high);
  const std::uint32_t shift = high ? 16u : 0u;
  const std::uint32_t before = (atomicAdd(words + word, count << shift) >> shift) & 0xffffu;
  if (before / packed_spill != (before + count) / packed_spill) {
    atomicSub(words + word, packed_spill << shift);
    if (slot < num_bins) {
      add_to_global_count(counts + slot, Counter{packed_spill});
    } else {
      left_out += packed_spill;
    }
  }
}

/// add_every_value_vector for any mapper: adds one to the counter of each sample of the whole
/// vector `raw` at its slot, a left-out sample to the left-out slot (num_bins), a counter of the
/// copy that spills like a bin's but into `left_out` (and is read into it at the end,
/// add_packed_copy): no sample tests whether it was left out, so none branches and the left-out
/// count takes no instruction a sample. A counter's increment is 1 or 2^16 by its half, and its
/// crossing is the increment's twelve low bits all set in the value before. Every addition is
/// issued before any returned value is looked at, and the rare spills come after the vector's
/// additions (the bound holds as add_every_value_vector says). About half the instructions a
/// sample of the general visit's tests and branches (docs/performance.md). All lanes of the
/// warp must call it (the vote).
template <std::uint32_t Swizzle, class Sample, class Counter, class Mapper>
__device__ __forceinline__ void add_slot_vector(std::uint32_t* words, int half_bins, Counter* counts,
                                                const Mapper& map, const uint4& raw, std::uint32_t& left_out) {
  constexpr int items = sample_vector<Sample>::items;
  sample_vector<Sample> v;
  memcpy(&v, &raw, sizeof(v));
  const int num_bins = static_cast<int>(map.num_bins());
  int slots[items];
  vector_slots(map, v, num_bins, slots);
  const auto add_whole_warp = [&](int slot, std::uint32_t count) {  // lane 0, for the warp
    add_packed_slot<Swizzle>(words, half_bins, num_bins, counts, slot, count, left_out);
  };
  if (warp_adds_once(slots, add_whole_warp)) return;
  std::uint32_t crossed = 0;  // bit j: sample j carried its counter over a multiple of packed_spill
#pragma unroll
  for (int j = 0; j < items; ++j) {
    bool high;
    const std::uint32_t word = packed_slot_word<Swizzle>(slots[j], half_bins, high);
    const std::uint32_t increment = high ? 0x10000u : 1u;
    const std::uint32_t before = atomicAdd(words + word, increment);
    crossed |= (~before & increment * (packed_spill - 1)) == 0 ? 1u << j : 0u;
  }
  // The rare path, rolled, each slot mapped again from the loaded words (add_every_value_vector).
#pragma unroll 1
  for (; crossed != 0; crossed &= crossed - 1) {
    const int j = __ffs(static_cast<int>(crossed)) - 1;
    const int slot = slot_of(map, sample_in_vector<Sample>(raw, j), num_bins);
    bool high;
    const std::uint32_t word = packed_slot_word<Swizzle>(slot, half_bins, high);
    atomicSub(words + word, high ? packed_spill << 16 : packed_spill);
    if (slot < num_bins) {
      add_to_global_count(counts + slot, Counter{packed_spill});
    } else {
      left_out += packed_spill;
    }
  }
}

/// Scan mode's add_slot_vector: increments whose result is unused, a constant for each half
/// (merged across a warp's lanes on one word), no test, the warp's vote for a warp on one slot (a
/// constant 2^16 is not merged: a high half's increments from a whole warp took turns; 16-bit
/// sorted data 0.41 -> 0.17 of the read bandwidth without the vote); the period's scan spills.
template <std::uint32_t Swizzle, class Sample, class Mapper>
__device__ __forceinline__ void add_slot_vector_unchecked(std::uint32_t* words, int half_bins, const Mapper& map,
                                                          const uint4& raw) {
  constexpr int items = sample_vector<Sample>::items;
  sample_vector<Sample> v;
  memcpy(&v, &raw, sizeof(v));
  int slots[items];
  vector_slots(map, v, static_cast<int>(map.num_bins()), slots);
  const auto add_whole_warp = [&](int slot, std::uint32_t count) {
    bool high;
    const std::uint32_t word = packed_slot_word<Swizzle>(slot, half_bins, high);
    atomicAdd(words + word, high ? count << 16 : count);
  };
  if (warp_adds_once(slots, add_whole_warp)) return;
#pragma unroll
  for (int j = 0; j < items; ++j) {
    bool high;
    std::uint32_t* const word = words + packed_slot_word<Swizzle>(slots[j], half_bins, high);
    if (high) {
      atomicAdd(word, 0x10000u);
    } else {
      atomicAdd(word, 1u);
    }
  }
}

/// Words of a packed copy in shared memory: the bins' counters and the left-out slot's (slot
/// num_bins, the high half of word num_bins - half_bins, where add_slot_vector counts what it
/// leaves out), in whole rows of 32 (bank_swizzled permutes words within a row).
__host__ __device__ constexpr std::int64_t packed_copy_words(std::int64_t num_bins) {
  return swizzled_words(packed_words(num_bins + 1));
}

/// Words after a packed copy (after packed_copy_words) where its block tallies, in its first
/// period, the vectors whose lanes hint at shared bins and the vectors seen (zeroed with the copy).
inline constexpr int packed_mode_words = 2;

/// Scan mode's spill, between two barriers: every counter at packed_spill or more goes whole to
/// the global counts (the left-out slot's to `left_out`). Word p of the copy holds the counters of
/// word bank_swizzled(p).
template <int Threads, std::uint32_t Swizzle, class Counter>
__device__ __forceinline__ void spill_large_counters(std::uint32_t* words, int half_bins, int num_bins,
                                                     Counter* counts, std::uint32_t& left_out) {
  const auto spill = [&](std::uint32_t& value, int place) {
    // Up to half_bins where counted: word half_bins holds only the left-out slot, in its high half.
    const int word = static_cast<int>(bank_swizzled(static_cast<std::uint32_t>(place), Swizzle));
    const std::uint32_t low = value & 0xffffu;
    const std::uint32_t high = value >> 16;
    if (low >= packed_spill) add_to_global_count(counts + word, Counter{low});
    if (high >= packed_spill) {
      if (word + half_bins < num_bins) {
        add_to_global_count(counts + word + half_bins, Counter{high});
      } else {
        left_out += high;
      }
    }
    const bool changed = low >= packed_spill || high >= packed_spill;
    value &= (low >= packed_spill ? 0xffff0000u : 0xffffffffu) & (high >= packed_spill ? 0x0000ffffu : 0xffffffffu);
    return changed;
  };
  // A 16-bit counter is at packed_spill (2^12) or more exactly when one of its top four bits is
  // set, so one test over four words finds the quads with nothing to spill, nearly all of them:
  // the scan runs once a period over the whole copy, and per period it costs about as much as the
  // counting when it looks at every counter.
  // (Geometric 0.80 -> 0.958; docs/performance.md, "65536 bins: packed16")
  constexpr std::uint32_t large_bits = (0x10000u - packed_spill) * 0x10001u;  // 0xf000f000
  auto* quads = reinterpret_cast<uint4*>(words);  // the kernel declares the copy 16-byte aligned
  const int whole = static_cast<int>(packed_copy_words(num_bins)) / 4;  // the padding words stay zero
  for (int i = static_cast<int>(threadIdx.x); i < whole; i += Threads) {
    uint4 quad = quads[i];
    if ((((quad.x | quad.y) | (quad.z | quad.w)) & large_bits) == 0) continue;
    bool changed = spill(quad.x, 4 * i);
    changed = spill(quad.y, 4 * i + 1) || changed;
    changed = spill(quad.z, 4 * i + 2) || changed;
    changed = spill(quad.w, 4 * i + 3) || changed;
    if (changed) quads[i] = quad;
  }
}

/// Whether the block's packed copy is swizzled: when its first samples crowd the copy's banks
/// (block_crowds_banks). The swizzle costs packed16 its instructions where nothing crowds. Every
/// thread must call it (a barrier).
/// (docs/performance.md, "Second pass: banks, branches, loads in flight, and the grid")
template <class Sample, class Mapper>
__device__ __forceinline__ bool packed_block_swizzles(const Sample* samples, std::int64_t num_samples,
                                                      const Mapper& map, int unroll) {
  const int half_bins = static_cast<int>(packed_words(map.num_bins()));
  return block_crowds_banks(samples, num_samples, map, unroll,
                            [half_bins](int bin) { return bin - (bin >= half_bins ? half_bins : 0); })
      .copy;
}

/// Counts this thread's share of the samples into the packed copy (zeroed, with its
/// packed_mode_words after it), with the warp-wide vote, in return mode and, if the first period
/// says so, scan mode after it; returns how many samples it left out, but for those still in the
/// left-out slot at the end (add_packed_copy reads them). Every thread of the block
/// must call it, with blockDim.x == Threads: it synchronizes the block between periods. The
/// periods after the first run a loop of their own per mode, so neither pays for the other.
template <int Threads, int Unroll, std::uint32_t Swizzle, class Sample, class Counter, class Mapper>
__device__ __forceinline__ std::uint64_t count_packed(const Sample* samples, std::int64_t num_samples,
                                                      const Mapper& map, std::uint32_t* words, Counter* counts) {
  constexpr int items = sample_vector<Sample>::items;
  const int half_bins = static_cast<int>(packed_words(map.num_bins()));  // a shared-memory copy: far below 2^31
  constexpr int tiles_per_period = packed_tiles_per_period(Threads, Unroll, items);
  static_assert(tiles_per_period >= 1, "a tile must fit in one period of the packed counters");
  static_assert(32 * items < packed_spill, "one addition (at most a warp's vector) crosses at most one multiple");
  const int num_bins = static_cast<int>(map.num_bins());
  std::uint32_t* const mode_votes = words + packed_copy_words(num_bins);  // [0] vectors with a hint, [1] vectors seen
  std::uint32_t left_out = 0;
  const auto add = [&](int bin, std::uint32_t count) { add_packed<Swizzle>(words, half_bins, counts, bin, count); };
  const auto add_unchecked = [&](int bin, std::uint32_t count) {
    const int high = bin >= half_bins ? 1 : 0;
    std::uint32_t* const word = words + bank_swizzled(static_cast<std::uint32_t>(bin - high * half_bins), Swizzle);
    if (count == 1) {  // constants, result unused: increments the hardware merges across the warp
      if (high != 0) {
        atomicAdd(word, 0x10000u);
      } else {
        atomicAdd(word, 1u);
      }
    } else {
      atomicAdd(word, count << (16 * high));
    }
  };
  std::uint32_t hinted = 0;
  std::uint32_t seen = 0;
  const auto visit_one = [&](Sample x) {  // head and tail samples: first period, return mode
    const int bin = static_cast<int>(map(x));
    if (bin < 0) {
      ++left_out;
    } else {
      add(bin, 1);
    }
  };
  // One vector: mapped, added at once where the whole warp shares a bin, else `note`d (the first
  // period's hints) and added a sample at a time with `add_with`.
  const auto count_vector = [&](const sample_vector<Sample>& v, bool valid, const auto& add_with, auto note) {
    int bins[items];
    left_out += map_vector(map, v, valid, bins);
    if (warp_adds_once(bins, add_with)) return;
    note(bins);
#pragma unroll
    for (int j = 0; j < items; ++j) {
      if (bins[j] >= 0) add_with(bins[j], 1);
    }
  };
  const auto no_note = [](const int (&)[items]) {};
  const auto visit_sampling = [&](const sample_vector<Sample>& v, bool valid) {
    count_vector(v, valid, add, [&](const int (&bins)[items]) {
      const int neighbour = __shfl_xor_sync(0xffffffffu, bins[0], 1);
      hinted += __any_sync(0xffffffffu, bins[0] == neighbour && bins[0] >= 0) ? 1u : 0u;
      ++seen;
    });
  };
  const auto visit_return = [&](const sample_vector<Sample>& v, bool valid) { count_vector(v, valid, add, no_note); };
  const auto visit_scan = [&](const sample_vector<Sample>& v, bool valid) {
    count_vector(v, valid, add_unchecked, no_note);
  };
  // walk_vectorized's walk, with the block in step: tiles of Threads x Unroll vectors, the first
  // period's tiles, then one loop per mode. Tile bases are the same for every thread of a block, so
  // its threads agree on every barrier below.
  const vector_split<Sample> split(samples, num_samples);
  visit_head_and_tail(samples, num_samples, split, visit_one);
  const auto* body = reinterpret_cast<const uint4*>(samples + split.head);
  const std::int64_t tile = static_cast<std::int64_t>(Threads) * Unroll;
  const std::int64_t warp_offset = static_cast<std::int64_t>(threadIdx.x / 32) * 32 * Unroll;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * tile;
  std::int64_t tile_base = blockIdx.x * tile;
  for (int t = 0; t < tiles_per_period && tile_base < split.vectors; ++t, tile_base += stride) {
    visit_warp_chunk<Unroll, Sample>(body, split.vectors, tile_base + warp_offset, visit_sampling);
  }
  if (threadIdx.x % 32 == 0) {
    atomicAdd(mode_votes, hinted);
    atomicAdd(mode_votes + 1, seen);
  }
  __syncthreads();  // every spill and tally of the first period is done; every counter is below 2^12
  // The periods after the first, for 16- and 32-bit samples: a warp's chunk of Unroll x 32
  // vectors a tile, through `count_whole` where the chunk holds only samples (the same for the
  // whole warp), else through `visit`; `period_end` at each period's end. With `LoadFirst` the next
  // tile's loads go out before the period's end, so a barrier's wait overlaps them (a bare kernel:
  // 0.69 -> 0.74 of the read bandwidth; docs/performance.md); beside scan mode's scan, the loaded
  // tile spilled registers. Whole chunks take the lean loops (add_every_value_vector where 16-bit
  // samples count as the 65536 values, the same for every thread of the grid; add_slot_vector
  // otherwise); bytes (16 a vector: the slots spilled registers) and 8-byte samples keep the
  // general loops after it.
  if constexpr (sizeof(Sample) == 2 || sizeof(Sample) == 4) {
    const auto walk_periods = [&]<bool LoadFirst>(std::bool_constant<LoadFirst>, const auto& visit,
                                                  const auto& count_whole, const auto& period_end) {
      uint4 raw[Unroll];
      load_warp_chunk(body, split.vectors, tile_base + warp_offset, raw);
      int tiles = 0;
      for (; tile_base < split.vectors; tile_base += stride) {
        if (tile_base + warp_offset + 32 * Unroll <= split.vectors) {
#pragma unroll
          for (int u = 0; u < Unroll; ++u) count_whole(raw[u]);
        } else {
          visit_loaded_chunk<Unroll, Sample>(raw, split.vectors, tile_base + warp_offset, visit);
        }
        const bool ends_period = ++tiles == tiles_per_period;
        if (ends_period) tiles = 0;
        if constexpr (LoadFirst) load_warp_chunk(body, split.vectors, tile_base + stride + warp_offset, raw);
        if (ends_period) period_end();
        if constexpr (!LoadFirst) load_warp_chunk(body, split.vectors, tile_base + stride + warp_offset, raw);
      }
    };
    const auto scan_end = [&] {
      __syncthreads();  // the period's increments are in
      spill_large_counters<Threads, Swizzle>(words, half_bins, num_bins, counts, left_out);
      __syncthreads();  // every counter is below 2^12 before the next period counts
    };
    const auto return_end = [] { __syncthreads(); };  // every spill of this period is done before the next counts
    // Read by every thread after the barrier: one choice per block.
    const bool scans = 2 * mode_votes[0] > mode_votes[1];
    if constexpr (sizeof(Sample) == 2 && may_count_every_value<Mapper>) {
      if (map.counts_every_value()) {
        const std::uint32_t first_bits = map.first_bits();
        if (scans) {
          walk_periods(
              std::false_type{}, visit_scan,
              [&](const uint4& raw) { add_every_value_vector_unchecked<Swizzle>(words, first_bits, raw); }, scan_end);
        } else {
          walk_periods(
              std::true_type{}, visit_return,
              [&](const uint4& raw) { add_every_value_vector<Swizzle>(words, counts, first_bits, raw); }, return_end);
        }
        return left_out;
      }
    }
    if (scans) {
      walk_periods(
          std::false_type{}, visit_scan,
          [&](const uint4& raw) { add_slot_vector_unchecked<Swizzle, Sample>(words, half_bins, map, raw); },
          scan_end);
    } else {
      walk_periods(
          std::true_type{}, visit_return,
          [&](const uint4& raw) { add_slot_vector<Swizzle, Sample>(words, half_bins, counts, map, raw, left_out); },
          return_end);
    }
    return left_out;
  } else {
    // Read by every thread after the barrier: one choice per block.
    if (2 * mode_votes[0] > mode_votes[1]) {
      int tiles = 0;
      for (; tile_base < split.vectors; tile_base += stride) {
        visit_warp_chunk<Unroll, Sample>(body, split.vectors, tile_base + warp_offset, visit_scan);
        if (++tiles == tiles_per_period) {
          tiles = 0;
          __syncthreads();  // the period's increments are in
          spill_large_counters<Threads, Swizzle>(words, half_bins, num_bins, counts, left_out);
          __syncthreads();  // every counter is below 2^12 before the next period counts
        }
      }
    } else {
      int tiles = 0;
      for (; tile_base < split.vectors; tile_base += stride) {
        visit_warp_chunk<Unroll, Sample>(body, split.vectors, tile_base + warp_offset, visit_return);
        if (++tiles == tiles_per_period) {
          tiles = 0;
          __syncthreads();  // every spill of this period is done before the next period counts
        }
      }
    }
    return left_out;
  }
}

/// Adds the packed copy into the global counts (after the block's last __syncthreads; a counter is
/// below 2^16 whichever mode counted it): one device-scope atomic per non-zero counter. Returns
/// what this thread read from the left-out slot.
template <class Counter>
__device__ __forceinline__ std::uint32_t add_packed_copy(const std::uint32_t* words, std::int64_t num_bins,
                                                         Counter* counts, std::uint32_t swizzle) {
  const std::int64_t half_bins = packed_words(num_bins);
  std::uint32_t left_out = 0;
  for (std::int64_t word = threadIdx.x; word < packed_words(num_bins + 1); word += blockDim.x) {
    const std::uint32_t value = words[bank_swizzled(static_cast<std::uint32_t>(word), swizzle)];
    const std::uint32_t low = value & 0xffffu;  // zero in word half_bins, which holds no bin's low half
    const std::uint32_t high = value >> 16;
    if (low != 0) add_to_global_count(counts + word, Counter{low});
    if (high != 0) {
      if (word + half_bins < num_bins) {
        add_to_global_count(counts + word + half_bins, Counter{high});
      } else {
        left_out += high;  // the left-out slot
      }
    }
  }
  return left_out;
}

}  // namespace tally::detail
