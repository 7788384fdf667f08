// What each backend supplies to the lab's contention model (tally/lab/contention.hpp): how to run
// one trial of a case. run_contention (contention.cpp) runs, checks and times the trials of either.
#pragma once

#include <functional>

#include "tally/lab/contention.hpp"

namespace tally::lab {

/** @brief One trial of a case: from zeroed memory, timed, what it left copied back. */
using contention_trial = std::function<contention_outcome()>;

/** @brief The CPU's trials of a valid, applicable CPU case (contention_cpu.cpp). */
contention_trial cpu_contention_trial(const contention_case& c);

/**
 * @brief The GPU's trials of a valid GPU case, on device memory allocated once (lab.cu; a build
 * without CUDA throws errc::not_supported, no_cuda.cpp).
 */
contention_trial gpu_contention_trial(const contention_case& c);

}  // namespace tally::lab
