// The arithmetic of weighted sums in 32-bit limbs (tally/detail/limb_sum.hpp), run on the host:
// the GPU's shared-memory copies add to limbs with integer atomics, each add returning the limb's
// old value; here each add is applied at once, in random orders, which are the orders atomics may
// take. The limbs must hold the exact sum (against 128-bit integers) in every order; a weight's
// chunks must stand for exactly w * 2^64, and weights off that grid must be sent to double.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
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

  void add(const ls::chunks<Limbs>& value) {
    ls::add_chunks<Limbs>(
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
  EXPECT_EQ(untouched.touched, 0);
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
  // A float's own path gives the chunks of its value as a double.
  for (const double w : probe_weights()) {
    const auto f = static_cast<float>(w);
    ls::chunks<ls::exact_limbs> from_float;
    ls::chunks<ls::exact_limbs> from_double;
    const bool taken = ls::exact_chunks(f, from_float);
    ASSERT_EQ(taken, ls::exact_chunks(static_cast<double>(f), from_double)) << f;
    if (!taken) continue;
    EXPECT_EQ(from_float.negative, from_double.negative) << f;
    for (int i = 0; i < ls::exact_limbs - 1; ++i) EXPECT_EQ(from_float.part[i], from_double.part[i]) << f;
  }
  // Every float from 2^-41 to below 2^31 is on the grid.
  for (float f = std::ldexp(1.0f, -41); f < std::ldexp(1.0f, 31); f = std::nextafter(f, 1e30f) * 1.001f) {
    ls::chunks<ls::exact_limbs> c;
    EXPECT_TRUE(ls::exact_chunks(f, c)) << f;
  }
}

TEST(LimbSum, AFloatsFixedPointChunksFromItsBitsAreThoseOfTheDoublePath) {
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
  for (const float f : floats) {
    ls::chunks<ls::fixed_limbs> from_float;
    const std::uint32_t flags = ls::fixed_chunks_of_float(f, from_float);
    const fpw::fixed_weight fixed = fpw::to_fixed(static_cast<double>(f));
    ASSERT_EQ(flags, fixed.flags) << f;
    if (flags != 0) continue;
    const ls::chunks<ls::fixed_limbs> from_double = ls::fixed_chunks(fixed);
    EXPECT_EQ(value_of<ls::fixed_limbs>(from_float) == value_of<ls::fixed_limbs>(from_double), true)
        << f << ": " << text(value_of<ls::fixed_limbs>(from_float)) << " against "
        << text(value_of<ls::fixed_limbs>(from_double));
  }
}

TEST(LimbSum, ExactPartRoundsOnceToTheNearestDouble) {
  // 2^53 + 1 as 2^53 and 1: double addition loses the 1, the limbs keep it and round once.
  host_limbs<ls::exact_limbs> limbs;
  for (const double w : {std::ldexp(1.0, 29), std::ldexp(1.0, -24), std::ldexp(1.0, -24)}) {
    ls::chunks<ls::exact_limbs> c;
    ASSERT_TRUE(ls::exact_chunks(w, c));
    limbs.add(c);
  }
  EXPECT_EQ(ls::exact_to_double(limbs.limb), std::ldexp(1.0, 29) + std::ldexp(1.0, -23));
  // A sum of many weights against the long-double sum of the same (exact here: all on 2^-40).
  std::mt19937_64 rng(11);
  host_limbs<ls::exact_limbs> many;
  wide_int exact = 0;
  for (int k = 0; k < 100000; ++k) {
    const double w = std::ldexp(static_cast<double>(static_cast<std::int64_t>(rng() >> 20) - (std::int64_t{1} << 43)), -40);
    ls::chunks<ls::exact_limbs> c;
    ASSERT_TRUE(ls::exact_chunks(w, c));
    many.add(c);
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
      if (f.flags != 0) continue;
      low += f.low;
      high += f.high;
      limbs.add(ls::fixed_chunks(f));
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
