// The CPU side of the lab's contention model (tally/lab/contention.hpp): every method and operation
// of the CPU runs leaves the exact expected memory on every run, the methods that cannot make an
// update are skipped, the expectation follows the documented layout, and bad cases name their
// field. (The checks themselves, against corrupted runs, are tested in test_cpu_lab_checks.cpp.)
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tally/cpu/parallel.hpp"
#include "tally/error.hpp"
#include "tally/lab.hpp"

namespace tally::test {
namespace {

using lab::atomic_op;
using lab::contention_case;
using lab::cpu_method;

std::string describe(const contention_case& c) {
  return std::string(lab::to_string(c.op)) + " " + lab::method_name(c.method) + " A=" + std::to_string(c.addresses) +
         " T=" + std::to_string(c.threads) + " K=" + std::to_string(c.ops_per_thread);
}

/// The value of logical thread t's i-th update, by the layout's formula.
std::uint64_t value_of(atomic_op op, std::int64_t threads, std::int64_t t, std::int64_t i) {
  if (op == atomic_op::add || op == atomic_op::cas) return 1 + ((static_cast<std::uint64_t>(t ^ i)) & 7);
  return static_cast<std::uint64_t>(i * threads + t + 1);
}

TEST(LabCpuContention, OnlyCasUnderCriticalOrPrivatizedAndPrivatizedExchangeAreNotApplicable) {
  for (const atomic_op op : lab::all_atomic_ops) {
    for (const cpu_method m : lab::all_cpu_methods) {
      const bool expected_na = (op == atomic_op::cas && m != cpu_method::atomic) ||
                               (op == atomic_op::exch && m == cpu_method::privatized);
      const contention_case c{op, m, 4, 2, 8};
      EXPECT_EQ(lab::not_applicable(c).has_value(), expected_na) << describe(c);
      const lab::contention_row row = lab::run_contention(c, 1, 0);
      EXPECT_EQ(row.check.starts_with("skipped: "), expected_na) << describe(c) << ": " << row.check;
    }
  }
}

TEST(LabCpuContention, EveryMethodAndOperationLeavesTheExpectedMemoryOnEveryRun) {
  // T > the team, T and A with common factors (period A / gcd < A), A > T K (untouched words).
  const std::int64_t thread_counts[] = {1, 2, 6, 7};
  const std::int64_t address_counts[] = {1, 3, 4, 16, 100, 4096};
  for (const atomic_op op : lab::all_atomic_ops) {
    for (const cpu_method m : lab::all_cpu_methods) {
      for (const std::int64_t threads : thread_counts) {
        for (const std::int64_t addresses : address_counts) {
          const contention_case c{op, m, addresses, threads, 517};
          if (lab::not_applicable(c)) continue;
          const lab::contention_row row = lab::run_contention(c, 3, 1);
          ASSERT_EQ(row.check, "exact") << describe(c);
          EXPECT_TRUE(row.timed && !row.mismatch) << describe(c);
          EXPECT_EQ(row.times_ms.size(), 3u) << describe(c);
          EXPECT_TRUE(std::all_of(row.times_ms.begin(), row.times_ms.end(), [](double ms) { return ms >= 0.0; }));
          EXPECT_GE(row.team, 1);
          EXPECT_LE(row.team, std::min<std::int64_t>(threads, cpu::detail::max_threads()));
        }
      }
    }
  }
}

TEST(LabCpuContention, SumsAreTheValuesWrittenAndMaximaTheLargest) {
  const contention_case sum_case{atomic_op::add, cpu_method::atomic, 5, 3, 40};
  const lab::contention_expectation sums = lab::expected_contention(sum_case);
  std::uint64_t total = 0;
  for (std::int64_t t = 0; t < 3; ++t) {
    for (std::int64_t i = 0; i < 40; ++i) total += value_of(atomic_op::add, 3, t, i);
  }
  EXPECT_EQ(std::accumulate(sums.words.begin(), sums.words.end(), std::uint64_t{0}), total);
  // max values are i T + t + 1: the largest at address a is the last update that went there.
  const contention_case max_case{atomic_op::max, cpu_method::critical, 5, 3, 40};
  const lab::contention_expectation maxima = lab::expected_contention(max_case);
  for (std::int64_t a = 0; a < 5; ++a) {
    std::uint64_t largest = 0;
    for (std::uint64_t v = 1; v <= 120; ++v) {
      if (static_cast<std::int64_t>(v - 1) % 5 == a) largest = v;  // address of value v is (v - 1) mod A
    }
    EXPECT_EQ(maxima.words[static_cast<std::size_t>(a)], largest) << "address " << a;
  }
}

TEST(LabCpuContention, BadFieldsAreNamed) {
  const auto field_of = [](const contention_case& c) -> std::string {
    const auto problem = lab::problem_of(c);
    try {
      lab::validate_contention_case(c);
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument);
      EXPECT_TRUE(problem.has_value() && problem->field == e.argument());
      return e.argument();
    }
    EXPECT_FALSE(problem.has_value());
    return "";
  };
  const contention_case good{atomic_op::add, cpu_method::atomic, 16, 4, 100};
  EXPECT_EQ(field_of(good), "");
  contention_case c = good;
  c.addresses = (std::int64_t{1} << 22) + 1;  // a privatized copy per thread: at most 2^22 words
  EXPECT_EQ(field_of(c), "addresses");
  c = good;
  c.threads = 0;
  EXPECT_EQ(field_of(c), "threads");
  c.threads = (std::int64_t{1} << 20) + 1;
  EXPECT_EQ(field_of(c), "threads");
  c = good;
  c.ops_per_thread = 0;
  EXPECT_EQ(field_of(c), "ops_per_thread");
  c.threads = 1024;
  c.ops_per_thread = std::int64_t{1} << 22;  // T K = 2^32: 32-bit values would wrap
  EXPECT_EQ(field_of(c), "ops_per_thread");
  c.ops_per_thread = (std::int64_t{1} << 22) - 1;
  EXPECT_EQ(field_of(c), "");
}

}  // namespace
}  // namespace tally::test
