// Turns a CUDA runtime error into tally::error with the call and the runtime's own message: for the
// host code that calls the CUDA runtime, the compiled library (src/) and the lab's GPU runs.
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

/// Checks a call that may fail without harming the context (an allocation, a CUB call refusing
/// its sizes): a failed one also leaves its error as the runtime's "last error", which the next
/// launch check (cudaGetLastError) would report as its own, so it is cleared first.
inline void check_cuda_clearing_last_error(cudaError_t status, std::string_view what) {
  if (status != cudaSuccess) (void)cudaGetLastError();
  check_cuda(status, what);
}

}  // namespace tally::gpu::detail
