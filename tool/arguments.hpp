// Parsing of the CLI's option values that CLI11 does not parse itself (counts such as 2^28,
// strategy names), the choice of backend behind `--backend auto|gpu|cpu`, and the `--runs` / `--warmup` / `--timing`
// options of the commands that time strategies (bench, advise).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tally/gpu/timing.hpp"
#include "tally/strategy.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace tally::cli {

/**
 * @brief "2^28", "1e6", "65536" -> a count >= 0; anything else throws errc::invalid_argument
 * naming `command` and `option`.
 */
std::int64_t parse_count(const std::string& text, std::string_view command, std::string_view option);

/**
 * @brief The strategy `name` names (or a name it had before), else throws errc::invalid_argument
 * naming `command` and `option`: for `racy`, that the naive racy histogram is no strategy but the
 * lab's (`tally race`); for any other name, that it is not a strategy, followed by `choices`.
 */
strategy parse_strategy_option(const std::string& name, std::string_view command, std::string_view option,
                               std::string_view choices);

/** @brief The histogram strategies `where` implements (automatic aside), comma-separated. */
std::string strategy_list(backend where);

/**
 * @brief The backend `--backend` names: `auto` is the GPU when one is present, else the CPU.
 * `--backend gpu` without a usable GPU throws errc::not_supported naming `--backend` and saying
 * why (no GPU present, or a build without CUDA).
 */
backend resolve_backend(const std::string& backend_name, std::string_view command);

/**
 * @brief `--runs`, `--warmup` and `--timing` of a command that times strategies. Left out, the
 * counts take the backend's default (15 timed runs after 3 warm-ups on a GPU, 5 after 1 on CPUs);
 * given, their value, so `--warmup 0` means none. `--timing` says how a GPU run is timed
 * (gpu::run_timing): `gpu` (the default) or `with_launch`.
 */
struct timing_options {
  int runs = 0;
  int warmup = 0;
  std::string timing{gpu::to_string(gpu::run_timing::gpu)};
  CLI::Option* runs_option = nullptr;    ///< set by add_to: whether --runs was given
  CLI::Option* warmup_option = nullptr;  ///< set by add_to: whether --warmup was given

  void add_to(CLI::App& command, const std::string& runs_help, const std::string& warmup_help);
  /// Throws errc::invalid_argument naming the flag: a given --runs below 1, --warmup below 0, or a
  /// --timing other than gpu or with_launch.
  void check(std::string_view command) const;
  int runs_or_default(bool on_gpu) const;
  int warmup_or_default(bool on_gpu) const;
  gpu::run_timing gpu_timing() const;
};

}  // namespace tally::cli
