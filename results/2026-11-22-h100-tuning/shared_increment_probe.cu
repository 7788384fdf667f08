// Probe behind results/2026-11-22-h100-tuning: replicated shared-atomic histograms with increments of a
// constant 1 (mode 0) against the same increment known only at run time (mode 1). Standalone:
//   nvcc -std=c++17 -O3 -arch=sm_90 --extended-lambda shared_increment_probe.cu && ./a.out
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <random>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)

__global__ void read_kernel(const uint4* d, long n, unsigned* out) {
  unsigned acc = 0;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    uint4 v = __ldcs(d + i); acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678) out[0] = acc;
}

template <class S> struct items_of { static constexpr int v = 16 / sizeof(S); };

// bins = value (value < num_bins counted). R replicas, bin b of replica r at b*R + r, lane l uses r = l % R.
// Mode 0: atomicAdd(p, 1) result unused. Mode 1: atomicAdd(p, count) with runtime count (always 1 here).
template <class S, int T, int R, int U, int Mode>
__global__ void __launch_bounds__(T) rep_kernel(const uint4* d, long n, unsigned* counts, int num_bins, unsigned one) {
  extern __shared__ unsigned h[];
  for (int i = threadIdx.x; i < num_bins * R; i += T) h[i] = 0;
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
      S v[items_of<S>::v];
      memcpy(v, &raw[u], 16);
#pragma unroll
      for (int j = 0; j < items_of<S>::v; ++j) {
        const unsigned b = static_cast<unsigned>(v[j]);
        if (b < (unsigned)num_bins) {
          if (Mode == 0) atomicAdd(rep + b * R, 1u); else atomicAdd(rep + b * R, one);
        }
      }
    }
  }
  __syncthreads();
  for (int b = threadIdx.x; b < num_bins; b += T) {
    unsigned s = 0;
    for (int r = 0; r < R; ++r) s += h[b * R + r];
    if (s) atomicAdd(counts + b, s);
  }
}

template <class K>
float time_kernel(K launch, int runs) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> ts;
  for (int r = 0; r < runs + 2; ++r) {
    cudaEventRecord(a); launch(); cudaEventRecord(b); CK(cudaEventSynchronize(b));
    float ms; cudaEventElapsedTime(&ms, a, b); if (r >= 2) ts.push_back(ms);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

int sms; double read_bw; unsigned* counts;

template <class S>
void run_type(const char* tname, int num_bins, void* d, long bytes) {
  const long n = bytes / 16;
  const long count = bytes / sizeof(S);
  std::vector<S> host(count);
  const char* dists[] = {"uniform", "single", "sorted", "geometric", "loguniform"};
  for (int dist = 0; dist < 5; ++dist) {
    std::mt19937_64 rng(42 + dist);
    for (long i = 0; i < count; ++i) {
      long b;
      if (dist == 0) b = (long)((rng() >> 11) * 0x1.0p-53 * num_bins);
      else if (dist == 1) b = num_bins / 2;
      else if (dist == 2) b = (i * (long)num_bins) / count;
      else if (dist == 3) b = std::min<long>(num_bins - 1, __builtin_ctzl(rng() | (1UL << 63)));
      else b = std::min<long>(num_bins - 1, (long)std::exp((rng() >> 11) * 0x1.0p-53 * std::log((double)num_bins)) - 1);
      host[i] = (S)b;
    }
    std::vector<unsigned> ref(num_bins, 0);
    for (long i = 0; i < count; ++i) ref[(long)host[i]]++;
    CK(cudaMemcpy(d, host.data(), bytes, cudaMemcpyHostToDevice));
    auto run = [&](const char* name, auto launch) {
      CK(cudaMemset(counts, 0, num_bins * 4)); launch(); CK(cudaDeviceSynchronize());
      std::vector<unsigned> got(num_bins); CK(cudaMemcpy(got.data(), counts, num_bins * 4, cudaMemcpyDeviceToHost));
      const bool ok = got == ref;
      float ms = time_kernel([&] { cudaMemsetAsync(counts, 0, num_bins * 4); launch(); }, 15);
      printf("%s %5d %-10s %-26s %s %.4f ms  %.3f of read\n", tname, num_bins, dists[dist], name, ok ? "exact" : "WRONG", ms,
             (bytes / (ms * 1e-3)) / read_bw);
    };
#define REP(T, R, U, M) { auto k = rep_kernel<S, T, R, U, M>; size_t s = (size_t)num_bins * R * 4; \
      if (s <= 227 * 1024) { if (s > 48 * 1024) CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s)); \
      int per = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, T, s)); int g = per * sms; \
      char nm[64]; snprintf(nm, 64, "T%d R%d U%d M%d g%d", T, R, U, M, g); \
      run(nm, [&] { k<<<g, T, s>>>((const uint4*)d, n, counts, num_bins, 1u); }); } }
    if (sizeof(S) == 1) {
      REP(512, 1, 1, 0) REP(512, 1, 1, 1) REP(512, 2, 1, 0) REP(512, 4, 1, 0) REP(512, 8, 1, 0) REP(512, 16, 1, 0)
      REP(512, 32, 1, 0) REP(1024, 32, 1, 0) REP(256, 32, 1, 0) REP(512, 32, 2, 0) REP(1024, 8, 1, 0)
    } else if (num_bins <= 4096) {
      REP(512, 1, 2, 0) REP(512, 1, 2, 1) REP(512, 2, 2, 0) REP(512, 4, 2, 0) REP(512, 8, 2, 0) REP(1024, 4, 2, 0) REP(1024, 8, 2, 0)
    } else {
      REP(512, 1, 2, 0) REP(512, 1, 2, 1) REP(1024, 1, 2, 0) REP(1024, 2, 2, 0) REP(1024, 1, 4, 0) REP(1024, 2, 4, 0)
    }
  }
}

int main() {
  const long bytes = 1L << 28;
  void* d; CK(cudaMalloc(&d, 1L << 30)); CK(cudaMalloc(&counts, 65536 * 4));
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  uint4* big; CK(cudaMalloc(&big, 1L << 30)); CK(cudaMemset(big, 1, 1L << 30));
  float read_ms = time_kernel([&] { read_kernel<<<sms * 4, 512>>>(big, (1L << 30) / 16, counts); }, 20);
  read_bw = (1L << 30) / (read_ms * 1e-3);
  printf("read bandwidth %.1f GB/s\n", read_bw / 1e9);
  run_type<uint8_t>("uint8", 256, d, bytes);
  run_type<int32_t>("int32", 256, d, 1L << 30);
  run_type<int32_t>("int32", 4096, d, 1L << 30);
  run_type<int32_t>("int32", 16384, d, 1L << 30);
  return 0;
}
