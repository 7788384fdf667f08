// Strategies are values with names: one per way of resolving conflicting updates, shared by the
// CPU and GPU backends where the idea is the same, plus `automatic`, which picks one and says why.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace tally {

/** @brief Where a call runs. */
enum class backend : std::uint8_t { cpu, gpu };

/**
 * @brief How a histogram, count or reduction resolves conflicting updates. One idea has one name
 * across operations and backends: `atomic` is one atomic update per sample into the shared result
 * (std::atomic_ref on the CPU, a device-scope atomic on the GPU), `two_phase` writes per-block
 * results out and merges them in a second kernel, with no atomics between blocks. The names these
 * had before (global_atomic, atomic_per_element, shared_two_phase, two_pass) still parse. Every
 * strategy is exact: the naive racy histogram, wrong by design, is the lab's (`tally race`).
 */
enum class strategy : std::uint8_t {
  automatic,  ///< chosen per call from the sizes, the type and the input; the result says which

  // Both backends.
  atomic,  ///< one atomic update per sample into the one result (std::atomic_ref; device scope on the GPU)

  // CPU backend: OpenMP's ways (critical, atomic, reduction clause, private copies).
  sequential,  ///< one thread, no synchronization: the reference every result is checked against
  critical,    ///< `#pragma omp critical` around each update: one lock for everything
  privatized,  ///< a private copy per thread, merged at the end
  reduction,   ///< the OpenMP `reduction` clause

  // GPU backend.
  global_privatized,  ///< a block-scope histogram per block in global memory, then a merge kernel
  shared_atomic,      ///< a histogram per block in shared memory, one device atomic per non-zero bin
  two_phase,          ///< per-block results (histograms in shared memory, partial sums) written out, merged by a second kernel; no atomics between blocks
  warp_aggregated,    ///< shared_atomic, with equal bins in a lane or a whole warp added as one
  replicated,         ///< interleaved copies per block, so lanes that hit one bin hit different words
  packed16,           ///< 16-bit shared counters, two per word, spilling 2^12 at a time to global before they overflow
  block_reduce_atomic,  ///< a block reduction, then one atomic per block (reductions, counts)
  cub,                ///< NVIDIA CUB behind the same API: the baseline
  atomic_per_thread,   ///< reductions, counts: each thread folds its share, then one atomic per thread
  partitioned,  ///< histograms of many bins: samples grouped by ranges of 2^15 bins, then each range counted in shared memory
  radix_sort,   ///< histograms: bin indices radix-sorted, then run lengths; no atomics, deterministic (CUB)
};

/** @brief What a call computes; strategies are supported per operation. */
enum class operation : std::uint8_t { histogram, weighted_histogram, reduce, count_if, find_first_if };

namespace detail {
struct strategy_name {
  strategy value;
  std::string_view name;
};
inline constexpr std::array<strategy_name, 17> strategy_names{{
    {strategy::automatic, "automatic"},
    {strategy::atomic, "atomic"},
    {strategy::sequential, "sequential"},
    {strategy::critical, "critical"},
    {strategy::privatized, "privatized"},
    {strategy::reduction, "reduction"},
    {strategy::global_privatized, "global_privatized"},
    {strategy::shared_atomic, "shared_atomic"},
    {strategy::two_phase, "two_phase"},
    {strategy::warp_aggregated, "warp_aggregated"},
    {strategy::replicated, "replicated"},
    {strategy::packed16, "packed16"},
    {strategy::block_reduce_atomic, "block_reduce_atomic"},
    {strategy::cub, "cub"},
    {strategy::atomic_per_thread, "atomic_per_thread"},
    {strategy::partitioned, "partitioned"},
    {strategy::radix_sort, "radix_sort"},
}};
static_assert(strategy_names.size() == static_cast<std::size_t>(strategy::radix_sort) + 1,
              "every strategy has a name: add new ones to strategy_names (and keep radix_sort last or update this)");
/// Names a strategy had before one idea got one name; parse_strategy still takes them.
inline constexpr std::array<strategy_name, 4> former_strategy_names{{
    {strategy::atomic, "global_atomic"},
    {strategy::atomic, "atomic_per_element"},
    {strategy::two_phase, "shared_two_phase"},
    {strategy::two_phase, "two_pass"},
}};

inline constexpr std::array cpu_strategies{strategy::sequential, strategy::critical, strategy::atomic,
                                           strategy::privatized, strategy::reduction};
inline constexpr std::array gpu_histogram_strategies{
    strategy::atomic,          strategy::global_privatized, strategy::shared_atomic, strategy::two_phase,
    strategy::warp_aggregated, strategy::replicated,        strategy::packed16,      strategy::partitioned,
    strategy::radix_sort,      strategy::cub};
/// Weighted histograms: per-thread sums merged in thread order (CPU); one atomic per sample, a
/// shared-memory copy per block, or a warp's weights of one bin summed with shuffles first (GPU).
inline constexpr std::array cpu_weighted_strategies{strategy::sequential, strategy::privatized};
inline constexpr std::array gpu_weighted_strategies{strategy::atomic, strategy::shared_atomic,
                                                    strategy::warp_aggregated};
/// reduce and count_if: the ladder from one atomic per sample to none at all, then CUB.
inline constexpr std::array gpu_reduce_strategies{strategy::atomic, strategy::atomic_per_thread,
                                                  strategy::block_reduce_atomic, strategy::two_phase, strategy::cub};
inline constexpr std::array gpu_count_strategies = gpu_reduce_strategies;
/// find_first_if: the early-exit search (atomic min on the index), and CUB's full pass (a min over
/// the indices of matching samples; CCCL 13 has no DeviceFind).
inline constexpr std::array gpu_find_strategies{strategy::atomic, strategy::cub};
}  // namespace detail

/** @brief The name of a strategy, as the CLI and the reports spell it. */
constexpr std::string_view to_string(strategy s) {
  for (const auto& entry : detail::strategy_names) {
    if (entry.value == s) return entry.name;
  }
  return "unknown";
}

/** @brief The name of a backend. */
constexpr std::string_view to_string(backend b) { return b == backend::cpu ? "cpu" : "gpu"; }

/** @brief The strategy with that name (or a name it had before), if there is one. */
constexpr std::optional<strategy> parse_strategy(std::string_view name) {
  for (const auto& entry : detail::strategy_names) {
    if (entry.name == name) return entry.value;
  }
  for (const auto& entry : detail::former_strategy_names) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

/** @brief The named strategies (automatic excluded) a backend implements for an operation. */
constexpr std::span<const strategy> strategies_for(backend b, operation op) {
  if (b == backend::cpu) {
    if (op == operation::weighted_histogram) return detail::cpu_weighted_strategies;
    return detail::cpu_strategies;
  }
  switch (op) {
    case operation::histogram: return detail::gpu_histogram_strategies;
    case operation::weighted_histogram: return detail::gpu_weighted_strategies;
    case operation::reduce: return detail::gpu_reduce_strategies;
    case operation::count_if: return detail::gpu_count_strategies;
    case operation::find_first_if: return detail::gpu_find_strategies;
  }
  return {};
}

/** @brief Whether `s` (or automatic) may be asked of backend `b` for operation `op`. */
constexpr bool supports(backend b, operation op, strategy s) {
  if (s == strategy::automatic) return true;
  for (strategy candidate : strategies_for(b, op)) {
    if (candidate == s) return true;
  }
  return false;
}

/** @brief What a call did: the strategy it ran (what `automatic` chose) and why. */
struct choice {
  strategy used = strategy::automatic;
  std::string_view reason;  ///< a static string: "asked for", or automatic's reasoning
};

}  // namespace tally
