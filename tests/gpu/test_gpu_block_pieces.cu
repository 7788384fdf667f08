// GPU tests of block pieces whose effect a histogram's counts cannot show: the sample with which
// automatic's byte kernel chooses its layout (block_bytes_pile_up in
// include/tally/detail/block/block_histogram.cuh), the slices partitioned counts a bucket in
// on chips with less shared memory (bucket_slices), and block_reduce_atomic's first store
// (first_stores_then_atomics) in every order of the blocks, which a reduction cannot choose. Whatever a block decides, its counts are exact
// (test_gpu_histogram checks that); these tests check the decision itself, block by block, on
// inputs whose answer is known. CUDA source, built only with the GPU backend; without a GPU it
// exits 77 (skipped).
#include <cstdint>
#include <random>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <cuda/atomic>

#include "tally/detail/block/block_histogram.cuh"
#include "tally/detail/kernels/reduce_kernels.cuh"
#include "tally/detail/dispatch/large_bins_dispatch.cuh"
#include "tally/gpu.hpp"

namespace tally::test {
namespace {

constexpr int block_threads = tally::detail::tuning::all_bytes_tuning::block_threads;  // the byte kernel's block
constexpr int unroll = tally::detail::tuning::all_bytes_tuning::loads_per_thread;  // and its loads per thread
constexpr std::size_t block_reach = std::size_t{block_threads} * unroll * 16;  // bytes a block counts first

__global__ void decide_kernel(const std::uint8_t* samples, std::int64_t num_samples, int* piles) {
  const bool decided =
      tally::detail::block_bytes_pile_up(tally::detail::lane_first_byte(samples, num_samples, unroll));
  if (threadIdx.x == 0) piles[blockIdx.x] = decided ? 1 : 0;
}

/// Each block's decision for `host` (starting `offset` bytes into a 16-byte-aligned buffer).
std::vector<int> decisions(const std::vector<std::uint8_t>& host, int blocks, std::size_t offset = 0) {
  std::uint8_t* device = nullptr;
  int* piles = nullptr;
  EXPECT_EQ(cudaMalloc(&device, host.size() + offset + 16), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&piles, sizeof(int) * blocks), cudaSuccess);
  EXPECT_EQ(cudaMemset(piles, 0xff, sizeof(int) * blocks), cudaSuccess);  // neither 0 nor 1
  if (!host.empty()) {
    EXPECT_EQ(cudaMemcpy(device + offset, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  decide_kernel<<<blocks, block_threads>>>(device + offset, static_cast<std::int64_t>(host.size()), piles);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<int> out(static_cast<std::size_t>(blocks));
  EXPECT_EQ(cudaMemcpy(out.data(), piles, sizeof(int) * blocks, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(device);
  cudaFree(piles);
  return out;
}

std::vector<std::uint8_t> uniform_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> out(n);
  for (auto& x : out) x = static_cast<std::uint8_t>(rng());
  return out;
}

TEST(BlockBytesPileUp, UniformBytesSpreadAndOneValuePilesInEveryBlock) {
  constexpr int blocks = 16;
  const std::size_t n = block_reach * blocks;
  EXPECT_EQ(decisions(uniform_bytes(n, 1), blocks), std::vector<int>(blocks, 0));
  EXPECT_EQ(decisions(std::vector<std::uint8_t>(n, 200), blocks), std::vector<int>(blocks, 1));
}

TEST(BlockBytesPileUp, EachBlockJudgesTheBytesItCountsFirst) {
  // Segments of one block's first reach alternate between uniform bytes and one value: even
  // blocks see only uniform bytes, odd blocks only the value.
  constexpr int blocks = 12;
  std::vector<std::uint8_t> host = uniform_bytes(block_reach * blocks, 2);
  for (std::size_t i = 0; i < host.size(); ++i) {
    if ((i / block_reach) % 2 == 1) host[i] = 9;
  }
  std::vector<int> want(blocks);
  for (int b = 0; b < blocks; ++b) want[static_cast<std::size_t>(b)] = b % 2;
  EXPECT_EQ(decisions(host, blocks), want);
}

TEST(BlockBytesPileUp, HalfTheLanesOnOneValuePileUpAndAFewDoNot) {
  // A bin holding half the samples (geometric data) puts about 16 lanes of 32 on one value: piles.
  // Seven lanes of every warp on one value, the rest spread, stays under the threshold of 8.
  constexpr int blocks = 4;
  std::vector<std::uint8_t> half = uniform_bytes(block_reach * blocks, 3);
  std::vector<std::uint8_t> seven = half;
  for (std::size_t v = 0; v < half.size() / 16; ++v) {
    // Vector v is counted first by lane v % 32 of some warp (lanes take consecutive vectors).
    if (v % 2 == 0) half[v * 16] = 0;
    if (v % 32 < 7) seven[v * 16] = 0;
    else seven[v * 16] = static_cast<std::uint8_t>(1 + v % 32 * 8);  // 25 distinct values, none 0
  }
  EXPECT_EQ(decisions(half, blocks), std::vector<int>(blocks, 1));
  EXPECT_EQ(decisions(seven, blocks), std::vector<int>(blocks, 0));
}

TEST(BlockBytesPileUp, BlocksWithNothingToCountDoNotPileAndMisalignedStartsAreRead) {
  constexpr int blocks = 8;
  // Two blocks' worth of one value: the six blocks past the end have nothing and spread.
  const std::vector<std::uint8_t> short_input(block_reach * 2, 5);
  EXPECT_EQ(decisions(short_input, blocks), (std::vector<int>{1, 1, 0, 0, 0, 0, 0, 0}));
  // Fewer bytes than one vector: every block has nothing to sample.
  EXPECT_EQ(decisions(std::vector<std::uint8_t>(15, 5), blocks), std::vector<int>(blocks, 0));
  EXPECT_EQ(decisions(std::vector<std::uint8_t>(), blocks), std::vector<int>(blocks, 0));
  // A start off the 16-byte grid: the vectors begin after the unaligned head, and the sample reads
  // them there (one value after a head of other values still piles).
  for (std::size_t offset = 1; offset < 16; offset += 7) {
    std::vector<std::uint8_t> host(block_reach * blocks + 64, 7);
    for (std::size_t i = 0; i < 16 - offset; ++i) host[i] = static_cast<std::uint8_t>(100 + i);
    SCOPED_TRACE(offset);
    EXPECT_EQ(decisions(host, blocks, offset), std::vector<int>(blocks, 1));
  }
}

/// partitioned's second pass on chips by shared memory per block: the whole bucket of 2^15 32-bit
/// counters where 128 KiB fit (H100: 227 KiB, A100: 163 KiB), two slices on 99 KiB chips (RTX 30
/// and 40, L4, L40, RTX 50), four where only 32 KiB fit, refused below that; few bins, one slice.
TEST(BucketSlices, FewestSlicesWhoseCountersFitABlock) {
  using tally::detail::bucket_slices;
  using tally::detail::slice_of_buckets;
  const auto with = [](std::size_t bytes) {
    tally::detail::device_properties p;
    p.multiprocessors = 1;
    p.shared_memory_per_block_optin = bytes;
    return p;
  };
  const std::int64_t bucket = std::int64_t{1} << 15;
  EXPECT_EQ(bucket_slices(std::int64_t{1} << 20, with(232448)), 1);
  EXPECT_EQ(bucket_slices(std::int64_t{1} << 20, with(166912)), 1);
  EXPECT_EQ(bucket_slices(std::int64_t{1} << 20, with(101376)), 2);
  EXPECT_EQ(bucket_slices(65536, with(101376)), 2);
  EXPECT_EQ(bucket_slices(bucket * 4, with(48 * 1024)), 4);
  EXPECT_EQ(bucket_slices(bucket * 4, with(16 * 1024)), 0);
  EXPECT_EQ(bucket_slices(20000, with(101376)), 1);  // 80000 bytes of counters fit
  EXPECT_EQ(bucket_slices(30000, with(101376)), 2);  // 120000 do not
  // Slices tile the bucket, and a partial last bucket's bins past num_bins are never counted
  // (count_block_share clips each slice to num_bins).
  for (const int slices : {1, 2, 4}) {
    std::uint32_t next = 0;
    for (int i = 0; i < slices; ++i) {
      const auto slice = slice_of_buckets(std::int64_t{1} << 20, slices, i);
      EXPECT_EQ(slice.first, next);
      next += slice.bins;
    }
    EXPECT_EQ(next, static_cast<std::uint32_t>(bucket));
  }
  EXPECT_EQ(slice_of_buckets(30000, 2, 1).first, 15000u);
  EXPECT_EQ(slice_of_buckets(30001, 2, 1).bins, 15001u);
}

/// Block b's thread 0 hands values[b] to first_stores_then_atomics once block b - 1 has: block 0
/// stores, the others combine with the fold's atomic, in that order. A block that waits too long
/// (its predecessor never ran) goes on and sets `*out_of_turn`, so the test fails rather than hangs.
template <class Fold>
__global__ void blocks_in_turn_kernel(const typename Fold::value_type* values, Fold fold,
                                      typename Fold::value_type* result, tally::detail::fold_start_words words, int* turn,
                                      int* out_of_turn) {
  if (threadIdx.x != 0) return;
  cuda::atomic_ref<int, cuda::thread_scope_device> next(*turn);
  for (int spins = 0; next.load(cuda::memory_order_acquire) != static_cast<int>(blockIdx.x); ++spins) {
    if (spins == (1 << 22)) {
      *out_of_turn = 1;
      break;
    }
    __nanosleep(32);
  }
  tally::detail::first_stores_then_atomics(result, values[blockIdx.x], fold, words);
  next.store(static_cast<int>(blockIdx.x) + 1, cuda::memory_order_release);
}

/// The result of first_stores_then_atomics when the blocks come in the order of `values`.
template <class T, reduce_op Op>
T in_turn(const std::vector<T>& values) {
  T* device_values = nullptr;
  T* result = nullptr;
  std::uint64_t* words = nullptr;
  int* turn = nullptr;
  EXPECT_EQ(cudaMalloc(&device_values, sizeof(T) * values.size()), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&result, sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&words, 2 * sizeof(std::uint64_t)), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&turn, 2 * sizeof(int)), cudaSuccess);  // the turn, then the out-of-turn flag
  EXPECT_EQ(cudaMemcpy(device_values, values.data(), sizeof(T) * values.size(), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemset(words, 0, 2 * sizeof(std::uint64_t)), cudaSuccess);
  EXPECT_EQ(cudaMemset(turn, 0, 2 * sizeof(int)), cudaSuccess);
  blocks_in_turn_kernel<<<static_cast<int>(values.size()), 32>>>(
      device_values, tally::detail::reduce_fold<T, Op>{}, result, tally::detail::fold_start_words{words, words + 1},
      turn, turn + 1);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  int out_of_turn = 1;
  EXPECT_EQ(cudaMemcpy(&out_of_turn, turn + 1, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out_of_turn, 0) << "a block waited in vain for the one before it";
  T out{};
  EXPECT_EQ(cudaMemcpy(&out, result, sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  std::uint64_t left[2] = {1, 1};
  EXPECT_EQ(cudaMemcpy(left, words, sizeof(left), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(left[0], 0u);  // the words are back to 0 for the next launch
  EXPECT_EQ(left[1], 0u);
  cudaFree(device_values);
  cudaFree(result);
  cudaFree(words);
  cudaFree(turn);
  return out;
}

template <class T>
void expect_nan_wins_in_any_turn() {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  // The NaN's block first: its store must rank where the atomics cannot displace it (a +NaN
  // stored as it is ranks above every value, and atomic_min replaced it: a NaN min lost).
  const std::vector<std::vector<T>> orders = {{nan, T(-7), T(1.5)}, {T(-7), nan, T(1.5)}, {T(1.5), T(-7), nan}};
  for (const auto& order : orders) {
    EXPECT_TRUE(std::isnan(in_turn<T, reduce_op::min>(order)));
    EXPECT_TRUE(std::isnan(in_turn<T, reduce_op::max>(order)));
  }
  const std::vector<T> plain = {T(1.5), T(-7), T(3)};
  EXPECT_EQ((in_turn<T, reduce_op::min>(plain)), T(-7));
  EXPECT_EQ((in_turn<T, reduce_op::max>(plain)), T(3));
}

TEST(FirstStoresThenAtomics, ANaNWinsMinAndMaxWhicheverBlockStoresFirst) {
  expect_nan_wins_in_any_turn<float>();
  expect_nan_wins_in_any_turn<double>();
}

}  // namespace
}  // namespace tally::test
