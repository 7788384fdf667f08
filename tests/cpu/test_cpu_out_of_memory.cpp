// The CPU backend when its temporary memory cannot be had: a call throws tally::error
// (errc::out_of_memory) naming the operation, and writes nothing; it never crashes. Each case
// runs in a child process whose address space is limited (RLIMIT_AS) to a little more than it
// already uses, so that the limit, and the failed allocations, end with the child.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "tally/cpu.hpp"
#include "tally/error.hpp"

namespace {

/// Bytes of address space the process uses now (/proc/self/statm's first field, in pages).
std::uint64_t address_space_in_use() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t pages = 0;
  statm >> pages;
  return pages * 4096;
}

/// Lets the process take at most `headroom` more bytes of address space.
bool limit_address_space(std::uint64_t headroom) {
  const rlimit limit{address_space_in_use() + headroom, RLIM_INFINITY};
  return setrlimit(RLIMIT_AS, &limit) == 0;
}

constexpr std::int64_t many_bins = std::int64_t{1} << 24;  // 128 MiB of uint64 counts
constexpr std::uint64_t headroom = std::uint64_t{64} << 20;
constexpr std::uint64_t poison = 0xabababababababab;

/// Runs `call` (which must need more than the headroom) under the limit, and exits the child with
/// 0 only when it threw out_of_memory naming `operation` and left `counts` as they were.
template <class Call>
[[noreturn]] void expect_out_of_memory(const char* operation, std::span<const std::uint64_t> counts, Call call) {
  if (!limit_address_space(headroom)) {
    std::fprintf(stderr, "setrlimit failed\n");
    std::exit(3);
  }
  try {
    call();
    std::fprintf(stderr, "no error\n");
    std::exit(1);
  } catch (const tally::error& e) {
    std::fprintf(stderr, "the call's error: %s\n", e.what());
    if (e.code() != tally::errc::out_of_memory || std::string(e.what()).find(operation) == std::string::npos) {
      std::exit(1);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "not a tally::error: %s\n", e.what());
    std::exit(1);
  }
  for (const std::uint64_t c : counts) {
    if (c != poison) {
      std::fprintf(stderr, "written although the call failed\n");
      std::exit(1);
    }
  }
  std::exit(0);
}

class CpuOutOfMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    // The child re-runs this program up to the test (no fork of a process holding OpenMP's threads).
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
  std::vector<std::int32_t> samples = std::vector<std::int32_t>(std::size_t{1} << 16, 7);
  tally::even_bins bins{many_bins, 0.0, static_cast<double>(many_bins)};
};

TEST_F(CpuOutOfMemory, PrivateCopiesThatDoNotFitAreAnErrorNotACrash) {
  EXPECT_EXIT(
      {
        std::vector<std::uint64_t> counts(static_cast<std::size_t>(many_bins), poison);
        // Starts OpenMP's threads while there is room for their stacks.
        std::vector<std::uint64_t> few(4);
        (void)tally::cpu::histogram_even(std::span<const std::int32_t>(samples), std::span<std::uint64_t>(few),
                                         tally::even_bins{4, 0.0, 4.0}, {tally::strategy::privatized});
        expect_out_of_memory("tally::cpu::histogram_even", counts, [&] {
          (void)tally::cpu::histogram_even(std::span<const std::int32_t>(samples), std::span<std::uint64_t>(counts),
                                           bins, {tally::strategy::privatized});
        });
      },
      ::testing::ExitedWithCode(0), "the call's error: tally::cpu::histogram_even");
}

TEST_F(CpuOutOfMemory, DeterministicWeightedSumsThatDoNotFitAreAnErrorNotACrash) {
  EXPECT_EXIT(
      {
        std::vector<double> sums(static_cast<std::size_t>(many_bins), std::bit_cast<double>(poison));
        const std::vector<float> weights(samples.size(), 1.0f);
        expect_out_of_memory(
            "tally::cpu::histogram_even",
            std::span<const std::uint64_t>(reinterpret_cast<const std::uint64_t*>(sums.data()), sums.size()), [&] {
              (void)tally::cpu::histogram_even(std::span<const std::int32_t>(samples), std::span<const float>(weights),
                                               std::span<double>(sums), bins,
                                               {tally::strategy::sequential, tally::upper_edge::exclusive, true});
            });
      },
      ::testing::ExitedWithCode(0), "the call's error: tally::cpu::histogram_even");
}

TEST_F(CpuOutOfMemory, PrivateWeightedSumsThatDoNotFitAreAnErrorNotACrash) {
  EXPECT_EXIT(
      {
        std::vector<double> sums(static_cast<std::size_t>(many_bins), std::bit_cast<double>(poison));
        const std::vector<float> weights(samples.size(), 1.0f);
        std::vector<double> few(4);
        (void)tally::cpu::histogram_even(std::span<const std::int32_t>(samples), std::span<const float>(weights),
                                         std::span<double>(few), tally::even_bins{4, 0.0, 4.0},
                                         {tally::strategy::privatized});
        expect_out_of_memory(
            "tally::cpu::histogram_even",
            std::span<const std::uint64_t>(reinterpret_cast<const std::uint64_t*>(sums.data()), sums.size()), [&] {
              (void)tally::cpu::histogram_even(std::span<const std::int32_t>(samples), std::span<const float>(weights),
                                               std::span<double>(sums), bins, {tally::strategy::privatized});
            });
      },
      ::testing::ExitedWithCode(0), "the call's error: tally::cpu::histogram_even");
}

}  // namespace
