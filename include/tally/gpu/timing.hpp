// Event timing of GPU work on a stream, host-safe: how `tally bench` times every strategy.
#pragma once

#include <functional>
#include <vector>

#include "tally/gpu.hpp"

namespace tally::gpu {

/**
 * @brief Runs `work(stream)` `runs` times, each between two CUDA events, and returns the
 * milliseconds of each run (waits for each run).
 */
std::vector<float> time_runs(const std::function<void(stream_t)>& work, int runs, stream_t stream = nullptr);

/** @brief Waits for all work on the current device. */
void synchronize();

}  // namespace tally::gpu
