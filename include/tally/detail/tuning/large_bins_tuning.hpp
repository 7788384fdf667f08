// Tuning of the large-bin strategies (partitioned, radix_sort), kept apart from their logic. A
// host-safe header: the temporary-storage formula (large_bins_layout.hpp) and its CPU tests use it.
// First choices for sm_90 (H100), reasoned, not yet measured.
#pragma once

#include <cstdint>

namespace tally::detail::tuning {

/// partitioned: a bucket is a range of 2^15 bins, so a sample's place in its bucket fits 16 bits
/// and one bucket's 32-bit counters take 128 KiB, one block per multiprocessor.
inline constexpr int bucket_bits = 15;
inline constexpr std::int64_t bucket_bins = std::int64_t{1} << bucket_bits;
/// Where a block's shared memory holds less (99 KiB on sm_86, sm_89, sm_120), the second pass
/// counts each bucket in up to this many slices, a launch each (bucket_slices).
inline constexpr int max_bucket_slices = 4;
/// Threads of a partition block and samples each holds in registers: a tile of 7168 samples,
/// whose 16-bit offsets (14 KiB) are staged in shared memory. Larger tiles mean fewer, larger
/// cells (cells average tile / buckets samples: 14 at 2^24 bins) but more registers: two blocks a
/// multiprocessor allow 64 a thread, and 16 items spilled a few of them for some mappers (ptxas,
/// sm_90), 14 none.
inline constexpr int partition_threads = 512;
inline constexpr int partition_items = 14;
inline constexpr std::int64_t partition_tile = std::int64_t{partition_threads} * partition_items;
/// Rounds of warp-grouped ranking in a partition block with more than 32 buckets (rank_in_bucket):
/// each takes, with one shared atomic, every lane whose bucket is that of the first lane still
/// waiting.
inline constexpr int partition_rank_rounds = 2;
/// Tiles whose cells a partition block gathers in shared memory before it writes them out, at
/// most: 8 puts a bucket's counts of 8 tiles in one 32-byte sector. Fewer where the gathered
/// cells (6 bytes each) would take more than cell_group_bytes, which with the rest keeps two
/// blocks a multiprocessor at 512 buckets (2^24 bins).
inline constexpr int max_cell_group_tiles = 8;
inline constexpr std::int64_t cell_group_bytes = 24 * 1024;
constexpr int cell_group_tiles(std::int64_t buckets) {
  int tiles = max_cell_group_tiles;
  while (tiles > 1 && buckets * tiles * 6 > cell_group_bytes) tiles /= 2;
  return tiles;
}
/// Threads of a bucket-histogram block (one per multiprocessor: its copy takes 128 KiB), and the
/// granules (8 offsets, 16 bytes) each lane loads before it counts them: 64 KiB in flight a
/// multiprocessor.
inline constexpr int bucket_threads = 1024;
inline constexpr int bucket_unroll = 4;
/// What walking one cell costs a bucket-histogram block, in samples: blocks split the work of
/// samples plus cells evenly, so sparse buckets (a cell of a sample or none) don't pile up in the
/// few blocks whose share of samples they are. A warp takes 32 cells' bounds in one round of loads,
/// about what it takes for 32 granules of samples (256 samples): 8 would be even, 16 leans to cells.
inline constexpr int cell_work = 16;
/// Both strategies take the input in chunks of at most this many samples, so their temporary
/// storage stops growing there (and positions within a chunk fit 32 bits).
inline constexpr std::int64_t large_bins_chunk = std::int64_t{1} << 28;
/// partitioned takes at most 2^26 bins (2^11 buckets): its per-tile tables hold 6 bytes per bucket,
/// so at the limit they take 1.7 bytes per sample next to the 2 bytes of offsets, and a partition
/// block's two per-bucket arrays (16 KiB) still leave room for two blocks a multiprocessor.
inline constexpr std::int64_t max_partitioned_bins = std::int64_t{1} << 26;

}  // namespace tally::detail::tuning
