// Thread queries for the CPU backend that compile with or without OpenMP (without it, the
// backend runs every strategy on one thread and stays correct), and when threads pay at all.
#pragma once

#include <cstdint>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace tally::cpu::detail {

inline int max_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

inline int thread_num() {
#if defined(_OPENMP)
  return omp_get_thread_num();
#else
  return 0;
#endif
}

/// Threads of the current team (1 outside a parallel region, and without OpenMP).
inline int team_size() {
#if defined(_OPENMP)
  return omp_get_num_threads();
#else
  return 1;
#endif
}

/// Below this many samples, starting threads costs more than it saves.
inline constexpr std::uint64_t parallel_threshold = 1 << 16;

/// Whether threads pay for themselves: more than one, and an input large enough.
inline bool threads_pay(std::uint64_t num_samples) {
  return max_threads() > 1 && num_samples >= parallel_threshold;
}

}  // namespace tally::cpu::detail
