// How a sample finds its bin. One definition, shared by the CPU reference, the CPU strategies and
// every GPU kernel, so that all of them count a sample on or next to an edge the same way.
//
// Even bins follow numpy.histogram exactly: edge i is `lower + i * ((upper - lower) / num_bins)`
// computed in double (the last edge is `upper` itself) and, for float samples, rounded to float;
// a sample counts in bin i when edge_i <= x < edge_{i+1}. Samples below `lower`, at or above
// `upper` (unless upper_edge::inclusive, numpy's choice), NaN and infinities are left out and
// counted as such. Range bins use the same rule over caller-given edges; bincount counts value v
// in bin v and leaves out values >= the number of bins.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tally/config.hpp"
#include "tally/strategy.hpp"

namespace tally {

/** @brief `num_bins` equal-width bins over [lower, upper). */
struct even_bins {
  std::int64_t num_bins = 0;
  double lower = 0.0;
  double upper = 0.0;
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
};

/** @brief What a histogram call did: the strategy it ran and how many samples were left out. */
struct histogram_result {
  choice chose;
  std::uint64_t left_out = 0;  ///< NaN, infinities and samples outside the bins
};

/** @brief The sample types every backend accepts for histograms. */
template <class T>
inline constexpr bool is_histogram_sample_v =
    std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::uint32_t> ||
    std::is_same_v<T, std::int64_t> || std::is_same_v<T, float> || std::is_same_v<T, double>;

/** @brief The sample types bincount accepts: the integer histogram samples. */
template <class T>
inline constexpr bool is_bincount_sample_v = is_histogram_sample_v<T> && std::is_integral_v<T>;

/** @brief The counter types: 32-bit (the caller vouches for < 2^32 samples) or 64-bit. */
template <class T>
inline constexpr bool is_counter_v = std::is_same_v<T, std::uint32_t> || std::is_same_v<T, std::uint64_t>;

/** @brief The bin a mapper returns for a sample that is not counted. */
inline constexpr std::int64_t left_out_bin = -1;

namespace detail {
// lower + i * step, rounded twice as numpy's linspace rounds it: never fused into one FMA.
TALLY_HOST_DEVICE inline double even_edge(std::int64_t i, double step, double lower) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(__dmul_rn(static_cast<double>(i), step), lower);
#else
  volatile double product = static_cast<double>(i) * step;  // volatile: no contraction on hosts with FMA
  return product + lower;
#endif
}
}  // namespace detail

/**
 * @brief Maps a sample to its even bin, or to `left_out_bin`. Trivially copyable, for kernels.
 *
 * Two exact shortcuts are chosen at construction, and give the same bins as the general rule:
 * integer samples with whole-number edges and a whole-number step (every edge is then exact, so
 * the bin is (x - lower) / step in integer arithmetic), and float samples whose edges are all
 * exact floats (a power-of-two step over a range a float spans exactly), where the fix-ups compare
 * in float with no double arithmetic. Anything else takes the general rule.
 */
template <class Sample>
class even_bin_mapper {
 public:
  /// Floats compare in float, as numpy compares float32 samples with float32 edges.
  using compare_type = std::conditional_t<std::is_same_v<Sample, float>, float, double>;

  even_bin_mapper() = default;
  even_bin_mapper(const even_bins& bins, upper_edge last_edge)
      : lower_(bins.lower),
        step_((bins.upper - bins.lower) / static_cast<double>(bins.num_bins)),
        scale_(static_cast<double>(bins.num_bins) / (bins.upper - bins.lower)),
        num_bins_(bins.num_bins),
        first_edge_(static_cast<compare_type>(bins.lower)),
        last_edge_(static_cast<compare_type>(bins.upper)),
        inclusive_(last_edge == upper_edge::inclusive) {
    choose_shortcut();
  }

  /** @brief Edge i (0 <= i <= num_bins) in the precision samples are compared in. */
  TALLY_HOST_DEVICE compare_type edge(std::int64_t i) const {
    if (i >= num_bins_) return last_edge_;
    return static_cast<compare_type>(detail::even_edge(i, step_, lower_));
  }

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return num_bins_; }

  TALLY_HOST_DEVICE std::int64_t operator()(Sample sample) const {
    if constexpr (std::is_integral_v<Sample>) {
      if (shortcut_ == shortcut::integer_step) {
        // Wrapping subtraction: values below lower land far above the range, so one compare checks both ends.
        const std::uint64_t offset =
            static_cast<std::uint64_t>(static_cast<std::int64_t>(sample)) - static_cast<std::uint64_t>(integer_lower_);
        if (offset < static_cast<std::uint64_t>(integer_range_)) {
          return static_cast<std::int64_t>(integer_step_ == 1 ? offset : offset / static_cast<std::uint64_t>(integer_step_));
        }
        return (inclusive_ && offset == static_cast<std::uint64_t>(integer_range_)) ? num_bins_ - 1 : left_out_bin;
      }
    }
    const auto x = static_cast<compare_type>(sample);
    if (!(x >= first_edge_ && x < last_edge_)) {  // also false for NaN
      return (inclusive_ && x == last_edge_) ? num_bins_ - 1 : left_out_bin;
    }
    if constexpr (std::is_same_v<Sample, float>) {
      if (shortcut_ == shortcut::exact_float_edges) {
        // Every edge lower + i * step is an exact float, so float arithmetic computes it exactly.
        const float offset = x - first_edge_;
        std::int64_t bin = static_cast<std::int64_t>(offset * float_inverse_step_);
        if (bin > num_bins_ - 1) bin = num_bins_ - 1;
        if (bin > 0 && x < first_edge_ + static_cast<float>(bin) * float_step_) --bin;
        if (bin < num_bins_ - 1 && x >= first_edge_ + static_cast<float>(bin + 1) * float_step_) ++bin;
        return bin;
      }
    }
    // An estimate from one multiply, then exact fix-ups against the edges themselves.
    double estimate = (static_cast<double>(x) - lower_) * scale_;
    std::int64_t bin = estimate <= 0.0 ? 0 : static_cast<std::int64_t>(estimate);
    if (bin > num_bins_ - 1) bin = num_bins_ - 1;
    while (bin > 0 && x < edge(bin)) --bin;
    while (bin < num_bins_ - 1 && x >= edge(bin + 1)) ++bin;
    return bin;
  }

 private:
  enum class shortcut : std::uint8_t { none, integer_step, exact_float_edges };

  static bool is_whole(double v) { return v == static_cast<double>(static_cast<std::int64_t>(v)); }

  void choose_shortcut() {
    constexpr double exact_integers = 9007199254740992.0;  // 2^53: doubles hold every integer below
    if constexpr (std::is_integral_v<Sample>) {
      const double range = static_cast<double>(num_bins_) * step_;
      if (lower_ > -exact_integers && lower_ < exact_integers && last_edge_ > -exact_integers &&
          last_edge_ < exact_integers && last_edge_ - lower_ < exact_integers && is_whole(lower_) &&
          is_whole(last_edge_) && step_ >= 1.0 && is_whole(step_) && range == last_edge_ - lower_) {
        shortcut_ = shortcut::integer_step;
        integer_lower_ = static_cast<std::int64_t>(lower_);
        integer_step_ = static_cast<std::int64_t>(step_);
        integer_range_ = static_cast<std::int64_t>(last_edge_) - integer_lower_;
      }
    } else if constexpr (std::is_same_v<Sample, float>) {
      int exponent = 0;
      const double mantissa = std::frexp(step_, &exponent);
      const double steps_to_lower = lower_ / step_;
      const double span = (std::fabs(lower_) + std::fabs(static_cast<double>(last_edge_))) / step_;
      if (mantissa == 0.5 && is_whole(steps_to_lower) && span < 16777216.0 &&
          static_cast<double>(first_edge_) == lower_ && static_cast<double>(last_edge_) == lower_ + num_bins_ * step_) {
        shortcut_ = shortcut::exact_float_edges;
        float_step_ = static_cast<float>(step_);
        float_inverse_step_ = static_cast<float>(1.0 / step_);
      }
    }
  }

  double lower_ = 0.0;
  double step_ = 0.0;
  double scale_ = 0.0;
  std::int64_t num_bins_ = 0;
  compare_type first_edge_{};
  compare_type last_edge_{};
  bool inclusive_ = false;
  shortcut shortcut_ = shortcut::none;
  std::int64_t integer_lower_ = 0;
  std::int64_t integer_step_ = 1;
  std::int64_t integer_range_ = 0;
  float float_step_ = 0.0f;
  float float_inverse_step_ = 0.0f;
};

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
    const double last = edges_[num_bins_];
    if (!(x >= edges_[0] && x < last)) {
      return (inclusive_ && x == last) ? num_bins_ - 1 : left_out_bin;
    }
    // upper_bound: the first edge greater than x; its predecessor opens x's bin.
    std::int64_t lo = 1;
    std::int64_t hi = num_bins_;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (edges_[mid] <= x) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo - 1;
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
  bincount_mapper() = default;
  explicit bincount_mapper(std::int64_t num_bins) : num_bins_(num_bins) {}

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return num_bins_; }

  TALLY_HOST_DEVICE std::int64_t operator()(Sample sample) const {
    if constexpr (std::is_signed_v<Sample>) {
      if (sample < 0) return left_out_bin;
    }
    const auto value = static_cast<std::uint64_t>(sample);
    return value < static_cast<std::uint64_t>(num_bins_) ? static_cast<std::int64_t>(value) : left_out_bin;
  }

 private:
  std::int64_t num_bins_ = 0;
};

}  // namespace tally
