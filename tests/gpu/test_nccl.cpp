// Counting across GPUs through NCCL (tally/nccl.hpp): one rank per GPU of this machine (NCCL
// takes one rank per device), each on a host thread of its own, every collective checked against
// the one-GPU call over the whole input under several shardings (empty shards, cuts on and beside
// the deterministic sum's chunk boundaries). With one GPU the communicator has one rank; the tests
// that need two say so and skip.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <bit>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/sum_inputs.hpp"
#include "gpu/gpu_test_support.hpp"
#include "tally/detail/fixed_point_sum.hpp"
#include "tally/nccl.hpp"

namespace {

using tally::nccl::placement;

/// Communicators over the first min(device_count, 8) GPUs, made once for the program.
tally::nccl::local_team& the_team() {
  static tally::nccl::local_team team = [] {
    const int devices = std::min(tally::gpu::device_count(), 8);
    std::printf("NCCL communicator: %d rank(s), one per GPU\n", devices);
    std::vector<int> ordinals(static_cast<std::size_t>(devices));
    for (int d = 0; d < devices; ++d) ordinals[static_cast<std::size_t>(d)] = d;
    return tally::nccl::local_team(ordinals);
  }();
  return team;
}

/// Runs `body(rank)` on each rank's thread, the rank's device current.
template <class Body>
void on_every_rank(Body body) {
  the_team().run(body);
}

/// Shardings of `n` samples over `ranks` ranks: equal parts, all on the last rank, cuts beside
/// the chunk boundaries of the deterministic sum (256 and 512 samples), and random ones.
std::vector<std::vector<std::size_t>> every_sharding(std::size_t n, int ranks, std::uint64_t seed) {
  std::vector<std::vector<std::size_t>> all;
  const auto from_cuts = [&](std::vector<std::size_t> cuts) {
    for (std::size_t& cut : cuts) cut = std::min(cut, n);
    all.push_back(tally::test::sizes_between_cuts(cuts, n));
  };
  std::vector<std::size_t> equal, none, odd, beside;
  for (int r = 1; r < ranks; ++r) {
    equal.push_back(n * static_cast<std::size_t>(r) / static_cast<std::size_t>(ranks));
    none.push_back(0);
    odd.push_back(static_cast<std::size_t>(r) * 513 + 1);
    beside.push_back(n / 2 / 512 * 512 + static_cast<std::size_t>(r) - 1);
  }
  from_cuts(equal);
  if (ranks == 1) return all;
  from_cuts(none);
  from_cuts(odd);
  from_cuts(beside);
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<std::size_t> cuts;
    for (int r = 1; r < ranks; ++r) cuts.push_back(static_cast<std::size_t>(rng() % (n + 1)));
    from_cuts(cuts);
  }
  return all;
}

/// every_sharding, the first three of them under compute-sanitizer (TALLY_TEST_QUICK=1).
std::vector<std::vector<std::size_t>> shardings(std::size_t n, int ranks, std::uint64_t seed) {
  std::vector<std::vector<std::size_t>> all = every_sharding(n, ranks, seed);
  if (tally::test::quick_mode() && all.size() > 3) all.resize(3);
  return all;
}

/// Input sizes, a sixteenth of them under compute-sanitizer (TALLY_TEST_QUICK=1).
std::size_t sized(std::size_t n) { return tally::test::quick_mode() ? n / 16 + 1 : n; }

std::string describe(const std::vector<std::size_t>& sizes) {
  std::string text = "shards";
  for (std::size_t s : sizes) text += " " + std::to_string(s);
  return text;
}

std::size_t offset_of(const std::vector<std::size_t>& sizes, int rank) {
  std::size_t offset = 0;
  for (int r = 0; r < rank; ++r) offset += sizes[static_cast<std::size_t>(r)];
  return offset;
}

template <class T>
std::vector<T> shard_of(const std::vector<T>& all, const std::vector<std::size_t>& sizes, int rank) {
  const std::size_t offset = offset_of(sizes, rank);
  return std::vector<T>(all.begin() + static_cast<std::ptrdiff_t>(offset),
                        all.begin() + static_cast<std::ptrdiff_t>(offset + sizes[static_cast<std::size_t>(rank)]));
}

/// The one-GPU answer (device 0) of a histogram call over the whole input.
template <class Counter, class Call>
std::pair<std::vector<Counter>, std::uint64_t> one_gpu_counts(std::size_t num_bins, Call call) {
  EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
  tally::gpu::device_buffer<Counter> counts(num_bins);
  const tally::histogram_result r = call(counts.span());
  return {tally::test::download(counts), r.left_out};
}

/// Checks each rank's combined counts (all of them, or its slice) against the one-GPU counts.
template <class Counter>
void expect_rank_counts(const std::vector<Counter>& got, const tally::nccl::histogram_result& result,
                        const std::vector<Counter>& want, std::uint64_t want_left_out, placement where, int rank,
                        int ranks, const std::string& trace) {
  const auto slice = where == placement::every_rank
                         ? std::array<std::int64_t, 2>{0, static_cast<std::int64_t>(want.size())}
                         : tally::nccl::scattered_slice(static_cast<std::int64_t>(want.size()), rank, ranks);
  EXPECT_EQ(result.first_bin, slice[0]) << trace;
  EXPECT_EQ(result.num_bins, slice[1]) << trace;
  EXPECT_EQ(result.left_out, want_left_out) << trace;
  for (std::int64_t b = slice[0]; b < slice[0] + slice[1]; ++b) {
    ASSERT_EQ(got[static_cast<std::size_t>(b)], want[static_cast<std::size_t>(b)]) << trace << ", bin " << b;
  }
}

TEST(Nccl, HistogramEvenEqualsOneGpuForEveryShardingAndPlacement) {
  const int ranks = the_team().size();
  ASSERT_GT(ranks, 0);
  const std::size_t n = sized((std::size_t{1} << 20) + 12345);
  const auto samples = tally::test::make_samples<float>(tally::test::pattern::with_outliers, n, -3.0, 7.0, 11);
  const tally::even_bins bins{1000, -3.0, 7.0};
  const auto [want, want_left_out] = one_gpu_counts<std::uint64_t>(bins.num_bins, [&](std::span<std::uint64_t> c) {
    const auto d = tally::test::to_device(samples);
    return tally::gpu::histogram_even(d.const_span(), c, bins);
  });
  ASSERT_GT(want_left_out, 0u);  // the outliers, NaN and infinities reach the left-out count
  for (const placement where : {placement::every_rank, placement::scattered}) {
    for (const auto& sizes : shardings(n, ranks, 1)) {
      on_every_rank([&](int rank) {
        const auto shard = tally::test::to_device(shard_of(samples, sizes, rank));
        tally::gpu::device_buffer<std::uint64_t> counts(static_cast<std::size_t>(bins.num_bins));
        const auto result =
            tally::nccl::histogram_even(the_team().comm(rank), shard.const_span(), counts.span(), bins, {}, where);
        expect_rank_counts(tally::test::download(counts), result, want, want_left_out, where, rank, ranks,
                           describe(sizes) + ", rank " + std::to_string(rank));
      });
    }
  }
}

TEST(Nccl, HistogramRangeAndBincountEqualOneGpu) {
  const int ranks = the_team().size();
  const std::size_t n = sized(777777);
  const auto samples = tally::test::make_samples<std::int32_t>(tally::test::pattern::geometric, n, 0.0, 5000.0, 12);
  std::vector<double> edges{-1.0, 0.5, 3.0, 10.0, 100.0, 101.0, 2000.0, 4999.5};
  const auto [want_range, range_left_out] = one_gpu_counts<std::uint32_t>(edges.size() - 1, [&](auto c) {
    const auto d = tally::test::to_device(samples);
    return tally::gpu::histogram_range(d.const_span(), c, std::span<const double>(edges));
  });
  const auto [want_bins, bins_left_out] = one_gpu_counts<std::uint32_t>(3000, [&](auto c) {
    const auto d = tally::test::to_device(samples);
    return tally::gpu::bincount(d.const_span(), c);
  });
  for (const auto& sizes : shardings(n, ranks, 2)) {
    on_every_rank([&](int rank) {
      const auto shard = tally::test::to_device(shard_of(samples, sizes, rank));
      const tally::nccl::comm_t comm = the_team().comm(rank);
      const std::string trace = describe(sizes) + ", rank " + std::to_string(rank);
      tally::gpu::device_buffer<std::uint32_t> range_counts(edges.size() - 1);
      const auto range =
          tally::nccl::histogram_range(comm, shard.const_span(), range_counts.span(), std::span<const double>(edges));
      expect_rank_counts(tally::test::download(range_counts), range, want_range, range_left_out, placement::every_rank,
                         rank, ranks, "histogram_range, " + trace);
      tally::gpu::device_buffer<std::uint32_t> bin_counts(3000);
      const auto counted = tally::nccl::bincount(comm, shard.const_span(), bin_counts.span(), {}, placement::scattered);
      expect_rank_counts(tally::test::download(bin_counts), counted, want_bins, bins_left_out, placement::scattered,
                         rank, ranks, "bincount, " + trace);
    });
  }
}

TEST(Nccl, BincountRefusesANegativeSampleOnEveryRankNamingItsIndexInTheWholeInput) {
  const int ranks = the_team().size();
  std::vector<std::int32_t> samples(100000, 3);
  samples[99990] = -4;  // on the last rank
  std::vector<std::size_t> sizes(static_cast<std::size_t>(ranks), 100000 / static_cast<std::size_t>(ranks));
  sizes.back() += 100000 % static_cast<std::size_t>(ranks);
  std::mutex seen;
  int refused = 0;
  on_every_rank([&](int rank) {
    const auto shard = tally::test::to_device(shard_of(samples, sizes, rank));
    tally::gpu::device_buffer<std::uint32_t> counts(10);
    try {
      tally::nccl::bincount(the_team().comm(rank), shard.const_span(), counts.span());
    } catch (const tally::error& e) {
      EXPECT_EQ(e.code(), tally::errc::invalid_argument);
      EXPECT_EQ(e.argument(), "samples");
      EXPECT_NE(std::string(e.what()).find("index 99990"), std::string::npos) << e.what();
      const std::lock_guard lock(seen);
      ++refused;
    }
  });
  EXPECT_EQ(refused, ranks);
}

/// Seeded inputs of tests/common/sum_inputs.hpp.
template <class T>
std::vector<T> wide_values(std::size_t n, std::uint64_t seed, int max_exponent = 60) {
  std::mt19937_64 rng(seed);
  return tally::test::wide_values<T>(n, rng, max_exponent);
}

template <class T>
std::vector<T> cancelling_giants(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  return tally::test::cancelling_giants<T>(n, rng);
}

template <class T>
void expect_deterministic_sum_bits_of_one_gpu(std::uint64_t seed) {
  const int ranks = the_team().size();
  tally::reduce_options deterministic;
  deterministic.deterministic = true;
  for (const std::size_t n : {std::size_t{1}, std::size_t{700}, sized(300001)}) {
    for (const bool giants : {false, true}) {
      const std::vector<T> values = giants ? cancelling_giants<T>(n, seed + n) : wide_values<T>(n, seed + n);
      ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
      const auto whole = tally::test::to_device(values);
      const auto want = tally::gpu::reduce(whole.const_span(), tally::reduce_op::sum, deterministic).value;
      using bits = typename tally::detail::fixed_point::traits<T>::bits_type;
      for (const auto& sizes : shardings(n, ranks, seed)) {
        on_every_rank([&](int rank) {
          const auto shard = tally::test::to_device(shard_of(values, sizes, rank));
          const auto got =
              tally::nccl::reduce(the_team().comm(rank), shard.const_span(), tally::reduce_op::sum, deterministic);
          EXPECT_EQ(std::bit_cast<bits>(got.value), std::bit_cast<bits>(want))
              << tally::test::type_name<T>() << ", " << n << (giants ? " cancelling giants, " : " wide values, ")
              << describe(sizes) << ", rank " << rank << ": " << got.value << " against " << want;
        });
      }
    }
  }
}

TEST(Nccl, DeterministicFloatSumHasTheOneGpuBitsForEverySharding) {
  expect_deterministic_sum_bits_of_one_gpu<float>(21);
  expect_deterministic_sum_bits_of_one_gpu<double>(22);
}

TEST(Nccl, DeterministicHalfSumHasTheOneGpuBits) {
  const int ranks = the_team().size();
  std::vector<tally::float16> values;
  // Within float16's range (finite up to 65504, subnormal from 2^-24): exponents up to 14.
  for (float x : wide_values<float>(sized(100003), 23, 14)) values.push_back(tally::float16::nearest(x));
  tally::reduce_options deterministic;
  deterministic.deterministic = true;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const auto whole = tally::test::to_device(values);
  const float want = tally::gpu::reduce(whole.const_span(), tally::reduce_op::sum, deterministic).value;
  ASSERT_TRUE(std::isfinite(want)) << "the inputs should make a finite sum, not " << want;
  for (const auto& sizes : shardings(values.size(), ranks, 23)) {
    on_every_rank([&](int rank) {
      const auto shard = tally::test::to_device(shard_of(values, sizes, rank));
      const float got =
          tally::nccl::reduce(the_team().comm(rank), shard.const_span(), tally::reduce_op::sum, deterministic).value;
      EXPECT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want)) << describe(sizes);
    });
  }
}

TEST(Nccl, ReduceCountAndFindEqualOneGpu) {
  const int ranks = the_team().size();
  const std::size_t n = sized(500000);
  auto ints = tally::test::make_samples<std::int32_t>(tally::test::pattern::uniform, n, -100000.0, 100000.0, 31);
  std::vector<float> floats = tally::test::make_samples<float>(tally::test::pattern::uniform, n, -1.0, 1.0, 32);
  floats[n - 3] = std::numeric_limits<float>::quiet_NaN();  // on the last rank: min and max are NaN
  // A match only in the last part: the first index is the whole input's.
  ints[n - 10] = 123456789;
  const auto first_match = static_cast<std::int64_t>(n - 10);
  std::int64_t want_sum = 0;
  for (std::int32_t x : ints) want_sum += x;
  const auto want_min = *std::min_element(ints.begin(), ints.end());
  const auto want_count =
      static_cast<std::uint64_t>(std::count_if(ints.begin(), ints.end(), [](std::int32_t x) { return x > 90000; }));
  for (const auto& sizes : shardings(n, ranks, 3)) {
    on_every_rank([&](int rank) {
      const tally::nccl::comm_t comm = the_team().comm(rank);
      const std::string trace = describe(sizes) + ", rank " + std::to_string(rank);
      const auto shard = tally::test::to_device(shard_of(ints, sizes, rank));
      const auto float_shard = tally::test::to_device(shard_of(floats, sizes, rank));
      EXPECT_EQ(tally::nccl::reduce(comm, shard.const_span(), tally::reduce_op::sum).value, want_sum) << trace;
      EXPECT_EQ(tally::nccl::reduce(comm, shard.const_span(), tally::reduce_op::min).value, want_min) << trace;
      EXPECT_TRUE(std::isnan(tally::nccl::reduce(comm, float_shard.const_span(), tally::reduce_op::max).value))
          << trace;
      EXPECT_EQ(tally::nccl::count_if(comm, shard.const_span(),
                                      tally::compare_to<std::int32_t>{tally::comparison::greater, 90000})
                    .count,
                want_count)
          << trace;
      EXPECT_EQ(tally::nccl::find_first_if(comm, shard.const_span(),
                                           tally::compare_to<std::int32_t>{tally::comparison::equal, 123456789})
                    .index,
                first_match)
          << trace;
      EXPECT_EQ(tally::nccl::find_first_if(comm, shard.const_span(),
                                           tally::compare_to<std::int32_t>{tally::comparison::equal, -123456789})
                    .index,
                static_cast<std::int64_t>(n))
          << trace;
    });
  }
}

TEST(Nccl, WeightedHistogramsDeterministicHaveOneGpuBitsAndPlainAgree) {
  const int ranks = the_team().size();
  const std::size_t n = sized(400009);
  const auto samples = tally::test::make_samples<float>(tally::test::pattern::geometric, n, 0.0, 256.0, 41);
  // Wide weights within the deterministic sums' range (|w| < 2^31).
  const std::vector<float> weights = wide_values<float>(n, 42, 30);
  const tally::even_bins bins{256, 0.0, 256.0};
  for (const bool deterministic : {true, false}) {
    tally::histogram_options options;
    options.deterministic = deterministic;
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    const auto d_samples = tally::test::to_device(samples);
    const auto d_weights = tally::test::to_device(weights);
    tally::gpu::device_buffer<double> want_sums(256);
    const auto want =
        tally::gpu::histogram_even(d_samples.const_span(), d_weights.const_span(), want_sums.span(), bins, options);
    const std::vector<double> want_host = tally::test::download(want_sums);
    for (const placement where : {placement::every_rank, placement::scattered}) {
      for (const auto& sizes : shardings(n, ranks, 4)) {
        on_every_rank([&](int rank) {
          const auto shard = tally::test::to_device(shard_of(samples, sizes, rank));
          const auto weight_shard = tally::test::to_device(shard_of(weights, sizes, rank));
          tally::gpu::device_buffer<double> sums(256);
          const auto result = tally::nccl::histogram_even(the_team().comm(rank), shard.const_span(),
                                                          weight_shard.const_span(), sums.span(), bins, options, where);
          const std::vector<double> got = tally::test::download(sums);
          EXPECT_EQ(result.left_out, want.left_out);
          const auto slice = where == placement::every_rank ? std::array<std::int64_t, 2>{0, bins.num_bins}
                                                            : tally::nccl::scattered_slice(bins.num_bins, rank, ranks);
          ASSERT_EQ(result.first_bin, slice[0]);
          ASSERT_EQ(result.num_bins, slice[1]);
          for (std::int64_t b = result.first_bin; b < result.first_bin + result.num_bins; ++b) {
            const std::string trace = std::string(deterministic ? "deterministic" : "plain") + ", " + describe(sizes) +
                                      ", rank " + std::to_string(rank) + ", bin " + std::to_string(b);
            if (deterministic) {
              ASSERT_EQ(std::bit_cast<std::uint64_t>(got[static_cast<std::size_t>(b)]),
                        std::bit_cast<std::uint64_t>(want_host[static_cast<std::size_t>(b)]))
                  << trace;
            } else {
              ASSERT_NEAR(got[static_cast<std::size_t>(b)], want_host[static_cast<std::size_t>(b)],
                          1e-9 * (1.0 + std::abs(want_host[static_cast<std::size_t>(b)])))
                  << trace;
            }
          }
        });
      }
    }
  }
}

TEST(Nccl, RanksGivenDifferentBinsAllRefuseNamingTheArgument) {
  const int ranks = the_team().size();
  if (ranks < 2) GTEST_SKIP() << "needs two GPUs (NCCL takes one rank per GPU); this machine has one";
  std::mutex seen;
  std::vector<std::string> arguments;
  on_every_rank([&](int rank) {
    const auto shard = tally::test::to_device(std::vector<float>(1000, 1.0f));
    tally::gpu::device_buffer<std::uint32_t> counts(10);
    const tally::even_bins bins{10, 0.0, rank == 1 ? 20.0 : 10.0};  // rank 1 disagrees
    try {
      tally::nccl::histogram_even(the_team().comm(rank), shard.const_span(), counts.span(), bins);
    } catch (const tally::error& e) {
      EXPECT_EQ(e.code(), tally::errc::invalid_argument);
      const std::lock_guard lock(seen);
      arguments.push_back(e.argument());
    }
  });
  EXPECT_EQ(arguments, std::vector<std::string>(static_cast<std::size_t>(ranks), "bins"));
  // Counts of another size on one rank (its own call would refuse them): every rank refuses.
  arguments.clear();
  on_every_rank([&](int rank) {
    const auto shard = tally::test::to_device(std::vector<float>(1000, 1.0f));
    tally::gpu::device_buffer<std::uint32_t> counts(rank == 1 ? 9 : 10);
    try {
      tally::nccl::histogram_even(the_team().comm(rank), shard.const_span(), counts.span(),
                                  tally::even_bins{10, 0.0, 10.0});
    } catch (const tally::error& e) {
      EXPECT_EQ(e.code(), tally::errc::invalid_argument);
      const std::lock_guard lock(seen);
      arguments.push_back(e.argument());
    }
  });
  ASSERT_EQ(arguments.size(), static_cast<std::size_t>(ranks));
  for (const std::string& argument : arguments) EXPECT_TRUE(argument == "counts") << argument;
}

TEST(Nccl, ATeamWhoseRankFailsAloneAbortsAndTheWaitingRanksThrow) {
  if (the_team().size() < 2) GTEST_SKIP() << "needs two GPUs";
  std::vector<int> devices{0, 1};
  tally::nccl::local_team team(devices);  // its own: this test aborts it
  std::atomic<int> refused{0};
  try {
    team.run(
        [&](int rank) {
          if (rank == 0) throw std::runtime_error("rank 0 failed before its collective");
          const auto shard = tally::test::to_device(std::vector<float>(1000, 1.0f));
          try {
            tally::nccl::count_if(team.comm(rank), shard.const_span(),
                                  tally::compare_to<float>{tally::comparison::less, 2.0f});
          } catch (const tally::error& e) {
            EXPECT_EQ(e.code(), tally::errc::communication_error) << e.what();
            ++refused;
            throw;
          }
        },
        std::chrono::milliseconds(500));
    ADD_FAILURE() << "run returned although rank 0 threw";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "rank 0 failed before its collective");  // the first failure
  }
  EXPECT_EQ(refused.load(), 1) << "rank 1 should have been released by the abort and refused the aborted comm";
  EXPECT_THROW(team.run([](int) {}), tally::error);  // an aborted team cannot run again
}

TEST(Nccl, ACommunicatorOfAnotherDeviceOrNoneIsRefused) {
  const auto shard = tally::test::to_device(std::vector<float>(10, 1.0f));
  tally::gpu::device_buffer<std::uint32_t> counts(10);
  try {
    tally::nccl::histogram_even(nullptr, shard.const_span(), counts.span(), tally::even_bins{10, 0.0, 1.0});
    ADD_FAILURE() << "a null communicator was accepted";
  } catch (const tally::error& e) {
    EXPECT_EQ(e.argument(), "comm");
  }
  if (the_team().size() < 2) GTEST_SKIP() << "the other-device case needs two GPUs";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  try {
    tally::nccl::count_if(the_team().comm(1), shard.const_span(),
                          tally::compare_to<float>{tally::comparison::less, 0.f});
    ADD_FAILURE() << "rank 1's communicator was used from device 0";
  } catch (const tally::error& e) {
    EXPECT_EQ(e.code(), tally::errc::invalid_argument);
    EXPECT_EQ(e.argument(), "comm");
    EXPECT_NE(std::string(e.what()).find("device 1"), std::string::npos) << e.what();
  }
}

}  // namespace
