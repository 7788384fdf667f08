// An outside program built against an installed tally: counts a small array with the CPU
// backend, checks every count, links one symbol of the compiled library, and prints the version.
// Exits non-zero on any wrong result.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include <tally/config.hpp>
#include <tally/cpu.hpp>
#include <tally/gpu.hpp>

int main() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Bins [0,1) [1,2) [2,3) [3,4); -1, 4 (the upper bound, exclusive) and NaN are left out.
  const std::vector<double> samples = {0.5, 1.5, 1.25, 2.5, 2.0, 2.75, 3.5, -1.0, 4.0, nan};
  const std::uint64_t expected[] = {1, 2, 3, 1};
  std::vector<std::uint64_t> counts(4, 0xDEADBEEF);
  const tally::histogram_result result =
      tally::cpu::histogram_even<double, std::uint64_t>(samples, counts, tally::even_bins{4, 0.0, 4.0});

  int failures = 0;
  for (std::size_t bin = 0; bin < counts.size(); ++bin) {
    if (counts[bin] != expected[bin]) {
      std::fprintf(stderr, "bin %zu: counted %llu, expected %llu\n", bin, static_cast<unsigned long long>(counts[bin]),
                   static_cast<unsigned long long>(expected[bin]));
      ++failures;
    }
  }
  if (result.left_out != 3) {
    std::fprintf(stderr, "left out %llu samples, expected 3\n", static_cast<unsigned long long>(result.left_out));
    ++failures;
  }
  if (std::strcmp(tally::version, TALLY_PACKAGE_VERSION) != 0) {
    std::fprintf(stderr, "headers say tally %s, the package says %s\n", tally::version, TALLY_PACKAGE_VERSION);
    ++failures;
  }
  // A symbol defined in the installed library archive, not in a header.
  const bool with_cuda = tally::gpu::built_with_cuda();

  std::printf("tally %s (GPU backend %s): histogram_even counted 1 2 3 1, left out %llu, strategy %.*s\n",
              tally::version, with_cuda ? "built" : "not built", static_cast<unsigned long long>(result.left_out),
              static_cast<int>(tally::to_string(result.chose.used).size()), tally::to_string(result.chose.used).data());
  return failures == 0 ? 0 : 1;
}
