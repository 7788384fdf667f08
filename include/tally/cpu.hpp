// The CPU backend (OpenMP): the same operations and strategy names as the GPU backend, in host
// memory. Include this from any C++20 translation unit; link tally::tally for OpenMP.
#pragma once

#include "tally/cpu/histogram.hpp"
#include "tally/cpu/reduce.hpp"
