// Describes the environment of a measuring run (version, backend, device, build, date) and
// renders it for tables, CSV and JSON.
#include "run_environment.hpp"

#include <ctime>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tally/config.hpp"
#include "tally/cpu/parallel.hpp"
#include "tally/gpu.hpp"

namespace tally::cli {
namespace {

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string cpu_model() {
  std::ifstream info("/proc/cpuinfo");
  std::string line;
  while (std::getline(info, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

}  // namespace

run_environment describe_run_environment(backend where) {
  run_environment env;
  env.tally_version = tally::version;
  env.backend = std::string(to_string(where));
  env.build = fmt::format("{}, CUDA architectures {}", TALLY_BUILD_TYPE,
                          gpu::built_with_cuda() ? TALLY_CUDA_ARCHITECTURES : "none (no CUDA)");
  env.date = utc_now();
  if (where == backend::gpu) {
    const gpu::device_info info = gpu::describe_device();
    env.device = fmt::format("{} (sm_{}{}, {} SMs, {:.0f} GiB, L2 {:.0f} MB)", info.name, info.compute_capability_major,
                             info.compute_capability_minor, info.multiprocessors,
                             static_cast<double>(info.global_memory_bytes) / (1 << 30),
                             static_cast<double>(info.l2_cache_bytes) / 1e6);
  } else {
    env.device = fmt::format("{} ({} threads)", cpu_model(), cpu::detail::max_threads());
  }
  return env;
}

void print_environment_header(std::FILE* out, std::string_view command, const run_environment& env) {
  fmt::print(out, "tally {} {} | backend {} | {}\n", env.tally_version, command, env.backend, env.device);
  fmt::print(out, "build {} | {} UTC\n", env.build, env.date);
}

std::string environment_csv_comment(std::string_view command, const run_environment& env) {
  return fmt::format("# tally {} {}, backend {}, device {}, build {}, date {}", env.tally_version, command, env.backend,
                     env.device, env.build, env.date);
}

void add_environment_json(nlohmann::json& doc, std::string_view command, const run_environment& env) {
  doc["command"] = command;
  doc["tally_version"] = env.tally_version;
  doc["backend"] = env.backend;
  doc["device"] = env.device;
  doc["build"] = env.build;
  doc["date"] = env.date;
}

}  // namespace tally::cli
