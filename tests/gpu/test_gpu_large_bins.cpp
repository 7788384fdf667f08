// The large-bin strategies (partitioned, radix_sort) and automatic above the shared-memory sizes,
// bit-exact against the CPU reference: 65537 bins (a last bucket of one bin), 2^20 and 2^24 bins;
// the five benchmark distributions and adversarial ones (two hot bins in a uniform tail; uniform
// data that turns into one bin half-way; out-of-range samples); sizes 0, 1, 7 and sizes that are
// not multiples of a tile; misaligned inputs; int32, float and uint8 samples; both counter
// widths; one case at 2^26 samples; more than 512 buckets (2^24 + 1 and 2^26 bins). And the
// refusals: too many bins, not enough device memory.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/gpu_test_support.hpp"

namespace tally::test {
namespace {

constexpr std::uint64_t seed = 20261123;
constexpr std::int64_t tile = 7168;  // tuning::partition_tile: sizes around it and its multiples

enum class spread {
  uniform,
  geometric,
  single,
  sorted,
  loguniform,
  hot_pair_in_uniform_tail,  ///< 3 in 4 samples in two bins (one of them the last), the rest uniform
  uniform_then_single,       ///< uniform for the first half, then every sample in one bin
  uniform_with_outliers,     ///< uniform, with 1 in 8 samples outside the bins
};
const std::vector<spread> spreads{spread::uniform,    spread::geometric,
                                  spread::single,     spread::sorted,
                                  spread::loguniform, spread::hot_pair_in_uniform_tail,
                                  spread::uniform_then_single, spread::uniform_with_outliers};

const char* to_string(spread s) {
  switch (s) {
    case spread::uniform: return "uniform";
    case spread::geometric: return "geometric";
    case spread::single: return "single";
    case spread::sorted: return "sorted";
    case spread::loguniform: return "loguniform";
    case spread::hot_pair_in_uniform_tail: return "hot_pair_in_uniform_tail";
    case spread::uniform_then_single: return "uniform_then_single";
    case spread::uniform_with_outliers: return "uniform_with_outliers";
  }
  return "?";
}

/// Bin indices in [0, num_bins) with the given spread, or -1 for a sample meant to fall outside.
std::vector<std::int64_t> make_bins(spread s, std::size_t n, std::int64_t num_bins, std::uint64_t case_seed) {
  std::mt19937_64 rng(case_seed);
  std::vector<std::int64_t> out(n);
  const auto any = [&] { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(num_bins)); };
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t bin = 0;
    switch (s) {
      case spread::uniform: bin = any(); break;
      case spread::geometric: bin = std::min<std::int64_t>(std::countr_zero(rng() | (std::uint64_t{1} << 62)), num_bins - 1); break;
      case spread::single: bin = num_bins / 2; break;
      case spread::sorted: bin = static_cast<std::int64_t>(static_cast<double>(i) * static_cast<double>(num_bins) / static_cast<double>(n)); break;
      case spread::loguniform: {
        const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
        bin = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::exp(u * std::log(static_cast<double>(num_bins)))) - 1, 0, num_bins - 1);
        break;
      }
      case spread::hot_pair_in_uniform_tail: {
        const std::uint64_t r = rng() % 8;
        bin = r < 3 ? 12345 % num_bins : r < 6 ? num_bins - 1 : any();
        break;
      }
      case spread::uniform_then_single: bin = i < n / 2 ? any() : num_bins / 3; break;
      case spread::uniform_with_outliers: bin = rng() % 8 == 0 ? -1 : any(); break;
    }
    out[i] = std::min(bin, num_bins - 1);
  }
  return out;
}

/// The bins the samples of type T are counted in, and samples whose bins are `bins` (-1: a value
/// outside them). int32: width-one bins at 0 (the unit-step shortcut) or half a unit off (the
/// general mapper); float: bins of width one (the exact-float shortcut below 2^24 bins, the
/// general mapper at 2^24); uint8: num_bins bins over [0, 200), so only some bins can be hit and
/// the bytes 200..255 fall outside.
template <class T>
even_bins bins_for(std::int64_t num_bins, bool shifted) {
  if constexpr (std::is_same_v<T, std::uint8_t>) return {num_bins, 0.0, 200.0};
  if constexpr (std::is_same_v<T, std::int32_t>) {
    if (shifted) return {num_bins, -0.5, static_cast<double>(num_bins) - 0.5};
  }
  return {num_bins, 0.0, static_cast<double>(num_bins)};
}

template <class T>
std::vector<T> to_samples(const std::vector<std::int64_t>& bins, std::int64_t num_bins, std::uint64_t case_seed) {
  std::mt19937_64 rng(case_seed ^ 0x9e3779b97f4a7c15ull);
  std::vector<T> out(bins.size());
  for (std::size_t i = 0; i < bins.size(); ++i) {
    const std::int64_t b = bins[i];
    if constexpr (std::is_same_v<T, std::uint8_t>) {
      // A byte in [0, 200) spread like the bin index, or one of 200..255 outside.
      out[i] = b < 0 ? static_cast<std::uint8_t>(200 + rng() % 56)
                     : static_cast<std::uint8_t>(static_cast<double>(b) * 200.0 / static_cast<double>(num_bins));
    } else if constexpr (std::is_same_v<T, float>) {
      const float outside[4] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), -1.5f,
                                static_cast<float>(num_bins) + 3.0f};
      out[i] = b < 0 ? outside[rng() % 4] : static_cast<float>(b);
    } else {
      out[i] = b < 0 ? (rng() % 2 == 0 ? static_cast<T>(-1 - static_cast<T>(rng() % 1000)) : static_cast<T>(num_bins + static_cast<T>(rng() % 1000)))
                     : static_cast<T>(b);
    }
  }
  return out;
}

/// Compares counts without printing millions of them: the number of wrong bins and the first.
template <class Counter>
::testing::AssertionResult same_counts(const std::vector<Counter>& got, const std::vector<Counter>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes " << got.size() << " != " << want.size();
  std::size_t wrong = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i] && wrong++ == 0) first = i;
  }
  if (wrong == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << wrong << " bins differ; first: bin " << first << " has " << got[first]
                                       << ", expected " << want[first];
}

/// Runs `s` over `samples` (a device span, maybe misaligned) and checks counts, left-out and the
/// strategy used against the sequential CPU strategy over `host`.
template <class T, class Counter>
void expect_matches(std::span<const T> host, std::span<const T> samples, const even_bins& bins, strategy s,
                    strategy expected_use) {
  std::vector<Counter> expected(static_cast<std::size_t>(bins.num_bins));
  const auto want = cpu::histogram_even(host, std::span<Counter>(expected), bins, {strategy::sequential});
  gpu::device_buffer<Counter> counts(expected.size());
  counts.fill_bytes(poison_byte);
  const histogram_result got = gpu::histogram_even(samples, counts.span(), bins, {s});
  EXPECT_TRUE(same_counts(download(counts), expected));
  EXPECT_EQ(got.left_out, want.left_out);
  EXPECT_EQ(got.chose.used, expected_use);
  EXPECT_FALSE(got.chose.reason.empty());
}

template <class T>
class GpuLargeBins : public ::testing::Test {};
using LargeBinSampleTypes = ::testing::Types<std::int32_t, float, std::uint8_t>;
TYPED_TEST_SUITE(GpuLargeBins, LargeBinSampleTypes);

TYPED_TEST(GpuLargeBins, BothStrategiesMatchTheCpuReferenceOnEveryDistribution) {
  using T = TypeParam;
  int case_index = 0;
  // Few bins too (one bucket, most of it empty): test_gpu_histogram's matrix leaves these two
  // strategies to this test.
  for (const std::int64_t num_bins :
       {std::int64_t{7}, std::int64_t{4096}, std::int64_t{65537}, std::int64_t{1} << 20, std::int64_t{1} << 24}) {
    // The widest histogram (2^24 counters to poison, download and compare) gets fewer sizes.
    const std::vector<std::size_t> sizes =
        num_bins == (1 << 24) ? std::vector<std::size_t>{1, 100003}
        : quick_mode()        ? std::vector<std::size_t>{0, 7, 3 * tile + 5}
                              : std::vector<std::size_t>{0, 1, 7, tile - 1, 3 * tile + 5, 100003};
    for (const spread sp : spreads) {
      for (const std::size_t n : sizes) {
        ++case_index;
        const std::uint64_t case_seed = seed + static_cast<std::uint64_t>(case_index);
        SCOPED_TRACE(::testing::Message() << type_name<T>() << " bins=" << num_bins << " " << to_string(sp)
                                          << " n=" << n << " seed=" << case_seed);
        const std::vector<T> host = to_samples<T>(make_bins(sp, n, num_bins, case_seed), num_bins, case_seed);
        auto samples = to_device(host);
        const even_bins bins = bins_for<T>(num_bins, case_index % 2 == 1);
        for (const strategy s : {strategy::partitioned, strategy::radix_sort}) {
          SCOPED_TRACE(std::string(tally::to_string(s)));
          if (case_index % 2 == 0) {
            expect_matches<T, std::uint32_t>(host, samples.const_span(), bins, s, s);
          } else {
            expect_matches<T, std::uint64_t>(host, samples.const_span(), bins, s, s);
          }
        }
      }
    }
  }
}

TYPED_TEST(GpuLargeBins, MisalignedSamplesAreCountedExactly) {
  using T = TypeParam;
  const std::int64_t num_bins = std::int64_t{1} << 20;
  for (const spread sp : {spread::uniform, spread::sorted, spread::uniform_with_outliers}) {
    const std::vector<T> host = to_samples<T>(make_bins(sp, 100003, num_bins, seed), num_bins, seed);
    auto samples = to_device(host);
    for (std::size_t offset = 1; offset < 4; ++offset) {
      const std::size_t n = host.size() - offset - 2;
      for (const strategy s : {strategy::partitioned, strategy::radix_sort}) {
        SCOPED_TRACE(::testing::Message() << type_name<T>() << " " << to_string(sp) << " offset=" << offset << " "
                                          << tally::to_string(s));
        expect_matches<T, std::uint32_t>(std::span<const T>(host).subspan(offset, n),
                                         samples.const_span().subspan(offset, n), bins_for<T>(num_bins, false), s, s);
      }
    }
  }
}

TYPED_TEST(GpuLargeBins, AutomaticPartitionsBinsBeyondSharedMemoryAndFoldsBytes) {
  using T = TypeParam;
  for (const std::int64_t num_bins : {std::int64_t{1} << 18, std::int64_t{1} << 20, std::int64_t{1} << 24}) {
    SCOPED_TRACE(::testing::Message() << type_name<T>() << " bins=" << num_bins);
    const std::vector<T> host =
        to_samples<T>(make_bins(spread::loguniform, 200001, num_bins, seed + 3), num_bins, seed + 3);
    auto samples = to_device(host);
    // Bytes take only 256 values, whatever the bins: automatic counts those in replicas and folds
    // them into the bins, rather than partitioning.
    const strategy expected = std::is_same_v<T, std::uint8_t> ? strategy::replicated : strategy::partitioned;
    expect_matches<T, std::uint64_t>(host, samples.const_span(), bins_for<T>(num_bins, false), strategy::automatic,
                                     expected);
  }
}

/// 65536 bins (a 16-bit image's values) stay in shared memory on every chip: as 16-bit counters
/// (packed16) where a block holds 128 KiB, else partitioned, counting each bucket in slices where
/// it cannot hold one bucket's 128 KiB of counters (test_gpu_large_bins_99k runs this as on a chip
/// of 99 KiB). Never one global atomic per sample.
TEST(GpuLargeBinsSharedMemory, SixteenBitBinsStayOnChipWhateverTheSharedMemory) {
  const std::int64_t num_bins = 65536;
  const std::size_t shared = gpu::describe_device().shared_memory_per_block_optin;
  const strategy expected = shared >= (std::size_t{129} << 10) ? strategy::packed16 : strategy::partitioned;
  for (const spread sp : {spread::uniform, spread::sorted, spread::single}) {
    SCOPED_TRACE(::testing::Message() << to_string(sp) << " shared=" << shared);
    const std::vector<std::int32_t> host = to_samples<std::int32_t>(make_bins(sp, 300007, num_bins, seed + 5), num_bins,
                                                                    seed + 5);
    auto samples = to_device(host);
    expect_matches<std::int32_t, std::uint32_t>(host, samples.const_span(), bins_for<std::int32_t>(num_bins, false),
                                                strategy::automatic, expected);
  }
}

/// 2^26 samples, several chunks' worth of tiles and every block of the second pass busy: hot bins
/// in a uniform tail with samples outside the bins, loguniform data over 2^24 bins, and uniform
/// data that turns into one bin.
TEST(GpuLargeBinsBig, TwoTo26SamplesAreCountedExactly) {
  const std::size_t n = std::size_t{1} << (quick_mode() ? 22 : 26);
  const std::int64_t num_bins = std::int64_t{1} << 24;
  std::vector<std::int64_t> bins = make_bins(spread::hot_pair_in_uniform_tail, n, num_bins, seed + 7);
  for (std::size_t i = 0; i < n; i += 11) bins[i] = -1;
  const std::vector<std::int32_t> host = to_samples<std::int32_t>(bins, num_bins, seed + 7);
  bins = {};
  auto samples = to_device(host);
  for (const strategy s : {strategy::partitioned, strategy::radix_sort}) {
    SCOPED_TRACE(std::string(tally::to_string(s)));
    expect_matches<std::int32_t, std::uint32_t>(host, samples.const_span(), even_bins{num_bins, 0.0, 16777216.0}, s, s);
  }
  // Loguniform over 2^24 bins: 5 in 8 samples in the first bucket, the last buckets nearly empty,
  // so the second pass's blocks split their work by cells as much as by samples.
  const std::vector<std::int32_t> tail = to_samples<std::int32_t>(
      make_bins(spread::loguniform, n, num_bins, seed + 9), num_bins, seed + 9);
  auto tail_samples = to_device(tail);
  expect_matches<std::int32_t, std::uint32_t>(tail, tail_samples.const_span(), even_bins{num_bins, 0.0, 16777216.0},
                                              strategy::partitioned, strategy::partitioned);
  const std::vector<std::int32_t> phases = to_samples<std::int32_t>(
      make_bins(spread::uniform_then_single, n, std::int64_t{1} << 20, seed + 8), std::int64_t{1} << 20, seed + 8);
  auto phase_samples = to_device(phases);
  expect_matches<std::int32_t, std::uint64_t>(phases, phase_samples.const_span(), even_bins{1 << 20, 0.0, 1048576.0},
                                              strategy::partitioned, strategy::partitioned);
}

/// More than 512 buckets of 2^15 bins (above 2^24 bins): the first pass compares 11 bits of a
/// bucket within a warp and reads its samples straight from global memory. 2^24 + 1 bins (a last
/// bucket of one bin) and 2^26, the most partitioned takes; several tiles a block, so cells go out
/// in full and partial groups; sizes that are not a multiple of the tile.
TEST(GpuLargeBinsBig, MoreThan512BucketsAreCountedExactly) {
  int case_index = 0;
  for (const std::int64_t num_bins : {(std::int64_t{1} << 24) + 1, std::int64_t{1} << 26}) {
    for (const spread sp : {spread::uniform, spread::sorted, spread::hot_pair_in_uniform_tail,
                            spread::uniform_with_outliers}) {
      for (const std::size_t n : {std::size_t{100003}, std::size_t{1} << (quick_mode() ? 21 : 23)}) {
        ++case_index;
        const std::uint64_t case_seed = seed + 100 + static_cast<std::uint64_t>(case_index);
        SCOPED_TRACE(::testing::Message() << "bins=" << num_bins << " " << to_string(sp) << " n=" << n
                                          << " seed=" << case_seed);
        const std::vector<std::int32_t> host =
            to_samples<std::int32_t>(make_bins(sp, n, num_bins, case_seed), num_bins, case_seed);
        auto samples = to_device(host);
        expect_matches<std::int32_t, std::uint32_t>(host, samples.const_span(),
                                                    even_bins{num_bins, 0.0, static_cast<double>(num_bins)},
                                                    strategy::partitioned, strategy::partitioned);
      }
    }
  }
}

TEST(GpuLargeBinsRefusals, PartitionedRefusesMoreThan2To26BinsAndAutomaticFallsBack) {
  const std::int64_t num_bins = (std::int64_t{1} << 26) + 1;
  const std::vector<std::int32_t> host{0, 5, 1 << 25, (1 << 26), -3, 7};
  auto samples = to_device(host);
  gpu::device_buffer<std::uint32_t> counts(static_cast<std::size_t>(num_bins));
  counts.fill_bytes(poison_byte);
  const even_bins bins{num_bins, 0.0, static_cast<double>(num_bins)};
  try {
    gpu::histogram_even(samples.const_span(), counts.span(), bins, {strategy::partitioned});
    ADD_FAILURE() << "partitioned accepted 2^26 + 1 bins";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::not_supported) << e.what();
    EXPECT_EQ(e.argument(), "strategy") << e.what();
  }
  const std::vector<std::uint32_t> head = [&] {
    std::vector<std::uint32_t> all = download(counts);
    return std::vector<std::uint32_t>(all.begin(), all.begin() + 8);
  }();
  for (const std::uint32_t c : head) EXPECT_EQ(c, 0xababababu) << "written before the refusal";
  const auto got = gpu::histogram_even(samples.const_span(), counts.span(), bins);
  EXPECT_EQ(got.chose.used, strategy::atomic);
  EXPECT_EQ(got.left_out, 1u);
  const std::vector<std::uint32_t> result = download(counts);
  EXPECT_EQ(result[0], 1u);
  EXPECT_EQ(result[1 << 25], 1u);
  EXPECT_EQ(result[1 << 26], 1u);
}

/// CUB's histogram offsets its blocks' copies of the bins in 32-bit arithmetic; at 2^24 bins that
/// wrapped and crashed the context on an H100, so the cub strategy refuses such bin counts up front.
TEST(GpuLargeBinsRefusals, CubRefusesBinCountsWhoseBlockCopiesWouldWrapItsOffsets) {
  const std::int64_t num_bins = std::int64_t{1} << 24;
  const std::vector<std::int32_t> host(1000, 7);
  auto samples = to_device(host);
  gpu::device_buffer<std::uint32_t> counts(static_cast<std::size_t>(num_bins));
  counts.fill_bytes(poison_byte);
  try {
    gpu::histogram_even(samples.const_span(), counts.span(), even_bins{num_bins, 0.0, 16777216.0}, {strategy::cub});
    ADD_FAILURE() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::not_supported) << e.what();
  }
  for (const std::uint32_t c : download(counts)) ASSERT_EQ(c, 0xababababu);
}

/// A request whose temporary storage cannot fit the device is refused before anything runs, with
/// an error naming `samples`. The device is filled first, leaving 256-512 MiB free; the span
/// claims 2^28 samples over a small buffer, which is never read, as the refusal comes first
/// (partitioned needs about 630 MiB for it, radix_sort about 2 GiB).
TEST(GpuLargeBinsRefusals, StorageBeyondTheFreeDeviceMemoryIsRefusedBeforeAnythingRuns) {
  // The sanitizers (which gpu-check runs in quick mode) report the failed cudaMalloc that finds
  // the end of the device memory as an error of their own.
  if (quick_mode()) GTEST_SKIP() << "fills the device memory until an allocation fails";
  const std::int64_t num_bins = std::int64_t{1} << 24;
  gpu::device_buffer<std::int32_t> small(1024);
  gpu::device_buffer<std::uint32_t> counts(static_cast<std::size_t>(num_bins));
  counts.fill_bytes(poison_byte);
  const std::span<const std::int32_t> claimed(small.data(), std::size_t{1} << 28);
  gpu::workspace ws;
  (void)ws.scalar();  // its small block taken now, while there is room
  std::vector<std::unique_ptr<gpu::device_buffer<char>>> filler;
  constexpr std::size_t piece = std::size_t{256} << 20;
  try {
    while (filler.size() < 4096) filler.push_back(std::make_unique<gpu::device_buffer<char>>(piece));
  } catch (const error& e) {
    ASSERT_EQ(e.code(), errc::out_of_memory) << e.what();
  }
  ASSERT_FALSE(filler.empty());
  filler.pop_back();  // 256 to 512 MiB free
  for (const strategy s : {strategy::partitioned, strategy::radix_sort}) {
    SCOPED_TRACE(std::string(tally::to_string(s)));
    try {
      gpu::histogram_even_async(claimed, counts.span(), even_bins{num_bins, 0.0, 16777216.0}, ws, {s});
      ADD_FAILURE() << "no error";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::out_of_memory) << e.what();
      EXPECT_EQ(e.argument(), "samples") << e.what();
      EXPECT_NE(std::string(e.what()).find("samples"), std::string::npos) << e.what();
    }
  }
  filler.clear();
  std::vector<std::uint32_t> head(16);
  gpu::detail::copy_to_host(head.data(), counts.data(), head.size() * sizeof(std::uint32_t));
  for (const std::uint32_t c : head) EXPECT_EQ(c, 0xababababu) << "written before the refusal";
  // The failed allocation left no error behind: the next call runs (and counts) normally.
  const std::vector<std::int32_t> host{3, 3, 70000, -1};
  auto samples = to_device(host);
  const auto got = gpu::histogram_even(samples.const_span(), counts.span(), even_bins{num_bins, 0.0, 16777216.0},
                                       {strategy::partitioned});
  EXPECT_EQ(got.left_out, 1u);
  const std::vector<std::uint32_t> result = download(counts);
  EXPECT_EQ(result[3], 2u);
  EXPECT_EQ(result[70000], 1u);
}

}  // namespace
}  // namespace tally::test
