// The GPU backend's runtime services: device queries, device memory, the workspace, event
// timing (GPU time, behind a hold kernel) and the read-bandwidth yardstick every benchmark is
// measured against.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "tally/detail/cuda_check.hpp"
#include "tally/detail/dispatch/device_properties.cuh"
#include "tally/detail/event_pair.hpp"
#include "tally/detail/kernels/common_kernels.cuh"
#include "tally/detail/workspace_slots.hpp"
#include "tally/gpu.hpp"
#include "tally/gpu/timing.hpp"

namespace tally::gpu {

bool built_with_cuda() noexcept { return true; }

int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

namespace {
std::string version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}
}  // namespace

device_info describe_device() {
  int device = 0;
  detail::check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  detail::check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  device_info info;
  info.ordinal = device;
  info.name = prop.name;
  info.compute_capability_major = prop.major;
  info.compute_capability_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  info.global_memory_bytes = prop.totalGlobalMem;
  info.l2_cache_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  // What the dispatch plans with: lowered where TALLY_SHARED_MEMORY_PER_BLOCK asks.
  info.shared_memory_per_block_optin = tally::detail::shared_memory_within_limit(prop.sharedMemPerBlockOptin);
  info.memory_bus_width_bits = prop.memoryBusWidth;
  int driver = 0;
  int runtime = 0;
  detail::check_cuda(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  detail::check_cuda(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  info.driver_version = version_string(driver);
  info.runtime_version = version_string(runtime);
  return info;
}

namespace detail {

void* device_allocate(std::size_t bytes) {
  void* pointer = nullptr;
  check_cuda_clearing_last_error(cudaMalloc(&pointer, bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes");
  return pointer;
}

void device_free(void* pointer) noexcept {
  if (pointer != nullptr) (void)cudaFree(pointer);
}

void copy_to_device(void* destination, const void* source, std::size_t bytes) {
  check_cuda(cudaMemcpy(destination, source, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
}

void copy_to_host(void* destination, const void* source, std::size_t bytes) {
  check_cuda(cudaMemcpy(destination, source, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
}

void device_fill_bytes(void* destination, int byte, std::size_t bytes) {
  check_cuda(cudaMemset(destination, byte, bytes), "cudaMemset");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

}  // namespace detail

workspace::workspace(workspace&& other) noexcept
    : scalars_(other.scalars_), storage_(other.storage_), bytes_(other.bytes_), host_result_(other.host_result_) {
  other.scalars_ = nullptr;
  other.storage_ = nullptr;
  other.bytes_ = 0;
  other.host_result_ = nullptr;
}

workspace& workspace::operator=(workspace&& other) noexcept {
  if (this != &other) {
    detail::device_free(scalars_);
    detail::device_free(storage_);
    if (host_result_ != nullptr) (void)cudaFreeHost(host_result_);
    scalars_ = other.scalars_;
    storage_ = other.storage_;
    bytes_ = other.bytes_;
    host_result_ = other.host_result_;
    other.scalars_ = nullptr;
    other.storage_ = nullptr;
    other.bytes_ = 0;
    other.host_result_ = nullptr;
  }
  return *this;
}

workspace::~workspace() {
  detail::device_free(scalars_);
  detail::device_free(storage_);
  if (host_result_ != nullptr) (void)cudaFreeHost(host_result_);
}

void* workspace::reserve(std::size_t bytes, stream_t stream) {
  if (bytes <= bytes_ && storage_ != nullptr) return storage_;
  if (bytes == 0) return nullptr;
  if (storage_ != nullptr) detail::check_cuda(cudaFreeAsync(storage_, stream), "cudaFreeAsync");
  storage_ = nullptr;
  bytes_ = 0;
  detail::check_cuda_clearing_last_error(cudaMallocAsync(&storage_, bytes, stream),
                     "cudaMallocAsync of " + std::to_string(bytes) + " bytes of temporary storage");
  bytes_ = bytes;
  return storage_;
}

std::uint64_t* workspace::scalar() {
  if (scalars_ == nullptr) {
    // Words that keep a value between calls start with it (workspace_slots.hpp). The copy is waited
    // for, once per workspace, so no stream can run a kernel on the block before it lands.
    namespace slot = tally::detail::scalar_slot;
    std::uint64_t initial[slot::count];
    for (int i = 0; i < slot::count; ++i) initial[i] = slot::initial_value(i);
    void* block = detail::device_allocate(sizeof(initial));
    try {
      detail::copy_to_device(block, initial, sizeof(initial));
      detail::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    } catch (...) {
      detail::device_free(block);
      throw;
    }
    scalars_ = block;
  }
  return static_cast<std::uint64_t*>(scalars_);
}

workspace& detail::waiting_workspace(stream_t stream) {
  thread_local std::map<std::pair<int, stream_t>, workspace> workspaces;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  return workspaces[{device, stream}];
}

void detail::check_no_pending_cuda_error(std::string_view operation) {
  const cudaError_t pending = cudaPeekAtLastError();
  if (pending == cudaSuccess) return;
  throw error(errc::cuda_error, "",
              std::string(operation) + ": a CUDA error was pending before the call, left by earlier work (" +
                  cudaGetErrorName(pending) + ": " + cudaGetErrorString(pending) +
                  "); nothing ran. The error is not tally's, so it stays pending for the code that caused it (a "
                  "faulted kernel's error lasts until the context is reset)");
}

std::uint64_t workspace::read_scalar(stream_t stream) {
  // A kernel copies the word into pinned host memory the device maps, then the host waits: a copy
  // engine's copy waits for the call's kernels across engines, which made a waiting call up to
  // 9 us slower on an H200 (docs/performance.md, "The result read back by a kernel").
  if (host_result_ == nullptr) {
    detail::check_cuda_clearing_last_error(
        cudaHostAlloc(&host_result_, sizeof(std::uint64_t), cudaHostAllocMapped | cudaHostAllocPortable),
        "cudaHostAlloc of the result word");
  }
  detail::copy_words_async(scalar(), host_result_, sizeof(std::uint64_t), stream);
  detail::check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return *static_cast<const volatile std::uint64_t*>(host_result_);
}

void detail::copy_words_async(const void* from, void* to, std::size_t bytes, stream_t stream) {
  if (bytes % 4 != 0 || bytes > copy_words_max_bytes) {
    throw error(errc::invalid_argument, "bytes", "copy_words_async copies whole 32-bit words, at most " +
                                                     std::to_string(copy_words_max_bytes) + " bytes");
  }
  tally::detail::copy_words_kernel<unsigned>
      <<<1, 32, 0, stream>>>(static_cast<const unsigned*>(from), static_cast<unsigned*>(to), static_cast<int>(bytes / 4));
  check_cuda(cudaGetLastError(), "copying a result");
}

namespace {

/// Holds a stream until the host sets `*release` (mapped host memory), or for `timeout_ns` at
/// most, after which it sets `*timed_out`: a run that waits for the GPU inside its enqueueing
/// would otherwise never be released.
__global__ void hold_stream_kernel(const volatile int* release, volatile int* timed_out, std::uint64_t timeout_ns) {
  std::uint64_t start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (*release == 0) {
    std::uint64_t now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > timeout_ns) {
      *timed_out = 1;
      return;
    }
    __nanosleep(1000);
  }
}

/// The two words the hold kernel reads and writes, in pinned host memory the device maps (one
/// allocation for the process, every device: portable).
struct hold_words {
  volatile int* release = nullptr;
  volatile int* timed_out = nullptr;
};

hold_words process_hold_words() {
  static std::mutex guard;
  static int* words = nullptr;
  std::lock_guard<std::mutex> lock(guard);
  if (words == nullptr) {
    void* block = nullptr;
    detail::check_cuda(cudaHostAlloc(&block, 2 * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable),
                       "cudaHostAlloc of the timing hold flags");
    words = static_cast<int*>(block);
    words[0] = 0;
    words[1] = 0;
  }
  return {words, words + 1};
}

constexpr std::uint64_t hold_timeout_ns = 500'000'000;  // 0.5 s: far longer than any enqueueing

}  // namespace

timed_runs time_runs(const std::function<void(stream_t)>& work, int runs, stream_t stream, run_timing timing) {
  // One timing at a time in the process: the hold words are shared.
  static std::recursive_mutex one_timing;
  const std::lock_guard<std::recursive_mutex> lock(one_timing);
  const detail::event_pair events;
  timed_runs out;
  out.timing = timing;
  out.ms.reserve(static_cast<std::size_t>(std::max(runs, 0)));
  const hold_words hold = timing == run_timing::gpu ? process_hold_words() : hold_words{};
  for (int run = 0; run < runs; ++run) {
    if (timing == run_timing::gpu) {
      *hold.release = 0;
      *hold.timed_out = 0;
      hold_stream_kernel<<<1, 1, 0, stream>>>(hold.release, hold.timed_out, hold_timeout_ns);
      detail::check_cuda(cudaGetLastError(), "launching the timing hold kernel");
    }
    try {
      detail::check_cuda(cudaEventRecord(events.start(), stream), "cudaEventRecord");
      work(stream);
      detail::check_cuda(cudaEventRecord(events.stop(), stream), "cudaEventRecord");
    } catch (...) {
      if (timing == run_timing::gpu) {
        // Let the stream go, and wait for the hold to end before the error leaves: a later timing
        // resets the flag, and a hold still running then would spin to its timeout.
        *hold.release = 1;
        (void)cudaStreamSynchronize(stream);
      }
      throw;
    }
    if (timing == run_timing::gpu) {
      std::atomic_thread_fence(std::memory_order_seq_cst);  // every enqueue is done before the release
      *hold.release = 1;
    }
    const double ms = events.elapsed_ms();  // waits for the run
    if (timing == run_timing::gpu && *hold.timed_out != 0) {
      // The run waited for the held stream itself: its time includes the hold. Time every run again
      // with the launch counted.
      return time_runs(work, runs, stream, run_timing::with_launch);
    }
    out.ms.push_back(static_cast<float>(ms));
  }
  return out;
}

void synchronize() { detail::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

namespace {
// Reads every 16-byte word once, four loads in flight per thread, as the histogram kernels have:
// with one, GPU-timed int32 histograms read up to 1.5% faster than this yardstick
// (docs/performance.md, "Measuring"). The xor is stored only if it equals a value that cannot
// occur, so the loads cannot be optimized away.
__global__ void streaming_read_kernel(const uint4* data, std::size_t words, unsigned int* sink) {
  constexpr int in_flight = 4;
  uint4 acc = make_uint4(0, 0, 0, 0);
  const auto fold = [&acc](const uint4& v) {
    acc.x ^= v.x;
    acc.y ^= v.y;
    acc.z ^= v.z;
    acc.w ^= v.w;
  };
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (in_flight - 1) * stride < words; i += in_flight * stride) {
    uint4 v[in_flight];
#pragma unroll
    for (int u = 0; u < in_flight; ++u) v[u] = __ldcs(data + i + u * stride);
#pragma unroll
    for (int u = 0; u < in_flight; ++u) fold(v[u]);
  }
  for (; i < words; i += stride) fold(__ldcs(data + i));
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) *sink = acc.x;
}
}  // namespace

double measure_read_bandwidth(std::size_t bytes, int runs, run_timing timing) {
  const std::size_t words = bytes / sizeof(uint4);
  device_buffer<uint4> data(words);
  device_buffer<unsigned int> sink(1);
  data.fill_bytes(0x5a);
  int sms = 0;
  int device = 0;
  detail::check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  detail::check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  const int threads = 512;
  const int blocks = sms * 4;
  auto run = [&](stream_t stream) {
    streaming_read_kernel<<<blocks, threads, 0, stream>>>(data.data(), words, sink.data());
    detail::check_cuda(cudaGetLastError(), "streaming read kernel");
  };
  (void)time_runs(run, 3, nullptr, timing);  // warm up
  std::vector<float> times = time_runs(run, runs, nullptr, timing).ms;
  std::sort(times.begin(), times.end());
  const double median_ms = times[times.size() / 2];
  return static_cast<double>(words * sizeof(uint4)) / (median_ms * 1e-3);
}

}  // namespace tally::gpu
