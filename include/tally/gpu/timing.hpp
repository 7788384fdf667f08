// Event timing of GPU work on a stream, host-safe: how `tally bench` times every strategy.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "tally/gpu.hpp"

namespace tally::gpu {

/// How time_runs brackets each run with its two CUDA events.
enum class run_timing {
  /// GPU time: the stream first runs a kernel that waits until the host has enqueued the whole run
  /// (both events and the work between them), so the events time the GPU's work alone, not the
  /// host's launching of it (nvbench's blocking kernel). The default.
  gpu,
  /// The events are recorded around the host's enqueueing on an idle stream: a run also counts
  /// the time the host takes to launch its work, and the GPU waits in between.
  with_launch,
};

/// What time_runs measured.
struct timed_runs {
  std::vector<float> ms;  ///< each run's milliseconds, in order
  /// How they were timed. run_timing::gpu falls back to with_launch when a run waits for the GPU
  /// itself (a result read back to the host, say), which a held stream would never finish.
  run_timing timing = run_timing::gpu;
};

/**
 * @brief Runs `work(stream)` `runs` times, each between two CUDA events, and returns the
 * milliseconds of each run (waits for each run). With run_timing::gpu (the default) each run is
 * held behind a kernel until it is all enqueued; a run that synchronizes with the host inside
 * `work` releases the hold after 0.5 s instead, and then every run is timed again with_launch.
 */
timed_runs time_runs(const std::function<void(stream_t)>& work, int runs, stream_t stream = nullptr,
                     run_timing timing = run_timing::gpu);

/// "gpu" or "with_launch": the name reports and `--timing` use.
constexpr std::string_view to_string(run_timing timing) noexcept {
  return timing == run_timing::gpu ? "gpu" : "with_launch";
}

/**
 * @brief Measures the device's read bandwidth in bytes/s: a streaming kernel of 16-byte loads
 * over `bytes` of device memory (several times the L2), median of `runs` runs timed by time_runs
 * with `timing`.
 */
double measure_read_bandwidth(std::size_t bytes, int runs, run_timing timing = run_timing::gpu);

/** @brief Waits for all work on the current device. */
void synchronize();

}  // namespace tally::gpu
