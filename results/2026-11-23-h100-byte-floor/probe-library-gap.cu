// Probe, kept as it last ran (output in README.md and probe-library-gap*.txt; built as scratch/libgap.cu):
// where the library byte kernel (64 replicas) loses against the bare kernel of the
// same layout, on one machine, GPU time: bare, bare with a run-time row base, the library pieces,
// the library kernel, the dispatch.
//   nvcc -std=c++20 -O3 -arch=sm_90 --expt-relaxed-constexpr --extended-lambda -DTALLY_WITH_CUDA=1 \
//        -Xcompiler -fopenmp -I../../include probe-library-gap.cu   (the include/ of the commit that adds it)
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
  for (int which = 0; which < 3; ++which) {
    std::mt19937_64 rng(7 + which);
    if (which == 0) { name = "uniform  "; for (long i = 0; i < n; i += 8) { unsigned long long r = rng(); memcpy(&h[i], &r, 8); } }
    if (which == 1) { name = "single128"; std::fill(h.begin(), h.end(), 128); }
    if (which == 2) { name = "benchunif"; bench_uniform(h, 20261122); }
    std::fill(want.begin(), want.end(), 0); for (auto x : h) ++want[x];
    CK(cudaMemcpy(g_data, h.data(), n, cudaMemcpyHostToDevice));
    for (int rep = 0; rep < 1; ++rep) {
      run_timed([&] { cudaMemsetAsync(counts, 0, 1024); prmt64<1024, 4, false><<<sms, 1024, 65536>>>((const uint4*)g_data, n / 16, counts, 0); }, "B bare PRMT 64 rep U4");
      run_timed([&] { cudaMemsetAsync(counts, 0, 1024); prmt64<1024, 4, true><<<sms, 1024, 65536>>>((const uint4*)g_data, n / 16, counts, 0); }, "B run-time row base");
      run_timed([&] { cudaMemsetAsync(counts, 0, 1024); lib_pieces<4><<<sms, 1024, 65536>>>(g_data, n, counts, map); }, "F library pieces U4");
      run_timed([&] { cudaMemsetAsync(counts, 0, 1024); lib_pieces<2><<<sms, 1024, 65536>>>(g_data, n, counts, map); }, "F library pieces U2");
      run_timed([&] { cudaMemsetAsync(counts, 0, 1024); lib<<<sms, 1024, 65536>>>(g_data, n, counts, map, words, 64, false); }, "L library kernel");
      run_timed([&] { cudaMemsetAsync(counts, 0, 1024); lib<<<sms, 1024, 65536>>>(g_data, n, counts, map, words, 64, true); }, "L library kernel, sampling");
      run_timed([&] { std::size_t tb = 1; char t; cudaMemsetAsync(scalars, 0, 8); CK(dispatch_histogram(&t, tb, tally::strategy::replicated, g_data, n, counts, map, scalars, nullptr)); }, "D memset + dispatch replicated");
    }
  }
  return 0;
}
