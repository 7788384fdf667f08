// The grid of the shared-memory histogram kernels (tally/detail/shared_kernel_grid.hpp): host
// arithmetic, checked here against the rule docs/performance.md states ("One block for a small
// call, and a grid by size") on a GPU of 132 multiprocessors holding two blocks each.
#include <cstddef>
#include <cstdint>

#include <gtest/gtest.h>

#include "tally/detail/shared_kernel_grid.hpp"

namespace tally::detail {
namespace {

constexpr int sms = 132;
constexpr int resident = 2;

std::int64_t blocks(std::int64_t samples, std::size_t sample_bytes, std::int64_t copy_bins) {
  return shared_kernel_blocks(samples, sample_bytes, copy_bins, resident, sms);
}

TEST(SharedKernelGrid, SmallInputsTakeOneBlockUpTo48KiBAnd8BytesABin) {
  EXPECT_EQ(blocks(0, 4, 256), 1);
  EXPECT_EQ(blocks(1, 4, 256), 1);
  EXPECT_EQ(blocks(1000, 4, 4096), 1);
  // 256 bins: 48 KiB + 2 KiB = 12800 four-byte samples; 4096 bins: 48 KiB + 32 KiB = 20480.
  EXPECT_EQ(blocks(12800, 4, 256), 1);
  EXPECT_EQ(blocks(12801, 4, 256), 13);  // a block every 4 KiB: ceil(51204 / 4096)
  EXPECT_EQ(blocks(20480, 4, 4096), 1);
  EXPECT_GT(blocks(20481, 4, 4096), 1);
  // The bins of the copy count its replicas: 256 bins in 8 replicas are 2048 counters.
  EXPECT_EQ(blocks(16384, 4, 256 * 8), 1);
  EXPECT_GT(blocks(16384, 4, 256), 1);
}

TEST(SharedKernelGrid, MidSizedInputsTakeABlockEvery4KiBUpToOneAMultiprocessor) {
  EXPECT_EQ(blocks(std::int64_t{1} << 16, 4, 256), 64);
  EXPECT_EQ(blocks(std::int64_t{1} << 16, 8, 256), 128);
  EXPECT_EQ(blocks(std::int64_t{1} << 18, 4, 4096), sms);
  EXPECT_EQ(blocks(std::int64_t{1} << 20, 4, 4096), sms);
  EXPECT_EQ(blocks(std::int64_t{1} << 22, 4, 256), sms);  // 16 KiB each at two a multiprocessor: one
}

TEST(SharedKernelGrid, LargeInputsFillEveryMultiprocessorWhereEachBlockGetsPlenty) {
  // Two a multiprocessor where each gets 128 KiB and 16 bytes a bin of its copy.
  EXPECT_EQ(blocks(std::int64_t{1} << 24, 4, 256), resident * sms);
  EXPECT_EQ(blocks(std::int64_t{1} << 24, 4, 16384), sms);  // 254 KiB each, 256 KiB for its bins
  EXPECT_EQ(blocks(std::int64_t{1} << 25, 4, 16384), resident * sms);
  EXPECT_EQ(blocks(std::int64_t{1} << 28, 4, 4096), resident * sms);
  EXPECT_EQ(blocks(std::int64_t{1} << 23, 4, 256), sms);  // 127 KiB each at two: one a multiprocessor
  // A kernel that fits one block a multiprocessor, or none reported, launches one a multiprocessor.
  EXPECT_EQ(shared_kernel_blocks(std::int64_t{1} << 28, 4, 4096, 1, sms), sms);
  EXPECT_EQ(shared_kernel_blocks(std::int64_t{1} << 28, 4, 4096, 0, sms), sms);
}

TEST(SharedKernelGrid, NoBlockCountsMoreThanItsCountersHold) {
  // Blocks count in 32-bit counters: at most 2^31 samples each, however few multiprocessors.
  const std::int64_t n = std::int64_t{1} << 40;
  EXPECT_EQ(blocks(n, 1, 256), n / tuning::max_samples_per_block);
  EXPECT_EQ(shared_kernel_blocks(n + 1, 1, 256, 2, 1), n / tuning::max_samples_per_block + 1);
}

}  // namespace
}  // namespace tally::detail
