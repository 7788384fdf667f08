// One data set spread over several GPUs, counted through NCCL: each rank counts its shard with the
// one-GPU path (tally/gpu.hpp), then a collective over the caller's communicator combines the
// results. Host-safe: no NCCL or CUDA header needed. Link tally::nccl (built where NCCL is found).
//
// Every function here is collective: each rank of `comm` calls it, with its own shard of the
// input (rank r holds the r-th piece, in order; shards may differ in size, or be empty) and the
// same bins, types and options. The ranks compare what they were given in one small all-gather
// (histograms count their shard meanwhile): a mismatch throws errc::invalid_argument on every
// rank, naming the argument, before anything is combined. The calls wait for `stream` and return;
// device spans are on the rank's current device. docs/multi_gpu.md says more.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#include "tally/bins.hpp"
#include "tally/error.hpp"
#include "tally/gpu.hpp"
#include "tally/reduce.hpp"
#include "tally/strategy.hpp"

struct ncclComm;  // NCCL's communicator: tally::nccl::comm_t is ncclComm_t

namespace tally::nccl {

/** @brief An NCCL communicator (`ncclComm_t`), created and owned by the caller. */
using comm_t = ncclComm*;
using gpu::stream_t;

/** @brief Whether this build of tally has the NCCL layer (false: every call throws errc::not_supported). */
bool built_with_nccl() noexcept;

/** @brief Where the combined counts (or sums) of a histogram land. */
enum class placement : std::uint8_t {
  every_rank,  ///< all-reduce: every rank's `counts` holds every bin's total
  scattered,   ///< reduce-scatter: rank r's `counts` holds the totals of its slice of the bins (see
               ///< `histogram_result::first_bin`), for counts too large to replicate; the rest of
               ///< its `counts` is left holding partial counts, scratch for the caller
};

/** @brief What a rank gets back from a collective histogram. */
struct histogram_result {
  choice chose;                ///< the strategy this rank ran on its shard
  std::uint64_t left_out = 0;  ///< samples left out over all ranks (NaN, infinities, out of range)
  std::int64_t first_bin = 0;  ///< the bins whose totals this rank holds: [first_bin, first_bin + num_bins)
  std::int64_t num_bins = 0;
};

/** @brief The slice of `num_bins` bins that rank `rank` of `ranks` holds with placement::scattered. */
constexpr std::array<std::int64_t, 2> scattered_slice(std::int64_t num_bins, int rank, int ranks) {
  const std::int64_t per_rank = (num_bins + ranks - 1) / ranks;
  const std::int64_t first = per_rank * rank < num_bins ? per_rank * rank : num_bins;
  const std::int64_t last = first + per_rank < num_bins ? first + per_rank : num_bins;
  return {first, last - first};
}

namespace detail {
/// cudaSetDevice(device), as tally::error on failure.
void make_current(int device);
}  // namespace detail

/**
 * @brief The communicators of one process that drives several GPUs: rank r on `devices[r]`, made
 * with ncclCommInitAll and destroyed with the team. `run` gives each rank a host thread: tally's
 * calls wait for their collectives, so one thread cannot drive two ranks. For one process per GPU,
 * make the communicator with ncclCommInitRank and call the functions below directly.
 */
class local_team {
 public:
  explicit local_team(std::span<const int> devices);
  local_team(const local_team&) = delete;
  local_team& operator=(const local_team&) = delete;
  ~local_team();

  int size() const noexcept { return static_cast<int>(comms_.size()); }
  comm_t comm(int rank) const { return comms_.at(static_cast<std::size_t>(rank)); }
  int device(int rank) const { return devices_.at(static_cast<std::size_t>(rank)); }

  /**
   * @brief Runs body(rank) on a thread per rank, the rank's device current, and waits for all.
   * Rethrows the first exception a rank threw. A rank that fails alone leaves the others waiting
   * in their next collective: if some are still running `grace` after the first failure, the team
   * aborts its communicators (ncclCommAbort ends their NCCL kernels; the layer then refuses the
   * aborted communicators, so those ranks throw errc::communication_error rather than return what
   * the ended kernels left), and cannot be used again.
   */
  template <class Body>
  void run(Body&& body, std::chrono::milliseconds grace = std::chrono::milliseconds(2000)) {
    if (aborted_) throw error(errc::communication_error, "team", "tally::nccl::local_team: aborted after a failure");
    std::mutex mutex;
    std::condition_variable changed;
    int finished = 0;
    std::exception_ptr first;
    std::chrono::steady_clock::time_point failed_at{};
    std::vector<std::thread> threads;
    for (int r = 0; r < size(); ++r) {
      threads.emplace_back([&, r] {
        std::exception_ptr failure;
        try {
          detail::make_current(device(r));
          body(r);
        } catch (...) {
          failure = std::current_exception();
        }
        const std::lock_guard lock(mutex);
        if (failure && !first) {
          first = failure;
          failed_at = std::chrono::steady_clock::now();
        }
        ++finished;
        changed.notify_all();
      });
    }
    {
      std::unique_lock lock(mutex);
      while (finished < size()) {
        changed.wait_for(lock, std::chrono::milliseconds(50));
        if (first && finished < size() && !aborted_ && std::chrono::steady_clock::now() - failed_at > grace) {
          abort();
        }
      }
    }
    for (std::thread& t : threads) t.join();
    if (first) std::rethrow_exception(first);
  }

 private:
  void abort() noexcept;
  std::vector<comm_t> comms_;
  std::vector<int> devices_;
  bool aborted_ = false;
};

namespace detail {

/// What the ranks must agree on, as words compared by the all-gather before anything is combined;
/// `names` say which argument each word comes from, for the error. Besides the arguments that
/// must be equal, words hold what a rank's own checks would refuse (a null pointer, weights not
/// as many as the samples), so that a rank that would refuse its arguments differs from the
/// others and every rank refuses, where that rank alone would leave the others waiting.
struct call_signature {
  enum slot : int {
    operation_slot,   ///< the operation (and reduce's op, the predicate's comparison)
    samples_slot,     ///< the sample type, and whether the samples' pointer is usable
    counts_slot,      ///< the counter or sum type, and the number of counters or sums
    bins_slot,        ///< num_bins, the number of edges, or bincount's length
    lower_slot,       ///< the lower edge's bits, the edges' digest, or the predicate's value
    upper_slot,       ///< the upper edge's bits
    arithmetic_slot,  ///< even bins' edge arithmetic
    options_slot,     ///< last edge, deterministic, strategy
    launch_slot,      ///< max_blocks and block_threads
    where_slot,       ///< the placement of the combined bins
    weights_slot,     ///< the weight type, and whether there is a weight per sample
    refused_slot,     ///< 1 where this rank's own call refused its arguments (its error says why)
    size
  };
  std::array<std::uint64_t, size> words{};
  std::array<const char*, size> names{};
  void set(slot i, const char* name, std::uint64_t word) {
    words[i] = word;
    names[i] = name;
  }
};

/// A type as a word: its kind (1 unsigned, 2 signed, 3 IEEE float, 4 bfloat16) and its size.
template <class T>
constexpr std::uint64_t type_code() {
  const std::uint64_t kind = std::is_same_v<T, bfloat16> ? 4
                             : is_floating_sample_v<T>   ? 3
                             : std::is_signed_v<T>       ? 2
                                                         : 1;
  return kind << 8 | sizeof(T);
}

/// The name of a histogram's output in errors: counts, or a weighted histogram's sums.
template <class Counter>
constexpr const char* counts_name() {
  return std::is_same_v<Counter, double> ? "sums" : "counts";
}

/// Whether a span's pointer can be read: not null unless empty (the one-GPU call refuses a null one).
template <class T>
constexpr std::uint64_t usable(std::span<T> values) {
  return values.empty() || values.data() != nullptr ? 1 : 0;
}

/// The kinds of bins of a histogram call, in its operation word.
enum class bin_kind : std::uint8_t { even, range, bincount };

/// The words every histogram call sets: the operation, samples, counts (type and number), options.
template <class Sample, class Counter>
call_signature histogram_signature(operation op, bin_kind kind, std::span<const Sample> samples,
                                   std::span<Counter> counts, const histogram_options& options) {
  call_signature signature;
  signature.set(call_signature::operation_slot, "operation",
                static_cast<std::uint64_t>(op) | static_cast<std::uint64_t>(kind) << 8);
  signature.set(call_signature::samples_slot, "samples", type_code<Sample>() | usable(samples) << 32);
  signature.set(call_signature::counts_slot, counts_name<Counter>(),
                type_code<Counter>() | usable(counts) << 32 | static_cast<std::uint64_t>(counts.size()) << 33);
  signature.set(call_signature::options_slot, "options",
                static_cast<std::uint64_t>(options.last_edge) | static_cast<std::uint64_t>(options.deterministic) << 8 |
                    static_cast<std::uint64_t>(options.algorithm) << 16);
  return signature;
}

/// The words of even bins: their number, both edges' bits, and the edge arithmetic.
inline void set_even_bins(call_signature& signature, const even_bins& bins) {
  signature.set(call_signature::bins_slot, "bins", static_cast<std::uint64_t>(bins.num_bins));
  signature.set(call_signature::lower_slot, "bins", std::bit_cast<std::uint64_t>(bins.lower));
  signature.set(call_signature::upper_slot, "bins", std::bit_cast<std::uint64_t>(bins.upper));
  signature.set(call_signature::arithmetic_slot, "bins", static_cast<std::uint64_t>(bins.arithmetic));
}

/// The launch words of reduce, count_if and find_first_if.
inline std::uint64_t launch_word(const reduce_options& options) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(options.max_blocks)) |
         static_cast<std::uint64_t>(static_cast<std::uint32_t>(options.block_threads)) << 32;
}

/// Where this rank's shard lies in the whole input, from the sizes all ranks gave.
struct shard_layout {
  int rank = 0;
  int ranks = 1;
  std::uint64_t offset = 0;  ///< index of this shard's first sample in the whole input
  std::uint64_t total = 0;   ///< samples over all ranks
};

/// The all-gather that checks `signature` across the ranks and places the shards. Throws
/// errc::invalid_argument on every rank, naming the first argument that differs.
shard_layout agree(comm_t comm, std::string_view function, const call_signature& signature, std::uint64_t shard_size,
                   stream_t stream);
/// agree in two halves, so that the shard is counted while the signatures travel: the first
/// enqueues the all-gather (on a stream of the layer's own, beside `stream`); the second waits for
/// that all-gather alone and checks, while `stream` may still be counting.
void begin_agreement(comm_t comm, std::string_view function, const call_signature& signature, std::uint64_t shard_size,
                     stream_t stream);
shard_layout end_agreement(comm_t comm, std::string_view function, const call_signature& signature, stream_t stream);

/// Every rank's `mine` (the same number of words on each), rank after rank; waits for `stream`.
std::vector<std::uint64_t> all_gather_words(comm_t comm, std::string_view function, std::span<const std::uint64_t> mine,
                                            stream_t stream);

/// The element types of bins combined by NCCL.
enum class bin_type : std::uint8_t { uint32, uint64, float64 };

template <class T>
constexpr bin_type bin_type_of() {
  if constexpr (std::is_same_v<T, std::uint32_t>)
    return bin_type::uint32;
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    return bin_type::uint64;
  else
    return bin_type::float64;
}

/// Adds every rank's `bins` (device memory, in place), to every rank or to each rank's slice, and
/// every rank's `*word` (a device uint64, if given) to every rank, in one group of collectives;
/// ordered on `stream`, not waited for. Returns the slice this rank holds.
std::array<std::int64_t, 2> sum_bins(comm_t comm, std::string_view function, void* bins, std::int64_t num_bins,
                                     bin_type type, placement where, const shard_layout& layout, stream_t stream,
                                     std::uint64_t* word = nullptr);

/// Waits for `stream`, naming `function` if the collective or a kernel failed, and refuses a
/// communicator a local_team aborted meanwhile.
void wait(std::string_view function, stream_t stream, comm_t comm);

/// Throws errc::communication_error if a local_team aborted `comm` (after another rank failed).
void check_not_aborted(comm_t comm, std::string_view function);

/// The deterministic float sum of a sharded input (fixed_point_sum.hpp, sharded_sum.hpp): the
/// bits of one call over the whole input, whatever the number of ranks and the sharding.
template <class T>
accumulator_t<T> deterministic_sum(comm_t comm, std::string_view function, std::span<const T> shard,
                                   const reduce_options& options, const shard_layout& layout, stream_t stream);

/// The sample types deterministic_sum is compiled for, as an X-macro shared by src/nccl.cu and the
/// stubs of src/no_nccl.cpp, so both provide the same symbols.
#define TALLY_NCCL_INSTANTIATE_SUMS(X) X(float) X(double) X(tally::float16) X(tally::bfloat16)
#define TALLY_NCCL_DETERMINISTIC_SUM(T)                                                                               \
  template accumulator_t<T> deterministic_sum<T>(comm_t, std::string_view, std::span<const T>, const reduce_options&, \
                                                 const shard_layout&, stream_t);

/// After a deterministic weighted histogram on `ws`: adds every rank's fixed-point words and
/// rounds them into `sums` (this rank's slice with placement::scattered). Returns whether a bin
/// met a weight beyond the fixed-point range on any rank.
bool combine_fixed_point_sums(comm_t comm, std::string_view function, gpu::workspace& ws, std::span<double> sums,
                              placement where, const shard_layout& layout, stream_t stream);

/// Throws errc::not_supported naming `function` when the build has no NCCL layer.
void require_nccl(std::string_view function);

/// The shared shape of the histogram calls: agree, count the shard, add the bins and left-out counts.
/// A check of the shards before counting that finds nothing to refuse.
struct no_check {
  void operator()(const shard_layout&) const {}
};

/// The signature of count_if and find_first_if (`op`): the predicate, the sample type, the options.
template <class T>
call_signature predicate_signature(operation op, std::span<const T> samples, compare_to<T> predicate,
                                   const reduce_options& options) {
  call_signature signature;
  std::uint64_t value = 0;
  std::memcpy(&value, &predicate.value, sizeof(T));
  signature.set(call_signature::operation_slot, "predicate",
                static_cast<std::uint64_t>(op) | static_cast<std::uint64_t>(predicate.op) << 8);
  signature.set(call_signature::samples_slot, "samples", type_code<T>() | usable(samples) << 32);
  signature.set(call_signature::lower_slot, "predicate", value);
  signature.set(call_signature::options_slot, "options", static_cast<std::uint64_t>(options.algorithm));
  signature.set(call_signature::launch_slot, "options", launch_word(options));
  return signature;
}

/// The first index in the whole input among the ranks' first matches (`local_index`, the shard's
/// size when the rank found none): each rank offers its match offset by its start, or the whole
/// input's size; the least offer wins.
inline std::uint64_t first_in_whole_input(comm_t comm, std::string_view function, std::int64_t local_index,
                                          std::size_t shard_size, const shard_layout& layout, stream_t stream) {
  const std::uint64_t mine = static_cast<std::uint64_t>(local_index) < shard_size
                                 ? layout.offset + static_cast<std::uint64_t>(local_index)
                                 : layout.total;
  std::uint64_t first = layout.total;
  for (std::uint64_t offer : all_gather_words(comm, function, std::span(&mine, 1), stream))
    first = std::min(first, offer);
  return first;
}

/// bincount's check of signed samples: the first negative one in the whole input, found by each
/// rank in its shard and gathered, refused on every rank alike.
template <class Sample>
void refuse_negative_samples(comm_t comm, std::string_view function, std::span<const Sample> samples,
                             const shard_layout& layout, stream_t stream) {
  const find_result local = gpu::find_first_if(samples, compare_to<Sample>{comparison::less, Sample{0}}, {}, stream);
  const std::uint64_t first = first_in_whole_input(comm, function, local.index, samples.size(), layout, stream);
  if (first < layout.total) {
    throw_invalid_argument(function, "samples",
                           "holds a negative sample at index " + std::to_string(first) +
                               " of the whole input (over all ranks); bincount counts non-negative integers");
  }
}

template <class Counter, class CountShard, class CheckShards = no_check>
histogram_result collective_histogram(comm_t comm, std::string_view function, call_signature signature,
                                      std::uint64_t shard_size, std::span<Counter> counts, placement where,
                                      stream_t stream, CountShard count_shard, CheckShards check_shards = {}) {
  require_nccl(function);
  signature.set(call_signature::where_slot, "where", static_cast<std::uint64_t>(where));
  gpu::workspace& ws = gpu::detail::waiting_workspace(stream);
  histogram_result result;
  shard_layout layout;
  if constexpr (std::is_same_v<CheckShards, no_check>) {
    // The shard's count is enqueued first and the signatures travel while it runs; the counts are
    // added only once they agree. A rank whose own call refuses (its arguments, its memory) still
    // takes part in the agreement, saying so, so that every rank stops there rather than wait.
    std::exception_ptr refused;
    try {
      result.chose = count_shard(ws);
    } catch (...) {
      refused = std::current_exception();
      signature.set(call_signature::refused_slot, "arguments", 1);
    }
    begin_agreement(comm, function, signature, shard_size, stream);
    try {
      layout = end_agreement(comm, function, signature, stream);
    } catch (...) {
      if (refused) std::rethrow_exception(refused);  // the refusing rank reports its own reason
      throw;
    }
    if (refused) std::rethrow_exception(refused);  // every rank refused alike
  } else {
    layout = agree(comm, function, signature, shard_size, stream);
    check_shards(layout);
    result.chose = count_shard(ws);
  }
  // The left-out counts are added with the bins, in the same group, into the word each rank's
  // count left in ws.scalar(); read once both are done.
  const auto slice = sum_bins(comm, function, counts.data(), static_cast<std::int64_t>(counts.size()),
                              bin_type_of<Counter>(), where, layout, stream, ws.scalar());
  result.left_out = ws.read_scalar(stream);
  result.first_bin = slice[0];
  result.num_bins = slice[1];
  return result;
}

}  // namespace detail

/**
 * @brief Even-bin histogram of a sharded input: each rank counts its shard, then the counts are
 * added (placement::every_rank: on every rank; scattered: each rank its slice). The counts equal
 * one GPU's over the whole input; the left-out count is the whole input's.
 */
template <class Sample, class Counter>
histogram_result histogram_even(comm_t comm, std::span<const Sample> samples, std::span<Counter> counts,
                                const even_bins& bins, const histogram_options& options = {},
                                placement where = placement::every_rank, stream_t stream = nullptr) {
  constexpr std::string_view function = "tally::nccl::histogram_even";
  detail::call_signature signature =
      detail::histogram_signature(operation::histogram, detail::bin_kind::even, samples, counts, options);
  detail::set_even_bins(signature, bins);
  return gpu::detail::naming_failures(function, [&] {
    return detail::collective_histogram(
        comm, function, signature, samples.size(), counts, where, stream,
        [&](gpu::workspace& ws) { return gpu::histogram_even_async(samples, counts, bins, ws, options, stream); });
  });
}

/**
 * @brief Weighted even-bin histogram of a sharded input (a weight per sample, sharded as the
 * samples). With `deterministic`, every rank's fixed-point words are added before the one
 * rounding: the sums' bits equal one GPU's over the whole input, for any number of ranks and any
 * sharding; throws naming `weights` (after the sums are written) when a weight was beyond range.
 * Without it, the ranks' double sums are added by NCCL (bits may change with the rank count).
 */
template <class Sample, class Weight, class Sum>
histogram_result histogram_even(comm_t comm, std::span<const Sample> samples, std::span<const Weight> weights,
                                std::span<Sum> sums, const even_bins& bins, const histogram_options& options = {},
                                placement where = placement::every_rank, stream_t stream = nullptr) {
  static_assert(std::is_same_v<Sum, double>, "weighted sums: double");
  constexpr std::string_view function = "tally::nccl::histogram_even";
  using slot = detail::call_signature;
  detail::call_signature signature =
      detail::histogram_signature(operation::weighted_histogram, detail::bin_kind::even, samples, sums, options);
  detail::set_even_bins(signature, bins);
  signature.set(slot::where_slot, "where", static_cast<std::uint64_t>(where));
  // A weight per sample, checked by each rank, compared by all.
  signature.set(slot::weights_slot, "weights",
                detail::type_code<Weight>() | detail::usable(weights) << 32 |
                    static_cast<std::uint64_t>(weights.size() == samples.size()) << 33);
  return gpu::detail::naming_failures(function, [&]() -> histogram_result {
    detail::require_nccl(function);
    const detail::shard_layout layout = detail::agree(comm, function, signature, samples.size(), stream);
    if (options.deterministic && layout.total >= (std::uint64_t{1} << 32)) {
      throw_invalid_argument(function, "samples",
                             "holds " + std::to_string(layout.total) +
                                 " samples over all ranks; a deterministic weighted histogram takes fewer than 2^32");
    }
    gpu::workspace& ws = gpu::detail::waiting_workspace(stream);
    histogram_result result;
    result.chose = gpu::histogram_even_async(samples, weights, sums, bins, ws, options, stream);
    const std::uint64_t left_out = ws.read_scalar(stream);
    bool out_of_range = false;
    if (options.deterministic) {
      out_of_range = detail::combine_fixed_point_sums(comm, function, ws, sums, where, layout, stream);
      const auto slice = scattered_slice(bins.num_bins, layout.rank, where == placement::every_rank ? 1 : layout.ranks);
      result.first_bin = where == placement::every_rank ? 0 : slice[0];
      result.num_bins = where == placement::every_rank ? bins.num_bins : slice[1];
    } else {
      const auto slice = detail::sum_bins(comm, function, sums.data(), bins.num_bins, detail::bin_type::float64, where,
                                          layout, stream);
      result.first_bin = slice[0];
      result.num_bins = slice[1];
    }
    for (std::uint64_t part : detail::all_gather_words(comm, function, std::span(&left_out, 1), stream)) {
      result.left_out += part;
    }
    if (out_of_range) {
      throw_invalid_argument(function, "weights",
                             "holds a weight with |w| >= 2^31 on some rank, beyond the deterministic sums' "
                             "fixed point; the bins it fell in hold NaN");
    }
    return result;
  });
}

/** @brief Histogram of a sharded input over sorted host `edges` (the same on every rank). */
template <class Sample, class Counter>
histogram_result histogram_range(comm_t comm, std::span<const Sample> samples, std::span<Counter> counts,
                                 std::span<const double> edges, const histogram_options& options = {},
                                 placement where = placement::every_rank, stream_t stream = nullptr) {
  constexpr std::string_view function = "tally::nccl::histogram_range";
  // The edges' digest: their count, and their bits folded (FNV-1a over the words).
  std::uint64_t digest = 0xcbf29ce484222325ull;
  for (double edge : edges) digest = (digest ^ std::bit_cast<std::uint64_t>(edge)) * 0x100000001b3ull;
  using slot = detail::call_signature;
  detail::call_signature signature =
      detail::histogram_signature(operation::histogram, detail::bin_kind::range, samples, counts, options);
  signature.set(slot::bins_slot, "edges", edges.size());
  signature.set(slot::lower_slot, "edges", digest);
  return gpu::detail::naming_failures(function, [&] {
    return detail::collective_histogram(
        comm, function, signature, samples.size(), counts, where, stream,
        [&](gpu::workspace& ws) { return gpu::histogram_range_async(samples, counts, edges, ws, options, stream); });
  });
}

/**
 * @brief bincount of a sharded input into counts.size() bins (the same on every rank); samples
 * at or past it are left out and counted. Signed samples are first searched for a negative one,
 * on every rank: if any rank holds one, every rank throws errc::invalid_argument naming `samples`
 * and the index of the first in the whole input, before anything is counted.
 */
template <class Sample, class Counter>
histogram_result bincount(comm_t comm, std::span<const Sample> samples, std::span<Counter> counts,
                          const histogram_options& options = {}, placement where = placement::every_rank,
                          stream_t stream = nullptr) {
  constexpr std::string_view function = "tally::nccl::bincount";
  // bincount's length is the counts' size, in the counts word.
  const detail::call_signature signature =
      detail::histogram_signature(operation::histogram, detail::bin_kind::bincount, samples, counts, options);
  return gpu::detail::naming_failures(function, [&] {
    return detail::collective_histogram(
        comm, function, signature, samples.size(), counts, where, stream,
        [&](gpu::workspace& ws) { return gpu::bincount_async(samples, counts, ws, options, stream); },
        [&](const detail::shard_layout& layout) {
          if constexpr (std::is_signed_v<Sample>) {
            detail::refuse_negative_samples(comm, function, samples, layout, stream);
          }
        });
  });
}

/**
 * @brief Sum, min or max of a sharded input, the same on every rank. min and max follow reduce's
 * NaN rule; integer sums are exact; float sums add the ranks' results in rank order (every rank gets
 * the same bits, which may change with the sharding), and with `deterministic` have the bits of one
 * GPU's deterministic sum over the whole input, for any number of ranks and any sharding.
 */
template <class T>
reduce_result<T> reduce(comm_t comm, std::span<const T> samples, reduce_op op, const reduce_options& options = {},
                        stream_t stream = nullptr) {
  constexpr std::string_view function = "tally::nccl::reduce";
  static_assert(is_reduce_sample_v<T>, "reduce samples: the types of is_reduce_sample_v (tally/reduce.hpp)");
  using A = accumulator_t<T>;
  using slot = detail::call_signature;
  detail::call_signature signature;
  signature.set(slot::operation_slot, "op",
                static_cast<std::uint64_t>(operation::reduce) | static_cast<std::uint64_t>(op) << 8);
  signature.set(slot::samples_slot, "samples", detail::type_code<T>() | detail::usable(samples) << 32);
  signature.set(slot::options_slot, "options",
                static_cast<std::uint64_t>(options.deterministic) << 8 | static_cast<std::uint64_t>(options.algorithm)
                                                                             << 16);
  signature.set(slot::launch_slot, "options", detail::launch_word(options));
  return gpu::detail::naming_failures(function, [&]() -> reduce_result<T> {
    detail::require_nccl(function);
    const detail::shard_layout layout = detail::agree(comm, function, signature, samples.size(), stream);
    reduce_result<T> result;
    if constexpr (is_floating_sample_v<T>) {
      if (options.deterministic && op == reduce_op::sum) {
        result.value = detail::deterministic_sum(comm, function, samples, options, layout, stream);
        result.chose = {strategy::block_reduce_atomic,
                        "deterministic sum over ranks: each rank's fixed-point slots (pieces of chunks that span "
                        "ranks summed on their whole chunk's grid), added, rounded once"};
        return result;
      }
    }
    const reduce_result<T> mine = gpu::reduce(samples, op, options, stream);
    std::uint64_t word = 0;
    std::memcpy(&word, &mine.value, sizeof(A));
    A total = tally::detail::reduce_identity<T>(op);
    for (std::uint64_t part : detail::all_gather_words(comm, function, std::span(&word, 1), stream)) {
      A value;
      std::memcpy(&value, &part, sizeof(A));
      total = tally::detail::reduce_combine<T>(op, total, value);
    }
    return {total, mine.chose};
  });
}

/** @brief How many samples of a sharded input satisfy `predicate`, the same on every rank. */
template <class T>
count_result count_if(comm_t comm, std::span<const T> samples, compare_to<T> predicate,
                      const reduce_options& options = {}, stream_t stream = nullptr) {
  constexpr std::string_view function = "tally::nccl::count_if";
  const detail::call_signature signature =
      detail::predicate_signature(operation::count_if, samples, predicate, options);
  return gpu::detail::naming_failures(function, [&]() -> count_result {
    detail::require_nccl(function);
    detail::agree(comm, function, signature, samples.size(), stream);
    count_result result = gpu::count_if(samples, predicate, options, stream);
    const std::uint64_t mine = result.count;
    result.count = 0;
    for (std::uint64_t part : detail::all_gather_words(comm, function, std::span(&mine, 1), stream))
      result.count += part;
    return result;
  });
}

/**
 * @brief The first index, in the whole input, whose sample satisfies `predicate` (the whole
 * input's size when none does), the same on every rank.
 */
template <class T>
find_result find_first_if(comm_t comm, std::span<const T> samples, compare_to<T> predicate,
                          const reduce_options& options = {}, stream_t stream = nullptr) {
  constexpr std::string_view function = "tally::nccl::find_first_if";
  const detail::call_signature signature =
      detail::predicate_signature(operation::find_first_if, samples, predicate, options);
  return gpu::detail::naming_failures(function, [&]() -> find_result {
    detail::require_nccl(function);
    const detail::shard_layout layout = detail::agree(comm, function, signature, samples.size(), stream);
    find_result result = gpu::find_first_if(samples, predicate, options, stream);
    const std::uint64_t first =
        detail::first_in_whole_input(comm, function, result.index, samples.size(), layout, stream);
    result.index = static_cast<std::int64_t>(first);
    return result;
  });
}

}  // namespace tally::nccl
