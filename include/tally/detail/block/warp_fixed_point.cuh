// One warp's part of the deterministic sum (arithmetic in tally/detail/fixed_point_sum.hpp): a
// warp loads one whole chunk (cut by index, so its bounds do not depend on the launch), finds the
// chunk's largest exponent with one warp-wide max, converts every sample to the chunk's
// fixed-point grid, and adds the integers exactly across the warp. The chunk stays in registers
// in between: one pass over memory.
//
// Why not walk_vectorized: its split of the input follows the grid and the pointer's alignment,
// while a chunk must be the same samples whoever reads it. So a chunk is read as its whole
// 16-byte vectors (coalesced, `loads` per lane) plus, when the pointer is not 16-byte aligned,
// the samples at its two ends that share a vector with the next or previous chunk (fewer than
// `items` at each end: lanes [0, items) take the start, lanes [items, 2 items) the end). The
// head/tail arithmetic is vectorized_walk.cuh's vector_split.
#pragma once

#include <cstdint>
#include <cstring>

#include "tally/detail/block/vectorized_walk.cuh"
#include "tally/detail/fixed_point_sum.hpp"

namespace tally::detail {

template <class T>
struct chunk_shape {
  static constexpr int items = sample_vector<T>::items;                    ///< samples per 16-byte vector
  static constexpr std::int64_t size = fixed_point::chunk_size<T>;         ///< samples per chunk
  static constexpr int loads = static_cast<int>(size / (32 * items));      ///< vectors per lane per chunk
  static constexpr int values = loads * items + 1;                          ///< samples per lane, edge included
  static_assert(loads * 32 * items == size, "a chunk is a whole number of warp-wide loads");
  static_assert(2 * items <= 32, "the edge samples need at most one lane each");
};

/// Lane `lane`'s samples of chunk `chunk` into `value` (zeros where it has none): `loads` x
/// `items` from its vectors, then one edge sample.
template <class T>
__device__ __forceinline__ void load_chunk(const T* samples, std::int64_t num_samples, const vector_split<T>& split,
                                           std::int64_t chunk, int lane, T (&value)[chunk_shape<T>::values]) {
  using shape = chunk_shape<T>;
  constexpr int items = shape::items;
  const std::int64_t begin = chunk * shape::size;
  const std::int64_t end = begin + shape::size < num_samples ? begin + shape::size : num_samples;
  const std::int64_t head = split.head;
  // Vector j holds samples [head + j items, head + (j+1) items). The chunk's whole vectors:
  // [begin / items, end_vector), begin / items being the first one at or after begin.
  const std::int64_t first_vector = begin / items;
  std::int64_t end_vector = end >= head ? (end - head) / items : 0;
  if (end_vector < first_vector) end_vector = first_vector;
  const auto* body = reinterpret_cast<const uint4*>(samples + head);
  uint4 raw[shape::loads];
#pragma unroll
  for (int u = 0; u < shape::loads; ++u) {
    const std::int64_t j = first_vector + u * 32 + lane;
    raw[u] = j < end_vector ? __ldcs(body + j) : make_uint4(0, 0, 0, 0);
  }
  // The edges: [begin, begin + head) before the first vector, [head + end_vector items, end)
  // after the last (both clipped to the chunk; each fewer than `items` samples).
  std::int64_t edge = -1;
  if (lane < items) {
    if (lane < head) edge = begin + lane;
  } else if (lane < 2 * items) {
    edge = head + end_vector * items + (lane - items);
  }
  value[shape::values - 1] = edge >= 0 && edge < end ? samples[edge] : T(0);
#pragma unroll
  for (int u = 0; u < shape::loads; ++u) memcpy(&value[u * items], &raw[u], sizeof(uint4));
}

/// Sets aside this lane's NaN and infinite samples (replaced by 0, recorded in `flags`).
template <class T, int N>
__device__ __forceinline__ void set_aside_specials(T (&value)[N], std::uint32_t& flags) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const std::uint32_t special = fixed_point::special_flags(value[i]);
    flags |= special;
    if (special != 0) value[i] = T(0);
  }
}

template <class T, int N>
__device__ __forceinline__ std::uint32_t lane_max_top(const T (&value)[N]) {
  std::uint32_t top = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const std::uint32_t t = fixed_point::traits<T>::top_word(fixed_point::to_bits(value[i])) & 0x7fffffffu;
    top = t > top ? t : top;
  }
  return top;
}

/// The exact sum over the warp of a 64- or 128-bit integer (every lane gets it).
__device__ __forceinline__ std::int64_t warp_exact_sum(std::int64_t v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    v += static_cast<std::int64_t>(__shfl_xor_sync(0xffffffffu, static_cast<long long>(v), offset));
  }
  return v;
}

__device__ __forceinline__ fixed_point::traits<double>::chunk_sum warp_exact_sum(fixed_point::traits<double>::chunk_sum v) {
  using wide = fixed_point::traits<double>::chunk_sum;
  __extension__ using unsigned_wide = unsigned __int128;
  for (int offset = 16; offset > 0; offset /= 2) {
    const auto bits = static_cast<unsigned_wide>(v);
    const auto lo = __shfl_xor_sync(0xffffffffu, static_cast<unsigned long long>(bits), offset);
    const auto hi = __shfl_xor_sync(0xffffffffu, static_cast<unsigned long long>(bits >> 64), offset);
    v = static_cast<wide>(bits + ((static_cast<unsigned_wide>(hi) << 64) | lo));  // modulo 2^128: exact, no overflow
  }
  return v;
}

/// Sums one chunk across the warp: its exponent and its exact fixed-point sum (every lane gets
/// both), NaN/inf recorded in this lane's `flags`. Every lane of the warp must call it.
template <class T>
__device__ __forceinline__ typename fixed_point::traits<T>::chunk_sum warp_chunk_sum(
    T (&value)[chunk_shape<T>::values], std::uint32_t& flags, int& exponent) {
  std::uint32_t top = __reduce_max_sync(0xffffffffu, lane_max_top(value));
  if (top >= fixed_point::special_top<T>) {  // warp-uniform and rare: a NaN or an infinity here
    set_aside_specials(value, flags);
    top = __reduce_max_sync(0xffffffffu, lane_max_top(value));
  }
  exponent = fixed_point::chunk_exponent<T>(top);
  typename fixed_point::traits<T>::chunk_sum sum = 0;
#pragma unroll
  for (int i = 0; i < chunk_shape<T>::values; ++i) sum += fixed_point::to_fixed(value[i], exponent);
  return warp_exact_sum(sum);
}

}  // namespace tally::detail
