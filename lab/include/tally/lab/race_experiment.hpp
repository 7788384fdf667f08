// The CPU side of `tally race`: data races and lost updates, reproduced without undefined behaviour.
// A racy update is a relaxed atomic load followed by a relaxed atomic store of the value plus one:
// the read-modify-write split in two, exactly the race of `counter[0] = counter[0] + 1` on a GPU,
// but defined in C++ (a plain `++` from two threads would be a data race, which the compiler may
// assume never happens). Each experiment has its correct variant, which must be exact, and its
// racy one, whose losses are reported as a wrong result and never as a measurement.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tally::cli {

/** @brief What a run counted against what it should have. */
struct race_outcome {
  std::uint64_t expected = 0;  ///< updates made (the right total)
  std::uint64_t actual = 0;    ///< what memory holds in total
  std::int64_t wrong_bins = 0;  ///< histograms: bins that differ from the reference
  std::int64_t over_bins = 0;   ///< histograms: bins above the reference (no race can do that)
  int team = 0;                 ///< OpenMP threads that ran
};

/**
 * @brief The racy counter (lost updates): `threads` logical threads, spread over the
 * OpenMP team, each add 1 to one counter, racy (load, store) or by fetch_add.
 */
race_outcome count_with_threads(std::int64_t threads, bool racy);

/**
 * @brief The naive histogram: every sample adds 1 to bin `samples[i]` (each in
 * [0, reference.size())), racy or by fetch_add, over the OpenMP team; compared bin by bin with
 * `reference`.
 */
race_outcome histogram_with_threads(std::span<const std::int32_t> samples, std::span<const std::uint64_t> reference,
                                    bool racy);

/**
 * @brief The block histogram with the team as the block: every thread adds its share of
 * the samples to one shared histogram (fetch_add), then each copies its share of the bins to the
 * output. With `barrier`, a barrier separates the two phases (the fix); without it (the bug), a
 * thread may copy a bin that others are still adding to.
 */
race_outcome block_histogram_with_threads(std::span<const std::int32_t> samples,
                                          std::span<const std::uint64_t> reference, bool barrier);

/** @brief The sequential histogram of `samples` over `num_bins` bins: the reference. */
std::vector<std::uint64_t> reference_histogram(std::span<const std::int32_t> samples, std::int64_t num_bins);

}  // namespace tally::cli
