// The reference for weighted histograms, shared by the CPU and GPU tests: a plain loop in long
// double over the bins of tally's even_bin_mapper (itself checked against the brute-force oracle
// by test_cpu_bins), and the error bounds the sums are held to.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tally/bins.hpp"

namespace tally_test {

/** @brief Per bin: the long-double sum of the weights, their count and the sum of |w|. */
struct weighted_reference {
  std::vector<long double> sum;
  std::vector<std::uint64_t> count;
  std::vector<long double> sum_abs;
  std::uint64_t left_out = 0;
};

template <class Sample, class Weight>
weighted_reference weigh_in_long_double(const std::vector<Sample>& samples, const std::vector<Weight>& weights,
                                        const tally::even_bins& bins, tally::upper_edge last_edge) {
  const tally::even_bin_mapper<Sample> map(bins, last_edge);
  weighted_reference ref{std::vector<long double>(static_cast<std::size_t>(bins.num_bins), 0.0L),
                         std::vector<std::uint64_t>(static_cast<std::size_t>(bins.num_bins), 0),
                         std::vector<long double>(static_cast<std::size_t>(bins.num_bins), 0.0L), 0};
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const std::int64_t bin = map(samples[i]);
    if (bin < 0) {
      ++ref.left_out;
      continue;
    }
    const auto b = static_cast<std::size_t>(bin);
    ref.sum[b] += static_cast<long double>(weights[i]);
    ref.sum_abs[b] += std::fabs(static_cast<long double>(weights[i]));
    ++ref.count[b];
  }
  return ref;
}

/// Floating-point sums in any order: |sum - exact| <= (count - 1) * 2^-53 * sum|w| to first order
/// (Higham's bound); held to count * 2^-52 * sum|w|, which also covers the second-order term.
inline long double floating_bound(const weighted_reference& ref, std::size_t bin) {
  return static_cast<long double>(ref.count[bin]) * std::ldexp(1.0L, -52) * ref.sum_abs[bin];
}

/// deterministic sums, as documented: count * 2^-33 + ulp(sum) / 2 (ulp/2 bounded by |sum| 2^-53).
inline long double deterministic_bound(const weighted_reference& ref, std::size_t bin) {
  return static_cast<long double>(ref.count[bin]) * std::ldexp(1.0L, -33) +
         std::fabs(ref.sum[bin]) * std::ldexp(1.0L, -53);
}

/// Empty string when every sum is within `bound` of the reference (NaN never is), else the first bins that are not.
template <class Bound>
std::string sums_within(const std::vector<double>& got, const weighted_reference& ref, Bound bound) {
  std::string out;
  int reported = 0;
  for (std::size_t bin = 0; bin < got.size() && reported < 5; ++bin) {
    const long double error = std::fabs(static_cast<long double>(got[bin]) - ref.sum[bin]);
    if (!(error <= bound(ref, bin))) {
      out += " bin " + std::to_string(bin) + ": got " + std::to_string(got[bin]) + ", reference " +
             std::to_string(static_cast<double>(ref.sum[bin])) + ";";
      ++reported;
    }
  }
  return out;
}

}  // namespace tally_test
