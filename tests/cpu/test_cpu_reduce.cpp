// Tests of the CPU backend's reduce, count_if and find_first_if under every CPU strategy:
// integer results exact (int32 sums widen to int64, int64 sums wrap modulo 2^64), min/max exact
// with NaN propagating, floating sums within a stated bound of a long double reference, empty
// inputs giving the identity, and count_if / find_first_if agreeing with the standard library.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "tally/cpu/reduce.hpp"
#include "tally/cpu/parallel.hpp"
#include "test_support.hpp"

namespace {

using tally::reduce_op;
using tally::strategy;

/// `critical` takes a lock per element; above this size it only slows the suite down.
constexpr std::size_t critical_max_elements = std::size_t{1} << 17;

std::vector<strategy> strategies_for_size(tally::operation op, std::size_t n) {
  std::vector<strategy> chosen;
  for (const strategy s : tally_test::cpu_strategies_and_automatic(op)) {
    if (s == strategy::critical && n > critical_max_elements) continue;
    chosen.push_back(s);
  }
  return chosen;
}

std::string trace(strategy s, std::size_t n) {
  return "strategy " + std::string(tally::to_string(s)) + ", " + std::to_string(n) + " elements";
}

const char* op_name(reduce_op op) { return op == reduce_op::sum ? "sum" : op == reduce_op::min ? "min" : "max"; }

/// Sizes: empty, tiny, 2^k +- 1 around the points where the work is split, and a large one.
std::vector<std::size_t> test_sizes(std::mt19937_64& rng) {
  std::vector<std::size_t> sizes = {0, 1, 2, 3, 33, 1023, 1025, 65535, 65536, 65537, 131071};
  sizes.push_back(std::uniform_int_distribution<std::size_t>(0, 5000)(rng));
  sizes.push_back(std::uniform_int_distribution<std::size_t>(200000, 1000000)(rng));
  return sizes;
}

template <class T>
std::vector<T> random_values(std::size_t n, std::mt19937_64& rng) {
  std::vector<T> values(n);
  if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<T> value(std::numeric_limits<T>::lowest(), std::numeric_limits<T>::max());
    for (T& x : values) x = value(rng);
  } else {
    std::uniform_real_distribution<T> value(T(-1000), T(1000));
    for (T& x : values) x = value(rng);
  }
  return values;
}

template <class T>
tally::reduce_result<T> run_reduce(const std::vector<T>& values, reduce_op op, strategy s) {
  const auto result = tally::cpu::reduce<T>(std::span<const T>(values), op, {s});
  tally_test::expect_chose(result.chose, s, tally::operation::reduce);
  return result;
}

struct type_names {
  template <class T>
  static std::string GetName(int) {
    return tally_test::type_name<T>();
  }
};

template <class T>
class Reduce : public ::testing::Test {};
using reduce_types = ::testing::Types<std::int32_t, std::uint32_t, std::int64_t, float, double>;
TYPED_TEST_SUITE(Reduce, reduce_types, type_names);

template <class T>
class ReduceInteger : public ::testing::Test {};
using integer_types = ::testing::Types<std::int32_t, std::uint32_t, std::int64_t>;
TYPED_TEST_SUITE(ReduceInteger, integer_types, type_names);

template <class T>
class ReduceFloating : public ::testing::Test {};
using floating_types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ReduceFloating, floating_types, type_names);

// ---- integers ------------------------------------------------------------------------------

TYPED_TEST(ReduceInteger, EveryStrategySumsRandomFullRangeValuesExactly) {
  using T = TypeParam;
  using A = tally::accumulator_t<T>;
  static_assert(sizeof(A) == 8, "integer sums accumulate in 64 bits");
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  for (const std::size_t n : test_sizes(rng)) {
    const auto values = random_values<T>(n, rng);
    // Reference: 64-bit two's-complement arithmetic, i.e. modulo 2^64 (exact for 32-bit inputs,
    // whose sums of < 2^31 terms cannot leave the 64-bit range).
    std::uint64_t wrapped = 0;
    for (const T x : values) wrapped += static_cast<std::uint64_t>(static_cast<A>(x));
    const auto expected = static_cast<A>(wrapped);
    for (const strategy s : strategies_for_size(tally::operation::reduce, n)) {
      SCOPED_TRACE(trace(s, n));
      EXPECT_EQ(run_reduce<T>(values, reduce_op::sum, s).value, expected);
    }
  }
}

TYPED_TEST(ReduceInteger, EveryStrategyFindsTheExactMinAndMax) {
  using T = TypeParam;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  for (const std::size_t n : test_sizes(rng)) {
    if (n == 0) continue;  // see EmptyInputGivesTheIdentity
    auto values = random_values<T>(n, rng);
    // Put the extremes at the very ends once, where a chunked split could drop them.
    if (n > 10) {
      values.front() = std::numeric_limits<T>::max();
      values.back() = std::numeric_limits<T>::lowest();
    }
    const T min = *std::min_element(values.begin(), values.end());
    const T max = *std::max_element(values.begin(), values.end());
    for (const strategy s : strategies_for_size(tally::operation::reduce, n)) {
      SCOPED_TRACE(trace(s, n));
      EXPECT_EQ(run_reduce<T>(values, reduce_op::min, s).value, min);
      EXPECT_EQ(run_reduce<T>(values, reduce_op::max, s).value, max);
    }
  }
}

TEST(ReduceInt32, SumThatOverflowsInt32IsExactInInt64) {
  for (const std::size_t n : {std::size_t{1000}, std::size_t{300001}}) {
    const std::vector<std::int32_t> highs(n, std::numeric_limits<std::int32_t>::max());
    const std::vector<std::int32_t> lows(n, std::numeric_limits<std::int32_t>::min());
    const std::int64_t high_sum = static_cast<std::int64_t>(n) * std::numeric_limits<std::int32_t>::max();
    const std::int64_t low_sum = static_cast<std::int64_t>(n) * std::numeric_limits<std::int32_t>::min();
    for (const strategy s : strategies_for_size(tally::operation::reduce, n)) {
      SCOPED_TRACE(trace(s, n));
      const auto high = run_reduce<std::int32_t>(highs, reduce_op::sum, s);
      static_assert(std::is_same_v<decltype(high.value), std::int64_t>);
      EXPECT_EQ(high.value, high_sum);
      EXPECT_EQ(run_reduce<std::int32_t>(lows, reduce_op::sum, s).value, low_sum);
    }
  }
}

TEST(ReduceUint32, SumPast2To32IsExactInUint64) {
  const std::size_t n = 100003;
  const std::vector<std::uint32_t> values(n, std::numeric_limits<std::uint32_t>::max());
  for (const strategy s : strategies_for_size(tally::operation::reduce, n)) {
    SCOPED_TRACE(trace(s, n));
    const auto result = run_reduce<std::uint32_t>(values, reduce_op::sum, s);
    static_assert(std::is_same_v<decltype(result.value), std::uint64_t>);
    EXPECT_EQ(result.value, std::uint64_t{n} * std::numeric_limits<std::uint32_t>::max());
  }
}

TEST(ReduceInt64, SumWrapsModulo2To64) {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t min = std::numeric_limits<std::int64_t>::min();
  const std::vector<std::int64_t> one_past_max = {max, 1};
  const std::vector<std::int64_t> one_below_min = {min, -1};
  // 100003 copies of INT64_MAX: (2^63 - 1) * 100003 mod 2^64 = 2^63 * 100003 - 100003 mod 2^64,
  // and 2^63 * odd = 2^63 mod 2^64, so the sum is 2^63 - 100003, i.e. INT64_MIN - 100003 wrapped:
  // INT64_MAX - 100002.
  const std::vector<std::int64_t> many_max(100003, max);
  for (const strategy s : tally_test::cpu_strategies_and_automatic(tally::operation::reduce)) {
    SCOPED_TRACE(trace(s, 0));
    EXPECT_EQ(run_reduce<std::int64_t>(one_past_max, reduce_op::sum, s).value, min);
    EXPECT_EQ(run_reduce<std::int64_t>(one_below_min, reduce_op::sum, s).value, max);
    EXPECT_EQ(run_reduce<std::int64_t>(many_max, reduce_op::sum, s).value, max - 100002);
  }
}

// ---- floating point ------------------------------------------------------------------------

/// The exact sum, near enough: Kahan-compensated summation in long double (64-bit mantissa on
/// x86), whose error is far below the bounds tested against.
template <class T>
long double reference_sum(const std::vector<T>& values) {
  long double sum = 0;
  long double compensation = 0;
  for (const T x : values) {
    const long double y = static_cast<long double>(x) - compensation;
    const long double t = sum + y;
    compensation = (t - sum) - y;
    sum = t;
  }
  return sum;
}

TYPED_TEST(ReduceFloating, EverySumIsWithinTheRoundingBoundOfTheExactSum) {
  using T = TypeParam;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  for (const std::size_t n : test_sizes(rng)) {
    const auto values = random_values<T>(n, rng);
    const long double exact = reference_sum(values);
    long double sum_abs = 0;
    for (const T x : values) sum_abs += std::fabs(static_cast<long double>(x));
    // Any order of n - 1 floating additions (sequential, per-thread partials, tree) errs by at
    // most gamma_{n-1} * sum|x| with gamma_k = k*u / (1 - k*u), u = eps / 2. For (n-1)*u <= 1/2
    // that is at most (n - 1) * eps * sum|x|: the bound tested here.
    const long double bound =
        static_cast<long double>(n > 0 ? n - 1 : 0) * std::numeric_limits<T>::epsilon() * sum_abs;
    for (const strategy s : strategies_for_size(tally::operation::reduce, n)) {
      SCOPED_TRACE(trace(s, n));
      const T sum = run_reduce<T>(values, reduce_op::sum, s).value;
      EXPECT_LE(std::fabs(static_cast<long double>(sum) - exact), bound)
          << "sum " << static_cast<double>(sum) << ", exact " << static_cast<double>(exact);
    }
  }
}

TYPED_TEST(ReduceFloating, EveryStrategySumsExactlyRepresentableValuesExactly) {
  using T = TypeParam;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  // Multiples of 1/4 no larger than 16 in magnitude, at most 200003 of them: every partial sum,
  // in any order, is a multiple of 1/4 below 2^22 and so exact in float. Any lost or repeated
  // element changes the result, which the rounding bound above could not always see.
  std::uniform_int_distribution<int> quarter(-64, 64);
  for (const std::size_t n : {std::size_t{65537}, std::size_t{200003}}) {
    std::vector<T> values(n);
    long long quarters = 0;
    for (T& x : values) {
      const int q = quarter(rng);
      quarters += q;
      x = static_cast<T>(q) / T(4);
    }
    const T expected = static_cast<T>(quarters) / T(4);
    for (const strategy s : strategies_for_size(tally::operation::reduce, n)) {
      SCOPED_TRACE(trace(s, n));
      EXPECT_EQ(run_reduce<T>(values, reduce_op::sum, s).value, expected);
    }
  }
}

TYPED_TEST(ReduceFloating, EveryStrategyFindsTheExactMinAndMax) {
  using T = TypeParam;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  for (const std::size_t n : test_sizes(rng)) {
    if (n == 0) continue;
    auto values = random_values<T>(n, rng);
    if (n > 10) {
      values.front() = std::numeric_limits<T>::infinity();
      values.back() = -std::numeric_limits<T>::max();
    }
    const T min = *std::min_element(values.begin(), values.end());
    const T max = *std::max_element(values.begin(), values.end());
    for (const strategy s : strategies_for_size(tally::operation::reduce, n)) {
      SCOPED_TRACE(trace(s, n));
      EXPECT_EQ(run_reduce<T>(values, reduce_op::min, s).value, min);
      EXPECT_EQ(run_reduce<T>(values, reduce_op::max, s).value, max);
    }
  }
}

TYPED_TEST(ReduceFloating, NaNAnywhereMakesMinMaxAndSumNaN) {
  using T = TypeParam;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (const std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{1000}, std::size_t{100003}}) {
    for (const std::size_t where : {std::size_t{0}, n / 2, n - 1}) {
      std::vector<T> values(n);
      for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<T>(i % 1000) - T(500);
      values[where] = nan;
      for (const strategy s : strategies_for_size(tally::operation::reduce, n)) {
        SCOPED_TRACE(trace(s, n) + ", NaN at " + std::to_string(where));
        for (const reduce_op op : {reduce_op::min, reduce_op::max, reduce_op::sum}) {
          EXPECT_TRUE(std::isnan(run_reduce<T>(values, op, s).value)) << op_name(op);
        }
      }
    }
  }
}

// ---- empty input ----------------------------------------------------------------------------

TYPED_TEST(Reduce, EmptyInputGivesTheIdentity) {
  using T = TypeParam;
  using A = tally::accumulator_t<T>;
  const std::vector<T> empty;
  const A min_identity = std::is_floating_point_v<T> ? static_cast<A>(std::numeric_limits<T>::infinity())
                                                     : static_cast<A>(std::numeric_limits<T>::max());
  const A max_identity = std::is_floating_point_v<T> ? static_cast<A>(-std::numeric_limits<T>::infinity())
                                                     : static_cast<A>(std::numeric_limits<T>::lowest());
  for (const strategy s : tally_test::cpu_strategies_and_automatic(tally::operation::reduce)) {
    SCOPED_TRACE(trace(s, 0));
    EXPECT_EQ(run_reduce<T>(empty, reduce_op::sum, s).value, A{0});
    EXPECT_EQ(run_reduce<T>(empty, reduce_op::min, s).value, min_identity);
    EXPECT_EQ(run_reduce<T>(empty, reduce_op::max, s).value, max_identity);
    // A null pointer with size 0 is an empty input too, not an error.
    EXPECT_EQ(tally::cpu::reduce<T>(std::span<const T>(), reduce_op::sum, {s}).value, A{0});
  }
}

// ---- count_if -------------------------------------------------------------------------------

TEST(CountIf, EveryStrategyAgreesWithStdCountIf) {
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  const auto divisible_by_3 = [](std::int32_t x) { return x % 3 == 0; };
  for (const std::size_t n : test_sizes(rng)) {
    const auto values = random_values<std::int32_t>(n, rng);
    const auto expected = static_cast<std::uint64_t>(std::count_if(values.begin(), values.end(), divisible_by_3));
    for (const strategy s : strategies_for_size(tally::operation::count_if, n)) {
      SCOPED_TRACE(trace(s, n));
      const auto result = tally::cpu::count_if(std::span<const std::int32_t>(values), divisible_by_3, {s});
      tally_test::expect_chose(result.chose, s, tally::operation::count_if);
      EXPECT_EQ(result.count, expected);
    }
  }
}

TEST(CountIf, EveryStrategyCountsNaNAsComparisonsDo) {
  // NaN compares false with <, >, == and true with !=: compare_to must keep that.
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  auto values = random_values<float>(100003, rng);
  for (std::size_t i = 0; i < values.size(); i += 7) values[i] = std::numeric_limits<float>::quiet_NaN();
  values[5] = 0.5f;
  for (const tally::comparison op : {tally::comparison::less, tally::comparison::greater, tally::comparison::equal,
                                     tally::comparison::not_equal, tally::comparison::less_equal,
                                     tally::comparison::greater_equal}) {
    const tally::compare_to<float> predicate{op, 0.5f};
    const auto expected = static_cast<std::uint64_t>(std::count_if(values.begin(), values.end(), predicate));
    ASSERT_GT(expected, 0u);
    for (const strategy s : strategies_for_size(tally::operation::count_if, values.size())) {
      SCOPED_TRACE(trace(s, values.size()) + ", comparison " + std::to_string(static_cast<int>(op)));
      EXPECT_EQ(tally::cpu::count_if(std::span<const float>(values), predicate, {s}).count, expected);
    }
  }
}

TEST(CountIf, EveryStrategyCountsAllAndNone) {
  const std::vector<double> values(70001, 1.0);
  for (const strategy s : strategies_for_size(tally::operation::count_if, values.size())) {
    SCOPED_TRACE(trace(s, values.size()));
    EXPECT_EQ(tally::cpu::count_if(std::span<const double>(values), [](double x) { return x == 1.0; }, {s}).count,
              values.size());
    EXPECT_EQ(tally::cpu::count_if(std::span<const double>(values), [](double x) { return x != 1.0; }, {s}).count,
              0u);
    EXPECT_EQ(tally::cpu::count_if(std::span<const double>(), [](double) { return true; }, {s}).count, 0u);
  }
}

// ---- find_first_if --------------------------------------------------------------------------

/// Runs find_first_if with every strategy on `values` and compares with std::find_if.
void expect_find_first_matches_std(const std::vector<std::int64_t>& values, std::int64_t needle,
                                   const std::string& what) {
  const auto is_needle = [needle](std::int64_t x) { return x == needle; };
  const auto expected = static_cast<std::int64_t>(std::find_if(values.begin(), values.end(), is_needle) - values.begin());
  for (const strategy s : strategies_for_size(tally::operation::find_first_if, values.size())) {
    SCOPED_TRACE(what + ", " + trace(s, values.size()));
    const auto result = tally::cpu::find_first_if(std::span<const std::int64_t>(values), is_needle, {s});
    tally_test::expect_chose(result.chose, s, tally::operation::find_first_if);
    EXPECT_EQ(result.index, expected);
  }
}

TEST(FindFirstIf, EveryStrategyReturnsTheSizeWhenNothingMatches) {
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{65537}, (std::size_t{1} << 20) + 3}) {
    const std::vector<std::int64_t> values(n, 7);
    expect_find_first_matches_std(values, 8, "no match");  // std::find_if gives n
  }
}

TEST(FindFirstIf, CriticalFindsTheFirstMatchPastItsFirstWindow) {
  // The other tests keep `critical` to small inputs; this one makes it search a second window.
  const std::size_t n = (std::size_t{1} << 20) + 5;
  std::vector<std::int64_t> values(n, 0);
  values[(std::size_t{1} << 20) + 2] = 1;
  values[(std::size_t{1} << 20) + 4] = 1;
  const auto result = tally::cpu::find_first_if(std::span<const std::int64_t>(values),
                                                [](std::int64_t x) { return x == 1; }, {strategy::critical});
  EXPECT_EQ(result.chose.used, strategy::critical);
  EXPECT_EQ(result.index, (std::int64_t{1} << 20) + 2);
}

TEST(FindFirstIf, EveryStrategyFindsAMatchInTheFirstAndInTheLastElement) {
  for (const std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{65536}, std::size_t{65537},
                              (std::size_t{1} << 20) + 1}) {
    std::vector<std::int64_t> values(n, 0);
    values.back() = 1;
    expect_find_first_matches_std(values, 1, "match in the last element");
    values.back() = 0;
    values.front() = 1;
    expect_find_first_matches_std(values, 1, "match in the first element");
  }
}

TEST(FindFirstIf, EveryStrategyReturnsTheFirstOfSeveralMatches) {
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  // Matches on both sides of the 2^16 and 2^20 windows, and many matches in one window, where a
  // parallel search could return a later one that a thread found first.
  const std::size_t n = (std::size_t{2} << 20) + 5;
  std::vector<std::int64_t> values(n, 0);
  for (const std::size_t at : {(std::size_t{1} << 20) + 7, (std::size_t{1} << 20) + 8, std::size_t{2} << 20, n - 1}) {
    values[at] = 1;
  }
  expect_find_first_matches_std(values, 1, "matches past the first window");
  for (std::size_t i = 70000; i < n; i += 1000) values[i] = 1;
  expect_find_first_matches_std(values, 1, "a match every 1000 elements");
  // Random matches: several random layouts.
  for (int round = 0; round < 5; ++round) {
    std::fill(values.begin(), values.end(), 0);
    std::uniform_int_distribution<std::size_t> at(0, n - 1);
    for (int k = 0; k < 3; ++k) values[at(rng)] = 1;
    expect_find_first_matches_std(values, 1, "random matches, round " + std::to_string(round));
  }
}


// ---- deterministic sums (reduce_options::deterministic) -----------------------------------

template <class T>
std::uint64_t bits_of(T x) {
  std::uint64_t b = 0;
  std::memcpy(&b, &x, sizeof(T));
  return b;
}

template <class T>
tally::reduce_result<T> deterministic_sum(std::span<const T> values, strategy s) {
  tally::reduce_options options{s};
  options.deterministic = true;
  return tally::cpu::reduce<T>(values, reduce_op::sum, options);
}

const std::vector<strategy> deterministic_strategies{strategy::sequential, strategy::privatized, strategy::automatic};

template <class T>
constexpr std::size_t chunk_of = static_cast<std::size_t>(tally::detail::fixed_point::chunk_size<T>);

TYPED_TEST(ReduceFloating, DeterministicSumOfIntegerValuesIsTheCorrectlyRoundedExactSum) {
  // Whole numbers up to 2^23 in magnitude are exact on every chunk grid, so the only rounding is
  // the last: the result must be the exact (int64) sum rounded once to T.
  using T = TypeParam;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> value(-(1 << 23), 1 << 23);
  for (const std::size_t n : test_sizes(rng)) {
    std::vector<T> values(n);
    std::int64_t exact = 0;
    for (T& x : values) {
      const std::int64_t v = value(rng);
      x = static_cast<T>(v);
      exact += v;
    }
    for (const strategy s : deterministic_strategies) {
      SCOPED_TRACE(trace(s, n));
      EXPECT_EQ(bits_of(deterministic_sum<T>(values, s).value), bits_of(static_cast<T>(exact)));
    }
  }
}

TYPED_TEST(ReduceFloating, DeterministicSumIsWithinItsStatedBound) {
  // |result - exact| <= ulp(result)/2 + n 2^-54 max|x| (float), n 2^-119 max|x| (double);
  // long double's own summation error, n 2^-63 sum|x|, is added to the allowance.
  using T = TypeParam;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  for (const int spread : {1, 20, 60, 200}) {
    const std::size_t n = 300001;
    std::vector<T> values(n);
    for (T& x : values) x = static_cast<T>(std::ldexp(unit(rng), static_cast<int>(rng() % spread) - spread / 2));
    long double exact = 0, magnitude = 0, largest = 0;
    for (const T x : values) {
      exact += x;
      magnitude += std::fabs(static_cast<long double>(x));
      largest = std::max(largest, std::fabs(static_cast<long double>(x)));
    }
    const T got = deterministic_sum<T>(values, strategy::sequential).value;
    const long double half_ulp = (static_cast<long double>(std::nextafter(std::fabs(got), std::numeric_limits<T>::infinity())) - std::fabs(got)) / 2;
    const int grid_bits = sizeof(T) == 4 ? 54 : 119;
    const long double bound = half_ulp + static_cast<long double>(n) * std::ldexp(largest, -grid_bits) +
                              static_cast<long double>(n) * std::ldexp(magnitude, -63);
    EXPECT_LE(std::fabs(static_cast<long double>(got) - exact), bound) << "spread 2^" << spread;
  }
}

TYPED_TEST(ReduceFloating, DeterministicSumBitsDoNotDependOnStrategyThreadsOrAlignment) {
  using T = TypeParam;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  const std::size_t n = 200003;
  std::vector<T> padded(n + 1);
  for (T& x : padded) x = static_cast<T>(std::ldexp(unit(rng), static_cast<int>(rng() % 90) - 45));
  const std::span<const T> values = std::span<const T>(padded).first(n);
  const std::uint64_t want = bits_of(deterministic_sum<T>(values, strategy::sequential).value);
  // The same values one element further into a buffer: other addresses, the same chunks.
  std::vector<T> shifted(n + 1);
  std::copy(values.begin(), values.end(), shifted.begin() + 1);
  const int threads_before = tally::cpu::detail::max_threads();
  for (const int threads : {1, 2, 3, 7}) {
    omp_set_num_threads(threads);
    for (const strategy s : deterministic_strategies) {
      SCOPED_TRACE(trace(s, n) + ", " + std::to_string(threads) + " threads");
      EXPECT_EQ(bits_of(deterministic_sum<T>(values, s).value), want);
      EXPECT_EQ(bits_of(deterministic_sum<T>(std::span<const T>(shifted).subspan(1), s).value), want);
    }
  }
  omp_set_num_threads(threads_before);
}

TYPED_TEST(ReduceFloating, DeterministicSumFollowsTheNaNAndInfinityRules) {
  using T = TypeParam;
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  const std::size_t n = 5000;
  const auto sum_with = [&](std::initializer_list<std::pair<std::size_t, T>> specials) {
    std::vector<T> values(n, T(1));
    for (const auto& [at, value] : specials) values[at] = value;
    const T first = deterministic_sum<T>(values, strategy::sequential).value;
    EXPECT_EQ(bits_of(deterministic_sum<T>(values, strategy::privatized).value), bits_of(first));
    return first;
  };
  EXPECT_EQ(sum_with({}), T(n));
  EXPECT_TRUE(std::isnan(sum_with({{7, nan}})));
  EXPECT_TRUE(std::isnan(sum_with({{7, inf}, {4000, -inf}})));
  EXPECT_TRUE(std::isnan(sum_with({{7, inf}, {8, nan}})));
  EXPECT_EQ(sum_with({{7, inf}, {4000, inf}}), inf);
  EXPECT_EQ(sum_with({{n - 1, -inf}}), -inf);
  const T big = std::numeric_limits<T>::max();
  EXPECT_EQ(sum_with({{7, big}, {4000, big}}), inf);    // a finite sum past the range rounds to inf
  EXPECT_EQ(sum_with({{7, -big}, {4000, -big}}), -inf);
  // Samples far below the largest of their chunk round away (the stated bound): the chunk of
  // +-max loses its ones, the other chunks keep theirs.
  EXPECT_EQ(sum_with({{7, big}, {8, -big}}), T(n - chunk_of<T>));
  // An exact zero is +0, even from negative zeros; the empty sum is +0.
  const std::vector<T> negative_zeros(1000, T(-0.0));
  EXPECT_EQ(bits_of(deterministic_sum<T>(negative_zeros, strategy::sequential).value), 0u);
  EXPECT_EQ(bits_of(deterministic_sum<T>(std::span<const T>(), strategy::sequential).value), 0u);
}

TYPED_TEST(ReduceFloating, DeterministicSumOfSubnormalsIsExact) {
  using T = TypeParam;
  const T tiny = std::numeric_limits<T>::denorm_min();
  std::vector<T> values(3 * chunk_of<T> + 5);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = tiny * static_cast<T>(i % 7) * (i % 3 == 0 ? -1 : 1);
  std::int64_t units = 0;
  for (std::size_t i = 0; i < values.size(); ++i) units += static_cast<std::int64_t>(i % 7) * (i % 3 == 0 ? -1 : 1);
  EXPECT_EQ(deterministic_sum<T>(values, strategy::sequential).value, tiny * static_cast<T>(units));
}

TYPED_TEST(ReduceFloating, DeterministicSumIsRefusedByStrategiesThatCannotHonourIt) {
  using T = TypeParam;
  const std::vector<T> values(100, T(1));
  for (const strategy s : {strategy::critical, strategy::atomic, strategy::reduction}) {
    SCOPED_TRACE(trace(s, values.size()));
    tally_test::expect_tally_error([&] { (void)deterministic_sum<T>(values, s); }, tally::errc::not_supported,
                                   "deterministic", {"deterministic", tally::to_string(s)});
    // min and max are exact in any order: deterministic is accepted and changes nothing.
    tally::reduce_options options{s};
    options.deterministic = true;
    EXPECT_EQ(tally::cpu::reduce<T>(std::span<const T>(values), reduce_op::max, options).value, T(1));
  }
}

TEST(ReduceInteger32, DeterministicIsANoOpForIntegerSums) {
  const std::vector<std::int32_t> values(100000, -7);
  for (const strategy s : tally_test::cpu_strategies_and_automatic(tally::operation::reduce)) {
    tally::reduce_options options{s};
    options.deterministic = true;
    EXPECT_EQ(tally::cpu::reduce<std::int32_t>(std::span<const std::int32_t>(values), reduce_op::sum, options).value,
              -700000)
        << tally::to_string(s);
  }
}

}  // namespace
