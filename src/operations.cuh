// The owning layer of the GPU backend: validates arguments (the same checks as the CPU backend),
// asks the dispatch layer (the only code that launches kernels) for temporary storage, reserves it
// in the workspace and runs. Included by one instantiation file per sample type (instantiate_*.cu).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "instantiation_list.hpp"
#include "tally/detail/cub_bins.hpp"
#include "tally/detail/cuda_check.hpp"
#include "tally/detail/dispatch/histogram_dispatch.cuh"
#include "tally/detail/dispatch/reduce_dispatch.cuh"
#include "tally/detail/dispatch/weighted_histogram_dispatch.cuh"
#include "tally/detail/range_grid.hpp"
#include "tally/detail/validate.hpp"
#include "tally/detail/workspace_slots.hpp"
#include "tally/gpu.hpp"

namespace tally::gpu::detail {

using tally::detail::device_properties;

inline constexpr std::string_view function_name_weighted = "tally::gpu::histogram_even";

/// CUB's atomics know `unsigned long long`, not `std::uint64_t` (`unsigned long` on Linux).
template <class Counter>
using cub_counter_t = std::conditional_t<sizeof(Counter) == 8, unsigned long long, unsigned int>;

template <class Counter>
cub_counter_t<Counter>* as_cub_counters(std::span<Counter> counts) {
  return reinterpret_cast<cub_counter_t<Counter>*>(counts.data());
}

inline device_properties current_properties() {
  device_properties props;
  check_cuda(tally::detail::current_device_properties(props), "querying the device");
  return props;
}

[[noreturn]] inline void throw_unsupported(std::string_view function, strategy s, std::string_view why) {
  throw error(errc::not_supported, "strategy",
              std::string(function) + ": strategy '" + std::string(to_string(s)) + "' " + std::string(why));
}

/**
 * Refuses, before anything runs, a call whose temporary storage cannot fit the device: more than
 * the free memory plus what the workspace already holds (and would give back to grow). The error
 * names `samples`, the size that the storage grows with, and says what the strategy needed.
 * Storage the workspace holds already, or under 1 MiB, skips the query (microseconds of host time).
 */
inline void check_temporary_storage_fits(std::string_view function, strategy s, std::size_t bytes, const workspace& ws,
                                         std::int64_t num_samples, std::int64_t num_bins) {
  if (bytes <= ws.reserved_bytes() || bytes < (std::size_t{1} << 20)) return;
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  if (bytes <= free_bytes + ws.reserved_bytes()) return;
  throw error(errc::out_of_memory, "samples",
              std::string(function) + ": argument 'samples' (" + std::to_string(num_samples) + " samples over " +
                  std::to_string(num_bins) + " bins) needs " + std::to_string(bytes) +
                  " bytes of temporary device memory with strategy '" + std::string(to_string(s)) + "', more than the " +
                  std::to_string(free_bytes + ws.reserved_bytes()) + " bytes free on the device");
}

/// Where what follows `bytes` of a call's own at the start of the workspace storage begins: whole
/// 256-byte units, as cudaMalloc aligns.
inline std::size_t storage_offset(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

/// Range bins' edges at the start of the storage (whole 16-byte vectors), where the tables'
/// filling and CUB's HistogramRange read them.
inline std::size_t edges_storage_bytes(std::span<const double> edges) { return (edges.size_bytes() + 15) / 16 * 16; }
inline void copy_edges_to_storage(std::span<const double> edges, char* storage, stream_t stream) {
  check_cuda(cudaMemcpyAsync(storage, edges.data(), edges.size_bytes(), cudaMemcpyHostToDevice, stream),
             "copying the edges to the device");
}

/**
 * Runs a histogram with any mapper. `cub_histogram` (cub_even_histogram or cub_range_histogram,
 * made only when the cub strategy is chosen) is CUB's version; `prepare(storage)` is called with
 * the reserved storage before any launch, or with nullptr for sizing, and returns the mapper to
 * use (range bins copy their edges to the start of the storage); `extra_bytes` is what prepare
 * needs there.
 */
template <class Sample, class Counter, class Prepare, class MakeCubHistogram>
choice run_histogram(std::string_view function, std::span<const Sample> samples, std::span<Counter> counts,
                     std::int64_t num_bins, workspace& ws, const histogram_options& options, stream_t stream,
                     std::size_t extra_bytes, Prepare prepare, MakeCubHistogram make_cub_histogram) {
  const device_properties props = current_properties();
  const auto n = static_cast<std::int64_t>(samples.size());
  const auto sizing_map = prepare(nullptr);
  tally::detail::histogram_policy policy;
  check_cuda(tally::detail::make_histogram_policy<Sample, Counter>(options.algorithm, sizing_map, n, props, policy),
             std::string(function) + " (sizing)");
  if (policy.unfit != nullptr) {
    throw_unsupported(function, policy.chosen.used, std::string(policy.unfit) + " (" + std::to_string(num_bins) + " bins)");
  }
  std::uint64_t* left_out = ws.scalar();
  const std::size_t offset = storage_offset(extra_bytes);

  if (policy.chosen.used == strategy::cub) {
    if (options.last_edge == upper_edge::inclusive) {
      throw_unsupported(function, strategy::cub, "counts half-open bins only; upper_edge::inclusive is not available");
    }
    const auto cub_histogram = make_cub_histogram();
    std::size_t bytes = 0;
    check_cuda_clearing_last_error(tally::detail::dispatch_cub_histogram(nullptr, bytes, cub_histogram, counts.data(),
                                                                         num_bins, nullptr, left_out, props, stream),
                                   "cub histogram (sizing)");
    check_temporary_storage_fits(function, strategy::cub, offset + bytes, ws, n, num_bins);
    auto* storage = static_cast<char*>(ws.reserve(offset + bytes, stream));
    (void)prepare(storage);
    check_cuda_clearing_last_error(
        tally::detail::dispatch_cub_histogram(storage + offset, bytes, cub_histogram, counts.data(), num_bins,
                                              reinterpret_cast<const double*>(storage), left_out, props, stream),
        "cub histogram");
    return policy.chosen;
  }

  check_temporary_storage_fits(function, policy.chosen.used, offset + policy.temp_bytes, ws, n, num_bins);
  auto* storage = static_cast<char*>(ws.reserve(offset + policy.temp_bytes, stream));
  const auto map = prepare(storage);
  check_cuda(tally::detail::dispatch_histogram(storage + offset, policy, samples.data(), n, counts.data(), map,
                                               left_out, props, stream),
             function);
  return policy.chosen;
}

/// The levels CUB gets: for integer samples, whole numbers in the sample type (int for uint8 and
/// uint16, whose upper edges 256 and 65536 do not fit), so CUB uses its exact integer arithmetic, as fast as it
/// goes; for floating samples, the sample type.
template <class Sample>
using cub_level_t = std::conditional_t<sizeof(Sample) <= 2, int, Sample>;

template <class Sample>
std::pair<cub_level_t<Sample>, cub_level_t<Sample>> cub_levels(std::string_view function, const even_bins& bins) {
  using Level = cub_level_t<Sample>;
  if constexpr (std::is_integral_v<Sample>) {
    const bool whole = std::floor(bins.lower) == bins.lower && std::floor(bins.upper) == bins.upper;
    const bool fits = bins.lower >= static_cast<double>(std::numeric_limits<Level>::lowest()) &&
                      bins.upper <= static_cast<double>(std::numeric_limits<Level>::max());
    if (!whole || !fits) {
      throw_unsupported(function, strategy::cub,
                        "needs lower and upper to be whole numbers in the sample type's range for integer samples");
    }
  }
  return {static_cast<Level>(bins.lower), static_cast<Level>(bins.upper)};
}

/// CUB's HistogramEven over `num_bins` bins from `lower` to `upper`, for dispatch_cub_histogram.
template <class Sample, class Counter, class Level>
auto cub_even_histogram_for(std::span<const Sample> samples, std::span<Counter> counts, std::int64_t num_bins,
                            Level lower, Level upper) {
  return tally::detail::cub_even_histogram<Sample, Level, cub_counter_t<Counter>>{
      samples.data(), as_cub_counters(counts), static_cast<int>(num_bins + 1), lower, upper,
      static_cast<std::int64_t>(samples.size())};
}

inline void check_cub_bins(std::string_view function, std::int64_t num_bins) {
  if (num_bins >= std::numeric_limits<int>::max()) {
    throw_unsupported(function, strategy::cub, "takes at most 2^31 - 2 bins");
  }
}

/// CUB's HistogramEven over `bins`, made only when the cub strategy runs. CUB bins with arithmetic
/// of its own: it runs only where that gives numpy's bins, else refuses.
template <class Sample, class Counter>
auto cub_even_bins(std::string_view function, std::span<const Sample> samples, std::span<Counter> counts,
                   const even_bins& bins, upper_edge last_edge) {
  check_cub_bins(function, bins.num_bins);
  if (const char* why = tally::detail::cub_even_bins_unfit<Sample>(bins, last_edge)) {
    throw_unsupported(function, strategy::cub, std::string("would count other bins than numpy's here: ") + why);
  }
  const auto [lower, upper] = cub_levels<Sample>(function, bins);
  return cub_even_histogram_for(samples, counts, bins.num_bins, lower, upper);
}

/// CUB's HistogramEven as a bincount: unit levels from 0, one bin a count.
template <class Sample, class Counter>
auto cub_bincount(std::string_view function, std::span<const Sample> samples, std::span<Counter> counts) {
  const auto num_bins = static_cast<std::int64_t>(counts.size());
  check_cub_bins(function, num_bins);
  const auto [lower, upper] = cub_levels<Sample>(function, even_bins{num_bins, 0.0, static_cast<double>(num_bins)});
  return cub_even_histogram_for(samples, counts, num_bins, lower, upper);
}

/// CUB's HistogramRange over `num_edges` edges (which the launch finds at the start of the storage).
template <class Sample, class Counter>
auto cub_range_bins(std::string_view function, std::span<const Sample> samples, std::span<Counter> counts,
                    std::int64_t num_edges) {
  check_cub_bins(function, num_edges - 1);
  return tally::detail::cub_range_histogram<Sample, cub_counter_t<Counter>>{
      samples.data(), as_cub_counters(counts), static_cast<int>(num_edges), static_cast<std::int64_t>(samples.size())};
}

/// Runs a histogram through the range-bin grid (grid_range_bin_mapper) with entries `Entries`: the
/// host plans the grid from `host_edge_at` (edge i as a double), and the device fills its tables,
/// after `edges_to_copy` (range bins' edges; empty for even bins) at the start of the workspace
/// storage, where CUB's HistogramRange reads them, from the edges `device_edge_at(storage)` gives.
template <tally::detail::grid_entries Entries, class Sample, class Counter, class HostEdgeAt, class DeviceEdgeAt,
          class MakeCubHistogram>
choice run_grid_histogram_with(std::string_view function, std::span<const Sample> samples, std::span<Counter> counts,
                               std::int64_t num_edges, HostEdgeAt host_edge_at, std::span<const double> edges_to_copy,
                               DeviceEdgeAt device_edge_at, workspace& ws, const histogram_options& options,
                               stream_t stream, MakeCubHistogram make_cub_histogram) {
  using grid_mapper = tally::detail::grid_range_bin_mapper<Sample, Entries>;
  const std::size_t edges_bytes = edges_storage_bytes(edges_to_copy);
  const std::size_t tables_bytes = grid_mapper::table_bytes(num_edges);
  auto prepare = [&](char* storage) {
    if (storage == nullptr) return grid_mapper::for_sizing(num_edges);
    auto* tables = reinterpret_cast<std::byte*>(storage + edges_bytes);
    const grid_mapper map = grid_mapper::plan(host_edge_at, num_edges, options.last_edge).reading_tables_at(tables);
    if (!edges_to_copy.empty()) copy_edges_to_storage(edges_to_copy, storage, stream);
    check_cuda(tally::detail::dispatch_grid_tables(map, device_edge_at(storage), tables, stream),
               "filling the edge tables on the device");
    return map;
  };
  return run_histogram(function, samples, counts, num_edges - 1, ws, options, stream, edges_bytes + tables_bytes,
                       prepare, make_cub_histogram);
}

/// run_grid_histogram_with entries of counts where two blocks a multiprocessor hold them in shared
/// memory (4096 bins), else entries of thresholds: read from global memory, entries of counts ran
/// float32 range bins slower (65536 log-spaced bins, uniform samples, 0.218 -> 0.101 on an H200;
/// docs/performance.md, "Range bins: entries of counts").
template <class Sample, class Counter, class HostEdgeAt, class DeviceEdgeAt, class MakeCubHistogram>
choice run_grid_histogram(std::string_view function, std::span<const Sample> samples, std::span<Counter> counts,
                          std::int64_t num_edges, HostEdgeAt host_edge_at, std::span<const double> edges_to_copy,
                          DeviceEdgeAt device_edge_at, workspace& ws, const histogram_options& options,
                          stream_t stream, MakeCubHistogram make_cub_histogram) {
  using tally::detail::grid_entries;
  if (tally::detail::grid_range_bin_mapper<Sample, grid_entries::counts>::counts_fit_block(num_edges - 1)) {
    return run_grid_histogram_with<grid_entries::counts>(function, samples, counts, num_edges, host_edge_at,
                                                         edges_to_copy, device_edge_at, ws, options, stream,
                                                         make_cub_histogram);
  }
  return run_grid_histogram_with<grid_entries::thresholds>(function, samples, counts, num_edges, host_edge_at,
                                                           edges_to_copy, device_edge_at, ws, options, stream,
                                                           make_cub_histogram);
}

/// Counts float32 samples in even bins whose range holds few floats (float_table_mapper) through
/// a table of each float's bin in `window`, filled on the device by `map`, the bins' own mapper.
template <class Counter, class MakeCubHistogram>
choice run_float_table(std::string_view function, std::span<const float> samples, std::span<Counter> counts,
                       const even_bin_mapper<float>& map, tally::detail::value_window window, workspace& ws,
                       const histogram_options& options, stream_t stream, MakeCubHistogram make_cub_histogram) {
  using table_mapper = tally::detail::float_table_mapper;
  auto prepare = [&](char* storage) {
    const table_mapper table(window, map.num_bins(), reinterpret_cast<const std::byte*>(storage));
    if (storage != nullptr && options.algorithm != strategy::cub) {
      check_cuda(tally::detail::dispatch_float_table(table, map, reinterpret_cast<std::byte*>(storage), stream),
                 "filling the float table on the device");
    }
    return table;
  };
  choice chose = run_histogram(function, samples, counts, map.num_bins(), ws, options, stream,
                               table_mapper::table_bytes(window.span), prepare, make_cub_histogram);
  if (options.algorithm == strategy::automatic && chose.used == strategy::shared_atomic) {
    chose.reason = "a range that holds few floats (far from zero for its width): each float's bin looked up in a "
                   "table filled once a call, in shared memory where it fits, and counted in shared memory";
  }
  return chose;
}

/// Counts 32- and 64-bit integer samples in bins whose edges span few integers
/// (integer_table_mapper, `window`) through a table of each integer's bin, filled on the device
/// by the bins' own mapper, `fill_map(storage)`, after `edges_to_copy` (range bins' edges, which
/// that mapper and CUB's HistogramRange read) at the start of the storage.
template <class Sample, class Counter, class FillMap, class MakeCubHistogram>
choice run_integer_table(std::string_view function, std::span<const Sample> samples, std::span<Counter> counts,
                         std::int64_t num_bins, std::pair<std::int64_t, std::uint32_t> window,
                         std::span<const double> edges_to_copy, FillMap fill_map, workspace& ws,
                         const histogram_options& options, stream_t stream, MakeCubHistogram make_cub_histogram) {
  using table_mapper = tally::detail::integer_table_mapper<Sample>;
  const std::size_t edges_bytes = edges_storage_bytes(edges_to_copy);
  auto prepare = [&](char* storage) {
    const auto* table = reinterpret_cast<const std::byte*>(storage == nullptr ? nullptr : storage + edges_bytes);
    const table_mapper map(window.first, window.second, num_bins, table);
    if (storage != nullptr) {
      if (!edges_to_copy.empty()) copy_edges_to_storage(edges_to_copy, storage, stream);
      if (options.algorithm != strategy::cub) {
        check_cuda(tally::detail::dispatch_integer_table(map, fill_map(storage), const_cast<std::byte*>(table), stream),
                   "filling the integer table on the device");
      }
    }
    return map;
  };
  choice chose = run_histogram(function, samples, counts, num_bins, ws, options, stream,
                               edges_bytes + table_mapper::table_bytes(window.second), prepare, make_cub_histogram);
  if (options.algorithm == strategy::automatic && chose.used == strategy::shared_atomic) {
    chose.reason = "edges that span few integers: each integer's bin looked up in a table filled once a call, in "
                   "shared memory where it fits, and counted in shared memory";
  }
  return chose;
}

}  // namespace tally::gpu::detail

#include "small_samples.cuh"

namespace tally::gpu::detail {

template <class Sample, class Counter>
choice histogram_even_async(std::span<const Sample> samples, std::span<Counter> counts, const even_bins& bins,
                            workspace& ws, const histogram_options& options, stream_t stream) {
  constexpr std::string_view function = "tally::gpu::histogram_even";
  tally::detail::check_even_bins(function, bins);
  tally::detail::check_histogram_buffers(function, samples, counts, bins.num_bins);
  tally::detail::check_strategy(function, backend::gpu, operation::histogram, options.algorithm);
  if constexpr (is_small_sample_v<Sample>) {
    return small_histogram_even(function, samples, counts, bins, ws, options, stream);
  } else {
    const even_bin_mapper<Sample> map(bins, options.last_edge);
    auto make_cub_histogram = [&] { return cub_even_bins(function, samples, counts, bins, options.last_edge); };
    // Exact shortcuts run as their own small mappers: fewer registers, so fuller multiprocessors.
    const auto run_with = [&](auto mapper) {
      return run_histogram(function, samples, counts, bins.num_bins, ws, options, stream, 0,
                           [mapper](char*) { return mapper; }, make_cub_histogram);
    };
    if constexpr (std::is_same_v<Sample, std::uint8_t>) {
      if (tally::detail::edges_follow_float64_rule(bins) &&
          tally::detail::byte_shift_mapper::covers_every_byte(bins.lower, bins.upper, bins.num_bins)) {
        return run_with(tally::detail::byte_shift_mapper(static_cast<int>(-bins.lower), bins.num_bins));
      }
    }
    if constexpr (std::is_same_v<Sample, float>) {
      // A table of each float's bin where it takes no more bytes than the grid's entries would.
      const auto window = map.shortcut() == even_shortcut::none ? tally::detail::float_table_mapper::window_for(map)
                                                                 : std::nullopt;
      if (window && tally::detail::float_table_mapper::table_bytes(window->span) <=
                        tally::detail::grid_range_bin_mapper<float>::table_bytes(bins.num_bins + 1)) {
        return run_float_table(function, samples, counts, map, *window, ws, options, stream, make_cub_histogram);
      }
    }
    if (tally::detail::even_bins_take_grid(map)) {
      if constexpr (std::is_integral_v<Sample> && sizeof(Sample) >= 4) {
        // Few integers between the edges: a table of each one's bin, mapped by the bins' own rule.
        if (const auto window = tally::detail::integer_table_mapper<Sample>::window_for(
                static_cast<double>(map.edge(0)), static_cast<double>(map.edge(bins.num_bins)), bins.num_bins)) {
          return run_integer_table(function, samples, counts, bins.num_bins, *window, std::span<const double>{},
                                   [&map](char*) { return map; }, ws, options, stream, make_cub_histogram);
        }
      }
      // numpy's edges, computed where they are needed: a few on the host to plan, all on the device.
      return run_grid_histogram(
          function, samples, counts, bins.num_bins + 1, [&map](std::int64_t i) { return static_cast<double>(map.edge(i)); },
          std::span<const double>{}, [&map](char*) { return tally::detail::computed_even_edges<Sample>{map}; }, ws,
          options, stream, make_cub_histogram);
    }
    return tally::detail::with_fastest_mapper(map, run_with);
  }
}

template <class Sample, class Counter>
choice histogram_range_async(std::span<const Sample> samples, std::span<Counter> counts,
                             std::span<const double> edges, workspace& ws, const histogram_options& options,
                             stream_t stream) {
  constexpr std::string_view function = "tally::gpu::histogram_range";
  tally::detail::check_range_edges(function, edges);
  const auto num_edges = static_cast<std::int64_t>(edges.size());
  tally::detail::check_histogram_buffers(function, samples, counts, num_edges - 1);
  tally::detail::check_strategy(function, backend::gpu, operation::histogram, options.algorithm);
  if constexpr (is_small_sample_v<Sample>) {
    return small_histogram_range(function, samples, counts, edges, ws, options, stream);
  } else {
    auto make_cub_histogram = [&] { return cub_range_bins(function, samples, counts, num_edges); };
    if constexpr (std::is_integral_v<Sample> && sizeof(Sample) >= 4) {
      // Few integers between the edges: a table of each one's bin, mapped by a search of the edges.
      if (const auto window =
              tally::detail::integer_table_mapper<Sample>::window_for(edges.front(), edges.back(), num_edges - 1)) {
        const upper_edge last_edge = options.last_edge;
        return run_integer_table(
            function, samples, counts, num_edges - 1, *window, edges,
            [num_edges, last_edge](char* storage) {
              return range_bin_mapper<Sample>(reinterpret_cast<const double*>(storage), num_edges, last_edge);
            },
            ws, options, stream, make_cub_histogram);
      }
    }
    return run_grid_histogram(
        function, samples, counts, num_edges, [edges](std::int64_t i) { return edges[static_cast<std::size_t>(i)]; },
        edges, [](char* storage) { return tally::detail::edges_in_memory{reinterpret_cast<const double*>(storage)}; },
        ws, options, stream, make_cub_histogram);
  }
}

template <class Sample, class Counter>
choice bincount_async(std::span<const Sample> samples, std::span<Counter> counts, workspace& ws,
                      const histogram_options& options, stream_t stream) {
  constexpr std::string_view function = "tally::gpu::bincount";
  const auto num_bins = static_cast<std::int64_t>(counts.size());
  if (num_bins == 0) {
    throw_invalid_argument(function, "counts", "must hold at least one bin (num_bins is counts.size(), 0)");
  }
  tally::detail::check_histogram_buffers(function, samples, counts, num_bins);
  tally::detail::check_strategy(function, backend::gpu, operation::histogram, options.algorithm);
  histogram_options half_open = options;
  half_open.last_edge = upper_edge::exclusive;  // bincount has no upper edge
  if constexpr (is_small_sample_v<Sample>) {
    return small_bincount(function, samples, counts, ws, half_open, stream);
  } else {
    const bincount_mapper<Sample> map(num_bins);
    auto make_cub_histogram = [&] { return cub_bincount(function, samples, counts); };
    if constexpr (std::is_same_v<Sample, std::uint8_t>) {
      if (num_bins >= 256) {
        const tally::detail::byte_shift_mapper bytes(0, num_bins);
        return run_histogram(function, samples, counts, num_bins, ws, half_open, stream, 0,
                             [bytes](char*) { return bytes; }, make_cub_histogram);
      }
    }
    return run_histogram(function, samples, counts, num_bins, ws, half_open, stream, 0, [&](char*) { return map; },
                         make_cub_histogram);
  }
}

/// Sizes the temporary storage with `dispatch(nullptr, bytes)`, reserves it in the workspace and
/// runs `dispatch(storage, bytes)`: CUB's contract, as the reduce dispatch follows it.
template <class Dispatch>
void run_with_storage(std::string_view function, workspace& ws, stream_t stream, Dispatch dispatch) {
  std::size_t bytes = 0;
  check_cuda(dispatch(nullptr, bytes), std::string(function) + " (sizing)");
  void* temp = ws.reserve(bytes, stream);
  check_cuda(dispatch(temp, bytes), function);
}

/// The weighted histogram: one mapper (even_bin_mapper applies its exact shortcuts itself), so
/// each sample type adds only a few kernels. ws.scalar()[0] gets the left-out count,
/// ws.scalar()[1] the out-of-range flag of `deterministic` (0 otherwise); word 2 holds the claims
/// of shared_atomic's warps (scalar_slot::weighted_steps_claimed).
template <class Sample, class Weight, class Sum>
choice histogram_even_weighted_async(std::span<const Sample> samples, std::span<const Weight> weights,
                                     std::span<Sum> sums, const even_bins& bins, workspace& ws,
                                     const histogram_options& options, stream_t stream) {
  constexpr std::string_view function = "tally::gpu::histogram_even";
  tally::detail::check_even_bins(function, bins);
  tally::detail::check_weighted_buffers(function, samples, weights, sums, bins.num_bins, options.deterministic);
  tally::detail::check_strategy(function, backend::gpu, operation::weighted_histogram, options.algorithm);
  const device_properties props = current_properties();
  const choice chose = tally::detail::choose_gpu_weighted(options.algorithm, bins.num_bins, options.deterministic, props);
  if (const char* why = tally::detail::weighted_strategy_unfit(chose.used, bins.num_bins, options.deterministic, props)) {
    throw_unsupported(function, chose.used, std::string(why) + " (" + std::to_string(bins.num_bins) + " bins)");
  }
  const even_bin_mapper<Sample> map(bins, options.last_edge);
  namespace slot = tally::detail::scalar_slot;
  static_assert(slot::result == 0 && slot::out_of_range == 1 && slot::weighted_steps_claimed == 2,
                "one memset zeroes the result, the flag and the claims");
  std::uint64_t* scalars = ws.scalar();
  check_cuda(cudaMemsetAsync(scalars, 0, 3 * sizeof(std::uint64_t), stream), "cudaMemsetAsync");
  const auto n = static_cast<std::int64_t>(samples.size());
  tally::detail::with_fastest_mapper(map, [&](const auto& fast) {
    run_with_storage(function, ws, stream, [&](void* temp, std::size_t& bytes) {
      return tally::detail::dispatch_weighted_histogram(temp, bytes, chose.used, options.deterministic, samples.data(),
                                                        weights.data(), n, sums.data(), map, fast,
                                                        scalars + slot::result, scalars + slot::out_of_range,
                                                        scalars + slot::weighted_steps_claimed, stream);
    });
  });
  return chose;
}

template <class Sample, class Weight, class Sum>
histogram_result histogram_even_weighted(std::span<const Sample> samples, std::span<const Weight> weights,
                                         std::span<Sum> sums, const even_bins& bins, const histogram_options& options,
                                         stream_t stream) {
  workspace& ws = waiting_workspace(stream);
  const choice chose = histogram_even_weighted_async(samples, weights, sums, bins, ws, options, stream);
  const std::uint64_t left_out = ws.read_scalar(stream);  // waits for the stream
  std::uint64_t out_of_range = 0;
  check_cuda(cudaMemcpy(&out_of_range, ws.scalar() + tally::detail::scalar_slot::out_of_range, sizeof(out_of_range),
                        cudaMemcpyDeviceToHost),
             "reading the out-of-range flag");
  if (out_of_range != 0) tally::detail::throw_weight_out_of_range(function_name_weighted);
  return {chose, left_out};
}

/// The workspace words with which block_reduce_atomic starts its result in the launch.
inline tally::detail::fold_start_words fold_start_words_of(workspace& ws) {
  std::uint64_t* scalars = ws.scalar();
  return {scalars + tally::detail::scalar_slot::fold_started, scalars + tally::detail::scalar_slot::fold_blocks_finished};
}

template <class T, class Predicate>
void find_first(std::string_view function, strategy s, std::span<const T> samples, Predicate predicate,
                workspace& ws, const reduce_options& options, stream_t stream) {
  const tally::detail::reduce_launch launch{options.max_blocks, options.block_threads};
  run_with_storage(function, ws, stream, [&](void* temp, std::size_t& bytes) {
    std::uint64_t* scalars = ws.scalar();
    const tally::detail::find_words words{scalars + tally::detail::scalar_slot::result,
                                          scalars + tally::detail::scalar_slot::search_minimum,
                                          scalars + tally::detail::scalar_slot::blocks_finished};
    return tally::detail::dispatch_find_first(temp, bytes, s, samples.data(), static_cast<std::int64_t>(samples.size()),
                                              predicate, words, launch, stream);
  });
}

template <class Sample>
void check_bincount_samples(std::span<const Sample> samples, workspace& ws, stream_t stream) {
  if constexpr (std::is_signed_v<Sample>) {
    constexpr std::string_view function = "tally::gpu::bincount";
    tally::detail::check_not_null(function, "samples", samples);
    find_first(function, strategy::atomic, samples, compare_to<Sample>{comparison::less, Sample{0}}, ws, {},
               stream);
    const std::uint64_t first = ws.read_scalar(stream);
    if (first < samples.size()) {
      Sample value{};
      check_cuda(cudaMemcpy(&value, samples.data() + first, sizeof(Sample), cudaMemcpyDeviceToHost),
                 "reading the negative sample");
      tally::detail::throw_negative_sample(function, first, static_cast<long long>(value));
    }
  }
}

/// What reduce, count_if and find_first_if check first: samples not null, a strategy the GPU has
/// for `op`, launch options in range.
template <class T>
void check_reduce_arguments(std::string_view function, operation op, std::span<const T> samples,
                            const reduce_options& options) {
  tally::detail::check_not_null(function, "samples", samples);
  tally::detail::check_strategy(function, backend::gpu, op, options.algorithm);
  tally::detail::check_launch_options(function, options);
}

template <class T>
void extremes_async(std::span<const T> samples, workspace& ws, stream_t stream) {
  constexpr std::string_view function = "tally::gpu::detail::extremes_async";
  tally::detail::check_not_null(function, "samples", samples);
  using V = tally::detail::extremes_value<accumulator_t<T>>;
  static_assert(sizeof(V) <= 2 * sizeof(std::uint64_t) && alignof(V) <= alignof(std::uint64_t));
  // Words 0 and 1 of the scalar block: the result and the weighted histograms' flag, which those
  // set at the start of every call; no word that keeps a value between calls.
  auto* result = reinterpret_cast<V*>(ws.scalar() + tally::detail::scalar_slot::result);
  static_assert(tally::detail::scalar_slot::out_of_range == tally::detail::scalar_slot::result + 1);
  run_with_storage(function, ws, stream, [&](void* temp, std::size_t& bytes) {
    return tally::detail::dispatch_two_phase_fold(temp, bytes, samples.data(), static_cast<std::int64_t>(samples.size()),
                                                  tally::detail::extremes_fold<T>{}, result,
                                                  tally::detail::reduce_launch{}, stream);
  });
}

template <class T>
choice reduce_into_async(std::span<const T> samples, reduce_op op, accumulator_t<T>* result, workspace& ws,
                         const reduce_options& options, stream_t stream) {
  constexpr std::string_view function = "tally::gpu::reduce";
  check_reduce_arguments(function, operation::reduce, samples, options);
  // Integer sums and min/max are exact in any order: `deterministic` changes nothing for them.
  const bool deterministic = is_floating_sample_v<T> && options.deterministic && op == reduce_op::sum;
  if (deterministic) {
    if (const char* why = tally::detail::deterministic_strategy_unfit(options.algorithm)) {
      throw error(errc::not_supported, "deterministic",
                  std::string(function) + ": option 'deterministic' is set, which strategy '" +
                      std::string(to_string(options.algorithm)) + "' cannot honour: it " + why);
    }
    if (samples.size() > max_deterministic_samples) {
      throw_invalid_argument(function, "samples",
                             "has " + std::to_string(samples.size()) +
                                 " samples; a deterministic sum takes at most 2^38 (set deterministic = false)");
    }
  }
  const choice chose = tally::detail::choose_gpu_reduce<T>(options.algorithm, op, deterministic);
  const auto n = static_cast<std::int64_t>(samples.size());
  const tally::detail::reduce_launch launch{options.max_blocks, options.block_threads};
  if constexpr (is_half_float_v<T>) {
    if (deterministic) {
      // float's deterministic sum over the values widened exactly into the storage first: the
      // same bits as the CPU backend's (which widens them too).
      const std::size_t widened_bytes = (samples.size() * sizeof(float) + 255) / 256 * 256;
      run_with_storage(function, ws, stream, [&](void* temp, std::size_t& bytes) {
        if (temp == nullptr) {
          const cudaError_t e = tally::detail::dispatch_deterministic_sum<float>(nullptr, bytes, chose.used, nullptr, n,
                                                                                 reinterpret_cast<float*>(result), launch, stream);
          bytes += widened_bytes;
          return e;
        }
        auto* widened = static_cast<float*>(temp);
        if (cudaError_t e = tally::detail::dispatch_widen_to_float(samples.data(), n, widened, stream); e != cudaSuccess) {
          return e;
        }
        std::size_t rest = bytes - widened_bytes;
        return tally::detail::dispatch_deterministic_sum<float>(static_cast<char*>(temp) + widened_bytes, rest, chose.used,
                                                                widened, n, reinterpret_cast<float*>(result), launch, stream);
      });
      return chose;
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (deterministic) {
      run_with_storage(function, ws, stream, [&](void* temp, std::size_t& bytes) {
        return tally::detail::dispatch_deterministic_sum(temp, bytes, chose.used, samples.data(), n, result, launch,
                                                         stream);
      });
      return chose;
    }
  }
  const auto run = [&](auto fold) {
    run_with_storage(function, ws, stream, [&](void* temp, std::size_t& bytes) {
      return tally::detail::dispatch_fold(temp, bytes, chose.used, samples.data(), n, fold, result,
                                          fold_start_words_of(ws), launch, stream);
    });
  };
  switch (op) {
    case reduce_op::sum: run(tally::detail::reduce_fold<T, reduce_op::sum>{}); break;
    case reduce_op::min: run(tally::detail::reduce_fold<T, reduce_op::min>{}); break;
    case reduce_op::max: run(tally::detail::reduce_fold<T, reduce_op::max>{}); break;
  }
  return chose;
}

template <class T>
  requires is_histogram_sample_v<T>
choice predicate_async(operation op, std::span<const T> samples, compare_to<T> predicate, workspace& ws,
                       const reduce_options& options, stream_t stream) {
  const std::string_view function = op == operation::count_if ? "tally::gpu::count_if" : "tally::gpu::find_first_if";
  check_reduce_arguments(function, op, samples, options);
  if (op == operation::find_first_if) {
    const choice chose = tally::detail::choose_gpu_find(options.algorithm);
    find_first(function, chose.used, samples, predicate, ws, options, stream);
    return chose;
  }
  const choice chose = tally::detail::choose_gpu_count(options.algorithm);
  const tally::detail::reduce_launch launch{options.max_blocks, options.block_threads};
  const tally::detail::count_fold<T, compare_to<T>> fold{predicate};
  run_with_storage(function, ws, stream, [&](void* temp, std::size_t& bytes) {
    return tally::detail::dispatch_fold(temp, bytes, chose.used, samples.data(),
                                        static_cast<std::int64_t>(samples.size()), fold, ws.scalar(),
                                        fold_start_words_of(ws), launch, stream);
  });
  return chose;
}

}  // namespace tally::gpu::detail
