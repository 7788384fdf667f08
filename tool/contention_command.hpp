// The options of `tally contention`, shared by its CPU sweep (contention.cpp) and its GPU sweep
// (contention_gpu.cpp), which parse, run and report the cases of their backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tally::cli {

struct contention_config {
  std::string backend_name = "auto";
  std::vector<std::string> addresses{"1", "4", "16", "64", "256", "1024", "4096", "16384", "65536"};
  std::vector<std::string> ops{"add", "cas", "max", "exch"};
  std::vector<std::string> methods{"atomic", "critical", "privatized"};  ///< CPU only
  std::vector<std::string> memory{"global", "shared", "global_private"};  ///< GPU only
  std::vector<std::string> scopes{"block", "device", "system"};          ///< GPU only
  std::vector<std::string> aggregation{"none", "warp"};                  ///< GPU only
  std::int64_t threads = -1;      ///< -1: the backend's default (CPU: its thread count; GPU: 1024 per SM)
  std::string ops_per_thread;     ///< empty: the backend's default (CPU 2^16, GPU 32)
  int block_threads = 256;        ///< GPU only
  double max_cas_contenders = 256;  ///< GPU only: cas rows with more contenders per word are skipped
  int runs = 5;
  int warmup = 1;
  std::string csv;
  std::string json;
  std::string plot;  ///< --plot: a .png or .svg drawn from the JSON after the run
  bool quiet = false;
  std::vector<std::string> cpu_only_given;  ///< the CPU-only options named on the command line
  std::vector<std::string> gpu_only_given;  ///< the GPU-only options named on the command line
};

/** @brief The GPU sweep of `tally contention` (the caller resolved --backend to the GPU); the exit code. */
int run_gpu_contention(const contention_config& cfg);

}  // namespace tally::cli
