// Wall-clock timing on the host and the summary every measuring command reports: the median of
// the runs, the fastest and slowest, and the noise (p90 - p10) / median.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

namespace tally::cli {

/** @brief Milliseconds that `work()` took on the host's steady clock. */
template <class F>
double host_ms(F&& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

struct time_summary {
  int runs = 0;
  double median_ms = 0.0;
  double min_ms = 0.0;
  double max_ms = 0.0;
  double noise_percent = 0.0;  ///< (p90 - p10) / median
};

/** @brief The median, minimum, maximum and noise of per-run milliseconds (at least one run). */
inline time_summary summarize_ms(std::vector<double> times_ms) {
  std::sort(times_ms.begin(), times_ms.end());
  const auto at = [&](double q) { return times_ms[static_cast<std::size_t>(q * static_cast<double>(times_ms.size() - 1))]; };
  time_summary s;
  s.runs = static_cast<int>(times_ms.size());
  s.median_ms = at(0.5);
  s.min_ms = times_ms.front();
  s.max_ms = times_ms.back();
  s.noise_percent = s.median_ms > 0 ? 100.0 * (at(0.9) - at(0.1)) / s.median_ms : 0.0;
  return s;
}

}  // namespace tally::cli
