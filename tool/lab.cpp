// `tally lab`: every experiment of the teaching lab (docs/lab.md) in one go, at a modest size, on the
// GPU when there is one (else the CPU; the OpenMP claims always run on the CPU), and for each claim
// the lab makes, the claim in a short sentence labelled with its lesson, the figure measured here and
// a verdict: "holds", "partly" or "does not hold here". Every correct variant is checked against the
// reference before its time counts (a wrong one makes the claim a MISMATCH and the exit code 1); racy variants
// are reported as what they lost, never timed into a speedup.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "arguments.hpp"
#include "commands.hpp"
#include "distributions.hpp"
#include "host_timing.hpp"
#include "result_files.hpp"
#include "run_environment.hpp"
#include "tally/cpu.hpp"
#include "tally/error.hpp"
#include "tally/gpu.hpp"
#include "tally/gpu/timing.hpp"
#include "tally/lab.hpp"

namespace tally::cli {
namespace {

constexpr const char* command_name = "tally lab";
/// What `tally --help` says of `tally lab`, and what its result files hold.
const measuring_command lab_command{
    "lab", "Every experiment of the lab in one go: each claim beside the figure measured here, and a verdict", "claims",
    "the figure measured for each claim, coloured by verdict"};

// The lessons the claims belong to, as docs/lab.md's sections name them.
constexpr const char* lesson_races = "races";                  // lost updates, the missing barrier
constexpr const char* lesson_cas = "atomics and CAS";          // atomics built from compare-and-swap
constexpr const char* lesson_contention = "contention";        // many threads on few addresses
constexpr const char* lesson_privatization = "privatization";  // private copies, narrower scope
constexpr const char* lesson_reductions = "reductions";        // reduce first, then one atomic (or none)
constexpr const char* lesson_openmp = "OpenMP";                // critical, atomic, reduction on the CPU

struct lab_config : result_files {
  std::string backend_name = "auto";
  std::string samples;  ///< empty: 2^24 on the GPU, 2^22 on the CPU
  int runs = 5;
  std::uint64_t seed = 20261123;
};

/// `tally lab`'s own options, between --backend and the result files'.
void add_lab_options(CLI::App& command, lab_config& cfg) {
  command.add_option("--samples", cfg.samples,
                     "Samples of the histogram and sum experiments (default 2^24 on the GPU, 2^22 on the CPU)");
  command.add_option("--runs", cfg.runs, "Timed runs per variant; the median is reported")->capture_default_str();
  command.add_option("--seed", cfg.seed, "Seed of the samples")->capture_default_str();
}

struct claim_row {
  std::string backend;  ///< where it was measured: "gpu" or "cpu"
  std::string lesson;    ///< the lesson the claim belongs to (docs/lab.md)
  std::string claim;     ///< the claim, short
  std::string measured;  ///< what was measured here, with the numbers
  double figure = 0.0;   ///< the headline number (a ratio, or a fraction lost)
  std::string unit;      ///< "x" (a speedup) or "lost" (a fraction)
  std::string verdict;   ///< "holds", "partly: ...", "does not hold here", "MISMATCH: ..."
  bool mismatch = false;
};

/// Below this ratio two variants are not told apart (run-to-run noise): "faster" needs 10%.
constexpr double clearly_faster = 1.1;

/// A speedup claim: holds at `holds_at` or more, partly when clearly faster but by less, else not.
std::string speedup_verdict(double ratio, double holds_at) {
  if (ratio >= holds_at) return "holds";
  if (ratio >= clearly_faster) return fmt::format("partly: faster, but by less than {:g}x", holds_at);
  return "does not hold here";
}

/// A race claim: the correct variant must be exact (else a mismatch); the racy one should lose.
claim_row race_claim(std::string lesson, std::string claim, std::uint64_t expected, std::uint64_t racy_actual,
                     std::uint64_t correct_actual, std::int64_t correct_wrong_bins, double most) {
  claim_row row;
  row.lesson = std::move(lesson);
  row.claim = std::move(claim);
  row.unit = "lost";
  const std::uint64_t lost = expected >= racy_actual ? expected - racy_actual : 0;
  row.figure = expected > 0 ? static_cast<double>(lost) / static_cast<double>(expected) : 0.0;
  row.measured = lost > 0 ? fmt::format("racy: WRONG, lost {} of {} ({:.1f}%); correct variant: {} of {}", lost,
                                        expected, 100.0 * row.figure, correct_actual, expected)
                          : fmt::format("racy: right this run, by luck (0 of {} lost); correct variant: {} of {}",
                                        expected, correct_actual, expected);
  if (correct_actual != expected || correct_wrong_bins != 0 || racy_actual > expected) {
    row.verdict = "MISMATCH: a correct variant was wrong, or a racy one counted more than was added";
    row.mismatch = true;
  } else if (lost == 0) {
    row.verdict = "does not hold here (the racy run was right this time, by luck)";
  } else if (row.figure >= most) {
    row.verdict = "holds";
  } else {
    row.verdict = "partly: updates are lost, but fewer than the claim says";
  }
  return row;
}

/// Median milliseconds of `runs` host-timed calls of `work`.
double median_host_ms(int runs, const std::function<void()>& work) {
  std::vector<double> times;
  for (int r = 0; r < runs; ++r) times.push_back(host_ms(work));
  return summarize_ms(std::move(times)).median_ms;
}

/// Median milliseconds of `runs` CUDA-event-timed launches of `work` after one warm-up (GPU time:
/// each run held until launched).
double median_gpu_ms(int runs, const std::function<void(gpu::stream_t)>& work) {
  (void)gpu::time_runs(work, 1);
  const std::vector<float> times = gpu::time_runs(work, runs).ms;
  return summarize_ms(std::vector<double>(times.begin(), times.end())).median_ms;
}

/// Operations per second of one contention case on its backend (every run checked, after one
/// warm-up); 0 with `why` set when it did not run or was wrong.
double ops_per_s(const lab::contention_case& c, int runs, std::string& why) {
  const lab::contention_row row = lab::run_contention(c, runs, 1);
  if (!row.timed) {
    why = row.check;
    return 0.0;
  }
  const double ms = summarize_ms(row.times_ms).median_ms;
  return static_cast<double>(c.threads) * static_cast<double>(c.ops_per_thread) / (ms * 1e-3);
}

/// Two contention cases compared, on either backend: `faster` should beat `slower` by `holds_at`.
/// A case that did not run or was wrong makes the row a mismatch.
claim_row contention_claim(std::string lesson, std::string claim, const lab::contention_case& faster,
                           const lab::contention_case& slower, const std::string& faster_name,
                           const std::string& slower_name, double holds_at, int runs) {
  claim_row row;
  row.lesson = std::move(lesson);
  row.claim = std::move(claim);
  row.unit = "x";
  std::string why;
  const double fast = ops_per_s(faster, runs, why);
  const double slow = fast > 0 ? ops_per_s(slower, runs, why) : 0.0;
  if (fast == 0 || slow == 0) {
    row.verdict = "MISMATCH: " + why;
    row.mismatch = true;
    return row;
  }
  row.figure = fast / slow;
  const int digits = lab::backend_of(faster) == backend::gpu ? 0 : 1;  // GPU rates run to billions
  row.measured = fmt::format("{}: {:.{}f} Mops/s; {}: {:.{}f} Mops/s; ratio {:.2f}x", faster_name, fast * 1e-6, digits,
                             slower_name, slow * 1e-6, digits, row.figure);
  row.verdict = speedup_verdict(row.figure, holds_at);
  return row;
}

// ---- the GPU experiments ---------------------------------------------------------------------

/// A GPU bincount of `samples` with strategy `s`: checked against `reference`, then timed.
/// Returns the median ms, or -1 when the counts were wrong.
double gpu_bincount_ms(const gpu::device_buffer<std::int32_t>& samples, std::span<const std::uint64_t> reference,
                       strategy s, int runs, gpu::workspace& ws) {
  gpu::device_buffer<std::uint32_t> counts(reference.size());
  histogram_options options;
  options.algorithm = s;
  const auto run = [&](gpu::stream_t stream) {
    (void)gpu::bincount_async<std::int32_t, std::uint32_t>(samples.const_span(), counts.span(), ws, options, stream);
  };
  counts.fill_bytes(0xab);  // poisoned: every bin must be written
  run(nullptr);
  std::vector<std::uint32_t> got(reference.size());
  counts.download(got);
  if (!std::equal(got.begin(), got.end(), reference.begin())) return -1.0;
  return median_gpu_ms(runs, run);
}

/// A GPU int32 sum with strategy `s`: checked against `want` (exact), then timed; -1 when wrong.
double gpu_sum_ms(const gpu::device_buffer<std::int32_t>& samples, std::int64_t want, strategy s, int runs,
                  gpu::workspace& ws) {
  reduce_options options;
  options.algorithm = s;
  const auto got = gpu::reduce<std::int32_t>(samples.const_span(), reduce_op::sum, options);
  if (got.value != want) return -1.0;
  return median_gpu_ms(runs, [&](gpu::stream_t stream) {
    (void)gpu::reduce_async<std::int32_t>(samples.const_span(), reduce_op::sum, ws, options, stream);
  });
}

/// `slow_ms / fast_ms` as a claim, or a mismatch when either variant was wrong (-1).
claim_row timed_claim(std::string lesson, std::string claim, double fast_ms, double slow_ms,
                      const std::string& fast_name, const std::string& slow_name, double holds_at) {
  claim_row row;
  row.lesson = std::move(lesson);
  row.claim = std::move(claim);
  row.unit = "x";
  if (fast_ms < 0 || slow_ms < 0) {
    row.verdict = fmt::format("MISMATCH: {} gave a wrong result", fast_ms < 0 ? fast_name : slow_name);
    row.mismatch = true;
    return row;
  }
  row.figure = fast_ms > 0 ? slow_ms / fast_ms : 0.0;
  row.measured = fmt::format("{}: {:.3f} ms; {}: {:.3f} ms; speedup {:.2f}x", fast_name, fast_ms, slow_name, slow_ms,
                             row.figure);
  row.verdict = speedup_verdict(row.figure, holds_at);
  return row;
}

/// A contention claim of the GPU's: `faster` should beat `slower` by `holds_at`.
struct contention_comparison {
  const char* progress;
  const char* lesson;
  const char* claim;
  lab::contention_case faster;
  lab::contention_case slower;
  const char* faster_name;
  const char* slower_name;
  double holds_at;
};

std::vector<claim_row> gpu_claims(const lab_config& cfg, std::int64_t n,
                                  const std::function<void(const std::string&)>& progress) {
  std::vector<claim_row> rows;
  const int sms = gpu::describe_device().multiprocessors;

  progress("race: one counter, 1,000,000 threads");
  {
    const lab::race_count racy = lab::gpu::count_with_threads(1000000, true);
    const lab::race_count atomic = lab::gpu::count_with_threads(1000000, false);
    rows.push_back(race_claim(lesson_races, "without atomics most increments are LOST", racy.expected, racy.actual,
                              atomic.actual, 0, 0.5));
  }

  {
    using enum lab::memory_space;
    using enum lab::atomic_scope;
    using enum lab::aggregation;
    using enum lab::atomic_op;
    // Every case: 4 blocks of 256 threads per multiprocessor, 32 updates each.
    const auto at = [sms](lab::memory_space memory, lab::atomic_scope scope, lab::aggregation aggregate,
                          lab::atomic_op op, std::int64_t addresses) -> lab::contention_case {
      constexpr int block_threads = 256;
      return {op, lab::gpu_method{memory, scope, aggregate, block_threads}, addresses,
              std::int64_t{sms} * 4 * block_threads, 32};
    };
    const contention_comparison comparisons[] = {
        {"contention: 1 vs 256 addresses, global add", lesson_contention,
         "atomics are slow when many threads compete for one location (1 vs 256 locations)",
         at(global, device, none, add, 256), at(global, device, none, add, 1), "256 addresses", "1 address", 2.0},
        {"contention: shared vs global memory, 256 addresses", lesson_contention,
         "shared-memory atomics are ~10x faster than global", at(shared, block, none, add, 256),
         at(global, device, none, add, 256), "shared, block scope", "global, device scope", 5.0},
        {"contention: warp aggregation, 1 address", lesson_contention,
         "batch updates: one atomic per warp instead of per thread", at(global, device, warp, add, 1),
         at(global, device, none, add, 1), "warp-aggregated", "one atomic per thread", 2.0},
        {"contention: native add vs CAS-loop add, 256 addresses, shared memory", lesson_cas,
         "CAS is the building block of every atomic; a native atomic beats the CAS loop",
         at(shared, block, none, add, 256), at(shared, block, none, cas, 256), "native add", "CAS-loop add", 1.5},
        // Scope: a per-block histogram in global memory, where each block updates its own slice, so
        // block scope is enough and legal. (In shared memory the scope changes nothing: only the
        // block can see the word.)
        {"contention: block vs device scope, a global slice per block, 256 addresses", lesson_privatization,
         "reduce the scope of the atomic with cuda::atomic_ref (block scope where a block is enough)",
         at(global_private, block, none, add, 256), at(global_private, device, none, add, 256),
         "block scope (global, a slice per block)", "device scope", 1.1},
    };
    for (const contention_comparison& c : comparisons) {
      progress(c.progress);
      rows.push_back(contention_claim(c.lesson, c.claim, c.faster, c.slower, c.faster_name, c.slower_name,
                                      c.holds_at, cfg.runs));
    }
  }

  progress(fmt::format("histograms: {} uniform samples, 256 bins", n));
  std::vector<std::int32_t> data(static_cast<std::size_t>(n));
  generate_samples<std::int32_t>(distribution::uniform, 256, cfg.seed, data);
  const std::vector<std::uint64_t> reference = lab::reference_histogram(data, 256);
  const gpu::device_buffer<std::int32_t> device_data{std::span<const std::int32_t>(data)};
  gpu::workspace ws;
  {
    const lab::race_count missing = lab::gpu::block_histogram(data, reference, false);
    const lab::race_count fixed = lab::gpu::block_histogram(data, reference, true);
    rows.push_back(race_claim(lesson_races, "without __syncthreads() before the flush the block histogram is wrong",
                              missing.expected, missing.actual, fixed.actual, fixed.wrong_bins, 0.0));
  }
  const double global_ms = gpu_bincount_ms(device_data, reference, strategy::atomic, cfg.runs, ws);
  const double shared_ms = gpu_bincount_ms(device_data, reference, strategy::shared_atomic, cfg.runs, ws);
  rows.push_back(timed_claim(lesson_privatization,
                             "privatization (a shared histogram per block) reduces contention dramatically", shared_ms,
                             global_ms, "shared_atomic", "atomic", 2.0));
  {
    // The correct variant is atomic, checked bin by bin just above (-1: it was wrong).
    const lab::race_count naive = lab::gpu::naive_histogram(data, reference);
    rows.push_back(race_claim(lesson_races, "the naive histogram (hist[bin]++) is incorrect: a data race",
                              naive.expected, naive.actual, data.size(), global_ms < 0 ? 1 : 0, 0.0));
  }

  progress(fmt::format("sums: {} int32 samples", n));
  const std::int64_t want = std::accumulate(data.begin(), data.end(), std::int64_t{0});
  const double naive_ms = gpu_sum_ms(device_data, want, strategy::atomic, cfg.runs, ws);
  const double block_ms = gpu_sum_ms(device_data, want, strategy::block_reduce_atomic, cfg.runs, ws);
  const double two_phase_ms = gpu_sum_ms(device_data, want, strategy::two_phase, cfg.runs, ws);
  rows.push_back(timed_claim(lesson_reductions, "privatized sum (block reduction, one atomic per block) beats one "
                                                "atomic per element",
                             block_ms, naive_ms, "block_reduce_atomic", "atomic", 2.0));
  rows.push_back(timed_claim(lesson_reductions,
                             "a full parallel reduction avoids the serialization of atomics on one location",
                             two_phase_ms, naive_ms, "two_phase", "atomic", 2.0));
  {
    claim_row row = timed_claim(lesson_reductions, "the hybrid (block reduce + one atomicAdd per block) is as good "
                                                   "when blocks are few",
                                block_ms, two_phase_ms, "block_reduce_atomic", "two_phase", 1.0);
    // "As good": within 10% of the two-pass time counts.
    if (!row.mismatch) row.verdict = row.figure >= 1.0 / clearly_faster ? "holds" : "does not hold here";
    rows.push_back(std::move(row));
  }
  return rows;
}

// ---- the CPU experiments ---------------------------------------------------------------------

/// The CPU's claims: all of them, or (`openmp_only`, beside the GPU's) those only the CPU can test,
/// OpenMP's critical, atomic and reduction.
std::vector<claim_row> cpu_claims(const lab_config& cfg, std::int64_t n, bool openmp_only,
                                  const std::function<void(const std::string&)>& progress) {
  std::vector<claim_row> rows;
  const std::int64_t threads = cpu::detail::max_threads();

  if (!openmp_only) {
    progress("race: one counter, 1,000,000 logical threads");
    const lab::race_count racy = lab::cpu::count_with_threads(1000000, true);
    const lab::race_count atomic = lab::cpu::count_with_threads(1000000, false);
    rows.push_back(race_claim(lesson_races, "without atomics most increments are LOST", racy.expected, racy.actual,
                              atomic.actual, 0, 0.5));
  }

  const auto cpu_case = [&](lab::cpu_method m, std::int64_t a) {
    return lab::contention_case{lab::atomic_op::add, m, a, threads, std::int64_t{1} << 16};
  };
  if (!openmp_only) {
    progress("contention: 1 vs 256 addresses");
    rows.push_back(contention_claim(
        lesson_contention, "atomics are slow when many threads compete for one location (1 vs 256 locations)",
        cpu_case(lab::cpu_method::atomic, 256),
        cpu_case(lab::cpu_method::atomic, 1), "256 addresses", "1 address", 2.0, cfg.runs));
  }
  progress("contention: omp critical vs atomics vs private copies");
  rows.push_back(contention_claim(
      lesson_openmp, "#pragma omp critical is a bottleneck next to #pragma omp atomic (256 addresses)",
      cpu_case(lab::cpu_method::atomic, 256),
      cpu_case(lab::cpu_method::critical, 256), "atomic", "critical", 1.5, cfg.runs));
  rows.push_back(contention_claim(
      lesson_openmp, "per-thread copies (the OpenMP reduction idea) avoid the cost of synchronizing (256 addresses)",
      cpu_case(lab::cpu_method::privatized, 256),
      cpu_case(lab::cpu_method::atomic, 256), "privatized", "atomic", 1.5, cfg.runs));

  progress(fmt::format("{}: {} uniform samples, 256 bins", openmp_only ? "samples" : "histograms", n));
  std::vector<std::int32_t> data(static_cast<std::size_t>(n));
  generate_samples<std::int32_t>(distribution::uniform, 256, cfg.seed, data);
  const std::vector<std::uint64_t> reference = lab::reference_histogram(data, 256);
  if (!openmp_only) {
    const lab::race_count missing = lab::cpu::block_histogram(data, reference, false);
    const lab::race_count fixed = lab::cpu::block_histogram(data, reference, true);
    rows.push_back(race_claim(lesson_races, "without the barrier before the flush the block histogram is wrong",
                              missing.expected, missing.actual, fixed.actual, fixed.wrong_bins, 0.0));
    const lab::race_count naive = lab::cpu::naive_histogram(data, reference, true);
    const lab::race_count atomic = lab::cpu::naive_histogram(data, reference, false);
    rows.push_back(race_claim(lesson_races, "the naive histogram (hist[bin]++) is incorrect: a data race",
                              naive.expected, naive.actual, atomic.actual, atomic.wrong_bins, 0.0));
  }
  const auto histogram_ms = [&](strategy s) {
    std::vector<std::uint64_t> counts(256);
    histogram_options options;
    options.algorithm = s;
    (void)cpu::bincount<std::int32_t, std::uint64_t>(data, counts, options);
    if (counts != reference) return -1.0;
    return median_host_ms(cfg.runs, [&] { (void)cpu::bincount<std::int32_t, std::uint64_t>(data, counts, options); });
  };
  if (!openmp_only) {
    rows.push_back(timed_claim(lesson_privatization,
                               "privatization (a private histogram per thread) reduces contention dramatically",
                               histogram_ms(strategy::privatized), histogram_ms(strategy::atomic), "privatized",
                               "atomic", 2.0));
  }

  progress(fmt::format("sums: {} int32 samples", n));
  const std::int64_t want = std::accumulate(data.begin(), data.end(), std::int64_t{0});
  const auto sum_ms = [&](strategy s) {
    reduce_options options;
    options.algorithm = s;
    if (cpu::reduce<std::int32_t>(data, reduce_op::sum, options).value != want) return -1.0;
    return median_host_ms(cfg.runs, [&] { (void)cpu::reduce<std::int32_t>(data, reduce_op::sum, options); });
  };
  const double critical_ms = sum_ms(strategy::critical);
  const double atomic_ms = sum_ms(strategy::atomic);
  const double reduction_ms = sum_ms(strategy::reduction);
  rows.push_back(timed_claim(lesson_openmp, "reduction(+) instead of a critical section around every addition",
                             reduction_ms, critical_ms, "reduction", "critical", 2.0));
  rows.push_back(timed_claim(lesson_openmp, "reduction(+) instead of an atomic per addition", reduction_ms, atomic_ms,
                             "reduction", "atomic", 2.0));
  return rows;
}

// ---- reporting -------------------------------------------------------------------------------

void print_claims(std::FILE* out, const std::vector<claim_row>& rows) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const claim_row& r = rows[i];
    fmt::print(out, "{:>2}. [{}; {}] \"{}\"\n    measured: {}\n    verdict:  {}\n", i + 1, r.lesson, r.backend,
               r.claim, r.measured.empty() ? "-" : r.measured, r.verdict);
  }
  const auto count = [&](const char* prefix) {
    return std::count_if(rows.begin(), rows.end(), [&](const claim_row& r) { return r.verdict.starts_with(prefix); });
  };
  fmt::print(out, "\n{} claims: {} hold, {} partly, {} do not hold here, {} verification mismatches\n", rows.size(),
             count("holds"), count("partly"), count("does not hold"), count("MISMATCH"));
}

const row_field<claim_row> claim_fields[] = {
    {"backend", &claim_row::backend},   {"lesson", &claim_row::lesson}, {"claim", &claim_row::claim},
    {"measured", &claim_row::measured}, {"figure", &claim_row::figure}, {"unit", &claim_row::unit},
    {"verdict", &claim_row::verdict}};

int run_lab(const lab_config& cfg) {
  const backend where = resolve_backend(cfg.backend_name, command_name);
  const bool on_gpu = where == backend::gpu;
  cfg.check(command_name);
  const std::int64_t n =
      parse_count(cfg.samples.empty() ? (on_gpu ? "2^24" : "2^22") : cfg.samples, command_name, "--samples");
  if (n < 1024 || n > (std::int64_t{1} << 30)) {
    throw_invalid_argument(command_name, "--samples", fmt::format("must be between 1024 and 2^30 (got {})", n));
  }
  if (cfg.runs < 1) throw_invalid_argument(command_name, "--runs", "must be >= 1");

  const run_environment env = describe_run_environment(where);
  print_environment_header(stdout, "lab", env);
  fmt::print("every experiment of the lab at a modest size; correct variants checked before they are timed, "
             "racy ones reported as what they lost; median of {} runs\n\n",
             cfg.runs);
  std::fflush(stdout);
  int step = 0;
  const auto progress = [&](const std::string& what) {
    if (!cfg.quiet) std::fprintf(stderr, "[lab %d] %s\n", ++step, what.c_str());
  };
  std::vector<claim_row> rows;
  if (on_gpu) {
    rows = gpu_claims(cfg, n, progress);
    for (claim_row& r : rows) r.backend = "gpu";
    // The OpenMP claims can only be tested on the CPU: they run beside the GPU's, on at most
    // 2^22 samples (a critical section per addition is slow).
    std::vector<claim_row> openmp = cpu_claims(cfg, std::min<std::int64_t>(n, std::int64_t{1} << 22), true, progress);
    for (claim_row& r : openmp) r.backend = "cpu";
    rows.insert(rows.end(), openmp.begin(), openmp.end());
  } else {
    rows = cpu_claims(cfg, n, false, progress);
    for (claim_row& r : rows) r.backend = "cpu";
  }
  print_claims(stdout, rows);
  return cfg.finish("lab", env, rows, claim_fields);
}

}  // namespace

void add_lab_command(CLI::App& app, int& exit_code) {
  add_measuring_command(app, exit_code, lab_command, run_lab, add_lab_options);
}

}  // namespace tally::cli
