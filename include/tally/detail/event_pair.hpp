// A pair of CUDA events owned by one object, for timing GPU work between them (the lab's runs and
// time_runs).
#pragma once

#include <cuda_runtime.h>

#include "tally/detail/cuda_check.hpp"

namespace tally::gpu::detail {

/// A pair of CUDA events, destroyed with the object.
class event_pair {
 public:
  event_pair() {
    check_cuda(cudaEventCreate(&start_), "cudaEventCreate");
    if (cudaError_t e = cudaEventCreate(&stop_); e != cudaSuccess) {
      cudaEventDestroy(start_);
      check_cuda(e, "cudaEventCreate");
    }
  }
  event_pair(const event_pair&) = delete;
  event_pair& operator=(const event_pair&) = delete;
  ~event_pair() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  cudaEvent_t start() const { return start_; }
  cudaEvent_t stop() const { return stop_; }
  /// Waits for the stop event; the milliseconds between the two.
  double elapsed_ms() const {
    check_cuda(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0.0f;
    check_cuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms;
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

}  // namespace tally::gpu::detail
