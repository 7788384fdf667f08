// `tally devices`: what tally will run on. The GPU's name, multiprocessors, memory, L2 and
// shared memory, and its read bandwidth measured now; or, without one, the CPU backend.
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "commands.hpp"
#include "tally/cpu/parallel.hpp"
#include "tally/gpu.hpp"
#include "tally/gpu/timing.hpp"

namespace tally::cli {

void add_devices_command(CLI::App& app, int& exit_code) {
  CLI::App* sub = app.add_subcommand("devices", "Show the GPU tally runs on (or the CPU backend) and its read bandwidth");
  // Every command takes --quiet; this one prints its answer only, no progress to silence.
  sub->add_flag("--quiet")->description("No progress on stderr (devices prints none)");
  sub->callback([&exit_code] {
    const int count = gpu::device_count();
    if (count == 0) {
      fmt::print("no GPU: CPU backend ({} OpenMP threads){}\n", cpu::detail::max_threads(),
                 gpu::built_with_cuda() ? "" : "; this build has no CUDA support");
      exit_code = exit_success;
      return;
    }
    const gpu::device_info info = gpu::describe_device();
    fmt::print("GPU {} of {}: {}\n", info.ordinal, count, info.name);
    fmt::print("  compute capability  {}.{}\n", info.compute_capability_major, info.compute_capability_minor);
    fmt::print("  multiprocessors     {}\n", info.multiprocessors);
    fmt::print("  memory              {:.1f} GiB ({}-bit bus)\n",
               static_cast<double>(info.global_memory_bytes) / (1 << 30), info.memory_bus_width_bits);
    fmt::print("  L2 cache            {:.1f} MB\n", static_cast<double>(info.l2_cache_bytes) / 1e6);
    fmt::print("  shared memory/block {} KiB (opt-in){}\n", info.shared_memory_per_block_optin / 1024,
               std::getenv("TALLY_SHARED_MEMORY_PER_BLOCK") != nullptr
                   ? "; TALLY_SHARED_MEMORY_PER_BLOCK is set: tally plans with this"
                   : "");
    fmt::print("  driver / runtime    {} / {}\n", info.driver_version, info.runtime_version);
    const std::size_t bytes = std::max<std::size_t>(std::size_t{1} << 30, info.l2_cache_bytes * 8);
    const double bandwidth = gpu::measure_read_bandwidth(bytes, 20);
    fmt::print("  read bandwidth      {:.1f} GB/s (16-byte streaming loads over {} MiB, median of 20)\n",
               bandwidth * 1e-9, bytes >> 20);
    exit_code = exit_success;
  });
}

}  // namespace tally::cli
