// Probe, kept as it last ran (output in README.md): where the library's byte kernel loses against a
// bare kernel of the same loop, all timed behind a hold kernel (GPU time). A: 32 replicas, address
// by hand; B: 64 replicas, one byte permute (PRMT) per byte; B variants: a run-time increment and a
// run-time row shift; C: the library's shared_atomic_histogram_kernel as it was before this
// commit's memset change (64 replicas; C' with its byte sampling); D/E: with the call's memset and
// through dispatch_histogram; F: the library's pieces (count_all_bytes) with a memset and without
// the start_output protocol; G: B's loop with the protocol. Builds against include/ of the commit
// that adds it. Since then the byte kernel never runs the protocol (its counts are zeroed by the
// dispatch's memset), so built against a later include/, C times what F and D time.
//   nvcc -std=c++20 -O3 -arch=sm_90 --expt-relaxed-constexpr --extended-lambda -DTALLY_WITH_CUDA=1 \
//        -I../../include probe-library-kernel.cu
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include "tally/detail/dispatch/histogram_dispatch.cuh"  // the library at this commit
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)

template <int T, int MinBlocks, int U = 4, bool Explicit = false>
__global__ void __launch_bounds__(T, MinBlocks) replicas(const uint4* d, long nvec, unsigned* counts) {
  extern __shared__ unsigned h[];
  for (int i = threadIdx.x; i < 256 * 32; i += T) h[i] = 0;
  __syncthreads();
  unsigned* rep = h + (threadIdx.x % 32);
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
        for (int j = 0; j < 16; ++j) {
          if (Explicit) {
            // byte j's value times 128 (32 words a bin) lands in bits 7-14, or'ed with the lane's word
            const unsigned v = w[j / 4];
            const int k = j % 4;
            const unsigned shifted = k == 0 ? v << 7 : v >> (8 * k - 7);
            const unsigned off = (shifted & 0x7F80u) | (lane * 4u);
            atomicAdd(reinterpret_cast<unsigned*>(reinterpret_cast<char*>(h) + off), 1u);
          } else {
            atomicAdd(rep + ((w[j / 4] >> (8 * (j % 4))) & 255u) * 32, 1u);
          }
        }
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


// The library's layout in a bare kernel: 64 replicas, rows of 256 bytes, one PRMT per byte.
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


// F: the library's pieces without the output protocol (counts zeroed by a memset).
__global__ void __launch_bounds__(1024, 1) lib_no_protocol(const std::uint8_t* samples, long n, unsigned* counts, tally::detail::byte_shift_mapper map) {
  using namespace tally::detail;
  extern __shared__ std::uint32_t shared_copy[];
  zero_block_copy(shared_copy, map.num_bins() * 64);
  __syncthreads();
  count_all_bytes<4>(samples, n, map, shared_copy, 64);
  __syncthreads();
  add_block_copy(shared_copy, map.num_bins(), counts, 64);
}
// G: probe B's loop with the library's output protocol around it.
__global__ void __launch_bounds__(1024, 1) prmt_protocol(const uint4* d, long nvec, unsigned* counts, tally::detail::output_start_words output) {
  using namespace tally::detail;
  extern __shared__ unsigned h[];
  for (int i = threadIdx.x; i < 256 * 64; i += 1024) h[i] = 0;
  start_output(counts, 256, output);
  const int lane = threadIdx.x % 32;
  const unsigned roff = (threadIdx.x % 64) * 4;
  char* base = reinterpret_cast<char*>(h);
  constexpr int U = 4, T = 1024;
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
  wait_for_zeroed_output(output);
  add_block_copy(h, 256, counts, 64);
  finish_output(output);
}


// B variants: a run-time increment (ATOMS.ADD rather than ATOMS.POPC.INC) and a run-time row shift.
template <bool RuntimeInc, bool RuntimeShift>
__global__ void __launch_bounds__(1024, 1) prmt_var(const uint4* d, long nvec, unsigned* counts, unsigned inc, int shift) {
  extern __shared__ unsigned h[];
  for (int i = threadIdx.x; i < 256 * 64; i += 1024) h[i] = 0;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const unsigned roff = (threadIdx.x % 64) * 4;
  char* base = reinterpret_cast<char*>(h) + (RuntimeShift ? shift * 256 : 0);
  const unsigned one = RuntimeInc ? inc : 1u;
  constexpr int U = 4, T = 1024;
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
        for (int j = 0; j < 16; ++j) atomicAdd(reinterpret_cast<unsigned*>(base + __byte_perm(w[j / 4], roff, 0x6504u | ((j % 4) << 4))), one);
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
bool g_block = false;
volatile int* g_release; int* g_release_dev; int* g_timed_out;
template <class F> float median_ms(F f, int runs = 15) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> ts;
  for (int r = 0; r < runs + 3; ++r) {
    if (g_block) { *g_release = 0; hold<<<1, 1>>>(g_release_dev, g_timed_out); }
    cudaEventRecord(a); f(); cudaEventRecord(b);
    if (g_block) *g_release = 1;
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

template <int U, bool E>
void run_rep(const char* what) { run(replicas<1024, 1, U, E>, 1024, 256 * 32 * 4, what); }

std::uint64_t* g_scalars;
template <class F>
void run_timed(F f, const char* what) {
  CK(cudaMemset(counts, 0xab, 1024));
  f(); CK(cudaDeviceSynchronize());
  std::vector<unsigned> got(256); CK(cudaMemcpy(got.data(), counts, 1024, cudaMemcpyDeviceToHost));
  int wrong = 0; for (int b = 0; b < 256; ++b) wrong += got[b] != want[b];
  float ms = median_ms(f);
  printf("%s %-44s %.4f ms  %.3f  wrong bins %d\n", name, what, ms, n / (ms * 1e-3) / bw, wrong);
}

int main() {
  using namespace tally::detail;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaHostAlloc((void**)&g_release, 4, cudaHostAllocMapped)); CK(cudaHostGetDevicePointer((void**)&g_release_dev, (void*)g_release, 0));
  CK(cudaMalloc(&g_timed_out, 4)); CK(cudaMemset(g_timed_out, 0, 4));
  CK(cudaMalloc(&g_scalars, 64)); CK(cudaMemset(g_scalars, 0, 64));
  std::vector<unsigned char> h(n);
  unsigned char* big; CK(cudaMalloc(&big, 4L << 28)); CK(cudaMemset(big, 0x5a, 4L << 28));
  CK(cudaMalloc(&g_data, n)); CK(cudaMalloc(&counts, 1024));
  g_block = true;
  float ms1 = median_ms([&] { read_only<<<sms * 4, 512>>>((const uint4*)big, (4L << 28) / 16, counts); });
  bw = (4L << 28) / (ms1 * 1e-3);
  printf("read 1 GiB %.0f GB/s (GPU time)\n", bw / 1e9);
  auto lib = shared_atomic_histogram_kernel<aggregation::none, std::uint8_t, std::uint32_t, byte_shift_mapper>;
  CK(cudaFuncSetAttribute(lib, cudaFuncAttributeMaxDynamicSharedMemorySize, 256 * 64 * 4));
  CK(cudaFuncSetAttribute(prmt64<1024, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 256 * 64 * 4));
  CK(cudaFuncSetAttribute(prmt_var<true, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, 256 * 64 * 4));
  CK(cudaFuncSetAttribute(prmt_var<false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, 256 * 64 * 4));
  CK(cudaFuncSetAttribute(prmt_var<true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, 256 * 64 * 4));
  CK(cudaFuncSetAttribute(lib_no_protocol, cudaFuncAttributeMaxDynamicSharedMemorySize, 256 * 64 * 4));
  CK(cudaFuncSetAttribute(prmt_protocol, cudaFuncAttributeMaxDynamicSharedMemorySize, 256 * 64 * 4));
  const byte_shift_mapper map(0, 256);
  const output_start_words words{g_scalars, g_scalars + scalar_slot::output_zeroed, g_scalars + scalar_slot::output_blocks_finished};
  for (int which = 0; which < 2; ++which) {
    std::mt19937_64 rng(7 + which);
    if (which == 0) { name = "uniform  "; for (long i = 0; i < n; i += 8) { unsigned long long r = rng(); memcpy(&h[i], &r, 8); } }
    if (which == 1) { name = "single128"; std::fill(h.begin(), h.end(), 128); }
    std::fill(want.begin(), want.end(), 0); for (auto x : h) ++want[x];
    CK(cudaMemcpy(g_data, h.data(), n, cudaMemcpyHostToDevice));
    for (int rep = 0; rep < 1; ++rep) {
    run_rep<4, true>("A probe 32 replicas explicit U4");
    run(prmt64<1024, 4>, 1024, 256 * 64 * 4, "B probe 64 replicas PRMT U4");
    run_timed([&] { cudaMemsetAsync(counts, 0, 1024); prmt_var<true, false><<<sms, 1024, 256 * 64 * 4>>>((const uint4*)g_data, n / 16, counts, 1u, 0); }, "B+memset, run-time increment (ATOMS.ADD)");
    run_timed([&] { cudaMemsetAsync(counts, 0, 1024); prmt_var<false, true><<<sms, 1024, 256 * 64 * 4>>>((const uint4*)g_data, n / 16, counts, 1u, 0); }, "B+memset, run-time shift");
    run_timed([&] { cudaMemsetAsync(counts, 0, 1024); prmt_var<true, true><<<sms, 1024, 256 * 64 * 4>>>((const uint4*)g_data, n / 16, counts, 1u, 0); }, "B+memset, both");
    run_timed([&] { cudaMemsetAsync(counts, 0, 1024); prmt64<1024, 4><<<sms, 1024, 256 * 64 * 4>>>((const uint4*)g_data, n / 16, counts); }, "B+memset");
    run_timed([&] { lib<<<sms, 1024, 256 * 64 * 4>>>(g_data, n, counts, map, words, 64, false); }, "C library kernel, 64 replicas");
    run_timed([&] { lib<<<sms, 1024, 256 * 64 * 4>>>(g_data, n, counts, map, words, 64, true); }, "C' library kernel, sampling");
    run_timed([&] { cudaMemsetAsync(counts, 0, 1024); lib_no_protocol<<<sms, 1024, 256 * 64 * 4>>>(g_data, n, counts, map); }, "F library pieces, memset, no protocol");
    run_timed([&] { prmt_protocol<<<sms, 1024, 256 * 64 * 4>>>((const uint4*)g_data, n / 16, counts, words); }, "G probe B loop with the protocol");
    run_timed([&] { cudaMemsetAsync(g_scalars, 0, 8); lib<<<sms, 1024, 256 * 64 * 4>>>(g_data, n, counts, map, words, 64, false); }, "D memset + library kernel");
    run_timed([&] { std::size_t tb = 1; char t; cudaMemsetAsync(g_scalars, 0, 8); CK(dispatch_histogram(&t, tb, tally::strategy::replicated, g_data, n, counts, map, g_scalars, nullptr)); }, "E memset + dispatch_histogram replicated");
    }
  }
  return 0;
}
