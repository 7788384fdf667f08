// How the grid walks the samples: one sample a thread a step (for_each_bin), or 16-byte loads,
// coalesced across each warp and several in flight per thread, with the unaligned head and the
// short tail done one sample at a time. Each loaded
// vector is handed to `visit(vector, valid)`, as a sample_vector of items or, to a visitor that
// takes `const uint4&`, as the four words loaded; every lane of a warp takes part in every call,
// so visitors may use warp votes.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tally::detail {

/// Grid-stride walk over the samples, one a thread at a time: `count(bin, i)` for each sample i
/// the mapper counts; returns how many this thread left out. Consecutive threads read consecutive
/// samples, so loads coalesce.
template <class Sample, class Mapper, class Count>
__device__ __forceinline__ std::uint64_t for_each_bin(const Sample* samples, std::int64_t num_samples,
                                                      const Mapper& map, Count count) {
  std::uint64_t left_out = 0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < num_samples;
       i += stride) {
    const std::int64_t bin = map(samples[i]);
    if (bin < 0) {
      ++left_out;
    } else {
      count(bin, i);
    }
  }
  return left_out;
}

template <class Sample>
struct sample_vector {
  static constexpr int items = 16 / static_cast<int>(sizeof(Sample));
  Sample item[items];
};

/// How the samples split into an unaligned head, 16-byte vectors and a short tail.
template <class Sample>
struct vector_split {
  std::int64_t head;        ///< samples before the first 16-byte boundary (fewer than `items`)
  std::int64_t vectors;     ///< whole vectors after the head
  std::int64_t tail_begin;  ///< first sample after the last whole vector

  __device__ __forceinline__ vector_split(const Sample* samples, std::int64_t num_samples) {
    constexpr int items = sample_vector<Sample>::items;
    const auto address = reinterpret_cast<std::uintptr_t>(samples);
    head = static_cast<std::int64_t>(((16 - address % 16) % 16) / sizeof(Sample));
    if (head > num_samples) head = num_samples;
    vectors = (num_samples - head) / items;
    tail_begin = head + vectors * items;
  }
};

/// The head and tail samples, at most one of each per thread of the grid.
template <class Sample, class VisitOne>
__device__ __forceinline__ void visit_head_and_tail(const Sample* samples, std::int64_t num_samples,
                                                    const vector_split<Sample>& split, VisitOne visit_one) {
  const std::int64_t thread = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (thread < split.head) visit_one(samples[thread]);
  if (thread < num_samples - split.tail_begin) visit_one(samples[split.tail_begin + thread]);
}

/// Loads this warp's `Unroll` x 32 vectors starting at `base` (lane l takes base + u * 32 + l) and
/// hands each to `visit(vector, valid)`; every lane takes part in every call. A visitor that takes
/// the vector as loaded (`const uint4&`) gets its four words: turned into an array of samples and
/// back, bytes come out of the compiler taken apart and put together again, eight instructions a
/// word that a byte histogram, at two instructions a byte, notices.
template <int Unroll>
__device__ __forceinline__ void load_warp_chunk(const uint4* body, std::int64_t vectors, std::int64_t base,
                                                uint4 (&raw)[Unroll]) {
  const int lane = static_cast<int>(threadIdx.x % 32);
#pragma unroll
  for (int u = 0; u < Unroll; ++u) {
    const std::int64_t index = base + u * 32 + lane;
    // Streamed: read once, not kept in cache. Past the end, zeros: visitors may map a vector
    // before they look at `valid` (without a branch), and zeros are a sample every mapper takes.
    raw[u] = index < vectors ? __ldcs(body + index) : make_uint4(0, 0, 0, 0);
  }
}

template <int Unroll, class Sample, class VisitVector>
__device__ __forceinline__ void visit_loaded_chunk(const uint4 (&raw)[Unroll], std::int64_t vectors, std::int64_t base,
                                                   VisitVector& visit) {
  const int lane = static_cast<int>(threadIdx.x % 32);
#pragma unroll
  for (int u = 0; u < Unroll; ++u) {
    const bool valid = base + u * 32 + lane < vectors;
    if constexpr (std::is_invocable_v<VisitVector&, const uint4&, bool>) {
      visit(raw[u], valid);
    } else {
      sample_vector<Sample> v;
      memcpy(&v, &raw[u], sizeof(v));
      visit(v, valid);
    }
  }
}

template <int Unroll, class Sample, class VisitVector>
__device__ __forceinline__ void visit_warp_chunk(const uint4* body, std::int64_t vectors, std::int64_t base,
                                                 VisitVector& visit) {
  uint4 raw[Unroll];
  load_warp_chunk(body, vectors, base, raw);
  visit_loaded_chunk<Unroll, Sample>(raw, vectors, base, visit);
}

/// Calls `visit_one(sample)` for the head and tail samples, and `visit(vector, valid)` for the
/// 16-byte vectors between them, each warp striding over the grid on its own. Needs blockDim.x to
/// be a multiple of 32.
/// With `Pipelined`, each chunk's loads are issued before the previous chunk is visited, so a
/// thread keeps Unroll loads in flight while it counts: for mappers with long chains of dependent
/// arithmetic per sample, whose counting would otherwise leave the memory idle.
template <int Unroll, bool Pipelined = false, class Sample, class VisitVector, class VisitOne>
__device__ __forceinline__ void walk_vectorized(const Sample* samples, std::int64_t num_samples, VisitVector visit,
                                                VisitOne visit_one) {
  const vector_split<Sample> split(samples, num_samples);
  visit_head_and_tail(samples, num_samples, split, visit_one);
  const auto* body = reinterpret_cast<const uint4*>(samples + split.head);
  const std::int64_t warp = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  const std::int64_t step = warps * 32 * Unroll;
  if constexpr (Pipelined) {
    uint4 next[Unroll];
    load_warp_chunk(body, split.vectors, warp * 32 * Unroll, next);
    for (std::int64_t base = warp * 32 * Unroll; base < split.vectors; base += step) {
      uint4 raw[Unroll];
#pragma unroll
      for (int u = 0; u < Unroll; ++u) raw[u] = next[u];
      load_warp_chunk(body, split.vectors, base + step, next);
      visit_loaded_chunk<Unroll, Sample>(raw, split.vectors, base, visit);
    }
  } else {
    for (std::int64_t base = warp * 32 * Unroll; base < split.vectors; base += step) {
      visit_warp_chunk<Unroll, Sample>(body, split.vectors, base, visit);
    }
  }
}

}  // namespace tally::detail
