// `tally bench --gpus N`: one histogram over several GPUs of this machine (tally::nccl, a shard a
// GPU, counts added by NCCL) against the one-GPU call on the same samples: how throughput scales.
#include "bench_gpus.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <vector>

#include "distributions.hpp"
#include "host_timing.hpp"
#include "run_environment.hpp"
#include "tally/gpu.hpp"
#include "tally/gpu/timing.hpp"
#include "tally/nccl.hpp"

namespace tally::cli {
namespace {

struct scaling_row {
  std::string type;
  std::string distribution;
  std::int64_t bins = 0;
  std::int64_t samples = 0;
  int gpus = 0;     ///< 0: tally::gpu::histogram_even on GPU 0, no NCCL
  std::string api;  ///< "tally::gpu" or "tally::nccl"
  double median_ms = 0.0;
  double sustained_ms = 0.0;  ///< the runs back to back: their total time over their number
  double samples_per_s = 0.0;
  double speedup = 0.0;            ///< against the one-GPU call, of the medians
  double sustained_speedup = 0.0;  ///< against the one-GPU call, of the sustained times
  double of_read_bandwidth = 0.0;  ///< bytes a second over (GPUs x GPU 0's read bandwidth)
  bool mismatch = false;           ///< counts differ from the one-GPU call's
};

const row_field<scaling_row> scaling_fields[] = {
    {"type", [](const scaling_row& r) { return row_fields(r.type); }},
    {"distribution", [](const scaling_row& r) { return row_fields(r.distribution); }},
    {"bins", [](const scaling_row& r) { return row_fields(r.bins); }},
    {"samples", [](const scaling_row& r) { return row_fields(r.samples); }},
    {"gpus", [](const scaling_row& r) { return row_fields(r.gpus); }},
    {"api", [](const scaling_row& r) { return row_fields(r.api); }},
    {"median_ms", [](const scaling_row& r) { return row_fields(r.median_ms); }},
    {"sustained_ms", [](const scaling_row& r) { return row_fields(r.sustained_ms); }},
    {"sustained_speedup", [](const scaling_row& r) { return row_fields(r.sustained_speedup); }},
    {"samples_per_s", [](const scaling_row& r) { return row_fields(r.samples_per_s); }},
    {"speedup", [](const scaling_row& r) { return row_fields(r.speedup); }},
    {"of_read_bandwidth", [](const scaling_row& r) { return row_fields(r.of_read_bandwidth); }},
    {"mismatch", [](const scaling_row& r) { return row_fields(r.mismatch); }},
};

/// Wall times of `runs` calls of `call()` after `warmup`, each call waited for, in ms: the median
/// of the calls, and their total over their number (the calls back to back, as a stream of them
/// runs, where one call's start follows the last one's end).
struct call_times {
  double median_ms = 0.0;
  double sustained_ms = 0.0;
};

template <class Call>
call_times time_calls(int warmup, int runs, Call call) {
  for (int i = 0; i < warmup; ++i) call();
  std::vector<double> times;
  const double total = host_ms([&] {
    for (int i = 0; i < runs; ++i) times.push_back(host_ms(call));
  });
  return {summarize_ms(std::move(times)).median_ms, total / runs};
}

template <class T>
void measure(const gpus_bench_request& request, distribution d, std::int64_t num_bins, std::int64_t n,
             double read_bytes_per_s, std::vector<scaling_row>& rows) {
  std::vector<T> samples(static_cast<std::size_t>(n));
  generate_samples<T>(d, num_bins, request.seed, std::span<T>(samples));
  const even_bins bins{num_bins, 0.0, static_cast<double>(num_bins)};
  scaling_row base;
  base.type = std::is_same_v<T, float> ? "float32" : "int32";
  base.distribution = std::string(to_string(d));
  base.bins = num_bins;
  base.samples = n;
  const double bytes = static_cast<double>(n) * sizeof(T);

  // The one-GPU call, on GPU 0, in the same run: the baseline.
  std::vector<std::uint64_t> want(static_cast<std::size_t>(num_bins));
  scaling_row one = base;
  one.api = "tally::gpu";
  {
    nccl::detail::make_current(0);
    const gpu::device_buffer<T> d_samples{std::span<const T>(samples)};
    gpu::device_buffer<std::uint64_t> counts(static_cast<std::size_t>(num_bins));
    const call_times times = time_calls(request.warmup, request.runs,
                                        [&] { gpu::histogram_even(d_samples.const_span(), counts.span(), bins); });
    one.median_ms = times.median_ms;
    one.sustained_ms = times.sustained_ms;
    counts.download(want);
  }
  one.samples_per_s = static_cast<double>(n) / (one.median_ms * 1e-3);
  one.speedup = 1.0;
  one.sustained_speedup = 1.0;
  one.of_read_bandwidth = bytes / (one.median_ms * 1e-3) / read_bytes_per_s;
  rows.push_back(one);

  std::vector<int> counts_of_gpus{1};
  if (request.gpus > 1) counts_of_gpus.push_back(request.gpus);
  for (const int g : counts_of_gpus) {
    std::vector<int> devices(static_cast<std::size_t>(g));
    for (int i = 0; i < g; ++i) devices[static_cast<std::size_t>(i)] = i;
    nccl::local_team team(devices);
    scaling_row row = base;
    row.api = "tally::nccl";
    row.gpus = g;
    std::vector<std::uint64_t> got(static_cast<std::size_t>(num_bins));
    team.run([&](int rank) {
      const std::size_t first = samples.size() * static_cast<std::size_t>(rank) / static_cast<std::size_t>(g);
      const std::size_t last = samples.size() * static_cast<std::size_t>(rank + 1) / static_cast<std::size_t>(g);
      const gpu::device_buffer<T> shard(std::span<const T>(samples.data() + first, last - first));
      gpu::device_buffer<std::uint64_t> counts(static_cast<std::size_t>(num_bins));
      // Every call is a collective: the ranks keep step, and rank 0's wall time is the call's.
      const call_times times = time_calls(request.warmup, request.runs, [&] {
        nccl::histogram_even(team.comm(rank), shard.const_span(), counts.span(), bins);
      });
      if (rank == 0) {
        row.median_ms = times.median_ms;
        row.sustained_ms = times.sustained_ms;
        counts.download(got);
      }
    });
    row.samples_per_s = static_cast<double>(n) / (row.median_ms * 1e-3);
    row.speedup = one.median_ms / row.median_ms;
    row.sustained_speedup = one.sustained_ms / row.sustained_ms;
    row.of_read_bandwidth = bytes / (row.median_ms * 1e-3) / (read_bytes_per_s * g);
    row.mismatch = got != want;
    rows.push_back(row);
  }
}

}  // namespace

int run_bench_across_gpus(const gpus_bench_request& request, const result_files& files) {
  if (!nccl::built_with_nccl()) {
    throw error(errc::not_supported, "--gpus", "tally bench: --gpus needs NCCL, which this tally was built without");
  }
  nccl::detail::make_current(0);
  run_environment env = describe_run_environment(backend::gpu);
  env.device = fmt::format("{} x {}", request.gpus, env.device);
  if (!files.quiet) std::fprintf(stderr, "[bench] measuring GPU 0's read bandwidth\n");
  const double read_bytes_per_s = gpu::measure_read_bandwidth(std::size_t{1} << 30, 15);
  print_environment_header(stdout, "bench --gpus", env);
  std::printf("GPU 0's read bandwidth: %.0f GB/s; wall time of each call, result waited for; median of %d runs\n\n",
              read_bytes_per_s * 1e-9, request.runs);
  std::printf("%-8s %-12s %7s %12s %5s %-12s %10s %14s %8s %10s %13s %10s\n", "type", "distribution", "bins",
              "samples", "gpus", "api", "ms", "samples/s", "speedup", "of read", "sustained ms", "speedup");
  std::vector<scaling_row> rows;
  for (const std::string& type : request.types) {
    for (const distribution d : request.distributions) {
      for (const std::int64_t num_bins : request.bins) {
        for (const std::int64_t n : request.sizes) {
          const std::size_t before = rows.size();
          if (type == "int32") {
            measure<std::int32_t>(request, d, num_bins, n, read_bytes_per_s, rows);
          } else if (type == "float32" || type == "float") {
            measure<float>(request, d, num_bins, n, read_bytes_per_s, rows);
          } else {
            throw_invalid_argument("tally bench", "--types", "with --gpus takes int32 and float32, not '" + type + "'");
          }
          for (std::size_t i = before; i < rows.size(); ++i) {
            const scaling_row& r = rows[i];
            std::printf("%-8s %-12s %7lld %12lld %5d %-12s %10.3f %14.4g %8.2f %10.3f %13.3f %10.2f%s\n",
                        r.type.c_str(), r.distribution.c_str(), static_cast<long long>(r.bins),
                        static_cast<long long>(r.samples), r.gpus, r.api.c_str(), r.median_ms, r.samples_per_s,
                        r.speedup, r.of_read_bandwidth, r.sustained_ms, r.sustained_speedup,
                        r.mismatch ? "  MISMATCH" : "");
          }
          std::fflush(stdout);
        }
      }
    }
  }
  std::printf(
      "\ngpus 0: tally::gpu::histogram_even on GPU 0 alone; speedup against it; 'of read': bytes a "
      "second over the GPUs' read bandwidth (GPU 0's, times the GPUs)\n");
  return files.finish("bench_gpus", env, rows, std::span<const row_field<scaling_row>>(scaling_fields));
}

}  // namespace tally::cli
