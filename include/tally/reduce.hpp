// Types shared by reduce, count_if and find_first_if on both backends: the operations, the
// accumulator each sample type sums into, the NaN rule for min/max, and a comparison predicate
// the compiled GPU library instantiates (the CPU backend and the .cuh templates take any callable).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "tally/config.hpp"
#include "tally/small_float.hpp"
#include "tally/strategy.hpp"

namespace tally {

/** @brief The reductions `reduce` computes. */
enum class reduce_op : std::uint8_t { sum, min, max };

/** @brief The sample types `reduce` accepts. */
template <class T>
inline constexpr bool is_reduce_sample_v =
    std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::int16_t> || std::is_same_v<T, std::uint16_t> ||
    std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::uint32_t> || std::is_same_v<T, std::int64_t> ||
    std::is_same_v<T, float> || std::is_same_v<T, double> || is_half_float_v<T>;

/**
 * @brief What sums accumulate in: integers of up to 32 bits widen to 64 bits (2^28 int32 samples
 * overflow int32), 64-bit integers wrap modulo 2^64, float and double sum in their own precision,
 * and float16 and bfloat16 in float (their own 11 or 8 bits would lose a sum's low digits at the
 * first thousands of samples). min and max come back in the same type, converted exactly.
 */
template <class T>
using accumulator_t = std::conditional_t<
    std::is_integral_v<T> && sizeof(T) <= 4, std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>,
    std::conditional_t<is_half_float_v<T>, float, T>>;

/** @brief The result of `reduce`. */
template <class T>
struct reduce_result {
  accumulator_t<T> value{};  ///< the sum, or the min or max (converted losslessly)
  choice chose;
};

/** @brief The result of count_if (both backends). */
struct count_result {
  std::uint64_t count = 0;
  choice chose;
};

/** @brief The result of find_first_if (both backends): `index` is the input's size when nothing matches. */
struct find_result {
  std::int64_t index = 0;
  choice chose;
};

/**
 * @brief Options for reduce, count_if and find_first_if.
 *
 * `deterministic` (float and double sums; a no-op everywhere else, since integer sums and every
 * min/max are exact in any order): the result's bits depend only on the input values and their
 * count, not on the run, the launch shape, the strategy asked for or the backend. Each chunk of
 * 512 floats (256 doubles), cut by index, is summed exactly as fixed-point integers on a grid set
 * by the chunk's largest exponent, and the chunk sums are added exactly into one wide integer,
 * rounded once at the end. Error: |result - exact| <= ulp(result)/2 + n * 2^-54 * max|x| for
 * float, ulp(result)/2 + n * 2^-119 * max|x| for double (each sample is rounded to the nearest
 * multiple of 2^-53, resp. 2^-118, times the largest power of two in its chunk: 30, resp. 66,
 * bits below the chunk's largest ulp). Any NaN, or both +inf and -inf, gives NaN; infinities of
 * one sign give that infinity; a finite sum beyond the type's range rounds to +-inf; an exact
 * zero is +0.
 * Strategies: GPU automatic, block_reduce_atomic and two_phase honour it (the same arithmetic,
 * the block results combined with integer atomics or by a second kernel); GPU atomic,
 * atomic_per_thread and cub, and CPU critical, atomic and reduction, refuse it (errc::not_supported,
 * naming `deterministic`). CPU sequential, privatized and automatic honour it with the same bits.
 * At most 2^38 samples (the exact accumulator's 64-bit digits could overflow beyond).
 *
 * `max_blocks` and `block_threads` bound the launch shape of tally's own GPU kernels (0: sized to
 * the device; block_threads must be a multiple of 32 up to 1024). They exist for tuning and for
 * tests that run one computation under several launch shapes; cub and the CPU backend ignore them.
 */
struct reduce_options {
  strategy algorithm = strategy::automatic;
  bool deterministic = false;  ///< float/double sums: bits independent of run, launch and strategy
  int max_blocks = 0;          ///< GPU: at most this many blocks (0: as many as fill the device)
  int block_threads = 0;       ///< GPU: threads per block (0: the tuned default)
};

/** @brief The largest input a deterministic sum accepts (its 64-bit digits cannot overflow below it). */
inline constexpr std::uint64_t max_deterministic_samples = std::uint64_t{1} << 38;

namespace detail {
template <class T>
TALLY_HOST_DEVICE constexpr bool is_nan(T x) {
  if constexpr (is_floating_sample_v<T>) {
    return x != x;
  } else {
    return false;
  }
}

/// The neutral element: 0 for sum; for min/max the extreme value (infinity for floats), so an
/// empty input gives it back.
template <class T>
TALLY_HOST_DEVICE constexpr accumulator_t<T> reduce_identity(reduce_op op) {
  using A = accumulator_t<T>;
  if (op == reduce_op::sum) return A{};
  if constexpr (is_floating_sample_v<T>) {
    return op == reduce_op::min ? std::numeric_limits<A>::infinity() : -std::numeric_limits<A>::infinity();
  } else {
    return op == reduce_op::min ? static_cast<A>(std::numeric_limits<T>::max())
                                : static_cast<A>(std::numeric_limits<T>::lowest());
  }
}

/// Combines two partial results. min/max propagate NaN (any NaN sample makes the result NaN), so
/// the answer does not depend on the order of evaluation; 64-bit integer sums wrap.
template <class T>
TALLY_HOST_DEVICE constexpr accumulator_t<T> reduce_combine(reduce_op op, accumulator_t<T> a, accumulator_t<T> b) {
  using A = accumulator_t<T>;
  if (op == reduce_op::sum) {
    if constexpr (std::is_integral_v<A>) {
      using U = std::make_unsigned_t<A>;
      return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
  if (is_nan(a)) return a;
  if (is_nan(b)) return b;
  if (op == reduce_op::min) return b < a ? b : a;
  return a < b ? b : a;
}
}  // namespace detail

/** @brief How `compare_to` compares a sample with its value. */
enum class comparison : std::uint8_t { less, less_equal, greater, greater_equal, equal, not_equal };

/** @brief A predicate `x <op> value`, usable on host and device (NaN compares false, except !=). */
template <class T>
struct compare_to {
  comparison op = comparison::equal;
  T value{};

  TALLY_HOST_DEVICE constexpr bool operator()(T x) const {
    switch (op) {
      case comparison::less: return x < value;
      case comparison::less_equal: return x <= value;
      case comparison::greater: return x > value;
      case comparison::greater_equal: return x >= value;
      case comparison::equal: return x == value;
      case comparison::not_equal: return x != value;
    }
    return false;
  }
};

}  // namespace tally
