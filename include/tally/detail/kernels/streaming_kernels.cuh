// Kernels that add one chunk's results into a streamed call's totals (tally/gpu/streaming.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tally/reduce.hpp"

namespace tally::detail {

/// totals[i] += part[i] (a grid-stride loop), and thread 0 of block 0 adds the chunk's left-out
/// count; with `first`, the left-out total starts at the chunk's.
template <class T>
__global__ void add_chunk_counts_kernel(T* totals, const T* part, std::size_t n, std::uint64_t* left_total,
                                        const std::uint64_t* left_part, bool first) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    totals[i] += part[i];
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) *left_total = first ? *left_part : *left_total + *left_part;
}

/// One thread: `*total = reduce_combine(op, *total, *part)` on words that hold a T's accumulator.
template <class T>
__global__ void combine_chunk_results_kernel(reduce_op op, std::uint64_t* total, const std::uint64_t* part, bool first) {
  using A = accumulator_t<T>;
  A* into = reinterpret_cast<A*>(total);
  const A value = *reinterpret_cast<const A*>(part);
  *into = first ? value : reduce_combine<T>(op, *into, value);
}

/// One thread: find_first_if across chunks; `*found` stays at the earliest match (all ones: none yet).
__global__ inline void record_first_match_kernel(std::uint64_t* found, const std::uint64_t* part,
                                                 std::uint64_t elements, std::uint64_t first_index, bool first) {
  constexpr std::uint64_t none = ~std::uint64_t{0};
  if (first) {
    *found = none;
    return;
  }
  if (*found == none && *part < elements) *found = first_index + *part;
}

}  // namespace tally::detail
