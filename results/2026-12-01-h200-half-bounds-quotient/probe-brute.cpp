// Host brute force (a probe, not built by the project): rational_step_bin_mapper, both forms, against the test oracle on random layouts with bounds in parts of one.
// random layouts with bounds in parts of one.
#include <tally/bins.hpp>
#include "common/reference.hpp"
#include <cstdio>
#include <random>
template <class T>
void run(std::uint64_t seed, int layouts) {
  std::mt19937_64 rng(seed);
  using L = std::numeric_limits<T>;
  const double lo = (double)L::lowest(), hi = (double)L::max();
  long taken = 0, checked = 0, bad = 0;
  for (int t = 0; t < layouts; ++t) {
    const int k = rng() % 9;  // q = 2^k
    const double q = std::ldexp(1.0, k);
    const std::int64_t n = (std::int64_t)std::exp(std::uniform_real_distribution<double>(0, std::log(70000.0))(rng));
    const double maxw = std::ldexp(1.0, 31 - k);
    double w = std::floor(std::exp(std::uniform_real_distribution<double>(0, std::log(maxw))(rng)) * q) / q;
    if (rng() % 4 == 0) w = 1.0;
    if (w <= 0) w = 1.0 / q;
    double lower;
    switch (rng() % 4) {
      case 0: lower = lo - 1.0 + std::floor(std::uniform_real_distribution<double>(0, 3)(rng) * q) / q; break;
      case 1: lower = hi - w + std::floor(std::uniform_real_distribution<double>(-2, 2)(rng) * q) / q; break;
      default: lower = std::floor(std::uniform_real_distribution<double>(lo, hi - w)(rng) * q) / q;
    }
    const double upper = lower + w;
    if (!(upper > lower)) continue;
    for (auto mode : {tally::upper_edge::exclusive, tally::upper_edge::inclusive}) {
      const tally::even_bins bins{n, lower, upper};
      tally::even_bin_mapper<T> m(bins, mode);
      if (m.shortcut() != tally::even_shortcut::rational_step) continue;
      ++taken;
      const auto r = m.rational_step_in_parts_mapper();
      const bool whole = !m.rational_step_in_parts();
      const auto whole_form = m.rational_step_in_parts() ? decltype(m.rational_step_mapper()){} : m.rational_step_mapper();
      tally_test::reference_even<T> oracle(bins, mode);
      auto test = [&](double v) {
        if (!(v >= lo && v <= hi)) return;
        const T x = (T)v;
        const auto want = oracle.bin(x);
        const int s = r.slot(x);
        const std::int64_t got = s == n ? -1 : s;
        ++checked;
        const int ws = whole_form.slot(x);
        if (got != want || r(x) != want || (whole && (ws == n ? -1 : ws) != want)) {
          if (++bad < 20) printf("MISMATCH n=%ld [%.17g, %.17g) mode=%d x=%.17g got %ld want %ld\n", (long)n, lower, upper, (int)mode, v, (long)got, (long)want);
        }
      };
      const auto& e = oracle.edges();
      const std::size_t stride = e.size() > 20000 ? e.size() / 20000 : 1;
      for (std::size_t i = 0; i < e.size(); i += stride)
        for (double d = -2; d <= 2; ++d) test(std::floor((double)e[i]) + d);
      for (double d = -3; d <= 3; ++d) { test(lo + d); test(hi + d); test(std::floor(lower) + d); test(std::floor(upper) + d); }
      for (int i = 0; i < 2000; ++i) test(std::floor(std::uniform_real_distribution<double>(lower - w, upper + w)(rng)));
    }
  }
  printf("%s: layouts taking the quotient %ld, samples %ld, mismatches %ld\n", sizeof(T) == 4 && L::is_signed ? "int32" : "uint32", taken, checked, bad);
}
int main(int argc, char** argv) {
  const int layouts = argc > 1 ? atoi(argv[1]) : 2000;
  run<std::int32_t>(1, layouts);
  run<std::uint32_t>(2, layouts);
}
