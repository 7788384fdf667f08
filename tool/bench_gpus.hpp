// `tally bench --gpus N`: how a histogram's throughput scales over the GPUs of this machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distributions.hpp"
#include "result_files.hpp"

namespace tally::cli {

/** @brief What `tally bench --gpus` measures: even bins over [0, bins), int32 or float32 samples. */
struct gpus_bench_request {
  int gpus = 1;
  std::vector<std::string> types;
  std::vector<distribution> distributions;
  std::vector<std::int64_t> bins;
  std::vector<std::int64_t> sizes;
  int runs = 15;
  int warmup = 3;
  std::uint64_t seed = 0;
};

/** @brief Runs the one-GPU call, then tally::nccl on 1 and on `gpus` GPUs, per case; prints and writes the rows. */
int run_bench_across_gpus(const gpus_bench_request& request, const result_files& files);

}  // namespace tally::cli
