// What one block of the partitioned strategy's first pass does with one tile of samples: map each
// sample to its bin, split the bin into a bucket (a range of 2^15 bins) and a 16-bit offset within
// it, rank each sample among the tile's samples of its bucket (per-thread counter columns up to 32
// buckets, warp-grouped shared atomics beyond), group the tile's offsets by bucket in shared memory
// and write them out in one coalesced copy; the tile's count and start per bucket (its cells) are
// gathered for a few tiles, then written to the bucket-major cell tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <cub/block/block_scan.cuh>
#include <cuda_pipeline.h>

#include "tally/bins.hpp"
#include "tally/detail/tuning/large_bins_tuning.hpp"

namespace tally::detail {

/// Loads a sample that is read once, with the streaming hint (__ldcs knows unsigned integers of
/// each width; the bits come back as the sample type).
template <class Sample>
__device__ __forceinline__ Sample load_streaming(const Sample* p) {
  using bits = std::conditional_t<
      sizeof(Sample) == 1, unsigned char,
      std::conditional_t<sizeof(Sample) == 2, unsigned short,
                         std::conditional_t<sizeof(Sample) == 4, unsigned int, unsigned long long>>>;
  static_assert(sizeof(bits) == sizeof(Sample));
  const bits raw = __ldcs(reinterpret_cast<const bits*>(p));
  Sample value;
  memcpy(&value, &raw, sizeof(value));
  return value;
}

/// Where one tile's results go in global memory (see large_bins_layout.hpp).
struct partition_output {
  std::uint16_t* offsets;     ///< tile t's offsets start at t * partition_tile
  std::uint32_t* cell_count;  ///< cell (bucket b, tile t) at b * tiles + t: the tile's samples in b
  std::uint16_t* cell_start;  ///< same cells: where b's offsets start within the tile's
  std::int64_t tiles;
  int buckets;
  int group_tiles;  ///< tiles whose cells a block gathers before it writes them out (cell_group_tiles)
};

/// How a partition block ranks a tile's samples within their buckets (the slot each takes among
/// its bucket's in the staged offsets).
/// - `thread_columns`, up to 32 buckets (2^20 bins): each thread counts its own samples per
///   bucket in a column of 16-bit counters (two buckets a word), with a plain load and store: no
///   atomics, no votes, and the same instructions whatever the data. A scan of the block's
///   counters then gives every (bucket, thread) its start. 16 rows of 512 words take 34 KiB.
/// - `block_atomics`, more buckets: one shared counter per bucket, ranks from warp-grouped atomics
///   (rank_in_bucket); per-thread columns would need a row per 2 buckets.
enum class tile_ranking { thread_columns, block_atomics };

constexpr tile_ranking tile_ranking_for(std::int64_t buckets) {
  return buckets <= 32 ? tile_ranking::thread_columns : tile_ranking::block_atomics;
}

/// A sample's rank among the tile's samples of its bucket, from the bucket's shared counter. In
/// each of up to `Rounds` rounds the lanes whose bucket is that of the first lane still waiting
/// take consecutive ranks from one atomic by that lane; the lanes left after that take one atomic
/// each. A returning shared atomic per lane on one word would serialize up to 32 deep: sorted
/// input and one hot bin (one round), two hot buckets or a bucket holding most samples where the
/// first lane happens to be elsewhere (the second round). Rounds after the first run only while
/// the warp's data is `hot`: when a round of the previous call took 8 lanes or more (this call
/// sets `hot` for the next). On uniform data (groups of a lane or two) they would cost a dozen
/// instructions each for nothing; a bucket that holds most samples keeps them.
/// Ranks come in any order between warps, which is fine: only how many samples a bucket gets
/// matters, not which slot each one lands in. Every lane of the warp must call it, with the same
/// `hot`; `bin` < 0 means left out.
/// The leader's atomic names the leader's own bucket, not the bucket it shuffled to every lane:
/// an atomic on an address the compiler knows to be the same in every lane gets wrapped in the
/// compiler's own warp aggregation (a vote, two population counts, a multiply, a shuffle and a
/// branch), which this function already is: about a dozen instructions more a round.
template <int Rounds>
__device__ __forceinline__ std::uint32_t rank_in_bucket(int bin, std::uint32_t* bucket_count, bool& hot) {
  constexpr unsigned all_lanes = 0xffffffffu;
  constexpr int hot_group = 8;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int bucket = bin >> tuning::bucket_bits;
  bool waiting = bin >= 0;
  unsigned waiting_lanes = __ballot_sync(all_lanes, waiting);
  std::uint32_t rank = 0;
  bool hot_now = false;
#pragma unroll
  for (int round = 0; round < Rounds; ++round) {
    if (waiting_lanes == 0 || (round > 0 && !hot)) break;  // the same in every lane
    const int leader = __ffs(static_cast<int>(waiting_lanes)) - 1;
    const int leader_bucket = __shfl_sync(all_lanes, bucket, leader);
    const bool joins = waiting && bucket == leader_bucket;  // the leader joins its own group
    const unsigned joined = __ballot_sync(all_lanes, joins);
    std::uint32_t base = 0;
    if (lane == leader) base = atomicAdd(bucket_count + bucket, static_cast<std::uint32_t>(__popc(joined)));
    base = __shfl_sync(all_lanes, base, leader);
    if (joins) {
      rank = base + static_cast<std::uint32_t>(__popc(joined & ((1u << lane) - 1u)));
      waiting = false;
    }
    waiting_lanes &= ~joined;
    hot_now = hot_now || __popc(joined) >= hot_group;
  }
  hot = hot_now;
  return waiting ? atomicAdd(bucket_count + bucket, 1u) : rank;
}

/// tile_ranking::thread_columns: a word per (bucket pair, thread), bucket 2r in its low half and
/// 2r + 1 in its high half, in row r. A row is the block's 512 words with a pad word after every
/// 16, so a thread's run of 16 words in row-major order (what it scans) is 17 apart from the next
/// thread's run: the scan's loads touch 32 different banks, and a warp's loads while it ranks
/// (one word per lane, any rows) put at most two lanes on a bank.
/// After the scan a word holds the starts of its two (bucket, thread) pairs: even buckets take
/// the tile's first slots, then odd ones (the order of buckets within a tile is free: each cell
/// records its own start).
template <int Threads>
struct thread_column_ranks {
  static constexpr int rows = 16;  // 32 buckets
  static constexpr int run = 16;   // words a thread scans
  static_assert(Threads % run == 0 && Threads % 32 == 0);
  static constexpr int pitch = Threads + Threads / run;
  static constexpr int words = rows * pitch;

  std::uint32_t* counters;
  int column;  // this thread's word within a row
  std::uint32_t even_total = 0;  // after the scan: the tile's samples in even buckets

  __device__ __forceinline__ explicit thread_column_ranks(std::uint32_t* c)
      : counters(c), column(static_cast<int>(threadIdx.x) + static_cast<int>(threadIdx.x) / run) {}

  __device__ __forceinline__ void zero() const {
    auto* w = reinterpret_cast<uint4*>(counters);
    static_assert(words % 4 == 0);
    for (int i = static_cast<int>(threadIdx.x); i < words / 4; i += Threads) w[i] = make_uint4(0, 0, 0, 0);
  }
  __device__ __forceinline__ std::uint32_t* word_of(int bucket) const { return counters + (bucket >> 1) * pitch + column; }
  static __device__ __forceinline__ int half_of(int bucket) { return (bucket & 1) * 16; }

  /// This thread's count of `bin`'s bucket so far, counting it (nothing for bin < 0).
  __device__ __forceinline__ std::uint32_t rank(int bin) const {
    if (bin < 0) return 0;
    const int bucket = bin >> tuning::bucket_bits;
    std::uint32_t* const word = word_of(bucket);
    const std::uint32_t before = *word;
    *word = before + (1u << half_of(bucket));
    return (before >> half_of(bucket)) & 0xffffu;
  }

  /// Turns the counts into starts and returns the tile's count. Every thread must call it, after
  /// a barrier that follows the last rank; a barrier must follow it.
  template <class Scan>
  __device__ __forceinline__ std::uint32_t scan(Scan& block_scan) {
    // Halves add up separately: each stays below partition_tile <= 2^16.
    std::uint32_t* const mine = counters + (run + 1) * static_cast<int>(threadIdx.x);
    std::uint32_t sum = 0;
#pragma unroll
    for (int j = 0; j < run; ++j) sum += mine[j];
    std::uint32_t running = 0;
    std::uint32_t both = 0;
    block_scan.ExclusiveSum(sum, running, both);
    even_total = both & 0xffffu;
    running += even_total << 16;  // odd buckets after every even one
#pragma unroll
    for (int j = 0; j < run; ++j) {
      const std::uint32_t count = mine[j];
      mine[j] = running;
      running += count;
    }
    return even_total + (both >> 16);
  }

  /// Where this thread's sample of `bin` with rank `rank` goes, after the scan.
  __device__ __forceinline__ std::uint32_t position(int bin, std::uint32_t rank) const {
    const int bucket = bin >> tuning::bucket_bits;
    return ((*word_of(bucket) >> half_of(bucket)) & 0xffffu) + rank;
  }

  /// Where bucket `b`'s samples start in the tile, after the scan: its first thread's start.
  __device__ __forceinline__ std::uint32_t bucket_start(int b, std::uint32_t tile_total) const {
    if (b >= 2 * rows) return tile_total;
    return (counters[(b >> 1) * pitch] >> half_of(b)) & 0xffffu;
  }
  /// Where it ends: where the next bucket in the tile's order starts (b + 2; after the last even
  /// bucket, the first odd one).
  __device__ __forceinline__ std::uint32_t bucket_end(int b, std::uint32_t tile_total) const {
    if (b + 2 < 2 * rows) return bucket_start(b + 2, tile_total);
    return b % 2 == 0 ? even_total : tile_total;
  }
};

/// tile_ranking::block_atomics: a count and then a start per bucket, one word each.
struct block_atomic_ranks {
  std::uint32_t* counts;
  std::uint32_t* starts;
  int buckets;
  bool hot = true;  // rank_in_bucket's: whether the warp's recent samples crowded into a bucket

  __device__ __forceinline__ void zero() const {
    for (int b = static_cast<int>(threadIdx.x); b < buckets; b += static_cast<int>(blockDim.x)) counts[b] = 0;
  }
  __device__ __forceinline__ std::uint32_t rank(int bin) {
    return rank_in_bucket<tuning::partition_rank_rounds>(bin, counts, hot);
  }
  /// Exclusive scan of the counts into bucket starts: each thread takes a run of consecutive
  /// buckets, the block scans the runs' sums.
  template <class Scan>
  __device__ __forceinline__ std::uint32_t scan(Scan& block_scan) const {
    const int threads = static_cast<int>(blockDim.x);
    const int per_thread = (buckets + threads - 1) / threads;
    const int first = static_cast<int>(threadIdx.x) * per_thread;
    const int last = first + per_thread < buckets ? first + per_thread : buckets;
    std::uint32_t run_sum = 0;
    for (int b = first; b < last; ++b) run_sum += counts[b];
    std::uint32_t running = 0;
    std::uint32_t tile_total = 0;
    block_scan.ExclusiveSum(run_sum, running, tile_total);
    for (int b = first; b < last; ++b) {
      starts[b] = running;
      running += counts[b];
    }
    return tile_total;
  }
  __device__ __forceinline__ std::uint32_t position(int bin, std::uint32_t rank) const {
    return starts[bin >> tuning::bucket_bits] + rank;
  }
  __device__ __forceinline__ std::uint32_t bucket_start(int b, std::uint32_t) const { return starts[b]; }
  __device__ __forceinline__ std::uint32_t bucket_end(int b, std::uint32_t) const { return starts[b] + counts[b]; }
};

/// The dynamic shared memory of a partition block, in 16-byte words from its start: the
/// ranking's counters (thread_column_ranks, or block_atomic_ranks: two words a bucket); the cell
/// group, per bucket `group_tiles` counts (32-bit), then as many starts (16-bit), of the tiles
/// gathered before they are written out (write_cell_group); when staged, two tiles of samples
/// (partition_kernel).
struct partition_smem_layout {
  int group_count_at = 0;  ///< in 16-byte words
  int group_start_at = 0;
  int tiles_at = 0;

  __host__ __device__ constexpr partition_smem_layout(std::int64_t buckets, int group_tiles)
      : group_count_at(tile_ranking_for(buckets) == tile_ranking::thread_columns
                           ? thread_column_ranks<tuning::partition_threads>::words / 4
                           : static_cast<int>((buckets * 2 + 3) / 4)),
        group_start_at(group_count_at + (static_cast<int>(buckets) * group_tiles * 4 + 15) / 16),
        tiles_at(group_start_at + (static_cast<int>(buckets) * group_tiles * 2 + 15) / 16) {}

  /// Bytes, with `tile_bytes` of staged samples after the rest (0 when not staged).
  __host__ __device__ constexpr std::size_t bytes(std::size_t tile_bytes) const {
    return static_cast<std::size_t>(tiles_at) * 16 + tile_bytes;
  }
};

/// The static shared memory of a partition block: the staged offsets of one tile, 16-byte
/// aligned for the copy out, and the scan's storage.
template <int Threads>
struct partition_shared {
  using scan = cub::BlockScan<std::uint32_t, Threads>;
  alignas(16) std::uint16_t staging[tuning::partition_tile];
  typename scan::TempStorage scan_storage;
};

/// A partition block's cells of the tiles it has gathered and not yet written out, in shared
/// memory: bucket b's cell of the tile in slot g at b * group_tiles + g.
struct cell_group {
  std::uint32_t* count;
  std::uint16_t* start;
};

/// Copies one whole tile of samples from global to shared memory asynchronously (16-byte
/// cp.async copies, no registers held), as one committed batch of this thread's copies: wait for
/// it with __pipeline_wait_prior, then a barrier, before reading `staged`. Both pointers 16-byte
/// aligned. Every thread of the block must call it.
template <class Sample>
__device__ __forceinline__ void stage_tile_async(Sample* staged, const Sample* tile_samples) {
  constexpr int words = static_cast<int>(tuning::partition_tile * sizeof(Sample) / 16);
  static_assert(tuning::partition_tile * sizeof(Sample) % 16 == 0);
  for (int w = static_cast<int>(threadIdx.x); w < words; w += static_cast<int>(blockDim.x)) {
    __pipeline_memcpy_async(reinterpret_cast<uint4*>(staged) + w, reinterpret_cast<const uint4*>(tile_samples) + w, 16);
  }
  __pipeline_commit();
}

/// Whether a mapper searches edges in memory for a sample's bin (range bins): too dear to map a
/// sample twice.
template <class Mapper>
inline constexpr bool searches_edges = has_tables<Mapper>;
template <class Sample>
inline constexpr bool searches_edges<range_bin_mapper<Sample>> = true;

/// Partitions tile `tile` (`size` samples from `tile_samples`, at most partition_tile) into
/// `out`, its cells into slot `slot` of `group`; returns how many of its samples this thread left
/// out. `Staged`: `tile_samples` is a whole tile's copy in shared memory (stage_tile_async; `size`
/// is partition_tile), not the input in global memory, and no sample needs a bounds check.
/// `ranks`: thread_column_ranks or block_atomic_ranks over the block's shared counters.
/// Every thread of the block must call it. Calls may follow each other with no barrier between
/// them: a call's last shared-memory reads (the staging buffer, in the copy out) come before the
/// next call's first barrier, and the next call writes the staging buffer only after it; the
/// counters it zeroes and rewrites were last read before the previous call's last barrier, and
/// the group slot it writes was read (write_cell_group) before this call's first barrier.
template <int Threads, int Items, bool Staged, class Sample, class Mapper, class Ranks>
__device__ __forceinline__ std::uint32_t partition_tile(const Sample* tile_samples, int size, std::int64_t tile,
                                                        const Mapper& map, const partition_output& out,
                                                        partition_shared<Threads>& shared, Ranks& ranks,
                                                        const cell_group& group, int slot) {
  static_assert(Threads * Items == tuning::partition_tile, "a tile is what the block holds in registers");
  const int thread = static_cast<int>(threadIdx.x);
  ranks.zero();
  __syncthreads();  // the counters are zero

  // Bins below 2^26 (max_partitioned_bins) travel as ints, and ranks, below partition_tile <=
  // 2^16, two to a register: fewer registers, which keeps the kernel within the 64 of two blocks a
  // multiprocessor without spilling.
  static_assert(tuning::partition_tile <= 65536 && Items % 2 == 0 && tuning::partition_tile % 8 == 0);
  int bins[Items];
  std::uint32_t rank_pairs[Items / 2];
  std::uint32_t left_out = 0;
  // Samples are loaded load_group at a time, all in flight at once, then ranked: sample
  // j * Threads + thread, so each warp reads 32 consecutive samples (coalesced) and the samples of
  // sorted input share buckets across a warp. Groups of half the items keep the loaded samples,
  // bins and ranks within the registers.
  constexpr int load_group = Items / 2;
#pragma unroll
  for (int group_first = 0; group_first < Items; group_first += load_group) {
    Sample x[load_group];
#pragma unroll
    for (int g = 0; g < load_group; ++g) {
      const int i = (group_first + g) * Threads + thread;
      if constexpr (Staged) {
        x[g] = tile_samples[i];
      } else {
        x[g] = i < size ? load_streaming(tile_samples + i) : Sample{};
      }
    }
#pragma unroll
    for (int g = 0; g < load_group; ++g) {
      const int j = group_first + g;
      int bin = -1;
      if (Staged || j * Threads + thread < size) {
        bin = static_cast<int>(map(x[g]));
        if constexpr (!maps_every_sample<Mapper>) left_out += bin < 0 ? 1u : 0u;
      }
      bins[j] = bin;
      const std::uint32_t rank = ranks.rank(bin);
      if (j % 2 == 0) {
        rank_pairs[j / 2] = rank;
      } else {
        rank_pairs[j / 2] |= rank << 16;
      }
    }
  }
  __syncthreads();  // every sample has its rank: the counts are final

  typename partition_shared<Threads>::scan block_scan(shared.scan_storage);
  const std::uint32_t tile_total = ranks.scan(block_scan);
  __syncthreads();  // the starts are in

  // The tile's cells, into the group's slot.
  for (int b = thread; b < out.buckets; b += Threads) {
    const std::uint32_t begin = ranks.bucket_start(b, tile_total);
    group.count[b * out.group_tiles + slot] = ranks.bucket_end(b, tile_total) - begin;
    group.start[b * out.group_tiles + slot] = static_cast<std::uint16_t>(begin);  // < partition_tile <= 2^16
  }

  // A staged tile maps its samples again rather than hold their bins in registers across the
  // scan: a shared-memory load and the mapper cost less than the registers (14 of the 64 two
  // blocks a multiprocessor allow), whose lack spilled the ranking to local memory. Not where
  // mapping is a binary search over edges in memory. The staged buffer is next written (the tile
  // after next, staged by partition_kernel) only after the barrier below.
  constexpr bool map_again = Staged && !searches_edges<Mapper>;
#pragma unroll
  for (int j = 0; j < Items; ++j) {
    const int bin = map_again ? static_cast<int>(map(tile_samples[j * Threads + thread])) : bins[j];
    if (bin >= 0) {
      const std::uint32_t rank = (rank_pairs[j / 2] >> (16 * (j % 2))) & 0xffffu;
      shared.staging[ranks.position(bin, rank)] =
          static_cast<std::uint16_t>(bin & static_cast<int>(tuning::bucket_bins - 1));
    }
  }
  __syncthreads();  // the tile's offsets are staged, grouped by bucket; its cells are in the group

  // The copy out: whole 16-byte words, then the last few offsets one by one. Only the tile_total
  // staged offsets are written (the rest of the staging buffer holds an older tile's or nothing).
  std::uint16_t* tile_offsets = out.offsets + tile * tuning::partition_tile;  // 14 KiB apart: 16-byte aligned
  const int words = static_cast<int>(tile_total / 8);
  const auto* staged_words = reinterpret_cast<const uint4*>(shared.staging);
  auto* out_words = reinterpret_cast<uint4*>(tile_offsets);
  for (int w = thread; w < words; w += Threads) __stcs(out_words + w, staged_words[w]);
  const int rest = static_cast<int>(tile_total) - words * 8;
  if (thread < rest) tile_offsets[words * 8 + thread] = shared.staging[words * 8 + thread];
  return left_out;
}

/// Writes the cells of `size` consecutive tiles from `first_tile` on, gathered in `group`, to the
/// cell tables. A bucket's cells of consecutive tiles are neighbours in the tables (b * tiles + t),
/// so lanes write runs of whole sectors rather than a word a bucket scattered over the tables.
/// Every thread of the block must call it, after the barrier that follows the group's last
/// partition_tile.
/// (2^24 bins, one value: 1385 -> 1038 µs; docs/performance.md, "More than 65536 bins: partitioned")
template <int Threads>
__device__ __forceinline__ void write_cell_group(const cell_group& group, std::int64_t first_tile, int size,
                                                 const partition_output& out) {
  const int cells = out.buckets * size;
  for (int i = static_cast<int>(threadIdx.x); i < cells; i += Threads) {
    const int b = i / size;
    const int g = i - b * size;
    const std::int64_t cell = b * out.tiles + first_tile + g;
    out.cell_count[cell] = group.count[b * out.group_tiles + g];
    out.cell_start[cell] = group.start[b * out.group_tiles + g];
  }
}

}  // namespace tally::detail
