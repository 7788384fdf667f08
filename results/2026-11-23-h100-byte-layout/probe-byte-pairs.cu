// Probe, kept as it ran (output in README.md): byte histograms (256 bins) that count PAIRS of bytes
// with one shared atomic: a joint histogram of (first, second) byte in 16-bit halves of 32768 words
// (128 KiB), a wrap of a half detected from the atomic's returned value and spilled, then both
// marginals summed at the end. Compared in one run with 32 interleaved replicas (one atomic per
// byte). The thread-column kernels of probe-thread-columns.cu are still in the file, unused.
//   nvcc -std=c++20 -O3 -arch=sm_90 probe-byte-pairs.cu
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)

template <int T, int MinBlocks>
__global__ void __launch_bounds__(T, MinBlocks) replicas(const uint4* d, long nvec, unsigned* counts) {
  extern __shared__ unsigned h[];
  for (int i = threadIdx.x; i < 256 * 32; i += T) h[i] = 0;
  __syncthreads();
  unsigned* rep = h + (threadIdx.x % 32);
  const int lane = threadIdx.x % 32;
  const long warp = ((long)blockIdx.x * T + threadIdx.x) / 32, warps = (long)gridDim.x * T / 32;
  constexpr int U = 4;
  for (long base = warp * 32 * U; base < nvec; base += warps * 32 * U) {
    uint4 raw[U];
#pragma unroll
    for (int u = 0; u < U; ++u) { long i = base + u * 32 + lane; if (i < nvec) raw[u] = __ldcs(d + i); }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      long i = base + u * 32 + lane;
      if (i < nvec) {
        const unsigned w[4] = {raw[u].x, raw[u].y, raw[u].z, raw[u].w};
#pragma unroll
        for (int j = 0; j < 16; ++j) atomicAdd(rep + ((w[j / 4] >> (8 * (j % 4))) & 255u) * 32, 1u);
      }
    }
  }
  __syncthreads();
  for (int b = threadIdx.x / 32; b < 256; b += T / 32) {
    unsigned s = h[b * 32 + threadIdx.x % 32];
    for (int o = 16; o; o /= 2) s += __shfl_xor_sync(~0u, s, o);
    if (threadIdx.x % 32 == 0 && s) atomicAdd(counts + b, s);
  }
}


// Word of pair (x, y): row x (128 words), column (y >> 1) with its low 5 bits (the bank) xored
// with a function of x and of y's top bits, a bijection within the row.
template <int Swizzle>
__device__ __forceinline__ unsigned pair_word(unsigned x, unsigned y) {
  unsigned col = y >> 1;
  if (Swizzle == 1) col ^= x & 31u;
  if (Swizzle == 2) col ^= (x ^ (x >> 5) * 9u ^ (y >> 6) * 5u) & 31u;
  return (x << 7) | col;
}

template <bool Check, int Swizzle>
__device__ __forceinline__ void count_pair(unsigned* joint, int* spill, unsigned h) {
  const unsigned x = h & 255u, y = (h >> 8) & 255u;
  const unsigned add = (y & 1u) ? 0x10000u : 1u;
  const unsigned old = atomicAdd(joint + pair_word<Swizzle>(x, y), add);
  if (Check) {
    const unsigned s = old + add;
    const bool lo_wrap = add == 1u && (s & 0xFFFFu) == 0u;
    if (lo_wrap | (s < old)) {
      if (lo_wrap) {  // (x, y) lost 65536; its carry gave (x, y | 1) one too many
        atomicAdd(spill + x, 65536 - 1); atomicAdd(spill + y, 65536); atomicAdd(spill + (y | 1u), -1);
      }
      if (s < old) { atomicAdd(spill + x, 65536); atomicAdd(spill + (y | 1u), 65536); }  // the high half wrapped
    }
  }
}

template <int T, bool Check, int Swizzle, int U>
__global__ void __launch_bounds__(T, 1) pairs(const uint4* d, long nvec, unsigned* counts) {
  extern __shared__ unsigned sh[];
  unsigned* joint = sh;
  int* spill = reinterpret_cast<int*>(sh + 32768);
  for (int i = threadIdx.x; i < 32768 + 256; i += T) sh[i] = 0;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const long warp = ((long)blockIdx.x * T + threadIdx.x) / 32, warps = (long)gridDim.x * T / 32;
  for (long base = warp * 32 * U; base < nvec; base += warps * 32 * U) {
    uint4 raw[U];
#pragma unroll
    for (int u = 0; u < U; ++u) { long i = base + u * 32 + lane; if (i < nvec) raw[u] = __ldcs(d + i); }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      long i = base + u * 32 + lane;
      if (i < nvec) {
        const unsigned w[4] = {raw[u].x, raw[u].y, raw[u].z, raw[u].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) { count_pair<Check, Swizzle>(joint, spill, w[j]); count_pair<Check, Swizzle>(joint, spill, w[j] >> 16); }
      }
    }
  }
  __syncthreads();
  // Rows: bin x as the first byte of a pair.
  for (int x = threadIdx.x / 32; x < 256; x += T / 32) {
    unsigned s = 0;
    for (int c = lane; c < 128; c += 32) { const unsigned v = joint[x * 128 + c]; s += (v & 0xFFFFu) + (v >> 16); }
    for (int o = 16; o; o /= 2) s += __shfl_xor_sync(~0u, s, o);
    if (lane == 0) atomicAdd(spill + x, (int)s);
  }
  // Columns: bins 2m and 2m+1 as the second byte; thread t sums column m = t % 128 over rows t / 128 + 8k.
  for (int t = threadIdx.x; t < 1024; t += T) {
    const unsigned m = t % 128;
    unsigned lo = 0, hi = 0;
    for (unsigned x = t / 128; x < 256; x += 8) {
      const unsigned v = joint[pair_word<Swizzle>(x, 2 * m)];
      lo += v & 0xFFFFu; hi += v >> 16;
    }
    atomicAdd(spill + 2 * m, (int)lo); atomicAdd(spill + 2 * m + 1, (int)hi);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < 256; b += T) if (spill[b]) atomicAdd(counts + b, (unsigned)spill[b]);
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
  cudaFuncAttributes fa; cudaFuncGetAttributes(&fa, k);
  CK(cudaMemset(counts, 0, 1024));
  k<<<per * sms, T, smem>>>((const uint4*)g_data, n / 16, counts);
  CK(cudaDeviceSynchronize());
  std::vector<unsigned> got(256); CK(cudaMemcpy(got.data(), counts, 1024, cudaMemcpyDeviceToHost));
  int wrong = 0; for (int b = 0; b < 256; ++b) wrong += got[b] != want[b];
  float ms = median_ms([&] { k<<<per * sms, T, smem>>>((const uint4*)g_data, n / 16, counts); });
  printf("%s %-34s T %4d blocks/SM %d regs %3d  %.4f ms  %.3f  wrong bins %d\n", name, what, T, per, fa.numRegs, ms,
         n / (ms * 1e-3) / bw, wrong);
}

template <bool C, int S, int U>
void run_pairs(const char* what) { run(pairs<1024, C, S, U>, 1024, (32768 + 256) * 4, what); }

int main() {
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::vector<unsigned char> h(n);
  CK(cudaMalloc(&g_data, n)); CK(cudaMalloc(&counts, 1024));
  CK(cudaMemset(g_data, 0x5a, n));
  {
    float ms = median_ms([&] { read_only<<<sms * 4, 512>>>((const uint4*)g_data, n / 16, counts); });
    bw = n / (ms * 1e-3); printf("read bandwidth %.0f GB/s (512 x 4/SM, as tally bench)\n", bw / 1e9);
  }
  for (int which = 0; which < 8; ++which) {
    std::mt19937_64 rng(7 + which);
    if (which == 0) { name = "uniform  "; for (long i = 0; i < n; i += 8) { unsigned long long r = rng(); memcpy(&h[i], &r, 8); } }
    if (which == 1) { name = "single128"; std::fill(h.begin(), h.end(), 128); }
    if (which == 2) { name = "single129"; std::fill(h.begin(), h.end(), 129); }
    if (which == 3) { name = "geometric"; std::geometric_distribution<int> g(0.5); for (auto& x : h) x = std::min(g(rng), 255); }
    if (which == 4) { name = "sorted   "; for (long i = 0; i < n; ++i) h[i] = (unsigned char)(i * 256 / n); }
    if (which == 5) { name = "loguni   "; std::uniform_real_distribution<double> u(0, std::log(256.0)); for (auto& x : h) x = (unsigned char)std::min(255.0, std::exp(u(rng)) - 1); }
    if (which == 6) { name = "mult32   "; for (auto& x : h) x = (unsigned char)(32 * (rng() % 8)); }
    if (which == 7) { name = "advers   "; for (long i = 0; i < n; i += 2) { unsigned x = rng() % 256; h[i] = x; h[i + 1] = 2 * (x & 31); } }
    std::fill(want.begin(), want.end(), 0); for (auto x : h) ++want[x];
    CK(cudaMemcpy(g_data, h.data(), n, cudaMemcpyHostToDevice));
    run(replicas<1024, 1>, 1024, 256 * 32 * 4, "replicas ATOMS 1024");
    run_pairs<true, 0, 2>("pairs check swz0 U2");
    run_pairs<true, 1, 2>("pairs check swz1 U2");
    run_pairs<true, 2, 2>("pairs check swz2 U2");
    run_pairs<true, 2, 4>("pairs check swz2 U4");
    run_pairs<false, 2, 2>("pairs NOCHECK swz2 U2");
  }
  return 0;
}
