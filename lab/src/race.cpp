// The host side of the lab's race experiments (tally/lab/race.hpp): the reference histogram, the
// comparison with it, and the CPU experiments, racy and correct (see the header for the racy
// update and why it is written with relaxed atomics).
#include "tally/lab/race.hpp"

#include <atomic>

#include "tally/cpu/parallel.hpp"
#include "tally/error.hpp"

namespace tally::lab {

std::vector<std::uint64_t> reference_histogram(std::span<const std::int32_t> samples, std::int64_t num_bins) {
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(num_bins), 0);
  for (const std::int32_t s : samples) ++counts[static_cast<std::size_t>(s)];
  return counts;
}

race_count compare_with_reference(std::span<const std::uint32_t> counts, std::span<const std::uint64_t> reference) {
  if (counts.size() != reference.size()) {
    throw_invalid_argument("tally::lab::compare_with_reference", "counts", "must have as many bins as the reference");
  }
  race_count out;
  for (std::size_t b = 0; b < counts.size(); ++b) {
    out.expected += reference[b];
    out.actual += counts[b];
    if (counts[b] != reference[b]) ++out.wrong_bins;
    if (counts[b] > reference[b]) ++out.over_bins;
  }
  return out;
}

namespace cpu {
namespace {

/// Adds 1 to `word`: racy (two atomic steps another thread can come between) or atomic.
template <class Word>
void increment(Word& word, bool racy) {
  std::atomic_ref<Word> ref(word);
  if (racy) {
    ref.store(ref.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  } else {
    ref.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace

race_count count_with_threads(std::int64_t threads, bool racy) {
  std::uint64_t counter = 0;
  int team = 0;
#pragma omp parallel
  {
#pragma omp single nowait
    team = tally::cpu::detail::team_size();
    // schedule(static, 1): logical threads t, t + team, ... take turns on each OpenMP thread,
    // so the team's threads increment at the same time from the start.
#pragma omp for schedule(static, 1)
    for (std::int64_t t = 0; t < threads; ++t) increment(counter, racy);
  }
  race_count out;
  out.expected = static_cast<std::uint64_t>(threads);
  out.actual = counter;
  out.team = team;
  return out;
}

race_count naive_histogram(std::span<const std::int32_t> samples, std::span<const std::uint64_t> reference,
                           bool racy) {
  std::vector<std::uint32_t> counts(reference.size(), 0);
  const auto n = static_cast<std::int64_t>(samples.size());
  int team = 0;
#pragma omp parallel
  {
#pragma omp single nowait
    team = tally::cpu::detail::team_size();
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      increment(counts[static_cast<std::size_t>(samples[static_cast<std::size_t>(i)])], racy);
    }
  }
  race_count out = compare_with_reference(counts, reference);
  out.team = team;
  return out;
}

race_count block_histogram(std::span<const std::int32_t> samples, std::span<const std::uint64_t> reference,
                           bool barrier) {
  std::vector<std::uint32_t> block_counts(reference.size(), 0);
  std::vector<std::uint32_t> counts(reference.size(), 0);
  const auto n = static_cast<std::int64_t>(samples.size());
  const auto bins = static_cast<std::int64_t>(reference.size());
  int team = 0;
#pragma omp parallel
  {
#pragma omp single nowait
    team = tally::cpu::detail::team_size();
#pragma omp for schedule(static) nowait
    for (std::int64_t i = 0; i < n; ++i) {
      increment(block_counts[static_cast<std::size_t>(samples[static_cast<std::size_t>(i)])], false);
    }
    if (barrier) {
#pragma omp barrier
    }
    // Without the barrier a thread copies bins while the others may still be adding to them;
    // the relaxed loads keep that a wrong result rather than undefined behaviour.
#pragma omp for schedule(static) nowait
    for (std::int64_t b = 0; b < bins; ++b) {
      counts[static_cast<std::size_t>(b)] =
          std::atomic_ref<std::uint32_t>(block_counts[static_cast<std::size_t>(b)]).load(std::memory_order_relaxed);
    }
  }
  race_count out = compare_with_reference(counts, reference);
  out.team = team;
  return out;
}

}  // namespace cpu
}  // namespace tally::lab
