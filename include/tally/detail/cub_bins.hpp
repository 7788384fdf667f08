// Whether CUB's DeviceHistogram::HistogramEven counts even bins exactly as tally (and numpy) does,
// decided on the host before the `cub` strategy runs. Host-only: no CUDA header is included.
//
// CUB (cub/device/dispatch/dispatch_histogram.cuh, ScaleTransform) bins a sample x in [lower, upper)
// with levels of the sample type (int for bytes), in their common type:
// - integer samples: bin = (x - lower) * num_bins / (upper - lower), in 64-bit unsigned integers
//   (x - lower and upper - lower first in the common type, 32-bit for bytes and int32): the exact
//   rational edge lower + i * (upper - lower) / num_bins, no rounding at all. It refuses levels whose
//   (upper - lower) * num_bins overflows 64 bits (cudaErrorInvalidValue); an upper - lower that
//   overflows the common type wraps into such a refusal (or, for bytes, whose path ignores it,
//   into wrong counts).
// - floating samples: bin = (int)((x - lower) * r), r = num_bins / (upper - lower), each operation
//   rounded in the sample type.
// tally's edge i is fl(fl(i * step) + lower) in double (rounded to float for float samples), and x
// counts in bin i when edge_i <= x < edge_{i+1} (bins.hpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tally/bins.hpp"

namespace tally::detail {

/// Integer samples: CUB's bins are the exact rational edges r_i = lower + i * range / n, so for
/// integers x they agree with tally's rounded edges e_i iff ceil(e_i) == ceil(r_i) for every i
/// (both then separate the same integers). Whole-number steps and steps whose denominator is a
/// power of two small enough keep every e_i exact (e_i == r_i); otherwise each edge is compared,
/// O(num_bins), in 64-bit integers.
template <class Sample>
const char* cub_integer_bins_unfit(const even_bins& bins) {
  using level = std::conditional_t<sizeof(Sample) == 1, int, Sample>;
  using common = std::common_type_t<level, Sample>;
  constexpr double exact_integers = 9007199254740992.0;  // 2^53
  const double lower = bins.lower;
  const double upper = bins.upper;
  if (std::floor(lower) != lower || std::floor(upper) != upper) {
    return "CUB takes whole-number levels for integer samples";
  }
  // 2^63 bounds the double comparison for int64 (the largest int64 is no double).
  const double level_max = sizeof(level) == 8 ? 0x1p63 : static_cast<double>(std::numeric_limits<level>::max()) + 1;
  if (lower < static_cast<double>(std::numeric_limits<level>::lowest()) || upper >= level_max) {
    return "the levels do not fit CUB's level type (the sample type; int for bytes)";
  }
  const auto range = static_cast<unsigned __int128>(static_cast<__int128>(upper) - static_cast<__int128>(lower));
  if constexpr (std::is_signed_v<common>) {
    if (range > static_cast<unsigned __int128>(std::numeric_limits<common>::max())) {
      return "upper - lower overflows CUB's signed level arithmetic (it refuses, cudaErrorInvalidValue)";
    }
  }
  const auto n = static_cast<std::uint64_t>(bins.num_bins);
  if (range * n > std::numeric_limits<std::uint64_t>::max()) {
    return "(upper - lower) * num_bins overflows CUB's 64-bit bin arithmetic (it refuses, cudaErrorInvalidValue)";
  }
  if (std::fabs(lower) > exact_integers || std::fabs(upper) > exact_integers) {
    return "samples beyond 2^53: tally compares them as doubles, CUB as integers";
  }
  const auto r = static_cast<std::uint64_t>(range);  // below 2^63 from here on
  if (r % n == 0) return nullptr;                      // whole steps: every edge exact
  std::uint64_t g = r;
  for (std::uint64_t b = n; b != 0;) {
    const std::uint64_t t = g % b;
    g = b;
    b = t;
  }
  const std::uint64_t denominator = n / g;  // of the step, in lowest terms
  if ((denominator & (denominator - 1)) == 0) {
    // Edges are multiples of 1 / denominator: exact doubles while every numerator stays below 2^53.
    const double reach = std::fmax(std::fmax(std::fabs(lower), std::fabs(upper)), static_cast<double>(r));
    if (reach * static_cast<double>(denominator) < exact_integers) return nullptr;
  }
  const even_bin_mapper<Sample> map(bins, upper_edge::exclusive);
  const auto first = static_cast<std::int64_t>(lower);
  const std::uint64_t whole = r / n;
  const std::uint64_t part = r % n;
  std::uint64_t floor_steps = 0;  // floor(i * range / n), kept with its remainder: no division a bin
  std::uint64_t remainder = 0;
  for (std::int64_t i = 1; i < bins.num_bins; ++i) {
    floor_steps += whole;
    remainder += part;
    if (remainder >= n) {
      remainder -= n;
      ++floor_steps;
    }
    const std::int64_t exact_ceiling = first + static_cast<std::int64_t>(floor_steps) + (remainder != 0 ? 1 : 0);
    if (static_cast<std::int64_t>(std::ceil(static_cast<double>(map.edge(i)))) != exact_ceiling) {
      return "a rounded edge separates the integers differently from CUB's exact (x - lower) * num_bins / "
             "(upper - lower)";
    }
  }
  return nullptr;
}

/// The distance from `y` down to the next value of type T (a power of two; the smallest subnormal
/// below zero).
template <class T>
double spacing_below(T y) {
  return static_cast<double>(y) - static_cast<double>(std::nextafter(y, -std::numeric_limits<T>::infinity()));
}

/// Floating samples: agreement needs tally's edges to be exact (a power-of-two step, lower and upper
/// whole multiples of it, all below 2^digits steps from zero; for float samples tally's exact-float
/// shortcut itself), CUB's r to be exactly 1 / step (then (x - lower) * r scales exactly), and
/// x - lower never to round up onto an edge it lies below. Rounding up onto edge m of the shifted
/// scale, D_m = m * step, needs a sample x < e_m with e_m - x below half the spacing under D_m; the
/// closest such x lies the spacing under e_m below it. So every edge needs spacing_below(e_m) >=
/// spacing_below(D_m) (both powers of two). With lower >= 0, e_m >= D_m > 0: always. With upper < 0
/// the left side shrinks and the right side grows with m, so the last edge decides. With lower < 0
/// <= upper, zero is an edge, where the spacing is the smallest subnormal: refused.
template <class Sample>
const char* cub_floating_bins_unfit(const even_bins& bins) {
  if constexpr (std::is_same_v<Sample, float>) {
    if (even_bin_mapper<float>(bins, upper_edge::exclusive).shortcut() != even_shortcut::exact_float_edges) {
      return "the edges are not exact floats (tally's exact-float shortcut does not hold), and CUB's "
             "(x - lower) * (num_bins / (upper - lower)) in float rounds across them";
    }
  }
  constexpr double exact_steps = std::is_same_v<Sample, float> ? 0x1p24 : 0x1p53;
  const double step = (bins.upper - bins.lower) / static_cast<double>(bins.num_bins);
  int exponent = 0;
  const double first = bins.lower / step;
  const double last = bins.upper / step;
  if (std::frexp(step, &exponent) != 0.5 || std::floor(first) != first || std::floor(last) != last ||
      std::fabs(first) >= exact_steps || std::fabs(last) >= exact_steps ||
      last - first != static_cast<double>(bins.num_bins) ||
      static_cast<double>(static_cast<Sample>(bins.lower)) != bins.lower ||
      static_cast<double>(static_cast<Sample>(bins.upper)) != bins.upper) {
    return "the step is not a power of two with lower and upper exact multiples of it: CUB's "
           "(x - lower) * (num_bins / (upper - lower)) rounds differently from tally's edges";
  }
  const auto lower = static_cast<Sample>(bins.lower);
  const auto upper = static_cast<Sample>(bins.upper);
  const Sample range = upper - lower;
  const auto reciprocal = static_cast<Sample>(static_cast<Sample>(bins.num_bins) / range);
  if (!std::isfinite(range) || static_cast<double>(reciprocal) * step != 1.0) {
    return "CUB's num_bins / (upper - lower) is not exactly 1 / step in the sample type";
  }
  if (bins.lower >= 0.0) return nullptr;
  if (bins.upper < 0.0 && spacing_below(upper) >= spacing_below(range)) return nullptr;
  return "below zero, CUB's x - lower rounds up onto an edge for samples just under it";
}

/**
 * @brief Whether CUB's DeviceHistogram::HistogramEven, with the levels tally gives it (lower and
 * upper in the sample type; int for uint8), counts every sample of type `Sample` in the bin tally
 * (and numpy) does: nullptr when it does, else a short reason why not.
 *
 * Refused: upper_edge::inclusive (CUB's last bin is half-open); more than 2^31 - 2 bins (CUB's int
 * levels); integer samples with levels that are not whole, do not fit the level type, or overflow
 * CUB's arithmetic (e.g. int64 over [-2^62, 2^62): cudaErrorInvalidValue), that reach beyond 2^53,
 * or whose rounded edges separate integers otherwise than CUB's exact ones; floating samples unless
 * the edges are exact (float: tally's exact-float shortcut), CUB's reciprocal is exactly 1 / step,
 * and x - lower cannot round up onto an edge (lower >= 0, or an all-negative range whose spacing
 * allows it). Assumes CUB compiled without fast-math or flushing subnormals, as tally is. Cost:
 * O(1), except for integer samples whose step is neither whole nor a small power-of-two fraction:
 * O(num_bins).
 */
template <class Sample>
const char* cub_even_bins_unfit(const even_bins& bins, upper_edge last_edge) {
  if (last_edge == upper_edge::inclusive) return "CUB's last bin leaves upper out (upper_edge::inclusive)";
  if (!edges_follow_float64_rule(bins)) return "CUB computes its own edges, and these are computed in float32";
  if (bins.num_bins >= std::numeric_limits<int>::max()) return "CUB takes at most 2^31 - 2 bins (int levels)";
  if constexpr (std::is_integral_v<Sample>) {
    return cub_integer_bins_unfit<Sample>(bins);
  } else {
    return cub_floating_bins_unfit<Sample>(bins);
  }
}

}  // namespace tally::detail
