// Seeded, parallel generation of benchmark inputs for each distribution, and of weights.
#include "distributions.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

namespace tally::cli {
namespace {

constexpr std::array<std::pair<distribution, std::string_view>, 7> names{{
    {distribution::uniform, "uniform"},
    {distribution::geometric, "geometric"},
    {distribution::single, "single"},
    {distribution::sorted, "sorted"},
    {distribution::loguniform, "loguniform"},
    {distribution::strided32, "strided32"},
    {distribution::few_hot, "few_hot"},
}};

constexpr std::array<std::pair<edge_layout, std::string_view>, 2> edge_names{{
    {edge_layout::log, "log"},
    {edge_layout::random, "random"},
}};

template <class Value, std::size_t N>
std::string_view name_of(const std::array<std::pair<Value, std::string_view>, N>& table, Value v) {
  for (const auto& [value, name] : table) {
    if (value == v) return name;
  }
  return "unknown";
}

template <class Value, std::size_t N>
std::optional<Value> value_named(const std::array<std::pair<Value, std::string_view>, N>& table, std::string_view name) {
  for (const auto& [value, entry] : table) {
    if (entry == name) return value;
  }
  return std::nullopt;
}

/// few_hot's hot bins: where in the range (as a fraction) and what share of the samples each takes.
/// The fractions are uneven, so that the bins are neither a stride apart nor on one bank.
constexpr std::array<double, 4> hot_fractions{0.13, 0.41, 0.67, 0.89};
constexpr std::array<std::uint64_t, 4> hot_percents{50, 20, 12, 8};  // the other 10%: uniform

std::array<std::int64_t, 4> hot_bins(std::int64_t num_bins) {
  std::array<std::int64_t, 4> hot{};
  for (std::size_t k = 0; k < hot.size(); ++k) {
    std::int64_t bin = static_cast<std::int64_t>(hot_fractions[k] * static_cast<double>(num_bins));
    // Off multiples of 32 and off the last hot bin's neighbours, where the range leaves room: the
    // cause to measure is few hot addresses, not one bank or one cache line.
    while (bin + 1 < num_bins && (bin % 32 == 0 || (k > 0 && bin <= hot[k - 1] + 1))) ++bin;
    hot[k] = std::min(bin, num_bins - 1);
  }
  return hot;
}

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

/// `hot`: few_hot's hot bins for num_bins (hot_bins), found once per input, not per sample.
std::int64_t draw_bin(distribution d, std::int64_t num_bins, const std::array<std::int64_t, 4>& hot,
                      std::int64_t index, std::int64_t size, splitmix64& rng) {
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
    case distribution::strided32: {
      const std::int64_t slots = std::max<std::int64_t>(1, num_bins / 32);
      return uniform_below(rng.next(), slots) * 32;
    }
    case distribution::few_hot: {
      std::uint64_t percent = static_cast<std::uint64_t>(uniform_below(rng.next(), 100));
      for (std::size_t k = 0; k < hot.size(); ++k) {
        if (percent < hot_percents[k]) return hot[k];
        percent -= hot_percents[k];
      }
      return uniform_below(rng.next(), num_bins);
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

std::string_view to_string(distribution d) { return name_of(names, d); }

std::optional<distribution> parse_distribution(std::string_view name) {
  if (name == "bank32") return distribution::strided32;  // the old name, still taken
  return value_named(names, name);
}

std::vector<distribution> standard_distributions() {
  std::vector<distribution> all;
  for (const auto& [value, name] : names) all.push_back(value);
  return all;
}

std::string distribution_names() {
  std::string text;
  for (const auto& [value, name] : names) text += (text.empty() ? "" : ", ") + std::string(name);
  return text;
}

std::string_view to_string(edge_layout layout) { return name_of(edge_names, layout); }

std::optional<edge_layout> parse_edge_layout(std::string_view name) { return value_named(edge_names, name); }

std::vector<double> generate_edges(edge_layout layout, std::int64_t num_bins, std::uint64_t seed) {
  const auto b = static_cast<double>(num_bins);
  std::vector<double> edges{0.0};
  if (layout == edge_layout::log) {
    const double log_span = std::log1p(b);
    for (std::int64_t k = 1; k < num_bins; ++k) {
      const double e = std::expm1(static_cast<double>(k) / b * log_span);
      edges.push_back(std::max(e, std::nextafter(edges.back(), b)));  // strictly increasing, always
    }
  } else {
    // Draws until B - 1 distinct edges strictly inside (0, B); a draw of 0 or a repeat is redrawn.
    splitmix64 rng{(seed ^ 0x2545f4914f6cdd1dull) * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(num_bins)};
    std::vector<double> interior;
    while (static_cast<std::int64_t>(interior.size()) < num_bins - 1) {
      while (static_cast<std::int64_t>(interior.size()) < num_bins - 1) {
        const double e = static_cast<double>(rng.next() >> 11) * 0x1.0p-53 * b;
        if (e > 0.0 && e < b) interior.push_back(e);
      }
      std::sort(interior.begin(), interior.end());
      interior.erase(std::unique(interior.begin(), interior.end()), interior.end());
    }
    edges.insert(edges.end(), interior.begin(), interior.end());
  }
  edges.push_back(b);
  return edges;
}

template <class T>
void generate_samples(distribution d, std::int64_t num_bins, std::uint64_t seed, std::span<T> out) {
  const auto size = static_cast<std::int64_t>(out.size());
  // A fraction of a bin that floats represent exactly next to any bin below 2^20.
  constexpr double fraction_steps = 8.0;
  const std::array<std::int64_t, 4> hot = hot_bins(num_bins);
  fill_in_chunks(size, seed, [&](std::int64_t i, splitmix64& rng) {
    const std::int64_t bin = draw_bin(d, num_bins, hot, i, size, rng);
    if constexpr (is_floating_sample_v<T>) {
      const double fraction = num_bins < (1 << 20) ? static_cast<double>(rng.next() % 8) / fraction_steps : 0.0;
      out[static_cast<std::size_t>(i)] = sample_from<T>(static_cast<double>(bin) + fraction);
    } else {
      out[static_cast<std::size_t>(i)] = static_cast<T>(bin);
    }
  });
}

template <class T>
std::pair<double, double> finite_extremes(std::span<const T> samples) {
  double lower = std::numeric_limits<double>::infinity();
  double upper = -std::numeric_limits<double>::infinity();
  const auto n = static_cast<std::int64_t>(samples.size());
#pragma omp parallel for schedule(static) reduction(min : lower) reduction(max : upper)
  for (std::int64_t i = 0; i < n; ++i) {
    const auto x = static_cast<double>(samples[static_cast<std::size_t>(i)]);
    if (!std::isfinite(x)) continue;
    lower = std::min(lower, x);
    upper = std::max(upper, x);
  }
  return {lower, upper};
}

// Weights come from another stream than the samples' of the same seed: the chunk seeds of seed ^
// this constant.
constexpr std::uint64_t weight_stream = 0x5851f42d4c957f2dull;

void generate_weights(std::uint64_t seed, std::span<float> out) {
  const auto size = static_cast<std::int64_t>(out.size());
  fill_in_chunks(size, seed ^ weight_stream, [&](std::int64_t i, splitmix64& rng) {
    out[static_cast<std::size_t>(i)] = static_cast<float>(rng.next() >> 40) * 0x1.0p-24f;  // 24 bits: exact
  });
}

void generate_weights(std::uint64_t seed, std::span<double> out) {
  const auto size = static_cast<std::int64_t>(out.size());
  fill_in_chunks(size, seed ^ weight_stream, [&](std::int64_t i, splitmix64& rng) {
    const double high = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;  // a multiple of 2^-53
    const double low = static_cast<double>(rng.next() >> 11) * 0x1.0p-106;  // the bits below it
    out[static_cast<std::size_t>(i)] = high + low;  // at most 1 (1 - 2^-53 and low rounding up)
  });
}

template std::pair<double, double> finite_extremes<std::int8_t>(std::span<const std::int8_t>);
template std::pair<double, double> finite_extremes<std::int16_t>(std::span<const std::int16_t>);
template std::pair<double, double> finite_extremes<std::uint16_t>(std::span<const std::uint16_t>);
template std::pair<double, double> finite_extremes<float16>(std::span<const float16>);
template std::pair<double, double> finite_extremes<bfloat16>(std::span<const bfloat16>);
template std::pair<double, double> finite_extremes<std::uint8_t>(std::span<const std::uint8_t>);
template std::pair<double, double> finite_extremes<std::int32_t>(std::span<const std::int32_t>);
template std::pair<double, double> finite_extremes<std::uint32_t>(std::span<const std::uint32_t>);
template std::pair<double, double> finite_extremes<std::int64_t>(std::span<const std::int64_t>);
template std::pair<double, double> finite_extremes<float>(std::span<const float>);
template std::pair<double, double> finite_extremes<double>(std::span<const double>);
template void generate_samples<std::int8_t>(distribution, std::int64_t, std::uint64_t, std::span<std::int8_t>);
template void generate_samples<std::int16_t>(distribution, std::int64_t, std::uint64_t, std::span<std::int16_t>);
template void generate_samples<std::uint16_t>(distribution, std::int64_t, std::uint64_t, std::span<std::uint16_t>);
template void generate_samples<float16>(distribution, std::int64_t, std::uint64_t, std::span<float16>);
template void generate_samples<bfloat16>(distribution, std::int64_t, std::uint64_t, std::span<bfloat16>);
template void generate_samples<std::uint8_t>(distribution, std::int64_t, std::uint64_t, std::span<std::uint8_t>);
template void generate_samples<std::int32_t>(distribution, std::int64_t, std::uint64_t, std::span<std::int32_t>);
template void generate_samples<std::uint32_t>(distribution, std::int64_t, std::uint64_t, std::span<std::uint32_t>);
template void generate_samples<std::int64_t>(distribution, std::int64_t, std::uint64_t, std::span<std::int64_t>);
template void generate_samples<float>(distribution, std::int64_t, std::uint64_t, std::span<float>);
template void generate_samples<double>(distribution, std::int64_t, std::uint64_t, std::span<double>);

}  // namespace tally::cli
