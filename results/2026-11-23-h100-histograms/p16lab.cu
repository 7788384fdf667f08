// Scratch: where packed16's time goes at 65536 int32 bins (flush variants), kernel-only timing.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>
#include "tally/detail/dispatch/histogram_dispatch.cuh"
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)
using namespace tally;
using namespace tally::detail;
using Mapper = integer_step_bin_mapper<int>;
struct identity_mapper {  // every sample is its bin (the data are in range): no checks at all
  static constexpr bool maps_every_sample = true;
  std::int64_t n;
  __host__ __device__ std::int64_t num_bins() const { return n; }
  __host__ __device__ std::int64_t operator()(int x) const { return x; }
};

// integer_step_bin_mapper with a shift in place of the division (power-of-two steps)
struct shift_mapper {
  std::uint32_t lower, range, shift; std::int64_t n; bool inclusive;
  __host__ __device__ std::int64_t num_bins() const { return n; }
  __host__ __device__ std::int64_t operator()(int x) const {
    const std::uint32_t offset = static_cast<std::uint32_t>(x) - lower;
    if (offset < range) return offset >> shift;
    return (inclusive && offset == range) ? n - 1 : -1;
  }
};
// bincount with a 32-bit compare
struct bincount32_mapper {
  std::int64_t n;
  __host__ __device__ std::int64_t num_bins() const { return n; }
  __host__ __device__ std::int64_t operator()(int x) const {
    return static_cast<std::uint32_t>(x) < static_cast<std::uint32_t>(n) ? x : -1;
  }
};
// the library's integer_step mapper body, returning int instead of int64
struct step_int_mapper {
  std::uint32_t lower, range, step; std::int64_t n; bool inclusive;
  __host__ __device__ std::int64_t num_bins() const { return n; }
  __host__ __device__ int operator()(int x) const {
    const std::uint32_t offset = static_cast<std::uint32_t>(x) - lower;
    if (offset < range) return static_cast<int>(step == 1 ? offset : offset / step);
    return (inclusive && offset == range) ? static_cast<int>(n - 1) : -1;
  }
};

// The standalone probe's packed kernel (results/2026-11-22-h100-probes), mode 0, U = 4, T = 4096, RED flush.
__global__ void __launch_bounds__(1024, 1) probe_p16(const uint4* d, long nvec, unsigned* counts, int num_bins) {
  extern __shared__ uint4 smem4[];
  unsigned* w = reinterpret_cast<unsigned*>(smem4);
  constexpr int U = 4, T = 4096;
  const int H = (num_bins + 1) / 2;
  const int words4 = (H + 3) / 4;
  for (int i = threadIdx.x; i < words4; i += 1024) smem4[i] = make_uint4(0, 0, 0, 0);
  __syncthreads();
  constexpr int tile = 1024 * U;
  constexpr int per_period = (65536 - T) / (tile * 4);
  const int lane = threadIdx.x % 32;
  const long warp_off = (threadIdx.x / 32) * 32 * U;
  const long gstride = (long)gridDim.x * tile;
  auto add = [&](int bin, unsigned count) {
    const int hi = bin >= H;
    const int word = bin - hi * H;
    const unsigned sh = 16 * hi;
    const unsigned before = (atomicAdd(w + word, count << sh) >> sh) & 0xffffu;
    if ((before / T) != ((before + count) / T)) {
      atomicSub(w + word, (unsigned)T << sh);
      atomicAdd(counts + bin, (unsigned)T);
    }
  };
  int t = 0;
  uint4 cur[U];
  for (long tb = blockIdx.x * (long)tile; tb < nvec; tb += gstride) {
#pragma unroll
    for (int u = 0; u < U; ++u) { long i = tb + warp_off + u * 32 + lane; if (i < nvec) cur[u] = __ldcs(d + i); }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const bool valid = tb + warp_off + u * 32 + lane < nvec;
      const int b[4] = {(int)cur[u].x, (int)cur[u].y, (int)cur[u].z, (int)cur[u].w};
      const bool same = valid && b[0] == b[1] && b[0] == b[2] && b[0] == b[3];
      const int wb = __shfl_sync(0xffffffffu, b[0], 0);
      if (__all_sync(0xffffffffu, same && b[0] == wb)) {
        if (lane == 0 && (unsigned)wb < (unsigned)num_bins) add(wb, 128u);
        continue;
      }
      if (!valid) continue;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if ((unsigned)b[j] < (unsigned)num_bins) add(b[j], 1u);
      }
    }
    if (++t == per_period) { t = 0; __syncthreads(); }
  }
  __syncthreads();
  for (int word = threadIdx.x; word < H; word += 1024) {
    const unsigned v = w[word];
    if (v & 0xffffu) atomicAdd(counts + word, v & 0xffffu);
    if ((v >> 16) && word + H < num_bins) atomicAdd(counts + word + H, v >> 16);
  }
}

template <class M, bool Match = false>
__global__ void __launch_bounds__(1024, 1) mapper_kernel(const int* samples, long n, unsigned* counts, M map,
                                                        std::uint64_t* left_out, unsigned*) {
  extern __shared__ std::uint32_t packed_copy[];
  const std::int64_t num_bins = map.num_bins();
  zero_block_copy(packed_copy, packed_words(num_bins) + packed_mode_words);
  __syncthreads();
  warp_add_to(count_packed<1024, 4>(samples, n, map, packed_copy, counts), left_out);
  __syncthreads();
  const std::int64_t half = packed_words(num_bins);
  for (std::int64_t w = threadIdx.x; w < half; w += blockDim.x) {
    const unsigned v = packed_copy[w];
    if (v & 0xffffu) atomicAdd(counts + w, v & 0xffffu);
    if (v >> 16) atomicAdd(counts + w + half, v >> 16);
  }
}

// Flush: 0 library (atomic_ref fetch_add), 1 atomicAdd intrinsic (RED), 2 none (timing only),
// 3 plain coalesced store of the copy to a per-block slice (merge not timed)
template <int Flush>
__global__ void __launch_bounds__(1024, 1) lab_kernel(const int* samples, long n, unsigned* counts, Mapper map,
                                                     std::uint64_t* left_out, unsigned* slices) {
  extern __shared__ std::uint32_t packed_copy[];
  const std::int64_t num_bins = map.num_bins();
  zero_block_copy(packed_copy, packed_words(num_bins) + packed_mode_words);
  __syncthreads();
  warp_add_to(count_packed<1024, 4>(samples, n, map, packed_copy, counts), left_out);
  __syncthreads();
  if (Flush == 0) add_packed_copy(packed_copy, num_bins, counts);
  if (Flush == 1) {
    const std::int64_t half = packed_words(num_bins);
    for (std::int64_t w = threadIdx.x; w < half; w += blockDim.x) {
      const unsigned v = packed_copy[w];
      if (v & 0xffffu) atomicAdd(counts + w, v & 0xffffu);
      if (v >> 16) atomicAdd(counts + w + half, v >> 16);
    }
  }
  if (Flush == 3) {
    const std::int64_t half = packed_words(num_bins);
    uint4* out = reinterpret_cast<uint4*>(slices + blockIdx.x * half);
    const uint4* in = reinterpret_cast<const uint4*>(packed_copy);
    for (std::int64_t i = threadIdx.x; i < half / 4; i += blockDim.x) out[i] = in[i];
  }
}


// v4 hot bins: the first 4 bins that spill get 32 lane copies of a 32-bit counter, addressed by
// index into the one shared array (so every atomic is atom.shared), one atomic per sample.
constexpr int kHot = 4;
template <int Threads, int Unroll, class Sample, class Counter, class Mapper>
__device__ __forceinline__ std::uint64_t count_packed_hot(const Sample* samples, std::int64_t num_samples,
                                                         const Mapper& map, std::uint32_t* words, Counter* counts,
                                                         int hot_base) {
  constexpr int items = sample_vector<Sample>::items;
  const int half_bins = static_cast<int>(packed_words(map.num_bins()));
  constexpr int tiles_per_period = packed_tiles_per_period(Threads, Unroll, items);
  const int hot_bins_at = hot_base + kHot * 32;  // kHot ints: the bin of each slot (-2 unclaimed)
  const int claimed_at = hot_bins_at + kHot;
  volatile std::uint32_t* vwords = words;
  std::uint32_t left_out = 0;
  const auto claim = [&](int bin) {
    if (vwords[claimed_at] >= kHot) return;
#pragma unroll
    for (int k = 0; k < kHot; ++k) if (static_cast<int>(vwords[hot_bins_at + k]) == bin) return;
    const std::uint32_t slot = atomicAdd(words + claimed_at, 1u);
    if (slot < kHot) vwords[hot_bins_at + slot] = static_cast<std::uint32_t>(bin);
  };
  const auto add = [&](int bin, std::uint32_t count) {
    const int high = bin >= half_bins ? 1 : 0;
    const int word = bin - high * half_bins;
    const std::uint32_t shift = 16u * static_cast<std::uint32_t>(high);
    const std::uint32_t before = (atomicAdd(words + word, count << shift) >> shift) & 0xffffu;
    if (before / packed_spill != (before + count) / packed_spill) {
      atomicSub(words + word, packed_spill << shift);
      atomicAdd(reinterpret_cast<unsigned*>(counts) + bin, packed_spill);
      claim(bin);
    }
  };
  int hot_bin[kHot];
#pragma unroll
  for (int k = 0; k < kHot; ++k) hot_bin[k] = -2;
  bool any_hot = false;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const auto visit_one = [&](Sample x) {
    const int bin = static_cast<int>(map(x));
    if (bin < 0) ++left_out; else add(bin, 1);
  };
  const auto visit = [&](const sample_vector<Sample>& v, bool valid) {
    int bins[items];
    left_out += map_vector(map, v, valid, bins);
    if (warp_adds_once(bins, add)) return;
    if (!any_hot) {
#pragma unroll
      for (int j = 0; j < items; ++j) if (bins[j] >= 0) add(bins[j], 1);
      return;
    }
#pragma unroll
    for (int j = 0; j < items; ++j) {
      if (bins[j] < 0) continue;
      int slot = -1;
#pragma unroll
      for (int k = kHot - 1; k >= 0; --k) slot = bins[j] == hot_bin[k] ? k : slot;
      const int high = bins[j] >= half_bins ? 1 : 0;
      const int word = bins[j] - high * half_bins;
      const std::uint32_t shift = 16u * static_cast<std::uint32_t>(high);
      const int index = slot >= 0 ? hot_base + slot * 32 + lane : word;
      const std::uint32_t before = atomicAdd(words + index, slot >= 0 ? 1u : 1u << shift);
      if (slot < 0) {
        const std::uint32_t c = (before >> shift) & 0xffffu;
        if (c % packed_spill == packed_spill - 1) {
          atomicSub(words + word, packed_spill << shift);
          atomicAdd(reinterpret_cast<unsigned*>(counts) + bins[j], packed_spill);
          claim(bins[j]);
        }
      }
    }
  };
  int tiles = 0;
  const auto end_of_tile = [&] {
    any_hot = false;
#pragma unroll
    for (int k = 0; k < kHot; ++k) {
      hot_bin[k] = static_cast<int>(vwords[hot_bins_at + k]);
      any_hot = any_hot || hot_bin[k] >= 0;
    }
    if (++tiles == tiles_per_period) { tiles = 0; __syncthreads(); }
  };
  walk_tiles<Unroll>(samples, num_samples, visit, visit_one, end_of_tile);
  return left_out;
}

template <class M>
__global__ void __launch_bounds__(1024, 1) hot_kernel(const int* samples, long n, unsigned* counts, M map,
                                                     std::uint64_t* left_out, unsigned*) {
  extern __shared__ std::uint32_t packed_copy[];
  const std::int64_t num_bins = map.num_bins();
  const int half = static_cast<int>(packed_words(num_bins));
  zero_block_copy(packed_copy, half + kHot * 32 + kHot + 1);
  __syncthreads();
  if (threadIdx.x < kHot) packed_copy[half + kHot * 32 + threadIdx.x] = static_cast<std::uint32_t>(-2);
  __syncthreads();
  warp_add_to(count_packed_hot<1024, 4>(samples, n, map, packed_copy, counts, half), left_out);
  __syncthreads();
  for (int w = threadIdx.x; w < half; w += blockDim.x) {
    const unsigned v = packed_copy[w];
    if (v & 0xffffu) atomicAdd(counts + w, v & 0xffffu);
    if (v >> 16) atomicAdd(counts + w + half, v >> 16);
  }
  if (threadIdx.x < kHot) {
    const int bin = static_cast<int>(packed_copy[half + kHot * 32 + threadIdx.x]);
    unsigned total = 0;
    for (int l = 0; l < 32; ++l) total += packed_copy[half + threadIdx.x * 32 + l];
    if (bin >= 0 && total) atomicAdd(counts + bin, total);
  }
}


// Scan mode: increments with no return value (merged across a warp's lanes on one word), and at
// every period's barrier a block-wide scan that spills every 16-bit counter >= 2^12.
template <int Threads, int Unroll, class Sample, class Counter, class Mapper>
__device__ __forceinline__ std::uint64_t count_packed_scan(const Sample* samples, std::int64_t num_samples,
                                                          const Mapper& map, std::uint32_t* words, Counter* counts) {
  constexpr int items = sample_vector<Sample>::items;
  const int half_bins = static_cast<int>(packed_words(map.num_bins()));
  constexpr int tiles_per_period = packed_tiles_per_period(Threads, Unroll, items);
  std::uint32_t left_out = 0;
  const auto add = [&](int bin, std::uint32_t count) {  // no return value
    const int high = bin >= half_bins ? 1 : 0;
    const int word = bin - high * half_bins;
    if (count == 1) {
      if (high) atomicAdd(words + word, 0x10000u); else atomicAdd(words + word, 1u);
    } else {
      atomicAdd(words + word, count << (16 * high));
    }
  };
  const auto visit_one = [&](Sample x) {
    const int bin = static_cast<int>(map(x));
    if (bin < 0) ++left_out; else add(bin, 1);
  };
  const auto visit = [&](const sample_vector<Sample>& v, bool valid) {
    int bins[items];
    left_out += map_vector(map, v, valid, bins);
    if (warp_adds_once(bins, add)) return;
#pragma unroll
    for (int j = 0; j < items; ++j) if (bins[j] >= 0) add(bins[j], 1);
  };
  int tiles = 0;
  const auto end_of_tile = [&] {
    if (++tiles == tiles_per_period) {
      tiles = 0;
      __syncthreads();
      const int quads = half_bins / 4;  // 65536 bins: 8192 uint4
      uint4* q = reinterpret_cast<uint4*>(words);
      for (int i = threadIdx.x; i < quads; i += Threads) {
        uint4 x = q[i];
        std::uint32_t* xs = &x.x;
        bool changed = false;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const std::uint32_t lo = xs[k] & 0xffffu, hi = xs[k] >> 16;
          if (lo >= packed_spill) { atomicAdd(reinterpret_cast<unsigned*>(counts) + i * 4 + k, lo); xs[k] &= 0xffff0000u; changed = true; }
          if (hi >= packed_spill) { atomicAdd(reinterpret_cast<unsigned*>(counts) + i * 4 + k + half_bins, hi); xs[k] &= 0xffffu; changed = true; }
        }
        if (changed) q[i] = x;
      }
      __syncthreads();
    }
  };
  walk_tiles<Unroll>(samples, num_samples, visit, visit_one, end_of_tile);
  return left_out;
}

template <class M>
__global__ void __launch_bounds__(1024, 1) scan_kernel(const int* samples, long n, unsigned* counts, M map,
                                                      std::uint64_t* left_out, unsigned*) {
  extern __shared__ std::uint32_t packed_copy[];
  const std::int64_t num_bins = map.num_bins();
  const int half = static_cast<int>(packed_words(num_bins));
  zero_block_copy(packed_copy, half);
  __syncthreads();
  warp_add_to(count_packed_scan<1024, 4>(samples, n, map, packed_copy, counts), left_out);
  __syncthreads();
  for (int w = threadIdx.x; w < half; w += blockDim.x) {
    const unsigned v = packed_copy[w];
    if (v & 0xffffu) atomicAdd(counts + w, v & 0xffffu);
    if (v >> 16) atomicAdd(counts + w + half, v >> 16);
  }
}

template <class F> float median_ms(F f, int runs = 15) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> ts;
  for (int r = 0; r < runs + 3; ++r) {
    cudaEventRecord(a); f(); cudaEventRecord(b); CK(cudaEventSynchronize(b));
    float ms; cudaEventElapsedTime(&ms, a, b); if (r >= 3) ts.push_back(ms);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

int main() {
  const long n = 1L << 28; const int bins = 65536;
  std::vector<int> host(n);
  int* d; unsigned* counts; unsigned* slices; std::uint64_t* left;
  CK(cudaMalloc(&d, n * 4)); CK(cudaMalloc(&counts, bins * 4)); CK(cudaMalloc(&slices, 132L * bins * 2)); CK(cudaMalloc(&left, 8));
  const Mapper map(0, 1, bins, false);
  const size_t smem = packed_words(bins) * 4 + (kHot * 33 + 1) * 4 + 16;
  const double bw = 3.03e12;
  const char* names[] = {"uniform", "geometric", "loguniform", "single", "sorted"};
  for (int dist = 0; dist < 5; ++dist) {
    std::mt19937_64 rng(7 + dist);
    for (long i = 0; i < n; ++i) {
      if (dist == 0) host[i] = (int)(rng() % bins);
      else if (dist == 1) host[i] = std::min(bins - 1, __builtin_ctzll(rng() | (1ull << 63)));
      else if (dist == 2) host[i] = std::clamp((int)std::exp((rng() >> 11) * 0x1.0p-53 * std::log((double)bins)) - 1, 0, bins - 1);
      else if (dist == 3) host[i] = bins / 2;
      else host[i] = (int)((i * (long)bins) / n);
    }
    std::vector<unsigned> ref(bins, 0);
    for (long i = 0; i < n; ++i) ref[host[i]]++;
    CK(cudaMemcpy(d, host.data(), n * 4, cudaMemcpyHostToDevice));
    auto try_mapper = [&](auto k, auto m, const char* what) {
      CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      auto go = [&] { cudaMemsetAsync(counts, 0, bins * 4); k<<<132, 1024, smem>>>(d, n, counts, m, left, slices); };
      go(); CK(cudaDeviceSynchronize());
      std::vector<unsigned> got(bins); CK(cudaMemcpy(got.data(), counts, bins * 4, cudaMemcpyDeviceToHost));
      const float ms = median_ms(go);
      printf("%-10s %-34s %s %.4f ms %.3f\n", names[dist], what, got == ref ? "exact" : "WRONG", ms, n * 4.0 / (ms * 1e-3) / bw);
    };
    const unit_step_bin_mapper<int> unit(0, bins);
    try_mapper(mapper_kernel<unit_step_bin_mapper<int>, false>, unit, "library (adaptive mode)");
    try_mapper(hot_kernel<unit_step_bin_mapper<int>>, unit, "unit step, hot bins v4");
    try_mapper(scan_kernel<unit_step_bin_mapper<int>>, unit, "unit step, scan mode");
  }
  return 0;
}
