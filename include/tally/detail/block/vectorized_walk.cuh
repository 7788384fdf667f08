// How the grid walks the samples: 16-byte loads, coalesced across each warp and several in flight
// per thread, with the unaligned head and the short tail done one sample at a time. Each loaded
// vector is handed to `visit(items, valid)`; every lane of a warp takes part in every call, so
// visitors may use warp votes.
#pragma once

#include <cstdint>
#include <cstring>

namespace tally::detail {

template <class Sample>
struct sample_vector {
  static constexpr int items = 16 / static_cast<int>(sizeof(Sample));
  Sample item[items];
};

/// Calls `visit_one(sample)` for the head and tail samples, and `visit(vector, valid)` for the
/// 16-byte vectors between them. Needs blockDim.x to be a multiple of 32.
template <int Unroll, class Sample, class VisitVector, class VisitOne>
__device__ __forceinline__ void walk_vectorized(const Sample* samples, std::int64_t num_samples, VisitVector visit,
                                                VisitOne visit_one) {
  constexpr int items = sample_vector<Sample>::items;
  const auto address = reinterpret_cast<std::uintptr_t>(samples);
  std::int64_t head = static_cast<std::int64_t>(((16 - address % 16) % 16) / sizeof(Sample));
  if (head > num_samples) head = num_samples;
  const std::int64_t vectors = (num_samples - head) / items;
  const std::int64_t tail_begin = head + vectors * items;
  const std::int64_t thread = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t threads = static_cast<std::int64_t>(gridDim.x) * blockDim.x;

  // Head and tail: fewer than `items` samples each, one per thread.
  if (thread < head) visit_one(samples[thread]);
  if (thread < num_samples - tail_begin) visit_one(samples[tail_begin + thread]);

  const auto* body = reinterpret_cast<const uint4*>(samples + head);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t warp = thread / 32;
  const std::int64_t warps = threads / 32;
  for (std::int64_t base = warp * 32 * Unroll; base < vectors; base += warps * 32 * Unroll) {
    uint4 raw[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      const std::int64_t index = base + u * 32 + lane;
      if (index < vectors) raw[u] = __ldcs(body + index);  // streamed: read once, not kept in cache
    }
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      sample_vector<Sample> v;
      memcpy(&v, &raw[u], sizeof(v));
      visit(v, base + u * 32 + lane < vectors);
    }
  }
}

}  // namespace tally::detail
