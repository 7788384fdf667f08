// The GPU sweep of `tally contention`: memory (global, shared, global_private) x scope (block,
// device, system) x operation (add, cas, max, exch) x warp aggregation (none, warp) x number of
// addresses, each case run by tally::lab::run_contention (tally/lab.hpp: the layout, the kernels'
// behaviour and the checks), every run checked before its time counts. Rows, summary, CSV and JSON
// have the shape of the CPU sweep's (op, method, addresses, threads, ..., ops_per_s), the method
// being "<memory>-<scope>-<aggregation>", plus the separate fields.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
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
#include "tally/error.hpp"
#include "tally/gpu.hpp"
#include "tally/lab.hpp"

namespace tally::cli {
namespace {

constexpr const char* command_name = "tally contention";
constexpr const char* gpu_layout_text =
    "GPU thread t (of T = blocks x block threads) sends its i-th update to word (t + i*T) mod A; add/cas add "
    "1 + ((t xor i) mod 8) (sums mod 2^32), max/exch write i*T + t + 1; 32-bit words; shared memory: a zeroed "
    "copy of the A words per block, folded into global memory at the end (zeroing and fold timed); "
    "global_private: a slice of A global words per block (blocks x A, zeroed before the timed launch), the same "
    "updates of its block's threads, each slice checked, no fold";

struct gpu_row {
  lab::contention_case what;
  std::string verdict;  ///< "exact", "exact (...)", "WRONG (...)", "MISMATCH ...", "skipped: why"
  bool timed = false;
  bool mismatch = false;
  double contenders = 0.0;
  time_summary time;
  double ops_per_s = 0.0;
};

std::string method_of(const lab::contention_case& c) {
  return fmt::format("{}-{}-{}", lab::to_string(c.memory), lab::to_string(c.scope), lab::to_string(c.aggregate));
}

template <class Enum, class Parse>
std::vector<Enum> parse_names(const std::vector<std::string>& names, const char* option, const char* allowed,
                              Parse parse) {
  std::vector<Enum> out;
  for (const std::string& name : names) {
    const auto value = parse(name);
    if (!value) throw_invalid_argument(command_name, option, fmt::format("has an unknown value '{}' ({})", name, allowed));
    out.push_back(*value);
  }
  if (out.empty()) throw_invalid_argument(command_name, option, "needs at least one value");
  return out;
}

gpu_row measure(const lab::contention_case& c, const contention_config& cfg) {
  gpu_row row;
  row.what = c;
  row.contenders = lab::contenders_per_address(c);
  if (c.op == lab::atomic_op::cas && row.contenders > cfg.max_cas_contenders) {
    // Every contender of a CAS add must write, and each success fails the others' swaps: about
    // `contenders` retries per update, so the run would take minutes to measure that one number.
    row.verdict = fmt::format("skipped: a CAS loop with {:.0f} threads per word retries ~{:.0f}x per update "
                              "(over --max-cas-contenders {:.0f}; aggregate, use more addresses or fewer threads)",
                              row.contenders, row.contenders, cfg.max_cas_contenders);
    return row;
  }
  const lab::contention_result got = lab::run_contention(c, cfg.runs, cfg.warmup);
  if (!got.not_run.empty()) {
    row.verdict = "skipped: " + got.not_run;
    return row;
  }
  const bool narrow = lab::scope_too_narrow(c);
  if (!got.wrong.empty()) {
    if (narrow) {
      row.verdict = "WRONG (block scope across blocks): " + got.wrong;  // the lesson, not a bug
    } else {
      row.verdict = "MISMATCH " + got.wrong;
      row.mismatch = true;
    }
    return row;
  }
  row.verdict = narrow ? "exact (block scope across blocks: not guaranteed)" : "exact";
  row.timed = true;
  row.time = summarize_ms(got.times_ms);
  const double seconds = row.time.median_ms * 1e-3;
  row.ops_per_s =
      seconds > 0 ? static_cast<double>(lab::total_threads(c)) * static_cast<double>(c.ops_per_thread) / seconds : 0.0;
  return row;
}

void print_rows(std::FILE* out, const std::vector<gpu_row>& rows) {
  fmt::print(out, "{:<5} {:<14} {:<6} {:<4} {:>9} {:>8} {:>10} {:>9}  {:<8} {:>10} {:>6} {:>10}\n", "op", "memory",
             "scope", "agg", "addresses", "threads", "ops/thread", "contended", "check", "median ms", "noise", "Mops/s");
  for (const gpu_row& r : rows) {
    const std::string start = fmt::format(
        "{:<5} {:<14} {:<6} {:<4} {:>9} {:>8} {:>10} {:>9.0f}  ", lab::to_string(r.what.op),
        lab::to_string(r.what.memory), lab::to_string(r.what.scope), lab::to_string(r.what.aggregate),
        r.what.addresses, lab::total_threads(r.what), r.what.ops_per_thread, r.contenders);
    if (!r.timed) {
      fmt::print(out, "{}{}\n", start, r.verdict);
      continue;
    }
    fmt::print(out, "{}{:<8} {:>10.3f} {:>5.1f}% {:>10.2f}{}\n", start, r.verdict == "exact" ? "exact" : "exact*",
               r.time.median_ms, r.time.noise_percent, r.ops_per_s * 1e-6,
               r.verdict == "exact" ? "" : "  (* block scope across blocks: not guaranteed)");
  }
}

/// Millions of operations a second, one line per (op, method), one column per address count.
void print_summary(std::FILE* out, const std::vector<gpu_row>& rows, const std::vector<std::int64_t>& addresses) {
  std::map<std::string, std::map<std::int64_t, double>> cells;
  std::vector<std::string> order;
  for (const gpu_row& r : rows) {
    if (!r.timed) continue;
    const std::string key = fmt::format("{:<5} {:<28}", lab::to_string(r.what.op), method_of(r.what));
    if (!cells.contains(key)) order.push_back(key);
    cells[key][r.what.addresses] = r.ops_per_s;
  }
  fmt::print(out, "\nsummary: Mops/s by number of addresses (verified runs only)\n{:<5} {:<28}", "op", "method");
  for (const std::int64_t a : addresses) fmt::print(out, " {:>9}", a);
  fmt::print(out, "\n");
  for (const std::string& key : order) {
    fmt::print(out, "{}", key);
    for (const std::int64_t a : addresses) {
      const auto it = cells[key].find(a);
      fmt::print(out, " {:>9}", it == cells[key].end() ? std::string("-") : fmt::format("{:.1f}", it->second * 1e-6));
    }
    fmt::print(out, "\n");
  }
  const auto mismatches = std::count_if(rows.begin(), rows.end(), [](const gpu_row& r) { return r.mismatch; });
  const auto narrow_wrong =
      std::count_if(rows.begin(), rows.end(), [](const gpu_row& r) { return r.verdict.starts_with("WRONG"); });
  fmt::print(out, "{} rows, {} verification mismatches, {} wrong results with block scope across blocks\n",
             rows.size(), mismatches, narrow_wrong);
}

void write_csv(const std::string& path, const run_environment& env, const std::vector<gpu_row>& rows) {
  std::ofstream file(path);
  if (!file) throw error(errc::io_error, "--csv", "cannot write '" + path + "'");
  file << environment_csv_comment("contention", env) << ", layout: " << gpu_layout_text << "\n";
  file << "op,method,memory,scope,aggregation,addresses,threads,blocks,block_threads,ops_per_thread,contenders,"
          "check,timed,runs,median_ms,min_ms,noise_percent,ops_per_s\n";
  for (const gpu_row& r : rows) {
    file << fmt::format("{},{},{},{},{},{},{},{},{},{},{:.2f},\"{}\",{},{},{:.6f},{:.6f},{:.2f},{:.6e}\n",
                        lab::to_string(r.what.op), method_of(r.what), lab::to_string(r.what.memory),
                        lab::to_string(r.what.scope), lab::to_string(r.what.aggregate), r.what.addresses,
                        lab::total_threads(r.what), r.what.blocks, r.what.block_threads, r.what.ops_per_thread,
                        r.contenders, r.verdict, r.timed ? 1 : 0, r.time.runs, r.time.median_ms, r.time.min_ms,
                        r.time.noise_percent, r.ops_per_s);
  }
}

void write_json(const std::string& path, const run_environment& env, const std::vector<gpu_row>& rows) {
  nlohmann::json doc;
  add_environment_json(doc, "contention", env);
  doc["layout"] = gpu_layout_text;
  nlohmann::json& out_rows = doc["rows"];
  out_rows = nlohmann::json::array();
  for (const gpu_row& r : rows) {
    out_rows.push_back({{"op", lab::to_string(r.what.op)},
                        {"method", method_of(r.what)},
                        {"memory", lab::to_string(r.what.memory)},
                        {"scope", lab::to_string(r.what.scope)},
                        {"aggregation", lab::to_string(r.what.aggregate)},
                        {"addresses", r.what.addresses},
                        {"threads", lab::total_threads(r.what)},
                        {"blocks", r.what.blocks},
                        {"block_threads", r.what.block_threads},
                        {"ops_per_thread", r.what.ops_per_thread},
                        {"contenders", r.contenders},
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

}  // namespace

int run_gpu_contention(const contention_config& cfg) {
  if (!cfg.cpu_only_given.empty()) {
    throw_invalid_argument(command_name, cfg.cpu_only_given.front(),
                           "is for the CPU backend; the GPU sweep takes --memory, --scopes and --aggregation");
  }
  const auto ops = parse_names<lab::atomic_op>(cfg.ops, "--ops", "add, cas, max, exch", lab::parse_atomic_op);
  const auto memories =
      parse_names<lab::memory_space>(cfg.memory, "--memory", "global, shared, global_private", lab::parse_memory_space);
  const auto scopes =
      parse_names<lab::atomic_scope>(cfg.scopes, "--scopes", "block, device, system", lab::parse_atomic_scope);
  const auto aggregations =
      parse_names<lab::aggregation>(cfg.aggregation, "--aggregation", "none, warp", lab::parse_aggregation);
  std::vector<std::int64_t> addresses;
  for (const std::string& text : cfg.addresses) {
    const std::int64_t a = parse_count(text, command_name, "--addresses");
    if (a < 1 || a > (std::int64_t{1} << 26)) {
      throw_invalid_argument(command_name, "--addresses",
                             fmt::format("must be between 1 and 2^26 on the GPU (got {})", a));
    }
    addresses.push_back(a);
  }
  if (addresses.empty()) throw_invalid_argument(command_name, "--addresses", "needs at least one value");
  if (cfg.block_threads < 32 || cfg.block_threads > 1024 || cfg.block_threads % 32 != 0) {
    throw_invalid_argument(command_name, "--block-threads",
                           fmt::format("must be a multiple of 32 from 32 to 1024 (got {})", cfg.block_threads));
  }
  const gpu::device_info device = gpu::describe_device();
  const std::int64_t threads =
      cfg.threads == -1 ? std::int64_t{device.multiprocessors} * 1024 : cfg.threads;
  if (threads < cfg.block_threads || threads % cfg.block_threads != 0) {
    throw_invalid_argument(command_name, "--threads",
                           fmt::format("must be a positive multiple of --block-threads {} on the GPU (got {})",
                                       cfg.block_threads, threads));
  }
  const std::int64_t ops_per_thread =
      parse_count(cfg.ops_per_thread.empty() ? "32" : cfg.ops_per_thread, command_name, "--ops-per-thread");
  if (ops_per_thread < 1 || threads * ops_per_thread >= (std::int64_t{1} << 32)) {
    throw_invalid_argument(command_name, "--ops-per-thread",
                           fmt::format("must be >= 1 with threads x ops per thread below 2^32 on the GPU (got {} x {})",
                                       threads, ops_per_thread));
  }
  if (cfg.runs < 1) throw_invalid_argument(command_name, "--runs", "must be >= 1");
  if (cfg.warmup < 0) throw_invalid_argument(command_name, "--warmup", "must be >= 0");
  if (!(cfg.max_cas_contenders >= 1)) throw_invalid_argument(command_name, "--max-cas-contenders", "must be >= 1");

  const run_environment env = describe_run_environment(backend::gpu);
  print_environment_header(stdout, "contention", env);
  fmt::print("layout: {}\n", gpu_layout_text);
  fmt::print("{} threads ({} blocks of {}), {} updates each; median of {} CUDA-event-timed runs after {} warm-up; "
             "every run checked; 'contended': threads competing for one word at a time\n\n",
             threads, threads / cfg.block_threads, cfg.block_threads, ops_per_thread, cfg.runs, cfg.warmup);
  std::fflush(stdout);

  std::vector<gpu_row> rows;
  const std::size_t total = ops.size() * memories.size() * scopes.size() * aggregations.size() * addresses.size();
  for (const lab::atomic_op op : ops) {
    for (const lab::memory_space memory : memories) {
      for (const lab::atomic_scope scope : scopes) {
        for (const lab::aggregation aggregate : aggregations) {
          for (const std::int64_t a : addresses) {
            lab::contention_case c;
            c.op = op;
            c.memory = memory;
            c.scope = scope;
            c.aggregate = aggregate;
            c.addresses = a;
            c.block_threads = cfg.block_threads;
            c.blocks = threads / cfg.block_threads;
            c.ops_per_thread = ops_per_thread;
            if (!cfg.quiet) {
              std::fprintf(stderr, "[contention %zu/%zu] %s %s addresses=%lld\n", rows.size() + 1, total,
                           std::string(lab::to_string(op)).c_str(), method_of(c).c_str(), static_cast<long long>(a));
            }
            rows.push_back(measure(c, cfg));
          }
        }
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
  const bool any_mismatch = std::any_of(rows.begin(), rows.end(), [](const gpu_row& r) { return r.mismatch; });
  return any_mismatch ? exit_mismatch : exit_success;
}

}  // namespace tally::cli
