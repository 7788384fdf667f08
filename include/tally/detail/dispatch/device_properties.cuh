// The few device attributes the dispatch layer sizes launches by, read once per device, and each
// kernel's resident blocks per multiprocessor, computed once per kernel, device, block size and
// shared memory: the runtime queries cost microseconds of host time on every call otherwise, which
// a 100-microsecond histogram of bytes notices.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>

#include <cuda_runtime.h>

namespace tally::detail {

struct device_properties {
  int multiprocessors = 0;
  std::size_t shared_memory_per_block_optin = 0;
};

/// The environment variable that makes tally plan as if a block could have at most this many bytes
/// of shared memory: on one GPU, the choices made for chips with less (99 KiB on sm_86, sm_89 and
/// sm_120: 101376) run and are tested. Read once per device; ignored where it is not a number below
/// what the device gives.
inline constexpr const char* shared_memory_limit_variable = "TALLY_SHARED_MEMORY_PER_BLOCK";

/// The device's shared memory per block, lowered to the limit the environment sets, if any.
inline std::size_t shared_memory_within_limit(std::size_t device_bytes) {
  const char* text = std::getenv(shared_memory_limit_variable);
  if (text == nullptr || *text == '\0') return device_bytes;
  char* end = nullptr;
  const unsigned long long limit = std::strtoull(text, &end, 10);
  if (*end != '\0' || limit == 0 || limit >= device_bytes) return device_bytes;
  return static_cast<std::size_t>(limit);
}

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
    p.shared_memory_per_block_optin = shared_memory_within_limit(static_cast<std::size_t>(optin));
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

/// Blocks of `kernel` (`threads` threads, `shared_bytes` of dynamic shared memory) that fit one
/// multiprocessor of the current device. Raises the kernel's dynamic shared-memory limit first when
/// its static and dynamic shared memory together need more than the default 48 KiB (only ever
/// raises it, so earlier launches stay valid).
template <class Kernel>
cudaError_t resident_blocks_per_multiprocessor(Kernel kernel, int threads, std::size_t shared_bytes, int& per_sm) {
  using key = std::tuple<const void*, int, int, std::size_t>;  // kernel, device, threads, shared bytes
  static std::map<key, int> known_blocks;
  static std::map<std::tuple<const void*, int>, std::size_t> shared_limit;  // kernel, device
  static std::mutex guard;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  const auto* id = reinterpret_cast<const void*>(kernel);
  std::lock_guard<std::mutex> lock(guard);
  if (const auto found = known_blocks.find(key{id, device, threads, shared_bytes}); found != known_blocks.end()) {
    per_sm = found->second;
    return cudaSuccess;
  }
  // Beyond 48 KiB a block's shared memory, static and dynamic together, needs the kernel's
  // opt-in to the dynamic part.
  cudaFuncAttributes attributes{};
  if (cudaError_t e = cudaFuncGetAttributes(&attributes, kernel); e != cudaSuccess) return e;
  std::size_t& limit = shared_limit[{id, device}];
  if (attributes.sharedSizeBytes + shared_bytes > 48 * 1024 && shared_bytes > limit) {
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(shared_bytes));
        e != cudaSuccess) {
      return e;
    }
    limit = shared_bytes;
  }
  if (cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared_bytes);
      e != cudaSuccess) {
    return e;
  }
  known_blocks[key{id, device, threads, shared_bytes}] = per_sm;
  return cudaSuccess;
}

}  // namespace tally::detail
