#include "tally/bins.hpp"
using M = tally::detail::estimated_even_bin_mapper<float>;
__global__ void k(const float4* in, long n, M map, unsigned* out) {
  __shared__ unsigned copy[4097];
  for (long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float4 v = in[i];
    const float s[4] = {v.x, v.y, v.z, v.w};
    int slots[4];
    map.slot_items(s, slots);
#pragma unroll
    for (int j = 0; j < 4; ++j) atomicAdd(copy + slots[j], 1u);
  }
  __syncthreads();
  out[threadIdx.x] = copy[threadIdx.x];
}
__global__ void k_old(const float4* in, long n, M map, unsigned* out) {
  __shared__ unsigned copy[4097];
  for (long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float4 v = in[i];
    const float s[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) atomicAdd(copy + map.slot(s[j]), 1u);
  }
  __syncthreads();
  out[threadIdx.x] = copy[threadIdx.x];
}
