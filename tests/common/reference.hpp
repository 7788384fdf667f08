// The brute-force oracle every CPU and GPU test compares against. It shares no code with
// tally's bin mappers: even-bin edges are written out one by one, and each sample's bin is
// found by std::upper_bound over that edge array, so a wrong estimate or fix-up in
// tally::even_bin_mapper cannot also be wrong here. Host-only and header-only: no CUDA header,
// so .cu test files can include it too.
//
// The rules it implements are tally's documented ones (include/tally/bins.hpp):
//  - even bins: edge_i = lower + i * ((upper - lower) / num_bins) in double, the product and the
//    sum rounded separately (numpy.linspace), the last edge is `upper` itself; float samples are
//    compared with the edges rounded to float, in float; float16 and bfloat16 samples with the
//    edges rounded to their own precision (numpy's float16 edges); every other sample type is
//    converted to double and compared in double;
//  - a sample is in bin i when edge_i <= x < edge_{i+1}; with upper_edge::inclusive a sample equal
//    to the last edge counts in the last bin; anything else is left out;
//  - NaN and infinities are always left out (bins.hpp says so even when a float edge overflows to
//    infinity);
//  - range bins: the same rule over the caller's double edges, compared in double;
//  - bincount: value v counts in bin v; negative values and values >= num_bins are left out.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "tally/bins.hpp"

namespace tally_test {

/** @brief Counts and left-out total computed by the oracle. */
struct reference_histogram {
  std::vector<std::uint64_t> counts;
  std::uint64_t left_out = 0;
};

/** @brief The precision the oracle compares a sample type in: float for float, else double. */
template <class Sample>
using reference_compare_t = std::conditional_t<std::is_same_v<Sample, float>, float, double>;

/**
 * @brief `x` rounded to bfloat16 (ties to even, infinity beyond the largest finite value),
 * written apart from tally's rounding: on the double's bits for normal values, as a multiple of
 * 2^-133 (the subnormals' spacing) below 2^-126.
 */
inline double reference_round_bfloat16(double x) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0) return x;
  const double magnitude = std::fabs(x);
  double rounded = 0.0;
  if (magnitude < 0x1p-126) {
    rounded = std::nearbyint(magnitude * 0x1p133) * 0x1p-133;  // the default rounding mode: ties to even
  } else {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &magnitude, sizeof(bits));
    constexpr int dropped = 52 - 7;  // a double keeps 52 fraction bits, a bfloat16 7
    const std::uint64_t last_kept = (bits >> dropped) & 1u;
    bits += (std::uint64_t{1} << (dropped - 1)) - 1u + last_kept;  // a carry may raise the exponent: right
    bits &= ~((std::uint64_t{1} << dropped) - 1u);
    std::memcpy(&rounded, &bits, sizeof(rounded));
  }
  if (rounded > 0x1.fep127) rounded = std::numeric_limits<double>::infinity();
  return std::copysign(rounded, x);
}

#if defined(__FLT16_MAX__) && !defined(__CUDACC__)
/** @brief `x` rounded to float16 by the compiler's _Float16 conversion (ties to even). */
inline double reference_round_float16(double x) { return static_cast<double>(static_cast<_Float16>(x)); }
#endif

/** @brief An edge as the oracle compares it: rounded to float for float samples, to the sample's
 * own precision for float16 and bfloat16 (numpy's float16 edges), else the double itself. */
template <class Sample>
double reference_edge(double edge) {
  if constexpr (std::is_same_v<Sample, tally::bfloat16>) {
    return reference_round_bfloat16(edge);
  } else if constexpr (std::is_same_v<Sample, tally::float16>) {
#if defined(__FLT16_MAX__) && !defined(__CUDACC__)
    return reference_round_float16(edge);
#else
    static_assert(sizeof(Sample) == 0, "the float16 oracle needs the compiler's _Float16");
#endif
  } else {
    return static_cast<double>(static_cast<reference_compare_t<Sample>>(edge));
  }
}

/** @brief The num_bins + 1 even-bin edges, written out, in the precision `Sample` compares in. */
template <class Sample>
std::vector<reference_compare_t<Sample>> reference_even_edges(std::int64_t num_bins, double lower, double upper) {
  using C = reference_compare_t<Sample>;
  const double step = (upper - lower) / static_cast<double>(num_bins);
  std::vector<C> edges(static_cast<std::size_t>(num_bins) + 1);
  for (std::int64_t i = 0; i < num_bins; ++i) {
    // volatile: the product must be rounded before the sum even where the compiler could fuse them.
    volatile double product = static_cast<double>(i) * step;
    const double edge = product + lower;
    edges[static_cast<std::size_t>(i)] = static_cast<C>(reference_edge<Sample>(edge));
  }
  edges[static_cast<std::size_t>(num_bins)] = static_cast<C>(reference_edge<Sample>(upper));
  return edges;
}

/**
 * @brief The num_bins + 1 edges numpy's linspace computes in float32 (numpy.histogram's edges for
 * float32 data over its own range), written out from numpy's source: delta = stop - start,
 * step = delta / n (or, where that underflows to 0, (i / n) * delta), edge i = i * step + start,
 * each operation rounded to float32, the index a float32 (numpy's arange); the last edge stop.
 * Then rounded to the precision `Sample` compares in.
 */
template <class Sample>
std::vector<reference_compare_t<Sample>> reference_even_edges_float32(std::int64_t num_bins, double lower,
                                                                      double upper) {
  using C = reference_compare_t<Sample>;
  const auto start = static_cast<float>(lower);
  const auto stop = static_cast<float>(upper);
  const volatile float delta = stop - start;
  const auto div = static_cast<float>(num_bins);
  const volatile float step = delta / div;
  std::vector<C> edges(static_cast<std::size_t>(num_bins) + 1);
  for (std::int64_t i = 0; i < num_bins; ++i) {
    const auto index = static_cast<float>(i);
    volatile float offset = 0.0f;  // volatile: each operation rounded to float32, never fused
    if (step == 0.0f) {
      volatile float fraction = index / div;
      offset = fraction * delta;
    } else {
      offset = index * step;
    }
    const float edge = offset + start;
    edges[static_cast<std::size_t>(i)] = static_cast<C>(reference_edge<Sample>(static_cast<double>(edge)));
  }
  edges[static_cast<std::size_t>(num_bins)] = static_cast<C>(reference_edge<Sample>(static_cast<double>(stop)));
  return edges;
}

/** @brief The bin of `x` among non-decreasing `edges`, or tally::left_out_bin, by std::upper_bound. */
template <class C>
std::int64_t reference_bin_of(C x, const std::vector<C>& edges, bool inclusive) {
  if (std::isnan(x) || std::isinf(x)) return tally::left_out_bin;
  const auto num_bins = static_cast<std::int64_t>(edges.size()) - 1;
  const C first = edges.front();
  const C last = edges.back();
  if (x == last) return inclusive ? num_bins - 1 : tally::left_out_bin;
  if (x < first || x > last) return tally::left_out_bin;
  // The first edge strictly greater than x closes x's bin; the edge before it opens it.
  const auto it = std::upper_bound(edges.begin(), edges.end(), x);
  return static_cast<std::int64_t>(it - edges.begin()) - 1;
}

/** @brief Even-bin oracle for one sample type: the edges, and the bin of one sample. */
template <class Sample>
class reference_even {
 public:
  using compare_type = reference_compare_t<Sample>;

  reference_even(std::int64_t num_bins, double lower, double upper, tally::upper_edge last_edge)
      : edges_(reference_even_edges<Sample>(num_bins, lower, upper)),
        inclusive_(last_edge == tally::upper_edge::inclusive) {}
  reference_even(const tally::even_bins& bins, tally::upper_edge last_edge)
      : edges_(bins.arithmetic == tally::edge_arithmetic::float32
                   ? reference_even_edges_float32<Sample>(bins.num_bins, bins.lower, bins.upper)
                   : reference_even_edges<Sample>(bins.num_bins, bins.lower, bins.upper)),
        inclusive_(last_edge == tally::upper_edge::inclusive) {}

  [[nodiscard]] std::int64_t num_bins() const { return static_cast<std::int64_t>(edges_.size()) - 1; }
  [[nodiscard]] const std::vector<compare_type>& edges() const { return edges_; }
  [[nodiscard]] std::int64_t bin(Sample sample) const {
    return reference_bin_of(static_cast<compare_type>(sample), edges_, inclusive_);
  }

 private:
  std::vector<compare_type> edges_;
  bool inclusive_;
};

/** @brief Range-bin oracle: the caller's edges, compared in double. */
template <class Sample>
class reference_range {
 public:
  reference_range(std::span<const double> edges, tally::upper_edge last_edge)
      : edges_(edges.begin(), edges.end()), inclusive_(last_edge == tally::upper_edge::inclusive) {}

  [[nodiscard]] std::int64_t num_bins() const { return static_cast<std::int64_t>(edges_.size()) - 1; }
  [[nodiscard]] std::int64_t bin(Sample sample) const {
    return reference_bin_of(static_cast<double>(sample), edges_, inclusive_);
  }

 private:
  std::vector<double> edges_;
  bool inclusive_;
};

/** @brief Bincount oracle: v goes to bin v when 0 <= v < num_bins. */
template <class Sample>
class reference_bincount {
 public:
  explicit reference_bincount(std::int64_t num_bins) : num_bins_(num_bins) {}

  [[nodiscard]] std::int64_t num_bins() const { return num_bins_; }
  [[nodiscard]] std::int64_t bin(Sample sample) const {
    if constexpr (std::is_signed_v<Sample>) {
      if (sample < 0) return tally::left_out_bin;
      if (static_cast<std::int64_t>(sample) >= num_bins_) return tally::left_out_bin;
      return static_cast<std::int64_t>(sample);
    } else {
      if (static_cast<std::uint64_t>(sample) >= static_cast<std::uint64_t>(num_bins_)) return tally::left_out_bin;
      return static_cast<std::int64_t>(sample);
    }
  }

 private:
  std::int64_t num_bins_;
};

/** @brief Counts `samples` with any oracle above, one sample at a time. */
template <class Sample, class Oracle>
reference_histogram reference_count(std::span<const Sample> samples, const Oracle& oracle) {
  reference_histogram result;
  result.counts.assign(static_cast<std::size_t>(oracle.num_bins()), 0);
  for (const Sample x : samples) {
    const std::int64_t bin = oracle.bin(x);
    if (bin < 0) {
      ++result.left_out;
    } else {
      ++result.counts[static_cast<std::size_t>(bin)];
    }
  }
  return result;
}

/** @brief numpy.histogram(samples, bins=num_bins, range=(lower, upper)) by brute force. */
template <class Sample>
reference_histogram reference_histogram_even(std::span<const Sample> samples, const tally::even_bins& bins,
                                             tally::upper_edge last_edge = tally::upper_edge::exclusive) {
  return reference_count(samples, reference_even<Sample>(bins, last_edge));
}

/** @brief numpy.histogram(samples, bins=edges) by brute force (inclusive gives numpy's last bin). */
template <class Sample>
reference_histogram reference_histogram_range(std::span<const Sample> samples, std::span<const double> edges,
                                              tally::upper_edge last_edge = tally::upper_edge::exclusive) {
  return reference_count(samples, reference_range<Sample>(edges, last_edge));
}

/** @brief numpy.bincount(samples, minlength=num_bins)[:num_bins], counting the rest as left out. */
template <class Sample>
reference_histogram reference_bincount_counts(std::span<const Sample> samples, std::int64_t num_bins) {
  return reference_count(samples, reference_bincount<Sample>(num_bins));
}

}  // namespace tally_test
