// The `tally` command-line tool: parses the command line (CLI11) and maps failures to exit
// codes. Host-only; the GPU backend is reached through tally/gpu.hpp.
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "tally/config.hpp"
#include "tally/error.hpp"
#include "tally/gpu.hpp"
#include "usage.hpp"

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
  app.footer("Run 'tally COMMAND --help' for a command's options. To begin: tally hist data.npy (a histogram of a "
             ".npy file, as numpy.histogram counts it).");
  // As git does: a bare `tally` lists the commands, and is a usage error (it did nothing).
  if (argc <= 1) {
    std::fputs(app.help().c_str(), stdout);
    return tally::cli::exit_usage;
  }
  // Every failure is reported as `tally <command>: ...`, whoever raised it.
  const auto report = [&app](const char* message) {
    std::fprintf(stderr, "%s\n", tally::cli::labelled(tally::cli::command_label(app), message).c_str());
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "%s\n", tally::cli::parse_error_message(app, e).c_str());
    return tally::cli::exit_usage;
  } catch (const tally::error& e) {
    report(e.what());
    const bool usage = e.code() == tally::errc::invalid_argument || e.code() == tally::errc::not_supported ||
                       e.code() == tally::errc::io_error;
    return usage ? tally::cli::exit_usage : tally::cli::exit_failure;
  } catch (const std::bad_alloc&) {
    report("out of host memory (std::bad_alloc)");
    return tally::cli::exit_failure;
  } catch (const std::exception& e) {
    report(e.what());
    return tally::cli::exit_failure;
  }
  return exit_code;
}
