// The input distributions every histogram benchmark covers (shared/BENCHMARKING.md), plus our
// own adversarial ones, and the weights of weighted histograms. Inputs are generated in
// parallel, chunk by chunk, from a seed, so the same seed gives the same input on any machine
// and thread count.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace tally::cli {

enum class distribution {
  uniform,     ///< bins drawn uniformly
  geometric,   ///< half the samples in bin 0, a quarter in bin 1, ...
  single,      ///< every sample in one bin: the worst contention
  sorted,      ///< ascending, long runs of equal bins
  loguniform,  ///< power law over the bin range
  bank32,      ///< uniform over bins that are multiples of 32: one shared-memory bank
};

std::string_view to_string(distribution d);
std::optional<distribution> parse_distribution(std::string_view name);
/** @brief The five distributions of the benchmarking guide, the default set. */
std::vector<distribution> standard_distributions();

/**
 * @brief Fills `out` with samples whose bins over [0, num_bins) follow `d`. Integer samples are
 * the bin itself; floating samples are the bin plus a fraction that keeps them inside the bin.
 */
template <class T>
void generate_samples(distribution d, std::int64_t num_bins, std::uint64_t seed, std::span<T> out);

/**
 * @brief Fills `out` with weights drawn uniformly from [0, 1) on a grid of 2^-24 (every one a
 * float), from a stream of `seed` apart from the samples' (so weights do not follow bins).
 */
void generate_weights(std::uint64_t seed, std::span<float> out);

}  // namespace tally::cli
