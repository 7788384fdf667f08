// The `tally` command-line tool: parses the command line (CLI11) and maps failures to exit
// codes. Host-only; the GPU backend is reached through tally/gpu.hpp.
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "tally/config.hpp"
#include "tally/error.hpp"
#include "tally/gpu.hpp"

int main(int argc, char** argv) {
  CLI::App app{"tally: histograms, counts and reductions on GPUs (and CPUs), measured against the read bandwidth"};
  app.name("tally");
  app.set_version_flag("--version",
                       std::string("tally ") + tally::version +
                           (tally::gpu::built_with_cuda() ? " (GPU backend: CUDA)" : " (CPU backend only)"));
  app.require_subcommand(1);
  int exit_code = tally::cli::exit_success;
  tally::cli::add_devices_command(app, exit_code);
  tally::cli::add_bench_command(app, exit_code);
  tally::cli::add_hist_command(app, exit_code);
  tally::cli::add_contention_command(app, exit_code);
  tally::cli::add_race_command(app, exit_code);
  tally::cli::add_lab_command(app, exit_code);
  tally::cli::add_advise_command(app, exit_code);
  tally::cli::add_plot_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? tally::cli::exit_success : tally::cli::exit_usage;
  } catch (const tally::error& e) {
    std::fprintf(stderr, "tally: %s\n", e.what());
    const bool usage = e.code() == tally::errc::invalid_argument || e.code() == tally::errc::not_supported ||
                       e.code() == tally::errc::io_error;
    return usage ? tally::cli::exit_usage : tally::cli::exit_failure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tally: %s\n", e.what());
    return tally::cli::exit_failure;
  }
  return exit_code;
}
