// Weighted GPU histograms: every weighted strategy (and automatic) x float and double weights x
// several sample types, against the long-double loop (tests/common/weighted_reference.hpp) within
// the stated bounds; seeded random data, all samples in one bin, out-of-range and NaN samples,
// NaN and infinite weights, empty input, sizes that are not a multiple of a vector, misaligned
// spans; and `deterministic`: the same bits over 5 runs, for every strategy, and the CPU's bits.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "common/weighted_reference.hpp"
#include "gpu/gpu_test_support.hpp"

namespace tally::test {
namespace {

constexpr std::uint64_t seed = 20261207;
const std::vector<std::size_t> sizes =
    quick_mode() ? std::vector<std::size_t>{0, 1, 33, 1000} : std::vector<std::size_t>{0, 1, 31, 33, 1000, (1u << 20) + 3};
/// automatic and every weighted strategy the library lists.
const std::vector<strategy> weighted_strategies = [] {
  std::vector<strategy> out{strategy::automatic};
  for (const strategy s : strategies_for(backend::gpu, operation::weighted_histogram)) out.push_back(s);
  return out;
}();

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

/// A call's sums against the references: deterministic ones the CPU's bits and within their bound,
/// double sums within theirs.
void expect_sums_match(const std::vector<double>& sums, bool deterministic, const tally_test::weighted_reference& ref,
                       const std::vector<double>& cpu_deterministic) {
  if (deterministic) {
    EXPECT_TRUE(same_bits(sums, cpu_deterministic)) << "deterministic GPU sums differ from the CPU's";
    EXPECT_EQ(tally_test::sums_within(sums, ref, tally_test::deterministic_bound), "");
  } else {
    EXPECT_EQ(tally_test::sums_within(sums, ref, tally_test::floating_bound), "");
  }
}

template <class Weight>
std::vector<Weight> make_weights(std::size_t n, std::uint64_t s) {
  std::mt19937_64 rng(s);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::vector<Weight> out(n);
  for (auto& w : out) w = static_cast<Weight>(unit(rng) * std::ldexp(100.0, -static_cast<int>(rng() % 20)));
  return out;
}

/// Runs the GPU call on device copies of the host data, starting `offset` elements into them
/// (offset 1 misaligns both spans), with the sums poisoned first.
template <class Sample, class Weight>
histogram_result run_gpu(const std::vector<Sample>& samples, const std::vector<Weight>& weights, std::size_t offset,
                         const even_bins& bins, const histogram_options& options, std::vector<double>& sums) {
  std::vector<Sample> padded_samples(offset, Sample{});
  padded_samples.insert(padded_samples.end(), samples.begin(), samples.end());
  std::vector<Weight> padded_weights(offset, Weight{});
  padded_weights.insert(padded_weights.end(), weights.begin(), weights.end());
  auto device_samples = to_device(padded_samples);
  auto device_weights = to_device(padded_weights);
  gpu::device_buffer<double> device_sums(static_cast<std::size_t>(bins.num_bins));
  device_sums.fill_bytes(poison_byte);
  const histogram_result got =
      gpu::histogram_even(device_samples.const_span().subspan(offset), device_weights.const_span().subspan(offset),
                          device_sums.span(), bins, options);
  sums = download(device_sums);
  return got;
}

template <class Sample, class Weight>
void check_all_over(const even_bins& bins, pattern p, std::size_t n, std::size_t offset) {
  const std::int64_t num_bins = bins.num_bins;
  SCOPED_TRACE(type_name<Sample>() + " samples, " + type_name<Weight>() + " weights, " + to_string(p) +
               ", n=" + std::to_string(n) + ", bins=" + std::to_string(num_bins) + " over [" +
               std::to_string(bins.lower) + ", " + std::to_string(bins.upper) + ")" +
               (bins.arithmetic == edge_arithmetic::float32 ? " in float32" : "") + ", offset=" + std::to_string(offset));
  const auto samples = make_samples<Sample>(p, n, bins.lower, bins.upper, seed + n);
  const auto weights = make_weights<Weight>(n, seed + 1 + n);
  const tally_test::weighted_reference ref =
      tally_test::weigh_in_long_double(samples, weights, bins, upper_edge::exclusive);
  std::vector<double> cpu_deterministic(static_cast<std::size_t>(num_bins));
  cpu::histogram_even(std::span<const Sample>(samples), std::span<const Weight>(weights),
                      std::span<double>(cpu_deterministic), bins, {strategy::sequential, upper_edge::exclusive, true});
  for (const strategy s : weighted_strategies) {
    for (const bool deterministic : {false, true}) {
      SCOPED_TRACE(std::string(tally::to_string(s)) + (deterministic ? ", deterministic" : ""));
      std::vector<double> sums;
      // No strategy refuses: shared_atomic keeps a cache of bins where its copy does not fit.
      const histogram_result got = run_gpu(samples, weights, offset, bins, {s, upper_edge::exclusive, deterministic}, sums);
      if (s != strategy::automatic) EXPECT_EQ(got.chose.used, s);
      EXPECT_FALSE(got.chose.reason.empty());
      EXPECT_EQ(got.left_out, ref.left_out);
      if (!deterministic) {
        EXPECT_EQ(tally_test::sums_within(sums, ref, tally_test::floating_bound), "");
        continue;
      }
      EXPECT_EQ(tally_test::sums_within(sums, ref, tally_test::deterministic_bound), "");
      EXPECT_TRUE(same_bits(sums, cpu_deterministic)) << "deterministic GPU sums differ from the CPU's";
      for (int run = 1; run < 5; ++run) {
        std::vector<double> again;
        run_gpu(samples, weights, offset, bins, {s, upper_edge::exclusive, true}, again);
        EXPECT_TRUE(same_bits(again, sums)) << "run " << run << " gave other bits";
      }
    }
  }
}

template <class Sample, class Weight>
void check_all(pattern p, std::size_t n, std::int64_t num_bins, std::size_t offset) {
  check_all_over<Sample, Weight>(even_bins{num_bins, 0.0, static_cast<double>(num_bins) * 2.0}, p, n, offset);
}

template <class Sample, class Weight>
void check_patterns() {
  // single, geometric and sorted crowd a warp's lanes into few bins (warp_aggregated's groups); at
  // 4096 bins single and sorted data give shared_atomic's copies (one or two replicas) warps whose
  // lanes' steps are each of one bin, added as one value a lane, and float weights below 2^-9 make
  // deterministic lanes add such a step weight by weight.
  for (const pattern p : {pattern::uniform, pattern::single, pattern::geometric, pattern::sorted, pattern::with_outliers}) {
    for (const std::size_t n : sizes) {
      for (const std::int64_t num_bins : {std::int64_t{1}, std::int64_t{7}, std::int64_t{4096}, std::int64_t{1} << 17}) {
        for (const std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
          if (num_bins > 4096 && (n > 1000 || offset != 0 || p != pattern::uniform)) continue;  // keeps the suite short
          check_all<Sample, Weight>(p, n, num_bins, offset);
        }
      }
    }
  }
}

TEST(GpuWeightedHistogram, FloatSamples) {
  check_patterns<float, float>();
  check_patterns<float, double>();
}
TEST(GpuWeightedHistogram, FloatSamplesOverEdgesComputedInFloat32) {
  // numpy's edges for float32 data over its own range: the estimate over float32 edges (and the
  // general rule past its reach), inside even_bin_mapper, as the weighted kernels take it.
  for (const even_bins& bins : {even_bins{7, 0.1f, 0.7f, edge_arithmetic::float32},
                                even_bins{4096, 0x1.13cc6ep+10, 0x1.5753ep+10, edge_arithmetic::float32},
                                even_bins{1024, 2045.1f, 2047.0f, edge_arithmetic::float32}}) {
    for (const pattern p : {pattern::uniform, pattern::single, pattern::with_outliers}) {
      check_all_over<float, float>(bins, p, 100000, 0);
      check_all_over<float, double>(bins, p, 1000, 1);
    }
  }
}

TEST(GpuWeightedHistogram, DoubleSamples) {
  check_patterns<double, float>();
  check_patterns<double, double>();
}
TEST(GpuWeightedHistogram, Int32Samples) {
  check_patterns<std::int32_t, float>();
  check_patterns<std::int32_t, double>();
}
TEST(GpuWeightedHistogram, Int32SamplesOverWholeBoundsWithAStepThatIsNotWhole) {
  // The data's own range over integers: the exact quotient (rational_step_bin_mapper), inside
  // even_bin_mapper as the weighted kernels take it, in shared memory and past it (100000 bins);
  // half bounds (data of one value, centred bins) too.
  for (const even_bins& bins :
       {even_bins{7, 3.0, 1000.0}, even_bins{4096, 0.0, 10000.0}, even_bins{100000, -5.0, 654321.0},
        even_bins{4096, 41.5, 42.5}, even_bins{1001, -0.5, 1000.5}}) {
    ASSERT_EQ(even_bin_mapper<std::int32_t>(bins, upper_edge::exclusive).shortcut(), even_shortcut::rational_step);
    for (const pattern p : {pattern::uniform, pattern::single, pattern::with_outliers}) {
      check_all_over<std::int32_t, float>(bins, p, 100000, 0);
      check_all_over<std::int32_t, double>(bins, p, 1000, 1);
    }
  }
}
TEST(GpuWeightedHistogram, Uint8AndInt64Samples) {
  check_patterns<std::uint8_t, double>();
  check_patterns<std::int64_t, float>();
}

TEST(GpuWeightedHistogram, NanAndInfiniteWeightsPropagateAsOnTheCpu) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Bin 0: NaN. Bin 1: +inf. Bin 2: +inf and -inf. Bin 3: -inf. Bin 4: finite. Left-out samples
  // (NaN, -1, 70000) carry NaN weights, which must not reach any bin. 5 bins fit a block's shared
  // memory; 65536 do not (shared_atomic's cache of bins).
  const std::vector<float> samples{0.5f, 1.5f, 1.5f, 2.5f, 2.5f, 3.5f, 4.5f, 0.5f, nan, -1.0f, 70000.0f};
  const std::vector<float> weights{nan, inf, 1.0f, inf, -inf, -inf, 4.0f, 1.0f, nan, nan, nan};
  for (const std::int64_t num_bins : {std::int64_t{5}, std::int64_t{65536}}) {
    for (const strategy s : weighted_strategies) {
      for (const bool deterministic : {false, true}) {
        SCOPED_TRACE(std::to_string(num_bins) + " bins, " + std::string(tally::to_string(s)) +
                     (deterministic ? ", deterministic" : ""));
        std::vector<double> sums;
        const histogram_result got = run_gpu(samples, weights, 0, even_bins{num_bins, 0.0, static_cast<double>(num_bins)},
                                             {s, upper_edge::exclusive, deterministic}, sums);
        EXPECT_EQ(got.left_out, 3u);
        EXPECT_TRUE(std::isnan(sums[0]));
        EXPECT_EQ(sums[1], std::numeric_limits<double>::infinity());
        EXPECT_TRUE(std::isnan(sums[2]));
        EXPECT_EQ(sums[3], -std::numeric_limits<double>::infinity());
        EXPECT_EQ(sums[4], 4.0);
        for (std::size_t bin = 5; bin < sums.size(); ++bin) ASSERT_EQ(sums[bin], 0.0) << "bin " << bin;
      }
    }
  }
}

/// Bins past a block's shared memory, where shared_atomic (and automatic) keeps a cache of the
/// bins each block meets: int32 samples in unit bins, against the long-double sums and, for
/// deterministic sums, the CPU's bits, for shared_atomic, automatic and warp_aggregated (the
/// former choice there).
template <class Weight>
void check_beyond_shared_memory(const std::vector<std::int32_t>& samples, std::int64_t num_bins, const std::string& what) {
  const std::size_t n = samples.size();
  SCOPED_TRACE(what + ", " + type_name<Weight>() + " weights, n=" + std::to_string(n) + ", bins=" +
               std::to_string(num_bins));
  const even_bins bins{num_bins, 0.0, static_cast<double>(num_bins)};
  const auto weights = make_weights<Weight>(n, seed + 3 + n);
  const tally_test::weighted_reference ref = tally_test::weigh_in_long_double(samples, weights, bins, upper_edge::exclusive);
  std::vector<double> cpu_deterministic(static_cast<std::size_t>(num_bins));
  cpu::histogram_even(std::span<const std::int32_t>(samples), std::span<const Weight>(weights),
                      std::span<double>(cpu_deterministic), bins, {strategy::sequential, upper_edge::exclusive, true});
  for (const strategy s : {strategy::automatic, strategy::shared_atomic, strategy::warp_aggregated}) {
    for (const bool deterministic : {false, true}) {
      SCOPED_TRACE(std::string(tally::to_string(s)) + (deterministic ? ", deterministic" : ""));
      std::vector<double> sums;
      const histogram_result got = run_gpu(samples, weights, 0, bins, {s, upper_edge::exclusive, deterministic}, sums);
      EXPECT_EQ(got.chose.used, s == strategy::warp_aggregated ? s : strategy::shared_atomic);
      EXPECT_EQ(got.left_out, ref.left_out);
      expect_sums_match(sums, deterministic, ref, cpu_deterministic);
    }
  }
}

/// Bins of one set of two slots in a cache of up to 4096 slots (2048 sets: the multiplicative
/// hash's top 11 bits; the top 12 are one here): the first `count` from 0 up.
std::vector<std::int32_t> bins_of_one_set(std::int64_t num_bins, std::size_t count) {
  std::vector<std::int32_t> out;
  for (std::int64_t b = 0; b < num_bins && out.size() < count; ++b) {
    if ((static_cast<std::uint32_t>(b) * 0x9e3779b9u) >> 20 == 0) out.push_back(static_cast<std::int32_t>(b));
  }
  return out;
}

TEST(GpuWeightedHistogram, BinsBeyondSharedMemoryAddExactlyThroughEachBlocksCacheOfBins) {
  // Large enough that each block empties its cache (every 65536 samples) before the end, on a GPU
  // of 132 multiprocessors with up to two blocks each (1024 threads). In quick mode
  // (compute-sanitizer: 65536 bins only) the double sums' blocks (one a multiprocessor) still do;
  // the deterministic ones (two) may empty only at the end, the same code with another visit.
  const std::size_t n = quick_mode() ? (std::size_t{1} << 24) + 5 : (std::size_t{1} << 25) + 5;
  const std::vector<std::int64_t> bin_counts =
      quick_mode() ? std::vector<std::int64_t>{1 << 16} : std::vector<std::int64_t>{1 << 16, 1 << 20};
  for (const std::int64_t num_bins : bin_counts) {
    std::mt19937_64 rng(seed + static_cast<std::uint64_t>(num_bins));
    const auto within = [&](std::uint64_t k) { return static_cast<std::int32_t>(k % static_cast<std::uint64_t>(num_bins)); };
    std::vector<std::int32_t> samples(n);
    for (auto& v : samples) v = within(rng());
    check_beyond_shared_memory<float>(samples, num_bins, "uniform");
    // Sorted: a block meets new bins in each period.
    for (std::size_t i = 0; i < n; ++i) samples[i] = within(i * static_cast<std::uint64_t>(num_bins) / n);
    check_beyond_shared_memory<double>(samples, num_bins, "sorted");
    // A few hot bins among a uniform tail, some left out.
    const std::int32_t hot[] = {0, 1, 4096, static_cast<std::int32_t>(num_bins - 1)};
    for (auto& v : samples) {
      const std::uint64_t r = rng();
      v = r % 8 == 0 ? within(r >> 8) : r % 8 == 1 ? static_cast<std::int32_t>(num_bins + r % 3) - 1 : hot[(r >> 3) % 4];
    }
    check_beyond_shared_memory<float>(samples, num_bins, "few hot bins");
    // All of a block's samples in bins of one set: claims race, and all but two bins of each
    // period add to the global sums.
    const std::vector<std::int32_t> colliding = bins_of_one_set(num_bins, 16);
    ASSERT_GE(colliding.size(), 8u);
    for (auto& v : samples) v = colliding[rng() % colliding.size()];
    check_beyond_shared_memory<double>(samples, num_bins, "bins of one set");
    // Every sample in one bin.
    std::fill(samples.begin(), samples.end(), static_cast<std::int32_t>(num_bins / 3));
    check_beyond_shared_memory<float>(samples, num_bins, "one bin");
  }
}

/// Weights at the edges of shared_atomic's integer sums: the largest below 2^31 of each sign,
/// powers of two at both ends of the grids (2^-32 deterministic, 2^-64 for double sums), weights
/// just off the grid (summed in double), zeros of both signs; into 3 bins, most into bin 0, so
/// that carries and borrows pile up in one bin's limbs, and a fourth value left out. With 3 and
/// 1000 bins the sums fit a block's copy, whose limbs come in replicas (8 and fewer: bin 0's lanes
/// spread over them, and the flush sums them); 4096 and 6000 take wide blocks (two replicas, or one
/// of double sums at 6000, shared by 1024 threads; where one block fills a multiprocessor its lanes
/// load ahead); with 65536 they go through its cache of bins.
template <class Weight>
void check_weights_at_the_limbs_edges(std::size_t n, std::int64_t num_bins) {
  SCOPED_TRACE(type_name<Weight>() + " weights, n=" + std::to_string(n) + ", bins=" + std::to_string(num_bins));
  const Weight below_2_31 = std::nextafter(static_cast<Weight>(2147483648.0), Weight{0});
  const std::vector<double> edges{static_cast<double>(below_2_31), std::ldexp(1.0, 30), 1.0,
                                  std::ldexp(1.0, -32), std::ldexp(1.0, -33), std::ldexp(1.0, -41),
                                  std::ldexp(1.0, -64), std::ldexp(3.0, -65), 1e-20, 0.1, 0.0};
  std::mt19937_64 rng(seed + n);
  std::vector<std::int32_t> samples(n);
  std::vector<Weight> weights(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t k = rng() % 4;
    samples[i] = rng() % 10 < 8 ? 0 : static_cast<std::int32_t>(k == 3 ? num_bins : k);  // num_bins is left out
    const double w = edges[rng() % edges.size()];
    weights[i] = static_cast<Weight>(rng() % 2 == 0 ? w : -w);
  }
  const even_bins bins{num_bins, 0.0, static_cast<double>(num_bins)};
  const tally_test::weighted_reference ref = tally_test::weigh_in_long_double(samples, weights, bins, upper_edge::exclusive);
  std::vector<double> cpu_deterministic(static_cast<std::size_t>(num_bins));
  cpu::histogram_even(std::span<const std::int32_t>(samples), std::span<const Weight>(weights),
                      std::span<double>(cpu_deterministic), bins, {strategy::sequential, upper_edge::exclusive, true});
  for (const strategy s : weighted_strategies) {
    for (const bool deterministic : {false, true}) {
      SCOPED_TRACE(std::string(tally::to_string(s)) + (deterministic ? ", deterministic" : ""));
      std::vector<double> sums;
      const histogram_result got = run_gpu(samples, weights, 0, bins, {s, upper_edge::exclusive, deterministic}, sums);
      EXPECT_EQ(got.left_out, ref.left_out);
      expect_sums_match(sums, deterministic, ref, cpu_deterministic);
    }
  }
}

TEST(GpuWeightedHistogram, WeightsAtTheEdgesOfTheIntegerSums) {
  for (const std::size_t n : {std::size_t{1000}, quick_mode() ? std::size_t{100003} : (std::size_t{1} << 20) + 7}) {
    for (const std::int64_t num_bins : {std::int64_t{3}, std::int64_t{1000}, std::int64_t{4096}, std::int64_t{6000},
                                        std::int64_t{65536}}) {
      check_weights_at_the_limbs_edges<double>(n, num_bins);
      check_weights_at_the_limbs_edges<float>(n, num_bins);
    }
  }
}

TEST(GpuWeightedHistogram, CopiesWhoseLanesLoadTheirNextStepAheadStopAtTheEnd) {
  // Where shared_atomic's copy leaves room for one block of 1024 threads a multiprocessor (double
  // sums at 4096 bins, both modes at 6000, on an H100 SXM or H200), its lanes load their next step
  // before they visit this one. Sizes that end in a lane's first to fourth step (a grid step is
  // 132 x 1024 x 4 samples there), not on a whole warp's step, misaligned too. The sums are checked
  // whichever kernel runs: the library does not say which.
  const std::vector<std::size_t> counts =
      quick_mode() ? std::vector<std::size_t>{(std::size_t{1} << 20) + 7}
                   : std::vector<std::size_t>{(std::size_t{1} << 19) + 13, (std::size_t{1} << 20) + 7,
                                              (std::size_t{3} << 19) + 29, (std::size_t{1} << 21) + 1};
  for (const std::size_t n : counts) {
    for (const std::int64_t num_bins : {std::int64_t{4096}, std::int64_t{6000}}) {
      const even_bins bins{num_bins, 0.0, static_cast<double>(num_bins)};
      check_all_over<std::int32_t, float>(bins, pattern::uniform, n, 0);
      check_all_over<float, double>(bins, pattern::sorted, n, 1);
    }
  }
}

TEST(GpuWeightedHistogram, CopiesOfLongStepsStopAtTheEnd) {
  // Where shared_atomic's copy and the kernel's registers leave room for three narrow blocks a
  // multiprocessor or more (float weights at 256 and 1024 bins), a lane's step is eight samples.
  // Sizes that end within the grid's first step (132 x 3 x 512 x 8 samples on an H100 SXM or H200)
  // and within its fourth, not on a whole warp's step, misaligned too; and int64 samples with double
  // weights, which keep the short steps. The sums are checked whichever kernel runs: the library
  // does not say which.
  const std::vector<std::size_t> counts =
      quick_mode() ? std::vector<std::size_t>{(std::size_t{1} << 20) + 7}
                   : std::vector<std::size_t>{(std::size_t{1} << 19) + 13, (std::size_t{1} << 20) + 7,
                                              (std::size_t{3} << 19) + 29, (std::size_t{5} << 20) + 3};
  for (const std::size_t n : counts) {
    for (const std::int64_t num_bins : {std::int64_t{256}, std::int64_t{1024}}) {
      const even_bins bins{num_bins, 0.0, static_cast<double>(num_bins)};
      check_all_over<std::int32_t, float>(bins, pattern::uniform, n, 0);
      check_all_over<float, float>(bins, pattern::sorted, n, 1);
      check_all_over<std::int64_t, double>(bins, pattern::uniform, n, 3);
    }
  }
}

TEST(GpuWeightedHistogram, OneWorkspaceClaimsItsStepsAfreshOnEveryCall) {
  // shared_atomic's warps claim their steps from a word of the workspace that each call zeroes:
  // one workspace, weighted calls of a large and a small input, in both modes, with a sum and a
  // count histogram between them (whose words of the workspace sit beside that one), each
  // weighted call against the reference.
  const even_bins bins{256, 0.0, 256.0};
  gpu::workspace ws;
  for (const std::size_t n : {(std::size_t{1} << 20) + 7, std::size_t{1000}, (std::size_t{1} << 20) + 7}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const auto samples = make_samples<std::int32_t>(pattern::with_outliers, n, bins.lower, bins.upper, seed + n);
    const auto weights = make_weights<float>(n, seed + 2 + n);
    const tally_test::weighted_reference ref =
        tally_test::weigh_in_long_double(samples, weights, bins, upper_edge::exclusive);
    std::vector<double> cpu_deterministic(256);
    cpu::histogram_even(std::span<const std::int32_t>(samples), std::span<const float>(weights),
                        std::span<double>(cpu_deterministic), bins, {strategy::sequential, upper_edge::exclusive, true});
    auto device_samples = to_device(samples);
    auto device_weights = to_device(weights);
    for (const bool deterministic : {false, true}) {
      gpu::device_buffer<double> device_sums(256);
      device_sums.fill_bytes(poison_byte);
      gpu::histogram_even_async(device_samples.const_span(), device_weights.const_span(), device_sums.span(), bins, ws,
                                {strategy::shared_atomic, upper_edge::exclusive, deterministic});
      EXPECT_EQ(ws.read_scalar(nullptr), ref.left_out);
      expect_sums_match(download(device_sums), deterministic, ref, cpu_deterministic);
      (void)gpu::reduce_async(device_samples.const_span(), reduce_op::sum, ws, {}, nullptr);
      std::int64_t expected_sum = 0;
      for (const std::int32_t v : samples) expected_sum += v;
      EXPECT_EQ(static_cast<std::int64_t>(ws.read_scalar(nullptr)), expected_sum);
      gpu::device_buffer<std::uint32_t> counts(256);
      gpu::histogram_even_async(device_samples.const_span(), counts.span(), bins, ws, {strategy::shared_atomic});
      EXPECT_EQ(ws.read_scalar(nullptr), ref.left_out);
      std::uint64_t counted = 0;
      for (const std::uint32_t c : download(counts)) counted += c;
      EXPECT_EQ(counted + ref.left_out, n);
    }
  }
}

/// 2^28 samples, all into one bin, each weight the largest below 2^31 (every bit of its mantissa
/// set), so that each block of the grid adds about 2^19 of them: the carries of the deterministic
/// limbs run into the top limb, and a block's sum reaches 2^82 (2^63 a weight). The exact sum is
/// n * w, a double.
template <class Weight>
void check_largest_weights_in_one_bin() {
  constexpr std::size_t n = std::size_t{1} << 28;
  const Weight largest = std::nextafter(static_cast<Weight>(2147483648.0), Weight{0});
  auto samples = to_device(std::vector<std::int32_t>(n, 0));
  for (const Weight w : {largest, -largest}) {
    SCOPED_TRACE(type_name<Weight>() + " weights " + std::to_string(static_cast<double>(w)));
    auto weights = to_device(std::vector<Weight>(n, w));
    gpu::device_buffer<double> sums(1);
    sums.fill_bytes(poison_byte);
    for (const strategy s : {strategy::automatic, strategy::shared_atomic}) {
      const histogram_result got =
          gpu::histogram_even(samples.const_span(), weights.const_span(), sums.span(), even_bins{1, 0.0, 1.0},
                              {s, upper_edge::exclusive, true});
      EXPECT_EQ(got.chose.used, strategy::shared_atomic);
      EXPECT_EQ(got.left_out, 0u);
      EXPECT_EQ(download(sums)[0], static_cast<double>(n) * static_cast<double>(w)) << to_string(s);
    }
  }
}

TEST(GpuWeightedHistogram, DeterministicSumsOfTheLargestWeightsInOneBinStayExact) {
  if (quick_mode()) GTEST_SKIP() << "quick mode (compute-sanitizer): 2^28 samples";
  check_largest_weights_in_one_bin<float>();
  check_largest_weights_in_one_bin<double>();
}

TEST(GpuWeightedHistogram, DeterministicRefusesWeightsBeyond2Pow31) {
  const std::vector<double> samples{0.5, 1.5, 7.0};
  const std::vector<double> weights{1.0, 2147483648.0, 1e300};  // the last sample is left out: ignored
  for (const strategy s : strategies_for(backend::gpu, operation::weighted_histogram)) {
    std::vector<double> sums;
    try {
      run_gpu(samples, weights, 0, even_bins{2, 0.0, 2.0}, {s, upper_edge::exclusive, true}, sums);
      ADD_FAILURE() << "no error for a weight of 2^31";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument);
      EXPECT_EQ(e.argument(), "weights");
    }
    // The async form only flags it, in ws.scalar()[1], with NaN in the bin.
    auto device_samples = to_device(samples);
    auto device_weights = to_device(weights);
    gpu::device_buffer<double> device_sums(2);
    gpu::workspace ws;
    gpu::histogram_even_async(device_samples.const_span(), device_weights.const_span(), device_sums.span(),
                              even_bins{2, 0.0, 2.0}, ws, {s, upper_edge::exclusive, true});
    EXPECT_EQ(ws.read_scalar(nullptr), 1u);  // left out
    std::uint64_t flag = 0;
    gpu::detail::copy_to_host(&flag, ws.scalar() + 1, sizeof(flag));
    EXPECT_EQ(flag, 1u);
    const auto got = download(device_sums);
    EXPECT_EQ(got[0], 1.0);
    EXPECT_TRUE(std::isnan(got[1]));
  }
}

TEST(GpuWeightedHistogram, UnsupportedStrategiesAndBadArgumentsAreRefused) {
  auto samples = to_device(std::vector<float>(10, 0.5f));
  auto weights = to_device(std::vector<float>(10, 1.0f));
  gpu::device_buffer<double> sums(4);
  sums.fill_bytes(poison_byte);
  for (const strategy s : {strategy::cub, strategy::packed16, strategy::sequential}) {
    try {
      gpu::histogram_even(samples.const_span(), weights.const_span(), sums.span(), even_bins{4, 0.0, 1.0}, {s});
      ADD_FAILURE() << "strategy " << tally::to_string(s) << " was accepted";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::not_supported);
      EXPECT_EQ(e.argument(), "strategy");
    }
  }
  try {
    gpu::histogram_even(samples.const_span(), weights.const_span().first(9), sums.span(), even_bins{4, 0.0, 1.0});
    ADD_FAILURE() << "9 weights for 10 samples were accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "weights");
  }
  for (const double s : download(sums)) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &s, sizeof(bits));
    EXPECT_EQ(bits, 0xababababababababull);
  }
}

}  // namespace
}  // namespace tally::test
