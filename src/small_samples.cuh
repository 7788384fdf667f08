// Histograms and bincounts of 8- and 16-bit samples on the GPU (detail/value_tables.hpp): counted
// by their bits, through a window of unit-width bins, a table of each value's bin, or per value
// and then folded into the bins. Included by operations.cuh, whose checks run first.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "tally/detail/value_tables.hpp"

namespace tally::gpu::detail {

using tally::detail::small_values;
using tally::detail::value_window;

/// The samples as the bits they are counted by.
template <class Sample>
std::span<const tally::detail::sample_bits_t<Sample>> sample_bits(std::span<const Sample> samples) {
  return {reinterpret_cast<const tally::detail::sample_bits_t<Sample>*>(samples.data()), samples.size()};
}

/// What the cub strategy runs for small samples other than uint16: nothing (refused first).
struct no_cub_histogram {
  std::int64_t num_samples = 0;
  cudaError_t operator()(void*, std::size_t&, const double*, cudaStream_t) const { return cudaErrorNotSupported; }
};

/// CUB's DeviceHistogram is known to miscount these types (NVIDIA/cccl#10975, #10976, #10977,
/// #10940): the cub strategy refuses them rather than give other counts than numpy's. uint16 runs
/// up to 65536 bins: past that its range histogram miscounted uint16 samples in tally's tests
/// (H100, CCCL 3.0, 70000 random edges).
template <class Sample>
void refuse_cub_for_small(std::string_view function, const histogram_options& options, std::int64_t num_bins) {
  if (options.algorithm != strategy::cub) return;
  if constexpr (std::is_same_v<Sample, std::uint16_t>) {
    if (num_bins > 65536) {
      throw_unsupported(function, strategy::cub,
                        "takes at most 65536 bins of uint16 samples: past that CUB's DeviceHistogram miscounted them "
                        "in tally's tests (" + std::to_string(num_bins) + " bins)");
    }
  } else {
    throw_unsupported(function, strategy::cub,
                      "is not run for int8, int16, float16 or bfloat16 samples: CUB's DeviceHistogram drops negative "
                      "int8 samples, puts full-range int8 and int16 levels in one bin, miscounts bfloat16 even "
                      "bins and more than 32768 int16 or 2048 float16 bins (NVIDIA/cccl#10975, #10976, #10977, "
                      "#10940)");
  }
}

/// Counts the samples per value (by bits, with the strategy asked for: the count is a histogram of
/// 256 or 65536 unit bins), then folds the values' counts into `counts` by the mapper that
/// `prepare(storage)` returns (after `extra_bytes` of its own at the start of the storage).
template <class Sample, class Counter, class Prepare>
choice run_value_fold(std::string_view function, std::span<const Sample> samples, std::span<Counter> counts,
                      std::int64_t num_bins, workspace& ws, const histogram_options& options, stream_t stream,
                      std::size_t extra_bytes, Prepare prepare) {
  using Bits = tally::detail::sample_bits_t<Sample>;
  constexpr std::uint32_t values = small_values<Sample>::count;
  const auto bits = sample_bits(samples);
  const auto counting = [] {
    if constexpr (sizeof(Sample) == 1) {
      return tally::detail::byte_shift_mapper(0, values);
    } else {
      return tally::detail::value_window_mapper<>(0, values, 0, values);
    }
  }();
  const device_properties props = current_properties();
  const auto n = static_cast<std::int64_t>(samples.size());
  tally::detail::histogram_policy policy;
  check_cuda(tally::detail::make_histogram_policy<Bits, std::uint64_t>(options.algorithm, counting, n, props, policy),
             std::string(function) + " (sizing)");
  if (policy.unfit != nullptr) {
    throw_unsupported(function, policy.chosen.used,
                      std::string(policy.unfit) + " (these samples are counted per value, " + std::to_string(values) +
                          " of them, then folded into " + std::to_string(num_bins) + " bins)");
  }
  const std::size_t extra = storage_offset(extra_bytes);
  const std::size_t value_bytes = sizeof(std::uint64_t) * values;
  check_temporary_storage_fits(function, policy.chosen.used, extra + value_bytes + policy.temp_bytes, ws, n, num_bins);
  auto* storage = static_cast<char*>(ws.reserve(extra + value_bytes + policy.temp_bytes, stream));
  const auto map = prepare(storage);
  auto* value_counts = reinterpret_cast<std::uint64_t*>(storage + extra);
  // Counting per value leaves nothing out: the fold sets the left-out count, so the count needs
  // no memset of it (a launch fewer: int8 0.890-0.898 before, docs/performance.md).
  check_cuda(tally::detail::dispatch_histogram(storage + extra + value_bytes, policy, bits.data(), n, value_counts,
                                               counting, ws.scalar(), props, stream, /*zero_left_out=*/false),
             function);
  check_cuda(tally::detail::dispatch_value_fold<Sample>(value_counts, counts.data(), num_bins, map, ws.scalar(), stream),
             function);
  choice chose = policy.chosen;
  if (options.algorithm == strategy::automatic) {
    chose.reason = sizeof(Sample) == 1
                       ? "8-bit samples: each of the 256 values counted (each lane into a replica of its own, or one "
                         "copy where values pile up), then each value mapped to its bin once and its count added there"
                       : "more bins than a 16-bit table entry holds: each of the 65536 values counted in 16-bit "
                         "shared-memory counters, then each value mapped to its bin once and its count added there";
  }
  return chose;
}

/// Counts 16-bit samples through a table of the bins of the values in `window`, filled on the
/// device by the mapper `prepare_reference(storage)` returns (after `extra_bytes` of its own), and,
/// for even bins over 16-bit integers, by the `ratio` that gives each of those values the same bin
/// where one is found (blocks whose samples spread over the table's banks count by it).
template <class Sample, class Counter, class PrepareReference, class MakeCubHistogram>
choice run_value_table(std::string_view function, std::span<const Sample> samples, std::span<Counter> counts,
                       std::int64_t num_bins, value_window window, workspace& ws, const histogram_options& options,
                       stream_t stream, std::size_t extra_bytes, PrepareReference prepare_reference,
                       MakeCubHistogram make_cub_histogram,
                       std::optional<tally::detail::value_ratio> ratio = std::nullopt) {
  using table_mapper = tally::detail::value_table_mapper<small_values<Sample>::order>;
  const std::uint32_t first_key = small_values<Sample>::key_at(window.first);
  const std::size_t extra = storage_offset(extra_bytes);
  auto prepare = [&](char* storage) {
    const auto carrying_ratio = [&](const table_mapper& map) {
      if constexpr (small_values<Sample>::order == tally::detail::value_order::bits) {
        if (ratio) return map.with_ratio(*ratio);
      }
      return map;
    };
    if (storage == nullptr) return carrying_ratio(table_mapper(first_key, window.span, num_bins, nullptr));
    auto* table = reinterpret_cast<std::byte*>(storage + extra);
    const auto reference = prepare_reference(storage);  // range bins' edges, which cub reads too
    if (options.algorithm != strategy::cub) {
      check_cuda(tally::detail::dispatch_value_table<Sample>(reference, window, table, stream),
                 "filling the value table on the device");
    }
    return carrying_ratio(table_mapper(first_key, window.span, num_bins, table));
  };
  choice chose = run_histogram(function, sample_bits(samples), counts, num_bins, ws, options, stream,
                               extra + table_mapper::table_bytes(window.span), prepare, make_cub_histogram);
  if (options.algorithm == strategy::automatic) {
    chose.reason = chose.used == strategy::shared_atomic
                       ? (ratio ? "16-bit samples: each value's bin looked up in a table (one entry per value in "
                                  "range, filled once a call, in shared memory where it fits), or, in blocks whose "
                                  "samples spread over the table, computed by a fixed-point ratio that gives every "
                                  "value the table's bin; counted in shared memory"
                                : "16-bit samples: each value's bin looked up in a table (one entry per value in "
                                  "range, filled once a call, in shared memory where it fits), counted in shared "
                                  "memory")
                       : "16-bit samples: each value's bin looked up in a table filled once a call; the bins fit in "
                         "shared memory only as 16-bit counters";
  }
  return chose;
}

/// Copies `edges` to the start of the storage; the range mapper over that copy.
template <class Sample>
range_bin_mapper<Sample> edges_on_device(std::span<const double> edges, char* storage, upper_edge last_edge,
                                         stream_t stream) {
  copy_edges_to_storage(edges, storage, stream);
  return range_bin_mapper<Sample>(reinterpret_cast<const double*>(storage), static_cast<std::int64_t>(edges.size()),
                                  last_edge);
}

/// The exact-float shortcut for float16 or bfloat16 samples where every edge is exact in the
/// type itself (then rounding the edges to it changes nothing): a power-of-two step, both bounds
/// at most 2^digits steps from zero, the step no finer than the type's subnormals, the upper bound
/// finite in the type.
template <class Half>
std::optional<tally::detail::exact_float_bin_mapper> half_exact_bins(const even_bins& bins, upper_edge last_edge) {
  const even_bin_mapper<float> as_float(bins, last_edge);
  if (as_float.shortcut() != even_shortcut::exact_float_edges) return std::nullopt;
  const double step = (bins.upper - bins.lower) / static_cast<double>(bins.num_bins);
  const double reach = std::max(std::fabs(bins.lower), std::fabs(bins.upper)) / step;
  const double quantum = std::ldexp(1.0, Half::min_exponent - Half::digits + 1);
  // Edges k * step with |k| <= 2^digits have at most `digits` significant bits (2^digits itself one).
  if (reach > std::ldexp(1.0, Half::digits) || step < quantum || std::fabs(bins.upper) > Half::largest) {
    return std::nullopt;
  }
  return as_float.exact_float_mapper();
}

/// The ratio of even bins over a 16-bit integer type (ratio_for), or none: its search costs the
/// host about 4 ns a bin, and it saves about 0.3 ps a sample where blocks spread, so it is searched
/// at once for a call of tuning::value_ratio_samples_per_bin samples a bin or more, else the second
/// time in a row a thread asks for the same bins (calls in a loop over one binning), and remembered
/// for them.
template <class Sample>
std::optional<tally::detail::value_ratio> remembered_ratio(const even_bin_mapper<Sample>& map, const even_bins& bins,
                                                          upper_edge last_edge, value_window window,
                                                          std::int64_t num_samples) {
  struct remembered {
    bool valid = false;
    even_bins bins;
    upper_edge last_edge = upper_edge::exclusive;
    bool searched = false;
    std::optional<tally::detail::value_ratio> ratio;
  };
  thread_local remembered last;
  const bool same = last.valid && last.bins.num_bins == bins.num_bins && last.bins.lower == bins.lower &&
                    last.bins.upper == bins.upper && last.bins.arithmetic == bins.arithmetic &&
                    last.last_edge == last_edge;
  if (!same) last = {true, bins, last_edge, false, std::nullopt};
  if (!last.searched && (same || num_samples / bins.num_bins >= tally::detail::tuning::value_ratio_samples_per_bin)) {
    last.ratio = tally::detail::ratio_for(map, window);
    last.searched = true;
  }
  return last.ratio;
}

template <class Sample, class Counter>
choice small_histogram_even(std::string_view function, std::span<const Sample> samples, std::span<Counter> counts,
                            const even_bins& bins, workspace& ws, const histogram_options& options, stream_t stream) {
  refuse_cub_for_small<Sample>(function, options, bins.num_bins);
  const even_bin_mapper<Sample> map(bins, options.last_edge);
  const auto same_map = [map](char*) { return map; };
  if constexpr (sizeof(Sample) == 1) {
    return run_value_fold(function, samples, counts, bins.num_bins, ws, options, stream, 0, same_map);
  } else {
    auto make_cub_histogram = [&] {
      if constexpr (std::is_same_v<Sample, std::uint16_t>) {
        return cub_even_bins(function, samples, counts, bins, options.last_edge);
      } else {
        return no_cub_histogram{static_cast<std::int64_t>(samples.size())};
      }
    };
    const auto run_with = [&](auto mapper) {
      return run_histogram(function, sample_bits(samples), counts, bins.num_bins, ws, options, stream, 0,
                           [mapper](char*) { return mapper; }, make_cub_histogram);
    };
    if constexpr (std::is_integral_v<Sample>) {
      // Unit bins: each value its own bin, a window; a whole step: a multiply-high; no table.
      if (const auto window = tally::detail::unit_window_for<false>(map, bins)) return run_with(*window);
      if (const auto window = tally::detail::unit_window_for<true>(map, bins)) return run_with(*window);
      if (const auto stepped =
              tally::detail::whole_step_for(map, bins, options.last_edge == upper_edge::inclusive)) {
        return run_with(*stepped);
      }
    } else {
      if (const auto exact = half_exact_bins<Sample>(bins, options.last_edge)) {
        return run_with(tally::detail::half_exact_mapper<Sample>(*exact));
      }
    }
    if (bins.num_bins > tally::detail::value_table_mapper<tally::detail::value_order::bits>::max_bins &&
        options.algorithm != strategy::cub) {
      return run_value_fold(function, samples, counts, bins.num_bins, ws, options, stream, 0, same_map);
    }
    const value_window window = tally::detail::counted_values<Sample>(
        static_cast<double>(map.edge(0)), static_cast<double>(map.edge(bins.num_bins)),
        options.last_edge == upper_edge::inclusive);
    std::optional<tally::detail::value_ratio> ratio;
    if constexpr (std::is_integral_v<Sample>) {
      if (options.algorithm != strategy::cub &&
          static_cast<std::int64_t>(samples.size()) >= tally::detail::tuning::value_ratio_min_samples &&
          bins.num_bins <= tally::detail::tuning::value_ratio_max_bins) {
        ratio = remembered_ratio(map, bins, options.last_edge, window, static_cast<std::int64_t>(samples.size()));
      }
    }
    return run_value_table(function, samples, counts, bins.num_bins, window, ws, options, stream, 0, same_map,
                           make_cub_histogram, ratio);
  }
}

template <class Sample, class Counter>
choice small_histogram_range(std::string_view function, std::span<const Sample> samples, std::span<Counter> counts,
                             std::span<const double> edges, workspace& ws, const histogram_options& options,
                             stream_t stream) {
  const auto num_bins = static_cast<std::int64_t>(edges.size()) - 1;
  refuse_cub_for_small<Sample>(function, options, num_bins);
  const std::size_t edges_bytes = edges_storage_bytes(edges);
  const auto reference = [&](char* storage) {
    return edges_on_device<Sample>(edges, storage, options.last_edge, stream);
  };
  auto make_cub_histogram = [&] {
    if constexpr (std::is_same_v<Sample, std::uint16_t>) {
      return cub_range_bins(function, samples, counts, static_cast<std::int64_t>(edges.size()));
    } else {
      return no_cub_histogram{static_cast<std::int64_t>(samples.size())};
    }
  };
  if (sizeof(Sample) == 1 ||
      (num_bins > tally::detail::value_table_mapper<tally::detail::value_order::bits>::max_bins &&
       options.algorithm != strategy::cub)) {
    return run_value_fold(function, samples, counts, num_bins, ws, options, stream, edges_bytes, reference);
  }
  const value_window window =
      tally::detail::counted_values<Sample>(edges.front(), edges.back(), options.last_edge == upper_edge::inclusive);
  return run_value_table(function, samples, counts, num_bins, window, ws, options, stream, edges_bytes, reference,
                         make_cub_histogram);
}

template <class Sample, class Counter>
choice small_bincount(std::string_view function, std::span<const Sample> samples, std::span<Counter> counts,
                      workspace& ws, const histogram_options& options, stream_t stream) {
  const auto num_bins = static_cast<std::int64_t>(counts.size());
  refuse_cub_for_small<Sample>(function, options, num_bins);
  if constexpr (sizeof(Sample) == 1) {
    const bincount_mapper<Sample> map(num_bins);
    return run_value_fold(function, samples, counts, num_bins, ws, options, stream, 0, [map](char*) { return map; });
  } else {
    auto make_cub_histogram = [&] {
      if constexpr (std::is_same_v<Sample, std::uint16_t>) {
        return cub_bincount(function, samples, counts);
      } else {
        return no_cub_histogram{static_cast<std::int64_t>(samples.size())};
      }
    };
    // Value v in bin v: the window of the values 0 .. min(num_bins, the type's largest + 1) - 1.
    const auto span = static_cast<std::uint32_t>(
        std::min<std::int64_t>(num_bins, static_cast<std::int64_t>(std::numeric_limits<Sample>::max()) + 1));
    const tally::detail::value_window_mapper<> window(0, span, 0, num_bins);
    return run_histogram(function, sample_bits(samples), counts, num_bins, ws, options, stream, 0,
                         [window](char*) { return window; }, make_cub_histogram);
  }
}

}  // namespace tally::gpu::detail
