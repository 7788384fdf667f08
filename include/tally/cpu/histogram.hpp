// The CPU backend's histograms: the OpenMP analogy (critical, atomic, reduction) made into strategies.
// `sequential` is the reference every other result, CPU or GPU, is checked against; `critical`,
// `atomic`, `privatized` and `reduction` are the four ways OpenMP resolves conflicting updates.
// Weighted histograms (sums of a weight per sample) offer `sequential` and `privatized`, in
// floating point or, with `deterministic`, in fixed-point integers (detail/fixed_point_weight.hpp).
// Host-only: no CUDA header is included here.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tally/bins.hpp"
#include "tally/detail/range_grid.hpp"
#include "tally/cpu/count_loops.hpp"
#include "tally/cpu/edge_tables.hpp"
#include "tally/cpu/parallel.hpp"
#include "tally/detail/fixed_point_weight.hpp"
#include "tally/detail/validate.hpp"
#include "tally/strategy.hpp"

namespace tally::cpu {
namespace detail {

/// The OpenMP reduction clause keeps each thread's private copy of the counts on its stack;
/// larger copies overflow thread stacks, so `reduction` refuses them.
inline constexpr std::uint64_t reduction_clause_budget = std::uint64_t{512} << 10;

/// Whether a private copy per thread (`bin_bytes` a bin) fits its budget and costs less than the
/// input it saves contention on.
inline bool private_copies_pay(std::uint64_t num_samples, std::int64_t num_bins, std::size_t bin_bytes) {
  const auto threads = static_cast<std::uint64_t>(max_threads());
  const std::uint64_t copies_bytes = threads * static_cast<std::uint64_t>(num_bins) * bin_bytes;
  return copies_bytes <= private_copies_budget && static_cast<std::uint64_t>(num_bins) * 4 <= num_samples;
}

/// automatic's choice for histograms of `bin_bytes` a bin: private copies where they pay, else
/// `fallback`.
inline choice choose_privatized_or(strategy requested, std::uint64_t num_samples, std::int64_t num_bins,
                                   std::size_t bin_bytes, choice fallback) {
  if (const auto early = asked_or_sequential(requested, num_samples)) return *early;
  if (private_copies_pay(num_samples, num_bins, bin_bytes)) {
    return {strategy::privatized, "a private copy per thread fits in memory and costs less than the input"};
  }
  return fallback;
}

/// Where copies do not pay, one thread: atomics on the shared counts lost to it in every case
/// measured (2 cores: 1.3-32x at 2^16 samples over 65536 bins, 18x on one hot bin over 2^26 bins;
/// docs/performance.md, "CPU backend: automatic for histograms").
inline choice choose_histogram(strategy requested, std::uint64_t num_samples, std::int64_t num_bins,
                               std::size_t counter_bytes) {
  const choice fallback{strategy::sequential,
                        "fewer than four samples a bin, or too many bins for private copies: one thread counts into "
                        "the one array (atomics on shared counts cost more than they save, most on crowded bins)"};
  return choose_privatized_or(requested, num_samples, num_bins, counter_bytes, fallback);
}

/// One sample's bin, as the critical and atomic strategies take it: a bin below 0 (out of range,
/// NaN) is counted in `left_out`, any other is handed to `add`.
template <class Add>
inline void add_or_leave_out(std::int64_t bin, std::uint64_t& left_out, Add&& add) {
  if (bin < 0) {
    ++left_out;
  } else {
    add(bin);
  }
}

/// The team walks the samples, each thread adding its samples' bins by `add(bin)`: the critical and
/// atomic strategies, which share the one array of counts.
template <class Sample, class Mapper, class Add>
std::uint64_t count_shared(std::span<const Sample> samples, const Mapper& map, Add add) {
  const auto n = static_cast<std::int64_t>(samples.size());
  std::uint64_t left_out = 0;
#pragma omp parallel for reduction(+ : left_out)
  for (std::int64_t i = 0; i < n; ++i) add_or_leave_out(map(samples[i]), left_out, add);
  return left_out;
}

template <class Sample, class Counter, class Mapper>
std::uint64_t count_critical(std::span<const Sample> samples, Counter* counts, const Mapper& map) {
  return count_shared(samples, map, [counts](std::int64_t bin) {
#pragma omp critical(tally_histogram)
    ++counts[bin];
  });
}

template <class Sample, class Counter, class Mapper>
std::uint64_t count_atomic(std::span<const Sample> samples, Counter* counts, const Mapper& map) {
  return count_shared(samples, map, [counts](std::int64_t bin) {
    std::atomic_ref<Counter>(counts[bin]).fetch_add(1, std::memory_order_relaxed);
  });
}

template <class Sample, class Counter, class Mapper>
histogram_result run_histogram(std::span<const Sample> samples, std::span<Counter> counts, const Mapper& map,
                               strategy requested) {
  const std::int64_t num_bins = map.num_bins();
  const choice chose = choose_histogram(requested, samples.size(), num_bins, sizeof(Counter));
  if (chose.used == strategy::reduction &&
      static_cast<std::uint64_t>(num_bins) * sizeof(Counter) > reduction_clause_budget) {
    throw error(errc::not_supported, "strategy",
                "tally::cpu: strategy 'reduction' keeps a private copy of the counts on each thread's stack, "
                "at most " + std::to_string(reduction_clause_budget) + " bytes; " + std::to_string(num_bins) +
                    " bins need more (use 'privatized')");
  }
  if constexpr (refusing_mapper<Mapper, Sample>) {
    // critical and atomic count straight into the counts: the refusal's pass comes first.
    if (chose.used == strategy::critical || chose.used == strategy::atomic) map.refuse(samples);
  }
  std::uint64_t left_out = 0;
  switch (chose.used) {
    case strategy::critical:
      std::fill(counts.begin(), counts.end(), Counter{0});
      left_out = count_critical(samples, counts.data(), map);
      break;
    case strategy::atomic:
      std::fill(counts.begin(), counts.end(), Counter{0});
      left_out = count_atomic(samples, counts.data(), map);
      break;
    case strategy::privatized: left_out = count_privatized(samples, counts.data(), as_slots<Sample>(map)); break;
    case strategy::reduction: left_out = count_reduction(samples, counts.data(), as_slots<Sample>(map)); break;
    default: left_out = count_sequential(samples, counts.data(), as_slots<Sample>(map)); break;
  }
  return {chose, left_out};
}

/**
 * Counts over the sorted, finite edges `edge_at(0)` to `edge_at(num_bins)` (doubles) with the
 * CPU's mapper for them: evenly spaced edges (as samples compare with them) through the estimate
 * and a table of the edges; other layouts through the GPU's grid, whose tables the host fills,
 * for double and int64 samples the float grid's cells over a table of the edges (cpu/edge_tables.hpp).
 */
template <class Sample, class Counter, class EdgeAt>
histogram_result run_over_edges(std::span<const Sample> samples, std::span<Counter> counts, std::int64_t num_bins,
                                EdgeAt edge_at, const histogram_options& options) {
  const auto edges_in_double = [&] {
    std::vector<double> doubles(static_cast<std::size_t>(num_bins) + 1);
    for (std::size_t i = 0; i < doubles.size(); ++i) doubles[i] = edge_at(static_cast<std::int64_t>(i));
    return doubles;
  };
  if constexpr (std::is_integral_v<Sample> && sizeof(Sample) >= 4) {
    // Edges that span few integers, and enough samples to pay for the table: each integer's bin
    // looked up (integer_table_slots).
    using table_mapper = tally::detail::integer_table_mapper<Sample>;
    const auto window = table_mapper::window_for(edge_at(0), edge_at(num_bins), num_bins);
    if (window && samples.size() >= integer_table_samples_per_entry * (std::size_t{window->second} + 1)) {
      const std::vector<double> doubles = edges_in_double();
      const range_bin_mapper<Sample> reference(doubles.data(), num_bins + 1, options.last_edge);
      std::vector<std::uint16_t> table;
      fill_integer_table(table_mapper(window->first, window->second, num_bins, nullptr), reference, table);
      const table_mapper map(window->first, window->second, num_bins, reinterpret_cast<const std::byte*>(table.data()));
      return run_histogram(samples, counts, integer_table_slots<Sample>(map), options.algorithm);
    }
  }
  using key = std::conditional_t<std::is_same_v<Sample, float>, float, double>;
  std::vector<key> edges(static_cast<std::size_t>(num_bins) + 1);
  for (std::size_t i = 0; i < edges.size(); ++i) edges[i] = least_key_at_or_above<key>(edge_at(static_cast<std::int64_t>(i)));
  if (num_bins <= max_table_bins && estimated_table_mapper<Sample, key>::estimate_fits(edges)) {
    // A sample can equal the last edge only where the edge is a value of key.
    const bool last_is_key = static_cast<double>(edges.back()) == edge_at(num_bins);
    const std::vector<key> padded = padded_edges<key>(edges, last_is_key ? options.last_edge : upper_edge::exclusive);
    return run_histogram(samples, counts, estimated_table_mapper<Sample, key>(padded), options.algorithm);
  }
  if constexpr (std::is_same_v<Sample, double> || std::is_same_v<Sample, std::int64_t>) {
    if (num_bins <= max_table_bins) {
      typename float_cell_mapper<Sample>::tables tables;
      return run_histogram(samples, counts, float_cell_mapper<Sample>(edges, options.last_edge, tables), options.algorithm);
    }
  } else {
    if (num_bins <= max_table_bins) {
      const std::vector<double> padded = padded_edges<double>(edges_in_double(), options.last_edge);
      using grid = tally::detail::grid_range_bin_mapper<Sample>;
      std::vector<std::byte> tables(grid::table_bytes(num_bins + 1));
      const grid map(std::span<const double>(padded).subspan(1, padded.size() - 2), upper_edge::exclusive, tables,
                     tables.data());
      if (map.kind() == tally::detail::grid_kind::float_bits) {
        return run_histogram(samples, counts, grid_slots<Sample, tally::detail::grid_kind::float_bits>(map),
                             options.algorithm);
      }
      return run_histogram(samples, counts, grid_slots<Sample, tally::detail::grid_kind::value>(map), options.algorithm);
    }
  }
  {
    using grid_mapper = tally::detail::grid_range_bin_mapper<Sample>;
    std::vector<std::byte> tables(grid_mapper::table_bytes(num_bins + 1));
    const grid_mapper map =
        grid_mapper::plan(edge_at, num_bins + 1, options.last_edge).reading_tables_at(tables.data());
    map.fill_tables(edge_at, tables);
    return run_histogram(samples, counts, map, options.algorithm);
  }
}

/// A bin of a deterministic weighted histogram: the fixed-point words and flags of
/// detail/fixed_point_weight.hpp.
struct fixed_point_bin {
  std::uint64_t low = 0;
  std::uint64_t high = 0;
  std::uint32_t flags = 0;
};

/// Adds a weight to a bin: in double (order-dependent), or on the fixed-point grid (exact).
struct add_in_double {
  using bin_type = double;
  template <class Weight>
  void operator()(double& bin, Weight w) const { bin += static_cast<double>(w); }
  void merge(double& into, double from) const { into += from; }
};
struct add_in_fixed_point {
  using bin_type = fixed_point_bin;
  template <class Weight>
  void operator()(fixed_point_bin& bin, Weight w) const {
    const auto f = tally::detail::fixed_point_weight::to_fixed(static_cast<double>(w));
    bin.low += f.low;
    bin.high += f.high;
    bin.flags |= f.flags;
  }
  void merge(fixed_point_bin& into, const fixed_point_bin& from) const {
    into.low += from.low;
    into.high += from.high;
    into.flags |= from.flags;
  }
};

/// Weighted histograms have no atomic strategy on the CPU: one thread where copies do not pay.
inline choice choose_weighted(strategy requested, std::uint64_t num_samples, std::int64_t num_bins,
                              std::size_t bin_bytes) {
  return choose_privatized_or(requested, num_samples, num_bins, bin_bytes,
                              {strategy::sequential, "too many bins for private copies of the sums"});
}

template <class Sample, class Weight, class Mapper, class Add>
std::uint64_t weigh_sequential(std::span<const Sample> samples, const Weight* weights,
                               typename Add::bin_type* bins, const Mapper& map, const Add& add) {
  std::uint64_t left_out = 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    add_or_leave_out(map(samples[i]), left_out, [&](std::int64_t bin) { add(bins[bin], weights[i]); });
  }
  return left_out;
}

/// Per-thread copies of the bins (each thread a contiguous share of the samples, each copy its
/// own: private_copies), merged bin by bin in thread order.
template <class Sample, class Weight, class Mapper, class Add>
std::uint64_t weigh_privatized(std::span<const Sample> samples, const Weight* weights,
                               typename Add::bin_type* bins, std::int64_t num_bins, const Mapper& map,
                               const Add& add) {
  using bin_type = typename Add::bin_type;
  const auto n = static_cast<std::int64_t>(samples.size());
  private_copies<bin_type> copies(static_cast<std::size_t>(max_threads()), num_bins);
  std::uint64_t left_out = 0;
#pragma omp parallel reduction(+ : left_out)
  {
    bin_type* mine = copies.take();
    const Mapper local = map;  // as in count_privatized: not read again after every store
    // Every thread meets the loop (a worksharing loop must be met by all); one without its copy
    // leaves its share, and the call throws after the region.
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      if (mine == nullptr) continue;
      add_or_leave_out(local(samples[i]), left_out, [&](std::int64_t bin) { add(mine[bin], weights[i]); });
    }
  }
  copies.throw_if_short();
#pragma omp parallel for schedule(static)
  for (std::int64_t bin = 0; bin < num_bins; ++bin) {
    bin_type total = copies.copy(0)[bin];
    for (std::size_t t = 1; t < copies.team(); ++t) add.merge(total, copies.copy(t)[bin]);
    bins[bin] = total;
  }
  return left_out;
}

template <class Sample, class Weight, class Mapper, class Add>
std::uint64_t weigh(strategy s, std::span<const Sample> samples, const Weight* weights, typename Add::bin_type* bins,
                    std::int64_t num_bins, const Mapper& map, const Add& add) {
  if (s == strategy::privatized) return weigh_privatized(samples, weights, bins, num_bins, map, add);
  return weigh_sequential(samples, weights, bins, map, add);
}

/// Runs a weighted histogram with any mapper; throws naming `weights` after writing the sums when
/// a deterministic one met a weight out of range.
template <class Sample, class Weight, class Mapper>
histogram_result run_weighted(std::string_view function, std::span<const Sample> samples,
                              std::span<const Weight> weights, std::span<double> sums, const Mapper& map,
                              const histogram_options& options) {
  const std::int64_t num_bins = map.num_bins();
  if (!options.deterministic) {
    const choice chose = choose_weighted(options.algorithm, samples.size(), num_bins, sizeof(double));
    // The sequential strategy adds into the sums; privatized writes every bin once, from its copies
    // (so a call that cannot have them leaves the sums as they were).
    if (chose.used != strategy::privatized) std::fill(sums.begin(), sums.end(), 0.0);
    const std::uint64_t left_out = weigh(chose.used, samples, weights.data(), sums.data(), num_bins, map, add_in_double{});
    return {chose, left_out};
  }
  const choice chose = choose_weighted(options.algorithm, samples.size(), num_bins, sizeof(fixed_point_bin));
  std::vector<fixed_point_bin> bins(static_cast<std::size_t>(num_bins));
  const std::uint64_t left_out = weigh(chose.used, samples, weights.data(), bins.data(), num_bins, map, add_in_fixed_point{});
  bool out_of_range = false;
  for (std::size_t bin = 0; bin < bins.size(); ++bin) {
    sums[bin] = tally::detail::fixed_point_weight::to_double(bins[bin].low, bins[bin].high, bins[bin].flags);
    out_of_range = out_of_range || (bins[bin].flags & tally::detail::fixed_point_weight::saw_out_of_range) != 0;
  }
  if (out_of_range) tally::detail::throw_weight_out_of_range(function);
  return {chose, left_out};
}

/// Runs `run(slots)` with 16-bit samples' slots through a table of each value's bin
/// (value_table_slots), filled by `reference` (the bins' own mapper) over the values from
/// `first_edge` to `last_edge`, where enough samples repay its fill (value_table_samples_per_entry)
/// and a table entry holds the bins; else none, and the caller maps each sample by the mapper.
template <class Sample, class Reference, class Run>
std::optional<histogram_result> with_value_table(std::size_t num_samples, std::int64_t num_bins,
                                                 const Reference& reference, double first_edge, double last_edge,
                                                 upper_edge last_edge_mode, Run&& run) {
  using slots = value_table_slots<Sample>;
  if (num_bins > slots::table_mapper::max_bins) return std::nullopt;
  const tally::detail::value_window window =
      tally::detail::counted_values<Sample>(first_edge, last_edge, last_edge_mode == upper_edge::inclusive);
  if (num_samples < value_table_samples_per_entry * (std::size_t{window.span} + 1)) return std::nullopt;
  const std::vector<std::uint16_t> table = fill_value_table<Sample>(window, num_bins, reference);
  const typename slots::table_mapper map(tally::detail::small_values<Sample>::key_at(window.first), window.span,
                                         num_bins, reinterpret_cast<const std::byte*>(table.data()));
  return run(slots(map));
}

/// Even bins over 16-bit samples with no integer shortcut (float16 and bfloat16 always) through a
/// table of each value's bin where samples repay its fill (with_value_table); else none.
template <class Sample, class Run>
std::optional<histogram_result> with_even_value_table(std::size_t num_samples, const even_bin_mapper<Sample>& even,
                                                      upper_edge last_edge_mode, Run&& run) {
  if constexpr (sizeof(Sample) == 2) {
    if (std::is_integral_v<Sample> && even.shortcut() == even_shortcut::integer_step) return std::nullopt;
    return with_value_table<Sample>(num_samples, even.num_bins(), even, static_cast<double>(even.edge(0)),
                                    static_cast<double>(even.edge(even.num_bins())), last_edge_mode,
                                    std::forward<Run>(run));
  } else {
    return std::nullopt;
  }
}

template <class Sample>
void check_no_negative(std::string_view function, std::span<const Sample> samples) {
  if constexpr (std::is_signed_v<Sample>) {
    const auto it = std::find_if(samples.begin(), samples.end(), [](Sample x) { return x < 0; });
    if (it != samples.end()) {
      tally::detail::throw_negative_sample(function, static_cast<std::uint64_t>(it - samples.begin()),
                                           static_cast<long long>(*it));
    }
  }
}

/**
 * bincount of signed samples as slots: value v in slot v, values past the bins in slot num_bins,
 * negative values in slot num_bins + 1, which refuses them (count_loops.hpp): the check for
 * negative samples costs two instructions a sample in the count loop instead of a pass of its own.
 */
template <class Sample>
class signed_bincount_slots {
 public:
  signed_bincount_slots(std::int64_t num_bins, std::string_view function)
      : map_(num_bins), num_bins_(static_cast<std::uint64_t>(num_bins)), function_(function) {}

  std::int64_t num_bins() const { return static_cast<std::int64_t>(num_bins_); }
  std::int64_t slots() const { return static_cast<std::int64_t>(num_bins_) + 2; }
  static constexpr std::int64_t first_bin_slot() { return 0; }
  std::int64_t refused_slot() const { return static_cast<std::int64_t>(num_bins_) + 1; }

  std::size_t slot(Sample x) const {
    const auto value = static_cast<std::uint64_t>(static_cast<std::int64_t>(x));  // negative: past every bin
    const std::uint64_t kept = value < num_bins_ ? value : num_bins_;
    return static_cast<std::size_t>(kept + (static_cast<std::uint64_t>(static_cast<std::int64_t>(x)) >> 63));
  }
  /// The bin, or left_out_bin for values past the bins and negative ones (critical, atomic).
  std::int64_t operator()(Sample x) const { return map_(x); }

  /// Throws naming the first negative sample, if there is one.
  void refuse(std::span<const Sample> samples) const { check_no_negative(function_, samples); }

 private:
  bincount_mapper<Sample> map_;
  std::uint64_t num_bins_;
  std::string_view function_;
};

}  // namespace detail

/**
 * @brief Counts `samples` into `bins.num_bins` equal-width bins over [lower, upper).
 * @param counts exactly `bins.num_bins` counters, overwritten (zeroed first).
 * @return the strategy used and the number of samples left out (NaN, infinite, out of range).
 * @throws tally::error naming the argument, before anything is written, on bad input.
 */
template <class Sample, class Counter>
histogram_result histogram_even(std::span<const Sample> samples, std::span<Counter> counts, const even_bins& bins,
                                const histogram_options& options = {}) {
  static_assert(is_histogram_sample_v<Sample>, "histogram samples: the types of is_histogram_sample_v (tally/bins.hpp)");
  static_assert(is_counter_v<Counter>, "counters: uint32 or uint64");
  constexpr std::string_view function = "tally::cpu::histogram_even";
  return reporting_host_memory_shortage(function, [&]() -> histogram_result {
    tally::detail::check_even_bins(function, bins);
    tally::detail::check_histogram_buffers(function, samples, counts, bins.num_bins);
    tally::detail::check_strategy(function, backend::cpu, operation::histogram, options.algorithm);
    const even_bin_mapper<Sample> even(bins, options.last_edge);
    if constexpr (is_small_sample_v<Sample>) {
      // Few values, so no grid: 16-bit samples through a table of each value's bin where the bins
      // have no integer shortcut and samples repay its fill; else the shortcuts or the general
      // rule (the tables, here and on the GPU, are filled from this same mapper).
      if (auto counted = detail::with_even_value_table(samples.size(), even, options.last_edge, [&](const auto& map) {
            return detail::run_histogram(samples, counts, map, options.algorithm);
          })) {
        return *counted;
      }
      return tally::detail::with_fastest_mapper(even, [&](const auto& map) {
        return detail::run_histogram(samples, counts, map, options.algorithm);
      });
    } else {
      // Integer steps as they are; other even bins (float samples over exact edges too, general
      // ranges, doubles, numpy's data range) over a table of their edges: the estimate's and the
      // general rule's host forms compute an edge per sample (a double product kept from fusing
      // through memory), the table reads one, and the exact float shortcut's host form branches.
      const bool exact = even.shortcut() == even_shortcut::integer_step;
      if (!exact && bins.num_bins <= detail::max_table_bins && std::isfinite(static_cast<double>(even.edge(0))) &&
          std::isfinite(static_cast<double>(even.edge(bins.num_bins)))) {
        return detail::run_over_edges(samples, counts, bins.num_bins,
                                      [&even](std::int64_t i) { return static_cast<double>(even.edge(i)); }, options);
      }
      return tally::detail::with_fastest_mapper(even, [&](const auto& map) {
        return detail::run_histogram(samples, counts, map, options.algorithm);
      });
    }
  });
}

/**
 * @brief Sums `weights[i]` of each counted sample `samples[i]` into `bins.num_bins` equal-width
 * bins over [lower, upper) (the bins of the unweighted histogram_even).
 * @param weights one weight (float or double) per sample; the weights of left-out samples are
 *   ignored. A NaN weight makes its bin's sum NaN, an infinite one makes it that infinity (NaN
 *   with both signs), as numpy does.
 * @param sums exactly `bins.num_bins` doubles, overwritten.
 * @param options strategy `sequential`, `privatized` or `automatic`; `deterministic` sums the
 *   weights as fixed-point integers: the same bits whatever the strategy, thread count or backend,
 *   and |sum - exact| <= count * 2^-33 + ulp(sum) / 2 for a bin of `count` weights, given weights
 *   below 2^31 in magnitude and fewer than 2^32 samples.
 * @return the strategy used and the number of samples left out (NaN, infinite, out of range).
 * @throws tally::error naming the argument, before anything is written, on bad input; and naming
 *   `weights`, after the sums are written (NaN in the bins concerned), when `deterministic` met a
 *   finite weight of a counted sample with |w| >= 2^31.
 */
template <class Sample, class Weight, class Sum>
histogram_result histogram_even(std::span<const Sample> samples, std::span<const Weight> weights, std::span<Sum> sums,
                                const even_bins& bins, const histogram_options& options = {}) {
  static_assert(is_histogram_sample_v<Sample>, "histogram samples: the types of is_histogram_sample_v (tally/bins.hpp)");
  static_assert(is_weight_v<Weight>, "weights: float or double");
  static_assert(is_weight_sum_v<Sum>, "weighted sums: double");
  constexpr std::string_view function = "tally::cpu::histogram_even";
  return reporting_host_memory_shortage(function, [&]() -> histogram_result {
    tally::detail::check_even_bins(function, bins);
    tally::detail::check_weighted_buffers(function, samples, weights, sums, bins.num_bins, options.deterministic);
    tally::detail::check_strategy(function, backend::cpu, operation::weighted_histogram, options.algorithm);
    // The cheapest mapper that bins alike, as unweighted histograms take it.
    const auto weigh = [&](const auto& map) {
      return detail::run_weighted(function, samples, weights, std::span<double>(sums), map, options);
    };
    const even_bin_mapper<Sample> even(bins, options.last_edge);
    if (auto weighed = detail::with_even_value_table(samples.size(), even, options.last_edge, weigh)) return *weighed;
    return tally::detail::with_fastest_mapper(even, weigh);
  });
}

/**
 * @brief Counts `samples` into the bins between sorted `edges` (edges.size() - 1 bins).
 * @param edges non-decreasing and finite; bin i is [edges[i], edges[i+1]).
 */
template <class Sample, class Counter>
histogram_result histogram_range(std::span<const Sample> samples, std::span<Counter> counts,
                                 std::span<const double> edges, const histogram_options& options = {}) {
  static_assert(is_histogram_sample_v<Sample>, "histogram samples: the types of is_histogram_sample_v (tally/bins.hpp)");
  static_assert(is_counter_v<Counter>, "counters: uint32 or uint64");
  constexpr std::string_view function = "tally::cpu::histogram_range";
  return reporting_host_memory_shortage(function, [&]() -> histogram_result {
    tally::detail::check_range_edges(function, edges);
    tally::detail::check_histogram_buffers(function, samples, counts, static_cast<std::int64_t>(edges.size()) - 1);
    tally::detail::check_strategy(function, backend::cpu, operation::histogram, options.algorithm);
    if constexpr (is_small_sample_v<Sample>) {
      // 16-bit samples through a table of each value's bin where samples repay its fill; else a
      // search of the edges a sample.
      const range_bin_mapper<Sample> range(edges.data(), static_cast<std::int64_t>(edges.size()), options.last_edge);
      if constexpr (sizeof(Sample) == 2) {
        if (auto counted = detail::with_value_table<Sample>(
                samples.size(), range.num_bins(), range, edges.front(), edges.back(), options.last_edge,
                [&](const auto& map) { return detail::run_histogram(samples, counts, map, options.algorithm); })) {
          return *counted;
        }
      }
      return detail::run_histogram(samples, counts, range, options.algorithm);
    } else {
      // A table or grid over the edges: a sample costs an estimate or a cell and a compare or two,
      // where a search over all the edges costs log2(edges) dependent loads.
      return detail::run_over_edges(samples, counts, static_cast<std::int64_t>(edges.size()) - 1,
                                    [edges](std::int64_t i) { return edges[static_cast<std::size_t>(i)]; }, options);
    }
  });
}

/**
 * @brief Counts value v of `samples` in counts[v]; values >= counts.size() are left out.
 * @throws tally::error if a sample is negative (checked before anything is written).
 */
template <class Sample, class Counter>
histogram_result bincount(std::span<const Sample> samples, std::span<Counter> counts,
                          const histogram_options& options = {}) {
  static_assert(is_bincount_sample_v<Sample>, "bincount samples: the integer histogram samples");
  static_assert(is_counter_v<Counter>, "counters: uint32 or uint64");
  constexpr std::string_view function = "tally::cpu::bincount";
  return reporting_host_memory_shortage(function, [&]() -> histogram_result {
    const auto num_bins = static_cast<std::int64_t>(counts.size());
    if (num_bins == 0) tally::throw_invalid_argument(function, "counts", "must hold at least one bin (num_bins is counts.size(), 0)");
    tally::detail::check_histogram_buffers(function, samples, counts, num_bins);
    tally::detail::check_strategy(function, backend::cpu, operation::histogram, options.algorithm);
    if constexpr (std::is_same_v<Sample, std::uint8_t>) {
      if (num_bins >= 256) {
        // Every byte has a bin: a direct count of the 256 values, with no compare.
        for (std::size_t v = 256; v < counts.size(); ++v) counts[v] = 0;
        return detail::run_histogram(samples, counts.first(256), tally::detail::byte_shift_mapper(0, 256), options.algorithm);
      }
    }
    if constexpr (std::is_signed_v<Sample>) {
      return detail::run_histogram(samples, counts, detail::signed_bincount_slots<Sample>(num_bins, function),
                                   options.algorithm);
    } else {
      return detail::run_histogram(samples, counts, bincount_mapper<Sample>(num_bins), options.algorithm);
    }
  });
}

}  // namespace tally::cpu
