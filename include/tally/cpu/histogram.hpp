// The CPU backend's histograms: the OpenMP analogy (critical, atomic, reduction) made into strategies.
// `sequential` is the reference every other result, CPU or GPU, is checked against; `critical`,
// `atomic`, `privatized` and `reduction` are the four ways OpenMP resolves conflicting updates.
// Weighted histograms (sums of a weight per sample) offer `sequential` and `privatized`, in
// floating point or, with `deterministic`, in fixed-point integers (detail/fixed_point_weight.hpp).
// Host-only: no CUDA header is included here.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string_view>
#include <vector>

#include "tally/bins.hpp"
#include "tally/detail/range_grid.hpp"
#include "tally/cpu/parallel.hpp"
#include "tally/detail/fixed_point_weight.hpp"
#include "tally/detail/validate.hpp"
#include "tally/strategy.hpp"

namespace tally::cpu {
namespace detail {

/// Per-thread copies are used while they take at most this many bytes.
inline constexpr std::uint64_t private_copies_budget = std::uint64_t{256} << 20;

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

inline choice choose_histogram(strategy requested, std::uint64_t num_samples, std::int64_t num_bins,
                               std::size_t counter_bytes) {
  const choice fallback{strategy::atomic, "too many bins for private copies; atomics on many bins rarely collide"};
  return choose_privatized_or(requested, num_samples, num_bins, counter_bytes, fallback);
}

/// Per-thread copies of the bins (`Bin` a bin), each allocated and zeroed by the thread that fills
/// it, in memory of its own, as the OpenMP reduction clause keeps its copies on each thread's
/// stack. Copies side by side in one array zeroed by the caller were slower: on a 2-core machine,
/// 2^24 int32 samples over 256 bins took 10-11 ms (uniform) where copies shared a cache line at
/// their boundary, 6-8.5 ms (uniform, strided32, loguniform) with each copy on lines of its own,
/// and 4.3-5 ms as here, the reduction clause's time.
template <class Bin>
class private_copies {
 public:
  static constexpr std::size_t line = 64;

  private_copies(std::size_t threads, std::int64_t num_bins)
      : num_bins_(static_cast<std::size_t>(num_bins)), copies_(threads) {}

  /// The calling thread's copy, allocated and zeroed; call once from each thread of the region.
  Bin* take() {
    const std::size_t bytes = (num_bins_ * sizeof(Bin) + line - 1) / line * line;  // no line shared
    auto& mine = copies_[static_cast<std::size_t>(thread_num())];
    mine.reset(static_cast<Bin*>(::operator new(bytes, std::align_val_t{line})));
    std::uninitialized_fill_n(mine.get(), num_bins_, Bin{});
    if (thread_num() == 0) team_ = static_cast<std::size_t>(team_size());
    return mine.get();
  }

  /// Copy `t` of the team that took them; read after the parallel region.
  const Bin* copy(std::size_t t) const { return copies_[t].get(); }
  /// The threads that took a copy (OpenMP may start fewer than max_threads()).
  std::size_t team() const { return team_; }

 private:
  struct aligned_delete {
    void operator()(Bin* p) const { ::operator delete(p, std::align_val_t{line}); }
  };
  std::size_t num_bins_;
  std::vector<std::unique_ptr<Bin, aligned_delete>> copies_;
  std::size_t team_ = 0;
};

/// One sample's bin, as every strategy takes it: a bin below 0 (out of range, NaN) is counted in
/// `left_out`, any other is handed to `add`.
template <class Add>
inline void add_or_leave_out(std::int64_t bin, std::uint64_t& left_out, Add&& add) {
  if (bin < 0) {
    ++left_out;
  } else {
    add(bin);
  }
}

template <class Sample, class Counter, class Mapper>
std::uint64_t count_sequential(std::span<const Sample> samples, Counter* counts, const Mapper& map) {
  std::uint64_t left_out = 0;
  for (const Sample x : samples) add_or_leave_out(map(x), left_out, [counts](std::int64_t bin) { ++counts[bin]; });
  return left_out;
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
std::uint64_t count_privatized(std::span<const Sample> samples, Counter* counts, std::int64_t num_bins,
                               const Mapper& map) {
  const auto n = static_cast<std::int64_t>(samples.size());
  private_copies<Counter> copies(static_cast<std::size_t>(max_threads()), num_bins);
  std::uint64_t left_out = 0;
#pragma omp parallel reduction(+ : left_out)
  {
    Counter* mine = copies.take();
    // The thread's own mapper: a counter store may alias the caller's (counters and mapper fields
    // are both unsigned words), which then is read again for every sample.
    const Mapper local = map;
    const Sample* data = samples.data();
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      add_or_leave_out(local(data[i]), left_out, [mine](std::int64_t bin) { ++mine[bin]; });
    }
  }
  // Merge: each bin is summed over the copies by one thread, so no update conflicts.
#pragma omp parallel for schedule(static)
  for (std::int64_t bin = 0; bin < num_bins; ++bin) {
    Counter total = 0;
    for (std::size_t t = 0; t < copies.team(); ++t) total += copies.copy(t)[bin];
    counts[bin] = total;
  }
  return left_out;
}

template <class Sample, class Counter, class Mapper>
std::uint64_t count_reduction(std::span<const Sample> samples, Counter* counts, std::int64_t num_bins,
                              const Mapper& map) {
  const auto n = static_cast<std::int64_t>(samples.size());
  std::uint64_t left_out = 0;
  // OpenMP gives each thread a private, zeroed counts[0:num_bins] and adds them up at the end.
#pragma omp parallel for reduction(+ : left_out) reduction(+ : counts[:num_bins])
  for (std::int64_t i = 0; i < n; ++i) {
    // Made in the loop, the lambda adds to this thread's private counts.
    add_or_leave_out(map(samples[i]), left_out, [&counts](std::int64_t bin) { ++counts[bin]; });
  }
  return left_out;
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
  std::fill(counts.begin(), counts.end(), Counter{0});
  std::uint64_t left_out = 0;
  switch (chose.used) {
    case strategy::critical: left_out = count_critical(samples, counts.data(), map); break;
    case strategy::atomic: left_out = count_atomic(samples, counts.data(), map); break;
    case strategy::privatized: left_out = count_privatized(samples, counts.data(), num_bins, map); break;
    case strategy::reduction: left_out = count_reduction(samples, counts.data(), num_bins, map); break;
    default: left_out = count_sequential(samples, counts.data(), map); break;
  }
  return {chose, left_out};
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
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      add_or_leave_out(local(samples[i]), left_out, [&](std::int64_t bin) { add(mine[bin], weights[i]); });
    }
  }
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
    std::fill(sums.begin(), sums.end(), 0.0);
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
  tally::detail::check_even_bins(function, bins);
  tally::detail::check_histogram_buffers(function, samples, counts, bins.num_bins);
  tally::detail::check_strategy(function, backend::cpu, operation::histogram, options.algorithm);
  const even_bin_mapper<Sample> even(bins, options.last_edge);
  if constexpr (is_small_sample_v<Sample>) {
    // Few values, so no grid: the shortcuts or the general rule (the GPU's value tables are filled
    // from this same mapper).
    return tally::detail::with_fastest_mapper(even, [&](const auto& map) {
      return detail::run_histogram(samples, counts, map, options.algorithm);
    });
  } else {
    if (tally::detail::even_bins_take_grid(even)) {  // as the GPU backend does
      using grid_mapper = tally::detail::grid_range_bin_mapper<Sample>;
      const auto edge_at = [&even](std::int64_t i) { return static_cast<double>(even.edge(i)); };
      std::vector<std::byte> tables(grid_mapper::table_bytes(bins.num_bins + 1));
      const grid_mapper map =
          grid_mapper::plan(edge_at, bins.num_bins + 1, options.last_edge).reading_tables_at(tables.data());
      map.fill_tables(edge_at, tables);
      return detail::run_histogram(samples, counts, map, options.algorithm);
    }
    return tally::detail::with_fastest_mapper(even, [&](const auto& map) {
      return detail::run_histogram(samples, counts, map, options.algorithm);
    });
  }
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
  tally::detail::check_even_bins(function, bins);
  tally::detail::check_weighted_buffers(function, samples, weights, sums, bins.num_bins, options.deterministic);
  tally::detail::check_strategy(function, backend::cpu, operation::weighted_histogram, options.algorithm);
  return detail::run_weighted(function, samples, weights, std::span<double>(sums), even_bin_mapper<Sample>(bins, options.last_edge),
                              options);
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
  tally::detail::check_range_edges(function, edges);
  tally::detail::check_histogram_buffers(function, samples, counts, static_cast<std::int64_t>(edges.size()) - 1);
  tally::detail::check_strategy(function, backend::cpu, operation::histogram, options.algorithm);
  if constexpr (is_small_sample_v<Sample>) {
    return detail::run_histogram(samples, counts, range_bin_mapper<Sample>(edges.data(), static_cast<std::int64_t>(edges.size()), options.last_edge),
                                 options.algorithm);
  } else {
    // The GPU's grid over the edges, its tables in host memory: a sample costs a cell and a compare
    // or two, where a search over all the edges costs log2(edges) dependent loads.
    using grid_mapper = tally::detail::grid_range_bin_mapper<Sample>;
    std::vector<std::byte> tables(grid_mapper::table_bytes(static_cast<std::int64_t>(edges.size())));
    const grid_mapper map(edges, options.last_edge, tables, tables.data());
    return detail::run_histogram(samples, counts, map, options.algorithm);
  }
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
  const auto num_bins = static_cast<std::int64_t>(counts.size());
  if (num_bins == 0) tally::throw_invalid_argument(function, "counts", "must hold at least one bin (num_bins is counts.size(), 0)");
  tally::detail::check_histogram_buffers(function, samples, counts, num_bins);
  tally::detail::check_strategy(function, backend::cpu, operation::histogram, options.algorithm);
  detail::check_no_negative(function, samples);
  return detail::run_histogram(samples, counts, bincount_mapper<Sample>(num_bins), options.algorithm);
}

}  // namespace tally::cpu
