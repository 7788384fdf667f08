// The CPU backend's reduce, count_if and find_first_if, with the same five strategies as its
// histograms: OpenMP's critical, atomic and reduction clause applied to one result.
// Host-only: no CUDA header is included here.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tally/cpu/parallel.hpp"
#include "tally/detail/fixed_point_sum.hpp"
#include "tally/detail/validate.hpp"
#include "tally/reduce.hpp"

namespace tally::cpu {

namespace detail {

inline choice choose_reduction(strategy requested, std::uint64_t num_samples) {
  if (const auto early = asked_or_sequential(requested, num_samples)) return *early;
  return {strategy::reduction, "one private partial per thread, combined once: no contention"};
}

/// What every reduction-like call checks first (samples not null, a strategy the CPU has for `op`),
/// then the strategy it runs.
template <class T>
choice check_and_choose(std::string_view function, operation op, std::span<const T> samples, strategy requested) {
  tally::detail::check_not_null(function, "samples", samples);
  tally::detail::check_strategy(function, backend::cpu, op, requested);
  return choose_reduction(requested, samples.size());
}

/// Combines `value` into `*target` with a compare-and-swap loop: the general atomic update.
template <class A, class Combine>
void atomic_combine(A& target, A value, Combine combine) {
  std::atomic_ref<A> ref(target);
  A old = ref.load(std::memory_order_relaxed);
  while (!ref.compare_exchange_weak(old, combine(old, value), std::memory_order_relaxed)) {
  }
}

/// The OpenMP reduction clause itself: `+`, `min` or `max` on a private copy per thread. Integer
/// sums run in the unsigned type, so they wrap as documented instead of overflowing; NaN is
/// tracked by a second `||` reduction, because OpenMP's min/max leave NaN unspecified.
template <class A, class Element>
A fold_with_clause(reduce_op kind, std::int64_t n, A identity, Element element) {
  if (kind == reduce_op::sum) {
    if constexpr (std::is_integral_v<A>) {
      using U = std::make_unsigned_t<A>;
      U total = static_cast<U>(identity);
#pragma omp parallel for reduction(+ : total)
      for (std::int64_t i = 0; i < n; ++i) total += static_cast<U>(element(i));
      return static_cast<A>(total);
    } else {
      A total = identity;
#pragma omp parallel for reduction(+ : total)
      for (std::int64_t i = 0; i < n; ++i) total += element(i);
      return total;
    }
  }
  // min and max compare in the type `element` gives (the samples' own, where the caller gives it:
  // exact; an int32 minimum of 10^7 samples took 3.6 ms on 2 cores compared in int64, 1.8 in int32).
  using Value = std::remove_cvref_t<decltype(element(std::int64_t{0}))>;
  Value result = static_cast<Value>(identity);
  bool saw_nan = false;
  if (kind == reduce_op::min) {
#pragma omp parallel for reduction(min : result) reduction(|| : saw_nan)
    for (std::int64_t i = 0; i < n; ++i) {
      const Value value = element(i);
      saw_nan = saw_nan || tally::detail::is_nan(value);
      if (value < result) result = value;
    }
  } else {
#pragma omp parallel for reduction(max : result) reduction(|| : saw_nan)
    for (std::int64_t i = 0; i < n; ++i) {
      const Value value = element(i);
      saw_nan = saw_nan || tally::detail::is_nan(value);
      if (result < value) result = value;
    }
  }
  if constexpr (std::is_floating_point_v<Value>) {
    if (saw_nan) return std::numeric_limits<A>::quiet_NaN();
  }
  return static_cast<A>(result);
}

/// Folds `element(i)` for i in [0, n) with `combine` (which computes `kind`) using strategy `s`.
template <class A, class Element, class Combine>
A fold(strategy s, reduce_op kind, std::int64_t n, A identity, Element element, Combine combine) {
  A result = identity;
  switch (s) {
    case strategy::critical:
#pragma omp parallel for
      for (std::int64_t i = 0; i < n; ++i) {
        const A value = element(i);
#pragma omp critical(tally_reduce)
        result = combine(result, value);
      }
      break;
    case strategy::atomic:
#pragma omp parallel for
      for (std::int64_t i = 0; i < n; ++i) atomic_combine(result, static_cast<A>(element(i)), combine);
      break;
    case strategy::privatized: {
      std::vector<A> partials(static_cast<std::size_t>(max_threads()), identity);
#pragma omp parallel
      {
        A mine = identity;
#pragma omp for schedule(static)
        for (std::int64_t i = 0; i < n; ++i) mine = combine(mine, element(i));
        partials[static_cast<std::size_t>(thread_num())] = mine;
      }
      for (const A& partial : partials) result = combine(result, partial);
      break;
    }
    case strategy::reduction: return fold_with_clause<A>(kind, n, identity, element);
    default:
      for (std::int64_t i = 0; i < n; ++i) result = combine(result, element(i));
      break;
  }
  return result;
}

/// The deterministic float/double sum (reduce_options::deterministic; the arithmetic is in
/// tally/detail/fixed_point_sum.hpp): chunks by index, each summed exactly, added exactly into
/// one wide integer; threads take whole chunks and merge their wide integers at the end, which
/// integer addition makes independent of the thread count and order.
template <class T>
T deterministic_sum(std::span<const T> samples, bool parallel) {
  namespace fp = tally::detail::fixed_point;
  constexpr int digits = fp::digits<T>;
  const auto n = static_cast<std::int64_t>(samples.size());
  const std::int64_t chunks = (n + fp::chunk_size<T> - 1) / fp::chunk_size<T>;
  std::int64_t slots[digits] = {};
  std::uint32_t flags = 0;
  const auto add_chunk = [&](std::int64_t k, std::int64_t* into, std::uint32_t& into_flags) {
    const std::int64_t begin = k * fp::chunk_size<T>;
    fp::add_chunk_of(samples.data() + begin, std::min(fp::chunk_size<T>, n - begin), into, into_flags);
  };
  if (!parallel) {
    for (std::int64_t k = 0; k < chunks; ++k) add_chunk(k, slots, flags);
  } else {
#pragma omp parallel
    {
      std::int64_t mine[digits] = {};
      std::uint32_t my_flags = 0;
#pragma omp for schedule(static)
      for (std::int64_t k = 0; k < chunks; ++k) add_chunk(k, mine, my_flags);
#pragma omp critical(tally_deterministic_merge)
      {
        for (int j = 0; j < digits; ++j) slots[j] += mine[j];
        flags |= my_flags;
      }
    }
  }
  return fp::round_slots<T>(slots, flags);
}

/// Checks reduce_options::deterministic against the strategy: honoured by sequential and
/// privatized (and automatic, which picks one of them), refused by the others.
inline void check_deterministic(std::string_view function, strategy s, std::uint64_t num_samples) {
  if (s == strategy::critical || s == strategy::atomic || s == strategy::reduction) {
    throw error(errc::not_supported, "deterministic",
                std::string(function) + ": option 'deterministic' is set, which strategy '" +
                    std::string(to_string(s)) +
                    "' cannot honour (its float additions happen in thread order); use sequential, privatized or "
                    "automatic");
  }
  if (num_samples > max_deterministic_samples) {
    throw_invalid_argument(function, "samples",
                           "has " + std::to_string(num_samples) +
                               " samples; a deterministic sum takes at most 2^38 (set deterministic = false)");
  }
}

}  // namespace detail

/**
 * @brief Sum, min or max of `samples`. Integer results are exact; min/max return NaN if any
 * sample is NaN; float sums depend on the order the strategy adds in, unless
 * `options.deterministic` is set (see reduce_options): then the bits are those of the GPU.
 */
template <class T>
reduce_result<T> reduce(std::span<const T> samples, reduce_op op, const reduce_options& options = {}) {
  static_assert(is_reduce_sample_v<T>, "reduce samples: the types of is_reduce_sample_v (tally/reduce.hpp)");
  constexpr std::string_view function = "tally::cpu::reduce";
  return reporting_host_memory_shortage(function, [&]() -> reduce_result<T> {
    choice chose = detail::check_and_choose(function, operation::reduce, samples, options.algorithm);
    using A = accumulator_t<T>;
    if constexpr (is_floating_sample_v<T>) {
      if (options.deterministic && op == reduce_op::sum) {
        detail::check_deterministic(function, options.algorithm, samples.size());
        if (chose.used == strategy::reduction) {
          chose = {strategy::privatized, "deterministic: whole chunks per thread, exact integer partials merged"};
        }
        const bool parallel = chose.used == strategy::privatized;
        if constexpr (is_half_float_v<T>) {
          // Their sums are float's: the deterministic float sum of the values, widened exactly
          // (the GPU widens them the same way, so the bits agree).
          std::vector<float> widened(samples.size());
          std::transform(samples.begin(), samples.end(), widened.begin(), [](T x) { return static_cast<float>(x); });
          return {detail::deterministic_sum(std::span<const float>(widened), parallel), chose};
        } else {
          return {detail::deterministic_sum(samples, parallel), chose};
        }
      }
    }
    const auto combine = [op](A a, A b) { return tally::detail::reduce_combine<T>(op, a, b); };
    // Integer samples come as they are (fold widens them where it adds; min and max compare them
    // in their own type, exactly), others in A.
    const A value = detail::fold<A>(chose.used, op, static_cast<std::int64_t>(samples.size()),
                                    tally::detail::reduce_identity<T>(op), [&](std::int64_t i) {
                                      if constexpr (std::is_integral_v<T>) {
                                        return samples[i];
                                      } else {
                                        return static_cast<A>(samples[i]);
                                      }
                                    }, combine);
    return {value, chose};
  });
}

/** @brief How many samples satisfy `predicate`. */
template <class T, class Predicate>
count_result count_if(std::span<const T> samples, Predicate predicate, const reduce_options& options = {}) {
  const choice chose =
      detail::check_and_choose("tally::cpu::count_if", operation::count_if, samples, options.algorithm);
  const std::uint64_t count = detail::fold<std::uint64_t>(
      chose.used, reduce_op::sum, static_cast<std::int64_t>(samples.size()), 0,
      [&](std::int64_t i) -> std::uint64_t { return predicate(samples[i]) ? 1 : 0; },
      [](std::uint64_t a, std::uint64_t b) { return a + b; });
  return {count, chose};
}

/**
 * @brief The index of the first sample that satisfies `predicate`, or samples.size() if none.
 * The input is searched in windows, in order, so the search stops at the first window that
 * holds a match.
 */
template <class T, class Predicate>
find_result find_first_if(std::span<const T> samples, Predicate predicate, const reduce_options& options = {}) {
  const choice chose =
      detail::check_and_choose("tally::cpu::find_first_if", operation::find_first_if, samples, options.algorithm);
  const auto n = static_cast<std::int64_t>(samples.size());
  const std::int64_t window = std::int64_t{1} << 16 << (chose.used == strategy::sequential ? 0 : 4);
  for (std::int64_t base = 0; base < n; base += window) {
    const std::int64_t length = std::min(window, n - base);
    const std::int64_t first = detail::fold<std::int64_t>(
        chose.used, reduce_op::min, length, n,
        [&](std::int64_t i) { return predicate(samples[base + i]) ? base + i : n; },
        [](std::int64_t a, std::int64_t b) { return std::min(a, b); });
    if (first < n) return {first, chose};
  }
  return {n, chose};
}

}  // namespace tally::cpu
