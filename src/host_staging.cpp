// The staging ring of tally/gpu/streaming.hpp: pinned host buffers filled by readers or by a
// parallel copy out of pageable arrays, copies on a stream of their own, and the chunk loop that
// overlaps the host's filling, the copy engine and the counting.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "tally/cpu/parallel.hpp"
#include "tally/detail/cuda_check.hpp"
#include "tally/error.hpp"
#include "tally/gpu/streaming.hpp"

namespace tally::gpu {

namespace {
constexpr std::size_t chunk_granule = std::size_t{1} << 20;  // whole MiB: whole 512-sample blocks of any type
constexpr std::size_t lane_alignment = 256;
constexpr std::uint64_t none_found = std::numeric_limits<std::uint64_t>::max();
/// Pageable arrays below this many bytes a chunk are copied into staging by one thread.
constexpr std::size_t parallel_copy_bytes = std::size_t{4} << 20;

std::size_t round_up(std::size_t bytes, std::size_t unit) { return (bytes + unit - 1) / unit * unit; }

constexpr std::size_t huge_page = std::size_t{2} << 20;

/// Pinned host memory for one chunk: 2 MiB-aligned memory the kernel may back with huge pages,
/// page-locked with cudaHostRegister, so that pinning locks one page where cudaMallocHost locks
/// 512 (the first call's pinning is on the critical path of a whole `tally hist`). Falls back to
/// cudaMallocHost; `registered` says which to free with.
void* allocate_pinned(std::size_t bytes, bool& registered) {
  const std::size_t rounded = round_up(bytes, huge_page);
  if (void* room = std::aligned_alloc(huge_page, rounded)) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    ::madvise(room, rounded, MADV_HUGEPAGE);  // advice only
#endif
    for (std::size_t at = 0; at < rounded; at += huge_page) static_cast<volatile char*>(room)[at] = 0;
    if (cudaHostRegister(room, rounded, cudaHostRegisterDefault) == cudaSuccess) {
      registered = true;
      return room;
    }
    (void)cudaGetLastError();
    std::free(room);
  }
  registered = false;
  void* chunk = nullptr;
  detail::check_cuda_clearing_last_error(cudaMallocHost(&chunk, bytes),
                                         "cudaMallocHost of a staging ring's pinned chunk (" + std::to_string(bytes) +
                                             " bytes)");
  return chunk;
}

void free_pinned(void* pointer, bool registered) noexcept {
  if (pointer == nullptr) return;
  if (registered) {
    (void)cudaHostUnregister(pointer);
    std::free(pointer);
  } else {
    (void)cudaFreeHost(pointer);
  }
}

staging_options checked(const staging_options& options) {
  if (options.chunk_bytes < chunk_granule) {
    throw_invalid_argument("tally::gpu::staging_ring", "options",
                           "chunk_bytes must be at least 1 MiB (got " + std::to_string(options.chunk_bytes) + ")");
  }
  if (options.depth < 2 || options.depth > 16) {
    throw_invalid_argument("tally::gpu::staging_ring", "options",
                           "depth must be between 2 and 16 (got " + std::to_string(options.depth) + ")");
  }
  staging_options rounded = options;
  rounded.chunk_bytes = options.chunk_bytes / chunk_granule * chunk_granule;
  return rounded;
}
}  // namespace

struct staging_ring::state {
  staging_options options;
  int device = -1;
  std::vector<void*> pinned;              // a chunk each, allocated when first needed
  std::vector<bool> pinned_registered;    // allocate_pinned's way for each
  std::vector<void*> device_chunks;       // a chunk each
  std::vector<cudaEvent_t> copied;        // the chunk's copy has landed (copy stream)
  std::vector<cudaEvent_t> counted;       // the chunk's work is done (the caller's stream)
  std::uint64_t* stop_words = nullptr;    // pinned: each slot's copy of the stop word
  cudaStream_t copy_stream = nullptr;
  void* scratch = nullptr;
  std::size_t scratch_bytes = 0;

  explicit state(const staging_options& o) : options(checked(o)) {}
  state(const state&) = delete;
  state& operator=(const state&) = delete;
  ~state() { release(); }

  void release() noexcept {
    if (device < 0) return;
    int current = 0;
    const bool switched = cudaGetDevice(&current) == cudaSuccess && current != device && cudaSetDevice(device) == cudaSuccess;
    if (copy_stream != nullptr) (void)cudaStreamSynchronize(copy_stream);
    for (cudaEvent_t e : counted) (void)cudaEventSynchronize(e);
    for (std::size_t i = 0; i < pinned.size(); ++i) free_pinned(pinned[i], pinned_registered[i]);
    for (void* p : device_chunks) (void)cudaFree(p);
    for (cudaEvent_t e : copied) (void)cudaEventDestroy(e);
    for (cudaEvent_t e : counted) (void)cudaEventDestroy(e);
    if (stop_words != nullptr) (void)cudaFreeHost(stop_words);
    if (scratch != nullptr) (void)cudaFree(scratch);
    if (copy_stream != nullptr) (void)cudaStreamDestroy(copy_stream);
    pinned.clear();
    pinned_registered.clear();
    device_chunks.clear();
    copied.clear();
    counted.clear();
    stop_words = nullptr;
    scratch = nullptr;
    scratch_bytes = 0;
    copy_stream = nullptr;
    device = -1;
    if (switched) (void)cudaSetDevice(current);
  }

  /// Device buffers, events and the copy stream on the current device (pinned buffers come later).
  void ready() {
    int current = 0;
    detail::check_cuda(cudaGetDevice(&current), "cudaGetDevice");
    if (device == current) return;
    release();
    device = current;
    const auto depth = static_cast<std::size_t>(options.depth);
    detail::check_cuda(cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking), "cudaStreamCreate");
    for (std::size_t i = 0; i < depth; ++i) {
      void* chunk = nullptr;
      detail::check_cuda_clearing_last_error(cudaMalloc(&chunk, options.chunk_bytes + 2 * lane_alignment),
                                             "cudaMalloc of a staging ring's device chunk");
      device_chunks.push_back(chunk);
      cudaEvent_t e = nullptr;
      detail::check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
      copied.push_back(e);
      detail::check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
      counted.push_back(e);
    }
    detail::check_cuda_clearing_last_error(cudaMallocHost(reinterpret_cast<void**>(&stop_words), depth * sizeof(std::uint64_t)),
                                           "cudaMallocHost of a staging ring's words");
  }

  void ready_pinned() {
    if (!pinned.empty()) return;
    for (int i = 0; i < options.depth; ++i) {
      bool registered = false;
      void* chunk = allocate_pinned(options.chunk_bytes + 2 * lane_alignment, registered);
      pinned.push_back(chunk);
      pinned_registered.push_back(registered);
    }
  }
};

staging_ring::staging_ring(const staging_options& options) : state_(std::make_unique<state>(options)) {}
staging_ring::staging_ring(staging_ring&&) noexcept = default;
staging_ring& staging_ring::operator=(staging_ring&&) noexcept = default;
staging_ring::~staging_ring() = default;

const staging_options& staging_ring::options() const noexcept { return state_->options; }
std::size_t staging_ring::pinned_bytes() const noexcept {
  const std::size_t chunk = state_->options.chunk_bytes + 2 * lane_alignment;
  std::size_t bytes = 0;
  for (const bool registered : state_->pinned_registered) bytes += registered ? round_up(chunk, huge_page) : chunk;
  return bytes;
}

staging_ring& staging_ring::thread_ring() {
  thread_local staging_ring ring;
  return ring;
}

namespace detail {
namespace {

/// Whether `pointer` is host memory the copy engine reads directly (pinned or registered); refuses
/// device memory, which belongs to the in-memory calls.
bool is_pinned_host(const void* pointer, std::string_view function, std::string_view argument) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged) {
    throw_invalid_argument(function, argument,
                           "is device memory: these calls take host samples; pass device arrays to the "
                           "tally::gpu call of the same name");
  }
  return attributes.type == cudaMemoryTypeHost;
}

/// memcpy over the OpenMP threads: one thread copies out of pageable memory at a fraction of the
/// host's bandwidth, and the copy engine would wait for it.
void parallel_copy(void* destination, const void* source, std::size_t bytes) {
  const int threads = cpu::detail::max_threads();
  if (bytes < parallel_copy_bytes || threads < 2) {
    std::memcpy(destination, source, bytes);
    return;
  }
  const std::size_t piece = round_up((bytes + static_cast<std::size_t>(threads) - 1) / static_cast<std::size_t>(threads), 4096);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) {
    const std::size_t begin = std::min(bytes, static_cast<std::size_t>(t) * piece);
    const std::size_t end = std::min(bytes, begin + piece);
    if (end > begin) std::memcpy(static_cast<char*>(destination) + begin, static_cast<const char*>(source) + begin, end - begin);
  }
}

/// Reads exactly `bytes` from `reader` unless its input ends; returns what it got.
std::size_t read_fully(const host_reader& reader, std::byte* into, std::size_t bytes) {
  std::size_t got = 0;
  while (got < bytes) {
    const std::size_t now = reader(std::span<std::byte>(into + got, bytes - got));
    if (now == 0) break;
    if (now > bytes - got) throw std::logic_error("a host_reader wrote more bytes than it was given room for");
    got += now;
  }
  return got;
}

}  // namespace

streamed stream_chunks(staging_ring& ring, std::string_view function, std::span<const host_lane> lanes,
                       const chunk_work& work, stream_t stream, const std::uint64_t* stop_word) {
  staging_ring::state& st = ring.internals();
  st.ready();
  // A call before this one (on another stream, or one that threw) may still be copying out of the
  // buffers: each slot is free once its last chunk is counted.
  for (cudaEvent_t e : st.counted) check_cuda(cudaEventSynchronize(e), "waiting for a staged chunk");
  const bool from_readers = lanes.front().reader != nullptr;
  std::size_t bytes_per_element = 0;
  for (const host_lane& lane : lanes) {
    if ((lane.reader != nullptr) != from_readers) {
      throw_invalid_argument(function, lane.argument, "must be an array when the samples are an array, a reader when they are a reader");
    }
    if (!from_readers && lane.size != lanes.front().size) {
      throw_invalid_argument(function, lane.argument,
                             "has " + std::to_string(lane.size) + " elements; the samples have " +
                                 std::to_string(lanes.front().size));
    }
    bytes_per_element += lane.element_bytes;
  }
  const std::size_t per_chunk = ring.chunk_elements(bytes_per_element);
  std::vector<bool> pinned_lane(lanes.size(), false);
  bool any_staged = from_readers;
  if (!from_readers) {
    for (std::size_t i = 0; i < lanes.size(); ++i) {
      pinned_lane[i] = lanes[i].size > 0 && is_pinned_host(lanes[i].array, function, lanes[i].argument);
      any_staged = any_staged || (lanes[i].size > 0 && !pinned_lane[i]);
    }
  }
  if (any_staged) st.ready_pinned();
  std::vector<std::size_t> offsets(lanes.size());
  for (std::size_t i = 1; i < lanes.size(); ++i) {
    offsets[i] = round_up(offsets[i - 1] + per_chunk * lanes[i - 1].element_bytes, lane_alignment);
  }

  const auto depth = static_cast<std::uint64_t>(st.options.depth);
  const std::uint64_t total = from_readers ? 0 : lanes.front().size;
  streamed went;
  std::vector<const void*> device(lanes.size());
  bool ended = false;
  for (std::uint64_t k = 0; !ended; ++k) {
    const std::size_t slot = static_cast<std::size_t>(k % depth);
    if (k >= depth) {
      // The slot's last chunk is counted: its buffers are free, and its copy of the stop word is in.
      check_cuda(cudaEventSynchronize(st.counted[slot]), "waiting for a staged chunk");
      if (stop_word != nullptr && st.stop_words[slot] != none_found) break;
    }
    char* const staged = any_staged ? static_cast<char*>(st.pinned[slot]) : nullptr;
    char* const on_device = static_cast<char*>(st.device_chunks[slot]);
    std::size_t n = 0;
    if (from_readers) {
      const std::size_t eb = lanes[0].element_bytes;
      const std::size_t got = read_fully(*lanes[0].reader, reinterpret_cast<std::byte*>(staged), per_chunk * eb);
      if (got % eb != 0) {
        throw_invalid_argument(function, lanes[0].argument,
                               "ended inside a sample: its reader gave " + std::to_string(went.elements * eb + got) +
                                   " bytes, not a whole number of " + std::to_string(eb) + "-byte samples");
      }
      n = got / eb;
      ended = n < per_chunk;
      for (std::size_t i = 1; i < lanes.size(); ++i) {
        const std::size_t want = n * lanes[i].element_bytes;
        const std::size_t other = read_fully(*lanes[i].reader, reinterpret_cast<std::byte*>(staged + offsets[i]), want);
        if (other != want) {
          throw_invalid_argument(function, lanes[i].argument,
                                 "ended before the samples did: its reader gave " +
                                     std::to_string(went.elements + other / lanes[i].element_bytes) +
                                     " elements where the samples had at least " + std::to_string(went.elements + n));
        }
      }
    } else {
      n = static_cast<std::size_t>(std::min<std::uint64_t>(per_chunk, total - went.elements));
      ended = went.elements + n >= total;
    }
    if (n == 0) break;
    for (std::size_t i = 0; i < lanes.size(); ++i) {
      const std::size_t bytes = n * lanes[i].element_bytes;
      const char* source = staged + offsets[i];
      if (!from_readers) {
        const char* in_array = static_cast<const char*>(lanes[i].array) + went.elements * lanes[i].element_bytes;
        if (pinned_lane[i]) {
          source = in_array;
        } else {
          parallel_copy(staged + offsets[i], in_array, bytes);
        }
      }
      check_cuda(cudaMemcpyAsync(on_device + offsets[i], source, bytes, cudaMemcpyHostToDevice, st.copy_stream),
                 "copying a chunk to the device");
      device[i] = on_device + offsets[i];
    }
    check_cuda(cudaEventRecord(st.copied[slot], st.copy_stream), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream, st.copied[slot], 0), "cudaStreamWaitEvent");
    work(std::span<const void* const>(device), n, went.elements, stream);
    if (stop_word != nullptr) {
      check_cuda(cudaMemcpyAsync(&st.stop_words[slot], stop_word, sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream),
                 "reading a chunk's result back");
    }
    check_cuda(cudaEventRecord(st.counted[slot], stream), "cudaEventRecord");
    went.elements += n;
    ++went.chunks;
  }
  return went;
}

void* ring_scratch(staging_ring& ring, std::size_t bytes, stream_t stream) {
  staging_ring::state& st = ring.internals();
  st.ready();
  if (bytes <= st.scratch_bytes) return st.scratch;
  if (st.scratch != nullptr) check_cuda(cudaFreeAsync(st.scratch, stream), "cudaFreeAsync");
  st.scratch = nullptr;
  st.scratch_bytes = 0;
  check_cuda_clearing_last_error(cudaMallocAsync(&st.scratch, bytes, stream),
                                 "cudaMallocAsync of " + std::to_string(bytes) + " bytes for a streamed call's totals");
  st.scratch_bytes = bytes;
  return st.scratch;
}

std::uint64_t read_device_word(const std::uint64_t* word, stream_t stream) {
  std::uint64_t value = 0;
  check_cuda(cudaMemcpyAsync(&value, word, sizeof(value), cudaMemcpyDeviceToHost, stream), "reading a result back");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return value;
}

}  // namespace detail
}  // namespace tally::gpu
