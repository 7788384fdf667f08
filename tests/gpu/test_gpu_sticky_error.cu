// A kernel of other code faults (an illegal address), which breaks the CUDA context for good: every
// later call of tally must throw tally::error naming the operation and the CUDA error, never
// crash or return counts. A program of its own, as nothing can run on the GPU after it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "tally/gpu.hpp"

namespace {

namespace gpu = tally::gpu;

__global__ void write_to_an_illegal_address_kernel(int* nowhere) { *nowhere = 1; }

/// Whether the message names the operation and one of the errors a faulted context reports.
void expect_names(const tally::error& e, const std::string& operation) {
  const std::string what = e.what();
  std::printf("the call's error: %s\n", what.c_str());
  EXPECT_EQ(e.code(), tally::errc::cuda_error) << what;
  EXPECT_NE(what.find(operation), std::string::npos) << what;
  EXPECT_TRUE(what.find("cudaErrorIllegalAddress") != std::string::npos ||
              what.find("cudaErrorLaunchFailure") != std::string::npos)
      << what;
}

TEST(GpuStickyError, EveryCallAfterAnotherKernelFaultedThrowsNamingTheOperation) {
  const std::vector<std::int32_t> host{1, 2, 2, 3, 3, 3, 99};
  gpu::device_buffer<std::int32_t> samples{std::span<const std::int32_t>(host)};
  gpu::device_buffer<std::uint32_t> counts(4);
  const tally::even_bins bins{4, 0.0, 4.0};
  ASSERT_EQ(gpu::histogram_even(samples.const_span(), counts.span(), bins).left_out, 1u) << "works before the fault";
  gpu::workspace ws;
  (void)ws.scalar();

  // Launched without a wait, as other code on the same device would: the fault surfaces later.
  write_to_an_illegal_address_kernel<<<1, 1>>>(reinterpret_cast<int*>(std::uintptr_t{16}));
  ASSERT_EQ(cudaGetLastError(), cudaSuccess) << "the launch itself succeeds";

  try {
    gpu::histogram_even(samples.const_span(), counts.span(), bins);
    ADD_FAILURE() << "histogram_even returned after the fault";
  } catch (const tally::error& e) {
    expect_names(e, "tally::gpu::histogram_even");
  }
  // The context stays broken, so every operation, waiting or not, keeps saying so.
  const std::vector<double> edges{0, 1, 2, 3, 4};
  try {
    gpu::histogram_range_async(samples.const_span(), counts.span(), std::span<const double>(edges), ws);
    (void)ws.read_scalar(nullptr);
    ADD_FAILURE() << "histogram_range returned after the fault";
  } catch (const tally::error& e) {
    expect_names(e, "tally::gpu::histogram_range");
  }
  try {
    (void)gpu::reduce(samples.const_span(), tally::reduce_op::sum);
    ADD_FAILURE() << "reduce returned after the fault";
  } catch (const tally::error& e) {
    expect_names(e, "tally::gpu::reduce");
  }
  try {
    (void)gpu::find_first_if(samples.const_span(), tally::compare_to<std::int32_t>{tally::comparison::equal, 3});
    ADD_FAILURE() << "find_first_if returned after the fault";
  } catch (const tally::error& e) {
    expect_names(e, "tally::gpu::find_first_if");
  }
}

}  // namespace
