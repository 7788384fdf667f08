// What every measuring command (`tally bench`, `tally contention`) records about the run: the
// tally version, backend, device, build and date. Shown as the first lines of the table, the
// comment line that opens a CSV file and the top-level fields of a JSON document, the same way
// for every command.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "tally/strategy.hpp"

namespace tally::cli {

struct run_environment {
  std::string tally_version;
  std::string backend;  ///< "gpu" or "cpu"
  std::string device;   ///< GPU name, or the CPU model and thread count
  std::string build;    ///< build type and CUDA architectures
  std::string date;     ///< UTC, ISO 8601
};

/** @brief The version, build and date, and the device of backend `where` (the current GPU or the CPU). */
run_environment describe_run_environment(backend where);

/** @brief "tally V COMMAND | backend B | DEVICE", then "build ... | DATE UTC" (two lines). */
void print_environment_header(std::FILE* out, std::string_view command, const run_environment& env);

/** @brief "# tally V COMMAND, backend B, device D, build ..., date ..." with no line end: a CSV file's first line. */
std::string environment_csv_comment(std::string_view command, const run_environment& env);

/**
 * @brief Sets the top-level fields command (what wrote the result: "bench", "contention"...; `tally
 * plot` draws by it), tally_version, backend, device, build and date of `doc`.
 */
void add_environment_json(nlohmann::json& doc, std::string_view command, const run_environment& env);

}  // namespace tally::cli
