// Inputs for deterministic sums split over ranks, shared by the host emulation of the sharded sum
// (tests/cpu/test_cpu_sharded_sum.cpp) and the GPU tests of tally::nccl (tests/gpu/test_nccl.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace tally::test {

/// Values whose chunks have very different grids: exponents in [-max_exponent, max_exponent],
/// subnormals, and pairs that cancel.
template <class T>
std::vector<T> wide_values(std::size_t n, std::mt19937_64& rng, int max_exponent = 60) {
  std::vector<T> values(n);
  std::uniform_int_distribution<int> exponent(-max_exponent, max_exponent);
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  for (std::size_t i = 0; i < n; ++i) {
    const int kind = static_cast<int>(rng() % 10);
    if (kind == 0) {
      values[i] = std::numeric_limits<T>::denorm_min() * static_cast<T>(rng() % 1000);
    } else if (kind == 1 && i > 0) {
      values[i] = -values[i - 1];
    } else {
      values[i] = static_cast<T>(std::ldexp(mantissa(rng), exponent(rng)));
    }
  }
  return values;
}

/// Small values with fine low bits and, in each chunk of the deterministic sum (512 floats, 256
/// doubles), a giant and its negation: the chunk's grid is the giant's, coarse for the small
/// values, so a piece of the chunk summed on any other grid rounds them differently, and with the
/// giants cancelling the difference reaches the rounded sum.
template <class T>
std::vector<T> cancelling_giants(std::size_t n, std::mt19937_64& rng) {
  const T giant = static_cast<T>(std::ldexp(1.0, sizeof(T) == 4 ? 40 : 80));
  const int fine = sizeof(T) == 4 ? 20 : 45;
  const std::size_t chunk = sizeof(T) == 4 ? 512 : 256;
  std::vector<T> values(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (i % chunk == 7) {
      values[i] = giant;
    } else if (i % chunk == 200) {
      values[i] = -giant;
    } else {
      values[i] = static_cast<T>(1.0 + std::ldexp(static_cast<double>(rng() % (std::uint64_t{1} << fine)), -fine));
    }
  }
  return values;
}

/// The shard sizes that cut points in [0, total], in any order, make of `total` samples: one more
/// than the cuts, empty ones where cuts meet or lie at an end.
template <class Size>
std::vector<Size> sizes_between_cuts(std::vector<Size> cuts, Size total) {
  std::sort(cuts.begin(), cuts.end());
  std::vector<Size> sizes;
  Size last = 0;
  for (const Size cut : cuts) {
    sizes.push_back(cut - last);
    last = cut;
  }
  sizes.push_back(total - last);
  return sizes;
}

}  // namespace tally::test
