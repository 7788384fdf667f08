// More than 2^31 samples on the GPU: 64-bit sizes through every layer, checked exactly against
// counts known in closed form (sample i is i mod 251).
#include <algorithm>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/gpu_test_support.hpp"

namespace tally::test {
namespace {

TEST(GpuLargeInput, MoreThan2To31SamplesAreCountedExactly) {
  const std::size_t n = (std::size_t{1} << 31) + 1001;
  const gpu::device_info info = gpu::describe_device();
  if (info.global_memory_bytes < n + (std::size_t{3} << 30)) GTEST_SKIP() << "needs ~5 GiB of device memory";
  std::vector<std::uint8_t> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<std::uint8_t>(i % 251);
  auto samples = to_device(host);
  host = {};
  std::vector<std::uint64_t> expected(256, 0);
  for (std::size_t b = 0; b < 251; ++b) expected[b] = n / 251 + (b < n % 251 ? 1 : 0);
  gpu::device_buffer<std::uint64_t> counts(256);
  // partitioned and radix_sort take the input in chunks of 2^28 samples: nine here, the last partial.
  for (const strategy s : {strategy::automatic, strategy::shared_atomic, strategy::two_phase,
                           strategy::global_privatized, strategy::cub, strategy::partitioned, strategy::radix_sort}) {
    counts.fill_bytes(poison_byte);
    const auto got = gpu::histogram_even(samples.const_span(), counts.span(), even_bins{256, 0.0, 256.0}, {s});
    EXPECT_EQ(download(counts), expected) << to_string(s);
    EXPECT_EQ(got.left_out, 0u) << to_string(s);
  }
  // bincount into 200 bins: values 200..250 are left out.
  counts.fill_bytes(poison_byte);
  const auto bincount_result = gpu::bincount(samples.const_span(), counts.span().first(200));
  const auto counted = download(counts);
  EXPECT_TRUE(std::equal(expected.begin(), expected.begin() + 200, counted.begin()));
  std::uint64_t above = 0;
  for (std::size_t b = 200; b < 251; ++b) above += expected[b];
  EXPECT_EQ(bincount_result.left_out, above);
  EXPECT_EQ(gpu::count_if(samples.const_span(), compare_to<std::uint8_t>{comparison::equal, 250}).count, expected[250]);
}

}  // namespace
}  // namespace tally::test
