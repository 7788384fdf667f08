// The arithmetic of weighted sums in 32-bit limbs (tally/detail/limb_sum.hpp), run on the host:
// the GPU's shared-memory copies add to limbs with integer atomics, each add returning the limb's
// old value; here each add is applied at once, in random orders, which are the orders atomics may
// take. The limbs must hold the exact sum (against 128-bit integers) in every order, whether a
// value comes as the chunks of every limb or as a window of two at any limb; a weight's window
// must stand for exactly w * 2^64 (w * 2^32 rounded, deterministic), and weights off that grid
// must be sent to double.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tally/detail/fixed_point_weight.hpp"
#include "tally/detail/limb_sum.hpp"

namespace {

namespace ls = tally::detail::limb_sum;
namespace fpw = tally::detail::fixed_point_weight;
using fpw::wide_int;
using fpw::wide_uint;

/// Limbs on the host, added to as the GPU's atomics would: each add in one step.
template <int Limbs>
struct host_limbs {
  std::uint32_t limb[Limbs] = {};
  int touched = 0;  // adds made, to check that zero amounts are skipped

  void add(const ls::chunks<Limbs>& value) { add(ls::to_window(value)); }
  template <int Width>
  void add(const ls::window<Width>& value) {
    ls::add_window<Limbs>(
        value,
        [&](int i, std::uint32_t a) {
          ++touched;
          const std::uint32_t old = limb[i];
          limb[i] = old + a;
          return old;
        },
        [&](int i, std::uint32_t a) {
          ++touched;
          limb[i] += a;
        });
  }
};

/// The value chunks stand for, as a 128-bit integer.
template <int Limbs>
wide_int value_of(const ls::chunks<Limbs>& c) {
  wide_uint m = 0;
  for (int i = Limbs - 2; i >= 0; --i) m = (m << 32) | c.part[i];
  return c.negative ? -static_cast<wide_int>(m) : static_cast<wide_int>(m);
}

/// The value a window stands for, as a 128-bit integer.
template <int Width>
wide_int value_of(const ls::window<Width>& w) {
  wide_uint bits = 0;
  for (int j = Width - 1; j >= 0; --j) bits = (bits << 32) | w.part[j];
  wide_int v = static_cast<wide_int>(bits);
  // The sign's extension (a window of four holds all 128 bits: its bits are the value already).
  if constexpr (Width < 4) {
    if (w.negative) v -= static_cast<wide_int>(wide_uint{1} << (32 * Width));
  }
  return v * static_cast<wide_int>(wide_uint{1} << (32 * w.first));
}

/// A window of two at limb `first` for a signed value whose magnitude, shifted down 32 first bits,
/// is below 2^63.
ls::window<2> window_of(wide_int v, int first) {
  const wide_int unit = static_cast<wide_int>(wide_uint{1} << (32 * first));
  return ls::window_of_bits(static_cast<std::uint64_t>(static_cast<std::int64_t>(v / unit)), first);
}

/// The chunks of a signed value (|v| below 2^(32 (Limbs - 1))).
template <int Limbs>
ls::chunks<Limbs> chunks_of(wide_int v) {
  ls::chunks<Limbs> c;
  c.negative = v < 0;
  wide_uint m = static_cast<wide_uint>(v < 0 ? -v : v);
  for (int i = 0; i < Limbs - 1; ++i) {
    c.part[i] = static_cast<std::uint32_t>(m);
    m >>= 32;
  }
  return c;
}

std::string text(wide_int v) {
  const bool negative = v < 0;
  wide_uint m = static_cast<wide_uint>(negative ? -v : v);
  std::string digits;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(m % 10)));
    m /= 10;
  } while (m != 0);
  return negative ? "-" + digits : digits;
}

/// Values of up to `bits` bits of magnitude, both signs, drawn to make carries and borrows common:
/// random, all ones, powers of two, and values that sit at a limb's edge.
std::vector<wide_int> adversarial_values(std::mt19937_64& rng, int bits, std::size_t n) {
  const wide_uint top = (wide_uint{1} << bits) - 1;
  std::vector<wide_int> out;
  for (std::size_t k = 0; k < n; ++k) {
    wide_uint m = 0;
    switch (rng() % 6) {
      case 0: m = ((static_cast<wide_uint>(rng()) << 64) | rng()) & top; break;
      case 1: m = top; break;
      case 2: m = wide_uint{1} << (rng() % bits); break;
      case 3: m = ((wide_uint{1} << (32 * (1 + rng() % ((bits - 1) / 32 + 1)))) - 1) & top; break;  // all ones to a limb edge
      case 4: m = rng() & 0xffffffffu; break;
      default: m = (wide_uint{0xffffffffu} << (32 * (rng() % ((bits - 1) / 32 + 1)))) & top; break;
    }
    out.push_back(rng() % 2 == 0 ? static_cast<wide_int>(m) : -static_cast<wide_int>(m));
  }
  return out;
}

template <int Limbs>
void check_sums_in_any_order(int bits) {
  std::mt19937_64 rng(20261128 + Limbs);
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t n = 1 + rng() % 400;
    std::vector<wide_int> values = adversarial_values(rng, bits, n);
    if (trial % 3 == 0) {  // all of one sign: the sum climbs through every limb
      for (auto& v : values) v = v < 0 ? -v : v;
    }
    wide_int exact = 0;
    for (const wide_int v : values) exact += v;
    std::vector<std::uint32_t> first;
    for (int order = 0; order < 4; ++order) {
      std::shuffle(values.begin(), values.end(), rng);
      host_limbs<Limbs> limbs;
      for (const wide_int v : values) limbs.add(chunks_of<Limbs>(v));
      ASSERT_EQ(text(ls::to_wide<Limbs>(limbs.limb)), text(exact)) << "trial " << trial << ", order " << order;
      std::vector<std::uint32_t> got(limbs.limb, limbs.limb + Limbs);
      if (order == 0) first = got;
      EXPECT_EQ(got, first) << "another order left other limbs";
    }
  }
}

TEST(LimbSum, ThreeLimbsHoldTheExactSumOfFixedPointValuesInAnyOrder) { check_sums_in_any_order<3>(63); }

TEST(LimbSum, FourLimbsHoldTheExactSumOfGridValuesInAnyOrder) { check_sums_in_any_order<4>(95); }

TEST(LimbSum, WindowsOfTwoAtAnyLimbHoldTheExactSumInAnyOrder) {
  // As float weights come: 24 bits, placed anywhere a window of two reaches (the top limb too),
  // both signs, beside values that sit at a limb's edge so that carries and borrows run on.
  std::mt19937_64 rng(20261129);
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t n = 1 + rng() % 400;
    std::vector<ls::window<2>> values;
    wide_int exact = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const int first = static_cast<int>(rng() % 3);  // windows at limbs 0-1, 1-2 or 2-3 (the top)
      wide_int m = 0;
      switch (rng() % 4) {
        case 0: m = static_cast<wide_int>((rng() >> 40) | (1u << 23)) << (rng() % 32); break;  // a float's bits
        case 1: m = static_cast<wide_int>(0xffffffffu); break;
        case 2: m = static_cast<wide_int>(1) << (rng() % 62); break;
        default: m = static_cast<wide_int>(rng() >> 2); break;  // below 2^62
      }
      if (first == 2) m &= 0x7fffffff;  // the top limb holds the sum's sign: values stay in range
      const bool negative = trial % 3 != 0 && rng() % 2 == 0;  // a third of the trials climb only
      const wide_int v = (negative ? -m : m) * static_cast<wide_int>(wide_uint{1} << (32 * first));
      values.push_back(window_of(v, first));
      ASSERT_EQ(text(value_of(values.back())), text(v));
      exact += v;
    }
    for (int order = 0; order < 4; ++order) {
      std::shuffle(values.begin(), values.end(), rng);
      host_limbs<4> limbs;
      for (const auto& v : values) limbs.add(v);
      ASSERT_EQ(text(ls::to_wide<4>(limbs.limb)), text(exact)) << "trial " << trial << ", order " << order;
    }
  }
}

TEST(LimbSum, CarriesAndBorrowsRunThroughEveryLimb) {
  // 0xffffffff in each lower limb, then +1: the carry runs to the top limb; then -1 borrows back.
  host_limbs<4> limbs;
  limbs.add(chunks_of<4>((wide_int{1} << 96) - 1));
  limbs.add(chunks_of<4>(1));
  EXPECT_EQ(text(ls::to_wide<4>(limbs.limb)), text(wide_int{1} << 96));
  limbs.add(chunks_of<4>(-1));
  EXPECT_EQ(text(ls::to_wide<4>(limbs.limb)), text((wide_int{1} << 96) - 1));
  // Below zero and back.
  host_limbs<3> small;
  small.add(chunks_of<3>(-5));
  EXPECT_EQ(text(ls::to_wide<3>(small.limb)), "-5");
  EXPECT_EQ(small.limb[2], 0xffffffffu);
  small.add(chunks_of<3>(5));
  EXPECT_EQ(text(ls::to_wide<3>(small.limb)), "0");
  // Zero adds nothing and touches no limb.
  host_limbs<3> untouched;
  untouched.add(chunks_of<3>(0));
  untouched.add(ls::window_of_bits(0));
  EXPECT_EQ(untouched.touched, 0);
  // A window's carry and a negative window's borrow run on above it, to the top limb.
  host_limbs<4> climbing;
  climbing.add(window_of((wide_int{1} << 96) - 1 - ((wide_int{1} << 64) - 1), 2));  // limbs 2 and 3: 0xffffffff, 0
  climbing.add(chunks_of<4>((wide_int{1} << 64) - 1));                              // limbs 0 and 1 all ones
  climbing.add(window_of(1, 0));  // carries through limbs 1 and 2 into the top
  EXPECT_EQ(text(ls::to_wide<4>(climbing.limb)), text(wide_int{1} << 96));
  climbing.add(window_of(-1, 0));  // borrows back through every limb
  EXPECT_EQ(text(ls::to_wide<4>(climbing.limb)), text((wide_int{1} << 96) - 1));
}

/// Weights on and off the grid of 2^-64: powers of two at its ends, floats and doubles of every
/// magnitude, subnormals, limits, NaN and infinities.
std::vector<double> probe_weights() {
  std::vector<double> out{0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 1e-3, 3.14159f, -2.5f, 1e-12f, 1e-13f,
                          std::ldexp(1.0, -64), std::ldexp(1.0, -65), std::ldexp(3.0, -65), std::ldexp(1.0, 30),
                          std::ldexp(1.0, 31), std::nextafter(std::ldexp(1.0, 31), 0.0), -std::nextafter(std::ldexp(1.0, 31), 0.0),
                          std::ldexp(1.0, -41), std::ldexp(1.0, -42), std::numeric_limits<double>::denorm_min(),
                          std::numeric_limits<float>::denorm_min(), std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(),
                          std::numeric_limits<double>::max(), std::numeric_limits<float>::max()};
  std::mt19937_64 rng(7);
  for (int k = 0; k < 20000; ++k) {
    const int exponent = static_cast<int>(rng() % 140) - 100;
    const double unit = std::ldexp(static_cast<double>(rng() >> 11), -53);
    const double w = (rng() % 2 == 0 ? 1.0 : -1.0) * std::ldexp(unit, exponent);
    out.push_back(w);
    out.push_back(static_cast<float>(w));
  }
  return out;
}

TEST(LimbSum, ExactChunksStandForTheWeightTimes2Pow64AndOnlyGridWeightsAreTaken) {
  for (const double w : probe_weights()) {
    SCOPED_TRACE("weight " + std::to_string(w) + " (" + std::to_string(std::bit_cast<std::uint64_t>(w)) + ")");
    ls::chunks<ls::exact_limbs> c;
    const bool taken = ls::exact_chunks(w, c);
    // On the grid: finite, not subnormal (or zero), |w| < 2^31 and w * 2^64 an integer.
    const bool finite = std::isfinite(w);
    const bool on_grid = finite && (w == 0.0 || (std::fpclassify(w) == FP_NORMAL && std::fabs(w) < std::ldexp(1.0, 31) &&
                                                  std::ldexp(w, 64) == std::trunc(std::ldexp(w, 64))));
    ASSERT_EQ(taken, on_grid);
    if (!taken) continue;
    // The chunks' value, scaled back, is the weight (one rounding of an exact value: none).
    EXPECT_EQ(fpw::scaled_to_double(value_of<ls::exact_limbs>(c), ls::exact_fraction_bits), w == 0.0 ? 0.0 : w);
    EXPECT_LT(c.part[2], 0x80000000u);  // below 2^95: fewer than 2^32 of them stay in range
  }
  // The windows of a float (its own bits) and of a double (its chunks) stand for the chunks' value.
  for (const double w : probe_weights()) {
    const auto f = static_cast<float>(w);
    ls::chunks<ls::exact_limbs> from_double;
    ls::exact_window<float> from_float;
    ls::exact_window<double> from_double_window;
    const bool taken = ls::exact_chunks(static_cast<double>(f), from_double);
    ASSERT_EQ(ls::exact_window_of(f, from_float), taken) << f;
    ASSERT_EQ(ls::exact_window_of(static_cast<double>(f), from_double_window), taken) << f;
    if (!taken) continue;
    EXPECT_EQ(text(value_of(from_float)), text(value_of<ls::exact_limbs>(from_double))) << f;
    EXPECT_EQ(text(value_of(from_double_window)), text(value_of<ls::exact_limbs>(from_double))) << f;
    EXPECT_LE(from_float.first + 2, ls::exact_limbs) << f;
  }
  // Every float from 2^-41 to below 2^31 is on the grid, and a window of two places it.
  for (float f = std::ldexp(1.0f, -41); f < std::ldexp(1.0f, 31); f = std::nextafter(f, 1e30f) * 1.001f) {
    for (const float signed_f : {f, -f}) {
      ls::exact_window<float> window;
      ASSERT_TRUE(ls::exact_window_of(signed_f, window)) << signed_f;
      EXPECT_EQ(fpw::scaled_to_double(value_of(window), ls::exact_fraction_bits), static_cast<double>(signed_f));
    }
  }
}

TEST(LimbSum, AFloatsFixedPointWindowFromItsBitsIsTheDoublePathsValue) {
  std::vector<float> floats;
  for (const double w : probe_weights()) floats.push_back(static_cast<float>(w));
  // Ties at the grid's half unit and their neighbours, of both signs, and the range's edge.
  for (int k = 1; k <= 26; ++k) {
    for (const float base : {1.0f, 3.0f, 5.0f, 0.75f}) {
      const float w = std::ldexp(base, -32 - k);
      floats.insert(floats.end(), {w, -w, std::nextafter(w, 0.0f), std::nextafter(w, 1.0f)});
    }
  }
  floats.insert(floats.end(), {2147483648.0f, -2147483648.0f, std::nextafter(2147483648.0f, 0.0f),
                               -std::nextafter(2147483648.0f, 0.0f), std::numeric_limits<float>::denorm_min()});
  // Floats of every exponent, and at the rounding's edges (1, 24 and 25 places down, none) one
  // mantissa in 7: ties and their neighbours.
  for (std::uint32_t bits = 0; bits < 0x80000000u; bits += 997) {
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    floats.push_back(f);
    floats.push_back(-f);
  }
  for (const int biased : {0, 1, 93, 94, 95, 117, 118, 157, 158, 255}) {
    for (std::uint32_t fraction = 0; fraction < 0x800000u; fraction += biased == 94 || biased == 117 ? 7 : 61) {
      float f;
      const std::uint32_t bits = (static_cast<std::uint32_t>(biased) << 23) | fraction;
      std::memcpy(&f, &bits, sizeof(f));
      floats.push_back(f);
    }
  }
  for (const float f : floats) {
    ls::window<2> from_float;
    ls::window<2> from_double;
    const std::uint32_t flags = ls::fixed_window_of(f, from_float);
    const fpw::fixed_weight fixed = fpw::to_fixed(static_cast<double>(f));
    ASSERT_EQ(flags, fixed.flags) << f;
    ASSERT_EQ(ls::fixed_window_of(static_cast<double>(f), from_double), fixed.flags) << f;
    if (flags != 0) continue;
    const wide_int v = static_cast<std::int64_t>((fixed.high << 32) | fixed.low);
    ASSERT_TRUE(value_of(from_float) == v) << f << ": " << text(value_of(from_float)) << " against " << text(v);
    ASSERT_TRUE(value_of(from_double) == v) << f << ": " << text(value_of(from_double)) << " against " << text(v);
  }
}

TEST(LimbSum, ACommonFloatsWindowIsTheGeneralPathsWindow) {
  // The GPU's shortcut for the weights nearly all data has (deterministic: 2^-9 <= |w| < 2^31, w *
  // 2^32 not rounded; double sums: 2^-41 <= |w| < 2^31) against the general path, on floats of
  // every exponent, both signs, every 31st mantissa at the ranges' edges.
  std::vector<float> floats;
  for (std::uint32_t bits = 0; bits < 0x80000000u; bits += 997) floats.push_back(std::bit_cast<float>(bits));
  for (const std::uint32_t biased : {0u, 1u, 85u, 86u, 87u, 117u, 118u, 119u, 156u, 157u, 158u, 255u}) {
    for (std::uint32_t fraction = 0; fraction < 0x800000u; fraction += 31) {
      floats.push_back(std::bit_cast<float>((biased << 23) | fraction));
    }
    floats.push_back(std::bit_cast<float>((biased << 23) | 0x7fffffu));
  }
  std::size_t fixed_taken = 0;
  std::size_t exact_taken = 0;
  for (const float magnitude : floats) {
    for (const float f : {magnitude, -magnitude}) {
      const double a = std::fabs(static_cast<double>(f));
      ls::window<2> common;
      ls::window<2> general;
      const bool fixed_common = ls::fixed_window_of_common_float(f, common);
      ASSERT_EQ(fixed_common, a >= std::ldexp(1.0, -9) && a < std::ldexp(1.0, 31)) << f;
      if (fixed_common) {
        ++fixed_taken;
        ASSERT_EQ(ls::fixed_window_of(f, general), 0u) << f;
        ASSERT_EQ(text(value_of(common)), text(value_of(general))) << f;
        ASSERT_EQ(common.negative, f < 0) << f;
      }
      const bool exact_common = ls::exact_window_of_common_float(f, common);
      ASSERT_EQ(exact_common, a >= std::ldexp(1.0, -41) && a < std::ldexp(1.0, 31)) << f;
      if (exact_common) {
        ++exact_taken;
        ASSERT_TRUE(ls::exact_window_of(f, general)) << f;
        ASSERT_EQ(text(value_of(common)), text(value_of(general))) << f;
        ASSERT_LE(common.first + 2, ls::exact_limbs) << f;
        ASSERT_EQ(common.negative, f < 0) << f;
      }
    }
  }
  EXPECT_GT(fixed_taken, floats.size() / 8);
  EXPECT_GT(exact_taken, fixed_taken);
}

/// A GPU lane's whole step of one bin adds its common float weights as one value: their windows
/// summed in 128 bits (wide_of) and added once (window_of_wide), beside other steps' weights added
/// one by one, in random orders: the exact sum, as when each weight is added on its own. Steps of 4
/// and 8 weights, every exponent of the common range, both signs, and steps of the largest weights
/// of one sign (the sum at its widest).
template <int Limbs>
void check_steps_of_one_bin_add_as_their_weights_do() {
  constexpr bool fixed = Limbs == ls::fixed_limbs;
  const auto common_window = [](float f, ls::window<2>& w) {
    return fixed ? ls::fixed_window_of_common_float(f, w) : ls::exact_window_of_common_float(f, w);
  };
  const std::uint32_t lowest = fixed ? 118u : 86u;  // the common range's biased exponents: lowest..157
  std::mt19937_64 rng(20261203 + Limbs);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::vector<ls::window<2>>> steps(1 + rng() % 60);
    wide_int exact = 0;
    for (auto& step : steps) {
      const std::size_t items = rng() % 2 == 0 ? 4 : 8;
      const bool largest = trial % 5 == 0;
      const bool step_negative = rng() % 2 == 0;
      for (std::size_t k = 0; k < items; ++k) {
        const std::uint32_t biased = largest ? 157u : lowest + static_cast<std::uint32_t>(rng() % (158 - lowest));
        const std::uint32_t fraction = largest ? 0x7fffffu : static_cast<std::uint32_t>(rng() & 0x7fffffu);
        const bool negative = largest ? step_negative : trial % 3 != 0 && rng() % 2 == 0;
        const float f = std::bit_cast<float>((negative ? 0x80000000u : 0u) | (biased << 23) | fraction);
        ls::window<2> w;
        ASSERT_TRUE(common_window(f, w)) << f;
        ASSERT_EQ(text(ls::wide_of(w)), text(value_of(w))) << f;
        step.push_back(w);
        exact += value_of(w);
      }
    }
    std::vector<ls::window<2>> each;
    for (const auto& step : steps) each.insert(each.end(), step.begin(), step.end());
    std::shuffle(each.begin(), each.end(), rng);
    host_limbs<Limbs> one_by_one;
    for (const auto& w : each) one_by_one.add(w);
    std::shuffle(steps.begin(), steps.end(), rng);
    host_limbs<Limbs> by_step;  // most steps as one value, some weight by weight, into the same limbs
    for (const auto& step : steps) {
      if (rng() % 4 == 0) {
        for (const auto& w : step) by_step.add(w);
        continue;
      }
      wide_int sum = 0;
      for (const auto& w : step) sum += ls::wide_of(w);
      const ls::window<Limbs> summed = ls::window_of_wide<Limbs>(sum);
      ASSERT_EQ(text(value_of(summed)), text(sum));
      by_step.add(summed);
    }
    ASSERT_EQ(text(ls::to_wide<Limbs>(one_by_one.limb)), text(exact)) << "trial " << trial;
    ASSERT_EQ(text(ls::to_wide<Limbs>(by_step.limb)), text(exact)) << "trial " << trial;
  }
}

TEST(LimbSum, AStepOfOneBinAddsItsFixedPointWeightsAsOneValue) {
  check_steps_of_one_bin_add_as_their_weights_do<ls::fixed_limbs>();
}

TEST(LimbSum, AStepOfOneBinAddsItsGridWeightsAsOneValue) {
  check_steps_of_one_bin_add_as_their_weights_do<ls::exact_limbs>();
}

TEST(LimbSum, ExactPartRoundsOnceToTheNearestDouble) {
  // 2^53 + 1 as 2^53 and 1: double addition loses the 1, the limbs keep it and round once.
  host_limbs<ls::exact_limbs> limbs;
  for (const double w : {std::ldexp(1.0, 29), std::ldexp(1.0, -24), std::ldexp(1.0, -24)}) {
    ls::exact_window<double> c;
    ASSERT_TRUE(ls::exact_window_of(w, c));
    limbs.add(c);
  }
  EXPECT_EQ(ls::exact_to_double(limbs.limb), std::ldexp(1.0, 29) + std::ldexp(1.0, -23));
  // A sum of many weights against the long-double sum of the same (exact here: all on 2^-40).
  std::mt19937_64 rng(11);
  host_limbs<ls::exact_limbs> many;
  wide_int exact = 0;
  for (int k = 0; k < 100000; ++k) {
    const double w = std::ldexp(static_cast<double>(static_cast<std::int64_t>(rng() >> 20) - (std::int64_t{1} << 43)), -40);
    ls::exact_window<double> c;
    ASSERT_TRUE(ls::exact_window_of(w, c));
    many.add(c);
    ls::exact_window<float> from_float;  // the same weights as floats where they are floats
    if (static_cast<double>(static_cast<float>(w)) == w) {
      ASSERT_TRUE(ls::exact_window_of(static_cast<float>(w), from_float));
      EXPECT_EQ(text(value_of(from_float)), text(value_of(c)));
    }
    exact += static_cast<wide_int>(std::ldexp(w, 40)) << 24;
  }
  EXPECT_EQ(ls::exact_to_double(many.limb), fpw::scaled_to_double(exact, 64));
}

TEST(LimbSum, FixedPointLimbsGiveTheWordsAndTheDoubleOfTheCpuBackend) {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 50; ++trial) {
    host_limbs<ls::fixed_limbs> limbs;
    std::uint64_t low = 0;
    std::uint64_t high = 0;  // the CPU backend's words: each part summed modulo 2^64
    for (int k = 0; k < 2000; ++k) {
      const int exponent = static_cast<int>(rng() % 70) - 38;  // up to 2^31 (some beyond: flagged, skipped)
      const double w = (rng() % 2 == 0 ? 1.0 : -1.0) * std::ldexp(static_cast<double>(rng() >> 11), exponent - 53);
      const fpw::fixed_weight f = fpw::to_fixed(w);
      ls::window<2> window;
      ASSERT_EQ(ls::fixed_window_of(w, window), f.flags);
      if (f.flags != 0) continue;
      low += f.low;
      high += f.high;
      limbs.add(window);
    }
    std::uint64_t limb_low = 0;
    std::uint64_t limb_high = 0;
    ls::fixed_words_of_limbs(limbs.limb, limb_low, limb_high);
    // Other words, the same value: high * 2^32 + low.
    EXPECT_EQ(fpw::to_double(limb_low, limb_high, 0), fpw::to_double(low, high, 0)) << "trial " << trial;
    const wide_int from_words = static_cast<wide_int>(static_cast<std::int64_t>(high)) * (wide_int{1} << 32) + low;
    EXPECT_EQ(text(ls::to_wide<ls::fixed_limbs>(limbs.limb)), text(from_words));
  }
}

}  // namespace
