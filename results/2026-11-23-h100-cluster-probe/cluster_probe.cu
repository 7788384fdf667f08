// Probe (results/2026-11-23-h100-cluster-probe): a cluster histogram for up to 2^20 bins. Each block of a 16-block cluster owns
// the bins b with b % 16 == its rank, as 16-bit counters in shared memory. Each round every block
// reads 2048 int32 samples, aggregates equal bins within a warp, groups the (bin, count) pairs by
// owner in shared memory, and after one cluster barrier every block pulls its pairs from all 16
// blocks (distributed shared memory loads) and adds them with shared atomics.
#include <cooperative_groups.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
namespace cg = cooperative_groups;
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)

constexpr int C = 16, T = 512, ITEMS = 4, S = T * ITEMS;
constexpr unsigned THETA = 0x8000;  // C * S <= THETA: a counter crosses it at most once a round

struct smem_layout {
  int hist_words;
  __host__ __device__ int staging_at() const { return hist_words; }
  __host__ __device__ int offs_at() const { return hist_words + 2 * S; }
  __host__ __device__ int cnt_at() const { return offs_at() + 2 * (C + 1); }
  __host__ __device__ int seg_at() const { return cnt_at() + C; }
  __host__ __device__ int words() const { return seg_at() + 2 * (C + 1); }
};

__device__ __forceinline__ unsigned warp_incl_scan(unsigned x) {
  const int lane = threadIdx.x & 31;
  for (int o = 1; o < 32; o <<= 1) { unsigned y = __shfl_up_sync(~0u, x, o); if (lane >= o) x += y; }
  return x;
}

// Mode bits: 1 = no warp aggregation (count 1 a sample); 2 = pull without atomics (a register sum);
// 4 = no pull; 8 = no staging (loads and the cluster barrier only)
template <int Mode>
__global__ void __launch_bounds__(T, 1) cluster_hist(const int4* d, long n4, int nbins, unsigned* counts) {
  extern __shared__ unsigned sm[];
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const int cid = blockIdx.x / C, nclusters = gridDim.x / C;
  const int bins_here = (nbins + C - 1) / C;
  smem_layout L{(bins_here + 1) / 2};
  unsigned* hist = sm;
  for (int i = threadIdx.x; i < L.words(); i += T) sm[i] = 0;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const unsigned lt = (1u << lane) - 1;
  const long tiles = (n4 + T - 1) / T;
  const long per_round = (long)nclusters * C;
  const long rounds = (tiles + per_round - 1) / per_round;
  auto load = [&](long r) {
    const long tile = (r * nclusters + cid) * C + rank;
    const long i = tile * T + threadIdx.x;
    int4 v = make_int4(-1, -1, -1, -1);
    if (r < rounds && i < n4) v = __ldcs(d + i);
    return v;
  };
  int4 v0 = load(0), v1 = load(1);
  unsigned sink = 0;
  for (long r = 0; r < rounds; ++r) {
    const int buf = r & 1;
    unsigned* staging = sm + L.staging_at() + buf * S;
    unsigned* offs = sm + L.offs_at() + buf * (C + 1);
    unsigned* cnt = sm + L.cnt_at();
    unsigned* seg = sm + L.seg_at();
    const int4 v = v0;
    v0 = v1;
    v1 = load(r + 2);
    const int x[4] = {v.x, v.y, v.z, v.w};
    if (Mode & 8) { sink += x[0] ^ x[1] ^ x[2] ^ x[3]; cluster.sync(); continue; }
    int dest[ITEMS]; unsigned pair[ITEMS], rk[ITEMS];
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      const int bin = (x[j] >= 0 && x[j] < nbins) ? x[j] : -1;
      unsigned m = 1u << lane;
      if (!(Mode & 1)) m = __match_any_sync(~0u, bin);
      const bool leader = bin >= 0 && (__ffs(m) - 1) == lane;
      const int dd = leader ? (bin & (C - 1)) : -1;
      const unsigned m2 = __match_any_sync(~0u, dd);
      const int first = __ffs(m2) - 1;
      unsigned base = 0;
      if (dd >= 0 && first == lane) base = atomicAdd(&cnt[dd], __popc(m2));
      base = __shfl_sync(~0u, base, first);
      rk[j] = base + __popc(m2 & lt);
      dest[j] = dd;
      pair[j] = (unsigned)(bin / C) | ((unsigned)__popc(m) << 16);
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      const unsigned c = threadIdx.x < C ? cnt[threadIdx.x] : 0;
      const unsigned incl = warp_incl_scan(c);
      if (threadIdx.x < C) { offs[threadIdx.x + 1] = incl; cnt[threadIdx.x] = 0; }
      if (threadIdx.x == 0) offs[0] = 0;
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) if (dest[j] >= 0) staging[offs[dest[j]] + rk[j]] = pair[j];
    cluster.sync();
    if (Mode & 4) continue;
    // pull: my segment from every source block
    if (threadIdx.x < 32) {
      unsigned a = 0, len = 0;
      if (threadIdx.x < C) {
        const unsigned* ro = cluster.map_shared_rank(offs, threadIdx.x);
        a = ro[rank]; len = ro[rank + 1] - a;
      }
      const unsigned incl = warp_incl_scan(len);
      if (threadIdx.x < C) { seg[threadIdx.x] = a; seg[C + 1 + threadIdx.x + 1] = incl; }
      if (threadIdx.x == 0) seg[C + 1] = 0;
    }
    __syncthreads();
    const unsigned* start = seg;
    const unsigned* prefix = seg + C + 1;
    const unsigned total = prefix[C];
    for (unsigned base = threadIdx.x; base < total; base += 4 * T) {
      unsigned p[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const unsigned i = base + k * T;
        p[k] = 0;
        if (i < total) {
          int s = 0;
#pragma unroll
          for (int step = 8; step >= 1; step >>= 1) if (prefix[s + step] <= i) s += step;
          const unsigned* rs = cluster.map_shared_rank(staging, s);
          p[k] = rs[start[s] + (i - prefix[s])];
        }
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const unsigned c = p[k] >> 16;
        if (c == 0) continue;
        if (Mode & 2) { sink += p[k]; continue; }
        const unsigned local = p[k] & 0xffffu;
        const unsigned sh = (local & 1) * 16;
        const unsigned old = atomicAdd(&hist[local >> 1], c << sh);
        const unsigned h = (old >> sh) & 0xffffu;
        if (h < THETA && h + c >= THETA) {
          atomicSub(&hist[local >> 1], THETA << sh);
          atomicAdd(&counts[local * C + rank], THETA);
        }
      }
    }
  }
  if (sink == 0x9e3779b9u) counts[0] = sink;
  cluster.sync();  // nobody leaves while others may read its staging
  for (int w = threadIdx.x; w < L.hist_words; w += T) {
    const unsigned word = hist[w];
    for (int h = 0; h < 2; ++h) {
      const unsigned c = (word >> (16 * h)) & 0xffffu;
      const long bin = (long)(2 * w + h) * C + rank;
      if (c && bin < nbins) atomicAdd(&counts[bin], c);
    }
  }
}

__global__ void ref_hist(const int* d, long n, int nbins, unsigned* counts) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    const int x = d[i];
    if (x >= 0 && x < nbins) atomicAdd(&counts[x], 1u);
  }
}
__global__ void read_kernel(const int4* d, long n4, int* out) {
  int acc = 0;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
    int4 v = __ldcs(d + i); acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678) out[0] = acc;
}
__device__ unsigned hash(unsigned long long x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33; return (unsigned)x;
}
__global__ void gen(int* d, long n, int nbins, int dist) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    const unsigned h = hash(i * 7919 + dist);
    const double u = (h + 0.5) / 4294967296.0;
    int x;
    if (dist == 0) x = h % nbins;
    else if (dist == 1) { x = 0; unsigned hh = h; while ((hh & 1) == 0 && x < 31) { ++x; hh >>= 1; } }
    else if (dist == 2) x = 12345 % nbins;
    else if (dist == 3) x = (int)((double)i * nbins / n);
    else x = (int)(exp(u * log((double)nbins)) - 1.0);
    d[i] = x;
  }
}

int main(int argc, char** argv) {
  const long n = 1L << 28;
  const int nbins = argc > 1 ? atoi(argv[1]) : (1 << 20);
  int *d; unsigned *c1, *c2; int* junk;
  CK(cudaMalloc(&d, n * 4)); CK(cudaMalloc(&c1, nbins * 4)); CK(cudaMalloc(&c2, nbins * 4)); CK(cudaMalloc(&junk, 4));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  auto timeit = [&](auto f, int runs) {
    f(); CK(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int k = 0; k < runs; ++k) { CK(cudaEventRecord(e0)); f(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); t.push_back(ms); }
    std::sort(t.begin(), t.end()); return t[t.size() / 2];
  };
  const double read_ms = timeit([&] { read_kernel<<<132 * 8, 512>>>((const int4*)d, n / 4, junk); }, 10);
  printf("read: %.3f ms (%.0f GB/s)\n", read_ms, n * 4 / read_ms / 1e6);
  const smem_layout L{((nbins + C - 1) / C + 1) / 2};
  const size_t smem = L.words() * 4;
  using K = void (*)(const int4*, long, int, unsigned*);
  const int modes[] = {0, 1, 2, 4, 8};
  K ks[] = {cluster_hist<0>, cluster_hist<1>, cluster_hist<2>, cluster_hist<4>, cluster_hist<8>};
  K k0 = ks[0];
  for (auto k : ks) {
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension; attr[0].val.clusterDim.x = C; attr[0].val.clusterDim.y = 1; attr[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(T); cfg.dynamicSmemBytes = smem; cfg.attrs = attr; cfg.numAttrs = 1;
  cfg.gridDim = dim3(C);
  int nclusters = 0;
  CK(cudaOccupancyMaxActiveClusters(&nclusters, (void*)k0, &cfg));
  printf("smem %zu B, active clusters of %d: %d\n", smem, C, nclusters);
  cfg.gridDim = dim3(nclusters * C);
  const char* names[] = {"uniform", "geometric", "single", "sorted", "loguniform"};
  for (int dist = 0; dist < 5; ++dist) {
    if (dist != 0 && dist != 2) continue;
    gen<<<1024, 256>>>(d, n, nbins, dist); CK(cudaDeviceSynchronize());
    CK(cudaMemset(c2, 0, nbins * 4)); ref_hist<<<132 * 8, 256>>>(d, n, nbins, c2); CK(cudaDeviceSynchronize());
    std::vector<unsigned> h1(nbins), h2(nbins);
    CK(cudaMemcpy(h2.data(), c2, nbins * 4, cudaMemcpyDeviceToHost));
    for (int mi = 0; mi < 5; ++mi) {
      const int mode = modes[mi];
      auto k = ks[mi];
      auto run = [&] { CK(cudaMemsetAsync(c1, 0, nbins * 4)); CK(cudaLaunchKernelEx(&cfg, k, (const int4*)d, n / 4, nbins, c1)); };
      run(); CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(h1.data(), c1, nbins * 4, cudaMemcpyDeviceToHost));
      long bad = 0; for (int b = 0; b < nbins; ++b) bad += h1[b] != h2[b];
      const double ms = timeit(run, 10);
      printf("%-10s mode %d: %.3f ms, %.3f of read, %ld wrong bins%s\n", names[dist], mode, ms, read_ms / ms, bad, mode >= 2 ? " (a part only: not a histogram)" : "");
    }
    if (0) { const double ams = timeit([&] { CK(cudaMemsetAsync(c2, 0, nbins * 4)); ref_hist<<<132 * 8, 256>>>(d, n, nbins, c2); }, 3);
    printf("%-10s global atomics: %.3f ms, %.3f of read\n", names[dist], ams, read_ms / ams); }
  }
}
