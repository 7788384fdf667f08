// Failures that reach tally from outside: a CUDA error that other code left pending, and an
// allocation that fails because the device is full. Each surfaces as tally::error naming the
// operation and the CUDA error, writes nothing, and leaves the library usable once the cause is
// gone. (An error that breaks the context, a faulting kernel, is test_gpu_sticky_error's.)
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "common/quick_mode.hpp"
#include "tally/gpu.hpp"

namespace {

namespace gpu = tally::gpu;
using tally::errc;

__global__ void do_nothing_kernel() {}

constexpr std::uint32_t poison = 0xabababab;

std::vector<std::uint32_t> download(const gpu::device_buffer<std::uint32_t>& buffer) {
  std::vector<std::uint32_t> host(buffer.size());
  buffer.download(host);
  return host;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// A launch with more threads per block than any GPU takes fails at once and leaves its error
/// pending, as code that never checks its launches does. Returns that error (its name differs
/// between CUDA versions: invalid configuration, or invalid value).
cudaError_t leave_a_pending_launch_error() {
  do_nothing_kernel<<<1, 4096>>>();
  return cudaPeekAtLastError();
}

TEST(GpuFaults, AnErrorLeftPendingByOtherCodeIsReportedNamingTheCallAndNothingRuns) {
  const std::vector<std::int32_t> host{1, 2, 2, 3, 3, 3, 99};
  gpu::device_buffer<std::int32_t> samples{std::span<const std::int32_t>(host)};
  gpu::device_buffer<std::uint32_t> counts(4);
  counts.fill_bytes(0xab);
  const tally::even_bins bins{4, 0.0, 4.0};

  const cudaError_t left = leave_a_pending_launch_error();
  ASSERT_NE(left, cudaSuccess) << "the bad launch left no error";
  try {
    gpu::histogram_even(samples.const_span(), counts.span(), bins);
    ADD_FAILURE() << "no error";
  } catch (const tally::error& e) {
    std::printf("the call's error: %s\n", e.what());
    EXPECT_EQ(e.code(), errc::cuda_error) << e.what();
    EXPECT_TRUE(contains(e.what(), "tally::gpu::histogram_even")) << e.what();
    EXPECT_TRUE(contains(e.what(), cudaGetErrorName(left))) << e.what();
  }
  // Not tally's to clear: the error is still there for the code that left it.
  EXPECT_EQ(cudaPeekAtLastError(), left);
  for (const std::uint32_t c : download(counts)) EXPECT_EQ(c, poison) << "written although the call failed";

  // The async calls and the other operations refuse the same way.
  gpu::workspace ws;
  EXPECT_THROW(gpu::histogram_even_async(samples.const_span(), counts.span(), bins, ws), tally::error);
  EXPECT_THROW(gpu::reduce(samples.const_span(), tally::reduce_op::sum), tally::error);
  EXPECT_THROW(gpu::count_if(samples.const_span(), tally::compare_to<std::int32_t>{tally::comparison::equal, 3}),
               tally::error);

  // Once its owner takes it, calls run and count.
  EXPECT_EQ(cudaGetLastError(), left);
  const auto got = gpu::histogram_even(samples.const_span(), counts.span(), bins);
  EXPECT_EQ(download(counts), (std::vector<std::uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(got.left_out, 1u);
}

/// Takes device memory until an allocation of each size fails (big pieces first, then smaller
/// ones, down to what the runtime hands out from a partly used page), so that any allocation of
/// a call fails.
std::vector<void*> fill_the_device() {
  std::vector<void*> taken;
  for (std::size_t piece = std::size_t{1} << 30; piece >= 256; piece /= 4) {
    void* pointer = nullptr;
    while (cudaMalloc(&pointer, piece) == cudaSuccess) taken.push_back(pointer);
    (void)cudaGetLastError();
  }
  return taken;
}

TEST(GpuFaults, AnAllocationThatFailsDuringACallIsOutOfMemoryNamingTheCall) {
  // The sanitizers report the failed allocations that find the end of the memory as errors of their own.
  if (tally::test::quick_mode()) GTEST_SKIP() << "fills the device memory until allocations fail";
  const std::vector<std::int32_t> host{1, 2, 2, 3, 3, 3, 99};
  gpu::device_buffer<std::int32_t> samples{std::span<const std::int32_t>(host)};
  gpu::device_buffer<std::uint32_t> counts(4);
  counts.fill_bytes(0xab);
  const tally::even_bins bins{4, 0.0, 4.0};

  std::vector<void*> taken = fill_the_device();
  ASSERT_FALSE(taken.empty());
  {
    // A workspace made now needs its block of result words: the first allocation of the call.
    gpu::workspace fresh;
    try {
      gpu::histogram_even_async(samples.const_span(), counts.span(), bins, fresh);
      ADD_FAILURE() << "no error";
    } catch (const tally::error& e) {
      std::printf("the call's error: %s\n", e.what());
      EXPECT_EQ(e.code(), errc::out_of_memory) << e.what();
      EXPECT_TRUE(contains(e.what(), "tally::gpu::histogram_even")) << e.what();
      EXPECT_TRUE(contains(e.what(), "cudaErrorMemoryAllocation")) << e.what();
    }
    // The failed allocation left no error behind to be blamed on the next call.
    EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  }
  for (void* pointer : taken) ASSERT_EQ(cudaFree(pointer), cudaSuccess);
  for (const std::uint32_t c : download(counts)) EXPECT_EQ(c, poison) << "written although the call failed";

  // With the memory back, the same call counts.
  gpu::workspace fresh;
  gpu::histogram_even_async(samples.const_span(), counts.span(), bins, fresh);
  EXPECT_EQ(fresh.read_scalar(nullptr), 1u);
  EXPECT_EQ(download(counts), (std::vector<std::uint32_t>{0, 1, 2, 3}));
}

}  // namespace
