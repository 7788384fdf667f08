// `tally bench`: every strategy of a backend, on every distribution, bin count and size asked
// for. Each result is checked against the CPU reference (the sequential strategy) before it is
// timed; a wrong result is reported and makes the exit code 1, and is never timed as if right.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "arguments.hpp"
#include "bench_report.hpp"
#include "commands.hpp"
#include "data_file.hpp"
#include "distributions.hpp"
#include "histogram_measure.hpp"
#include "host_timing.hpp"
#include "result_files.hpp"
#include "bench_gpus.hpp"
#include "run_environment.hpp"
#include "tally/cpu.hpp"
#include "tally/gpu.hpp"
#include "tally/gpu/timing.hpp"

namespace tally::cli {
namespace {

/// What `tally --help` says of `tally bench`, and what its result files hold.
const measuring_command bench_command{
    "bench", "Time every histogram strategy against the read bandwidth, each result verified first", "rows",
    "bars per strategy and distribution as a fraction of the read bandwidth"};

struct bench_config : result_files {
  std::string backend_name = "auto";
  std::vector<std::string> ops{"histogram"};
  std::vector<std::string> strategies;
  std::vector<std::string> distributions;
  std::vector<std::string> types{"int32"};
  std::vector<std::string> bins{"256", "4096"};
  std::vector<std::string> sizes;
  std::vector<std::string> range_kinds{"exact"};        ///< --range-kind: even bins' ranges
  std::vector<std::string> edge_layouts{"log", "random"};  ///< --edges: histogram_range's edges
  std::vector<std::string> weight_types{"float"};           ///< --weights: weighted_histogram's weights
  timing_options given;     ///< --runs, --warmup and --timing as given
  int runs = 0;             ///< timed runs per case: given, or the backend's default
  int warmup = 0;           ///< warm-up runs per case: likewise
  std::uint64_t seed = 20261122;
  std::string gpus;  ///< --gpus N|all: the scaling over GPUs instead of the strategies
};

/// `tally bench`'s own options, between --backend and the result files'.
void add_bench_options(CLI::App& command, bench_config& cfg) {
  add_list_option(command, "--ops", cfg.ops,
                  "Operations: histogram (default), histogram_range, weighted_histogram, reduce, count_if, "
                  "find_first_if; histogram_range counts into range bins (sorted edges, see --edges) on the "
                  "histogram cases, CUB's HistogramRange the peer; weighted_histogram sums weights (see --weights) "
                  "over the histogram cases, every weighted strategy, in double and deterministic; reductions run on the types of --types that reduce takes (not uint8), "
                  "every strategy, on uniform data");
  command
      .add_option("--strategies", cfg.strategies,
                  "Histogram strategies to run (default: automatic and every named one; weighted histograms and "
                  "reductions run all theirs)")
      ->delimiter(',');
  command
      .add_option("--dists", cfg.distributions,
                  "Distributions (default: all): " + distribution_names() + "; bank32 is strided32's old name")
      ->delimiter(',');
  add_list_option(command, "--range-kind", cfg.range_kinds,
                  "Ranges of even bins (histogram, weighted_histogram): exact, [0, bins) over samples generated in "
                  "[0, bins); general, the data's own range as numpy.histogram(a, bins) takes it, [min, max] "
                  "(min - 0.5 and max + 0.5 when equal), but counted half-open, [min, max): samples equal to max "
                  "are left out (upper_edge::exclusive, so that CUB runs the same case); general32, the same "
                  "range with the edges computed in float32 as numpy computes them for float32 data "
                  "(edge_arithmetic::float32; the range's bounds rounded to float32). Rows record the kind and "
                  "the lower and upper edges");
  add_list_option(command, "--edges", cfg.edge_layouts,
                  "Edges of histogram_range's B bins over [0, B]: log, e_k = (B + 1)^(k / B) - 1; random, "
                  "B - 1 interior edges drawn uniformly from (0, B) from the seed");
  add_list_option(command, "--weights", cfg.weight_types,
                  "Weight types of weighted_histogram: float (uniform in [0, 1) on a grid of 2^-24) and double "
                  "(uniform in [0, 1], every bit of the mantissa drawn at its magnitude, as computed data has: most "
                  "weights below 2^-12 have bits below 2^-64)");
  add_list_option(command, "--types", cfg.types,
                  "Sample types: " + dtype_names() +
                      "; the narrow ones count the bins their values reach (int8: 128, uint8: 256, float16: 2048, "
                      "bfloat16: 256, int16: 32768, uint16: 65536) and skip the rest");
  add_list_option(command, "--bins", cfg.bins, "Bin counts, e.g. 256,4096");
  command.add_option("--sizes", cfg.sizes, "Sample counts, e.g. 2^28 or 1e6 (default: 2^28 on a GPU, 2^22 on CPUs)")
      ->delimiter(',');
  cfg.given.add_to(command, "Timed runs per case; the median is reported (default: 15 GPU, 5 CPU)",
                   "Untimed runs before timing (default: 3 GPU, 1 CPU)");
  command.add_option("--seed", cfg.seed, "Seed of the generated inputs")->capture_default_str();
  command.add_option("--gpus", cfg.gpus,
                     "Instead of the strategies: even-bin histograms sharded over N GPUs of this machine (or all) "
                     "through tally::nccl, against one GPU's call on the same samples (--types int32,float32, "
                     "--bins, --dists, --sizes; default 2^30 samples, uniform)")
      ->type_name("N|all");
}

struct bench_case {
  const bench_config& config;
  backend where;
  std::vector<strategy> strategies;
  std::vector<distribution> distributions;
  std::vector<std::int64_t> bins;
  std::vector<std::int64_t> sizes;
  double read_bytes_per_s;
  std::vector<bench_row>& rows;
};

/// The bins of `kind` for a case of `num_bins` bins over `samples` (generated in bin space, [0,
/// num_bins)): even bins over `exact` [0, num_bins), or over the data's `general` range as
/// numpy.histogram(a, bins) takes it, [min, max] (widened by 0.5 each way where min == max, as
/// numpy does), counted half-open; or range bins with `log` or `random` edges over [0, num_bins],
/// which `edges` keeps.
template <class T>
histogram_bins bins_of_kind(const std::string& kind, std::int64_t num_bins, std::span<const T> samples,
                            std::uint64_t seed, std::vector<double>& edges) {
  if (kind == "general") {
    auto [lower, upper] = finite_extremes(samples);
    if (lower > upper) return even_bins{num_bins, 0.0, 1.0};  // no samples: numpy's range (0, 1)
    if (lower == upper) return even_bins{num_bins, lower - 0.5, upper + 0.5};
    return even_bins{num_bins, lower, upper};
  }
  if (kind == "general32") {
    // numpy's float32 arithmetic: min - 0.5 and max + 0.5 in float32 where they are equal.
    const auto [lowest, highest] = finite_extremes(samples);
    if (lowest > highest) return even_bins{num_bins, 0.0, 1.0, edge_arithmetic::float32};
    auto lower = static_cast<float>(lowest);
    auto upper = static_cast<float>(highest);
    if (lower == upper) {
      lower -= 0.5f;
      upper += 0.5f;
    }
    return even_bins{num_bins, lower, upper, edge_arithmetic::float32};
  }
  if (const auto layout = parse_edge_layout(kind)) {
    edges = generate_edges(*layout, num_bins, seed);
    return std::span<const double>(edges);
  }
  return even_bins{num_bins, 0.0, static_cast<double>(num_bins)};
}

/// Walks the cases that every histogram-shaped operation (histogram, histogram_range,
/// weighted_histogram) covers: each size, bin count and distribution asked for, with that
/// distribution's samples generated from the seed (the same inputs for every such operation, so
/// their rows compare), and each bins kind of `kinds` (bins_of_kind). Fills the row fields of the
/// case, reports the bin counts that T's values cannot reach (most_generated_bins: uint8 beyond 256
/// bins, ...) as skipped, and calls `run_case(base, samples, bins)` for the rest.
template <class T, class RunCase>
void for_each_binned_case(const bench_case& bc, const std::string& type_name, const std::string& operation,
                          const std::vector<std::string>& kinds, const RunCase& run_case) {
  const bench_config& cfg = bc.config;
  std::vector<double> edges;
  for (const std::int64_t size : bc.sizes) {
    std::vector<T> samples(static_cast<std::size_t>(size));
    for (const std::int64_t num_bins : bc.bins) {
      for (const distribution dist : bc.distributions) {
        bench_row base;
        base.operation = operation;
        base.sample_type = type_name;
        base.num_samples = size;
        base.distribution = std::string(to_string(dist));
        base.num_bins = num_bins;
        if (num_bins > most_generated_bins<T>()) {
          base.strategy = "all";
          base.verdict = fmt::format("skipped: {} samples reach the bins 0 to {} only", type_name,
                                     most_generated_bins<T>() - 1);
          bc.rows.push_back(base);
          continue;
        }
        generate_samples<T>(dist, num_bins, cfg.seed, samples);
        for (const std::string& kind : kinds) {
          if (!cfg.quiet) {
            std::fprintf(stderr, "[bench] %s%s n=%lld bins=%lld %s %s\n",
                         operation == "histogram" ? "" : (operation + " ").c_str(), type_name.c_str(),
                         static_cast<long long>(size), static_cast<long long>(num_bins), base.distribution.c_str(),
                         kind.c_str());
          }
          const histogram_bins bins = bins_of_kind<T>(kind, num_bins, samples, cfg.seed, edges);
          bench_row row = base;
          row.bins_kind = kind;
          if (const auto* even = std::get_if<even_bins>(&bins)) {
            row.lower = even->lower;
            row.upper = even->upper;
          } else {
            row.lower = edges.front();
            row.upper = edges.back();
          }
          run_case(row, std::span<const T>(samples), bins);
        }
      }
    }
  }
}

/// Histograms of even bins (`operation` histogram, over each of `kinds`: exact, general) or range
/// bins (histogram_range, over each edge layout of `kinds`), every strategy asked for, each checked
/// against the sequential CPU result first. Counters are 32-bit while the sizes allow (what users
/// pick, and CUB's fastest), else 64-bit.
template <class T, class Counter>
void run_type(const bench_case& bc, const std::string& type_name, const std::string& operation,
              const std::vector<std::string>& kinds) {
  const std::int64_t max_bins = *std::max_element(bc.bins.begin(), bc.bins.end());
  histogram_runner<T, Counter> runner(bc.where, max_bins, bc.config.runs, bc.config.warmup, bc.read_bytes_per_s,
                                      bc.config.given.gpu_timing());
  for_each_binned_case<T>(bc, type_name, operation, kinds, [&](const bench_row& base, std::span<const T> host_samples,
                                                               const histogram_bins& bins) {
    runner.run(base, host_samples, bins, bc.strategies, bc.rows);
  });
}

// ---- reduce, count_if and find_first_if rows ----------------------------------------------------

/// Reductions treat float16 and bfloat16 as the signed types they are.
template <class T>
inline constexpr bool is_signed_sample_v = std::is_signed_v<T> || is_half_float_v<T>;

/// How many consecutive values reduction inputs take: 2^21, or for the narrow types as many as
/// leave a value above them all (find_first_if's target): int8 128, int16 32768, uint16 32768,
/// float16 2048, bfloat16 256 (every integer of those, and the top one, exact).
template <class T>
constexpr std::int64_t reduce_value_count() {
  if constexpr (is_half_float_v<T>) {
    return std::int64_t{1} << T::digits;
  } else if constexpr (std::is_integral_v<T> && sizeof(T) <= 2) {
    const auto values = static_cast<std::int64_t>(std::numeric_limits<T>::max()) + 1;
    return std::is_signed_v<T> ? values : values / 2;
  } else {
    return std::int64_t{1} << 21;
  }
}

/// Reduction inputs: the uniform distribution over reduce_value_count values, shifted to start at
/// minus half of them for signed types (zero mean: sums cancel); floats carry eighths (float16
/// and bfloat16 what their precision holds of them), so every sample is exact.
template <class T>
void generate_reduce_samples(std::uint64_t seed, std::span<T> out) {
  constexpr std::int64_t values = reduce_value_count<T>();
  generate_samples<T>(distribution::uniform, values, seed, out);
  if constexpr (is_signed_sample_v<T>) {
    const auto n = static_cast<std::int64_t>(out.size());
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      T& x = out[static_cast<std::size_t>(i)];
      if constexpr (is_half_float_v<T>) {
        x = sample_from<T>(static_cast<double>(x) - static_cast<double>(values / 2));
      } else {
        x -= static_cast<T>(values / 2);
      }
    }
  }
}

/// Every sample is below this; find_first_if looks for samples >= it.
template <class T>
T reduce_sample_top() {
  constexpr std::int64_t values = reduce_value_count<T>();
  return sample_from<T>(static_cast<double>(is_signed_sample_v<T> ? values / 2 : values));
}

/// count_if's threshold: about half the samples are below it.
template <class T>
T reduce_sample_middle() {
  return sample_from<T>(is_signed_sample_v<T> ? 0.0 : static_cast<double>(reduce_value_count<T>() / 2));
}

/// Verifies one reduction result: bit-exact where the answer is exact, the stated bound for float
/// sums (|got - exact| <= (n - 1) eps sum|x|, exact taken in long double). Fills the verdict.
struct verification {
  std::string verdict;
  bool mismatch = false;
};

/// Times `run_once(stream)` (GPU: enqueues; CPU: runs) after `check()` has verified one run; a
/// row that fails its check is not timed. Slow strategies (atomic, or atomic
/// weighted sums on contended bins: a tenth of a second or more a run at 2^28) get fewer runs,
/// said in the row's note. Used by the reduction and weighted-histogram rows.
void verify_then_time(bench_row& row, const bench_case& bc, const std::function<verification()>& check,
                       const std::function<void(gpu::stream_t)>& run_once, std::int64_t bytes_read) {
  const bench_config& cfg = bc.config;
  const bool on_gpu = bc.where == backend::gpu;
  try {
    const auto start = std::chrono::steady_clock::now();
    const verification v = check();
    const double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    row.verdict = v.verdict;
    row.mismatch = v.mismatch;
    if (row.mismatch) {
      bc.rows.push_back(row);
      return;
    }
    int runs = cfg.runs;
    int warmup = cfg.warmup;
    constexpr double budget_ms = 3000.0;  // per row, beyond which runs are cut
    if (first_ms * (runs + warmup) > budget_ms) {
      runs = std::max(3, static_cast<int>(budget_ms / std::max(first_ms, 1e-3)));
      runs = std::min(runs, cfg.runs);
      warmup = 1;
      row.note = runs < cfg.runs ? fmt::format("{} runs, not {}: the checked run took {:.0f} ms", runs, cfg.runs, first_ms)
                                 : fmt::format("1 warm-up run, not {}: the checked run took {:.0f} ms", cfg.warmup, first_ms);
    }
    std::vector<double> times;
    if (on_gpu) {
      times = time_gpu_runs(row, run_once, warmup, runs, cfg.given.gpu_timing());
    } else {
      for (int run = 0; run < warmup + runs; ++run) {
        const double ms = host_ms([&] { run_once(nullptr); });
        if (run >= warmup) times.push_back(ms);
      }
    }
    summarize_times(row, std::move(times), bytes_read, bc.read_bytes_per_s);
  } catch (const error& e) {
    if (e.code() != errc::not_supported) throw;
    row.verdict = std::string("skipped: ") + e.what();
  }
  bc.rows.push_back(row);
}

/// Poisons the workspace's result word, so a call that writes nothing cannot pass as right.
void poison_scalar(gpu::workspace& ws) {
  const std::uint64_t poison = 0xababababababababull;
  gpu::detail::copy_to_device(ws.scalar(), &poison, sizeof(poison));
}

/// A row of `base`'s case (type, size, distribution) for a reduction: `operation`'s `variant` by `s`.
bench_row reduction_row(const bench_row& base, std::string operation, std::string variant, strategy s) {
  bench_row row = base;
  row.operation = std::move(operation);
  row.variant = std::move(variant);
  row.strategy = std::string(to_string(s));
  return row;
}

/// count_if or find_first_if (`op`) of `predicate` over `input` with strategy `s` on the case's
/// backend, checked, then timed: the GPU's `_async` form (its answer left in the poisoned
/// ws.scalar()) or the CPU's. The answer, a count or an index, must be `want`.
template <class T>
void verify_then_time_search(bench_row& row, const bench_case& bc, gpu::workspace& ws, operation op,
                             std::span<const T> input, compare_to<T> predicate, strategy s, std::uint64_t want,
                             std::int64_t bytes_read) {
  const bool on_gpu = bc.where == backend::gpu;
  const bool counts = op == operation::count_if;
  const reduce_options options{s};
  const auto gpu_call = [&](gpu::stream_t stream) {
    return counts ? gpu::count_if_async(input, predicate, ws, options, stream)
                  : gpu::find_first_if_async(input, predicate, ws, options, stream);
  };
  const auto cpu_call = [&]() -> std::pair<choice, std::uint64_t> {
    if (counts) {
      const count_result got = cpu::count_if(input, predicate, options);
      return {got.chose, got.count};
    }
    const find_result got = cpu::find_first_if(input, predicate, options);
    return {got.chose, static_cast<std::uint64_t>(got.index)};
  };
  const auto check = [&]() -> verification {
    choice chose;
    std::uint64_t got = 0;
    if (on_gpu) {
      poison_scalar(ws);
      chose = gpu_call(nullptr);
      got = ws.read_scalar(nullptr);
    } else {
      std::tie(chose, got) = cpu_call();
    }
    row.used = std::string(to_string(chose.used));
    if (got == want) return {"exact", false};
    return {fmt::format("MISMATCH {}{} != {}", counts ? "" : "index ", got, want), true};
  };
  verify_then_time(row, bc, check, [&](gpu::stream_t stream) {
    if (on_gpu) {
      (void)gpu_call(stream);
    } else {
      (void)cpu_call();
    }
  }, bytes_read);
}

/// What a float sum is checked against: the long double sum and sum|x| of the samples.
struct sum_reference {
  long double sum = 0;
  long double magnitude = 0;
};

template <class T>
sum_reference long_double_sum(std::span<const T> samples) {
  sum_reference r;
  for (const T x : samples) {
    long double value = 0;
    if constexpr (is_half_float_v<T>) {
      value = static_cast<double>(x);  // exact: every float16 and bfloat16 is a double
    } else {
      value = static_cast<long double>(x);
    }
    r.sum += value;
    r.magnitude += std::fabs(value);
  }
  return r;
}

/// Bit-exact where the answer is exact (integers, min/max, deterministic sums against the CPU's
/// bits); a float sum within (n - 1) eps sum|x| (+ long double's own n 2^-63 sum|x|) of `reference`,
/// eps of the type the sum accumulates in (float for float16 and bfloat16).
template <class T>
verification check_sum(accumulator_t<T> got, accumulator_t<T> want, std::int64_t n, const sum_reference& reference,
                       bool exact) {
  if constexpr (is_floating_sample_v<T>) {
    if (!exact) {
      const long double bound =
          static_cast<long double>(n) *
          (std::numeric_limits<accumulator_t<T>>::epsilon() + std::ldexp(1.0L, -63)) * reference.magnitude;
      const long double error = std::fabs(static_cast<long double>(got) - reference.sum);
      if (error <= bound) return {"within bound", false};
      return {fmt::format("MISMATCH sum {} off by {:.3g} > bound {:.3g}", got, static_cast<double>(error),
                          static_cast<double>(bound)),
              true};
    }
    if (std::memcmp(&got, &want, sizeof(got)) == 0) return {"exact", false};
    return {fmt::format("MISMATCH {} != {} (bits)", got, want), true};
  } else {
    if (got == want) return {"exact", false};
    return {fmt::format("MISMATCH {} != {}", got, want), true};
  }
}

std::vector<strategy> with_automatic(backend where, operation op) {
  std::vector<strategy> out{strategy::automatic};
  for (const strategy s : strategies_for(where, op)) out.push_back(s);
  return out;
}

template <class T>
void run_reduce_type(const bench_case& bc, const std::string& type_name, const std::vector<std::string>& ops,
                     bool with_min_max) {
  using A = accumulator_t<T>;
  const bench_config& cfg = bc.config;
  const bool on_gpu = bc.where == backend::gpu;
  const auto wants = [&](const char* op) { return std::find(ops.begin(), ops.end(), op) != ops.end(); };
  gpu::workspace ws;
  for (const std::int64_t size : bc.sizes) {
    std::vector<T> samples(static_cast<std::size_t>(size));
    generate_reduce_samples<T>(cfg.seed, samples);
    const std::span<const T> host(samples);
    gpu::device_buffer<T> device;
    if (on_gpu) device = gpu::device_buffer<T>(host);
    const std::span<const T> input = on_gpu ? device.const_span() : host;
    const std::int64_t bytes = size * static_cast<std::int64_t>(sizeof(T));
    if (!cfg.quiet) {
      std::fprintf(stderr, "[bench] reductions %s n=%lld\n", type_name.c_str(), static_cast<long long>(size));
    }
    bench_row base;
    base.sample_type = type_name;
    base.num_samples = size;
    base.distribution = "uniform";

    if (wants("reduce")) {
      std::vector<std::pair<reduce_op, bool>> cases{{reduce_op::sum, false}};
      if (is_floating_sample_v<T>) cases.emplace_back(reduce_op::sum, true);
      if (with_min_max) {
        cases.emplace_back(reduce_op::min, false);
        cases.emplace_back(reduce_op::max, false);
      }
      const sum_reference reference = is_floating_sample_v<T> ? long_double_sum(host) : sum_reference{};
      for (const auto& [op, deterministic] : cases) {
        reduce_options reference_options{on_gpu ? strategy::privatized : strategy::sequential};
        reference_options.deterministic = deterministic;
        const A want = cpu::reduce(host, op, reference_options).value;
        const bool exact = std::is_integral_v<T> || op != reduce_op::sum || deterministic;
        for (const strategy s : with_automatic(bc.where, operation::reduce)) {
          bench_row row = reduction_row(base, "reduce",
                                        std::string(op == reduce_op::sum   ? "sum"
                                                    : op == reduce_op::min ? "min"
                                                                           : "max") +
                                            (deterministic ? " deterministic" : ""),
                                        s);
          reduce_options options{s};
          options.deterministic = deterministic;
          const auto check = [&]() -> verification {
            reduce_result<T> got;
            if (on_gpu) {
              poison_scalar(ws);
              got.chose = gpu::reduce_async(input, op, ws, options);
              const std::uint64_t result_bits = ws.read_scalar(nullptr);
              std::memcpy(&got.value, &result_bits, sizeof(got.value));
            } else {
              got = cpu::reduce(input, op, options);
            }
            row.used = std::string(to_string(got.chose.used));
            return check_sum<T>(got.value, want, size, reference, exact);
          };
          verify_then_time(row, bc, check, [&](gpu::stream_t stream) {
            if (on_gpu) {
              (void)gpu::reduce_async(input, op, ws, options, stream);
            } else {
              (void)cpu::reduce(input, op, options);
            }
          }, bytes);
        }
      }
    }

    const compare_to<T> below_middle{comparison::less, reduce_sample_middle<T>()};
    if (wants("count_if")) {
      const std::uint64_t want = cpu::count_if(host, below_middle, {strategy::privatized}).count;
      for (const strategy s : with_automatic(bc.where, operation::count_if)) {
        bench_row row = reduction_row(base, "count_if", "half match", s);
        verify_then_time_search(row, bc, ws, operation::count_if, input, below_middle, s, want, bytes);
      }
    }

    if (wants("find_first_if")) {
      // The match at 1% of the input, then nowhere (a full pass): the early exit shows in the ratio.
      const compare_to<T> at_top{comparison::greater_equal, reduce_sample_top<T>()};
      std::vector<std::pair<std::string, std::int64_t>> placements{{"match at 1%", size / 100}, {"no match", size}};
      std::map<std::string, double> full_pass_ms;
      for (const auto& [variant, at] : placements) {
        if (at < size) samples[static_cast<std::size_t>(at)] = reduce_sample_top<T>();
        if (on_gpu) device.upload(host);
        for (const strategy s : with_automatic(bc.where, operation::find_first_if)) {
          bench_row row = reduction_row(base, "find_first_if", variant, s);
          // Bytes: those a sequential search reads, up to and including the match.
          verify_then_time_search(row, bc, ws, operation::find_first_if, input, at_top, s,
                                  static_cast<std::uint64_t>(at),
                                  std::min(at + 1, size) * static_cast<std::int64_t>(sizeof(T)));
          const bench_row& done = bc.rows.back();
          if (done.timed && at == size) full_pass_ms[done.strategy] = done.median_ms;
        }
        if (at < size) samples[static_cast<std::size_t>(at)] = sample_from<T>(0.0);
      }
      // The early-exit rows say what fraction of a full pass they took.
      for (bench_row& row : bc.rows) {
        if (row.operation == "find_first_if" && row.variant == "match at 1%" && row.sample_type == type_name &&
            row.num_samples == size && row.timed && full_pass_ms.contains(row.strategy)) {
          const double share = 100.0 * row.median_ms / full_pass_ms[row.strategy];
          row.note = (row.note.empty() ? "" : row.note + "; ") + fmt::format("{:.1f}% of the full pass", share);
        }
      }
    }
  }
}

// ---- weighted histogram rows --------------------------------------------------------------------
// CUB has no weighted histogram, so these rows have no peer; the report says so once.

/// What weighted rows are checked against: the CPU backend's deterministic sums (the contract:
/// every deterministic row gives these bits), the samples in each bin and the largest weight (the
/// bound of the rows that sum in double), and the samples left out.
struct weighted_reference {
  std::vector<double> sums;
  std::vector<std::uint64_t> counts;
  std::uint64_t left_out = 0;
  double max_abs_weight = 0;
};

/// Deterministic sums: bit for bit against the reference. Sums in double: per bin of c samples,
///   |got - ref| <= c (c eps max|w| + 2^-33) + eps |ref|,   eps = 2^-52,
/// the sum of two bounds on the distance to the exact sum of the bin's weights:
/// - got: c - 1 double additions in any order and grouping (atomics, per-block or per-thread
///   copies merged later) are within (c - 1) u sum|w| / (1 - (c - 1) u) of it, u = 2^-53 (Higham,
///   Accuracy and Stability of Numerical Algorithms, 2nd ed., section 4.2); sum|w| <= c max|w|,
///   and since c < 2^32 makes (c - 1) u < 2^-21, eps = 2u covers the denominator with room for the
///   rounding of the bound itself;
/// - ref: the fixed-point sum is within c 2^-33 + ulp(ref) / 2 <= c 2^-33 + eps |ref| / 2
///   (detail/fixed_point_weight.hpp).
/// An empty bin must hold exactly 0. The left-out counts must agree in both cases.
verification check_weighted(std::span<const double> got, std::uint64_t got_left_out, const weighted_reference& ref,
                            bool deterministic) {
  if (got_left_out != ref.left_out) {
    return {fmt::format("MISMATCH left out {} != {}", got_left_out, ref.left_out), true};
  }
  constexpr double eps = std::numeric_limits<double>::epsilon();
  for (std::size_t bin = 0; bin < got.size(); ++bin) {
    if (deterministic) {
      if (std::memcmp(&got[bin], &ref.sums[bin], sizeof(double)) != 0) {
        return {fmt::format("MISMATCH bin {}: {} != {} (bits)", bin, got[bin], ref.sums[bin]), true};
      }
      continue;
    }
    const auto c = static_cast<double>(ref.counts[bin]);
    const double bound = c * (c * eps * ref.max_abs_weight + 0x1.0p-33) + eps * std::fabs(ref.sums[bin]);
    const double error = std::fabs(got[bin] - ref.sums[bin]);
    if (!(error <= bound)) {  // NaN fails too
      return {fmt::format("MISMATCH bin {}: {} off by {:.3g} > bound {:.3g}", bin, got[bin], error, bound), true};
    }
  }
  return {deterministic ? "exact" : "within bound", false};
}

/// Weighted histograms of T samples with Weight weights (generate_weights, seeded), summed in
/// double and, with `deterministic`, in fixed point; every strategy of the backend and automatic,
/// on the cases (sizes, bins, distributions) of the histogram rows. Bytes read: samples + weights.
template <class T, class Weight>
void run_weighted_type(const bench_case& bc, const std::string& type_name, const std::string& weight_name) {
  const bench_config& cfg = bc.config;
  const bool on_gpu = bc.where == backend::gpu;
  const std::int64_t max_bins = *std::max_element(bc.bins.begin(), bc.bins.end());
  std::vector<double> got(static_cast<std::size_t>(max_bins));
  gpu::device_buffer<double> device_sums;
  if (on_gpu) device_sums = gpu::device_buffer<double>(static_cast<std::size_t>(max_bins));
  gpu::workspace ws;
  std::vector<Weight> weights;
  gpu::device_buffer<T> device_samples;
  gpu::device_buffer<Weight> device_weights;
  weighted_reference reference;
  // The reference runs on the CPU: its automatic choice on a GPU machine (privatized while the
  // private copies fit, so fast at 2^28; deterministic sums are the same bits whatever the
  // strategy), the sequential strategy when the CPU backend is measured (independent of the
  // privatized rows it checks).
  const histogram_options reference_options{on_gpu ? strategy::automatic : strategy::sequential};

  for_each_binned_case<T>(bc, type_name, "weighted_histogram", cfg.range_kinds, [&](const bench_row& base,
                                                                                     std::span<const T> host_samples,
                                                                                     const histogram_bins& case_bins) {
    const even_bins& bins = std::get<even_bins>(case_bins);  // weighted rows take even bins' kinds only
    if (weights.size() != host_samples.size()) {  // a new size: new weights
      weights.assign(host_samples.size(), Weight{0});
      generate_weights(cfg.seed, weights);
      reference.max_abs_weight = 0;
      for (const Weight w : weights) reference.max_abs_weight = std::max(reference.max_abs_weight, std::fabs(double{w}));
      if (on_gpu) {
        device_samples = gpu::device_buffer<T>();  // free the last size's buffers before taking the next
        device_weights = gpu::device_buffer<Weight>();
        device_samples = gpu::device_buffer<T>(host_samples.size());
        device_weights = gpu::device_buffer<Weight>(std::span<const Weight>(weights));
      }
    }
    if (on_gpu) device_samples.upload(host_samples);
    const std::span<const Weight> host_weights(weights);
    const auto num_bins = static_cast<std::size_t>(bins.num_bins);
    reference.sums.assign(num_bins, 0.0);
    reference.counts.assign(num_bins, 0);
    histogram_options deterministic_reference = reference_options;
    deterministic_reference.deterministic = true;
    const std::span<double> reference_sums(reference.sums);
    reference.left_out =
        cpu::histogram_even(host_samples, host_weights, reference_sums, bins, deterministic_reference).left_out;
    (void)cpu::histogram_even(host_samples, std::span<std::uint64_t>(reference.counts), bins, reference_options);
    const std::span<double> have(got.data(), num_bins);
    const std::int64_t bytes = base.num_samples * static_cast<std::int64_t>(sizeof(T) + sizeof(Weight));

    for (const bool deterministic : {false, true}) {
      for (const strategy s : with_automatic(bc.where, operation::weighted_histogram)) {
        bench_row row = base;
        row.variant = weight_name + (deterministic ? " weights, deterministic" : " weights");
        row.strategy = std::string(to_string(s));
        histogram_options options{s};
        options.deterministic = deterministic;
        const auto run_once = [&](gpu::stream_t stream) -> histogram_result {
          if (on_gpu) {
            const std::span<double> sums = device_sums.span().first(num_bins);
            return {gpu::histogram_even_async(device_samples.const_span(), device_weights.const_span(), sums, bins, ws,
                                              options, stream),
                    0};
          }
          return cpu::histogram_even(host_samples, host_weights, have, bins, options);
        };
        const auto check = [&]() -> verification {
          // Poison: 0x7f bytes make each double about 1.4e306, so a bin left unwritten, or added
          // to without being zeroed first, is far outside any bound.
          std::uint64_t left_out = 0;
          if (on_gpu) {
            device_sums.fill_bytes(0x7f);
            poison_scalar(ws);
            row.used = std::string(to_string(run_once(nullptr).chose.used));
            left_out = ws.read_scalar(nullptr);
            device_sums.download(have);
          } else {
            std::memset(have.data(), 0x7f, have.size_bytes());
            const histogram_result result = run_once(nullptr);
            row.used = std::string(to_string(result.chose.used));
            left_out = result.left_out;
          }
          return check_weighted(have, left_out, reference, deterministic);
        };
        verify_then_time(row, bc, check, [&](gpu::stream_t stream) { (void)run_once(stream); }, bytes);
      }
    }
  });
}

/// Calls `run.template operator()<T>()` with the sample type named `type` (one of --types, checked).
template <class Run>
void with_sample_type(const std::string& type, const Run& run) {
  visit_dtype(*parse_dtype(type), [&]<class T>(std::type_identity<T>) { run.template operator()<T>(); });
}

/// --gpus: the scaling measurement (bench_gpus.cpp) with this command's lists.
int run_bench_gpus(const bench_config& cfg) {
  gpus_bench_request request;
  const int devices = gpu::device_count();
  const std::int64_t asked = cfg.gpus == "all" ? devices : parse_count(cfg.gpus, "tally bench", "--gpus");
  if (asked < 1 || asked > devices) {
    throw_invalid_argument("tally bench", "--gpus",
                           "asks for " + cfg.gpus + " GPUs; this machine has " + std::to_string(devices));
  }
  request.gpus = static_cast<int>(asked);
  request.types = cfg.types;
  for (const std::string& name : cfg.distributions) {
    const auto d = parse_distribution(name);
    if (!d) throw_invalid_argument("tally bench", "--dists", "has an unknown distribution '" + name + "'");
    request.distributions.push_back(*d);
  }
  if (request.distributions.empty()) request.distributions.push_back(*parse_distribution("uniform"));
  for (const std::string& text : cfg.bins) request.bins.push_back(parse_count(text, "tally bench", "--bins"));
  for (const std::string& text : cfg.sizes) request.sizes.push_back(parse_count(text, "tally bench", "--sizes"));
  if (request.sizes.empty()) request.sizes.push_back(std::int64_t{1} << 30);
  request.runs = cfg.given.runs_or_default(true);
  request.warmup = cfg.given.warmup_or_default(true);
  request.seed = cfg.seed;
  return run_bench_across_gpus(request, cfg);
}

int run_bench(const bench_config& cfg) {
  cfg.check("tally bench");
  if (!cfg.gpus.empty()) return run_bench_gpus(cfg);
  backend where = backend::cpu;
  if (cfg.backend_name == "gpu" || (cfg.backend_name == "auto" && gpu::device_count() > 0)) where = backend::gpu;
  if (where == backend::gpu && gpu::device_count() == 0) {
    throw error(errc::not_supported, "--backend",
                gpu::built_with_cuda() ? "tally bench: --backend gpu, but no GPU is present"
                                       : "tally bench: --backend gpu, but tally was built without CUDA");
  }
  const bool on_gpu = where == backend::gpu;

  static const std::vector<std::string> known_ops{"histogram", "histogram_range", "weighted_histogram", "reduce",
                                                  "count_if", "find_first_if"};
  for (const std::string& op : cfg.ops) {
    if (std::find(known_ops.begin(), known_ops.end(), op) == known_ops.end()) {
      throw_invalid_argument("tally bench", "--ops", "has an unknown operation '" + op + "'");
    }
  }
  const auto wants = [&](std::string_view op) {
    return std::find(cfg.ops.begin(), cfg.ops.end(), op) != cfg.ops.end();
  };
  const bool histograms = wants("histogram");
  const bool range_bins = wants("histogram_range");
  for (const std::string& kind : cfg.range_kinds) {
    if (kind != "exact" && kind != "general" && kind != "general32") {
      throw_invalid_argument("tally bench", "--range-kind",
                             "has an unknown range kind '" + kind + "' (exact, general, general32)");
    }
  }
  if (cfg.range_kinds.empty()) throw_invalid_argument("tally bench", "--range-kind", "needs at least one kind");
  for (const std::string& weight : cfg.weight_types) {
    if (weight != "float" && weight != "double") {
      throw_invalid_argument("tally bench", "--weights", "has an unknown weight type '" + weight + "' (float, double)");
    }
  }
  if (cfg.weight_types.empty()) throw_invalid_argument("tally bench", "--weights", "needs at least one type");
  const bool double_weights =
      std::find(cfg.weight_types.begin(), cfg.weight_types.end(), "double") != cfg.weight_types.end();
  for (const std::string& layout : cfg.edge_layouts) {
    if (!parse_edge_layout(layout)) {
      throw_invalid_argument("tally bench", "--edges", "has an unknown edge layout '" + layout + "' (log, random)");
    }
  }
  if (cfg.edge_layouts.empty()) throw_invalid_argument("tally bench", "--edges", "needs at least one layout");
  const bool weighted = wants("weighted_histogram");
  const bool reductions = wants("reduce") || wants("count_if") || wants("find_first_if");

  std::vector<strategy> strategies;
  if (cfg.strategies.empty()) {
    strategies.push_back(strategy::automatic);
    for (strategy s : strategies_for(where, operation::histogram)) strategies.push_back(s);
  }
  for (const std::string& name : cfg.strategies) {
    const strategy s = parse_strategy_option(name, "tally bench", "--strategies",
                                             "the " + std::string(to_string(where)) + " backend runs automatic, " +
                                                 strategy_list(where));
    if (!supports(where, operation::histogram, s)) {
      throw_invalid_argument("tally bench", "--strategies",
                             "has '" + name + "', which the " + std::string(to_string(where)) +
                                 " backend does not implement for histograms");
    }
    strategies.push_back(s);
  }
  std::vector<distribution> distributions;
  if (cfg.distributions.empty()) distributions = standard_distributions();
  for (const std::string& name : cfg.distributions) {
    const auto d = parse_distribution(name);
    if (!d) throw_invalid_argument("tally bench", "--dists", "has an unknown distribution '" + name + "'");
    distributions.push_back(*d);
  }
  std::vector<std::int64_t> bin_counts;
  for (const std::string& text : cfg.bins) {
    const std::int64_t b = parse_count(text, "tally bench", "--bins");
    if (b <= 0) throw_invalid_argument("tally bench", "--bins", "must be > 0");
    bin_counts.push_back(b);
  }
  if (bin_counts.empty()) throw_invalid_argument("tally bench", "--bins", "needs at least one bin count");
  std::vector<std::int64_t> sizes;
  for (const std::string& text : cfg.sizes) sizes.push_back(parse_count(text, "tally bench", "--sizes"));
  if (sizes.empty()) sizes.push_back(on_gpu ? std::int64_t{1} << 28 : std::int64_t{1} << 22);
  if (weighted && *std::max_element(sizes.begin(), sizes.end()) >= std::int64_t{1} << 32) {
    throw_invalid_argument("tally bench", "--sizes",
                           "must stay below 2^32 for weighted_histogram (its rows are checked against the "
                           "deterministic CPU result, which takes fewer than 2^32 samples)");
  }
  for (const std::string& type : cfg.types) {
    if (!parse_dtype(type)) {
      throw_invalid_argument("tally bench", "--types", "has an unknown type '" + type + "' (" + dtype_names() + ")");
    }
  }
  cfg.given.check("tally bench");
  bench_config effective = cfg;
  effective.runs = cfg.given.runs_or_default(on_gpu);
  effective.warmup = cfg.given.warmup_or_default(on_gpu);

  // The largest input, checked before anything is allocated: the samples of the widest type (and
  // a float weight each for weighted histograms), on the host and, on a GPU, on the device too.
  const std::int64_t largest = *std::max_element(sizes.begin(), sizes.end());
  std::size_t widest = 0;
  std::string widest_name;
  for (const std::string& type : cfg.types) {
    if (size_of(*parse_dtype(type)) > widest) {
      widest = size_of(*parse_dtype(type));
      widest_name = type;
    }
  }
  const double sample_bytes = static_cast<double>(largest) * static_cast<double>(widest);
  const std::size_t weight_bytes = double_weights ? sizeof(double) : sizeof(float);
  const double input_bytes = sample_bytes + (weighted ? static_cast<double>(largest) * weight_bytes : 0.0);
  const double counter_bytes =
      static_cast<double>(*std::max_element(bin_counts.begin(), bin_counts.end())) * sizeof(std::uint64_t);
  check_memory_fits("tally bench", "--sizes",
                    fmt::format("{} {} samples{}", largest, widest_name,
                                weighted ? (double_weights ? " and their double weights" : " and their float weights") : ""),
                    where, input_bytes + 2 * counter_bytes, input_bytes + counter_bytes);

  bench_environment env;
  static_cast<run_environment&>(env) = describe_run_environment(where);
  if (!cfg.quiet) std::fprintf(stderr, "[bench] measuring the read bandwidth\n");
  measure_read_bandwidth(where, env, cfg.given.gpu_timing(), static_cast<std::uint64_t>(sample_bytes));
  env.warmup_runs = effective.warmup;
  std::vector<bench_row> rows;
  const bench_case run{effective, where, strategies, distributions, bin_counts, sizes, env.read_bytes_per_s, rows};
  print_environment(stdout, env);
  std::fflush(stdout);

  const bool narrow = *std::max_element(sizes.begin(), sizes.end()) <= std::int64_t{0xffffffff};
  const auto run_histograms = [&](const std::string& operation, const std::vector<std::string>& kinds) {
    for (const std::string& type : cfg.types) {
      with_sample_type(type, [&]<class T>() {
        if (narrow) {
          run_type<T, std::uint32_t>(run, type, operation, kinds);
        } else {
          run_type<T, std::uint64_t>(run, type, operation, kinds);
        }
      });
    }
  };
  if (histograms) run_histograms("histogram", cfg.range_kinds);
  if (range_bins) run_histograms("histogram_range", cfg.edge_layouts);
  for (const std::string& type : weighted ? cfg.types : std::vector<std::string>{}) {
    with_sample_type(type, [&]<class T>() {
      for (const std::string& weight : cfg.weight_types) {
        if (weight == "float") {
          run_weighted_type<T, float>(run, type, weight);
        } else {
          run_weighted_type<T, double>(run, type, weight);
        }
      }
    });
  }
  // Reductions: every type asked for that reduce takes (uint8 is left out); min and max for the
  // first of them only, sums and counts for all.
  bool first_reduce_type = true;
  for (const std::string& type : reductions ? cfg.types : std::vector<std::string>{}) {
    with_sample_type(type, [&]<class T>() {
      if constexpr (is_reduce_sample_v<T>) {
        run_reduce_type<T>(run, type, cfg.ops, first_reduce_type);
        first_reduce_type = false;
      }
    });
  }
  print_table(stdout, rows);
  print_reduce_table(stdout, rows);
  print_summary(stdout, env, rows);
  return cfg.finish("tally bench", bench_csv_comment(env), bench_document("bench", env), rows, bench_fields);
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  add_measuring_command(app, exit_code, bench_command, run_bench, add_bench_options);
}

}  // namespace tally::cli
