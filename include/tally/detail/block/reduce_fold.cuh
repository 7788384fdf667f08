// What a reduction kernel folds, as one vocabulary for reduce and count_if: a "fold" says how a
// sample becomes a value (lift), how two values combine, the identity, and the device atomic
// that combines a value into the one result (tally/atomic.cuh for float min/max). Plus the
// per-thread fold over the vectorized walk.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda/atomic>

#include "tally/atomic.cuh"
#include "tally/detail/block/vectorized_walk.cuh"
#include "tally/reduce.hpp"

namespace tally::detail {

/// reduce: sum, min or max of T in accumulator_t<T>; the operation fixed at compile time, so the
/// hot loop carries no switch. min/max propagate NaN (reduce_combine).
template <class T, reduce_op Op>
struct reduce_fold {
  using input_type = T;
  using value_type = accumulator_t<T>;
  static constexpr bool skip_identity = false;  ///< atomic: one atomic per sample

  __host__ __device__ value_type identity() const { return reduce_identity<T>(Op); }
  __host__ __device__ value_type lift(T x) const { return static_cast<value_type>(x); }
  __host__ __device__ value_type operator()(value_type a, value_type b) const { return reduce_combine<T>(Op, a, b); }

  /// The items of one 16-byte vector folded in a tree (independent adds), then into `into`.
  __device__ __forceinline__ value_type fold_vector(value_type into, const sample_vector<T>& v) const {
    constexpr int items = sample_vector<T>::items;
    value_type part[items];
#pragma unroll
    for (int t = 0; t < items; ++t) part[t] = lift(v.item[t]);
#pragma unroll
    for (int width = items / 2; width > 0; width /= 2) {
#pragma unroll
      for (int t = 0; t < width; ++t) part[t] = (*this)(part[t], part[t + width]);
    }
    return (*this)(into, part[0]);
  }

  /// `*target = combine(*target, value)` with one device-scope atomic: the hardware's add, min
  /// or max on integers; for float/double min/max tally::atomic_min/atomic_max (tally/atomic.cuh),
  /// one integer atomic on the bits ordered by IEEE totalOrder, a NaN argument storing a NaN
  /// that no later value displaces: NaN propagates as in reduce_combine. (The result's zero may
  /// be -0.0 where reduce_combine would keep +0.0; they compare equal.)
  __device__ __forceinline__ void atomic(value_type* target, value_type value) const {
    cuda::atomic_ref<value_type, cuda::thread_scope_device> ref(*target);
    if constexpr (Op == reduce_op::sum) {
      ref.fetch_add(value, cuda::memory_order_relaxed);  // integers wrap; floats round per add
    } else if constexpr (std::is_integral_v<value_type>) {
      if constexpr (Op == reduce_op::min) {
        ref.fetch_min(value, cuda::memory_order_relaxed);
      } else {
        ref.fetch_max(value, cuda::memory_order_relaxed);
      }
    } else if constexpr (Op == reduce_op::min) {
      tally::atomic_min<cuda::thread_scope_device>(target, value);
    } else {
      tally::atomic_max<cuda::thread_scope_device>(target, value);
    }
  }
};

/// count_if: 1 per sample that satisfies the predicate, summed in 64 bits.
template <class T, class Predicate>
struct count_fold {
  using input_type = T;
  using value_type = std::uint64_t;
  static constexpr bool skip_identity = true;  ///< atomic: one atomic per matching sample
  Predicate predicate;

  __host__ __device__ value_type identity() const { return 0; }
  __host__ __device__ value_type lift(T x) const { return predicate(x) ? 1 : 0; }
  __host__ __device__ value_type operator()(value_type a, value_type b) const { return a + b; }

  /// A vector's matches counted in 32 bits (at most 16), then widened once.
  __device__ __forceinline__ value_type fold_vector(value_type into, const sample_vector<T>& v) const {
    unsigned int matches = 0;
#pragma unroll
    for (int t = 0; t < sample_vector<T>::items; ++t) matches += predicate(v.item[t]) ? 1u : 0u;
    return into + matches;
  }

  __device__ __forceinline__ void atomic(value_type* target, value_type value) const {
    cuda::atomic_ref<value_type, cuda::thread_scope_device>(*target).fetch_add(value, cuda::memory_order_relaxed);
  }
};

/// This thread's fold of its share of the grid's vectorized walk (16-byte loads, Unroll in flight).
template <int Unroll, class Fold>
__device__ __forceinline__ typename Fold::value_type thread_fold(const typename Fold::input_type* samples,
                                                                 std::int64_t num_samples, const Fold& fold) {
  using T = typename Fold::input_type;
  typename Fold::value_type mine = fold.identity();
  walk_vectorized<Unroll>(
      samples, num_samples,
      [&](const sample_vector<T>& v, bool valid) {
        if (valid) mine = fold.fold_vector(mine, v);
      },
      [&](T x) { mine = fold(mine, fold.lift(x)); });
  return mine;
}

}  // namespace tally::detail
