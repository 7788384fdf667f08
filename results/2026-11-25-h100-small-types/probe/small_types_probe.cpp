// Probe: 8- and 16-bit samples through tally::gpu::histogram_even/range, 2^28 samples (2^22 distinct, repeated), GPU time, fraction of the read bandwidth.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include "tally/gpu.hpp"
#include "tally/gpu/timing.hpp"
using namespace tally;
template <class T> T from_bits(std::uint32_t b) { T v; auto w = static_cast<std::conditional_t<sizeof(T)==1,std::uint8_t,std::uint16_t>>(b); std::memcpy(&v,&w,sizeof v); return v; }
template <class T> T make(double x) { if constexpr (is_half_float_v<T>) return T::nearest(x); else return static_cast<T>(std::clamp(std::floor(x), (double)std::numeric_limits<T>::lowest(), (double)std::numeric_limits<T>::max())); }
double bw;
template <class T, class Run>
void time_case(const char* type, const char* what, std::size_t n, Run run) {
  (void)gpu::time_runs(run, 20);  // warm-up: clocks up, tables and workspace in place
  auto t = gpu::time_runs(run, 9);
  std::sort(t.ms.begin(), t.ms.end());
  const double ms = t.ms[t.ms.size()/2];
  std::printf("%s,%s,%.4f,%.3f\n", type, what, ms, n * sizeof(T) / (ms * 1e-3) / bw);
}
template <class T>
void cases(const char* type, double lo, double hi, bool full_range) {
  const std::size_t n = std::size_t{1} << 28;
  std::vector<T> host(n);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(lo, hi);
  const std::size_t distinct = std::size_t{1} << 22;
  for (std::size_t i = 0; i < distinct; ++i) host[i] = make<T>(u(rng));
  for (std::size_t i = distinct; i < n; ++i) host[i] = host[i % distinct];
  gpu::device_buffer<T> d{std::span<const T>(host)};
  gpu::device_buffer<std::uint32_t> counts(70000);
  gpu::workspace ws;
  for (std::int64_t bins : {256, 1024, 4096, 16384}) {
    for (int kind = 0; kind < 2; ++kind) {
      // kind 0: exact-ish (integer step / power-of-two step), kind 1: general range
      even_bins b = kind == 0 ? even_bins{bins, lo, lo + std::ldexp(1.0, (int)std::ceil(std::log2(hi - lo)))} : even_bins{bins, lo, hi * 0.999 + 0.1};
      for (strategy s : {strategy::automatic, strategy::cub}) {
        if (s == strategy::cub && !std::is_same_v<T, std::uint16_t>) continue;
        char what[128]; std::snprintf(what, sizeof what, "%s bins=%lld [%g,%g) %s", kind ? "general" : "exact", (long long)bins, b.lower, b.upper, std::string(to_string(s)).c_str());
        try {
          time_case<T>(type, what, n, [&](gpu::stream_t st) { gpu::histogram_even_async(d.const_span(), counts.span().first(bins), b, ws, {s}, st); });
        } catch (const std::exception& e) { std::printf("%s,%s,error %s\n", type, what, e.what()); }
      }
    }
  }
  if (full_range) {
    even_bins b{65536, (double)std::numeric_limits<T>::lowest(), (double)std::numeric_limits<T>::lowest() + 65536};
    for (strategy s : {strategy::automatic, strategy::packed16, strategy::cub}) {
      char what[128]; std::snprintf(what, sizeof what, "full 65536 %s", std::string(to_string(s)).c_str());
      try { time_case<T>(type, what, n, [&](gpu::stream_t st) { gpu::histogram_even_async(d.const_span(), counts.span().first(65536), b, ws, {s}, st); }); }
      catch (const std::exception& e) { std::printf("%s,%s,error %s\n", type, what, e.what()); }
    }
  }
  std::vector<double> edges; for (int i = 0; i <= 1024; ++i) edges.push_back(lo + (hi - lo) * std::pow(i / 1024.0, 2.0));
  time_case<T>(type, "range 1024 squares", n, [&](gpu::stream_t st) { gpu::histogram_range_async(d.const_span(), counts.span().first(1024), std::span<const double>(edges), ws, {}, st); });
}
int main() {
  bw = gpu::measure_read_bandwidth(std::size_t{1} << 31, 9);
  std::printf("# %s read bandwidth %.1f GB/s\n", gpu::describe_device().name.c_str(), bw / 1e9);
  cases<std::int8_t>("int8", -128, 128, false);
  cases<std::int16_t>("int16", -32768, 32768, true);
  cases<std::uint16_t>("uint16", 0, 65536, true);
  cases<float16>("float16", -8, 8, false);
  cases<bfloat16>("bfloat16", -8, 8, false);
  {  // uniform data in [0, 1000) for float16 over [0,1000) 4096 bins: what users type
  }
}
