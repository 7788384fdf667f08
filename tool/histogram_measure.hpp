// How `tally bench` and `tally advise` measure histogram strategies on one input: the read
// bandwidth that is the yardstick, and a runner that checks each strategy against the CPU
// reference (the sequential strategy) before it times it. A wrong result is never timed as if
// right. Host-only: the GPU is reached through tally/gpu.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "bench_report.hpp"
#include "host_timing.hpp"
#include "tally/cpu.hpp"
#include "tally/error.hpp"
#include "tally/gpu.hpp"
#include "tally/gpu/timing.hpp"

namespace tally::cli {

/**
 * @brief How many bytes the read bandwidth is measured over for inputs of `input_bytes`: the input's
 * size, but at least 4 x the L2 (a GPU's, or on CPUs the L2 of every thread together), so that the
 * figure is a read from beyond L2 and not L2's own speed, and at most what was always used for
 * large inputs (a GPU: max(1 GiB, 8 x L2); CPUs: 512 MiB). An input that fits a larger cache is
 * then compared with a read from the same cache.
 */
std::uint64_t read_bandwidth_bytes(backend where, std::uint64_t input_bytes);

/**
 * @brief Measures the read bandwidth of backend `where` into `env` (read_bytes_per_s and
 * read_method) over read_bandwidth_bytes(where, input_bytes): on a GPU 16-byte streaming loads,
 * median of 20; on CPUs an OpenMP streaming read of 8-byte words, median of 7. `timing` is how
 * the GPU's runs are timed, and env.timing records it.
 */
void measure_read_bandwidth(backend where, bench_environment& env, gpu::run_timing timing, std::uint64_t input_bytes);

/** @brief Bytes as "512 MiB", "4.0 TiB": for messages. */
std::string bytes_text(double bytes);

/**
 * @brief Refuses, before anything is allocated, inputs that cannot fit: throws errc::invalid_argument
 * naming `option` of `command` and the memory needed when `host_bytes` exceed the host memory
 * available now (MemAvailable) or, on a GPU, `device_bytes` exceed the GPU's memory. `what` says
 * what the bytes hold ("2^40 int32 samples").
 */
void check_memory_fits(std::string_view command, std::string_view option, const std::string& what, backend where,
                       double host_bytes, double device_bytes);

/**
 * @brief `warmup` untimed, then `runs` timed runs of `once` on the GPU, timed as `timing` says;
 * returns the timed runs' milliseconds. Where a run waited for the GPU itself and so had to be
 * timed with its launch, the row's note says so.
 */
inline std::vector<double> time_gpu_runs(bench_row& row, const std::function<void(gpu::stream_t)>& once, int warmup,
                                         int runs, gpu::run_timing timing) {
  // A warm-up that had to fall back tells the timed runs to take the launch at once, rather than
  // each timing spend a 0.5 s hold finding out.
  const gpu::run_timing warmed = warmup > 0 ? gpu::time_runs(once, warmup, nullptr, timing).timing : timing;
  const gpu::timed_runs timed = gpu::time_runs(once, runs, nullptr, warmed);
  if (timed.timing != timing) {
    const std::string why = "timed with its launch: a run waits for the GPU itself";
    row.note = row.note.empty() ? why : row.note + "; " + why;
  }
  return std::vector<double>(timed.ms.begin(), timed.ms.end());
}

/**
 * @brief Fills `row.verdict` (and `row.mismatch`) from a histogram against the reference: "exact",
 * else the first bad bin (every strategy is exact, so any difference is a mismatch).
 */
template <class Counter>
void verify_histogram(bench_row& row, std::span<const Counter> expected, std::span<const Counter> got,
                      std::uint64_t expected_left_out, std::uint64_t got_left_out) {
  if (std::equal(expected.begin(), expected.end(), got.begin()) && expected_left_out == got_left_out) {
    row.verdict = "exact";
    return;
  }
  std::size_t first = 0;
  while (first < expected.size() && expected[first] == got[first]) ++first;
  row.verdict = first < expected.size()
                    ? fmt::format("MISMATCH bin {}: {} != {}", first, got[first], expected[first])
                    : fmt::format("MISMATCH left out {} != {}", got_left_out, expected_left_out);
  row.mismatch = true;
}

/// The verdict of a histogram row that cannot run, or nothing for an error that must stop the
/// measurement: a strategy that refuses the case is skipped; one that needs more device memory
/// than there is (CUB's per-block copies of millions of bins), or whose CUB call refuses the
/// sizes, "cannot run". A failure of tally's own strategies otherwise stops it.
inline std::optional<std::string> unrunnable_verdict(const error& e, strategy s) {
  if (e.code() == errc::not_supported) return std::string("skipped: ") + e.what();
  if (e.code() == errc::out_of_memory || (s == strategy::cub && e.code() == errc::cuda_error)) {
    return std::string("cannot run: ") + e.what();
  }
  return std::nullopt;
}

/** @brief The bins of a histogram case: even bins, or the sorted edges of range bins (host memory). */
using histogram_bins = std::variant<even_bins, std::span<const double>>;

/** @brief How many bins `bins` has. */
inline std::int64_t bin_count(const histogram_bins& bins) {
  if (const auto* even = std::get_if<even_bins>(&bins)) return even->num_bins;
  return static_cast<std::int64_t>(std::get<std::span<const double>>(bins).size()) - 1;
}

/** @brief The CPU backend's histogram_even or histogram_range, as `bins` says. */
template <class T, class Counter>
histogram_result cpu_histogram(std::span<const T> samples, std::span<Counter> counts, const histogram_bins& bins,
                               const histogram_options& options) {
  if (const auto* even = std::get_if<even_bins>(&bins)) return cpu::histogram_even(samples, counts, *even, options);
  return cpu::histogram_range(samples, counts, std::get<std::span<const double>>(bins), options);
}

/** @brief The GPU backend's histogram_even_async or histogram_range_async, as `bins` says. */
template <class T, class Counter>
choice gpu_histogram_async(std::span<const T> samples, std::span<Counter> counts, const histogram_bins& bins,
                           gpu::workspace& ws, const histogram_options& options, gpu::stream_t stream) {
  if (const auto* even = std::get_if<even_bins>(&bins)) {
    return gpu::histogram_even_async(samples, counts, *even, ws, options, stream);
  }
  return gpu::histogram_range_async(samples, counts, std::get<std::span<const double>>(bins), ws, options, stream);
}

/**
 * @brief Measures histogram strategies on one case after another (T samples, Counter counts),
 * reusing its host and device buffers between cases. For each case: the CPU reference, then per
 * strategy one poisoned, checked run, then `warmup` untimed and `runs` timed runs (GPU: event
 * timed as `timing` says; CPU: wall clock) of the checked strategy. Strategies the backend cannot run for the
 * case are reported as skipped.
 */
template <class T, class Counter>
class histogram_runner {
 public:
  histogram_runner(backend where, std::int64_t max_bins, int runs, int warmup, double read_bytes_per_s,
                   gpu::run_timing timing)
      : where_(where),
        runs_(runs),
        warmup_(warmup),
        timing_(timing),
        read_bytes_per_s_(read_bytes_per_s),
        expected_(static_cast<std::size_t>(max_bins)),
        got_(static_cast<std::size_t>(max_bins)) {
    if (on_gpu()) device_counts_ = gpu::device_buffer<Counter>(static_cast<std::size_t>(max_bins));
  }

  /**
   * @brief Appends one row per strategy (`base` with the strategy, what it used, verdict and
   * times) to `rows`. `bins` (even or range) must not have more than the runner's `max_bins`.
   */
  void run(const bench_row& base, std::span<const T> host_samples, const histogram_bins& bins,
           std::span<const strategy> strategies, std::vector<bench_row>& rows) {
    const std::int64_t size = base.num_samples;
    const auto num_bins = static_cast<std::size_t>(bin_count(bins));
    const std::span<Counter> want(expected_.data(), num_bins);
    const std::span<Counter> have(got_.data(), num_bins);
    reference_left_out_ = cpu_histogram(host_samples, want, bins, {strategy::sequential}).left_out;
    reference_bins_ = num_bins;
    if (on_gpu()) {
      if (device_samples_.size() != host_samples.size()) {
        device_samples_ = gpu::device_buffer<T>();  // free the last size's buffer before taking the next
        device_samples_ = gpu::device_buffer<T>(host_samples.size());
      }
      device_samples_.upload(host_samples);
    }

    for (const strategy s : strategies) {
      bench_row row = base;
      row.strategy = std::string(to_string(s));
      const histogram_options options{s};
      try {
        std::vector<double> times;
        if (on_gpu()) {
          const std::span<Counter> counts = device_counts_.span().first(num_bins);
          auto once = [&](gpu::stream_t stream) {
            return gpu_histogram_async(device_samples_.const_span(), counts, bins, ws_, options, stream);
          };
          device_counts_.fill_bytes(0xab);  // poison: every bin must be written
          const choice chose = once(nullptr);
          const std::uint64_t left_out = ws_.read_scalar(nullptr);
          device_counts_.download(have);
          row.used = std::string(to_string(chose.used));
          row.reason = std::string(chose.reason);
          verify_histogram<Counter>(row, want, have, reference_left_out_, left_out);
          if (row.mismatch) {
            rows.push_back(row);
            continue;
          }
          times = time_gpu_runs(row, [&](gpu::stream_t stream) { once(stream); }, warmup_, runs_, timing_);
        } else {
          std::fill(have.begin(), have.end(), static_cast<Counter>(0xababababababababull));
          const histogram_result result = cpu_histogram(host_samples, have, bins, options);
          row.used = std::string(to_string(result.chose.used));
          row.reason = std::string(result.chose.reason);
          verify_histogram<Counter>(row, want, have, reference_left_out_, result.left_out);
          if (row.mismatch) {
            rows.push_back(row);
            continue;
          }
          for (int run = 0; run < warmup_ + runs_; ++run) {
            const double ms = host_ms([&] { (void)cpu_histogram(host_samples, have, bins, options); });
            if (run >= warmup_) times.push_back(ms);
          }
        }
        summarize_times(row, std::move(times), size * static_cast<std::int64_t>(sizeof(T)), read_bytes_per_s_);
      } catch (const error& e) {
        const auto verdict = unrunnable_verdict(e, s);
        if (!verdict) throw;
        row.verdict = *verdict;
      }
      rows.push_back(row);
    }
  }

  /** @brief The reference histogram of the last case run (the sequential CPU strategy's). */
  [[nodiscard]] std::span<const Counter> reference() const { return {expected_.data(), reference_bins_}; }
  /** @brief The samples the last case's bins left out. */
  [[nodiscard]] std::uint64_t reference_left_out() const { return reference_left_out_; }

 private:
  [[nodiscard]] bool on_gpu() const { return where_ == backend::gpu; }

  backend where_;
  int runs_;
  int warmup_;
  gpu::run_timing timing_;
  double read_bytes_per_s_;
  std::vector<Counter> expected_;
  std::vector<Counter> got_;
  std::size_t reference_bins_ = 0;
  std::uint64_t reference_left_out_ = 0;
  gpu::device_buffer<Counter> device_counts_;
  gpu::device_buffer<T> device_samples_;
  gpu::workspace ws_;
};

}  // namespace tally::cli
