// The NCCL layer (tally/nccl.hpp): the agreement all-gather, the collectives that add bins, and
// the exact sums across ranks (fixed-point slots and weighted words added as integers).
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tally/detail/cuda_check.hpp"
#include "tally/detail/dispatch/reduce_dispatch.cuh"
#include "tally/detail/fixed_point_weight.hpp"
#include "tally/detail/sharded_sum.hpp"
#include "tally/detail/validate.hpp"
#include "tally/nccl.hpp"

namespace tally::nccl {

bool built_with_nccl() noexcept { return true; }

namespace {
/// Communicators a local_team aborted: the layer refuses them (they are freed) rather than call NCCL.
std::mutex aborted_mutex;
std::vector<comm_t> aborted_comms;
}  // namespace

void detail::check_not_aborted(comm_t comm, std::string_view function) {
  const std::lock_guard lock(aborted_mutex);
  if (std::find(aborted_comms.begin(), aborted_comms.end(), comm) != aborted_comms.end()) {
    throw error(errc::communication_error, "comm",
                std::string(function) + ": the communicator was aborted after another rank failed");
  }
}

local_team::local_team(std::span<const int> devices) : devices_(devices.begin(), devices.end()) {
  if (devices.empty()) throw_invalid_argument("tally::nccl::local_team", "devices", "is empty; name at least one GPU");
  comms_.resize(devices.size());
  const ncclResult_t status = ncclCommInitAll(comms_.data(), static_cast<int>(devices.size()), devices_.data());
  if (status != ncclSuccess) {
    comms_.clear();
    throw error(errc::communication_error, "devices",
                std::string("tally::nccl::local_team: ncclCommInitAll over ") + std::to_string(devices.size()) +
                    " GPUs: NCCL " + ncclGetErrorString(status));
  }
}

local_team::~local_team() {
  if (aborted_) {  // ncclCommAbort freed them: forget them, so that a new communicator may reuse an address
    const std::lock_guard lock(aborted_mutex);
    for (comm_t comm : comms_) std::erase(aborted_comms, comm);
    return;
  }
  for (comm_t comm : comms_) (void)ncclCommDestroy(comm);
}

void local_team::abort() noexcept {
  {
    const std::lock_guard lock(aborted_mutex);
    aborted_comms.insert(aborted_comms.end(), comms_.begin(), comms_.end());
  }
  for (comm_t comm : comms_) (void)ncclCommAbort(comm);
  aborted_ = true;
}

namespace detail {

void make_current(int device) { gpu::detail::check_cuda(cudaSetDevice(device), "cudaSetDevice"); }

namespace {

using gpu::detail::check_cuda;
namespace sharded_sum = tally::detail::sharded_sum;
namespace fixed_point_weight = tally::detail::fixed_point_weight;

/// Turns an NCCL failure into tally::error with NCCL's own message and the communicator's last error.
void check_nccl(ncclResult_t status, comm_t comm, std::string_view function, std::string_view what) {
  if (status == ncclSuccess) return;
  std::string message = std::string(function) + ": " + std::string(what) + ": NCCL " + ncclGetErrorString(status);
  if (const char* last = comm != nullptr ? ncclGetLastError(comm) : nullptr; last != nullptr && *last != '\0') {
    message += " (" + std::string(last) + ")";
  }
  throw error(errc::communication_error, "comm", message);
}

/// What the NCCL layer keeps per host thread, device and stream (as the waiting calls' workspace):
/// device storage for the gathered words, a sum's slots or a weighted histogram's flags, and
/// half-precision samples widened to float; and the agreement's own stream, storage and pinned
/// host words. The agreement's all-gather runs on its own stream, so that the host checks the
/// signatures while the shard is being counted on the caller's stream: the counts' all-reduce is
/// then enqueued behind the count with no wait for it in between.
struct scratch {
  gpu::workspace gathered;
  gpu::workspace sums;
  gpu::workspace widened;
  gpu::workspace agreement;
  cudaStream_t agreement_stream = nullptr;
  std::uint64_t* pinned = nullptr;  // the signature words out, every rank's back
  std::size_t pinned_words = 0;

  scratch() = default;
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  ~scratch() {
    // At thread exit: the context may be gone already, so failures are ignored.
    if (pinned != nullptr) (void)cudaFreeHost(pinned);
    if (agreement_stream != nullptr) (void)cudaStreamDestroy(agreement_stream);
  }
  stream_t side_stream() {
    if (agreement_stream == nullptr) {
      check_cuda(cudaStreamCreateWithFlags(&agreement_stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    }
    return agreement_stream;
  }
  std::uint64_t* pinned_for(std::size_t words) {
    if (words > pinned_words) {
      if (pinned != nullptr) check_cuda(cudaFreeHost(pinned), "cudaFreeHost");
      pinned = nullptr;
      pinned_words = 0;
      check_cuda(cudaMallocHost(reinterpret_cast<void**>(&pinned), words * sizeof(std::uint64_t)), "cudaMallocHost");
      pinned_words = words;
    }
    return pinned;
  }
};

scratch& scratch_for(stream_t stream) {
  thread_local std::map<std::pair<int, stream_t>, scratch> all;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  return all[{device, stream}];
}

/// Checks a call made inside ncclGroupStart: on failure it closes the group first, so that the
/// thread's later NCCL calls are not held in a group that never ends.
void check_in_group(ncclResult_t status, comm_t comm, std::string_view function, std::string_view what) {
  if (status == ncclSuccess) return;
  (void)ncclGroupEnd();
  check_nccl(status, comm, function, what);
}

ncclDataType_t nccl_type(bin_type type) {
  switch (type) {
    case bin_type::uint32:
      return ncclUint32;
    case bin_type::uint64:
      return ncclUint64;
    case bin_type::float64:
      return ncclFloat64;
  }
  return ncclUint64;
}

std::size_t bytes_of(bin_type type) { return type == bin_type::uint32 ? 4 : 8; }

/// The largest finite top word of the head and of the tail piece, into tops[0] and tops[1].
template <class T>
__global__ void piece_tops_kernel(const T* shard, sharded_sum::shard_cut cut, std::uint32_t* tops) {
  if (threadIdx.x != 0) return;
  tops[0] = sharded_sum::piece_top(shard + cut.head.begin, cut.head.end - cut.head.begin);
  tops[1] = sharded_sum::piece_top(shard + cut.tail.begin, cut.tail.end - cut.tail.begin);
}

/// Adds the head and the tail piece to the slots, each on its whole chunk's grid.
template <class T>
__global__ void add_pieces_kernel(const T* shard, sharded_sum::shard_cut cut, std::uint32_t head_top,
                                  std::uint32_t tail_top, std::int64_t* slots, std::uint32_t* flags) {
  if (threadIdx.x != 0) return;
  std::uint32_t f = *flags;
  if (!cut.head.empty())
    sharded_sum::add_piece(shard + cut.head.begin, cut.head.end - cut.head.begin, head_top, slots, f);
  if (!cut.tail.empty())
    sharded_sum::add_piece(shard + cut.tail.begin, cut.tail.end - cut.tail.begin, tail_top, slots, f);
  *flags = f;
}

/// Each bin's weight flags as a spread word (sharded_sum::spread_flags), for a collective that adds.
__global__ void spread_flags_kernel(const std::uint32_t* flags, std::int64_t num_bins, std::uint64_t* spread) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t bin = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; bin < num_bins;
       bin += stride) {
    spread[bin] = sharded_sum::spread_flags(flags[bin]);
  }
}

/// sums[bin - first] for the bins [first, first + count) from the added words; *out_of_range = 1
/// when a bin met a weight beyond the fixed point on some rank.
__global__ void weighted_words_to_sums_kernel(const std::uint64_t* low, const std::uint64_t* high,
                                              const std::uint64_t* spread, std::int64_t first, std::int64_t count,
                                              double* sums, std::uint64_t* out_of_range) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const std::int64_t bin = first + i;
    const std::uint32_t flags = sharded_sum::gather_flags(spread[bin]);
    sums[bin] = fixed_point_weight::to_double(low[bin], high[bin], flags);
    if ((flags & fixed_point_weight::saw_out_of_range) != 0) *out_of_range = 1;
  }
}

int grid_for(std::int64_t items) {
  constexpr int threads = 256;
  return static_cast<int>(std::clamp<std::int64_t>((items + threads - 1) / threads, 1, 4096));
}

/// The float sum of a shard (deterministic_sum's body once the samples are float or double).
template <class F>
F deterministic_float_sum(comm_t comm, std::string_view function, std::span<const F> shard,
                          const reduce_options& options, const shard_layout& layout, stream_t stream) {
  namespace fp = tally::detail::fixed_point;
  constexpr int digits = fp::digits<F>;
  const sharded_sum::shard_cut cut =
      sharded_sum::cut_shard(static_cast<std::int64_t>(layout.offset), static_cast<std::int64_t>(shard.size()),
                             static_cast<std::int64_t>(layout.total), fp::chunk_size<F>);
  // slots, then the flags word and the two piece tops (one more int64).
  const std::size_t bytes = (digits + 2) * sizeof(std::int64_t);
  auto* slots = static_cast<std::int64_t*>(scratch_for(stream).sums.reserve(bytes, stream));
  auto* flags = reinterpret_cast<std::uint32_t*>(slots + digits);
  auto* tops = reinterpret_cast<std::uint32_t*>(slots + digits + 1);
  check_cuda(cudaMemsetAsync(slots, 0, bytes, stream), "cudaMemsetAsync");
  check_cuda(
      tally::detail::dispatch_deterministic_slots(shard.data() + cut.body_begin, cut.body_end - cut.body_begin, slots,
                                                  flags, {options.max_blocks, options.block_threads}, stream),
      function);
  piece_tops_kernel<F><<<1, 32, 0, stream>>>(shard.data(), cut, tops);
  check_cuda(cudaGetLastError(), function);
  std::uint32_t my_tops[2] = {};
  check_cuda(cudaMemcpyAsync(my_tops, tops, sizeof(my_tops), cudaMemcpyDeviceToHost, stream), function);
  wait(function, stream, comm);

  // Every rank's pieces: a chunk's grid comes from the largest top over all of its pieces.
  const std::uint64_t mine[4] = {static_cast<std::uint64_t>(cut.head.chunk), my_tops[0],
                                 static_cast<std::uint64_t>(cut.tail.chunk), my_tops[1]};
  const std::vector<std::uint64_t> pieces = all_gather_words(comm, function, mine, stream);
  const auto chunk_top = [&](std::int64_t chunk) {
    std::uint32_t top = 0;
    for (std::size_t i = 0; i + 1 < pieces.size(); i += 2) {
      if (static_cast<std::int64_t>(pieces[i]) == chunk) top = std::max(top, static_cast<std::uint32_t>(pieces[i + 1]));
    }
    return top;
  };
  add_pieces_kernel<F>
      <<<1, 32, 0, stream>>>(shard.data(), cut, chunk_top(cut.head.chunk), chunk_top(cut.tail.chunk), slots, flags);
  check_cuda(cudaGetLastError(), function);
  std::vector<std::uint64_t> words(digits + 2);
  check_cuda(cudaMemcpyAsync(words.data(), slots, (digits + 1) * sizeof(std::int64_t), cudaMemcpyDeviceToHost, stream),
             function);
  wait(function, stream, comm);
  words[digits] = sharded_sum::spread_flags(static_cast<std::uint32_t>(words[digits]));
  words.pop_back();

  // Every rank's slots and flags, added as integers (modulo 2^64: the total is in range), rounded once.
  const std::vector<std::uint64_t> all = all_gather_words(comm, function, words, stream);
  std::vector<std::int64_t> total(digits, 0);
  std::uint64_t spread = 0;
  for (std::size_t at = 0; at < all.size(); at += digits + 1) {
    for (int j = 0; j < digits; ++j) {
      total[j] = static_cast<std::int64_t>(static_cast<std::uint64_t>(total[j]) + all[at + j]);
    }
    spread += all[at + digits];
  }
  return fp::round_slots<F>(total.data(), sharded_sum::gather_flags(spread));
}

}  // namespace

void require_nccl(std::string_view) {}

void wait(std::string_view function, stream_t stream, comm_t comm) {
  check_cuda(cudaStreamSynchronize(stream), std::string(function) + " (waiting for the collective)");
  // An aborted communicator's kernels end and the wait returns: what they left is not a result.
  if (comm != nullptr) check_not_aborted(comm, function);
}

std::vector<std::uint64_t> all_gather_words(comm_t comm, std::string_view function, std::span<const std::uint64_t> mine,
                                            stream_t stream) {
  if (comm == nullptr) throw_invalid_argument(function, "comm", "is null; pass an initialized ncclComm_t");
  int ranks = 0;
  check_nccl(ncclCommCount(comm, &ranks), comm, function, "ncclCommCount");
  const std::size_t n = mine.size();
  auto* words = static_cast<std::uint64_t*>(
      scratch_for(stream).gathered.reserve((static_cast<std::size_t>(ranks) + 1) * n * sizeof(std::uint64_t), stream));
  std::vector<std::uint64_t> all(static_cast<std::size_t>(ranks) * n);
  check_cuda(cudaMemcpyAsync(words, mine.data(), n * sizeof(std::uint64_t), cudaMemcpyHostToDevice, stream), function);
  check_nccl(ncclAllGather(words, words + n, n, ncclUint64, comm, stream), comm, function, "ncclAllGather");
  check_cuda(cudaMemcpyAsync(all.data(), words + n, all.size() * sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream),
             function);
  wait(function, stream, comm);
  return all;
}

namespace {
constexpr int words_per_rank = call_signature::size + 1;

/// The communicator's rank and size, once it is known to belong to the current device.
shard_layout rank_of(comm_t comm, std::string_view function) {
  if (comm == nullptr) throw_invalid_argument(function, "comm", "is null; pass an initialized ncclComm_t");
  check_not_aborted(comm, function);
  int comm_device = 0;
  int device = 0;
  check_nccl(ncclCommCuDevice(comm, &comm_device), comm, function, "ncclCommCuDevice");
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  if (comm_device != device) {
    throw_invalid_argument(function, "comm",
                           "belongs to CUDA device " + std::to_string(comm_device) + " but the current device is " +
                               std::to_string(device) + "; call cudaSetDevice(" + std::to_string(comm_device) +
                               ") first (the samples and counts must be on the communicator's device)");
  }
  shard_layout layout;
  check_nccl(ncclCommUserRank(comm, &layout.rank), comm, function, "ncclCommUserRank");
  check_nccl(ncclCommCount(comm, &layout.ranks), comm, function, "ncclCommCount");
  if (layout.ranks > 65535) {  // the flags' 16-bit fields (sharded_sum::spread_flags) count ranks
    throw_invalid_argument(function, "comm", "has " + std::to_string(layout.ranks) + " ranks; at most 65535");
  }
  return layout;
}
}  // namespace

void begin_agreement(comm_t comm, std::string_view function, const call_signature& signature, std::uint64_t shard_size,
                     stream_t stream) {
  const shard_layout layout = rank_of(comm, function);
  scratch& own = scratch_for(stream);
  const stream_t side = own.side_stream();
  // A call that threw between its halves left copies into the pinned words pending: let them land.
  check_cuda(cudaStreamSynchronize(side), function);
  const std::size_t words_back = static_cast<std::size_t>(layout.ranks) * words_per_rank;
  // Pinned words: the copies are truly asynchronous, and the wait wakes as soon as they land.
  std::uint64_t* host = own.pinned_for(words_per_rank + words_back);
  std::copy(signature.words.begin(), signature.words.end(), host);
  host[call_signature::size] = shard_size;
  auto* words =
      static_cast<std::uint64_t*>(own.agreement.reserve((words_per_rank + words_back) * sizeof(std::uint64_t), side));
  check_cuda(cudaMemcpyAsync(words, host, words_per_rank * sizeof(std::uint64_t), cudaMemcpyHostToDevice, side),
             function);
  check_nccl(ncclAllGather(words, words + words_per_rank, words_per_rank, ncclUint64, comm, side), comm, function,
             "ncclAllGather");
  check_cuda(cudaMemcpyAsync(host + words_per_rank, words + words_per_rank, words_back * sizeof(std::uint64_t),
                             cudaMemcpyDeviceToHost, side),
             function);
}

shard_layout end_agreement(comm_t comm, std::string_view function, const call_signature& signature, stream_t stream) {
  shard_layout layout = rank_of(comm, function);
  scratch& own = scratch_for(stream);
  // Waits for the all-gather alone: the caller's stream may still be counting.
  check_cuda(cudaStreamSynchronize(own.side_stream()), std::string(function) + " (waiting for the agreement)");
  const std::uint64_t* all = own.pinned + words_per_rank;
  for (int r = 0; r < layout.ranks; ++r) {
    for (int i = 0; i < call_signature::size; ++i) {
      if (all[static_cast<std::size_t>(r) * words_per_rank + i] != all[i]) {
        const char* name = signature.names[i] != nullptr ? signature.names[i] : "arguments";
        if (i == call_signature::refused_slot) {
          const int refusing = all[i] != 0 ? 0 : r;
          throw error(errc::invalid_argument, name,
                      std::string(function) + ": rank " + std::to_string(refusing) +
                          " refused its own arguments (its error says why), so no rank combines its counts");
        }
        throw_invalid_argument(
            function, name,
            "differs between ranks: rank " + std::to_string(r) +
                " was given another value, type or size than rank 0, or one its own checks refuse (a null "
                "pointer, weights not one a sample); every rank of the communicator must make the same call on "
                "its own shard");
      }
    }
    const std::uint64_t size = all[static_cast<std::size_t>(r) * words_per_rank + call_signature::size];
    if (r < layout.rank) layout.offset += size;
    layout.total += size;
  }
  return layout;
}

shard_layout agree(comm_t comm, std::string_view function, const call_signature& signature, std::uint64_t shard_size,
                   stream_t stream) {
  begin_agreement(comm, function, signature, shard_size, stream);
  return end_agreement(comm, function, signature, stream);
}

std::array<std::int64_t, 2> sum_bins(comm_t comm, std::string_view function, void* bins, std::int64_t num_bins,
                                     bin_type type, placement where, const shard_layout& layout, stream_t stream,
                                     std::uint64_t* word) {
  const ncclDataType_t nccl = nccl_type(type);
  const auto in_group = [&](ncclResult_t status, const char* what) { check_in_group(status, comm, function, what); };
  check_nccl(ncclGroupStart(), comm, function, "ncclGroupStart");
  if (word != nullptr) in_group(ncclAllReduce(word, word, 1, ncclUint64, ncclSum, comm, stream), "ncclAllReduce");
  if (where == placement::every_rank) {
    if (num_bins > 0) {
      in_group(ncclAllReduce(bins, bins, static_cast<std::size_t>(num_bins), nccl, ncclSum, comm, stream),
               "ncclAllReduce");
    }
  } else {
    // Slices of unequal size (the last may be short or empty): one reduce to each slice's owner,
    // grouped, which NCCL runs as one reduce-scatter.
    auto* base = static_cast<char*>(bins);
    for (int r = 0; r < layout.ranks; ++r) {
      const auto slice = scattered_slice(num_bins, r, layout.ranks);
      if (slice[1] == 0) continue;
      char* at = base + static_cast<std::size_t>(slice[0]) * bytes_of(type);
      in_group(ncclReduce(at, at, static_cast<std::size_t>(slice[1]), nccl, ncclSum, r, comm, stream), "ncclReduce");
    }
  }
  check_nccl(ncclGroupEnd(), comm, function, "ncclGroupEnd");
  if (where == placement::every_rank) return {0, num_bins};
  return scattered_slice(num_bins, layout.rank, layout.ranks);
}

template <class T>
accumulator_t<T> deterministic_sum(comm_t comm, std::string_view function, std::span<const T> shard,
                                   const reduce_options& options, const shard_layout& layout, stream_t stream) {
  if (options.algorithm != strategy::automatic && options.algorithm != strategy::block_reduce_atomic) {
    throw error(errc::not_supported, "deterministic",
                std::string(function) +
                    ": a deterministic sum over ranks runs block_reduce_atomic's pass on each "
                    "shard; ask for automatic or block_reduce_atomic, not '" +
                    std::string(to_string(options.algorithm)) + "'");
  }
  tally::detail::check_launch_options(function, options);  // the same options on every rank: all refuse alike
  if (layout.total > max_deterministic_samples) {
    throw_invalid_argument(
        function, "samples",
        "holds " + std::to_string(layout.total) + " samples over all ranks; a deterministic sum takes at most 2^38");
  }
  if constexpr (is_half_float_v<T>) {
    // float's sum of the values widened exactly, as one GPU's deterministic sum of them.
    const std::size_t widened_bytes = std::max<std::size_t>(shard.size() * sizeof(float), 1);
    auto* widened = static_cast<float*>(scratch_for(stream).widened.reserve(widened_bytes, stream));
    check_cuda(
        tally::detail::dispatch_widen_to_float(shard.data(), static_cast<std::int64_t>(shard.size()), widened, stream),
        function);
    return deterministic_float_sum<float>(comm, function, std::span<const float>(widened, shard.size()), options,
                                          layout, stream);
  } else {
    return deterministic_float_sum<T>(comm, function, shard, options, layout, stream);
  }
}

TALLY_NCCL_INSTANTIATE_SUMS(TALLY_NCCL_DETERMINISTIC_SUM)

bool combine_fixed_point_sums(comm_t comm, std::string_view function, gpu::workspace& ws, std::span<double> sums,
                              placement where, const shard_layout& layout, stream_t stream) {
  const auto num_bins = static_cast<std::int64_t>(sums.size());
  // The one-GPU call left its bins' words at the start of the workspace's storage (fixed_point_bins:
  // low words, high words, then a uint32 of flags a bin); reserve hands the same storage back.
  const std::size_t word_bytes =
      static_cast<std::size_t>(num_bins) * (2 * sizeof(std::uint64_t) + sizeof(std::uint32_t));
  auto* low = static_cast<std::uint64_t*>(ws.reserve(word_bytes, stream));
  std::uint64_t* high = low + num_bins;
  const auto* flags = reinterpret_cast<const std::uint32_t*>(low + 2 * num_bins);
  auto* spread = static_cast<std::uint64_t*>(
      scratch_for(stream).sums.reserve((static_cast<std::size_t>(num_bins) + 1) * sizeof(std::uint64_t), stream));
  std::uint64_t* out_of_range = spread + num_bins;
  check_cuda(cudaMemsetAsync(out_of_range, 0, sizeof(std::uint64_t), stream), function);
  spread_flags_kernel<<<grid_for(num_bins), 256, 0, stream>>>(flags, num_bins, spread);
  check_cuda(cudaGetLastError(), function);

  std::array<std::int64_t, 2> slice{0, num_bins};
  const auto in_group = [&](ncclResult_t status, const char* what) { check_in_group(status, comm, function, what); };
  check_nccl(ncclGroupStart(), comm, function, "ncclGroupStart");
  if (where == placement::every_rank) {
    in_group(ncclAllReduce(low, low, 2 * static_cast<std::size_t>(num_bins), ncclUint64, ncclSum, comm, stream),
             "ncclAllReduce");
    in_group(ncclAllReduce(spread, spread, static_cast<std::size_t>(num_bins), ncclUint64, ncclSum, comm, stream),
             "ncclAllReduce");
  } else {
    for (int r = 0; r < layout.ranks; ++r) {
      const auto part = scattered_slice(num_bins, r, layout.ranks);
      if (part[1] == 0) continue;
      const auto count = static_cast<std::size_t>(part[1]);
      for (std::uint64_t* words : {low, high, spread}) {
        in_group(ncclReduce(words + part[0], words + part[0], count, ncclUint64, ncclSum, r, comm, stream),
                 "ncclReduce");
      }
    }
    slice = scattered_slice(num_bins, layout.rank, layout.ranks);
  }
  check_nccl(ncclGroupEnd(), comm, function, "ncclGroupEnd");
  if (slice[1] > 0) {
    weighted_words_to_sums_kernel<<<grid_for(slice[1]), 256, 0, stream>>>(low, high, spread, slice[0], slice[1],
                                                                          sums.data(), out_of_range);
    check_cuda(cudaGetLastError(), function);
  }
  std::uint64_t flag = 0;
  check_cuda(cudaMemcpyAsync(&flag, out_of_range, sizeof(flag), cudaMemcpyDeviceToHost, stream), function);
  wait(function, stream, comm);
  // Every rank reports, so that all of them throw or none does.
  std::uint64_t any = 0;
  for (std::uint64_t part : all_gather_words(comm, function, std::span(&flag, 1), stream)) any |= part;
  return any != 0;
}

}  // namespace detail
}  // namespace tally::nccl
