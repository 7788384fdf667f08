// What one block does with a privatized histogram: zero its copy, count its share of the samples
// into it with block-scope atomics, and hand the copy on (to global atomics or to a merge
// kernel). The copy lives in shared memory or in the block's own slice of global memory.
#pragma once

#include <concepts>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <cuda/atomic>
#include <cuda/ptx>
#include <nv/target>

#include "tally/bins.hpp"
#include "tally/detail/range_grid.hpp"
#include "tally/detail/block/last_block.cuh"
#include "tally/detail/block/vectorized_walk.cuh"
#include "tally/detail/block/warp_sum.cuh"
#include "tally/detail/tuning/histogram_tuning.cuh"
#include "tally/detail/value_tables.hpp"

namespace tally::detail {

/// How a block combines updates before they reach its private copy.
enum class aggregation {
  none,  ///< one block-scope atomic per sample: the plain shared-memory histogram
  warp,  ///< equal neighbours in a lane add as one, and a warp whose samples share a bin adds once
};

/// Whether a mapper reads tables of its own (grid_range_bin_mapper), which a block may copy into
/// its shared memory first.
template <class Mapper>
inline constexpr bool has_tables = requires(const Mapper& map) { map.tables_bytes(); };

/// The mapper a block counts with: `map` itself, or, for a mapper with tables and a launch that
/// left room for them at word `table_words` of the block's shared memory (-1: none), the same
/// mapper reading a copy of its tables there. The block's threads copy them; the caller's next
/// barrier must come before the first sample is mapped.
template <class Mapper>
__device__ __forceinline__ Mapper tables_in_block(const Mapper& map, std::uint32_t* shared, int table_words) {
  if constexpr (has_tables<Mapper>) {
    if (table_words >= 0) {
      const auto* from = reinterpret_cast<const uint4*>(map.tables());  // 16-byte aligned storage
      auto* to = reinterpret_cast<uint4*>(shared + table_words);
      const int vectors = static_cast<int>(map.tables_bytes() / 16);
      for (int i = static_cast<int>(threadIdx.x); i < vectors; i += static_cast<int>(blockDim.x)) to[i] = from[i];
      return map.reading_tables_at(reinterpret_cast<const std::byte*>(to));
    }
  }
  return map;
}

/// Whether a mapper looks samples up in a table that a block may copy swizzled (window_table:
/// `table_word` gives a sample's word, and bank_swizzled_table reads the swizzled copy).
template <class Mapper, class Sample>
inline constexpr bool has_bank_swizzled_table = requires(const Mapper& map, Sample x) {
  { map.table_word(x) } -> std::same_as<int>;
};

/// Copies `map`'s table into the block's shared memory at word `table_words` (where
/// tables_in_block copied it plainly), each word placed by row_swizzled_word (of the range-bin
/// grid, its cell words only), and returns the mapper reading that copy. Every thread must call
/// it, after every read of a plain copy there; the caller's next barrier must come before the first
/// sample is mapped.
template <class Mapper>
__device__ __forceinline__ bank_swizzled_table<Mapper> swizzle_table_in_block(const Mapper& map,
                                                                              std::uint32_t* shared, int table_words) {
  const auto* from = reinterpret_cast<const std::uint32_t*>(map.tables());
  std::uint32_t* to = shared + table_words;
  const int words = static_cast<int>(map.tables_bytes() / 4);  // whole rows of 32 words
  int swizzled = words;
  if constexpr (requires { map.swizzled_table_bytes(); }) {
    // The range-bin grid's cell words; its thresholds stay in place.
    swizzled = static_cast<int>(map.swizzled_table_bytes() / 4);
  }
  for (int w = static_cast<int>(threadIdx.x); w < words; w += static_cast<int>(blockDim.x)) {
    to[w < swizzled ? static_cast<int>(row_swizzled_word(static_cast<std::uint32_t>(w))) : w] = from[w];
  }
  return bank_swizzled_table<Mapper>(map.reading_tables_at(reinterpret_cast<const std::byte*>(to)));
}

/// Zeroes `count` counters at `to` (shared or global memory) with the block's threads: 16 bytes a
/// store where `to` is 16-byte aligned (a quarter of the instructions of a 32-bit store each, for
/// a copy of 4096 bins that a small call's single block zeroes), then the rest one at a time.
template <class Counter>
__device__ __forceinline__ void zero_counters(Counter* to, std::int64_t count) {
  constexpr std::int64_t per_vector = 16 / sizeof(Counter);
  std::int64_t first = 0;
  if (reinterpret_cast<std::uintptr_t>(to) % 16 == 0) {
    first = count / per_vector * per_vector;
    auto* vectors = reinterpret_cast<uint4*>(to);
    for (std::int64_t i = threadIdx.x; i < count / per_vector; i += blockDim.x) vectors[i] = make_uint4(0, 0, 0, 0);
  }
  for (std::int64_t i = first + threadIdx.x; i < count; i += blockDim.x) to[i] = 0;
}

/// Words a swizzled copy of `words` words takes: whole rows of 32 words (one per bank).
__host__ __device__ constexpr std::int64_t swizzled_words(std::int64_t words) { return (words + 31) / 32 * 32; }

/// Where word `word` of a block's copy sits in shared memory. Word w is in bank w % 32, so bins
/// that step by 32 (values that are multiples of 32, or of 64, 1024, ...) would all wait on one
/// bank: 32 lanes' atomics served one at a time. Each row of 32 words is permuted instead, by an
/// XOR of its low five bits with five bits of a multiplicative hash of the row (the top bits of
/// row * 2^32 / golden ratio, which differ for rows a power of two apart), so such bins spread
/// over the banks. Words stay in their row, so a copy of swizzled_words() holds them, and
/// neighbouring bins stay in different banks. The map is its own inverse: reading word p of the
/// copy gives the count of word bank_swizzled(p). `mask` 0 turns it off (replicas of 32 or more,
/// whose lanes already own their banks).
__host__ __device__ __forceinline__ std::uint32_t bank_swizzled(std::uint32_t word, std::uint32_t mask = 31u) {
  return word ^ (((word >> 5) * 0x9e3779b9u) >> 27 & mask);
}

/// The swizzle's mask for a copy with `copies` interleaved replicas: off from 32 replicas on.
__host__ __device__ __forceinline__ std::uint32_t swizzle_mask(int copies) { return copies >= 32 ? 0u : 31u; }

/// Whether a mapper maps a vector's samples at once (map_items): one whose samples may take a
/// loop or a second path (the range-bin grid's search, the float estimate's edge near one) keeps the
/// common path of every sample in one straight line, so that their table reads are in flight
/// together, and takes the rarer path afterwards for those that need it.
template <class Mapper, class Sample>
inline constexpr bool maps_vectors = requires { Mapper::maps_items; };

/// Maps the samples of one vector to bins (-1 for left out, and for all of an invalid vector);
/// returns how many valid samples were left out. Every sample is mapped, valid or not (an invalid
/// vector holds zeros, see visit_warp_chunk), and `valid` only selects: a branch around each
/// sample's mapping kept the compiler from interleaving the samples' instructions.
template <class Sample, class Mapper>
__device__ __forceinline__ std::uint32_t map_vector(const Mapper& map, const sample_vector<Sample>& v, bool valid,
                                                    int (&bins)[sample_vector<Sample>::items]) {
  std::uint32_t left_out = 0;
  if constexpr (maps_vectors<Mapper, Sample>) map.map_items(v.item, bins);
#pragma unroll
  for (int j = 0; j < sample_vector<Sample>::items; ++j) {
    int bin;
    if constexpr (maps_vectors<Mapper, Sample>) {
      bin = bins[j];
    } else {
      bin = static_cast<int>(map(v.item[j]));
    }
    bins[j] = valid ? bin : -1;
    if constexpr (!maps_every_sample<Mapper>) left_out += (valid && bins[j] < 0) ? 1 : 0;
  }
  return left_out;
}

/// Whether a mapper gives a sample's word in a block's copy itself (`slot`: its bin, or num_bins
/// for a sample it leaves out, the word past the bins where the shared kernels count those).
template <class Mapper, class Sample>
inline constexpr bool gives_slots = requires(const Mapper& map, Sample x) {
  { map.slot(x) } -> std::same_as<int>;
};

/// Whether a vector mapper gives its samples' words in a block's copy itself (`slot_items`, as
/// `slot` gives one sample's).
template <class Mapper, class Sample>
inline constexpr bool gives_slot_items = requires { Mapper::slots_items; };

/// A sample's word in a block's copy: its bin, or `left_out_word` (num_bins) where it is left out.
/// Mappers with `slot` select that word themselves, which saves a test of the bin and a select a
/// sample (uint16 through a table: 21 instructions a sample, docs/performance.md).
template <class Mapper, class Sample>
__device__ __forceinline__ int slot_of(const Mapper& map, Sample x, int left_out_word) {
  if constexpr (gives_slots<Mapper, Sample>) {
    return map.slot(x);
  } else {
    const int bin = static_cast<int>(map(x));
    return bin >= 0 ? bin : left_out_word;
  }
}

/// The warp-wide vote: when every sample of every lane's vector has one bin, lane 0 adds them all
/// with one `add(bin, count)` and every lane returns true. All lanes of the warp must call it.
template <int Items, class Add>
__device__ __forceinline__ bool warp_adds_once(const int (&bins)[Items], Add& add) {
  bool uniform = bins[0] >= 0;
#pragma unroll
  for (int j = 1; j < Items; ++j) uniform = uniform && bins[j] == bins[0];
  const int warp_bin = __shfl_sync(0xffffffffu, bins[0], 0);
  if (!__all_sync(0xffffffffu, uniform && bins[0] == warp_bin)) return false;
  if (threadIdx.x % 32 == 0) add(warp_bin, 32u * Items);
  return true;
}

/// Adds `value` to a counter of the global histogram with the atomicAdd intrinsic: its result
/// unused, it compiles to a reduction (RED) that waits for no reply, where
/// cuda::atomic_ref::fetch_add goes through inline PTX that keeps one. Device scope, relaxed.
/// (packed16's flush, 0.785 -> 0.800: docs/performance.md, "65536 bins: packed16")
template <class Counter>
__device__ __forceinline__ void add_to_global_count(Counter* counter, Counter value) {
  if constexpr (sizeof(Counter) == 4) {
    atomicAdd(reinterpret_cast<unsigned int*>(counter), static_cast<unsigned int>(value));
  } else {
    atomicAdd(reinterpret_cast<unsigned long long*>(counter), static_cast<unsigned long long>(value));
  }
}

/// Where a block's private copy lives, which decides the atomic that updates it.
enum class copy_memory {
  shared,  ///< `atomicAdd` on shared memory: block scope by nature
  global,  ///< `cuda::atomic_ref<..., thread_scope_block>` on the block's slice of global memory
};

/// Adds `count` to a counter of a block-private copy. A count that is the constant 1 compiles to
/// an increment whose result is unused, which sm_70+ turns into one shared-memory instruction per
/// group of lanes on the same address (ATOMS.POPC.INC); a count known only at run time is not
/// merged. So keep increments of one visibly constant.
/// (One bin: 1.019 -> 0.330; docs/performance.md, "Shared-memory increments and block shape")
template <copy_memory Memory>
__device__ __forceinline__ void add_to_copy(std::uint32_t* counter, std::uint32_t count) {
  if constexpr (Memory == copy_memory::shared) {
    if (count == 1) {
      atomicAdd(counter, 1u);
    } else {
      atomicAdd(counter, count);
    }
  } else {
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_block>(*counter).fetch_add(count, cuda::memory_order_relaxed);
  }
}

/// Adds the 16 bytes of one vector to one plain copy, where byte x counts at row[x] (row: the copy
/// moved by byte_shift_mapper's shift). Bytes come out of the four words with shifts, not through
/// a byte array with a run-time stride: at one shared-memory atomic per byte, the limit for bytes,
/// every instruction per byte shows.
/// (0.106-0.108 -> 0.100-0.103 ms: docs/performance.md, "Replicas and blocks per multiprocessor")
__device__ __forceinline__ void add_vector_of_bytes(std::uint32_t* row, const uint4& raw) {
  const std::uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int j = 0; j < 16; ++j) atomicAdd(row + ((words[j / 4] >> (8 * (j % 4))) & 0xffu), 1u);
}

/// Adds the 16 bytes of one vector to tuning::byte_replicas (64) replicas, where byte x of replica
/// r counts at word x * 64 + r of `rows` (the copy moved by the shift; the same for the whole
/// block). The count's byte offset, x * 256 + r * 4, is the byte in bits 8-15 and `replica_offset`
/// (r * 4, at most 252) in bits 0-7: one byte permute (__byte_perm, PRMT) puts them together, then
/// an add of `rows` (which a bare kernel's atomic takes in its address) and the atomic: three
/// instructions per byte, where x * 128 + lane * 4 took five. This saves issue slots rather than
/// time: the reads and the atomics set the time, not the instructions around them
/// (docs/performance.md, "The byte layout: 64 replicas, one permute a byte").
__device__ __forceinline__ void add_vector_of_bytes_to_replicas(std::uint32_t* rows, std::uint32_t replica_offset,
                                                                const uint4& raw) {
  static_assert(tuning::byte_replicas * 4 == 256, "a bin's row is 256 bytes, so the byte value is the offset's second byte");
  const std::uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
  char* const base = reinterpret_cast<char*>(rows);
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    // Selector nibbles, low first: offset byte 0 = replica_offset's byte 0 (4), byte 1 = the word's
    // byte j % 4, bytes 2 and 3 = replica_offset's zero bytes 1 and 2 (5, 6).
    const std::uint32_t offset = __byte_perm(words[j / 4], replica_offset, 0x6504u | ((j % 4) << 4));
    atomicAdd(reinterpret_cast<std::uint32_t*>(base + offset), 1u);
  }
}

/// automatic's cheap sample of the input, for bytes counted into replicas, in two steps: the
/// first byte of the first vector this lane will count (lane_first_byte), then whether those
/// bytes pile into few values (block_bytes_pile_up). A warp piles up when 8 or more of its lanes
/// share one value (uniform bytes put at most 2 or 3 lanes on one value; one value, sorted runs
/// and a bin holding half the samples put 16 to 32), and the block when half its warps do. One
/// byte load per thread, cached for the count that follows; the kernel issues it before zeroing
/// its copy, so the two overlap.
__device__ __forceinline__ int lane_first_byte(const std::uint8_t* samples, std::int64_t num_samples, int unroll) {
  const vector_split<std::uint8_t> split(samples, num_samples);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t warp = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const std::int64_t first = warp * 32 * unroll + lane;  // the vector walk_vectorized hands this lane first
  // Lanes with nothing to count take values no byte has, one per lane, so they match no one.
  return first < split.vectors ? samples[split.head + first * 16] : 256 + lane;
}

/// Whether the block's lane_first_byte values pile into few values (above). Every thread of the
/// block must call it; it is a barrier.
__device__ __forceinline__ bool block_bytes_pile_up(int first_byte) {
  int most = __popc(__match_any_sync(0xffffffffu, first_byte));
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) most = max(most, __shfl_xor_sync(0xffffffffu, most, offset));
  const int warps = static_cast<int>(blockDim.x / 32);
  return __syncthreads_count(threadIdx.x % 32 == 0 && most >= 8) * 2 >= warps;
}

/// What one thread's walk saw: the samples it visited and the ones it left out. A kernel that
/// reads its whole copy afterwards takes the left-out count as visited minus what it hands on
/// (add_block_copy's return, left_out_by_difference) and never reads `left_out`, so the compiler
/// drops its per-sample count: two instructions a sample, which show where mapping a sample takes
/// arithmetic.
/// (The estimate, float32, 4096 bins: 0.873 -> 0.899; docs/performance.md, "A lean kernel for
/// mappers that compute")
struct walk_tally {
  std::uint32_t visited = 0;   // a thread sees far fewer than 2^32 samples
  std::uint32_t left_out = 0;
};

/// Whether Mapper is the quotient of 32-bit integers over whole or half bounds
/// (rational_step_bin_mapper).
template <class Sample, class Mapper>
inline constexpr bool is_rational_step = false;
template <class Sample, bool InParts>
inline constexpr bool is_rational_step<Sample, rational_step_bin_mapper<Sample, InParts>> = true;

/// Mappers that compute or look up each sample's bin (the estimate, the quotient, the general rule,
/// range bins and their grid), against the shifts of bins exact in binary. Their kernels spend more
/// instructions and registers a sample; the kernels decide a few layouts by them.
template <class Sample, class Mapper>
inline constexpr bool maps_with_arithmetic =
    has_tables<Mapper> || std::is_same_v<Mapper, estimated_even_bin_mapper<Sample>> ||
    std::is_same_v<Mapper, estimated_even_bin_mapper<Sample, true>> || is_rational_step<Sample, Mapper> ||
    std::is_same_v<Mapper, even_bin_mapper<Sample>> || std::is_same_v<Mapper, range_bin_mapper<Sample>>;

/// Whether a lane whose word is `word` (negative: none) shares its bank with 4 or more lanes of its
/// warp on other words (lanes on one word are merged or take turns whatever the layout).
__device__ __forceinline__ bool lane_crowds_bank(int word, int lane) {
  const unsigned same_bank = __match_any_sync(0xffffffffu, word >= 0 ? (word & 31) : 32 + lane);
  const unsigned same_word = __match_any_sync(0xffffffffu, word >= 0 ? word : -1 - lane);
  return __popc(same_bank) - __popc(same_word) >= 4;
}

/// Whether a lane whose table word is `word` (negative: none) reads a bank that `words` or more
/// words of its warp's reads share: a read that takes that many turns or more. Lanes on one word
/// are served together, so it counts words, not lanes: two words in a bank (values 0 and 32 at 64
/// bins) cost the warp a turn, less than the instructions a swizzled table's loop spends every
/// sample, so a table is swizzled from 4 words on.
__device__ __forceinline__ bool lane_reads_crowded_bank(int word, int lane, int words) {
  const unsigned same_bank = __match_any_sync(0xffffffffu, word >= 0 ? (word & 31) : 32 + lane);
  const unsigned same_word = __match_any_sync(0xffffffffu, word >= 0 ? word : -1 - lane);
  const bool leads_word = word >= 0 && __ffs(static_cast<int>(same_word)) - 1 == lane;
  const unsigned leaders = __ballot_sync(0xffffffffu, leads_word);
  return word >= 0 && __popc(leaders & same_bank) >= words;
}

/// Whether a mapper also computes each sample's bin without its table (value_table_mapper with a
/// value_ratio): a block whose samples spread over the table's banks counts with that instead.
template <class Mapper>
inline constexpr bool has_ratio_twin = requires(const Mapper& map) {
  { map.has_ratio() } -> std::same_as<bool>;
  map.ratio_mapper();
};

/// Which of a block's layouts its samples crowd (block_crowds_banks): the copy's counters, and the
/// mapper's table (has_bank_swizzled_table); and whether they spread over the table's banks.
struct crowded_banks {
  bool copy = false;
  bool table = false;
  bool spread = false;
};

/// Whether a block's samples crowd the banks of its copy: each thread maps the first sample it
/// will count (a load cached for the count), `word_of(bin)` gives the word it would add to, and a
/// lane is crowded when 4 or more lanes of its warp would hit other words of its bank
/// (lane_crowds_bank); with `check_table`, whether they crowd the words of the mapper's table that
/// the lanes read (has_bank_swizzled_table), voted apart and by words (lane_reads_crowded_bank): a
/// table swizzled costs its instructions every sample, worth it only where its own reads take
/// turns. The copy, or the table, is crowded when a quarter of the block's lanes are. With
/// `check_spread`, whether a third of the lanes read a bank with another word of their warp's
/// reads in it: uniform data over a table of 256 entries or more does (about half of the lanes, or
/// more), data of a few values or of neighbouring ones does not (their reads broadcast, or fall in
/// different banks). Every thread must call it (a barrier), with one `check_table` and one
/// `check_spread`.
template <class Sample, class Mapper, class WordOf>
__device__ __forceinline__ crowded_banks block_crowds_banks(const Sample* samples, std::int64_t num_samples,
                                                            const Mapper& map, int unroll, WordOf word_of,
                                                            bool check_table = false, bool check_spread = false) {
  constexpr int items = sample_vector<Sample>::items;
  const vector_split<Sample> split(samples, num_samples);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t warp = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const std::int64_t first = warp * 32 * unroll + lane;  // the vector walk_vectorized hands this lane first
  int word = -1;  // a lane with no sample, or a left-out one, shares no word and no bank
  int table_word = -1;
  if (first < split.vectors) {
    const Sample x = samples[split.head + first * items];
    const int bin = static_cast<int>(map(x));
    if (bin >= 0) word = word_of(bin);
    if constexpr (has_bank_swizzled_table<Mapper, Sample>) table_word = map.table_word(x);
  }
  const int quarter = (static_cast<int>(blockDim.x) + 3) / 4;
  crowded_banks crowded;
  crowded.copy = __syncthreads_count(lane_crowds_bank(word, lane) ? 1 : 0) >= quarter;
  if constexpr (has_bank_swizzled_table<Mapper, Sample>) {
    if (check_table) {
      crowded.table = __syncthreads_count(lane_reads_crowded_bank(table_word, lane, 4) ? 1 : 0) >= quarter;
    }
    if (check_spread) {
      const int third = (static_cast<int>(blockDim.x) + 2) / 3;
      crowded.spread = __syncthreads_count(lane_reads_crowded_bank(table_word, lane, 2) ? 1 : 0) >= third;
    }
  }
  return crowded;
}

/// Counts this thread's share of the samples (16-byte loads) into a block-private copy of 32-bit
/// counters. In shared memory the copy is swizzled by `Swizzle` (bank_swizzled's mask: 31, or 0
/// for none; the copy takes swizzled_words of num_bins + 1 words: the last, never read, takes the
/// left-out samples, so that an atomic needs no branch); in global memory it is not.
/// With `copies` > 1 (a power of two, at most 64) the copy is replicated: bin b of replica r is at
/// b * copies + r and thread t counts into replica t % copies, so lanes that hit one bin spread
/// over min(copies, 32) words in different banks (from 32 replicas on, never swizzled). `Tuning`
/// (tuning::counting_tuning) gives the loads per chunk and whether they are pipelined.
template <aggregation Aggregate, class Tuning, copy_memory Memory, std::uint32_t Swizzle, class Sample, class Mapper>
__device__ __forceinline__ walk_tally count_vectorized(const Sample* samples, std::int64_t num_samples,
                                                       const Mapper& map, std::uint32_t* copy, int copies = 1) {
  constexpr int items = sample_vector<Sample>::items;
  walk_tally tally;
  const int replica = static_cast<int>(threadIdx.x) % copies;
  const std::uint32_t mask = Memory == copy_memory::shared ? (Swizzle & swizzle_mask(copies)) : 0u;
  // Block copies hold fewer than 2^31 bins, so bins travel as 32-bit ints (fewer registers).
  const auto add = [copy, replica, copies, mask](int bin, std::uint32_t count) {
    add_to_copy<Memory>(copy + bank_swizzled(static_cast<std::uint32_t>(bin * copies + replica), mask), count);
  };
  const auto visit_one = [&](Sample x) {
    ++tally.visited;
    const int bin = static_cast<int>(map(x));
    if (bin < 0) {
      ++tally.left_out;
    } else {
      add(bin, 1);
    }
  };
  const auto visit = [&](const sample_vector<Sample>& v, bool valid) {
    if constexpr (Aggregate == aggregation::none && Memory == copy_memory::shared && !maps_every_sample<Mapper> &&
                  !maps_vectors<Mapper, Sample>) {
      // The shared kernels count a left-out sample in the word after the bins, which no hand-off
      // reads, and take the left-out count by difference (left_out_by_difference): an atomic
      // every sample with no branch around it (a branch a sample cost 16-bit samples two
      // reconvergence instructions and a compare each), the word selected by the mapper where it
      // can (slot_of). The walk's tail (an invalid vector) adds nothing, or counts in the
      // left-out word too (tuning::tail_tested_per_vector).
      const int left_out_word = static_cast<int>(map.num_bins());
      if constexpr (tuning::tail_tested_per_vector<sizeof(Sample)>) {
        if (!valid) return;
        tally.visited += items;
#pragma unroll
        for (int j = 0; j < items; ++j) add(slot_of(map, v.item[j], left_out_word), 1);
      } else {
        tally.visited += valid ? items : 0;
#pragma unroll
        for (int j = 0; j < items; ++j) add(valid ? slot_of(map, v.item[j], left_out_word) : left_out_word, 1);
      }
      return;
    }
    if constexpr (Aggregate == aggregation::none && Memory == copy_memory::shared && gives_slot_items<Mapper, Sample>) {
      // The same for a vector mapper that gives the words (the range-bin grid, the float estimate
      // over float64 edges): the walk's tail counts in the left-out word.
      int slots[items];
      map.slot_items(v.item, slots);
      const int left_out_word = static_cast<int>(map.num_bins());
      tally.visited += valid ? items : 0;
#pragma unroll
      for (int j = 0; j < items; ++j) add(valid ? slots[j] : left_out_word, 1);
      return;
    }
    tally.visited += valid ? items : 0;
    int bins[items];
    tally.left_out += map_vector(map, v, valid, bins);
    if constexpr (Aggregate != aggregation::none) {
      if (warp_adds_once(bins, add)) return;
    }
    if constexpr (Aggregate == aggregation::warp) {
      // Runs of one bin within this lane's vector add as one.
      int run_bin = bins[0];
      std::uint32_t run = 1;
#pragma unroll
      for (int j = 1; j < items; ++j) {
        if (bins[j] == run_bin) {
          ++run;
        } else {
          if (run_bin >= 0) add(run_bin, run);
          run_bin = bins[j];
          run = 1;
        }
      }
      if (run_bin >= 0) add(run_bin, run);
    } else if constexpr (maps_every_sample<Mapper>) {
      if (valid) {  // one check per vector instead of one per sample
#pragma unroll
        for (int j = 0; j < items; ++j) add(bins[j], 1);
      }
    } else if constexpr (Memory == copy_memory::shared) {
      // A vector mapper's samples (the grid's), counted as above: the left-out word, no branch.
      const int left_out_word = static_cast<int>(map.num_bins());
#pragma unroll
      for (int j = 0; j < items; ++j) add(bins[j] >= 0 ? bins[j] : left_out_word, 1);
    } else {
#pragma unroll
      for (int j = 0; j < items; ++j) {
        if (bins[j] >= 0) add(bins[j], 1);
      }
    }
  };
  walk_vectorized<Tuning::loads_per_thread, Tuning::pipelined>(samples, num_samples, visit, visit_one);
  return tally;
}

/// The samples a block's copy was counted from, left out, as this thread's share: what it
/// visited less what it handed on. Summed over the block's threads (modulo 2^64, as warp_add_to
/// adds) it is the block's left-out count, since every counted sample added one to the copy.
__device__ __forceinline__ std::uint64_t left_out_by_difference(const walk_tally& tally, std::uint64_t handed) {
  return static_cast<std::uint64_t>(tally.visited) - handed;
}

/// Counts this thread's share of bytes that all map (byte_shift_mapper) into a block's copy in
/// shared memory: tuning::byte_replicas replicas (thread t in replica t % 64), or, with `copies`
/// 1, one plain copy. The layout is chosen once, outside the walk, and bytes need none of
/// count_vectorized's mapping, so the loop holds the loads, a permute (or a shift and a mask) and an
/// atomic per byte; it times within 1% of a bare kernel of this loop
/// (docs/performance.md, "The byte layout: 64 replicas, one permute a byte").
template <int Unroll>
__device__ __forceinline__ void count_all_bytes(const std::uint8_t* samples, std::int64_t num_samples,
                                                const byte_shift_mapper& map, std::uint32_t* copy, int copies) {
  if (copies == tuning::byte_replicas) {
    std::uint32_t* const rows = copy + map.shift() * tuning::byte_replicas;
    const std::uint32_t replica = threadIdx.x % tuning::byte_replicas;
    walk_vectorized<Unroll>(
        samples, num_samples,
        [&](const uint4& raw, bool valid) {
          if (valid) add_vector_of_bytes_to_replicas(rows, replica * 4, raw);
        },
        [&](std::uint8_t x) { atomicAdd(rows + x * tuning::byte_replicas + replica, 1u); });
  } else {
    std::uint32_t* const row = copy + map.shift();
    walk_vectorized<Unroll>(
        samples, num_samples,
        [&](const uint4& raw, bool valid) {
          if (valid) add_vector_of_bytes(row, raw);
        },
        [&](std::uint8_t x) { atomicAdd(row + x, 1u); });
  }
}

/// Words of the workspace (workspace_slots.hpp) with which one launch starts its counts from zero,
/// so the call needs no memset of them before it: one launch fewer.
/// (A memset: 1.0-1.5 microseconds; docs/performance.md, "Zeroing the output")
struct output_start_words {
  std::uint64_t* left_out;         ///< the call's left-out count
  std::uint64_t* zeroed;           ///< 0 between calls, 1 while a block zeroes, 2 once it has
  std::uint64_t* blocks_finished;  ///< 0 between calls
  bool zero_left_out;              ///< the zeroing block zeroes `left_out` too (else the caller has)
};

/// Whether the launch is one block, which can own the output: store its copy as the counts
/// (add_block_copy's `store`) and skip the protocol of start_output, wait_for_zeroed_output and
/// finish_output (their `owns_output`), whose global round trips (a compare-and-swap, the zeroing
/// and its fence, the mark, the last block's count) a small call waits through. A kernel passes
/// the same choice to all four, so that no block skips the zeroing without storing every count.
__device__ __forceinline__ bool launch_is_one_block() { return gridDim.x == 1; }

/// Each block calls this first: the first block of the launch to get here zeroes `counts` (and the
/// left-out count, where asked: blocks add to it only after wait_for_zeroed_output) at once (it
/// waits on nothing), then marks them zeroed. Every thread of the block must call it. The
/// choice is broadcast by __syncthreads_or rather than a __shared__ flag, so the kernel keeps no
/// static shared memory and its dynamic copy may take all a block can have.
template <class Counter>
__device__ __forceinline__ void start_output(Counter* counts, std::int64_t num_bins, const output_start_words& words,
                                             bool owns_output) {
  if (owns_output) {  // its hand-off stores every count
    if (words.zero_left_out && threadIdx.x == 0) *words.left_out = 0;
    __syncthreads();  // the zero before any thread's add to it
    return;
  }
  bool won = false;
  if (threadIdx.x == 0) {
    std::uint64_t expected = 0;
    won = cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(*words.zeroed)
              .compare_exchange_strong(expected, 1, cuda::memory_order_relaxed);
  }
  if (__syncthreads_or(won ? 1 : 0) == 0) return;
  zero_counters(counts, num_bins);
  if (words.zero_left_out && threadIdx.x == 0) *words.left_out = 0;
  __threadfence();
  __syncthreads();  // every zero is written before the mark
  if (threadIdx.x == 0) {
    cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(*words.zeroed).store(2, cuda::memory_order_release);
  }
}

/// Each block calls this before its first write to the output, after counting: by then the block
/// that zeroes has long finished (it started before this one and waits on nothing), so the wait
/// is one load. Every thread of the block must call it.
__device__ __forceinline__ void wait_for_zeroed_output(const output_start_words& words, bool owns_output) {
  if (owns_output) return;
  if (threadIdx.x == 0) {
    cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device> zeroed(*words.zeroed);
    while (zeroed.load(cuda::memory_order_acquire) != 2) __nanosleep(64);
  }
  __syncthreads();  // the block's threads follow thread 0's acquire
}

/// After its last write to the output, each block calls this; the last block of the launch puts
/// the words back for the next call (every other block is past its wait by then). Every thread of
/// the block must call it.
__device__ __forceinline__ void finish_output(const output_start_words& words, bool owns_output) {
  if (owns_output) return;
  __syncthreads();
  if (threadIdx.x != 0 || !last_block_to_finish(words.blocks_finished)) return;
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(*words.zeroed).store(0, cuda::memory_order_relaxed);
}

/// Adds the block's copy (summing its `copies` replicas, swizzled by `mask` as count_vectorized
/// left them) into the global counts: one device-scope atomic per non-zero bin, or, where `store`
/// (a launch of one block, which owns the counts), a store per bin, zeros included. Returns the
/// sum of what this thread added (for left_out_by_difference).
/// With 32 or 64 replicas, a bin's replicas are consecutive words, 32 to a row of banks: a warp
/// reads them at once and sums them with shuffles (a thread summing them alone would read words of
/// one bank while its neighbours wait on the same banks).
template <class Counter>
__device__ __forceinline__ std::uint64_t add_block_copy(const std::uint32_t* copy, std::int64_t num_bins,
                                                        Counter* counts, int copies, std::uint32_t mask,
                                                        bool store = false) {
  const auto add = [counts, store](std::int64_t bin, std::uint32_t value) {
    if (store) {
      counts[bin] = Counter{value};
    } else if (value != 0) {
      add_to_global_count(counts + bin, Counter{value});
    }
  };
  std::uint64_t handed = 0;
  if (copies == 32 || copies == 64) {  // not swizzled (swizzle_mask)
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int warps = static_cast<int>(blockDim.x / 32);
    for (std::int64_t bin = threadIdx.x / 32; bin < num_bins; bin += warps) {
      std::uint32_t mine = 0;
      for (int r = lane; r < copies; r += 32) mine += copy[bin * copies + r];
      const std::uint32_t value = warp_sum(mine);
      if (lane == 0) {
        add(bin, value);
        handed += value;
      }
    }
    return handed;
  }
  mask &= swizzle_mask(copies);
  for (std::int64_t bin = threadIdx.x; bin < num_bins; bin += blockDim.x) {
    std::uint32_t value = 0;
    for (int r = 0; r < copies; ++r) value += copy[bank_swizzled(static_cast<std::uint32_t>(bin * copies + r), mask)];
    add(bin, value);
    handed += value;
  }
  return handed;
}

/// The byte kernel's hand-off on sm_90 and later: the sums of the block's 256 byte values (rows
/// `shift` to shift + 255 of its copy, each over `copies` replicas) go to the start of the copy,
/// then thread 0 adds them to `first` (counts + shift, 16-byte aligned) with one bulk reduction,
/// cp.reduce.async.bulk .add, where add_block_copy issues one device-scope atomic per non-zero
/// bin: 256 a block on uniform bytes, every block's on the same eight 128-byte lines of counts at
/// the end of the launch. The copy must hold at least 256 Counters. Every thread of the block must
/// call it.
/// (Uniform bytes 0.102 -> 0.093 ms; docs/performance.md, "The floor, a gap, and the bulk hand-off")
template <int BlockThreads, class Counter>
__device__ __forceinline__ void add_byte_copy_in_bulk(std::uint32_t* copy, int shift, int copies, Counter* first) {
  constexpr int values = 256;
  constexpr int per_thread = (values + BlockThreads - 1) / BlockThreads;
  std::uint32_t sums[per_thread];  // a block counts fewer than 2^31 samples
#pragma unroll
  for (int k = 0; k < per_thread; ++k) {
    const int x = static_cast<int>(threadIdx.x) + k * BlockThreads;
    sums[k] = 0;
    if (x >= values) continue;
    const std::uint32_t* const row = copy + static_cast<std::int64_t>(shift + x) * copies;
    if (copies == tuning::byte_replicas) {
      // 16 vectors of 4 replicas, which each thread starts at a different one: the 8 threads of a
      // quarter warp, whose 16-byte reads share a cycle, read 8 different groups of 4 banks.
      const auto* const vectors = reinterpret_cast<const uint4*>(row);
#pragma unroll
      for (int v = 0; v < tuning::byte_replicas / 4; ++v) {
        const uint4 four = vectors[(v + x) % (tuning::byte_replicas / 4)];
        sums[k] += four.x + four.y + four.z + four.w;
      }
    } else {
      for (int r = 0; r < copies; ++r) sums[k] += row[r];
    }
  }
  __syncthreads();  // every replica is read before the sums overwrite the copy's first words
  Counter* const staged = reinterpret_cast<Counter*>(copy);
#pragma unroll
  for (int k = 0; k < per_thread; ++k) {
    const int x = static_cast<int>(threadIdx.x) + k * BlockThreads;
    if (x < values) staged[x] = Counter{sums[k]};
  }
  cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);  // the sums are visible to the bulk copy's proxy
  __syncthreads();
  if (threadIdx.x == 0) {
    cuda::ptx::cp_reduce_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared, cuda::ptx::op_add, first, staged,
                                    static_cast<std::uint32_t>(values * sizeof(Counter)));
    cuda::ptx::cp_async_bulk_commit_group();
    // The block's shared memory must outlive the copy's reads of it.
    cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});
  }
}

/// The byte kernel's hand-off: adds the block's counts of the 256 byte values to counts[shift] to
/// counts[shift + 255] (byte_shift_mapper). In one bulk reduction (add_byte_copy_in_bulk) on
/// sm_90 and later, where those counts start on a 16-byte boundary and the copy's `copy_words`
/// can stage them; otherwise with add_block_copy. Every thread of the block must call it.
template <int BlockThreads, class Counter>
__device__ __forceinline__ void add_byte_copy(std::uint32_t* copy, const byte_shift_mapper& map, int copies,
                                              std::int64_t copy_words, Counter* counts) {
  // Before sm_90 there is no bulk reduction, and nothing to decide.
  NV_IF_TARGET(NV_PROVIDES_SM_90, (
    Counter* const first = counts + map.shift();
    if (reinterpret_cast<std::uintptr_t>(first) % 16 == 0 &&
        copy_words * 4 >= static_cast<std::int64_t>(256 * sizeof(Counter))) {
      add_byte_copy_in_bulk<BlockThreads>(copy, map.shift(), copies, first);
      return;
    }))
  add_block_copy(copy, map.num_bins(), counts, copies, /*mask=*/0u);  // count_all_bytes's layout: not swizzled
}

}  // namespace tally::detail
