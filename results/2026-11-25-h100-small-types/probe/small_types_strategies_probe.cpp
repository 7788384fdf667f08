// Probe: every shared-memory strategy for uint16 and float16 samples at 64 to 4096 bins, exact and general ranges.
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
template <class T> T make(double x) { if constexpr (is_half_float_v<T>) return T::nearest(x); else return static_cast<T>(std::clamp(std::floor(x), (double)std::numeric_limits<T>::lowest(), (double)std::numeric_limits<T>::max())); }
double bw;
template <class T>
void cases(const char* type, double lo, double hi) {
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
  for (std::int64_t bins : {64, 256, 512, 1024, 4096}) {
    for (int kind = 0; kind < 2; ++kind) {
      even_bins b = kind == 0 ? even_bins{bins, lo, lo + (double)bins * (is_half_float_v<T> ? 1.0 / 16 : 16.0)} : even_bins{bins, lo, hi * 0.999 + 0.1};
      for (strategy s : {strategy::automatic, strategy::shared_atomic, strategy::replicated, strategy::warp_aggregated, strategy::packed16}) {
        char what[160]; std::snprintf(what, sizeof what, "%s,%lld,%g,%g,%s", kind ? "general" : "exact", (long long)bins, b.lower, b.upper, std::string(to_string(s)).c_str());
        try {
          auto run = [&](gpu::stream_t st) { gpu::histogram_even_async(d.const_span(), counts.span().first(bins), b, ws, {s}, st); };
          (void)gpu::time_runs(run, 20);
          auto t = gpu::time_runs(run, 9);
          std::sort(t.ms.begin(), t.ms.end());
          const double ms = t.ms[t.ms.size() / 2];
          std::printf("%s,%s,%.4f,%.3f\n", type, what, ms, n * sizeof(T) / (ms * 1e-3) / bw);
        } catch (const std::exception& e) { std::printf("%s,%s,error\n", type, what); }
      }
    }
  }
}
int main() {
  bw = gpu::measure_read_bandwidth(std::size_t{1} << 31, 9);
  std::printf("# %s read bandwidth %.1f GB/s\n", gpu::describe_device().name.c_str(), bw / 1e9);
  std::printf("type,kind,bins,lower,upper,strategy,ms,read_fraction\n");
  cases<std::uint16_t>("uint16", 0, 65536);
  cases<float16>("float16", -8, 8);
}
