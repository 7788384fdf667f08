// Renders benchmark rows as a table, a per-case summary, CSV and JSON.
#include "bench_report.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "host_timing.hpp"
#include "result_files.hpp"
#include "tally/error.hpp"
#include "tally/gpu/timing.hpp"

namespace tally::cli {

void summarize_times(bench_row& row, std::vector<double> times_ms, std::int64_t bytes_read, double read_bytes_per_s) {
  const time_summary t = summarize_ms(std::move(times_ms));
  row.timed = true;
  row.runs = t.runs;
  row.median_ms = t.median_ms;
  row.min_ms = t.min_ms;
  row.max_ms = t.max_ms;
  row.noise_percent = t.noise_percent;
  const double seconds = row.median_ms * 1e-3;
  row.samples_per_s = seconds > 0 ? static_cast<double>(row.num_samples) / seconds : 0.0;
  row.bytes_per_s = seconds > 0 ? static_cast<double>(bytes_read) / seconds : 0.0;
  row.read_fraction = read_bytes_per_s > 0 ? row.bytes_per_s / read_bytes_per_s : 0.0;
}

void print_environment(std::FILE* out, const bench_environment& env) {
  print_environment_header(out, "bench", env);
  fmt::print(out, "read bandwidth {:.1f} GB/s ({}); timing: {}\n\n", env.read_bytes_per_s * 1e-9, env.read_method,
             timing_text(env.timing));
}

std::string timing_text(const std::string& timing) {
  if (timing == gpu::to_string(gpu::run_timing::gpu)) {
    return "GPU time, each run held behind a kernel until it is enqueued (launch costs not counted)";
  }
  if (timing == gpu::to_string(gpu::run_timing::with_launch)) {
    return "with launch, events around each run's launching on an idle stream";
  }
  return timing;
}

namespace {
std::string strategy_label(const bench_row& row) {
  return row.strategy == row.used || row.used.empty() ? row.strategy : row.strategy + "->" + row.used;
}
}  // namespace

bool is_binned(const bench_row& row) {
  return row.operation == "histogram" || row.operation == "histogram_range" || row.operation == "weighted_histogram";
}

namespace {
/// The rows of one binned operation as a table, with each row's bins kind; weighted rows show
/// their variant too.
void print_binned_table(std::FILE* out, const std::vector<bench_row>& rows, const std::string& operation) {
  const bool with_variant = operation == "weighted_histogram";
  const auto left = [&](const std::string& type, const auto& samples, const std::string& dist, const auto& bins,
                        const std::string& kind, const std::string& variant) {
    return fmt::format("{:<8} {:>11} {:<10} {:>8} {:<7}  ", type, samples, dist, bins, kind) +
           (with_variant ? fmt::format("{:<29}  ", variant) : std::string());
  };
  fmt::print(out, "{}{:<34} {:<16} {:>10} {:>6} {:>10} {:>9} {:>6}\n",
             left("type", "samples", "dist", "bins", "kind", "variant"), "strategy", "check", "median ms", "noise",
             "Gsample/s", "GB/s", "read");
  for (const bench_row& row : rows) {
    if (row.operation != operation) continue;
    const std::string start =
        left(row.sample_type, row.num_samples, row.distribution, row.num_bins, row.bins_kind, row.variant);
    if (!row.timed) {
      fmt::print(out, "{}{:<34} {}\n", start, strategy_label(row), row.verdict);
      continue;
    }
    fmt::print(out, "{}{:<34} {:<16} {:>10.3f} {:>5.1f}% {:>10.2f} {:>9.1f} {:>6.3f}{}\n", start, strategy_label(row),
               row.verdict, row.median_ms, row.noise_percent, row.samples_per_s * 1e-9, row.bytes_per_s * 1e-9,
               row.read_fraction, row.note.empty() ? "" : "  " + row.note);
  }
}

bool has_operation(const std::vector<bench_row>& rows, const std::string& operation) {
  return std::any_of(rows.begin(), rows.end(), [&](const bench_row& r) { return r.operation == operation; });
}
}  // namespace

void print_table(std::FILE* out, const std::vector<bench_row>& rows) {
  if (has_operation(rows, "histogram")) print_binned_table(out, rows, "histogram");
  if (has_operation(rows, "histogram_range")) {
    fmt::print(out, "\nrange bins: sorted edges over [0, bins], log-spaced (log) or drawn at random (random)\n");
    print_binned_table(out, rows, "histogram_range");
  }
  if (has_operation(rows, "weighted_histogram")) {
    fmt::print(out, "\nweighted histograms: bytes read = samples + weights (CUB has no weighted histogram: no "
                    "peer)\n");
    print_binned_table(out, rows, "weighted_histogram");
  }
}

void print_reduce_table(std::FILE* out, const std::vector<bench_row>& rows) {
  if (std::all_of(rows.begin(), rows.end(), is_binned)) return;
  fmt::print(out, "\n{:<8} {:>11} {:<14} {:<18}  {:<34} {:<16} {:>10} {:>6} {:>10} {:>9} {:>6}  {}\n", "type",
             "samples", "operation", "variant", "strategy", "check", "median ms", "noise", "Gsample/s", "GB/s", "read",
             "note");
  for (const bench_row& row : rows) {
    if (is_binned(row)) continue;
    if (!row.timed) {
      fmt::print(out, "{:<8} {:>11} {:<14} {:<18}  {:<34} {}\n", row.sample_type, row.num_samples, row.operation,
                 row.variant, strategy_label(row), row.verdict);
      continue;
    }
    fmt::print(out, "{:<8} {:>11} {:<14} {:<18}  {:<34} {:<16} {:>10.3f} {:>5.1f}% {:>10.2f} {:>9.1f} {:>6.3f}  {}\n",
               row.sample_type, row.num_samples, row.operation, row.variant, strategy_label(row), row.verdict,
               row.median_ms, row.noise_percent, row.samples_per_s * 1e-9, row.bytes_per_s * 1e-9, row.read_fraction,
               row.note);
  }
}

namespace {
/// Reductions side by side, one line per (operation, variant, type, size): atomics vs reductions.
void print_reduce_summary(std::FILE* out, const std::vector<bench_row>& rows) {
  using key = std::tuple<std::string, std::string, std::string, std::int64_t>;
  std::map<key, std::map<std::string, const bench_row*>> cells;
  std::vector<key> order;
  for (const bench_row& row : rows) {
    if (is_binned(row)) continue;
    const key k{row.operation, row.variant, row.sample_type, row.num_samples};
    if (!cells.contains(k)) order.push_back(k);
    if (row.timed && !row.mismatch) cells[k][row.strategy] = &row;
  }
  if (order.empty()) return;
  const std::vector<std::string> columns{"atomic",     "atomic_per_thread", "block_reduce_atomic", "two_phase",
                                         "cub",        "sequential",        "critical",            "privatized",
                                         "reduction",  "automatic"};
  std::vector<std::string> shown;
  for (const std::string& c : columns) {
    for (const auto& [k, cell] : cells) {
      if (cell.contains(c)) {
        shown.push_back(c);
        break;
      }
    }
  }
  fmt::print(out, "\nsummary of reductions (fraction of the read bandwidth; verified rows only)\n");
  fmt::print(out, "{:<14} {:<18} {:<8} {:>11}", "operation", "variant", "type", "samples");
  for (const std::string& c : shown) fmt::print(out, " {:>19}", c);
  fmt::print(out, "\n");
  for (const key& k : order) {
    fmt::print(out, "{:<14} {:<18} {:<8} {:>11}", std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k));
    const auto& cell = cells[k];
    for (const std::string& c : shown) {
      const auto it = cell.find(c);
      fmt::print(out, " {:>19}", it == cell.end() ? std::string("-") : fmt::format("{:.3f}", it->second->read_fraction));
    }
    fmt::print(out, "\n");
  }
}
}  // namespace

namespace {
/// Per case of a binned operation (bins kind and variant): the best verified named strategy,
/// automatic, and CUB for histograms (weighted histograms have no CUB peer).
void print_binned_summary(std::FILE* out, const bench_environment& env, const std::vector<bench_row>& rows,
                          const std::string& operation) {
  using key = std::tuple<std::string, std::string, std::int64_t, std::int64_t, std::string, std::string>;
  struct cell {
    const bench_row* best = nullptr;
    const bench_row* automatic = nullptr;
    const bench_row* cub = nullptr;
  };
  std::map<key, cell> cells;
  std::vector<key> order;
  for (const bench_row& row : rows) {
    if (row.operation != operation) continue;
    const key k{row.variant, row.sample_type, row.num_samples, row.num_bins, row.distribution, row.bins_kind};
    if (!cells.contains(k)) order.push_back(k);
    cell& c = cells[k];
    if (!row.timed || row.mismatch || (row.verdict != "exact" && row.verdict != "within bound")) continue;
    if (row.strategy == "automatic") c.automatic = &row;
    if (row.strategy == "cub") c.cub = &row;
    if (row.strategy != "automatic" && (c.best == nullptr || row.read_fraction > c.best->read_fraction)) c.best = &row;
  }
  if (order.empty()) return;
  const bool weighted = operation == "weighted_histogram";
  if (weighted) {
    fmt::print(out, "\nsummary of weighted histograms ({} backend, fraction of the {:.0f} GB/s read bandwidth; "
                    "verified results only; CUB has no weighted histogram)\n",
               env.backend, env.read_bytes_per_s * 1e-9);
    fmt::print(out, "{:<8} {:>11} {:>8} {:<7} {:<10}  {:<29}  {:<20} {:>6}  {:<28} {:>6}\n", "type", "samples",
               "bins", "kind", "dist", "variant", "best", "read", "automatic", "read");
  } else {
    fmt::print(out, "\nsummary{} ({} backend, fraction of the {:.0f} GB/s read bandwidth; exact results only)\n",
               operation == "histogram_range" ? " of range-bin histograms" : "", env.backend,
               env.read_bytes_per_s * 1e-9);
    fmt::print(out, "{:<8} {:>11} {:>8} {:<7} {:<10}  {:<20} {:>6}  {:<28} {:>6}  {:>6}\n", "type", "samples", "bins",
               "kind", "dist", "best", "read", "automatic", "read", "cub");
  }
  for (const key& k : order) {
    const cell& c = cells[k];
    const auto fraction = [](const bench_row* r) { return r ? fmt::format("{:.3f}", r->read_fraction) : std::string("-"); };
    const std::string start = fmt::format("{:<8} {:>11} {:>8} {:<7} {:<10}  ", std::get<1>(k), std::get<2>(k),
                                          std::get<3>(k), std::get<5>(k), std::get<4>(k)) +
                              (weighted ? fmt::format("{:<29}  ", std::get<0>(k)) : std::string());
    fmt::print(out, "{}{:<20} {:>6}  {:<28} {:>6}{}\n", start, c.best ? c.best->strategy : "-", fraction(c.best),
               c.automatic ? "automatic->" + c.automatic->used : "-", fraction(c.automatic),
               weighted ? std::string() : fmt::format("  {:>6}", fraction(c.cub)));
  }
}
}  // namespace

void print_summary(std::FILE* out, const bench_environment& env, const std::vector<bench_row>& rows) {
  print_binned_summary(out, env, rows, "histogram");
  print_binned_summary(out, env, rows, "histogram_range");
  print_binned_summary(out, env, rows, "weighted_histogram");
  print_reduce_summary(out, rows);
  const auto mismatches = std::count_if(rows.begin(), rows.end(), [](const bench_row& r) { return r.mismatch; });
  fmt::print(out, "{} rows, {} verification mismatches\n", rows.size(), mismatches);
}

std::string bench_csv_comment(const bench_environment& env) {
  return environment_csv_comment("bench", env) + fmt::format(", read_bytes_per_s {:.6e} ({}), timing {}",
                                                             env.read_bytes_per_s, env.read_method, env.timing);
}

nlohmann::json bench_document(std::string_view command, const bench_environment& env) {
  nlohmann::json doc = result_document(command, env);
  doc["read_bytes_per_s"] = env.read_bytes_per_s;
  doc["read_method"] = env.read_method;
  doc["warmup_runs"] = env.warmup_runs;
  doc["timing"] = env.timing;
  return doc;
}

const std::vector<row_field<bench_row>> bench_fields{
    {"type", &bench_row::sample_type},
    {"samples", &bench_row::num_samples},
    {"distribution", &bench_row::distribution},
    {"bins", &bench_row::num_bins},
    {"strategy", &bench_row::strategy},
    {"used", &bench_row::used},
    {"check", &bench_row::verdict},
    {"runs", &bench_row::runs},
    {"median_ms", &bench_row::median_ms},
    {"min_ms", &bench_row::min_ms},
    {"max_ms", &bench_row::max_ms},
    {"noise_percent", &bench_row::noise_percent},
    {"samples_per_s", &bench_row::samples_per_s},
    {"bytes_per_s", &bench_row::bytes_per_s},
    {"read_fraction", &bench_row::read_fraction},
    {"operation", &bench_row::operation},
    {"variant", &bench_row::variant},
    {"note", &bench_row::note},
    {"bins_kind", &bench_row::bins_kind},
    {"lower", &bench_row::lower},
    {"upper", &bench_row::upper},
    {"reason", &bench_row::reason},
    {"timed", &bench_row::timed}};

}  // namespace tally::cli
