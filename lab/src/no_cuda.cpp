// The lab's GPU runs in a build without CUDA: the same symbols as lab.cu, each reporting that this
// build has no GPU support (the library's src/no_cuda.cpp does the same for the GPU backend).
#include <cstdint>
#include <span>

#include "tally/error.hpp"
#include "tally/lab.hpp"

namespace tally::lab {
// The lab's GPU experiments need the GPU backend; names, validation and checks (lab_common.cpp)
// are in every build.
contention_result run_contention(const contention_case&, int, int) {
  throw error(errc::not_supported, "backend", "tally was built without CUDA: the GPU experiments are not available");
}
race_count count_with_threads(std::int64_t, bool) {
  throw error(errc::not_supported, "backend", "tally was built without CUDA: the GPU experiments are not available");
}
race_count naive_histogram(std::span<const std::int32_t>, std::span<const std::uint64_t>) {
  throw error(errc::not_supported, "backend", "tally was built without CUDA: the GPU experiments are not available");
}
race_count block_histogram(std::span<const std::int32_t>, std::span<const std::uint64_t>, bool) {
  throw error(errc::not_supported, "backend", "tally was built without CUDA: the GPU experiments are not available");
}
}  // namespace tally::lab
