// The arithmetic of the deterministic floating-point sum, shared by the GPU kernels and the CPU
// backend so that both produce the same bits (host and device code; no CUDA header needed).
//
// The idea. The input is cut, by index, into chunks of `traits<T>::chunk_size` samples (a
// constant: 512 floats, 256 doubles), wherever it lies in memory and however it is launched.
//  1. Each chunk finds its largest biased exponent e (subnormals and zeros count as 1; NaN and
//     infinities are set aside, see below). Every sample of the chunk is then rounded to the
//     nearest multiple of the chunk's unit 2^q(e), q(e) = e - bias - mantissa_bits - guard_bits,
//     and held as an integer: a fixed-point number. guard_bits is chosen so that the integers of
//     a whole chunk add up without overflow in `chunk_sum` (int64 for float, int128 for double):
//     chunk_size * 2^(mantissa_bits + 1 + guard_bits) <= 2^(bits of chunk_sum - 1).
//     Integer addition is exact and associative, so the chunk's sum S is the same whichever
//     thread or lane adds which sample.
//  2. S * 2^q(e) is added, exactly, into a wide integer: `digits` 64-bit slots, slot j weighing
//     2^(32 j + q(1)), each S split into 32-bit pieces added to three (float) or five (double)
//     consecutive slots. Again integer addition: any order, any grouping, the same slots.
//  3. The wide integer is rounded once, to nearest (ties to even), into T.
// So the only rounding before the last is step 1's, at most half a unit per sample: 2^-54 (float)
// or 2^-119 (double) times the largest power of two in the sample's chunk, hence at most
// n * 2^-54 * max|x| (float) or n * 2^-119 * max|x| (double) in all, plus ulp(result)/2.
//
// Specials: NaN in any sample, or +inf and -inf both present, gives NaN; infinities of one sign
// give that infinity; a finite sum beyond T's range rounds to +-inf; an exact zero gives +0.
// Each slot takes less than 2^33 per chunk, so 2^38 samples (2^30 chunks) cannot overflow it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tally/config.hpp"

namespace tally::detail::fixed_point {

// round_slots runs once per call on one GPU thread: its loops stay loops there (unrolled, the
// digit arrays of double would not fit in registers and spill).
#if defined(__CUDA_ARCH__)
#define TALLY_LOOP_NO_UNROLL _Pragma("unroll 1")
#else
#define TALLY_LOOP_NO_UNROLL
#endif

template <class T>
struct traits;

template <>
struct traits<float> {
  using bits_type = std::uint32_t;
  using chunk_sum = std::int64_t;
  static constexpr int mantissa_bits = 23;
  static constexpr int exponent_bias = 127;
  static constexpr int chunk_log2 = 9;  // 512 samples: one warp, 4 16-byte loads per lane
  static constexpr int guard_bits = 30;
  /// The word of the bits that holds the exponent (all of a float), and its shift.
  static constexpr int exponent_shift_in_top = 23;
  TALLY_HOST_DEVICE static std::uint32_t top_word(bits_type b) { return b; }
};

template <>
struct traits<double> {
  using bits_type = std::uint64_t;
  __extension__ using chunk_sum = __int128;  // GCC/Clang and nvcc device code: a two-word integer
  static constexpr int mantissa_bits = 52;
  static constexpr int exponent_bias = 1023;
  static constexpr int chunk_log2 = 8;  // 256 samples: one warp, 4 16-byte loads per lane
  static constexpr int guard_bits = 66;
  static constexpr int exponent_shift_in_top = 20;
  TALLY_HOST_DEVICE static std::uint32_t top_word(bits_type b) { return static_cast<std::uint32_t>(b >> 32); }
};

template <class T>
inline constexpr std::int64_t chunk_size = std::int64_t{1} << traits<T>::chunk_log2;

/// The largest finite biased exponent.
template <class T>
inline constexpr int max_exponent = 2 * traits<T>::exponent_bias;

/// The magnitude bits of the top word at and above which a sample is NaN or infinite.
template <class T>
inline constexpr std::uint32_t special_top = std::uint32_t{0x7fffffffu} >> traits<T>::exponent_shift_in_top
                                                                          << traits<T>::exponent_shift_in_top;

template <class T>
inline constexpr int chunk_sum_bits = static_cast<int>(sizeof(typename traits<T>::chunk_sum)) * 8;

static_assert(traits<float>::guard_bits ==
              chunk_sum_bits<float> - 1 - (traits<float>::mantissa_bits + 1) - traits<float>::chunk_log2);
static_assert(traits<double>::guard_bits ==
              chunk_sum_bits<double> - 1 - (traits<double>::mantissa_bits + 1) - traits<double>::chunk_log2);

/// Exponent of the unit of the slots' bit 0: q(1) (float -179, double -1140).
template <class T>
inline constexpr int lowest_unit_exponent =
    1 - traits<T>::exponent_bias - traits<T>::mantissa_bits - traits<T>::guard_bits;

/// Slots of the wide accumulator: a chunk with exponent e lands at bit e - 1 and spans
/// chunk_sum_bits + 31 bits (float 10 slots, double 68).
template <class T>
inline constexpr int digits = (max_exponent<T> - 1) / 32 + (chunk_sum_bits<T> + 31 + 31) / 32;

/// Flags of samples set aside from the finite sum.
enum special_flag : std::uint32_t { saw_nan = 1, saw_plus_inf = 2, saw_minus_inf = 4 };

template <class T>
TALLY_HOST_DEVICE inline typename traits<T>::bits_type to_bits(T x) {
  typename traits<T>::bits_type b;
  memcpy(&b, &x, sizeof(b));
  return b;
}

template <class T>
TALLY_HOST_DEVICE inline T from_bits(typename traits<T>::bits_type b) {
  T x;
  memcpy(&x, &b, sizeof(x));
  return x;
}

/// The biased exponent a chunk uses for its grid, from the largest |x| top word of its finite
/// samples (0 when empty): at least 1, so that subnormals share the smallest normal's grid.
template <class T>
TALLY_HOST_DEVICE inline int chunk_exponent(std::uint32_t max_finite_top) {
  const int e = static_cast<int>(max_finite_top >> traits<T>::exponent_shift_in_top);
  return e < 1 ? 1 : e;
}

/// What a special (NaN or infinite) sample adds to the flags; 0 for a finite one.
template <class T>
TALLY_HOST_DEVICE inline std::uint32_t special_flags(T x) {
  const std::uint32_t top = traits<T>::top_word(to_bits(x));
  if ((top & 0x7fffffffu) < special_top<T>) return 0;
  if (x != x) return saw_nan;
  return x > 0 ? saw_plus_inf : saw_minus_inf;
}

/// A finite sample as an integer multiple of its chunk's unit 2^q(e), rounded to nearest: the
/// only rounding before the final one. |result| <= (2^(mantissa_bits+1) - 1) * 2^guard_bits.
TALLY_HOST_DEVICE inline std::int64_t to_fixed(float x, int e) {
  // x * 2^p with p = -q(e) = 180 - e in [-74, 179], as two exact power-of-two scalings (neither
  // factor overflows float). Scaling up is exact; scaling down can only lose bits of a product
  // below 2^-126, which rounds to 0 anyway. The conversion rounds to nearest, ties to even.
  const int p = -(e - traits<float>::exponent_bias - traits<float>::mantissa_bits - traits<float>::guard_bits);
  const int half = p >> 1;
  const float scale_a = from_bits<float>(static_cast<std::uint32_t>(half + 127) << 23);
  const float scale_b = from_bits<float>(static_cast<std::uint32_t>(p - half + 127) << 23);
  const float scaled = x * scale_a * scale_b;
#if defined(__CUDA_ARCH__)
  return __float2ll_rn(scaled);
#else
  return std::llrint(scaled);
#endif
}

/// The same for double, in integers: the significand shifted onto the grid, ties away from zero.
TALLY_HOST_DEVICE inline traits<double>::chunk_sum to_fixed(double x, int e) {
  using wide = traits<double>::chunk_sum;
  __extension__ using unsigned_wide = unsigned __int128;
  const std::uint64_t b = to_bits(x);
  const int biased = static_cast<int>((b >> 52) & 0x7ff);
  const std::uint64_t significand = (b & ((std::uint64_t{1} << 52) - 1)) | (biased != 0 ? std::uint64_t{1} << 52 : 0);
  int drop = e - (biased < 1 ? 1 : biased);  // >= 0: e is the chunk's largest exponent
  if (drop > 127) drop = 127;
  // x / 2^q(e) = significand * 2^(guard_bits - drop); one extra bit below, for rounding.
  const unsigned_wide twice = static_cast<unsigned_wide>(significand) << (traits<double>::guard_bits + 1);
  const auto magnitude = static_cast<wide>(((twice >> drop) + 1) >> 1);
  return (b >> 63) != 0 ? -magnitude : magnitude;
}

/// slots[j..j+2] += value * 2^shift (shift < 32), split into 32-bit pieces; the top piece signed.
TALLY_HOST_DEVICE inline void add_signed(std::int64_t* slots, int j, int shift, std::int64_t value) {
  __extension__ using wide = __int128;
  const wide shifted = static_cast<wide>(value) << shift;  // C++20: shifts of negatives are defined
  slots[j] += static_cast<std::int64_t>(static_cast<std::uint32_t>(shifted));
  slots[j + 1] += static_cast<std::int64_t>(static_cast<std::uint32_t>(shifted >> 32));
  slots[j + 2] += static_cast<std::int64_t>(shifted >> 64);
}

TALLY_HOST_DEVICE inline void add_unsigned(std::int64_t* slots, int j, int shift, std::uint64_t value) {
  __extension__ using unsigned_wide = unsigned __int128;
  const unsigned_wide shifted = static_cast<unsigned_wide>(value) << shift;
  slots[j] += static_cast<std::int64_t>(static_cast<std::uint32_t>(shifted));
  slots[j + 1] += static_cast<std::int64_t>(static_cast<std::uint32_t>(shifted >> 32));
  slots[j + 2] += static_cast<std::int64_t>(shifted >> 64);
}

/// Adds a chunk's exact sum `sum` * 2^q(e) to the slots (weights 2^(32 j + q(1))).
TALLY_HOST_DEVICE inline void add_chunk(std::int64_t* slots, int e, std::int64_t sum) {
  const int bit = e - 1;
  add_signed(slots, bit >> 5, bit & 31, sum);
}

TALLY_HOST_DEVICE inline void add_chunk(std::int64_t* slots, int e, traits<double>::chunk_sum sum) {
  const int bit = e - 1;
  add_unsigned(slots, bit >> 5, bit & 31, static_cast<std::uint64_t>(sum));
  add_signed(slots, (bit >> 5) + 2, bit & 31, static_cast<std::int64_t>(sum >> 64));
}

/// Adds the chunk `x[0..count)` (count <= chunk_size<T>) to the slots and flags, one sample at a
/// time: the CPU backend's loop, and the reference the GPU's warp-wide version must equal.
template <class T>
inline void add_chunk_of(const T* x, std::int64_t count, std::int64_t* slots, std::uint32_t& flags) {
  std::uint32_t max_top = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint32_t top = traits<T>::top_word(to_bits(x[i])) & 0x7fffffffu;
    if (top >= special_top<T>) {
      flags |= special_flags(x[i]);
    } else if (top > max_top) {
      max_top = top;
    }
  }
  const int e = chunk_exponent<T>(max_top);
  typename traits<T>::chunk_sum sum = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    if (special_flags(x[i]) == 0) sum += to_fixed(x[i], e);
  }
  add_chunk(slots, e, sum);
}

/// The slots' value rounded once to T (nearest, ties to even), or the special result the flags
/// call for.
template <class T>
TALLY_HOST_DEVICE T round_slots(const std::int64_t* slots, std::uint32_t flags) {
  using bits_type = typename traits<T>::bits_type;
  constexpr bool is_float = sizeof(T) == 4;
  if ((flags & saw_nan) != 0 || (flags & (saw_plus_inf | saw_minus_inf)) == (saw_plus_inf | saw_minus_inf)) {
    return from_bits<T>(is_float ? bits_type(0x7fc00000u) : bits_type(0x7ff8000000000000ull));
  }
  if ((flags & saw_plus_inf) != 0) return from_bits<T>(is_float ? bits_type(0x7f800000u) : bits_type(0x7ff0000000000000ull));
  if ((flags & saw_minus_inf) != 0) {
    return from_bits<T>(is_float ? bits_type(0xff800000u) : bits_type(0xfff0000000000000ull));
  }

  // Carry-propagate into 32-bit digits; two more digits hold the signed remainder.
  constexpr int n = digits<T> + 2;
  std::uint32_t magnitude[n];
  std::int64_t carry = 0;
  TALLY_LOOP_NO_UNROLL
  for (int j = 0; j < digits<T>; ++j) {
    const std::int64_t v = slots[j] + carry;  // |slots| < 1.5 * 2^62, so no overflow
    magnitude[j] = static_cast<std::uint32_t>(v);
    carry = v >> 32;  // arithmetic: floor division
  }
  magnitude[n - 2] = static_cast<std::uint32_t>(carry);
  magnitude[n - 1] = static_cast<std::uint32_t>(static_cast<std::uint64_t>(carry) >> 32);
  const bool negative = carry < 0;
  if (negative) {  // two's complement over all digits: invert, add one
    std::uint64_t add = 1;
    TALLY_LOOP_NO_UNROLL
    for (int j = 0; j < n; ++j) {
      const std::uint64_t v = static_cast<std::uint64_t>(~magnitude[j]) + add;
      magnitude[j] = static_cast<std::uint32_t>(v);
      add = v >> 32;
    }
  }
  int top = -1;  // index of the highest set bit
  TALLY_LOOP_NO_UNROLL
  for (int j = n - 1; j >= 0 && top < 0; --j) {
    if (magnitude[j] != 0) {
      int b = 31;
      while (((magnitude[j] >> b) & 1u) == 0) --b;
      top = 32 * j + b;
    }
  }
  if (top < 0) return T(0);
  // The kept bits: from the top down to the least significant bit T has at this exponent.
  constexpr int min_lsb_exponent = 1 - traits<T>::exponent_bias - traits<T>::mantissa_bits;
  const int top_exponent = top + lowest_unit_exponent<T>;
  int lsb_exponent = top_exponent - traits<T>::mantissa_bits;
  if (lsb_exponent < min_lsb_exponent) lsb_exponent = min_lsb_exponent;  // subnormal result
  const int lsb = lsb_exponent - lowest_unit_exponent<T>;  // >= 30: the slots are finer than T
  // Word by word (a bit at a time would loop over some 2000 bits for double): the kept bits
  // (at most mantissa_bits + 1 <= 53, starting at bit lsb & 31 of digit lsb >> 5) lie within
  // three digits; the round bit is bit lsb - 1; sticky is any bit below it.
  __extension__ using unsigned_wide = unsigned __int128;
  const int first = lsb >> 5;
  unsigned_wide window = 0;
  for (int k = 2; k >= 0; --k) window = (window << 32) | (first + k < n ? magnitude[first + k] : 0u);
  const int kept_bits = top - lsb + 1;  // may be <= 0: the value is below T's smallest step
  std::uint64_t kept = kept_bits <= 0 ? 0 : static_cast<std::uint64_t>(window >> (lsb & 31)) &
                                                 ((std::uint64_t{1} << kept_bits) - 1);
  const int round_at = lsb - 1;
  const bool round_bit = ((magnitude[round_at >> 5] >> (round_at & 31)) & 1u) != 0;
  bool sticky = (magnitude[round_at >> 5] & ((std::uint32_t{1} << (round_at & 31)) - 1u)) != 0;
  TALLY_LOOP_NO_UNROLL
  for (int j = 0; j < (round_at >> 5) && !sticky; ++j) sticky = magnitude[j] != 0;
  if (round_bit && (sticky || (kept & 1u) != 0)) ++kept;  // may reach 2^(mantissa_bits+1): still exact
  // kept < 2^54 is exact in T's significand after rounding; the scaling overflows to inf as it should.
  T value;
#if defined(__CUDA_ARCH__)
  if constexpr (is_float) {
    value = ldexpf(static_cast<float>(kept), lsb_exponent);
  } else {
    value = ldexp(static_cast<double>(kept), lsb_exponent);
  }
#else
  value = std::ldexp(static_cast<T>(kept), lsb_exponent);
#endif
  return negative ? -value : value;
}

}  // namespace tally::detail::fixed_point
