// `tally contention`: atomic throughput as the number of distinct addresses grows. On the CPU, per
// operation (add, CAS-loop add, max, exchange) and method (atomics, a critical section, privatized
// copies); on the GPU (contention_gpu.cpp), per operation, memory, scope and warp aggregation.
// Every run, warm-up included, is checked against the layout's exact expectation before its time
// counts; a wrong run makes the row a MISMATCH and the exit code 1. The CPU experiment itself is
// in the lab (lab/src/contention_experiment.cpp); this file parses the options, runs the CPU sweep
// and reports it.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "arguments.hpp"
#include "commands.hpp"
#include "contention_command.hpp"
#include "host_timing.hpp"
#include "plot.hpp"
#include "run_environment.hpp"
#include "tally/cpu/parallel.hpp"
#include "tally/error.hpp"
#include "tally/lab/contention_experiment.hpp"

namespace tally::cli {
namespace {

constexpr const char* command_name = "tally contention";
constexpr std::int64_t max_addresses = std::int64_t{1} << 22;     // privatized: a copy of them per thread
constexpr std::int64_t max_threads_asked = std::int64_t{1} << 20;  // logical threads
constexpr std::int64_t max_total_ops = std::int64_t{1} << 40;      // T K: values and sums stay exact
constexpr const char* layout_text =
    "logical thread t's i-th update goes to address (t + i*T) mod A; add/cas add 1 + ((t xor i) mod 8), "
    "max/exch write i*T + t + 1; 64-bit words, contiguous (8 to a 64-byte line)";

struct contention_row {
  contention_case what;
  int team = 0;
  std::string verdict;  ///< "exact", "MISMATCH run R: ...", or "skipped: why"
  bool timed = false;
  bool mismatch = false;
  time_summary time;
  double ops_per_s = 0.0;  ///< T K / the median time
};

/// Runs one case warmup + runs times, checking every run; times only runs that passed.
contention_row measure(const contention_case& c, const contention_config& cfg) {
  contention_row row;
  row.what = c;
  if (const auto why = not_applicable(c.op, c.method)) {
    row.verdict = "skipped: " + *why;
    return row;
  }
  const contention_expectation want = expected_outcome(c);
  std::vector<double> times;
  for (int run = 0; run < cfg.warmup + cfg.runs; ++run) {
    const contention_outcome got = run_contention_case(c);
    row.team = got.team;
    if (const auto wrong = check_contention_outcome(c, want, got)) {
      row.verdict = fmt::format("MISMATCH run {}: {}", run, *wrong);
      row.mismatch = true;
      return row;
    }
    if (run >= cfg.warmup) times.push_back(got.ms);
  }
  row.verdict = "exact";
  row.timed = true;
  row.time = summarize_ms(std::move(times));
  const double seconds = row.time.median_ms * 1e-3;
  row.ops_per_s = seconds > 0 ? static_cast<double>(c.threads * c.ops_per_thread) / seconds : 0.0;
  return row;
}

void print_rows(std::FILE* out, const std::vector<contention_row>& rows) {
  fmt::print(out, "{:<5} {:>9} {:<11} {:>7} {:>5} {:>10}  {:<8} {:>10} {:>6} {:>10}\n", "op", "addresses", "method",
             "threads", "team", "ops/thread", "check", "median ms", "noise", "Mops/s");
  for (const contention_row& r : rows) {
    const std::string start = fmt::format("{:<5} {:>9} {:<11} {:>7} {:>5} {:>10}  ", to_string(r.what.op),
                                          r.what.addresses, to_string(r.what.method), r.what.threads,
                                          r.team > 0 ? std::to_string(r.team) : "-", r.what.ops_per_thread);
    if (!r.timed) {
      fmt::print(out, "{}{}\n", start, r.verdict);
      continue;
    }
    fmt::print(out, "{}{:<8} {:>10.3f} {:>5.1f}% {:>10.2f}\n", start, r.verdict, r.time.median_ms, r.time.noise_percent,
               r.ops_per_s * 1e-6);
  }
}

/// Millions of operations a second, one line per (op, method), one column per address count:
/// the contention curve. Verified rows only.
void print_summary(std::FILE* out, const std::vector<contention_row>& rows, const std::vector<std::int64_t>& addresses) {
  std::map<std::pair<int, int>, std::map<std::int64_t, double>> cells;
  std::vector<std::pair<int, int>> order;
  for (const contention_row& r : rows) {
    if (!r.timed) continue;
    const std::pair<int, int> key{static_cast<int>(r.what.op), static_cast<int>(r.what.method)};
    if (!cells.contains(key)) order.push_back(key);
    cells[key][r.what.addresses] = r.ops_per_s;
  }
  fmt::print(out, "\nsummary: Mops/s by number of addresses (verified runs only)\n{:<5} {:<11}", "op", "method");
  for (const std::int64_t a : addresses) fmt::print(out, " {:>9}", a);
  fmt::print(out, "\n");
  for (const auto& key : order) {
    fmt::print(out, "{:<5} {:<11}", to_string(static_cast<contention_op>(key.first)),
               to_string(static_cast<contention_method>(key.second)));
    for (const std::int64_t a : addresses) {
      const auto it = cells[key].find(a);
      fmt::print(out, " {:>9}", it == cells[key].end() ? std::string("-") : fmt::format("{:.2f}", it->second * 1e-6));
    }
    fmt::print(out, "\n");
  }
  const auto mismatches = std::count_if(rows.begin(), rows.end(), [](const contention_row& r) { return r.mismatch; });
  fmt::print(out, "{} rows, {} verification mismatches\n", rows.size(), mismatches);
}

void write_csv(const std::string& path, const run_environment& env, const std::vector<contention_row>& rows) {
  std::ofstream file(path);
  if (!file) throw error(errc::io_error, "--csv", "cannot write '" + path + "'");
  file << environment_csv_comment("contention", env) << ", layout: " << layout_text << "\n";
  file << "op,method,addresses,threads,team,ops_per_thread,check,timed,runs,median_ms,min_ms,noise_percent,ops_per_s\n";
  for (const contention_row& r : rows) {
    file << fmt::format("{},{},{},{},{},{},\"{}\",{},{},{:.6f},{:.6f},{:.2f},{:.6e}\n", to_string(r.what.op),
                        to_string(r.what.method), r.what.addresses, r.what.threads, r.team, r.what.ops_per_thread,
                        r.verdict, r.timed ? 1 : 0, r.time.runs, r.time.median_ms, r.time.min_ms,
                        r.time.noise_percent, r.ops_per_s);
  }
}

void write_json(const std::string& path, const run_environment& env, const std::vector<contention_row>& rows) {
  nlohmann::json doc;
  add_environment_json(doc, "contention", env);
  doc["layout"] = layout_text;
  nlohmann::json& out_rows = doc["rows"];
  out_rows = nlohmann::json::array();
  for (const contention_row& r : rows) {
    out_rows.push_back({{"op", to_string(r.what.op)},
                        {"method", to_string(r.what.method)},
                        {"addresses", r.what.addresses},
                        {"threads", r.what.threads},
                        {"team", r.team},
                        {"ops_per_thread", r.what.ops_per_thread},
                        {"check", r.verdict},
                        {"timed", r.timed},
                        {"runs", r.time.runs},
                        {"median_ms", r.time.median_ms},
                        {"min_ms", r.time.min_ms},
                        {"noise_percent", r.time.noise_percent},
                        {"ops_per_s", r.ops_per_s}});
  }
  std::ofstream file(path);
  if (!file) throw error(errc::io_error, "--json", "cannot write '" + path + "'");
  file << doc.dump(2) << "\n";
}

int run_contention(const contention_config& cfg) {
  if (!cfg.plot.empty()) check_plot_path(cfg.plot, command_name, "--plot");
  if (resolve_backend(cfg.backend_name, command_name) == backend::gpu) return run_gpu_contention(cfg);
  if (!cfg.gpu_only_given.empty()) {
    throw_invalid_argument(command_name, cfg.gpu_only_given.front(),
                           "is for the GPU backend; the CPU sweep takes --methods");
  }
  std::vector<contention_op> ops;
  for (const std::string& name : cfg.ops) {
    const auto op = parse_contention_op(name);
    if (!op) throw_invalid_argument(command_name, "--ops", "has an unknown operation '" + name + "' (add, cas, max, exch)");
    ops.push_back(*op);
  }
  std::vector<contention_method> methods;
  for (const std::string& name : cfg.methods) {
    const auto m = parse_contention_method(name);
    if (!m) {
      throw_invalid_argument(command_name, "--methods",
                             "has an unknown method '" + name + "' (atomic, critical, privatized)");
    }
    methods.push_back(*m);
  }
  std::vector<std::int64_t> addresses;
  for (const std::string& text : cfg.addresses) {
    const std::int64_t a = parse_count(text, command_name, "--addresses");
    if (a < 1 || a > max_addresses) {
      throw_invalid_argument(command_name, "--addresses",
                             fmt::format("must be between 1 and {} (got {})", max_addresses, a));
    }
    addresses.push_back(a);
  }
  if (ops.empty() || methods.empty() || addresses.empty()) {
    throw_invalid_argument(command_name, ops.empty() ? "--ops" : methods.empty() ? "--methods" : "--addresses",
                           "needs at least one value");
  }
  const std::int64_t threads = cfg.threads == -1 ? cpu::detail::max_threads() : cfg.threads;
  if (threads < 1 || threads > max_threads_asked) {
    throw_invalid_argument(command_name, "--threads",
                           fmt::format("must be between 1 and {} (got {})", max_threads_asked, threads));
  }
  const std::int64_t ops_per_thread =
      parse_count(cfg.ops_per_thread.empty() ? "2^16" : cfg.ops_per_thread, command_name, "--ops-per-thread");
  if (ops_per_thread < 1 || ops_per_thread > max_total_ops / threads) {
    throw_invalid_argument(command_name, "--ops-per-thread",
                           fmt::format("must be between 1 and 2^40 / threads = {} (got {})", max_total_ops / threads,
                                       ops_per_thread));
  }
  if (cfg.runs < 1) throw_invalid_argument(command_name, "--runs", "must be >= 1");
  if (cfg.warmup < 0) throw_invalid_argument(command_name, "--warmup", "must be >= 0");

  const run_environment env = describe_run_environment(backend::cpu);
  print_environment_header(stdout, "contention", env);
  fmt::print("layout: {}\n", layout_text);
  fmt::print("{} threads (OpenMP team of up to {}), {} updates each; median of {} runs after {} warm-up; "
             "every run checked\n\n",
             threads, cpu::detail::max_threads(), ops_per_thread, cfg.runs, cfg.warmup);
  std::fflush(stdout);

  std::vector<contention_row> rows;
  const std::size_t total = ops.size() * methods.size() * addresses.size();
  for (const contention_op op : ops) {
    for (const std::int64_t a : addresses) {
      for (const contention_method m : methods) {
        if (!cfg.quiet) {
          std::fprintf(stderr, "[contention %zu/%zu] %s %s addresses=%lld\n", rows.size() + 1, total,
                       std::string(to_string(op)).c_str(), std::string(to_string(m)).c_str(),
                       static_cast<long long>(a));
        }
        rows.push_back(measure(contention_case{op, m, a, threads, ops_per_thread}, cfg));
      }
    }
  }
  print_rows(stdout, rows);
  print_summary(stdout, rows, addresses);
  if (!cfg.csv.empty()) write_csv(cfg.csv, env, rows);
  if (!cfg.json.empty()) write_json(cfg.json, env, rows);
  if (!cfg.plot.empty()) {
    plot_result(cfg.plot, cfg.json, command_name, [&](const std::string& path) { write_json(path, env, rows); });
  }
  const bool any_mismatch = std::any_of(rows.begin(), rows.end(), [](const contention_row& r) { return r.mismatch; });
  return any_mismatch ? exit_mismatch : exit_success;
}

}  // namespace

void add_contention_command(CLI::App& app, int& exit_code) {
  auto cfg = std::make_shared<contention_config>();
  CLI::App* sub = app.add_subcommand(
      "contention", "Atomic throughput as the number of distinct addresses grows (GPU or CPU), every run verified");
  sub->add_option("--backend", cfg->backend_name, "auto (the GPU when there is one), gpu or cpu")
      ->check(CLI::IsMember({"auto", "gpu", "cpu"}))
      ->capture_default_str();
  sub->add_option("--addresses", cfg->addresses, "Numbers of distinct addresses, e.g. 1,4,16,...,65536")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--ops", cfg->ops, "Operations: add, cas (a CAS-loop add), max (a CAS-loop max), exch")
      ->delimiter(',')
      ->capture_default_str();
  CLI::Option* methods =
      sub->add_option("--methods", cfg->methods,
                      "CPU: atomic (std::atomic_ref), critical (one omp critical section), privatized (per-thread "
                      "copies merged at the end)")
          ->delimiter(',')
          ->capture_default_str();
  CLI::Option* memory = sub->add_option("--memory", cfg->memory,
                                        "GPU: global, shared (a copy per block), global_private (a global slice per "
                                        "block)")
                            ->delimiter(',')
                            ->capture_default_str();
  CLI::Option* scopes =
      sub->add_option("--scopes", cfg->scopes, "GPU: cuda::thread_scope of the atomics: block, device, system")
          ->delimiter(',')
          ->capture_default_str();
  CLI::Option* aggregation =
      sub->add_option("--aggregation", cfg->aggregation,
                      "GPU: none, warp (lanes on one word combine: __match_any_sync + __reduce_*_sync)")
          ->delimiter(',')
          ->capture_default_str();
  CLI::Option* block_threads =
      sub->add_option("--block-threads", cfg->block_threads, "GPU: threads per block (a multiple of 32)")
          ->capture_default_str();
  CLI::Option* max_cas = sub->add_option("--max-cas-contenders", cfg->max_cas_contenders,
                                         "GPU: skip cas rows with more threads competing for one word (each "
                                         "costs that many retries per update)")
                             ->capture_default_str();
  sub->add_option("--threads", cfg->threads,
                  "Threads T. CPU: logical threads (default: the OpenMP thread count; more than the machine has run "
                  "in turns). GPU: all threads of the grid, a multiple of --block-threads (default: 1024 per SM)");
  sub->add_option("--ops-per-thread", cfg->ops_per_thread,
                  "Updates K per thread, e.g. 65536 or 2^16 (default: 2^16 on the CPU, 32 on the GPU)");
  sub->add_option("--runs", cfg->runs, "Timed runs per case; the median is reported")->capture_default_str();
  sub->add_option("--warmup", cfg->warmup, "Checked but untimed runs before them")->capture_default_str();
  sub->add_option("--csv", cfg->csv, "Also write the rows as CSV to this file");
  sub->add_option("--json", cfg->json, "Also write the rows as JSON to this file");
  sub->add_option("--plot", cfg->plot,
                  "Also draw the results to this .png or .svg file: operations per second against addresses, "
                  "log-log (needs python3 with matplotlib)");
  sub->add_flag("--quiet", cfg->quiet, "No progress on stderr");
  sub->callback([cfg, &exit_code, methods, memory, scopes, aggregation, block_threads, max_cas] {
    if (methods->count() > 0) cfg->cpu_only_given.push_back("--methods");
    for (const CLI::Option* gpu_only : {memory, scopes, aggregation, block_threads, max_cas}) {
      if (gpu_only->count() > 0) cfg->gpu_only_given.push_back(gpu_only->get_name());
    }
    exit_code = run_contention(*cfg);
  });
}

}  // namespace tally::cli
