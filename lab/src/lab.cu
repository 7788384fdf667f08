// The GPU side of tally::lab: the trials of a GPU contention case (tally/lab/contention.hpp) and the
// GPU race experiments (tally/lab/race.hpp). Allocates, zeroes, launches through the lab dispatch
// (lab_dispatch.cuh), times with CUDA events and copies back; the checks are the model's.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <cuda_runtime.h>

#include "contention_trials.hpp"
#include "lab_dispatch.cuh"
#include "tally/detail/cuda_check.hpp"
#include "tally/detail/dispatch/device_properties.cuh"
#include "tally/detail/event_pair.hpp"
#include "tally/error.hpp"
#include "tally/gpu.hpp"
#include "tally/lab.hpp"

namespace tally::lab {

using tally::gpu::device_buffer;
using tally::gpu::detail::check_cuda;
using tally::gpu::detail::event_pair;

static_assert(std::is_same_v<contention_word, unsigned>, "the contention kernels update the model's 32-bit words");

namespace {

std::string launch_name(const contention_case& c, const gpu_method& how) {
  return "contention kernel (" + std::string(to_string(c.op)) + ", " + std::string(to_string(how.memory)) + ", " +
         std::string(to_string(how.scope)) + " scope, aggregation " + std::string(to_string(how.aggregate)) + ")";
}

/// The device memory of one GPU contention case, allocated once for all its trials.
struct gpu_contention_memory {
  device_buffer<contention_word> words;
  device_buffer<contention_word> block_words;  ///< shared-memory exch only
  device_buffer<unsigned long long> returned{2};
  event_pair events;
  detail::lab::contention_launch launch;
};

contention_outcome not_run(std::string why) {
  contention_outcome out;
  out.not_run = std::move(why);
  return out;
}

/// One trial: zero the words, launch between two events, copy back what the launch left.
contention_outcome run_trial(const contention_case& c, const gpu_method& how, gpu_contention_memory& m) {
  const cudaStream_t stream = nullptr;
  // Zeroed before the first event: only the kernel is timed. (block_words is written whole.)
  check_cuda(cudaMemsetAsync(m.words.data(), 0, m.words.size() * sizeof(contention_word), stream), "cudaMemsetAsync");
  check_cuda(cudaMemsetAsync(m.returned.data(), 0, 2 * sizeof(unsigned long long), stream), "cudaMemsetAsync");
  check_cuda(cudaEventRecord(m.events.start(), stream), "cudaEventRecord");
  const cudaError_t launched =
      detail::lab::launch_contention(c.op, how.memory, how.scope, how.aggregate, m.launch, stream);
  if (launched == cudaErrorInvalidConfiguration && how.memory == memory_space::shared) {
    (void)cudaGetLastError();
    return not_run("does not fit: no block of " + std::to_string(how.block_threads) + " threads with " +
                   std::to_string(detail::lab::contention_shared_bytes(c.addresses) / 1024) +
                   " KiB of shared memory is resident on a multiprocessor");
  }
  check_cuda(launched, launch_name(c, how));
  check_cuda(cudaEventRecord(m.events.stop(), stream), "cudaEventRecord");
  contention_outcome got;
  got.ms = m.events.elapsed_ms();
  check_cuda(cudaGetLastError(), launch_name(c, how));
  got.words.resize(m.words.size());
  m.words.download(got.words);
  got.block_words.resize(m.block_words.size());
  m.block_words.download(got.block_words);
  unsigned long long sums[2] = {0, 0};
  m.returned.download(std::span<unsigned long long>(sums, 2));
  got.returned_sum = sums[0];
  got.returned_square_sum = sums[1];
  return got;
}

}  // namespace

contention_trial gpu_contention_trial(const contention_case& c) {
  const gpu_method how = std::get<gpu_method>(c.method);
  const bool shared = how.memory == memory_space::shared;
  if (shared) {
    tally::detail::device_properties props;
    check_cuda(tally::detail::current_device_properties(props), "querying the device");
    const std::size_t bytes = detail::lab::contention_shared_bytes(c.addresses);
    if (bytes > props.shared_memory_per_block_optin) {
      return [why = "does not fit: " + std::to_string(c.addresses) + " words need " + std::to_string(bytes / 1024) +
                    " KiB of shared memory per block, the device allows " +
                    std::to_string(props.shared_memory_per_block_optin / 1024) + " KiB"] { return not_run(why); };
    }
  }
  const std::int64_t blocks = blocks_of(c);
  const bool exch = c.op == atomic_op::exch;
  auto memory = std::make_shared<gpu_contention_memory>();
  // global_private: a slice of A words per block (validate_contention_case keeps blocks x A <= 2^28).
  memory->words = device_buffer<contention_word>(
      static_cast<std::size_t>(how.memory == memory_space::global_private ? blocks * c.addresses : c.addresses));
  memory->block_words =
      device_buffer<contention_word>(shared && exch ? static_cast<std::size_t>(blocks * c.addresses) : 0);
  detail::lab::contention_launch& launch = memory->launch;
  launch.words = memory->words.data();
  launch.block_words = memory->block_words.data();
  launch.returned = memory->returned.data();
  launch.addresses = static_cast<unsigned>(c.addresses);
  launch.blocks = static_cast<unsigned>(blocks);
  launch.block_threads = how.block_threads;
  launch.ops_per_thread = static_cast<unsigned>(c.ops_per_thread);
  return [c, how, memory] { return run_trial(c, how, *memory); };
}

namespace gpu {

race_count count_with_threads(std::int64_t threads, bool racy) {
  if (threads < 1 || threads > (std::int64_t{1} << 32)) {
    throw_invalid_argument("tally::lab::gpu::count_with_threads", "threads",
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
  check_histogram_arguments("tally::lab::gpu::naive_histogram", samples, reference, std::int64_t{1} << 24);
  return run_race_histogram(samples, reference, "naive histogram kernel",
                            [](const std::int32_t* device_samples, long long n, unsigned* histogram) {
                              return detail::lab::launch_naive_histogram(device_samples, n, histogram, nullptr);
                            });
}

race_count block_histogram(std::span<const std::int32_t> samples, std::span<const std::uint64_t> reference,
                           bool barrier) {
  // The shared histogram stays within the default 48 KiB, so no launch needs the opt-in.
  constexpr std::int64_t max_bins = 48 * 1024 / sizeof(unsigned);
  check_histogram_arguments("tally::lab::gpu::block_histogram", samples, reference, max_bins);
  const int bins = static_cast<int>(reference.size());
  return run_race_histogram(samples, reference, "block histogram kernel",
                            [bins, barrier](const std::int32_t* device_samples, long long n, unsigned* histogram) {
                              return detail::lab::launch_block_histogram(device_samples, n, histogram, bins, barrier,
                                                                         nullptr);
                            });
}

}  // namespace gpu
}  // namespace tally::lab
