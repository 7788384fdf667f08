// The input distributions every histogram benchmark covers (shared/BENCHMARKING.md), plus our
// own adversarial ones, and the weights of weighted histograms. Inputs are generated in
// parallel, chunk by chunk, from a seed, so the same seed gives the same input on any machine
// and thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tally/small_float.hpp"

namespace tally::cli {

enum class distribution {
  uniform,     ///< bins drawn uniformly
  geometric,   ///< half the samples in bin 0, a quarter in bin 1, ...
  single,      ///< every sample in one bin: the worst contention
  sorted,      ///< ascending, long runs of equal bins
  loguniform,  ///< power law over the bin range
  strided32,   ///< uniform over bins that are multiples of 32: one shared-memory bank
  few_hot,     ///< four hot bins spread over the range take 90% (50/20/12/8%), the rest uniform
};

std::string_view to_string(distribution d);
/** @brief The distribution of `name`; also takes `bank32`, strided32's old name. */
std::optional<distribution> parse_distribution(std::string_view name);
/** @brief The seven distributions of the benchmarking guide, the default set. */
std::vector<distribution> standard_distributions();
/** @brief The names parse_distribution takes, for help texts: "uniform, geometric, ...". */
std::string distribution_names();

/**
 * @brief `x` as a T sample: integers converted (x must be one that T holds), float and double
 * rounded, float16 and bfloat16 rounded toward zero to their precision (and kept finite), so that
 * a value inside a bin whose lower edge T holds stays inside that bin.
 */
template <class T>
T sample_from(double x) {
  if constexpr (is_half_float_v<T>) {
    if (x == 0.0 || !std::isfinite(x)) return T::from_exact(x);
    int exponent = 0;
    (void)std::frexp(x, &exponent);  // |x| in [2^(exponent-1), 2^exponent)
    const int unit = std::max(exponent, T::min_exponent + 1) - T::digits;
    const double truncated = std::ldexp(std::trunc(std::ldexp(x, -unit)), unit);
    return T::from_exact(std::clamp(truncated, -T::largest, T::largest));
  } else {
    return static_cast<T>(x);
  }
}

/**
 * @brief The most bins over [0, B) that generate_samples can fill with T samples, one value or
 * more a bin: the integers 0 to B - 1 must all be T values (uint8: 256, int8: 128, int16: 32768,
 * uint16: 65536, float16: 2048, bfloat16: 256; the wider types set no limit).
 */
template <class T>
constexpr std::int64_t most_generated_bins() {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
    return std::int64_t{1} << T::digits;  // beyond 2^digits, not every integer is one
  } else if constexpr (std::is_integral_v<T> && sizeof(T) <= 2) {
    return static_cast<std::int64_t>(std::numeric_limits<T>::max()) + 1;
  } else {
    return std::numeric_limits<std::int64_t>::max();
  }
}

/**
 * @brief Fills `out` with samples whose bins over [0, num_bins) follow `d`. Integer samples are
 * the bin itself; floating samples are the bin plus a fraction that keeps them inside the bin
 * (sample_from: float16 and bfloat16 keep what of it their precision holds). num_bins must not
 * exceed most_generated_bins<T>().
 */
template <class T>
void generate_samples(distribution d, std::int64_t num_bins, std::uint64_t seed, std::span<T> out);

/** @brief How the edges of range bins are laid out (`tally bench --edges`). */
enum class edge_layout {
  log,     ///< e_k = (B + 1)^(k / B) - 1: narrow bins at the bottom, wide at the top
  random,  ///< B - 1 interior edges drawn uniformly from (0, B), sorted
};

std::string_view to_string(edge_layout layout);
std::optional<edge_layout> parse_edge_layout(std::string_view name);

/**
 * @brief The B + 1 = num_bins + 1 strictly increasing edges of `layout` over [0, B] (e_0 = 0 and
 * e_B = B exactly), the bins of the samples generate_samples gives for B bins. Random edges come
 * from `seed` (and B), apart from the samples' stream.
 */
std::vector<double> generate_edges(edge_layout layout, std::int64_t num_bins, std::uint64_t seed);

/**
 * @brief The smallest and the largest finite sample, as doubles (NaN and infinities take no part):
 * the range numpy.histogram(a, bins) takes from the data. Without a finite sample, lower > upper.
 */
template <class T>
std::pair<double, double> finite_extremes(std::span<const T> samples);

/**
 * @brief Fills `out` with weights drawn uniformly from [0, 1) on a grid of 2^-24 (every one a
 * float), from a stream of `seed` apart from the samples' (so weights do not follow bins).
 */
void generate_weights(std::uint64_t seed, std::span<float> out);
/**
 * @brief Fills `out` with weights drawn uniformly from [0, 1] with every bit of a double's
 * mantissa at its magnitude (two 53-bit draws added, rounded once), as computed data has: most of
 * those below 2^-12 have bits below 2^-64. From the same stream as the float weights of `seed`.
 */
void generate_weights(std::uint64_t seed, std::span<double> out);

}  // namespace tally::cli
