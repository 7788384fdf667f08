// Argument checks shared by both backends' host entry points. Every check runs before anything
// is written, and every failure names the function, the argument and the value passed.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "tally/bins.hpp"
#include "tally/error.hpp"

namespace tally::detail {

template <class T>
void check_not_null(std::string_view function, std::string_view argument, std::span<T> values) {
  if (values.data() == nullptr && !values.empty()) {
    throw_invalid_argument(function, argument,
                           "is a null pointer with size " + std::to_string(values.size()));
  }
}

/// 32-bit counters are refused when the samples alone could overflow one bin.
template <class Counter>
void check_counter_capacity(std::string_view function, std::uint64_t num_samples) {
  if (num_samples > std::numeric_limits<Counter>::max()) {
    throw_invalid_argument(function, "counts",
                           "has 32-bit counters, which could overflow with " + std::to_string(num_samples) +
                               " samples; use 64-bit counters");
  }
}

template <class Sample, class Counter>
void check_histogram_buffers(std::string_view function, std::span<const Sample> samples,
                             std::span<Counter> counts, std::int64_t num_bins) {
  check_not_null(function, "samples", samples);
  check_not_null(function, "counts", counts);
  if (static_cast<std::int64_t>(counts.size()) != num_bins) {
    throw_invalid_argument(function, "counts",
                           "has " + std::to_string(counts.size()) + " elements but there are " +
                               std::to_string(num_bins) + " bins");
  }
  check_counter_capacity<Counter>(function, samples.size());
}

/// Weighted histograms: weights as many as samples, one sum per bin, and at most 2^32 - 1
/// samples when `deterministic` (the fixed-point words of a bin could overflow beyond).
template <class Sample, class Weight, class Sum>
void check_weighted_buffers(std::string_view function, std::span<const Sample> samples,
                            std::span<const Weight> weights, std::span<Sum> sums, std::int64_t num_bins,
                            bool deterministic) {
  check_not_null(function, "samples", samples);
  check_not_null(function, "weights", weights);
  check_not_null(function, "sums", sums);
  if (weights.size() != samples.size()) {
    throw_invalid_argument(function, "weights",
                           "has " + std::to_string(weights.size()) + " elements but there are " +
                               std::to_string(samples.size()) + " samples (one weight per sample)");
  }
  if (static_cast<std::int64_t>(sums.size()) != num_bins) {
    throw_invalid_argument(function, "sums",
                           "has " + std::to_string(sums.size()) + " elements but there are " +
                               std::to_string(num_bins) + " bins");
  }
  if (deterministic && samples.size() >= (std::uint64_t{1} << 32)) {
    throw_invalid_argument(function, "samples",
                           "has " + std::to_string(samples.size()) +
                               " samples; a deterministic weighted histogram takes fewer than 2^32");
  }
}

/// The error of a deterministic weighted histogram that met a weight it cannot represent.
[[noreturn]] inline void throw_weight_out_of_range(std::string_view function) {
  throw_invalid_argument(function, "weights",
                         "holds a finite weight of a counted sample with |w| >= 2^31, beyond the range of "
                         "deterministic sums (the sums of the bins it fell in are NaN; set deterministic = false)");
}

inline void check_num_bins(std::string_view function, std::int64_t num_bins) {
  if (num_bins <= 0) throw_invalid_argument(function, "num_bins", "must be > 0 (got " + std::to_string(num_bins) + ")");
}

/// An argument at fault and why.
struct argument_fault {
  const char* argument;
  std::string reason;
};

/// Where even bins whose edges are computed in float32 break that rule's terms (bounds that are
/// float32 values, a difference finite in float32, at most 2^24 bins), or nothing where they keep
/// them: check_even_bins refuses the first, `tally hist` takes the rule only where there is none.
inline std::optional<argument_fault> float32_edges_fault(const even_bins& bins) {
  const auto is_float = [](double v) { return static_cast<double>(static_cast<float>(v)) == v; };
  if (!is_float(bins.lower)) return argument_fault{"lower", "must be a float32 value when the edges are computed in float32"};
  if (!is_float(bins.upper)) return argument_fault{"upper", "must be a float32 value when the edges are computed in float32"};
  if (!std::isfinite(static_cast<float>(bins.upper) - static_cast<float>(bins.lower))) {
    return argument_fault{"upper", "minus lower must be finite in float32 when the edges are computed in float32"};
  }
  if (bins.num_bins > (std::int64_t{1} << 24)) {
    return argument_fault{"num_bins", "must be at most 2^24 when the edges are computed in float32 (got " +
                                          std::to_string(bins.num_bins) + ")"};
  }
  return std::nullopt;
}

inline void check_even_bins(std::string_view function, const even_bins& bins) {
  check_num_bins(function, bins.num_bins);
  if (!std::isfinite(bins.lower)) throw_invalid_argument(function, "lower", "must be finite");
  if (!std::isfinite(bins.upper)) throw_invalid_argument(function, "upper", "must be finite");
  if (!(bins.lower < bins.upper)) {
    throw_invalid_argument(function, "lower",
                           "must be < upper (got lower=" + std::to_string(bins.lower) +
                               ", upper=" + std::to_string(bins.upper) + ")");
  }
  if (!std::isfinite(bins.upper - bins.lower)) {
    throw_invalid_argument(function, "upper", "minus lower must be finite");
  }
  // Bins so narrow that num_bins / (upper - lower) overflows have no representable edges.
  const double scale = static_cast<double>(bins.num_bins) / (bins.upper - bins.lower);
  const double step = (bins.upper - bins.lower) / static_cast<double>(bins.num_bins);
  if (!std::isfinite(scale) || !(step > 0.0)) {
    throw_invalid_argument(function, "num_bins",
                           "is too large for the range: (upper - lower) / num_bins is not a positive finite double");
  }
  if (bins.arithmetic == edge_arithmetic::float32) {
    if (const auto fault = float32_edges_fault(bins)) throw_invalid_argument(function, fault->argument, fault->reason);
  } else if (bins.arithmetic != edge_arithmetic::float64) {
    throw_invalid_argument(function, "arithmetic", "must be edge_arithmetic::float64 or edge_arithmetic::float32");
  }
}

/// Range edges: at least two, finite, non-decreasing (equal neighbours make an empty bin, as numpy).
inline void check_range_edges(std::string_view function, std::span<const double> edges) {
  check_not_null(function, "edges", edges);
  if (edges.size() < 2) {
    throw_invalid_argument(function, "edges",
                           "needs at least 2 edges (1 bin), got " + std::to_string(edges.size()));
  }
  for (std::size_t i = 0; i < edges.size(); ++i) {
    if (!std::isfinite(edges[i])) {
      throw_invalid_argument(function, "edges", "has a non-finite edge at index " + std::to_string(i));
    }
    if (i > 0 && edges[i] < edges[i - 1]) {
      throw_invalid_argument(function, "edges",
                             "must be sorted ascending; edge " + std::to_string(i) + " (" +
                                 std::to_string(edges[i]) + ") is below edge " + std::to_string(i - 1) + " (" +
                                 std::to_string(edges[i - 1]) + ")");
    }
  }
}

inline void check_strategy(std::string_view function, backend b, operation op, strategy s) {
  if (!supports(b, op, s)) {
    throw error(errc::not_supported, "strategy",
                std::string(function) + ": argument 'strategy' is '" + std::string(to_string(s)) +
                    "', which the " + std::string(to_string(b)) + " backend does not implement for this operation");
  }
}

/// The GPU launch hooks of reduce_options: block_threads 0 or a multiple of 32 up to 1024,
/// max_blocks >= 0.
template <class Options>
void check_launch_options(std::string_view function, const Options& options) {
  if (options.block_threads != 0 &&
      (options.block_threads < 32 || options.block_threads > 1024 || options.block_threads % 32 != 0)) {
    throw_invalid_argument(function, "block_threads",
                           "must be 0 (the tuned default) or a multiple of 32 from 32 to 1024 (got " +
                               std::to_string(options.block_threads) + ")");
  }
  if (options.max_blocks < 0) {
    throw_invalid_argument(function, "max_blocks",
                           "must be >= 0 (0: as many as fill the device; got " + std::to_string(options.max_blocks) +
                               ")");
  }
}

[[noreturn]] inline void throw_negative_sample(std::string_view function, std::uint64_t index, long long value) {
  throw_invalid_argument(function, "samples",
                         "must be non-negative for bincount; sample " + std::to_string(index) + " is " +
                             std::to_string(value));
}

}  // namespace tally::detail
