// The GPU backend's host API: host-safe declarations (no CUDA header needed, so the CLI and
// users' .cpp files compile with any C++20 compiler). The definitions live in the compiled
// library (src/*.cu); built without CUDA, every call throws errc::not_supported and
// device_count() is 0. Pointers in spans passed here are device pointers.
//
// Each operation comes in two forms, as in cuCollections: `name_async` never synchronizes and
// writes scalar results into a `workspace`; `name` runs on `stream`, waits for it and returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "tally/bins.hpp"
#include "tally/error.hpp"
#include "tally/reduce.hpp"
#include "tally/strategy.hpp"

struct CUstream_st;  // the CUDA runtime's stream type: tally::gpu::stream_t is cudaStream_t

namespace tally::gpu {

/** @brief A CUDA stream (`cudaStream_t`); nullptr is the default stream. */
using stream_t = CUstream_st*;

/** @brief Whether this build of tally contains the GPU backend. */
bool built_with_cuda() noexcept;

/** @brief The number of usable CUDA devices; 0 without a GPU or without CUDA support. */
int device_count() noexcept;

/** @brief What tally needs to know of a GPU. */
struct device_info {
  int ordinal = 0;
  std::string name;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int multiprocessors = 0;
  std::size_t global_memory_bytes = 0;
  std::size_t l2_cache_bytes = 0;
  std::size_t shared_memory_per_block_optin = 0;
  int memory_bus_width_bits = 0;
  std::string driver_version;
  std::string runtime_version;
};

/** @brief Describes the current device. */
device_info describe_device();

namespace detail {
void* device_allocate(std::size_t bytes);
void device_free(void* pointer) noexcept;
void copy_to_device(void* destination, const void* source, std::size_t bytes);
void copy_to_host(void* destination, const void* source, std::size_t bytes);
void device_fill_bytes(void* destination, int byte, std::size_t bytes);
}  // namespace detail

/** @brief An owning, move-only array in device memory (cudaMalloc), for tests, tools and examples. */
template <class T>
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(std::size_t size)
      : data_(static_cast<T*>(size ? detail::device_allocate(size * sizeof(T)) : nullptr)), size_(size) {}
  explicit device_buffer(std::span<const T> host) : device_buffer(host.size()) { upload(host); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  device_buffer(device_buffer&& other) noexcept : data_(other.data_), size_(other.size_) {
    other.data_ = nullptr;
    other.size_ = 0;
  }
  device_buffer& operator=(device_buffer&& other) noexcept {
    if (this != &other) {
      detail::device_free(data_);
      data_ = other.data_;
      size_ = other.size_;
      other.data_ = nullptr;
      other.size_ = 0;
    }
    return *this;
  }
  ~device_buffer() { detail::device_free(data_); }

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::span<T> span() const noexcept { return {data_, size_}; }
  std::span<const T> const_span() const noexcept { return {data_, size_}; }

  /** @brief Copies `host` (at most size() elements) to the start of the buffer; synchronous. */
  void upload(std::span<const T> host) { detail::copy_to_device(data_, host.data(), host.size_bytes()); }
  /** @brief Copies the buffer into `host` (at most size() elements); synchronous. */
  void download(std::span<T> host) const { detail::copy_to_host(host.data(), data_, host.size_bytes()); }
  /** @brief Sets every byte to `byte` (a poison value for tests); synchronous. */
  void fill_bytes(int byte) { detail::device_fill_bytes(data_, byte, size_ * sizeof(T)); }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

/**
 * @brief Temporary device storage and scalar results of `_async` calls. Grows as needed with
 * stream-ordered allocation (cudaMallocAsync), so reusing one workspace costs no allocation.
 * Calls that share a workspace must follow each other (one stream, or waits between streams):
 * some of its words carry state from one call to the next (find_first_if leaves them ready for
 * the next search, so a search is one launch).
 */
class workspace {
 public:
  workspace() = default;
  workspace(const workspace&) = delete;
  workspace& operator=(const workspace&) = delete;
  workspace(workspace&& other) noexcept;
  workspace& operator=(workspace&& other) noexcept;
  ~workspace();

  /** @brief At least `bytes` of device storage, valid until the next reserve; ordered on `stream`. */
  void* reserve(std::size_t bytes, stream_t stream);
  /** @brief Bytes of storage held now (0 before the first reserve). */
  std::size_t reserved_bytes() const noexcept { return bytes_; }
  /** @brief The device word the last call wrote its scalar result to (left-out count, count, index...). */
  std::uint64_t* scalar();
  /** @brief Waits for `stream` and returns the scalar result as 64 raw bits. */
  std::uint64_t read_scalar(stream_t stream);

 private:
  void* scalars_ = nullptr;  // a small separate allocation, so reserve() never moves results
  void* storage_ = nullptr;
  std::size_t bytes_ = 0;
  void* host_result_ = nullptr;  // pinned and mapped: read_scalar's copy of the result
};

namespace detail {
/// The workspace of the waiting calls: one per host thread, device and stream, kept while the
/// thread lives, so that a waiting call allocates nothing once its storage has grown (allocating a
/// workspace a call cost 150 microseconds and more). One thread's calls follow each other, and each
/// waits for its stream, so they can share it; other threads have their own.
workspace& waiting_workspace(stream_t stream);

/// Enqueues a copy of `bytes` (a multiple of 4, at most copy_words_max_bytes) from device memory
/// to device memory or to pinned host memory the device maps (cudaHostAllocMapped), by a kernel on
/// `stream`: a copy engine's copy of a small result after a kernel cost up to 9 us more on an H200.
inline constexpr std::size_t copy_words_max_bytes = 1024;
void copy_words_async(const void* from, void* to, std::size_t bytes, stream_t stream);

template <class Sample, class Counter>
choice histogram_even_async(std::span<const Sample> samples, std::span<Counter> counts, const even_bins& bins,
                            workspace& ws, const histogram_options& options, stream_t stream);
template <class Sample, class Weight, class Sum>
choice histogram_even_weighted_async(std::span<const Sample> samples, std::span<const Weight> weights,
                                     std::span<Sum> sums, const even_bins& bins, workspace& ws,
                                     const histogram_options& options, stream_t stream);
template <class Sample, class Weight, class Sum>
histogram_result histogram_even_weighted(std::span<const Sample> samples, std::span<const Weight> weights,
                                         std::span<Sum> sums, const even_bins& bins, const histogram_options& options,
                                         stream_t stream);
template <class Sample, class Counter>
choice histogram_range_async(std::span<const Sample> samples, std::span<Counter> counts,
                             std::span<const double> edges, workspace& ws, const histogram_options& options,
                             stream_t stream);
template <class Sample, class Counter>
choice bincount_async(std::span<const Sample> samples, std::span<Counter> counts, workspace& ws,
                      const histogram_options& options, stream_t stream);
template <class Sample>
void check_bincount_samples(std::span<const Sample> samples, workspace& ws, stream_t stream);
/// reduce_async with the result stored at `result` (device memory of the call's device, aligned
/// as accumulator_t<T>): the Python package's 0-d array, which then needs no copy.
template <class T>
choice reduce_into_async(std::span<const T> samples, reduce_op op, accumulator_t<T>* result, workspace& ws,
                         const reduce_options& options, stream_t stream);
template <class T>
choice reduce_async(std::span<const T> samples, reduce_op op, workspace& ws, const reduce_options& options,
                    stream_t stream) {
  return reduce_into_async(samples, op, reinterpret_cast<accumulator_t<T>*>(ws.scalar()), ws, options, stream);
}
/// The least and the greatest sample together, in one read of them (reduce's min and max, NaN
/// included): two accumulator_t<T>, min then max, packed at the start of `ws.scalar()` (words 0
/// and 1 at most). What the Python package reads for numpy's range of the data, where two
/// reductions read the samples twice.
template <class T>
void extremes_async(std::span<const T> samples, workspace& ws, stream_t stream);
/// count_if or find_first_if (`op`): the count or the first index lands in `ws.scalar()`.
template <class T>
  requires is_histogram_sample_v<T>  // count_if and find_first_if samples: the histogram samples
choice predicate_async(operation op, std::span<const T> samples, compare_to<T> predicate, workspace& ws,
                       const reduce_options& options, stream_t stream);

/// Throws, naming `operation`, when a CUDA error is pending on this thread before the call starts:
/// one left by other code (a failed launch nobody checked), which tally's own launch checks would
/// otherwise report as theirs. It stays pending for its owner to take.
void check_no_pending_cuda_error(std::string_view operation);

/**
 * Runs one public call so that any failure inside it names `operation`: a CUDA error left by
 * earlier work (a kernel that faulted, which every later CUDA call reports), an allocation that
 * fails, a launch. The runtime's own message says what failed, not which call of tally it stopped.
 */
template <class Call>
decltype(auto) naming_failures(std::string_view operation, Call&& call) {
  check_no_pending_cuda_error(operation);
  try {
    return call();
  } catch (const error& failure) {
    if (std::string_view(failure.what()).starts_with("tally::")) throw;  // names its operation already
    throw error(failure.code(), failure.argument(), std::string(operation) + ": " + failure.what());
  }
}

/// predicate_async, waiting for its scalar: a count_result or a find_result.
template <class Result, class T>
Result predicate_waited(operation op, std::span<const T> samples, compare_to<T> predicate,
                        const reduce_options& options, stream_t stream) {
  workspace& ws = detail::waiting_workspace(stream);
  Result result{};
  result.chose = predicate_async(op, samples, predicate, ws, options, stream);
  const std::uint64_t scalar = ws.read_scalar(stream);
  if constexpr (std::is_same_v<Result, find_result>) result.index = static_cast<std::int64_t>(scalar);
  else result.count = scalar;
  return result;
}
}  // namespace detail

/**
 * @brief Even-bin histogram on the GPU; never synchronizes. The left-out count lands in
 * `ws.scalar()`. Same semantics and errors as tally::cpu::histogram_even.
 *
 * Temporary storage (reserved in `ws`) for the large-bin strategies, with c = min(N, 2^28)
 * samples (both take the input in chunks of 2^28), each part rounded up to 256 bytes:
 * - `partitioned`: 2 * 7168 * t + 6 * B * t + 4 bytes plus CUB's scan storage, where
 *   t = ceil(c / 7168) tiles and B = ceil(num_bins / 2^15) buckets (at most 2^26 bins);
 * - `radix_sort`: 8 * c + 4 * min(c, num_bins + 1) + 8 bytes plus CUB's sort storage (at most
 *   2^31 - 1 bins).
 * Any strategy whose storage exceeds the free device memory (plus what `ws` holds) is refused
 * before anything runs: errc::out_of_memory, naming `samples`.
 */
template <class Sample, class Counter>
choice histogram_even_async(std::span<const Sample> samples, std::span<Counter> counts, const even_bins& bins,
                            workspace& ws, const histogram_options& options = {}, stream_t stream = nullptr) {
  static_assert(is_histogram_sample_v<Sample>, "histogram samples: the types of is_histogram_sample_v (tally/bins.hpp)");
  static_assert(is_counter_v<Counter>, "counters: uint32 or uint64");
  return detail::naming_failures("tally::gpu::histogram_even", [&] {
    return detail::histogram_even_async(samples, counts, bins, ws, options, stream);
  });
}

/** @brief Even-bin histogram on the GPU; waits for `stream` and returns the left-out count. */
template <class Sample, class Counter>
histogram_result histogram_even(std::span<const Sample> samples, std::span<Counter> counts, const even_bins& bins,
                                const histogram_options& options = {}, stream_t stream = nullptr) {
  return detail::naming_failures("tally::gpu::histogram_even", [&]() -> histogram_result {
    workspace& ws = detail::waiting_workspace(stream);
    const choice chose = histogram_even_async(samples, counts, bins, ws, options, stream);
    return {chose, ws.read_scalar(stream)};
  });
}

/**
 * @brief Weighted even-bin histogram on the GPU; never synchronizes. Same semantics as
 * tally::cpu::histogram_even with weights (and, with `deterministic`, the same bits). Strategies:
 * atomic, shared_atomic (while the bins fit a block's shared memory), automatic. The
 * left-out count lands in `ws.scalar()[0]`; with `deterministic`, `ws.scalar()[1]` becomes 1 when
 * a counted sample's finite weight has |w| >= 2^31 (the bins it fell in then hold NaN), else 0.
 */
template <class Sample, class Weight, class Sum>
choice histogram_even_async(std::span<const Sample> samples, std::span<const Weight> weights, std::span<Sum> sums,
                            const even_bins& bins, workspace& ws, const histogram_options& options = {},
                            stream_t stream = nullptr) {
  static_assert(is_histogram_sample_v<Sample>, "histogram samples: the types of is_histogram_sample_v (tally/bins.hpp)");
  static_assert(is_weight_v<Weight>, "weights: float or double");
  static_assert(is_weight_sum_v<Sum>, "weighted sums: double");
  return detail::naming_failures("tally::gpu::histogram_even", [&] {
    return detail::histogram_even_weighted_async(samples, weights, sums, bins, ws, options, stream);
  });
}

/**
 * @brief Weighted even-bin histogram on the GPU; waits for `stream`. Throws naming `weights`
 * (after the sums are written) when `deterministic` met a weight beyond its range, as the CPU does.
 */
template <class Sample, class Weight, class Sum>
histogram_result histogram_even(std::span<const Sample> samples, std::span<const Weight> weights, std::span<Sum> sums,
                                const even_bins& bins, const histogram_options& options = {},
                                stream_t stream = nullptr) {
  static_assert(is_histogram_sample_v<Sample>, "histogram samples: the types of is_histogram_sample_v (tally/bins.hpp)");
  static_assert(is_weight_v<Weight>, "weights: float or double");
  static_assert(is_weight_sum_v<Sum>, "weighted sums: double");
  return detail::naming_failures("tally::gpu::histogram_even", [&] {
    return detail::histogram_even_weighted(samples, weights, sums, bins, options, stream);
  });
}

/**
 * @brief Histogram over sorted `edges` (host memory; copied to the device by the call) on the
 * GPU; never synchronizes the device.
 */
template <class Sample, class Counter>
choice histogram_range_async(std::span<const Sample> samples, std::span<Counter> counts,
                             std::span<const double> edges, workspace& ws, const histogram_options& options = {},
                             stream_t stream = nullptr) {
  static_assert(is_histogram_sample_v<Sample>, "histogram samples: the types of is_histogram_sample_v (tally/bins.hpp)");
  static_assert(is_counter_v<Counter>, "counters: uint32 or uint64");
  return detail::naming_failures("tally::gpu::histogram_range", [&] {
    return detail::histogram_range_async(samples, counts, edges, ws, options, stream);
  });
}

/** @brief Histogram over sorted host `edges` on the GPU; waits and returns the left-out count. */
template <class Sample, class Counter>
histogram_result histogram_range(std::span<const Sample> samples, std::span<Counter> counts,
                                 std::span<const double> edges, const histogram_options& options = {},
                                 stream_t stream = nullptr) {
  return detail::naming_failures("tally::gpu::histogram_range", [&]() -> histogram_result {
    workspace& ws = detail::waiting_workspace(stream);
    const choice chose = histogram_range_async(samples, counts, edges, ws, options, stream);
    return {chose, ws.read_scalar(stream)};
  });
}

/**
 * @brief bincount on the GPU; never synchronizes, and so does not check for negative samples:
 * they are left out and counted in `ws.scalar()`. Use `bincount` to have them rejected.
 */
template <class Sample, class Counter>
choice bincount_async(std::span<const Sample> samples, std::span<Counter> counts, workspace& ws,
                      const histogram_options& options = {}, stream_t stream = nullptr) {
  static_assert(is_bincount_sample_v<Sample>, "bincount samples: the integer histogram samples");
  static_assert(is_counter_v<Counter>, "counters: uint32 or uint64");
  return detail::naming_failures("tally::gpu::bincount", [&] {
    return detail::bincount_async(samples, counts, ws, options, stream);
  });
}

/**
 * @brief bincount on the GPU. For signed samples a first pass looks for negative values and
 * throws, naming the first one, before the counts are written.
 */
template <class Sample, class Counter>
histogram_result bincount(std::span<const Sample> samples, std::span<Counter> counts,
                          const histogram_options& options = {}, stream_t stream = nullptr) {
  return detail::naming_failures("tally::gpu::bincount", [&]() -> histogram_result {
    workspace& ws = detail::waiting_workspace(stream);
    detail::check_bincount_samples(samples, ws, stream);
    const choice chose = bincount_async(samples, counts, ws, options, stream);
    return {chose, ws.read_scalar(stream)};
  });
}

/** @brief Sum, min or max on the GPU; the result's bits land in `ws.scalar()`. */
template <class T>
choice reduce_async(std::span<const T> samples, reduce_op op, workspace& ws, const reduce_options& options = {},
                    stream_t stream = nullptr) {
  static_assert(is_reduce_sample_v<T>, "reduce samples: the types of is_reduce_sample_v (tally/reduce.hpp)");
  return detail::naming_failures("tally::gpu::reduce", [&] {
    return detail::reduce_async(samples, op, ws, options, stream);
  });
}

/** @brief Sum, min or max on the GPU (same semantics as tally::cpu::reduce); waits. */
template <class T>
reduce_result<T> reduce(std::span<const T> samples, reduce_op op, const reduce_options& options = {},
                        stream_t stream = nullptr) {
  static_assert(sizeof(accumulator_t<T>) <= sizeof(std::uint64_t));
  return detail::naming_failures("tally::gpu::reduce", [&]() -> reduce_result<T> {
    workspace& ws = detail::waiting_workspace(stream);
    const choice chose = reduce_async(samples, op, ws, options, stream);
    const std::uint64_t bits = ws.read_scalar(stream);
    accumulator_t<T> value;
    std::memcpy(&value, &bits, sizeof(value));
    return {value, chose};
  });
}

/** @brief How many samples satisfy `predicate` on the GPU; never synchronizes: the count lands in `ws.scalar()`. */
template <class T>
choice count_if_async(std::span<const T> samples, compare_to<T> predicate, workspace& ws,
                      const reduce_options& options = {}, stream_t stream = nullptr) {
  return detail::naming_failures("tally::gpu::count_if", [&] {
    return detail::predicate_async(operation::count_if, samples, predicate, ws, options, stream);
  });
}

/**
 * @brief The first index whose sample satisfies `predicate` on the GPU (samples.size() if none);
 * never synchronizes: the index lands in `ws.scalar()`.
 */
template <class T>
choice find_first_if_async(std::span<const T> samples, compare_to<T> predicate, workspace& ws,
                           const reduce_options& options = {}, stream_t stream = nullptr) {
  return detail::naming_failures("tally::gpu::find_first_if", [&] {
    return detail::predicate_async(operation::find_first_if, samples, predicate, ws, options, stream);
  });
}

/** @brief How many samples satisfy `predicate` on the GPU; waits. */
template <class T>
count_result count_if(std::span<const T> samples, compare_to<T> predicate, const reduce_options& options = {},
                      stream_t stream = nullptr) {
  return detail::naming_failures("tally::gpu::count_if", [&] {
    return detail::predicate_waited<count_result>(operation::count_if, samples, predicate, options, stream);
  });
}

/** @brief The first index whose sample satisfies `predicate` on the GPU (samples.size() if none); waits. */
template <class T>
find_result find_first_if(std::span<const T> samples, compare_to<T> predicate, const reduce_options& options = {},
                          stream_t stream = nullptr) {
  return detail::naming_failures("tally::gpu::find_first_if", [&] {
    return detail::predicate_waited<find_result>(operation::find_first_if, samples, predicate, options, stream);
  });
}

}  // namespace tally::gpu
