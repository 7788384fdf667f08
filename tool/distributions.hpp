// The input distributions every histogram benchmark covers (shared/BENCHMARKING.md), plus our
// own adversarial ones, and the weights of weighted histograms. Inputs are generated in
// parallel, chunk by chunk, from a seed, so the same seed gives the same input on any machine
// and thread count.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
 * @brief Fills `out` with samples whose bins over [0, num_bins) follow `d`. Integer samples are
 * the bin itself; floating samples are the bin plus a fraction that keeps them inside the bin.
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

}  // namespace tally::cli
