// The compare-and-swap loop of the seeds, for any 4- or 8-byte value and any combine function:
// what a device atomic is built from when the hardware has no instruction for the operation
// (float min/max with tally's NaN rule, for example).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include <cuda/atomic>

namespace tally::detail {

/// `*target = combine(*target, value)` atomically at device scope; returns the old value.
template <class T, class Combine>
__device__ T atomic_combine(T* target, T value, Combine combine) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomic_combine works on 4- or 8-byte values");
  static_assert(std::is_trivially_copyable_v<T>);
  using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  cuda::atomic_ref<Bits, cuda::thread_scope_device> ref(*reinterpret_cast<Bits*>(target));
  Bits expected = ref.load(cuda::memory_order_relaxed);
  for (;;) {
    T old;
    memcpy(&old, &expected, sizeof(T));
    const T desired_value = combine(old, value);
    Bits desired;
    memcpy(&desired, &desired_value, sizeof(T));
    if (desired == expected) return old;  // nothing to change (e.g. max already larger)
    if (ref.compare_exchange_weak(expected, desired, cuda::memory_order_relaxed)) return old;
  }
}

}  // namespace tally::detail
