// The few device attributes the dispatch layer sizes launches by, read once per device.
#pragma once

#include <cstddef>
#include <mutex>

#include <cuda_runtime.h>

namespace tally::detail {

struct device_properties {
  int multiprocessors = 0;
  std::size_t shared_memory_per_block_optin = 0;
};

/// Attributes of the current device, cached (the runtime query costs microseconds per call).
inline cudaError_t current_device_properties(device_properties& out) {
  constexpr int max_devices = 64;
  static device_properties cache[max_devices];
  static bool known[max_devices] = {};
  static std::mutex guard;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(guard);
  if (device >= max_devices || !known[device]) {
    device_properties p;
    int sms = 0;
    int optin = 0;
    if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess) return e;
    if (cudaError_t e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
        e != cudaSuccess) {
      return e;
    }
    p.multiprocessors = sms;
    p.shared_memory_per_block_optin = static_cast<std::size_t>(optin);
    if (device >= max_devices) {
      out = p;
      return cudaSuccess;
    }
    cache[device] = p;
    known[device] = true;
  }
  out = cache[device];
  return cudaSuccess;
}

}  // namespace tally::detail
