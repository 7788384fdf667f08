// The racy and correct variants of `tally race`'s experiments (see the header for the racy
// update and why it is written with relaxed atomics).
#include "tally/lab/race_experiment.hpp"

#include <atomic>

#include "tally/cpu/parallel.hpp"

namespace tally::cli {
namespace {

/// Adds 1 to `word`: racy (two atomic steps another thread can come between) or atomic.
inline void increment(std::uint64_t& word, bool racy) {
  std::atomic_ref<std::uint64_t> ref(word);
  if (racy) {
    ref.store(ref.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  } else {
    ref.fetch_add(1, std::memory_order_relaxed);
  }
}

void compare(std::span<const std::uint64_t> got, std::span<const std::uint64_t> want, race_outcome& out) {
  for (std::size_t b = 0; b < want.size(); ++b) {
    out.expected += want[b];
    out.actual += got[b];
    out.wrong_bins += got[b] != want[b] ? 1 : 0;
    out.over_bins += got[b] > want[b] ? 1 : 0;
  }
}

}  // namespace

race_outcome count_with_threads(std::int64_t threads, bool racy) {
  race_outcome out;
  std::uint64_t counter = 0;
#pragma omp parallel
  {
#pragma omp single nowait
    out.team = cpu::detail::team_size();
    // schedule(static, 1): logical threads t, t + team, ... take turns on each OpenMP thread,
    // so the team's threads increment at the same time from the start.
#pragma omp for schedule(static, 1)
    for (std::int64_t t = 0; t < threads; ++t) increment(counter, racy);
  }
  out.expected = static_cast<std::uint64_t>(threads);
  out.actual = counter;
  return out;
}

std::vector<std::uint64_t> reference_histogram(std::span<const std::int32_t> samples, std::int64_t num_bins) {
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(num_bins), 0);
  for (const std::int32_t s : samples) ++counts[static_cast<std::size_t>(s)];
  return counts;
}

race_outcome histogram_with_threads(std::span<const std::int32_t> samples, std::span<const std::uint64_t> reference,
                                    bool racy) {
  race_outcome out;
  std::vector<std::uint64_t> counts(reference.size(), 0);
  const auto n = static_cast<std::int64_t>(samples.size());
#pragma omp parallel
  {
#pragma omp single nowait
    out.team = cpu::detail::team_size();
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) increment(counts[static_cast<std::size_t>(samples[static_cast<std::size_t>(i)])], racy);
  }
  compare(counts, reference, out);
  return out;
}

race_outcome block_histogram_with_threads(std::span<const std::int32_t> samples,
                                          std::span<const std::uint64_t> reference, bool barrier) {
  race_outcome out;
  std::vector<std::uint64_t> block_counts(reference.size(), 0);
  std::vector<std::uint64_t> counts(reference.size(), 0);
  const auto n = static_cast<std::int64_t>(samples.size());
  const auto bins = static_cast<std::int64_t>(reference.size());
#pragma omp parallel
  {
#pragma omp single nowait
    out.team = cpu::detail::team_size();
#pragma omp for schedule(static) nowait
    for (std::int64_t i = 0; i < n; ++i) increment(block_counts[static_cast<std::size_t>(samples[static_cast<std::size_t>(i)])], false);
    if (barrier) {
#pragma omp barrier
    }
    // Without the barrier a thread copies bins while the others may still be adding to them;
    // the relaxed loads keep that a wrong result rather than undefined behaviour.
#pragma omp for schedule(static) nowait
    for (std::int64_t b = 0; b < bins; ++b) {
      counts[static_cast<std::size_t>(b)] =
          std::atomic_ref<std::uint64_t>(block_counts[static_cast<std::size_t>(b)]).load(std::memory_order_relaxed);
    }
  }
  compare(counts, reference, out);
  return out;
}

}  // namespace tally::cli
