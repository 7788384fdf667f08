// Thread queries for the CPU backend that compile with or without OpenMP (without it, the
// backend runs every strategy on one thread and stays correct).
#pragma once

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

}  // namespace tally::cpu::detail
