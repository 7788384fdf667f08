// The lab's GPU runs in a build without CUDA: the same symbols as lab.cu, each reporting that this
// build has no GPU support (the library's src/no_cuda.cpp does the same for the GPU backend).
#include <cstdint>
#include <span>

#include "contention_trials.hpp"
#include "tally/error.hpp"
#include "tally/lab.hpp"

namespace tally::lab {
namespace {
[[noreturn]] void no_gpu() {
  throw error(errc::not_supported, "backend", "tally was built without CUDA: the GPU experiments are not available");
}
}  // namespace

contention_trial gpu_contention_trial(const contention_case&) { no_gpu(); }

namespace gpu {
race_count count_with_threads(std::int64_t, bool) { no_gpu(); }
race_count naive_histogram(std::span<const std::int32_t>, std::span<const std::uint64_t>) { no_gpu(); }
race_count block_histogram(std::span<const std::int32_t>, std::span<const std::uint64_t>, bool) { no_gpu(); }
}  // namespace gpu
}  // namespace tally::lab
