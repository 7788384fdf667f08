// Tests of tally's bin mappers (even, range, bincount) against the brute-force oracle in
// tests/common/reference.hpp and against answers numpy 2.4 gave, on the values where binning
// goes wrong: exact edges and their floating-point neighbours, NaN, infinities, the bounds
// themselves, steps that are not representable, huge and tiny ranges, and 64-bit integers
// past 2^53 where the conversion to double rounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/reference.hpp"
#include "tally/bins.hpp"
#include "tally/detail/range_grid.hpp"
#include "tally/detail/value_tables.hpp"
#include "test_support.hpp"

namespace {

using tally::upper_edge;
using tally_test::reference_even;

constexpr upper_edge both_modes[] = {upper_edge::exclusive, upper_edge::inclusive};

const char* mode_name(upper_edge mode) { return mode == upper_edge::inclusive ? "inclusive" : "exclusive"; }

template <class T>
std::string show(T x) {
  std::ostringstream out;
  if constexpr (std::is_floating_point_v<T>) {
    out.precision(std::numeric_limits<T>::max_digits10);
    out << x << " (" << std::hexfloat << x << ")";
  } else {
    out << +x;
  }
  return out.str();
}

/// An integer of type T as near to `value` as T allows (saturating; NaN gives nothing).
template <class T>
std::optional<T> nearest_integer(double value) {
  if (std::isnan(value)) return std::nullopt;
  // Both bounds are powers of two (or zero), so they are exact in double.
  const double low = static_cast<double>(std::numeric_limits<T>::lowest());
  const double high_exclusive = std::ldexp(1.0, std::numeric_limits<T>::digits);
  if (value < low) return std::numeric_limits<T>::lowest();
  if (value >= high_exclusive) return std::numeric_limits<T>::max();
  return static_cast<T>(value);
}

/// The values where even binning can go wrong, as samples of type T.
template <class T>
std::vector<T> adversarial_samples(const std::vector<tally_test::reference_compare_t<T>>& edges, double lower,
                                   double upper, std::mt19937_64& rng) {
  std::vector<T> values;
  auto add_number = [&](double v) {
    if constexpr (std::is_floating_point_v<T>) {
      values.push_back(static_cast<T>(v));
    } else {
      for (const double w : {std::floor(v) - 1, std::floor(v), std::ceil(v), std::ceil(v) + 1}) {
        if (const auto i = nearest_integer<T>(w)) values.push_back(*i);
      }
    }
  };
  // Every edge and, in the precision samples are compared in, both of its neighbours.
  for (const auto e : edges) {
    add_number(static_cast<double>(e));
    if constexpr (std::is_floating_point_v<T>) {
      const T t = static_cast<T>(e);
      values.push_back(std::nextafter(t, -std::numeric_limits<T>::infinity()));
      values.push_back(std::nextafter(t, std::numeric_limits<T>::infinity()));
    }
  }
  for (const double bound : {lower, upper}) {
    add_number(bound);
    add_number(std::nextafter(bound, -INFINITY));
    add_number(std::nextafter(bound, INFINITY));
  }
  values.push_back(std::numeric_limits<T>::lowest());
  values.push_back(std::numeric_limits<T>::max());
  values.push_back(T{0});
  if constexpr (std::is_floating_point_v<T>) {
    values.push_back(std::numeric_limits<T>::quiet_NaN());
    values.push_back(-std::numeric_limits<T>::quiet_NaN());
    values.push_back(std::numeric_limits<T>::infinity());
    values.push_back(-std::numeric_limits<T>::infinity());
    values.push_back(-T{0});
    values.push_back(std::numeric_limits<T>::denorm_min());
    values.push_back(-std::numeric_limits<T>::denorm_min());
  }
  // Random values over the range and a margin either side.
  const double width = upper - lower;
  std::uniform_real_distribution<double> uniform(lower - 0.25 * width, upper + 0.25 * width);
  for (int i = 0; i < 2000; ++i) {
    const double v = std::isfinite(width) ? uniform(rng) : lower;
    add_number(v);
  }
  return values;
}

struct even_case {
  std::int64_t num_bins;
  double lower;
  double upper;
  tally::edge_arithmetic arithmetic = tally::edge_arithmetic::float64;
};

std::string describe(const even_case& c) {
  std::ostringstream out;
  out.precision(17);
  out << "num_bins=" << c.num_bins << " lower=" << c.lower << " upper=" << c.upper
      << (c.arithmetic == tally::edge_arithmetic::float32 ? " edges in float32" : "");
  return out.str();
}

/// Checks tally's even mapper, edge by edge and sample by sample, against the oracle.
template <class Sample>
void expect_even_mapper_matches_oracle(const even_case& c, upper_edge mode, const std::vector<Sample>& samples) {
  SCOPED_TRACE(describe(c) + " " + mode_name(mode));
  const tally::even_bins bins{c.num_bins, c.lower, c.upper, c.arithmetic};
  const tally::even_bin_mapper<Sample> mapper(bins, mode);
  const reference_even<Sample> oracle(bins, mode);
  ASSERT_EQ(mapper.num_bins(), c.num_bins);

  for (std::int64_t i = 0; i <= c.num_bins; ++i) {
    const auto expected = oracle.edges()[static_cast<std::size_t>(i)];
    const auto actual = mapper.edge(i);
    if (!(actual == expected)) {
      ADD_FAILURE() << "edge " << i << ": mapper " << show(actual) << ", oracle " << show(expected);
      return;
    }
  }
  int failures = 0;
  const auto check = [&](const char* which, auto&& map) {
    for (const Sample x : samples) {
      const std::int64_t expected = oracle.bin(x);
      const std::int64_t actual = map(x);
      if (actual != expected && ++failures <= 10) {
        ADD_FAILURE() << which << ", sample " << show(x) << ": mapper bin " << actual << ", oracle bin " << expected;
      }
    }
  };
  check("even_bin_mapper", mapper);
  // The shortcut mappers the kernels take in its place must bin every sample the same way.
  if constexpr (std::is_integral_v<Sample>) {
    if (mapper.shortcut() == tally::even_shortcut::integer_step) check("integer-step mapper", mapper.integer_step_mapper());
    if (mapper.unit_step()) check("unit-step mapper", mapper.unit_step_mapper());
    if (mapper.closed_unit_step()) check("closed unit-step mapper", mapper.closed_unit_step_mapper());
    if constexpr (sizeof(Sample) == 4) {
      if (mapper.shortcut() == tally::even_shortcut::rational_step) {
        const auto check_rational = [&](const auto& rational) {
          check("rational-step mapper", rational);
          check("rational-step mapper's slot", [&](Sample x) -> std::int64_t {
            const int slot = rational.slot(x);
            return slot == c.num_bins ? tally::left_out_bin : slot;
          });
        };
        // Whole bounds take the form without parts of one; both forms serve them.
        check_rational(mapper.rational_step_in_parts_mapper());
        const bool whole = c.lower == std::floor(c.lower) && c.upper == std::floor(c.upper);
        EXPECT_EQ(mapper.rational_step_in_parts(), !whole);
        if (whole) check_rational(mapper.rational_step_mapper());
      }
    }
    // A closed last bin over integers takes a unit-step mapper whenever the bins are of width one.
    if (mapper.shortcut() == tally::even_shortcut::integer_step && c.upper - c.lower == static_cast<double>(c.num_bins)) {
      EXPECT_TRUE(mapper.unit_step() || mapper.closed_unit_step());
    }
  }
  const auto check_estimated = [&](const auto& estimated) {
    check("estimated mapper", estimated);
    check("estimated mapper's slot", [&](Sample x) -> std::int64_t {
      const int slot = estimated.slot(x);
      return slot == c.num_bins ? tally::left_out_bin : slot;
    });
    if constexpr (std::is_same_v<Sample, float>) {
      // Its GPU form estimates in float: one fmaf rounded to nearest, then the floor (the GPU
      // floors by adding 2^23 + 1 rounded down, which is exact for the estimates in range). An
      // inclusive upper edge is one compare with the float after it: upper itself is estimated
      // and clamped into the last bin.
      const float first = mapper.edge(0);
      const float last = mapper.edge(c.num_bins);
      const float end = mode == upper_edge::inclusive ? std::nextafter(last, INFINITY) : last;
      check("estimated mapper, GPU form", [&](float x) -> std::int64_t {
        if (!(x >= first && x < end)) return tally::left_out_bin;
        const float t = std::fmaf(x, estimated.scale_for_floats(), estimated.offset_for_floats());
        return estimated.bin_above_estimate(x, static_cast<int>(std::floor(t)) + 1);
      });
    }
    if constexpr (requires(const float (&in)[4], int (&out)[4]) { estimated.map_items(in, out); }) {
      // The vector form over the float64 rule's edges (its host form computes the two estimates
      // with fmaf, as the GPU): each sample in a vector with the three after it, so that samples
      // that settle without their edge share vectors with ones that compute it; every lane's bin
      // is checked (the others' against the oracle here, the first by `check`).
      const auto in_vector = [&](auto&& map_four) {
        std::size_t i = 0;
        return [&, i](float x) mutable -> std::int64_t {
          const std::size_t n = samples.size();
          const float four[4] = {x, samples[(i + 1) % n], samples[(i + 2) % n], samples[(i + 3) % n]};
          ++i;
          int out[4];
          map_four(four, out);
          for (int j = 1; j < 4; ++j) {
            const std::int64_t expected = oracle.bin(four[j]);
            if (out[j] != expected && ++failures <= 10) {
              ADD_FAILURE() << "vector form, lane " << j << ", sample " << show(four[j]) << ": mapper bin " << out[j]
                            << ", oracle bin " << expected;
            }
          }
          return out[0];
        };
      };
      check("estimated mapper's map_items", in_vector([&](const float (&in)[4], int (&out)[4]) { estimated.map_items(in, out); }));
      check("estimated mapper's slot_items", in_vector([&](const float (&in)[4], int (&out)[4]) {
              estimated.slot_items(in, out);
              for (int& slot : out) slot = slot == c.num_bins ? static_cast<int>(tally::left_out_bin) : slot;
            }));
    }
  };
  if (mapper.shortcut() == tally::even_shortcut::estimated) {
    if constexpr (std::is_same_v<Sample, float>) {
      if (mapper.estimates_in_float32()) {
        check_estimated(mapper.estimated_float32_mapper());
      } else {
        check_estimated(mapper.estimated_mapper());
      }
    } else {
      check_estimated(mapper.estimated_mapper());
    }
  }
  if constexpr (std::is_same_v<Sample, float>) {
    if (mapper.shortcut() == tally::even_shortcut::exact_float_edges) {
      const auto exact = mapper.exact_float_mapper();
      check("exact-float mapper", exact);
      // Its GPU form: one fused multiply-add rounded down (here fmaf under FE_DOWNWARD, as the GPU's
      // __fmaf_rd), then the bits of the result against one bound.
      check("exact-float mapper, GPU form", [&](float x) -> std::int64_t {
        const int saved = std::fegetround();
        std::fesetround(FE_DOWNWARD);
        const float t = std::fmaf(x, exact.inverse_step(), exact.offset());
        std::fesetround(saved);
        const std::uint32_t bin = exact.bin_of_rounded_down(t);
        if (bin < static_cast<std::uint64_t>(c.num_bins)) return bin;
        return (mode == upper_edge::inclusive && x == static_cast<float>(c.upper)) ? c.num_bins - 1 : tally::left_out_bin;
      });
    }
  }
  EXPECT_EQ(failures, 0) << "samples binned differently from the oracle";
}

const std::vector<even_case>& even_cases() {
  static const std::vector<even_case> cases = {
      {10, 0.0, 1.0},                   // i * 0.1 overshoots: 0.6 belongs to bin 5, not 6
      {7, 0.1, 0.7},                    // neither bound nor step is representable
      {3, -3.0, 10.0},                  // step 13/3 is not representable
      {1, 0.0, 1.0},                    // one bin
      {2, -1.0, 1.0},                   // an edge at zero
      {256, 0.0, 256.0},                // one bin per uint8 value
      {255, 0.0, 255.0},                // uint8 255 sits on the last edge
      {7, 0.0, 256.0},                  // uint8 full range, uneven bins
      {7, -0.5, 255.5},                 // uint8 full range, every value inside
      {65536, -1e6, 1e6},               // many bins
      {1000, -1e300, 1e300},            // huge range
      {1000, 1.0, 1.0 + 0x1p-40},       // tiny range: edges 1 or 2 ulps apart
      {7, 1.0, 1.0 + 1e-15},            // tinier range: several edges round to the same double
      {13, -1e-300, 1e-300},            // tiny range around zero
      {5, 1e30, 3e30},                  // large magnitudes, exact in neither float nor int
      {100, 0x1p53 - 100, 0x1p53 + 100},  // int64 past 2^53: odd values round to even doubles
      {16, 0x1p62, 0x1p62 + 4096},      // int64 near 2^62: doubles are 1024 apart
      {3, -0x1p63, 0x1p63},             // the whole int64 range
      {3, 0.0, 4294967296.0},           // the whole uint32 range
      {65536, 0.0, 65536.0},            // integers as bins (unit step)
      {100, -50.0, 50.0},               // unit step across zero
      {300, 100.0, 400.0},              // unit step off zero: uint8 samples below and above
      {11, 2147483637.0, 2147483648.0}, // unit step whose upper edge passes int32's greatest value
      {5, 4294967291.0, 4294967296.0},  // ... and uint32's
      {5, -2147483648.0, -2147483643.0},  // unit step from int32's least value
      {1024, -128.0, 128.0},            // float shortcut: step 1/4 across zero
      {64, 0.5, 16.5},                  // float shortcut: step 1/4, lower a whole number of steps off zero
      {16, -8388608.0, -8388592.0},     // float shortcut at its limit: 2^23 - lower / step = 2^24
      {16, -8388609.0, -8388593.0},     // past it: 2^23 - lower / step = 2^24 + 1 is no float
      {4, 0.0, 0x1p-126},               // a power-of-two step of 2^-128, whose inverse is no float
      {4096, 0.0, 1000.0},              // estimated: what users type
      {4096, 0.0, 10000.0},             // estimated: a step that is not whole over integers
      {4096, -418.0, 8848.86},          // estimated: a range from the data
      {65536, 0.1, 6553.7},             // estimated: many bins
      {1024, 1e6, 1e6 + 1024.0},        // estimated for floats at its reach (2^20 bins from zero)
      {100, 1000.0, 1000.1},            // estimated at its reach: 16 floats a bin
      {100, 1000.0, 1000.01},           // past the float reach: the general rule
      {3, -1.0, 1e-7},                  // estimated across zero, an uneven last bin
      {65536, 0.0, 65535.0},            // 32-bit integers: whole bounds, the quotient (the data's range)
      {1000, -3.0, 7.0},                // ... a step below one: ten bins a value
      {4096, -2147483648.0, -2147481600.0},  // ... from int32's least value, edges every half value
      {100, 0.0, 110.0},                // edge 50 is 55.00000000000001: the estimate, not the quotient
      {7, 41.5, 42.5},                  // 32-bit integers, one value v: numpy's [v - 0.5, v + 0.5], in halves
      {65536, -7.5, -6.5},              // ... in many bins
      {4096, 2147483646.5, 2147483647.5},    // ... int32's greatest value
      {256, -2147483648.5, -2147483647.5},   // ... int32's least value, the lower bound below the type
      {101, -0.5, 100.5},               // centred bins: a whole step over half bounds
      {100, 0.25, 100.75},              // bounds in quarters
      {20, -20.5, 145.5},               // edge 15 is 104.00000000000001: the estimate, not the quotient
      {49, 0.0, 31.5},                  // edge 42 is 27.000000000000004 (from whole lower, in halves): the estimate
      {7, 4294967294.5, 4294967295.5},  // one value: uint32's greatest
  };
  return cases;
}

template <class Sample>
class EvenBinMapper : public ::testing::Test {};

struct type_names {
  template <class T>
  static std::string GetName(int) {
    return tally_test::type_name<T>();
  }
};

using sample_types = ::testing::Types<std::uint8_t, std::int32_t, std::uint32_t, std::int64_t, float, double>;
TYPED_TEST_SUITE(EvenBinMapper, sample_types, type_names);

TYPED_TEST(EvenBinMapper, AgreesWithOracleOnEdgesTheirNeighboursAndSpecialValues) {
  using Sample = TypeParam;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  for (const even_case& c : even_cases()) {
    const auto edges = tally_test::reference_even_edges<Sample>(c.num_bins, c.lower, c.upper);
    const auto samples = adversarial_samples<Sample>(edges, c.lower, c.upper, rng);
    for (const upper_edge mode : both_modes) expect_even_mapper_matches_oracle<Sample>(c, mode, samples);
  }
}

/// The mapper against the oracle in both modes on and beside 300 of the edges drawn at random and
/// the last (all of them would take long at 65536 bins), the bounds and the special values; the
/// edges in the case's own arithmetic.
template <class Sample>
void expect_mapper_matches_oracle_on_probed_edges(const even_case& c, std::mt19937_64& rng) {
  const auto edges =
      reference_even<Sample>(tally::even_bins{c.num_bins, c.lower, c.upper, c.arithmetic}, upper_edge::exclusive).edges();
  std::vector<tally_test::reference_compare_t<Sample>> probe;
  std::uniform_int_distribution<std::size_t> pick_edge(0, edges.size() - 1);
  for (int i = 0; i < 300; ++i) probe.push_back(edges[pick_edge(rng)]);
  probe.push_back(edges.back());
  const auto samples = adversarial_samples<Sample>(probe, c.lower, c.upper, rng);
  for (const upper_edge mode : both_modes) expect_even_mapper_matches_oracle<Sample>(c, mode, samples);
}

TYPED_TEST(EvenBinMapper, AgreesWithOracleOnRandomRangesAndBinCounts) {
  using Sample = TypeParam;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick_bins(0, 5);
  const std::int64_t bin_counts[] = {1, 2, 7, 256, 4096, 65536};
  std::uniform_real_distribution<double> magnitude(-6.0, 6.0);
  for (int round = 0; round < 40; ++round) {
    const double width = std::pow(10.0, magnitude(rng));
    const double lower = std::uniform_real_distribution<double>(-1000.0, 1000.0)(rng);
    const even_case c{bin_counts[pick_bins(rng)], lower, lower + width};
    expect_mapper_matches_oracle_on_probed_edges<Sample>(c, rng);
  }
}

/// Whole-number bounds with steps that are not whole, as the data's own range gives integers: 32-bit
/// samples take the exact quotient (rational_step_bin_mapper) unless an edge that is a whole
/// number rounded above itself; the others estimate. Every mapper agrees with the oracle on and
/// beside the edges, and most of these bins take the quotient.
TYPED_TEST(EvenBinMapper, AgreesWithOracleOnWholeBoundsWithStepsThatAreNotWhole) {
  using Sample = TypeParam;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  const std::int64_t bin_counts[] = {3, 7, 100, 256, 1000, 4096, 65536};
  const double lowest = std::max(-1e9, static_cast<double>(std::numeric_limits<Sample>::lowest()));
  const double highest = std::min(3e9, static_cast<double>(std::numeric_limits<Sample>::max()));
  int quotients = 0;
  const int rounds = 60;
  for (int round = 0; round < rounds; ++round) {
    const std::int64_t num_bins = bin_counts[round % 7];
    // Ranges of a few values to a billion, from anywhere the type reaches.
    const double most = std::log10((highest - lowest) / 2.0);
    const double width = std::floor(std::pow(10.0, std::uniform_real_distribution<double>(0.0, most)(rng))) + 1.0;
    const double lower = std::floor(std::uniform_real_distribution<double>(lowest, highest - width)(rng));
    const even_case c{num_bins, lower, lower + width};
    const tally::even_bin_mapper<Sample> mapper({c.num_bins, c.lower, c.upper}, upper_edge::exclusive);
    quotients += mapper.shortcut() == tally::even_shortcut::rational_step ? 1 : 0;
    expect_mapper_matches_oracle_on_probed_edges<Sample>(c, rng);
  }
  if constexpr (std::is_integral_v<Sample> && sizeof(Sample) == 4) {
    EXPECT_GT(quotients, rounds / 2);
  }
}

/// Bounds in halves, quarters, ... 2^-8 (data of one value, centred bins): 32-bit samples take the
/// quotient in those parts of one unless a whole-number edge rounded above itself. Every mapper
/// agrees with the oracle on and beside the edges, and most of these bins take the quotient.
TYPED_TEST(EvenBinMapper, AgreesWithOracleOnBoundsInPartsOfOne) {
  using Sample = TypeParam;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  const std::int64_t bin_counts[] = {1, 3, 7, 49, 100, 256, 1000, 4096, 65536};
  const double parts[] = {2.0, 2.0, 4.0, 256.0};
  const double lowest = std::max(-1e9, static_cast<double>(std::numeric_limits<Sample>::lowest()));
  const double highest = std::min(3e9, static_cast<double>(std::numeric_limits<Sample>::max()));
  const double least = static_cast<double>(std::numeric_limits<Sample>::lowest());
  const double greatest = static_cast<double>(std::numeric_limits<Sample>::max());
  int quotients = 0;
  const int rounds = 64;
  for (int round = 0; round < rounds; ++round) {
    const std::int64_t num_bins = bin_counts[rng() % 9];
    const double q = parts[rng() % 4];
    // Odd rounds: data of one value v, numpy's [v - 0.5, v + 0.5]; even rounds: a width of one
    // part to about a billion. Most from anywhere the type reaches, some at its two ends.
    const double most = std::log10((highest - lowest) / 2.0);
    const double spread = std::pow(10.0, std::uniform_real_distribution<double>(0.0, most)(rng));
    const double width = round % 2 == 1 ? 1.0 : (std::floor(spread * q) + 1.0) / q;
    const double anywhere = std::uniform_real_distribution<double>(lowest, highest - width)(rng);
    const int where = std::is_integral_v<Sample> ? round % 8 : 0;  // floats' ends hold no ranges
    const double from = where == 2 || where == 3 ? least : where == 4 || where == 5 ? greatest - width + 1.0 : anywhere;
    const double lower = round % 2 == 1 ? std::floor(from) - 0.5 : std::floor(from * q) / q;
    const even_case c{num_bins, lower, lower + width};
    const tally::even_bin_mapper<Sample> mapper({c.num_bins, c.lower, c.upper}, upper_edge::inclusive);
    quotients += mapper.shortcut() == tally::even_shortcut::rational_step ? 1 : 0;
    expect_mapper_matches_oracle_on_probed_edges<Sample>(c, rng);
  }
  if constexpr (std::is_integral_v<Sample> && sizeof(Sample) == 4) {
    EXPECT_GT(quotients, rounds / 2);
  }
}

TYPED_TEST(EvenBinMapper, AgreesWithOracleOnEdgesComputedInFloat32OverDataRanges) {
  // numpy's edges for float32 data over its own [min, max]: float32 bounds, edges in float32.
  using Sample = TypeParam;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick_bins(0, 6);
  const std::int64_t bin_counts[] = {1, 2, 7, 10, 256, 4096, 65536};
  std::uniform_real_distribution<double> magnitude(-4.0, 5.0);
  std::uniform_real_distribution<double> centre(-3.0, 6.0);
  int float32_rule = 0;
  int estimated = 0;
  for (int round = 0; round < 60; ++round) {
    // Data-like ranges: a centre anywhere from 10^-3 to 10^6 (either sign), a width of 10^-4 to 10^5.
    const double middle = std::pow(10.0, centre(rng)) * (round % 3 == 0 ? -1.0 : 1.0);
    const auto lower = static_cast<float>(middle - std::pow(10.0, magnitude(rng)));
    const auto upper = std::nextafter(std::max(static_cast<float>(middle), lower), INFINITY);
    const auto wide = static_cast<float>(static_cast<double>(lower) + std::pow(10.0, magnitude(rng)));
    const even_case c{bin_counts[pick_bins(rng)], lower, std::max(upper, wide), tally::edge_arithmetic::float32};
    if (!std::isfinite(static_cast<float>(c.upper) - static_cast<float>(c.lower))) continue;
    const tally::even_bins bins{c.num_bins, c.lower, c.upper, c.arithmetic};
    const tally::even_bin_mapper<Sample> mapper(bins, upper_edge::inclusive);
    float32_rule += mapper.float32_edges() ? 1 : 0;
    estimated += mapper.float32_edges() && mapper.shortcut() == tally::even_shortcut::estimated ? 1 : 0;
    expect_mapper_matches_oracle_on_probed_edges<Sample>(c, rng);
  }
  EXPECT_GT(float32_rule, 30) << "most random data ranges have float32 edges that differ from the float64 rule's";
  if constexpr (std::is_same_v<Sample, float>) {
    EXPECT_GT(estimated, 10) << "float samples estimate over float32 edges within the estimate's reach";
  }
}

TYPED_TEST(EvenBinMapper, AgreesWithOracleOnEdgesComputedInFloat32OnAndBesideEveryEdge) {
  using Sample = TypeParam;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  const even_case cases[] = {
      {7, 0.1f, 0.7f, tally::edge_arithmetic::float32},                    // three edges differ from the float64 rule's
      {4096, 0x1.13cc6ep+10, 0x1.5753ep+10, tally::edge_arithmetic::float32},  // normal data's range: 190 edges differ
      {10, -418.25f, 8848.86f, tally::edge_arithmetic::float32},
      {1000, -1.0f, 1.0f, tally::edge_arithmetic::float32},                 // across zero
      {65536, 0.0f, 1.0f, tally::edge_arithmetic::float32},                 // exact: the float64 rule's shortcut
      {4096, 0.0f, 1000.0f, tally::edge_arithmetic::float32},              // exact too: a step of 125 * 2^-9
      {100, 1000.0f, 1000.1f, tally::edge_arithmetic::float32},            // near the estimate's reach
      {8, 0x1p-149, 0x1p-147, tally::edge_arithmetic::float32},            // a step that underflows to 0 in float32
      {1 << 18, 0.5f, 1.5f, tally::edge_arithmetic::float32},              // 2^18 bins
  };
  for (const even_case& c : cases) {
    const auto edges = reference_even<Sample>(tally::even_bins{c.num_bins, c.lower, c.upper, c.arithmetic},
                                              upper_edge::inclusive).edges();
    const auto samples = adversarial_samples<Sample>(edges, c.lower, c.upper, rng);
    for (const upper_edge mode : both_modes) expect_even_mapper_matches_oracle<Sample>(c, mode, samples);
  }
}

TEST(EvenBinMapper, ComputesFloat32EdgesAsNumpyDoesForFloat32Data) {
  // numpy 2.4: np.histogram_bin_edges(np.array([0.1, 0.7], np.float32), 7), and np.histogram of
  // one float32 sample over range=(np.float32(0.1), np.float32(0.7)): edges 1, 3 and 4 are one
  // float below the float64 rule's.
  const float numpy_edges[] = {0x1.99999ap-4f, 0x1.7c57c4p-3f, 0x1.15f15ep-2f, 0x1.6db6dap-2f,
                               0x1.c57c56p-2f, 0x1.0ea0eap-1f, 0x1.3a83a8p-1f, 0x1.666666p-1f};
  const tally::even_bins bins{7, 0.1f, 0.7f, tally::edge_arithmetic::float32};
  const tally::even_bin_mapper<float> mapper(bins, upper_edge::inclusive);
  const reference_even<float> oracle(bins, upper_edge::inclusive);
  ASSERT_TRUE(mapper.float32_edges());
  EXPECT_EQ(mapper.shortcut(), tally::even_shortcut::estimated);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(mapper.edge(i), numpy_edges[i]) << "mapper edge " << i;
    EXPECT_EQ(oracle.edges()[static_cast<std::size_t>(i)], numpy_edges[i]) << "oracle edge " << i;
  }
  const std::pair<float, std::int64_t> answers[] = {
      {0x1.7c57c2p-3f, 0}, {0x1.7c57c4p-3f, 1}, {0x1.7c57c6p-3f, 1}, {0x1.6db6d8p-2f, 2}, {0x1.6db6dap-2f, 3},
      {0x1.6db6dcp-2f, 3}, {0x1.c57c54p-2f, 3}, {0x1.c57c56p-2f, 4}, {0x1.c57c58p-2f, 4}, {0.7f, 6}};
  for (const auto& [x, bin] : answers) {
    EXPECT_EQ(mapper(x), bin) << "mapper, sample " << show(x);
    EXPECT_EQ(mapper.estimated_float32_mapper()(x), bin) << "estimated mapper, sample " << show(x);
    EXPECT_EQ(oracle.bin(x), bin) << "oracle, sample " << show(x);
  }
  // Edges that float32 computes exactly are the float64 rule's: its shortcuts apply.
  EXPECT_FALSE(tally::even_bin_mapper<float>({4096, 0.0, 1000.0, tally::edge_arithmetic::float32},
                                             upper_edge::inclusive).float32_edges());
  EXPECT_EQ(tally::even_bin_mapper<float>({256, 0.0, 256.0, tally::edge_arithmetic::float32}, upper_edge::exclusive)
                .shortcut(),
            tally::even_shortcut::exact_float_edges);
  EXPECT_EQ(tally::even_bin_mapper<std::int32_t>({100, 0.0, 1000.0, tally::edge_arithmetic::float32},
                                                 upper_edge::exclusive).shortcut(),
            tally::even_shortcut::integer_step);
  EXPECT_TRUE(tally::even_bin_mapper<std::int32_t>({3, 0.0, 100000000.0, tally::edge_arithmetic::float32},
                                                   upper_edge::exclusive).float32_edges())
      << "100000000 / 3 is no float32: no integer shortcut";
  // And the float64 rule's edges, when every one is an exact float32, are estimated over in float
  // arithmetic (the float32 rule's mapper), which bins alike (the oracle tests check it sample by
  // sample); other ranges keep the double arithmetic.
  const auto float_mapper = [](std::int64_t n, double lower, double upper) {
    return tally::even_bin_mapper<float>({n, lower, upper}, upper_edge::inclusive);
  };
  EXPECT_TRUE(float_mapper(4096, 0.0, 1000.0).estimates_in_float32()) << "a step of 125 / 512";
  EXPECT_TRUE(float_mapper(4096, -1000.0, 1000.0).estimates_in_float32()) << "a step of 125 / 256";
  EXPECT_FALSE(float_mapper(4096, 0.0, 1000.0).float32_edges());
  EXPECT_FALSE(float_mapper(10, 0.0, 1.0).estimates_in_float32()) << "a step of 0.1";
  EXPECT_FALSE(float_mapper(3000, 0.0, 1000.0).estimates_in_float32()) << "a step of 1 / 3";
  EXPECT_FALSE(float_mapper(4096, 0.0, 100000001.0).estimates_in_float32()) << "an upper edge past 2^24 units";
  EXPECT_EQ(float_mapper(256, 0.0, 64.0).shortcut(), tally::even_shortcut::exact_float_edges);
}

/// Float samples over the float64 rule's edges map vectors: two float estimates settle a sample's
/// bin with no edge unless it lies within the margin of one (or the margin is too wide, far from
/// zero). Over random ranges up to 2^19 bins from zero the vector form agrees with the oracle on
/// uniform data and on and beside the edges, and where the margin allows it only about 2 * margin
/// of uniform samples compute their edge (a form that computed every edge would be exact and as
/// slow as before).
TEST(EvenBinMapperFloat, VectorFormSettlesSamplesFarFromEdgesWithoutThem) {
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  const std::int64_t bin_counts[] = {1, 3, 10, 100, 256, 1000, 4096, 16384, 65536};
  int vector_forms = 0;
  int settled = 0;
  for (int round = 0; round < 60; ++round) {
    const std::int64_t num_bins = bin_counts[rng() % 9];
    // Lower bounds from zero to 2^19 bins from it (the far end near the reach), widths of 10^-3 to
    // 10^4.
    const double width = std::pow(10.0, std::uniform_real_distribution<double>(-3.0, 4.0)(rng));
    const double step = width / static_cast<double>(num_bins);
    const double lower = std::uniform_real_distribution<double>(-1.0, 1.0)(rng) * step *
                         std::pow(2.0, std::uniform_real_distribution<double>(0.0, 19.0)(rng));
    const even_case c{num_bins, lower, lower + width};
    const tally::even_bin_mapper<float> mapper({c.num_bins, c.lower, c.upper}, upper_edge::inclusive);
    if (mapper.shortcut() != tally::even_shortcut::estimated || mapper.estimates_in_float32()) continue;
    ++vector_forms;
    const auto estimated = mapper.estimated_mapper();
    const double reach = decltype(estimated)::reach_of({c.num_bins, c.lower, c.upper});
    const double margin = decltype(estimated)::mean_margin_of({c.num_bins, c.lower, c.upper});
    std::uniform_real_distribution<double> over_range(c.lower, c.upper);
    std::vector<float> uniform(20000);
    for (float& x : uniform) x = static_cast<float>(over_range(rng));
    int edges_computed = 0;
    for (const float x : uniform) edges_computed += estimated.computes_edge(x) ? 1 : 0;
    SCOPED_TRACE(describe(c) + " mean margin " + std::to_string(margin));
    if (margin <= decltype(estimated)::widest_mean_margin) {
      ++settled;
      // A float's own spacing makes positions coarse far from zero: allow that grain on top.
      const double grain = std::ldexp(reach, -23);
      EXPECT_LE(edges_computed, static_cast<int>(uniform.size() * (4.0 * margin + 2.0 * grain)) + 200)
          << "uniform samples that computed their edge";
    } else {
      EXPECT_EQ(edges_computed, static_cast<int>(uniform.size())) << "every edge computed past the widest margin";
    }
    for (const upper_edge mode : both_modes) expect_even_mapper_matches_oracle<float>(c, mode, uniform);
    expect_mapper_matches_oracle_on_probed_edges<float>(c, rng);
  }
  EXPECT_GT(vector_forms, 30) << "most of these ranges estimate over the float64 rule's edges";
  EXPECT_GT(settled, 10) << "many of them settle samples far from edges without their edge";
}

/// The vector form settles samples where the margin's mean over the range is at most
/// widest_mean_margin: up to 16384 bins over a range from zero (the margin grows with x) and ranges
/// about zero whose fixed margin is set by a reach of about 4100 bins; not 32768 bins from zero,
/// nor ranges whose fixed margin is set by a reach of 6000 bins or more, or whose positions lie far
/// from zero (two of them settled under the earlier gate, the reach's margin at most 2^-8).
TEST(EvenBinMapperFloat, VectorFormSettlesUpTo16384BinsOverRangesFromZero) {
  using vector_mapper = tally::detail::estimated_even_bin_mapper<float>;
  std::mt19937_64 rng(tally_test::test_seed());
  for (const even_case c : {even_case{16384, 0.0, 16383.875}, even_case{16384, 0.0, 1.7}, even_case{4096, 0.0, 1000.3},
                            even_case{8192, -4000.3, 4000.3}, even_case{4096, -0.37, 1000.3}}) {
    SCOPED_TRACE(describe(c));
    const tally::even_bin_mapper<float> mapper({c.num_bins, c.lower, c.upper}, upper_edge::inclusive);
    ASSERT_EQ(mapper.shortcut(), tally::even_shortcut::estimated);
    ASSERT_FALSE(mapper.estimates_in_float32()) << "the vector form is the float64 rule's";
    EXPECT_TRUE(vector_mapper::settles_far_from_edges({c.num_bins, c.lower, c.upper}));
    // Where it settles, every edge, the floats beside it and uniform data get the oracle's bin.
    std::vector<float> samples;
    const double step = (c.upper - c.lower) / static_cast<double>(c.num_bins);
    for (std::int64_t i = 0; i <= c.num_bins; ++i) {
      const auto edge = static_cast<float>(c.lower + static_cast<double>(i) * step);
      samples.insert(samples.end(), {edge, std::nextafter(edge, -INFINITY), std::nextafter(edge, INFINITY)});
    }
    std::uniform_real_distribution<double> over_range(c.lower, c.upper);
    for (int i = 0; i < 20000; ++i) samples.push_back(static_cast<float>(over_range(rng)));
    for (const upper_edge mode : both_modes) expect_even_mapper_matches_oracle<float>(c, mode, samples);
  }
  // Random ranges from zero, where the margin is at its thinnest relative to the errors it covers:
  // every edge and the two floats either side of it (with a quarter of the margin's slope some of
  // these samples are misplaced on most seeds).
  int random_vector_forms = 0;
  for (int round = 0; round < 64; ++round) {
    const even_case c{round % 2 == 0 ? 16384 : 4096, 0.0, std::pow(10.0, std::uniform_real_distribution<double>(-3.0, 6.0)(rng))};
    SCOPED_TRACE(describe(c));
    const tally::even_bin_mapper<float> mapper({c.num_bins, c.lower, c.upper}, upper_edge::inclusive);
    if (mapper.shortcut() != tally::even_shortcut::estimated || mapper.estimates_in_float32()) continue;
    ++random_vector_forms;
    ASSERT_TRUE(vector_mapper::settles_far_from_edges({c.num_bins, c.lower, c.upper}));
    std::vector<float> samples;
    const double step = c.upper / static_cast<double>(c.num_bins);
    for (std::int64_t i = 0; i <= c.num_bins; ++i) {
      const auto edge = static_cast<float>(static_cast<double>(i) * step);
      const float below = std::nextafter(edge, -INFINITY);
      const float above = std::nextafter(edge, INFINITY);
      samples.insert(samples.end(), {edge, below, std::nextafter(below, -INFINITY), above, std::nextafter(above, INFINITY)});
    }
    for (const upper_edge mode : both_modes) expect_even_mapper_matches_oracle<float>(c, mode, samples);
  }
  EXPECT_GT(random_vector_forms, 50) << "most random ranges from zero take the vector form";
  for (const even_case c : {even_case{65536, 0.0, 65535.875}, even_case{32768, 0.0, 3.3}, even_case{16384, -6000.3, 6000.3},
                            even_case{16384, -100.1, 16284.0}, even_case{8192, 819.2, 1638.4},
                            even_case{6000, -1.0, 6000.0}, even_case{4000, 4000.0, 8000.0}}) {
    SCOPED_TRACE(describe(c));
    EXPECT_FALSE(vector_mapper::settles_far_from_edges({c.num_bins, c.lower, c.upper}));
  }
}

/// Over a range from zero the vector form's margin grows with x (relative_margin): whole values near
/// zero, which sit a few thousandths of a bin from their edges over a range like [0, 4094.875) in
/// 4096 bins, settle without their edge where the reach's margin (2^-21 * 4097 bins) would send
/// each of the first eight to it; every bin stays the oracle's, on those values, their
/// neighbouring floats, and over ranges from small positive bounds.
TEST(EvenBinMapperFloat, VectorFormSettlesValuesNearZeroOverRangesFromZero) {
  for (const even_case c : {even_case{4096, 0.0, 4094.875}, even_case{4096, 0.0, 1000.3}, even_case{1000, 0.0, 999.9},
                            even_case{4096, 0.5, 4095.2}, even_case{256, 0.0, 254.9}}) {
    SCOPED_TRACE(describe(c));
    const tally::even_bin_mapper<float> mapper({c.num_bins, c.lower, c.upper}, upper_edge::inclusive);
    ASSERT_EQ(mapper.shortcut(), tally::even_shortcut::estimated);
    ASSERT_FALSE(mapper.estimates_in_float32());
    const auto estimated = mapper.estimated_mapper();
    std::vector<float> samples;
    for (int v = 0; v <= static_cast<int>(c.upper); ++v) {
      const float x = static_cast<float>(v);
      samples.insert(samples.end(), {x, std::nextafter(x, -INFINITY), std::nextafter(x, INFINITY)});
    }
    if (c.lower == 0.0 && c.upper > 4000.0) {
      int near_zero_computed = 0;
      for (int v = 1; v <= 8; ++v) near_zero_computed += estimated.computes_edge(static_cast<float>(v)) ? 1 : 0;
      EXPECT_EQ(near_zero_computed, 0) << "whole values 1 to 8 that computed their edge";
    }
    for (const upper_edge mode : both_modes) expect_even_mapper_matches_oracle<float>(c, mode, samples);
  }
}

// Known answers from numpy 2.4 (np.histogram of one sample; numpy's last bin is inclusive).
// They check the oracle as much as the mapper: both must give numpy's bin.
struct known_answer {
  double sample;
  std::int64_t bin;
};

template <class Sample>
void expect_numpy_answers(const even_case& c, const std::vector<known_answer>& answers) {
  SCOPED_TRACE(describe(c));
  const tally::even_bins bins{c.num_bins, c.lower, c.upper};
  const tally::even_bin_mapper<Sample> mapper(bins, upper_edge::inclusive);
  const reference_even<Sample> oracle(bins, upper_edge::inclusive);
  for (const auto& [value, bin] : answers) {
    const auto x = static_cast<Sample>(value);
    EXPECT_EQ(mapper(x), bin) << "mapper, sample " << show(x);
    EXPECT_EQ(oracle.bin(x), bin) << "oracle, sample " << show(x);
  }
}

TEST(EvenBinMapper, MatchesNumpyOnSamplesAtNonRepresentableEdges) {
  expect_numpy_answers<double>({10, 0.0, 1.0}, {{0.3, 2},
                                                {0.6, 5},
                                                {0.7, 6},
                                                {0.9, 9},
                                                {0.30000000000000004, 3},
                                                {0.6000000000000001, 6},
                                                {1.0, 9},
                                                {0.0, 0},
                                                {0.9999999999999999, 9},
                                                {0.1, 1},
                                                {0.2, 2}});
  expect_numpy_answers<double>({7, 0.1, 0.7}, {{0.1, 0},
                                               {0.7, 6},
                                               {0.18571428571428572, 1},
                                               {0.1857142857142857, 0},
                                               {0.27142857142857146, 2},
                                               {0.2714285714285714, 1},
                                               {0.6142857142857142, 6},
                                               {0.6142857142857143, 6},
                                               {0.5, 4}});
  expect_numpy_answers<float>({7, 0.1, 0.7}, {{0.10000000149011612, 0},
                                              {0.699999988079071, 6},
                                              {0.18571428954601288, 1},
                                              {0.27142858505249023, 2},
                                              {0.27142855525016785, 1},
                                              {0.6142857074737549, 6},
                                              {0.5, 4},
                                              {0.09999999403953552, -1}});
  expect_numpy_answers<double>({3, -3.0, 10.0}, {{-3.0, 0},
                                                 {1.0, 0},
                                                 {1.333333333333333, 1},
                                                 {1.3333333333333333, 1},
                                                 {2.0, 1},
                                                 {5.0, 1},
                                                 {5.666666666666666, 2},
                                                 {6.0, 2},
                                                 {10.0, 2},
                                                 {9.999999999999998, 2}});
}

TEST(EvenBinMapper, ComputesEdgesAsNumpyLinspace) {
  // np.linspace(0.1, 0.7, 8) and np.linspace(-3, 10, 4), printed by numpy 2.4.
  const double linspace_a[] = {0.1, 0.18571428571428572, 0.27142857142857146, 0.3571428571428571,
                               0.44285714285714284, 0.5285714285714286, 0.6142857142857142, 0.7};
  const double linspace_b[] = {-3.0, 1.333333333333333, 5.666666666666666, 10.0};
  const tally::even_bin_mapper<double> a({7, 0.1, 0.7}, upper_edge::exclusive);
  const tally::even_bin_mapper<double> b({3, -3.0, 10.0}, upper_edge::exclusive);
  const auto oracle_a = tally_test::reference_even_edges<double>(7, 0.1, 0.7);
  const auto oracle_b = tally_test::reference_even_edges<double>(3, -3.0, 10.0);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(a.edge(i), linspace_a[i]) << "mapper edge " << i;
    EXPECT_EQ(oracle_a[i], linspace_a[i]) << "oracle edge " << i;
  }
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(b.edge(i), linspace_b[i]) << "mapper edge " << i;
    EXPECT_EQ(oracle_b[i], linspace_b[i]) << "oracle edge " << i;
  }
}

TEST(EvenBinMapper, CountsTheUpperBoundOnlyWhenInclusive) {
  const tally::even_bins bins{255, 0.0, 255.0};
  const tally::even_bin_mapper<std::uint8_t> exclusive(bins, upper_edge::exclusive);
  const tally::even_bin_mapper<std::uint8_t> inclusive(bins, upper_edge::inclusive);
  EXPECT_EQ(exclusive(255), tally::left_out_bin);
  EXPECT_EQ(inclusive(255), 254);
  EXPECT_EQ(exclusive(254), 254);
  EXPECT_EQ(exclusive(0), 0);
  for (int v = 0; v < 255; ++v) {
    EXPECT_EQ(exclusive(static_cast<std::uint8_t>(v)), v);
    EXPECT_EQ(inclusive(static_cast<std::uint8_t>(v)), v);
  }
}

TEST(EvenBinMapper, ComparesInt64SamplesAfterRoundingToDouble) {
  // 2^53 + 1 is not a double: it rounds (to even) to 2^53, the first edge, so it lands in bin 0;
  // 2^53 + 3 rounds to 2^53 + 4, the start of bin 2 (bins are 2 wide).
  const std::int64_t base = std::int64_t{1} << 53;
  const tally::even_bin_mapper<std::int64_t> mapper({8, 0x1p53, 0x1p53 + 16}, upper_edge::exclusive);
  EXPECT_EQ(mapper(base), 0);
  EXPECT_EQ(mapper(base + 1), 0);
  EXPECT_EQ(mapper(base + 2), 1);
  EXPECT_EQ(mapper(base + 3), 2);
  EXPECT_EQ(mapper(base + 15), tally::left_out_bin);  // rounds to 2^53 + 16, the upper bound
  EXPECT_EQ(mapper(base - 1), tally::left_out_bin);   // exact in double, below the range
  EXPECT_EQ(mapper(std::numeric_limits<std::int64_t>::max()), tally::left_out_bin);
}

// bins.hpp: "NaN and infinities are left out". With float samples a bound beyond float's range
// rounds to an infinite float edge; an infinite sample must still be left out.
TEST(EvenBinMapper, LeavesOutInfiniteFloatSamplesWhenABoundOverflowsFloat) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  for (const upper_edge mode : both_modes) {
    SCOPED_TRACE(mode_name(mode));
    const tally::even_bin_mapper<float> above({4, 0.0, 1e39}, mode);
    EXPECT_EQ(above(inf), tally::left_out_bin) << "+inf, upper=1e39 (float(upper) is +inf)";
    const tally::even_bin_mapper<float> below({4, -1e39, 0.0}, mode);
    EXPECT_EQ(below(-inf), tally::left_out_bin) << "-inf, lower=-1e39 (float(lower) is -inf)";
    const tally::even_bin_mapper<float> both({5, -1e39, 1e39}, mode);
    EXPECT_EQ(both(inf), tally::left_out_bin);
    EXPECT_EQ(both(-inf), tally::left_out_bin);
    // Finite samples still bin normally: edges -1e39, -6e38, -2e38, 2e38, 6e38, 1e39.
    EXPECT_EQ(both(0.0f), 2);
    EXPECT_EQ(both(std::numeric_limits<float>::max()), 3);
    EXPECT_EQ(both(std::numeric_limits<float>::lowest()), 1);
  }
}

/// Runs `work` on a separate thread and gives up after `limit`: a mapper that never returns
/// must fail the test rather than hang the suite. The abandoned thread is left running until the
/// process exits (CTest runs each test in its own process).
template <class Result, class Work>
std::optional<Result> with_deadline(Work work, std::chrono::seconds limit) {
  struct state {
    std::atomic<bool> done{false};
    Result result{};
  };
  auto shared = std::make_shared<state>();
  std::thread([shared, work] {
    shared->result = work();
    shared->done.store(true, std::memory_order_release);
  }).detach();
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (shared->done.load(std::memory_order_acquire)) return shared->result;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::nullopt;
}

// A range so narrow that num_bins / (upper - lower) overflows double: the mapper's bin estimate
// is then infinite (or NaN for a sample at `lower`), and it must still return the right bin.
TEST(EvenBinMapper, TerminatesAndAgreesWithOracleWhenTheBinScaleOverflows) {
  const even_case cases[] = {{4, 0.0, 1e-310}, {1 << 20, 0.0, 1e-303}, {3, -1e-310, 1e-310}};
  for (const even_case& c : cases) {
    SCOPED_TRACE(describe(c));
    const tally::even_bins bins{c.num_bins, c.lower, c.upper};
    const reference_even<double> oracle(bins, upper_edge::exclusive);
    const double samples[] = {c.lower, std::nextafter(c.lower, INFINITY), 0.5 * (c.lower + c.upper),
                              std::nextafter(c.upper, -INFINITY)};
    for (const double x : samples) {
      const auto bin = with_deadline<std::int64_t>(
          [bins, x] { return tally::even_bin_mapper<double>(bins, upper_edge::exclusive)(x); },
          std::chrono::seconds(5));
      ASSERT_TRUE(bin.has_value()) << "even_bin_mapper did not return within 5 s for sample " << show(x);
      EXPECT_EQ(*bin, oracle.bin(x)) << "sample " << show(x);
    }
  }
}

// ---- range bins -----------------------------------------------------------------------------

template <class Sample>
class RangeBinMapper : public ::testing::Test {};
TYPED_TEST_SUITE(RangeBinMapper, sample_types, type_names);

TYPED_TEST(RangeBinMapper, AgreesWithOracleOnEdgesTheirNeighboursAndSpecialValues) {
  using Sample = TypeParam;
  const std::uint64_t seed = tally_test::test_seed();
  SCOPED_TRACE(tally_test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  std::vector<std::vector<double>> edge_sets = {
      {0.0, 1.0},
      {0.1, 0.2, 0.3, 0.7},
      {-3.0, 1.0 / 3.0, 10.0},
      {0.0, 1.0, 1.0, 1.0, 2.0},          // empty bins from equal edges, as numpy allows
      {5.0, 5.0},                         // one empty bin
      {-1e300, -1.0, 0.0, 1e-300, 1e300},  // huge and tiny
      {0x1p53 - 2, 0x1p53, 0x1p53 + 2, 0x1p53 + 4},
      {-0.5, 0.5, 127.5, 254.5, 255.0},
      {-0x1p63, 0.0, 0x1p63},
      {-1e39, 0.0, 1e39},                 // past float's range at both ends
      // On and beside the ends of 32-bit integers: edges every integer sample reaches or none does.
      {-2147483649.0, -2147483648.0, -2147483647.5, 0.0, 2147483646.5, 2147483647.0, 2147483648.0},
      {-0.5, 4294967294.5, 4294967295.0, 4294967296.0},
  };
  // Edges crowded into one grid cell beside a few spread ones: samples there search among them.
  {
    std::vector<double> crowded;
    for (int k = 0; k < 200; ++k) crowded.push_back(1e-3 * k / 200.0);
    for (int k = 1; k <= 10; ++k) crowded.push_back(100.0 * k);
    edge_sets.push_back(crowded);
  }
  // Log-spaced edges (the grid over float bits serves them) and even edges of 0.1 (not floats).
  for (const int n : {64, 1024}) {
    std::vector<double> log_edges, tenth_edges;
    for (int k = 0; k <= n; ++k) {
      log_edges.push_back(std::pow(static_cast<double>(n + 1), static_cast<double>(k) / n) - 1.0);
      tenth_edges.push_back(0.1 * k - 5.0);
    }
    edge_sets.push_back(log_edges);
    edge_sets.push_back(tenth_edges);
  }
  // Random sorted edges, sometimes with repeats.
  for (int k = 0; k < 20; ++k) {
    std::uniform_int_distribution<int> size(2, 300);
    std::uniform_real_distribution<double> value(-1000.0, 1000.0);
    std::vector<double> edges(static_cast<std::size_t>(size(rng)));
    for (double& e : edges) e = value(rng);
    if (k % 3 == 0) {
      for (std::size_t i = 1; i < edges.size(); i += 7) edges[i] = edges[i - 1];
    }
    std::sort(edges.begin(), edges.end());
    edge_sets.push_back(edges);
  }
  for (const auto& edges : edge_sets) {
    const double lower = edges.front();
    const double upper = edges.back();
    // The even-bin generator gives each edge (as the sample type) and its neighbours.
    std::vector<tally_test::reference_compare_t<Sample>> probe;
    for (const double e : edges) probe.push_back(static_cast<tally_test::reference_compare_t<Sample>>(e));
    auto samples = adversarial_samples<Sample>(probe, lower, upper, rng);
    if constexpr (std::is_same_v<Sample, float>) {
      // Float samples are compared in double here: the double edges' float neighbours matter too.
      for (const double e : edges) {
        samples.push_back(std::nextafter(static_cast<float>(e), -INFINITY));
        samples.push_back(std::nextafter(static_cast<float>(e), INFINITY));
      }
    }
    for (const upper_edge mode : both_modes) {
      std::ostringstream what;
      what.precision(17);
      what << edges.size() << " edges from " << lower << " to " << upper << ", " << mode_name(mode);
      SCOPED_TRACE(what.str());
      const tally::range_bin_mapper<Sample> mapper(edges.data(), static_cast<std::int64_t>(edges.size()), mode);
      // The GPU's mappers, entries of thresholds and of counts, with their tables in host memory.
      using grid_mapper = tally::detail::grid_range_bin_mapper<Sample>;
      std::vector<std::byte> tables(grid_mapper::table_bytes(static_cast<std::int64_t>(edges.size())));
      const grid_mapper grid(edges, mode, tables, tables.data());
      using counts_grid = tally::detail::grid_range_bin_mapper<Sample, tally::detail::grid_entries::counts>;
      std::vector<std::byte> counts_tables(counts_grid::table_bytes(static_cast<std::int64_t>(edges.size())));
      const counts_grid grid_of_counts(edges, mode, counts_tables, counts_tables.data());
      // A block's swizzled copy of the same tables: cell words placed by swizzled_word, which must
      // permute them within their rows of 32 words, thresholds where they were.
      std::vector<std::byte> swizzled_tables(counts_tables.size());
      const std::size_t table_words = counts_tables.size() / 4;
      const std::size_t swizzled_words = grid_of_counts.swizzled_table_bytes() / 4;
      ASSERT_EQ(swizzled_words % 32, 0u);
      ASSERT_LE(swizzled_words, table_words);
      std::vector<bool> placed(table_words, false);
      for (std::size_t w = 0; w < table_words; ++w) {
        const std::size_t to = w < swizzled_words ? counts_grid::swizzled_word(static_cast<std::uint32_t>(w)) : w;
        ASSERT_EQ(to / 32, w / 32) << "word " << w << " left its row";
        ASSERT_FALSE(placed[to]) << "two words placed at " << to;
        placed[to] = true;
        std::memcpy(swizzled_tables.data() + 4 * to, counts_tables.data() + 4 * w, 4);
      }
      const tally::detail::bank_swizzled_table<counts_grid> swizzled(
          grid_of_counts.reading_tables_at(swizzled_tables.data()));
      const tally_test::reference_range<Sample> oracle(edges, mode);
      ASSERT_EQ(mapper.num_bins(), static_cast<std::int64_t>(edges.size()) - 1);
      ASSERT_EQ(grid.num_bins(), mapper.num_bins());
      int failures = 0;
      for (const Sample x : samples) {
        const std::int64_t expected = oracle.bin(x);
        const std::int64_t actual = mapper(x);
        const std::int64_t gridded = grid(x);
        const std::int64_t counted = grid_of_counts(x);
        const std::int64_t counted_swizzled = swizzled(x);
        if ((actual != expected || gridded != expected || counted != expected || counted_swizzled != expected) &&
            ++failures <= 10) {
          ADD_FAILURE() << "sample " << show(x) << ": mapper bin " << actual << ", grid mapper bin " << gridded
                        << ", grid of counts bin " << counted << " (swizzled " << counted_swizzled << "), oracle bin "
                        << expected;
        }
      }
      EXPECT_EQ(failures, 0);
    }
  }
}

TEST(RangeBinMapper, PutsSamplesOnRepeatedEdgesInTheLastOfTheEmptyBins) {
  // Bins [0,1) [1,1) [1,1) [1,2): 1.0 opens bin 3, as numpy.searchsorted(side='right') - 1 says.
  const double edges[] = {0.0, 1.0, 1.0, 1.0, 2.0};
  const tally::range_bin_mapper<double> mapper(edges, 5, upper_edge::exclusive);
  EXPECT_EQ(mapper(0.0), 0);
  EXPECT_EQ(mapper(std::nextafter(1.0, 0.0)), 0);
  EXPECT_EQ(mapper(1.0), 3);
  EXPECT_EQ(mapper(1.5), 3);
  EXPECT_EQ(mapper(2.0), tally::left_out_bin);
  const tally::range_bin_mapper<double> inclusive(edges, 5, upper_edge::inclusive);
  EXPECT_EQ(inclusive(2.0), 3);
  EXPECT_EQ(inclusive(std::nextafter(2.0, 3.0)), tally::left_out_bin);
}

TEST(RangeBinMapper, GridFollowsTheEdgesSpacing) {
  // Log-spaced edges crowd into the first cells of a grid even in value, so float samples take
  // cells even in their bits; evenly spread edges keep the value grid.
  std::vector<double> log_edges, even_edges;
  for (int k = 0; k <= 1024; ++k) {
    log_edges.push_back(std::pow(1e6, k / 1024.0));
    even_edges.push_back(1000.0 * k / 1024.0 + 0.3);
  }
  using grid_mapper = tally::detail::grid_range_bin_mapper<float>;
  std::vector<std::byte> tables(grid_mapper::table_bytes(1025));
  EXPECT_EQ(grid_mapper(log_edges, upper_edge::exclusive, tables, tables.data()).kind(), tally::detail::grid_kind::float_bits);
  EXPECT_EQ(grid_mapper(even_edges, upper_edge::exclusive, tables, tables.data()).kind(), tally::detail::grid_kind::value);
}

/// GPU calls plan the grid on the host and fill its tables a thread an entry (fill_entry); the CPU
/// backend fills them in one pass (fill_tables). Both must write the same bytes, and the grid must
/// bin as the oracle does, also where plan() chooses its grid on a sample of the edges (more than
/// plan_sample_edges interior edges).
template <class Sample, tally::detail::grid_entries Entries = tally::detail::grid_entries::thresholds>
void expect_device_fill_matches_host_fill(const std::vector<double>& edges, upper_edge mode) {
  using grid_mapper = tally::detail::grid_range_bin_mapper<Sample, Entries>;
  const auto num_edges = static_cast<std::int64_t>(edges.size());
  std::vector<std::byte> host(grid_mapper::table_bytes(num_edges), std::byte{0xab});
  const grid_mapper grid(edges, mode, host, host.data());
  const auto edge_at = [&edges](std::int64_t i) { return edges[static_cast<std::size_t>(i)]; };
  std::vector<std::byte> by_entry(host.size(), std::byte{0xab});
  const grid_mapper planned = grid_mapper::plan(edge_at, num_edges, mode);
  for (std::int64_t i = 0; i < planned.table_entries(); ++i) planned.fill_entry(edge_at, i, by_entry.data());
  ASSERT_EQ(planned.kind(), grid.kind());
  EXPECT_TRUE(by_entry == host) << "fill_entry and fill_tables wrote different tables";

  const tally_test::reference_range<Sample> oracle(edges, mode);
  std::vector<Sample> samples;
  std::mt19937_64 rng(num_edges);
  const double span = edges.back() - edges.front();
  std::uniform_real_distribution<double> spread(edges.front() - 0.1 * span - 1.0, edges.back() + 0.1 * span + 1.0);
  for (int k = 0; k < 20000; ++k) samples.push_back(static_cast<Sample>(spread(rng)));
  for (std::size_t i = 0; i < edges.size(); i += 7) samples.push_back(static_cast<Sample>(edges[i]));
  if constexpr (std::is_floating_point_v<Sample>) {
    samples.push_back(std::numeric_limits<Sample>::quiet_NaN());
    samples.push_back(std::numeric_limits<Sample>::infinity());
    samples.push_back(-std::numeric_limits<Sample>::infinity());
  }
  int failures = 0;
  for (const Sample x : samples) {
    if (grid(x) != oracle.bin(x) && ++failures <= 5) {
      ADD_FAILURE() << "sample " << show(x) << ": grid bin " << grid(x) << ", oracle bin " << oracle.bin(x);
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(RangeBinMapper, TablesFilledAnEntryAtATimeMatchTheHostFillAndTheOracle) {
  std::mt19937_64 rng(20261124);
  std::vector<std::vector<double>> lists;
  for (const int n : {1, 2, 3, 64, 20000}) {
    std::vector<double> log_edges, random_edges, clustered;
    for (int k = 0; k <= n; ++k) {
      log_edges.push_back(std::pow(1e6, static_cast<double>(k) / n) - 1.0);
      random_edges.push_back(std::uniform_real_distribution<double>(-500.0, 1000.0)(rng));
      clustered.push_back(1000.0 + 1e-4 * k / n);  // many edges on one float
    }
    std::sort(random_edges.begin(), random_edges.end());
    lists.push_back(log_edges);
    lists.push_back(random_edges);
    lists.push_back(clustered);
  }
  lists.push_back({0.0, 1.0, 1.0, 1.0, 2.0});  // repeated edges
  for (const auto& edges : lists) {
    for (const upper_edge mode : both_modes) {
      SCOPED_TRACE(::testing::Message() << edges.size() << " edges from " << edges.front() << ", " << mode_name(mode));
      using tally::detail::grid_entries;
      expect_device_fill_matches_host_fill<float>(edges, mode);
      expect_device_fill_matches_host_fill<double>(edges, mode);
      expect_device_fill_matches_host_fill<std::int32_t>(edges, mode);
      expect_device_fill_matches_host_fill<float, grid_entries::counts>(edges, mode);
      expect_device_fill_matches_host_fill<double, grid_entries::counts>(edges, mode);
      expect_device_fill_matches_host_fill<std::int32_t, grid_entries::counts>(edges, mode);
    }
  }
}

TEST(EvenBinMapper, EstimatesRangesThatAreNotExactInBinary) {
  using tally::even_shortcut;
  EXPECT_EQ(tally::even_bin_mapper<float>({4096, 0.0, 1000.0}, upper_edge::exclusive).shortcut(), even_shortcut::estimated);
  EXPECT_EQ(tally::even_bin_mapper<std::int64_t>({4096, 0.0, 10000.0}, upper_edge::inclusive).shortcut(),
            even_shortcut::estimated);
  // 32-bit integers over whole bounds take the exact quotient, unless a whole-number edge rounded
  // above itself ([0, 110) in 100 bins: edge 50 is 55.00000000000001, so 55 is in bin 49).
  EXPECT_EQ(tally::even_bin_mapper<std::int32_t>({4096, 0.0, 10000.0}, upper_edge::inclusive).shortcut(),
            even_shortcut::rational_step);
  EXPECT_EQ(tally::even_bin_mapper<std::uint32_t>({65536, 7.0, 65542.0}, upper_edge::exclusive).shortcut(),
            even_shortcut::rational_step);
  EXPECT_EQ(tally::even_bin_mapper<std::int32_t>({100, 0.0, 110.0}, upper_edge::exclusive).shortcut(),
            even_shortcut::estimated);
  EXPECT_EQ(tally::even_bin_mapper<std::int32_t>({100, 0.0, 110.0}, upper_edge::exclusive)(55), 49);
  EXPECT_EQ(tally::even_bin_mapper<std::int32_t>({100, 0.0, 110.0}, upper_edge::exclusive)(33), 30);
  // Bounds in halves or quarters take it too (data of one value v: numpy's [v - 0.5, v + 0.5]),
  // with the same exception ([-20.5, 145.5) in 20 bins: edge 15 is 104.00000000000001); bounds
  // finer than 2^-8 estimate.
  EXPECT_EQ(tally::even_bin_mapper<std::int32_t>({7, 41.5, 42.5}, upper_edge::inclusive).shortcut(),
            even_shortcut::rational_step);
  EXPECT_EQ(tally::even_bin_mapper<std::uint32_t>({256, -0.5, 0.5}, upper_edge::inclusive).shortcut(),
            even_shortcut::rational_step);
  EXPECT_EQ(tally::even_bin_mapper<std::int32_t>({101, -0.5, 100.5}, upper_edge::exclusive).shortcut(),
            even_shortcut::rational_step);
  EXPECT_EQ(tally::even_bin_mapper<std::int32_t>({100, 0.25, 100.75}, upper_edge::exclusive).shortcut(),
            even_shortcut::rational_step);
  EXPECT_EQ(tally::even_bin_mapper<std::int32_t>({20, -20.5, 145.5}, upper_edge::exclusive).shortcut(),
            even_shortcut::estimated);
  EXPECT_EQ(tally::even_bin_mapper<std::int32_t>({20, -20.5, 145.5}, upper_edge::exclusive)(104), 14);
  EXPECT_EQ(tally::even_bin_mapper<std::int32_t>({20, -20.5, 145.5}, upper_edge::exclusive)(105), 15);
  EXPECT_EQ(tally::even_bin_mapper<std::int32_t>({49, 0.0, 31.5}, upper_edge::exclusive).shortcut(),
            even_shortcut::estimated);
  EXPECT_EQ(tally::even_bin_mapper<std::int32_t>({49, 0.0, 31.5}, upper_edge::exclusive)(27), 41);
  EXPECT_EQ(tally::even_bin_mapper<std::uint32_t>({7, 4294967294.5, 4294967295.5}, upper_edge::inclusive).shortcut(),
            even_shortcut::rational_step);
  EXPECT_EQ(tally::even_bin_mapper<std::uint32_t>({7, 4294967294.5, 4294967295.5}, upper_edge::inclusive)(4294967295u), 3);
  EXPECT_EQ(tally::even_bin_mapper<std::int32_t>({100, 0x1p-9, 100.0}, upper_edge::exclusive).shortcut(),
            even_shortcut::estimated);
  EXPECT_EQ(tally::even_bin_mapper<float>({4096, 0.0, 4096.0}, upper_edge::exclusive).shortcut(),
            even_shortcut::exact_float_edges);
  // Past the float estimate's reach (bins 2^-20 of the distance from zero), the general rule.
  EXPECT_EQ(tally::even_bin_mapper<float>({100, 1000.0, 1000.01}, upper_edge::exclusive).shortcut(), even_shortcut::none);
  EXPECT_EQ(tally::even_bin_mapper<double>({100, 1000.0, 1000.01}, upper_edge::exclusive).shortcut(),
            even_shortcut::estimated);
}

/// The GPU's table of each float's bin (float_table_mapper), filled here entry by entry as the
/// device fills it (by the bins' own mapper): it maps every float within 1000 of its window and
/// the special values as the mapper does, so the window loses none of the floats the bins count.
TEST(EvenBinMapper, FloatTableMapsEveryFloatOfItsRangeAsTheMapperDoes) {
  using tally::detail::float_table_mapper;
  const tally::even_bins cases[] = {
      {4096, 2047.5, 2048.5},  // numpy's range for data of one value
      {100, 1000.0, 1000.01},  {16, -8388609.0, -8388593.0}, {4096, 293.1, 293.9},
      {65536, 1000.0, 1003.9}, {3, -1e-41, 1e-41},  // subnormal edges around both zeros
      {7, -0.0, 1e-44},        {5, -3e-45, 0.0},      // a zero as an edge, either side
  };
  for (const auto& bins : cases) {
    for (const upper_edge mode : both_modes) {
      SCOPED_TRACE(::testing::Message() << bins.num_bins << " bins [" << bins.lower << ", " << bins.upper << ") "
                                        << mode_name(mode));
      const tally::even_bin_mapper<float> map(bins, mode);
      const auto window = float_table_mapper::window_for(map);
      ASSERT_TRUE(window.has_value());
      // The table as the device fills it, and a block's swizzled copy of it.
      std::vector<float_table_mapper::entry_type> table(float_table_mapper::table_bytes(window->span) /
                                                        sizeof(float_table_mapper::entry_type));
      std::vector<float_table_mapper::entry_type> swizzled(table.size());
      const float_table_mapper shape(*window, bins.num_bins, nullptr);
      for (std::uint32_t p = 0; p <= window->span; ++p) {
        const auto bits = float_table_mapper::bits_of_key(shape.key_at(p));
        float x;
        std::memcpy(&x, &bits, sizeof(x));
        table[p] = float_table_mapper::entry_of(p < window->span ? map(x) : tally::left_out_bin, bins.num_bins);
        swizzled[float_table_mapper::place(p)] = table[p];
      }
      const float_table_mapper table_map(*window, bins.num_bins, reinterpret_cast<const std::byte*>(table.data()));
      const tally::detail::bank_swizzled_table<float_table_mapper> swizzled_map(
          float_table_mapper(*window, bins.num_bins, reinterpret_cast<const std::byte*>(swizzled.data())));
      std::int64_t counted = 0;
      const auto check = [&](float x) {
        ASSERT_EQ(table_map(x), map(x)) << "x = " << x;
        ASSERT_EQ(table_map.slot(x), map(x) >= 0 ? map(x) : bins.num_bins) << "x = " << x;
        ASSERT_EQ(swizzled_map.slot(x), table_map.slot(x)) << "x = " << x;
        counted += map(x) >= 0 ? 1 : 0;
      };
      for (std::uint32_t key = window->first - 1000; key != window->first + window->span + 1000; ++key) {
        const auto bits = float_table_mapper::bits_of_key(key);
        float x;
        std::memcpy(&x, &bits, sizeof(x));
        check(x);
      }
      EXPECT_GT(counted, 0);
      for (const float x : {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest()}) {
        check(x);
      }
    }
  }
  // Keys order floats, neighbours one apart: -inf, -max, ..., -0, +0, ..., max, inf; NaN past either end.
  const auto key = float_table_mapper::key_of;
  constexpr float inf = std::numeric_limits<float>::infinity();
  constexpr float tiny = std::numeric_limits<float>::denorm_min();
  constexpr float largest = std::numeric_limits<float>::max();
  EXPECT_EQ(key(-inf) + 1, key(-largest));
  EXPECT_EQ(key(-tiny) + 1, key(-0.0f));
  EXPECT_EQ(key(-0.0f) + 1, key(0.0f));
  EXPECT_EQ(key(0.0f) + 1, key(tiny));
  EXPECT_EQ(key(largest) + 1, key(inf));
  const float ordered[] = {-inf, -largest, -1.0f, -tiny, -0.0f, 0.0f, tiny, 1.0f, largest, inf};
  for (std::size_t i = 0; i + 1 < std::size(ordered); ++i) EXPECT_LT(key(ordered[i]), key(ordered[i + 1])) << ordered[i];
  EXPECT_GT(key(std::numeric_limits<float>::quiet_NaN()), key(inf));
  EXPECT_LT(key(-std::numeric_limits<float>::quiet_NaN()), key(-inf));
  // Too many floats for a table: none (the grid takes them).
  EXPECT_FALSE(float_table_mapper::window_for(tally::even_bin_mapper<float>({4096, 1000.0, 1004.5}, upper_edge::exclusive)));
}

/// The GPU's table of each integer's bin (integer_table_mapper), filled here entry by entry as the
/// device fills it (by the bins' own mapper): every integer within 1000 of its window, and the
/// type's extremes, map as the range-bin mapper maps them; wider spans and int64 edges past 2^52
/// take no table.
template <class Sample>
class IntegerTable : public ::testing::Test {};
using wide_integer_types = ::testing::Types<std::int32_t, std::uint32_t, std::int64_t>;
TYPED_TEST_SUITE(IntegerTable, wide_integer_types, type_names);

TYPED_TEST(IntegerTable, MapsEveryIntegerOfItsEdgesAsTheRangeMapperDoes) {
  using Sample = TypeParam;
  using table_mapper = tally::detail::integer_table_mapper<Sample>;
  using limits = std::numeric_limits<Sample>;
  const double lowest = static_cast<double>(limits::lowest());
  const double highest = static_cast<double>(limits::max());
  std::vector<std::vector<double>> cases = {
      {0, 10, 20, 255.5, 1000},  {5, 5, 5, 7, 9},        {-0.5, 0.5},      {0, 65535},
      {-10.25, -3, 4.75, 12.5},  {-20, -10},            {1e6, 1e6 + 0.5},
  };
  if constexpr (sizeof(Sample) == 4) {  // the type's ends (int64's lie past 2^52)
    cases.push_back({lowest, lowest + 10, lowest + 65535});
    cases.push_back({highest - 100.5, highest - 50, highest});
  }
  for (const auto& edges : cases) {
    const auto num_bins = static_cast<std::int64_t>(edges.size()) - 1;
    const auto window = table_mapper::window_for(edges.front(), edges.back(), num_bins);
    ASSERT_TRUE(window.has_value()) << edges.front() << " " << edges.back();
    for (const upper_edge mode : both_modes) {
      SCOPED_TRACE(::testing::Message() << num_bins << " bins [" << edges.front() << ", " << edges.back() << "] "
                                        << mode_name(mode));
      const tally::range_bin_mapper<Sample> map(edges.data(), static_cast<std::int64_t>(edges.size()), mode);
      // The table as the device fills it, and a block's swizzled copy of it.
      const table_mapper shape(window->first, window->second, num_bins, nullptr);
      std::vector<typename table_mapper::entry_type> table(table_mapper::table_bytes(window->second) /
                                                           sizeof(typename table_mapper::entry_type));
      std::vector<typename table_mapper::entry_type> swizzled(table.size());
      for (std::uint32_t p = 0; p <= window->second; ++p) {
        table[p] = table_mapper::entry_of(p < window->second ? map(shape.value_at(p)) : tally::left_out_bin, num_bins);
        swizzled[table_mapper::place(p)] = table[p];
      }
      const table_mapper table_map(window->first, window->second, num_bins,
                                   reinterpret_cast<const std::byte*>(table.data()));
      const tally::detail::bank_swizzled_table<table_mapper> swizzled_map(
          table_mapper(window->first, window->second, num_bins, reinterpret_cast<const std::byte*>(swizzled.data())));
      std::int64_t counted = 0;
      const auto check = [&](Sample x) {
        ASSERT_EQ(table_map(x), map(x)) << "x = " << +x;
        ASSERT_EQ(table_map.slot(x), map(x) >= 0 ? map(x) : num_bins) << "x = " << +x;
        ASSERT_EQ(swizzled_map(x), map(x)) << "x = " << +x;
        counted += map(x) >= 0 ? 1 : 0;
      };
      const double from = std::max(static_cast<double>(window->first) - 1000, lowest);
      const double to = std::min(static_cast<double>(window->first) + window->second + 1000, highest);
      for (double x = from; x <= to; ++x) check(static_cast<Sample>(x));
      for (const Sample x : {limits::lowest(), limits::max(), Sample{0}, Sample{1}, static_cast<Sample>(limits::max() - 1),
                             static_cast<Sample>(limits::lowest() + 1)}) {
        check(x);
      }
      // Every case but the bins below an unsigned type's zero counts something.
      if (!(std::is_unsigned_v<Sample> && edges.back() < 0)) {
        EXPECT_GT(counted, 0);
      }
    }
  }
  // Spans past a table, and int64 edges whose compare as a double rounds samples: none.
  EXPECT_FALSE(table_mapper::window_for(0, 65536, 2));
  EXPECT_FALSE(table_mapper::window_for(0, 100, 65536));
  if constexpr (sizeof(Sample) == 8) {
    EXPECT_FALSE(table_mapper::window_for(4503599627370496.0, 4503599627370500.0, 2));
    EXPECT_FALSE(table_mapper::window_for(-4503599627370500.0, -4503599627370496.0, 2));
  }
}

// ---- bincount -------------------------------------------------------------------------------

template <class Sample>
class BincountMapper : public ::testing::Test {};
using integer_types = ::testing::Types<std::uint8_t, std::int32_t, std::uint32_t, std::int64_t>;
TYPED_TEST_SUITE(BincountMapper, integer_types, type_names);

TYPED_TEST(BincountMapper, MapsEachValueToItsOwnBinAndLeavesOutTheRest) {
  using Sample = TypeParam;
  using limits = std::numeric_limits<Sample>;
  for (const std::int64_t num_bins : {std::int64_t{1}, std::int64_t{2}, std::int64_t{255}, std::int64_t{256},
                                      std::int64_t{257}, std::int64_t{65536}, std::int64_t{1} << 40}) {
    SCOPED_TRACE("num_bins=" + std::to_string(num_bins));
    const tally::bincount_mapper<Sample> mapper(num_bins);
    const tally_test::reference_bincount<Sample> oracle(num_bins);
    std::vector<Sample> samples = {Sample{0}, Sample{1}, limits::max(), limits::lowest(),
                                   static_cast<Sample>(limits::max() - 1)};
    for (const std::int64_t near : {num_bins - 2, num_bins - 1, num_bins, num_bins + 1}) {
      if (near >= 0 && static_cast<std::uint64_t>(near) <= static_cast<std::uint64_t>(limits::max())) {
        samples.push_back(static_cast<Sample>(near));
      }
    }
    if constexpr (std::is_signed_v<Sample>) {
      samples.push_back(Sample{-1});
      samples.push_back(static_cast<Sample>(-num_bins));
    }
    for (const Sample x : samples) {
      EXPECT_EQ(mapper(x), oracle.bin(x)) << "sample " << +x;
      const bool inside = !(x < Sample{0}) && static_cast<std::uint64_t>(x) < static_cast<std::uint64_t>(num_bins);
      EXPECT_EQ(mapper(x), inside ? static_cast<std::int64_t>(x) : tally::left_out_bin) << "sample " << +x;
    }
  }
}

}  // namespace
