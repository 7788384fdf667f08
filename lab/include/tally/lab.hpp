// The teaching lab's API (tally::lab, the target tally_lab in lab/): the contention experiment, one
// model for the CPU and the GPU (tally/lab/contention.hpp), and the data races of `tally race`
// (tally/lab/race.hpp). Not part of the library's public API: neither installed nor exported.
// Host-safe (no CUDA type in here), so the CLI and tests call it from plain C++; the GPU runs are in
// lab/src/lab.cu (kernels in lab_kernels.cuh, launches in lab_dispatch.cuh), or, built without CUDA,
// throw errc::not_supported (lab/src/no_cuda.cpp); everything else works in every build.
#pragma once

#include "tally/lab/contention.hpp"
#include "tally/lab/race.hpp"
