// The CPU backend called from 8 host threads at once: every operation, each thread on its own
// inputs and with its own strategies (each call opening its own OpenMP team), gives the exact
// results computed before the threads started.
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/concurrent_work.hpp"
#include "test_support.hpp"
#include "tally/cpu.hpp"

namespace {

using tally::operation;
using tally::strategy;
using tally_test::concurrent_inputs;

/// Every call once, with the round's strategy (each operation's own list, taken in turn, so the
/// threads run different strategies side by side), checked against the thread's expected results.
void run_every_call(const concurrent_inputs& in, int thread, int round) {
  const auto pick = [&](operation op) {
    const auto all = tally_test::cpu_strategies_and_automatic(op);
    return all[static_cast<std::size_t>(thread + round) % all.size()];
  };
  SCOPED_TRACE("thread " + std::to_string(thread) + ", round " + std::to_string(round));

  std::vector<std::uint64_t> counts(static_cast<std::size_t>(in.int_bins.num_bins), tally_test::poison<std::uint64_t>);
  const auto even = tally::cpu::histogram_even(std::span<const std::int32_t>(in.ints), std::span<std::uint64_t>(counts),
                                               in.int_bins, {pick(operation::histogram)});
  EXPECT_EQ(counts, in.even.counts) << "histogram_even with " << tally::to_string(even.chose.used);
  EXPECT_EQ(even.left_out, in.even.left_out);

  std::vector<std::uint32_t> range_counts(in.edges.size() - 1, tally_test::poison<std::uint32_t>);
  const auto range = tally::cpu::histogram_range(std::span<const float>(in.floats), std::span<std::uint32_t>(range_counts),
                                                 std::span<const double>(in.edges), {pick(operation::histogram)});
  EXPECT_EQ(std::vector<std::uint64_t>(range_counts.begin(), range_counts.end()), in.range.counts)
      << "histogram_range with " << tally::to_string(range.chose.used);
  EXPECT_EQ(range.left_out, in.range.left_out);

  std::vector<std::uint64_t> bincounts(static_cast<std::size_t>(in.bincount_bins), tally_test::poison<std::uint64_t>);
  const auto bincount = tally::cpu::bincount(std::span<const std::uint16_t>(in.small), std::span<std::uint64_t>(bincounts),
                                             {pick(operation::histogram)});
  EXPECT_EQ(bincounts, in.bincount.counts) << "bincount with " << tally::to_string(bincount.chose.used);
  EXPECT_EQ(bincount.left_out, in.bincount.left_out);

  std::vector<double> sums(static_cast<std::size_t>(in.int_bins.num_bins), -1.0);
  const auto weighted = tally::cpu::histogram_even(
      std::span<const std::int32_t>(in.ints), std::span<const float>(in.weights), std::span<double>(sums), in.int_bins,
      {pick(operation::weighted_histogram), tally::upper_edge::exclusive, true});
  EXPECT_TRUE(tally_test::same_bits(sums, in.deterministic_weighted))
      << "deterministic weighted histogram with " << tally::to_string(weighted.chose.used);
  EXPECT_EQ(weighted.left_out, in.weighted_left_out);

  const tally::reduce_options reduce{pick(operation::reduce)};
  EXPECT_EQ(tally::cpu::reduce(std::span<const std::int32_t>(in.ints), tally::reduce_op::sum, reduce).value, in.int_sum);
  // Deterministic sums: the strategies that honour the option.
  constexpr strategy deterministic_sums[] = {strategy::sequential, strategy::privatized, strategy::automatic};
  const strategy summing = deterministic_sums[static_cast<std::size_t>(thread + round) % 3];
  const double float_sum =
      tally::cpu::reduce(std::span<const float>(in.floats), tally::reduce_op::sum, {summing, true}).value;
  EXPECT_EQ(std::bit_cast<std::uint64_t>(float_sum), std::bit_cast<std::uint64_t>(in.deterministic_float_sum));
  EXPECT_EQ(tally::cpu::count_if(std::span<const std::int32_t>(in.ints), in.above, {pick(operation::count_if)}).count,
            in.count_above);
  EXPECT_EQ(
      tally::cpu::find_first_if(std::span<const std::int32_t>(in.ints), in.above, {pick(operation::find_first_if)}).index,
      in.first_above);
}

TEST(CpuConcurrentCallers, EightHostThreadsAtOnceGetExactResults) {
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::vector<concurrent_inputs> inputs;
  for (int t = 0; t < tally_test::concurrent_threads; ++t) {
    inputs.push_back(tally_test::make_concurrent_inputs(t, std::size_t{1} << 18, seed));
  }
  constexpr int rounds = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < tally_test::concurrent_threads; ++t) {
    threads.emplace_back([&inputs, t] {
      for (int round = 0; round < rounds; ++round) run_every_call(inputs[static_cast<std::size_t>(t)], t, round);
    });
  }
  for (std::thread& thread : threads) thread.join();
}

}  // namespace
