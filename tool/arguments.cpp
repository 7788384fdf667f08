// Parsing of counts written as 65536, 1e6 or 2^28 in the CLI's options, of strategy names,
// --backend, and --runs / --warmup / --timing.
#include "arguments.hpp"

#include <cmath>
#include <exception>

#include <CLI/CLI.hpp>

#include "tally/error.hpp"
#include "tally/gpu.hpp"

namespace tally::cli {

std::int64_t parse_count(const std::string& text, std::string_view command, std::string_view option) {
  try {
    std::size_t used = 0;
    if (const auto caret = text.find('^'); caret != std::string::npos) {
      const long long base = std::stoll(text.substr(0, caret), &used);
      const long long exponent = std::stoll(text.substr(caret + 1));
      if (base >= 2 && exponent >= 0 && exponent < 63) {
        const double value = std::pow(static_cast<double>(base), static_cast<double>(exponent));
        if (value < 9.2e18) return static_cast<std::int64_t>(std::llround(value));
      }
    } else {
      const double value = std::stod(text, &used);
      if (used == text.size() && value >= 0 && value < 9.2e18 && value == std::floor(value)) {
        return static_cast<std::int64_t>(value);
      }
    }
  } catch (const std::exception&) {
  }
  throw_invalid_argument(command, option, "expects counts such as 256, 1e6 or 2^28 (got '" + text + "')");
}

std::string strategy_list(backend where) {
  std::string names;
  for (const strategy s : strategies_for(where, operation::histogram)) {
    names += (names.empty() ? "" : ", ") + std::string(to_string(s));
  }
  return names;
}

strategy parse_strategy_option(const std::string& name, std::string_view command, std::string_view option,
                               std::string_view choices) {
  if (const auto s = parse_strategy(name)) return *s;
  if (name == "racy") {
    throw_invalid_argument(command, option,
                           "is 'racy', which is no longer a strategy: the naive racy histogram is wrong by design and "
                           "lives in the lab, beside its fix: run `tally race`");
  }
  throw_invalid_argument(command, option, "is '" + name + "', which is not a strategy; " + std::string(choices));
}

backend resolve_backend(const std::string& backend_name, std::string_view command) {
  if (backend_name == "cpu") return backend::cpu;
  if (backend_name == "auto") return gpu::device_count() > 0 ? backend::gpu : backend::cpu;
  if (gpu::device_count() == 0) {
    throw error(errc::not_supported, "--backend",
                std::string(command) + ": --backend gpu, but " +
                    (gpu::built_with_cuda() ? "no GPU is present" : "tally was built without CUDA") +
                    " (use --backend cpu)");
  }
  return backend::gpu;
}

void timing_options::add_to(CLI::App& command, const std::string& runs_help, const std::string& warmup_help) {
  runs_option = command.add_option("--runs", runs, runs_help);
  warmup_option = command.add_option("--warmup", warmup, warmup_help);
  command
      .add_option("--timing", timing,
                  "How a GPU run is timed: gpu (GPU time: the stream waits behind a kernel until the run is "
                  "enqueued, so the host's launching is not counted, as nvbench does) or with_launch (events "
                  "around the launching, on an idle stream)")
      ->capture_default_str();
}

void timing_options::check(std::string_view command) const {
  if (runs_option != nullptr && runs_option->count() > 0 && runs < 1) {
    throw_invalid_argument(command, "--runs", "must be >= 1 (leave it out for the default)");
  }
  if (warmup_option != nullptr && warmup_option->count() > 0 && warmup < 0) {
    throw_invalid_argument(command, "--warmup", "must be >= 0 (leave it out for the default)");
  }
  if (timing != gpu::to_string(gpu::run_timing::gpu) && timing != gpu::to_string(gpu::run_timing::with_launch)) {
    throw_invalid_argument(command, "--timing", "must be gpu or with_launch (got '" + timing + "')");
  }
}

int timing_options::runs_or_default(bool on_gpu) const {
  return runs_option != nullptr && runs_option->count() > 0 ? runs : (on_gpu ? 15 : 5);
}

int timing_options::warmup_or_default(bool on_gpu) const {
  return warmup_option != nullptr && warmup_option->count() > 0 ? warmup : (on_gpu ? 3 : 1);
}

gpu::run_timing timing_options::gpu_timing() const {
  return timing == gpu::to_string(gpu::run_timing::with_launch) ? gpu::run_timing::with_launch : gpu::run_timing::gpu;
}

}  // namespace tally::cli
