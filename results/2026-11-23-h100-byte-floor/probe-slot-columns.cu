// Probe, kept as it last ran (output in README.md and probe-slot-columns*.txt; built as scratch/slots.cu):
// byte histograms (256 bins) with no shared atomics in the hot loop. Every thread owns
// a column of counters; the 4 bytes of a loaded word go to 4 distinct byte slots of its counter word
// (slot = the byte's position in the word), so the 4 loads can go before the 4 stores (no aliasing).
// One PRMT builds the address: group<<16 | bin<<8 | thread64*4 + slot. LDS.U8, add, STS.U8.
// Counters flush every F vectors: lane l reads its warp's columns along a diagonal (conflict-free),
// sums the 4 slots with DP4A into registers, zeroes them. Compared with 64 replicas + ATOMS.
//   nvcc -std=c++20 -O3 -arch=sm_90 probe-slot-columns.cu
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

// Slot columns. Groups of 64 threads own 64 KiB each: byte g<<16 | b<<8 | t64*4 | slot.
// Wide = 16: 16-bit counters, 2 slots (byte k -> slot k&1, batches of 2); Wide = 8: 4 slots.
template <int Wide>
__device__ __forceinline__ void flush_warp(unsigned char* cols, unsigned group_base, unsigned half, unsigned lane, unsigned (&acc)[8]) {
  __syncwarp();
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const unsigned b = lane + 32 * j;
#pragma unroll 8
    for (int s = 0; s < 32; ++s) {
      const unsigned t = ((lane + s) & 31u) + half;
      unsigned* word = reinterpret_cast<unsigned*>(cols + group_base + (b << 8) + t * 4);
      const unsigned v = *word;
      if (Wide == 8) acc[j] = __dp4a(v, 0x01010101u, acc[j]);
      else acc[j] += (v & 0xFFFFu) + (v >> 16);
      *word = 0;
    }
  }
  __syncwarp();
}

template <int T, int P, int Wide, int F>
__global__ void __launch_bounds__(T, 1) slots(const uint4* d, long nvec, unsigned* counts) {
  extern __shared__ unsigned char cols[];
  unsigned* block_hist = reinterpret_cast<unsigned*>(cols + (T / 64) * 65536);
  for (int i = threadIdx.x; i < (T / 64) * 16384; i += T) reinterpret_cast<unsigned*>(cols)[i] = 0;
  for (int i = threadIdx.x; i < 256; i += T) block_hist[i] = 0;
  __syncthreads();
  const unsigned lane = threadIdx.x % 32, t64 = threadIdx.x % 64, g = threadIdx.x / 64;
  const unsigned half = threadIdx.x & 32u;
  unsigned basek[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) basek[k] = (g << 16) | (t64 * 4 + (Wide == 8 ? k : 2 * (k & 1)));
  unsigned acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const long warp = ((long)blockIdx.x * T + threadIdx.x) / 32, warps = (long)gridDim.x * T / 32;
  const long step = warps * 32;
  long i = warp * 32 + lane;
  uint4 buf[P];
#pragma unroll
  for (int p = 0; p < P; ++p) if (i + p * step < nvec) buf[p] = __ldcs(d + i + p * step);
  int since = 0;
  for (long base = warp * 32; base < nvec; base += P * step) {
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const long j = base + p * step + lane;
      if (j < nvec) {
        const uint4 r = buf[p];
        if (j + P * step < nvec) buf[p] = __ldcs(d + j + P * step);
        const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          if (Wide == 8) {
            unsigned a[4], c[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) a[k] = __byte_perm(w[q], basek[k], 0x7604u | (k << 4));
#pragma unroll
            for (int k = 0; k < 4; ++k) c[k] = cols[a[k]];
#pragma unroll
            for (int k = 0; k < 4; ++k) cols[a[k]] = static_cast<unsigned char>(c[k] + 1);
          } else {
#pragma unroll
            for (int h2 = 0; h2 < 2; ++h2) {
              unsigned a[2], c[2];
#pragma unroll
              for (int k = 0; k < 2; ++k) a[k] = __byte_perm(w[q], basek[k], 0x7604u | ((2 * h2 + k) << 4));
#pragma unroll
              for (int k = 0; k < 2; ++k) c[k] = *reinterpret_cast<unsigned short*>(cols + a[k]);
#pragma unroll
              for (int k = 0; k < 2; ++k) *reinterpret_cast<unsigned short*>(cols + a[k]) = static_cast<unsigned short>(c[k] + 1);
            }
          }
        }
      }
    }
    since += P;
    if (since >= F) { flush_warp<Wide>(cols, g << 16, half, lane, acc); since = 0; }
  }
  flush_warp<Wide>(cols, g << 16, half, lane, acc);
#pragma unroll
  for (int j = 0; j < 8; ++j) if (acc[j]) atomicAdd(block_hist + lane + 32 * j, acc[j]);
  __syncthreads();
  for (int b = threadIdx.x; b < 256; b += T) if (block_hist[b]) atomicAdd(counts + b, block_hist[b]);
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
  for (int which = 0; which < 3; ++which) {
    std::mt19937_64 rng(7 + which);
    if (which == 0) { name = "uniform  "; for (long i = 0; i < n; i += 8) { unsigned long long r = rng(); memcpy(&h[i], &r, 8); } }
    if (which == 1) { name = "single128"; std::fill(h.begin(), h.end(), 128); }
    if (which == 2) { name = "geometric"; std::geometric_distribution<int> gd(0.1); for (auto& x : h) x = std::min(gd(rng), 255); }
    std::fill(want.begin(), want.end(), 0); for (auto x : h) ++want[x];
    CK(cudaMemcpy(g_data, h.data(), n, cudaMemcpyHostToDevice));
    run(prmt64<1024, 4>, 1024, 256 * 64 * 4, "ATOMS 64 replicas PRMT U4");
    run(slots<192, 4, 8, 60>, 192, 3 * 65536 + 1024, "slots u8 T192 P4 F60");
    run(slots<192, 8, 8, 56>, 192, 3 * 65536 + 1024, "slots u8 T192 P8 F56");
    run(slots<128, 8, 8, 56>, 128, 2 * 65536 + 1024, "slots u8 T128 P8 F56");
    run(slots<64, 8, 8, 56>, 64, 65536 + 1024, "slots u8 T64x3 P8 F56");
    run(slots<192, 8, 16, 1 << 30>, 192, 3 * 65536 + 1024, "slots u16 T192 P8 noflush");
    run(slots<192, 4, 16, 1 << 30>, 192, 3 * 65536 + 1024, "slots u16 T192 P4 noflush");
  }
  return 0;
}
