// Probe behind results/2026-11-22-h100-probes (standalone): shared-memory atomic ceilings, byte
// histograms with 1-32 replicas, and 65536-bin packed 16-bit counters spilled on return values or
// by a periodic scan.   nvcc -std=c++17 -O3 -arch=sm_90 byte_and_packed_probe.cu && ./a.out 15
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <vector>
#include <algorithm>
#include <random>
#include <cmath>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)

__global__ void read_kernel(const uint4* d, long n, unsigned* out) {
  unsigned acc = 0;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    uint4 v = __ldcs(d + i); acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678) out[0] = acc;
}

template <class K> float time_kernel(K launch, int runs) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> ts;
  for (int r = 0; r < runs + 2; ++r) {
    cudaEventRecord(a); launch(); cudaEventRecord(b); CK(cudaEventSynchronize(b));
    float ms; cudaEventElapsedTime(&ms, a, b); if (r >= 2) ts.push_back(ms);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

// ---- shared-atomic ceilings: ops per clock per SM (no global loads)
template <int Mode>
__global__ void __launch_bounds__(1024) ceiling_kernel(unsigned* out, int iters) {
  __shared__ unsigned h[8192];
  for (int i = threadIdx.x; i < 8192; i += blockDim.x) h[i] = 0;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  unsigned x = threadIdx.x * 2654435761u + blockIdx.x;
  for (int i = 0; i < iters; ++i) {
    x = x * 1664525u + 1013904223u;
    if (Mode == 0) atomicAdd(&h[(i & 255) * 32], 1u);                 // whole warp one address (merged)
    else if (Mode == 1) atomicAdd(&h[((x >> 24) & 255) * 32 + lane], 1u);  // conflict-free: bank = lane
    else if (Mode == 2) atomicAdd(&h[(x >> 24) & 255], 1u);           // random over 256 (bank conflicts)
    else if (Mode == 3) { unsigned* p = &h[((x >> 24) & 255) * 32 + lane]; *p = *p + 1; } // LDS+STS, conflict-free, race-free per lane? (warps share) - ceiling only
    else if (Mode == 4) atomicAdd(&h[((x >> 24) & 255) * 32 + lane], x & 1); // conflict-free, run-time count
  }
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = h[0];
}

int sms; double read_bw; unsigned* counts; int clock_khz;

void ceilings() {
  const int iters = 4096;
  const char* names[] = {"warp-one-address INC", "conflict-free INC", "random-256 INC", "LDS+STS conflict-free", "conflict-free ADD runtime"};
  for (int mode = 0; mode < 5; ++mode) {
    for (int threads : {512, 1024}) {
      int blocks = sms * (2048 / threads);
      auto launch = [&] {
        if (mode == 0) ceiling_kernel<0><<<blocks, threads>>>(counts, iters);
        if (mode == 1) ceiling_kernel<1><<<blocks, threads>>>(counts, iters);
        if (mode == 2) ceiling_kernel<2><<<blocks, threads>>>(counts, iters);
        if (mode == 3) ceiling_kernel<3><<<blocks, threads>>>(counts, iters);
        if (mode == 4) ceiling_kernel<4><<<blocks, threads>>>(counts, iters);
      };
      float ms = time_kernel(launch, 10);
      double ops = double(blocks) * threads * iters;
      double per_clk_sm = ops / (ms * 1e-3) / sms / (clock_khz * 1e3);
      printf("ceiling %-28s T%-4d %.3f ms  %.2f lane-ops/clk/SM (at %d MHz)\n", names[mode], threads, ms, per_clk_sm, clock_khz / 1000);
    }
  }
}

// ---- uint8 256-bin histogram variants: R replicas bin-major (bin b of replica r at b*R + r), U loads in flight
template <int T, int R, int U>
__global__ void __launch_bounds__(T) u8_kernel(const uint4* d, long n, unsigned* counts) {
  extern __shared__ unsigned h[];
  for (int i = threadIdx.x; i < 256 * R; i += T) h[i] = 0;
  __syncthreads();
  unsigned* rep = h + (threadIdx.x % 32) % R;
  const long stride = (long)gridDim.x * T * U;
  for (long base = blockIdx.x * (long)T * U; base < n; base += stride) {
    uint4 raw[U];
#pragma unroll
    for (int u = 0; u < U; ++u) { long i = base + u * T + threadIdx.x; if (i < n) raw[u] = __ldcs(d + i); }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      long i = base + u * T + threadIdx.x;
      if (i >= n) continue;
      const unsigned w[4] = {raw[u].x, raw[u].y, raw[u].z, raw[u].w};
#pragma unroll
      for (int j = 0; j < 16; ++j) atomicAdd(rep + ((w[j / 4] >> (8 * (j % 4))) & 255u) * R, 1u);
    }
  }
  __syncthreads();
  for (int b = threadIdx.x; b < 256; b += T) {
    unsigned s = 0;
    for (int r = 0; r < R; ++r) s += h[b * R + r];
    if (s) atomicAdd(counts + b, s);
  }
}

std::vector<long> make_bins(int dist, long count, int num_bins) {
  std::vector<long> out(count);
  std::mt19937_64 rng(42 + dist);
  for (long i = 0; i < count; ++i) {
    long b;
    if (dist == 0) b = (long)((rng() >> 11) * 0x1.0p-53 * num_bins);
    else if (dist == 1) b = num_bins / 2;
    else if (dist == 2) b = (i * (long)num_bins) / count;
    else if (dist == 3) b = std::min<long>(num_bins - 1, __builtin_ctzl(rng() | (1UL << 63)));
    else b = std::min<long>(num_bins - 1, (long)std::exp((rng() >> 11) * 0x1.0p-53 * std::log((double)num_bins)) - 1);
    out[i] = b;
  }
  return out;
}
const char* dists[] = {"uniform", "single", "sorted", "geometric", "loguniform"};

template <class S, class Run>
void for_each_dist(int num_bins, void* d, long bytes, Run run) {
  const long count = bytes / sizeof(S);
  for (int dist = 0; dist < 5; ++dist) {
    auto bins = make_bins(dist, count, num_bins);
    std::vector<S> host(count);
    for (long i = 0; i < count; ++i) host[i] = (S)bins[i];
    std::vector<unsigned> ref(num_bins, 0);
    for (long i = 0; i < count; ++i) ref[bins[i]]++;
    CK(cudaMemcpy(d, host.data(), bytes, cudaMemcpyHostToDevice));
    run(dist, ref);
  }
}

template <class Launch>
void measure(const char* what, int dist, int num_bins, long bytes, const std::vector<unsigned>& ref, Launch launch) {
  CK(cudaMemset(counts, 0, num_bins * 4)); launch(); CK(cudaDeviceSynchronize());
  std::vector<unsigned> got(num_bins); CK(cudaMemcpy(got.data(), counts, num_bins * 4, cudaMemcpyDeviceToHost));
  const bool ok = got == ref;
  float ms = time_kernel([&] { cudaMemsetAsync(counts, 0, num_bins * 4); launch(); }, 15);
  printf("%5d %-10s %-34s %s %.4f ms  %.3f of read\n", num_bins, dists[dist], what, ok ? "exact" : "WRONG", ms,
         (bytes / (ms * 1e-3)) / read_bw);
}

template <int T, int R, int U>
void u8_variant(int dist, void* d, long bytes, const std::vector<unsigned>& ref) {
  auto k = u8_kernel<T, R, U>;
  size_t s = 256 * R * 4;
  int per = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, T, s));
  for (int g : {per * sms, 2 * sms}) {
    char nm[64]; snprintf(nm, 64, "u8 T%d R%d U%d grid%d", T, R, U, g);
    measure(nm, dist, 256, bytes, ref, [&] { k<<<g, T, s>>>((const uint4*)d, bytes / 16, counts); });
  }
}

// ---- 65536 bins, packed 16-bit counters checked by a block-wide scan each period, increments with
// no return value. Bin b: low half of word b (b < H) or high half of word b - H.
// Inc: 0 = branch (constant 1 or 65536, both merged-able), 1 = one add with a run-time operand.
template <int U, int Inc, bool Vote>
__global__ void __launch_bounds__(1024, 1) scan_kernel(const uint4* d, long nvec, unsigned* counts, int num_bins) {
  extern __shared__ uint4 smem4[];
  unsigned* w = reinterpret_cast<unsigned*>(smem4);
  const int H = (num_bins + 1) / 2;
  const int words4 = (H + 3) / 4;
  for (int i = threadIdx.x; i < words4; i += 1024) smem4[i] = make_uint4(0, 0, 0, 0);
  __syncthreads();
  constexpr int tile = 1024 * U;                  // vectors per tile
  constexpr int per_period = 32767 / (tile * 4);  // tiles between scans
  const int lane = threadIdx.x % 32;
  const long warp_off = (threadIdx.x / 32) * 32 * U;
  int t = 0;
  for (long tb = blockIdx.x * (long)tile; tb < nvec; tb += (long)gridDim.x * tile) {
    uint4 raw[U];
#pragma unroll
    for (int u = 0; u < U; ++u) { long i = tb + warp_off + u * 32 + lane; if (i < nvec) raw[u] = __ldcs(d + i); }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const bool valid = tb + warp_off + u * 32 + lane < nvec;
      const int b[4] = {(int)raw[u].x, (int)raw[u].y, (int)raw[u].z, (int)raw[u].w};
      if (Vote) {
        const bool same = valid && b[0] == b[1] && b[0] == b[2] && b[0] == b[3];
        const int wb = __shfl_sync(0xffffffffu, b[0], 0);
        if (__all_sync(0xffffffffu, same && b[0] == wb)) {
          if (lane == 0 && (unsigned)wb < (unsigned)num_bins) {
            const int hi = wb >= H;
            atomicAdd(w + wb - hi * H, (128u) << (16 * hi));
          }
          continue;
        }
      }
      if (!valid) continue;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if ((unsigned)b[j] < (unsigned)num_bins) {
          const int hi = b[j] >= H;
          if (Inc == 0) {
            if (hi) atomicAdd(w + b[j] - H, 65536u); else atomicAdd(w + b[j], 1u);
          } else {
            atomicAdd(w + b[j] - hi * H, 1u << (16 * hi));
          }
        }
      }
    }
    if (++t == per_period) {
      t = 0;
      __syncthreads();
      for (int i = threadIdx.x; i < words4; i += 1024) {
        uint4 x = smem4[i];
        unsigned* xs = &x.x;
        bool changed = false;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const unsigned v = xs[k];
          if (v & 0x80008000u) {
            const int word = i * 4 + k;
            if (v & 0x8000u) { atomicAdd(counts + word, 0x8000u); }
            if (v & 0x80000000u) { atomicAdd(counts + word + H, 0x8000u); }
            xs[k] = v & 0x7fff7fffu;
            changed = true;
          }
        }
        if (changed) smem4[i] = x;
      }
      __syncthreads();
    }
  }
  __syncthreads();
  for (int word = threadIdx.x; word < H; word += 1024) {
    const unsigned v = w[word];
    if (v & 0xffffu) atomicAdd(counts + word, v & 0xffffu);
    if ((v >> 16) && word + H < num_bins) atomicAdd(counts + word + H, v >> 16);
  }
}

template <int U, int Inc, bool Vote>
void scan_variant(int dist, int num_bins, void* d, long bytes, const std::vector<unsigned>& ref) {
  auto k = scan_kernel<U, Inc, Vote>;
  size_t s = ((num_bins + 1) / 2 + 3) / 4 * 16;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s));
  char nm[64]; snprintf(nm, 64, "scan U%d inc%d vote%d", U, Inc, (int)Vote);
  measure(nm, dist, num_bins, bytes, ref, [&] { k<<<sms, 1024, s>>>((const uint4*)d, bytes / 16, counts, num_bins); });
}


// Mode 0: return-valued adds, the adding thread spills T on crossing a multiple of T.
// Mode 1: adds with no return value, a block-wide scan every period spills whole counters >= T.
// Inc (mode 1): 0 = branch on half, 2 = constant 1 when the whole warp's vector is low, else run-time.
template <int U, int Mode, int T, bool Prefetch, int Inc>
__global__ void __launch_bounds__(1024, 1) p16_kernel(const uint4* d, long nvec, unsigned* counts, int num_bins) {
  extern __shared__ uint4 smem4[];
  unsigned* w = reinterpret_cast<unsigned*>(smem4);
  const int H = (num_bins + 1) / 2;
  const int words4 = (H + 3) / 4;
  for (int i = threadIdx.x; i < words4; i += 1024) smem4[i] = make_uint4(0, 0, 0, 0);
  __syncthreads();
  constexpr int tile = 1024 * U;
  constexpr int per_period = (65536 - T) / (tile * 4);
  static_assert(per_period >= 1);
  const int lane = threadIdx.x % 32;
  const long warp_off = (threadIdx.x / 32) * 32 * U;
  const long gstride = (long)gridDim.x * tile;
  auto load = [&](uint4 (&r)[U], long tb) {
#pragma unroll
    for (int u = 0; u < U; ++u) { long i = tb + warp_off + u * 32 + lane; if (i < nvec) r[u] = __ldcs(d + i); }
  };
  auto add = [&](int bin, unsigned count, bool constant_one) {
    const int hi = bin >= H;
    const int word = bin - hi * H;
    if (Mode == 0) {
      const unsigned sh = 16 * hi;
      const unsigned before = (atomicAdd(w + word, count << sh) >> sh) & 0xffffu;
      if ((before / T) != ((before + count) / T)) {
        atomicSub(w + word, (unsigned)T << sh);
        atomicAdd(counts + bin, (unsigned)T);
      }
    } else {
      if (Inc == 0 && count == 1) {
        if (hi) atomicAdd(w + word, 65536u); else atomicAdd(w + word, 1u);
      } else if (constant_one) {
        atomicAdd(w + word, 1u);
      } else {
        atomicAdd(w + word, count << (16 * hi));
      }
    }
  };
  int t = 0;
  uint4 cur[U], nxt[U];
  long tb = blockIdx.x * (long)tile;
  if (Prefetch && tb < nvec) load(cur, tb);
  for (; tb < nvec; tb += gstride) {
    if (Prefetch) { if (tb + gstride < nvec) load(nxt, tb + gstride); } else load(cur, tb);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const bool valid = tb + warp_off + u * 32 + lane < nvec;
      const int b[4] = {(int)cur[u].x, (int)cur[u].y, (int)cur[u].z, (int)cur[u].w};
      const bool same = valid && b[0] == b[1] && b[0] == b[2] && b[0] == b[3];
      const int wb = __shfl_sync(0xffffffffu, b[0], 0);
      if (__all_sync(0xffffffffu, same && b[0] == wb)) {
        if (lane == 0 && (unsigned)wb < (unsigned)num_bins) add(wb, 128u, false);
        continue;
      }
      bool low = true;
#pragma unroll
      for (int j = 0; j < 4; ++j) low = low && (unsigned)b[j] < (unsigned)H;
      const bool all_low = Inc == 2 && __all_sync(0xffffffffu, low || !valid);
      if (!valid) continue;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if ((unsigned)b[j] < (unsigned)num_bins) add(b[j], 1u, all_low);
      }
    }
    if (Prefetch) {
#pragma unroll
      for (int u = 0; u < U; ++u) cur[u] = nxt[u];
    }
    if (++t == per_period) {
      t = 0;
      __syncthreads();
      if (Mode == 1) {
        for (int i = threadIdx.x; i < words4; i += 1024) {
          uint4 x = smem4[i];
          unsigned* xs = &x.x;
          bool changed = false;
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const unsigned v = xs[k];
            const unsigned lo = v & 0xffffu, hi = v >> 16;
            const int word = i * 4 + k;
            if (lo >= T) { atomicAdd(counts + word, lo); xs[k] &= 0xffff0000u; changed = true; }
            if (hi >= T) { atomicAdd(counts + word + H, hi); xs[k] &= 0xffffu; changed = true; }
          }
          if (changed) smem4[i] = x;
        }
        __syncthreads();
      }
    }
  }
  __syncthreads();
  for (int word = threadIdx.x; word < H; word += 1024) {
    const unsigned v = w[word];
    if (v & 0xffffu) atomicAdd(counts + word, v & 0xffffu);
    if ((v >> 16) && word + H < num_bins) atomicAdd(counts + word + H, v >> 16);
  }
}

template <int U, int Mode, int T, bool Prefetch, int Inc>
void p16_variant(int dist, int num_bins, void* d, long bytes, const std::vector<unsigned>& ref) {
  auto k = p16_kernel<U, Mode, T, Prefetch, Inc>;
  size_t s = ((num_bins + 1) / 2 + 3) / 4 * 16;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s));
  char nm[64]; snprintf(nm, 64, "p16 U%d %s T%d pf%d inc%d", U, Mode ? "scan" : "ret ", T, (int)Prefetch, Inc);
  measure(nm, dist, num_bins, bytes, ref, [&] { k<<<sms, 1024, s>>>((const uint4*)d, bytes / 16, counts, num_bins); });
}

int main(int argc, char** argv) {
  const int part = argc > 1 ? atoi(argv[1]) : 7;
  void* d; CK(cudaMalloc(&d, 1L << 30)); CK(cudaMalloc(&counts, (1 << 17) * 4));
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  uint4* big; CK(cudaMalloc(&big, 1L << 30)); CK(cudaMemset(big, 1, 1L << 30));
  float read_ms = time_kernel([&] { read_kernel<<<sms * 4, 512>>>(big, (1L << 30) / 16, counts); }, 20);
  read_bw = (1L << 30) / (read_ms * 1e-3);
  printf("read bandwidth %.1f GB/s, %d SMs, clock %d MHz\n", read_bw / 1e9, sms, clock_khz / 1000);
  CK(cudaFree(big));
  if (part & 1) ceilings();
  if (part & 2) {
    const long bytes = 1L << 28;
    for_each_dist<uint8_t>(256, d, bytes, [&](int dist, const std::vector<unsigned>& ref) {
      if (dist == 2 || dist == 4) return;
      u8_variant<512, 1, 1>(dist, d, bytes, ref);
      u8_variant<512, 1, 2>(dist, d, bytes, ref);
      u8_variant<512, 1, 4>(dist, d, bytes, ref);
      u8_variant<512, 32, 1>(dist, d, bytes, ref);
      u8_variant<512, 32, 2>(dist, d, bytes, ref);
      u8_variant<512, 32, 4>(dist, d, bytes, ref);
      u8_variant<256, 32, 4>(dist, d, bytes, ref);
      u8_variant<1024, 32, 2>(dist, d, bytes, ref);
      u8_variant<512, 8, 2>(dist, d, bytes, ref);
    });
  }
  if (part & 4) {
    const long bytes = 1L << 30;
    for_each_dist<int32_t>(65536, d, bytes, [&](int dist, const std::vector<unsigned>& ref) {
      scan_variant<1, 0, true>(dist, 65536, d, bytes, ref);
      scan_variant<2, 0, true>(dist, 65536, d, bytes, ref);
      scan_variant<2, 1, true>(dist, 65536, d, bytes, ref);
      scan_variant<4, 0, true>(dist, 65536, d, bytes, ref);
      scan_variant<2, 0, false>(dist, 65536, d, bytes, ref);
    });
  }
  if (part & 8) {
    const long bytes = 1L << 30;
    for_each_dist<int32_t>(65536, d, bytes, [&](int dist, const std::vector<unsigned>& ref) {
      p16_variant<2, 0, 32768, false, 0>(dist, 65536, d, bytes, ref);
      p16_variant<2, 0, 32768, true, 0>(dist, 65536, d, bytes, ref);
      p16_variant<2, 0, 4096, true, 0>(dist, 65536, d, bytes, ref);
      p16_variant<4, 0, 4096, true, 0>(dist, 65536, d, bytes, ref);
      p16_variant<2, 1, 4096, true, 0>(dist, 65536, d, bytes, ref);
      p16_variant<2, 1, 4096, true, 2>(dist, 65536, d, bytes, ref);
      p16_variant<4, 1, 4096, true, 2>(dist, 65536, d, bytes, ref);
      p16_variant<2, 1, 8192, true, 2>(dist, 65536, d, bytes, ref);
    });
  }
  return 0;
}
