// The 8- and 16-bit sample types (int8, int16, uint16, float16, bfloat16) on the CPU backend:
// every value of each type through even bins, range bins and bincount with every CPU strategy,
// against the brute-force oracle (float16 edges rounded by the compiler's _Float16, bfloat16
// edges on the double's bits); reductions, count_if and find_first_if against plain loops; and
// the half types' conversions against the compiler's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "common/reference.hpp"
#include "common/small_values.hpp"
#include "tally/cpu.hpp"
#include "tally/detail/value_tables.hpp"
#include "test_support.hpp"

namespace {

using tally::bfloat16;
using tally::float16;
using tally::upper_edge;

using tally_test::from_bits;
using tally_test::value_count;

/// Every value of the type, each once, in the order of its bits (NaN and infinities included).
template <class T>
std::vector<T> every_value() {
  std::vector<T> values;
  for (std::uint32_t bits = 0; bits < value_count<T>; ++bits) values.push_back(from_bits<T>(bits));
  return values;
}

/// Random values by their bits, so each value (NaN payloads, subnormals) is as likely as any other.
template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> values(n);
  for (T& v : values) v = from_bits<T>(static_cast<std::uint32_t>(rng() % value_count<T>));
  return values;
}

template <class T>
double as_double(T x) {
  return static_cast<double>(x);
}

/// Ranges that each path of each type meets: unit steps (also past the type's ends), whole and
/// fractional steps, ranges whose edges round onto each other in a half type (empty bins), an
/// upper edge that rounds to infinity, subnormal edges, one bin.
template <class T>
std::vector<tally::even_bins> ranges_for() {
  if constexpr (std::is_integral_v<T>) {
    const double lo = std::numeric_limits<T>::lowest();
    const double hi = std::numeric_limits<T>::max();
    return {{7, -0.25, 99.75},
            {256, -10.0, 246.0},
            {static_cast<std::int64_t>(hi - lo + 1), lo, hi + 1},
            {1000, lo - 1000.0, hi + 1000.0},
            {4096, 0.0, 1000.0},
            {3, -1e9, 1e9},
            {1, 5.0, 5.5},
            {70000, lo, hi + 1},
            {100, -3.0, 97.0}};
  } else if constexpr (std::is_same_v<T, float16>) {
    return {{4096, 0.0, 1000.0},  {256, -1.0, 1.0},        {1000, -65504.0, 65504.0}, {64, 1e-7, 1e-3},
            {10, 0.0, 1e6},       {100, -3.3, 7.9},        {16, 1.0, 1.001},          {1, -0.0, 0.0001},
            {70000, -60000.0, 60000.0}, {65536, -2.0, 2.0}, {65535, -60000.0, 60000.0}};
  } else {
    return {{4096, 0.0, 1000.0}, {77, -1e30, 1e30},  {33, 1e-40, 1e-38}, {100, 1.0, 1.1},
            {256, -1.0, 1.0},    {70000, -1e3, 1e3}, {1, -5.0, 5.0}};
  }
}

template <class T>
class CpuSmallTypes : public ::testing::Test {};
using SmallTypes = ::testing::Types<std::int8_t, std::int16_t, std::uint16_t, float16, bfloat16>;
TYPED_TEST_SUITE(CpuSmallTypes, SmallTypes);

void expect_strategies_match(const tally_test::reference_histogram& want, const auto& run) {
  for (const tally::strategy s : tally_test::cpu_strategies_and_automatic(tally::operation::histogram)) {
    SCOPED_TRACE(std::string(tally::to_string(s)));
    std::vector<std::uint64_t> counts(want.counts.size(), tally_test::poison<std::uint64_t>);
    try {
      const tally::histogram_result got = run(std::span<std::uint64_t>(counts), s);
      ASSERT_EQ(counts, want.counts);
      ASSERT_EQ(got.left_out, want.left_out);
    } catch (const tally::error& e) {
      // reduction keeps its copy on each thread's stack and refuses many bins, naming the strategy.
      ASSERT_EQ(s, tally::strategy::reduction) << e.what();
      ASSERT_EQ(e.code(), tally::errc::not_supported) << e.what();
    }
  }
}

TYPED_TEST(CpuSmallTypes, EveryValueInEvenBinsMatchesTheOracle) {
  using T = TypeParam;
  const auto values = every_value<T>();
  const std::span<const T> samples(values);
  for (const tally::even_bins& bins : ranges_for<T>()) {
    for (const upper_edge mode : {upper_edge::exclusive, upper_edge::inclusive}) {
      SCOPED_TRACE(::testing::Message() << tally_test::small_type_name<T>() << " bins=" << bins.num_bins << " [" << bins.lower << ", "
                                        << bins.upper << ") inclusive=" << (mode == upper_edge::inclusive));
      const auto want = tally_test::reference_histogram_even(samples, bins, mode);
      expect_strategies_match(want, [&](std::span<std::uint64_t> counts, tally::strategy s) {
        return tally::cpu::histogram_even(samples, counts, bins, {s, mode});
      });
    }
  }
}

// With four samples or more for each value the bins count, 16-bit samples go through a table of
// each value's bin (cpu/edge_tables.hpp, value_table_slots): every value five times, shuffled, so
// that every binning of at most 65535 bins takes it (but integer bins of a whole step, which keep
// their shortcut), in even and range bins, against the oracle.
TYPED_TEST(CpuSmallTypes, ManySamplesCountThroughATableOfEachValueLikeTheOracle) {
  using T = TypeParam;
  if constexpr (sizeof(T) != 2) {
    GTEST_SKIP() << "bytes have no table on the CPU";
  } else {
    std::vector<T> values;
    for (int copy = 0; copy < 5; ++copy) {
      const auto all = every_value<T>();
      values.insert(values.end(), all.begin(), all.end());
    }
    std::mt19937_64 rng(tally_test::test_seed());
    SCOPED_TRACE(tally_test::seed_trace(tally_test::test_seed()));
    std::shuffle(values.begin(), values.end(), rng);
    const std::span<const T> samples(values);
    for (const tally::even_bins& bins : ranges_for<T>()) {
      for (const upper_edge mode : {upper_edge::exclusive, upper_edge::inclusive}) {
        SCOPED_TRACE(::testing::Message() << tally_test::small_type_name<T>() << " bins=" << bins.num_bins << " ["
                                          << bins.lower << ", " << bins.upper
                                          << ") inclusive=" << (mode == upper_edge::inclusive));
        const auto want = tally_test::reference_histogram_even(samples, bins, mode);
        expect_strategies_match(want, [&](std::span<std::uint64_t> counts, tally::strategy s) {
          return tally::cpu::histogram_even(samples, counts, bins, {s, mode});
        });
      }
    }
    std::vector<double> log_edges;
    for (int i = 0; i <= 300; ++i) log_edges.push_back(std::pow(10.0, -3.0 + 7.0 * i / 300.0));
    std::vector<double> random_edges(2000);
    std::uniform_real_distribution<double> position(-70000.0, 70000.0);
    for (double& e : random_edges) e = std::round(position(rng) * 4.0) / 4.0;
    std::sort(random_edges.begin(), random_edges.end());
    for (const std::vector<double>& edges : {log_edges, random_edges}) {
      for (const upper_edge mode : {upper_edge::exclusive, upper_edge::inclusive}) {
        SCOPED_TRACE(::testing::Message() << tally_test::small_type_name<T>() << " edges=" << edges.size()
                                          << " inclusive=" << (mode == upper_edge::inclusive));
        const auto want = tally_test::reference_histogram_range(samples, std::span<const double>(edges), mode);
        expect_strategies_match(want, [&](std::span<std::uint64_t> counts, tally::strategy s) {
          return tally::cpu::histogram_range(samples, counts, std::span<const double>(edges), {s, mode});
        });
      }
    }
  }
}

TYPED_TEST(CpuSmallTypes, EveryValueInRangeBinsMatchesTheOracle) {
  using T = TypeParam;
  const auto values = every_value<T>();
  const std::span<const T> samples(values);
  std::mt19937_64 rng(tally_test::test_seed());
  SCOPED_TRACE(tally_test::seed_trace(tally_test::test_seed()));
  std::vector<double> finite;
  for (const T v : values) {
    if (std::isfinite(as_double(v))) finite.push_back(as_double(v));
  }
  std::sort(finite.begin(), finite.end());
  for (const std::size_t num_edges : {2, 3, 9, 300, 5000}) {
    for (int trial = 0; trial < 3; ++trial) {
      // Edges on values of the type (duplicates included), between two of them, and in any
      // window of the type's span: narrow ones pile many edges between two values.
      const double a = finite[rng() % finite.size()];
      const double b = finite[rng() % finite.size()];
      std::uniform_real_distribution<double> between(std::min(a, b), std::max(a, b) + 1e-3);
      std::vector<double> edges(num_edges);
      for (double& e : edges) {
        switch (rng() % 3) {
          case 0: e = finite[rng() % finite.size()]; break;
          case 1: e = std::nextafter(finite[rng() % finite.size()], 0.0); break;
          default: e = between(rng); break;
        }
      }
      std::sort(edges.begin(), edges.end());
      for (const upper_edge mode : {upper_edge::exclusive, upper_edge::inclusive}) {
        SCOPED_TRACE(::testing::Message() << tally_test::small_type_name<T>() << " edges=" << num_edges << " trial=" << trial
                                          << " inclusive=" << (mode == upper_edge::inclusive));
        const auto want = tally_test::reference_histogram_range(samples, std::span<const double>(edges), mode);
        expect_strategies_match(want, [&](std::span<std::uint64_t> counts, tally::strategy s) {
          return tally::cpu::histogram_range(samples, counts, std::span<const double>(edges), {s, mode});
        });
      }
    }
  }
}

TYPED_TEST(CpuSmallTypes, BincountOfEveryNonNegativeValueMatchesTheOracle) {
  using T = TypeParam;
  if constexpr (std::is_integral_v<T>) {
    std::vector<T> values;
    for (const T v : every_value<T>()) {
      if (v >= 0) values.push_back(v);
    }
    for (const std::int64_t num_bins : {1, 100, 300, 70000}) {
      SCOPED_TRACE(::testing::Message() << tally_test::small_type_name<T>() << " bins=" << num_bins);
      const auto want = tally_test::reference_bincount_counts(std::span<const T>(values), num_bins);
      expect_strategies_match(want, [&](std::span<std::uint64_t> counts, tally::strategy s) {
        return tally::cpu::bincount(std::span<const T>(values), counts, {s});
      });
    }
    if constexpr (std::is_signed_v<T>) {
      const std::vector<T> negative{T{3}, T{-1}};
      std::vector<std::uint64_t> counts(4);
      tally_test::expect_tally_error(
          [&] { (void)tally::cpu::bincount(std::span<const T>(negative), std::span<std::uint64_t>(counts)); },
          tally::errc::invalid_argument, "samples", {"negative"});
    }
  } else {
    GTEST_SKIP() << "bincount takes integer samples";
  }
}

// 300 samples map each by the bins' own mapper; 16-bit samples take the table of each value's bin
// from four an entry on: int16 and uint16 from 20000 (a window of 100 values here), float16 and
// bfloat16 at 300000.
TYPED_TEST(CpuSmallTypes, WeightedEvenBinsAddTheWeightsOfTheOraclesBins) {
  using T = TypeParam;
  for (const std::size_t n : {std::size_t{300}, std::size_t{20000}, std::size_t{300000}}) {
    const auto values = random_values<T>(n, tally_test::test_seed());
    std::vector<double> weights(values.size());
    std::mt19937_64 rng(tally_test::test_seed() + 1);
    for (double& w : weights) w = static_cast<double>(rng() % 1000) / 8.0;  // exact sums in any order
    const tally::even_bins bins = ranges_for<T>().front();
    const tally_test::reference_even<T> oracle(bins, upper_edge::inclusive);
    std::vector<double> want(static_cast<std::size_t>(bins.num_bins), 0.0);
    std::uint64_t left_out = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::int64_t bin = oracle.bin(values[i]);
      if (bin >= 0) {
        want[static_cast<std::size_t>(bin)] += weights[i];
      } else {
        ++left_out;
      }
    }
    for (const bool deterministic : {false, true}) {
      std::vector<double> sums(want.size(), -1.0);
      tally::histogram_options options;
      options.last_edge = upper_edge::inclusive;
      options.deterministic = deterministic;
      const tally::histogram_result got = tally::cpu::histogram_even(
          std::span<const T>(values), std::span<const double>(weights), std::span<double>(sums), bins, options);
      EXPECT_EQ(sums, want) << "n=" << n << " deterministic=" << deterministic;
      EXPECT_EQ(got.left_out, left_out) << "n=" << n << " deterministic=" << deterministic;
    }
  }
}

TYPED_TEST(CpuSmallTypes, ReductionsMatchPlainLoops) {
  using T = TypeParam;
  using A = tally::accumulator_t<T>;
  auto values = random_values<T>(100003, tally_test::test_seed());
  if constexpr (tally::is_half_float_v<T>) {
    // Whole numbers in [-8, 8] (and NaN below): their float sums are exact in any order, so every
    // strategy must give the sequential sum, and the double sum.
    std::mt19937_64 rng(tally_test::test_seed());
    for (T& v : values) v = T::nearest(static_cast<double>(static_cast<int>(rng() % 17) - 8));
  }
  const std::span<const T> samples(values);
  A sequential{};
  A lowest = std::numeric_limits<A>::max();
  A highest = std::numeric_limits<A>::lowest();
  double exact = 0.0;
  for (const T v : values) {
    sequential = static_cast<A>(sequential + static_cast<A>(v));
    lowest = std::min(lowest, static_cast<A>(v));
    highest = std::max(highest, static_cast<A>(v));
    exact += as_double(v);
  }
  for (const tally::strategy s : tally_test::cpu_strategies_and_automatic(tally::operation::reduce)) {
    SCOPED_TRACE(std::string(tally::to_string(s)));
    const A sum = tally::cpu::reduce(samples, tally::reduce_op::sum, {s}).value;
    EXPECT_EQ(sum, sequential);
    EXPECT_EQ(static_cast<double>(sum), exact);
    EXPECT_EQ(tally::cpu::reduce(samples, tally::reduce_op::min, {s}).value, lowest);
    EXPECT_EQ(tally::cpu::reduce(samples, tally::reduce_op::max, {s}).value, highest);
  }
  if constexpr (tally::is_half_float_v<T>) {
    // The deterministic sum is float's over the widened values: the same bits for every strategy.
    std::vector<float> widened(values.size());
    std::transform(values.begin(), values.end(), widened.begin(), [](T x) { return static_cast<float>(x); });
    tally::reduce_options det;
    det.deterministic = true;
    const float want = tally::cpu::reduce(std::span<const float>(widened), tally::reduce_op::sum, det).value;
    for (const tally::strategy s : {tally::strategy::sequential, tally::strategy::privatized, tally::strategy::automatic}) {
      det.algorithm = s;
      EXPECT_EQ(tally::cpu::reduce(samples, tally::reduce_op::sum, det).value, want) << tally::to_string(s);
    }
    values[values.size() / 2] = from_bits<T>(std::is_same_v<T, float16> ? 0x7e00u : 0x7fc0u);  // NaN
    EXPECT_TRUE(std::isnan(tally::cpu::reduce(samples, tally::reduce_op::min).value));
    EXPECT_TRUE(std::isnan(tally::cpu::reduce(samples, tally::reduce_op::max).value));
  }
}

TYPED_TEST(CpuSmallTypes, CountIfAndFindFirstIfMatchPlainLoops) {
  using T = TypeParam;
  const auto values = random_values<T>(50001, tally_test::test_seed());
  const std::span<const T> samples(values);
  for (const tally::comparison op : {tally::comparison::less, tally::comparison::less_equal, tally::comparison::greater,
                                     tally::comparison::greater_equal, tally::comparison::equal,
                                     tally::comparison::not_equal}) {
    const tally::compare_to<T> predicate{op, values[values.size() / 3]};
    std::uint64_t count = 0;
    std::int64_t first = static_cast<std::int64_t>(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double x = as_double(values[i]);
      const double v = as_double(predicate.value);
      const bool match = op == tally::comparison::less ? x < v
                         : op == tally::comparison::less_equal ? x <= v
                         : op == tally::comparison::greater ? x > v
                         : op == tally::comparison::greater_equal ? x >= v
                         : op == tally::comparison::equal ? x == v
                                                          : x != v;
      if (match) {
        ++count;
        first = std::min(first, static_cast<std::int64_t>(i));
      }
    }
    for (const tally::strategy s : tally_test::cpu_strategies_and_automatic(tally::operation::count_if)) {
      EXPECT_EQ(tally::cpu::count_if(samples, predicate, {s}).count, count) << tally::to_string(s);
    }
    for (const tally::strategy s : tally_test::cpu_strategies_and_automatic(tally::operation::find_first_if)) {
      EXPECT_EQ(tally::cpu::find_first_if(samples, predicate, {s}).index, first) << tally::to_string(s);
    }
  }
}

/// The GPU's mappers of 16-bit samples by their bits (value_tables.hpp), run on the host over every
/// value: each must give the type's own mapper's bin, the window and the multiply-high up to the
/// bound of their exactness (num_bins * step^2 just below 2^32), the table over the values
/// counted_values finds, in both orders.
/// Each also gives a sample's word in a block's copy (slot): the bin, or num_bins where it leaves
/// the value out.
template <class T, class BitsMapper, class Reference>
void expect_every_value_maps_alike(const BitsMapper& by_bits, const Reference& reference) {
  for (std::uint32_t bits = 0; bits < value_count<T>; ++bits) {
    const std::int64_t bin = reference(from_bits<T>(bits));
    ASSERT_EQ(by_bits(static_cast<std::uint16_t>(bits)), bin) << "bits " << bits << " value " << as_double(from_bits<T>(bits));
    ASSERT_EQ(by_bits.slot(static_cast<std::uint16_t>(bits)), bin >= 0 ? bin : by_bits.num_bins()) << "bits " << bits;
  }
}

template <class T, class Reference>
void expect_table_maps_alike(const Reference& reference, double first_edge, double last_edge, bool inclusive,
                             std::int64_t num_bins) {
  using values = tally::detail::small_values<T>;
  const tally::detail::value_window window = tally::detail::counted_values<T>(first_edge, last_edge, inclusive);
  using table_mapper = tally::detail::value_table_mapper<values::order>;
  // As fill_value_table_kernel fills it: the window's entries, then one that leaves out; and a
  // block's swizzled copy of it.
  std::vector<std::uint16_t> table(table_mapper::table_bytes(window.span) / sizeof(std::uint16_t), 0xabab);
  std::vector<std::uint16_t> swizzled(table.size(), 0xabab);
  for (std::uint32_t p = 0; p <= window.span; ++p) {
    table[p] = table_mapper::entry_of(p < window.span ? reference(values::at(window.first + p)) : tally::left_out_bin,
                                      num_bins);
    swizzled[table_mapper::place(p)] = table[p];
  }
  const table_mapper by_bits(
      values::key_at(window.first), window.span, num_bins, reinterpret_cast<const std::byte*>(table.data()));
  expect_every_value_maps_alike<T>(by_bits, reference);
  const tally::detail::bank_swizzled_table<table_mapper> by_swizzled_bits(table_mapper(
      values::key_at(window.first), window.span, num_bins, reinterpret_cast<const std::byte*>(swizzled.data())));
  expect_every_value_maps_alike<T>(by_swizzled_bits, reference);
}

/// The ratio of even bins over a 16-bit integer type (ratio_for), where one is found, gives every
/// value the type's own mapper's bin; returns whether one was found.
template <class T>
bool expect_ratio_maps_alike(const tally::even_bin_mapper<T>& map, bool inclusive) {
  using values = tally::detail::small_values<T>;
  const tally::detail::value_window window = tally::detail::counted_values<T>(
      static_cast<double>(map.edge(0)), static_cast<double>(map.edge(map.num_bins())), inclusive);
  const auto ratio = tally::detail::ratio_for(map, window);
  if (!ratio) return false;
  expect_every_value_maps_alike<T>(
      tally::detail::value_ratio_mapper(values::key_at(window.first), *ratio, map.num_bins()), map);
  return true;
}

TYPED_TEST(CpuSmallTypes, TheGpusValueMappersGiveTheTypesOwnBins) {
  using T = TypeParam;
  if constexpr (sizeof(T) == 1) {
    GTEST_SKIP() << "bytes are counted per value and folded by the type's own mapper: no value mapper";
  } else {
    std::vector<tally::even_bins> cases = ranges_for<T>();
    if constexpr (std::is_integral_v<T>) {
      const double lo = std::numeric_limits<T>::lowest();
      // Whole steps at the multiply-high's bound, one bin of the whole range, and past the ends.
      cases.insert(cases.end(), {{1, lo, lo + 65535.0}, {1023, lo, lo + 1023.0 * 2048.0}, {16, -40000.0, 25536.0},
                                 {4095, lo - 7.0, lo - 7.0 + 4095.0 * 1024.0}, {3, 0.0, 3.0}, {50, -100.0, 50.0}});
    }
    for (const tally::even_bins& bins : cases) {
      for (const upper_edge mode : {upper_edge::exclusive, upper_edge::inclusive}) {
        SCOPED_TRACE(::testing::Message() << tally_test::small_type_name<T>() << " bins=" << bins.num_bins << " [" << bins.lower << ", "
                                          << bins.upper << ") inclusive=" << (mode == upper_edge::inclusive));
        const tally::even_bin_mapper<T> map(bins, mode);
        if constexpr (std::is_integral_v<T>) {
          if (const auto window = tally::detail::unit_window_for<false>(map, bins)) {
            expect_every_value_maps_alike<T>(*window, map);
          }
          if (const auto window = tally::detail::unit_window_for<true>(map, bins)) {
            expect_every_value_maps_alike<T>(*window, map);
          }
          // Unit bins take a window in both modes.
          if (map.shortcut() == tally::even_shortcut::integer_step &&
              bins.upper - bins.lower == static_cast<double>(bins.num_bins) && bins.num_bins <= (1 << 30)) {
            EXPECT_TRUE(tally::detail::unit_window_for<false>(map, bins) || tally::detail::unit_window_for<true>(map, bins));
          }
          if (const auto stepped = tally::detail::whole_step_for(map, bins, mode == upper_edge::inclusive)) {
            expect_every_value_maps_alike<T>(*stepped, map);
          }
          if (bins.num_bins <= tally::detail::value_table_mapper<tally::detail::value_order::bits>::max_bins) {
            expect_ratio_maps_alike<T>(map, mode == upper_edge::inclusive);
          }
        }
        if (bins.num_bins <= tally::detail::value_table_mapper<tally::detail::value_order::bits>::max_bins) {
          expect_table_maps_alike<T>(map, static_cast<double>(map.edge(0)), static_cast<double>(map.edge(bins.num_bins)),
                                     mode == upper_edge::inclusive, bins.num_bins);
        }
      }
    }
    const std::vector<double> edges{-1000.5, -3.0, -0.0, 0.0, 1e-6, 2.5, 2.5, 300.0, 40000.0};
    const tally::range_bin_mapper<T> range(edges.data(), static_cast<std::int64_t>(edges.size()), upper_edge::inclusive);
    expect_table_maps_alike<T>(range, edges.front(), edges.back(), true, static_cast<std::int64_t>(edges.size()) - 1);
  }
}

// Even bins over 16-bit integers by a fixed-point ratio (value_ratio_mapper), as blocks whose samples
// spread over the table's banks count them: where ratio_for finds one it gives every value of the
// type the mapper's bin. Ranges with integer edges (numpy's default over integer data, the data's
// minimum and maximum, closed last bin) and random float edges, with steps from 0.01 to 64 values
// a bin, nearly always have one. The rest keep the table: where edges that are whole numbers in
// exact arithmetic round to just above them in double (0 + 1437 * 65535 / 7185 gives
// 13107.000000000002), the integer below joins the lower bin, as numpy counts it, and no one
// ratio follows such edges and the exact ones too.
template <class T>
void expect_ratios_for_random_ranges(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double lowest = std::numeric_limits<T>::lowest();
  const double highest = std::numeric_limits<T>::max();
  const auto uniform = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  int integer_cases = 0;
  int integer_found = 0;
  int float_cases = 0;
  int float_found = 0;
  for (int i = 0; i < 300; ++i) {
    const auto num_bins = static_cast<std::int64_t>(std::exp2(uniform(1.0, 14.0)));
    const double step = std::exp2(uniform(std::log2(0.01), 6.0));
    const double width = std::min(step * static_cast<double>(num_bins), highest - lowest);
    const double lower = uniform(lowest, highest - width);
    SCOPED_TRACE(::testing::Message() << "case " << i << " bins=" << num_bins << " width=" << width);
    {
      // The data's minimum and maximum, both integers; a closed last bin, as numpy takes them.
      const double low = std::floor(lower);
      const double high = std::max(std::floor(lower + width), low + 1.0);
      const tally::even_bin_mapper<T> map({num_bins, low, high}, upper_edge::inclusive);
      if (map.shortcut() != tally::even_shortcut::integer_step) {  // whole steps take the multiply-high
        ++integer_cases;
        integer_found += expect_ratio_maps_alike<T>(map, true) ? 1 : 0;
      }
    }
    for (const upper_edge mode : {upper_edge::exclusive, upper_edge::inclusive}) {
      const tally::even_bin_mapper<T> map({num_bins, lower, lower + width}, mode);
      const bool inclusive = mode == upper_edge::inclusive;
      if (tally::detail::counted_values<T>(lower, lower + width, inclusive).span == 0) continue;  // nothing to map
      ++float_cases;
      float_found += expect_ratio_maps_alike<T>(map, inclusive) ? 1 : 0;
    }
  }
  EXPECT_GT(integer_cases, 200);
  EXPECT_GE(integer_found, integer_cases * 19 / 20) << integer_found << " of " << integer_cases;
  EXPECT_GE(float_found, float_cases * 9 / 10) << float_found << " of " << float_cases;
  std::printf("%s: a ratio for %d of %d ranges with integer edges, %d of %d with random ones\n",
              tally_test::small_type_name<T>().c_str(), integer_found, integer_cases, float_found, float_cases);
}

TEST(ValueRatios, GiveEveryValueItsBinOverRandomRanges) {
  expect_ratios_for_random_ranges<std::int16_t>(11);
  expect_ratios_for_random_ranges<std::uint16_t>(12);
}

// A block's swizzled copy of a table places each entry within its 128-byte row (a permutation of
// the row) and spreads keys that stride by 32 words over all 32 banks, where they all sat in one.
template <class Table>
void expect_rows_permuted_and_strides_spread() {
  constexpr std::uint32_t per_row = 128 / sizeof(typename Table::entry_type);
  for (std::uint32_t row = 0; row < 70; ++row) {
    std::set<std::uint32_t> seen;
    for (std::uint32_t p = row * per_row; p < (row + 1) * per_row; ++p) {
      ASSERT_EQ(Table::place(p) / per_row, row) << p;
      seen.insert(Table::place(p));
    }
    ASSERT_EQ(seen.size(), per_row) << "row " << row;
  }
  for (std::uint32_t first : {0u, 1u, 4096u}) {
    std::set<std::uint32_t> banks;
    for (std::uint32_t k = 0; k < 32; ++k) {
      banks.insert(Table::place(first + k * per_row) * sizeof(typename Table::entry_type) / 4 % 32);
    }
    EXPECT_EQ(banks.size(), 32u) << "keys " << per_row << " apart from " << first;
  }
  EXPECT_EQ(Table::table_bytes(0) % 128, 0u);
  EXPECT_GE(Table::table_bytes(1000), 1001 * sizeof(typename Table::entry_type));
}

TEST(ValueTables, PlaceEachEntryInItsRowAndSpreadKeysThatStrideOverTheBanks) {
  expect_rows_permuted_and_strides_spread<tally::detail::value_table_mapper<tally::detail::value_order::bits>>();
  expect_rows_permuted_and_strides_spread<tally::detail::float_table_mapper>();
}

TEST(HalfTypes, Float16ConvertsAndRoundsAsTheCompilersFloat16) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const auto h = from_bits<float16>(bits);
    _Float16 compiler;
    const auto word = static_cast<std::uint16_t>(bits);
    std::memcpy(&compiler, &word, sizeof(compiler));
    const double want = static_cast<double>(compiler);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(as_double(h))) << bits;
    } else {
      ASSERT_EQ(as_double(h), want) << bits;
      ASSERT_EQ(std::signbit(as_double(h)), std::signbit(want)) << bits;
    }
  }
  std::mt19937_64 rng(tally_test::test_seed());
  std::vector<double> probes{0.0, -0.0, 65504.0, 65519.999, 65520.0, 1e6, -1e6, 0x1p-24, 0x1p-25, 0x1.8p-25, 0x1p-26,
                             1.0 + 0x1p-11, 1.0 + 0x1p-11 + 0x1p-40, 1.0 + 3 * 0x1p-11};
  std::uniform_real_distribution<double> exponent(-30.0, 17.0);
  for (int i = 0; i < 200000; ++i) probes.push_back((rng() % 2 ? 1.0 : -1.0) * std::exp2(exponent(rng)));
  for (const double x : probes) {
    const double want = static_cast<double>(static_cast<_Float16>(x));
    ASSERT_EQ(as_double(float16::nearest(x)), want) << std::hexfloat << x;
    ASSERT_EQ(std::signbit(as_double(float16::nearest(x))), std::signbit(want)) << std::hexfloat << x;
  }
}

TEST(HalfTypes, Bfloat16ConvertsExactlyAndRoundsAsTheOracle) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const float value = static_cast<float>(from_bits<bfloat16>(bits));
    std::uint32_t word = 0;
    std::memcpy(&word, &value, sizeof(word));
    ASSERT_EQ(word, bits << 16) << bits;
  }
  std::mt19937_64 rng(tally_test::test_seed());
  std::vector<double> probes{0.0, -0.0, 0x1.fep127, 0x1.ffp127, 0x1p128, 0x1p-133, 0x1p-134, 0x1.8p-134, 0x1p-126,
                             1.0 + 0x1p-8, 1.0 + 0x1p-8 + 0x1p-40, 1.0 + 3 * 0x1p-8};
  std::uniform_real_distribution<double> exponent(-140.0, 129.0);
  for (int i = 0; i < 200000; ++i) probes.push_back((rng() % 2 ? 1.0 : -1.0) * std::exp2(exponent(rng)));
  for (const double x : probes) {
    const double want = tally_test::reference_round_bfloat16(x);
    ASSERT_EQ(as_double(bfloat16::nearest(x)), want) << std::hexfloat << x;
  }
}

}  // namespace
