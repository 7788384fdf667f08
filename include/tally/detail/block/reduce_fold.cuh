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

/// The items of one 16-byte vector lifted and folded in a tree (independent combines), then into
/// `into`: a fold's fold_vector where every item counts.
template <class Fold, class T>
__device__ __forceinline__ typename Fold::value_type fold_vector_in_a_tree(const Fold& fold,
                                                                          typename Fold::value_type into,
                                                                          const sample_vector<T>& v) {
  constexpr int items = sample_vector<T>::items;
  typename Fold::value_type part[items];
#pragma unroll
  for (int t = 0; t < items; ++t) part[t] = fold.lift(v.item[t]);
#pragma unroll
  for (int width = items / 2; width > 0; width /= 2) {
#pragma unroll
    for (int t = 0; t < width; ++t) part[t] = fold(part[t], part[t + width]);
  }
  return fold(into, part[0]);
}

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

  __device__ __forceinline__ value_type fold_vector(value_type into, const sample_vector<T>& v) const {
    return fold_vector_in_a_tree(*this, into, v);
  }

  /// `value` as the atomic would leave it in a result that held the identity: a NaN min or max
  /// becomes the NaN atomic_min / atomic_max stores, which no later value displaces. What the
  /// first block stores in place of its atomic (first_stores_then_atomics): a NaN stored as it is
  /// (+NaN) ranks above every value, and a later atomic_min replaced it.
  __device__ __forceinline__ value_type first_store(value_type value) const {
    if constexpr (Op != reduce_op::sum && !std::is_integral_v<value_type>) {
      return cuda::std::bit_cast<value_type>(Op == reduce_op::min ? atomics::min_argument_bits(value)
                                                                  : atomics::max_argument_bits(value));
    } else {
      return value;
    }
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

/// The least and the greatest value of a pass (extremes_fold); shuffles as a pair.
template <class A>
struct extremes_value {
  A low;
  A high;
  __device__ __forceinline__ extremes_value shuffled_down(int offset) const {
    return {__shfl_down_sync(0xffffffffu, low, offset), __shfl_down_sync(0xffffffffu, high, offset)};
  }
};

/// min and max of T together, each as reduce_fold computes it (accumulator_t<T>, NaN propagates):
/// the data's range in one read of the samples where two reductions read them twice. No device
/// atomic combines a pair, so it runs as two_phase alone (dispatch_two_phase_fold).
template <class T>
struct extremes_fold {
  using input_type = T;
  using value_type = extremes_value<accumulator_t<T>>;

  __host__ __device__ value_type identity() const {
    return {reduce_identity<T>(reduce_op::min), reduce_identity<T>(reduce_op::max)};
  }
  __host__ __device__ value_type lift(T x) const {
    const auto value = static_cast<accumulator_t<T>>(x);
    return {value, value};
  }
  __host__ __device__ value_type operator()(value_type a, value_type b) const {
    return {reduce_combine<T>(reduce_op::min, a.low, b.low), reduce_combine<T>(reduce_op::max, a.high, b.high)};
  }
  __device__ __forceinline__ value_type fold_vector(value_type into, const sample_vector<T>& v) const {
    return fold_vector_in_a_tree(*this, into, v);
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

  __device__ __forceinline__ value_type first_store(value_type value) const { return value; }
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
