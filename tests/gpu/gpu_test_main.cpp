// main() of the GPU test programs: without a GPU (or without CUDA in the build) it says so and
// exits 77, which CTest reports as skipped, never as passed.
#include <cstdio>

#include <gtest/gtest.h>

#include "tally/gpu.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (tally::gpu::device_count() == 0) {
    std::printf("SKIPPED: no GPU present (%s); GPU tests did not run\n",
                tally::gpu::built_with_cuda() ? "CUDA build" : "build without CUDA");
    return 77;
  }
  const tally::gpu::device_info info = tally::gpu::describe_device();
  std::printf("GPU: %s (sm_%d%d, %d SMs)\n", info.name.c_str(), info.compute_capability_major,
              info.compute_capability_minor, info.multiprocessors);
  return RUN_ALL_TESTS();
}
