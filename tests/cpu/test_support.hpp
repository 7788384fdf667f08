// Helpers shared by the CPU test executables: reproducible seeds, poisoned count buffers, the
// strategies under test, exact comparisons of count arrays, and checks on thrown tally::error.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tally/error.hpp"
#include "tally/strategy.hpp"

namespace tally_test {

/**
 * @brief The seed of the running test: TALLY_TEST_SEED when set (to replay a failure), else a
 * hash of the test's full name, so every test has its own fixed, reproducible stream.
 */
inline std::uint64_t test_seed() {
  if (const char* forced = std::getenv("TALLY_TEST_SEED")) return std::strtoull(forced, nullptr, 0);
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  std::uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (const char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return hash;
}

/** @brief The line SCOPED_TRACE prints with every failure, saying how to replay it. */
inline std::string seed_trace(std::uint64_t seed) {
  return "seed " + std::to_string(seed) + " (replay with TALLY_TEST_SEED=" + std::to_string(seed) + ")";
}

/** @brief A value no correct histogram leaves behind: counts are filled with it before each call. */
template <class Counter>
inline constexpr Counter poison = static_cast<Counter>(0xDEADBEEFDEADBEEFull);

/** @brief Every named CPU strategy for `op`, then `automatic`. */
inline std::vector<tally::strategy> cpu_strategies_and_automatic(tally::operation op) {
  const auto named = tally::strategies_for(tally::backend::cpu, op);
  std::vector<tally::strategy> all(named.begin(), named.end());
  all.push_back(tally::strategy::automatic);
  return all;
}

/** @brief Checks that a call ran the strategy asked for, or for automatic a CPU one, with a reason. */
inline void expect_chose(const tally::choice& chose, tally::strategy asked, tally::operation op) {
  if (asked != tally::strategy::automatic) {
    EXPECT_EQ(tally::to_string(chose.used), tally::to_string(asked));
    return;
  }
  EXPECT_NE(chose.used, tally::strategy::automatic) << "automatic must say which strategy it ran";
  EXPECT_TRUE(tally::supports(tally::backend::cpu, op, chose.used))
      << "automatic chose '" << tally::to_string(chose.used) << "', which is not a CPU strategy";
  EXPECT_FALSE(chose.reason.empty()) << "automatic must say why it chose '" << tally::to_string(chose.used) << "'";
}

/** @brief Exact equality of a counts array with the oracle's, reporting the first differences. */
template <class Counter>
::testing::AssertionResult counts_equal(std::span<const Counter> actual, const std::vector<std::uint64_t>& expected) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << "counts has " << actual.size() << " bins, expected " << expected.size();
  }
  std::size_t mismatches = 0;
  std::string first;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (static_cast<std::uint64_t>(actual[i]) != expected[i]) {
      if (mismatches < 5) {
        first += "\n  bin " + std::to_string(i) + ": got " + std::to_string(static_cast<std::uint64_t>(actual[i])) +
                 ", expected " + std::to_string(expected[i]);
      }
      ++mismatches;
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << mismatches << " of " << expected.size() << " bins differ:" << first;
}

/** @brief Whether every element of `counts` still holds the poison value. */
template <class Counter>
::testing::AssertionResult all_poisoned(std::span<const Counter> counts) {
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] != poison<Counter>) {
      return ::testing::AssertionFailure() << "counts[" << i << "] was overwritten with "
                                           << static_cast<std::uint64_t>(counts[i]);
    }
  }
  return ::testing::AssertionSuccess();
}

/**
 * @brief Runs `call`, which must throw tally::error with `code`, naming `argument`, with a message
 * that contains each of `message_parts`.
 */
template <class Call>
void expect_tally_error(Call&& call, tally::errc code, std::string_view argument,
                        std::initializer_list<std::string_view> message_parts) {
  try {
    call();
    ADD_FAILURE() << "expected tally::error naming '" << argument << "', but nothing was thrown";
  } catch (const tally::error& e) {
    EXPECT_EQ(static_cast<int>(e.code()), static_cast<int>(code)) << "message: " << e.what();
    EXPECT_EQ(e.argument(), argument) << "message: " << e.what();
    const std::string_view message = e.what();
    for (const std::string_view part : message_parts) {
      EXPECT_NE(message.find(part), std::string_view::npos) << "message '" << message << "' lacks '" << part << "'";
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected tally::error naming '" << argument << "', got another exception: " << e.what();
  }
}

/** @brief Short names of the types under test, for typed-test names. */
template <class T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, std::uint8_t>) return "uint8";
  if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  if constexpr (std::is_same_v<T, std::uint32_t>) return "uint32";
  if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  if constexpr (std::is_same_v<T, std::uint64_t>) return "uint64";
  if constexpr (std::is_same_v<T, float>) return "float";
  if constexpr (std::is_same_v<T, double>) return "double";
  return "unknown";
}

}  // namespace tally_test
