// TALLY_TEST_QUICK=1: the switch that shrinks test inputs for runs under compute-sanitizer.
// Host-only and free of tally's CPU backend (no OpenMP), so .cu test files can include it too.
#pragma once

#include <cstdlib>

namespace tally::test {

/// TALLY_TEST_QUICK=1 shrinks the inputs, for runs under compute-sanitizer (10-100x slower).
inline bool quick_mode() {
  const char* value = std::getenv("TALLY_TEST_QUICK");
  return value != nullptr && value[0] == '1';
}

}  // namespace tally::test
