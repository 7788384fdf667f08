// Seeded, parallel generation of benchmark inputs for each distribution, and of weights.
#include "distributions.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>

namespace tally::cli {
namespace {

constexpr std::array<std::pair<distribution, std::string_view>, 6> names{{
    {distribution::uniform, "uniform"},
    {distribution::geometric, "geometric"},
    {distribution::single, "single"},
    {distribution::sorted, "sorted"},
    {distribution::loguniform, "loguniform"},
    {distribution::bank32, "bank32"},
}};

// splitmix64: a fast, well-mixed generator; one state per chunk keeps generation parallel.
struct splitmix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

std::int64_t uniform_below(std::uint64_t r, std::int64_t bound) {
  return static_cast<std::int64_t>((static_cast<unsigned __int128>(r) * static_cast<std::uint64_t>(bound)) >> 64);
}

std::int64_t draw_bin(distribution d, std::int64_t num_bins, std::int64_t index, std::int64_t size,
                      splitmix64& rng) {
  switch (d) {
    case distribution::uniform: return uniform_below(rng.next(), num_bins);
    case distribution::geometric: {
      const std::uint64_t r = rng.next();
      const std::int64_t k = r == 0 ? 63 : __builtin_ctzll(r);
      return std::min<std::int64_t>(k, num_bins - 1);
    }
    case distribution::single: return num_bins / 2;
    case distribution::sorted:
      return static_cast<std::int64_t>((static_cast<unsigned __int128>(index) * num_bins) / size);
    case distribution::loguniform: {
      const double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
      const auto bin = static_cast<std::int64_t>(std::exp(u * std::log(static_cast<double>(num_bins)))) - 1;
      return std::clamp<std::int64_t>(bin, 0, num_bins - 1);
    }
    case distribution::bank32: {
      const std::int64_t slots = std::max<std::int64_t>(1, num_bins / 32);
      return uniform_below(rng.next(), slots) * 32;
    }
  }
  return 0;
}

/// Calls `fill(i, rng)` for every index of a buffer of `size`, in parallel chunks, each chunk with
/// its own generator seeded from `seed` and the chunk: the same values on any thread count.
template <class Fill>
void fill_in_chunks(std::int64_t size, std::uint64_t seed, const Fill& fill) {
  constexpr std::int64_t chunk = 1 << 16;
  const std::int64_t chunks = (size + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    splitmix64 rng{seed * 0x632be59bd9b4e019ull + static_cast<std::uint64_t>(c)};
    const std::int64_t end = std::min(size, (c + 1) * chunk);
    for (std::int64_t i = c * chunk; i < end; ++i) fill(i, rng);
  }
}

}  // namespace

std::string_view to_string(distribution d) {
  for (const auto& [value, name] : names) {
    if (value == d) return name;
  }
  return "unknown";
}

std::optional<distribution> parse_distribution(std::string_view name) {
  for (const auto& [value, entry] : names) {
    if (entry == name) return value;
  }
  return std::nullopt;
}

std::vector<distribution> standard_distributions() {
  return {distribution::uniform, distribution::geometric, distribution::single, distribution::sorted,
          distribution::loguniform};
}

template <class T>
void generate_samples(distribution d, std::int64_t num_bins, std::uint64_t seed, std::span<T> out) {
  const auto size = static_cast<std::int64_t>(out.size());
  // A fraction of a bin that floats represent exactly next to any bin below 2^20.
  constexpr double fraction_steps = 8.0;
  fill_in_chunks(size, seed, [&](std::int64_t i, splitmix64& rng) {
    const std::int64_t bin = draw_bin(d, num_bins, i, size, rng);
    if constexpr (std::is_floating_point_v<T>) {
      const double fraction = num_bins < (1 << 20) ? static_cast<double>(rng.next() % 8) / fraction_steps : 0.0;
      out[static_cast<std::size_t>(i)] = static_cast<T>(static_cast<double>(bin) + fraction);
    } else {
      out[static_cast<std::size_t>(i)] = static_cast<T>(bin);
    }
  });
}

void generate_weights(std::uint64_t seed, std::span<float> out) {
  // Another stream than the samples' of the same seed: the chunk seeds of seed ^ this constant.
  const auto size = static_cast<std::int64_t>(out.size());
  fill_in_chunks(size, seed ^ 0x5851f42d4c957f2dull, [&](std::int64_t i, splitmix64& rng) {
    out[static_cast<std::size_t>(i)] = static_cast<float>(rng.next() >> 40) * 0x1.0p-24f;  // 24 bits: exact
  });
}

template void generate_samples<std::uint8_t>(distribution, std::int64_t, std::uint64_t, std::span<std::uint8_t>);
template void generate_samples<std::int32_t>(distribution, std::int64_t, std::uint64_t, std::span<std::int32_t>);
template void generate_samples<std::uint32_t>(distribution, std::int64_t, std::uint64_t, std::span<std::uint32_t>);
template void generate_samples<std::int64_t>(distribution, std::int64_t, std::uint64_t, std::span<std::int64_t>);
template void generate_samples<float>(distribution, std::int64_t, std::uint64_t, std::span<float>);
template void generate_samples<double>(distribution, std::int64_t, std::uint64_t, std::span<double>);

}  // namespace tally::cli
