// Scratch: why uniform bytes run slower than one-value bytes in the library's replicated kernel.
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>
#include "tally/detail/dispatch/histogram_dispatch.cuh"
#include "tally/gpu.hpp"
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)
using namespace tally;
using namespace tally::detail;

template <int T, int R, int U>
__global__ void __launch_bounds__(T) probe_u8(const uint4* d, long n, unsigned* counts) {
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
  const long n = 1L << 28;
  std::vector<unsigned char> uni(n), one(n, 128);
  std::mt19937_64 rng(1);
  for (long i = 0; i < n; i += 8) { unsigned long long r = rng(); memcpy(&uni[i], &r, 8); }
  unsigned char* d; unsigned* counts; CK(cudaMalloc(&d, n)); CK(cudaMalloc(&counts, 256 * 8));
  std::uint64_t* left; CK(cudaMalloc(&left, 8));
  gpu::workspace ws;
  const double bw = 3.033e12;
  for (int which = 0; which < 2; ++which) {
    CK(cudaMemcpy(d, which ? one.data() : uni.data(), n, cudaMemcpyHostToDevice));
    const char* name = which ? "single " : "uniform";
    auto report = [&](const char* what, float ms) { printf("%s %-44s %.4f ms %.3f\n", name, what, ms, n / (ms * 1e-3) / bw); };
    {
      auto k = probe_u8<1024, 32, 2>; size_t s = 256 * 32 * 4; int per = 0;
      CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, s));
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, 1024, s));
      report("probe 1024x? R32 U2 kernel only", median_ms([&] { k<<<per * 132, 1024, s>>>((const uint4*)d, n / 16, counts); }));
      printf("   probe blocks/SM %d\n", per);
    }
    {
      auto k = shared_atomic_histogram_kernel<aggregation::none, std::uint8_t, std::uint32_t, byte_shift_mapper>;
      size_t s = 256 * 32 * 4; int per = 0;
      CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, s));
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, 1024, s));
      byte_shift_mapper m(0, 256);
      report("library kernel only (1024 thr)", median_ms([&] { k<<<per * 132, 1024, s>>>(d, n, counts, m, left, 32); }));
      report("library kernel + 2 memsets", median_ms([&] { cudaMemsetAsync(left, 0, 8); cudaMemsetAsync(counts, 0, 1024); k<<<per * 132, 1024, s>>>(d, n, counts, m, left, 32); }));
      printf("   library blocks/SM %d\n", per);
    }
    std::span<const std::uint8_t> samples(d, n);
    std::span<std::uint32_t> c(counts, 256);
    for (strategy st : {strategy::replicated, strategy::shared_atomic}) {
      report(st == strategy::replicated ? "public call replicated" : "public call shared_atomic",
             median_ms([&] { gpu::histogram_even_async(samples, c, even_bins{256, 0.0, 256.0}, ws, {st}); }));
    }
  }
  return 0;
}
