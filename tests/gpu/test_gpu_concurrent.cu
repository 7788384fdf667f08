// The GPU backend called from 8 host threads at once, in every way a caller may: each thread on
// a stream and workspace of its own, threads sharing the default stream with workspaces of their
// own, and the waiting calls (the thread's own waiting workspace) on the default stream and on
// their own streams. Every result must equal the one computed before the threads started.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "common/concurrent_work.hpp"
#include "common/quick_mode.hpp"
#include "tally/gpu.hpp"

namespace {

using tally::strategy;
using tally_test::concurrent_inputs;
namespace gpu = tally::gpu;

/// How a thread calls the library.
enum class calling { own_stream, default_stream_own_workspace, waiting_default_stream, waiting_own_stream };
constexpr int ways_of_calling = 4;

const char* to_string(calling how) {
  switch (how) {
    case calling::own_stream: return "own stream and workspace";
    case calling::default_stream_own_workspace: return "default stream, own workspace";
    case calling::waiting_default_stream: return "waiting calls on the default stream";
    case calling::waiting_own_stream: return "waiting calls on its own stream";
  }
  return "?";
}

void check(cudaError_t status, const char* what) { ASSERT_EQ(status, cudaSuccess) << what << ": " << cudaGetErrorName(status); }

/// One thread's device copies of its inputs, its stream (non-blocking, so it runs beside every
/// other thread's) and its workspace.
struct thread_state {
  explicit thread_state(const concurrent_inputs& in)
      : ints(std::span<const std::int32_t>(in.ints)),
        floats(std::span<const float>(in.floats)),
        small(std::span<const std::uint16_t>(in.small)),
        weights(std::span<const float>(in.weights)) {
    check(cudaStreamCreateWithFlags(&own_stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }
  ~thread_state() { (void)cudaStreamDestroy(own_stream); }

  gpu::device_buffer<std::int32_t> ints;
  gpu::device_buffer<float> floats;
  gpu::device_buffer<std::uint16_t> small;
  gpu::device_buffer<float> weights;
  cudaStream_t own_stream = nullptr;
  gpu::workspace ws;
};

/// Copies a device array back on `stream` and waits for it (no device-wide synchronization, which
/// would hide a missing wait).
template <class T>
std::vector<T> copy_back(const gpu::device_buffer<T>& buffer, cudaStream_t stream) {
  std::vector<T> host(buffer.size());
  check(cudaMemcpyAsync(host.data(), buffer.data(), buffer.size() * sizeof(T), cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return host;
}

template <class T>
gpu::device_buffer<T> poisoned(std::size_t size, cudaStream_t stream) {
  gpu::device_buffer<T> buffer(size);
  check(cudaMemsetAsync(buffer.data(), 0xab, size * sizeof(T), stream), "cudaMemsetAsync");
  return buffer;
}

void run_every_call(const concurrent_inputs& in, thread_state& state, calling how, int thread, int round) {
  SCOPED_TRACE("thread " + std::to_string(thread) + ", round " + std::to_string(round) + ", " + to_string(how));
  const bool waiting = how == calling::waiting_default_stream || how == calling::waiting_own_stream;
  cudaStream_t stream = (how == calling::own_stream || how == calling::waiting_own_stream) ? state.own_stream : nullptr;
  // The even-bin histograms take every GPU strategy in turn, so different strategies run side by side.
  const auto all = tally::strategies_for(tally::backend::gpu, tally::operation::histogram);
  const strategy even_strategy = all[static_cast<std::size_t>(thread + 3 * round) % all.size()];
  // A call's result, by the waiting call or by the async one and a read of the workspace's word.
  const auto histogram = [&](auto async_call, auto waiting_call) -> tally::histogram_result {
    if (waiting) return waiting_call();
    const tally::choice chose = async_call(state.ws);
    return {chose, state.ws.read_scalar(stream)};
  };

  auto counts = poisoned<std::uint64_t>(static_cast<std::size_t>(in.int_bins.num_bins), stream);
  const tally::histogram_options even_options{even_strategy};
  const auto even = histogram(
      [&](gpu::workspace& ws) {
        return gpu::histogram_even_async(state.ints.const_span(), counts.span(), in.int_bins, ws, even_options, stream);
      },
      [&] { return gpu::histogram_even(state.ints.const_span(), counts.span(), in.int_bins, even_options, stream); });
  EXPECT_EQ(copy_back(counts, stream), in.even.counts) << "histogram_even with " << tally::to_string(even.chose.used);
  EXPECT_EQ(even.left_out, in.even.left_out);

  auto range_counts = poisoned<std::uint32_t>(in.edges.size() - 1, stream);
  const std::span<const double> edges(in.edges);
  const auto range = histogram(
      [&](gpu::workspace& ws) {
        return gpu::histogram_range_async(state.floats.const_span(), range_counts.span(), edges, ws, {}, stream);
      },
      [&] { return gpu::histogram_range(state.floats.const_span(), range_counts.span(), edges, {}, stream); });
  const std::vector<std::uint32_t> got_range = copy_back(range_counts, stream);
  EXPECT_EQ(std::vector<std::uint64_t>(got_range.begin(), got_range.end()), in.range.counts)
      << "histogram_range with " << tally::to_string(range.chose.used);
  EXPECT_EQ(range.left_out, in.range.left_out);

  auto bincounts = poisoned<std::uint64_t>(static_cast<std::size_t>(in.bincount_bins), stream);
  const auto bincount = histogram(
      [&](gpu::workspace& ws) { return gpu::bincount_async(state.small.const_span(), bincounts.span(), ws, {}, stream); },
      [&] { return gpu::bincount(state.small.const_span(), bincounts.span(), {}, stream); });
  EXPECT_EQ(copy_back(bincounts, stream), in.bincount.counts) << "bincount with " << tally::to_string(bincount.chose.used);
  EXPECT_EQ(bincount.left_out, in.bincount.left_out);

  auto sums = poisoned<double>(static_cast<std::size_t>(in.int_bins.num_bins), stream);
  const tally::histogram_options deterministic{strategy::automatic, tally::upper_edge::exclusive, true};
  const auto weighted = histogram(
      [&](gpu::workspace& ws) {
        return gpu::histogram_even_async(state.ints.const_span(), state.weights.const_span(), sums.span(), in.int_bins,
                                         ws, deterministic, stream);
      },
      [&] {
        return gpu::histogram_even(state.ints.const_span(), state.weights.const_span(), sums.span(), in.int_bins,
                                   deterministic, stream);
      });
  EXPECT_TRUE(tally_test::same_bits(copy_back(sums, stream), in.deterministic_weighted))
      << "deterministic weighted histogram with " << tally::to_string(weighted.chose.used);
  EXPECT_EQ(weighted.left_out, in.weighted_left_out);

  // Reductions and searches: the result's bits, from the waiting call or the workspace's word.
  const auto scalar = [&](auto async_call, auto waiting_value) -> std::uint64_t {
    if (waiting) return waiting_value();
    (void)async_call(state.ws);
    return state.ws.read_scalar(stream);
  };
  const std::int64_t int_sum = static_cast<std::int64_t>(scalar(
      [&](gpu::workspace& ws) { return gpu::reduce_async(state.ints.const_span(), tally::reduce_op::sum, ws, {}, stream); },
      [&] {
        return static_cast<std::uint64_t>(gpu::reduce(state.ints.const_span(), tally::reduce_op::sum, {}, stream).value);
      }));
  EXPECT_EQ(int_sum, in.int_sum);
  const tally::reduce_options deterministic_sum{strategy::automatic, true};
  // The float sum's bits: the workspace's word holds the accumulator's bits in its low bytes.
  using float_sum_t = tally::accumulator_t<float>;
  float_sum_t float_sum{};
  if (waiting) {
    float_sum = gpu::reduce(state.floats.const_span(), tally::reduce_op::sum, deterministic_sum, stream).value;
  } else {
    (void)gpu::reduce_async(state.floats.const_span(), tally::reduce_op::sum, state.ws, deterministic_sum, stream);
    const std::uint64_t bits = state.ws.read_scalar(stream);
    std::memcpy(&float_sum, &bits, sizeof(float_sum));
  }
  EXPECT_EQ(std::bit_cast<std::uint64_t>(static_cast<double>(float_sum)),
            std::bit_cast<std::uint64_t>(in.deterministic_float_sum));
  const std::uint64_t count = scalar(
      [&](gpu::workspace& ws) { return gpu::count_if_async(state.ints.const_span(), in.above, ws, {}, stream); },
      [&] { return gpu::count_if(state.ints.const_span(), in.above, {}, stream).count; });
  EXPECT_EQ(count, in.count_above);
  const std::uint64_t first = scalar(
      [&](gpu::workspace& ws) { return gpu::find_first_if_async(state.ints.const_span(), in.above, ws, {}, stream); },
      [&] { return static_cast<std::uint64_t>(gpu::find_first_if(state.ints.const_span(), in.above, {}, stream).index); });
  EXPECT_EQ(static_cast<std::int64_t>(first), in.first_above);
}

/// One thread's calls: every way of calling in turn, starting from its own (rounds of them).
void run_thread(const concurrent_inputs& in, int thread, int rounds) {
  thread_state state(in);
  for (int round = 0; round < rounds; ++round) {
    run_every_call(in, state, static_cast<calling>((thread + round) % ways_of_calling), thread, round);
  }
}

std::uint64_t test_seed() { return 0x5eed0000 + (tally::test::quick_mode() ? 1 : 0); }
std::size_t test_samples() { return tally::test::quick_mode() ? std::size_t{1} << 16 : std::size_t{1} << 22; }
int test_rounds() { return tally::test::quick_mode() ? 1 : ways_of_calling; }

TEST(GpuConcurrentCallers, EightHostThreadsAtOnceGetExactResultsInEveryWayOfCalling) {
  std::vector<concurrent_inputs> inputs;
  for (int t = 0; t < tally_test::concurrent_threads; ++t) {
    inputs.push_back(tally_test::make_concurrent_inputs(t, test_samples(), test_seed()));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < tally_test::concurrent_threads; ++t) {
    // Every thread meets every way of calling, while the others call in the other ways.
    threads.emplace_back([&inputs, t] { run_thread(inputs[static_cast<std::size_t>(t)], t, test_rounds()); });
  }
  for (std::thread& thread : threads) thread.join();
}

// Each thread's calls alone, one test a thread. Under racecheck this checks what the kernels do
// inside their blocks apart from the concurrent launches above, which the sanitizer may fail to
// track ("failure to track a kernel launch", seen on an H200); one test a thread, so that each
// can also run in a process of its own (--gtest_filter).
class GpuOneCallerAtATime : public ::testing::TestWithParam<int> {};

TEST_P(GpuOneCallerAtATime, GetsTheSameExactResults) {
  const int thread = GetParam();
  run_thread(tally_test::make_concurrent_inputs(thread, test_samples(), test_seed()), thread, test_rounds());
}

INSTANTIATE_TEST_SUITE_P(Thread, GpuOneCallerAtATime, ::testing::Range(0, tally_test::concurrent_threads));

}  // namespace
