// Property tests of the CPU histograms: every CPU strategy (and automatic), every sample type and
// both counter types, for histogram_even, histogram_range and bincount, must give exactly the
// oracle's counts and left-out total (tests/common/reference.hpp) on random sizes and bin counts
// and on adversarial inputs. Counts are poisoned before every call, so a strategy that forgets to
// zero them fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "common/reference.hpp"
#include "tally/cpu/histogram.hpp"
#include "test_support.hpp"

namespace {

using tally::histogram_options;
using tally::histogram_result;
using tally::strategy;
using tally::upper_edge;

/// `critical` takes one lock per counted sample; above this size it only slows the suite down.
constexpr std::size_t critical_max_samples = std::size_t{1} << 17;
/// `reduction` keeps its private copy of the counts on the thread's stack (an OpenMP array-section
/// reduction); larger copies are tested on their own in
/// HistogramStrategies.ReductionCountsIntoAMillionUint64Bins.
constexpr std::size_t reduction_max_count_bytes = tally::cpu::detail::reduction_clause_budget;

const std::int64_t bin_counts[] = {1, 2, 7, 256, 4096, 65536};

/// Sizes: empty, tiny, 2^k +- 1 around the points where the work is split, and a few large ones.
std::vector<std::size_t> test_sizes(std::mt19937_64& rng) {
  std::vector<std::size_t> sizes = {0, 1, 2, 3, 31, 32, 33, 1023, 1025, 4095, 4097, 65535, 65536, 65537, 131073};
  std::uniform_int_distribution<std::size_t> small(0, 10000);
  for (int i = 0; i < 3; ++i) sizes.push_back(small(rng));
  sizes.push_back(100003);
  sizes.push_back(std::uniform_int_distribution<std::size_t>(300000, 1000000)(rng));
  return sizes;
}

/// The strategies worth running for a given size (see the limits above), then automatic.
template <class Counter>
std::vector<strategy> strategies_for_case(std::size_t num_samples, std::int64_t num_bins) {
  std::vector<strategy> chosen;
  for (const strategy s : tally_test::cpu_strategies_and_automatic(tally::operation::histogram)) {
    if (s == strategy::critical && num_samples > critical_max_samples) continue;
    if (s == strategy::reduction && static_cast<std::size_t>(num_bins) * sizeof(Counter) > reduction_max_count_bytes) {
      continue;
    }
    chosen.push_back(s);
  }
  return chosen;
}

/**
 * Runs `call(counts, options)` for every strategy, each time on poisoned counts, and checks the
 * counts, the left-out total and the strategy reported against the oracle's answer.
 */
template <class Counter, class Call>
void expect_every_strategy_matches(std::size_t num_samples, const tally_test::reference_histogram& expected,
                                   upper_edge mode, Call call) {
  const auto num_bins = static_cast<std::int64_t>(expected.counts.size());
  for (const strategy s : strategies_for_case<Counter>(num_samples, num_bins)) {
    SCOPED_TRACE("strategy " + std::string(tally::to_string(s)));
    std::vector<Counter> counts(expected.counts.size(), tally_test::poison<Counter>);
    const histogram_result result = call(std::span<Counter>(counts), histogram_options{s, mode});
    tally_test::expect_chose(result.chose, s, tally::operation::histogram);
    EXPECT_EQ(result.left_out, expected.left_out);
    EXPECT_TRUE(tally_test::counts_equal<Counter>(counts, expected.counts));
  }
}

std::string describe_case(std::size_t n, std::int64_t num_bins, upper_edge mode) {
  return "samples=" + std::to_string(n) + " num_bins=" + std::to_string(num_bins) +
         (mode == upper_edge::inclusive ? " inclusive" : " exclusive");
}

/// A Sample as near to `value` as the type allows (integers: floor, saturated).
template <class Sample>
Sample to_sample(double value) {
  if constexpr (std::is_floating_point_v<Sample>) {
    return static_cast<Sample>(value);
  } else {
    if (std::isnan(value)) return Sample{0};
    const double v = std::floor(value);
    const double low = static_cast<double>(std::numeric_limits<Sample>::lowest());
    const double high_exclusive = std::ldexp(1.0, std::numeric_limits<Sample>::digits);
    if (v < low) return std::numeric_limits<Sample>::lowest();
    if (v >= high_exclusive) return std::numeric_limits<Sample>::max();
    return static_cast<Sample>(v);
  }
}

/// A random [lower, upper) suited to the sample type: mostly inside the type's values.
template <class Sample>
std::pair<double, double> random_range(std::mt19937_64& rng) {
  auto uniform = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  double lower = 0;
  double width = 1;
  if constexpr (std::is_floating_point_v<Sample>) {
    lower = uniform(-1000.0, 1000.0);
    width = std::pow(10.0, uniform(-3.0, 4.0));
  } else if constexpr (std::is_same_v<Sample, std::uint8_t>) {
    lower = uniform(-20.0, 200.0);
    width = uniform(1.0, 300.0);
  } else if constexpr (std::is_same_v<Sample, std::uint32_t>) {
    lower = uniform(0.0, 4e9);
    width = std::pow(10.0, uniform(0.0, 8.0));
  } else if constexpr (std::is_same_v<Sample, std::int32_t>) {
    lower = uniform(-1e6, 1e6);
    width = std::pow(10.0, uniform(0.0, 6.5));
  } else {
    // int64: sometimes straddle 2^53, where conversion to double starts to round.
    lower = std::bernoulli_distribution(0.3)(rng) ? 0x1p53 - uniform(0.0, 1e4) : uniform(-1e15, 1e15);
    width = std::pow(10.0, uniform(0.0, 12.0));
  }
  return {lower, lower + width};
}

/**
 * n samples over [lower, upper) and a margin, with a share of exact edges, edge neighbours and,
 * for floats, NaN and infinities: the values where strategies could disagree with the oracle.
 */
template <class Sample, class Edge>
std::vector<Sample> random_samples(std::size_t n, double lower, double upper, const std::vector<Edge>& edges,
                                   std::mt19937_64& rng) {
  const double margin = 0.1 * (upper - lower);
  std::uniform_real_distribution<double> inside(lower - margin, upper + margin);
  std::uniform_int_distribution<std::size_t> pick_edge(0, edges.size() - 1);
  std::uniform_int_distribution<int> kind(0, 99);
  std::vector<Sample> samples(n);
  for (Sample& x : samples) {
    const int k = kind(rng);
    if (k < 80) {
      x = to_sample<Sample>(inside(rng));
    } else if (k < 90) {
      x = to_sample<Sample>(static_cast<double>(edges[pick_edge(rng)]));
    } else if (k < 96) {
      const auto e = edges[pick_edge(rng)];
      if constexpr (std::is_floating_point_v<Sample>) {
        const Sample t = static_cast<Sample>(e);
        x = std::nextafter(t, k % 2 ? std::numeric_limits<Sample>::infinity() : -std::numeric_limits<Sample>::infinity());
      } else {
        x = to_sample<Sample>(static_cast<double>(e) + (k % 2 ? 1.0 : -1.0));
      }
    } else {
      if constexpr (std::is_floating_point_v<Sample>) {
        const Sample specials[] = {std::numeric_limits<Sample>::quiet_NaN(), std::numeric_limits<Sample>::infinity(),
                                   -std::numeric_limits<Sample>::infinity(), static_cast<Sample>(upper)};
        x = specials[k % 4];
      } else {
        const Sample specials[] = {std::numeric_limits<Sample>::lowest(), std::numeric_limits<Sample>::max(),
                                   to_sample<Sample>(upper), to_sample<Sample>(lower)};
        x = specials[k % 4];
      }
    }
  }
  return samples;
}

template <class Sample, class Counter>
struct sample_and_counter {
  using sample = Sample;
  using counter = Counter;
};

struct pair_names {
  template <class T>
  static std::string GetName(int) {
    return std::string(tally_test::type_name<typename T::sample>()) + "_" +
           (sizeof(typename T::counter) == 4 ? "u32" : "u64");
  }
};

template <class Types>
class HistogramEven : public ::testing::Test {};
template <class Types>
class HistogramRange : public ::testing::Test {};
template <class Types>
class Bincount : public ::testing::Test {};

using histogram_types = ::testing::Types<
    sample_and_counter<std::uint8_t, std::uint32_t>, sample_and_counter<std::uint8_t, std::uint64_t>,
    sample_and_counter<std::int32_t, std::uint32_t>, sample_and_counter<std::int32_t, std::uint64_t>,
    sample_and_counter<std::uint32_t, std::uint32_t>, sample_and_counter<std::uint32_t, std::uint64_t>,
    sample_and_counter<std::int64_t, std::uint32_t>, sample_and_counter<std::int64_t, std::uint64_t>,
    sample_and_counter<float, std::uint32_t>, sample_and_counter<float, std::uint64_t>,
    sample_and_counter<double, std::uint32_t>, sample_and_counter<double, std::uint64_t>>;
using bincount_types = ::testing::Types<
    sample_and_counter<std::uint8_t, std::uint32_t>, sample_and_counter<std::uint8_t, std::uint64_t>,
    sample_and_counter<std::int32_t, std::uint32_t>, sample_and_counter<std::int32_t, std::uint64_t>,
    sample_and_counter<std::uint32_t, std::uint32_t>, sample_and_counter<std::uint32_t, std::uint64_t>,
    sample_and_counter<std::int64_t, std::uint32_t>, sample_and_counter<std::int64_t, std::uint64_t>>;
TYPED_TEST_SUITE(HistogramEven, histogram_types, pair_names);
TYPED_TEST_SUITE(HistogramRange, histogram_types, pair_names);
TYPED_TEST_SUITE(Bincount, bincount_types, pair_names);

// ---- histogram_even -------------------------------------------------------------------------

/// Checks every strategy of histogram_even on `samples` against the oracle.
template <class Sample, class Counter>
tally_test::reference_histogram check_even(const std::vector<Sample>& samples, const tally::even_bins& bins,
                                           upper_edge mode) {
  SCOPED_TRACE(describe_case(samples.size(), bins.num_bins, mode) + " lower=" + std::to_string(bins.lower) +
               " upper=" + std::to_string(bins.upper));
  const std::span<const Sample> input(samples);
  const auto expected = tally_test::reference_histogram_even<Sample>(input, bins, mode);
  expect_every_strategy_matches<Counter>(samples.size(), expected, mode,
                                         [&](std::span<Counter> counts, const histogram_options& options) {
                                           return tally::cpu::histogram_even<Sample, Counter>(input, counts, bins,
                                                                                              options);
                                         });
  return expected;
}

TYPED_TEST(HistogramEven, EveryStrategyMatchesOracleOnRandomSizesAndBinCounts) {
  using Sample = typename TypeParam::sample;
  using Counter = typename TypeParam::counter;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  const auto sizes = test_sizes(rng);
  const std::size_t offset = std::uniform_int_distribution<std::size_t>(0, 5)(rng);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const auto [lower, upper] = random_range<Sample>(rng);
    const tally::even_bins bins{bin_counts[(i + offset) % 6], lower, upper};
    const auto edges = tally_test::reference_even_edges<Sample>(bins.num_bins, lower, upper);
    const auto samples = random_samples<Sample>(sizes[i], lower, upper, edges, rng);
    check_even<Sample, Counter>(samples, bins, i % 2 ? upper_edge::inclusive : upper_edge::exclusive);
  }
  // A million bins, more than there are samples: automatic must move off private copies.
  const auto [lower, upper] = random_range<Sample>(rng);
  const tally::even_bins many{std::int64_t{1} << 20, lower, upper};
  const auto edges = tally_test::reference_even_edges<Sample>(many.num_bins, lower, upper);
  check_even<Sample, Counter>(random_samples<Sample>(100003, lower, upper, edges, rng), many, upper_edge::exclusive);
}

TYPED_TEST(HistogramEven, EveryStrategyMatchesOracleOnRangesFarNarrowerThanTheirDistanceFromZero) {
  using Sample = typename TypeParam::sample;
  using Counter = typename TypeParam::counter;
  // Bins of under 2^-20 of their distance from zero are past the float estimate's reach: they go
  // through the grid over numpy's edges (even_bins_take_grid), where a float's rounding of the
  // edges is a sizeable part of a bin. numpy's range for one-valued data, a narrow range from data.
  std::mt19937_64 rng(tally_test::test_seed());
  const tally::even_bins cases[] = {{4096, 2047.5, 2048.5}, {300, 293.1, 293.9}, {100, 1000.0, 1000.01},
                                    {64, -10000001.0, -10000000.0}};
  for (const tally::even_bins& bins : cases) {
    const auto edges = tally_test::reference_even_edges<Sample>(bins.num_bins, bins.lower, bins.upper);
    const auto samples = random_samples<Sample>(50003, bins.lower, bins.upper, edges, rng);
    check_even<Sample, Counter>(samples, bins, upper_edge::exclusive);
    check_even<Sample, Counter>(samples, bins, upper_edge::inclusive);
  }
}

TYPED_TEST(HistogramEven, EveryStrategyMatchesOracleOnEdgesComputedInFloat32) {
  using Sample = typename TypeParam::sample;
  using Counter = typename TypeParam::counter;
  // numpy's edges for float32 data over its own range: float32 bounds, edges in float32
  // arithmetic; within the float estimate's reach, past it (the grid, the table of the CPU's
  // edges), across zero, and one that float32 computes exactly (the float64 rule's shortcuts).
  std::mt19937_64 rng(tally_test::test_seed());
  const tally::even_bins cases[] = {{7, 0.1f, 0.7f, tally::edge_arithmetic::float32},
                                    {4096, 0x1.13cc6ep+10, 0x1.5753ep+10, tally::edge_arithmetic::float32},
                                    {1000, -1.0f, 1.0f, tally::edge_arithmetic::float32},
                                    {4096, 2047.5f, 2048.5f, tally::edge_arithmetic::float32},
                                    {256, 0.0f, 256.0f, tally::edge_arithmetic::float32}};
  for (const tally::even_bins& bins : cases) {
    const auto edges = tally_test::reference_even_edges_float32<Sample>(bins.num_bins, bins.lower, bins.upper);
    const auto samples = random_samples<Sample>(50003, bins.lower, bins.upper, edges, rng);
    check_even<Sample, Counter>(samples, bins, upper_edge::exclusive);
    check_even<Sample, Counter>(samples, bins, upper_edge::inclusive);
  }
}

TYPED_TEST(HistogramEven, EveryStrategyMatchesOracleWhenAllSamplesFallInOneBin) {
  using Sample = typename TypeParam::sample;
  using Counter = typename TypeParam::counter;
  // Every update hits the same counter: the worst case for atomics and locks.
  const tally::even_bins bins{256, 0.0, 256.0};
  const std::vector<Sample> samples(200003, static_cast<Sample>(100));
  const auto expected = check_even<Sample, Counter>(samples, bins, upper_edge::exclusive);
  EXPECT_EQ(expected.counts[100], samples.size()) << "the input is not what the test says";
}

TYPED_TEST(HistogramEven, EveryStrategyMatchesOracleOnSortedInput) {
  using Sample = typename TypeParam::sample;
  using Counter = typename TypeParam::counter;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  for (const std::int64_t num_bins : {std::int64_t{7}, std::int64_t{4096}}) {
    const auto [lower, upper] = random_range<Sample>(rng);
    const tally::even_bins bins{num_bins, lower, upper};
    const auto edges = tally_test::reference_even_edges<Sample>(num_bins, lower, upper);
    auto samples = random_samples<Sample>(300007, lower, upper, edges, rng);
    // Sorted with NaN last: each thread's share of the input lands in a few neighbouring bins.
    std::sort(samples.begin(), samples.end(), [](Sample a, Sample b) {
      if constexpr (std::is_floating_point_v<Sample>) {
        if (std::isnan(a)) return false;
        if (std::isnan(b)) return true;
      }
      return a < b;
    });
    check_even<Sample, Counter>(samples, bins, upper_edge::inclusive);
  }
}

TYPED_TEST(HistogramEven, EveryStrategyMatchesOracleWhenOnlyBinsThatAreMultiplesOf32AreHit) {
  using Sample = typename TypeParam::sample;
  using Counter = typename TypeParam::counter;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  // Bin v is [v, v+1): sample 32k (+0.5 for floats) lands in bin 32k. On a GPU every such bin
  // falls in the same shared-memory bank; on the CPU they share cache-line offsets.
  const tally::even_bins bins{4096, 0.0, 4096.0};
  const int max_k = std::is_same_v<Sample, std::uint8_t> ? 7 : 127;
  std::uniform_int_distribution<int> pick(0, max_k);
  std::vector<Sample> samples(150001);
  for (Sample& x : samples) x = static_cast<Sample>(32 * pick(rng) + (std::is_floating_point_v<Sample> ? 0.5 : 0.0));
  const auto expected = check_even<Sample, Counter>(samples, bins, upper_edge::exclusive);
  for (std::size_t bin = 0; bin < expected.counts.size(); ++bin) {
    if (bin % 32 != 0) {
      ASSERT_EQ(expected.counts[bin], 0u) << "the input is not what the test says: bin " << bin;
    }
  }
}

TYPED_TEST(HistogramEven, EveryStrategyLeavesOutEverySampleWhenAllAreOutOfRange) {
  using Sample = typename TypeParam::sample;
  using Counter = typename TypeParam::counter;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  const tally::even_bins bins{7, 50.0, 100.0};
  std::uniform_int_distribution<int> below(0, 49);
  std::uniform_int_distribution<int> above(100, 255);
  std::vector<Sample> samples(100001);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    samples[i] = static_cast<Sample>(i % 2 ? below(rng) : above(rng));  // 100 itself is out when exclusive
  }
  const auto expected = check_even<Sample, Counter>(samples, bins, upper_edge::exclusive);
  EXPECT_EQ(expected.left_out, samples.size()) << "the input is not what the test says";
}

template <class Types>
class HistogramEvenFloat : public ::testing::Test {};
using float_histogram_types =
    ::testing::Types<sample_and_counter<float, std::uint32_t>, sample_and_counter<float, std::uint64_t>,
                     sample_and_counter<double, std::uint32_t>, sample_and_counter<double, std::uint64_t>>;
TYPED_TEST_SUITE(HistogramEvenFloat, float_histogram_types, pair_names);

TYPED_TEST(HistogramEvenFloat, EveryStrategyLeavesOutEveryNaN) {
  using Sample = typename TypeParam::sample;
  using Counter = typename TypeParam::counter;
  for (const std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{70001}}) {
    const std::vector<Sample> samples(n, std::numeric_limits<Sample>::quiet_NaN());
    for (const upper_edge mode : {upper_edge::exclusive, upper_edge::inclusive}) {
      const auto expected = check_even<Sample, Counter>(samples, {16, -1.0, 1.0}, mode);
      EXPECT_EQ(expected.left_out, n);
    }
  }
}

// ---- histogram_range ------------------------------------------------------------------------

/// Sorted random edges over a range suited to Sample, with some repeated (empty bins).
template <class Sample>
std::vector<double> random_edges(std::int64_t num_bins, std::mt19937_64& rng) {
  const auto [lower, upper] = random_range<Sample>(rng);
  std::uniform_real_distribution<double> value(lower, upper);
  std::vector<double> edges(static_cast<std::size_t>(num_bins) + 1);
  for (double& e : edges) e = value(rng);
  edges.front() = lower;
  edges.back() = upper;
  if (num_bins > 4 && std::bernoulli_distribution(0.5)(rng)) {
    for (std::size_t i = 3; i < edges.size(); i += 11) edges[i - 1] = edges[i - 2];
  }
  if constexpr (std::is_integral_v<Sample>) {
    // Integer-valued edges, so samples land exactly on them.
    if (std::bernoulli_distribution(0.5)(rng)) {
      for (double& e : edges) e = std::floor(e);
    }
  }
  std::sort(edges.begin(), edges.end());
  return edges;
}

template <class Sample, class Counter>
void check_range(const std::vector<Sample>& samples, const std::vector<double>& edges, upper_edge mode) {
  SCOPED_TRACE(describe_case(samples.size(), static_cast<std::int64_t>(edges.size()) - 1, mode));
  const std::span<const Sample> input(samples);
  const std::span<const double> edge_span(edges);
  const auto expected = tally_test::reference_histogram_range<Sample>(input, edge_span, mode);
  expect_every_strategy_matches<Counter>(samples.size(), expected, mode,
                                         [&](std::span<Counter> counts, const histogram_options& options) {
                                           return tally::cpu::histogram_range<Sample, Counter>(input, counts,
                                                                                               edge_span, options);
                                         });
}

TYPED_TEST(HistogramRange, EveryStrategyMatchesOracleOnRandomSizesAndBinCounts) {
  using Sample = typename TypeParam::sample;
  using Counter = typename TypeParam::counter;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  const auto sizes = test_sizes(rng);
  const std::size_t offset = std::uniform_int_distribution<std::size_t>(0, 5)(rng);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const auto edges = random_edges<Sample>(bin_counts[(i + offset) % 6], rng);
    const auto samples = random_samples<Sample>(sizes[i], edges.front(), edges.back(), edges, rng);
    check_range<Sample, Counter>(samples, edges, i % 2 ? upper_edge::inclusive : upper_edge::exclusive);
  }
  const auto many = random_edges<Sample>(std::int64_t{1} << 20, rng);
  check_range<Sample, Counter>(random_samples<Sample>(100003, many.front(), many.back(), many, rng), many,
                               upper_edge::inclusive);
}

TYPED_TEST(HistogramRange, EveryStrategyMatchesOracleOnEvenlySpacedEdges) {
  using Sample = typename TypeParam::sample;
  using Counter = typename TypeParam::counter;
  // Evenly spaced edges take an estimate and one compare with each neighbouring edge
  // (cpu/edge_tables.hpp): numpy's linspace in double, and in float32 arithmetic as numpy makes a
  // float32 data's own range, whose edges are off even by a rounding.
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  for (const std::int64_t num_bins : {std::int64_t{3}, std::int64_t{10}, std::int64_t{1000}, std::int64_t{65536}}) {
    const auto [lower, upper] = random_range<Sample>(rng);
    const auto n = static_cast<std::size_t>(num_bins);
    std::vector<double> in_double(n + 1);
    std::vector<double> in_float(n + 1);
    const double step = (upper - lower) / static_cast<double>(num_bins);
    const float float_lower = static_cast<float>(lower);
    const float float_step = (static_cast<float>(upper) - float_lower) / static_cast<float>(num_bins);
    for (std::size_t i = 0; i <= n; ++i) {
      volatile double product = static_cast<double>(i) * step;  // numpy's two roundings, never fused
      in_double[i] = product + lower;
      volatile float float_product = static_cast<float>(i) * float_step;
      in_float[i] = static_cast<double>(float_product + float_lower);
    }
    in_double.back() = upper;
    in_float.back() = static_cast<double>(static_cast<float>(upper));
    for (const auto* edges : {&in_double, &in_float}) {
      if (!std::is_sorted(edges->begin(), edges->end())) continue;  // float arithmetic past its precision
      const auto samples = random_samples<Sample>(70001, edges->front(), edges->back(), *edges, rng);
      check_range<Sample, Counter>(samples, *edges, upper_edge::exclusive);
      check_range<Sample, Counter>(samples, *edges, upper_edge::inclusive);
    }
  }
}

TYPED_TEST(HistogramRange, EveryStrategyMatchesOracleOnEdgesCloserThanAFloatsSpacing) {
  using Sample = typename TypeParam::sample;
  using Counter = typename TypeParam::counter;
  // Double and int64 samples start from a float grid's count and settle it with one compare each
  // way, which holds only while edges are further apart than a float's spacing; closer edges (and
  // edges past float's range) take the double grid. Both sides of that line, with samples on and
  // next to every edge.
  std::mt19937_64 rng(tally_test::test_seed());
  for (const double base : {1.0, 3.0e6, 1.0e12, 1.0e39}) {
    const double float_spacing = base * 0x1p-23;
    for (const double gap : {0.25 * float_spacing, 2.5 * float_spacing, 40.0 * float_spacing}) {
      std::vector<double> edges(65);
      for (std::size_t i = 0; i < edges.size(); ++i) edges[i] = base + static_cast<double>(i) * gap;
      std::vector<Sample> samples = random_samples<Sample>(20001, edges.front(), edges.back(), edges, rng);
      if constexpr (std::is_floating_point_v<Sample>) {
        for (const double e : edges) {
          samples.push_back(static_cast<Sample>(e));
          samples.push_back(std::nextafter(static_cast<Sample>(e), std::numeric_limits<Sample>::infinity()));
          samples.push_back(std::nextafter(static_cast<Sample>(e), -std::numeric_limits<Sample>::infinity()));
        }
      }
      check_range<Sample, Counter>(samples, edges, upper_edge::exclusive);
      check_range<Sample, Counter>(samples, edges, upper_edge::inclusive);
    }
  }
}

TYPED_TEST(HistogramRange, EveryStrategyMatchesOracleWhenAllSamplesSitOnOneEdge) {
  using Sample = typename TypeParam::sample;
  using Counter = typename TypeParam::counter;
  // Edges 0, 10, 10, 20, 30: 10 opens bin 2 (bin 1 is empty); 30 is counted only when inclusive.
  const std::vector<double> edges = {0.0, 10.0, 10.0, 20.0, 30.0};
  for (const upper_edge mode : {upper_edge::exclusive, upper_edge::inclusive}) {
    check_range<Sample, Counter>(std::vector<Sample>(100001, Sample{10}), edges, mode);
    check_range<Sample, Counter>(std::vector<Sample>(100001, Sample{30}), edges, mode);
  }
}

TYPED_TEST(HistogramRange, EveryStrategyMatchesOracleOnEdgesOverFewIntegers) {
  using Sample = typename TypeParam::sample;
  using Counter = typename TypeParam::counter;
  if constexpr (std::is_integral_v<Sample> && sizeof(Sample) >= 4) {
    // Edges that span few integers, with samples enough to take a table of each integer's bin
    // (integer_table_samples_per_entry): fractional and repeated edges, the type's ends.
    using limits = std::numeric_limits<Sample>;
    const double lowest = static_cast<double>(limits::lowest());
    const double highest = static_cast<double>(limits::max());
    std::vector<std::vector<double>> cases = {{-300.5, -2, 0, 0, 17.25, 255.5, 699}, {0, 16383}, {5, 5, 9}};
    if constexpr (sizeof(Sample) == 4) {
      cases.push_back({lowest, lowest + 3.5, lowest + 1000});
      cases.push_back({highest - 999.5, highest - 10, highest});
    }
    std::mt19937_64 rng(tally_test::test_seed());
    for (const auto& edges : cases) {
      const double first = std::max(std::ceil(edges.front()), lowest);
      const double last = std::min(std::floor(edges.back()), highest);
      std::uniform_real_distribution<double> inside(std::max(first - 20, lowest), std::min(last + 20, highest));
      std::uniform_int_distribution<Sample> any(limits::lowest(), limits::max());
      std::vector<Sample> samples;
      for (int i = 0; i < 600000; ++i) {
        samples.push_back(i % 16 == 0 ? any(rng) : static_cast<Sample>(std::floor(inside(rng))));
      }
      for (const Sample x : {limits::lowest(), limits::max(), Sample{0}}) samples.push_back(x);
      for (const upper_edge mode : {upper_edge::exclusive, upper_edge::inclusive}) {
        check_range<Sample, Counter>(samples, edges, mode);
      }
    }
  }
}

// ---- bincount -------------------------------------------------------------------------------

template <class Sample, class Counter>
tally_test::reference_histogram check_bincount(const std::vector<Sample>& samples, std::int64_t num_bins) {
  SCOPED_TRACE(describe_case(samples.size(), num_bins, upper_edge::exclusive));
  const std::span<const Sample> input(samples);
  const auto expected = tally_test::reference_bincount_counts<Sample>(input, num_bins);
  expect_every_strategy_matches<Counter>(samples.size(), expected, upper_edge::exclusive,
                                         [&](std::span<Counter> counts, const histogram_options& options) {
                                           return tally::cpu::bincount<Sample, Counter>(input, counts, options);
                                         });
  return expected;
}

template <class Sample>
std::vector<Sample> random_values_below(std::size_t n, std::uint64_t bound, std::mt19937_64& rng) {
  const auto max = static_cast<std::uint64_t>(std::numeric_limits<Sample>::max());
  std::uniform_int_distribution<std::uint64_t> value(0, std::min(bound, max));
  std::vector<Sample> samples(n);
  for (Sample& x : samples) x = static_cast<Sample>(value(rng));
  return samples;
}

TYPED_TEST(Bincount, EveryStrategyMatchesOracleOnRandomSizesAndBinCounts) {
  using Sample = typename TypeParam::sample;
  using Counter = typename TypeParam::counter;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  const auto sizes = test_sizes(rng);
  const std::size_t offset = std::uniform_int_distribution<std::size_t>(0, 5)(rng);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::int64_t num_bins = bin_counts[(i + offset) % 6];
    // About one value in eleven is past the last bin and must be left out.
    const auto bound = static_cast<std::uint64_t>(num_bins + num_bins / 10 + 1);
    check_bincount<Sample, Counter>(random_values_below<Sample>(sizes[i], bound, rng), num_bins);
  }
  const std::int64_t many = std::int64_t{1} << 20;
  check_bincount<Sample, Counter>(random_values_below<Sample>(100003, many + many / 10, rng), many);
}

TYPED_TEST(Bincount, EveryStrategyMatchesOracleWhenAllSamplesFallInOneBin) {
  using Sample = typename TypeParam::sample;
  using Counter = typename TypeParam::counter;
  const auto expected = check_bincount<Sample, Counter>(std::vector<Sample>(200003, Sample{5}), 7);
  EXPECT_EQ(expected.counts[5], 200003u) << "the input is not what the test says";
}

TYPED_TEST(Bincount, EveryStrategyLeavesOutValuesPastTheLastBin) {
  using Sample = typename TypeParam::sample;
  using Counter = typename TypeParam::counter;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  auto samples = random_values_below<Sample>(100001, std::numeric_limits<std::uint64_t>::max(), rng);
  for (Sample& x : samples) x = std::max<Sample>(x, Sample{16});
  samples.push_back(std::numeric_limits<Sample>::max());
  const auto expected = check_bincount<Sample, Counter>(samples, 16);
  EXPECT_EQ(expected.left_out, samples.size()) << "the input is not what the test says";
}

// ---- the limits of particular strategies -----------------------------------------------------

// OpenMP's array-section reduction gives each thread a private copy of the counts; 2^20 uint64
// counters are 8 MiB per copy, as much as a default thread stack. Asked for by name, `reduction`
// must still count them (or refuse with tally::error), not crash.
// The OpenMP reduction clause puts each thread's private copy of the counts on its stack: a
// million 64-bit bins overflowed it (a crash). `reduction` now refuses such counts before
// writing anything, and `privatized` (copies on the heap) counts the same input exactly.
TEST(HistogramStrategies, ReductionRefusesCountsTooLargeForThreadStacks) {
  const std::int64_t num_bins = std::int64_t{1} << 20;
  std::vector<std::uint32_t> samples(100003);
  for (std::size_t i = 0; i < samples.size(); ++i) samples[i] = static_cast<std::uint32_t>((i * 7919) % num_bins);
  const auto expected = tally_test::reference_bincount_counts<std::uint32_t>(samples, num_bins);
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(num_bins), tally_test::poison<std::uint64_t>);
  try {
    tally::cpu::bincount<std::uint32_t, std::uint64_t>(samples, counts, {strategy::reduction});
    ADD_FAILURE() << "reduction accepted 8 MiB of counts";
  } catch (const tally::error& e) {
    EXPECT_EQ(e.code(), tally::errc::not_supported) << e.what();
    EXPECT_EQ(e.argument(), "strategy") << e.what();
  }
  for (const std::uint64_t c : counts) ASSERT_EQ(c, tally_test::poison<std::uint64_t>);
  const auto result = tally::cpu::bincount<std::uint32_t, std::uint64_t>(samples, counts, {strategy::privatized});
  EXPECT_EQ(result.chose.used, strategy::privatized);
  EXPECT_EQ(result.left_out, expected.left_out);
  EXPECT_TRUE(tally_test::counts_equal<std::uint64_t>(counts, expected.counts));
}

// privatized's copies are taken by the threads OpenMP starts, which inside another parallel region
// (nesting off) is one, not max_threads(): the merge must add only the copies that were taken.
TEST(HistogramStrategies, PrivatizedCountsRightInsideAParallelRegion) {
  const std::int64_t num_bins = 300;
  std::vector<std::int32_t> samples(200003);
  for (std::size_t i = 0; i < samples.size(); ++i) samples[i] = static_cast<std::int32_t>((i * 7919) % 311) - 5;
  const tally::even_bins bins{num_bins, 0.0, static_cast<double>(num_bins)};
  std::vector<std::uint32_t> expected(static_cast<std::size_t>(num_bins));
  const auto want = tally::cpu::histogram_even<std::int32_t, std::uint32_t>(samples, expected, bins, {strategy::sequential});
  std::vector<double> weights(samples.size(), 0.5);
  std::vector<double> expected_sums(static_cast<std::size_t>(num_bins));
  (void)tally::cpu::histogram_even<std::int32_t, double, double>(samples, weights, expected_sums, bins,
                                                                 {strategy::sequential});
  int mismatches = 0;
#pragma omp parallel num_threads(2) reduction(+ : mismatches)
  {
    std::vector<std::uint32_t> counts(static_cast<std::size_t>(num_bins), tally_test::poison<std::uint32_t>);
    const auto got = tally::cpu::histogram_even<std::int32_t, std::uint32_t>(samples, counts, bins, {strategy::privatized});
    std::vector<double> sums(static_cast<std::size_t>(num_bins), -1.0);
    (void)tally::cpu::histogram_even<std::int32_t, double, double>(samples, weights, sums, bins,
                                                                   {strategy::privatized});
    mismatches += (counts != expected || got.left_out != want.left_out || sums != expected_sums) ? 1 : 0;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(HistogramStrategies, AutomaticExplainsItsChoiceOnSmallAndLargeInputs) {
  // Whatever it picks, automatic names a CPU strategy and gives a reason, and the counts are right.
  for (const std::size_t n : {std::size_t{10}, std::size_t{1} << 20}) {
    for (const std::int64_t num_bins : {std::int64_t{4}, std::int64_t{1} << 20}) {
      SCOPED_TRACE(describe_case(n, num_bins, upper_edge::exclusive));
      std::vector<std::uint32_t> samples(n);
      for (std::size_t i = 0; i < n; ++i) samples[i] = static_cast<std::uint32_t>(i % 5);
      std::vector<std::uint64_t> counts(static_cast<std::size_t>(num_bins), tally_test::poison<std::uint64_t>);
      const auto result = tally::cpu::bincount<std::uint32_t, std::uint64_t>(samples, counts);
      tally_test::expect_chose(result.chose, strategy::automatic, tally::operation::histogram);
      EXPECT_TRUE(tally_test::counts_equal<std::uint64_t>(
          counts, tally_test::reference_bincount_counts<std::uint32_t>(samples, num_bins).counts));
    }
  }
}

TEST(HistogramStrategies, AutomaticCountsOnOneThreadWhenCopiesWouldNotPay) {
  // Fewer than four samples a bin: a private copy per thread costs more than the input it splits,
  // and atomics on the shared counts lost to one thread by 1.3-32x (docs/performance.md). Enough
  // samples for the threads, so that the choice is not the small-input one.
  const std::size_t n = std::size_t{1} << 17;
  const std::int64_t num_bins = std::int64_t{1} << 17;
  std::vector<std::uint32_t> samples(n);
  for (std::size_t i = 0; i < n; ++i) samples[i] = static_cast<std::uint32_t>((i * 7919) % static_cast<std::size_t>(num_bins));
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(num_bins), tally_test::poison<std::uint64_t>);
  const auto result = tally::cpu::bincount<std::uint32_t, std::uint64_t>(samples, counts);
  EXPECT_EQ(result.chose.used, strategy::sequential) << result.chose.reason;
  if (tally::cpu::detail::max_threads() > 1) {  // with one thread the reason is that one
    EXPECT_NE(result.chose.reason.find("fewer than four samples a bin"), std::string::npos) << result.chose.reason;
  }
  EXPECT_TRUE(tally_test::counts_equal<std::uint64_t>(
      counts, tally_test::reference_bincount_counts<std::uint32_t>(samples, num_bins).counts));
}

}  // namespace
