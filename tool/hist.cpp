// `tally hist FILE`: a histogram or bincount of a .npy or raw binary file, on the CPU or the GPU.
// The file is read in chunks (so it may be larger than memory), each chunk is counted by the
// library and added into a running uint64 total. Bins follow numpy.histogram, the last one closed
// as numpy closes it (the library's own default is half-open); --last-edge exclusive leaves a
// sample equal to the last edge out.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "arguments.hpp"
#include "commands.hpp"
#include "data_file.hpp"
#include "output_file.hpp"
#include "sample_scan.hpp"
#include "tally/bins.hpp"
#include "tally/cpu.hpp"
#include "tally/detail/validate.hpp"
#include "tally/error.hpp"
#include "tally/gpu.hpp"
#include "tally/gpu/streaming.hpp"
#include "tally/gpu/timing.hpp"
#include "tally/nccl.hpp"
#include "tally/strategy.hpp"

namespace tally::cli {
namespace {

/// numpy.histogram's default number of bins.
constexpr std::int64_t default_num_bins = 10;
/// More bins than this (32 GiB of counters) is almost surely a mistake, e.g. a bincount of ids.
constexpr std::uint64_t most_bins = std::uint64_t{1} << 32;
constexpr std::int64_t largest_chunk_mb = std::int64_t{1} << 20;

/// What the command line said, before it is checked.
struct hist_arguments {
  std::string file;
  std::string dtype_name;
  std::int64_t bins = default_num_bins;
  std::vector<double> range;
  std::string edges_file;
  bool bincount = false;
  std::string last_edge = "inclusive";  ///< --last-edge: numpy's closed last bin, or half-open
  bool include_upper_edge = false;      ///< the old spelling of --last-edge inclusive, now the default
  bool quiet = false;
  std::string strategy_name = "automatic";
  std::string backend_name = "auto";
  std::int64_t chunk_mb = 0;  ///< 0: the backend's own (256 MiB on the CPU, 32 MiB staging chunks on the GPU)
  std::string gpus;            ///< --gpus N|all: shard the file over this many GPUs (NCCL); empty: one GPU
  std::string output;
  CLI::Option* bins_option = nullptr;
  CLI::Option* range_option = nullptr;
  CLI::Option* edges_option = nullptr;
  CLI::Option* dtype_option = nullptr;
  CLI::Option* chunk_option = nullptr;
};

enum class output_format : std::uint8_t { table, npy, csv };

/// The checked settings of one run.
struct hist_settings {
  backend where = backend::cpu;
  strategy algorithm = strategy::automatic;
  upper_edge last_edge = upper_edge::exclusive;
  std::uint64_t chunk_bytes = 0;
  std::int64_t chunk_mb = 0;
  int gpus = 0;  ///< --gpus: GPUs the file is sharded over (0: not given)
  output_format output = output_format::table;
};

enum class bin_kind : std::uint8_t { even, range, bincount };

/// The bins one run counts into, decided before the counting pass.
struct bin_plan {
  bin_kind kind = bin_kind::even;
  std::int64_t num_bins = 0;
  even_bins even;                   ///< bin_kind::even: what the library is given
  std::vector<double> edges;        ///< even and range bins: the num_bins + 1 edges samples are compared with
  /// What samples are compared with the edges in, and the edges print in: float64, or the
  /// samples' own float32, float16 or bfloat16 (even bins of those).
  dtype edge_precision = dtype::float64;
  /// What numpy computes these even edges in: float64, or the data's float32 or float16 when the
  /// range is the data's.
  dtype arithmetic = dtype::float64;
  std::string description;          ///< one line for the report
  /// Range bins from --edges, not numpy's even edges counted as range bins: only the former are
  /// counted over edges extended past both ends (range_bins_apart), which would break the even
  /// spacing the library counts numpy's edges by (an estimate and a table, not the grid).
  bool edges_given = false;
};

/// The distinct strategies the chunks ran, with how many chunks each.
struct strategy_use {
  choice chose;
  std::uint64_t chunks = 0;
};

/// What the counting pass found.
struct count_totals {
  std::vector<std::uint64_t> counts;
  std::uint64_t left_out = 0;
  std::uint64_t not_finite = 0;
  std::uint64_t chunks = 0;
  std::vector<strategy_use> strategies;
};

[[noreturn]] void invalid(const std::string& argument, const std::string& what) {
  throw error(errc::invalid_argument, argument, "argument '" + argument + "' " + what);
}

std::string file_label(const sample_file& file) {
  return "FILE '" + file.path().string() + "'" + (file.path() == "-" ? " (stdin)" : "");
}

std::string no_gpu_reason() {
  return gpu::built_with_cuda() ? "no CUDA device is visible" : "this tally was built without CUDA";
}

/// --backend auto: the GPU when there is one, unless the strategy exists on one backend only.
backend choose_backend(const std::string& backend_name, strategy algorithm) {
  const bool on_cpu = supports(backend::cpu, operation::histogram, algorithm);
  const bool on_gpu = supports(backend::gpu, operation::histogram, algorithm);
  const std::string named = "'" + std::string(to_string(algorithm)) + "'";
  const bool have_gpu = gpu::device_count() > 0;
  if (backend_name == "cpu") {
    if (!on_cpu)
      invalid("--strategy", "is " + named + ", a GPU strategy, but --backend is cpu; the CPU runs automatic, " +
                                strategy_list(backend::cpu));
    return backend::cpu;
  }
  if (backend_name == "gpu") {
    if (!on_gpu)
      invalid("--strategy", "is " + named + ", a CPU strategy, but --backend is gpu; the GPU runs automatic, " +
                                strategy_list(backend::gpu));
    if (!have_gpu) invalid("--backend", "is gpu but " + no_gpu_reason() + "; use --backend cpu");
    return backend::gpu;
  }
  if (!on_gpu) return backend::cpu;
  if (!on_cpu) {
    if (!have_gpu)
      invalid("--strategy", "is " + named + ", a GPU strategy, but " + no_gpu_reason() + "; the CPU runs automatic, " +
                                strategy_list(backend::cpu));
    return backend::gpu;
  }
  return have_gpu ? backend::gpu : backend::cpu;
}

hist_settings check_arguments(const hist_arguments& args) {
  hist_settings settings;
  settings.algorithm = parse_strategy_option(args.strategy_name, "tally hist", "--strategy",
                                             "the CPU runs automatic, " + strategy_list(backend::cpu) +
                                                 "; the GPU runs automatic, " + strategy_list(backend::gpu));
  settings.where = choose_backend(args.backend_name, settings.algorithm);
  settings.last_edge = args.last_edge == "exclusive" ? upper_edge::exclusive : upper_edge::inclusive;
  if (args.include_upper_edge && settings.last_edge == upper_edge::exclusive) {
    invalid("--include-upper-edge", "closes the last bin, which --last-edge exclusive opens: give one of them");
  }
  if (args.include_upper_edge && args.bincount) invalid("--include-upper-edge", "is for bins with edges, not --bincount");

  if (args.chunk_option->count() > 0 && (args.chunk_mb < 1 || args.chunk_mb > largest_chunk_mb)) {
    invalid("--chunk-mb", "must be between 1 and " + std::to_string(largest_chunk_mb) + " (got " +
                              std::to_string(args.chunk_mb) + ")");
  }
  // The GPU streams through three pinned buffers of a chunk each: a chunk large enough to keep the
  // copy engine busy, small enough that pinning the three costs milliseconds.
  settings.chunk_mb = args.chunk_option->count() > 0 ? args.chunk_mb : settings.where == backend::gpu ? 32 : 256;
  settings.chunk_bytes = static_cast<std::uint64_t>(settings.chunk_mb) << 20;
  if (!args.gpus.empty()) {
    const int devices = gpu::device_count();
    if (devices == 0) invalid("--gpus", "shards the file over GPUs, but " + no_gpu_reason());
    if (args.gpus == "all") {
      settings.gpus = devices;
    } else {
      const std::int64_t asked = parse_count(args.gpus, "tally hist", "--gpus");
      if (asked < 1 || asked > devices) {
        invalid("--gpus", fmt::format("asks for {} GPUs; give a count from 1 to the {} visible, or all", args.gpus,
                                      devices));
      }
      settings.gpus = static_cast<int>(asked);
    }
    if (settings.where != backend::gpu) invalid("--gpus", "shards the file over GPUs, but --backend is cpu");
    if (!nccl::built_with_nccl()) invalid("--gpus", "needs NCCL, which this tally was built without");
  }

  if (args.bins_option->count() > 0 && (args.bins < 1 || static_cast<std::uint64_t>(args.bins) > most_bins)) {
    invalid("--bins",
            "must be between 1 and " + std::to_string(most_bins) + " (got " + std::to_string(args.bins) + ")");
  }
  if (args.range_option->count() > 0) {
    const double lo = args.range[0];
    const double hi = args.range[1];
    if (!std::isfinite(lo) || !std::isfinite(hi)) invalid("--range", fmt::format("must be finite (got {} {})", lo, hi));
    if (!(lo < hi)) invalid("--range", fmt::format("must have LO < HI (got LO={} HI={})", lo, hi));
  }

  if (!args.output.empty()) {
    std::string extension = std::filesystem::path(args.output).extension().string();
    std::transform(extension.begin(), extension.end(), extension.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (extension == ".npy") {
      settings.output = output_format::npy;
    } else if (extension == ".csv") {
      settings.output = output_format::csv;
    } else {
      invalid("--output", "is '" + args.output + "'; its name must end in .npy (uint64 counts) or .csv");
    }
    const std::filesystem::path parent = std::filesystem::path(args.output).parent_path();
    std::error_code ec;
    if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
      invalid("--output", "is '" + args.output + "', in a directory that does not exist");
    }
  }
  return settings;
}

std::vector<double> load_edges(const std::string& path) {
  const std::string argument = "--edges";
  std::vector<double> edges = read_edges_file(path, argument);
  const std::string where = "(file '" + path + "')";
  if (edges.size() < 2)
    invalid(argument, fmt::format("needs at least 2 edges (1 bin) {}; got {}", where, edges.size()));
  for (std::size_t i = 0; i < edges.size(); ++i) {
    if (!std::isfinite(edges[i]))
      invalid(argument, fmt::format("has a non-finite edge {} at index {} {}", edges[i], i, where));
    if (i > 0 && edges[i] < edges[i - 1]) {
      invalid(argument, fmt::format("must be sorted ascending {}: edge {} ({}) is below edge {} ({})", where, i,
                                    edges[i], i - 1, edges[i - 1]));
    }
  }
  if (edges.size() - 1 > most_bins)
    invalid(argument, fmt::format("has {} edges, more than tally hist takes", edges.size()));
  return edges;
}

// ---- data-dependent passes ----------------------------------------------------------------

template <class T>
void check_no_negative(const sample_file& file, std::span<const T> chunk, std::uint64_t first_index) {
  if constexpr (std::is_signed_v<T>) {
    const auto negative = std::find_if(chunk.begin(), chunk.end(), [](T x) { return x < 0; });
    if (negative != chunk.end()) {
      invalid(
          "--bincount",
          fmt::format("counts non-negative integers only (numpy.bincount raises too), but {} of {} is {}",
                      file.sample_at(first_index + static_cast<std::uint64_t>(negative - chunk.begin())),
                      file_label(file),
                      format_sample(*negative)));
    }
  }
}

template <class T>
struct sample_extent {
  T lowest{};
  T highest{};
  bool empty = true;
};

/// The smallest and largest sample: the extra pass that --range left out, or --bincount, needs.
template <class T>
sample_extent<T> scan_extent(chunk_reader<T>& reader, const sample_file& file, bool for_bincount) {
  sample_extent<T> extent;
  reader.for_each_chunk([&](std::span<const T> chunk, std::uint64_t first_index) {
    const chunk_extent<T> found = extent_of(chunk);  // one vectorized pass; the searches below only on error
    if constexpr (is_floating_sample_v<T>) {
      const auto odd = found.all_finite ? chunk.end()
                                        : std::find_if(chunk.begin(), chunk.end(),
                                                       [](T x) { return !std::isfinite(static_cast<double>(x)); });
      if (odd != chunk.end()) {
        invalid("--range",
                fmt::format("is needed: without it the range is the data's min and max, which must be finite "
                            "(numpy raises too), but {} of {} is {}",
                            file.sample_at(first_index + static_cast<std::uint64_t>(odd - chunk.begin())),
                            file_label(file), format_sample(*odd)));
      }
    }
    if constexpr (std::is_signed_v<T>) {
      if (for_bincount && found.lowest < T{0}) check_no_negative(file, chunk, first_index);
    }
    if (extent.empty || found.lowest < extent.lowest) extent.lowest = found.lowest;
    if (extent.empty || found.highest > extent.highest) extent.highest = found.highest;
    extent.empty = false;
  });
  return extent;
}

// ---- bins ---------------------------------------------------------------------------------

/// `x` rounded to `arithmetic`: float64 (as it is), float32 or float16.
double round_to(dtype arithmetic, double x) {
  if (arithmetic == dtype::float32) return static_cast<double>(static_cast<float>(x));
  if (arithmetic == dtype::float16) return static_cast<double>(float16::nearest(x));
  return x;
}

/// numpy.linspace(start, stop, num_bins + 1) as numpy computes it in `arithmetic` (float64, or
/// float32 or float16 for data of those). Each operation is done in double and rounded once to
/// `arithmetic`, which gives the bits of the narrower type's own operation: double holds more than
/// twice its digits, so the second rounding cannot land elsewhere.
std::vector<double> numpy_linspace(double start, double stop, std::int64_t num_bins, dtype arithmetic) {
  const auto round = [arithmetic](double x) { return round_to(arithmetic, x); };
  const auto n = static_cast<std::size_t>(num_bins);
  std::vector<double> edges(n + 1);
  const double delta = round(stop - start);
  const double div = round(static_cast<double>(num_bins));
  const double step = round(delta / div);
  for (std::size_t i = 0; i <= n; ++i) {
    const double index = round(static_cast<double>(i));  // numpy's arange in that type
    // numpy's special case for a step that underflows to 0 (gh-5437).
    const double offset = step == 0 ? round(round(index / div) * delta) : round(index * step);
    edges[i] = round(offset + start);
  }
  edges[n] = stop;
  return edges;
}

/// The precision T samples are compared with even edges in: float32, float16 and bfloat16 in their
/// own, the others in float64.
template <class T>
constexpr dtype edge_precision_of() {
  if constexpr (std::is_same_v<T, float> || is_half_float_v<T>) return dtype_of<T>();
  return dtype::float64;
}

/**
 * Even bins as numpy.histogram makes them. numpy computes the edges in the data's own float32 or
 * float16 when the range comes from such data (a.min() and a.max() keep the type) and in float64
 * otherwise, then rounds them to float32 or float16 for data of those. The library computes in
 * float64 and rounds to the samples' precision; where its edges differ from numpy's, the run uses
 * range bins over numpy's edges, so the counts still match. bfloat16, which numpy lacks, takes the
 * library's rule: float64 edges rounded to bfloat16.
 */
template <class T>
bin_plan plan_even_bins(std::int64_t num_bins, double lower, double upper, dtype arithmetic, bool range_from_data,
                        const hist_settings& settings) {
  bin_plan plan;
  plan.kind = bin_kind::even;
  plan.num_bins = num_bins;
  plan.even = {num_bins, lower, upper};
  plan.edge_precision = edge_precision_of<T>();
  plan.arithmetic = arithmetic;

  std::vector<double> numpy_edges = numpy_linspace(lower, upper, num_bins, arithmetic);
  for (double& edge : numpy_edges) edge = static_cast<double>(even_bin_mapper<T>::to_compare(edge));
  const std::string_view precision = to_string(plan.edge_precision);
  for (std::int64_t i = 0; i <= num_bins; ++i) {
    // An infinite edge would count infinite samples in numpy, which the library leaves out; a
    // NaN edge (numpy's float16 max - min overflowing) counts nothing sensible.
    if (std::isfinite(numpy_edges[i])) continue;
    if (range_from_data) {
      invalid("--range", fmt::format("is needed: numpy computes the edges of the data's range [{}, {}] in {}, where "
                                     "edge {} is {} (max - min overflows; numpy fails too)",
                                     lower, upper, to_string(arithmetic), i, numpy_edges[i]));
    }
    invalid("--range", fmt::format("is [{}, {}]: edge {} is {} in {}, the precision {} samples are compared in; "
                                   "keep the range within {}'s finite values",
                                   lower, upper, i, numpy_edges[i], precision, to_string(dtype_of<T>()), precision));
  }
  for (std::int64_t i = 0; i < num_bins; ++i) {
    if (!(numpy_edges[i] < numpy_edges[i + 1])) {
      invalid("--bins", fmt::format("is {}: too many bins for the range [{}, {}]; edges {} and {} are equal in {} "
                                    "(numpy raises 'Too many bins for data range' too)",
                                    num_bins, lower, upper, i, i + 1, precision));
    }
  }
  plan.edges = std::move(numpy_edges);

  // The library's even rule in numpy's arithmetic where it has it (float64, float32 over float32
  // bounds); where its edges still differ, numpy's edges are counted as range bins.
  const auto library_matches = [&](const even_bins& even) {
    const even_bin_mapper<T> library(even, settings.last_edge);
    for (std::int64_t i = 0; i <= num_bins; ++i) {
      if (static_cast<double>(library.edge(i)) != plan.edges[i]) return false;
    }
    return true;
  };
  const even_bins in_float32{num_bins, lower, upper, edge_arithmetic::float32};
  if (arithmetic == dtype::float32 && !tally::detail::float32_edges_fault(in_float32) && library_matches(in_float32)) {
    plan.even = in_float32;
  } else if (!library_matches(plan.even)) {
    plan.kind = bin_kind::range;  // numpy's edges, counted as range bins
  }
  return plan;
}

/// An edge as the table prints it: in the fewest digits that give it back in `precision`.
std::string format_edge(double edge, dtype precision) {
  switch (precision) {
    case dtype::float32: return format_sample(static_cast<float>(edge));
    case dtype::float16: return format_sample(float16::from_exact(edge));
    case dtype::bfloat16: return format_sample(bfloat16::from_exact(edge));
    default: return format_sample(edge);
  }
}

std::string describe_even(const bin_plan& plan, const hist_settings& settings, std::string_view origin) {
  std::string text =
      fmt::format("{} even bins over [{}, {}{} {}", plan.num_bins, format_edge(plan.edges.front(), plan.edge_precision),
                  format_edge(plan.edges.back(), plan.edge_precision),
                  settings.last_edge == upper_edge::inclusive ? "]" : ")", origin);
  if (plan.kind == bin_kind::range) {
    text += fmt::format(
        "; numpy's edges (computed in {}) differ from the library's even edges, so they are "
        "counted as range bins",
        to_string(plan.arithmetic));
  }
  return text;
}

/// Bincount bins: as many as --bins says, or the largest sample + 1 (an extra pass).
template <class T>
bin_plan plan_bincount(const hist_arguments& args, sample_file& file, chunk_reader<T>& reader) {
  bin_plan plan;
  plan.kind = bin_kind::bincount;
  if (args.bins_option->count() > 0) {
    plan.num_bins = args.bins;
    plan.description = fmt::format("bincount of {} values (0 to {}, from --bins); larger values are left out",
                                   plan.num_bins, plan.num_bins - 1);
    return plan;
  }
  const sample_extent<T> extent = scan_extent(reader, file, true);
  if (extent.empty) {
    plan.description = "bincount of an empty file: no values";
    return plan;
  }
  const auto length = static_cast<std::uint64_t>(extent.highest) + 1;
  if (length > most_bins) {
    invalid("--bincount",
            fmt::format(
                "would make {} bins (the largest sample, {}, plus one); pass --bins N to count values below N only",
                length, extent.highest));
  }
  plan.num_bins = static_cast<std::int64_t>(length);
  plan.description =
      fmt::format("bincount of {} values (0 to {}, the largest sample)", plan.num_bins, extent.highest);
  return plan;
}

template <class T>
bin_plan plan_bins(const hist_arguments& args, const hist_settings& settings, sample_file& file,
                   chunk_reader<T>& reader) {
  const std::string closing = settings.last_edge == upper_edge::inclusive ? "]" : ")";
  if constexpr (is_bincount_sample_v<T>) {
    if (args.bincount) return plan_bincount(args, file, reader);
  }
  if (args.edges_option->count() > 0) {
    bin_plan plan;
    plan.kind = bin_kind::range;
    plan.edges_given = true;
    plan.edges = load_edges(args.edges_file);
    plan.num_bins = static_cast<std::int64_t>(plan.edges.size()) - 1;
    plan.description = fmt::format("{} bins between the edges of '{}', [{}, {}{}", plan.num_bins, args.edges_file,
                                   plan.edges.front(), plan.edges.back(), closing);
    return plan;
  }

  if (args.range_option->count() > 0) {
    bin_plan plan = plan_even_bins<T>(args.bins, args.range[0], args.range[1], dtype::float64, false, settings);
    plan.description = describe_even(plan, settings, "(--range)");
    return plan;
  }

  // No range: numpy's rule, the data's min and max, widened by 0.5 each way when they are equal.
  const sample_extent<T> extent = scan_extent(reader, file, false);
  if (extent.empty) {
    bin_plan plan = plan_even_bins<T>(args.bins, 0.0, 1.0, dtype::float64, false, settings);  // numpy: (0, 1) for no data
    plan.description = describe_even(plan, settings, "(an empty file: numpy's default range)");
    return plan;
  }
  const bool widen = extent.lowest == extent.highest;
  // a.min() - 0.5 stays float32 or float16 in numpy for data of those, and so does the whole
  // linspace; bfloat16, which numpy lacks, keeps the library's float64.
  constexpr dtype arithmetic = std::is_same_v<T, float>     ? dtype::float32
                               : std::is_same_v<T, float16> ? dtype::float16
                                                            : dtype::float64;
  const double lower = round_to(arithmetic, static_cast<double>(extent.lowest) - (widen ? 0.5 : 0.0));
  const double upper = round_to(arithmetic, static_cast<double>(extent.highest) + (widen ? 0.5 : 0.0));
  bin_plan plan = plan_even_bins<T>(args.bins, lower, upper, arithmetic, true, settings);
  plan.description = describe_even(plan, settings,
                                   widen ? "(no --range: the data's only value, widened by 0.5 as numpy does)"
                                         : "(no --range: the data's min and max, as numpy)");
  return plan;
}

// ---- counting -----------------------------------------------------------------------------

/// Counts one chunk at a time on the chosen backend and adds its counts into a uint64 total.
template <class T>
class chunk_counter {
 public:
  chunk_counter(backend where, std::int64_t num_bins, std::uint64_t chunk_capacity)
      : where_(where), totals_(static_cast<std::size_t>(num_bins), 0) {
    if (where_ == backend::gpu) {
      device_samples_ = gpu::device_buffer<T>(static_cast<std::size_t>(chunk_capacity));
      device_counts_ = gpu::device_buffer<std::uint64_t>(static_cast<std::size_t>(num_bins));
    }
  }

  /** @brief Counts `chunk` with `run(samples, counts)`, given device spans on the GPU backend. */
  template <class Run>
  histogram_result add(std::span<const T> chunk, Run&& run) {
    // The first chunk's counts go straight into the totals; later ones through a scratch copy.
    if (!first_ && scratch_.empty()) scratch_.resize(totals_.size());
    const std::span<std::uint64_t> destination =
        first_ ? std::span<std::uint64_t>(totals_) : std::span<std::uint64_t>(scratch_);
    histogram_result result;
    if (where_ == backend::cpu) {
      result = run(chunk, destination);
    } else {
      device_samples_.upload(chunk);
      result = run(std::span<const T>(device_samples_.data(), chunk.size()), device_counts_.span());
      device_counts_.download(destination);
    }
    if (!first_) {
      for (std::size_t i = 0; i < totals_.size(); ++i) totals_[i] += scratch_[i];
    }
    first_ = false;
    return result;
  }

  std::vector<std::uint64_t> take_totals() { return std::move(totals_); }

 private:
  backend where_;
  std::vector<std::uint64_t> totals_;
  std::vector<std::uint64_t> scratch_;
  gpu::device_buffer<T> device_samples_;
  gpu::device_buffer<std::uint64_t> device_counts_;
  bool first_ = true;
};

void record_choice(std::vector<strategy_use>& uses, const choice& chose) {
  for (auto& use : uses) {
    if (use.chose.used == chose.used && use.chose.reason == chose.reason) {
      ++use.chunks;
      return;
    }
  }
  uses.push_back({chose, 1});
}

/**
 * The GPU's pass: the file streams through the library's staging ring (tally/gpu/streaming.hpp),
 * read straight into pinned buffers by the threads while the chunk before is copied and counted,
 * and the counts add up on the device. The rare checks that need the samples themselves (which
 * negative sample a bincount refuses, how many left-out samples are NaN or infinite) take a
 * second pass on the host, only when the count says there is something to find.
 */
template <class T>
count_totals count_file_on_gpu(const bin_plan& plan, const hist_settings& settings, sample_file& file,
                               chunk_reader<T>& reader, bool check_negative) {
  count_totals totals;
  const histogram_options options{settings.algorithm, settings.last_edge};
  gpu::staging_ring ring(gpu::staging_options{static_cast<std::size_t>(settings.chunk_bytes), 3});
  std::uint64_t next = 0;
  const bool stream = file.in_one_pass();
  const gpu::host_samples<T> samples(gpu::host_reader([&](std::span<std::byte> into) -> std::size_t {
    const std::span<T> chunk(reinterpret_cast<T*>(into.data()), into.size() / sizeof(T));
    std::size_t n = 0;
    if (stream) {
      // A stream cannot be read again: what a second pass would check is checked as it passes.
      n = file.read_next(chunk);
      if (check_negative) check_no_negative(file, std::span<const T>(chunk.first(n)), next);
      totals.not_finite += count_not_finite(std::span<const T>(chunk.first(n)));
    } else {
      n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), file.num_samples() - next));
      file.read(next, chunk.first(n));
    }
    next += n;
    return n * sizeof(T);
  }));
  gpu::device_buffer<std::uint64_t> counts(static_cast<std::size_t>(plan.num_bins));
  histogram_result result;
  switch (plan.kind) {
    case bin_kind::even:
      result = gpu::from_host::histogram_even(samples, counts.span(), plan.even, options, &ring);
      break;
    case bin_kind::range:
      result = gpu::from_host::histogram_range(samples, counts.span(), std::span<const double>(plan.edges), options, &ring);
      break;
    case bin_kind::bincount:
      if constexpr (is_bincount_sample_v<T>) {
        result = gpu::from_host::bincount(samples, counts.span(), options, &ring);
        break;
      }
      throw std::logic_error("tally hist: a bincount of floating-point samples");
  }
  if (stream) file.finish_stream();
  file.check_unchanged();
  totals.counts.resize(counts.size());
  counts.download(totals.counts);
  // The chunks the ring cut the file into.
  const std::uint64_t per_chunk = ring.chunk_elements(sizeof(T));
  totals.chunks = (file.num_samples() + per_chunk - 1) / per_chunk;
  totals.left_out = result.left_out;
  totals.strategies.push_back({result.chose, totals.chunks});
  if (result.left_out > 0 && (check_negative || is_floating_sample_v<T>) && !stream) {
    reader.for_each_chunk([&](std::span<const T> chunk, std::uint64_t first_index) {
      if (check_negative) check_no_negative(file, chunk, first_index);
      totals.not_finite += count_not_finite(chunk);
    });
  }
  return totals;
}

/**
 * --gpus: the file read into host memory, cut into one contiguous shard a GPU, each shard copied to
 * its GPU and counted there, the counts added by NCCL (tally::nccl, one thread a GPU). The counts
 * are the one-GPU counts; each GPU holds its whole shard.
 */
template <class T>
count_totals count_file_across_gpus(const bin_plan& plan, const hist_settings& settings, sample_file& file,
                                    bool check_negative) {
  if (file.in_one_pass()) invalid("--gpus", "shards a file it can read at any offset, not a stream");
  const std::uint64_t n = file.num_samples();
  std::vector<T> samples(n);
  file.read(0, std::span<T>(samples));
  file.check_unchanged();
  if (check_negative) check_no_negative(file, std::span<const T>(samples), 0);
  std::vector<int> devices(static_cast<std::size_t>(settings.gpus));
  for (int d = 0; d < settings.gpus; ++d) devices[static_cast<std::size_t>(d)] = d;
  nccl::local_team team(devices);
  count_totals totals;
  totals.counts.resize(static_cast<std::size_t>(plan.num_bins));
  nccl::histogram_result result;
  const histogram_options options{settings.algorithm, settings.last_edge};
  team.run([&](int rank) {
    const std::uint64_t first = n * static_cast<std::uint64_t>(rank) / static_cast<std::uint64_t>(team.size());
    const std::uint64_t last = n * static_cast<std::uint64_t>(rank + 1) / static_cast<std::uint64_t>(team.size());
    const gpu::device_buffer<T> shard(std::span<const T>(samples.data() + first, last - first));
    gpu::device_buffer<std::uint64_t> counts(static_cast<std::size_t>(plan.num_bins));
    const nccl::comm_t comm = team.comm(rank);
    nccl::histogram_result mine;
    switch (plan.kind) {
      case bin_kind::even: mine = nccl::histogram_even(comm, shard.const_span(), counts.span(), plan.even, options); break;
      case bin_kind::range:
        mine = nccl::histogram_range(comm, shard.const_span(), counts.span(), std::span<const double>(plan.edges), options);
        break;
      case bin_kind::bincount:
        if constexpr (is_bincount_sample_v<T>) {
          mine = nccl::bincount(comm, shard.const_span(), counts.span(), options);
          break;
        }
        throw std::logic_error("tally hist: a bincount of floating-point samples");
    }
    if (rank == 0) {
      counts.download(totals.counts);
      result = mine;
    }
  });
  totals.chunks = static_cast<std::uint64_t>(team.size());
  totals.left_out = result.left_out;
  totals.strategies.push_back({result.chose, totals.chunks});
  if (result.left_out > 0 && is_floating_sample_v<T>) totals.not_finite = count_not_finite(std::span<const T>(samples));
  return totals;
}

template <class T>
count_totals count_file(const bin_plan& plan, const hist_settings& settings, sample_file& file,
                        chunk_reader<T>& reader, bool check_negative) {
  if (plan.num_bins > 0 && settings.gpus > 0) return count_file_across_gpus<T>(plan, settings, file, check_negative);
  if (plan.num_bins > 0 && settings.where == backend::gpu) {
    return count_file_on_gpu(plan, settings, file, reader, check_negative);
  }
  count_totals totals;
  const histogram_options options{settings.algorithm, settings.last_edge};
  const std::span<const double> edges(plan.edges);
  auto run = [&](std::span<const T> samples, std::span<std::uint64_t> counts) -> histogram_result {
    const bool on_cpu = settings.where == backend::cpu;
    switch (plan.kind) {
      case bin_kind::even:
        return on_cpu ? cpu::histogram_even(samples, counts, plan.even, options)
                      : gpu::histogram_even(samples, counts, plan.even, options);
      case bin_kind::range:
        return on_cpu ? cpu::histogram_range(samples, counts, edges, options)
                      : gpu::histogram_range(samples, counts, edges, options);
      case bin_kind::bincount:
        if constexpr (is_bincount_sample_v<T>) {
          return on_cpu ? cpu::bincount(samples, counts, options) : gpu::bincount(samples, counts, options);
        }
        break;
    }
    throw std::logic_error("tally hist: a bincount of floating-point samples");
  };

  if (plan.num_bins == 0) return totals;  // a bincount of no samples: nothing to count into
  // --edges over float samples on the CPU: the library's count says which left-out samples are not finite.
  std::optional<range_bins_apart> apart;
  if (is_floating_sample_v<T> && settings.where == backend::cpu && plan.kind == bin_kind::range && plan.edges_given) {
    apart.emplace(edges, settings.last_edge);
    if (!apart->fits()) apart.reset();
  }
  const auto count_apart = [&](std::span<const T> samples, std::span<std::uint64_t> counts) {
    return apart->count(samples, counts, settings.algorithm, totals.not_finite);
  };
  chunk_counter<T> counter(settings.where, plan.num_bins, reader.capacity());
  reader.for_each_chunk([&](std::span<const T> chunk, std::uint64_t first_index) {
    // The CPU's bincount refuses negative samples as it counts, before it writes a count.
    if (check_negative && settings.where != backend::cpu) check_no_negative(file, chunk, first_index);
    histogram_result result;
    try {
      result = apart ? counter.add(chunk, count_apart) : counter.add(chunk, run);
    } catch (const error& e) {
      if (check_negative && e.argument() == "samples") check_no_negative(file, chunk, first_index);  // names the file
      throw;
    }
    // Only a sample left out can be NaN or infinite: no pass to count them when none was.
    if (result.left_out > 0 && !apart) totals.not_finite += count_not_finite(chunk);
    totals.left_out += result.left_out;
    record_choice(totals.strategies, result.chose);
    ++totals.chunks;
  });
  totals.counts = counter.take_totals();
  return totals;
}

/**
 * --bincount without --bins on the CPU, in one pass over the file: each chunk is counted into as
 * many bins as the totals hold (at first first_bincount_length of the chunk), and a chunk with
 * larger values then grows them (a pass over that chunk for its largest value and its values past
 * the old length). A pass for the largest value before counting read a file of several chunks
 * twice and cost about as much as the counting.
 */
template <class T>
std::pair<bin_plan, count_totals> count_bincount_from_data(const hist_settings& settings, const sample_file& file,
                                                           chunk_reader<T>& reader) {
  bin_plan plan;
  plan.kind = bin_kind::bincount;
  count_totals totals;
  const histogram_options options{settings.algorithm, settings.last_edge};
  std::vector<std::uint64_t> chunk_counts;
  reader.for_each_chunk([&](std::span<const T> chunk, std::uint64_t first_index) {
    const bool first = totals.counts.empty();
    if (first) totals.counts.assign(first_bincount_length(chunk), 0);
    if (!first) chunk_counts.resize(totals.counts.size());
    std::vector<std::uint64_t>& into = first ? totals.counts : chunk_counts;
    histogram_result result;
    try {
      result = cpu::bincount(chunk, std::span<std::uint64_t>(into), options);
    } catch (const error& e) {
      if (e.argument() == "samples") check_no_negative(file, chunk, first_index);  // names the file
      throw;
    }
    record_choice(totals.strategies, result.chose);
    ++totals.chunks;
    if (!first) {
      for (std::size_t v = 0; v < chunk_counts.size(); ++v) totals.counts[v] += chunk_counts[v];
    }
    if (result.left_out > 0) {
      const std::uint64_t counted_below = totals.counts.size();
      const T highest = extent_of(chunk).highest;
      const auto length = static_cast<std::uint64_t>(highest) + 1;
      if (length > most_bins) {
        invalid("--bincount", fmt::format("would make {} bins (the largest sample, {}, plus one); pass --bins N to "
                                          "count values below N only",
                                          length, highest));
      }
      totals.counts.resize(static_cast<std::size_t>(length), 0);
      for (const T x : chunk) {
        if (static_cast<std::uint64_t>(x) >= counted_below) ++totals.counts[static_cast<std::size_t>(x)];
      }
    }
  });
  // The largest sample is the last value counted.
  while (!totals.counts.empty() && totals.counts.back() == 0) totals.counts.pop_back();
  plan.num_bins = static_cast<std::int64_t>(totals.counts.size());
  plan.description = plan.num_bins == 0 ? "bincount of an empty file: no values"
                                        : fmt::format("bincount of {} values (0 to {}, the largest sample)",
                                                      plan.num_bins, plan.num_bins - 1);
  return {std::move(plan), std::move(totals)};
}

// ---- output -------------------------------------------------------------------------------

/// The table or CSV, handed to `put` a MiB at a time (a table of 2^32 bins is far larger than that).
void write_text(const std::function<void(std::string_view)>& put, const std::vector<std::string>& header,
                const bin_plan& plan, std::span<const std::uint64_t> counts, bool csv) {
  const bool bincount = plan.kind == bin_kind::bincount;
  auto row = [&](std::size_t i) {
    std::vector<std::string> cells{std::to_string(i)};
    if (!bincount) {
      cells.push_back(format_edge(plan.edges[i], plan.edge_precision));
      cells.push_back(format_edge(plan.edges[i + 1], plan.edge_precision));
    }
    cells.push_back(std::to_string(counts[i]));
    return cells;
  };
  std::vector<std::size_t> widths(header.size(), 0);
  if (!csv) {
    for (std::size_t c = 0; c < header.size(); ++c) widths[c] = header[c].size();
    for (std::size_t i = 0; i < counts.size(); ++i) {
      const auto cells = row(i);
      for (std::size_t c = 0; c < cells.size(); ++c) widths[c] = std::max(widths[c], cells[c].size());
    }
  }
  fmt::memory_buffer buffer;
  auto emit = [&](const std::vector<std::string>& cells) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      if (csv) {
        fmt::format_to(std::back_inserter(buffer), "{}{}", c ? "," : "", cells[c]);
      } else {
        fmt::format_to(std::back_inserter(buffer), "{}{:>{}}", c ? "  " : "", cells[c], widths[c]);
      }
    }
    buffer.push_back('\n');
    if (buffer.size() > (1 << 20)) {
      put({buffer.data(), buffer.size()});
      buffer.clear();
    }
  };
  emit(header);
  for (std::size_t i = 0; i < counts.size(); ++i) emit(row(i));
  put({buffer.data(), buffer.size()});
}

void write_output(const hist_arguments& args, const hist_settings& settings, const bin_plan& plan,
                  std::span<const std::uint64_t> counts) {
  const bool bincount = plan.kind == bin_kind::bincount;
  const std::vector<std::string> header = bincount ? std::vector<std::string>{"value", "count"}
                                                   : std::vector<std::string>{"bin", "lower", "upper", "count"};
  if (settings.output == output_format::table) {
    const auto put = [](std::string_view text) {
      if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
        throw error(errc::io_error, "stdout",
                    "the counts cannot be written to stdout: " + std::string(std::strerror(errno)));
      }
    };
    write_text(put, header, plan, counts, false);
    return;
  }
  output_file out(args.output, "--output");
  if (settings.output == output_format::npy) {
    const std::uint64_t shape[] = {counts.size()};
    out.write(format_npy_header("<u8", shape));
    out.write({reinterpret_cast<const char*>(counts.data()), counts.size_bytes()});
  } else {
    write_text([&out](std::string_view text) { out.write(text); }, header, plan, counts, true);
  }
  out.commit();
}

void report(const hist_arguments& args, const hist_settings& settings, const sample_file& file, const bin_plan& plan,
            const count_totals& totals, bool automatic_range) {
  const std::uint64_t samples = file.num_samples();
  const std::uint64_t counted = samples - totals.left_out;
  const std::string parts = settings.gpus > 0 ? fmt::format("{} part{}, one a GPU", totals.chunks,
                                                             totals.chunks == 1 ? "" : "s")
                                              : fmt::format("{} chunk{} of at most {} MiB", totals.chunks,
                                                            totals.chunks == 1 ? "" : "s", settings.chunk_mb);
  std::string text = fmt::format("tally hist: {}: {} {} samples ({}), {}\n", file.name(), samples,
                                 to_string(file.type()), file.layout(), parts);
  text += fmt::format("  bins:     {}\n", plan.description);
  if (plan.kind != bin_kind::bincount) {
    text += fmt::format("            bins are [lower, upper){}\n",
                        settings.last_edge == upper_edge::inclusive
                            ? "; the last is [lower, upper], as numpy.histogram closes it"
                            : "; a sample equal to the last edge is left out (--last-edge exclusive)");
  }
  text += fmt::format("  counted:  {}\n", counted);
  if (plan.kind == bin_kind::bincount) {
    text += fmt::format("  left out: {} (values >= {})\n", totals.left_out, plan.num_bins);
  } else {
    text += fmt::format("  left out: {} (NaN or infinite: {}; outside the bins: {})\n", totals.left_out,
                        totals.not_finite, totals.left_out - totals.not_finite);
  }
  text += settings.gpus > 0 ? fmt::format("  backend:  gpu, {} GPU{} (a shard each, counts added by NCCL)\n",
                                          settings.gpus, settings.gpus == 1 ? "" : "s")
                            : fmt::format("  backend:  {}\n", to_string(settings.where));
  if (totals.strategies.empty()) text += "  strategy: none ran (nothing to count)\n";
  for (const strategy_use& use : totals.strategies) {
    text += fmt::format(
        "  strategy: {} ({}){}\n", to_string(use.chose.used), use.chose.reason,
        totals.strategies.size() > 1 ? fmt::format(", on {} chunk{}", use.chunks, use.chunks == 1 ? "" : "s") : "");
  }
  if (automatic_range && settings.last_edge == upper_edge::exclusive && totals.left_out > totals.not_finite) {
    const std::uint64_t at_maximum = totals.left_out - totals.not_finite;
    text += fmt::format(
        "  note:     {} sample{} equal to the largest value, the last edge, {} left out (--last-edge exclusive); "
        "numpy.histogram counts {}\n",
        at_maximum, at_maximum == 1 ? "" : "s", at_maximum == 1 ? "is" : "are", at_maximum == 1 ? "it" : "them");
  }
  // Warnings are printed under --quiet too: they say something may be wrong.
  std::vector<std::string> warnings;
  std::uint64_t sum = 0;
  for (const std::uint64_t count : totals.counts) sum += count;
  if (sum != counted) {
    warnings.push_back(fmt::format("the counts add up to {}, not {}: {} updates were lost", sum, counted, counted - sum));
  }
  if (file.trailing_bytes() > 0) {
    warnings.push_back(fmt::format("{} bytes after the last sample were ignored (as numpy.load ignores them)",
                                   file.trailing_bytes()));
  }
  if (args.quiet) text.clear();
  for (const std::string& warning : warnings) {
    text += (args.quiet ? "tally hist: warning: " : "  warning:  ") + warning + "\n";
  }
  std::fputs(text.c_str(), stderr);
}

template <class T>
void run_typed(const hist_arguments& args, const hist_settings& settings, sample_file& file) {
  if (args.bincount && !is_bincount_sample_v<T>) {
    invalid("--bincount", fmt::format("counts integer samples only ({}), but {} holds {}", integer_dtype_names(),
                                      file_label(file), to_string(file.type())));
  }
  chunk_reader<T> reader(file, settings.chunk_bytes);
  if constexpr (is_bincount_sample_v<T>) {
    if (args.bincount && args.bins_option->count() == 0 && settings.where == backend::cpu) {
      const auto [plan, totals] = count_bincount_from_data(settings, file, reader);
      write_output(args, settings, plan, totals.counts);
      report(args, settings, file, plan, totals, false);
      return;
    }
  }
  const bin_plan plan = plan_bins(args, settings, file, reader);
  // With a length from the data, the extra pass has already checked for negative samples.
  const bool check_negative = args.bincount && args.bins_option->count() > 0;
  const count_totals totals = count_file(plan, settings, file, reader, check_negative);
  write_output(args, settings, plan, totals.counts);
  const bool automatic_range = !args.bincount && args.edges_option->count() == 0 && args.range_option->count() == 0;
  report(args, settings, file, plan, totals, automatic_range);
}

int run_hist(const hist_arguments& args) {
  const hist_settings settings = check_arguments(args);
  // CUDA makes its context (a few hundred milliseconds) on a thread of its own while this one opens
  // the file, plans the bins and, for the data's range, reads the file once: the first CUDA call of
  // the count waits for it. Its errors, if any, come back from that call.
  std::future<void> context;
  if (settings.where == backend::gpu) {
    context = std::async(std::launch::async, [] {
      try {
        gpu::synchronize();
      } catch (const error&) {
      }
    });
  }
  std::optional<dtype> requested;
  if (!args.dtype_name.empty()) requested = parse_dtype(args.dtype_name);
  // A pipe is read as it arrives, once, when the bins are known before the samples are read (a
  // range, edges, a bincount's --bins, or the CPU's one-pass bincount); else it is copied to a
  // temporary file first, to be read twice.
  const bool one_pass = args.range_option->count() > 0 || args.edges_option->count() > 0 ||
                        (args.bincount && (args.bins_option->count() > 0 || settings.where == backend::cpu));
  sample_file file(args.file, requested, one_pass ? stream_reading::in_one_pass : stream_reading::copy_first);
  visit_dtype(file.type(), [&]<class T>(std::type_identity<T>) { run_typed<T>(args, settings, file); });
  return exit_success;
}

constexpr const char* hist_footer = R"(Bins:
  Bin i holds the samples x with lower_i <= x < upper_i, and the last bin is closed, [lower, upper],
  as numpy.histogram counts: `tally hist FILE` is numpy.histogram(np.load(FILE)). --last-edge
  exclusive makes every bin half-open (the library's own default, and CUB's), so a sample equal to
  the last edge is left out. The same rule applies to --edges.
  Even bins (--bins N, default 10) have numpy.histogram's edges exactly. Without --range the range
  is the data's min and max (an extra pass over the file), widened by 0.5 each way when they are
  equal, as numpy does; NaN or infinity in the data is then an error, as in numpy. float16 data
  has numpy's float16 edges; bfloat16 data (numpy has none) has edges computed in float64 and
  rounded to bfloat16, the library's rule, whatever the range.
  NaN, infinities and samples outside the bins are left out and reported.
  --bincount counts value v in bin v, like numpy.bincount: the length is the largest value + 1, or
  --bins N (values >= N are left out and reported). Negative values are an error.

Input:
  .npy files as numpy saves them (C or Fortran order, either byte order, bool as uint8), raw
  files with --dtype, and - for stdin (a .npy, told by its magic string, or raw with --dtype).

Output:
  A table on stdout (bin, lower, upper, count; for --bincount: value, count), or --output FILE.npy
  (the uint64 counts) or FILE.csv (the table's columns). Edges print in the precision samples are
  compared in (float32, float16 or bfloat16 for even bins of such data). A report on stderr gives
  the samples, counted, left out, the backend and the strategy that ran (--quiet: warnings only).

Large files are read in chunks of --chunk-mb; each is counted and added to a uint64 total. On the
  GPU the chunks stream through three pinned buffers (32 MiB by default): the threads
  read one while the one before is copied and the one before that counted.)";

}  // namespace

void add_hist_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<hist_arguments>();
  CLI::App* hist =
      app.add_subcommand("hist", "A histogram (or --bincount) of a .npy or raw binary file, on the CPU or GPU");
  hist->footer(hist_footer);

  hist->add_option("FILE", args->file,
                   "The samples: a .npy file (int8 to int64, uint8 to uint32, float16 to float64, bool; any shape, "
                   "C or Fortran order, either byte order), a raw binary file (little-endian, with --dtype; the "
                   "only form for bfloat16), or - for stdin")
      ->required();
  std::vector<std::string> dtype_choices;
  for (const dtype type : all_dtypes) dtype_choices.emplace_back(to_string(type));
  args->dtype_option = hist->add_option("--dtype", args->dtype_name,
                                        "The sample type of a raw file; for a .npy file it is read from the header "
                                        "and --dtype, if given, must agree")
                           ->check(CLI::IsMember(dtype_choices));
  args->bins_option = hist->add_option("--bins", args->bins,
                                       "Number of even bins (default 10, as numpy.histogram); with --bincount, the "
                                       "output length (values >= N are left out)");
  args->range_option = hist->add_option("--range", args->range,
                                        "Lower and upper edge of the even bins; default: the data's min and max "
                                        "(an extra pass), as numpy")
                           ->expected(2)
                           ->type_name("LO HI");
  args->edges_option = hist->add_option("--edges", args->edges_file,
                                        "Bins between given edges: a text file of numbers (whitespace- or "
                                        "newline-separated) or a 1-d .npy (float or integer); ascending")
                           ->type_name("FILE")
                           ->excludes(args->range_option)
                           ->excludes(args->bins_option);
  CLI::Option* bincount = hist->add_flag("--bincount", args->bincount,
                                         "Count each integer value v in bin v, as numpy.bincount (integer dtypes only)")
                              ->excludes(args->range_option)
                              ->excludes(args->edges_option);
  hist->add_option("--last-edge", args->last_edge,
                   "inclusive: the last bin is [lower, upper], as numpy.histogram; exclusive: every bin is "
                   "[lower, upper), as the library and CUB count, so a sample equal to the last edge is left out")
      ->check(CLI::IsMember({"inclusive", "exclusive"}))
      ->capture_default_str()
      ->excludes(bincount);
  // The flag that closed the last bin before that became the default; kept so that scripts run.
  hist->add_flag("--include-upper-edge", args->include_upper_edge, "The default now: --last-edge inclusive")
      ->group("");
  hist->add_option("--strategy", args->strategy_name,
                   "How conflicting updates are resolved: automatic, or a CPU strategy (" +
                       strategy_list(backend::cpu) + ") or GPU strategy (" + strategy_list(backend::gpu) + ")")
      ->capture_default_str();
  hist->add_option("--backend", args->backend_name, "Where to count: cpu, gpu, or auto (the GPU when there is one)")
      ->check(CLI::IsMember({"cpu", "gpu", "auto"}))
      ->capture_default_str();
  args->chunk_option = hist->add_option("--chunk-mb", args->chunk_mb,
                   "Read and count the file in chunks of this many MiB (default: 256 on the CPU, 32 on the GPU)");
  hist->add_option("--gpus", args->gpus,
                   "Shard the file over N GPUs of this machine (or all), one contiguous part a GPU, and add their "
                   "counts with NCCL; the counts are one GPU's. Each GPU holds its part in memory")
      ->type_name("N|all");
  hist->add_option("--output", args->output,
                   "Write the counts to FILE.npy (uint64) or FILE.csv instead of a table on stdout")
      ->type_name("FILE");
  hist->add_flag("--quiet", args->quiet, "No report on stderr (warnings are still printed)");

  hist->callback([args, &exit_code] { exit_code = run_hist(*args); });
}

}  // namespace tally::cli
