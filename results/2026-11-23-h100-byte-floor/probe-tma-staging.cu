// Probe, kept as it last ran (output in README.md and probe-tma-staging*.txt; built as scratch/tmaprobe.cu):
// bytes staged into shared memory by per-warp bulk copies (TMA) while the lanes count
// with ATOMS, against the bare register-load kernel and the library dispatch, GPU time.
//   nvcc -std=c++20 -O3 -arch=sm_90 --expt-relaxed-constexpr --extended-lambda -DTALLY_WITH_CUDA=1 \
//        -Xcompiler -fopenmp -I../../include probe-tma-staging.cu   (the include/ of the commit that adds it)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include <cstdint>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)


#include "tally/detail/dispatch/histogram_dispatch.cuh"

template <int T, int U, bool RuntimeBase>
__global__ void __launch_bounds__(T, 1) prmt64(const uint4* d, long nvec, unsigned* counts, int shift) {
  extern __shared__ unsigned h[];
  for (int i = threadIdx.x; i < 256 * 64; i += T) h[i] = 0;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const unsigned roff = (threadIdx.x % 64) * 4;
  char* base = reinterpret_cast<char*>(h) + (RuntimeBase ? shift * 256 : 0);
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


#include <cuda/ptx>
// TMA-staged bytes: each warp streams its own units of 32*V vectors (V KiB/2) into S stages of shared
// memory with bulk copies (cp.async.bulk, one mbarrier per stage), so loads stay in flight while
// the warp's lanes count with ATOMS (64 replicas, PRMT). Count = false: read only (the ceiling).
template <int T, int V, int S, bool Count>
__global__ void __launch_bounds__(T, 1) tma_warp(const uint4* d, long nvec, unsigned* counts) {
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned* h = reinterpret_cast<unsigned*>(smem);
  uint4* stage = reinterpret_cast<uint4*>(smem + 65536);
  std::uint64_t* bars = reinterpret_cast<std::uint64_t*>(smem + 65536 + (T / 32) * S * V * 512);
  const int lane = threadIdx.x % 32, wib = threadIdx.x / 32;
  uint4* my = stage + wib * S * 32 * V;
  std::uint64_t* mybar = bars + wib * S;
  for (int i = threadIdx.x; i < 256 * 64; i += T) h[i] = 0;
  if (lane == 0) {
    for (int s = 0; s < S; ++s) cuda::ptx::mbarrier_init(mybar + s, 1);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();
  const unsigned roff = (threadIdx.x % 64) * 4;
  char* base = reinterpret_cast<char*>(h);
  const long gw = (long)blockIdx.x * (T / 32) + wib, W = (long)gridDim.x * (T / 32);
  const long units = (nvec + 32 * V - 1) / (32 * V);
  auto issue = [&](long unit, int s) {
    const long first = unit * 32 * V;
    const unsigned bytes = (unsigned)min((long)(32 * V), nvec - first) * 16u;
    cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, mybar + s, bytes);
    cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, my + s * 32 * V, d + first, bytes, mybar + s);
  };
  if (lane == 0) {
    for (int s = 0; s < S; ++s) { const long u = gw + s * W; if (u < units) issue(u, s); }
  }
  unsigned acc = 0;
  int k = 0;
  for (long u = gw; u < units; u += W, ++k) {
    const int s = k % S;
    const unsigned phase = (k / S) & 1;
    while (!cuda::ptx::mbarrier_try_wait_parity(mybar + s, phase)) {}
    const long first = u * 32 * V;
    const int vecs = (int)min((long)(32 * V), nvec - first);
    uint4 raw[V];
#pragma unroll
    for (int v = 0; v < V; ++v) if (v * 32 + lane < vecs) raw[v] = my[s * 32 * V + v * 32 + lane];
    __syncwarp();
    if (lane == 0) {
      const long next = u + S * W;
      if (next < units) {
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        issue(next, s);
      }
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
      if (v * 32 + lane < vecs) {
        const unsigned w[4] = {raw[v].x, raw[v].y, raw[v].z, raw[v].w};
        if (Count) {
#pragma unroll
          for (int j = 0; j < 16; ++j) atomicAdd(reinterpret_cast<unsigned*>(base + __byte_perm(w[j / 4], roff, 0x6504u | ((j % 4) << 4))), 1u);
        } else {
          acc ^= w[0] ^ w[1] ^ w[2] ^ w[3];
        }
      }
    }
  }
  __syncthreads();
  if (!Count) { if (acc == 0x12345678u) counts[0] = acc; return; }
  for (int b = threadIdx.x / 32; b < 256; b += T / 32) {
    unsigned s2 = h[b * 64 + lane] + h[b * 64 + 32 + lane];
    for (int o = 16; o; o /= 2) s2 += __shfl_xor_sync(~0u, s2, o);
    if (lane == 0 && s2) atomicAdd(counts + b, s2);
  }
}
template <int T, int V, int S> constexpr int tma_smem() { return 65536 + (T / 32) * S * V * 512 + (T / 32) * S * 8; }

// F: the library's pieces alone.
template <int U>
__global__ void __launch_bounds__(1024, 1) lib_pieces(const std::uint8_t* samples, long n, unsigned* counts, tally::detail::byte_shift_mapper map) {
  using namespace tally::detail;
  extern __shared__ std::uint32_t shared_copy[];
  zero_block_copy(shared_copy, map.num_bins() * 64);
  __syncthreads();
  count_all_bytes<U>(samples, n, map, shared_copy, 64);
  __syncthreads();
  add_block_copy(shared_copy, map.num_bins(), counts, 64);
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


struct splitmix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};
// The bench's uniform bytes (src/cli/distributions.cpp): chunks of 2^16, each its own generator.
void bench_uniform(std::vector<unsigned char>& h, std::uint64_t seed) {
  const long chunk = 1 << 16;
#pragma omp parallel for
  for (long c = 0; c < (long)h.size() / chunk; ++c) {
    splitmix64 rng{seed * 0x632be59bd9b4e019ull + (std::uint64_t)c};
    for (long i = c * chunk; i < (c + 1) * chunk; ++i) h[i] = (unsigned char)(((unsigned __int128)rng.next() * 256u) >> 64);
  }
}
template <class F>
void run_timed(F f, const char* what) {
  CK(cudaMemset(counts, 0xab, 1024));
  f(); CK(cudaDeviceSynchronize());
  std::vector<unsigned> got(256); CK(cudaMemcpy(got.data(), counts, 1024, cudaMemcpyDeviceToHost));
  int wrong = 0; for (int b = 0; b < 256; ++b) wrong += got[b] != want[b];
  float ms = median_ms(f);
  printf("%s %-36s %.4f ms  %.3f of 3087  wrong bins %d\n", name, what, ms, n / (ms * 1e-3) / 3.087e12, wrong);
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
  using namespace tally::detail;
  std::uint64_t* scalars; CK(cudaMalloc(&scalars, 64)); CK(cudaMemset(scalars, 0, 64));
  const byte_shift_mapper map(0, 256);
  const output_start_words words{scalars, scalars + scalar_slot::output_zeroed, scalars + scalar_slot::output_blocks_finished};
  auto lib = shared_atomic_histogram_kernel<aggregation::none, std::uint8_t, std::uint32_t, byte_shift_mapper>;
  CK(cudaFuncSetAttribute(lib, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  CK(cudaFuncSetAttribute(lib_pieces<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  CK(cudaFuncSetAttribute(lib_pieces<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  CK(cudaFuncSetAttribute(prmt64<1024, 4, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  CK(cudaFuncSetAttribute(prmt64<1024, 4, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  for (int which = 0; which < 2; ++which) {
    std::mt19937_64 rng(7 + which);
    if (which == 0) { name = "uniform  "; for (long i = 0; i < n; i += 8) { unsigned long long r = rng(); memcpy(&h[i], &r, 8); } }
    if (which == 1) { name = "single128"; std::fill(h.begin(), h.end(), 128); }
    if (which == 2) { name = "benchunif"; bench_uniform(h, 20261122); }
    std::fill(want.begin(), want.end(), 0); for (auto x : h) ++want[x];
    CK(cudaMemcpy(g_data, h.data(), n, cudaMemcpyHostToDevice));
    for (int rep = 0; rep < 1; ++rep) {
      run_timed([&] { cudaMemsetAsync(counts, 0, 1024); prmt64<1024, 4, false><<<sms, 1024, 65536>>>((const uint4*)g_data, n / 16, counts, 0); }, "B bare PRMT 64 rep U4");
#define TMA(T, V, S, C, what) { auto k = tma_warp<T, V, S, C>; constexpr int sm = tma_smem<T, V, S>(); CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, sm)); \
      if (C) run_timed([&] { cudaMemsetAsync(counts, 0, 1024); k<<<sms, T, sm>>>((const uint4*)g_data, n / 16, counts); }, what); \
      else { float ms = median_ms([&] { k<<<sms, T, sm>>>((const uint4*)g_data, n / 16, counts); }); printf("%s %-36s %.4f ms  %.3f of 3087\n", name, what, ms, n / (ms * 1e-3) / 3.087e12); } }
      TMA(1024, 2, 4, true, "TMA warp V2 S4 count");
      TMA(1024, 1, 6, true, "TMA warp V1 S6 count");
      TMA(1024, 1, 8, true, "TMA warp V1 S8 count");
      TMA(1024, 2, 3, true, "TMA warp V2 S3 count");
      TMA(1024, 4, 2, true, "TMA warp V4 S2 count");
      TMA(512, 4, 4, true, "TMA warp T512 V4 S4 count");
      TMA(1024, 2, 4, false, "TMA warp V2 S4 read only");
      TMA(1024, 1, 8, false, "TMA warp V1 S8 read only");
      run_timed([&] { std::size_t tb = 1; char t; cudaMemsetAsync(scalars, 0, 8); CK(dispatch_histogram(&t, tb, tally::strategy::replicated, g_data, n, counts, map, scalars, nullptr)); }, "D memset + dispatch replicated");
    }
  }
  return 0;
}
