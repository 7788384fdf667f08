// `tally contention`: atomic throughput as the number of distinct addresses grows, on the GPU or the
// CPU. The experiment is the lab's (tally/lab/contention.hpp: the layout, the strategies compared,
// the checks and the runs of either backend); this file turns the options into cases, runs them and
// reports the rows, one code path for both backends. Every run, warm-up included, is checked
// against the layout's exact expectation before its time counts; a wrong run makes the row a
// MISMATCH and the exit code 1.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "arguments.hpp"
#include "commands.hpp"
#include "host_timing.hpp"
#include "result_files.hpp"
#include "run_environment.hpp"
#include "tally/cpu/parallel.hpp"
#include "tally/error.hpp"
#include "tally/gpu.hpp"
#include "tally/lab/contention.hpp"

namespace tally::cli {
namespace {

constexpr const char* command_name = "tally contention";
/// What `tally --help` says of `tally contention`, and what its result files hold.
const measuring_command contention_command{
    "contention", "Atomic throughput as the number of distinct addresses grows (GPU or CPU), every run verified",
    "rows", "operations per second against addresses, log-log"};

struct contention_config : result_files {
  std::string backend_name = "auto";
  std::vector<std::string> addresses{"1", "4", "16", "64", "256", "1024", "4096", "16384", "65536"};
  std::vector<std::string> ops{"add", "cas", "max", "exch"};
  std::vector<std::string> methods{"atomic", "critical", "privatized"};   ///< CPU only
  std::vector<std::string> memory{"global", "shared", "global_private"};  ///< GPU only
  std::vector<std::string> scopes{"block", "device", "system"};           ///< GPU only
  std::vector<std::string> aggregation{"none", "warp"};                   ///< GPU only
  std::int64_t threads = -1;        ///< -1: the backend's default (CPU: its thread count; GPU: 1024 per SM)
  std::string ops_per_thread;       ///< empty: the backend's default (CPU 2^16, GPU 32)
  int block_threads = 256;          ///< GPU only
  double max_cas_contenders = 256;  ///< GPU only: cas rows with more contenders per word are skipped
  int runs = 5;
  int warmup = 1;
  std::vector<const CLI::Option*> cpu_only_options;  ///< set as the options are added
  std::vector<const CLI::Option*> gpu_only_options;
};

/// `tally contention`'s own options, between --backend and the result files'.
void add_contention_options(CLI::App& command, contention_config& cfg) {
  add_list_option(command, "--addresses", cfg.addresses, "Numbers of distinct addresses, e.g. 1,4,16,...,65536");
  add_list_option(command, "--ops", cfg.ops, "Operations: add, cas (a CAS-loop add), max (a CAS-loop max), exch");
  cfg.cpu_only_options.push_back(
      add_list_option(command, "--methods", cfg.methods,
                      "CPU: atomic (std::atomic_ref), critical (one omp critical section), privatized (per-thread "
                      "copies merged at the end)"));
  cfg.gpu_only_options = {
      add_list_option(command, "--memory", cfg.memory,
                      "GPU: global, shared (a copy per block), global_private (a global slice per block)"),
      add_list_option(command, "--scopes", cfg.scopes, "GPU: cuda::thread_scope of the atomics: block, device, system"),
      add_list_option(command, "--aggregation", cfg.aggregation,
                      "GPU: none, warp (lanes on one word combine: __match_any_sync + __reduce_*_sync)"),
      command.add_option("--block-threads", cfg.block_threads, "GPU: threads per block (a multiple of 32)")
          ->capture_default_str(),
      command
          .add_option("--max-cas-contenders", cfg.max_cas_contenders,
                      "GPU: skip cas rows with more threads competing for one word (each costs that many retries "
                      "per update)")
          ->capture_default_str()};
  command.add_option("--threads", cfg.threads,
                     "Threads T. CPU: logical threads (default: the OpenMP thread count; more than the machine has run "
                     "in turns). GPU: all threads of the grid, a multiple of --block-threads (default: 1024 per SM)");
  command.add_option("--ops-per-thread", cfg.ops_per_thread,
                     "Updates K per thread, e.g. 65536 or 2^16 (default: 2^16 on the CPU, 32 on the GPU)");
  command.add_option("--runs", cfg.runs, "Timed runs per case; the median is reported")->capture_default_str();
  command.add_option("--warmup", cfg.warmup, "Checked but untimed runs before them")->capture_default_str();
}

/// A row of the report: the lab's row and the figures drawn from it.
struct report_row : lab::contention_row {
  double contenders = 0.0;
  time_summary time;       ///< timed rows only
  double ops_per_s = 0.0;  ///< T K / the median time
};

/// The values `names` name, each parsed by `parse` as one of `all`; the option is named otherwise.
template <class Enum, std::size_t N, class Parse>
std::vector<Enum> parse_names(const std::vector<std::string>& names, const char* option, const Enum (&all)[N],
                              Parse parse) {
  std::vector<Enum> out;
  for (const std::string& name : names) {
    const std::optional<Enum> value = parse(name);
    if (!value) {
      std::string allowed;
      for (const Enum e : all) allowed += (allowed.empty() ? "" : ", ") + std::string(lab::to_string(e));
      throw_invalid_argument(command_name, option, "has an unknown value '" + name + "' (" + allowed + ")");
    }
    out.push_back(*value);
  }
  if (out.empty()) throw_invalid_argument(command_name, option, "needs at least one value");
  return out;
}

/// The strategies the sweep compares: the CPU's --methods, or the GPU's --memory x --scopes x --aggregation.
std::vector<lab::contention_method> methods_of(const contention_config& cfg, backend where) {
  std::vector<lab::contention_method> methods;
  if (where == backend::cpu) {
    for (const lab::cpu_method m : parse_names(cfg.methods, "--methods", lab::all_cpu_methods, lab::parse_cpu_method)) {
      methods.push_back(m);
    }
    return methods;
  }
  const auto memories = parse_names(cfg.memory, "--memory", lab::all_memory_spaces, lab::parse_memory_space);
  const auto scopes = parse_names(cfg.scopes, "--scopes", lab::all_atomic_scopes, lab::parse_atomic_scope);
  const auto aggregations =
      parse_names(cfg.aggregation, "--aggregation", lab::all_aggregations, lab::parse_aggregation);
  for (const lab::memory_space memory : memories) {
    for (const lab::atomic_scope scope : scopes) {
      for (const lab::aggregation aggregate : aggregations) {
        methods.push_back(lab::gpu_method{memory, scope, aggregate, cfg.block_threads});
      }
    }
  }
  return methods;
}

/// Every case of the sweep, checked before any runs: a bad one throws naming the option that set it.
std::vector<lab::contention_case> cases_of(const contention_config& cfg, backend where) {
  const auto ops = parse_names(cfg.ops, "--ops", lab::all_atomic_ops, lab::parse_atomic_op);
  const std::vector<lab::contention_method> methods = methods_of(cfg, where);
  std::vector<std::int64_t> addresses;
  for (const std::string& text : cfg.addresses) addresses.push_back(parse_count(text, command_name, "--addresses"));
  if (addresses.empty()) throw_invalid_argument(command_name, "--addresses", "needs at least one value");
  const bool on_gpu = where == backend::gpu;
  const std::int64_t threads =
      cfg.threads != -1 ? cfg.threads
      : on_gpu          ? std::int64_t{gpu::describe_device().multiprocessors} * 1024
                        : cpu::detail::max_threads();
  const std::int64_t ops_per_thread = parse_count(
      cfg.ops_per_thread.empty() ? (on_gpu ? "32" : "2^16") : cfg.ops_per_thread, command_name, "--ops-per-thread");
  std::vector<lab::contention_case> cases;
  for (const lab::atomic_op op : ops) {
    for (const lab::contention_method& method : methods) {
      for (const std::int64_t a : addresses) cases.push_back({op, method, a, threads, ops_per_thread});
    }
  }
  for (const lab::contention_case& c : cases) {
    if (const auto problem = lab::problem_of(c)) {
      std::string option = "--" + problem->field;
      std::replace(option.begin(), option.end(), '_', '-');  // ops_per_thread: --ops-per-thread
      throw_invalid_argument(command_name, option, problem->what);
    }
  }
  return cases;
}

report_row measure(const lab::contention_case& c, const contention_config& cfg) {
  report_row r;
  lab::contention_row& row = r;
  r.contenders = lab::contenders_per_address(c);
  if (lab::backend_of(c) == backend::gpu && c.op == lab::atomic_op::cas && r.contenders > cfg.max_cas_contenders) {
    // Every contender of a CAS add must write, and each success fails the others' swaps: about
    // `contenders` retries per update, so the run would take minutes to measure that one number.
    row = lab::skipped_contention(
        c, fmt::format("a CAS loop with {:.0f} threads per word retries ~{:.0f}x per update (over "
                       "--max-cas-contenders {:.0f}; aggregate, use more addresses or fewer threads)",
                       r.contenders, r.contenders, cfg.max_cas_contenders));
    return r;
  }
  row = lab::run_contention(c, cfg.runs, cfg.warmup);
  if (!r.timed) return r;
  r.time = summarize_ms(r.times_ms);
  const double seconds = r.time.median_ms * 1e-3;
  r.ops_per_s = seconds > 0 ? static_cast<double>(c.threads) * static_cast<double>(c.ops_per_thread) / seconds : 0.0;
  return r;
}

void print_rows(std::FILE* out, const std::vector<report_row>& rows) {
  fmt::print(out, "{:<5} {:<28} {:>9} {:>8} {:>5} {:>10} {:>9}  {:<8} {:>10} {:>6} {:>10}\n", "op", "method",
             "addresses", "threads", "team", "ops/thread", "contended", "check", "median ms", "noise", "Mops/s");
  for (const report_row& r : rows) {
    const lab::contention_case& c = r.what;
    const std::string start = fmt::format("{:<5} {:<28} {:>9} {:>8} {:>5} {:>10} {:>9.0f}  ", lab::to_string(c.op),
                                          lab::method_name(c.method), c.addresses, c.threads,
                                          r.team > 0 ? std::to_string(r.team) : "-", c.ops_per_thread,
                                          r.contenders);
    if (!r.timed) {
      fmt::print(out, "{}{}\n", start, r.check);
      continue;
    }
    const bool guaranteed = r.check == "exact";
    fmt::print(out, "{}{:<8} {:>10.3f} {:>5.1f}% {:>10.2f}{}\n", start, guaranteed ? "exact" : "exact*",
               r.time.median_ms, r.time.noise_percent, r.ops_per_s * 1e-6,
               guaranteed ? "" : "  (* block scope across blocks: not guaranteed)");
  }
}

/// Millions of operations a second, one line per (op, method), one column per address count:
/// the contention curve. Verified rows only.
void print_summary(std::FILE* out, const std::vector<report_row>& rows) {
  std::map<std::string, std::map<std::int64_t, double>> cells;
  std::vector<std::string> order;
  std::vector<std::int64_t> addresses;
  for (const report_row& r : rows) {
    const lab::contention_case& c = r.what;
    if (std::find(addresses.begin(), addresses.end(), c.addresses) == addresses.end()) addresses.push_back(c.addresses);
    if (!r.timed) continue;
    const std::string key = fmt::format("{:<5} {:<28}", lab::to_string(c.op), lab::method_name(c.method));
    if (!cells.contains(key)) order.push_back(key);
    cells[key][c.addresses] = r.ops_per_s;
  }
  fmt::print(out, "\nsummary: Mops/s by number of addresses (verified runs only)\n{:<5} {:<28}", "op", "method");
  for (const std::int64_t a : addresses) fmt::print(out, " {:>9}", a);
  fmt::print(out, "\n");
  for (const std::string& key : order) {
    fmt::print(out, "{}", key);
    for (const std::int64_t a : addresses) {
      const auto it = cells[key].find(a);
      fmt::print(out, " {:>9}", it == cells[key].end() ? std::string("-") : fmt::format("{:.2f}", it->second * 1e-6));
    }
    fmt::print(out, "\n");
  }
  const auto mismatches = std::count_if(rows.begin(), rows.end(), [](const report_row& r) { return r.mismatch; });
  const auto narrow_wrong =
      std::count_if(rows.begin(), rows.end(), [](const report_row& r) { return r.check.starts_with("WRONG"); });
  fmt::print(out, "{} rows, {} verification mismatches{}\n", rows.size(), mismatches,
             narrow_wrong > 0 ? fmt::format(", {} wrong results with block scope across blocks", narrow_wrong) : "");
}

/// The columns of a backend's rows; GPU rows add their memory, scope, aggregation and grid.
std::vector<row_field<report_row>> contention_fields(bool on_gpu) {
  using field = row_field<report_row>;
  const auto gpu_method = [](const report_row& r) { return std::get<lab::gpu_method>(r.what.method); };
  std::vector<field> fields{{"op", [](const report_row& r) { return lab::to_string(r.what.op); }},
                            {"method", [](const report_row& r) { return lab::method_name(r.what.method); }}};
  if (on_gpu) {
    fields.insert(fields.end(),
                  {field{"memory", [=](const report_row& r) { return lab::to_string(gpu_method(r).memory); }},
                   field{"scope", [=](const report_row& r) { return lab::to_string(gpu_method(r).scope); }},
                   field{"aggregation", [=](const report_row& r) { return lab::to_string(gpu_method(r).aggregate); }},
                   field{"blocks", [](const report_row& r) { return lab::blocks_of(r.what); }},
                   field{"block_threads", [=](const report_row& r) { return gpu_method(r).block_threads; }}});
  }
  fields.insert(fields.end(),
                {field{"addresses", [](const report_row& r) { return r.what.addresses; }},
                 field{"threads", [](const report_row& r) { return r.what.threads; }}, field{"team", &report_row::team},
                 field{"ops_per_thread", [](const report_row& r) { return r.what.ops_per_thread; }},
                 field{"contenders", &report_row::contenders}, field{"check", &report_row::check},
                 field{"timed", &report_row::timed}, field{"runs", [](const report_row& r) { return r.time.runs; }},
                 field{"median_ms", [](const report_row& r) { return r.time.median_ms; }},
                 field{"min_ms", [](const report_row& r) { return r.time.min_ms; }},
                 field{"noise_percent", [](const report_row& r) { return r.time.noise_percent; }},
                 field{"ops_per_s", &report_row::ops_per_s}});
  return fields;
}

int run_contention(const contention_config& cfg) {
  cfg.check(command_name);
  const backend where = resolve_backend(cfg.backend_name, command_name);
  const bool on_gpu = where == backend::gpu;
  const std::vector<const CLI::Option*>& other_backends_options = on_gpu ? cfg.cpu_only_options : cfg.gpu_only_options;
  const auto given = std::find_if(other_backends_options.begin(), other_backends_options.end(),
                                  [](const CLI::Option* option) { return option->count() > 0; });
  if (given != other_backends_options.end()) {
    throw_invalid_argument(command_name, (*given)->get_name(),
                           on_gpu ? "is for the CPU backend; the GPU sweep takes --memory, --scopes and --aggregation"
                                  : "is for the GPU backend; the CPU sweep takes --methods");
  }
  if (cfg.runs < 1) throw_invalid_argument(command_name, "--runs", "must be >= 1");
  if (cfg.warmup < 0) throw_invalid_argument(command_name, "--warmup", "must be >= 0");
  if (!(cfg.max_cas_contenders >= 1)) throw_invalid_argument(command_name, "--max-cas-contenders", "must be >= 1");
  const std::vector<lab::contention_case> cases = cases_of(cfg, where);

  const run_environment env = describe_run_environment(where);
  print_environment_header(stdout, "contention", env);
  fmt::print("layout: {}\n", lab::layout_text(where));
  const lab::contention_case& first = cases.front();
  fmt::print("{} threads ({}), {} updates each; median of {} runs after {} warm-up, every run checked; 'contended': "
             "threads competing for one word at a time\n\n",
             first.threads,
             on_gpu ? fmt::format("{} blocks of {}, timed by CUDA events", lab::blocks_of(first), cfg.block_threads)
                    : fmt::format("an OpenMP team of up to {}", cpu::detail::max_threads()),
             first.ops_per_thread, cfg.runs, cfg.warmup);
  std::fflush(stdout);

  std::vector<report_row> rows;
  for (const lab::contention_case& c : cases) {
    if (!cfg.quiet) {
      std::fprintf(stderr, "[contention %zu/%zu] %s %s addresses=%lld\n", rows.size() + 1, cases.size(),
                   std::string(lab::to_string(c.op)).c_str(), lab::method_name(c.method).c_str(),
                   static_cast<long long>(c.addresses));
    }
    rows.push_back(measure(c, cfg));
  }
  print_rows(stdout, rows);
  print_summary(stdout, rows);
  nlohmann::json doc = result_document("contention", env);
  doc["layout"] = lab::layout_text(where);
  return cfg.finish(command_name, environment_csv_comment("contention", env) + ", layout: " + lab::layout_text(where),
                    std::move(doc), rows, contention_fields(on_gpu));
}

}  // namespace

void add_contention_command(CLI::App& app, int& exit_code) {
  add_measuring_command(app, exit_code, contention_command, run_contention, add_contention_options);
}

}  // namespace tally::cli
