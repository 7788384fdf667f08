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
// l_i 2^(32 i) in two's complement. A value is added as its two's complement from the bottom limb
// up: limb i takes the value's 32-bit chunk c_i plus the carry out of limb i - 1, through an add
// that returns the limb's old value; the carry out is whether that add wrapped past 2^32. Each
// add's carry is exactly what its limb gained past 2^32, so in any order, however lanes and warps
// interleave, the limbs end holding S: exact, the same bits every run. A value's chunks are zero
// below its lowest bit and its sign's extension above its highest, so only a window of limbs
// takes adds of its own (`window`); above it the carry and the sign cancel but for rare runs.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tally/config.hpp"
#include "tally/detail/fixed_point_weight.hpp"

namespace tally::detail::limb_sum {

/// A value by its magnitude's 32-bit chunks below the top limb, and its sign (how a double weight's
/// conversions give it).
template <int Limbs>
struct chunks {
  std::uint32_t part[Limbs - 1] = {};
  bool negative = false;
};

/**
 * A value to add, as the limbs it touches: `Width` 32-bit chunks from limb `first` on, in two's
 * complement (a negative value -m is 2^(32 Width) - m there), and its sign, whose extension (all
 * ones) every limb above the window takes. A float's 24 bits of mantissa touch at most two limbs
 * wherever they sit, so a float weight is a window of two at the limb its exponent names: two
 * adds, where adding limb by limb up the whole sum tests every limb (and a warp whose lanes'
 * weights sit at different limbs runs the adds of all of them).
 */
template <int Width>
struct window {
  std::uint32_t part[Width] = {};
  int first = 0;
  bool negative = false;  ///< only for a non-zero value
};

/**
 * Adds `value` to limbs: `add_returning(i, a)` adds a to limb i (modulo 2^32) and returns the
 * limb's value before; `add(i, a)` adds without returning (the top limb). The window's limbs take
 * their chunks plus the carry out of the limb below; a carry out of an add is whether it wrapped
 * past 2^32. An amount of 0 is not added: a chunk of 0 with no carry, or all ones plus a carry,
 * whose carry goes on (whole-number weights have a bottom chunk of 0, and an add of 0 would cost
 * them a returning atomic, on which lanes of one bin take turns). Above the window each limb would
 * take the sign's extension plus the carry: nothing for a positive value without a carry or a
 * negative one with one (all ones plus one), else +1 or all ones (-1), which carries or borrows on
 * only past a limb of all ones or of zero: rarely, so one branch covers it. value.first + Width <=
 * Limbs. The sum of all values added must stay within the limbs' two's complement range.
 */
template <int Limbs, int Width, class AddReturning, class Add>
TALLY_HOST_DEVICE inline void add_window(const window<Width>& value, AddReturning add_returning, Add add) {
  std::uint32_t carry = 0;
  for (int j = 0; j < Width; ++j) {
    const std::uint32_t amount = value.part[j] + carry;
    if (amount != 0) {
      const std::uint32_t old = add_returning(value.first + j, amount);
      carry = old + amount < old ? 1u : 0u;
    }
  }
  std::uint32_t pending = carry - (value.negative ? 1u : 0u);  // 0, 1, or all ones (-1)
  for (int i = value.first + Width; pending != 0 && i < Limbs; ++i) {
    if (i == Limbs - 1) {
      add(i, pending);
      break;
    }
    const std::uint32_t old = add_returning(i, pending);
    // +1 carries on past a limb of all ones; -1 (adding all ones) borrows on past a limb of zero.
    pending = pending == 1u ? (old == 0xffffffffu ? 1u : 0u) : (old == 0u ? 0xffffffffu : 0u);
  }
}

/// A value given by its chunks as a window over the limbs below the top one.
template <int Limbs>
TALLY_HOST_DEVICE inline window<Limbs - 1> to_window(const chunks<Limbs>& value) {
  window<Limbs - 1> out;
  std::uint32_t any = 0;
  std::uint32_t carry = value.negative ? 1u : 0u;  // -m = ~m + 1
  for (int j = 0; j < Limbs - 1; ++j) {
    any |= value.part[j];
    const std::uint32_t t = (value.negative ? ~value.part[j] : value.part[j]) + carry;
    carry = t < carry ? 1u : 0u;
    out.part[j] = t;
  }
  out.negative = value.negative && any != 0;
  return out;
}

/// The window of two at limb `first` of a float's value mantissa * 2^shift with its sign, for
/// shift below 40 (the value below 2^63 in magnitude): the signed mantissa shifted, so that a
/// negative value's two's complement costs a subtraction, not a 64-bit negation.
TALLY_HOST_DEVICE inline window<2> float_window(std::uint32_t bits, std::uint32_t shift, int first) {
  const std::uint32_t sign = static_cast<std::uint32_t>(static_cast<std::int32_t>(bits) >> 31);  // all ones: negative
  const std::uint32_t mantissa = (bits & 0x7fffffu) | 0x800000u;
  const auto signed_mantissa = static_cast<std::int32_t>((mantissa ^ sign) - sign);
  const auto v = static_cast<std::uint64_t>(static_cast<std::int64_t>(signed_mantissa)) << shift;
  window<2> out;
  out.part[0] = static_cast<std::uint32_t>(v);
  out.part[1] = static_cast<std::uint32_t>(v >> 32);
  out.first = first;
  out.negative = sign != 0;
  return out;
}

/// The value of a window of two whose chunks are a 64-bit two's complement value (every float
/// weight's window), as a 128-bit integer: a lane can sum several weights' windows for one bin
/// first and add them once (window_of_wide).
TALLY_HOST_DEVICE inline fixed_point_weight::wide_int wide_of(const window<2>& value) {
  const auto chunk = static_cast<std::int64_t>((std::uint64_t{value.part[1]} << 32) | value.part[0]);
  const auto bits = static_cast<fixed_point_weight::wide_uint>(static_cast<fixed_point_weight::wide_int>(chunk));
  return static_cast<fixed_point_weight::wide_int>(bits << (32 * value.first));
}

/// A 128-bit two's complement value as a window of `Width` chunks at limb 0 (for limbs of `Width`:
/// the value within their range).
template <int Width>
TALLY_HOST_DEVICE inline window<Width> window_of_wide(fixed_point_weight::wide_int value) {
  static_assert(Width >= 1 && Width <= 4);
  window<Width> out;
  const auto bits = static_cast<fixed_point_weight::wide_uint>(value);
  for (int j = 0; j < Width; ++j) out.part[j] = static_cast<std::uint32_t>(bits >> (32 * j));
  out.negative = value < 0;
  return out;
}

/// A window of two at limb 0 for a 64-bit two's complement value.
TALLY_HOST_DEVICE inline window<2> window_of_bits(std::uint64_t v, int first = 0) {
  window<2> out;
  out.part[0] = static_cast<std::uint32_t>(v);
  out.part[1] = static_cast<std::uint32_t>(v >> 32);
  out.first = first;
  out.negative = static_cast<std::int64_t>(v) < 0;
  return out;
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

/// The window of a float weight's fixed-point value round(w * 2^32) where 2^-9 <= |w| < 2^31
/// (nearly every weight: w * 2^32 = mantissa * 2^(biased exponent - 118), no rounding); false for
/// any other, which fixed_window_of takes.
TALLY_HOST_DEVICE inline bool fixed_window_of_common_float(float w, window<2>& out) {
  std::uint32_t bits;
  std::memcpy(&bits, &w, sizeof(bits));
  const std::uint32_t shift = ((bits >> 23) & 0xffu) - 118u;
  if (shift >= 40u) return false;
  out = float_window(bits, shift, 0);
  return true;
}

/// The window of a weight's fixed-point value round(w * 2^32) (below 2^63 in magnitude: limbs 0
/// and 1, carries into the top limb), and the flags it raises instead (0 when it is a number). A
/// float's from its own bits in integer arithmetic, with a branch only where its value is rounded
/// (below 2^-9) and one for the flags; a double's through to_fixed, whose value it is for both.
TALLY_HOST_DEVICE inline std::uint32_t fixed_window_of(float w, window<2>& out) {
  std::uint32_t bits;
  std::memcpy(&bits, &w, sizeof(bits));
  const bool negative = (bits >> 31) != 0;
  const int biased = static_cast<int>((bits >> 23) & 0xff);
  if (biased >= 127 + 31) {  // |w| >= 2^31, infinities, NaN
    out = {};
    if (biased != 0xff) return fixed_point_weight::saw_out_of_range;
    if ((bits & 0x7fffffu) != 0) return fixed_point_weight::saw_nan;
    return negative ? fixed_point_weight::saw_minus_inf : fixed_point_weight::saw_plus_inf;
  }
  // A subnormal (biased 0) takes the leading bit too: shifted 118 places down, it rounds to 0 as
  // its value, below 2^-94, does.
  const std::uint32_t mantissa = (bits & 0x7fffffu) | 0x800000u;
  const int shift = biased - 150 + fixed_point_weight::fraction_bits;  // w * 2^32 = mantissa * 2^shift
  std::uint64_t m = 0;
  if (shift >= 0) {
    m = std::uint64_t{mantissa} << shift;  // below 2^63
  } else {
    // Round to nearest, ties to even, as the double path's conversion does; 25 places or more
    // leave less than half a unit: 0.
    const int k = -shift < 25 ? -shift : 25;
    const std::uint32_t kept = mantissa >> k;
    const std::uint32_t dropped = mantissa & ((1u << k) - 1);
    const std::uint32_t half = 1u << (k - 1);
    m = kept + ((dropped > half || (dropped == half && (kept & 1u) != 0)) ? 1u : 0u);
  }
  out = window_of_bits(negative ? 0 - m : m);
  return 0;
}
TALLY_HOST_DEVICE inline std::uint32_t fixed_window_of(double w, window<2>& out) {
  const fixed_point_weight::fixed_weight f = fixed_point_weight::to_fixed(w);
  out = f.flags == 0 ? window_of_bits((f.high << 32) | f.low) : window<2>{};
  return f.flags;
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

/// The window of w * 2^64 for a float weight with 2^-41 <= |w| < 2^31 (nearly every weight:
/// mantissa * 2^(biased exponent - 86), two chunks at the limb the exponent names); false for any
/// other, which exact_window_of takes.
TALLY_HOST_DEVICE inline bool exact_window_of_common_float(float w, window<2>& out) {
  std::uint32_t bits;
  std::memcpy(&bits, &w, sizeof(bits));
  const std::uint32_t shift = ((bits >> 23) & 0xffu) - 86u;
  if (shift >= 72u) return false;
  out = float_window(bits, shift & 31u, static_cast<int>(shift >> 5));
  return true;
}

/// The window of w * 2^64 for a weight on the grid (exact_chunks' rule), false for any other: a
/// float's from its own bits (two chunks at the limb its exponent names; one branch for zero,
/// subnormals and the weights past the grid's range, one for floats below 2^-41), a double's
/// (three chunks) through exact_chunks.
TALLY_HOST_DEVICE inline bool exact_window_of(float w, window<2>& out) {
  std::uint32_t bits;
  std::memcpy(&bits, &w, sizeof(bits));
  const int biased = static_cast<int>((bits >> 23) & 0xff);
  const std::uint32_t fraction = bits & 0x7fffffu;
  if (biased == 0 || biased >= 127 + 31) {  // zero and subnormals; 2^31 and up, infinities, NaN
    out = {};
    return biased == 0 && fraction == 0;  // zero adds nothing; subnormals are off the grid
  }
  const std::uint32_t mantissa = fraction | 0x800000u;
  const int shift = biased - 150 + exact_fraction_bits;  // w * 2^64 = mantissa * 2^shift, shift <= 71
  std::uint64_t placed = 0;
  int first = 0;
  if (shift >= 0) {
    first = shift >> 5;  // 0, 1 or 2: the window ends at the top limb at most
    placed = std::uint64_t{mantissa} << (shift & 31);  // below 2^55
  } else {
    if (shift <= -24 || (mantissa & ((1u << -shift) - 1)) != 0) return false;  // bits below 2^-64
    placed = mantissa >> -shift;
  }
  out = window_of_bits((bits >> 31) != 0 ? 0 - placed : placed, first);
  return true;
}
TALLY_HOST_DEVICE inline bool exact_window_of(double w, window<exact_limbs - 1>& out) {
  chunks<exact_limbs> value;
  if (!exact_chunks(w, value)) return false;
  out = to_window(value);
  return true;
}

/// The window exact_window_of gives a weight of type Weight.
template <class Weight>
using exact_window = window<std::is_same_v<Weight, float> ? 2 : exact_limbs - 1>;

/// A double-sum bin's exact part as the double nearest to it (one rounding).
TALLY_HOST_DEVICE inline double exact_to_double(const std::uint32_t (&limb)[exact_limbs]) {
  return fixed_point_weight::scaled_to_double(to_wide(limb), exact_fraction_bits);
}

}  // namespace tally::detail::limb_sum
