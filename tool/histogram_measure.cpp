// The read bandwidth that every `tally bench` and `tally advise` row is a fraction of, measured
// in the same run on the backend being measured.
#include "histogram_measure.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

namespace tally::cli {
namespace {

/// The CPU yardstick: an OpenMP streaming read of 8-byte words over a buffer far larger than
/// the last-level cache, median of `runs`.
double cpu_read_bandwidth(std::size_t bytes, int runs) {
  std::vector<std::uint64_t> data(bytes / sizeof(std::uint64_t));
  const auto n = static_cast<std::int64_t>(data.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) data[static_cast<std::size_t>(i)] = static_cast<std::uint64_t>(i) * 0x9e37u;
  std::vector<double> times;
  volatile std::uint64_t sink = 0;
  for (int run = 0; run < runs + 1; ++run) {
    std::uint64_t acc = 0;
    const double ms = host_ms([&] {
#pragma omp parallel for schedule(static) reduction(^ : acc)
      for (std::int64_t i = 0; i < n; ++i) acc ^= data[static_cast<std::size_t>(i)];
    });
    sink = sink ^ acc;
    if (run > 0) times.push_back(ms);  // the first run warms the pages up
  }
  std::sort(times.begin(), times.end());
  return static_cast<double>(n * sizeof(std::uint64_t)) / (times[times.size() / 2] * 1e-3);
}

}  // namespace

void measure_read_bandwidth(backend where, bench_environment& env, gpu::run_timing timing) {
  if (where == backend::gpu) {
    const gpu::device_info info = gpu::describe_device();
    const std::size_t bytes = std::max<std::size_t>(std::size_t{1} << 30, info.l2_cache_bytes * 8);
    env.timing = std::string(gpu::to_string(timing));
    env.read_bytes_per_s = gpu::measure_read_bandwidth(bytes, 20, timing);
    env.read_method = fmt::format("16-byte streaming loads, four in flight a thread, over {} MiB, median of 20", bytes >> 20);
  } else {
    const std::size_t bytes = std::size_t{512} << 20;
    env.timing = "wall_clock";
    env.read_bytes_per_s = cpu_read_bandwidth(bytes, 7);
    env.read_method = fmt::format("OpenMP 8-byte streaming read over {} MiB, median of 7", bytes >> 20);
  }
}

}  // namespace tally::cli
