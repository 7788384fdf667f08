// GPU reduce, count_if and find_first_if against the CPU reference: integers and min/max exact,
// floating sums within a stated bound of a long double sum, every strategy, edge sizes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/gpu_test_support.hpp"

namespace tally::test {
namespace {

constexpr std::uint64_t seed = 77;
const std::vector<std::size_t> sizes =
    quick_mode() ? std::vector<std::size_t>{0, 1, 33, 4097} : std::vector<std::size_t>{0, 1, 2, 33, 4097, (1u << 20) + 5};

std::vector<strategy> gpu_reduce_strategies() {
  std::vector<strategy> out{strategy::automatic};
  for (strategy s : strategies_for(backend::gpu, operation::reduce)) out.push_back(s);
  return out;
}

template <class T>
class GpuReduce : public ::testing::Test {};
using ReduceTypes = ::testing::Types<std::int32_t, std::uint32_t, std::int64_t, float, double>;
TYPED_TEST_SUITE(GpuReduce, ReduceTypes);

TYPED_TEST(GpuReduce, EveryStrategyMatchesTheCpuReference) {
  using T = TypeParam;
  using A = accumulator_t<T>;
  for (const std::size_t n : sizes) {
    // Large magnitudes: int32 sums overflow 32 bits, so the 64-bit accumulator is exercised.
    const double top = std::is_floating_point_v<T> ? 1000.0 : 2.0e9;
    const double bottom = std::is_signed_v<T> ? -top : 0.0;
    const auto host = make_samples<T>(pattern::uniform, n, bottom, std::min(top, static_cast<double>(std::numeric_limits<T>::max())), seed + n);
    auto samples = to_device(host);
    for (const reduce_op op : {reduce_op::sum, reduce_op::min, reduce_op::max}) {
      const A want = cpu::reduce(std::span<const T>(host), op, {strategy::sequential}).value;
      for (const strategy s : gpu_reduce_strategies()) {
        SCOPED_TRACE(::testing::Message() << type_name<T>() << " n=" << n << " op=" << static_cast<int>(op) << " "
                                          << to_string(s));
        const reduce_result<T> got = gpu::reduce(samples.const_span(), op, {s});
        if (std::is_integral_v<T> || op != reduce_op::sum) {
          EXPECT_EQ(got.value, want);
        } else {
          // Any summation order is within n * eps * sum|x| of the exact sum.
          long double exact = 0;
          long double magnitude = 0;
          for (T x : host) {
            exact += x;
            magnitude += std::fabs(static_cast<long double>(x));
          }
          const long double bound = static_cast<long double>(n) * std::numeric_limits<T>::epsilon() * magnitude;
          EXPECT_LE(std::fabs(static_cast<long double>(got.value) - exact), bound);
        }
      }
    }
  }
}

TEST(GpuReduceSemantics, MinAndMaxPropagateNaN) {
  std::vector<float> host(100000, 1.5f);
  host[4242] = std::numeric_limits<float>::quiet_NaN();
  auto samples = to_device(host);
  for (const strategy s : gpu_reduce_strategies()) {
    EXPECT_TRUE(std::isnan(gpu::reduce(samples.const_span(), reduce_op::min, {s}).value)) << to_string(s);
    EXPECT_TRUE(std::isnan(gpu::reduce(samples.const_span(), reduce_op::max, {s}).value)) << to_string(s);
  }
}

TEST(GpuReduceSemantics, EmptyInputGivesTheIdentity) {
  gpu::device_buffer<double> samples;
  for (const strategy s : gpu_reduce_strategies()) {
    EXPECT_EQ(gpu::reduce(samples.const_span(), reduce_op::sum, {s}).value, 0.0);
    EXPECT_EQ(gpu::reduce(samples.const_span(), reduce_op::min, {s}).value, std::numeric_limits<double>::infinity());
    EXPECT_EQ(gpu::reduce(samples.const_span(), reduce_op::max, {s}).value, -std::numeric_limits<double>::infinity());
  }
}

TEST(GpuCounting, CountIfMatchesTheCpuReference) {
  for (const std::size_t n : sizes) {
    const auto host = make_samples<std::int32_t>(pattern::uniform, n, -1000.0, 1000.0, seed + n);
    auto samples = to_device(host);
    for (const comparison c : {comparison::less, comparison::equal, comparison::greater_equal, comparison::not_equal}) {
      const compare_to<std::int32_t> predicate{c, 17};
      const auto want = static_cast<std::uint64_t>(std::count_if(host.begin(), host.end(), predicate));
      for (const strategy s : gpu_reduce_strategies()) {
        EXPECT_EQ(gpu::count_if(samples.const_span(), predicate, {s}).count, want)
            << "n=" << n << " " << to_string(s) << " comparison " << static_cast<int>(c);
      }
    }
  }
}

TEST(GpuCounting, FindFirstIfReturnsTheFirstMatchOrTheSize) {
  const std::size_t n = quick_mode() ? (1u << 16) + 11 : (1u << 22) + 11;
  std::vector<float> host(n, 0.0f);
  gpu::device_buffer<float> samples(n);
  const compare_to<float> predicate{comparison::greater, 0.5f};
  for (const std::size_t first : {std::size_t{0}, std::size_t{1}, std::size_t{8191}, std::size_t{8192}, n / 100,
                                  n / 2, n - 1, n}) {
    std::fill(host.begin(), host.end(), 0.0f);
    if (first < n) {
      host[first] = 1.0f;
      for (std::size_t later = first + 1; later < n; later += 9973) host[later] = 2.0f;  // later matches lose
    }
    samples.upload(host);
    const auto got = gpu::find_first_if(samples.const_span(), predicate);
    EXPECT_EQ(got.index, static_cast<std::int64_t>(first)) << "first match at " << first;
  }
  gpu::device_buffer<float> empty;
  EXPECT_EQ(gpu::find_first_if(empty.const_span(), predicate).index, 0);
}

}  // namespace
}  // namespace tally::test
