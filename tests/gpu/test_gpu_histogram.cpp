// Every GPU histogram strategy, bit-exact against the CPU reference: all sample types, both
// counter widths, even and range bins and bincount, adversarial patterns (one bin, sorted, bins
// on one shared-memory bank, outliers with NaN and infinities), edge sizes, misaligned inputs;
// and every bad input refused before anything is written.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "common/reference.hpp"
#include "gpu/gpu_test_support.hpp"
#include "tally/detail/tuning/histogram_tuning.cuh"

namespace tally::test {
namespace {

constexpr std::uint64_t seed = 20261122;
// Up to 1000 samples a launch is one block (its copy stored as the counts); 40000 takes several
// (the zeroing protocol) but fewer than a multiprocessor each (shared_kernel_grid).
const std::vector<std::size_t> edge_sizes = quick_mode() ? std::vector<std::size_t>{0, 1, 33, 1000, 40000}
                                                         : std::vector<std::size_t>{0, 1, 31, 33, 1000, 40000, (1u << 20) + 3};
const std::vector<std::int64_t> bin_counts{1, 7, 256, 4096, 65536};
const std::vector<pattern> patterns{pattern::uniform, pattern::single, pattern::sorted,
                                    pattern::bank32, pattern::geometric, pattern::with_outliers};

/// Every strategy but the two built for bins beyond shared memory (partitioned, radix_sort):
/// test_gpu_large_bins checks those on every distribution from 7 to 2^24 bins; here, across this
/// file's whole matrix, they kept this test from finishing in 280 s on an H100 (27 s without them).
std::vector<strategy> exact_gpu_strategies() {
  std::vector<strategy> out{strategy::automatic};
  for (strategy s : strategies_for(backend::gpu, operation::histogram)) {
    if (s != strategy::partitioned && s != strategy::radix_sort) out.push_back(s);
  }
  return out;
}

bool refused_as_unfit(const error& e) { return e.code() == errc::not_supported; }

/// Runs `s` on the GPU and compares counts and left-out with the sequential CPU strategy.
template <class T, class Counter>
void expect_even_matches(const std::vector<T>& host, const even_bins& bins, strategy s, upper_edge last_edge) {
  std::vector<Counter> expected(static_cast<std::size_t>(bins.num_bins));
  const histogram_result want = cpu::histogram_even(std::span<const T>(host), std::span<Counter>(expected), bins,
                                                    {strategy::sequential, last_edge});
  auto samples = to_device(host);
  gpu::device_buffer<Counter> counts(expected.size());
  counts.fill_bytes(poison_byte);
  try {
    const histogram_result got =
        gpu::histogram_even(samples.const_span(), counts.span(), bins, {s, last_edge});
    EXPECT_EQ(download(counts), expected);
    EXPECT_EQ(got.left_out, want.left_out);
    if (s != strategy::automatic) EXPECT_EQ(got.chose.used, s);
    EXPECT_FALSE(got.chose.reason.empty());
  } catch (const error& e) {
    // A strategy may refuse bins it cannot hold (shared memory); it must say so and write nothing.
    ASSERT_TRUE(refused_as_unfit(e)) << e.what();
    ASSERT_NE(s, strategy::automatic) << e.what();
    for (Counter c : download(counts)) ASSERT_EQ(c, static_cast<Counter>(0xababababababababull));
  }
}

template <class T>
class GpuHistogram : public ::testing::Test {};
using SampleTypes = ::testing::Types<std::uint8_t, std::int32_t, std::uint32_t, std::int64_t, float, double>;
TYPED_TEST_SUITE(GpuHistogram, SampleTypes);

TYPED_TEST(GpuHistogram, EveryExactStrategyMatchesTheCpuReferenceOnEvenBins) {
  using T = TypeParam;
  int case_index = 0;
  for (const std::int64_t num_bins : bin_counts) {
    // uint8 holds 256 values; CUB needs whole-number edges for integer samples, so the range
    // is [0, bins) for cub and a stretched, off-integer range for the others.
    const double upper = std::is_same_v<T, std::uint8_t> ? 256.0 : static_cast<double>(num_bins) * 3.0;
    for (const pattern p : patterns) {
      for (const std::size_t n : edge_sizes) {
        ++case_index;
        const std::uint64_t case_seed = seed + static_cast<std::uint64_t>(case_index);
        SCOPED_TRACE(::testing::Message() << type_name<T>() << " bins=" << num_bins << " pattern=" << to_string(p)
                                          << " n=" << n << " seed=" << case_seed);
        const auto host = make_samples<T>(p, n, 0.0, upper, case_seed);
        for (const strategy s : exact_gpu_strategies()) {
          SCOPED_TRACE(std::string(to_string(s)));
          const bool cub = s == strategy::cub;
          const even_bins bins = cub ? even_bins{num_bins, 0.0, std::is_same_v<T, std::uint8_t> ? 256.0 : static_cast<double>(num_bins)}
                                     : even_bins{num_bins, -0.25, upper - 0.75};
          if (case_index % 2 == 0) {
            expect_even_matches<T, std::uint32_t>(host, bins, s, upper_edge::exclusive);
          } else {
            expect_even_matches<T, std::uint64_t>(host, bins, s, cub ? upper_edge::exclusive : upper_edge::inclusive);
          }
        }
      }
    }
  }
}

TYPED_TEST(GpuHistogram, UnitBinsWithNumpysClosedLastBinMatchTheCpuReference) {
  // numpy's bins over integers, [lower, lower + n] in n bins of width one with the last closed:
  // the unit-step mapper that clamps the upper edge into the last bin (or the plain one where no
  // sample reaches the upper edge), on every strategy, with samples on both edges, past them, and
  // all on the upper edge (the clamped bin crowded).
  using T = TypeParam;
  if constexpr (!std::is_integral_v<T>) {
    GTEST_SKIP() << "integer samples";
  } else {
    const double lower = std::is_signed_v<T> ? -7.0 : 10.0;  // unsigned: from a value the type holds
    int case_index = 0;
    for (const std::int64_t num_bins : {std::int64_t{1}, std::int64_t{200}, std::int64_t{4096}, std::int64_t{65536}}) {
      const double upper = lower + static_cast<double>(num_bins);
      for (const bool crowded : {false, true}) {
        for (const std::size_t n : edge_sizes) {
          ++case_index;
          SCOPED_TRACE(::testing::Message() << type_name<T>() << " bins=" << num_bins << " crowded=" << crowded
                                            << " n=" << n);
          std::mt19937_64 rng(seed + static_cast<std::uint64_t>(case_index));
          const double reach = std::min(upper + 3.0, static_cast<double>(std::numeric_limits<T>::max()));
          std::uniform_int_distribution<std::int64_t> value(static_cast<std::int64_t>(lower) - 3,
                                                            static_cast<std::int64_t>(reach));
          std::vector<T> host(n);
          for (T& x : host) x = static_cast<T>(crowded ? static_cast<std::int64_t>(std::min(upper, reach)) : value(rng));
          const T ends[] = {static_cast<T>(lower), static_cast<T>(std::min(upper, reach)), static_cast<T>(upper - 1.0)};
          for (std::size_t i = 0; i < std::min<std::size_t>(n, 3); ++i) host[i] = ends[i];
          const even_bins bins{num_bins, lower, upper};
          for (const strategy s : exact_gpu_strategies()) {
            if (s == strategy::cub) continue;  // CUB counts half-open bins only
            SCOPED_TRACE(std::string(to_string(s)));
            if (case_index % 2 == 0) {
              expect_even_matches<T, std::uint32_t>(host, bins, s, upper_edge::inclusive);
            } else {
              expect_even_matches<T, std::uint64_t>(host, bins, s, upper_edge::inclusive);
            }
          }
        }
      }
    }
  }
}

TYPED_TEST(GpuHistogram, RangeBinsMatchTheCpuReference) {
  using T = TypeParam;
  std::mt19937_64 rng(seed);
  // Edges over a few hundred values, and (32- and 64-bit types) over a few hundred thousand: integer
  // samples take a table of each integer's bin over the first, the grid over the second.
  std::vector<double> scales{1.0};
  if constexpr (sizeof(T) >= 4) scales.push_back(1000.0);
  for (const double scale : scales)
  for (const std::int64_t num_bins : {1, 5, 300, 5000}) {
    std::vector<double> edges(static_cast<std::size_t>(num_bins) + 1);
    std::uniform_real_distribution<double> position(-10.0, 250.0);
    for (double& e : edges) e = std::floor(position(rng) * 4.0) / 4.0 * scale;  // quarter steps: duplicates happen
    std::sort(edges.begin(), edges.end());
    for (const pattern p : {pattern::uniform, pattern::with_outliers, pattern::single}) {
      const auto host =
          make_samples<T>(p, 100003, -20.0 * scale, 260.0 * scale, seed + static_cast<std::uint64_t>(num_bins));
      std::vector<std::uint64_t> expected(static_cast<std::size_t>(num_bins));
      for (const upper_edge last : {upper_edge::exclusive, upper_edge::inclusive}) {
        const auto want = cpu::histogram_range(std::span<const T>(host), std::span<std::uint64_t>(expected),
                                               std::span<const double>(edges), {strategy::sequential, last});
        auto samples = to_device(host);
        gpu::device_buffer<std::uint64_t> counts(expected.size());
        for (const strategy s : exact_gpu_strategies()) {
          if (s == strategy::cub && last == upper_edge::inclusive) continue;
          SCOPED_TRACE(::testing::Message() << type_name<T>() << " scale=" << scale << " bins=" << num_bins << " " << to_string(p) << " "
                                            << to_string(s) << " inclusive=" << (last == upper_edge::inclusive));
          counts.fill_bytes(poison_byte);
          const auto got = gpu::histogram_range(samples.const_span(), counts.span(), std::span<const double>(edges),
                                                {s, last});
          EXPECT_EQ(download(counts), expected);
          EXPECT_EQ(got.left_out, want.left_out);
        }
      }
    }
  }
}

// Range bins whose edges span few integers take a table of each integer's bin: at the type's ends
// (32-bit), over fractional and repeated edges, a span of exactly the table's most, and one past it
// (the grid), every integer of the window and its neighbours is counted as on the CPU, with every
// strategy and both last-edge modes.
TYPED_TEST(GpuHistogram, RangeBinsOverFewIntegersMatchTheCpuReference) {
  using T = TypeParam;
  if constexpr (!std::is_integral_v<T> || sizeof(T) < 4) {
    GTEST_SKIP() << "32- and 64-bit integer samples";
  } else {
    using limits = std::numeric_limits<T>;
    const double lowest = static_cast<double>(limits::lowest());
    const double highest = static_cast<double>(limits::max());
    std::vector<std::vector<double>> cases = {
        {0, 10, 20, 255.5, 1000}, {5, 5, 5, 7, 9}, {-10.25, -3, 4.75, 12.5}, {0, 65535}, {0, 32768, 65536},
    };
    if constexpr (sizeof(T) == 4) {
      cases.push_back({lowest, lowest + 10, lowest + 65535});
      cases.push_back({highest - 100.5, highest - 50, highest});
    }
    std::mt19937_64 rng(seed);
    for (const auto& edges : cases) {
      const double first = std::max(std::ceil(edges.front()), lowest);
      const double last = std::min(std::floor(edges.back()), highest);
      std::vector<T> host;
      for (double x = std::max(first - 50, lowest); x <= std::min(last + 50, highest); ++x) host.push_back(static_cast<T>(x));
      std::uniform_int_distribution<T> any(limits::lowest(), limits::max());
      for (int i = 0; i < 5000; ++i) host.push_back(any(rng));
      for (const T x : {limits::lowest(), limits::max(), T{0}, T{1}}) host.push_back(x);
      std::shuffle(host.begin(), host.end(), rng);
      // Then, in order, runs of integers 64 apart (the table's words 32 apart: one bank, which a
      // block swizzles its copy for) between runs of any integers of the window.
      const auto span = static_cast<std::uint64_t>(last - first + 1);
      for (int run = 0; run < 4; ++run) {
        for (std::uint64_t k = 0; k < 65536; ++k) {
          const std::uint64_t offset = run % 2 == 0 ? (64 * k) % span : rng() % span;
          host.push_back(static_cast<T>(first + static_cast<double>(offset)));
        }
      }
      const auto samples = to_device(host);
      std::vector<std::uint64_t> expected(edges.size() - 1);
      gpu::device_buffer<std::uint64_t> counts(expected.size());
      for (const upper_edge mode : {upper_edge::exclusive, upper_edge::inclusive}) {
        const auto want = cpu::histogram_range(std::span<const T>(host), std::span<std::uint64_t>(expected),
                                               std::span<const double>(edges), {strategy::sequential, mode});
        for (const strategy s : exact_gpu_strategies()) {
          if (s == strategy::cub && mode == upper_edge::inclusive) continue;
          SCOPED_TRACE(::testing::Message() << type_name<T>() << " [" << edges.front() << ", " << edges.back() << "] "
                                            << to_string(s) << " inclusive=" << (mode == upper_edge::inclusive));
          counts.fill_bytes(poison_byte);
          const auto got =
              gpu::histogram_range(samples.const_span(), counts.span(), std::span<const double>(edges), {s, mode});
          EXPECT_EQ(download(counts), expected);
          EXPECT_EQ(got.left_out, want.left_out);
          if (s == strategy::automatic && got.chose.used == strategy::shared_atomic) {
            // The table, for spans it holds (and the grid past them), says so.
            EXPECT_EQ(got.chose.reason.find("span few integers") != std::string::npos, last - first + 1 <= 65536)
                << got.chose.reason;
          }
        }
      }
    }
  }
}

TYPED_TEST(GpuHistogram, MisalignedSamplesAreCountedExactly) {
  using T = TypeParam;
  const auto host = make_samples<T>(pattern::uniform, 4099, 0.0, 200.0, seed);
  auto samples = to_device(host);
  const even_bins bins{50, 0.0, 200.0};
  for (std::size_t offset = 1; offset < 4; ++offset) {
    const std::span<const T> shifted = samples.const_span().subspan(offset, host.size() - offset - 1);
    const std::span<const T> host_shifted = std::span<const T>(host).subspan(offset, host.size() - offset - 1);
    std::vector<std::uint32_t> expected(50);
    cpu::histogram_even(host_shifted, std::span<std::uint32_t>(expected), bins, {strategy::sequential});
    gpu::device_buffer<std::uint32_t> counts(50);
    for (const strategy s : exact_gpu_strategies()) {
      SCOPED_TRACE(::testing::Message() << "offset=" << offset << " " << to_string(s));
      counts.fill_bytes(poison_byte);
      gpu::histogram_even(shifted, counts.span(), bins, {s});
      EXPECT_EQ(download(counts), expected);
    }
  }
}

/// Float samples on every edge and one float either side of it, and every special value, through
/// every exact strategy: the GPU bins floats with its own arithmetic (exact_float_bin_mapper's
/// rounded-down multiply-add), which must agree with the CPU's edge comparisons sample by sample.
TEST(GpuHistogramFloatEdges, SamplesOnAndBesideEveryEdgeAreBinnedAsOnTheCpu) {
  struct even_case {
    std::int64_t num_bins;
    double lower, upper;
  };
  const even_case cases[] = {
      {65536, 0.0, 65536.0},           // the benchmark's float bins (exact-float shortcut)
      {1024, -128.0, 128.0},           // step 1/4 across zero
      {64, 0.5, 16.5},                 // step 1/4, lower off zero
      {16, -8388608.0, -8388592.0},    // the shortcut at its limit (2^23 - lower / step = 2^24)
      {16, -8388609.0, -8388593.0},    // past it, and past the estimate's reach: a table of the 34 floats
      {300, -1.0, 2.0},                // estimated: step 0.01
      {4096, 0.0, 1000.0},             // estimated: what users type
      {4096, -418.0, 8848.86},         // estimated: a range from the data
      {65536, 0.1, 6553.7},            // estimated, many bins
      {100, 1000.0, 1000.1},           // estimated at its reach: 16 floats a bin
      {10, 0.0, 1.0},                  // estimated, step 0.1: the vector form's two estimates
      {3000, 0.0, 1000.0},             // estimated, step 1/3
      {16384, 0.0, 16383.875},         // estimated: the vector form settles, its margin growing with x
      {16384, -6000.3, 6000.3},        // estimated: past the vector form's widest margin, every edge computed
      {4096, 1000.3, 1010.7},          // estimated, 400000 bins from zero: past the vector form's widest margin
      {100, 1000.0, 1000.01},          // past its reach: a table of each float's bin
      {4096, 2047.5, 2048.5},          // numpy's range for data of one value: a table, about one float a bin
      {4096, 293.1, 293.9},            // a narrow range far from zero: a table of 26217 floats
      {65536, 2047.5, 2048.5},         // numpy's range for one value at 65536 bins: several bins a float
      {65536, 1000.0, 1003.9},         // a table of 63901 floats, too large for shared memory
      {1024, 2045.1, 2047.0},          // past the estimate's reach, more floats than grid entries: the grid
  };
  std::mt19937_64 rng(seed);
  for (const even_case& c : cases) {
    const even_bins bins{c.num_bins, c.lower, c.upper};
    std::vector<float> host;
    const double step = (c.upper - c.lower) / static_cast<double>(c.num_bins);
    for (std::int64_t i = 0; i <= c.num_bins; ++i) {
      const auto edge = static_cast<float>(i == c.num_bins ? c.upper : c.lower + static_cast<double>(i) * step);
      host.insert(host.end(), {edge, std::nextafter(edge, -INFINITY), std::nextafter(edge, INFINITY)});
    }
    constexpr float inf = std::numeric_limits<float>::infinity();
    host.insert(host.end(), {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(), inf,
                             -inf, 0.0f, -0.0f, std::numeric_limits<float>::denorm_min(),
                             -std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                             -std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                             std::numeric_limits<float>::lowest(), static_cast<float>(c.lower - 1e6),
                             static_cast<float>(c.upper + 1e6)});
    // Enough of them, shuffled, that every lane of the vectorized walk sees some.
    const std::size_t distinct = host.size();
    while (host.size() < 300000) host.push_back(host[rng() % distinct]);
    std::shuffle(host.begin(), host.end(), rng);
    // Then, in order, runs of floats of the range 32 apart (a float table's words 32 apart: one
    // bank, which a block swizzles its copy for) between runs of any floats of the range: blocks of
    // either layout in one launch.
    const auto key_of = [](float x) {
      std::uint32_t bits;
      std::memcpy(&bits, &x, sizeof(bits));
      return bits ^ ((bits & 0x80000000u) != 0 ? 0xffffffffu : 0x80000000u);
    };
    const auto float_of = [](std::uint32_t key) {
      const std::uint32_t bits = key ^ ((key & 0x80000000u) != 0 ? 0x80000000u : 0xffffffffu);
      float x;
      std::memcpy(&x, &bits, sizeof(x));
      return x;
    };
    const std::uint32_t first_key = key_of(static_cast<float>(c.lower));
    const std::uint32_t keys = key_of(static_cast<float>(c.upper)) - first_key + 1;
    for (int run = 0; run < 4; ++run) {
      for (std::uint32_t k = 0; k < 65536; ++k) {
        const std::uint32_t offset = run % 2 == 0 ? (32 * k) % keys : static_cast<std::uint32_t>(rng() % keys);
        host.push_back(float_of(first_key + offset));
      }
    }
    for (const upper_edge mode : {upper_edge::exclusive, upper_edge::inclusive}) {
      for (const strategy s : exact_gpu_strategies()) {
        if (s == strategy::cub) continue;  // CUB bins floats with its own arithmetic; tally's rule is numpy's
        SCOPED_TRACE(::testing::Message() << "bins=" << c.num_bins << " [" << c.lower << ", " << c.upper << ") "
                                          << (mode == upper_edge::inclusive ? "inclusive " : "exclusive ")
                                          << to_string(s));
        expect_even_matches<float, std::uint32_t>(host, bins, s, mode);
      }
    }
  }
}

/// Even bins whose edges are computed in float32 (numpy's edges for float32 data over its own
/// range), float samples on and beside every such edge and the special values, through every
/// exact strategy: the estimate over float32 edges, the float table and the grid where it cannot
/// reach, each against the CPU backend and the brute-force oracle; CUB refuses them.
TEST(GpuHistogramFloatEdges, EdgesComputedInFloat32AreBinnedAsOnTheCpuAndTheOracle) {
  std::mt19937_64 rng(seed);
  std::vector<float> data(1000);
  std::normal_distribution<double> normal(1234.5, 37.0);
  for (float& x : data) x = static_cast<float>(normal(rng));
  const auto [low, high] = std::minmax_element(data.begin(), data.end());
  struct even_case {
    std::int64_t num_bins;
    float lower, upper;
  };
  const even_case cases[] = {
      {7, 0.1f, 0.7f},               // three edges below the float64 rule's
      {4096, *low, *high},           // normal data's range: 190 edges differ
      {256, *low, *high},
      {65536, *low, *high},          // packed16 and the estimate
      {1000, -1.0f, 1.0f},           // across zero
      {4096, 2047.5f, 2048.5f},      // numpy's range for data of one value: a table of each float's bin
      {1024, 2045.1f, 2047.0f},      // past the estimate's reach, more floats than grid entries: the grid
      {4096, 0.0f, 1000.0f},         // float32 computes these exactly: the float64 rule's shortcut
  };
  for (const even_case& c : cases) {
    const even_bins bins{c.num_bins, c.lower, c.upper, edge_arithmetic::float32};
    const std::vector<float> edges =
        tally_test::reference_even<float>(bins, upper_edge::exclusive).edges();
    std::vector<float> host;
    for (const float edge : edges) {
      host.insert(host.end(), {edge, std::nextafter(edge, -INFINITY), std::nextafter(edge, INFINITY)});
    }
    constexpr float inf = std::numeric_limits<float>::infinity();
    host.insert(host.end(), {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 0.0f, -0.0f,
                             std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest()});
    const std::size_t distinct = host.size();
    while (host.size() < 300000) host.push_back(host[rng() % distinct]);
    std::shuffle(host.begin(), host.end(), rng);
    for (const upper_edge mode : {upper_edge::exclusive, upper_edge::inclusive}) {
      const tally_test::reference_histogram oracle =
          tally_test::reference_count(std::span<const float>(host), tally_test::reference_even<float>(bins, mode));
      for (const strategy s : exact_gpu_strategies()) {
        SCOPED_TRACE(::testing::Message() << "bins=" << c.num_bins << " [" << c.lower << ", " << c.upper
                                          << ") in float32, " << (mode == upper_edge::inclusive ? "inclusive " : "exclusive ")
                                          << to_string(s));
        if (s == strategy::cub) {
          if (!tally::detail::edges_follow_float64_rule(bins)) {
            auto samples = to_device(host);
            gpu::device_buffer<std::uint32_t> counts(static_cast<std::size_t>(c.num_bins));
            EXPECT_THROW(gpu::histogram_even(samples.const_span(), counts.span(), bins, {s, upper_edge::exclusive}),
                         error);
          }
          continue;
        }
        expect_even_matches<float, std::uint64_t>(host, bins, s, mode);
        if (s == strategy::automatic) {
          auto samples = to_device(host);
          gpu::device_buffer<std::uint64_t> counts(static_cast<std::size_t>(c.num_bins));
          const histogram_result got = gpu::histogram_even(samples.const_span(), counts.span(), bins, {s, mode});
          const std::vector<std::uint64_t> gpu_counts = download(counts);
          EXPECT_TRUE(std::equal(gpu_counts.begin(), gpu_counts.end(), oracle.counts.begin(), oracle.counts.end()))
              << "the GPU's counts differ from the oracle's";
          EXPECT_EQ(got.left_out, oracle.left_out);
        }
      }
    }
  }
}

/// 32-bit integers over whole bounds with a step that is not whole (the data's own [min, max]), or
/// over bounds in halves or quarters (numpy's [v - 0.5, v + 0.5] for data of one value, centred
/// bins), take the exact quotient (rational_step_bin_mapper) in every strategy: samples on and
/// beside every edge, the type's ends and values either side of the range, at 7 to 65536 bins (the
/// shared kernels and packed16; partitioned and radix_sort too), against the oracle itself, not
/// only the CPU that shares the mapper.
template <class T>
void expect_whole_bounds_match_the_oracle() {
  std::mt19937_64 rng(seed + 31);
  using limits = std::numeric_limits<T>;
  struct even_case {
    std::int64_t num_bins;
    double lower, upper;
  };
  const double low_end = static_cast<double>(limits::lowest());
  const double high_end = static_cast<double>(limits::max());
  const even_case cases[] = {
      {7, 3.0, 1000.0},
      {4096, 0.0, 10000.0},                        // [0, 10000) in 4096 bins: the case
      {1000, 5.0, 137.0},                          // more bins than values: edges between them
      {65536, 0.0, 65535.0},                       // the data's range of 16-bit values, in packed16
      {50000, low_end + 1.0, low_end + 1234567.0},  // from near the type's least value
      {4093, high_end - 2000000.0, high_end},      // up to its greatest: the upper edge reachable
      {256, 41.5, 42.5},                           // data of one value: numpy's [v - 0.5, v + 0.5]
      {65536, 1000.5, 1001.5},                     // ... in packed16's bins
      {4096, high_end - 0.5, high_end + 0.5},      // ... the type's greatest value
      {1001, -0.5, 1000.5},                        // centred bins: a whole step over half bounds
      {3000, low_end + 0.25, low_end + 1000000.75},  // quarters, from the type's least value
  };
  for (const even_case& c : cases) {
    const even_bins bins{c.num_bins, c.lower, c.upper};
    ASSERT_EQ(even_bin_mapper<T>(bins, upper_edge::inclusive).shortcut(), even_shortcut::rational_step)
        << "bins=" << c.num_bins << " [" << c.lower << ", " << c.upper << ")";
    const auto edges = tally_test::reference_even<T>(bins, upper_edge::exclusive).edges();
    std::vector<T> host;
    const auto add = [&](double v) {
      if (v >= low_end && v <= high_end) host.push_back(static_cast<T>(v));
    };
    for (const double edge : edges) {
      for (const double v : {std::floor(edge) - 1.0, std::floor(edge), std::ceil(edge), std::ceil(edge) + 1.0}) add(v);
    }
    for (const double v : {low_end, high_end, c.lower - 1.0, c.upper + 1.0, c.upper}) add(v);
    const std::size_t distinct = host.size();
    while (host.size() < 400000) host.push_back(host[rng() % distinct]);
    std::shuffle(host.begin(), host.end(), rng);
    for (const upper_edge mode : {upper_edge::exclusive, upper_edge::inclusive}) {
      const tally_test::reference_histogram oracle =
          tally_test::reference_count(std::span<const T>(host), tally_test::reference_even<T>(bins, mode));
      auto samples = to_device(host);
      std::vector<strategy> every{strategy::automatic};
      for (const strategy s : strategies_for(backend::gpu, operation::histogram)) every.push_back(s);
      for (const strategy s : every) {
        if (s == strategy::cub) continue;  // CUB takes whole steps over integers only
        SCOPED_TRACE(::testing::Message() << type_name<T>() << " bins=" << c.num_bins << " [" << c.lower << ", "
                                          << c.upper << ") " << (mode == upper_edge::inclusive ? "inclusive " : "exclusive ")
                                          << to_string(s));
        gpu::device_buffer<std::uint64_t> counts(static_cast<std::size_t>(c.num_bins));
        counts.fill_bytes(poison_byte);
        try {
          const histogram_result got = gpu::histogram_even(samples.const_span(), counts.span(), bins, {s, mode});
          const std::vector<std::uint64_t> gpu_counts = download(counts);
          EXPECT_TRUE(std::equal(gpu_counts.begin(), gpu_counts.end(), oracle.counts.begin(), oracle.counts.end()))
              << "the GPU's counts differ from the oracle's";
          EXPECT_EQ(got.left_out, oracle.left_out);
        } catch (const error& e) {
          ASSERT_TRUE(refused_as_unfit(e)) << e.what();
          ASSERT_NE(s, strategy::automatic) << e.what();
        }
      }
    }
  }
}

TEST(GpuHistogramWholeBounds, Int32SamplesAreBinnedAsTheOracleBinsThem) { expect_whole_bounds_match_the_oracle<std::int32_t>(); }
TEST(GpuHistogramWholeBounds, Uint32SamplesAreBinnedAsTheOracleBinsThem) { expect_whole_bounds_match_the_oracle<std::uint32_t>(); }

/// Range bins with float samples on and beside every edge (rounded to float both ways), through
/// every exact strategy: log-spaced edges (the grid over float bits), random ones (the value
/// grid), with tables in shared memory (4096 bins) and in global memory (65536).
TEST(GpuHistogramFloatEdges, RangeBinSamplesOnAndBesideEveryEdgeAreBinnedAsOnTheCpu) {
  std::mt19937_64 rng(seed);
  for (const std::int64_t num_bins : {64, 4096, 65536}) {
    std::vector<double> log_edges, random_edges{0.0};
    for (std::int64_t k = 0; k <= num_bins; ++k) {
      log_edges.push_back(std::pow(static_cast<double>(num_bins + 1), static_cast<double>(k) / num_bins) - 1.0);
    }
    std::uniform_real_distribution<double> position(0.0, static_cast<double>(num_bins));
    for (std::int64_t k = 1; k < num_bins; ++k) random_edges.push_back(position(rng));
    random_edges.push_back(static_cast<double>(num_bins));
    std::sort(random_edges.begin(), random_edges.end());
    for (const auto* edges : {&log_edges, &random_edges}) {
      std::vector<float> host;
      for (const double e : *edges) {
        const auto f = static_cast<float>(e);
        host.insert(host.end(), {f, std::nextafter(f, -INFINITY), std::nextafter(f, INFINITY)});
      }
      host.insert(host.end(), {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                               INFINITY, -INFINITY, -0.0f, -1.0f});
      const std::size_t distinct = host.size();
      while (host.size() < 600000) host.push_back(host[rng() % distinct]);
      std::shuffle(host.begin(), host.end(), rng);
      std::vector<std::uint32_t> expected(static_cast<std::size_t>(num_bins));
      auto samples = to_device(host);
      gpu::device_buffer<std::uint32_t> counts(expected.size());
      for (const upper_edge last : {upper_edge::exclusive, upper_edge::inclusive}) {
        const auto want = cpu::histogram_range(std::span<const float>(host), std::span<std::uint32_t>(expected),
                                               std::span<const double>(*edges), {strategy::sequential, last});
        for (const strategy s : exact_gpu_strategies()) {
          if (s == strategy::cub && last == upper_edge::inclusive) continue;
          SCOPED_TRACE(::testing::Message() << "bins=" << num_bins << (edges == &log_edges ? " log" : " random") << " "
                                            << to_string(s) << " inclusive=" << (last == upper_edge::inclusive));
          counts.fill_bytes(poison_byte);
          try {
            const auto got = gpu::histogram_range(samples.const_span(), counts.span(), std::span<const double>(*edges),
                                                  {s, last});
            EXPECT_EQ(download(counts), expected);
            EXPECT_EQ(got.left_out, want.left_out);
          } catch (const error& e) {
            ASSERT_TRUE(refused_as_unfit(e)) << e.what();
            ASSERT_NE(s, strategy::automatic) << e.what();
          }
        }
      }
    }
  }
}

/// Range bins through the grid's entries of counts, whose blocks copy the cell words swizzled
/// where their first samples crowd the words' banks: runs of a block's chunk alternate between
/// values of few mantissa bits (eighths of small integers with a geometric spread, and multiples
/// of 32: a warp's cells a power of two apart, in one bank, on the float-bits grid and on the
/// value grid) and values spread over and beyond the edges, so that neighbouring blocks of one
/// call choose differently. Float and double samples, log-spaced and random edges, both last-edge
/// modes, the shared strategies; every count and the left-out count must match the CPU.
TEST(GpuHistogramFloatEdges, RangeBinsCountExactlyWhetherOrNotEachBlockSwizzlesTheGridsWords) {
  using tuning = tally::detail::tuning::histogram_tuning<float>::privatized;
  const std::size_t block_chunk = std::size_t{tuning::block_threads} * tuning::loads_per_thread * 4;
  const std::size_t n = (std::size_t{1} << (quick_mode() ? 20 : 22)) + 5;
  std::mt19937_64 rng(seed + 71);
  for (const std::int64_t num_bins : {64, 1024, 4096}) {
    const auto b = static_cast<double>(num_bins);
    std::vector<double> log_edges, random_edges{0.0};
    for (std::int64_t k = 0; k <= num_bins; ++k) log_edges.push_back(std::expm1(static_cast<double>(k) / b * std::log1p(b)));
    std::uniform_real_distribution<double> position(0.0, b);
    for (std::int64_t k = 1; k < num_bins; ++k) random_edges.push_back(position(rng));
    random_edges.push_back(b);
    std::sort(random_edges.begin(), random_edges.end());
    std::vector<double> host(n);
    std::uniform_real_distribution<double> spread(-10.0, b + 10.0);
    for (std::size_t i = 0; i < n; ++i) {
      const int eighth = static_cast<int>(rng() % 8);
      double crowded = 0.0;
      if (i / block_chunk % 4 == 0) {
        crowded = std::min<double>(std::countr_zero(rng() | (std::uint64_t{1} << 40)), b - 1.0) + eighth / 8.0;
      } else {
        crowded = static_cast<double>(rng() % static_cast<std::uint64_t>(std::max<std::int64_t>(num_bins / 32, 1)) * 32) +
                  eighth / 8.0;
      }
      host[i] = (i / block_chunk) % 2 == 0 ? crowded : spread(rng);
    }
    host[n / 3] = b;  // on the closed last edge
    for (const auto* edges : {&log_edges, &random_edges}) {
      for (const upper_edge last : {upper_edge::exclusive, upper_edge::inclusive}) {
        for (const strategy s : {strategy::automatic, strategy::shared_atomic, strategy::warp_aggregated,
                                 strategy::replicated}) {
          SCOPED_TRACE(::testing::Message() << "bins=" << num_bins << (edges == &log_edges ? " log " : " random ")
                                            << to_string(s) << " inclusive=" << (last == upper_edge::inclusive));
          const auto check = [&](const auto& typed) {
            using T = typename std::decay_t<decltype(typed)>::value_type;
            std::vector<std::uint64_t> expected(static_cast<std::size_t>(num_bins));
            const auto want = cpu::histogram_range(std::span<const T>(typed), std::span<std::uint64_t>(expected),
                                                   std::span<const double>(*edges), {strategy::sequential, last});
            auto samples = to_device(typed);
            gpu::device_buffer<std::uint64_t> counts(expected.size());
            counts.fill_bytes(poison_byte);
            const auto got = gpu::histogram_range(samples.const_span(), counts.span(), std::span<const double>(*edges),
                                                  {s, last});
            EXPECT_EQ(download(counts), expected) << type_name<T>();
            EXPECT_EQ(got.left_out, want.left_out) << type_name<T>();
          };
          check(std::vector<float>(host.begin(), host.end()));
          check(host);
        }
      }
    }
  }
}

template <class T>
class GpuBincount : public ::testing::Test {};
using IntegerTypes = ::testing::Types<std::uint8_t, std::int32_t, std::uint32_t, std::int64_t>;
TYPED_TEST_SUITE(GpuBincount, IntegerTypes);

TYPED_TEST(GpuBincount, EveryExactStrategyMatchesTheCpuReference) {
  using T = TypeParam;
  for (const std::int64_t num_bins : {1, 100, 256, 70000}) {
    for (const pattern p : patterns) {
      const double top = std::is_same_v<T, std::uint8_t> ? 255.0 : static_cast<double>(num_bins) * 1.2;
      auto host = make_samples<T>(p, 200001, 0.0, top, seed + static_cast<std::uint64_t>(num_bins));
      if constexpr (std::is_signed_v<T>) {
        for (T& x : host) x = x < 0 ? static_cast<T>(-x) : x;  // bincount takes non-negative values only
      }
      std::vector<std::uint64_t> expected(static_cast<std::size_t>(num_bins));
      const auto want = cpu::bincount(std::span<const T>(host), std::span<std::uint64_t>(expected), {strategy::sequential});
      auto samples = to_device(host);
      gpu::device_buffer<std::uint64_t> counts(expected.size());
      for (const strategy s : exact_gpu_strategies()) {
        SCOPED_TRACE(::testing::Message() << type_name<T>() << " bins=" << num_bins << " " << to_string(p) << " "
                                          << to_string(s));
        counts.fill_bytes(poison_byte);
        try {
          const auto got = gpu::bincount(samples.const_span(), counts.span(), {s});
          EXPECT_EQ(download(counts), expected);
          EXPECT_EQ(got.left_out, want.left_out);
        } catch (const error& e) {
          ASSERT_TRUE(refused_as_unfit(e)) << e.what();
        }
      }
    }
  }
}

TEST(GpuHistogramErrors, BadInputIsRejectedBeforeAnythingIsWritten) {
  const std::vector<std::int32_t> host{1, 2, 3, -5, 4};
  auto samples = to_device(host);
  gpu::device_buffer<std::uint64_t> counts(8);
  counts.fill_bytes(poison_byte);
  const auto untouched = download(counts);
  const auto expect_error = [&](auto call, const char* argument) {
    try {
      call();
      ADD_FAILURE() << "no error for " << argument;
    } catch (const error& e) {
      EXPECT_EQ(e.argument(), argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(argument), std::string::npos) << e.what();
    }
    EXPECT_EQ(download(counts), untouched) << argument;
  };
  const std::span<const std::int32_t> in = samples.const_span();
  expect_error([&] { gpu::histogram_even(in, counts.span(), even_bins{0, 0.0, 8.0}); }, "num_bins");
  expect_error([&] { gpu::histogram_even(in, counts.span(), even_bins{8, 8.0, 8.0}); }, "lower");
  expect_error([&] { gpu::histogram_even(in, counts.span(), even_bins{8, 0.0, std::nan("")}); }, "upper");
  expect_error([&] { gpu::histogram_even(in, counts.span().first(7), even_bins{8, 0.0, 8.0}); }, "counts");
  expect_error([&] { gpu::histogram_even(std::span<const std::int32_t>(static_cast<const std::int32_t*>(nullptr), 5), counts.span(), even_bins{8, 0.0, 8.0}); },
               "samples");
  const std::vector<double> unsorted{0.0, 2.0, 1.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0};
  expect_error([&] { gpu::histogram_range(in, counts.span(), std::span<const double>(unsorted)); }, "edges");
  expect_error([&] { gpu::bincount(in, counts.span()); }, "samples");
  expect_error([&] { gpu::histogram_even(in, counts.span(), even_bins{8, 0.0, 8.0}, {strategy::critical}); },
               "strategy");
  expect_error(
      [&] { gpu::histogram_even(in, counts.span(), even_bins{8, 0.0, 8.0}, {strategy::cub, upper_edge::inclusive}); },
      "strategy");
  // 32-bit counters are refused when the input alone could overflow a bin. The size check runs
  // before the samples are touched, so this span is never read.
  gpu::device_buffer<std::uint32_t> narrow(8);
  const std::span<const std::int32_t> huge(samples.data(), (std::size_t{1} << 32) + 1);
  try {
    gpu::histogram_even(huge, narrow.span(), even_bins{8, 0.0, 8.0});
    ADD_FAILURE() << "no error for 2^32 + 1 samples into 32-bit counters";
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "counts");
  }
}

TEST(GpuHistogramErrors, NegativeBincountSampleIsNamed) {
  std::vector<std::int64_t> host(100000, 3);
  host[76543] = -9;
  auto samples = to_device(host);
  gpu::device_buffer<std::uint64_t> counts(4);
  try {
    gpu::bincount(samples.const_span(), counts.span());
    FAIL() << "negative sample accepted";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("76543"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("-9"), std::string::npos) << e.what();
  }
}

TEST(GpuHistogramStrategies, SharedStrategiesRefuseBinsThatDoNotFitAndAutomaticFallsBack) {
  const std::int64_t num_bins = 1 << 20;  // 4 MiB of counters: no block's shared memory holds that
  const auto host = make_samples<std::int32_t>(pattern::uniform, 1 << 20, 0.0, static_cast<double>(num_bins), seed);
  auto samples = to_device(host);
  gpu::device_buffer<std::uint32_t> counts(static_cast<std::size_t>(num_bins));
  const even_bins bins{num_bins, 0.0, static_cast<double>(num_bins)};
  for (const strategy s : {strategy::shared_atomic, strategy::two_phase}) {
    try {
      gpu::histogram_even(samples.const_span(), counts.span(), bins, {s});
      ADD_FAILURE() << to_string(s) << " accepted 2^20 bins";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::not_supported) << e.what();
    }
  }
  std::vector<std::uint32_t> expected(static_cast<std::size_t>(num_bins));
  cpu::histogram_even(std::span<const std::int32_t>(host), std::span<std::uint32_t>(expected), bins,
                      {strategy::sequential});
  const auto got = gpu::histogram_even(samples.const_span(), counts.span(), bins);
  EXPECT_NE(got.chose.used, strategy::shared_atomic);
  EXPECT_EQ(download(counts), expected);
}

TEST(GpuHistogramStrategies, ByteSamplesInBinsOfWidthOneAreCountedWithoutRangeChecks) {
  // Bins of width one that hold all 256 byte values take the check-free byte mapper; a length that
  // is not a multiple of 16 exercises its tail too.
  for (const even_bins bins : {even_bins{256, 0.0, 256.0}, even_bins{300, -20.0, 280.0}, even_bins{1000, -500.0, 500.0}}) {
    for (const pattern p : {pattern::uniform, pattern::single, pattern::sorted, pattern::geometric}) {
      const auto host = make_samples<std::uint8_t>(p, (1u << 20) + 7, 0.0, 255.0, seed + 11);
      for (const strategy s : exact_gpu_strategies()) {
        if (s == strategy::cub && bins.lower != 0.0) continue;  // CUB gets the byte range only
        SCOPED_TRACE(::testing::Message() << "bins=" << bins.num_bins << " lower=" << bins.lower << " "
                                          << to_string(p) << " " << to_string(s));
        expect_even_matches<std::uint8_t, std::uint32_t>(host, bins, s, upper_edge::exclusive);
      }
    }
  }
}

TEST(GpuHistogramStrategies, AutomaticFoldsTheCountsOfByteValuesIntoAnyBins) {
  // Bytes in bins other than those of width one: automatic counts the 256 byte values, then maps
  // each value once and adds its count to its bin. Bins wider and narrower than a byte, ranges that
  // leave bytes out on either side or hold one value, both upper edges, range bins and bincount.
  const std::vector<even_bins> layouts{{4096, 0.0, 255.0}, {7, 3.5, 250.25}, {100, 0.0, 1000.0},
                                       {256, -0.5, 255.5}, {1, 77.0, 77.5},   {65536, 0.0, 255.0}};
  int case_index = 0;
  for (const even_bins& bins : layouts) {
    for (const pattern p : {pattern::uniform, pattern::single, pattern::sorted, pattern::geometric}) {
      for (const std::size_t n : {std::size_t{0}, std::size_t{33}, (std::size_t{1} << 20) + 7}) {
        ++case_index;
        const auto host = make_samples<std::uint8_t>(p, n, 0.0, 255.0, seed + static_cast<std::uint64_t>(case_index));
        const upper_edge last = case_index % 2 == 0 ? upper_edge::exclusive : upper_edge::inclusive;
        SCOPED_TRACE(::testing::Message() << "bins=" << bins.num_bins << " [" << bins.lower << ", " << bins.upper << "] "
                                          << to_string(p) << " n=" << n);
        std::vector<std::uint64_t> expected(static_cast<std::size_t>(bins.num_bins));
        const auto want = cpu::histogram_even(std::span<const std::uint8_t>(host), std::span<std::uint64_t>(expected),
                                              bins, {strategy::sequential, last});
        auto samples = to_device(host);
        gpu::device_buffer<std::uint64_t> counts(expected.size());
        counts.fill_bytes(poison_byte);
        const auto got = gpu::histogram_even(samples.const_span(), counts.span(), bins, {strategy::automatic, last});
        EXPECT_EQ(download(counts), expected);
        EXPECT_EQ(got.left_out, want.left_out);
        EXPECT_EQ(got.chose.used, strategy::replicated);
        EXPECT_NE(got.chose.reason.find("each byte value mapped to its bin once"), std::string_view::npos);
      }
    }
  }
  const auto host = make_samples<std::uint8_t>(pattern::uniform, (1u << 20) + 5, 0.0, 255.0, seed + 99);
  auto samples = to_device(host);
  const std::vector<double> edges{-1.0, 0.5, 2.0, 100.25, 100.5, 200.0, 254.0};
  std::vector<std::uint32_t> expected(edges.size() - 1);
  const auto want = cpu::histogram_range(std::span<const std::uint8_t>(host), std::span<std::uint32_t>(expected),
                                         std::span<const double>(edges), {strategy::sequential, upper_edge::inclusive});
  gpu::device_buffer<std::uint32_t> counts(expected.size());
  counts.fill_bytes(poison_byte);
  const auto got = gpu::histogram_range(samples.const_span(), counts.span(), std::span<const double>(edges),
                                        {strategy::automatic, upper_edge::inclusive});
  EXPECT_EQ(download(counts), expected);
  EXPECT_EQ(got.left_out, want.left_out);
  EXPECT_EQ(got.chose.used, strategy::replicated);
  std::vector<std::uint32_t> expected_bincount(10);
  const auto want_bincount =
      cpu::bincount(std::span<const std::uint8_t>(host), std::span<std::uint32_t>(expected_bincount), {strategy::sequential});
  gpu::device_buffer<std::uint32_t> bincounts(expected_bincount.size());
  bincounts.fill_bytes(poison_byte);
  const auto got_bincount = gpu::bincount(samples.const_span(), bincounts.span(), {strategy::automatic});
  EXPECT_EQ(download(bincounts), expected_bincount);
  EXPECT_EQ(got_bincount.left_out, want_bincount.left_out);
  EXPECT_GT(got_bincount.left_out, 0u);
}

TEST(GpuHistogramStrategies, BytesCountExactlyWhateverLayoutEachBlockSamplesItsWayTo) {
  // automatic lets each block of the byte kernel sample its first bytes and count into 64
  // replicas (spread bytes) or one plain copy (bytes piled on few values); test_gpu_block_pieces
  // checks the decisions themselves. Blocks of one launch may choose differently, and a block's
  // later bytes may look nothing like its sample: segments of uniform bytes alternate with
  // segments of one value, at a block's first reach (32 KiB) and within it, and one value turns
  // uniform halfway. 2^24 bytes: every block walks several strides of the grid. Starts off the
  // 16-byte grid give the walk a head of single bytes as well.
  const std::size_t n = (std::size_t{1} << (quick_mode() ? 22 : 24)) + 9;
  std::mt19937_64 rng(seed + 23);
  for (const std::size_t segment : {std::size_t{32768}, std::size_t{4096}, n / 2}) {
    std::vector<std::uint8_t> host(n);
    for (std::size_t i = 0; i < n; ++i) {
      host[i] = (i / segment) % 2 == 0 ? static_cast<std::uint8_t>(rng()) : std::uint8_t{77};
    }
    if (segment == n / 2) std::reverse(host.begin(), host.end());  // one value first, uniform after
    for (const even_bins bins : {even_bins{256, 0.0, 256.0}, even_bins{260, -4.0, 256.0}}) {
      SCOPED_TRACE(::testing::Message() << "segment=" << segment << " bins=" << bins.num_bins);
      expect_even_matches<std::uint8_t, std::uint32_t>(host, bins, strategy::automatic, upper_edge::exclusive);
      expect_even_matches<std::uint8_t, std::uint64_t>(host, bins, strategy::automatic, upper_edge::exclusive);
    }
    const auto samples = to_device(host);
    gpu::device_buffer<std::uint32_t> counts(256);
    for (const std::size_t offset : {std::size_t{1}, std::size_t{7}, std::size_t{15}}) {
      SCOPED_TRACE(::testing::Message() << "segment=" << segment << " offset=" << offset);
      const auto shifted = samples.const_span().subspan(offset);
      std::vector<std::uint32_t> expected(256);
      cpu::histogram_even(std::span<const std::uint8_t>(host).subspan(offset), std::span<std::uint32_t>(expected),
                          even_bins{256, 0.0, 256.0}, {strategy::sequential});
      counts.fill_bytes(poison_byte);
      const auto got = gpu::histogram_even(shifted, counts.span(), even_bins{256, 0.0, 256.0});
      EXPECT_EQ(download(counts), expected);
      EXPECT_EQ(got.left_out, 0u);
    }
  }
}

TEST(GpuHistogramStrategies, BytesCountExactlyInReplicasUpToTheirLimit) {
  // Bytes over all 256 values take 64 replicas up to 512 bins: [-256, 256) is the largest shift,
  // every count at the far end of the copy; from 513 bins one copy. Both ends of the byte range
  // are in the input.
  std::mt19937_64 rng(seed + 29);
  std::vector<std::uint8_t> host((std::size_t{1} << 20) + 3);
  for (auto& x : host) x = static_cast<std::uint8_t>(rng());
  host[0] = 0;
  host[1] = 255;
  for (const even_bins bins : {even_bins{512, -256.0, 256.0}, even_bins{513, -257.0, 256.0}}) {
    for (const strategy s : {strategy::replicated, strategy::automatic, strategy::shared_atomic}) {
      SCOPED_TRACE(::testing::Message() << "bins=" << bins.num_bins << " " << to_string(s));
      expect_even_matches<std::uint8_t, std::uint32_t>(host, bins, s, upper_edge::exclusive);
    }
  }
}

/// Samples counted in `even` into counts that start `offset` counters into a buffer with room on
/// both sides: the counts match the CPU reference and no neighbour is touched.
template <class Sample, class Counter>
void expect_counts_at_offset(const std::vector<Sample>& host, const even_bins& even, std::size_t offset, strategy s) {
  const auto bins = static_cast<std::size_t>(even.num_bins);
  std::vector<Counter> expected(bins);
  cpu::histogram_even(std::span<const Sample>(host), std::span<Counter>(expected), even, {strategy::sequential});
  const auto samples = to_device(host);
  gpu::device_buffer<Counter> buffer(bins + 8);
  buffer.fill_bytes(poison_byte);
  gpu::histogram_even(samples.const_span(), buffer.span().subspan(offset, bins), even, {s});
  const std::vector<Counter> all = download(buffer);
  const auto poison = static_cast<Counter>(0xababababababababull);
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i >= offset && i < offset + bins) {
      ASSERT_EQ(all[i], expected[i - offset]) << "bin " << i - offset;
    } else {
      ASSERT_EQ(all[i], poison) << "counter " << i << ", outside the counts, was written";
    }
  }
}

TEST(GpuHistogramStrategies, BytesCountExactlyWhereverTheCountsStart) {
  // On sm_90 and later the byte kernel hands each block's counts on with one bulk reduction where
  // they start on a 16-byte boundary, and with one atomic per bin elsewhere; every offset of the
  // counts within a 16-byte line takes one or the other, on spread bytes and on one value.
  std::mt19937_64 rng(seed + 31);
  std::vector<std::uint8_t> spread((std::size_t{1} << 20) + 5);
  for (auto& x : spread) x = static_cast<std::uint8_t>(rng());
  std::vector<std::uint8_t> one_value((std::size_t{1} << 20) + 5, std::uint8_t{200});
  for (const strategy s : {strategy::replicated, strategy::automatic, strategy::shared_atomic}) {
    for (const auto* host : {&spread, &one_value}) {
      for (std::size_t offset = 0; offset < 4; ++offset) {
        SCOPED_TRACE(::testing::Message() << to_string(s) << (host == &spread ? " spread" : " one value")
                                          << " uint32 offset=" << offset);
        expect_counts_at_offset<std::uint8_t, std::uint32_t>(*host, even_bins{256, 0.0, 256.0}, offset, s);
      }
      for (std::size_t offset = 0; offset < 2; ++offset) {
        SCOPED_TRACE(::testing::Message() << to_string(s) << (host == &spread ? " spread" : " one value")
                                          << " uint64 offset=" << offset);
        expect_counts_at_offset<std::uint8_t, std::uint64_t>(*host, even_bins{256, 0.0, 256.0}, offset, s);
      }
    }
  }
}

TEST(GpuHistogramStrategies, SharedCopiesCountExactlyWhereverTheCountsStart) {
  // A launch of one block (1000 samples) stores its copy as the counts; one of several (40000)
  // has its first block zero them, 16 bytes a store where they start on a 16-byte boundary and one
  // counter at a time elsewhere. Every offset within a 16-byte line, bins whose mapper computes
  // (half-integer edges: the estimate, the bank swizzle) and unit bins.
  std::mt19937_64 rng(seed + 37);
  const std::vector<even_bins> layouts{even_bins{4096, -0.5, 4095.5}, even_bins{4096, 0.0, 4096.0}};
  for (const std::size_t n : {std::size_t{1000}, std::size_t{40000}}) {
    std::vector<std::int32_t> host(n);
    for (auto& x : host) x = static_cast<std::int32_t>(rng() % 4200) - 50;
    for (const even_bins& even : layouts) {
      for (const strategy s :
           {strategy::automatic, strategy::shared_atomic, strategy::warp_aggregated, strategy::replicated}) {
        for (std::size_t offset = 0; offset < 4; ++offset) {
          SCOPED_TRACE(::testing::Message() << to_string(s) << " n=" << n << " lower=" << even.lower
                                            << " uint32 offset=" << offset);
          expect_counts_at_offset<std::int32_t, std::uint32_t>(host, even, offset, s);
        }
        for (std::size_t offset = 0; offset < 2; ++offset) {
          SCOPED_TRACE(::testing::Message() << to_string(s) << " n=" << n << " lower=" << even.lower
                                            << " uint64 offset=" << offset);
          expect_counts_at_offset<std::int32_t, std::uint64_t>(host, even, offset, s);
        }
      }
    }
  }
}

/// packed16's 16-bit counters must hand 2^12 to the global counts, exactly once per crossing of a
/// multiple of 2^12, before they overflow: 2^24 samples (over 100000 per block) pile into three bins, two of them the
/// low and high halves of one packed word, first in a long run of one bin (counted by the
/// warp-wide vote, 128 at a time) and then interleaved (one increment each), with left-out samples.
template <class T>
void expect_packed16_spills_exactly(std::int64_t num_bins, T low_bin, T high_bin, T other_bin, T outside) {
  const std::size_t n = std::size_t{1} << 24;
  std::vector<T> host(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (i < n / 2) {
      host[i] = low_bin;
    } else {
      const T pick[4] = {low_bin, high_bin, other_bin, outside};
      host[i] = pick[i % 4];
    }
  }
  auto samples = to_device(host);
  const even_bins bins{num_bins, 0.0, static_cast<double>(num_bins)};
  std::vector<std::uint64_t> expected(static_cast<std::size_t>(num_bins));
  const auto want = cpu::histogram_even(std::span<const T>(host), std::span<std::uint64_t>(expected), bins,
                                        {strategy::sequential});
  ASSERT_GT(expected[static_cast<std::size_t>(low_bin)], std::uint64_t{1} << 23);
  gpu::device_buffer<std::uint64_t> counts(expected.size());
  counts.fill_bytes(poison_byte);
  try {
    const auto got = gpu::histogram_even(samples.const_span(), counts.span(), bins, {strategy::packed16});
    EXPECT_EQ(download(counts), expected);
    EXPECT_EQ(got.left_out, want.left_out);
  } catch (const error& e) {
    // 65536 bins take 128 KiB as 16-bit counters: more than a 99 KiB chip gives a block
    // (test_gpu_histogram_99k), which must refuse before writing anything.
    ASSERT_TRUE(refused_as_unfit(e)) << e.what();
    for (const std::uint64_t c : download(counts)) ASSERT_EQ(c, 0xababababababababull);
    GTEST_SKIP() << num_bins << " bins do not fit packed16 on this GPU: " << e.what();
  }
}

/// Samples whose runs of `run` alternate between bins 32 apart (which crowd one bank of a block's
/// copy) and values spread over and beyond the bins (some left out).
template <class T>
std::vector<T> alternating_crowded_runs(std::size_t n, std::size_t run, const even_bins& bins, std::uint64_t s) {
  std::mt19937_64 rng(s);
  const double step = (bins.upper - bins.lower) / static_cast<double>(bins.num_bins);
  std::uniform_real_distribution<double> spread(bins.lower - 10.0, bins.upper + 10.0);
  std::vector<T> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double bin = static_cast<double>(rng() % static_cast<std::uint64_t>(bins.num_bins / 32) * 32);
    const double x = (i / run) % 2 == 0 ? bins.lower + (bin + 0.5) * step : spread(rng);
    out[i] = static_cast<T>(std::is_floating_point_v<T> ? x : std::floor(x));
  }
  return out;
}

/// Kernels whose mapper computes (here the estimate over a range not exact in binary) choose per
/// block whether to swizzle their copy, from the block's first samples, and take the left-out
/// count as what they visited less what they hand on. Runs of one block's first chunk of samples
/// (its threads x loads x 4 samples, from the tuning) alternate between crowded and spread
/// samples, so neighbouring blocks of one call choose differently; every count and the left-out
/// count must match the CPU.
TEST(GpuHistogramStrategies, SharedCopiesCountExactlyWhetherOrNotEachBlockSwizzles) {
  using tuning = tally::detail::tuning::histogram_tuning<float>::privatized;
  static_assert(std::is_same_v<tuning, tally::detail::tuning::histogram_tuning<std::int32_t>::privatized>);
  const std::size_t block_chunk = std::size_t{tuning::block_threads} * tuning::loads_per_thread * 4;
  const even_bins bins{4096, -0.25, 3.0 * 4096 - 0.75};
  const std::size_t n = (std::size_t{1} << (quick_mode() ? 20 : 22)) + 3;
  for (const strategy s : {strategy::automatic, strategy::shared_atomic, strategy::warp_aggregated,
                           strategy::replicated, strategy::two_phase}) {
    SCOPED_TRACE(std::string(to_string(s)));
    expect_even_matches<float, std::uint32_t>(alternating_crowded_runs<float>(n, block_chunk, bins, seed + 61), bins,
                                              s, upper_edge::exclusive);
    expect_even_matches<std::int32_t, std::uint64_t>(
        alternating_crowded_runs<std::int32_t>(n, block_chunk, bins, seed + 62), bins, s, upper_edge::inclusive);
  }
}

TEST(GpuHistogramStrategies, Packed16CountersSpillExactlyBeforeTheyOverflow) {
  expect_packed16_spills_exactly<std::int32_t>(65536, 5, 5 + 32768, 40000, -7);
  expect_packed16_spills_exactly<std::uint8_t>(255, 3, 3 + 128, 200, 255);  // odd bin count: 128 words
}

/// Samples that reach packed16's periods after the first in most blocks even in quick mode (the
/// sanitizers' runs): the grid holds one block a multiprocessor, and a block's tile is 32768
/// 16-bit samples (one tile a period) or 16384 4-byte ones (three tiles a period), so 2^23 16-bit
/// samples (256 tiles) or 2^24 4-byte ones (1024 tiles, 7.8 a block) give most blocks of a
/// 132-multiprocessor chip a tile after their first period. 37 vectors of a warp's chunk and a
/// tail of three end it.
std::size_t samples_past_the_first_period(std::size_t sample_bytes = 2) {
  return (std::size_t{1} << (quick_mode() && sample_bytes == 2 ? 23 : 24)) + 16 / sample_bytes * 37 + 3;
}

/// Four inputs that take packed16's lean loop for any mapper (add_slot_vector and its scan-mode
/// twin) through its paths, over `bins`: four hot values (two bins in the halves of one packed
/// word, the last bin, and one left out), each lane's vector on one of them and its neighbour on
/// another, so blocks stay in return mode while the counters cross multiples of 2^12 with a
/// vector's additions in flight, one vector in 13 spread over the bins and past them; runs of 64
/// of one value for a third (blocks turn to scan mode), then hot and spread samples mixed; and
/// thirds of spread samples, of one bin and of one left-out value (the warp's vote, on a bin and
/// on the left-out slot); and nine vectors in ten left out (below and above the bins), one spread
/// over them, in return mode: each block puts far more than 2^16 samples in the left-out slot, so
/// it must spill into the left-out count.
template <class T>
std::vector<std::vector<T>> packed16_lean_loop_inputs(const even_bins& bins, std::uint64_t salt) {
  const std::size_t n = samples_past_the_first_period(sizeof(T));
  constexpr std::size_t items = 16 / sizeof(T);
  const double step = (bins.upper - bins.lower) / static_cast<double>(bins.num_bins);
  // A value in bin `bin` (outside the bins where `bin` is below 0 or past the last); integer
  // samples through int64, so that a negative value wraps into an unsigned type (far above its
  // bins) rather than convert out of range.
  const auto at = [&](double bin) {
    const double value = bins.lower + (bin + 0.5) * step;
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<std::int64_t>(value));
    } else {
      return static_cast<T>(value);
    }
  };
  const double half = static_cast<double>((bins.num_bins + 1) / 2);
  const T hot[4] = {at(5.0), at(5.0 + half), at(static_cast<double>(bins.num_bins - 1)), at(-3.0)};
  std::mt19937_64 rng(seed + salt);
  std::uniform_real_distribution<double> anywhere(-2.0, static_cast<double>(bins.num_bins) + 2.0);
  std::uniform_real_distribution<double> outside(1.0, 1000.0);
  std::vector<T> crowded(n), runs_then_mixed(n), spread_one_left_out(n), mostly_left_out(n);
  T run_value = hot[0];
  for (std::size_t i = 0; i < n; ++i) {
    crowded[i] = (i / items) % 13 == 12 ? at(anywhere(rng)) : hot[(i / items) % 4];
    if (i % 64 == 0) run_value = rng() % 5 == 4 ? at(anywhere(rng)) : hot[rng() % 4];
    runs_then_mixed[i] = i < n / 3 ? run_value : (rng() % 4 != 0 ? hot[rng() % 4] : at(anywhere(rng)));
    spread_one_left_out[i] = i < n / 3 ? at(anywhere(rng)) : i < 2 * n / 3 ? hot[1] : hot[3];
    const double out = rng() % 2 == 0 ? -outside(rng) : static_cast<double>(bins.num_bins) + outside(rng);
    mostly_left_out[i] = (i / items) % 10 == 9 ? at(anywhere(rng)) : at(out);
  }
  return {crowded, runs_then_mixed, spread_one_left_out, mostly_left_out};
}

/// packed16's periods after the first count whole chunks of 16- and 32-bit samples in a lean loop
/// for any mapper (add_slot_vector): a left-out sample in a slot past the bins, a vector's
/// additions all issued before their spill tests. Through unit steps, whole steps, the estimate
/// (integer and float samples, both last-edge modes), exact float edges, an odd number of bins
/// (the halves split at 25001, the left-out slot in the last word's high half), a 16-bit window
/// that is not every value, a 16-bit table (a step that is not whole) and range bins (the grid's
/// vector mapper), every count and the left-out count must match the CPU, in both modes, with the
/// vote on a bin and on the left-out slot.
TEST(GpuHistogramStrategies, Packed16LeanLoopCountsEveryMapperExactly) {
  const auto check = [](const auto& inputs, const even_bins& bins, upper_edge last) {
    using T = typename std::decay_t<decltype(inputs[0])>::value_type;
    for (const auto& host : inputs) {
      SCOPED_TRACE(::testing::Message() << type_name<T>() << " bins=" << bins.num_bins << " [" << bins.lower << ", "
                                        << bins.upper << ")");
      expect_even_matches<T, std::uint32_t>(host, bins, strategy::packed16, last);
      expect_even_matches<T, std::uint64_t>(host, bins, strategy::packed16, upper_edge::inclusive);
    }
  };
  const even_bins unit{65536, 0.0, 65536.0};
  const even_bins whole_steps{65536, -65536.0, 65536.0};
  const even_bins estimated{65536, -0.3, 65535.6};
  const even_bins odd{50001, -7.0, 49994.0};
  check(packed16_lean_loop_inputs<std::int32_t>(unit, 1), unit, upper_edge::exclusive);
  check(packed16_lean_loop_inputs<std::int32_t>(whole_steps, 2), whole_steps, upper_edge::exclusive);
  check(packed16_lean_loop_inputs<std::int32_t>(estimated, 3), estimated, upper_edge::exclusive);
  check(packed16_lean_loop_inputs<std::int32_t>(odd, 4), odd, upper_edge::exclusive);
  check(packed16_lean_loop_inputs<float>(unit, 5), unit, upper_edge::exclusive);
  check(packed16_lean_loop_inputs<float>(estimated, 6), estimated, upper_edge::exclusive);
  const even_bins float32_edges{40000, 0.0, 1000.0};
  check(packed16_lean_loop_inputs<float>(float32_edges, 7), float32_edges, upper_edge::exclusive);
  const even_bins window{60000, 100.0, 60100.0};
  check(packed16_lean_loop_inputs<std::uint16_t>(window, 8), window, upper_edge::exclusive);
  const even_bins table{60000, 0.5, 60090.25};
  check(packed16_lean_loop_inputs<std::uint16_t>(table, 9), table, upper_edge::inclusive);

  // Range bins: 60000 edges one apart, each moved by up to 0.3, over the same inputs.
  const even_bins span{60000, 0.0, 60000.0};
  std::mt19937_64 rng(seed + 10);
  std::uniform_real_distribution<double> nudge(-0.3, 0.3);
  std::vector<double> edges(60001);
  for (std::size_t i = 0; i < edges.size(); ++i) edges[i] = static_cast<double>(i) + nudge(rng);
  std::sort(edges.begin(), edges.end());
  for (const auto& host : packed16_lean_loop_inputs<float>(span, 11)) {
    std::vector<std::uint64_t> expected(edges.size() - 1);
    const auto want = cpu::histogram_range(std::span<const float>(host), std::span<std::uint64_t>(expected),
                                           std::span<const double>(edges), {strategy::sequential});
    auto samples = to_device(host);
    gpu::device_buffer<std::uint64_t> counts(expected.size());
    counts.fill_bytes(poison_byte);
    try {
      const auto got = gpu::histogram_range(samples.const_span(), counts.span(), std::span<const double>(edges),
                                            {strategy::packed16});
      EXPECT_EQ(got.chose.used, strategy::packed16);
      EXPECT_EQ(download(counts), expected);
      EXPECT_EQ(got.left_out, want.left_out);
    } catch (const error& e) {
      // 60000 bins take 117 KiB as 16-bit counters: more than a 99 KiB chip gives a block
      // (test_gpu_histogram_99k), which must refuse before writing anything.
      ASSERT_TRUE(refused_as_unfit(e)) << e.what();
      for (std::uint64_t c : download(counts)) ASSERT_EQ(c, 0xababababababababull);
    }
  }
}

/// packed16 where 16-bit samples count as the 65536 values themselves (uint16 over [0, 65536),
/// int16 over [-32768, 32768): a loop of their own) issues all of a vector's additions before it
/// looks at their returned values, so a counter may pass further multiples of 2^12 before the
/// spills of earlier ones subtract. Here every lane's vector holds one of four hot bins (two of
/// them the halves of one packed word, one the last bin) and its neighbour another, so blocks stay
/// in return mode while the four counters cross multiples of 2^12 in many warps at once; one
/// vector in 13 is spread over the bins. Then data that is spread and turns to one value half-way
/// (blocks in return mode whose warps then all hold one bin: the warp's vote). int32 samples, in
/// the lean loop of other mappers (add_slot_vector), run the first pattern too. Every count must
/// match the CPU.
TEST(GpuHistogramStrategies, Packed16CountsEveryValueExactlyWhileAVectorsAdditionsAreInFlight) {
  const std::size_t n = samples_past_the_first_period();
  std::mt19937_64 rng(seed + 11);
  const std::int32_t hot[4] = {5, 5 + 32768, 40000, 65535};
  const auto make = [&](std::size_t items, std::int32_t lowest) {
    std::vector<std::int32_t> out(n);
    std::uniform_int_distribution<std::int32_t> any(lowest, 65535 + 7);
    for (std::size_t i = 0; i < n; ++i) out[i] = (i / items) % 13 == 12 ? any(rng) : hot[(i / items) % 4];
    return out;
  };
  const even_bins bins{65536, 0.0, 65536.0};
  const auto ints = make(4, -7);
  expect_even_matches<std::int32_t, std::uint32_t>(ints, bins, strategy::packed16, upper_edge::exclusive);
  expect_even_matches<std::int32_t, std::uint64_t>(ints, bins, strategy::automatic, upper_edge::exclusive);
  std::vector<std::int32_t> spread_then_one(n);
  std::uniform_int_distribution<std::int32_t> any_value(0, 65535);
  for (std::size_t i = 0; i < n; ++i) spread_then_one[i] = i < n / 2 ? any_value(rng) : 40001;
  const even_bins signed_bins{65536, -32768.0, 32768.0};
  for (const auto& wide : {make(8, 0), spread_then_one}) {
    std::vector<std::uint16_t> halves(n);
    std::vector<std::int16_t> signed_halves(n);
    for (std::size_t i = 0; i < n; ++i) {
      halves[i] = static_cast<std::uint16_t>(std::min(wide[i], 65535));
      signed_halves[i] = static_cast<std::int16_t>(halves[i] - 32768);
    }
    expect_even_matches<std::uint16_t, std::uint32_t>(halves, bins, strategy::packed16, upper_edge::exclusive);
    expect_even_matches<std::uint16_t, std::uint64_t>(halves, bins, strategy::automatic, upper_edge::inclusive);
    expect_even_matches<std::int16_t, std::uint32_t>(signed_halves, signed_bins, strategy::packed16,
                                                     upper_edge::exclusive);
    expect_even_matches<std::int16_t, std::uint64_t>(signed_halves, signed_bins, strategy::automatic,
                                                     upper_edge::exclusive);
  }
}

/// packed16 under data that changes mid-input (the adversarial inputs of large-bin histograms):
/// bins that turn hot half-way, hot bins in a uniform tail (two of them sharing a packed word, one
/// the last bin), hot bins that cool down again, with left-out samples. 2^24 samples, over 100000
/// a block and several periods each, over 65536 bins; both counter widths.
TEST(GpuHistogramStrategies, Packed16CountsExactlyWhenDataChangesMidInput) {
  const std::size_t n = samples_past_the_first_period(sizeof(std::int32_t));
  const std::int32_t num_bins = 65536;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> any_bin(0, num_bins - 1);
  // Six hot bins: two share a packed word (b and b + 32768), one is the last bin.
  const std::int32_t hot[6] = {0, 17, 17 + 32768, 40000, 65535, 31};
  std::vector<std::int32_t> uniform_then_one(n), hot_in_uniform_tail(n), hot_then_uniform(n);
  for (std::size_t i = 0; i < n; ++i) {
    uniform_then_one[i] = i < n / 2 ? any_bin(rng) : 12345;
    hot_in_uniform_tail[i] = (rng() % 4 != 0) ? hot[rng() % 6] : any_bin(rng);
    hot_then_uniform[i] = i < n / 3 ? hot[i % 6] : (i % 97 == 0 ? -3 : any_bin(rng));  // with left-out samples
  }
  const even_bins bins{num_bins, 0.0, static_cast<double>(num_bins)};
  for (const auto* host : {&uniform_then_one, &hot_in_uniform_tail, &hot_then_uniform}) {
    expect_even_matches<std::int32_t, std::uint32_t>(*host, bins, strategy::packed16, upper_edge::exclusive);
    expect_even_matches<std::int32_t, std::uint64_t>(*host, bins, strategy::packed16, upper_edge::exclusive);
  }
}

/// packed16 where many counters spill: geometric data over 65536 bins (half the samples in one bin:
/// blocks switch to scan mode), also before and after uniform data, as int32 and 16-bit samples,
/// and bytes over 256 bins where, with 2^28 samples, every value passes 2^12 in every block (quick
/// mode: 2^22, where fewer do), in random order and in runs.
TEST(GpuHistogramStrategies, Packed16CountsExactlyWhenEveryBinSpills) {
  const std::size_t n = std::size_t{1} << (quick_mode() ? 22 : 24);
  std::mt19937_64 rng(seed + 5);
  std::vector<std::int32_t> geometric(n);
  for (auto& x : geometric) x = std::min<std::int32_t>(std::countr_zero(rng() | (std::uint64_t{1} << 40)), 65535);
  const even_bins int_bins{65536, 0.0, 65536.0};
  expect_even_matches<std::int32_t, std::uint32_t>(geometric, int_bins, strategy::packed16, upper_edge::exclusive);
  expect_even_matches<std::int32_t, std::uint64_t>(geometric, int_bins, strategy::packed16, upper_edge::exclusive);
  // Blocks that start on geometric data count the rest in scan mode: here the rest is uniform, with
  // left-out samples, so the scans spill few counters and many stay below 2^12 to the end; and
  // the reverse, where blocks stay in return mode and then meet one bin.
  std::vector<std::int32_t> geometric_then_uniform(geometric);
  std::vector<std::int32_t> uniform_then_geometric(geometric);
  std::uniform_int_distribution<std::int32_t> any(-100, 65635);
  for (std::size_t i = 0; i < n; ++i) {
    if (i >= n / 4) geometric_then_uniform[i] = any(rng);
    if (i < n / 2) uniform_then_geometric[i] = any(rng);
  }
  for (const auto* host : {&geometric_then_uniform, &uniform_then_geometric}) {
    expect_even_matches<std::int32_t, std::uint32_t>(*host, int_bins, strategy::packed16, upper_edge::exclusive);
  }
  // 16-bit samples over their 65536 values (a loop of its own in each mode): uint16 over
  // [0, 65536) and int16 over [-32768, 32768), the hot bins of int16 in the copy's high halves;
  // long enough to reach the periods after the first, and ending in part of a warp's chunk.
  const std::size_t n16 = samples_past_the_first_period();
  for (const auto* host : {&geometric, &geometric_then_uniform, &uniform_then_geometric}) {
    std::vector<std::uint16_t> halves(n16);
    std::vector<std::int16_t> signed_halves(n16);
    for (std::size_t i = 0; i < n16; ++i) {
      const std::int32_t x = (*host)[i * n / n16];  // stretched: each part keeps its share
      halves[i] = static_cast<std::uint16_t>(x);  // -100 .. -1 wrap to the top values
      signed_halves[i] = static_cast<std::int16_t>(x);
    }
    expect_even_matches<std::uint16_t, std::uint32_t>(halves, int_bins, strategy::packed16, upper_edge::exclusive);
    expect_even_matches<std::int16_t, std::uint64_t>(signed_halves, even_bins{65536, -32768.0, 32768.0},
                                                     strategy::packed16, upper_edge::exclusive);
  }

  const std::size_t bytes = std::size_t{1} << (quick_mode() ? 22 : 28);
  std::vector<std::uint8_t> uniform_bytes(bytes);
  std::vector<std::uint8_t> runs_of_bytes(bytes);
  for (std::size_t i = 0; i < bytes; ++i) {
    uniform_bytes[i] = static_cast<std::uint8_t>(rng());
    runs_of_bytes[i] = static_cast<std::uint8_t>((i / 5000) * 37);  // runs of 5000, visiting every value
  }
  const even_bins byte_bins{256, 0.0, 256.0};
  for (const auto* host : {&uniform_bytes, &runs_of_bytes}) {
    expect_even_matches<std::uint8_t, std::uint32_t>(*host, byte_bins, strategy::packed16, upper_edge::exclusive);
  }
}

/// packed16 counts left-out samples apart from the bins in its first period, then in a slot past
/// the bins that spills into the left-out count like a bin and is read into it at the end: far
/// more than 2^12 of them a block, past the first period, in return mode (spread samples, nine in
/// ten left out) and in scan mode (every other sample in one bin, so lanes share bins, the rest
/// left out), over unit steps and over the estimate; every count and the left-out count must match
/// the CPU.
TEST(GpuHistogramStrategies, Packed16LeavesOutAnyNumberOfSamplesExactly) {
  const std::size_t n = samples_past_the_first_period(sizeof(std::int32_t));
  std::mt19937_64 rng(seed + 9);
  std::uniform_int_distribution<std::int32_t> any_bin(0, 65535);
  std::vector<std::int32_t> mostly_out(n), one_bin_and_out(n);
  for (std::size_t i = 0; i < n; ++i) {
    mostly_out[i] = rng() % 10 == 0 ? any_bin(rng) : (rng() % 2 == 0 ? -1 - any_bin(rng) : 65536 + any_bin(rng));
    one_bin_and_out[i] = i % 2 == 0 ? 777 : -5;
  }
  const even_bins unit{65536, 0.0, 65536.0};
  const even_bins estimated{65536, -0.3, 65535.6};  // not exact in binary: the estimate
  for (const auto* host : {&mostly_out, &one_bin_and_out}) {
    expect_even_matches<std::int32_t, std::uint32_t>(*host, unit, strategy::packed16, upper_edge::exclusive);
    expect_even_matches<std::int32_t, std::uint64_t>(*host, estimated, strategy::packed16, upper_edge::inclusive);
    std::vector<float> floats(host->begin(), host->end());
    expect_even_matches<float, std::uint32_t>(floats, estimated, strategy::packed16, upper_edge::exclusive);
  }
}

TEST(GpuHistogramAsync, CallsOnOneWorkspaceNeedNoSynchronization) {
  const auto a = make_samples<float>(pattern::uniform, 300007, 0.0, 100.0, seed);
  const auto b = make_samples<float>(pattern::with_outliers, 200003, 0.0, 100.0, seed + 1);
  auto da = to_device(a);
  auto db = to_device(b);
  gpu::device_buffer<std::uint64_t> ca(100);
  gpu::device_buffer<std::uint64_t> cb(100);
  gpu::workspace ws;
  const even_bins bins{100, 0.0, 100.0};
  gpu::histogram_even_async(da.const_span(), ca.span(), bins, ws, {strategy::two_phase});
  gpu::histogram_even_async(db.const_span(), cb.span(), bins, ws, {strategy::global_privatized});
  const std::uint64_t left_out_b = ws.read_scalar(nullptr);
  std::vector<std::uint64_t> ea(100);
  std::vector<std::uint64_t> eb(100);
  cpu::histogram_even(std::span<const float>(a), std::span<std::uint64_t>(ea), bins, {strategy::sequential});
  const auto want_b = cpu::histogram_even(std::span<const float>(b), std::span<std::uint64_t>(eb), bins, {strategy::sequential});
  EXPECT_EQ(download(ca), ea);
  EXPECT_EQ(download(cb), eb);
  EXPECT_EQ(left_out_b, want_b.left_out);
  EXPECT_GT(want_b.left_out, 0u);
}

/// The shared-memory strategies zero their own counts through workspace words that the last block
/// of each launch puts back: one call after another on one workspace, each into counts poisoned
/// before it, must each start from zero, with every left-out count right.
TEST(GpuHistogramAsync, StrategiesThatZeroTheirOwnCountsCanFollowEachOtherOnOneWorkspace) {
  const even_bins bins{256, 0.0, 256.0};
  gpu::workspace ws;
  int round = 0;
  for (const strategy s : {strategy::shared_atomic, strategy::replicated, strategy::warp_aggregated,
                           strategy::shared_atomic, strategy::replicated}) {
    for (const pattern p : {pattern::with_outliers, pattern::single}) {
      ++round;
      SCOPED_TRACE(::testing::Message() << to_string(s) << " " << to_string(p) << " round " << round);
      const auto host = make_samples<float>(p, 100003 + static_cast<std::size_t>(round), 0.0, 256.0, seed + round);
      auto samples = to_device(host);
      gpu::device_buffer<std::uint32_t> counts(256);
      counts.fill_bytes(poison_byte);
      gpu::histogram_even_async(samples.const_span(), counts.span(), bins, ws, {s});
      const std::uint64_t left_out = ws.read_scalar(nullptr);
      std::vector<std::uint32_t> expected(256);
      const auto want = cpu::histogram_even(std::span<const float>(host), std::span<std::uint32_t>(expected), bins,
                                            {strategy::sequential});
      EXPECT_EQ(download(counts), expected);
      EXPECT_EQ(left_out, want.left_out);
    }
  }
}

}  // namespace
}  // namespace tally::test
