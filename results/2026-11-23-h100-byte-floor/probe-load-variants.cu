// Probe, kept as it last ran (output in README.md and probe-load-variants*.txt; built as scratch/loadvar.cu):
// the 64-replica PRMT byte kernel with load variants (L1 no_allocate, nc, L2 256B
// prefetch, software pipelining), each against the same read yardstick, GPU time.
//   nvcc -std=c++20 -O3 -arch=sm_90 probe-load-variants.cu
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include <cstdint>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)

template <int T, int U>
__global__ void __launch_bounds__(T, 1) prmt64(const uint4* d, long nvec, unsigned* counts) {
  extern __shared__ unsigned h[];
  for (int i = threadIdx.x; i < 256 * 64; i += T) h[i] = 0;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const unsigned roff = (threadIdx.x % 64) * 4;
  char* base = reinterpret_cast<char*>(h);
  const long warp = ((long)blockIdx.x * T + threadIdx.x) / 32, warps = (long)gridDim.x * T / 32;
  for (long b0 = warp * 32 * U; b0 < nvec; b0 += warps * 32 * U) {
    uint4 raw[U];
#pragma unroll
    for (int u = 0; u < U; ++u) { long i = b0 + u * 32 + lane; if (i < nvec) raw[u] = __ldcs(d + i); }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      long i = b0 + u * 32 + lane;
      if (i < nvec) {
        const unsigned w[4] = {raw[u].x, raw[u].y, raw[u].z, raw[u].w};
#pragma unroll
        for (int j = 0; j < 16; ++j) atomicAdd(reinterpret_cast<unsigned*>(base + __byte_perm(w[j / 4], roff, 0x6504u | ((j % 4) << 4))), 1u);
      }
    }
  }
  __syncthreads();
  for (int b = threadIdx.x / 32; b < 256; b += T / 32) {
    unsigned s = h[b * 64 + lane] + h[b * 64 + 32 + lane];
    for (int o = 16; o; o /= 2) s += __shfl_xor_sync(~0u, s, o);
    if (lane == 0 && s) atomicAdd(counts + b, s);
  }
}


// Load variants of the 64-replica PRMT kernel. Mode: 0 __ldcs, 1 L1::no_allocate, 2 nc+L1::no_allocate,
// 3 cs + L2::256B prefetch. Pipe: the next U vectors are loaded before the current U are counted.
template <int Mode>
__device__ __forceinline__ uint4 load16(const uint4* p) {
  uint4 r;
  if (Mode == 0) r = __ldcs(p);
  if (Mode == 1) asm volatile("ld.global.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  if (Mode == 2) asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  if (Mode == 3) asm volatile("ld.global.cs.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  if (Mode == 4) asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}

template <int T, int U, int Mode, bool Pipe>
__global__ void __launch_bounds__(T, 1) loadvar(const uint4* d, long nvec, unsigned* counts) {
  extern __shared__ unsigned h[];
  for (int i = threadIdx.x; i < 256 * 64; i += T) h[i] = 0;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const unsigned roff = (threadIdx.x % 64) * 4;
  char* base = reinterpret_cast<char*>(h);
  const long warp = ((long)blockIdx.x * T + threadIdx.x) / 32, warps = (long)gridDim.x * T / 32;
  const long step = warps * 32 * U;
  uint4 raw[U];
  if (Pipe) {
#pragma unroll
    for (int u = 0; u < U; ++u) { long i = warp * 32 * U + u * 32 + lane; if (i < nvec) raw[u] = load16<Mode>(d + i); }
  }
  for (long b0 = warp * 32 * U; b0 < nvec; b0 += step) {
    uint4 cur[U];
    if (Pipe) {
#pragma unroll
      for (int u = 0; u < U; ++u) { cur[u] = raw[u]; long i = b0 + step + u * 32 + lane; if (i < nvec) raw[u] = load16<Mode>(d + i); }
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u) { long i = b0 + u * 32 + lane; if (i < nvec) cur[u] = load16<Mode>(d + i); }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      long i = b0 + u * 32 + lane;
      if (i < nvec) {
        const unsigned w[4] = {cur[u].x, cur[u].y, cur[u].z, cur[u].w};
#pragma unroll
        for (int j = 0; j < 16; ++j) atomicAdd(reinterpret_cast<unsigned*>(base + __byte_perm(w[j / 4], roff, 0x6504u | ((j % 4) << 4))), 1u);
      }
    }
  }
  __syncthreads();
  for (int b = threadIdx.x / 32; b < 256; b += T / 32) {
    unsigned s = h[b * 64 + lane] + h[b * 64 + 32 + lane];
    for (int o = 16; o; o /= 2) s += __shfl_xor_sync(~0u, s, o);
    if (lane == 0 && s) atomicAdd(counts + b, s);
  }
}

__global__ void read_only(const uint4* d, long n, unsigned* out) {
  unsigned acc = 0;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    uint4 r = __ldcs(d + i); acc ^= r.x ^ r.y ^ r.z ^ r.w;
  }
  if (acc == 0x12345678u) out[0] = acc;
}

__global__ void hold(volatile int* release, int* timed_out) {
  const long long t0 = clock64();
  while (*release == 0) {
    if (clock64() - t0 > 4000000000LL) { *timed_out = 1; return; }
  }
}
volatile int* g_release; int* g_release_dev; int* g_timed_out;
template <class F> float median_ms(F f, int runs = 15) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> ts;
  for (int r = 0; r < runs + 3; ++r) {
    *g_release = 0; hold<<<1, 1>>>(g_release_dev, g_timed_out);
    cudaEventRecord(a); f(); cudaEventRecord(b);
    *g_release = 1;
    CK(cudaEventSynchronize(b));
    float ms; cudaEventElapsedTime(&ms, a, b); if (r >= 3) ts.push_back(ms);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

long n = 1L << 28;
unsigned* counts;
unsigned char* g_data;
double bw;
const char* name;
std::vector<unsigned long long> want(256);
int sms;

template <class K>
void run(K k, int T, size_t smem, const char* what) {
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, T, smem));
  cudaFuncAttributes fa; CK(cudaFuncGetAttributes(&fa, k));
  auto launch = [&] { cudaMemsetAsync(counts, 0, 1024); k<<<per * sms, T, smem>>>((const uint4*)g_data, n / 16, counts); };
  CK(cudaMemset(counts, 0xab, 1024));
  launch(); CK(cudaDeviceSynchronize());
  std::vector<unsigned> got(256); CK(cudaMemcpy(got.data(), counts, 1024, cudaMemcpyDeviceToHost));
  int wrong = 0; for (int b = 0; b < 256; ++b) wrong += got[b] != want[b];
  float ms = median_ms(launch);
  printf("%s %-30s T %4d blocks/SM %d regs %3d local %zu  %.4f ms  %.3f  wrong bins %d\n", name, what, T, per, fa.numRegs,
         fa.localSizeBytes, ms, n / (ms * 1e-3) / bw, wrong);
}

int main() {
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaHostAlloc((void**)&g_release, 4, cudaHostAllocMapped)); CK(cudaHostGetDevicePointer((void**)&g_release_dev, (void*)g_release, 0));
  CK(cudaMalloc(&g_timed_out, 4)); CK(cudaMemset(g_timed_out, 0, 4));
  std::vector<unsigned char> h(n);
  unsigned char* big; CK(cudaMalloc(&big, 4L << 28)); CK(cudaMemset(big, 0x5a, 4L << 28));
  CK(cudaMalloc(&g_data, n)); CK(cudaMalloc(&counts, 1024));
  float ms1 = median_ms([&] { read_only<<<sms * 4, 512>>>((const uint4*)big, (4L << 28) / 16, counts); });
  bw = (4L << 28) / (ms1 * 1e-3);
  printf("read 1 GiB %.0f GB/s (GPU time)\n", bw / 1e9);
  for (int which = 0; which < 2; ++which) {
    std::mt19937_64 rng(7 + which);
    if (which == 0) { name = "uniform  "; for (long i = 0; i < n; i += 8) { unsigned long long r = rng(); memcpy(&h[i], &r, 8); } }
    if (which == 1) { name = "single128"; std::fill(h.begin(), h.end(), 128); }
    if (which == 2) { name = "geometric"; std::geometric_distribution<int> gd(0.1); for (auto& x : h) x = std::min(gd(rng), 255); }
    std::fill(want.begin(), want.end(), 0); for (auto x : h) ++want[x];
    CK(cudaMemcpy(g_data, h.data(), n, cudaMemcpyHostToDevice));
    run(prmt64<1024, 4>, 1024, 65536, "B ATOMS 64 rep __ldcs U4");
    run(loadvar<1024, 4, 0, false>, 1024, 65536, "ldcs U4");
    run(loadvar<1024, 4, 1, false>, 1024, 65536, "L1 no_allocate U4");
    run(loadvar<1024, 4, 2, false>, 1024, 65536, "nc L1 no_allocate U4");
    run(loadvar<1024, 4, 3, false>, 1024, 65536, "cs L2 256B U4");
    run(loadvar<1024, 4, 4, false>, 1024, 65536, "nc no_alloc L2 256B U4");
    run(loadvar<1024, 2, 0, true>, 1024, 65536, "ldcs U2 pipelined");
    run(loadvar<1024, 4, 0, true>, 1024, 65536, "ldcs U4 pipelined");
    run(loadvar<1024, 2, 2, true>, 1024, 65536, "nc no_alloc U2 pipelined");
    run(loadvar<1024, 4, 2, true>, 1024, 65536, "nc no_alloc U4 pipelined");
    run(loadvar<512, 4, 2, true>, 512, 65536, "nc no_alloc U4 pipelined T512x2");
  }
  return 0;
}
