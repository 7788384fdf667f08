// The dispatch of the lab's experiments (tally::lab): turns a contention case's run-time choices
// (operation, memory, scope, aggregation) into one of the 72 kernel instantiations and launches it,
// and launches the racy counter, the naive histogram and the block histogram of `tally race`. The
// only code that launches lab kernels. Functions return cudaError_t and never throw; lab.cu
// allocates and times, the model (contention.cpp) validates and checks.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "tally/detail/dispatch/device_properties.cuh"
#include "lab_kernels.cuh"
#include "tally/lab.hpp"

namespace tally::detail::lab {

using tally::lab::aggregation;
using tally::lab::atomic_scope;
using tally::lab::memory_space;

/// Device pointers and sizes of one contention launch.
struct contention_launch {
  unsigned* words = nullptr;                 ///< A words (global memory, and the shared fold's target);
                                             ///< global_private: blocks x A words, a slice per block
  unsigned* block_words = nullptr;           ///< shared exch: blocks x A words
  unsigned long long* returned = nullptr;    ///< exch: two words, the old values' sum and sum of squares
  unsigned addresses = 1;
  unsigned blocks = 1;
  int block_threads = 256;
  unsigned ops_per_thread = 1;
};

/// The dynamic shared memory a shared-memory contention block needs: A 4-byte words.
inline std::size_t contention_shared_bytes(std::int64_t addresses) {
  return static_cast<std::size_t>(addresses) * sizeof(unsigned);
}

template <atomic_op Op, cuda::thread_scope Scope, bool Aggregate>
cudaError_t launch_contention_kernel(memory_space memory, const contention_launch& l, cudaStream_t stream) {
  const unsigned threads = l.blocks * static_cast<unsigned>(l.block_threads);
  if (memory == memory_space::global) {
    contention_global_kernel<Op, Scope, Aggregate><<<l.blocks, l.block_threads, 0, stream>>>(
        l.words, l.addresses, threads, l.ops_per_thread, l.returned);
    return cudaGetLastError();
  }
  if (memory == memory_space::global_private) {
    contention_global_private_kernel<Op, Scope, Aggregate><<<l.blocks, l.block_threads, 0, stream>>>(
        l.words, l.addresses, threads, l.ops_per_thread, l.returned);
    return cudaGetLastError();
  }
  auto kernel = contention_shared_kernel<Op, Scope, Aggregate>;
  const std::size_t shared_bytes = contention_shared_bytes(l.addresses);
  int per_sm = 0;
  // Raises the kernel's dynamic shared-memory limit past the default 48 KiB when it needs to.
  if (cudaError_t e = resident_blocks_per_multiprocessor(kernel, l.block_threads, shared_bytes, per_sm);
      e != cudaSuccess) {
    return e;
  }
  if (per_sm == 0) return cudaErrorInvalidConfiguration;
  kernel<<<l.blocks, l.block_threads, shared_bytes, stream>>>(l.words, l.block_words, l.addresses, threads,
                                                              l.ops_per_thread, l.returned);
  return cudaGetLastError();
}

template <atomic_op Op, cuda::thread_scope Scope>
cudaError_t launch_contention_scoped(memory_space memory, aggregation aggregate, const contention_launch& l,
                                     cudaStream_t stream) {
  return aggregate == aggregation::warp ? launch_contention_kernel<Op, Scope, true>(memory, l, stream)
                                        : launch_contention_kernel<Op, Scope, false>(memory, l, stream);
}

template <atomic_op Op>
cudaError_t launch_contention_op(memory_space memory, atomic_scope scope, aggregation aggregate,
                                 const contention_launch& l, cudaStream_t stream) {
  switch (scope) {
    case atomic_scope::block:
      return launch_contention_scoped<Op, cuda::thread_scope_block>(memory, aggregate, l, stream);
    case atomic_scope::device:
      return launch_contention_scoped<Op, cuda::thread_scope_device>(memory, aggregate, l, stream);
    case atomic_scope::system:
      return launch_contention_scoped<Op, cuda::thread_scope_system>(memory, aggregate, l, stream);
  }
  return cudaErrorInvalidValue;
}

/// One launch of a contention case on zeroed memory (the caller zeroes `words` and `returned`).
inline cudaError_t launch_contention(atomic_op op, memory_space memory, atomic_scope scope, aggregation aggregate,
                                     const contention_launch& l, cudaStream_t stream) {
  switch (op) {
    case atomic_op::add: return launch_contention_op<atomic_op::add>(memory, scope, aggregate, l, stream);
    case atomic_op::cas: return launch_contention_op<atomic_op::cas>(memory, scope, aggregate, l, stream);
    case atomic_op::max: return launch_contention_op<atomic_op::max>(memory, scope, aggregate, l, stream);
    case atomic_op::exch: return launch_contention_op<atomic_op::exch>(memory, scope, aggregate, l, stream);
  }
  return cudaErrorInvalidValue;
}

inline constexpr int race_block_threads = 256;

/// The racy counter: `threads` threads add 1 to the zeroed *counter, racily or by fetch_add.
inline cudaError_t launch_counter(unsigned long long* counter, long long threads, bool racy, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((threads + race_block_threads - 1) / race_block_threads);
  if (racy) {
    counter_kernel<true><<<blocks, race_block_threads, 0, stream>>>(counter, threads);
  } else {
    counter_kernel<false><<<blocks, race_block_threads, 0, stream>>>(counter, threads);
  }
  return cudaGetLastError();
}

/// The naive histogram into the zeroed `histogram`: unsynchronized increments, one sample per thread.
inline cudaError_t launch_naive_histogram(const std::int32_t* samples, long long n, unsigned* histogram,
                                          cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((n + race_block_threads - 1) / race_block_threads);
  naive_histogram_kernel<<<blocks, race_block_threads, 0, stream>>>(samples, n, histogram);
  return cudaGetLastError();
}

/// The block histogram into the zeroed `histogram`, with or without its barrier.
/// `bins` * 4 bytes must fit the default 48 KiB of shared memory (the caller checks).
inline cudaError_t launch_block_histogram(const std::int32_t* samples, long long n, unsigned* histogram, int bins,
                                          bool barrier, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((n + race_block_threads - 1) / race_block_threads);
  const std::size_t shared_bytes = static_cast<std::size_t>(bins) * sizeof(unsigned);
  if (barrier) {
    block_histogram_kernel<true><<<blocks, race_block_threads, shared_bytes, stream>>>(samples, n, histogram, bins);
  } else {
    block_histogram_kernel<false><<<blocks, race_block_threads, shared_bytes, stream>>>(samples, n, histogram, bins);
  }
  return cudaGetLastError();
}

}  // namespace tally::detail::lab
