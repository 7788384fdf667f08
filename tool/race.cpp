// `tally race`: data races, each beside its correct variant, on the GPU or the CPU (the lab's
// experiments, tally/lab/race.hpp; tally::gpu::bincount is the GPU's fixed histogram): one counter
// incremented by 100 to 1,000,000 threads, the naive histogram (`hist[bin]++`), and the block
// histogram with its barrier missing.
// Correct variants must be exact (else exit code 1); racy rows are labelled wrong results, with
// what they lost, and nothing is averaged.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "arguments.hpp"
#include "commands.hpp"
#include "distributions.hpp"
#include "result_files.hpp"
#include "run_environment.hpp"
#include "tally/error.hpp"
#include "tally/gpu.hpp"
#include "tally/lab/race.hpp"

namespace tally::cli {
namespace {

constexpr const char* command_name = "tally race";
constexpr std::int64_t max_gpu_block_bins = 12288;  // tally::lab::block_histogram: 48 KiB of shared memory

struct race_config : result_files {
  std::string backend_name = "auto";
  std::vector<std::string> experiments{"counter", "histogram", "block_histogram"};
  std::vector<std::string> threads{"100", "1000", "10000", "100000", "1000000"};
  std::string samples = "2^22";
  std::int64_t bins = 256;
  int runs = 3;
  std::uint64_t seed = 20261122;
};

/// What `tally --help` says of `tally race`, and what its result files hold.
const measuring_command race_command{
    "race", "Data races (GPU or CPU): racy variants beside correct ones, expected, actual and lost", "rows",
    "updates lost per variant and thread count"};

/// `tally race`'s own options, between --backend and the result files'.
void add_race_options(CLI::App& command, race_config& cfg) {
  add_list_option(command, "--experiments", cfg.experiments, "counter, histogram, block_histogram");
  add_list_option(command, "--threads", cfg.threads,
                  "counter: threads (GPU threads, or CPU logical threads), each adding 1 once");
  command.add_option("--samples", cfg.samples, "histograms: uniform int32 samples, e.g. 2^22")->capture_default_str();
  command.add_option("--bins", cfg.bins, "histograms: bins (GPU block histogram: at most 12288)")
      ->capture_default_str();
  command.add_option("--runs", cfg.runs, "Runs of each case, each its own row (racy results vary)")
      ->capture_default_str();
  command.add_option("--seed", cfg.seed, "Seed of the samples")->capture_default_str();
}

int run_race(const race_config& cfg);

}  // namespace

void add_race_command(CLI::App& app, int& exit_code) {
  add_measuring_command(app, exit_code, race_command, run_race, add_race_options);
}

namespace {

struct race_row {
  std::string experiment;
  std::string variant;
  bool correct = false;  ///< whether the variant is meant to be right (atomic, barrier)
  int run = 0;
  std::int64_t threads = 0;  ///< logical threads (counter) or the team (histograms)
  std::int64_t bins = 0;     ///< 1 for the counter
  lab::race_count outcome;
  std::string verdict;
  bool mismatch = false;  ///< a correct variant gave a wrong result
};

race_row new_row(std::string experiment, std::string variant, bool correct, int run, std::int64_t threads,
                 std::int64_t bins) {
  race_row row;
  row.experiment = std::move(experiment);
  row.variant = std::move(variant);
  row.correct = correct;
  row.run = run;
  row.threads = threads;
  row.bins = bins;
  return row;
}

std::int64_t lost(const race_row& r) {
  return static_cast<std::int64_t>(r.outcome.expected) - static_cast<std::int64_t>(r.outcome.actual);
}

/// The fixed histogram on the GPU: tally::gpu::bincount with strategy atomic (one atomicAdd per
/// sample), compared bin by bin with the reference. (The naive one is the lab's naive_histogram.)
lab::race_count gpu_atomic_histogram(const gpu::device_buffer<std::int32_t>& samples,
                                  std::span<const std::uint64_t> reference, gpu::workspace& ws) {
  gpu::device_buffer<std::uint32_t> counts(reference.size());
  histogram_options options;
  options.algorithm = strategy::atomic;
  (void)gpu::bincount_async<std::int32_t, std::uint32_t>(samples.const_span(), counts.span(), ws, options);
  std::vector<std::uint32_t> got(reference.size());
  counts.download(got);  // a synchronous copy: waits for the histogram
  return lab::compare_with_reference(got, reference);
}

race_row judge(race_row row) {
  const lab::race_count& o = row.outcome;
  const bool right = o.actual == o.expected && o.wrong_bins == 0;
  if (row.correct) {
    row.verdict = right ? "exact" : fmt::format("MISMATCH: {} of {} counted, {} bins wrong", o.actual, o.expected,
                                                o.wrong_bins);
    row.mismatch = !right;
  } else if (o.actual > o.expected || o.over_bins > 0) {
    // A racy update can lose increments but never invent one: more than expected is a bug here.
    row.verdict = fmt::format("MISMATCH: a racy run counted {} of {} ({} bins above the reference)", o.actual,
                              o.expected, o.over_bins);
    row.mismatch = true;
  } else if (right) {
    row.verdict = "racy: right this run, by luck";
  } else {
    row.verdict = fmt::format("WRONG (racy): lost {}", lost(row));
  }
  return row;
}

void print_rows(std::FILE* out, const std::vector<race_row>& rows) {
  fmt::print(out, "{:<16} {:<24} {:>3} {:>8} {:>5} {:>5} {:>10} {:>10} {:>10} {:>10}  {}\n", "experiment", "variant",
             "run", "threads", "team", "bins", "expected", "actual", "lost", "wrong bins", "check");
  for (const race_row& r : rows) {
    fmt::print(out, "{:<16} {:<24} {:>3} {:>8} {:>5} {:>5} {:>10} {:>10} {:>10} {:>10}  {}\n", r.experiment, r.variant,
               r.run, r.threads, r.outcome.team, r.bins, r.outcome.expected, r.outcome.actual, lost(r),
               r.outcome.wrong_bins, r.verdict);
  }
  const auto mismatches = std::count_if(rows.begin(), rows.end(), [](const race_row& r) { return r.mismatch; });
  const auto racy_wrong = std::count_if(rows.begin(), rows.end(), [](const race_row& r) {
    return !r.correct && r.verdict.starts_with("WRONG");
  });
  const auto racy = std::count_if(rows.begin(), rows.end(), [](const race_row& r) { return !r.correct; });
  fmt::print(out, "\n{} rows, {} verification mismatches; {} of {} racy runs were wrong (racy rows are wrong "
                  "code: a right result is luck, not a measurement)\n",
             rows.size(), mismatches, racy_wrong, racy);
}

const row_field<race_row> race_fields[] = {
    {"experiment", &race_row::experiment}, {"variant", &race_row::variant}, {"correct", &race_row::correct},
    {"run", &race_row::run}, {"threads", &race_row::threads},
    {"team", [](const race_row& r) { return r.outcome.team; }}, {"bins", &race_row::bins},
    {"expected", [](const race_row& r) { return r.outcome.expected; }},
    {"actual", [](const race_row& r) { return r.outcome.actual; }}, {"lost", lost},
    {"wrong_bins", [](const race_row& r) { return r.outcome.wrong_bins; }}, {"check", &race_row::verdict}};

int run_race(const race_config& cfg) {
  const backend where = resolve_backend(cfg.backend_name, command_name);
  const bool on_gpu = where == backend::gpu;
  cfg.check(command_name);
  static const std::vector<std::string> known{"counter", "histogram", "block_histogram"};
  for (const std::string& e : cfg.experiments) {
    if (std::find(known.begin(), known.end(), e) == known.end()) {
      throw_invalid_argument(command_name, "--experiments",
                             "has an unknown experiment '" + e + "' (counter, histogram, block_histogram)");
    }
  }
  const auto wants = [&](const char* e) {
    return std::find(cfg.experiments.begin(), cfg.experiments.end(), e) != cfg.experiments.end();
  };
  std::vector<std::int64_t> thread_counts;
  for (const std::string& text : cfg.threads) {
    const std::int64_t t = parse_count(text, command_name, "--threads");
    if (t < 1 || t > (std::int64_t{1} << 32)) throw_invalid_argument(command_name, "--threads", "must be between 1 and 2^32");
    thread_counts.push_back(t);
  }
  const std::int64_t samples = parse_count(cfg.samples, command_name, "--samples");
  if (samples < 1 || samples > (std::int64_t{1} << 31)) {
    throw_invalid_argument(command_name, "--samples", "must be between 1 and 2^31");
  }
  if (cfg.bins < 1 || cfg.bins > (std::int64_t{1} << 24)) {
    throw_invalid_argument(command_name, "--bins", "must be between 1 and 2^24");
  }
  if (on_gpu && wants("block_histogram") && cfg.bins > max_gpu_block_bins) {
    throw_invalid_argument(command_name, "--bins",
                           fmt::format("must be at most {} for the GPU block histogram (its shared histogram stays "
                                       "within 48 KiB)",
                                       max_gpu_block_bins));
  }
  if (cfg.runs < 1) throw_invalid_argument(command_name, "--runs", "must be >= 1");

  const run_environment env = describe_run_environment(where);
  print_environment_header(stdout, "race", env);
  if (on_gpu) {
    fmt::print("counter: one GPU thread per increment (blocks of 256); racy: a relaxed atomic load, then a relaxed "
               "atomic store of the value + 1 (the split read-modify-write of counter[0] = counter[0] + 1); correct: "
               "fetch_add.\nhistogram: one thread per sample, volatile hist[bin]++ (the lab's naive histogram) vs "
               "tally::gpu::bincount, strategy atomic (one atomicAdd per sample).\nblock_histogram: one sample per thread, a shared histogram per block "
               "flushed with device atomics, with and without the __syncthreads() before the flush.\n\n");
  } else {
    fmt::print("racy update: a relaxed atomic load, then a relaxed atomic store of the value + 1 (the split "
               "read-modify-write, defined in C++); correct variants: fetch_add, or the barrier\n\n");
  }
  std::fflush(stdout);
  const auto progress = [&](const std::string& what) {
    if (!cfg.quiet) std::fprintf(stderr, "[race] %s\n", what.c_str());
  };

  std::vector<race_row> rows;
  if (wants("counter")) {
    for (const std::int64_t t : thread_counts) {
      progress(fmt::format("counter, {} threads", t));
      for (int run = 0; run < cfg.runs; ++run) {
        for (const bool racy : {true, false}) {
          race_row row = new_row("counter", racy ? "racy (load, store)" : "atomic fetch_add", !racy, run, t, 1);
          row.outcome = on_gpu ? lab::gpu::count_with_threads(t, racy) : lab::cpu::count_with_threads(t, racy);
          rows.push_back(judge(std::move(row)));
        }
      }
    }
  }
  if (wants("histogram") || wants("block_histogram")) {
    progress(fmt::format("generating {} uniform samples over {} bins", samples, cfg.bins));
    std::vector<std::int32_t> data(static_cast<std::size_t>(samples));
    generate_samples<std::int32_t>(distribution::uniform, cfg.bins, cfg.seed, data);
    const std::vector<std::uint64_t> reference = lab::reference_histogram(data, cfg.bins);
    using device_samples = gpu::device_buffer<std::int32_t>;
    const device_samples device_data = on_gpu ? device_samples(std::span<const std::int32_t>(data)) : device_samples();
    gpu::workspace ws;  // GPU histograms: one workspace for every run
    for (const char* experiment : {"histogram", "block_histogram"}) {
      if (!wants(experiment)) continue;
      progress(fmt::format("{}, {} samples, {} bins", experiment, samples, cfg.bins));
      const bool block = std::string(experiment) == "block_histogram";
      for (int run = 0; run < cfg.runs; ++run) {
        for (const bool wrong : {true, false}) {
          const char* variant = block ? (wrong ? "barrier missing" : "barrier")
                                : on_gpu ? (wrong ? "racy (volatile hist[bin]++)" : "atomic")
                                         : (wrong ? "racy (load, store)" : "atomic fetch_add");
          race_row row = new_row(experiment, variant, !wrong, run, 0, cfg.bins);
          if (on_gpu) {
            row.outcome = block   ? lab::gpu::block_histogram(data, reference, !wrong)
                          : wrong ? lab::gpu::naive_histogram(data, reference)
                                  : gpu_atomic_histogram(device_data, reference, ws);
            // One thread per sample, except the library's bincount, which sizes its own grid.
            row.threads = block || wrong ? samples : 0;
          } else {
            row.outcome = block ? lab::cpu::block_histogram(data, reference, !wrong)
                                : lab::cpu::naive_histogram(data, reference, wrong);
            row.threads = row.outcome.team;
          }
          rows.push_back(judge(std::move(row)));
        }
      }
    }
  }
  print_rows(stdout, rows);
  return cfg.finish("race", env, rows, race_fields);
}

}  // namespace
}  // namespace tally::cli
