// The race experiments of the lab (tally::lab; `tally race` and `tally lab`): data races and lost
// updates, each beside its correct variant, on the CPU (lab::cpu, lab/src/race_cpu.cpp) and the
// GPU (lab::gpu, lab/src/lab.cu). A racy update is a relaxed atomic load followed by a relaxed
// atomic store of the value plus one: the read-modify-write split in two, exactly the race of
// `counter[0] = counter[0] + 1`, but defined in C++ (a plain `++` from two threads would be a data
// race, which the compiler may assume never happens). The GPU's naive histogram alone is the plain
// code, through a volatile pointer. Each correct variant must be exact; a racy one's losses are
// reported as a wrong result and never as a measurement.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tally::lab {

/** @brief What a race experiment counted against what it should have. */
struct race_count {
  std::uint64_t expected = 0;   ///< updates made: the right total
  std::uint64_t actual = 0;     ///< what memory holds in total
  std::int64_t wrong_bins = 0;  ///< histograms: bins that differ from the reference
  std::int64_t over_bins = 0;   ///< histograms: bins above the reference (no lost update can do that)
  int team = 0;                 ///< CPU: the OpenMP threads that ran (0 on the GPU)
};

/** @brief The sequential histogram of `samples` (each in [0, num_bins)): the reference. */
std::vector<std::uint64_t> reference_histogram(std::span<const std::int32_t> samples, std::int64_t num_bins);

/** @brief A histogram's `counts` against the exact `reference` (as many bins): totals, bins wrong, bins above. */
race_count compare_with_reference(std::span<const std::uint32_t> counts, std::span<const std::uint64_t> reference);

namespace cpu {

/**
 * @brief The racy counter (lost updates): `threads` logical threads, spread over the OpenMP team,
 * each add 1 to one counter, racy (load, store) or by fetch_add.
 */
race_count count_with_threads(std::int64_t threads, bool racy);

/**
 * @brief The naive histogram: every sample adds 1 to bin `samples[i]` (each in
 * [0, reference.size())), racy or by fetch_add, over the OpenMP team; compared bin by bin with
 * `reference`.
 */
race_count naive_histogram(std::span<const std::int32_t> samples, std::span<const std::uint64_t> reference,
                           bool racy);

/**
 * @brief The block histogram with the team as the block: every thread adds its share of the
 * samples to one shared histogram (fetch_add), then each copies its share of the bins to the
 * output. With `barrier`, a barrier separates the two phases (the fix); without it (the bug), a
 * thread may copy a bin that others are still adding to.
 */
race_count block_histogram(std::span<const std::int32_t> samples, std::span<const std::uint64_t> reference,
                           bool barrier);

}  // namespace cpu

// The GPU experiments: built without CUDA, each throws errc::not_supported (lab/src/no_cuda.cpp).
namespace gpu {

/**
 * @brief The racy counter (lost updates): `threads` GPU threads (blocks of 256) each add 1 to one
 * zeroed counter in global memory, once. Racy: a relaxed atomic load, then a relaxed atomic store
 * of the value + 1 (the split read-modify-write of `counter[0] = counter[0] + 1`, without undefined
 * behaviour, and which the compiler may not fold); else a device-scope fetch_add.
 */
race_count count_with_threads(std::int64_t threads, bool racy);

/**
 * @brief The naive histogram: one sample per thread (blocks of 256), each adding 1 to its bin of a
 * zeroed histogram in global memory with no synchronization, `counts[bin] = counts[bin] + 1`
 * through a volatile pointer (every increment a real load and store, which the compiler may not
 * merge): concurrent increments of one bin lose updates. The fix is one atomic per sample
 * (tally::gpu::bincount with strategy::atomic). `samples` (host memory) must lie in [0, bins);
 * `reference` is their exact histogram. Returns what it counted against the reference.
 */
race_count naive_histogram(std::span<const std::int32_t> samples, std::span<const std::uint64_t> reference);

/**
 * @brief The block histogram: one sample per thread (blocks of 256), each block counts its samples
 * in a shared-memory histogram (block-scope fetch_add), then its threads add the block's bins to
 * the global histogram (device-scope fetch_add). With `barrier`, __syncthreads() separates the two
 * phases (the fix); without it (the bug) a thread may add a bin that other warps of its block are
 * still counting into. `samples` (host memory) must lie in [0, bins), at most 12288 bins (48 KiB of
 * shared memory); `reference` is their exact histogram. Returns the comparison.
 */
race_count block_histogram(std::span<const std::int32_t> samples, std::span<const std::uint64_t> reference,
                           bool barrier);

}  // namespace gpu

}  // namespace tally::lab
