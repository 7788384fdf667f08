// Half-precision sample types, IEEE binary16 (`float16`) and bfloat16, as 16-bit storage that
// host code can use without CUDA's headers. Each is laid out as CUDA's __half and __nv_bfloat16
// (one 16-bit word), so device arrays of those pass as spans of these (as_samples). Every value
// converts exactly to float; comparisons are float comparisons (NaN unordered, -0 == +0).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>

#include "tally/config.hpp"

namespace tally {

namespace detail {

/// binary16 bits to float, exactly (NaN payloads kept in the top bits).
TALLY_HOST_DEVICE inline float float16_bits_to_float(std::uint16_t bits) {
#if defined(__CUDA_ARCH__)
  float value;
  asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(bits));
  return value;
#else
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  std::uint32_t word = sign;
  if (exponent == 0x1f) {
    word |= 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    word |= ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa != 0) {
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // a subnormal: exact in float
    return sign != 0 ? -magnitude : magnitude;
  }
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
#endif
}

/// bfloat16 bits to float: the top half of a float's bits.
TALLY_HOST_DEVICE inline float bfloat16_bits_to_float(std::uint16_t bits) {
  const std::uint32_t word = static_cast<std::uint32_t>(bits) << 16;
  float value;
  memcpy(&value, &word, sizeof(value));
  return value;
}

/// `x` rounded to the nearest value of a binary format with `digits` significand bits (the
/// leading one included), smallest normal 2^min_exponent and largest finite value `largest`,
/// ties to even, with subnormals; beyond the largest, +-infinity (IEEE conversion's rule). Done
/// in double on purpose: a double rounded to binary16 through float could round twice.
TALLY_HOST_DEVICE inline double round_to_format(double x, int digits, int min_exponent, double largest) {
  if (x == 0.0 || x - x != 0.0) return x;  // zeros, infinities and NaN stay
  int exponent = 0;
  (void)std::frexp(x, &exponent);  // |x| in [2^(exponent-1), 2^exponent)
  const int unit = (exponent > min_exponent + 1 ? exponent : min_exponent + 1) - digits;
  const double rounded = std::ldexp(std::rint(std::ldexp(x, -unit)), unit);  // rint: ties to even
  if (std::fabs(rounded) > largest) return x > 0 ? HUGE_VAL : -HUGE_VAL;  // HUGE_VAL: infinity, on the device too
  return rounded;
}

}  // namespace detail

/** @brief An IEEE binary16 sample (numpy's float16, CUDA's __half): 11 significant bits. */
struct float16 {
  std::uint16_t bits;  // no initializer: a trivial type, as __half is (float16{} is zero)

  static constexpr int digits = 11;
  static constexpr int min_exponent = -14;
  static constexpr double largest = 65504.0;

  TALLY_HOST_DEVICE explicit operator float() const { return detail::float16_bits_to_float(bits); }
  TALLY_HOST_DEVICE explicit operator double() const { return static_cast<double>(detail::float16_bits_to_float(bits)); }

  /// The nearest float16 to `x` (ties to even; beyond 65504 + 16, infinity).
  TALLY_HOST_DEVICE static float16 nearest(double x) {
    const double r = detail::round_to_format(x, digits, min_exponent, largest);
    return from_exact(r);
  }

  /// The float16 whose value is `x`, which must be one (a rounded value, zero, infinity or NaN).
  TALLY_HOST_DEVICE static float16 from_exact(double x) {
    float16 h;
    if (x != x) {
      h.bits = 0x7e00;
      return h;
    }
    const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double magnitude = std::fabs(x);
    if (magnitude == 0.0) {
      h.bits = sign;
    } else if (magnitude - magnitude != 0.0) {
      h.bits = static_cast<std::uint16_t>(sign | 0x7c00);
    } else if (magnitude < 0x1p-14) {
      h.bits = static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(magnitude * 0x1p24));
    } else {
      int exponent = 0;
      const double fraction = std::frexp(magnitude, &exponent);  // [0.5, 1)
      const auto mantissa = static_cast<std::uint16_t>((fraction * 2.0 - 1.0) * 1024.0);
      h.bits = static_cast<std::uint16_t>(sign | ((exponent - 1 + 15) << 10) | mantissa);
    }
    return h;
  }
};

/** @brief A bfloat16 sample (CUDA's __nv_bfloat16, torch.bfloat16): float's range, 8 significant bits. */
struct bfloat16 {
  std::uint16_t bits;  // no initializer: a trivial type, as __nv_bfloat16 is (bfloat16{} is zero)

  static constexpr int digits = 8;
  static constexpr int min_exponent = -126;
  static constexpr double largest = 0x1.fep127;

  TALLY_HOST_DEVICE explicit operator float() const { return detail::bfloat16_bits_to_float(bits); }
  TALLY_HOST_DEVICE explicit operator double() const { return static_cast<double>(detail::bfloat16_bits_to_float(bits)); }

  /// The nearest bfloat16 to `x` (ties to even; beyond the largest finite value, infinity).
  TALLY_HOST_DEVICE static bfloat16 nearest(double x) {
    const double r = detail::round_to_format(x, digits, min_exponent, largest);
    return from_exact(r);
  }

  /// The bfloat16 whose value is `x`, which must be one: its float's top 16 bits.
  TALLY_HOST_DEVICE static bfloat16 from_exact(double x) {
    const float f = static_cast<float>(x);  // exact: every bfloat16 is a float
    std::uint32_t word;
    memcpy(&word, &f, sizeof(word));
    bfloat16 b;
    b.bits = static_cast<std::uint16_t>(x != x ? 0x7fc0u : word >> 16);
    return b;
  }
};

/** @brief Whether T is one of tally's half-precision sample types. */
template <class T>
inline constexpr bool is_half_float_v = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

/** @brief Floating-point samples: float, double, float16 and bfloat16 (NaN and infinities left out). */
template <class T>
inline constexpr bool is_floating_sample_v = std::is_floating_point_v<T> || is_half_float_v<T>;

#define TALLY_HALF_COMPARISONS(T)                                                                                  \
  TALLY_HOST_DEVICE inline bool operator<(T a, T b) { return static_cast<float>(a) < static_cast<float>(b); }    \
  TALLY_HOST_DEVICE inline bool operator<=(T a, T b) { return static_cast<float>(a) <= static_cast<float>(b); }  \
  TALLY_HOST_DEVICE inline bool operator>(T a, T b) { return static_cast<float>(a) > static_cast<float>(b); }    \
  TALLY_HOST_DEVICE inline bool operator>=(T a, T b) { return static_cast<float>(a) >= static_cast<float>(b); }  \
  TALLY_HOST_DEVICE inline bool operator==(T a, T b) { return static_cast<float>(a) == static_cast<float>(b); }  \
  TALLY_HOST_DEVICE inline bool operator!=(T a, T b) { return static_cast<float>(a) != static_cast<float>(b); }
TALLY_HALF_COMPARISONS(float16)
TALLY_HALF_COMPARISONS(bfloat16)
#undef TALLY_HALF_COMPARISONS

/**
 * @brief A span of CUDA's (or any other library's) 16-bit floats as tally samples: `Storage` must
 * be a 2-byte type laid out as `Half` (__half as float16, __nv_bfloat16 as bfloat16).
 */
template <class Half, class Storage>
std::span<const Half> as_samples(std::span<const Storage> values) {
  static_assert(is_half_float_v<Half> && sizeof(Storage) == sizeof(Half), "a 16-bit float as float16 or bfloat16");
  return {reinterpret_cast<const Half*>(values.data()), values.size()};
}

}  // namespace tally
