// Turns a CUDA runtime error into tally::error with the call and the runtime's own message.
#pragma once

#include <string>
#include <string_view>

#include <cuda_runtime.h>

#include "tally/error.hpp"

namespace tally::gpu::detail {

inline void check_cuda(cudaError_t status, std::string_view what) {
  if (status == cudaSuccess) return;
  const errc code = status == cudaErrorMemoryAllocation ? errc::out_of_memory : errc::cuda_error;
  throw error(code, "", std::string(what) + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

}  // namespace tally::gpu::detail
