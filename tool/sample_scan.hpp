// The passes over a chunk of samples that `tally hist` makes besides counting: the smallest and
// largest sample (a range from the data, a bincount's length), whether any is not finite or
// negative, and how many are not finite. Each is one loop the compiler vectorizes, split over the
// OpenMP threads, so a pass costs about a read of the chunk: the serial std::minmax_element and
// find_if they replace took longer than the counting itself (docs/performance.md, "CPU backend").
// Host-only.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tally/bins.hpp"
#include "tally/cpu/histogram.hpp"
#include "tally/cpu/parallel.hpp"
#include "tally/small_float.hpp"

namespace tally::cli {

/** @brief What extent_of found in a chunk. */
template <class T>
struct chunk_extent {
  T lowest{};
  T highest{};
  bool all_finite = true;  ///< no NaN or infinity (always true for integers); lowest and highest hold only then
};

namespace detail {

#if defined(__SSE2__)
/// extent_of_run for float or double, with SSE's min and max (given as the float or double
/// intrinsics): two vectors of running minima and maxima, and the lanes that met a NaN.
template <class T, class Load, class Min, class Max, class Or, class Unordered, class Set1, class Store, class Mask>
chunk_extent<T> sse_extent(const T* data, std::size_t n, Load load, Min min, Max max, Or bit_or, Unordered unordered,
                           Set1 set1, Store store, Mask mask) {
  constexpr std::size_t lanes = 16 / sizeof(T);
  auto low0 = set1(data[0]), low1 = low0, high0 = low0, high1 = low0;
  auto odd = set1(T{0});
  std::size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    __builtin_prefetch(data + i + cpu::detail::prefetch_distance / sizeof(T));  // as the count loops
    const auto a = load(data + i);
    const auto b = load(data + i + lanes);
    low0 = min(low0, a);
    high0 = max(high0, a);
    low1 = min(low1, b);
    high1 = max(high1, b);
    odd = bit_or(odd, bit_or(unordered(a, a), unordered(b, b)));
  }
  T lows[2 * lanes], highs[2 * lanes];
  store(lows, low0);
  store(lows + lanes, low1);
  store(highs, high0);
  store(highs + lanes, high1);
  bool nan = mask(odd) != 0;
  T lowest = lows[0], highest = highs[0];
  for (std::size_t k = 1; k < 2 * lanes; ++k) {
    lowest = std::min(lowest, lows[k]);
    highest = std::max(highest, highs[k]);
  }
  for (; i < n; ++i) {
    nan = nan || data[i] != data[i];
    lowest = std::min(lowest, data[i]);
    highest = std::max(highest, data[i]);
  }
  chunk_extent<T> extent;
  extent.lowest = lowest;
  extent.highest = highest;
  extent.all_finite = !nan && std::isfinite(lowest) && std::isfinite(highest);
  return extent;
}
#endif

/// The extent of data[0, n) (n > 0) on one thread. Floats with SSE's min and max, which the
/// compiler would not use for a ternary (its NaN rules differ; NaN is tracked apart here), and
/// integers with four running extents the compiler keeps in vector registers where it can.
template <class T>
chunk_extent<T> extent_of_run(const T* data, std::size_t n) {
  chunk_extent<T> extent;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {
    return sse_extent(data, n, _mm_loadu_ps, _mm_min_ps, _mm_max_ps, _mm_or_ps, _mm_cmpunord_ps, _mm_set1_ps,
                      _mm_storeu_ps, _mm_movemask_ps);
  } else if constexpr (std::is_same_v<T, double>) {
    return sse_extent(data, n, _mm_loadu_pd, _mm_min_pd, _mm_max_pd, _mm_or_pd, _mm_cmpunord_pd, _mm_set1_pd,
                      _mm_storeu_pd, _mm_movemask_pd);
  }
#endif
  T low[4] = {data[0], data[0], data[0], data[0]};
  T high[4] = {data[0], data[0], data[0], data[0]};
  bool odd = false;
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __builtin_prefetch(data + i + cpu::detail::prefetch_distance / sizeof(T));
    for (int k = 0; k < 4; ++k) {
      const T x = data[i + static_cast<std::size_t>(k)];
      low[k] = x < low[k] ? x : low[k];
      high[k] = x > high[k] ? x : high[k];
      if constexpr (std::is_floating_point_v<T>) odd = odd || x != x;
    }
  }
  for (; i < n; ++i) {
    low[0] = data[i] < low[0] ? data[i] : low[0];
    high[0] = data[i] > high[0] ? data[i] : high[0];
    if constexpr (std::is_floating_point_v<T>) odd = odd || data[i] != data[i];
  }
  extent.lowest = std::min(std::min(low[0], low[1]), std::min(low[2], low[3]));
  extent.highest = std::max(std::max(high[0], high[1]), std::max(high[2], high[3]));
  if constexpr (std::is_floating_point_v<T>) {
    extent.all_finite = !odd && std::isfinite(extent.lowest) && std::isfinite(extent.highest);
  }
  return extent;
}

}  // namespace detail

/**
 * @brief The smallest and largest of `chunk` (not empty), in one vectorized pass, split over the
 * threads. With a NaN or an infinity in the chunk, all_finite is false and the extent means nothing.
 */
template <class T>
chunk_extent<T> extent_of(std::span<const T> chunk) {
  if constexpr (is_half_float_v<T>) {
    // Rare types with no vector arithmetic here: the plain loops.
    chunk_extent<T> extent;
    extent.all_finite = std::all_of(chunk.begin(), chunk.end(), [](T x) { return std::isfinite(static_cast<double>(x)); });
    if (extent.all_finite) {
      const auto [low, high] = std::minmax_element(chunk.begin(), chunk.end());
      extent.lowest = *low;
      extent.highest = *high;
    }
    return extent;
  } else {
    if (!cpu::detail::threads_pay(chunk.size())) return detail::extent_of_run(chunk.data(), chunk.size());
    std::vector<chunk_extent<T>> parts(static_cast<std::size_t>(cpu::detail::max_threads()));
    std::size_t team = 1;
#pragma omp parallel
    {
      const auto threads = static_cast<std::size_t>(cpu::detail::team_size());
      const auto t = static_cast<std::size_t>(cpu::detail::thread_num());
      const std::size_t first = chunk.size() * t / threads;
      const std::size_t last = chunk.size() * (t + 1) / threads;
      if (t == 0) team = threads;
      if (last > first) parts[t] = detail::extent_of_run(chunk.data() + first, last - first);
    }
    chunk_extent<T> extent = detail::extent_of_run(chunk.data(), 1);
    for (std::size_t t = 0; t < team; ++t) {
      extent.lowest = std::min(extent.lowest, parts[t].lowest);
      extent.highest = std::max(extent.highest, parts[t].highest);
      extent.all_finite = extent.all_finite && parts[t].all_finite;
    }
    return extent;
  }
}

/** @brief How many samples of `chunk` are NaN or infinite, in one vectorized pass over the threads. */
template <class T>
std::uint64_t count_not_finite(std::span<const T> chunk) {
  if constexpr (!is_floating_sample_v<T>) {
    return 0;
  } else if constexpr (is_half_float_v<T>) {
    return static_cast<std::uint64_t>(
        std::count_if(chunk.begin(), chunk.end(), [](T x) { return !std::isfinite(static_cast<double>(x)); }));
  } else {
    // On the bits: NaN and infinities have every exponent bit set. Integer compares vectorize
    // where floating ones, under OpenMP's simd, did not (a pass took 0.6 of the counting's time).
    using word = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    constexpr word exponent = static_cast<word>(sizeof(T) == 4 ? 0x7f800000u : 0x7ff0000000000000u);
    const auto* bits = reinterpret_cast<const word*>(chunk.data());
    constexpr std::int64_t step = 64 / sizeof(word);  // a cache line, prefetched as the count loops do
    const auto n = static_cast<std::int64_t>(chunk.size());
    const std::int64_t lines = n / step;
    std::uint64_t odd = 0;
    const bool threads = cpu::detail::threads_pay(chunk.size());
#pragma omp parallel for if (threads) reduction(+ : odd)
    for (std::int64_t line = 0; line < lines; ++line) {
      const word* at = bits + line * step;
      __builtin_prefetch(at + cpu::detail::prefetch_distance / sizeof(word));
      for (std::int64_t k = 0; k < step; ++k) odd += (at[k] & exponent) == exponent ? 1 : 0;
    }
    for (std::int64_t i = lines * step; i < n; ++i) odd += (bits[i] & exponent) == exponent ? 1 : 0;
    return odd;
  }
}

/**
 * @brief The length a bincount whose length comes from the data first counts `chunk` into: every
 * value for 8- and 16-bit samples; for wider ones the largest of up to 4096 samples spread over
 * the chunk, times four, rounded up to a power of two, at least 256 and at most an eighth of the
 * chunk (so that private copies of the counts stay small beside the samples) or 2^22. A larger
 * value grows the counts once its chunk is counted (a pass over that chunk): a short guess costs
 * time, never counts.
 */
template <class T>
std::uint64_t first_bincount_length(std::span<const T> chunk) {
  if constexpr (sizeof(T) <= 2) {
    return std::uint64_t{1} << (8 * sizeof(T));
  } else {
    const std::size_t step = std::max<std::size_t>(1, chunk.size() / 4096);
    std::uint64_t largest = 0;
    for (std::size_t i = 0; i < chunk.size(); i += step) {
      if (chunk[i] > T{0}) largest = std::max(largest, static_cast<std::uint64_t>(chunk[i]));
    }
    const std::uint64_t most = std::max<std::uint64_t>(256, std::min<std::uint64_t>(std::uint64_t{1} << 22, chunk.size() / 8));
    largest = std::min(largest, std::uint64_t{1} << 40);  // no overflow below
    return std::clamp<std::uint64_t>(std::bit_ceil(largest * 4 + 1), 256, most);
  }
}

/**
 * @brief Range bins on the CPU whose left-out samples come split, the NaN and infinite ones apart,
 * with no pass of their own: the library counts over the edges extended by the largest finite
 * double on either side (a bin below the first edge, one above the last, the last edge closed), so
 * the samples it leaves out are exactly those that are not finite. The pass that counted them
 * cost 8-10% of a run (10^7 float32 samples over 7 quantile bins, tally hist's wall time, medians
 * of 7: one thread 43.5 -> 40.2 ms, two 27.4 -> 24.5 ms).
 */
class range_bins_apart {
 public:
  /// `edges`: sorted and finite (checked by the caller); fits() is false where the extension
  /// cannot be made (a closed last bin at the largest double).
  range_bins_apart(std::span<const double> edges, upper_edge last_edge) {
    constexpr double largest = std::numeric_limits<double>::max();
    extended_.reserve(edges.size() + 2);
    extended_.push_back(-largest);
    extended_.insert(extended_.end(), edges.begin(), edges.end());
    // The user's closed last bin, [e, last], is [e, the next double above last) here.
    if (last_edge == upper_edge::inclusive) extended_.back() = std::nextafter(edges.back(), std::numeric_limits<double>::infinity());
    extended_.push_back(largest);
    fits_ = std::isfinite(extended_[extended_.size() - 2]);
  }

  /** @brief Whether count() can be used. */
  [[nodiscard]] bool fits() const { return fits_; }

  /**
   * @brief Counts `samples` into `counts` (the user's bins) and returns what cpu::histogram_range
   * over the user's edges returns; adds the samples left out that are NaN or infinite to `not_finite`.
   */
  template <class T>
  histogram_result count(std::span<const T> samples, std::span<std::uint64_t> counts, strategy algorithm,
                         std::uint64_t& not_finite) {
    scratch_.resize(counts.size() + 2);
    const histogram_result result = cpu::histogram_range(samples, std::span<std::uint64_t>(scratch_),
                                                         std::span<const double>(extended_),
                                                         histogram_options{algorithm, upper_edge::inclusive});
    std::copy(scratch_.begin() + 1, scratch_.end() - 1, counts.begin());
    not_finite += result.left_out;
    return {result.chose, result.left_out + scratch_.front() + scratch_.back()};
  }

 private:
  std::vector<double> extended_;
  std::vector<std::uint64_t> scratch_;
  bool fits_ = false;
};

}  // namespace tally::cli
