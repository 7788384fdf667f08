// Tests that every bad argument to the CPU backend is refused with tally::error, the right code,
// argument() naming the argument, a message naming the function, and the counts left exactly as
// they were (poisoned before the call, still poisoned after).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tally/cpu.hpp"
#include "test_support.hpp"

namespace {

using tally::errc;
using tally::strategy;
using tally_test::expect_tally_error;
using tally_test::poison;

constexpr double nan = std::numeric_limits<double>::quiet_NaN();
constexpr double inf = std::numeric_limits<double>::infinity();

/// Every strategy the CPU backend does not implement: the GPU-only ones.
std::vector<strategy> gpu_only_strategies() {
  std::vector<strategy> gpu_only;
  for (const auto& entry : tally::detail::strategy_names) {
    if (!tally::supports(tally::backend::cpu, tally::operation::histogram, entry.value)) gpu_only.push_back(entry.value);
  }
  return gpu_only;
}

TEST(CpuStrategies, GpuOnlyStrategiesAreEveryGpuStrategyAndNoCpuOne) {
  // Guards the loops below: they must see every GPU strategy of every operation that the CPU does
  // not run too (`atomic` runs on both), and no CPU one.
  const auto gpu_only = gpu_only_strategies();
  const auto listed = [&](strategy s) { return std::find(gpu_only.begin(), gpu_only.end(), s) != gpu_only.end(); };
  for (const auto op : {tally::operation::histogram, tally::operation::reduce, tally::operation::count_if,
                        tally::operation::find_first_if}) {
    for (const strategy s : tally::strategies_for(tally::backend::gpu, op)) {
      EXPECT_EQ(listed(s), !tally::supports(tally::backend::cpu, op, s)) << tally::to_string(s);
    }
    for (const strategy s : tally::strategies_for(tally::backend::cpu, op)) {
      EXPECT_FALSE(listed(s)) << tally::to_string(s);
    }
  }
  EXPECT_FALSE(listed(strategy::automatic));
}

TEST(StrategyNames, OneIdeaHasOneNameAndTheFormerNamesStillParse) {
  for (const auto& entry : tally::detail::strategy_names) {
    EXPECT_EQ(tally::parse_strategy(entry.name), entry.value) << entry.name;
    EXPECT_EQ(tally::to_string(entry.value), entry.name);
    // No two strategies share a name, and no former name is a current one.
    for (const auto& former : tally::detail::former_strategy_names) EXPECT_NE(former.name, entry.name);
  }
  EXPECT_EQ(tally::parse_strategy("global_atomic"), strategy::atomic);
  EXPECT_EQ(tally::parse_strategy("atomic_per_element"), strategy::atomic);
  EXPECT_EQ(tally::parse_strategy("shared_two_phase"), strategy::two_phase);
  EXPECT_EQ(tally::parse_strategy("two_pass"), strategy::two_phase);
  EXPECT_EQ(tally::parse_strategy("no_such_strategy"), std::nullopt);
  // The naive racy histogram is the lab's (tally::lab::naive_histogram), not a strategy a user picks.
  EXPECT_EQ(tally::parse_strategy("racy"), std::nullopt);
  // One atomic per sample is one name on both backends and every operation that has it.
  for (const auto op : {tally::operation::histogram, tally::operation::reduce, tally::operation::count_if}) {
    EXPECT_TRUE(tally::supports(tally::backend::cpu, op, strategy::atomic));
    EXPECT_TRUE(tally::supports(tally::backend::gpu, op, strategy::atomic));
  }
  EXPECT_TRUE(tally::supports(tally::backend::gpu, tally::operation::reduce, strategy::two_phase));
  EXPECT_TRUE(tally::supports(tally::backend::gpu, tally::operation::histogram, strategy::two_phase));
}

// ---- histogram_even -------------------------------------------------------------------------

class HistogramEvenRefuses : public ::testing::Test {
 protected:
  std::vector<float> samples = {0.5f, 1.5f, 2.5f};
  std::vector<std::uint32_t> counts = std::vector<std::uint32_t>(4, poison<std::uint32_t>);

  void expect_refused(const tally::even_bins& bins, std::string_view argument,
                      std::initializer_list<std::string_view> message_parts,
                      const tally::histogram_options& options = {}) {
    expect_tally_error(
        [&] {
          tally::cpu::histogram_even<float, std::uint32_t>(samples, counts, bins, options);
        },
        errc::invalid_argument, argument, message_parts);
    EXPECT_TRUE(tally_test::all_poisoned<std::uint32_t>(counts));
  }
};

TEST_F(HistogramEvenRefuses, ZeroOrNegativeBinCounts) {
  counts.clear();  // counts.size() == num_bins, so only num_bins is at fault
  expect_refused({0, 0.0, 1.0}, "num_bins", {"tally::cpu::histogram_even", "num_bins", "got 0"});
  expect_refused({-4, 0.0, 1.0}, "num_bins", {"num_bins", "got -4"});
}

TEST_F(HistogramEvenRefuses, LowerNotBelowUpper) {
  expect_refused({4, 1.0, 1.0}, "lower", {"tally::cpu::histogram_even", "lower"});
  expect_refused({4, 2.0, 1.0}, "lower", {"lower"});
}

TEST_F(HistogramEvenRefuses, NonFiniteBounds) {
  expect_refused({4, nan, 1.0}, "lower", {"lower", "finite"});
  expect_refused({4, -inf, 1.0}, "lower", {"lower", "finite"});
  expect_refused({4, 0.0, nan}, "upper", {"upper", "finite"});
  expect_refused({4, 0.0, inf}, "upper", {"upper", "finite"});
  // Finite bounds whose difference overflows: the step would be infinite.
  expect_refused({4, -1e308, 1e308}, "upper", {"upper"});
}

TEST_F(HistogramEvenRefuses, EdgesInFloat32OverBoundsFloat32CannotHold) {
  constexpr auto in_float32 = tally::edge_arithmetic::float32;
  expect_refused({4, 0.1, 1.0, in_float32}, "lower", {"lower", "float32 value"});
  expect_refused({4, 0.0, 0.7, in_float32}, "upper", {"upper", "float32 value"});
  expect_refused({4, -0x1.fffffep127, 0x1.fffffep127, in_float32}, "upper", {"upper", "finite in float32"});
  counts.assign((std::size_t{1} << 24) + 1, poison<std::uint32_t>);
  expect_refused({(std::int64_t{1} << 24) + 1, 0.0f, 1.0f, in_float32}, "num_bins", {"num_bins", "2^24"});
  expect_refused({4, 0.0, 1.0, static_cast<tally::edge_arithmetic>(7)}, "arithmetic", {"arithmetic"});
}

TEST_F(HistogramEvenRefuses, NullSamplesWithANonZeroSize) {
  expect_tally_error(
      [&] {
        tally::cpu::histogram_even<float, std::uint32_t>(std::span<const float>(static_cast<const float*>(nullptr), 3),
                                                         counts, {4, 0.0, 4.0});
      },
      errc::invalid_argument, "samples", {"samples", "null"});
  EXPECT_TRUE(tally_test::all_poisoned<std::uint32_t>(counts));
}

TEST_F(HistogramEvenRefuses, NullCountsAndCountsOfTheWrongSize) {
  expect_tally_error(
      [&] {
        tally::cpu::histogram_even<float, std::uint32_t>(
            samples, std::span<std::uint32_t>(static_cast<std::uint32_t*>(nullptr), 4), {4, 0.0, 4.0});
      },
      errc::invalid_argument, "counts", {"counts", "null"});
  for (const std::int64_t num_bins : {3, 5}) {
    SCOPED_TRACE("num_bins " + std::to_string(num_bins) + ", counts.size() 4");
    expect_refused({num_bins, 0.0, 4.0}, "counts", {"counts", "4 elements"});
  }
}

TEST_F(HistogramEvenRefuses, GpuOnlyStrategies) {
  for (const strategy s : gpu_only_strategies()) {
    SCOPED_TRACE(std::string(tally::to_string(s)));
    expect_tally_error(
        [&] {
          tally::cpu::histogram_even<float, std::uint32_t>(samples, counts, {4, 0.0, 4.0}, {s});
        },
        errc::not_supported, "strategy", {"strategy", tally::to_string(s)});
    EXPECT_TRUE(tally_test::all_poisoned<std::uint32_t>(counts));
  }
}

// ---- histogram_range ------------------------------------------------------------------------

class HistogramRangeRefuses : public ::testing::Test {
 protected:
  std::vector<double> samples = {0.5, 1.5, 2.5};
  std::vector<std::uint64_t> counts = std::vector<std::uint64_t>(3, poison<std::uint64_t>);

  void expect_refused(const std::vector<double>& edges, std::string_view argument,
                      std::initializer_list<std::string_view> message_parts,
                      const tally::histogram_options& options = {}) {
    expect_tally_error(
        [&] {
          tally::cpu::histogram_range<double, std::uint64_t>(samples, counts, edges, options);
        },
        errc::invalid_argument, argument, message_parts);
    EXPECT_TRUE(tally_test::all_poisoned<std::uint64_t>(counts));
  }
};

TEST_F(HistogramRangeRefuses, FewerThanTwoEdges) {
  expect_refused({}, "edges", {"tally::cpu::histogram_range", "edges", "at least 2"});
  expect_refused({1.0}, "edges", {"edges", "at least 2"});
}

TEST_F(HistogramRangeRefuses, UnsortedEdgesNamingTheIndex) {
  expect_refused({0.0, 2.0, 1.0, 3.0}, "edges", {"edges", "sorted", "edge 2"});
  expect_refused({3.0, 2.0, 1.0, 0.0}, "edges", {"edge 1"});
}

TEST_F(HistogramRangeRefuses, NonFiniteEdgesNamingTheIndex) {
  expect_refused({0.0, nan, 2.0, 3.0}, "edges", {"edges", "index 1"});
  expect_refused({0.0, 1.0, 2.0, inf}, "edges", {"edges", "index 3"});
  expect_refused({-inf, 1.0, 2.0, 3.0}, "edges", {"edges", "index 0"});
}

TEST_F(HistogramRangeRefuses, NullEdgesSamplesOrCounts) {
  expect_tally_error(
      [&] {
        tally::cpu::histogram_range<double, std::uint64_t>(
            samples, counts, std::span<const double>(static_cast<const double*>(nullptr), 4));
      },
      errc::invalid_argument, "edges", {"edges", "null"});
  const std::vector<double> edges = {0.0, 1.0, 2.0, 3.0};
  expect_tally_error(
      [&] {
        tally::cpu::histogram_range<double, std::uint64_t>(
            std::span<const double>(static_cast<const double*>(nullptr), 3), counts, edges);
      },
      errc::invalid_argument, "samples", {"samples", "null"});
  expect_tally_error(
      [&] {
        tally::cpu::histogram_range<double, std::uint64_t>(
            samples, std::span<std::uint64_t>(static_cast<std::uint64_t*>(nullptr), 3), edges);
      },
      errc::invalid_argument, "counts", {"counts", "null"});
  EXPECT_TRUE(tally_test::all_poisoned<std::uint64_t>(counts));
}

TEST_F(HistogramRangeRefuses, CountsOfTheWrongSize) {
  expect_refused({0.0, 1.0, 2.0}, "counts", {"counts", "3 elements", "2 bins"});
  expect_refused({0.0, 1.0, 2.0, 3.0, 4.0}, "counts", {"counts", "3 elements", "4 bins"});
}

TEST_F(HistogramRangeRefuses, GpuOnlyStrategies) {
  for (const strategy s : gpu_only_strategies()) {
    SCOPED_TRACE(std::string(tally::to_string(s)));
    expect_tally_error(
        [&] {
          tally::cpu::histogram_range<double, std::uint64_t>(samples, counts, std::vector<double>{0.0, 1.0, 2.0, 3.0},
                                                             {s});
        },
        errc::not_supported, "strategy", {"strategy", tally::to_string(s)});
    EXPECT_TRUE(tally_test::all_poisoned<std::uint64_t>(counts));
  }
}

// ---- bincount -------------------------------------------------------------------------------

TEST(BincountRefuses, EmptyCounts) {
  const std::vector<std::int32_t> samples = {0, 1, 2};
  std::vector<std::uint32_t> counts;
  expect_tally_error([&] { tally::cpu::bincount<std::int32_t, std::uint32_t>(samples, counts); },
                     errc::invalid_argument, "counts", {"tally::cpu::bincount", "counts"});
}

TEST(BincountRefuses, NegativeSamplesNamingTheFirstIndexAndValue) {
  std::vector<std::uint32_t> counts(8, poison<std::uint32_t>);
  const std::vector<std::int32_t> small = {3, 1, -7, -2};
  expect_tally_error([&] { tally::cpu::bincount<std::int32_t, std::uint32_t>(small, counts); },
                     errc::invalid_argument, "samples", {"tally::cpu::bincount", "sample 2 is -7"});
  EXPECT_TRUE(tally_test::all_poisoned<std::uint32_t>(counts));

  // Far into a large input, and for every strategy: the scan must run before any counting.
  std::vector<std::int64_t> large(300000, 1);
  large[123456] = std::numeric_limits<std::int64_t>::min();
  large[200000] = -1;
  for (const strategy s : tally_test::cpu_strategies_and_automatic(tally::operation::histogram)) {
    SCOPED_TRACE(std::string(tally::to_string(s)));
    expect_tally_error([&] { tally::cpu::bincount<std::int64_t, std::uint32_t>(large, counts, {s}); },
                       errc::invalid_argument, "samples",
                       {"sample 123456 is " + std::to_string(std::numeric_limits<std::int64_t>::min())});
    EXPECT_TRUE(tally_test::all_poisoned<std::uint32_t>(counts));
  }
}

TEST(BincountRefuses, NegativeSamplesBeforeCountingIntoMoreBinsThanSamples) {
  // With far more bins than samples, one thread counts straight into the counts instead of into
  // slots of its own, where a negative sample is found as it is counted: the scan comes first.
  std::vector<std::uint64_t> counts(std::size_t{1} << 20, poison<std::uint64_t>);
  std::vector<std::int32_t> samples(1000, 7);
  samples[999] = -3;
  for (const strategy s : tally_test::cpu_strategies_and_automatic(tally::operation::histogram)) {
    if (s == strategy::reduction) continue;  // refuses 8 MiB of counts on the thread stacks first
    SCOPED_TRACE(std::string(tally::to_string(s)));
    expect_tally_error([&] { tally::cpu::bincount<std::int32_t, std::uint64_t>(samples, counts, {s}); },
                       errc::invalid_argument, "samples", {"sample 999 is -3"});
    EXPECT_TRUE(tally_test::all_poisoned<std::uint64_t>(counts));
  }
}

TEST(BincountRefuses, NullSamplesOrCountsAndGpuOnlyStrategies) {
  std::vector<std::uint64_t> counts(4, poison<std::uint64_t>);
  const std::vector<std::uint8_t> samples = {0, 1, 2};
  expect_tally_error(
      [&] {
        tally::cpu::bincount<std::uint8_t, std::uint64_t>(
            std::span<const std::uint8_t>(static_cast<const std::uint8_t*>(nullptr), 3), counts);
      },
      errc::invalid_argument, "samples", {"samples", "null"});
  expect_tally_error(
      [&] {
        tally::cpu::bincount<std::uint8_t, std::uint64_t>(
            samples, std::span<std::uint64_t>(static_cast<std::uint64_t*>(nullptr), 4));
      },
      errc::invalid_argument, "counts", {"counts", "null"});
  for (const strategy s : gpu_only_strategies()) {
    SCOPED_TRACE(std::string(tally::to_string(s)));
    expect_tally_error([&] { tally::cpu::bincount<std::uint8_t, std::uint64_t>(samples, counts, {s}); },
                       errc::not_supported, "strategy", {"strategy"});
  }
  EXPECT_TRUE(tally_test::all_poisoned<std::uint64_t>(counts));
}

// ---- 32-bit counters and 2^32 samples --------------------------------------------------------

/**
 * 2^32 uint8 samples of address space mapped PROT_NONE: no memory is committed, and any read of
 * a sample kills the test with SIGSEGV. The span is a valid range (no pointer is faked), so a
 * refusal that comes before any read, as histogram.hpp's validate-then-run order promises, is
 * exactly what this proves.
 */
class UnreadableSamples {
 public:
  static constexpr std::size_t size = std::size_t{1} << 32;  // one more than uint32 can count
  UnreadableSamples() {
    void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<const std::uint8_t*>(p);
  }
  ~UnreadableSamples() {
    if (data_ != nullptr) munmap(const_cast<std::uint8_t*>(data_), size);
  }
  UnreadableSamples(const UnreadableSamples&) = delete;
  UnreadableSamples& operator=(const UnreadableSamples&) = delete;
  [[nodiscard]] bool mapped() const { return data_ != nullptr; }
  [[nodiscard]] std::span<const std::uint8_t> span() const { return {data_, size}; }

 private:
  const std::uint8_t* data_ = nullptr;
};

TEST(Uint32Counters, AreRefusedFor2To32SamplesBeforeAnySampleIsRead) {
  const UnreadableSamples samples;
  ASSERT_TRUE(samples.mapped()) << "could not reserve 4 GiB of address space";
  std::vector<std::uint32_t> counts(256, poison<std::uint32_t>);
  const std::vector<double> edges = {0.0, 128.0, 256.0};
  std::vector<std::uint32_t> range_counts(2, poison<std::uint32_t>);
  for (const strategy s : tally_test::cpu_strategies_and_automatic(tally::operation::histogram)) {
    SCOPED_TRACE(std::string(tally::to_string(s)));
    expect_tally_error(
        [&] {
          tally::cpu::histogram_even<std::uint8_t, std::uint32_t>(samples.span(), counts, {256, 0.0, 256.0}, {s});
        },
        errc::invalid_argument, "counts", {"counts", "4294967296", "64-bit"});
    expect_tally_error(
        [&] { tally::cpu::histogram_range<std::uint8_t, std::uint32_t>(samples.span(), range_counts, edges, {s}); },
        errc::invalid_argument, "counts", {"counts", "4294967296"});
    expect_tally_error([&] { tally::cpu::bincount<std::uint8_t, std::uint32_t>(samples.span(), counts, {s}); },
                       errc::invalid_argument, "counts", {"counts", "4294967296"});
  }
  EXPECT_TRUE(tally_test::all_poisoned<std::uint32_t>(counts));
  EXPECT_TRUE(tally_test::all_poisoned<std::uint32_t>(range_counts));
}

// ---- reduce, count_if, find_first_if --------------------------------------------------------

TEST(ReduceRefuses, NullSamplesWithANonZeroSize) {
  const std::span<const double> null_samples(static_cast<const double*>(nullptr), 5);
  expect_tally_error([&] { tally::cpu::reduce<double>(null_samples, tally::reduce_op::sum); },
                     errc::invalid_argument, "samples", {"tally::cpu::reduce", "samples", "null"});
  expect_tally_error([&] { tally::cpu::count_if(null_samples, [](double) { return true; }); },
                     errc::invalid_argument, "samples", {"tally::cpu::count_if", "samples"});
  expect_tally_error([&] { tally::cpu::find_first_if(null_samples, [](double) { return true; }); },
                     errc::invalid_argument, "samples", {"tally::cpu::find_first_if", "samples"});
}

TEST(ReduceRefuses, GpuOnlyStrategies) {
  const std::vector<std::int32_t> samples = {1, 2, 3};
  const std::span<const std::int32_t> input(samples);
  for (const strategy s : gpu_only_strategies()) {
    SCOPED_TRACE(std::string(tally::to_string(s)));
    expect_tally_error([&] { tally::cpu::reduce<std::int32_t>(input, tally::reduce_op::max, {s}); },
                       errc::not_supported, "strategy", {"strategy", tally::to_string(s)});
    expect_tally_error([&] { tally::cpu::count_if(input, [](std::int32_t) { return true; }, {s}); },
                       errc::not_supported, "strategy", {"strategy"});
    expect_tally_error([&] { tally::cpu::find_first_if(input, [](std::int32_t) { return true; }, {s}); },
                       errc::not_supported, "strategy", {"strategy"});
  }
}

}  // namespace
