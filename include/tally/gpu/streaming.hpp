// Counting on the GPU samples that are still on the host: a pageable or pinned array, or a reader
// (a file, a pipe). Chunks pass through a ring of pinned staging buffers; the host fills one while
// the copy engine moves the one before and the GPU counts the one before that, and the totals add
// up on the device, so the counting costs what the slowest of reading and copying costs. Host-safe
// header, like tally/gpu.hpp: spans of samples here are host memory, counts and sums device memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

#include "tally/gpu.hpp"

namespace tally::gpu {

/** @brief The sizes of a staging ring. */
struct staging_options {
  /// Bytes one chunk carries (samples and weights together): whole MiB, at least 1 MiB.
  std::size_t chunk_bytes = std::size_t{32} << 20;
  /// Chunks in flight, 2 to 16: one filled by the host, one copied, one counted.
  int depth = 3;
};

/**
 * @brief A source of samples on the host: writes up to `into.size()` bytes into `into` (pinned
 * staging memory, so a file read lands where the copy engine takes it) and returns how many it
 * wrote, whole samples only; fewer than asked only at the end of its input. It throws to fail.
 */
using host_reader = std::function<std::size_t(std::span<std::byte> into)>;

/** @brief Samples of type T on the host: an array (pageable or pinned, found out per call) or a reader. */
template <class T>
class host_samples {
 public:
  host_samples(std::span<const T> array) : array_(array) {}  // NOLINT: a span is host samples
  host_samples(host_reader reader) : reader_(std::move(reader)) {}  // NOLINT: so is a reader
  [[nodiscard]] std::span<const T> array() const noexcept { return array_; }
  [[nodiscard]] const host_reader* reader() const noexcept { return reader_ ? &reader_ : nullptr; }

 private:
  std::span<const T> array_;
  host_reader reader_;
};

/**
 * @brief Pinned staging buffers, device chunk buffers, a copy stream and events, kept between
 * calls (pinning 100 MB took 60-250 ms on an H100 host). Allocated at first use on the current device,
 * again if the device changes. One call at a time per ring; `thread_ring()` is each host thread's.
 */
class staging_ring {
 public:
  explicit staging_ring(const staging_options& options = {});
  staging_ring(staging_ring&&) noexcept;
  staging_ring& operator=(staging_ring&&) noexcept;
  staging_ring(const staging_ring&) = delete;
  staging_ring& operator=(const staging_ring&) = delete;
  ~staging_ring();

  [[nodiscard]] const staging_options& options() const noexcept;
  /** @brief Elements a chunk carries, `bytes_per_element` each (samples and weights together): whole
   * 512-element blocks, so that a deterministic sum's cut of the input would fall where one call's does. */
  [[nodiscard]] std::size_t chunk_elements(std::size_t bytes_per_element) const noexcept {
    const std::size_t blocks = options().chunk_bytes / bytes_per_element / 512;
    return (blocks > 0 ? blocks : 1) * 512;
  }
  /** @brief Pinned host bytes held now (0 until an array from pageable memory or a reader came through). */
  [[nodiscard]] std::size_t pinned_bytes() const noexcept;

  /** @brief The calling thread's ring (default sizes), kept while the thread lives. */
  static staging_ring& thread_ring();

  struct state;  ///< the library's: buffers, events, streams
  state& internals() noexcept { return *state_; }

 private:
  std::unique_ptr<state> state_;
};

namespace detail {

/// One array a chunk carries: the samples, or the weights beside them.
struct host_lane {
  std::size_t element_bytes = 0;
  const void* array = nullptr;  ///< a host array of `size` elements...
  std::uint64_t size = 0;
  const host_reader* reader = nullptr;  ///< ...or a reader
  std::string_view argument;            ///< its name in errors
};

/// The work of one chunk: the lanes' device pointers, its number of elements and the index of its
/// first one; enqueued on `stream`, never waited for.
using chunk_work = std::function<void(std::span<const void* const> device, std::size_t elements,
                                      std::uint64_t first_index, stream_t stream)>;

/// What stream_chunks went through.
struct streamed {
  std::uint64_t elements = 0;
  std::uint64_t chunks = 0;
};

/**
 * Carries the lanes through `ring` chunk by chunk and calls `work` for each on `stream`; returns
 * without waiting for the last chunk's work. With `stop_word` (a device word that `work` lowers
 * below UINT64_MAX to say "found"), it stops reading a few chunks after the word is lowered.
 * Validates the lanes (equal sizes, whole elements from readers), naming `function` and the lane.
 */
streamed stream_chunks(staging_ring& ring, std::string_view function, std::span<const host_lane> lanes,
                       const chunk_work& work, stream_t stream, const std::uint64_t* stop_word = nullptr);

/// Device scratch of the ring that outlives one stream_chunks (the totals a call adds up), at least
/// `bytes`; ordered on `stream`. Valid until the next call on the ring.
void* ring_scratch(staging_ring& ring, std::size_t bytes, stream_t stream);

/// totals[i] += part[i] and `*left_total += *left_part` (with `first`: only `*left_total = *left_part`).
void add_chunk_counts(std::uint32_t* totals, const std::uint32_t* part, std::size_t n, std::uint64_t* left_total,
                      const std::uint64_t* left_part, bool first, stream_t stream);
void add_chunk_counts(std::uint64_t* totals, const std::uint64_t* part, std::size_t n, std::uint64_t* left_total,
                      const std::uint64_t* left_part, bool first, stream_t stream);
void add_chunk_counts(double* totals, const double* part, std::size_t n, std::uint64_t* left_total,
                      const std::uint64_t* left_part, bool first, stream_t stream);

/// `*total = reduce_combine(op, *total, *part)` on accumulator words of A (int64, uint64, float or
/// double; with `first`: `*total = *part`).
template <class A>
void combine_chunk_results(reduce_op op, std::uint64_t* total, const std::uint64_t* part, bool first, stream_t stream);

/// find_first_if across chunks: `*found` (UINT64_MAX: none yet) takes `first_index + *part` when
/// this chunk matched (`*part < elements`) and no earlier one did; `first` starts it at none.
void record_first_match(std::uint64_t* found, const std::uint64_t* part, std::uint64_t elements,
                        std::uint64_t first_index, bool first, stream_t stream);

/// Copies a device word to the host after `stream`'s work, waiting.
std::uint64_t read_device_word(const std::uint64_t* word, stream_t stream);

template <class T>
host_lane lane_of(const host_samples<T>& samples, std::string_view argument) {
  return {sizeof(T), samples.array().data(), samples.array().size(), samples.reader(), argument};
}

inline staging_ring& ring_or_thread(staging_ring* ring) { return ring ? *ring : staging_ring::thread_ring(); }

/// Counts of `n` bins: the first chunk counts straight into `counts`, later ones into scratch and
/// are added; the left-out counts add up in the word after the scratch counts.
template <class Counter, class CountChunk>
histogram_result stream_counts(staging_ring& ring, std::string_view function, std::span<const host_lane> lanes,
                               std::span<Counter> counts, workspace& ws, stream_t stream, CountChunk&& count_chunk) {
  const std::size_t counts_bytes = (counts.size_bytes() + 255) / 256 * 256;
  char* scratch = static_cast<char*>(ring_scratch(ring, counts_bytes + sizeof(std::uint64_t), stream));
  auto* part = reinterpret_cast<Counter*>(scratch);
  auto* left_total = reinterpret_cast<std::uint64_t*>(scratch + counts_bytes);
  // An empty call first: checks the arguments before anything is read, zeroes the counts and the
  // left-out word, so that an empty input gives the empty answer.
  choice chose = count_chunk(std::span<const void* const>{}, 0, counts, ws, stream);
  add_chunk_counts(counts.data(), part, 0, left_total, ws.scalar(), true, stream);
  bool first = true;
  stream_chunks(
      ring, function, lanes,
      [&](std::span<const void* const> device, std::size_t n, std::uint64_t, stream_t s) {
        const std::span<Counter> into = first ? counts : std::span<Counter>(part, counts.size());
        const choice used = count_chunk(device, n, into, ws, s);
        if (first) chose = used;  // the first chunk is the largest: its choice is the call's
        add_chunk_counts(counts.data(), part, first ? 0 : counts.size(), left_total, ws.scalar(), first, s);
        first = false;
      },
      stream);
  return {chose, read_device_word(left_total, stream)};
}

/**
 * A scalar result over chunks (a reduction, a count, the first match): `run(chunk, ws, stream)`
 * is the in-memory async call, first on no samples (the checks, and the starting value), then per
 * chunk; `combine(total, part, elements, first_index, first, stream)` folds its scalar into the
 * total word. With `stop_at_match` reading stops once the total is below UINT64_MAX. Returns the
 * total's bits and the number of samples read; `chose` becomes the first chunk's choice.
 */
template <class T, class Run, class Combine>
std::pair<std::uint64_t, std::uint64_t> stream_scalar(staging_ring* ring, std::string_view function,
                                                      const host_lane& lane, stream_t stream, bool stop_at_match,
                                                      choice& chose, Run&& run, Combine&& combine) {
  staging_ring& r = ring_or_thread(ring);
  workspace& ws = waiting_workspace(stream);
  auto* total = static_cast<std::uint64_t*>(ring_scratch(r, sizeof(std::uint64_t), stream));
  chose = run(std::span<const T>{}, ws, stream);
  combine(total, ws.scalar(), 0, 0, true, stream);
  bool first = true;
  const streamed went = stream_chunks(
      r, function, std::span<const host_lane>(&lane, 1),
      [&](std::span<const void* const> device, std::size_t n, std::uint64_t first_index, stream_t s) {
        const choice used = run(std::span<const T>(static_cast<const T*>(device[0]), n), ws, s);
        if (first) chose = used;  // the first chunk is the largest: its choice is the call's
        first = false;
        combine(total, ws.scalar(), n, first_index, false, s);
      },
      stream, stop_at_match ? total : nullptr);
  return {read_device_word(total, stream), went.elements};
}

}  // namespace detail

/**
 * Operations over host samples, counted on the GPU of the current device. Each has the semantics,
 * checks and strategies of the tally::gpu call of the same name (counts and sums equal the ones
 * the in-memory call gives), runs on `stream` and waits for it. Counts and sums are device
 * memory; `ring` (nullptr: the calling thread's) stages the samples. Host arrays in pinned memory
 * are copied straight from where they are; pageable ones and readers go through the pinned
 * buffers. Memory use is the ring's whatever the input's size, so inputs larger than the device's
 * memory work. Not offered: deterministic float sums and weighted sums (their exact digits would
 * have to carry from chunk to chunk), refused with errc::not_supported naming `options`.
 */
namespace from_host {

namespace detail {
inline void refuse_deterministic(std::string_view function, bool deterministic) {
  if (deterministic) {
    throw error(errc::not_supported, "options",
                std::string(function) +
                    ": argument 'options': deterministic sums are not offered over host samples; copy the "
                    "samples to the device and call the in-memory form");
  }
}
template <class T>
std::span<const T> chunk_span(std::span<const void* const> device, std::size_t n) {
  return device.empty() ? std::span<const T>{} : std::span<const T>(static_cast<const T*>(device[0]), n);
}
}  // namespace detail

/** @brief Even-bin histogram of host samples into device `counts`; returns the left-out count. */
template <class Sample, class Counter>
histogram_result histogram_even(const host_samples<Sample>& samples, std::span<Counter> counts, const even_bins& bins,
                                const histogram_options& options = {}, staging_ring* ring = nullptr,
                                stream_t stream = nullptr) {
  constexpr std::string_view function = "tally::gpu::from_host::histogram_even";
  return gpu::detail::naming_failures(function, [&] {
    const gpu::detail::host_lane lanes[] = {gpu::detail::lane_of(samples, "samples")};
    return gpu::detail::stream_counts(
        gpu::detail::ring_or_thread(ring), function, lanes, counts, gpu::detail::waiting_workspace(stream), stream,
        [&](std::span<const void* const> device, std::size_t n, std::span<Counter> into, workspace& ws, stream_t s) {
          return gpu::histogram_even_async(detail::chunk_span<Sample>(device, n), into, bins, ws, options, s);
        });
  });
}

/** @brief Histogram over sorted host `edges` of host samples into device `counts`. */
template <class Sample, class Counter>
histogram_result histogram_range(const host_samples<Sample>& samples, std::span<Counter> counts,
                                 std::span<const double> edges, const histogram_options& options = {},
                                 staging_ring* ring = nullptr, stream_t stream = nullptr) {
  constexpr std::string_view function = "tally::gpu::from_host::histogram_range";
  return gpu::detail::naming_failures(function, [&] {
    const gpu::detail::host_lane lanes[] = {gpu::detail::lane_of(samples, "samples")};
    return gpu::detail::stream_counts(
        gpu::detail::ring_or_thread(ring), function, lanes, counts, gpu::detail::waiting_workspace(stream), stream,
        [&](std::span<const void* const> device, std::size_t n, std::span<Counter> into, workspace& ws, stream_t s) {
          return gpu::histogram_range_async(detail::chunk_span<Sample>(device, n), into, edges, ws, options, s);
        });
  });
}

/**
 * @brief bincount of host samples into device `counts`. Negative samples are left out and counted
 * in the result's `left_out` (the in-memory `bincount` refuses them before counting, which would
 * take a pass of its own over host data): a caller who must refuse them checks `left_out`.
 */
template <class Sample, class Counter>
histogram_result bincount(const host_samples<Sample>& samples, std::span<Counter> counts,
                          const histogram_options& options = {}, staging_ring* ring = nullptr,
                          stream_t stream = nullptr) {
  constexpr std::string_view function = "tally::gpu::from_host::bincount";
  return gpu::detail::naming_failures(function, [&] {
    const gpu::detail::host_lane lanes[] = {gpu::detail::lane_of(samples, "samples")};
    return gpu::detail::stream_counts(
        gpu::detail::ring_or_thread(ring), function, lanes, counts, gpu::detail::waiting_workspace(stream), stream,
        [&](std::span<const void* const> device, std::size_t n, std::span<Counter> into, workspace& ws, stream_t s) {
          return gpu::bincount_async(detail::chunk_span<Sample>(device, n), into, ws, options, s);
        });
  });
}

/**
 * @brief Weighted even-bin histogram of host samples and host weights (the same length, both
 * arrays or both readers) into device `sums`. Plain double sums: each chunk's sums are added into
 * the totals, so they round like a longer sum in another order (the in-memory bound holds).
 */
template <class Sample, class Weight, class Sum>
histogram_result histogram_even(const host_samples<Sample>& samples, const host_samples<Weight>& weights,
                                std::span<Sum> sums, const even_bins& bins, const histogram_options& options = {},
                                staging_ring* ring = nullptr, stream_t stream = nullptr) {
  constexpr std::string_view function = "tally::gpu::from_host::histogram_even";
  return gpu::detail::naming_failures(function, [&] {
    detail::refuse_deterministic(function, options.deterministic);
    const gpu::detail::host_lane lanes[] = {gpu::detail::lane_of(samples, "samples"),
                                            gpu::detail::lane_of(weights, "weights")};
    return gpu::detail::stream_counts(
        gpu::detail::ring_or_thread(ring), function, lanes, sums, gpu::detail::waiting_workspace(stream), stream,
        [&](std::span<const void* const> device, std::size_t n, std::span<Sum> into, workspace& ws, stream_t s) {
          const std::span<const Weight> w =
              device.empty() ? std::span<const Weight>{} : std::span<const Weight>(static_cast<const Weight*>(device[1]), n);
          return gpu::histogram_even_async(detail::chunk_span<Sample>(device, n), w, into, bins, ws, options, s);
        });
  });
}

/** @brief Sum, min or max of host samples on the GPU (float sums in the chunk order; not deterministic). */
template <class T>
reduce_result<T> reduce(const host_samples<T>& samples, reduce_op op, const reduce_options& options = {},
                        staging_ring* ring = nullptr, stream_t stream = nullptr) {
  constexpr std::string_view function = "tally::gpu::from_host::reduce";
  return gpu::detail::naming_failures(function, [&]() -> reduce_result<T> {
    using A = accumulator_t<T>;
    if constexpr (is_floating_sample_v<T>) detail::refuse_deterministic(function, options.deterministic && op == reduce_op::sum);
    reduce_result<T> result{};
    const std::uint64_t bits = gpu::detail::stream_scalar<T>(
        ring, function, gpu::detail::lane_of(samples, "samples"), stream, false, result.chose,
        [&](std::span<const T> chunk, workspace& ws, stream_t s) { return gpu::reduce_async(chunk, op, ws, options, s); },
        [&](std::uint64_t* total, const std::uint64_t* part, std::size_t, std::uint64_t, bool first, stream_t s) {
          gpu::detail::combine_chunk_results<A>(op, total, part, first, s);
        }).first;
    std::memcpy(&result.value, &bits, sizeof(A));
    return result;
  });
}

/** @brief How many host samples satisfy `predicate`, counted on the GPU. */
template <class T>
count_result count_if(const host_samples<T>& samples, compare_to<T> predicate, const reduce_options& options = {},
                      staging_ring* ring = nullptr, stream_t stream = nullptr) {
  constexpr std::string_view function = "tally::gpu::from_host::count_if";
  return gpu::detail::naming_failures(function, [&]() -> count_result {
    count_result result{};
    result.count = gpu::detail::stream_scalar<T>(
                       ring, function, gpu::detail::lane_of(samples, "samples"), stream, false, result.chose,
                       [&](std::span<const T> chunk, workspace& ws, stream_t s) {
                         return gpu::count_if_async(chunk, predicate, ws, options, s);
                       },
                       [&](std::uint64_t* total, const std::uint64_t* part, std::size_t, std::uint64_t, bool first,
                           stream_t s) {
                         gpu::detail::combine_chunk_results<std::uint64_t>(reduce_op::sum, total, part, first, s);
                       })
                       .first;
    return result;
  });
}

/**
 * @brief The first index of the host samples that satisfies `predicate` (the number of samples
 * read if none). Reading stops a few chunks after the chunk that holds the match: a reader is not
 * read to its end, and an array's later chunks are not copied.
 */
template <class T>
find_result find_first_if(const host_samples<T>& samples, compare_to<T> predicate, const reduce_options& options = {},
                          staging_ring* ring = nullptr, stream_t stream = nullptr) {
  constexpr std::string_view function = "tally::gpu::from_host::find_first_if";
  return gpu::detail::naming_failures(function, [&]() -> find_result {
    find_result result{};
    const auto [index, went] = gpu::detail::stream_scalar<T>(
        ring, function, gpu::detail::lane_of(samples, "samples"), stream, true, result.chose,
        [&](std::span<const T> chunk, workspace& ws, stream_t s) {
          return gpu::find_first_if_async(chunk, predicate, ws, options, s);
        },
        [&](std::uint64_t* found, const std::uint64_t* part, std::size_t n, std::uint64_t first_index, bool first,
            stream_t s) { gpu::detail::record_first_match(found, part, n, first_index, first, s); });
    result.index = static_cast<std::int64_t>(index == std::numeric_limits<std::uint64_t>::max() ? went : index);
    return result;
  });
}

}  // namespace from_host
}  // namespace tally::gpu
