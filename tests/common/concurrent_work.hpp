// One host thread's share of the concurrent-caller tests (CPU and GPU): its own seeded inputs and
// the results every operation must give, all made before any thread starts, so that a result
// spoiled by another thread's call (shared state, a shared workspace, a stream mix-up) cannot
// also be the expected one. Host-only and free of the CPU backend: .cu test files include it too.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
#include <vector>

#include "common/reference.hpp"
#include "tally/reduce.hpp"

namespace tally_test {

/// The host threads that call the library at once.
inline constexpr int concurrent_threads = 8;

/**
 * Inputs that differ from thread to thread in size, bin layout and values, so that two threads'
 * results never coincide: int32 samples with outliers over even bins whose step is not whole,
 * float samples over unevenly spaced edges, uint16 samples for bincount, float weights.
 */
struct concurrent_inputs {
  std::vector<std::int32_t> ints;
  std::vector<float> floats;
  std::vector<std::uint16_t> small;
  std::vector<float> weights;
  tally::even_bins int_bins{1, 0.0, 1.0};
  std::vector<double> edges;
  std::int64_t bincount_bins = 0;
  tally::compare_to<std::int32_t> above{tally::comparison::greater, 0};

  // What the calls must give: the oracle's counts, exact integer results, and the bits of the
  // deterministic float sums (the CPU backend's sequential strategy, run before the threads).
  reference_histogram even;
  reference_histogram range;
  reference_histogram bincount;
  std::int64_t int_sum = 0;
  std::uint64_t count_above = 0;
  std::int64_t first_above = 0;
  double deterministic_float_sum = 0;
  std::vector<double> deterministic_weighted;
  std::uint64_t weighted_left_out = 0;
};

/// Thread `thread`'s inputs (about `num_samples` of each) and their results (concurrent_work.cpp:
/// built with the CPU backend, so .cu files need not include it).
concurrent_inputs make_concurrent_inputs(int thread, std::size_t num_samples, std::uint64_t seed);

/// Whether two double arrays hold the same bits (the deterministic sums must, NaN included).
inline bool same_bits(std::span<const double> a, std::span<const double> b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](double x, double y) {
           return std::bit_cast<std::uint64_t>(x) == std::bit_cast<std::uint64_t>(y);
         });
}

}  // namespace tally_test
