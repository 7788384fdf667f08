// Exact sums kept in 32-bit limbs, so that a GPU block's shared-memory copy of weighted sums is
// added to with native 32-bit integer atomics only (host and device code; the host tests the rule).
//
// Why. In shared memory an atomicAdd of a double, a float or a 64-bit integer is a compare-and-swap
// loop on sm_70 to sm_90 (ATOMS.CAST.SPIN in the SASS): lanes that hold one bin take turns, and a
// lane whose swap lost retries, so a crowded bin serializes a warp. A 32-bit integer add is one
// instruction (ATOMS.ADD) that the hardware serves for all lanes of one address together, the
// reason unweighted histograms of data of one value run at full speed.
//
// How. A sum S is an integer kept modulo 2^(32 Limbs) in limbs l_0..l_{Limbs-1}, S = sum of
// l_i 2^(32 i) in two's complement. A value +-m is added from the bottom limb up: limb i takes m's
// 32-bit chunk c_i plus the carry out of limb i - 1, through an add that returns the limb's old
// value; the carry out is whether that add wrapped past 2^32 (for a subtraction: borrowed, old <
// the amount). The top limb takes only the carries. Each add's carry is exactly what its limb
// gained or lost past 2^32, so in any order, however lanes and warps interleave, the limbs end
// holding S: exact, the same bits every run.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tally/config.hpp"
#include "tally/detail/fixed_point_weight.hpp"

namespace tally::detail::limb_sum {

/// A value to add: its magnitude's 32-bit chunks below the top limb, and its sign.
template <int Limbs>
struct chunks {
  std::uint32_t part[Limbs - 1] = {};
  bool negative = false;
};

/**
 * Adds `value` to limbs: `add_returning(i, a)` adds a to limb i (modulo 2^32) and returns the
 * limb's value before; `add(i, a)` adds without returning (the top limb). A limb whose amount is 0
 * is not touched. The sum of all values added must stay within the limbs' two's complement range.
 */
template <int Limbs, class AddReturning, class Add>
TALLY_HOST_DEVICE inline void add_chunks(const chunks<Limbs>& value, AddReturning add_returning, Add add) {
  std::uint32_t carry = 0;
  for (int i = 0; i < Limbs - 1; ++i) {
    const std::uint32_t amount = value.part[i] + carry;  // wraps to 0 only for 2^32 - 1 plus 1: the carry goes on
    carry = amount < carry ? 1u : 0u;
    if (amount != 0) {
      const std::uint32_t old = add_returning(i, value.negative ? 0u - amount : amount);
      carry += value.negative ? (old < amount ? 1u : 0u) : (old + amount < old ? 1u : 0u);
    }
  }
  if (carry != 0) add(Limbs - 1, value.negative ? 0u - carry : carry);
}

/// The limbs as a 128-bit two's complement integer (up to four limbs).
template <int Limbs>
TALLY_HOST_DEVICE inline fixed_point_weight::wide_int to_wide(const std::uint32_t (&limb)[Limbs]) {
  static_assert(Limbs >= 2 && Limbs <= 4);
  fixed_point_weight::wide_uint bits = 0;
  for (int i = Limbs - 1; i >= 0; --i) bits = (bits << 32) | limb[i];
  // Sign-extend from the top limb's top bit.
  constexpr int unused = 128 - 32 * Limbs;
  if constexpr (unused > 0) {
    return static_cast<fixed_point_weight::wide_int>(bits << unused) >> unused;
  } else {
    return static_cast<fixed_point_weight::wide_int>(bits);
  }
}

// --- deterministic: fixed-point weights (fixed_point_weight.hpp), three limbs ---------------------

/// Limbs of a deterministic bin: round(w * 2^32) is below 2^63 in magnitude and a block adds fewer
/// than 2^32 of them, so the sum stays below 2^95: 96 bits.
inline constexpr int fixed_limbs = 3;

/// The chunks of a weight's fixed-point value (one that raised no flag).
TALLY_HOST_DEVICE inline chunks<fixed_limbs> fixed_chunks(const fixed_point_weight::fixed_weight& f) {
  const auto v = static_cast<std::int64_t>((f.high << 32) | f.low);  // |v| < 2^63
  const std::uint64_t m = v < 0 ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
  chunks<fixed_limbs> out;
  out.part[0] = static_cast<std::uint32_t>(m);
  out.part[1] = static_cast<std::uint32_t>(m >> 32);
  out.negative = v < 0;
  return out;
}

/// fixed_chunks(to_fixed(w)) for a float weight, from its own bits in integer arithmetic (no
/// double conversions): the same chunks and the same flags (returned; 0 when it is a number).
TALLY_HOST_DEVICE inline std::uint32_t fixed_chunks_of_float(float w, chunks<fixed_limbs>& out) {
  std::uint32_t bits;
  std::memcpy(&bits, &w, sizeof(bits));
  out.negative = (bits >> 31) != 0;
  out.part[0] = out.part[1] = 0;
  const int biased = static_cast<int>((bits >> 23) & 0xff);
  const std::uint32_t fraction = bits & 0x7fffffu;
  if (biased == 0xff) {
    if (fraction != 0) return fixed_point_weight::saw_nan;
    return out.negative ? fixed_point_weight::saw_minus_inf : fixed_point_weight::saw_plus_inf;
  }
  if (biased >= 127 + 31) return fixed_point_weight::saw_out_of_range;  // |w| >= 2^31
  if (biased == 0) return 0;  // zero, or a subnormal: |w| * 2^32 < 2^-94 rounds to 0
  const std::uint64_t mantissa = fraction | 0x800000u;
  const int shift = biased - 150 + fixed_point_weight::fraction_bits;  // w * 2^32 = mantissa * 2^shift
  std::uint64_t m = 0;
  if (shift >= 0) {
    m = mantissa << shift;  // below 2^63
  } else if (shift >= -24) {
    // Round to nearest, ties to even, as the double path's conversion does.
    const int k = -shift;
    const std::uint64_t kept = mantissa >> k;
    const std::uint64_t dropped = mantissa & ((std::uint64_t{1} << k) - 1);
    const std::uint64_t half = std::uint64_t{1} << (k - 1);
    m = kept + ((dropped > half || (dropped == half && (kept & 1) != 0)) ? 1 : 0);
  }  // else below a quarter of 2^-32's unit: 0
  out.part[0] = static_cast<std::uint32_t>(m);
  out.part[1] = static_cast<std::uint32_t>(m >> 32);
  return 0;
}

/// The chunks of a float or double weight's fixed-point value and the flags it raises (0 when it is
/// a number, which alone gives chunks): a float's from its own bits, a double's through to_fixed.
template <class Weight>
TALLY_HOST_DEVICE inline std::uint32_t fixed_chunks_of(Weight w, chunks<fixed_limbs>& out) {
  if constexpr (std::is_same_v<Weight, float>) {
    return fixed_chunks_of_float(w, out);
  } else {
    const fixed_point_weight::fixed_weight f = fixed_point_weight::to_fixed(static_cast<double>(w));
    if (f.flags == 0) out = fixed_chunks(f);
    return f.flags;
  }
}

/// A deterministic bin's limbs as the fixed-point words of fixed_point_weight (value = high *
/// 2^32 + low, each word added modulo 2^64): the low limb, and the rest shifted down by 32 bits.
TALLY_HOST_DEVICE inline void fixed_words_of_limbs(const std::uint32_t (&limb)[fixed_limbs], std::uint64_t& low,
                                                   std::uint64_t& high) {
  low = limb[0];
  high = (static_cast<std::uint64_t>(limb[2]) << 32) | limb[1];  // two's complement of S >> 32
}

// --- double sums: weights exact on a grid of 2^-64, four limbs ----------------------------------

/// Limbs of a double-sum bin's exact part, and the grid its weights lie on (2^-exact_fraction_bits).
inline constexpr int exact_limbs = 4;
inline constexpr int exact_fraction_bits = 64;

/**
 * The chunks of w * 2^64 when that is an integer and |w| < 2^31 (every float from 2^-41 up, every
 * double whose last bit is 2^-64 or coarser), so that fewer than 2^32 of them sum below 2^127; false
 * for any other weight (NaN, infinities, subnormals, bits below 2^-64, 2^31 and up), which the
 * caller adds in double. Zero gives no chunks.
 */
TALLY_HOST_DEVICE inline bool exact_chunks(double w, chunks<exact_limbs>& out) {
  std::uint64_t bits;
  std::memcpy(&bits, &w, sizeof(bits));
  out.negative = (bits >> 63) != 0;
  const int biased = static_cast<int>((bits >> 52) & 0x7ff);
  const std::uint64_t fraction = bits & ((std::uint64_t{1} << 52) - 1);
  if (biased == 0) {
    out.part[0] = out.part[1] = out.part[2] = 0;
    return fraction == 0;  // zero adds nothing; subnormals are off the grid
  }
  if (biased >= 1023 + 31) return false;  // 2^31 and up, infinities, NaN
  const std::uint64_t mantissa = fraction | (std::uint64_t{1} << 52);
  const int shift = biased - 1075 + exact_fraction_bits;  // w * 2^64 = mantissa * 2^shift, shift < 43
  if (shift < 0) {
    if (shift <= -53 || (mantissa & ((std::uint64_t{1} << -shift) - 1)) != 0) return false;  // bits below 2^-64
    const std::uint64_t m = mantissa >> -shift;
    out.part[0] = static_cast<std::uint32_t>(m);
    out.part[1] = static_cast<std::uint32_t>(m >> 32);
    out.part[2] = 0;
    return true;
  }
  // mantissa * 2^shift = (mantissa << r) * 2^(32 q), with mantissa << r below 2^84.
  const int q = shift >> 5;
  const int r = shift & 31;
  const std::uint64_t low = mantissa << r;
  const auto high = static_cast<std::uint32_t>(r == 0 ? 0 : mantissa >> (64 - r));
  const auto t0 = static_cast<std::uint32_t>(low);
  const auto t1 = static_cast<std::uint32_t>(low >> 32);
  // q is 0 or 1; with q = 1, r <= 10 and `high` is 0.
  out.part[0] = q == 0 ? t0 : 0u;
  out.part[1] = q == 0 ? t1 : t0;
  out.part[2] = q == 0 ? high : t1;
  return true;
}

/// exact_chunks for a float weight, from its own bits (fewer instructions than through double; the
/// same chunks, and the same answer, as for the float's value as a double).
TALLY_HOST_DEVICE inline bool exact_chunks(float w, chunks<exact_limbs>& out) {
  std::uint32_t bits;
  std::memcpy(&bits, &w, sizeof(bits));
  out.negative = (bits >> 31) != 0;
  const int biased = static_cast<int>((bits >> 23) & 0xff);
  const std::uint32_t fraction = bits & 0x7fffffu;
  if (biased == 0) {
    out.part[0] = out.part[1] = out.part[2] = 0;
    return fraction == 0;
  }
  if (biased >= 127 + 31) return false;
  const std::uint32_t mantissa = fraction | 0x800000u;
  const int shift = biased - 150 + exact_fraction_bits;  // w * 2^64 = mantissa * 2^shift, shift <= 71
  if (shift < 0) {
    if (shift <= -24 || (mantissa & ((1u << -shift) - 1)) != 0) return false;
    out.part[0] = mantissa >> -shift;
    out.part[1] = out.part[2] = 0;
    return true;
  }
  const int q = shift >> 5;  // 0, 1 or 2; with 2, r <= 7 and t1 is 0
  const std::uint64_t placed = static_cast<std::uint64_t>(mantissa) << (shift & 31);  // below 2^55
  const auto t0 = static_cast<std::uint32_t>(placed);
  const auto t1 = static_cast<std::uint32_t>(placed >> 32);
  out.part[0] = q == 0 ? t0 : 0u;
  out.part[1] = q == 0 ? t1 : (q == 1 ? t0 : 0u);
  out.part[2] = q == 1 ? t1 : (q == 2 ? t0 : 0u);
  return true;
}

/// A double-sum bin's exact part as the double nearest to it (one rounding).
TALLY_HOST_DEVICE inline double exact_to_double(const std::uint32_t (&limb)[exact_limbs]) {
  return fixed_point_weight::scaled_to_double(to_wide(limb), exact_fraction_bits);
}

}  // namespace tally::detail::limb_sum
