// How a sample finds its bin. One definition, shared by the CPU reference, the CPU strategies and
// every GPU kernel, so that all of them count a sample on or next to an edge the same way.
//
// Even bins follow numpy.histogram exactly: edge i is `lower + i * ((upper - lower) / num_bins)`
// computed in double (the last edge is `upper` itself) and, for float samples, rounded to float,
// or computed in float32 throughout where the bins say so (numpy's edges for float32 data over its
// own range); a sample counts in bin i when edge_i <= x < edge_{i+1}. Samples below `lower`, at or
// above `upper` (unless upper_edge::inclusive, numpy's choice), NaN and infinities are left out and
// counted as such. Range bins use the same rule over caller-given edges; bincount counts value v
// in bin v and leaves out values >= the number of bins.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>

#include "tally/config.hpp"
#include "tally/small_float.hpp"
#include "tally/strategy.hpp"

namespace tally {

/** @brief The arithmetic even bins' edges are computed in (numpy's linspace, in the type numpy
 * promotes the range and the samples to). */
enum class edge_arithmetic : std::uint8_t {
  /// lower + i * ((upper - lower) / num_bins) in double: numpy's edges for a range of Python
  /// numbers or float64 values, rounded to float for float samples.
  float64,
  /// step = fl32(fl32(upper - lower) / num_bins), edge i = fl32(fl32(i * step) + lower), the last
  /// edge upper: numpy's edges for float32 data over its own range (`numpy.histogram(a, n)` with
  /// `a` float32, whose min and max are float32 scalars). lower and upper must be float32 values,
  /// and there are at most 2^24 bins (numpy's float32 arange is exact that far).
  float32,
};

/** @brief `num_bins` equal-width bins over [lower, upper). */
struct even_bins {
  std::int64_t num_bins = 0;
  double lower = 0.0;
  double upper = 0.0;
  edge_arithmetic arithmetic = edge_arithmetic::float64;  ///< how the edges are computed
};

/** @brief Whether a sample equal to the last edge counts in the last bin. */
enum class upper_edge : std::uint8_t {
  exclusive,  ///< [lower, upper): the default, as CUB and the half-open rule everywhere else
  inclusive,  ///< the last bin is [edge_{n-1}, upper], as numpy.histogram does
};

/** @brief Options every histogram call takes. */
struct histogram_options {
  strategy algorithm = strategy::automatic;
  upper_edge last_edge = upper_edge::exclusive;
  /// Weighted histograms only: sum the weights as fixed-point integers, so that the sums' bits do
  /// not depend on the order, the strategy, the launch or the backend (see detail/fixed_point_weight.hpp).
  bool deterministic = false;
};

/** @brief What a histogram call did: the strategy it ran and how many samples were left out. */
struct histogram_result {
  choice chose;
  std::uint64_t left_out = 0;  ///< NaN, infinities and samples outside the bins
};

/** @brief The 8- and 16-bit sample types added to the first six: every value of one is a float. */
template <class T>
inline constexpr bool is_small_sample_v = std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::int16_t> ||
                                          std::is_same_v<T, std::uint16_t> || is_half_float_v<T>;

/** @brief The sample types every backend accepts for histograms. */
template <class T>
inline constexpr bool is_histogram_sample_v =
    std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::uint32_t> ||
    std::is_same_v<T, std::int64_t> || std::is_same_v<T, float> || std::is_same_v<T, double> || is_small_sample_v<T>;

/** @brief The sample types bincount accepts: the integer histogram samples. */
template <class T>
inline constexpr bool is_bincount_sample_v = is_histogram_sample_v<T> && std::is_integral_v<T>;

/** @brief The weight types of weighted histograms. */
template <class T>
inline constexpr bool is_weight_v = std::is_same_v<T, float> || std::is_same_v<T, double>;

/** @brief The sum types of weighted histograms. */
template <class T>
inline constexpr bool is_weight_sum_v = std::is_same_v<T, double>;

/** @brief The counter types: 32-bit (the caller vouches for < 2^32 samples) or 64-bit. */
template <class T>
inline constexpr bool is_counter_v = std::is_same_v<T, std::uint32_t> || std::is_same_v<T, std::uint64_t>;

/** @brief The bin a mapper returns for a sample that is not counted. */
inline constexpr std::int64_t left_out_bin = -1;

namespace detail {
// lower + i * step in double or float, rounded twice as numpy's linspace rounds it in that type
// (the index in that type too, as numpy's arange makes it): never fused into one FMA.
template <class Float>
TALLY_HOST_DEVICE inline Float even_edge(std::int64_t i, Float step, Float lower) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<Float, float>) {
    return __fadd_rn(__fmul_rn(static_cast<float>(i), step), lower);
  } else {
    return __dadd_rn(__dmul_rn(static_cast<double>(i), step), lower);
  }
#else
  volatile Float product = static_cast<Float>(i) * step;  // volatile: no contraction on hosts with FMA
  return product + lower;
#endif
}

/// numpy's float32 step for `bins`: fl32(fl32(upper - lower) / num_bins).
inline float even_step_float32(const even_bins& bins) {
  volatile float delta = static_cast<float>(bins.upper) - static_cast<float>(bins.lower);
  return delta / static_cast<float>(bins.num_bins);
}

/// Whether bins whose edges are computed in float32 have the edges of the float64 rule: when the
/// step is q * 2^k (q odd) and the bounds are whole multiples of the step within 2^24 * 2^k of
/// zero, every product, sum and edge is an exact float32, so both rules give the exact edges. Such
/// bins take the float64 rule's shortcuts (integer steps, exact float edges).
inline bool float32_edges_are_exact(const even_bins& bins) {
  const double step = (bins.upper - bins.lower) / static_cast<double>(bins.num_bins);
  if (!(step > 0.0) || !std::isfinite(step)) return false;
  if (static_cast<double>(bins.num_bins) * step != bins.upper - bins.lower) return false;
  const double first_steps = bins.lower / step;
  const double last_steps = bins.upper / step;
  if (first_steps != std::floor(first_steps) || last_steps != std::floor(last_steps)) return false;
  // 2^k, the lowest set bit of step's mantissa.
  int exponent = 0;
  const double mantissa = std::frexp(step, &exponent);
  auto bits = static_cast<std::uint64_t>(std::ldexp(mantissa, 53));
  int k = exponent - 53;
  while ((bits & 1u) == 0u) {
    bits >>= 1;
    ++k;
  }
  const double limit = std::ldexp(1.0, 24 + k);
  // Within the limit the step has at most 24 significant bits and the bounds lie at most 2^24 steps
  // from zero, so these products are exact: the bounds are whole multiples of the step, not
  // quotients that rounded to a whole number.
  return std::fabs(bins.lower) <= limit && std::fabs(bins.upper) <= limit && bins.upper - bins.lower <= limit &&
         first_steps * step == bins.lower && last_steps * step == bins.upper;
}

/// Whether `bins` have the float64 rule's edges: computed in float64, or in float32 and exact.
/// Code that reads lower and upper rather than a mapper's edges (CUB's levels, the byte shift)
/// runs only then.
inline bool edges_follow_float64_rule(const even_bins& bins) {
  return bins.arithmetic == edge_arithmetic::float64 || float32_edges_are_exact(bins);
}

/// The first index in [lo, hi) at which `before` turns false, or hi (a binary search), for a
/// `before` that holds on a prefix of the range and not after it: the bin searches of range bins.
template <class Index, class Before>
TALLY_HOST_DEVICE Index partition_point(Index lo, Index hi, Before before) {
  while (lo < hi) {
    const Index mid = lo + (hi - lo) / 2;
    if (before(mid)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}
}  // namespace detail

namespace detail {

/// Even bins over integer samples when every edge is a whole number: bin = (x - lower) / step in
/// integer arithmetic, which is exactly the edge rule (all edges are exact doubles below 2^53).
/// Samples of up to 32 bits use 32-bit arithmetic (`narrow_fits` says when that is exact).
template <class Sample>
class integer_step_bin_mapper {
 public:
  using offset_type = std::conditional_t<sizeof(Sample) <= 4, std::uint32_t, std::uint64_t>;

  integer_step_bin_mapper() = default;
  integer_step_bin_mapper(std::int64_t lower, std::int64_t step, std::int64_t num_bins, bool inclusive)
      : lower_(static_cast<offset_type>(lower)), range_(static_cast<offset_type>(step * num_bins)),
        step_(static_cast<offset_type>(step)), num_bins_(num_bins), inclusive_(inclusive) {}

  /// Whether the offset type holds every (sample - lower) exactly enough: values below lower must
  /// wrap to above the range, never into it, which holds when both ends are within 2^32 of the
  /// samples' extremes. Always true for 64-bit samples (the caller keeps edges below 2^53).
  static bool narrow_fits(double lower, double upper) {
    if constexpr (sizeof(Sample) <= 4) {
      constexpr double wrap = 4294967296.0;
      return static_cast<double>(std::numeric_limits<Sample>::max()) - lower < wrap &&
             upper - static_cast<double>(std::numeric_limits<Sample>::lowest()) < wrap;
    } else {
      return true;
    }
  }

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return num_bins_; }

  TALLY_HOST_DEVICE std::int64_t operator()(Sample sample) const {
    // Wrapping subtraction: values below lower land far above the range, so one compare checks both ends.
    const offset_type offset = static_cast<offset_type>(sample) - lower_;
    if (offset < range_) return static_cast<std::int64_t>(step_ == 1 ? offset : offset / step_);
    return (inclusive_ && offset == range_) ? num_bins_ - 1 : left_out_bin;
  }

 private:
  offset_type lower_ = 0;
  offset_type range_ = 0;
  offset_type step_ = 1;
  std::int64_t num_bins_ = 0;
  bool inclusive_ = false;
};

/// Even bins of width one over integer samples (values as bins): bin = x - lower, one subtraction
/// and one compare, without integer_step_bin_mapper's step and inclusive-edge tests: per sample,
/// every instruction shows where counting is one shared-memory atomic (docs/performance.md,
/// "65536 bins: packed16"). With `ClosedLast` the last bin also takes the upper edge itself
/// (numpy's closed last bin) through one clamp: one instruction a sample where the integer-step
/// mapper's tests cost an int32 histogram at 256 bins 10% of an H200's time
/// (docs/performance.md, "numpy's closed last bin over integers").
template <class Sample, bool ClosedLast = false>
class unit_step_bin_mapper {
 public:
  using offset_type = typename integer_step_bin_mapper<Sample>::offset_type;

  unit_step_bin_mapper() = default;
  /// Bins [lower + i, lower + i + 1) for i < num_bins (the last [upper - 1, upper] with
  /// `ClosedLast`); integer_step_bin_mapper::narrow_fits must hold.
  unit_step_bin_mapper(std::int64_t lower, std::int64_t num_bins)
      : lower_(static_cast<offset_type>(lower)), range_(static_cast<offset_type>(num_bins + (ClosedLast ? 1 : 0))),
        last_bin_(static_cast<offset_type>(num_bins - 1)), num_bins_(num_bins) {}

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return num_bins_; }

  TALLY_HOST_DEVICE std::int64_t operator()(Sample sample) const {
    // Wrapping subtraction: values below lower land far above the range, so one compare checks both
    // ends (narrow_fits keeps them above the upper edge too).
    const offset_type offset = static_cast<offset_type>(sample) - lower_;
    if constexpr (ClosedLast) {
      return offset < range_ ? static_cast<std::int64_t>(offset < last_bin_ ? offset : last_bin_) : left_out_bin;
    } else {
      return offset < range_ ? static_cast<std::int64_t>(offset) : left_out_bin;
    }
  }

  /// The bin, or num_bins() where the sample is left out (the shared kernels' left-out word): one
  /// select, where operator()'s left_out_bin took a second to become that word.
  TALLY_HOST_DEVICE int slot(Sample sample) const {
    const offset_type offset = static_cast<offset_type>(sample) - lower_;
    if constexpr (ClosedLast) {
      return static_cast<int>(offset < range_ ? (offset < last_bin_ ? offset : last_bin_) : num_bins_);
    } else {
      return static_cast<int>(offset < range_ ? offset : num_bins_);
    }
  }

 private:
  offset_type lower_ = 0;
  offset_type range_ = 0;
  offset_type last_bin_ = 0;
  std::int64_t num_bins_ = 0;
};

/// Even bins over 32-bit integer samples whose bounds are multiples of a small power of two 2^-k
/// (whole bounds: the data's own [min, max], [0, 10000) in 4096 bins; halves: numpy's
/// [v - 0.5, v + 0.5] for data of one value v, centred bins [-0.5, 255.5)) that the integer step
/// does not take (a step that is not whole, or bounds that are not): the bin is the exact quotient
/// floor((x - lower) * num_bins / (upper - lower)), in integer arithmetic, where the estimate took
/// eight double operations and a conversion a sample.
/// In units of 2^-k, x - lower = q * (x - first) + start for the first integer counted, first =
/// ceil(lower), q = 2^k and start = q * first - q * lower in [0, q). An edge that is not a whole
/// number lies at least 1 / (q * num_bins) from every integer, and its double within 2^-53 *
/// (3 * range + |lower| + |upper|) of its exact value, which `fits` keeps below that: an integer
/// sample is at or above such an edge exactly when it is at or above the exact value. An edge that
/// is a whole number may round above itself, and then the sample equal to it belongs to the bin
/// below: `fits` refuses bins with such an edge. The quotient: a multiply-high gives it or the one
/// below, and the remainder, exact in 32-bit wrapping arithmetic while it stays below 2^32, decides.
/// InParts: bounds that are not whole take x - lower in parts of one, a multiply-add more; whole
/// bounds skip it (the shared kernels reloaded its two fields in their loops: 2% slower).
template <class Sample, bool InParts = false>
class rational_step_bin_mapper {
  static_assert(std::is_integral_v<Sample> && sizeof(Sample) == 4, "32-bit integer samples");

 public:
  /// The finest fraction of the bounds taken: halves and quarters as bounds are written, up to 2^-8.
  static constexpr std::int64_t most_parts = 256;

  /// The least power of two q <= most_parts with q * lower and q * upper whole, or 0 if none.
  static std::int64_t parts_of_one(double lower, double upper) {
    for (std::int64_t q = 1; q <= most_parts; q *= 2) {
      const double scaled_lower = lower * static_cast<double>(q);
      const double scaled_upper = upper * static_cast<double>(q);
      if (scaled_lower == std::floor(scaled_lower) && scaled_upper == std::floor(scaled_upper)) return q;
    }
    return 0;
  }

  /// Whether these bins (numpy's step `step`) take the quotient: bounds in parts of one
  /// (parts_of_one), the range in those parts below 2^31 (the remainder's room), the integers
  /// counted inside the sample type, so that values below them wrap past the range; edges near
  /// enough to exact (above); and no whole-number edge rounded above itself, checked edge by edge
  /// on the host (up to 2^14 of them, about 20 us: every call constructs its mapper, and 2^20 took
  /// 1.5 ms).
  static bool fits(double lower, double upper, std::int64_t num_bins, double step) {
    const std::int64_t q = parts_of_one(lower, upper);
    const double range = upper - lower;
    if (q == 0 || !(range > 0.0 && range * static_cast<double>(q) < 2147483648.0) || num_bins < 1 ||
        num_bins >= 2147483647 || std::ceil(lower) < static_cast<double>(std::numeric_limits<Sample>::lowest()) ||
        std::floor(upper) > static_cast<double>(std::numeric_limits<Sample>::max())) {
      return false;
    }
    if ((3.0 * range + std::fabs(lower) + std::fabs(upper)) * static_cast<double>(num_bins) * static_cast<double>(q) >=
        0x1p51) {
      return false;
    }
    // Edge i lies q * lower + i * scaled_range / num_bins parts of one from zero: it is a whole
    // number where that offset is a multiple of q. i * scaled_range / num_bins is whole for i a
    // multiple of num_bins / g; of those, one in q / gcd(q, its offset) adds to a multiple of q.
    const auto lower_parts = static_cast<std::int64_t>(lower * static_cast<double>(q));
    const auto scaled_range = static_cast<std::int64_t>(range * static_cast<double>(q));
    const std::int64_t g = std::gcd(num_bins, scaled_range);
    const std::int64_t every = num_bins / g;
    const std::int64_t offset_step = scaled_range / g;  // the offset of edge k * every is k * offset_step
    const auto remainder = [&](std::int64_t k) { return ((k * offset_step + lower_parts) % q + q) % q; };
    std::int64_t first = 0;
    while (first < q && remainder(first) != 0) ++first;
    if (first == q) return true;  // no edge is a whole number
    const std::int64_t stride = q / std::gcd(q, offset_step);
    if (first == 0) first = stride;  // k = 0 is the lower bound itself
    if ((g - first + stride - 1) / stride > (std::int64_t{1} << 14)) return false;
    for (std::int64_t k = first; k < g; k += stride) {
      const std::int64_t whole = (k * offset_step + lower_parts) / q;
      if (even_edge(k * every, step, lower) > static_cast<double>(whole)) return false;
    }
    return true;
  }

  rational_step_bin_mapper() = default;
  /// The mapper of bins that `fits` (whole bounds where InParts is false).
  rational_step_bin_mapper(double lower, double upper, std::int64_t num_bins, bool inclusive) {
    const std::int64_t q = parts_of_one(lower, upper);
    const auto first = static_cast<std::int64_t>(std::ceil(lower));
    // The last integer counted: upper itself where it is whole and counted, else the one below it.
    const auto whole_upper = static_cast<std::int64_t>(std::floor(upper));
    const std::int64_t last = whole_upper - (static_cast<double>(whole_upper) == upper && !inclusive ? 1 : 0);
    const auto lower_parts = static_cast<std::int64_t>(lower * static_cast<double>(q));
    const auto scaled_range = static_cast<std::int64_t>((upper - lower) * static_cast<double>(q));
    lower_ = static_cast<std::uint32_t>(first);
    end_ = static_cast<std::uint32_t>(std::max<std::int64_t>(last - first + 1, 0));
    parts_ = static_cast<std::uint32_t>(q);
    start_ = static_cast<std::uint32_t>(first * q - lower_parts);
    minus_range_ = static_cast<std::uint32_t>(-scaled_range);
    whole_ = static_cast<std::uint32_t>(num_bins / scaled_range);
    fraction_ = static_cast<std::uint32_t>((static_cast<std::uint64_t>(num_bins % scaled_range) << 32) /
                                           static_cast<std::uint64_t>(scaled_range));
    num_bins_ = static_cast<std::uint32_t>(num_bins);
  }

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return num_bins_; }

  TALLY_HOST_DEVICE std::int64_t operator()(Sample sample) const {
    const int bin = slot(sample);
    return static_cast<std::uint32_t>(bin) < num_bins_ ? bin : left_out_bin;
  }

  /// The bin, or num_bins() where the sample is left out (the shared kernels' left-out word).
  TALLY_HOST_DEVICE int slot(Sample sample) const {
    // Wrapping subtraction: values below the first integer counted land past the range (fits keeps
    // the last inside the type), so one compare checks both ends.
    const std::uint32_t offset = static_cast<std::uint32_t>(sample) - lower_;
    // x - lower in parts of one: one multiply-add (at most the range, below 2^31, for counted samples).
    std::uint32_t parts = offset;
    if constexpr (InParts) parts = offset * parts_ + start_;
    // parts * num_bins / range = parts * whole + parts * fraction / 2^32 + less than one: the
    // estimate is the quotient or the one below, and the remainder, in [0, 2 * range), says which.
#if defined(__CUDA_ARCH__)
    const std::uint32_t estimate = parts * whole_ + __umulhi(parts, fraction_);
#else
    const std::uint32_t estimate =
        parts * whole_ + static_cast<std::uint32_t>((static_cast<std::uint64_t>(parts) * fraction_) >> 32);
#endif
    // The remainder less the range, below zero (its sign bit set; it lies in [-range, range))
    // exactly where the estimate is the quotient: two multiply-adds by the range's negative (by
    // the range itself, the compiler negated the estimate first), a shift and an add.
    const std::uint32_t past = estimate * minus_range_ + (parts * num_bins_ + minus_range_);
    const std::uint32_t quotient = estimate + 1u - (past >> 31);
    // upper itself, counted where the last edge is inclusive, has the quotient num_bins.
    const std::uint32_t last = num_bins_ - 1;
    return static_cast<int>(offset < end_ ? (quotient < last ? quotient : last) : num_bins_);
  }

 private:
  std::uint32_t lower_ = 0;     // the first integer counted, ceil(lower)
  std::uint32_t end_ = 0;       // the number of integers counted
  std::uint32_t parts_ = 1;     // q: parts of one in which the bounds are whole
  std::uint32_t start_ = 0;     // ceil(lower) - lower, in parts of one
  std::uint32_t minus_range_ = 0xffffffffu;  // -(upper - lower) in parts of one, wrapped
  std::uint32_t whole_ = 0;     // num_bins / range, the range in parts of one
  std::uint32_t fraction_ = 0;  // (num_bins % range) / range, in 2^-32
  std::uint32_t num_bins_ = 0;
};

/// Byte samples when every one of the 256 values falls in a bin of width one: bin = x + shift,
/// never left out, so kernels skip every range check (`maps_every_sample`).
class byte_shift_mapper {
 public:
  static constexpr bool maps_every_sample = true;

  byte_shift_mapper() = default;
  byte_shift_mapper(int shift, std::int64_t num_bins) : shift_(shift), num_bins_(num_bins) {}

  /// Whether bins [lower, lower + num_bins) of width one hold every byte value (with a shift an
  /// int holds).
  static bool covers_every_byte(double lower, double upper, std::int64_t num_bins) {
    return upper - lower == static_cast<double>(num_bins) && lower <= 0.0 && lower >= -1073741824.0 &&
           upper >= 256.0 && lower == static_cast<double>(static_cast<std::int64_t>(lower));
  }

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return num_bins_; }
  TALLY_HOST_DEVICE int shift() const { return shift_; }
  TALLY_HOST_DEVICE std::int64_t operator()(std::uint8_t x) const { return static_cast<int>(x) + shift_; }

 private:
  int shift_ = 0;
  std::int64_t num_bins_ = 0;
};

/// Whether a mapper declares that it never leaves a sample out.
template <class Mapper>
inline constexpr bool maps_every_sample = requires { requires Mapper::maps_every_sample; };

/// Even bins over float samples when every edge lower + i * step is an exact float (a power-of-two
/// step over a range a float spans exactly). Then x / step is exact (scaling by a power of two)
/// and so is its floor, so bin = floor(x / step) - lower / step with no fix-up and no double
/// arithmetic: the same bins as comparing x with the edges.
///
/// On the GPU that takes one fused multiply-add rounded down and one compare:
/// t = round_down(x / step + (2^23 - lower / step)). For x in range the exact value lies in
/// [2^23, 2^23 + num_bins), where floats are exactly the integers (num_bins <= 2^23), and rounding
/// down keeps its floor, so t = 2^23 + bin and the bits of t minus those of 2^23 are the bin. Below
/// the range, t < 2^23 (or negative, or zero), whose bits give a difference that wraps past every
/// bin; at or above the end, t >= 2^23 + num_bins; infinities and NaN have bits far above. So one
/// unsigned compare leaves out everything outside [lower, upper), NaN and infinities included. At
/// one shared-memory atomic per sample every instruction per sample shows, and the host form
/// spends several on range tests, a floor and a -0 fix-up. Needs denormals kept (no -ftz), which
/// tally's build keeps.
/// (65536 float32 bins, uniform: 0.78 -> 0.864; docs/performance.md, "Float even bins")
class exact_float_bin_mapper {
 public:
  /// The value whose float bits stand for bin 0: 2^23, where the float spacing becomes one.
  static constexpr double bits_origin = 8388608.0;
  static constexpr std::uint32_t bits_origin_word = 0x4b000000u;

  /// Whether the GPU form holds: at most 2^23 bins, and 2^23 - lower / step exact as a float.
  static bool gpu_form_fits(double first_steps, std::int64_t num_bins) {
    const double offset = bits_origin - first_steps;
    return num_bins <= static_cast<std::int64_t>(bits_origin) && static_cast<double>(static_cast<float>(offset)) == offset;
  }

  exact_float_bin_mapper() = default;
  exact_float_bin_mapper(float first, float last, float step, std::int64_t num_bins, bool inclusive)
      : first_(first), last_(last), inverse_step_(1.0f / step), first_steps_(static_cast<int>(first / step)),
        offset_(static_cast<float>(bits_origin - static_cast<double>(first_steps_))),
        num_bins_(static_cast<int>(num_bins)), inclusive_(inclusive) {}

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return num_bins_; }

  /// The bin of a sample whose x / step + offset() came out as `t`, rounded down (or num_bins and
  /// more, for samples outside the bins). The GPU's form, kept apart so host tests can check it.
  TALLY_HOST_DEVICE std::uint32_t bin_of_rounded_down(float t) const {
    std::uint32_t word;
    memcpy(&word, &t, sizeof(word));
    return word - bits_origin_word;
  }
  /// 2^23 - lower / step: added to x / step, it puts bin 0 at 2^23.
  TALLY_HOST_DEVICE float offset() const { return offset_; }
  TALLY_HOST_DEVICE float inverse_step() const { return inverse_step_; }

  TALLY_HOST_DEVICE std::int64_t operator()(float x) const {
#if defined(__CUDA_ARCH__)
    const std::uint32_t bin = bin_of_rounded_down(__fmaf_rd(x, inverse_step_, offset_));
    if (bin < static_cast<std::uint32_t>(num_bins_)) return bin;
    return (inclusive_ && x == last_) ? num_bins_ - 1 : left_out_bin;
#else
    if (!(x >= first_ && x < last_)) return (inclusive_ && x == last_) ? num_bins_ - 1 : left_out_bin;
    const float quotient = x * inverse_step_;
    int steps = static_cast<int>(std::floor(quotient));
    // A tiny negative x can scale to -0, whose floor is 0; the exact quotient is negative.
    if (steps == 0 && x < 0.0f) steps = -1;
    return steps - first_steps_;
#endif
  }

 private:
  float first_ = 0.0f;
  float last_ = 0.0f;
  float inverse_step_ = 1.0f;
  int first_steps_ = 0;  // lower / step, a whole number below 2^24 in magnitude
  float offset_ = 0.0f;  // 2^23 - first_steps_, exact (gpu_form_fits)
  int num_bins_ = 0;     // at most 2^23 bins, by construction
  bool inclusive_ = false;
};

/// Empty bases that give a mapper the vector members block pieces look for (block_histogram.cuh's
/// maps_vectors and gives_slot_items), or not.
struct maps_vectors_of_items {
  static constexpr bool maps_items = true;
  static constexpr bool slots_items = true;
};
struct maps_single_items {};

/// Even bins over any other range (numpy's range from the data, [0, 1000) over floats, a step that
/// is not whole over integers): one multiply-add estimates the bin, and one compare against the
/// edge above the estimate, computed as numpy computes it (even_edge, in double, or in float for
/// edges computed in float32: `Float32Edges`), settles it. The estimate is
/// floor(x * scale - lower * scale - 1/2): the bin or the one below, never further off while the
/// range reaches at most max_reach bins from zero (`fits`), so one compare is always enough, and the
/// per-sample cost is a few arithmetic instructions, with no table and no loop.
///
/// Why one compare suffices: x's exact position p = (x - lower) / step lies within 2^-24 * reach
/// bins (float samples; 2^-53 * reach otherwise) of where the rounded edges put it, and the
/// estimate's own rounding (scale, offset and the multiply-add, in compare_type on the GPU) adds at
/// most 4 * 2^-24 * reach + 2^-23; under max_reach the sum stays below 0.4, so
/// floor(p - 1/2 + error) is the bin or the one below. Edges computed in float32 lie within
/// 2^-24 * (num_bins + reach) bins of lower + i * step (step the float32 step, which the estimate
/// takes too), and their reach is held to 2^19: the sum stays below 0.35. The tests check it on
/// random and adversarial ranges against the brute-force oracle, for the host form and for the
/// GPU's float form.
///
/// Float samples over the float64 rule's edges also map vectors (map_items, slot_items), for the
/// kernels that take them: their edge costs a conversion, a double multiply and add and a rounding
/// to float a sample, which an H200's memory outruns. Two float estimates of x's position, one
/// `margin` below it and one above, settle the bin with no edge where both have the same floor
/// (clamped to the bins: x lies at least `margin` from every inner edge); only samples near an
/// edge compute theirs, after the vector's straight line and only where one of its samples needs
/// it (margin_of says why the margin is enough; over ranges from zero it grows with x,
/// relative_margin). The margin grows with the reach (or with x), and where its mean over the range
/// passes widest_mean_margin so many warps would take both paths that the vector form takes the
/// edge of every sample instead (docs/performance.md, "Float32 data over the float64 rule's edges:
/// two estimates", "...: a margin that grows with x" and "...: 16384 bins settle").
template <class Sample, bool Float32Edges = false>
class estimated_even_bin_mapper
    : public std::conditional_t<std::is_same_v<Sample, float> && !Float32Edges, maps_vectors_of_items, maps_single_items> {
 public:
  static_assert(!Float32Edges || std::is_same_v<Sample, float>, "edges computed in float32 are estimated for float samples");
  using compare_type = std::conditional_t<std::is_same_v<Sample, float> || is_half_float_v<Sample>, float, double>;
  /// The farthest, in bins, that either bound may lie from zero.
  static constexpr double max_reach = Float32Edges ? 0x1p19 : std::is_same_v<Sample, float> ? 0x1p20 : 0x1p40;

  /// The step the estimate divides by: the float32 step for edges computed in float32.
  static double step_of(const even_bins& bins) {
    if constexpr (Float32Edges) {
      return static_cast<double>(even_step_float32(bins));
    } else {
      return (bins.upper - bins.lower) / static_cast<double>(bins.num_bins);
    }
  }

  /// How far, in bins, the farther bound lies from zero.
  static double reach_of(const even_bins& bins) {
    return std::max(std::fabs(bins.lower), std::fabs(bins.upper)) / step_of(bins);
  }

  /// Whether the estimate is always the bin or the one below for these bins (above): the reach,
  /// both bounds finite in compare_type (a float bound that rounds to infinity needs the general
  /// rule's infinity test), a scale finite in it, and a step far above the subnormals (whose
  /// rounding is absolute, not relative).
  static bool fits(const even_bins& bins) {
    if constexpr (is_half_float_v<Sample>) return false;  // their edges are rounded to 16 bits: a table maps them
    const double step = step_of(bins);
    const double reach = reach_of(bins);
    constexpr double largest = static_cast<double>(std::numeric_limits<compare_type>::max());
    constexpr double smallest_step =
        static_cast<double>(std::numeric_limits<compare_type>::min()) / std::numeric_limits<compare_type>::epsilon();
    return bins.num_bins < std::numeric_limits<int>::max() && reach <= max_reach && std::fabs(bins.lower) <= largest &&
           std::fabs(bins.upper) <= largest && step >= smallest_step && 1.0 / step < largest;
  }

  estimated_even_bin_mapper() = default;
  estimated_even_bin_mapper(const even_bins& bins, bool inclusive)
      : lower_(bins.lower),
        step_(step_of(bins)),
        scale_(Float32Edges ? 1.0 / step_ : static_cast<double>(bins.num_bins) / (bins.upper - bins.lower)),
        offset_(-bins.lower * scale_ - 0.5),
        scale_f_(static_cast<float>(scale_)),
        offset_f_(static_cast<float>(offset_)),
        lower_f_(static_cast<float>(bins.lower)),
        step_f_(static_cast<float>(step_)),
        below_(vector_line(bins, scale_, -1.0)),
        above_(vector_line(bins, scale_, 1.0)),
        first_(static_cast<compare_type>(bins.lower)),
        end_(inclusive ? std::nextafter(static_cast<compare_type>(bins.upper), std::numeric_limits<compare_type>::infinity())
                       : static_cast<compare_type>(bins.upper)),
        num_bins_(static_cast<int>(bins.num_bins)),
        settles_far_from_edges_(settles_far_from_edges(bins)) {}

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return num_bins_; }

  TALLY_HOST_DEVICE std::int64_t operator()(Sample sample) const {
    const auto x = static_cast<compare_type>(sample);
#if defined(__CUDA_ARCH__)
    // Without branches: every sample takes the estimate and the compare, in range or not (outside,
    // or NaN, they give a bin that the select discards), so the compiler interleaves the samples of
    // a vector. With a branch per sample each ran its chain of dependent instructions alone.
    const int bin = bin_above_estimate(x, next_edge_estimate(x));
    return (x >= first_ && x < end_) ? bin : static_cast<int>(left_out_bin);
#else
    if (!(x >= first_ && x < end_)) return left_out_bin;
    return bin_above_estimate(x, next_edge_estimate(x));
#endif
  }

  /// The bin, or num_bins() where the sample is left out (the shared kernels' left-out word): the
  /// same select as operator() with no test of the bin after it.
  TALLY_HOST_DEVICE int slot(Sample sample) const {
    const auto x = static_cast<compare_type>(sample);
#if defined(__CUDA_ARCH__)
    const int bin = bin_above_estimate(x, next_edge_estimate(x));
    return (x >= first_ && x < end_) ? bin : num_bins_;
#else
    return (x >= first_ && x < end_) ? bin_above_estimate(x, next_edge_estimate(x)) : num_bins_;
#endif
  }

  /// Maps `Items` float samples to bins (left_out_bin where left out): the two estimates first, for
  /// every sample in one straight line, then the edge of each sample near one.
  template <int Items>
  TALLY_HOST_DEVICE void map_items(const Sample (&samples)[Items], int (&bins)[Items]) const
    requires(std::is_same_v<Sample, float> && !Float32Edges)
  {
    map_items_or<Items>(samples, bins, static_cast<int>(left_out_bin));
  }
  /// map_items giving each sample's word in a block's copy: num_bins where it is left out.
  template <int Items>
  TALLY_HOST_DEVICE void slot_items(const Sample (&samples)[Items], int (&slots)[Items]) const
    requires(std::is_same_v<Sample, float> && !Float32Edges)
  {
    map_items_or<Items>(samples, slots, num_bins_);
  }

  /// How far, in bins, the vector form's two estimates lie below and above x's position:
  /// 2^-21 * (reach + 1).
  ///
  /// Why it is enough: numpy's bin b for x has E_b <= x < E_b+1, and each edge E_i (numpy's double,
  /// rounded to float) lies within alpha = (2^-24 + 2^-50) * reach bins of lower + i * step, so
  /// x's exact position p = (x - lower) / step lies in [b - alpha, b + 1 + alpha). An estimate
  /// t = fmaf(x, scale_f, c), with c = float(-lower * scale -+ margin), is within beta of p -+ margin:
  /// reach * 2^-24 for scale's rounding to float, (reach + margin) * 2^-24 for c's, (num_bins + 2 +
  /// margin) * 2^-24 for the multiply-add's (|t| is at most that for x in range), plus double
  /// roundings below 2^-50 * reach. With k and K the floors of the lower and upper estimates,
  /// p >= k + margin - beta and p < K + 1 - margin + beta; with margin > alpha + beta that puts p
  /// in (k + alpha, K + 1 - alpha), so k <= b <= K, and b is settled where k and K, clamped to the
  /// bins, agree. num_bins <= 2 * reach, so alpha + beta < 2^-24 * (5 * reach + 2 + 2 * margin) +
  /// 2^-49 * reach, below 8 * 2^-24 * (reach + 1) while the margin stays under 1. Within
  /// widest_mean_margin (with relative_margin, lower * scale at most about 4200 bins) the upper
  /// estimate of a counted sample stays above 0 and the lower one above -0.003, where the floor by
  /// adding 2^23 + 1 holds (a lower one below -1 would floor under 0, and clamp to bin 0 all the
  /// same). The tests check the vector form against the oracle on every layout they try; with a
  /// quarter of this margin they failed on one seed of three.
  static double margin_of(double reach) { return 0x1p-21 * (reach + 1.0); }

  /// Over ranges from zero or above (lower >= 0: every counted x >= 0), a margin that grows with
  /// x. With L = lower * scale and p x's position in bins, each error margin_of sums is one float
  /// rounding of a value of at most about p + L bins: the edge's (E_b / step = L + b), the scale's
  /// (x * scale = p + L), the offset's (L) and the multiply-add's (|t| <= p + margin), so alpha +
  /// beta < 2^-24 * (3 * p + 3 * L + 1 + 2 * margin) + 2^-46 * (p + L) (the last the scale's
  /// factor 1 -+ 2^-22, and double roundings). The two estimates x * scale * (1 -+ 2^-22) - L -+
  /// (2^-21 + 2^-22 * L), one scale each and no instruction more, lie 2^-22 * (p + 2 * L) + 2^-21
  /// bins from p: above that sum at every x (by 2^-24 * (p + 5 * L + 5)), so the argument of
  /// margin_of holds at x. Data crowded near zero (a power law, whole values
  /// over [0, max]) then settles where the reach's margin sent it to its edge, and uniform data
  /// over [0, max] meets half the margin of 2^-21 per bin of reach. Ranges below zero keep
  /// margin_of(reach): there the offset's rounding, as large as the reach, dominates. The tests
  /// probe every edge of random ranges from zero: with a quarter of this slope they misplace
  /// samples on five seeds of six; with half of it, still below the bound, on none.
  static constexpr double relative_margin = 0x1p-22;
  /// The part of that margin that does not grow with x: 2^-21 + 2^-22 * lower * scale.
  static double fixed_margin(const even_bins& bins, double scale) { return 0x1p-21 + 0x1p-22 * bins.lower * scale; }

  /// A line fmaf(x, scale, offset), in float.
  struct float_line {
    float scale = 0.0f;
    float offset = 0.0f;
  };
  /// The vector form's estimate of x's position a margin below it (side -1) or above it (side 1).
  static float_line vector_line(const even_bins& bins, double scale, double side) {
    if (bins.lower >= 0.0) {
      return {static_cast<float>(scale * (1.0 + side * relative_margin)),
              static_cast<float>(-bins.lower * scale + side * fixed_margin(bins, scale))};
    }
    return {static_cast<float>(scale), static_cast<float>(-bins.lower * scale + side * margin_of(reach_of(bins)))};
  }

  /// The mean margin, in bins, over the positions of the range: margin_of(reach), or over ranges
  /// from zero or above the margin at the range's middle, 2^-22 * middle + fixed_margin (middle its
  /// position in bins from zero). About twice it is the share of uniform samples near an edge.
  static double mean_margin_of(const even_bins& bins) {
    if (bins.lower >= 0.0) {
      const double scale = static_cast<double>(bins.num_bins) / (bins.upper - bins.lower);
      const double middle = 0.5 * (bins.lower + bins.upper) * scale;
      return relative_margin * middle + fixed_margin(bins, scale);
    }
    return margin_of(reach_of(bins));
  }

  /// The widest mean margin the vector form settles samples with, 0.002 bins: up to 16384 bins over
  /// [0, max] (whose margin grows with x) and a reach of 4193 bins where the margin is fixed (8192
  /// bins over [-max, max]), not 32768 over [0, max]. Past it so many warps' vectors hold a sample
  /// near an edge that uniform data pays for both paths more than it saves (on an H200, 16384 bins
  /// over [0, max] with a mean margin of 0.0039: 0.81 -> 0.79 of the read bandwidth, though data
  /// whose warps hold few values gained 7-10%; 65536 bins: 0.56 -> 0.47), and the vector form
  /// computes every sample's edge, as the single-sample form does (docs/performance.md, "Float32
  /// over the float64 rule's edges: 16384 bins settle").
  static constexpr double widest_mean_margin = 0.002;

  /// Whether the vector form settles samples far from edges with their estimates alone.
  static bool settles_far_from_edges(const even_bins& bins) { return mean_margin_of(bins) <= widest_mean_margin; }

  /// Whether the vector form computes x's edge: x is counted and lies within about the margin of
  /// an edge, or the margin is too wide (the tests count how often).
  TALLY_HOST_DEVICE bool computes_edge(float x) const
    requires(std::is_same_v<Sample, float> && !Float32Edges)
  {
    int bin;
    return x >= first_ && x < end_ && (!settles_far_from_edges_ || settles_near_edge(x, bin));
  }

  /// The GPU's estimate for float samples, in float: a host test runs it through fmaf.
  TALLY_HOST_DEVICE float scale_for_floats() const { return scale_f_; }
  TALLY_HOST_DEVICE float offset_for_floats() const { return offset_f_; }

  /// x's bin given `next`, the index of the first edge above the estimate (x in [first, end)).
  TALLY_HOST_DEVICE int bin_above_estimate(compare_type x, int next) const {
    const int bin = next - 1 + (x >= edge(next) ? 1 : 0);
    // The computed last edge may fall short of upper; and upper itself, counted where the last
    // edge is inclusive, is at or past it.
    return bin < num_bins_ ? bin : num_bins_ - 1;
  }

 private:
  /// map_items and slot_items, `left_out` for a sample left out.
  template <int Items>
  TALLY_HOST_DEVICE void map_items_or(const Sample (&samples)[Items], int (&bins)[Items], int left_out) const {
    if (!settles_far_from_edges_) {  // the same for every sample of a launch
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int j = 0; j < Items; ++j) {
        const int slot = this->slot(samples[j]);
        bins[j] = slot < num_bins_ ? slot : left_out;
      }
      return;
    }
    bool near_edge[Items];
    bool any_near_edge = false;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < Items; ++j) {
      const float x = samples[j];
      const bool counted = x >= first_ && x < end_;
      int bin;
      near_edge[j] = counted & settles_near_edge(x, bin);
      any_near_edge = any_near_edge || near_edge[j];
      bins[j] = counted ? bin : left_out;
    }
    if (any_near_edge) {
      // A branch a sample: where few samples are near an edge, a warp computes the edges of the few
      // items that need them (every item's edge and a select ran 0.95 -> 0.84 on uniform data at
      // 4096 bins, though faster where every sample sits on an edge).
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int j = 0; j < Items; ++j) {
        if (near_edge[j]) bins[j] = bin_above_estimate(samples[j], next_edge_estimate(samples[j]));
      }
    }
  }

  /// The vector form for a sample in range: `bin`, the lower estimate's floor clamped to the bins,
  /// and whether the upper estimate's (clamped too) differs, so that the edge must settle it.
  /// Both estimates for every sample (the caller's & rather than &&): predicated on the range test,
  /// the second one reloaded its offset from the constant bank. The floors stay in their float's
  /// bits (2^23 + 1 + floor), where a clamp is one instruction.
  TALLY_HOST_DEVICE bool settles_near_edge(float x, int& bin) const {
    constexpr int bits_of_first_bin = 0x4b000001;  // 2^23 + 1
    // A sample at the first or last edge (the data's minimum) lies in the first or last bin.
    const int first = max_of(floor_bits(x, below_), bits_of_first_bin);
    const int last = min_of(floor_bits(x, above_), bits_of_first_bin - 1 + num_bins_);
    bin = first - bits_of_first_bin;
    return first != last;
  }

  TALLY_HOST_DEVICE static int max_of(int a, int b) { return a > b ? a : b; }
  TALLY_HOST_DEVICE static int min_of(int a, int b) { return a < b ? a : b; }

  /// The bits of 2^23 + 1 + floor(fmaf(x, line.scale, line.offset)), the vector form's estimates
  /// rounded down onto 2^23 + 1 (where the spacing is one), exact for t > -1 (every counted
  /// sample's while the vector form settles: margin_of). Samples that are not counted give a number
  /// the caller discards: on the host a fixed one, where a NaN or a huge t must not reach the
  /// conversion (a counted sample's t stays below num_bins + 1, far below 2^22).
  TALLY_HOST_DEVICE static int floor_bits(float x, float_line line) {
#if defined(__CUDA_ARCH__)
    return __float_as_int(__fadd_rd(__fmaf_rn(x, line.scale, line.offset), 8388609.0f));
#else
    const float t = std::fmaf(x, line.scale, line.offset);
    return t > -1.0f && t < 0x1p22f ? 0x4b000001 + static_cast<int>(std::floor(t)) : 0x4b000000;
#endif
  }

  /// estimate + 1, in [0, num_bins] for x in [first, last).
  TALLY_HOST_DEVICE int next_edge_estimate(compare_type x) const {
#if defined(__CUDA_ARCH__)
    // Rounding down onto 2^23 + 1 (2^52 + 1 for doubles), where the spacing is one, floors the
    // estimate and leaves estimate + 1 in the low bits: no conversion instruction.
    if constexpr (std::is_same_v<compare_type, float>) {
      const float t = __fadd_rd(__fmaf_rn(x, scale_f_, offset_f_), 8388609.0f);
      return __float_as_int(t) - 0x4b000000;
    } else {
      return __double2loint(__dadd_rd(__fma_rn(x, scale_, offset_), 4503599627370497.0));
    }
#else
    return static_cast<int>(std::floor(static_cast<double>(x) * scale_ + offset_)) + 1;
#endif
  }

  /// Edge i as numpy computes it (even_edge, in double or float), in compare_type; on the GPU i
  /// becomes a double (a float) by its bits, 2^52 + i minus 2^52 (2^23 + i minus 2^23, exact for
  /// the i < 2^23 of samples in range), rather than a conversion instruction.
  TALLY_HOST_DEVICE compare_type edge(int i) const {
#if defined(__CUDA_ARCH__)
    if constexpr (Float32Edges) {
      const float index = __int_as_float(0x4b000000 + i) - 8388608.0f;
      return __fadd_rn(__fmul_rn(index, step_f_), lower_f_);
    } else {
      const double index = __hiloint2double(0x43300000, i) - 4503599627370496.0;
      return static_cast<compare_type>(__dadd_rn(__dmul_rn(index, step_), lower_));
    }
#else
    if constexpr (Float32Edges) {
      return even_edge(i, step_f_, lower_f_);
    } else {
      return static_cast<compare_type>(even_edge(i, step_, lower_));
    }
#endif
  }

  double lower_ = 0.0;
  double step_ = 0.0;
  double scale_ = 0.0;
  double offset_ = 0.0;
  float scale_f_ = 0.0f;
  float offset_f_ = 0.0f;
  float lower_f_ = 0.0f;  // edges computed in float32: lower and the float32 step
  float step_f_ = 0.0f;
  // The vector form's two estimates (vector_line).
  float_line below_;
  float_line above_;
  compare_type first_{};
  // The least value past the counted ones: upper, or with an inclusive last edge the next value
  // after it, so that one compare settles both modes (upper itself then estimates to the last bin,
  // or one past it, which bin_above_estimate clamps): a compare and a select a sample fewer.
  compare_type end_{};
  int num_bins_ = 0;
  bool settles_far_from_edges_ = false;  // the vector form's estimates settle samples far from edges
};

}  // namespace detail

/// Which shortcut an even_bin_mapper found for its bins: exact arithmetic (a whole step, exact
/// float edges, or for 32-bit integers bounds in whole numbers, halves, quarters, ... and a
/// quotient), or the estimate and one compare (estimated), or none (the general rule, with a search).
enum class even_shortcut : std::uint8_t { none, integer_step, exact_float_edges, estimated, rational_step };

/**
 * @brief Maps a sample to its even bin, or to `left_out_bin`. Trivially copyable, for kernels.
 *
 * Shortcuts are found at construction and give the same bins as the general rule: integer samples
 * with whole-number edges and step (detail::integer_step_bin_mapper), 32-bit integer samples with
 * bounds that are whole numbers or small fractions of one (detail::rational_step_bin_mapper),
 * float samples whose edges are all exact floats (detail::exact_float_bin_mapper), and, for other
 * ranges that reach at most a million bins (float) from zero, an estimate and one compare
 * (detail::estimated_even_bin_mapper).
 * Kernels that care about registers take the shortcut mapper itself (see `shortcut()`); this class
 * applies it too.
 */
template <class Sample>
class even_bin_mapper {
 public:
  /// Floats compare in float, as numpy compares float32 samples with float32 edges; float16 and
  /// bfloat16 samples with edges rounded to their own precision (numpy's float16 edges), held as
  /// floats, which hold them exactly.
  using compare_type = std::conditional_t<std::is_same_v<Sample, float> || is_half_float_v<Sample>, float, double>;

  /// A double edge in the precision samples compare in.
  TALLY_HOST_DEVICE static compare_type to_compare(double edge) {
    if constexpr (is_half_float_v<Sample>) {
      return static_cast<float>(detail::round_to_format(edge, Sample::digits, Sample::min_exponent, Sample::largest));
    } else {
      return static_cast<compare_type>(edge);
    }
  }

  even_bin_mapper() = default;
  even_bin_mapper(const even_bins& bins, upper_edge last_edge)
      : lower_(bins.lower),
        upper_(bins.upper),
        step_((bins.upper - bins.lower) / static_cast<double>(bins.num_bins)),
        scale_(static_cast<double>(bins.num_bins) / (bins.upper - bins.lower)),
        num_bins_(bins.num_bins),
        first_edge_(to_compare(bins.lower)),
        last_edge_(to_compare(bins.upper)),
        inclusive_(last_edge == upper_edge::inclusive) {
    // Edges computed in float32 that are exact are the float64 rule's edges: its shortcuts apply.
    if (!detail::edges_follow_float64_rule(bins)) {
      float32_edges_ = true;
      lower_f_ = static_cast<float>(bins.lower);
      delta_f_ = static_cast<float>(bins.upper) - static_cast<float>(bins.lower);
      step_f_ = detail::even_step_float32(bins);
    }
    choose_shortcut();
  }

  /** @brief Edge i (0 <= i <= num_bins) in the precision samples are compared in. */
  TALLY_HOST_DEVICE compare_type edge(std::int64_t i) const {
    if (i >= num_bins_) return last_edge_;
    if (float32_edges_) return to_compare(static_cast<double>(float32_edge(i)));
    return to_compare(detail::even_edge(i, step_, lower_));
  }

  /** @brief Whether the edges are computed in float32 (and differ from the float64 rule's). */
  TALLY_HOST_DEVICE bool float32_edges() const { return float32_edges_; }
  /** @brief Whether float samples estimate their bins over edges computed in float32: edges of
   * the float32 rule, or of the float64 rule when every edge is an exact float32, which both rules
   * then compute alike (float arithmetic a sample rather than double). */
  TALLY_HOST_DEVICE bool estimates_in_float32() const { return float32_edges_ || exact_in_float32_; }

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return num_bins_; }

  /** @brief The exact shortcut these bins allow, if any. */
  even_shortcut shortcut() const { return shortcut_; }
  /** @brief The integer-step mapper; valid when shortcut() is even_shortcut::integer_step. */
  detail::integer_step_bin_mapper<Sample> integer_step_mapper() const {
    return {static_cast<std::int64_t>(lower_), static_cast<std::int64_t>(step_), num_bins_, inclusive_};
  }
  /** @brief Whether the integer shortcut has bins of width one and an exclusive upper edge, or an
   * inclusive one no sample can equal (above the sample type's greatest value). */
  bool unit_step() const {
    return shortcut_ == even_shortcut::integer_step && step_ == 1.0 && (!inclusive_ || !upper_edge_reachable());
  }
  /** @brief The unit-step mapper; valid when unit_step(). */
  detail::unit_step_bin_mapper<Sample> unit_step_mapper() const {
    return {static_cast<std::int64_t>(lower_), num_bins_};
  }
  /** @brief Whether the integer shortcut has bins of width one and a closed last bin some sample
   * can reach: numpy's bins over integers, as `numpy.histogram(x, n, range=(lo, lo + n))` takes them. */
  bool closed_unit_step() const {
    return shortcut_ == even_shortcut::integer_step && step_ == 1.0 && inclusive_ && upper_edge_reachable();
  }
  /** @brief The unit-step mapper with its closed last bin; valid when closed_unit_step(). */
  detail::unit_step_bin_mapper<Sample, true> closed_unit_step_mapper() const {
    return {static_cast<std::int64_t>(lower_), num_bins_};
  }
  /** @brief Whether the quotient's bounds are not whole (halves, quarters, ...: data of one value,
   * centred bins); valid when shortcut() is even_shortcut::rational_step. */
  bool rational_step_in_parts() const
    requires(std::is_integral_v<Sample> && sizeof(Sample) == 4)
  {
    return detail::rational_step_bin_mapper<Sample>::parts_of_one(lower_, upper_) > 1;
  }
  /** @brief The quotient mapper of 32-bit integer samples over whole bounds; valid when shortcut()
   * is even_shortcut::rational_step and not rational_step_in_parts(). */
  detail::rational_step_bin_mapper<Sample> rational_step_mapper() const
    requires(std::is_integral_v<Sample> && sizeof(Sample) == 4)
  {
    return {lower_, upper_, num_bins_, inclusive_};
  }
  /** @brief The quotient mapper of 32-bit integer samples over any bounds it takes; valid when
   * shortcut() is even_shortcut::rational_step. */
  detail::rational_step_bin_mapper<Sample, true> rational_step_in_parts_mapper() const
    requires(std::is_integral_v<Sample> && sizeof(Sample) == 4)
  {
    return {lower_, upper_, num_bins_, inclusive_};
  }
  /** @brief The estimating mapper; valid when shortcut() is even_shortcut::estimated and the
   * edges are not computed in float32. */
  detail::estimated_even_bin_mapper<Sample> estimated_mapper() const {
    return {even_bins{num_bins_, lower_, upper_}, inclusive_};
  }
  /** @brief The estimating mapper over edges computed in float32 (float samples); valid when
   * shortcut() is even_shortcut::estimated and estimates_in_float32(). */
  detail::estimated_even_bin_mapper<float, true> estimated_float32_mapper() const
    requires std::is_same_v<Sample, float>
  {
    return {even_bins{num_bins_, lower_, upper_, edge_arithmetic::float32}, inclusive_};
  }
  /** @brief The exact-float mapper; valid when shortcut() is even_shortcut::exact_float_edges. */
  detail::exact_float_bin_mapper exact_float_mapper() const {
    return {static_cast<float>(first_edge_), static_cast<float>(last_edge_), static_cast<float>(step_), num_bins_,
            inclusive_};
  }

  TALLY_HOST_DEVICE std::int64_t operator()(Sample sample) const {
    if constexpr (std::is_integral_v<Sample>) {
      if (shortcut_ == even_shortcut::integer_step) return integer_.operator()(sample);
    }
    if constexpr (std::is_integral_v<Sample> && sizeof(Sample) == 4) {
      if (shortcut_ == even_shortcut::rational_step) return rational_.operator()(sample);
    }
    if constexpr (std::is_same_v<Sample, float>) {
      if (shortcut_ == even_shortcut::exact_float_edges) return float_.operator()(sample);
    }
    if (shortcut_ == even_shortcut::estimated) {
      if constexpr (std::is_same_v<Sample, float>) {
        if (estimates_in_float32()) return estimated_float32_.operator()(sample);
      }
      return estimated_.operator()(sample);
    }
    const auto x = static_cast<compare_type>(sample);
    if constexpr (is_floating_sample_v<Sample>) {
      // Infinities are never counted, even when a bound rounds to infinity in the sample type.
      if (x - x != 0) return left_out_bin;  // true for NaN and +-inf
    }
    if (!(x >= first_edge_ && x < last_edge_)) {
      return (inclusive_ && x == last_edge_) ? num_bins_ - 1 : left_out_bin;
    }
    // An estimate from one multiply, clamped before it becomes an integer, then exact fix-ups
    // against the edges themselves.
    const double estimate = (static_cast<double>(x) - lower_) * scale_;
    const double last_bin = static_cast<double>(num_bins_ - 1);
    std::int64_t bin = !(estimate > 0.0) ? 0 : !(estimate < last_bin) ? num_bins_ - 1 : static_cast<std::int64_t>(estimate);
    while (bin > 0 && x < edge(bin)) --bin;
    while (bin < num_bins_ - 1 && x >= edge(bin + 1)) ++bin;
    return bin;
  }

 private:
  static bool is_whole(double v) { return v == static_cast<double>(static_cast<std::int64_t>(v)); }

  /// Whether a sample can equal the upper edge (integer samples; the others always say yes).
  bool upper_edge_reachable() const {
    if constexpr (std::is_integral_v<Sample>) {
      return upper_ <= static_cast<double>(std::numeric_limits<Sample>::max());
    } else {
      return true;
    }
  }

  /// Edge i < num_bins of edges computed in float32: numpy's linspace in float32, its special case
  /// for a step that underflows to 0 (gh-5437) included.
  TALLY_HOST_DEVICE float float32_edge(std::int64_t i) const {
    if (step_f_ != 0.0f) return detail::even_edge(i, step_f_, lower_f_);
#if defined(__CUDA_ARCH__)
    return __fadd_rn(__fmul_rn(__fdiv_rn(static_cast<float>(i), static_cast<float>(num_bins_)), delta_f_), lower_f_);
#else
    volatile float fraction = static_cast<float>(i) / static_cast<float>(num_bins_);
    volatile float offset = fraction * delta_f_;
    return offset + lower_f_;
#endif
  }

  void choose_shortcut() {
    if (float32_edges_) {
      // No exact shortcut (the edges are not exact); float samples estimate over the float32 edges.
      if constexpr (std::is_same_v<Sample, float>) {
        const even_bins bins{num_bins_, lower_, upper_, edge_arithmetic::float32};
        if (detail::estimated_even_bin_mapper<float, true>::fits(bins)) {
          shortcut_ = even_shortcut::estimated;
          estimated_float32_ = estimated_float32_mapper();
        }
      }
      return;
    }
    constexpr double exact_integers = 9007199254740992.0;  // 2^53: doubles hold every integer below
    if constexpr (std::is_integral_v<Sample>) {
      const double upper = last_edge_;
      if (lower_ > -exact_integers && lower_ < exact_integers && upper > -exact_integers && upper < exact_integers &&
          upper - lower_ < exact_integers && is_whole(lower_) && is_whole(upper) && step_ >= 1.0 && is_whole(step_) &&
          static_cast<double>(num_bins_) * step_ == upper - lower_ &&
          detail::integer_step_bin_mapper<Sample>::narrow_fits(lower_, upper)) {
        shortcut_ = even_shortcut::integer_step;
        integer_ = integer_step_mapper();
      }
      // Whole bounds and a step that is not whole (the data's own range), or bounds in halves
      // (data of one value, centred bins): the exact quotient, in integers, where the estimate
      // takes double arithmetic.
      if constexpr (sizeof(Sample) == 4) {
        if (shortcut_ == even_shortcut::none &&
            detail::rational_step_bin_mapper<Sample>::fits(lower_, upper, num_bins_, step_)) {
          shortcut_ = even_shortcut::rational_step;
          rational_ = rational_step_in_parts_mapper();
        }
      }
    } else if constexpr (std::is_same_v<Sample, float>) {
      int exponent = 0;
      const double mantissa = std::frexp(step_, &exponent);
      const double span = (std::fabs(lower_) + std::fabs(static_cast<double>(last_edge_))) / step_;
      if (mantissa == 0.5 && is_whole(lower_ / step_) && span < 16777216.0 && static_cast<double>(first_edge_) == lower_ &&
          static_cast<double>(last_edge_) == lower_ + static_cast<double>(num_bins_) * step_ &&
          detail::exact_float_bin_mapper::gpu_form_fits(lower_ / step_, num_bins_) &&
          std::isfinite(1.0f / static_cast<float>(step_))) {  // below 2^-127, 1 / step is no float
        shortcut_ = even_shortcut::exact_float_edges;
        float_ = exact_float_mapper();
      }
      // Edges that are all exact float32 values ([0, 1000) in 4096 bins: a step of 125 / 512) are
      // the float32 rule's too: the estimate over them computes its edge in float, not double (on
      // an H200, 0.77 -> 0.92 of the read bandwidth; docs/performance.md, "Edges exact in float32").
      const even_bins as_float32{num_bins_, lower_, upper_, edge_arithmetic::float32};
      if (shortcut_ == even_shortcut::none && detail::float32_edges_are_exact(as_float32) &&
          detail::estimated_even_bin_mapper<float, true>::fits(as_float32)) {
        shortcut_ = even_shortcut::estimated;
        exact_in_float32_ = true;
        estimated_float32_ = estimated_float32_mapper();
      }
    }
    if (shortcut_ == even_shortcut::none && detail::estimated_even_bin_mapper<Sample>::fits({num_bins_, lower_, upper_})) {
      shortcut_ = even_shortcut::estimated;
      estimated_ = estimated_mapper();
    }
  }

  double lower_ = 0.0;
  double upper_ = 0.0;
  double step_ = 0.0;
  double scale_ = 0.0;
  std::int64_t num_bins_ = 0;
  compare_type first_edge_{};
  compare_type last_edge_{};
  float lower_f_ = 0.0f;  // edges computed in float32: lower, upper - lower and the step in float32
  float delta_f_ = 0.0f;
  float step_f_ = 0.0f;
  bool float32_edges_ = false;
  bool exact_in_float32_ = false;  // float64-rule edges that are all exact float32 values (float samples)
  bool inclusive_ = false;
  even_shortcut shortcut_ = even_shortcut::none;
  detail::integer_step_bin_mapper<Sample> integer_;
  detail::exact_float_bin_mapper float_;
  detail::estimated_even_bin_mapper<Sample> estimated_;
  // Only 32-bit integer samples take the quotient (here in parts of one, right for any bounds it
  // takes); others hold an empty member.
  std::conditional_t<std::is_integral_v<Sample> && sizeof(Sample) == 4, detail::rational_step_bin_mapper<Sample, true>,
                     std::uint8_t>
      rational_{};
  // Only float samples estimate over edges computed in float32; others hold an empty member.
  std::conditional_t<std::is_same_v<Sample, float>, detail::estimated_even_bin_mapper<float, true>, std::uint8_t>
      estimated_float32_{};
};

namespace detail {

/// Calls `run(mapper)` with the cheapest mapper that bins exactly as `map` does: the unit-step or
/// integer-step shortcut for integer samples, the quotient for 32-bit integers over whole or half
/// bounds, the exact-float one for floats, the estimating one for other ranges that allow it, else
/// `map` itself.
/// Both backends take even bins through it, so they choose alike.
template <class Sample, class Run>
decltype(auto) with_fastest_mapper(const even_bin_mapper<Sample>& map, Run&& run) {
  if constexpr (std::is_integral_v<Sample>) {
    if (map.unit_step()) return run(map.unit_step_mapper());
    if (map.closed_unit_step()) return run(map.closed_unit_step_mapper());
    if (map.shortcut() == even_shortcut::integer_step) return run(map.integer_step_mapper());
  }
  if constexpr (std::is_integral_v<Sample> && sizeof(Sample) == 4) {
    if (map.shortcut() == even_shortcut::rational_step) {
      if (map.rational_step_in_parts()) return run(map.rational_step_in_parts_mapper());
      return run(map.rational_step_mapper());
    }
  }
  if constexpr (std::is_same_v<Sample, float>) {
    if (map.shortcut() == even_shortcut::exact_float_edges) return run(map.exact_float_mapper());
  }
  if (map.shortcut() == even_shortcut::estimated) {
    if constexpr (std::is_same_v<Sample, float>) {
      if (map.estimates_in_float32()) return run(map.estimated_float32_mapper());
    }
    return run(map.estimated_mapper());
  }
  return run(map);
}

}  // namespace detail

/** @brief Maps a sample to the bin of sorted `edges` (num_bins + 1 of them) it falls in. */
template <class Sample>
class range_bin_mapper {
 public:
  range_bin_mapper() = default;
  /// `edges` must stay alive and, for GPU kernels, be device-accessible.
  range_bin_mapper(const double* edges, std::int64_t num_edges, upper_edge last_edge)
      : edges_(edges), num_bins_(num_edges - 1), inclusive_(last_edge == upper_edge::inclusive) {}

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return num_bins_; }

  TALLY_HOST_DEVICE std::int64_t operator()(Sample sample) const {
    const double x = static_cast<double>(sample);
    const double last = edges_[num_bins_];  // edges are finite, so NaN and infinities fall outside
    if (!(x >= edges_[0] && x < last)) {
      return (inclusive_ && x == last) ? num_bins_ - 1 : left_out_bin;
    }
    // upper_bound: the first edge greater than x; its predecessor opens x's bin.
    const double* edges = edges_;
    return detail::partition_point(std::int64_t{1}, num_bins_, [edges, x](std::int64_t i) { return edges[i] <= x; }) - 1;
  }

 private:
  const double* edges_ = nullptr;
  std::int64_t num_bins_ = 0;
  bool inclusive_ = false;
};

/** @brief Maps value v to bin v; negative values and values >= num_bins are left out. */
template <class Sample>
class bincount_mapper {
 public:
  /// Samples of up to 32 bits compare as 32-bit unsigned values, where a negative one is above
  /// every bin: one compare per sample, not a sign test and a 64-bit compare.
  /// (65536 int32 bins: 0.757 -> 0.853; docs/performance.md, "65536 bins: packed16")
  using unsigned_type = std::conditional_t<sizeof(Sample) <= 4, std::uint32_t, std::uint64_t>;

  bincount_mapper() = default;
  /// `num_bins` >= 1 (bincount refuses an empty `counts` before it maps anything).
  explicit bincount_mapper(std::int64_t num_bins)
      : num_bins_(num_bins),
        last_(static_cast<unsigned_type>(
            std::min<std::uint64_t>(static_cast<std::uint64_t>(num_bins - 1),
                                    static_cast<std::uint64_t>(std::numeric_limits<Sample>::max())))) {}

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return num_bins_; }

  TALLY_HOST_DEVICE std::int64_t operator()(Sample sample) const {
    if constexpr (sizeof(Sample) <= 4) {
      // last_ is at most the sample type's largest value, so a negative sample (2^31 and up as
      // unsigned, for int32) is always above it.
      const auto value = static_cast<unsigned_type>(static_cast<std::make_unsigned_t<Sample>>(sample));
      return value <= last_ ? static_cast<std::int64_t>(value) : left_out_bin;
    } else {
      if constexpr (std::is_signed_v<Sample>) {
        if (sample < 0) return left_out_bin;
      }
      const auto value = static_cast<std::uint64_t>(sample);
      return value < static_cast<std::uint64_t>(num_bins_) ? static_cast<std::int64_t>(value) : left_out_bin;
    }
  }

 private:
  std::int64_t num_bins_ = 0;
  unsigned_type last_ = 0;  ///< the last bin a sample can reach: min(num_bins - 1, the type's max)
};

}  // namespace tally
