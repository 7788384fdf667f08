// The CPU contention experiment behind `tally contention` (lab/src/contention_experiment.cpp):
// every method and operation leaves the exact expected memory, and the checks reject outcomes
// with a lost add, a wrong maximum, an exchange value that is not some thread's last write, and
// a lost or duplicated exchange (so a row that says "exact" means something).
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tally/cpu/parallel.hpp"
#include "tally/lab/contention_experiment.hpp"

namespace tally::cli {
namespace {

const contention_op all_ops[] = {contention_op::add, contention_op::cas, contention_op::max, contention_op::exch};
const contention_method all_methods[] = {contention_method::atomic, contention_method::critical,
                                         contention_method::privatized};

std::string describe(const contention_case& c) {
  return std::string(to_string(c.op)) + " " + std::string(to_string(c.method)) + " A=" + std::to_string(c.addresses) +
         " T=" + std::to_string(c.threads) + " K=" + std::to_string(c.ops_per_thread);
}

TEST(ContentionLayout, AddressesAndValuesFollowTheDocumentedFormulas) {
  const contention_case c{contention_op::exch, contention_method::atomic, 6, 4, 9};
  std::vector<int> seen(static_cast<std::size_t>(c.threads * c.ops_per_thread) + 1, 0);
  for (std::int64_t t = 0; t < c.threads; ++t) {
    for (std::int64_t i = 0; i < c.ops_per_thread; ++i) {
      EXPECT_EQ(contention_address(c, t, i), (t + i * c.threads) % c.addresses);
      const std::uint64_t v = contention_value(contention_op::exch, c.threads, t, i);
      ASSERT_GE(v, 1u);
      ASSERT_LE(v, seen.size() - 1);
      ++seen[v];  // exchange values are unique: each of 1..T K once
      EXPECT_EQ(contention_value(contention_op::max, c.threads, t, i), v);
      const std::uint64_t add = contention_value(contention_op::add, c.threads, t, i);
      EXPECT_EQ(add, 1 + ((static_cast<std::uint64_t>(t) ^ static_cast<std::uint64_t>(i)) & 7));
    }
  }
  EXPECT_EQ(std::count(seen.begin() + 1, seen.end(), 1), c.threads * c.ops_per_thread);
}

TEST(ContentionLayout, OnlyCasUnderCriticalOrPrivatizedAndPrivatizedExchangeAreNotApplicable) {
  for (const contention_op op : all_ops) {
    for (const contention_method m : all_methods) {
      const bool expected_na = (op == contention_op::cas && m != contention_method::atomic) ||
                               (op == contention_op::exch && m == contention_method::privatized);
      EXPECT_EQ(not_applicable(op, m).has_value(), expected_na) << to_string(op) << " " << to_string(m);
    }
  }
}

TEST(ContentionExperiment, EveryMethodAndOperationLeavesTheExpectedMemory) {
  // T > the team, T and A with common factors (period A / gcd < A), A > T K (untouched words).
  const std::int64_t thread_counts[] = {1, 2, 6, 7};
  const std::int64_t address_counts[] = {1, 3, 4, 16, 100, 4096};
  for (const contention_op op : all_ops) {
    for (const contention_method m : all_methods) {
      if (not_applicable(op, m)) continue;
      for (const std::int64_t threads : thread_counts) {
        for (const std::int64_t addresses : address_counts) {
          const contention_case c{op, m, addresses, threads, 517};
          const contention_expectation want = expected_outcome(c);
          for (int run = 0; run < 3; ++run) {
            const contention_outcome got = run_contention_case(c);
            const auto wrong = check_contention_outcome(c, want, got);
            ASSERT_FALSE(wrong.has_value()) << describe(c) << " run " << run << ": " << *wrong;
            EXPECT_GE(got.team, 1);
            EXPECT_LE(got.team, std::min<std::int64_t>(threads, cpu::detail::max_threads()));
            EXPECT_GE(got.ms, 0.0);
          }
        }
      }
    }
  }
}

TEST(ContentionExpectation, SumsAreTheValuesWrittenAndMaximaTheLargest) {
  const contention_case sum_case{contention_op::add, contention_method::atomic, 5, 3, 40};
  const contention_expectation sums = expected_outcome(sum_case);
  std::uint64_t total = 0;
  for (std::int64_t t = 0; t < 3; ++t) {
    for (std::int64_t i = 0; i < 40; ++i) total += contention_value(contention_op::add, 3, t, i);
  }
  EXPECT_EQ(std::accumulate(sums.memory.begin(), sums.memory.end(), std::uint64_t{0}), total);
  // max values are i T + t + 1: the largest at address a is the last update that went there.
  const contention_case max_case{contention_op::max, contention_method::atomic, 5, 3, 40};
  const contention_expectation maxima = expected_outcome(max_case);
  for (std::int64_t a = 0; a < 5; ++a) {
    std::uint64_t largest = 0;
    for (std::uint64_t v = 1; v <= 120; ++v) {
      if (static_cast<std::int64_t>(v - 1) % 5 == a) largest = v;  // address of value v is (v - 1) mod A
    }
    EXPECT_EQ(maxima.memory[static_cast<std::size_t>(a)], largest) << "address " << a;
  }
}

TEST(ContentionCheck, RejectsALostAddAndAWrongMaximum) {
  for (const contention_op op : {contention_op::add, contention_op::cas, contention_op::max}) {
    const contention_case c{op, contention_method::atomic, 8, 2, 100};
    const contention_expectation want = expected_outcome(c);
    contention_outcome got = run_contention_case(c);
    ASSERT_FALSE(check_contention_outcome(c, want, got).has_value());
    got.memory[3] -= 1;  // one unit lost (a max one below the true maximum)
    const auto wrong = check_contention_outcome(c, want, got);
    ASSERT_TRUE(wrong.has_value()) << to_string(op);
    EXPECT_NE(wrong->find("address 3"), std::string::npos) << *wrong;
  }
}

TEST(ContentionCheck, RejectsAnExchangeValueThatIsNotTheLastWriteOfAnyThread) {
  // T = 2, A = 4: thread 0 writes address 0 at i = 0, 2, 4, ..., so its values there are
  // 2i + 1 = 1, 5, 9, ...; an earlier one left in memory (with the returned values adjusted so
  // that the conservation check alone would pass) must still be caught.
  const contention_case c{contention_op::exch, contention_method::atomic, 4, 2, 100};
  const contention_expectation want = expected_outcome(c);
  contention_outcome got = run_contention_case(c);
  ASSERT_FALSE(check_contention_outcome(c, want, got).has_value());
  const std::uint64_t final_word = got.memory[0];
  const std::uint64_t earlier = 5;  // thread 0, i = 2: an exchange that was not the last
  ASSERT_NE(final_word, earlier);
  got.memory[0] = earlier;
  got.returned_sum += final_word - earlier;
  got.returned_square_sum += final_word * final_word - earlier * earlier;
  const auto wrong = check_contention_outcome(c, want, got);
  ASSERT_TRUE(wrong.has_value());
  EXPECT_NE(wrong->find("not the last value"), std::string::npos) << *wrong;
}

TEST(ContentionCheck, RejectsALostOrDuplicatedExchange) {
  // A racy exchange (a load, then a store) can return the same old value x twice while the
  // value y it overwrote is never returned: the returned sums gain x and lose y.
  const contention_case c{contention_op::exch, contention_method::critical, 1, 2, 100};
  const contention_expectation want = expected_outcome(c);
  contention_outcome got = run_contention_case(c);
  ASSERT_FALSE(check_contention_outcome(c, want, got).has_value());
  const std::uint64_t x = 17;
  const std::uint64_t y = 42;
  got.returned_sum += x - y;
  got.returned_square_sum += x * x - y * y;
  const auto wrong = check_contention_outcome(c, want, got);
  ASSERT_TRUE(wrong.has_value());
  EXPECT_NE(wrong->find("lost or duplicated"), std::string::npos) << *wrong;
}

TEST(ContentionCheck, RejectsAWordWrittenWhereNoUpdateWent) {
  // T K = 6 updates over 64 addresses: addresses 6 and up must stay 0.
  const contention_case c{contention_op::exch, contention_method::atomic, 64, 2, 3};
  const contention_expectation want = expected_outcome(c);
  contention_outcome got = run_contention_case(c);
  ASSERT_FALSE(check_contention_outcome(c, want, got).has_value());
  got.memory[40] = 3;
  ASSERT_TRUE(check_contention_outcome(c, want, got).has_value());
}

}  // namespace
}  // namespace tally::cli
