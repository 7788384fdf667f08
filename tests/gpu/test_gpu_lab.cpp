// GPU tests of the lab's experiments (tally/lab.hpp). Every contention variant (operation x
// memory (global, shared, global_private) x scope x warp aggregation) runs a small sweep of address
// counts and must pass the exact check of every run; block scope on global memory shared by blocks
// is formally a race, so there it must run but is not required to be exact (on a global_private
// slice, which only its block touches, block scope must be exact). The race experiments: the
// atomic counter and the block histogram with its barrier are exact; the racy counter loses
// updates at 1,000,000 threads, and so does the naive histogram with every sample in one bin; the
// histogram without its barrier never counts more than the reference. Tests of deliberately racy
// kernels carry "Racy" in their names: scripts/gpu-check leaves them out of racecheck.
// Without a GPU the program exits 77 (skipped).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/quick_mode.hpp"
#include "tally/error.hpp"
#include "tally/lab.hpp"

namespace tally::test {
namespace {

using lab::aggregation;
using lab::atomic_op;
using lab::atomic_scope;
using lab::contention_case;
using lab::gpu_method;
using lab::memory_space;

std::string describe(const contention_case& c) {
  return std::string(lab::to_string(c.op)) + " " + lab::method_name(c.method) + " A=" + std::to_string(c.addresses) +
         " blocks=" + std::to_string(lab::blocks_of(c)) + " K=" + std::to_string(c.ops_per_thread);
}

class LabContention : public ::testing::TestWithParam<atomic_op> {};

TEST_P(LabContention, EveryVariantPassesItsExactCheckOnEveryRun) {
  // A = 1 (all collide), 3 (lanes of a warp share words unevenly), 32, 1000 (a word per thread of a
  // block), 40000 (> T K: untouched words; shared memory past the default 48 KiB: the opt-in;
  // global_private: a slice of 40000 words per block).
  const std::vector<std::int64_t> address_counts = quick_mode() ? std::vector<std::int64_t>{1, 3, 1000}
                                                                : std::vector<std::int64_t>{1, 3, 32, 1000, 40000};
  for (const memory_space memory : {memory_space::global, memory_space::shared, memory_space::global_private}) {
    for (const atomic_scope scope : {atomic_scope::block, atomic_scope::device, atomic_scope::system}) {
      for (const aggregation aggregate : {aggregation::none, aggregation::warp}) {
        for (const std::int64_t a : address_counts) {
          const std::int64_t blocks = quick_mode() ? 4 : 24;
          const contention_case c{GetParam(), gpu_method{memory, scope, aggregate, 128}, a, blocks * 128,
                                  quick_mode() ? 4 : 24};
          const lab::contention_row r = lab::run_contention(c, 2, 1);
          ASSERT_FALSE(r.check.starts_with("skipped")) << describe(c) << ": " << r.check;
          if (lab::scope_too_narrow(c)) {
            // Formally racy: it must run; exact or not, it is not a property of tally.
            EXPECT_FALSE(r.mismatch) << describe(c) << ": " << r.check;
            EXPECT_TRUE(r.timed ? r.times_ms.size() == 2 : r.times_ms.empty()) << describe(c);
            continue;
          }
          EXPECT_EQ(r.check, "exact") << describe(c);
          ASSERT_EQ(r.times_ms.size(), 2u) << describe(c);
          for (const double ms : r.times_ms) EXPECT_GT(ms, 0.0) << describe(c);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, LabContention,
                         ::testing::Values(atomic_op::add, atomic_op::cas, atomic_op::max, atomic_op::exch),
                         [](const ::testing::TestParamInfo<atomic_op>& info) {
                           return std::string(lab::to_string(info.param));
                         });

TEST(LabContentionLimits, SharedArraysLargerThanABlockMayHaveAreNotRun) {
  // 2^20 words: 4 MiB per block.
  const contention_case c{atomic_op::add, gpu_method{memory_space::shared, atomic_scope::device, aggregation::none, 64},
                          1 << 20, 2 * 64, 1};
  const lab::contention_row r = lab::run_contention(c, 1, 0);
  EXPECT_TRUE(r.check.starts_with("skipped: does not fit")) << r.check;
  EXPECT_FALSE(r.timed || r.mismatch);
  EXPECT_TRUE(r.times_ms.empty());
}

TEST(LabContentionLimits, BadArgumentsAreNamed) {
  contention_case c{atomic_op::add, gpu_method{}, 1, 256, 1};
  std::get<gpu_method>(c.method).block_threads = 48;
  try {
    (void)lab::run_contention(c, 1, 0);
    FAIL() << "block_threads 48 was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "block_threads");
  }
  std::get<gpu_method>(c.method).block_threads = 64;
  try {
    (void)lab::run_contention(c, 0, 0);
    FAIL() << "0 runs were accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "runs");
  }
}

TEST(LabRace, AtomicCounterIsExactFromOneHundredToAMillionThreads) {
  for (const std::int64_t threads : {100, 1000, 10000, 100000, 1000000}) {
    const lab::race_count r = lab::gpu::count_with_threads(threads, false);
    EXPECT_EQ(r.expected, static_cast<std::uint64_t>(threads));
    EXPECT_EQ(r.actual, static_cast<std::uint64_t>(threads));
  }
}

TEST(LabRace, RacyCounterLosesUpdatesAtAMillionThreads) {
  // A million load-then-store increments of one word: on any GPU with more than one resident warp
  // many read the same old value. (Smaller counts may be right by luck: not asserted.)
  const lab::race_count r = lab::gpu::count_with_threads(1000000, true);
  EXPECT_EQ(r.expected, 1000000u);
  EXPECT_GE(r.actual, 1u);
  EXPECT_LT(r.actual, r.expected) << "no update was lost";
}

std::vector<std::int32_t> uniform_samples(std::size_t n, int bins, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick(0, bins - 1);
  std::vector<std::int32_t> out(n);
  for (auto& v : out) v = pick(rng);
  return out;
}

std::vector<std::uint64_t> histogram_of(const std::vector<std::int32_t>& samples, int bins) {
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(bins), 0);
  for (const std::int32_t s : samples) ++counts[static_cast<std::size_t>(s)];
  return counts;
}

TEST(LabRace, BlockHistogramWithItsBarrierIsExact) {
  // 300 bins > 256 threads: threads flush several bins; n not a multiple of the block.
  for (const int bins : {1, 16, 300, 12288}) {
    const std::uint64_t seed = 20261123u + static_cast<std::uint64_t>(bins);
    const auto samples = uniform_samples(quick_mode() ? 10007 : 1000003, bins, seed);
    const auto reference = histogram_of(samples, bins);
    const lab::race_count r = lab::gpu::block_histogram(samples, reference, true);
    EXPECT_EQ(r.actual, samples.size()) << "bins " << bins << ", seed " << seed;
    EXPECT_EQ(r.wrong_bins, 0) << "bins " << bins << ", seed " << seed;
  }
}

TEST(LabRace, RacyBlockHistogramWithoutItsBarrierNeverCountsMore) {
  const int bins = 16;
  const auto samples = uniform_samples(1000003, bins, 7);
  const auto reference = histogram_of(samples, bins);
  const lab::race_count r = lab::gpu::block_histogram(samples, reference, false);
  EXPECT_EQ(r.expected, samples.size());
  EXPECT_LE(r.actual, r.expected);
  EXPECT_EQ(r.over_bins, 0);
}

TEST(LabRace, RacyNaiveHistogramLosesUpdatesUnderContention) {
  // Every sample in one bin: 2^22 unsynchronized read-modify-writes of one counter lose updates.
  const std::vector<std::int32_t> samples(std::size_t{1} << 22, 3);
  const auto reference = histogram_of(samples, 8);
  const lab::race_count r = lab::gpu::naive_histogram(samples, reference);
  EXPECT_EQ(r.expected, samples.size());
  EXPECT_LT(r.actual, r.expected) << "the naive histogram lost no update";
  EXPECT_GT(r.actual, 0u);
  EXPECT_EQ(r.over_bins, 0) << "a lost update can never make a bin larger";
  EXPECT_EQ(r.wrong_bins, 1);  // only bin 3 was counted into, and it lost
}

TEST(LabRace, NaiveHistogramRejectsSamplesOutsideTheBins) {
  const std::vector<std::int32_t> samples{0, 1, -1};
  const std::vector<std::uint64_t> reference{1, 1};
  try {
    (void)lab::gpu::naive_histogram(samples, reference);
    FAIL() << "sample -1 was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "samples");
  }
}

TEST(LabRace, BlockHistogramRejectsSamplesOutsideTheBins) {
  const std::vector<std::int32_t> samples{0, 1, 5};
  const std::vector<std::uint64_t> reference{1, 1};
  try {
    (void)lab::gpu::block_histogram(samples, reference, true);
    FAIL() << "sample 5 of 2 bins was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "samples");
  }
}

}  // namespace
}  // namespace tally::test
