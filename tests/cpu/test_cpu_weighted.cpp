// Weighted CPU histograms: every strategy (and automatic), float and double weights, several
// sample types, against a long-double loop (tests/common/weighted_reference.hpp) within the stated
// bounds; the deterministic option's bits across strategies and weight types; NaN/infinite
// weights, left-out samples, empty input and bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "common/weighted_reference.hpp"
#include "tally/cpu/histogram.hpp"
#include "test_support.hpp"

namespace {

using tally::even_bins;
using tally::histogram_options;
using tally::histogram_result;
using tally::strategy;
using tally::upper_edge;
using tally_test::weighted_reference;

constexpr double poison_sum = -12345.678;

template <class Sample, class Weight>
struct weighted_input {
  std::vector<Sample> samples;
  std::vector<Weight> weights;
};

/// Samples over [lower - 20%, upper + 20%) (some left out; NaN and infinities for floating types)
/// with weights of mixed sign and magnitude in (-100, 100).
template <class Sample, class Weight>
weighted_input<Sample, Weight> make_input(std::size_t n, const even_bins& bins, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  weighted_input<Sample, Weight> in{std::vector<Sample>(n), std::vector<Weight>(n)};
  const double width = bins.upper - bins.lower;
  for (std::size_t i = 0; i < n; ++i) {
    const double x = bins.lower + (unit(rng) * 1.4 - 0.2) * width;
    in.samples[i] = static_cast<Sample>(std::is_integral_v<Sample> ? std::floor(x) : x);
    if constexpr (std::is_floating_point_v<Sample>) {
      if (i % 97 == 5) in.samples[i] = std::numeric_limits<Sample>::quiet_NaN();
      if (i % 89 == 7) in.samples[i] = std::numeric_limits<Sample>::infinity();
    }
    in.weights[i] = static_cast<Weight>((unit(rng) * 2.0 - 1.0) * std::ldexp(100.0, -static_cast<int>(rng() % 20)));
  }
  return in;
}

template <class Sample, class Weight>
histogram_result run(const weighted_input<Sample, Weight>& in, std::vector<double>& sums, const even_bins& bins,
                     const histogram_options& options) {
  sums.assign(static_cast<std::size_t>(bins.num_bins), poison_sum);
  return tally::cpu::histogram_even(std::span<const Sample>(in.samples), std::span<const Weight>(in.weights),
                                    std::span<double>(sums), bins, options);
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

template <class Sample, class Weight>
void check_against_reference(std::size_t n, const even_bins& bins, std::uint64_t seed) {
  SCOPED_TRACE(std::string(tally_test::type_name<Sample>()) + " samples, " + tally_test::type_name<Weight>() +
               " weights, n=" + std::to_string(n) + ", bins=" + std::to_string(bins.num_bins));
  const auto in = make_input<Sample, Weight>(n, bins, seed);
  const weighted_reference ref = tally_test::weigh_in_long_double(in.samples, in.weights, bins, upper_edge::exclusive);
  std::vector<double> first_deterministic;
  for (const strategy s : tally_test::cpu_strategies_and_automatic(tally::operation::weighted_histogram)) {
    for (const bool deterministic : {false, true}) {
      SCOPED_TRACE(std::string(tally::to_string(s)) + (deterministic ? ", deterministic" : ""));
      std::vector<double> sums;
      const histogram_result got = run(in, sums, bins, {s, upper_edge::exclusive, deterministic});
      tally_test::expect_chose(got.chose, s, tally::operation::weighted_histogram);
      EXPECT_EQ(got.left_out, ref.left_out);
      if (deterministic) {
        EXPECT_EQ(tally_test::sums_within(sums, ref, tally_test::deterministic_bound), "");
        if (first_deterministic.empty()) {
          first_deterministic = sums;
        } else {
          EXPECT_TRUE(same_bits(sums, first_deterministic)) << "deterministic sums differ between strategies";
        }
      } else {
        EXPECT_EQ(tally_test::sums_within(sums, ref, tally_test::floating_bound), "");
      }
    }
  }
}

TEST(WeightedHistogram, AgreesWithLongDoubleReference) {
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  for (const std::size_t n : {std::size_t{1}, std::size_t{33}, std::size_t{1000}, std::size_t{(1 << 17) + 3}}) {
    for (const std::int64_t num_bins : {std::int64_t{1}, std::int64_t{7}, std::int64_t{256}, std::int64_t{4096}}) {
      const even_bins bins{num_bins, -10.0, 1000.0};
      check_against_reference<float, float>(n, bins, seed + n);
      check_against_reference<float, double>(n, bins, seed + n);
      check_against_reference<double, double>(n, bins, seed + n);
      check_against_reference<std::int32_t, float>(n, bins, seed + n);
      check_against_reference<std::uint8_t, double>(n, even_bins{num_bins, 0.0, 256.0}, seed + n);
      check_against_reference<std::int64_t, double>(n, bins, seed + n);
    }
  }
}

TEST(WeightedHistogram, DeterministicSumsAreTheSameForFloatAndDoubleWeights) {
  const even_bins bins{64, 0.0, 1.0};
  const auto in = make_input<float, float>((1 << 17) + 1, bins, 7);
  weighted_input<float, double> wide{in.samples, std::vector<double>(in.weights.begin(), in.weights.end())};
  std::vector<double> narrow_sums;
  std::vector<double> wide_sums;
  run(in, narrow_sums, bins, {strategy::privatized, upper_edge::exclusive, true});
  run(wide, wide_sums, bins, {strategy::sequential, upper_edge::exclusive, true});
  EXPECT_TRUE(same_bits(narrow_sums, wide_sums));
}

TEST(WeightedHistogram, DeterministicSumsOfGridWeightsAreExact) {
  // Multiples of 2^-20 below 2^10 lie on the 2^-32 grid: the sums must be exact, in any order,
  // even where a double sum in sample order rounds (1e6 weights of ~500 with 2^-20 parts).
  const std::size_t n = 1'000'000;
  std::mt19937_64 rng(11);
  weighted_input<double, double> in{std::vector<double>(n, 0.5), std::vector<double>(n)};
  long double exact = 0.0L;
  for (std::size_t i = 0; i < n; ++i) {
    in.weights[i] = std::ldexp(static_cast<double>(rng() % (1u << 29)), -20) - 256.0;
    exact += static_cast<long double>(in.weights[i]);
  }
  for (const strategy s : {strategy::sequential, strategy::privatized}) {
    std::vector<double> sums;
    run(in, sums, even_bins{1, 0.0, 1.0}, {s, upper_edge::exclusive, true});
    EXPECT_EQ(sums[0], static_cast<double>(exact)) << tally::to_string(s);
  }
}

TEST(WeightedHistogram, AFixedPointValueIsTheWeightTimes2Pow32RoundedToNearestEven) {
  // Against the rounding done by hand: w * 2^32 is exact in double, so its floor and fraction are.
  namespace fpw = tally::detail::fixed_point_weight;
  std::mt19937_64 rng(19);
  std::vector<double> weights{0.0, -0.0, 1.0, -1.0, std::ldexp(1.0, -33), -std::ldexp(1.0, -33),
                              std::ldexp(3.0, -33), -std::ldexp(3.0, -33), std::nextafter(2147483648.0, 0.0),
                              -std::nextafter(2147483648.0, 0.0)};
  for (int k = 0; k < 200000; ++k) {
    const int exponent = static_cast<int>(rng() % 75) - 44;  // 2^-44 .. 2^30
    const double w = (rng() % 2 == 0 ? 1.0 : -1.0) * std::ldexp(static_cast<double>(rng() >> 11), exponent - 52);
    weights.push_back(w);
    weights.push_back(std::ldexp(std::round(std::ldexp(w, 34)) + 0.5 * static_cast<double>(rng() % 3), -34));  // ties
  }
  for (const double w : weights) {
    if (!(std::fabs(w) < 2147483648.0)) continue;
    const double x = w * 4294967296.0;
    const double floor = std::floor(x);
    const double fraction = x - floor;
    const bool up = fraction > 0.5 || (fraction == 0.5 && std::fmod(floor, 2.0) != 0.0);
    const auto expected = static_cast<std::int64_t>(floor) + (up ? 1 : 0);
    const fpw::fixed_weight f = fpw::to_fixed(w);
    ASSERT_EQ(f.flags, 0u) << w;
    ASSERT_EQ(static_cast<std::int64_t>((f.high << 32) | f.low), expected) << w;
  }
}

TEST(WeightedHistogram, DeterministicRoundsEachWeightTo2PowMinus32) {
  // 2^-34 rounds to 0 on the grid, 3 * 2^-34 to 2^-32: the documented precision, not more.
  weighted_input<double, double> in{{0.5, 0.5, 0.5}, {std::ldexp(1.0, -34), std::ldexp(3.0, -34), 1.0}};
  std::vector<double> sums;
  run(in, sums, even_bins{1, 0.0, 1.0}, {strategy::sequential, upper_edge::exclusive, true});
  EXPECT_EQ(sums[0], 1.0 + std::ldexp(1.0, -32));
  run(in, sums, even_bins{1, 0.0, 1.0}, {strategy::sequential, upper_edge::exclusive, false});
  EXPECT_EQ(sums[0], std::ldexp(1.0, -34) + std::ldexp(3.0, -34) + 1.0);
}

TEST(WeightedHistogram, LeftOutSamplesAddNoWeight) {
  // Every left-out sample carries a NaN weight: a sum that took one would be NaN.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  weighted_input<double, double> in{{-1.0, 0.25, nan, 5.0, 0.75, inf, -inf, 1.0}, {nan, 2.0, nan, nan, 3.0, nan, nan, nan}};
  for (const strategy s : tally_test::cpu_strategies_and_automatic(tally::operation::weighted_histogram)) {
    for (const bool deterministic : {false, true}) {
      std::vector<double> sums;
      const histogram_result got = run(in, sums, even_bins{2, 0.0, 1.0}, {s, upper_edge::exclusive, deterministic});
      EXPECT_EQ(got.left_out, 6u);
      EXPECT_EQ(sums, (std::vector<double>{2.0, 3.0})) << tally::to_string(s);
    }
  }
  // upper_edge::inclusive counts the sample at 1.0 (weight 7) in the last bin.
  in.weights[7] = 7.0;
  std::vector<double> sums;
  const histogram_result got = run(in, sums, even_bins{2, 0.0, 1.0}, {strategy::sequential, upper_edge::inclusive, true});
  EXPECT_EQ(got.left_out, 5u);
  EXPECT_EQ(sums, (std::vector<double>{2.0, 10.0}));
}

TEST(WeightedHistogram, NanAndInfiniteWeightsPropagateIntoTheirBin) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Bin 0: a NaN weight. Bin 1: +inf. Bin 2: +inf and -inf. Bin 3: -inf. Bin 4: finite.
  weighted_input<float, float> in{{0.5f, 1.5f, 1.5f, 2.5f, 2.5f, 3.5f, 4.5f, 0.5f},
                                  {nan, inf, 1.0f, inf, -inf, -inf, 4.0f, 1.0f}};
  for (const strategy s : tally_test::cpu_strategies_and_automatic(tally::operation::weighted_histogram)) {
    for (const bool deterministic : {false, true}) {
      SCOPED_TRACE(std::string(tally::to_string(s)) + (deterministic ? ", deterministic" : ""));
      std::vector<double> sums;
      run(in, sums, even_bins{5, 0.0, 5.0}, {s, upper_edge::exclusive, deterministic});
      EXPECT_TRUE(std::isnan(sums[0]));
      EXPECT_EQ(sums[1], std::numeric_limits<double>::infinity());
      EXPECT_TRUE(std::isnan(sums[2]));
      EXPECT_EQ(sums[3], -std::numeric_limits<double>::infinity());
      EXPECT_EQ(sums[4], 4.0);
    }
  }
}

TEST(WeightedHistogram, EmptyInputGivesZeroSums) {
  weighted_input<std::int32_t, double> in;
  for (const strategy s : tally_test::cpu_strategies_and_automatic(tally::operation::weighted_histogram)) {
    for (const bool deterministic : {false, true}) {
      std::vector<double> sums;
      const histogram_result got = run(in, sums, even_bins{3, 0.0, 3.0}, {s, upper_edge::exclusive, deterministic});
      EXPECT_EQ(got.left_out, 0u);
      EXPECT_EQ(sums, std::vector<double>(3, 0.0));
      EXPECT_FALSE(std::signbit(sums[0]));
    }
  }
}

TEST(WeightedHistogram, DeterministicRefusesWeightsBeyond2Pow31) {
  // The largest weight below 2^31 is accepted; 2^31 of a counted sample is refused, naming
  // `weights`, with NaN in its bin; the same weight on a left-out sample is ignored.
  const double below = std::nextafter(2147483648.0, 0.0);
  weighted_input<double, double> ok{{0.5, 1.5}, {below, -below}};
  std::vector<double> sums;
  run(ok, sums, even_bins{2, 0.0, 2.0}, {strategy::sequential, upper_edge::exclusive, true});
  EXPECT_EQ(sums, (std::vector<double>{below, -below}));
  weighted_input<double, double> ignored{{0.5, 7.0}, {1.0, 2147483648.0}};
  run(ignored, sums, even_bins{2, 0.0, 2.0}, {strategy::sequential, upper_edge::exclusive, true});
  EXPECT_EQ(sums, (std::vector<double>{1.0, 0.0}));
  for (const strategy s : {strategy::sequential, strategy::privatized}) {
    weighted_input<double, double> bad{{0.5, 1.5}, {1.0, -2147483648.0}};
    tally_test::expect_tally_error([&] { run(bad, sums, even_bins{2, 0.0, 2.0}, {s, upper_edge::exclusive, true}); },
                                   tally::errc::invalid_argument, "weights", {"2^31"});
    EXPECT_EQ(sums[0], 1.0);
    EXPECT_TRUE(std::isnan(sums[1]));
  }
  // Without deterministic, large weights are just doubles.
  weighted_input<double, double> large{{0.5}, {1e300}};
  run(large, sums, even_bins{1, 0.0, 1.0}, {strategy::sequential, upper_edge::exclusive, false});
  EXPECT_EQ(sums[0], 1e300);
}

TEST(WeightedHistogram, BadArgumentsAreRefusedBeforeAnythingIsWritten) {
  const std::vector<float> samples(10, 0.5f);
  const std::vector<float> weights(10, 1.0f);
  std::vector<double> sums(4, poison_sum);
  const auto call = [&](std::span<const float> w, std::span<double> s, const histogram_options& options) {
    return tally::cpu::histogram_even(std::span<const float>(samples), w, s, even_bins{4, 0.0, 1.0}, options);
  };
  tally_test::expect_tally_error([&] { call(std::span<const float>(weights).first(9), sums, {}); },
                                 tally::errc::invalid_argument, "weights", {"9", "10"});
  tally_test::expect_tally_error([&] { call(weights, std::span<double>(sums).first(3), {}); },
                                 tally::errc::invalid_argument, "sums", {"3", "4"});
  for (const strategy s : {strategy::critical, strategy::atomic, strategy::reduction, strategy::shared_atomic}) {
    tally_test::expect_tally_error([&] { call(weights, sums, {s}); }, tally::errc::not_supported, "strategy",
                                   {tally::to_string(s)});
  }
  tally_test::expect_tally_error(
      [&] {
        tally::cpu::histogram_even(std::span<const float>(samples), std::span<const float>(weights),
                                   std::span<double>(sums), even_bins{0, 0.0, 1.0});
      },
      tally::errc::invalid_argument, "num_bins", {});
  tally_test::expect_tally_error(
      [&] {
        tally::cpu::histogram_even(std::span<const float>(samples), std::span<const float>(static_cast<const float*>(nullptr), 10),
                                   std::span<double>(sums), even_bins{4, 0.0, 1.0});
      },
      tally::errc::invalid_argument, "weights", {"null"});
  for (const double s : sums) EXPECT_EQ(s, poison_sum);
}

}  // namespace
