// The read bandwidth that every `tally bench` and `tally advise` row is a fraction of, measured
// in the same run on the backend being measured over a buffer sized to the input; and the check,
// before anything is allocated, that the inputs fit in memory.
#include "histogram_measure.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tally/cpu/parallel.hpp"
#include "tally/error.hpp"

namespace tally::cli {
namespace {

/// The CPU yardstick: an OpenMP streaming read of 8-byte words over `bytes`, median of `runs`.
/// A run reads the buffer as many times as make 256 MiB: a run of a fraction of a millisecond
/// measures whether a thread was descheduled (on a shared machine, 2-45 GB/s over 16 MiB) more
/// than the bandwidth.
double cpu_read_bandwidth(std::size_t bytes, int runs) {
  std::vector<std::uint64_t> data(bytes / sizeof(std::uint64_t));
  const auto n = static_cast<std::int64_t>(data.size());
  const std::size_t passes = std::max<std::size_t>(1, (std::size_t{256} << 20) / bytes);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) data[static_cast<std::size_t>(i)] = static_cast<std::uint64_t>(i) * 0x9e37u;
  std::vector<double> times;
  volatile std::uint64_t sink = 0;
  for (int run = 0; run < runs + 1; ++run) {
    std::uint64_t acc = 0;
    const double ms = host_ms([&] {
      // One parallel region, each thread reading its own part every pass: no barrier between
      // passes, which on a busy machine waits for a descheduled thread and measures that instead.
#pragma omp parallel reduction(^ : acc)
      for (std::size_t pass = 0; pass < passes; ++pass) {
#pragma omp for schedule(static) nowait
        for (std::int64_t i = 0; i < n; ++i) acc ^= data[static_cast<std::size_t>(i)];
      }
    });
    sink = sink ^ acc;
    if (run > 0) times.push_back(ms);  // the first run warms the pages up
  }
  std::sort(times.begin(), times.end());
  return static_cast<double>(passes * n * sizeof(std::uint64_t)) / (times[times.size() / 2] * 1e-3);
}

/// The L2 cache of one CPU core, or 1 MiB where the system does not say.
std::uint64_t cpu_l2_bytes() {
  const long bytes = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
  return bytes > 0 ? static_cast<std::uint64_t>(bytes) : std::uint64_t{1} << 20;
}

/// Host memory that can be had now without swapping: MemAvailable, else the physical memory.
double available_host_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

std::uint64_t read_bandwidth_bytes(backend where, std::uint64_t input_bytes) {
  std::uint64_t least = 0;
  std::uint64_t most = 0;
  if (where == backend::gpu) {
    const std::uint64_t l2 = gpu::describe_device().l2_cache_bytes;
    least = 4 * l2;
    most = std::max<std::uint64_t>(std::uint64_t{1} << 30, 8 * l2);
  } else {
    least = 4 * cpu_l2_bytes() * static_cast<std::uint64_t>(cpu::detail::max_threads());
    most = std::uint64_t{512} << 20;
  }
  least = std::min(least, most);
  constexpr std::uint64_t page = 4096;  // whole pages: whole 16-byte loads on a GPU, 8-byte words on CPUs
  return (std::clamp(input_bytes, least, most) + page - 1) / page * page;
}

void measure_read_bandwidth(backend where, bench_environment& env, gpu::run_timing timing, std::uint64_t input_bytes) {
  const std::uint64_t bytes = read_bandwidth_bytes(where, input_bytes);
  if (where == backend::gpu) {
    env.timing = std::string(gpu::to_string(timing));
    env.read_bytes_per_s = gpu::measure_read_bandwidth(static_cast<std::size_t>(bytes), 20, timing);
    env.read_method =
        fmt::format("16-byte streaming loads, four in flight a thread, over {}, median of 20", bytes_text(bytes));
  } else {
    env.timing = "wall_clock";
    env.read_bytes_per_s = cpu_read_bandwidth(static_cast<std::size_t>(bytes), 7);
    env.read_method = fmt::format("OpenMP 8-byte streaming read over {}, median of 7", bytes_text(bytes));
  }
}

std::string bytes_text(double bytes) {
  if (bytes >= std::pow(2.0, 40)) return fmt::format("{:.1f} TiB", bytes / std::pow(2.0, 40));
  if (bytes >= 1 << 30) return fmt::format("{:.1f} GiB", bytes / (1 << 30));
  if (bytes >= 1 << 20) return fmt::format("{:.0f} MiB", bytes / (1 << 20));
  if (bytes >= 1024) return fmt::format("{:.0f} KiB", bytes / 1024);
  return fmt::format("{:.0f} bytes", bytes);
}

void check_memory_fits(std::string_view command, std::string_view option, const std::string& what, backend where,
                       double host_bytes, double device_bytes) {
  const double host_available = available_host_bytes();
  const double device_memory =
      where == backend::gpu ? static_cast<double>(gpu::describe_device().global_memory_bytes) : 0.0;
  const bool host_short = host_bytes > host_available;
  const bool device_short = where == backend::gpu && device_bytes > device_memory;
  if (!host_short && !device_short) return;
  std::string need = fmt::format("{} need {} of host memory", what, bytes_text(host_bytes));
  if (where == backend::gpu) need += fmt::format(" and {} of GPU memory", bytes_text(device_bytes));
  std::string have = fmt::format("{} is available", bytes_text(host_available));
  if (where == backend::gpu) have += fmt::format(" and the GPU has {}", bytes_text(device_memory));
  throw_invalid_argument(command, option, "is too large: " + need + ", but " + have);
}

}  // namespace tally::cli
