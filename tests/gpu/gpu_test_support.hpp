// Helpers shared by the GPU tests: seeded inputs, the CPU reference (tally's sequential
// strategy, itself checked against a brute-force oracle by the CPU tests) and poisoned buffers.
#pragma once

#include <bit>
#include <cstdlib>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "common/quick_mode.hpp"
#include "tally/cpu.hpp"
#include "tally/gpu.hpp"

namespace tally::test {

inline constexpr std::uint64_t poison_byte = 0xab;

enum class pattern { uniform, single, sorted, bank32, geometric, with_outliers };

inline const char* to_string(pattern p) {
  switch (p) {
    case pattern::uniform: return "uniform";
    case pattern::single: return "single";
    case pattern::sorted: return "sorted";
    case pattern::bank32: return "bank32";
    case pattern::geometric: return "geometric";
    case pattern::with_outliers: return "with_outliers";
  }
  return "?";
}

/// Samples over [lower, upper) with the given pattern; with_outliers adds values outside the range
/// (and NaN / infinities for floating types) so left-out counting is exercised.
template <class T>
std::vector<T> make_samples(pattern p, std::size_t n, double lower, double upper, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<T> out(n);
  const double width = upper - lower;
  for (std::size_t i = 0; i < n; ++i) {
    double value = lower;
    switch (p) {
      case pattern::uniform: value = lower + unit(rng) * width; break;
      case pattern::single: value = lower + 0.5 * width; break;
      case pattern::sorted: value = lower + width * static_cast<double>(i) / static_cast<double>(n); break;
      case pattern::bank32: value = lower + std::floor(unit(rng) * width / 32.0) * 32.0; break;
      case pattern::geometric: {
        const int k = std::countr_zero(rng() | (std::uint64_t{1} << 62));
        value = lower + std::min(width - 1.0, static_cast<double>(k));
        break;
      }
      case pattern::with_outliers: {
        const double u = unit(rng);
        value = lower + (u * 1.4 - 0.2) * width;
        if constexpr (std::is_floating_point_v<T>) {
          if (i % 97 == 5) value = std::numeric_limits<double>::quiet_NaN();
          if (i % 89 == 7) value = std::numeric_limits<double>::infinity();
          if (i % 83 == 3) value = -std::numeric_limits<double>::infinity();
          if (i % 79 == 2) value = upper;  // exactly on the last edge
        }
        break;
      }
    }
    if constexpr (std::is_integral_v<T>) {
      value = std::floor(value);
      if (value < static_cast<double>(std::numeric_limits<T>::lowest())) value = std::numeric_limits<T>::lowest();
      if (value > static_cast<double>(std::numeric_limits<T>::max())) value = std::numeric_limits<T>::max();
    }
    out[i] = static_cast<T>(value);
  }
  return out;
}

template <class T>
std::string type_name() {
  if constexpr (std::is_same_v<T, std::uint8_t>) return "uint8";
  if constexpr (std::is_same_v<T, std::uint16_t>) return "uint16";
  if constexpr (std::is_same_v<T, std::int16_t>) return "int16";
  if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  if constexpr (std::is_same_v<T, std::uint32_t>) return "uint32";
  if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  if constexpr (std::is_same_v<T, float>) return "float";
  if constexpr (std::is_same_v<T, double>) return "double";
  return "?";
}

/// A device copy of `host`.
template <class T>
gpu::device_buffer<T> to_device(const std::vector<T>& host) {
  return gpu::device_buffer<T>(std::span<const T>(host));
}

/// Counts downloaded from the device, after the call.
template <class Counter>
std::vector<Counter> download(const gpu::device_buffer<Counter>& buffer) {
  std::vector<Counter> host(buffer.size());
  buffer.download(host);
  return host;
}

}  // namespace tally::test
