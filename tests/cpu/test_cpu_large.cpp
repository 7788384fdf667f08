// Inputs past the 32-bit limits (labels `cpu` and `large`; `ctest -LE large` leaves them out):
// more than 2^31 samples, where an `int` index or size would overflow, and 2^32 - 1 and 2^32 + 5
// samples, the most 32-bit counters may count and the least they may not. Counts are checked
// exactly against values worked out by hand, not against the oracle (which would take minutes).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "tally/cpu/histogram.hpp"
#include "test_support.hpp"

namespace {

using tally_test::poison;

TEST(LargeInput, HistogramEvenAndBincountCountMoreThan2To31SamplesExactly) {
  // 2^31 + 1000 samples, sample i = i % 251: value v < 251 occurs q + (v < r) times, where
  // N = 251 q + r; values 251..255 never occur. 2 GiB of memory.
  const std::uint64_t n = (std::uint64_t{1} << 31) + 1000;
  // Not a std::vector: zero-filling 2 GiB first would only add time.
  const std::unique_ptr<std::uint8_t[]> storage(new std::uint8_t[n]);
  const std::span<std::uint8_t> samples(storage.get(), n);
  // The pattern repeats every 251 bytes: write one block of whole periods, then double it.
  std::uint64_t filled = 251 * 4096;
  for (std::uint64_t i = 0; i < filled; ++i) samples[i] = static_cast<std::uint8_t>(i % 251);
  while (filled < n) {
    const std::uint64_t chunk = std::min(filled, n - filled);  // `filled` is a multiple of 251
    std::copy_n(samples.data(), chunk, samples.data() + filled);
    filled += chunk;
  }
  ASSERT_EQ(samples[n - 1], static_cast<std::uint8_t>((n - 1) % 251));
  const std::uint64_t q = n / 251;
  const std::uint64_t r = n % 251;
  std::vector<std::uint64_t> expected(256, 0);
  for (std::uint64_t v = 0; v < 251; ++v) expected[v] = q + (v < r ? 1 : 0);

  std::vector<std::uint64_t> counts(256, poison<std::uint64_t>);
  const auto even = tally::cpu::histogram_even<std::uint8_t, std::uint64_t>(samples, counts, {256, 0.0, 256.0});
  tally_test::expect_chose(even.chose, tally::strategy::automatic, tally::operation::histogram);
  EXPECT_EQ(even.left_out, 0u);
  EXPECT_TRUE(tally_test::counts_equal<std::uint64_t>(counts, expected));

  // Same data through bincount with 32-bit counters (allowed: n < 2^32), 200 bins: values
  // 200..250 are left out.
  std::vector<std::uint32_t> counts32(200, poison<std::uint32_t>);
  const auto bc = tally::cpu::bincount<std::uint8_t, std::uint32_t>(samples, counts32);
  std::uint64_t expected_left_out = 0;
  for (std::uint64_t v = 200; v < 251; ++v) expected_left_out += expected[v];
  expected.resize(200);
  EXPECT_EQ(bc.left_out, expected_left_out);
  EXPECT_TRUE(tally_test::counts_equal<std::uint32_t>(counts32, expected));
}

/// `size` zero bytes of read-only address space: every page maps the kernel's shared zero page,
/// so billions of samples cost no memory.
class ZeroSamples {
 public:
  explicit ZeroSamples(std::size_t size) : size_(size) {
    void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<const std::uint8_t*>(p);
  }
  ~ZeroSamples() {
    if (data_ != nullptr) munmap(const_cast<std::uint8_t*>(data_), size_);
  }
  ZeroSamples(const ZeroSamples&) = delete;
  ZeroSamples& operator=(const ZeroSamples&) = delete;
  [[nodiscard]] bool mapped() const { return data_ != nullptr; }
  [[nodiscard]] std::span<const std::uint8_t> span() const { return {data_, size_}; }

 private:
  const std::uint8_t* data_ = nullptr;
  std::size_t size_;
};

TEST(LargeInput, Uint32CountersCountExactly2To32Minus1SamplesInOneBin) {
  // The largest input 32-bit counters accept, all in one bin: the count is exactly UINT32_MAX.
  const ZeroSamples samples((std::size_t{1} << 32) - 1);
  ASSERT_TRUE(samples.mapped()) << "could not map 4 GiB of zero pages";
  std::vector<std::uint32_t> counts(2, poison<std::uint32_t>);
  const auto result = tally::cpu::bincount<std::uint8_t, std::uint32_t>(samples.span(), counts);
  EXPECT_EQ(result.left_out, 0u);
  EXPECT_EQ(counts[0], std::uint32_t{0xFFFFFFFF});
  EXPECT_EQ(counts[1], 0u);
}

TEST(LargeInput, Uint64CountersCountPast2To32WithoutWrapping) {
  const std::size_t n = (std::size_t{1} << 32) + 5;
  const ZeroSamples samples(n);
  ASSERT_TRUE(samples.mapped()) << "could not map 4 GiB of zero pages";
  std::vector<std::uint64_t> counts(3, poison<std::uint64_t>);
  const auto result = tally::cpu::bincount<std::uint8_t, std::uint64_t>(samples.span(), counts);
  EXPECT_EQ(result.left_out, 0u);
  EXPECT_EQ(counts[0], std::uint64_t{n});
  EXPECT_EQ(counts[1], 0u);
  EXPECT_EQ(counts[2], 0u);
}

}  // namespace
