// Tests of detail::cub_even_bins_unfit: the cases CUB counts otherwise than tally are refused, the
// exact ones accepted, and wherever it accepts, CUB's bin arithmetic, emulated on the host in the
// precision CUB uses, puts every sample near an edge in the bin even_bin_mapper does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "tally/bins.hpp"
#include "tally/detail/cub_bins.hpp"
#include "test_support.hpp"

namespace {

using tally::even_bins;
using tally::upper_edge;
using tally::detail::cub_even_bins_unfit;

/// CUB's bin of x (dispatch_histogram.cuh, ScaleTransform::BinSelect), or -1 for a sample it drops,
/// with the levels tally passes (the sample type; int for bytes) and CUB's own types: for integers
/// the differences in the common type, wrapping as on the GPU, then 64-bit unsigned arithmetic; for
/// floating samples every operation rounded in the sample type (the tests build without FMA).
template <class Sample>
std::int64_t cub_bin(Sample x, const even_bins& bins) {
  using level = std::conditional_t<sizeof(Sample) == 1, int, Sample>;
  using common = std::common_type_t<level, Sample>;
  const auto lower = static_cast<common>(static_cast<level>(bins.lower));
  const auto upper = static_cast<common>(static_cast<level>(bins.upper));
  const auto sample = static_cast<common>(x);
  if (!(sample >= lower && sample < upper)) return -1;
  if constexpr (std::is_integral_v<common>) {
    using wrapping = std::make_unsigned_t<common>;
    const auto offset = static_cast<common>(static_cast<wrapping>(sample) - static_cast<wrapping>(lower));
    const auto range = static_cast<common>(static_cast<wrapping>(upper) - static_cast<wrapping>(lower));
    const auto n = static_cast<std::uint64_t>(static_cast<common>(bins.num_bins));
    return static_cast<int>(static_cast<std::uint64_t>(offset) * n / static_cast<std::uint64_t>(range));
  } else {
    const auto reciprocal = static_cast<common>(static_cast<common>(bins.num_bins) / (upper - lower));
    return static_cast<int>((sample - lower) * reciprocal);
  }
}

template <class Sample>
std::int64_t tally_bin(Sample x, const even_bins& bins) {
  return tally::even_bin_mapper<Sample>(bins, upper_edge::exclusive)(x);
}

std::string describe(const even_bins& bins) {
  char text[160];
  std::snprintf(text, sizeof(text), "%lld bins over [%.17g, %.17g)", static_cast<long long>(bins.num_bins), bins.lower,
                bins.upper);
  return text;
}

/// Whether `v` is a value of the sample type (so a sample to try).
template <class Sample>
bool representable(double v) {
  if constexpr (std::is_integral_v<Sample>) {
    return v >= static_cast<double>(std::numeric_limits<Sample>::lowest()) &&
           v < static_cast<double>(std::numeric_limits<Sample>::max()) && std::floor(v) == v;
  } else {
    return static_cast<double>(static_cast<Sample>(v)) == v;
  }
}

/// Samples on and next to the edges tally computes and the exact rational ones (the first 200
/// edges, 200 at random and the last ones), the bounds, zero and the type's extremes.
template <class Sample>
std::vector<Sample> samples_near_edges(const even_bins& bins, std::mt19937_64& rng) {
  std::vector<std::int64_t> indices;
  for (std::int64_t i = 0; i <= std::min<std::int64_t>(bins.num_bins, 200); ++i) indices.push_back(i);
  for (int k = 0; k < 200; ++k) indices.push_back(std::uniform_int_distribution<std::int64_t>(0, bins.num_bins)(rng));
  for (std::int64_t i = std::max<std::int64_t>(0, bins.num_bins - 5); i <= bins.num_bins; ++i) indices.push_back(i);
  std::vector<double> at{0.0, bins.lower, bins.upper};
  const tally::even_bin_mapper<Sample> map(bins, upper_edge::exclusive);
  for (const std::int64_t i : indices) {
    at.push_back(static_cast<double>(map.edge(i)));
    at.push_back(bins.lower + static_cast<double>(i) * (bins.upper - bins.lower) / static_cast<double>(bins.num_bins));
  }
  std::vector<Sample> out;
  const auto add = [&](double v) {
    if (representable<Sample>(v)) out.push_back(static_cast<Sample>(v));
  };
  for (const double v : at) {
    if constexpr (std::is_integral_v<Sample>) {
      for (const double d : {-2.0, -1.0, 0.0, 1.0, 2.0}) {
        add(std::floor(v) + d);
        add(std::ceil(v) + d);
      }
    } else {
      if (!representable<Sample>(v)) continue;
      auto below = static_cast<Sample>(v);
      auto above = below;
      out.push_back(below);
      for (int k = 0; k < 3; ++k) {
        below = std::nextafter(below, -std::numeric_limits<Sample>::infinity());
        above = std::nextafter(above, std::numeric_limits<Sample>::infinity());
        out.push_back(below);
        out.push_back(above);
      }
    }
  }
  if constexpr (std::is_floating_point_v<Sample>) {
    for (const Sample v : {std::numeric_limits<Sample>::denorm_min(), std::numeric_limits<Sample>::min(), Sample(1)}) {
      out.push_back(v);
      out.push_back(-v);
    }
  } else {
    out.push_back(std::numeric_limits<Sample>::lowest());
    out.push_back(std::numeric_limits<Sample>::max());
  }
  return out;
}

/// Random even bins for the sample type: mostly the kinds CUB may take (whole levels for integers,
/// power-of-two steps for floats, at every scale and sign), some of every other kind.
template <class Sample>
even_bins random_bins(std::mt19937_64& rng) {
  const auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const auto log_uniform = [&](std::int64_t most) {  // 1 to most, each power of two as likely
    const int bits = static_cast<int>(pick(0, 62 - __builtin_clzll(static_cast<std::uint64_t>(most))));
    return std::min<std::int64_t>(most, pick(std::int64_t{1} << bits, (std::int64_t{2} << bits) - 1));
  };
  const std::int64_t n = log_uniform(1 << 14);
  if constexpr (std::is_integral_v<Sample>) {
    const double low = static_cast<double>(std::numeric_limits<Sample>::lowest());
    const double high = sizeof(Sample) == 8 ? 0x1p54 : static_cast<double>(std::numeric_limits<Sample>::max());
    double lower = 0;
    switch (pick(0, 3)) {
      case 0: lower = 0; break;
      case 1: lower = static_cast<double>(-log_uniform(std::int64_t{1} << 40)); break;
      case 2: lower = static_cast<double>(log_uniform(std::int64_t{1} << 53)); break;
      default: lower = std::floor(std::uniform_real_distribution<double>(std::max(low, -0x1p54), high)(rng)); break;
    }
    double range = static_cast<double>(log_uniform(std::int64_t{1} << 40));
    if (pick(0, 3) == 0) range = static_cast<double>(n * log_uniform(1 << 10));  // a whole step
    if (pick(0, 3) == 0) range = static_cast<double>(n) / static_cast<double>(std::int64_t{1} << pick(0, 6));
    if (pick(0, 9) == 0) range += 0.5;  // not whole: refused
    lower = std::clamp(lower, low, high);
    return {n, lower, lower + std::max(range, 1.0)};
  } else {
    constexpr int digits = std::numeric_limits<Sample>::digits;
    const int exponent = static_cast<int>(pick(-30, 30));
    const double step = std::ldexp(1.0, exponent);
    const std::int64_t reach = std::int64_t{1} << (digits - 2);
    std::int64_t first = 0;
    switch (pick(0, 3)) {
      case 0: first = 0; break;
      case 1: first = pick(0, reach - n); break;
      case 2: first = -n - pick(0, reach - n); break;  // all below zero
      default: first = -pick(0, n); break;              // across zero
    }
    even_bins bins{n, static_cast<double>(first) * step, static_cast<double>(first + n) * step};
    if (pick(0, 5) == 0) bins.upper = bins.lower + static_cast<double>(n) * step * 1.1;  // no power-of-two step
    return bins;
  }
}

/// For `configurations` random bins (seeded), checks that wherever cub_even_bins_unfit accepts,
/// CUB's emulated bin equals tally's for every sample near an edge; returns how many it accepted.
template <class Sample>
int check_accepted_bins_agree(int configurations) {
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  int accepted = 0;
  for (int c = 0; c < configurations; ++c) {
    const even_bins bins = random_bins<Sample>(rng);
    if (cub_even_bins_unfit<Sample>(bins, upper_edge::exclusive) != nullptr) continue;
    ++accepted;
    SCOPED_TRACE(describe(bins));
    int mismatches = 0;
    for (const Sample x : samples_near_edges<Sample>(bins, rng)) {
      const std::int64_t cub = cub_bin(x, bins);
      const std::int64_t tally = tally_bin(x, bins);
      if (cub != tally && ++mismatches <= 3) {
        ADD_FAILURE() << "sample " << static_cast<double>(x) << ": CUB bin " << cub << ", tally bin " << tally;
      }
    }
    if (mismatches > 0) return accepted;
  }
  return accepted;
}

TEST(CubEvenBins, AcceptedIntegerBinsAgreeWithCubsArithmetic) {
  EXPECT_GT(check_accepted_bins_agree<std::int32_t>(1500), 300);
  EXPECT_GT(check_accepted_bins_agree<std::uint32_t>(1500), 300);
  EXPECT_GT(check_accepted_bins_agree<std::int64_t>(1500), 300);
}

TEST(CubEvenBins, AcceptedByteBinsAgreeOnEveryByte) {
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  int accepted = 0;
  for (int c = 0; c < 3000; ++c) {
    const std::int64_t n = std::uniform_int_distribution<std::int64_t>(1, 600)(rng);
    const double lower = static_cast<double>(std::uniform_int_distribution<int>(-300, 255)(rng));
    const double range = static_cast<double>(std::uniform_int_distribution<int>(1, 700)(rng)) / (c % 3 == 0 ? 2.0 : 1.0);
    const even_bins bins{n, lower, lower + range};
    if (cub_even_bins_unfit<std::uint8_t>(bins, upper_edge::exclusive) != nullptr) continue;
    ++accepted;
    SCOPED_TRACE(describe(bins));
    for (int v = 0; v < 256; ++v) {
      const auto x = static_cast<std::uint8_t>(v);
      ASSERT_EQ(cub_bin(x, bins), tally_bin(x, bins)) << "byte " << v;
    }
  }
  EXPECT_GT(accepted, 1000);
}

TEST(CubEvenBins, AcceptedFloatingBinsAgreeWithCubsArithmetic) {
  EXPECT_GT(check_accepted_bins_agree<float>(3000), 800);
  EXPECT_GT(check_accepted_bins_agree<double>(3000), 800);
}

TEST(CubEvenBins, ExactBinsAreAccepted) {
  for (const even_bins bins : {even_bins{256, 0, 256}, even_bins{4096, 0, 4096}, even_bins{65536, 0, 65536},
                               even_bins{7, 0, 7}, even_bins{4096, 0, 10000}, even_bins{4096, 0, 1000},
                               even_bins{100, -50, 50}, even_bins{10, 3, 1003}}) {
    SCOPED_TRACE(describe(bins));
    EXPECT_EQ(cub_even_bins_unfit<std::int32_t>(bins, upper_edge::exclusive), nullptr);
    EXPECT_EQ(cub_even_bins_unfit<std::int64_t>(bins, upper_edge::exclusive), nullptr);
  }
  EXPECT_EQ(cub_even_bins_unfit<std::uint8_t>(even_bins{256, 0, 256}, upper_edge::exclusive), nullptr);
  EXPECT_EQ(cub_even_bins_unfit<std::uint8_t>(even_bins{10, 0, 255}, upper_edge::exclusive), nullptr);
  EXPECT_EQ(cub_even_bins_unfit<std::uint32_t>(even_bins{4096, 0, 4294967295.0}, upper_edge::exclusive), nullptr);
  for (const even_bins bins : {even_bins{256, 0, 256}, even_bins{4096, 0, 4096}, even_bins{256, 0, 1},
                               even_bins{1024, 5, 6}, even_bins{1024, -8, -4}}) {
    SCOPED_TRACE(describe(bins));
    EXPECT_EQ(cub_even_bins_unfit<float>(bins, upper_edge::exclusive), nullptr);
    EXPECT_EQ(cub_even_bins_unfit<double>(bins, upper_edge::exclusive), nullptr);
  }
}

TEST(CubEvenBins, KnownBadCasesAreRefusedWithAReason) {
  const auto refused = [](const char* reason) { return reason != nullptr && reason[0] != '\0'; };
  // CUB's last bin is half-open; its levels are ints.
  EXPECT_TRUE(refused(cub_even_bins_unfit<std::int32_t>(even_bins{256, 0, 256}, upper_edge::inclusive)));
  EXPECT_TRUE(refused(cub_even_bins_unfit<float>(even_bins{256, 0, 256}, upper_edge::inclusive)));
  EXPECT_TRUE(refused(cub_even_bins_unfit<std::int64_t>(even_bins{2147483647, 0, 0x1p40}, upper_edge::exclusive)));
  // int64 over [-2^62, 2^62): upper - lower overflows int64, CUB answers cudaErrorInvalidValue.
  const char* wide = cub_even_bins_unfit<std::int64_t>(even_bins{256, -0x1p62, 0x1p62}, upper_edge::exclusive);
  ASSERT_TRUE(refused(wide));
  EXPECT_NE(std::string(wide).find("cudaErrorInvalidValue"), std::string::npos) << wide;
  // (upper - lower) * num_bins beyond 2^64; int32 levels 2^32 apart; levels that are not whole.
  EXPECT_TRUE(refused(cub_even_bins_unfit<std::int64_t>(even_bins{1 << 20, 0, 0x1p50}, upper_edge::exclusive)));
  EXPECT_TRUE(refused(cub_even_bins_unfit<std::int32_t>(even_bins{16, -0x1p31, 0x1p31 - 1}, upper_edge::exclusive)));
  EXPECT_TRUE(refused(cub_even_bins_unfit<std::int32_t>(even_bins{10, 0.5, 10.5}, upper_edge::exclusive)));
  EXPECT_TRUE(refused(cub_even_bins_unfit<std::uint32_t>(even_bins{10, -10, 10}, upper_edge::exclusive)));
  // A rounded edge: step 0.5 above 2^52, where lower + 0.5 rounds to lower (ties to even).
  const even_bins rounded{4, 0x1p52, 0x1p52 + 2};
  EXPECT_TRUE(refused(cub_even_bins_unfit<std::int64_t>(rounded, upper_edge::exclusive)));
  const auto at = static_cast<std::int64_t>(0x1p52);
  EXPECT_NE(cub_bin(at, rounded), tally_bin(at, rounded));  // the refusal is needed
  // Floats: a step that is no power of two; zero inside a range below it; an overflowing range.
  EXPECT_TRUE(refused(cub_even_bins_unfit<float>(even_bins{4096, 0, 1000}, upper_edge::exclusive)));
  EXPECT_TRUE(refused(cub_even_bins_unfit<double>(even_bins{4096, 0, 1000}, upper_edge::exclusive)));
  const even_bins across_zero{8, -1, 1};
  EXPECT_TRUE(refused(cub_even_bins_unfit<float>(across_zero, upper_edge::exclusive)));
  EXPECT_TRUE(refused(cub_even_bins_unfit<double>(across_zero, upper_edge::exclusive)));
  const float just_below_zero = -std::numeric_limits<float>::denorm_min();  // x - lower rounds up to 1
  EXPECT_NE(cub_bin(just_below_zero, across_zero), tally_bin(just_below_zero, across_zero));
  const even_bins below_zero{31, -2, -0.0625};  // the last edge's spacing is finer than the range's
  EXPECT_TRUE(refused(cub_even_bins_unfit<float>(below_zero, upper_edge::exclusive)));
  const float under_last = std::nextafter(-0.0625f, -1.0f);
  EXPECT_NE(cub_bin(under_last, below_zero), tally_bin(under_last, below_zero));
  EXPECT_TRUE(refused(cub_even_bins_unfit<float>(even_bins{4, -0x1p127, 0x1p127}, upper_edge::exclusive)));
  // A subnormal step: CUB's num_bins / (upper - lower) overflows to infinity.
  EXPECT_TRUE(refused(cub_even_bins_unfit<double>(even_bins{4, 0, 0x1p-1068}, upper_edge::exclusive)));
}

}  // namespace
