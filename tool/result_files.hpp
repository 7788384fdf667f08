// What a measuring command (bench, contention, race, lab, advise) offers besides its table, the same
// way in every command: --backend, and the result files --csv, --json and a --plot drawn from the
// JSON, with --quiet for its progress; the options, and the writing of the files.
#pragma once

#include <algorithm>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_environment.hpp"

namespace CLI {
class App;
}  // namespace CLI

namespace tally::cli {

/** @brief Adds `--backend auto|gpu|cpu` (auto: the GPU when there is one) to `command`. */
void add_backend_option(CLI::App& command, std::string& backend_name);

/** @brief A result row's fields in column order: the CSV's columns and the JSON row's keys. */
using row_fields = nlohmann::ordered_json;

/** @brief --csv, --json, --plot and --quiet of a measuring command. */
struct result_files {
  std::string csv;
  std::string json;
  std::string plot;  ///< a .png or .svg, drawn from the JSON after the run
  bool quiet = false;

  /// Adds the four options to `command`; `rows` says what the files hold ("rows", "claims"),
  /// `picture` what --plot draws.
  void add_to(CLI::App& command, std::string_view rows, std::string_view picture);
  /// Before anything runs: throws naming --plot unless the picture is a .png or .svg.
  void check(std::string_view command_name) const;
  /// After the table: the files asked for, the CSV (`csv_comment`, a header, then `fields_of` each
  /// row) and the JSON (`doc`, with the rows' fields as its "rows"), and the picture drawn from the
  /// JSON. Returns the exit code: exit_mismatch when a row is a `mismatch`, else exit_success.
  template <class Row>
  int finish(std::string_view command_name, std::string_view csv_comment, nlohmann::json doc,
             const std::vector<Row>& rows, row_fields (*fields_of)(const Row&)) const {
    std::vector<row_fields> fields;
    fields.reserve(rows.size());
    for (const Row& r : rows) fields.push_back(fields_of(r));
    const bool any_mismatch = std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.mismatch; });
    return write(command_name, csv_comment, std::move(doc), fields, any_mismatch);
  }

 private:
  int write(std::string_view command_name, std::string_view csv_comment, nlohmann::json doc,
            const std::vector<row_fields>& rows, bool any_mismatch) const;
};

/** @brief `path` opened for writing; throws errc::io_error naming `option` when it cannot be. */
std::ofstream open_result_file(const std::string& path, std::string_view option);

/**
 * @brief A result document: the run's environment as top-level fields (add_environment_json, with
 * `command` saying what wrote it) and an empty "rows" array.
 */
nlohmann::json result_document(std::string_view command, const run_environment& env);

/**
 * @brief Writes `rows` to `path` as CSV: `comment` (the run's environment) as its first line, the
 * first row's field names, then a line per row: strings quoted (inner quotes doubled), booleans as 1
 * or 0, numbers as the JSON has them. Throws errc::io_error naming --csv when it cannot.
 */
void write_csv_rows(const std::string& path, std::string_view comment, const std::vector<row_fields>& rows);

/** @brief Writes `doc` to `path` as indented JSON; throws errc::io_error naming --json when it cannot. */
void write_json_file(const std::string& path, const nlohmann::json& doc);

}  // namespace tally::cli
