// The subcommands of the `tally` CLI. Each registers its options on the app and, when run, sets
// the process exit code: 0 success, 1 a result failed verification, 2 a usage or input error,
// 3 a runtime failure (CUDA error, out of memory).
#pragma once

#include <CLI/CLI.hpp>

namespace tally::cli {

inline constexpr int exit_success = 0;
inline constexpr int exit_mismatch = 1;
inline constexpr int exit_usage = 2;
inline constexpr int exit_failure = 3;

/** @brief `tally devices`: the GPU (or "no GPU: CPU backend") and its measured read bandwidth. */
void add_devices_command(CLI::App& app, int& exit_code);
/** @brief `tally bench`: strategies x distributions x bins x sizes, verified, then timed. */
void add_bench_command(CLI::App& app, int& exit_code);
/** @brief `tally hist FILE`: a histogram or bincount of a .npy or raw binary file. */
void add_hist_command(CLI::App& app, int& exit_code);
/** @brief `tally contention`: atomic throughput against the number of distinct addresses, verified. */
void add_contention_command(CLI::App& app, int& exit_code);
/** @brief `tally race`: data races beside their correct variants: expected, actual, lost. */
void add_race_command(CLI::App& app, int& exit_code);
/** @brief `tally lab`: every experiment of the lab, each claim beside the figure measured here. */
void add_lab_command(CLI::App& app, int& exit_code);
/** @brief `tally advise`: measures the histogram strategies on an input and explains which to use. */
void add_advise_command(CLI::App& app, int& exit_code);
/** @brief `tally plot RESULTS -o FILE`: redraws a saved result JSON as a PNG or SVG (matplotlib). */
void add_plot_command(CLI::App& app, int& exit_code);

}  // namespace tally::cli
