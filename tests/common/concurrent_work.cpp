// The concurrent-caller tests' inputs and expected results (common/concurrent_work.hpp): the
// oracle's counts, and the deterministic sums of the CPU backend's sequential strategy.
#include "common/concurrent_work.hpp"

#include <cmath>
#include <random>

#include "tally/cpu.hpp"

namespace tally_test {

concurrent_inputs make_concurrent_inputs(int thread, std::size_t num_samples, std::uint64_t seed) {
  concurrent_inputs in;
  std::mt19937_64 rng(seed + 7919 * static_cast<std::uint64_t>(thread));
  const std::size_t n = num_samples + 4099 * static_cast<std::size_t>(thread);  // sizes differ too
  const std::int64_t even_bins = 100 + 997 * thread;                              // 100 ... 7079
  const double upper = 1000.0 + 3333.0 * thread;
  in.int_bins = tally::even_bins{even_bins, -10.0, upper};
  std::uniform_int_distribution<std::int32_t> ints(-100, static_cast<std::int32_t>(upper) + 100);
  in.ints.resize(n);
  for (auto& x : in.ints) x = ints(rng);

  // Edges closer together at the low end (as log-spaced ones are), over [1, 2^(6 + thread)).
  const int num_edges = 9 + 60 * thread;
  for (int i = 0; i < num_edges; ++i) {
    in.edges.push_back(std::exp2((6.0 + thread) * i / (num_edges - 1)));
  }
  std::uniform_real_distribution<float> floats(0.0f, static_cast<float>(in.edges.back()) * 1.1f);
  in.floats.resize(n);
  for (auto& x : in.floats) x = floats(rng);

  in.bincount_bins = std::int64_t{256} << (thread % 4);
  std::uniform_int_distribution<int> small(0, static_cast<int>(in.bincount_bins) + 50);
  in.small.resize(n);
  for (auto& x : in.small) x = static_cast<std::uint16_t>(small(rng));

  std::uniform_real_distribution<float> weights(-2.0f, 3.0f);
  in.weights.resize(n);
  for (auto& w : in.weights) w = weights(rng);

  // One match planted at a place of the thread's own; the threshold lies above every other sample.
  in.above = {tally::comparison::greater, static_cast<std::int32_t>(upper) + 100};
  in.first_above = static_cast<std::int64_t>(n / 3 + 1013 * thread);
  in.ints[static_cast<std::size_t>(in.first_above)] = in.above.value + 1 + thread;

  const std::span<const std::int32_t> int_span(in.ints);
  in.even = reference_histogram_even(int_span, in.int_bins);
  in.range = reference_histogram_range(std::span<const float>(in.floats), std::span<const double>(in.edges));
  in.bincount = reference_bincount_counts(std::span<const std::uint16_t>(in.small), in.bincount_bins);
  for (const std::int32_t x : in.ints) {
    in.int_sum += x;
    in.count_above += in.above(x) ? 1 : 0;
  }
  const tally::reduce_options deterministic{tally::strategy::sequential, true};
  in.deterministic_float_sum =
      tally::cpu::reduce(std::span<const float>(in.floats), tally::reduce_op::sum, deterministic).value;
  in.deterministic_weighted.assign(static_cast<std::size_t>(even_bins), 0.0);
  in.weighted_left_out = tally::cpu::histogram_even(int_span, std::span<const float>(in.weights),
                                                    std::span<double>(in.deterministic_weighted), in.int_bins,
                                                    {tally::strategy::sequential, tally::upper_edge::exclusive, true})
                             .left_out;
  return in;
}

}  // namespace tally_test
