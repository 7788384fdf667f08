// The dispatch of a streamed call's totals: sizes and launches the kernels that add a chunk's
// results into them. Returns cudaError_t and never throws, like the other dispatch headers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "tally/detail/kernels/streaming_kernels.cuh"
#include "tally/detail/tuning/reduce_tuning.cuh"

namespace tally::detail {

template <class T>
cudaError_t dispatch_add_chunk_counts(T* totals, const T* part, std::size_t n, std::uint64_t* left_total,
                                      const std::uint64_t* left_part, bool first, cudaStream_t stream) {
  constexpr int threads = tuning::combine_block_threads;
  // A few blocks per thousand bins' worth of work: totals are small beside a chunk of samples.
  const auto blocks = static_cast<unsigned>(std::clamp<std::size_t>((n + threads * 8 - 1) / (threads * 8), 1, 1024));
  add_chunk_counts_kernel<T><<<blocks, threads, 0, stream>>>(totals, part, n, left_total, left_part, first);
  return cudaGetLastError();
}

template <class T>
cudaError_t dispatch_combine_chunk_results(reduce_op op, std::uint64_t* total, const std::uint64_t* part, bool first,
                                           cudaStream_t stream) {
  combine_chunk_results_kernel<T><<<1, 1, 0, stream>>>(op, total, part, first);
  return cudaGetLastError();
}

inline cudaError_t dispatch_record_first_match(std::uint64_t* found, const std::uint64_t* part, std::uint64_t elements,
                                               std::uint64_t first_index, bool first, cudaStream_t stream) {
  record_first_match_kernel<<<1, 1, 0, stream>>>(found, part, elements, first_index, first);
  return cudaGetLastError();
}

}  // namespace tally::detail
