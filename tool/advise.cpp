// `tally advise`: which histogram strategy to use for this input. Measures every exact strategy of
// the backend (and CUB on a GPU) on the user's data file or a named distribution, each checked
// against the CPU reference first (bench's runner), picks the fastest, compares it with what
// `automatic` chose and why, and explains the result in one paragraph computed from the measured
// numbers and the input itself: how concentrated the samples are, how often 32 neighbouring
// samples hit one bin, and whether the bins fit where privatization needs them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "arguments.hpp"
#include "bench_report.hpp"
#include "commands.hpp"
#include "data_file.hpp"
#include "distributions.hpp"
#include "histogram_measure.hpp"
#include "plot.hpp"
#include "result_files.hpp"
#include "run_environment.hpp"
#include "tally/cpu/parallel.hpp"
#include "tally/error.hpp"
#include "tally/gpu.hpp"

namespace tally::cli {
namespace {

constexpr const char* command_name = "tally advise";
/// More bins than this is a bincount of ids, not a histogram to advise on.
constexpr std::int64_t most_bins = std::int64_t{1} << 26;
/// Samples that 32 lanes of a warp (or 32 updates in a row on a CPU) take together.
constexpr std::size_t window = 32;

struct advise_arguments {
  std::string file;
  std::string type_name;
  std::string distribution_name;
  std::string samples;
  std::int64_t bins = 0;
  double lower = 0;
  double upper = 0;
  std::string backend_name = "auto";
  timing_options measuring;  ///< --runs, --warmup and --timing
  std::uint64_t seed = 20261122;
  std::string json;
  std::string plot;
  bool quiet = false;
  CLI::Option* lower_option = nullptr;
  CLI::Option* upper_option = nullptr;
};

/// What the input's counts and order say about contention, computed from the reference histogram
/// and from the samples themselves.
struct input_shape {
  std::uint64_t counted = 0;
  std::uint64_t left_out = 0;
  std::int64_t used_bins = 0;  ///< bins with at least one sample
  double top_share = 0;        ///< share of the counted samples in the fullest bin
  double top32_share = 0;      ///< in the 32 fullest bins
  std::int64_t windows = 0;    ///< runs of 32 consecutive samples measured (none below 32 samples)
  double window_distinct = 0;  ///< mean distinct bins among 32 consecutive samples
  double window_depth = 0;     ///< mean count of the most common bin among 32 consecutive samples
};

template <class Counter>
void describe_counts(std::span<const Counter> counts, input_shape& shape) {
  std::vector<std::uint64_t> sorted(counts.begin(), counts.end());
  for (const std::uint64_t c : sorted) {
    shape.counted += c;
    if (c > 0) ++shape.used_bins;
  }
  const std::size_t top = std::min(window, sorted.size());
  std::partial_sort(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(top), sorted.end(),
                    std::greater<>());
  std::uint64_t top32 = 0;
  for (std::size_t i = 0; i < top; ++i) top32 += sorted[i];
  if (shape.counted > 0) {
    shape.top_share = static_cast<double>(sorted[0]) / static_cast<double>(shape.counted);
    shape.top32_share = static_cast<double>(top32) / static_cast<double>(shape.counted);
  }
}

/// Per window of 32 consecutive samples: how many distinct bins, and how many samples share the
/// most common one (samples outside the bins take no part). The bin is computed in double from the
/// edges, which may differ from the library's exact mapping for a sample on an edge: good enough to
/// describe contention, never used to check a result.
template <class T>
void describe_order(std::span<const T> samples, const even_bins& bins, input_shape& shape) {
  const auto windows = static_cast<std::int64_t>(samples.size() / window);
  shape.windows = windows;
  if (windows == 0) return;
  const double scale = static_cast<double>(bins.num_bins) / (bins.upper - bins.lower);
  double distinct_sum = 0;
  double depth_sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : distinct_sum, depth_sum)
  for (std::int64_t w = 0; w < windows; ++w) {
    std::int64_t in_window[window];
    std::size_t n = 0;
    for (std::size_t i = 0; i < window; ++i) {
      const double x = static_cast<double>(samples[static_cast<std::size_t>(w) * window + i]);
      if (!(x >= bins.lower && x < bins.upper)) continue;  // NaN too
      in_window[n++] = std::min(static_cast<std::int64_t>((x - bins.lower) * scale), bins.num_bins - 1);
    }
    std::sort(in_window, in_window + n);
    std::size_t distinct = 0;
    std::size_t deepest = 0;
    for (std::size_t i = 0; i < n;) {
      std::size_t j = i;
      while (j < n && in_window[j] == in_window[i]) ++j;
      ++distinct;
      deepest = std::max(deepest, j - i);
      i = j;
    }
    distinct_sum += static_cast<double>(distinct);
    depth_sum += static_cast<double>(deepest);
  }
  shape.window_distinct = distinct_sum / static_cast<double>(windows);
  shape.window_depth = depth_sum / static_cast<double>(windows);
}

/// The next value above `x`, a finite T, that bins of T samples tell apart from it: the next double
/// up, or for float16 and bfloat16 (whose bins' edges are rounded to them) the next value of theirs.
template <class T>
double next_up(double x) {
  if constexpr (is_half_float_v<T>) {
    const T h = T::from_exact(x);
    T up = h;
    if (x == 0.0) {
      up.bits = 1;  // the smallest positive subnormal, above -0 and +0
    } else {
      up.bits = static_cast<std::uint16_t>(x > 0 ? h.bits + 1 : h.bits - 1);  // magnitudes order as their bits
    }
    if (!std::isfinite(static_cast<double>(up))) {
      // x is the largest finite value: one step past it (an edge the library rounds to infinity).
      T below = h;
      below.bits = static_cast<std::uint16_t>(h.bits - 1);
      return x + (x - static_cast<double>(below));
    }
    return static_cast<double>(up);
  } else {
    return std::nextafter(x, std::numeric_limits<double>::infinity());
  }
}

/// The data's range as bins: integers [min, max + 1) (every value in a bin of its own when the
/// bin count is the value count), floating point [min, max] with max just inside (float16 and
/// bfloat16: the next value of theirs, as their bins' edges are rounded to them); equal min and
/// max widened by 0.5 each way, as numpy does. NaN and infinities take no part.
template <class T>
even_bins data_range(std::span<const T> samples, std::int64_t num_bins, const std::string& path) {
  const auto [lo, hi] = finite_extremes(samples);
  if (!(lo <= hi)) {
    throw error(errc::invalid_argument, "--file",
                fmt::format("{}: argument '--file': '{}' has no finite sample to take a range from", command_name,
                            path));
  }
  if (lo == hi) return {num_bins, lo - 0.5, hi + 0.5};
  const double just_above = next_up<T>(hi);
  // Integers beyond 2^53 have no hi + 1 in double: the next double up keeps the largest inside.
  if constexpr (std::is_integral_v<T>) return {num_bins, lo, std::max(hi + 1, just_above)};
  return {num_bins, lo, just_above};
}

const bench_row* find_row(const std::vector<bench_row>& rows, std::string_view strategy_name) {
  for (const bench_row& r : rows) {
    if (r.strategy == strategy_name && r.timed && r.verdict == "exact") return &r;
  }
  return nullptr;
}

/// "1.52 ms (runs 1.40-1.71)": a median with the spread of the runs it comes from.
std::string timing_with_spread(const bench_row& row) {
  return fmt::format("{:.3g} ms (runs {:.3g}-{:.3g})", row.median_ms, row.min_ms, row.max_ms);
}

/// Whether `slow` is slower than `fast` beyond the noise: even its fastest run is slower than the
/// slowest run of `fast`. Medians of a few runs on a shared machine swing far more than the
/// difference between two good strategies (automatic's "N% slower" swung 89-188% on identical runs).
bool slower_beyond_noise(const bench_row& slow, const bench_row& fast) { return slow.min_ms > fast.max_ms; }

/// "35% slower", or past twice the time "4.2x the time".
std::string slowdown(double slow_ms, double fast_ms) {
  const double ratio = slow_ms / fast_ms;
  return ratio >= 2 ? fmt::format("{:.1f}x the time", ratio) : fmt::format("{:.0f}% slower", 100 * (ratio - 1));
}

std::string speed_ratio(const bench_row& fast, const bench_row& slow) {
  const double r = slow.median_ms / fast.median_ms;
  return r >= 10 ? fmt::format("{:.0f}x", r) : fmt::format("{:.1f}x", r);
}

bool is_privatizing(std::string_view s) {
  for (const std::string_view p : {"shared_atomic", "two_phase", "warp_aggregated", "replicated", "packed16",
                                   "global_privatized", "privatized", "reduction"}) {
    if (s == p) return true;
  }
  return false;
}

struct advice {
  std::string recommendation;
  std::string paragraph;
};

/// The one paragraph: the input, its contention, where privatized copies fit, what was measured,
/// why (privatize when updates contend and the copies fit, else plain atomics), and what automatic
/// did.
advice explain(const std::vector<bench_row>& rows, const input_shape& shape, const even_bins& bins,
               const std::string& input_text, backend where, std::size_t counter_bytes) {
  const bench_row* best = nullptr;
  for (const bench_row& r : rows) {
    if (r.strategy == "automatic" || !r.timed || r.verdict != "exact") continue;
    if (best == nullptr || r.median_ms < best->median_ms) best = &r;
  }
  if (best == nullptr) {
    throw std::runtime_error(std::string(command_name) + ": no strategy gave an exact result to time");
  }
  const bool on_gpu = where == backend::gpu;
  std::string text;
  text += fmt::format("{} over {} bins [{:g}, {:g}): {} of the bins are used; the fullest holds {:.1f}% of the "
                      "counted samples and the 32 fullest {:.1f}%{}. ",
                      input_text, bins.num_bins, bins.lower, bins.upper, shape.used_bins, 100 * shape.top_share,
                      100 * shape.top32_share,
                      shape.left_out > 0 ? fmt::format(" ({} samples fall outside the bins)", shape.left_out) : "");

  const char* contention = shape.window_depth >= 16  ? "collide heavily: atomics on one address serialize"
                           : shape.window_depth >= 4 ? "collide often"
                                                     : "rarely collide";
  if (shape.windows > 0) {
    text += fmt::format("Among 32 consecutive samples there are {:.1f} distinct bins on average and the most common "
                        "one takes {:.1f} of them, so updates {}. ",
                        shape.window_distinct, shape.window_depth, contention);
  } else {
    text += "With fewer than 32 samples there is no run of 32 to measure contention on. ";
  }

  const double copy_bytes = static_cast<double>(bins.num_bins) * static_cast<double>(counter_bytes);
  bool fits_private = true;
  if (on_gpu) {
    const auto shared = static_cast<double>(gpu::describe_device().shared_memory_per_block_optin);
    // A block's copy as the library lays it out: whole rows of 32 words, and one word past the
    // bins for the samples it leaves out.
    const double counting_bytes = std::ceil(static_cast<double>(bins.num_bins + 1) / 32.0) * 32.0 * 4.0;
    fits_private = counting_bytes <= shared;
    text += fmt::format("The {} counters take {}, which {} the {} of shared memory a block may have{}. ",
                        bins.num_bins, bytes_text(copy_bytes), fits_private ? "fits in" : "does not fit in",
                        bytes_text(shared),
                        fits_private ? ", so each block can count privately in shared memory"
                                     : ", so a block cannot keep a full private copy in shared memory");
  } else {
    const int threads = cpu::detail::max_threads();
    text += fmt::format("A private copy of the counters is {} per thread, {} for the {} threads. ",
                        bytes_text(copy_bytes), bytes_text(copy_bytes * threads), threads);
  }

  const bench_row* atomic = find_row(rows, "atomic");
  const bench_row* lock = on_gpu ? nullptr : find_row(rows, "critical");
  const bench_row* cub = on_gpu ? find_row(rows, "cub") : nullptr;
  text += fmt::format("Measured, {} was fastest: {}, {:.2f} of the read bandwidth", best->strategy,
                      timing_with_spread(*best), best->read_fraction);
  std::string close;
  for (const bench_row& r : rows) {
    if (&r == best || r.strategy == "automatic" || !r.timed || r.verdict != "exact") continue;
    if (!slower_beyond_noise(r, *best)) close += (close.empty() ? "" : ", ") + r.strategy;
  }
  if (!close.empty()) text += fmt::format(" (within noise of it: {}, whose runs overlap its runs)", close);
  if (atomic != nullptr && atomic != best) {
    text += fmt::format(", {} the speed of {} (one atomic per sample)", speed_ratio(*best, *atomic), atomic->strategy);
  }
  if (lock != nullptr && lock != best) {
    text += fmt::format(" and {} that of critical (one lock for every update)", speed_ratio(*best, *lock));
  }
  if (cub != nullptr && cub != best) text += fmt::format("; CUB reached {:.2f}", cub->read_fraction);
  text += ". ";

  const std::string& w = best->strategy;
  if (is_privatizing(w)) {
    text += shape.window_depth >= 4
                ? "This is the case for privatization: with updates that contend, counting in "
                  "private copies first and merging once keeps the contended atomics out of the shared counters. "
                : "Privatization wins even though updates rarely collide: private copies are updated in fast, "
                  "near memory, and only the merge touches the shared counters. ";
  } else if (w == "atomic") {
    text += fits_private ? "Plain atomics win: the samples spread over many bins and rarely collide (the "
                           "low-contention case), and private copies cost more than they save. "
                         : "Plain atomics win because private copies do not fit where they would be fast; "
                           "privatization needs the copies to fit. ";
  } else if (w == "sequential") {
    const bench_row* parallel = nullptr;
    for (const bench_row& r : rows) {
      if (r.strategy == "automatic" || r.strategy == "sequential" || !r.timed || r.verdict != "exact") continue;
      if (parallel == nullptr || r.median_ms < parallel->median_ms) parallel = &r;
    }
    text += parallel != nullptr
                ? fmt::format("One thread wins: the best parallel strategy, {}, took {:.3g} ms, so at {} samples "
                              "starting and merging threads (or sharing the cores with other work) costs more "
                              "than it saves. ",
                              parallel->strategy, parallel->median_ms, best->num_samples)
                : "One thread wins. ";
  } else if (w == "cub") {
    text += "CUB, the peer, wins on this input: none of tally's strategies beat it here. ";
  } else if (w == "critical") {
    text += "One lock wins, which only a tiny input or a single thread explains. ";
  }

  if (const bench_row* chosen = find_row(rows, "automatic")) {
    text += fmt::format("automatic chose {} ({})", chosen->used, chosen->reason);
    if (chosen->used == w) {
      text += ", the fastest strategy.";
    } else if (chosen->median_ms <= best->median_ms) {
      text += fmt::format(": {} against {}'s {}, no slower.", timing_with_spread(*chosen), w, timing_with_spread(*best));
    } else if (!slower_beyond_noise(*chosen, *best)) {
      text += fmt::format(": {} against {}'s {}, within noise (the runs overlap), so as good here.",
                          timing_with_spread(*chosen), w, timing_with_spread(*best));
    } else {
      text += fmt::format(
          ": {} against {}'s {}: {} by the medians, and {} even from its fastest run to {}'s slowest; for this "
          "input, ask for {} by name.",
          timing_with_spread(*chosen), w, timing_with_spread(*best), slowdown(chosen->median_ms, best->median_ms),
          slowdown(chosen->min_ms, best->max_ms), w, w);
    }
  } else {
    text += "automatic gave no exact result to compare.";
  }
  double noisiest = 0;
  for (const bench_row& r : rows) {
    if (r.timed) noisiest = std::max(noisiest, r.noise_percent);
  }
  if (noisiest > 50) {
    text += fmt::format(" The timings were noisy (up to {:.0f}% between the 10th and 90th percentile runs): measure "
                        "again on an idle machine, or with more --runs, before trusting small differences.",
                        noisiest);
  }
  return {w, text};
}

backend choose_backend(const std::string& name) {
  const bool have_gpu = gpu::device_count() > 0;
  if (name == "gpu" && !have_gpu) {
    throw error(errc::not_supported, "--backend",
                fmt::format("{}: argument '--backend' is gpu, but {}; use --backend cpu", command_name,
                            gpu::built_with_cuda() ? "no GPU is present" : "tally was built without CUDA"));
  }
  return name == "gpu" || (name == "auto" && have_gpu) ? backend::gpu : backend::cpu;
}

template <class T>
int advise_typed(const advise_arguments& args, backend where, std::vector<T> samples, const std::string& input_text,
                 const std::string& path) {
  even_bins bins{args.bins, 0.0, static_cast<double>(args.bins)};
  if (args.lower_option->count() > 0) {
    bins = even_bins{args.bins, args.lower, args.upper};
  } else if (!path.empty()) {
    bins = data_range<T>(samples, args.bins, path);
  }
  const bool on_gpu = where == backend::gpu;
  const int runs = args.measuring.runs_or_default(on_gpu);
  const int warmup = args.measuring.warmup_or_default(on_gpu);

  bench_environment env;
  static_cast<run_environment&>(env) = describe_run_environment(where);
  if (!args.quiet) std::fprintf(stderr, "[advise] measuring the read bandwidth\n");
  measure_read_bandwidth(where, env, args.measuring.gpu_timing(), samples.size() * sizeof(T));
  env.warmup_runs = warmup;
  print_environment_header(stdout, "advise", env);
  fmt::print("read bandwidth {:.1f} GB/s ({}); timing: {}\n", env.read_bytes_per_s * 1e-9, env.read_method,
             timing_text(env.timing));
  fmt::print("input: {}; {} even bins over [{:g}, {:g})\n\n", input_text, bins.num_bins, bins.lower, bins.upper);
  std::fflush(stdout);

  std::vector<strategy> candidates{strategy::automatic};
  for (const strategy s : strategies_for(where, operation::histogram)) candidates.push_back(s);
  bench_row base;
  base.sample_type = std::string(to_string(dtype_of<T>()));
  base.num_samples = static_cast<std::int64_t>(samples.size());
  base.distribution = path.empty() ? args.distribution_name : "file";
  base.num_bins = bins.num_bins;
  // A distribution's [0, bins) is bench's exact range; a file's range (data_range) is its own.
  base.bins_kind = args.lower_option->count() > 0 ? "given" : path.empty() ? "exact" : "data";
  base.lower = bins.lower;
  base.upper = bins.upper;
  std::vector<bench_row> rows;
  input_shape shape;
  std::size_t counter_bytes = 4;
  const auto measure = [&]<class Counter>() {
    counter_bytes = sizeof(Counter);
    if (!args.quiet) std::fprintf(stderr, "[advise] %zu strategies, each checked, then timed\n", candidates.size());
    histogram_runner<T, Counter> runner(where, bins.num_bins, runs, warmup, env.read_bytes_per_s,
                                        args.measuring.gpu_timing());
    runner.run(base, std::span<const T>(samples), bins, candidates, rows);
    describe_counts<Counter>(runner.reference(), shape);
    shape.left_out = runner.reference_left_out();
  };
  if (samples.size() <= 0xffffffffu) {
    measure.template operator()<std::uint32_t>();
  } else {
    measure.template operator()<std::uint64_t>();
  }
  describe_order<T>(samples, bins, shape);

  print_table(stdout, rows);
  const advice a = explain(rows, shape, bins, input_text, where, counter_bytes);
  fmt::print("\nrecommendation: {}\n{}\n", a.recommendation, a.paragraph);
  const auto mismatches = std::count_if(rows.begin(), rows.end(), [](const bench_row& r) { return r.mismatch; });
  fmt::print("{} rows, {} verification mismatches\n", rows.size(), mismatches);

  const auto write = [&](const std::string& out) {
    nlohmann::json doc = bench_document("advise", env);
    for (const bench_row& r : rows) doc["rows"].push_back(nlohmann::json(fields_of(r, bench_fields)));
    doc["input"] = {{"description", input_text},
                    {"bins", bins.num_bins},
                    {"lower", bins.lower},
                    {"upper", bins.upper},
                    {"counted", shape.counted},
                    {"left_out", shape.left_out},
                    {"used_bins", shape.used_bins},
                    {"top_bin_share", shape.top_share},
                    {"top_32_bins_share", shape.top32_share},
                    {"windows_of_32", shape.windows},
                    {"window_distinct_bins", shape.window_distinct},
                    {"window_most_common_bin", shape.window_depth}};
    doc["recommendation"] = a.recommendation;
    doc["explanation"] = a.paragraph;
    write_json_file(out, doc);
  };
  if (!args.json.empty()) write(args.json);
  if (!args.plot.empty()) plot_result(args.plot, args.json, command_name, write);
  return mismatches > 0 ? exit_mismatch : exit_success;
}

int run_advise(const advise_arguments& args) {
  if (args.file.empty() == args.distribution_name.empty()) {
    throw_invalid_argument(command_name, "--file", "or '--distribution' is needed, exactly one of them");
  }
  if (args.bins < 1 || args.bins > most_bins) {
    throw_invalid_argument(command_name, "--bins", fmt::format("must be between 1 and 2^26 (got {})", args.bins));
  }
  if ((args.lower_option->count() > 0) != (args.upper_option->count() > 0)) {
    throw_invalid_argument(command_name, args.lower_option->count() > 0 ? "--upper" : "--lower",
                           "is needed too: give both --lower and --upper, or neither");
  }
  if (args.lower_option->count() > 0 && !(std::isfinite(args.lower) && std::isfinite(args.upper) && args.lower < args.upper)) {
    throw_invalid_argument(command_name, "--upper",
                           fmt::format("must be finite and above --lower (got [{:g}, {:g}))", args.lower, args.upper));
  }
  args.measuring.check(command_name);
  if (!args.plot.empty()) check_plot_path(args.plot, command_name, "--plot");
  const backend where = choose_backend(args.backend_name);

  if (!args.file.empty()) {
    std::optional<dtype> requested;
    if (!args.type_name.empty()) requested = parse_dtype(args.type_name);
    sample_file file(args.file, requested);
    return visit_dtype(file.type(), [&]<class T>(std::type_identity<T>) {
      const double bytes = static_cast<double>(file.num_samples()) * sizeof(T);
      check_memory_fits(command_name, "--file",
                        fmt::format("the file's {} {} samples, read whole,", file.num_samples(), to_string(file.type())),
                        where, bytes, bytes);
      std::vector<T> samples(static_cast<std::size_t>(file.num_samples()));
      file.read(0, std::span<T>(samples));
      file.check_unchanged();
      const std::string text = fmt::format("'{}', {} {} samples", args.file, samples.size(), to_string(file.type()));
      return advise_typed<T>(args, where, std::move(samples), text, args.file);
    });
  }
  const auto dist = parse_distribution(args.distribution_name);
  if (!dist) {
    throw_invalid_argument(command_name, "--distribution",
                           "has an unknown distribution '" + args.distribution_name + "' (" +
                               distribution_names() + ")");
  }
  const std::int64_t size = args.samples.empty() ? (where == backend::gpu ? std::int64_t{1} << 28 : std::int64_t{1} << 22)
                                                 : parse_count(args.samples, command_name, "--samples");
  if (size < 1) throw_invalid_argument(command_name, "--samples", "must be >= 1");
  const std::optional<dtype> type = parse_dtype(args.type_name.empty() ? "int32" : args.type_name);
  return visit_dtype(*type, [&]<class T>(std::type_identity<T>) {
    if (args.bins > most_generated_bins<T>()) {
      throw_invalid_argument(command_name, "--bins",
                             fmt::format("must be <= {} for {} samples of a distribution (they reach no further bin)",
                                         most_generated_bins<T>(), to_string(*type)));
    }
    const double bytes = static_cast<double>(size) * sizeof(T);
    check_memory_fits(command_name, "--samples", fmt::format("{} {} samples", size, to_string(*type)), where, bytes,
                      bytes);
    std::vector<T> samples(static_cast<std::size_t>(size));
    generate_samples<T>(*dist, args.bins, args.seed, samples);
    const std::string text =
        fmt::format("{} {} samples of the {} distribution (seed {})", size, to_string(*type), to_string(*dist), args.seed);
    return advise_typed<T>(args, where, std::move(samples), text, "");
  });
}

}  // namespace

void add_advise_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<advise_arguments>();
  CLI::App* sub = app.add_subcommand(
      "advise", "Which histogram strategy for this input: measures them all (each verified) and explains the winner");
  std::vector<std::string> dtype_choices;
  for (const dtype type : all_dtypes) dtype_choices.emplace_back(to_string(type));
  CLI::Option* file = sub->add_option("--file", args->file,
                                      "The samples: a .npy file, or a raw little-endian binary file with --type");
  CLI::Option* dist = sub->add_option("--distribution", args->distribution_name,
                                      "Or a generated input: " + distribution_names());
  file->excludes(dist);
  // --dtype as `tally hist` spells it (and the file reader's errors name); --type as well.
  sub->add_option("--dtype,--type", args->type_name,
                  "Sample type: needed for a raw file (a .npy header says it; given, it must agree); of a "
                  "distribution, default int32")
      ->check(CLI::IsMember(dtype_choices));
  sub->add_option("--samples", args->samples, "Size of a generated input (default: 2^28 on a GPU, 2^22 on CPUs)")
      ->excludes(file);
  sub->add_option("--bins", args->bins, "Number of even bins")->required();
  args->lower_option = sub->add_option("--lower", args->lower,
                                       "Lower edge of the bins (with --upper); default: a distribution's 0, a "
                                       "file's smallest sample");
  args->upper_option = sub->add_option("--upper", args->upper,
                                       "Upper edge, excluded (with --lower); default: a distribution's bin count, "
                                       "just above a file's largest sample");
  sub->add_option("--backend", args->backend_name, "auto (the GPU when there is one), gpu or cpu")
      ->check(CLI::IsMember({"auto", "gpu", "cpu"}))
      ->capture_default_str();
  args->measuring.add_to(*sub, "Timed runs per strategy; the median counts (default: 15 GPU, 5 CPU)",
                      "Untimed runs first (default: 3 GPU, 1 CPU)");
  sub->add_option("--seed", args->seed, "Seed of a generated input")->capture_default_str();
  sub->add_option("--json", args->json, "Also write the rows, the input's statistics and the advice as JSON");
  sub->add_option("--plot", args->plot, "Also draw the measured strategies to this .png or .svg file");
  sub->add_flag("--quiet", args->quiet, "No progress on stderr");
  sub->callback([args, &exit_code] { exit_code = run_advise(*args); });
}

}  // namespace tally::cli
