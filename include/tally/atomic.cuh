// tally's public device-side atomic helpers, for use in your own kernels (header-only; needs
// nvcc): a compare-and-swap loop for any 4- or 8-byte type, float and double
// max/min (one-instruction integer form and CAS form), double add through CAS (the pre-Pascal
// fallback) next to the native one, a saturating add and a warp-aggregated increment.
//
// Every helper takes the scope first, as a template parameter (cuda::thread_scope_block, _device
// (the default) or _system), and is built on cuda::atomic_ref<..., Scope>, so the same helper works
// on global memory, on shared memory (block scope is enough there) and on memory the host can see
// (system scope). Every helper is relaxed, like atomicAdd: it orders no other memory access.
// Addresses must be aligned to the size of the value.
//
// The NaN and -0.0 contract of atomic_max / atomic_min (both forms obey it, bit for bit):
//   values are ordered by IEEE 754 totalOrder on their bits,
//     -NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN,
//   so -0.0 is below +0.0 and infinities are ordinary values. A NaN *argument* is first replaced by
//   the NaN at the far end of that order: atomic_max stores +NaN with every payload bit set
//   (max_nan<T>()), atomic_min stores -NaN with every bit set (min_nan<T>()). So a NaN argument
//   always lands and then never leaves: NaN propagates, as in tally::gpu::reduce. A NaN you stored
//   yourself keeps its place in the order: +NaN stays under atomic_max and is replaced by the
//   first non-NaN argument of atomic_min; -NaN the other way round. Start from -inf (max) or +inf
//   (min), not from NaN.
#pragma once

#include <cuda/atomic>
#include <cuda/std/bit>
#include <cuda/std/limits>
#include <cuda/std/type_traits>

namespace tally {

/// How atomic_max and atomic_min do their work. Both store the same bits, so either checks the other.
enum class extremum_form {
  integer,   ///< one native integer max or min on the float's bits (the default, and the fast one)
  cas_loop,  ///< atomic_update: reads first and writes only where the argument passes the old value
};

namespace detail::atomics {

/// The unsigned and signed integers with the bits of a 4- or 8-byte T.
template <class T>
using bits_t = cuda::std::conditional_t<sizeof(T) == 4, unsigned int, unsigned long long>;
template <class T>
using signed_bits_t = cuda::std::conditional_t<sizeof(T) == 4, int, long long>;

template <class T>
inline constexpr bool is_float_or_double_v = cuda::std::is_same_v<T, float> || cuda::std::is_same_v<T, double>;

template <class T>
inline constexpr bits_t<T> sign_bit = bits_t<T>{1} << (8 * sizeof(T) - 1);

/// NaN has every exponent bit set and a non-zero fraction: above +inf once the sign is cleared.
template <class T>
__host__ __device__ constexpr bool is_nan_bits(bits_t<T> bits) {
  return (bits & ~sign_bit<T>) > cuda::std::bit_cast<bits_t<T>>(cuda::std::numeric_limits<T>::infinity());
}

/// An unsigned key that orders bit patterns as IEEE 754 totalOrder orders the values: negative
/// values (sign set) reverse their order, so all their bits flip; non-negative ones move above them.
template <class T>
__host__ __device__ constexpr bits_t<T> total_order_key(bits_t<T> bits) {
  return (bits & sign_bit<T>) ? ~bits : (bits | sign_bit<T>);
}

/// `value`'s bits, with a NaN replaced by the NaN atomic_max stores (the greatest pattern).
template <class T>
__host__ __device__ constexpr bits_t<T> max_argument_bits(T value) {
  const auto bits = cuda::std::bit_cast<bits_t<T>>(value);
  return is_nan_bits<T>(bits) ? ~sign_bit<T> : bits;
}

/// `value`'s bits, with a NaN replaced by the NaN atomic_min stores (the least pattern).
template <class T>
__host__ __device__ constexpr bits_t<T> min_argument_bits(T value) {
  const auto bits = cuda::std::bit_cast<bits_t<T>>(value);
  return is_nan_bits<T>(bits) ? ~bits_t<T>{0} : bits;
}

/// The bits at `address`, seen as an integer of the same size, through an atomic_ref of `Scope`.
template <class Integer, cuda::thread_scope Scope, class T>
__device__ __forceinline__ cuda::atomic_ref<Integer, Scope> ref_as(T* address) {
  static_assert(sizeof(Integer) == sizeof(T));
  return cuda::atomic_ref<Integer, Scope>(*reinterpret_cast<Integer*>(address));
}

/// The lanes of this warp numbered below the calling lane, as a mask.
__device__ __forceinline__ unsigned lanes_below_mine() {
  unsigned mask;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(mask));
  return mask;
}

}  // namespace detail::atomics

/** @brief The NaN atomic_max stores for a NaN argument: +NaN, every payload bit set. */
template <class T>
__host__ __device__ constexpr T max_nan() {
  return cuda::std::bit_cast<T>(static_cast<detail::atomics::bits_t<T>>(~detail::atomics::sign_bit<T>));
}

/** @brief The NaN atomic_min stores for a NaN argument: -NaN, every bit set. */
template <class T>
__host__ __device__ constexpr T min_nan() {
  return cuda::std::bit_cast<T>(static_cast<detail::atomics::bits_t<T>>(~detail::atomics::bits_t<T>{0}));
}

/**
 * @brief `*address = op(*address)` atomically, for any trivially copyable 4- or 8-byte T; returns
 * the value `op` was applied to (the old value).
 *
 * The compare-and-swap loop: read, compute `op(old)`, swap it in if `*address` still holds
 * `old`, else retry with the value found. Bit patterns are compared, never values, so a NaN (which
 * is unequal to itself) cannot make it loop forever. `op` may run several times, on different old
 * values, and must be a pure function of its argument. When `op` returns the old bits unchanged,
 * nothing is written. Under contention every writer but one retries, so when many threads must all
 * write to one address, prefer a native atomic (or aggregate first).
 */
template <cuda::thread_scope Scope = cuda::thread_scope_device, class T, class Op>
__device__ T atomic_update(T* address, Op op) {
  static_assert(cuda::std::is_trivially_copyable_v<T>, "atomic_update needs a trivially copyable type");
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomic_update works on 4- or 8-byte types");
  using Bits = detail::atomics::bits_t<T>;
  auto ref = detail::atomics::ref_as<Bits, Scope>(address);
  Bits expected = ref.load(cuda::memory_order_relaxed);
  for (;;) {
    const T old = cuda::std::bit_cast<T>(expected);
    const Bits desired = cuda::std::bit_cast<Bits>(static_cast<T>(op(old)));
    if (desired == expected) return old;
    // On failure `expected` becomes the value found, and the loop applies `op` to that.
    if (ref.compare_exchange_strong(expected, desired, cuda::memory_order_relaxed)) return old;
  }
}

namespace detail::atomics {

/// atomic_max (Max) or atomic_min in one native integer atomic on the bits (see atomic_max for why).
template <bool Max, cuda::thread_scope Scope, class T>
__device__ T extremum_by_bits(T* address, T value) {
  static_assert(is_float_or_double_v<T>, "atomic_max and atomic_min work on float and double");
  using Bits = bits_t<T>;
  using Signed = signed_bits_t<T>;
  const Bits bits = Max ? max_argument_bits(value) : min_argument_bits(value);
  if (!(bits & sign_bit<T>)) {
    // A non-negative argument: the signed bits order as the values do.
    auto ref = ref_as<Signed, Scope>(address);
    const auto argument = cuda::std::bit_cast<Signed>(bits);
    const Signed old = Max ? ref.fetch_max(argument, cuda::memory_order_relaxed)
                           : ref.fetch_min(argument, cuda::memory_order_relaxed);
    return cuda::std::bit_cast<T>(old);
  }
  // A negative argument: the unsigned bits order against the values.
  auto ref = ref_as<Bits, Scope>(address);
  const Bits old =
      Max ? ref.fetch_min(bits, cuda::memory_order_relaxed) : ref.fetch_max(bits, cuda::memory_order_relaxed);
  return cuda::std::bit_cast<T>(old);
}

/// extremum_form::cas_loop: atomic_update, writing only where the argument passes the old value in
/// the total order.
template <bool Max, cuda::thread_scope Scope, class T>
__device__ T extremum_by_update(T* address, T value) {
  static_assert(is_float_or_double_v<T>, "atomic_max and atomic_min work on float and double");
  const bits_t<T> argument = Max ? max_argument_bits(value) : min_argument_bits(value);
  return atomic_update<Scope>(address, [argument](T old) {
    const auto key = total_order_key<T>(argument);
    const auto old_key = total_order_key<T>(cuda::std::bit_cast<bits_t<T>>(old));
    return (Max ? key > old_key : key < old_key) ? cuda::std::bit_cast<T>(argument) : old;
  });
}

/// atomic_max (Max) or atomic_min in the form asked for.
template <bool Max, cuda::thread_scope Scope, extremum_form Form, class T>
__device__ T extremum(T* address, T value) {
  if constexpr (Form == extremum_form::integer) return extremum_by_bits<Max, Scope>(address, value);
  else return extremum_by_update<Max, Scope>(address, value);
}

}  // namespace detail::atomics

/**
 * @brief Atomic max of a float or double; returns the old value. Orders values by IEEE 754
 * totalOrder (-0.0 < +0.0; a NaN argument stores max_nan<T>()): see the contract at the top of
 * this file. `Form` picks how (extremum_form); both forms store the same bits.
 *
 * Why one integer atomic is enough: the bits of a non-negative float compare as signed integers
 * compare the floats, and every non-negative float's bits are above every negative one's (whose
 * sign bit makes them negative integers), so a signed max on the bits is right. The bits of
 * negative floats grow with the magnitude, so as unsigned integers the greatest negative float
 * has the smallest bits, and every non-negative one has smaller bits still: an unsigned min.
 */
template <cuda::thread_scope Scope = cuda::thread_scope_device, extremum_form Form = extremum_form::integer, class T>
__device__ T atomic_max(T* address, cuda::std::type_identity_t<T> value) {
  return detail::atomics::extremum<true, Scope, Form>(address, value);
}

/**
 * @brief Atomic min of a float or double; returns the old value. The mirror of atomic_max: a signed
 * min on the bits for non-negative arguments, an unsigned max for negative ones; same order, and a
 * NaN argument stores min_nan<T>().
 */
template <cuda::thread_scope Scope = cuda::thread_scope_device, extremum_form Form = extremum_form::integer, class T>
__device__ T atomic_min(T* address, cuda::std::type_identity_t<T> value) {
  return detail::atomics::extremum<false, Scope, Form>(address, value);
}

/**
 * @brief `*address += value` for float or double with the native instruction
 * (cuda::atomic_ref::fetch_add: one atom/red .add.f64 or .f32); returns the old value.
 */
template <cuda::thread_scope Scope = cuda::thread_scope_device, class T>
__device__ T atomic_add(T* address, cuda::std::type_identity_t<T> value) {
  static_assert(detail::atomics::is_float_or_double_v<T>, "atomic_add works on float and double");
  return cuda::atomic_ref<T, Scope>(*address).fetch_add(value, cuda::memory_order_relaxed);
}

/**
 * @brief `*address += value` through atomic_update: the pre-Pascal CAS-loop double atomicAdd, on any
 * GPU; returns the old value. Each addition rounds as the native one does (IEEE round to nearest
 * even), so the two differ only through the order the additions happen in; for double they are
 * bit-identical whenever every partial sum is exact. (float: the native f32 atomic add may flush
 * subnormals to zero, so there the two can differ.)
 */
template <cuda::thread_scope Scope = cuda::thread_scope_device, class T>
__device__ T atomic_add_cas(T* address, cuda::std::type_identity_t<T> value) {
  static_assert(detail::atomics::is_float_or_double_v<T>, "atomic_add_cas works on float and double");
  return atomic_update<Scope>(address, [value](T old) { return old + value; });
}

/**
 * @brief `*address = min(*address + value, limit)` for a 32- or 64-bit unsigned counter, never
 * wrapping (a saturating counter); returns the old value. A counter already at or above
 * `limit` is left as it is. Built on atomic_update: once the counter is full, a call costs one load.
 */
template <cuda::thread_scope Scope = cuda::thread_scope_device, class T>
__device__ T saturating_add(T* address, cuda::std::type_identity_t<T> value, cuda::std::type_identity_t<T> limit) {
  static_assert(cuda::std::is_unsigned_v<T> && (sizeof(T) == 4 || sizeof(T) == 8),
                "saturating_add works on 32- and 64-bit unsigned integers");
  return atomic_update<Scope>(address, [value, limit](T old) -> T {
    if (old >= limit) return old;
    return value >= limit - old ? limit : old + value;  // limit - old > 0: no wrap on either side
  });
}

/**
 * @brief `(*counter)++` for every calling lane, with one atomic per counter per warp; returns each
 * lane a distinct old value.
 *
 * The lanes that call together (`__activemask()`) and pass the same `counter` find each other with
 * `__match_any_sync`; the lowest of them adds the group's size once, and each lane gets that old
 * value plus its rank in the group. Works under divergence and with lanes on different counters.
 * Which value a lane gets is unspecified; that the values are distinct and, over all calls,
 * consecutive, is the guarantee. For 32- and 64-bit unsigned counters; __match_any_sync needs sm_70.
 */
template <cuda::thread_scope Scope = cuda::thread_scope_device, class T>
__device__ T warp_aggregated_increment(T* counter) {
  static_assert(cuda::std::is_unsigned_v<T> && (sizeof(T) == 4 || sizeof(T) == 8),
                "warp_aggregated_increment works on 32- and 64-bit unsigned counters");
  const unsigned active = __activemask();
  const unsigned group = __match_any_sync(active, reinterpret_cast<unsigned long long>(counter));
  const int leader = __ffs(static_cast<int>(group)) - 1;
  const unsigned rank = static_cast<unsigned>(__popc(group & detail::atomics::lanes_below_mine()));
  T first = 0;
  if (rank == 0) {
    first = cuda::atomic_ref<T, Scope>(*counter).fetch_add(static_cast<T>(__popc(group)), cuda::memory_order_relaxed);
  }
  first = __shfl_sync(group, first, leader);
  return first + rank;
}

}  // namespace tally
