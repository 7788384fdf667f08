// Host samples counted on the GPU through a staging ring (tally/gpu/streaming.hpp): every
// operation equal to the in-memory GPU call and the CPU reference, from pageable arrays, pinned
// arrays and readers, over many chunks with a ragged last one; find_first_if stopping early; the
// errors that name their argument.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#if defined(TALLY_WITH_CUDA)
#include <cuda_runtime.h>
#endif

#include "gpu/gpu_test_support.hpp"
#include "tally/gpu/streaming.hpp"

namespace tally::test {
namespace {

/// The smallest ring: 2 MiB chunks, so a few million samples make several chunks.
gpu::staging_ring& small_ring() {
  static gpu::staging_ring ring(gpu::staging_options{std::size_t{2} << 20, 3});
  return ring;
}

/// Sizes around the chunk of 2 MiB: none, one, a part chunk, whole chunks, several and a ragged end.
template <class T>
std::vector<std::size_t> sizes_for() {
  const std::size_t chunk = (std::size_t{2} << 20) / sizeof(T) / 512 * 512;
  if (quick_mode()) return {0, 1, chunk + 3};
  return {0, 1, 513, chunk, 3 * chunk + 777};
}

/// Host memory the copy engine reads in place (cudaMallocHost), for the pinned path.
template <class T>
class pinned_copy {
 public:
  explicit pinned_copy(const std::vector<T>& host) : size_(host.size()) {
#if defined(TALLY_WITH_CUDA)
    if (cudaMallocHost(reinterpret_cast<void**>(&data_), std::max<std::size_t>(1, host.size()) * sizeof(T)) != cudaSuccess) {
      throw std::runtime_error("cudaMallocHost failed");
    }
    if (!host.empty()) std::memcpy(data_, host.data(), host.size() * sizeof(T));
#endif
  }
  pinned_copy(const pinned_copy&) = delete;
  pinned_copy& operator=(const pinned_copy&) = delete;
  ~pinned_copy() {
#if defined(TALLY_WITH_CUDA)
    cudaFreeHost(data_);
#endif
  }
  std::span<const T> span() const { return {data_, size_}; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

/// A reader over `host` that hands out at most `piece` samples a call (whole samples), counting
/// the bytes it gave.
template <class T>
gpu::host_reader reader_over(const std::vector<T>& host, std::size_t piece, std::size_t* given = nullptr) {
  auto next = std::make_shared<std::size_t>(0);
  return [&host, piece, next, given](std::span<std::byte> into) -> std::size_t {
    const std::size_t n = std::min({into.size() / sizeof(T), piece, host.size() - *next});
    std::memcpy(into.data(), host.data() + *next, n * sizeof(T));
    *next += n;
    if (given != nullptr) *given += n * sizeof(T);
    return n * sizeof(T);
  };
}

enum class source { pageable, pinned, reader };
const source all_sources[] = {source::pageable, source::pinned, source::reader};
const char* to_string(source s) { return s == source::pageable ? "pageable" : s == source::pinned ? "pinned" : "reader"; }

/// Calls `run(host_samples)` with `host` as the source asks.
template <class T, class Run>
auto with_source(source s, const std::vector<T>& host, Run&& run) {
  if (s == source::pinned) {
    const pinned_copy<T> pinned(host);
    return run(gpu::host_samples<T>(pinned.span()));
  }
  if (s == source::reader) return run(gpu::host_samples<T>(reader_over(host, 100003)));
  return run(gpu::host_samples<T>(std::span<const T>(host)));
}

template <class T>
void check_even_histogram(pattern p, double lower, double upper, std::int64_t num_bins) {
  const even_bins bins{num_bins, lower, upper};
  for (const std::size_t n : sizes_for<T>()) {
    const std::vector<T> host = make_samples<T>(p, n, lower, upper, 1234 + n);
    std::vector<std::uint64_t> want(static_cast<std::size_t>(num_bins));
    const auto cpu_result = cpu::histogram_even(std::span<const T>(host), std::span<std::uint64_t>(want), bins);
    gpu::device_buffer<T> device = to_device(host);
    gpu::device_buffer<std::uint64_t> in_memory(static_cast<std::size_t>(num_bins));
    const auto gpu_result = gpu::histogram_even(device.const_span(), in_memory.span(), bins);
    ASSERT_EQ(download(in_memory), want);
    ASSERT_EQ(gpu_result.left_out, cpu_result.left_out);
    for (const source s : all_sources) {
      gpu::device_buffer<std::uint64_t> counts(static_cast<std::size_t>(num_bins));
      counts.fill_bytes(poison_byte);
      const histogram_result got = with_source(s, host, [&](const gpu::host_samples<T>& samples) {
        return gpu::from_host::histogram_even(samples, counts.span(), bins, {}, &small_ring());
      });
      EXPECT_EQ(download(counts), want) << type_name<T>() << " " << to_string(p) << " n=" << n << " " << to_string(s);
      EXPECT_EQ(got.left_out, cpu_result.left_out) << n << " " << to_string(s);
    }
  }
}

TEST(GpuStreaming, EvenHistogramsEqualTheInMemoryCall) {
  check_even_histogram<std::int32_t>(pattern::uniform, 0, 1000, 256);
  check_even_histogram<std::int32_t>(pattern::with_outliers, -50, 10000, 4096);
  check_even_histogram<float>(pattern::with_outliers, 0, 1000, 4096);
  check_even_histogram<std::uint8_t>(pattern::uniform, 0, 256, 256);
  check_even_histogram<double>(pattern::geometric, 0, 64, 64);
  // Past a block's shared memory: the chunks' counts add up in the large-bin strategies' scratch.
  check_even_histogram<std::int32_t>(pattern::uniform, 0, 300000, 300000);
}

TEST(GpuStreaming, RangeHistogramsAndBincountsEqualTheInMemoryCall) {
  const std::vector<double> edges{-3.5, 0, 1, 2.25, 10, 100, 400.5, 999};
  for (const std::size_t n : sizes_for<float>()) {
    const std::vector<float> host = make_samples<float>(pattern::with_outliers, n, 0, 1000, 99 + n);
    std::vector<std::uint32_t> want(edges.size() - 1);
    const auto cpu_result = cpu::histogram_range(std::span<const float>(host), std::span<std::uint32_t>(want),
                                                 std::span<const double>(edges));
    for (const source s : all_sources) {
      gpu::device_buffer<std::uint32_t> counts(want.size());
      const histogram_result got = with_source(s, host, [&](const gpu::host_samples<float>& samples) {
        return gpu::from_host::histogram_range(samples, counts.span(), std::span<const double>(edges), {}, &small_ring());
      });
      EXPECT_EQ(download(counts), want) << "n=" << n << " " << to_string(s);
      EXPECT_EQ(got.left_out, cpu_result.left_out);
    }
  }
  // bincount: negative samples are left out and counted, never an error midway.
  for (const std::size_t n : sizes_for<std::int32_t>()) {
    std::vector<std::int32_t> host = make_samples<std::int32_t>(pattern::uniform, n, 0, 5000, 7 + n);
    std::uint64_t negatives = 0;
    for (std::size_t i = 0; i < host.size(); i += 1001, ++negatives) host[i] = -1 - static_cast<std::int32_t>(i % 7);
    std::vector<std::uint64_t> want(5000);
    for (const std::int32_t x : host) {
      if (x >= 0) ++want[static_cast<std::size_t>(x)];
    }
    for (const source s : all_sources) {
      gpu::device_buffer<std::uint64_t> counts(want.size());
      const histogram_result got = with_source(s, host, [&](const gpu::host_samples<std::int32_t>& samples) {
        return gpu::from_host::bincount(samples, counts.span(), {}, &small_ring());
      });
      EXPECT_EQ(download(counts), want) << "n=" << n << " " << to_string(s);
      EXPECT_EQ(got.left_out, negatives) << "n=" << n << " " << to_string(s);
    }
  }
}

TEST(GpuStreaming, WeightedHistogramsAddUpAcrossChunks) {
  const even_bins bins{512, 0, 512};
  // Weights that are small integers: every sum is exact in any order, so equal to the CPU's bits.
  for (const std::size_t n : sizes_for<std::int64_t>()) {
    const std::vector<std::int32_t> host = make_samples<std::int32_t>(pattern::with_outliers, n, 0, 512, 3 + n);
    std::vector<float> weights(n);
    for (std::size_t i = 0; i < n; ++i) weights[i] = static_cast<float>(static_cast<int>(i % 13) - 4);
    std::vector<double> want(512);
    const auto cpu_result = cpu::histogram_even(std::span<const std::int32_t>(host), std::span<const float>(weights),
                                                std::span<double>(want), bins);
    for (const source s : {source::pageable, source::pinned}) {
      gpu::device_buffer<double> sums(want.size());
      histogram_result got;
      if (s == source::pinned) {
        const pinned_copy<std::int32_t> ps(host);
        const pinned_copy<float> pw(weights);
        got = gpu::from_host::histogram_even(gpu::host_samples<std::int32_t>(ps.span()), gpu::host_samples<float>(pw.span()),
                                             sums.span(), bins, {}, &small_ring());
      } else {
        got = gpu::from_host::histogram_even(gpu::host_samples<std::int32_t>(std::span<const std::int32_t>(host)),
                                             gpu::host_samples<float>(std::span<const float>(weights)), sums.span(), bins,
                                             {}, &small_ring());
      }
      EXPECT_EQ(download(sums), want) << "n=" << n << " " << to_string(s);
      EXPECT_EQ(got.left_out, cpu_result.left_out);
    }
    // Two readers in step, handing out different piece sizes.
    gpu::device_buffer<double> sums(want.size());
    const auto got = gpu::from_host::histogram_even(gpu::host_samples<std::int32_t>(reader_over(host, 70001)),
                                                    gpu::host_samples<float>(reader_over(weights, 33333)), sums.span(),
                                                    bins, {}, &small_ring());
    EXPECT_EQ(download(sums), want) << "readers n=" << n;
    EXPECT_EQ(got.left_out, cpu_result.left_out);
  }
}

template <class T>
void check_reductions() {
  for (const std::size_t n : sizes_for<T>()) {
    const std::vector<T> host = make_samples<T>(pattern::uniform, n, -1000, 1000, 5 + n);
    for (const reduce_op op : {reduce_op::sum, reduce_op::min, reduce_op::max}) {
      const auto want = cpu::reduce(std::span<const T>(host), op);
      for (const source s : all_sources) {
        const auto got = with_source(s, host, [&](const gpu::host_samples<T>& samples) {
          return gpu::from_host::reduce(samples, op, {}, &small_ring());
        });
        if constexpr (std::is_floating_point_v<T>) {
          if (op == reduce_op::sum) {
            double magnitude = 0;
            for (const T x : host) magnitude += std::fabs(static_cast<double>(x));
            EXPECT_LE(std::fabs(static_cast<double>(got.value) - static_cast<double>(want.value)),
                      2.0 * static_cast<double>(n) * std::numeric_limits<T>::epsilon() * magnitude)
                << "n=" << n;
            continue;
          }
        }
        EXPECT_EQ(got.value, want.value) << type_name<T>() << " op " << static_cast<int>(op) << " n=" << n << " "
                                         << to_string(s);
      }
    }
  }
}

TEST(GpuStreaming, ReductionsCombineChunks) {
  check_reductions<std::int32_t>();
  check_reductions<std::int64_t>();
  check_reductions<float>();
  check_reductions<double>();
}

TEST(GpuStreaming, CountIfAndFindFirstIf) {
  const std::size_t chunk = (std::size_t{2} << 20) / sizeof(std::int32_t) / 512 * 512;
  const std::size_t n = quick_mode() ? 2 * chunk + 5 : 9 * chunk + 5;
  std::vector<std::int32_t> host = make_samples<std::int32_t>(pattern::uniform, n, 0, 100, 42);
  const compare_to<std::int32_t> is_big{comparison::greater_equal, 1000};
  const compare_to<std::int32_t> is_small{comparison::less, 30};
  const auto small = static_cast<std::uint64_t>(std::count_if(host.begin(), host.end(), [](std::int32_t x) { return x < 30; }));
  for (const source s : all_sources) {
    const auto counted = with_source(s, host, [&](const gpu::host_samples<std::int32_t>& samples) {
      return gpu::from_host::count_if(samples, is_small, {}, &small_ring());
    });
    EXPECT_EQ(counted.count, small) << to_string(s);
    const auto none = with_source(s, host, [&](const gpu::host_samples<std::int32_t>& samples) {
      return gpu::from_host::find_first_if(samples, is_big, {}, &small_ring());
    });
    EXPECT_EQ(none.index, static_cast<std::int64_t>(n)) << to_string(s);
  }
  // Matches in the first chunk, at a chunk's first sample, and in the last sample.
  for (const std::size_t at : {std::size_t{17}, chunk, n - 1}) {
    std::vector<std::int32_t> with_match = host;
    with_match[at] = 5000;
    with_match[n - 1] = 6000;
    for (const source s : all_sources) {
      const auto found = with_source(s, with_match, [&](const gpu::host_samples<std::int32_t>& samples) {
        return gpu::from_host::find_first_if(samples, is_big, {}, &small_ring());
      });
      EXPECT_EQ(found.index, static_cast<std::int64_t>(at)) << to_string(s);
    }
  }
  // Stopping early: a match in the first chunk leaves most of a long reader unread.
  if (!quick_mode()) {
    std::vector<std::int32_t> with_match = host;
    with_match[3] = 5000;
    std::size_t given = 0;
    const auto found = gpu::from_host::find_first_if(
        gpu::host_samples<std::int32_t>(reader_over(with_match, chunk, &given)), is_big, {}, &small_ring());
    EXPECT_EQ(found.index, 3);
    EXPECT_LE(given, 5 * chunk * sizeof(std::int32_t)) << "of " << n * sizeof(std::int32_t) << " bytes";
  }
}

TEST(GpuStreaming, BadArgumentsAreNamed) {
  const std::vector<std::int32_t> host(1000, 3);
  gpu::device_buffer<std::uint64_t> counts(16);
  const even_bins bins{16, 0, 16};
  const auto expect_error = [](auto&& call, errc code, const char* argument) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one naming " << argument;
    } catch (const error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_EQ(e.argument(), argument) << e.what();
    }
  };
  // Device memory passed as host samples.
  gpu::device_buffer<std::int32_t> device = to_device(host);
  expect_error([&] { gpu::from_host::histogram_even(gpu::host_samples<std::int32_t>(device.const_span()), counts.span(), bins); },
               errc::invalid_argument, "samples");
  // Weights shorter than the samples, as arrays and as readers.
  const std::vector<float> weights(999, 1.0f);
  gpu::device_buffer<double> sums(16);
  expect_error([&] {
    gpu::from_host::histogram_even(gpu::host_samples<std::int32_t>(std::span<const std::int32_t>(host)),
                                   gpu::host_samples<float>(std::span<const float>(weights)), sums.span(), bins);
  }, errc::invalid_argument, "weights");
  expect_error([&] {
    gpu::from_host::histogram_even(gpu::host_samples<std::int32_t>(reader_over(host, 1000)),
                                   gpu::host_samples<float>(reader_over(weights, 1000)), sums.span(), bins);
  }, errc::invalid_argument, "weights");
  // A reader that ends inside a sample.
  expect_error([&] {
    bool done = false;
    gpu::from_host::histogram_even(gpu::host_samples<std::int32_t>(gpu::host_reader([&](std::span<std::byte> into) {
                                     if (done) return std::size_t{0};
                                     done = true;
                                     std::memset(into.data(), 0, 6);
                                     return std::size_t{6};
                                   })),
                                   counts.span(), bins);
  }, errc::invalid_argument, "samples");
  // Deterministic sums are refused, naming the options.
  histogram_options deterministic;
  deterministic.deterministic = true;
  expect_error([&] {
    gpu::from_host::histogram_even(gpu::host_samples<std::int32_t>(std::span<const std::int32_t>(host)),
                                   gpu::host_samples<float>(std::span<const float>(weights.data(), 1000 - 1)), sums.span(),
                                   bins, deterministic);
  }, errc::not_supported, "options");
  // The in-memory call's checks hold, before anything is read: counts of the wrong size.
  std::size_t given = 0;
  expect_error([&] {
    gpu::device_buffer<std::uint64_t> short_counts(15);
    gpu::from_host::histogram_even(gpu::host_samples<std::int32_t>(reader_over(host, 1000, &given)), short_counts.span(), bins);
  }, errc::invalid_argument, "counts");
  EXPECT_EQ(given, 0u);
  expect_error([] { gpu::staging_ring ring(gpu::staging_options{1000, 3}); }, errc::invalid_argument, "options");
  expect_error([] { gpu::staging_ring ring(gpu::staging_options{std::size_t{2} << 20, 1}); }, errc::invalid_argument, "options");
}

}  // namespace
}  // namespace tally::test
