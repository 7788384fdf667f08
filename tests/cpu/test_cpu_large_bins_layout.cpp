// The temporary-storage formulas of the large-bin GPU strategies (partitioned, radix_sort): host
// code, so checked here against the closed forms that gpu.hpp and docs/strategies.md state.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tally/detail/large_bins_layout.hpp"
#include "tally/strategy.hpp"

namespace tally::detail {
namespace {

constexpr std::size_t up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

/// partitioned: 2 * 7168 * t + 4 * (B * t + 1) + 2 * B * t (each part rounded up to 256) plus
/// CUB's scan storage, with t = ceil(min(N, 2^28) / 7168) and B = ceil(num_bins / 2^15).
std::size_t partitioned_formula(std::int64_t n, std::int64_t bins, std::size_t scan) {
  const std::int64_t c = n < (std::int64_t{1} << 28) ? n : (std::int64_t{1} << 28);
  const auto t = static_cast<std::size_t>((c + 7167) / 7168);
  const auto b = static_cast<std::size_t>((bins + 32767) / 32768);
  return up(2 * 7168 * t) + up(4 * (b * t + 1)) + up(2 * b * t) + up(scan);
}

TEST(LargeBinsLayout, PartitionedStorageFollowsTheStatedFormula) {
  for (const std::int64_t n : {std::int64_t{1}, std::int64_t{7}, std::int64_t{7168}, std::int64_t{7169},
                               std::int64_t{1} << 20, std::int64_t{1} << 28, (std::int64_t{1} << 28) + 1,
                               std::int64_t{1} << 33}) {
    for (const std::int64_t bins : {std::int64_t{1}, std::int64_t{65537}, std::int64_t{1} << 20,
                                    std::int64_t{1} << 24, (std::int64_t{1} << 26) - 1}) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " bins=" << bins);
      const partitioned_layout layout(n, bins);
      EXPECT_EQ(layout.bytes(1000), partitioned_formula(n, bins, 1000));
      // Parts in order, 256-byte aligned, none overlapping the next.
      EXPECT_EQ(layout.offsets_at, 0u);
      EXPECT_GE(layout.cell_first_at, static_cast<std::size_t>(layout.max_tiles) * 7168 * 2);
      EXPECT_GE(layout.cell_start_at - layout.cell_first_at, static_cast<std::size_t>(layout.max_cells + 1) * 4);
      EXPECT_GE(layout.scan_at - layout.cell_start_at, static_cast<std::size_t>(layout.max_cells) * 2);
      for (const std::size_t at : {layout.cell_first_at, layout.cell_start_at, layout.scan_at}) EXPECT_EQ(at % 256, 0u);
    }
  }
}

TEST(LargeBinsLayout, PartitionedStorageStopsGrowingAtOneChunk) {
  const std::int64_t chunk = std::int64_t{1} << 28;
  EXPECT_EQ(partitioned_layout(chunk, 1 << 24).bytes(0), partitioned_layout(std::int64_t{1} << 34, 1 << 24).bytes(0));
  // 2^24 bins, 2^28 samples: 512 buckets, 37450 tiles; about 2.43 bytes a sample, never blocks x bins.
  const partitioned_layout layout(chunk, 1 << 24);
  EXPECT_EQ(layout.buckets, 512);
  EXPECT_EQ(layout.max_tiles, 37450);
  EXPECT_LT(layout.bytes(0), static_cast<std::size_t>(chunk) * 25 / 10);
  // At the largest bin count it takes (2^26), the tables stay below the offsets' 2 bytes a sample.
  const partitioned_layout widest(chunk, std::int64_t{1} << 26);
  EXPECT_LT(widest.bytes(0) - widest.cell_first_at, static_cast<std::size_t>(chunk) * 2);
}

TEST(LargeBinsLayout, CellGroupsFillSectorsWithinTheirSharedMemoryBudget) {
  // Eight tiles' counts of a bucket (32 bytes: one sector) up to 512 buckets (2^24 bins), fewer
  // tiles beyond, never more than cell_group_bytes of shared memory.
  EXPECT_EQ(tuning::cell_group_tiles(1), 8);
  EXPECT_EQ(tuning::cell_group_tiles(32), 8);
  EXPECT_EQ(tuning::cell_group_tiles(512), 8);
  EXPECT_EQ(tuning::cell_group_tiles(513), 4);
  EXPECT_EQ(tuning::cell_group_tiles(1024), 4);
  EXPECT_EQ(tuning::cell_group_tiles(2048), 2);
  for (std::int64_t buckets = 1; buckets <= 2048; ++buckets) {
    EXPECT_LE(buckets * tuning::cell_group_tiles(buckets) * 6, tuning::cell_group_bytes) << buckets;
  }
}

TEST(LargeBinsLayout, RadixSortStorageFollowsTheStatedFormula) {
  for (const std::int64_t n : {std::int64_t{1}, std::int64_t{1000}, std::int64_t{1} << 28, std::int64_t{1} << 31}) {
    for (const std::int64_t bins : {std::int64_t{1}, std::int64_t{999}, std::int64_t{1} << 24}) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " bins=" << bins);
      const std::int64_t c = n < (std::int64_t{1} << 28) ? n : (std::int64_t{1} << 28);
      const std::int64_t u = c < bins + 1 ? c : bins + 1;
      const radix_sort_layout layout(n, bins);
      EXPECT_EQ(layout.bytes(5000), 2 * up(4 * static_cast<std::size_t>(c)) + up(4 * static_cast<std::size_t>(u)) +
                                        up(8) + up(5000));
      EXPECT_EQ(layout.max_runs, u);
    }
  }
}

TEST(LargeBinsLayout, PartsSitAtTheirOffsetsInTheStorage) {
  const partitioned_layout p(5'000'000, 1 << 20);
  std::vector<char> p_storage(p.bytes(1000));
  const auto parts = p.in(p_storage.data());
  EXPECT_EQ(reinterpret_cast<char*>(parts.offsets), p_storage.data() + p.offsets_at);
  EXPECT_EQ(reinterpret_cast<char*>(parts.cell_first), p_storage.data() + p.cell_first_at);
  EXPECT_EQ(reinterpret_cast<char*>(parts.cell_start), p_storage.data() + p.cell_start_at);
  EXPECT_EQ(static_cast<char*>(parts.scan), p_storage.data() + p.scan_at);

  const radix_sort_layout r(5'000'000, 1 << 20);
  std::vector<char> r_storage(r.bytes(1000));
  const auto arrays = r.in(r_storage.data());
  EXPECT_EQ(reinterpret_cast<char*>(arrays.keys), r_storage.data() + r.keys_at);
  EXPECT_EQ(reinterpret_cast<char*>(arrays.other_keys), r_storage.data() + r.other_keys_at);
  EXPECT_EQ(reinterpret_cast<char*>(arrays.lengths), r_storage.data() + r.lengths_at);
  EXPECT_EQ(reinterpret_cast<char*>(arrays.num_runs), r_storage.data() + r.num_runs_at);
  EXPECT_EQ(static_cast<char*>(arrays.cub), r_storage.data() + r.cub_at);
}

TEST(LargeBinsStrategies, AreNamedAndOfferedForGpuHistogramsOnly) {
  for (const auto& [s, name] : {std::pair{strategy::partitioned, "partitioned"}, std::pair{strategy::radix_sort, "radix_sort"}}) {
    EXPECT_EQ(to_string(s), name);
    EXPECT_EQ(parse_strategy(name), s);
    EXPECT_TRUE(supports(backend::gpu, operation::histogram, s));
    EXPECT_FALSE(supports(backend::gpu, operation::weighted_histogram, s));
    EXPECT_FALSE(supports(backend::cpu, operation::histogram, s));
  }
}

}  // namespace
}  // namespace tally::detail
