// Scratch: which difference between the standalone byte probe and the library kernel costs uniform bytes.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include "tally/detail/dispatch/histogram_dispatch.cuh"
#include "tally/gpu.hpp"
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)
using namespace tally;
using namespace tally::detail;

__device__ long long clock_probe[2];

__device__ __forceinline__ void add16(unsigned* rep, uint4 r) {
  const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int j = 0; j < 16; ++j) atomicAdd(rep + ((w[j / 4] >> (8 * (j % 4))) & 255u) * 32, 1u);
}

// Pattern 0: block chunks (thread t of block b loads base + u*T + t). Pattern 1: warp chunks (lane l of
// warp w loads base + u*32 + l, warps striding over the grid), as the library walks.
template <int T, int MinBlocks, int U, int Pattern>
__global__ void __launch_bounds__(T, MinBlocks) probe(const uint4* d, long n, unsigned* counts) {
  extern __shared__ unsigned h[];
  long long c0 = clock64(), t0; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (int i = threadIdx.x; i < 256 * 32; i += T) h[i] = 0;
  __syncthreads();
  unsigned* rep = h + (threadIdx.x % 32);
  if (Pattern == 0) {
    const long stride = (long)gridDim.x * T * U;
    for (long base = blockIdx.x * (long)T * U; base < n; base += stride) {
      uint4 raw[U];
#pragma unroll
      for (int u = 0; u < U; ++u) { long i = base + u * T + threadIdx.x; if (i < n) raw[u] = __ldcs(d + i); }
#pragma unroll
      for (int u = 0; u < U; ++u) { long i = base + u * T + threadIdx.x; if (i < n) add16(rep, raw[u]); }
    }
  } else {
    const int lane = threadIdx.x % 32;
    const long warp = ((long)blockIdx.x * T + threadIdx.x) / 32, warps = (long)gridDim.x * T / 32;
    for (long base = warp * 32 * U; base < n; base += warps * 32 * U) {
      uint4 raw[U];
#pragma unroll
      for (int u = 0; u < U; ++u) { long i = base + u * 32 + lane; if (i < n) raw[u] = __ldcs(d + i); }
#pragma unroll
      for (int u = 0; u < U; ++u) { long i = base + u * 32 + lane; if (i < n) add16(rep, raw[u]); }
    }
  }
  __syncthreads();
  for (int b = threadIdx.x / 32; b < 256; b += T / 32) {
    unsigned s = h[b * 32 + threadIdx.x % 32];
    for (int o = 16; o; o /= 2) s += __shfl_xor_sync(~0u, s, o);
    if (threadIdx.x % 32 == 0 && s) atomicAdd(counts + b, s);
  }
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    long long c1 = clock64(), t1; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    clock_probe[0] = c1 - c0; clock_probe[1] = t1 - t0;
  }
}

__global__ void read_only(const uint4* d, long n, unsigned* out) {
  unsigned acc = 0;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    uint4 r = __ldcs(d + i); acc ^= r.x ^ r.y ^ r.z ^ r.w;
  }
  if (acc == 0x12345678u) out[0] = acc;
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

const double bw = 3.01e12;
long n = 1L << 28;
unsigned* counts;
const char* name;
void report(const char* what, float ms, int per) { printf("%s %-40s blocks/SM %d  %.4f ms %.3f\n", name, what, per, ms, n / (ms * 1e-3) / bw); }

template <int T, int MB, int U, int P>
void run_probe(const unsigned char* d, const char* what, int want_per = 0) {
  auto k = probe<T, MB, U, P>; size_t s = 256 * 32 * 4; int per = 0;
  if (want_per) s = std::max<size_t>(s, (227 * 1024) / want_per - 1024);
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, s));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, T, s));
  cudaFuncAttributes fa; cudaFuncGetAttributes(&fa, k);
  char buf[96]; snprintf(buf, sizeof buf, "%s (%d regs)", what, fa.numRegs);
  report(buf, median_ms([&] { k<<<per * 132, T, s>>>((const uint4*)d, n / 16, counts); }), per);
  long long cp[2]; CK(cudaMemcpyFromSymbol(cp, clock_probe, sizeof cp));
  printf("      block 0 at %.0f MHz\n", cp[0] * 1e3 / cp[1]);
}

int main() {
  std::vector<unsigned char> uni(n), one(n, 128);
  std::mt19937_64 rng(1);
  for (long i = 0; i < n; i += 8) { unsigned long long r = rng(); memcpy(&uni[i], &r, 8); }
  unsigned char* d; CK(cudaMalloc(&d, n)); CK(cudaMalloc(&counts, 256 * 8));
  std::uint64_t* left; CK(cudaMalloc(&left, 8));
  for (int which = 0; which < 2; ++which) {
    CK(cudaMemcpy(d, which ? one.data() : uni.data(), n, cudaMemcpyHostToDevice));
    name = which ? "single " : "uniform";
    for (int rep = 0; rep < 3; ++rep) {
    run_probe<1024, 2, 4, 0>(d, "block-chunk 1024 U4 1/SM", 1);
    run_probe<1024, 2, 4, 1>(d, "warp-chunk 1024 U4 1/SM", 1);
    run_probe<1024, 2, 2, 1>(d, "warp-chunk 1024 U2 1/SM", 1);
    run_probe<1024, 2, 2, 0>(d, "block-chunk 1024 U2 2/SM", 2);
    {
      auto k = shared_atomic_histogram_kernel<aggregation::none, std::uint8_t, std::uint32_t, byte_shift_mapper>;
      size_t s = 256 * 32 * 4;
      CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, s));
      byte_shift_mapper m(0, 256);
      report("library kernel 132 blocks", median_ms([&] { k<<<132, 1024, s>>>(d, n, counts, m, left, 32); }), 1);
      report("library kernel 264 blocks", median_ms([&] { k<<<264, 1024, s>>>(d, n, counts, m, left, 32); }), 2);
    }
    }
    gpu::workspace ws;
    std::span<const std::uint8_t> samples(d, n);
    std::span<std::uint32_t> c(counts, 256);
    report("public call replicated", median_ms([&] { gpu::histogram_even_async(samples, c, even_bins{256, 0.0, 256.0}, ws, {strategy::replicated}); }), 0);
  }
  return 0;
}
