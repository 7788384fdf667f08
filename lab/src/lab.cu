// The GPU runs of tally::lab (tally/lab.hpp): allocates, zeroes, launches through the lab dispatch,
// times with CUDA events, copies back and checks with the host checks of lab_common.cpp.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "event_pair.hpp"
#include "lab_dispatch.cuh"
#include "tally/detail/dispatch/device_properties.cuh"
#include "tally/error.hpp"
#include "tally/gpu.hpp"
#include "tally/lab.hpp"

namespace tally::lab {

using gpu::device_buffer;
using gpu::detail::check_cuda;
using gpu::detail::event_pair;

namespace {

std::string launch_name(const contention_case& c) {
  return "contention kernel (" + std::string(to_string(c.op)) + ", " + std::string(to_string(c.memory)) + ", " +
         std::string(to_string(c.scope)) + " scope, aggregation " + std::string(to_string(c.aggregate)) + ")";
}

}  // namespace

contention_result run_contention(const contention_case& c, int runs, int warmup) {
  validate_contention_case(c);
  if (runs < 1) throw_invalid_argument("tally::lab::run_contention", "runs", "must be >= 1");
  if (warmup < 0) throw_invalid_argument("tally::lab::run_contention", "warmup", "must be >= 0");
  contention_result result;
  const bool shared = c.memory == memory_space::shared;
  if (shared) {
    tally::detail::device_properties props;
    check_cuda(tally::detail::current_device_properties(props), "querying the device");
    result.shared_bytes = static_cast<std::int64_t>(detail::lab::contention_shared_bytes(c.addresses));
    if (static_cast<std::size_t>(result.shared_bytes) > props.shared_memory_per_block_optin) {
      result.not_run = "does not fit: " + std::to_string(c.addresses) + " words need " +
                       std::to_string(result.shared_bytes / 1024) + " KiB of shared memory per block, the device " +
                       "allows " + std::to_string(props.shared_memory_per_block_optin / 1024) + " KiB";
      return result;
    }
  }
  const contention_expectation want = expected_contention(c);
  const bool exch = c.op == atomic_op::exch;
  // global_private: a slice of A words per block (validate_contention_case keeps blocks x A <= 2^28).
  const std::int64_t word_count = c.memory == memory_space::global_private ? c.blocks * c.addresses : c.addresses;
  device_buffer<std::uint32_t> words(static_cast<std::size_t>(word_count));
  device_buffer<std::uint32_t> block_words(shared && exch ? static_cast<std::size_t>(c.blocks * c.addresses) : 0);
  device_buffer<unsigned long long> returned(2);

  detail::lab::contention_launch launch;
  launch.words = words.data();
  launch.block_words = block_words.data();
  launch.returned = returned.data();
  launch.addresses = static_cast<unsigned>(c.addresses);
  launch.blocks = static_cast<unsigned>(c.blocks);
  launch.block_threads = c.block_threads;
  launch.ops_per_thread = static_cast<unsigned>(c.ops_per_thread);

  event_pair events;
  const cudaStream_t stream = nullptr;
  contention_outcome got;
  for (int run = 0; run < warmup + runs; ++run) {
    // Zeroed before the first event: only the kernel is timed. (block_words is written whole.)
    check_cuda(cudaMemsetAsync(words.data(), 0, words.size() * sizeof(std::uint32_t), stream), "cudaMemsetAsync");
    check_cuda(cudaMemsetAsync(returned.data(), 0, 2 * sizeof(unsigned long long), stream), "cudaMemsetAsync");
    check_cuda(cudaEventRecord(events.start(), stream), "cudaEventRecord");
    const cudaError_t launched =
        detail::lab::launch_contention(c.op, c.memory, c.scope, c.aggregate, launch, stream);
    if (launched == cudaErrorInvalidConfiguration && shared) {
      result.not_run = "does not fit: no block of " + std::to_string(c.block_threads) + " threads with " +
                       std::to_string(result.shared_bytes / 1024) +
                       " KiB of shared memory is resident on a multiprocessor";
      (void)cudaGetLastError();
      return result;
    }
    check_cuda(launched, launch_name(c));
    check_cuda(cudaEventRecord(events.stop(), stream), "cudaEventRecord");
    const double ms = events.elapsed_ms();
    check_cuda(cudaGetLastError(), launch_name(c));

    got.words.resize(words.size());
    words.download(got.words);
    if (shared && exch) {
      got.block_words.resize(block_words.size());
      block_words.download(got.block_words);
    }
    unsigned long long sums[2] = {0, 0};
    returned.download(std::span<unsigned long long>(sums, 2));
    got.returned_sum = sums[0];
    got.returned_square_sum = sums[1];
    if (const auto wrong = check_contention(c, want, got)) {
      result.wrong = (run < warmup ? "warm-up run " + std::to_string(run) : "run " + std::to_string(run - warmup)) +
                     ": " + *wrong;
      result.times_ms.clear();
      return result;
    }
    if (run >= warmup) result.times_ms.push_back(ms);
  }
  return result;
}

race_count count_with_threads(std::int64_t threads, bool racy) {
  if (threads < 1 || threads > (std::int64_t{1} << 32)) {
    throw_invalid_argument("tally::lab::count_with_threads", "threads",
                           "must be between 1 and 2^32 (got " + std::to_string(threads) + ")");
  }
  device_buffer<unsigned long long> counter(1);
  check_cuda(cudaMemset(counter.data(), 0, sizeof(unsigned long long)), "cudaMemset");
  check_cuda(detail::lab::launch_counter(counter.data(), threads, racy, nullptr), "counter kernel");
  check_cuda(cudaDeviceSynchronize(), "counter kernel");
  unsigned long long value = 0;
  counter.download(std::span<unsigned long long>(&value, 1));
  race_count out;
  out.expected = static_cast<std::uint64_t>(threads);
  out.actual = value;
  return out;
}

namespace {

/// Throws naming the argument unless `samples` (1 to 2^31 of them) all lie in [0, bins) with
/// 1 <= bins <= max_bins, bins being reference.size().
void check_histogram_arguments(const char* function, std::span<const std::int32_t> samples,
                               std::span<const std::uint64_t> reference, std::int64_t max_bins) {
  const auto bins = static_cast<std::int64_t>(reference.size());
  if (bins < 1 || bins > max_bins) {
    throw_invalid_argument(function, "reference",
                           "must have between 1 and " + std::to_string(max_bins) + " bins (got " +
                               std::to_string(bins) + ")");
  }
  if (samples.empty() || samples.size() > (std::size_t{1} << 31)) {
    throw_invalid_argument(function, "samples", "must hold between 1 and 2^31 samples");
  }
  const auto outside = std::find_if(samples.begin(), samples.end(), [&](std::int32_t s) { return s < 0 || s >= bins; });
  if (outside != samples.end()) {
    throw_invalid_argument(function, "samples",
                           "must lie in [0, bins): sample " + std::to_string(outside - samples.begin()) + " is " +
                               std::to_string(*outside));
  }
}

/// Uploads `samples`, runs `launch(device samples, n, zeroed histogram)` and compares the
/// histogram it leaves with `reference`.
template <class Launch>
race_count run_race_histogram(std::span<const std::int32_t> samples, std::span<const std::uint64_t> reference,
                              const char* kernel_name, Launch launch) {
  device_buffer<std::int32_t> device_samples(samples);
  device_buffer<std::uint32_t> histogram(reference.size());
  check_cuda(cudaMemset(histogram.data(), 0, histogram.size() * sizeof(std::uint32_t)), "cudaMemset");
  check_cuda(launch(device_samples.data(), static_cast<long long>(samples.size()), histogram.data()), kernel_name);
  check_cuda(cudaDeviceSynchronize(), kernel_name);
  std::vector<std::uint32_t> counts(reference.size());
  histogram.download(counts);
  return compare_with_reference(counts, reference);
}

}  // namespace

race_count naive_histogram(std::span<const std::int32_t> samples, std::span<const std::uint64_t> reference) {
  check_histogram_arguments("tally::lab::naive_histogram", samples, reference, std::int64_t{1} << 24);
  return run_race_histogram(samples, reference, "naive histogram kernel",
                            [](const std::int32_t* device_samples, long long n, unsigned* histogram) {
                              return detail::lab::launch_naive_histogram(device_samples, n, histogram, nullptr);
                            });
}

race_count block_histogram(std::span<const std::int32_t> samples, std::span<const std::uint64_t> reference,
                           bool barrier) {
  // The shared histogram stays within the default 48 KiB, so no launch needs the opt-in.
  constexpr std::int64_t max_bins = 48 * 1024 / sizeof(unsigned);
  check_histogram_arguments("tally::lab::block_histogram", samples, reference, max_bins);
  const int bins = static_cast<int>(reference.size());
  return run_race_histogram(samples, reference, "block histogram kernel",
                            [bins, barrier](const std::int32_t* device_samples, long long n, unsigned* histogram) {
                              return detail::lab::launch_block_histogram(device_samples, n, histogram, bins, barrier,
                                                                         nullptr);
                            });
}

}  // namespace tally::lab
