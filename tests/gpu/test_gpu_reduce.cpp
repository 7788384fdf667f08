// GPU reduce, count_if and find_first_if against the CPU reference, every strategy: integer
// results and min/max bit-exact, floating sums within a stated bound of a long double sum, edge
// sizes, misaligned spans, all-equal inputs (every thread on one address), the NaN rules; the
// deterministic sum bit-identical to the CPU's across runs, launch shapes and strategies.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "gpu/gpu_test_support.hpp"

namespace tally::test {
namespace {

constexpr std::uint64_t seed = 77;
const std::vector<std::size_t> sizes = quick_mode() ? std::vector<std::size_t>{0, 1, 33, 4097}
                                                    : std::vector<std::size_t>{0, 1, 2, 7, 33, 4097, (1u << 20) + 5};

std::vector<strategy> with_automatic(operation op) {
  std::vector<strategy> out{strategy::automatic};
  for (strategy s : strategies_for(backend::gpu, op)) out.push_back(s);
  return out;
}

const char* op_name(reduce_op op) { return op == reduce_op::sum ? "sum" : op == reduce_op::min ? "min" : "max"; }

/// A call ran what was asked, or (automatic) a GPU strategy of the operation, with a reason.
void expect_chose(const choice& chose, strategy asked, operation op) {
  if (asked != strategy::automatic) {
    EXPECT_EQ(to_string(chose.used), to_string(asked));
  } else {
    EXPECT_TRUE(supports(backend::gpu, op, chose.used) && chose.used != strategy::automatic) << to_string(chose.used);
    EXPECT_FALSE(chose.reason.empty());
  }
}

/// Any order of float additions is within (n - 1) eps sum|x| of the exact sum; long double's own
/// error (64-bit significand) is added to the allowance.
template <class T>
void expect_sum_within_bound(T got, std::span<const T> host) {
  long double exact = 0;
  long double magnitude = 0;
  for (T x : host) {
    exact += x;
    magnitude += std::fabs(static_cast<long double>(x));
  }
  const auto n = static_cast<long double>(host.size());
  const long double bound = n * (std::numeric_limits<T>::epsilon() + std::ldexp(1.0L, -63)) * magnitude;
  EXPECT_LE(std::fabs(static_cast<long double>(got) - exact), bound) << "n=" << host.size();
}

template <class T>
class GpuReduce : public ::testing::Test {};
using ReduceTypes = ::testing::Types<std::int32_t, std::uint32_t, std::int64_t, float, double>;
TYPED_TEST_SUITE(GpuReduce, ReduceTypes);

template <class T>
std::vector<T> wide_samples(std::size_t n, std::uint64_t s) {
  // Large magnitudes: int32 sums overflow 32 bits, so the 64-bit accumulator is exercised.
  const double top = std::is_floating_point_v<T> ? 1000.0 : std::min(2.0e9, static_cast<double>(std::numeric_limits<T>::max()));
  const double bottom = std::is_signed_v<T> ? -top : 0.0;
  return make_samples<T>(pattern::uniform, n, bottom, top, s);
}

TYPED_TEST(GpuReduce, EveryStrategyMatchesTheCpuReferenceOnAlignedAndMisalignedSpans) {
  using T = TypeParam;
  using A = accumulator_t<T>;
  for (const std::size_t n : sizes) {
    // One extra sample in front: the span at +1 element starts 4 or 8 bytes past a 16-byte boundary.
    const auto all = wide_samples<T>(n + 1, seed + n);
    auto device = to_device(all);
    for (const std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
      const std::span<const T> host = std::span<const T>(all).subspan(offset, n);
      const std::span<const T> samples = device.const_span().subspan(offset, n);
      for (const reduce_op op : {reduce_op::sum, reduce_op::min, reduce_op::max}) {
        const A want = cpu::reduce(host, op, {strategy::sequential}).value;
        for (const strategy s : with_automatic(operation::reduce)) {
          SCOPED_TRACE(::testing::Message() << type_name<T>() << " n=" << n << " offset=" << offset << " "
                                            << op_name(op) << " " << to_string(s));
          const reduce_result<T> got = gpu::reduce(samples, op, {s});
          expect_chose(got.chose, s, operation::reduce);
          if (std::is_integral_v<T> || op != reduce_op::sum) {
            EXPECT_EQ(got.value, want);  // integers and min/max: bit-exact
          } else {
            expect_sum_within_bound<T>(got.value, host);
          }
        }
      }
    }
  }
}

TYPED_TEST(GpuReduce, AllEqualSamplesPutEveryThreadOnOneAddress) {
  // Every atomic of atomic hits the one result; the sums are exact in any order
  // (small integers, or halves whose partial sums all fit a float's significand).
  using T = TypeParam;
  using A = accumulator_t<T>;
  const std::size_t n = quick_mode() ? 4099 : (1u << 20) + 3;
  const T value = std::is_floating_point_v<T> ? T(0.5) : T(3);
  const std::vector<T> host(n, value);
  auto samples = to_device(host);
  for (const strategy s : with_automatic(operation::reduce)) {
    SCOPED_TRACE(to_string(s));
    EXPECT_EQ(gpu::reduce(samples.const_span(), reduce_op::sum, {s}).value, static_cast<A>(value) * static_cast<A>(n));
    EXPECT_EQ(gpu::reduce(samples.const_span(), reduce_op::min, {s}).value, static_cast<A>(value));
    EXPECT_EQ(gpu::reduce(samples.const_span(), reduce_op::max, {s}).value, static_cast<A>(value));
  }
}

TYPED_TEST(GpuReduce, EmptyInputGivesTheIdentity) {
  using T = TypeParam;
  using A = accumulator_t<T>;
  gpu::device_buffer<T> samples;
  for (const strategy s : with_automatic(operation::reduce)) {
    SCOPED_TRACE(to_string(s));
    EXPECT_EQ(gpu::reduce(samples.const_span(), reduce_op::sum, {s}).value, A{0});
    EXPECT_EQ(gpu::reduce(samples.const_span(), reduce_op::min, {s}).value, tally::detail::reduce_identity<T>(reduce_op::min));
    EXPECT_EQ(gpu::reduce(samples.const_span(), reduce_op::max, {s}).value, tally::detail::reduce_identity<T>(reduce_op::max));
  }
}

template <class T>
void expect_min_max_propagate_nan() {
  std::vector<T> host(100003, T(1.5));
  host[4242] = std::numeric_limits<T>::quiet_NaN();
  host[5] = T(-7);  // a smaller value before the NaN: the NaN must still win
  auto samples = to_device(host);
  for (const strategy s : with_automatic(operation::reduce)) {
    SCOPED_TRACE(type_name<T>() + " " + std::string(to_string(s)));
    EXPECT_TRUE(std::isnan(gpu::reduce(samples.const_span(), reduce_op::min, {s}).value));
    EXPECT_TRUE(std::isnan(gpu::reduce(samples.const_span(), reduce_op::max, {s}).value));
  }
  // Infinities are ordinary values for min/max.
  host[4242] = std::numeric_limits<T>::infinity();
  samples.upload(host);
  for (const strategy s : with_automatic(operation::reduce)) {
    EXPECT_EQ(gpu::reduce(samples.const_span(), reduce_op::max, {s}).value, std::numeric_limits<T>::infinity());
    EXPECT_EQ(gpu::reduce(samples.const_span(), reduce_op::min, {s}).value, T(-7));
  }
}

/// extremes_async's pair at the start of the workspace's scalar block, read back.
template <class T>
std::pair<accumulator_t<T>, accumulator_t<T>> extremes_of(std::span<const T> samples, gpu::workspace& ws) {
  using A = accumulator_t<T>;
  gpu::detail::extremes_async(samples, ws, nullptr);
  A pair[2];
  EXPECT_EQ(cudaMemcpy(pair, ws.scalar(), sizeof(pair), cudaMemcpyDeviceToHost), cudaSuccess);
  return {pair[0], pair[1]};
}

/// Equal values, or both NaN (min and max propagate NaN).
template <class A>
bool same_value(A got, A want) {
  if constexpr (std::is_floating_point_v<A>) {
    if (std::isnan(want)) return std::isnan(got);
  }
  return got == want;
}

TYPED_TEST(GpuReduce, ExtremesInOnePassMatchMinAndMaxOnTheCpu) {
  using T = TypeParam;
  gpu::workspace ws;
  for (const std::size_t n : sizes) {
    if (n == 0) continue;
    const auto all = wide_samples<T>(n + 1, seed + 3 * n);
    auto device = to_device(all);
    for (const std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
      SCOPED_TRACE(::testing::Message() << type_name<T>() << " n=" << n << " offset=" << offset);
      const std::span<const T> host = std::span<const T>(all).subspan(offset, n);
      const auto [low, high] = extremes_of(device.const_span().subspan(offset, n), ws);
      EXPECT_EQ(low, cpu::reduce(host, reduce_op::min, {strategy::sequential}).value);
      EXPECT_EQ(high, cpu::reduce(host, reduce_op::max, {strategy::sequential}).value);
    }
  }
  // The extremes at either end of the samples and in the middle; one sample.
  const std::size_t n = quick_mode() ? 4099 : (1u << 20) + 3;
  for (const std::size_t at : {std::size_t{0}, n / 2, n - 1}) {
    std::vector<T> host(n, T(5));
    host[at] = std::numeric_limits<T>::lowest();
    host[(at + n / 3) % n] = std::numeric_limits<T>::max();
    auto samples = to_device(host);
    const auto [low, high] = extremes_of(samples.const_span(), ws);
    EXPECT_EQ(low, static_cast<accumulator_t<T>>(std::numeric_limits<T>::lowest())) << "at " << at;
    EXPECT_EQ(high, static_cast<accumulator_t<T>>(std::numeric_limits<T>::max())) << "at " << at;
  }
}

template <class T>
void expect_extremes_propagate_nan() {
  gpu::workspace ws;
  std::vector<T> host(100003, T(1.5));
  host[5] = T(-7);
  host[99999] = std::numeric_limits<T>::infinity();
  auto samples = to_device(host);
  auto [low, high] = extremes_of(samples.const_span(), ws);
  EXPECT_EQ(low, T(-7));
  EXPECT_EQ(high, std::numeric_limits<T>::infinity());
  for (const std::size_t at : {std::size_t{0}, std::size_t{4242}, std::size_t{100002}}) {
    std::vector<T> with_nan = host;
    with_nan[at] = std::numeric_limits<T>::quiet_NaN();
    samples.upload(with_nan);
    std::tie(low, high) = extremes_of(samples.const_span(), ws);
    EXPECT_TRUE(std::isnan(low) && std::isnan(high)) << type_name<T>() << " NaN at " << at;
    EXPECT_TRUE(same_value(low, cpu::reduce(std::span<const T>(with_nan), reduce_op::min, {strategy::sequential}).value));
  }
}

TEST(GpuReduceSemantics, ExtremesPropagateNaNAndQueueBesideOtherCalls) {
  expect_extremes_propagate_nan<float>();
  expect_extremes_propagate_nan<double>();
  // Queued between other calls on one workspace, with no wait: each reads its own result.
  gpu::workspace ws;
  const auto host = wide_samples<std::int32_t>(100000, seed);
  auto samples = to_device(host);
  const std::span<const std::int32_t> span(host);
  for (int round = 0; round < 3; ++round) {
    (void)gpu::reduce_async(samples.const_span(), reduce_op::sum, ws, {}, nullptr);
    const auto [low, high] = extremes_of(samples.const_span(), ws);
    EXPECT_EQ(low, cpu::reduce(span, reduce_op::min, {strategy::sequential}).value);
    EXPECT_EQ(high, cpu::reduce(span, reduce_op::max, {strategy::sequential}).value);
    EXPECT_EQ(gpu::reduce(samples.const_span(), reduce_op::max, {}).value, high);
  }
}

TEST(GpuReduceSemantics, MinAndMaxPropagateNaN) {
  expect_min_max_propagate_nan<float>();
  expect_min_max_propagate_nan<double>();
}

TEST(GpuReduceSemantics, LaunchShapesGiveExactIntegerResults) {
  const auto host = wide_samples<std::int32_t>((1u << 18) + 3, seed);
  auto samples = to_device(host);
  const std::int64_t want = cpu::reduce(std::span<const std::int32_t>(host), reduce_op::sum, {strategy::sequential}).value;
  for (const strategy s : strategies_for(backend::gpu, operation::reduce)) {
    for (const auto& [blocks, threads] : {std::pair{1, 32}, std::pair{3, 96}, std::pair{0, 1024}}) {
      reduce_options options{s};
      options.max_blocks = blocks;
      options.block_threads = threads;
      EXPECT_EQ(gpu::reduce(samples.const_span(), reduce_op::sum, options).value, want)
          << to_string(s) << " blocks " << blocks << " threads " << threads;
    }
  }
}

TEST(GpuReduceSemantics, ReductionsQueuedOnOneWorkspaceEachStartTheirOwnResult) {
  // block_reduce_atomic's first finished block stores its fold as the result and the last puts
  // the workspace's words back: calls queued back to back with no wait between them, of every
  // op, launch shape and size (empty ones set the identity by a launch of their own), must each
  // give the CPU's answer. Each result is copied out on the stream before the next call.
  const auto host = wide_samples<std::int32_t>(quick_mode() ? 100003 : (1u << 21) + 7, seed + 5);
  auto samples = to_device(host);
  const std::span<const std::int32_t> all(host);
  gpu::workspace ws;
  const std::vector<std::size_t> sizes_queued{host.size(), 1, 0, 4097, host.size() / 3, 33};
  const std::vector<std::pair<int, int>> shapes{{0, 0}, {1, 32}, {3, 96}, {0, 1024}};
  struct queued {
    std::int64_t want;
    std::string what;
  };
  std::vector<queued> calls;
  const std::size_t most = sizes_queued.size() * shapes.size() * 4;
  gpu::device_buffer<std::int64_t> results(most);
  for (const auto& [blocks, threads] : shapes) {
    for (const std::size_t size : sizes_queued) {
      const std::size_t begin = (host.size() - size) / 2;
      const auto span = samples.const_span().subspan(begin, size);
      const auto part = all.subspan(begin, size);
      reduce_options options{strategy::block_reduce_atomic};
      options.max_blocks = blocks;
      options.block_threads = threads;
      const std::string shape = " blocks " + std::to_string(blocks) + " threads " + std::to_string(threads) +
                                " size " + std::to_string(size);
      for (const reduce_op op : {reduce_op::max, reduce_op::sum, reduce_op::min}) {
        (void)gpu::reduce_async(span, op, ws, options);
        ASSERT_EQ(cudaMemcpyAsync(results.data() + calls.size(), ws.scalar(), sizeof(std::int64_t),
                                  cudaMemcpyDeviceToDevice, nullptr),
                  cudaSuccess);
        calls.push_back({cpu::reduce(part, op, {strategy::sequential}).value, std::string(op_name(op)) + shape});
      }
      (void)gpu::count_if_async(span, compare_to<std::int32_t>{comparison::less, 0}, ws, options);
      ASSERT_EQ(cudaMemcpyAsync(results.data() + calls.size(), ws.scalar(), sizeof(std::int64_t),
                                cudaMemcpyDeviceToDevice, nullptr),
                cudaSuccess);
      calls.push_back({static_cast<std::int64_t>(std::count_if(part.begin(), part.end(), [](auto x) { return x < 0; })),
                       "count_if" + shape});
    }
  }
  std::vector<std::int64_t> got(calls.size());
  results.download(std::span<std::int64_t>(got.data(), got.size()));
  for (std::size_t i = 0; i < calls.size(); ++i) EXPECT_EQ(got[i], calls[i].want) << calls[i].what;
}

TEST(GpuReduceSemantics, BadLaunchOptionsAreRefusedNamingThem) {
  gpu::device_buffer<float> samples(16);
  samples.fill_bytes(0);
  for (const int threads : {-32, 16, 48, 2048}) {
    reduce_options options;
    options.block_threads = threads;
    try {
      (void)gpu::reduce(samples.const_span(), reduce_op::sum, options);
      ADD_FAILURE() << "block_threads " << threads << " accepted";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument);
      EXPECT_EQ(e.argument(), "block_threads");
    }
  }
  reduce_options options;
  options.max_blocks = -1;
  try {
    (void)gpu::count_if(samples.const_span(), compare_to<float>{comparison::equal, 0.0f}, options);
    ADD_FAILURE() << "max_blocks -1 accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "max_blocks");
  }
}

// ---- deterministic sums -----------------------------------------------------------------------

template <class T>
std::uint64_t bits_of(T x) {
  if constexpr (sizeof(T) == 4) {
    return std::bit_cast<std::uint32_t>(x);
  } else {
    return std::bit_cast<std::uint64_t>(x);
  }
}

/// Samples spread over many binades and both signs, so chunk grids differ and rounding happens.
template <class T>
std::vector<T> spread_samples(std::size_t n, std::uint64_t s) {
  std::mt19937_64 rng(s);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::vector<T> out(n);
  for (T& x : out) x = static_cast<T>(std::ldexp(unit(rng), static_cast<int>(rng() % 80) - 40));
  return out;
}

template <class T>
class GpuDeterministic : public ::testing::Test {};
using FloatingTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GpuDeterministic, FloatingTypes);

TYPED_TEST(GpuDeterministic, BitsMatchTheCpuAndDoNotDependOnRunLaunchStrategyOrAlignment) {
  using T = TypeParam;
  const std::size_t n = quick_mode() ? 100003 : (1u << 20) + 7;
  const auto all = spread_samples<T>(n + 1, seed);
  auto device = to_device(all);
  const std::span<const T> host = std::span<const T>(all).first(n);
  reduce_options cpu_options{strategy::sequential};
  cpu_options.deterministic = true;
  const T want = cpu::reduce(host, reduce_op::sum, cpu_options).value;
  // The error bound of reduce_options::deterministic, against long double (whose own error,
  // n 2^-64 sum|x|, is added).
  long double exact = 0;
  long double magnitude = 0;
  long double largest = 0;
  for (T x : host) {
    exact += x;
    magnitude += std::fabs(static_cast<long double>(x));
    largest = std::max(largest, std::fabs(static_cast<long double>(x)));
  }
  const int grid_bits = sizeof(T) == 4 ? 54 : 119;
  const long double bound = std::ldexp(static_cast<long double>(std::nextafter(std::fabs(want), T(INFINITY)) - std::fabs(want)), -1) +
                            static_cast<long double>(n) * std::ldexp(largest, -grid_bits) +
                            static_cast<long double>(n) * std::ldexp(magnitude, -63);
  EXPECT_LE(std::fabs(static_cast<long double>(want) - exact), bound);

  // The same values at an address 4 or 8 bytes further: other vector splits, the same chunks.
  gpu::device_buffer<T> shifted(n + 1);
  std::vector<T> shifted_host(n + 1, T(0));
  std::copy(host.begin(), host.end(), shifted_host.begin() + 1);
  shifted.upload(shifted_host);

  const std::vector<std::pair<int, int>> shapes = {{0, 0}, {1, 32}, {7, 96}, {0, 1024}};
  for (const strategy s : {strategy::automatic, strategy::block_reduce_atomic, strategy::two_phase}) {
    for (const auto& [blocks, threads] : shapes) {
      reduce_options options{s};
      options.deterministic = true;
      options.max_blocks = blocks;
      options.block_threads = threads;
      SCOPED_TRACE(::testing::Message() << type_name<T>() << " " << to_string(s) << " blocks " << blocks << " threads "
                                        << threads);
      for (int run = 0; run < 20; ++run) {
        const auto got = gpu::reduce(device.const_span().first(n), reduce_op::sum, options);
        ASSERT_EQ(bits_of(got.value), bits_of(want)) << "run " << run << ": " << got.value << " vs " << want;
        expect_chose(got.chose, s, operation::reduce);
      }
      EXPECT_EQ(bits_of(gpu::reduce(shifted.const_span().subspan(1), reduce_op::sum, options).value), bits_of(want));
    }
  }
}

TYPED_TEST(GpuDeterministic, EdgeSizesMatchTheCpu) {
  using T = TypeParam;
  constexpr auto chunk = static_cast<std::size_t>(tally::detail::fixed_point::chunk_size<T>);
  const auto all = spread_samples<T>(3 * chunk + 40, seed + 1);
  auto device = to_device(all);
  reduce_options options;
  options.deterministic = true;
  reduce_options cpu_options;  // the CPU's own automatic choice: two_phase is a GPU strategy
  cpu_options.deterministic = true;
  for (const std::size_t offset : {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
    for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{5}, chunk - 1, chunk,
                                chunk + 1, 2 * chunk + 3, 3 * chunk + 1}) {
      const auto host = std::span<const T>(all).subspan(offset, n);
      const T want = cpu::reduce(host, reduce_op::sum, cpu_options).value;
      for (const strategy s : {strategy::block_reduce_atomic, strategy::two_phase}) {
        options.algorithm = s;
        EXPECT_EQ(bits_of(gpu::reduce(device.const_span().subspan(offset, n), reduce_op::sum, options).value),
                  bits_of(want))
            << "n=" << n << " offset=" << offset << " " << to_string(s);
      }
    }
  }
}

TYPED_TEST(GpuDeterministic, NaNAndInfinitiesFollowTheRule) {
  using T = TypeParam;
  constexpr T inf = std::numeric_limits<T>::infinity();
  const std::size_t n = 70001;
  reduce_options options;
  options.deterministic = true;
  const auto sum_with = [&](std::vector<std::pair<std::size_t, T>> specials) {
    std::vector<T> host(n, T(1));
    for (const auto& [at, value] : specials) host[at] = value;
    auto samples = to_device(host);
    const T block = gpu::reduce(samples.const_span(), reduce_op::sum, options).value;
    EXPECT_EQ(bits_of(block), bits_of(cpu::reduce(std::span<const T>(host), reduce_op::sum, options).value));
    options.algorithm = strategy::two_phase;
    EXPECT_EQ(bits_of(gpu::reduce(samples.const_span(), reduce_op::sum, options).value), bits_of(block));
    options.algorithm = strategy::automatic;
    return block;
  };
  EXPECT_EQ(sum_with({}), T(n));
  EXPECT_TRUE(std::isnan(sum_with({{9, std::numeric_limits<T>::quiet_NaN()}})));
  EXPECT_TRUE(std::isnan(sum_with({{9, inf}, {60000, -inf}})));
  EXPECT_EQ(sum_with({{9, inf}, {60000, inf}}), inf);
  EXPECT_EQ(sum_with({{n - 1, -inf}}), -inf);
  EXPECT_TRUE(std::isnan(sum_with({{0, -inf}, {1, std::numeric_limits<T>::quiet_NaN()}})));
  // A finite sum beyond the range rounds to infinity; the exact sum of the finite values is used.
  const T big = std::numeric_limits<T>::max();
  EXPECT_EQ(sum_with({{3, big}, {40000, big}}), inf);
  // Samples far below the largest of their chunk round away (the stated bound): the chunk of
  // +-max loses its ones, the other chunks keep theirs.
  constexpr auto chunk = static_cast<std::size_t>(tally::detail::fixed_point::chunk_size<T>);
  EXPECT_EQ(sum_with({{3, big}, {4, -big}}), T(n - chunk));
}

TEST(GpuDeterministicOptions, StrategiesThatCannotHonourItAreRefusedNamingTheOption) {
  const std::vector<float> host(1000, 0.25f);
  auto samples = to_device(host);
  for (const strategy s : {strategy::atomic, strategy::atomic_per_thread, strategy::cub}) {
    reduce_options options{s};
    options.deterministic = true;
    try {
      (void)gpu::reduce(samples.const_span(), reduce_op::sum, options);
      ADD_FAILURE() << to_string(s) << " accepted deterministic";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::not_supported) << e.what();
      EXPECT_EQ(e.argument(), "deterministic") << e.what();
      EXPECT_NE(std::string(e.what()).find(to_string(s)), std::string::npos) << e.what();
    }
    // min/max are exact already: deterministic changes nothing there and is accepted.
    EXPECT_EQ(gpu::reduce(samples.const_span(), reduce_op::max, options).value, 0.25f);
  }
  // Integer sums: a no-op.
  const std::vector<std::int32_t> ints(5000, -3);
  auto int_samples = to_device(ints);
  reduce_options options{strategy::cub};
  options.deterministic = true;
  EXPECT_EQ(gpu::reduce(int_samples.const_span(), reduce_op::sum, options).value, -15000);
}

// ---- count_if and find_first_if ---------------------------------------------------------------

TEST(GpuCounting, CountIfMatchesTheCpuReferenceForEveryStrategy) {
  for (const std::size_t n : sizes) {
    const auto all = make_samples<std::int32_t>(pattern::uniform, n + 1, -1000.0, 1000.0, seed + n);
    auto device = to_device(all);
    for (const std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
      const auto host = std::span<const std::int32_t>(all).subspan(offset, n);
      for (const comparison c :
           {comparison::less, comparison::equal, comparison::greater_equal, comparison::not_equal}) {
        const compare_to<std::int32_t> predicate{c, 17};
        const auto want = static_cast<std::uint64_t>(std::count_if(host.begin(), host.end(), predicate));
        for (const strategy s : with_automatic(operation::count_if)) {
          const auto got = gpu::count_if(device.const_span().subspan(offset, n), predicate, {s});
          EXPECT_EQ(got.count, want) << "n=" << n << " offset=" << offset << " " << to_string(s) << " comparison "
                                     << static_cast<int>(c);
          expect_chose(got.chose, s, operation::count_if);
        }
      }
    }
  }
}

TEST(GpuCounting, CountIfOnBytesAndFloatsWithNaN) {
  const std::size_t n = quick_mode() ? 5003 : (1u << 20) + 9;
  const auto bytes = make_samples<std::uint8_t>(pattern::uniform, n, 0.0, 256.0, seed);
  auto device_bytes = to_device(bytes);
  auto floats = make_samples<float>(pattern::with_outliers, n, 0.0, 1.0, seed);
  auto device_floats = to_device(floats);
  const compare_to<std::uint8_t> is_small{comparison::less, 100};
  const compare_to<float> not_half{comparison::not_equal, 0.5f};  // NaN != 0.5 is true
  const auto want_bytes = static_cast<std::uint64_t>(std::count_if(bytes.begin(), bytes.end(), is_small));
  const auto want_floats = static_cast<std::uint64_t>(std::count_if(floats.begin(), floats.end(), not_half));
  for (const strategy s : with_automatic(operation::count_if)) {
    EXPECT_EQ(gpu::count_if(device_bytes.const_span().subspan(1), is_small, {s}).count,
              want_bytes - (is_small(bytes[0]) ? 1 : 0))
        << to_string(s);
    EXPECT_EQ(gpu::count_if(device_floats.const_span(), not_half, {s}).count, want_floats) << to_string(s);
  }
}

TEST(GpuCounting, CountIfCountsEverySampleWhenAllMatch) {
  const std::size_t n = quick_mode() ? 4099 : (1u << 20) + 1;
  const std::vector<double> host(n, 2.0);
  auto samples = to_device(host);
  for (const strategy s : with_automatic(operation::count_if)) {
    EXPECT_EQ(gpu::count_if(samples.const_span(), compare_to<double>{comparison::equal, 2.0}, {s}).count, n)
        << to_string(s);
    EXPECT_EQ(gpu::count_if(samples.const_span(), compare_to<double>{comparison::less, 2.0}, {s}).count, 0u)
        << to_string(s);
  }
}

TEST(GpuCounting, FindFirstIfReturnsTheFirstMatchOrTheSizeForEveryStrategy) {
  const std::size_t n = quick_mode() ? (1u << 16) + 11 : (1u << 22) + 11;
  std::vector<float> host(n, 0.0f);
  gpu::device_buffer<float> samples(n);
  const compare_to<float> predicate{comparison::greater, 0.5f};
  for (const std::size_t first : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, std::size_t{4096},
                                  std::size_t{8192}, n / 100, n / 2, n - 1, n}) {
    std::fill(host.begin(), host.end(), 0.0f);
    if (first < n) {
      host[first] = 1.0f;
      for (std::size_t later = first + 1; later < n; later += 9973) host[later] = 2.0f;  // later matches lose
    }
    samples.upload(host);
    for (const strategy s : with_automatic(operation::find_first_if)) {
      const auto got = gpu::find_first_if(samples.const_span(), predicate, {s});
      EXPECT_EQ(got.index, static_cast<std::int64_t>(first)) << "first match at " << first << " " << to_string(s);
      expect_chose(got.chose, s, operation::find_first_if);
      // At +1 element: indices shift down by one, a match at 0 drops out.
      const auto expected_shifted = first == 0 ? static_cast<std::int64_t>(std::find_if(host.begin() + 1, host.end(), predicate) - host.begin() - 1)
                                               : static_cast<std::int64_t>(first) - 1;
      EXPECT_EQ(gpu::find_first_if(samples.const_span().subspan(1), predicate, {s}).index, expected_shifted)
          << "misaligned, first match at " << first << " " << to_string(s);
    }
  }
  gpu::device_buffer<float> empty;
  for (const strategy s : with_automatic(operation::find_first_if)) {
    EXPECT_EQ(gpu::find_first_if(empty.const_span(), predicate, {s}).index, 0) << to_string(s);
  }
}

TEST(GpuCounting, FindFirstIfFindsTheFirstOfManyMatchesUnderAnyLaunchShape) {
  const std::size_t n = quick_mode() ? 100000 : (1u << 21) + 5;
  std::vector<std::int64_t> host(n, 0);
  for (std::size_t i = 30011; i < n; i += 7) host[i] = 5;  // many matches, the first at 30011
  auto samples = to_device(host);
  const compare_to<std::int64_t> predicate{comparison::equal, 5};
  for (const strategy s : strategies_for(backend::gpu, operation::find_first_if)) {
    for (const auto& [blocks, threads] : {std::pair{1, 32}, std::pair{5, 160}, std::pair{0, 0}}) {
      reduce_options options{s};
      options.max_blocks = blocks;
      options.block_threads = threads;
      EXPECT_EQ(gpu::find_first_if(samples.const_span(), predicate, options).index, 30011)
          << to_string(s) << " blocks " << blocks << " threads " << threads;
    }
  }
}

// The search keeps two words of the workspace between calls (its running minimum and its count of
// finished blocks) and puts them back itself; a call that left either wrong would make the next
// call on that workspace answer wrong. So: one workspace, calls queued without waiting, every
// kind of answer (a match, none, an empty span), launch shapes from 1 block to the full grid, and
// other operations in between that use the same scalar block.
TEST(GpuCounting, FindFirstIfCallsOnOneWorkspaceDoNotDisturbEachOther) {
  const std::size_t n = quick_mode() ? 200003 : (1u << 22) + 3;
  std::vector<std::int32_t> host(n, 0);
  const std::vector<std::size_t> matches{0, 17, 4096, n / 100, n / 3, n - 1};
  for (const std::size_t at : matches) host[at] = 9;
  auto samples = to_device(host);
  const compare_to<std::int32_t> is_nine{comparison::equal, 9};
  gpu::workspace ws;
  const auto expect_first = [&](std::size_t begin, std::size_t size, const reduce_options& options,
                                const std::string& what) {
    const auto span = samples.const_span().subspan(begin, size);
    (void)gpu::find_first_if_async(span, is_nine, ws, options);
    const auto first = std::find(host.begin() + static_cast<std::ptrdiff_t>(begin),
                                 host.begin() + static_cast<std::ptrdiff_t>(begin + size), 9);
    const auto want = static_cast<std::uint64_t>(first - host.begin()) - begin;
    EXPECT_EQ(ws.read_scalar(nullptr), want) << what << ", span [" << begin << ", " << begin + size << ")";
  };
  for (const auto& [blocks, threads] : {std::pair{0, 0}, std::pair{1, 32}, std::pair{3, 96}, std::pair{0, 1024}}) {
    reduce_options options{strategy::atomic};
    options.max_blocks = blocks;
    options.block_threads = threads;
    const std::string shape = "blocks " + std::to_string(blocks) + " threads " + std::to_string(threads);
    for (const std::size_t at : matches) {
      expect_first(at, n - at, options, shape);          // a match at the start
      expect_first(at + 1, n - at - 1, options, shape);  // the next match, or none after the last
    }
    expect_first(1, 16, options, shape);  // no match in a short span
    expect_first(5, 0, options, shape);   // empty
    // Another operation on the same workspace between two searches.
    (void)gpu::count_if_async(samples.const_span(), is_nine, ws, {});
    EXPECT_EQ(ws.read_scalar(nullptr), matches.size()) << shape;
    expect_first(0, n, options, shape);
  }
  // Searches queued back to back with no wait between them: each must find its own answer, so the
  // last one read must be right and so must a search after it.
  for (int round = 0; round < 20; ++round) {
    const std::size_t begin = matches[static_cast<std::size_t>(round) % matches.size()] + (round % 2);
    (void)gpu::find_first_if_async(samples.const_span().subspan(begin), is_nine, ws, {strategy::atomic});
  }
  const std::size_t last_begin = matches[19 % matches.size()] + 1;
  const auto last_first = std::find(host.begin() + static_cast<std::ptrdiff_t>(last_begin), host.end(), 9);
  EXPECT_EQ(ws.read_scalar(nullptr), static_cast<std::uint64_t>(last_first - host.begin()) - last_begin);
  expect_first(n / 100 + 1, n / 3 - n / 100, {strategy::atomic}, "after the queued searches");
}

}  // namespace
}  // namespace tally::test
