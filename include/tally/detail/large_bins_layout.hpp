// Where the large-bin strategies keep their temporary storage, and so how much they need: the
// formulas gpu.hpp and docs/strategies.md state, computed by host code (and checked by the CPU tests).
// CUB's own scratch storage is sized by CUB and passed in.
//
// partitioned, with c = min(N, 2^28) samples per chunk, t = ceil(c / 7168) tiles per chunk and
// B = ceil(num_bins / 2^15) buckets (cells = B * t, one per bucket and tile):
//   offsets     2 * 7168 * t bytes    every in-range sample's 16-bit place in its bucket, by tile
//   cell_first  4 * (cells + 1)       per cell its count, then (scanned) its first position
//   cell_start  2 * cells             per cell its first offset within the tile
//   scan        CUB's ExclusiveSum storage for cells + 1 uint32
// each part rounded up to 256 bytes.
//
// radix_sort, with c as above and u = min(c, num_bins + 1) (the distinct keys of a chunk, the
// left-out key num_bins included):
//   keys        2 * 4 * c bytes       bin indices and the radix sort's second buffer
//   lengths     4 * u                 run lengths (the unique keys go to the free key buffer)
//   num_runs    8
//   cub         max(CUB's radix sort storage, CUB's run-length storage)
// each part rounded up to 256 bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tally/detail/tuning/large_bins_tuning.hpp"

namespace tally::detail {

inline constexpr std::size_t temp_alignment = 256;

constexpr std::size_t align_up(std::size_t bytes) { return (bytes + temp_alignment - 1) / temp_alignment * temp_alignment; }

/// Samples in one chunk of a large-bin strategy: min(N, 2^28).
constexpr std::int64_t large_bins_chunk_samples(std::int64_t num_samples) {
  return std::min(num_samples, tuning::large_bins_chunk);
}

/// The partitioned strategy's storage for `num_samples` samples over `num_bins` bins, sized for
/// its largest chunk (later chunks are no larger, so they use a prefix of each part).
struct partitioned_layout {
  std::int64_t buckets = 0;    ///< ceil(num_bins / 2^15)
  std::int64_t max_tiles = 0;  ///< tiles of the first (largest) chunk
  std::int64_t max_cells = 0;  ///< buckets * max_tiles
  std::size_t offsets_at = 0;
  std::size_t cell_first_at = 0;
  std::size_t cell_start_at = 0;
  std::size_t scan_at = 0;

  constexpr partitioned_layout(std::int64_t num_samples, std::int64_t num_bins)
      : buckets((num_bins + tuning::bucket_bins - 1) / tuning::bucket_bins),
        max_tiles((large_bins_chunk_samples(num_samples) + tuning::partition_tile - 1) / tuning::partition_tile),
        max_cells(buckets * max_tiles) {
    offsets_at = 0;
    cell_first_at = offsets_at + align_up(static_cast<std::size_t>(max_tiles * tuning::partition_tile) * 2);
    cell_start_at = cell_first_at + align_up(static_cast<std::size_t>(max_cells + 1) * 4);
    scan_at = cell_start_at + align_up(static_cast<std::size_t>(max_cells) * 2);
  }

  /// Everything, with `scan_bytes` of CUB scan storage.
  constexpr std::size_t bytes(std::size_t scan_bytes) const { return scan_at + align_up(scan_bytes); }

  struct arrays {
    std::uint16_t* offsets;
    std::uint32_t* cell_first;
    std::uint16_t* cell_start;
    void* scan;
  };
  /// The parts in `temp`, storage of at least bytes(scan_bytes).
  arrays in(void* temp) const {
    char* base = static_cast<char*>(temp);
    return {reinterpret_cast<std::uint16_t*>(base + offsets_at), reinterpret_cast<std::uint32_t*>(base + cell_first_at),
            reinterpret_cast<std::uint16_t*>(base + cell_start_at), base + scan_at};
  }
};

/// The radix_sort strategy's storage for `num_samples` samples over `num_bins` bins.
struct radix_sort_layout {
  std::int64_t chunk = 0;          ///< min(N, 2^28)
  std::int64_t max_runs = 0;       ///< min(chunk, num_bins + 1)
  std::size_t keys_at = 0;         ///< the first key buffer
  std::size_t other_keys_at = 0;   ///< the second key buffer
  std::size_t lengths_at = 0;
  std::size_t num_runs_at = 0;
  std::size_t cub_at = 0;

  constexpr radix_sort_layout(std::int64_t num_samples, std::int64_t num_bins)
      : chunk(large_bins_chunk_samples(num_samples)), max_runs(std::min(chunk, num_bins + 1)) {
    keys_at = 0;
    other_keys_at = keys_at + align_up(static_cast<std::size_t>(chunk) * 4);
    lengths_at = other_keys_at + align_up(static_cast<std::size_t>(chunk) * 4);
    num_runs_at = lengths_at + align_up(static_cast<std::size_t>(max_runs) * 4);
    cub_at = num_runs_at + align_up(8);
  }

  /// Everything, with `cub_bytes` = max(radix sort, run-length encode) of CUB storage.
  constexpr std::size_t bytes(std::size_t cub_bytes) const { return cub_at + align_up(cub_bytes); }

  struct arrays {
    std::uint32_t* keys;
    std::uint32_t* other_keys;
    std::uint32_t* lengths;
    int* num_runs;
    void* cub;
  };
  /// The parts in `temp`, storage of at least bytes(cub_bytes).
  arrays in(void* temp) const {
    char* base = static_cast<char*>(temp);
    return {reinterpret_cast<std::uint32_t*>(base + keys_at), reinterpret_cast<std::uint32_t*>(base + other_keys_at),
            reinterpret_cast<std::uint32_t*>(base + lengths_at), reinterpret_cast<int*>(base + num_runs_at),
            base + cub_at};
  }
};

}  // namespace tally::detail
