// Thread queries for the CPU backend that compile with or without OpenMP (without it, the
// backend runs every strategy on one thread and stays correct), when threads pay at all, and where
// every automatic choice starts.
#pragma once

#include <cstdint>
#include <optional>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "tally/cpu/tuning.hpp"
#include "tally/strategy.hpp"

namespace tally::cpu::detail {

// max_threads: the threads a parallel region starts; thread_num: the calling thread's number in
// its team; team_size: the threads of the current team (1 outside a parallel region). Without
// OpenMP every strategy runs on one thread.
#if defined(_OPENMP)
inline int max_threads() { return omp_get_max_threads(); }
inline int thread_num() { return omp_get_thread_num(); }
inline int team_size() { return omp_get_num_threads(); }
#else
inline int max_threads() { return 1; }
inline int thread_num() { return 0; }
inline int team_size() { return 1; }
#endif

/// Whether threads pay for themselves: more than one, and an input large enough.
inline bool threads_pay(std::uint64_t num_samples) {
  return max_threads() > 1 && num_samples >= parallel_threshold;
}

/// Where every CPU operation's choice starts: the strategy asked for, else one thread when threads
/// do not pay; nothing when `automatic` has more to weigh.
inline std::optional<choice> asked_or_sequential(strategy requested, std::uint64_t num_samples) {
  if (requested != strategy::automatic) return choice{requested, "asked for"};
  if (!threads_pay(num_samples)) {
    return choice{strategy::sequential, "one thread or a small input: threads would cost more than they save"};
  }
  return std::nullopt;
}

}  // namespace tally::cpu::detail
