// What a measuring command (bench, contention, race, lab, advise) offers besides its table, the same
// way in every command: --backend, and the result files --csv, --json and a --plot drawn from the
// JSON, with --quiet for its progress; the options, the writing of the files (a table of the rows'
// fields), and the registration every measuring command shares.
#pragma once

#include <algorithm>
#include <concepts>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "run_environment.hpp"

namespace tally::cli {

/** @brief Adds `--backend auto|gpu|cpu` (auto: the GPU when there is one) to `command`. */
void add_backend_option(CLI::App& command, std::string& backend_name);

/// A comma-separated list option ("--ops add,cas") whose --help shows its default.
template <class T>
CLI::Option* add_list_option(CLI::App& command, const std::string& name, std::vector<T>& values,
                             const std::string& help) {
  return command.add_option(name, values, help)->delimiter(',')->capture_default_str();
}

/** @brief A result row's fields in column order: the CSV's columns and the JSON row's keys. */
using row_fields = nlohmann::ordered_json;

/**
 * @brief One column of a command's result files: its name, and how a row gives its value (a
 * pointer to a data member, or a function of the row).
 */
template <class Row>
struct row_field {
  std::string_view name;
  std::function<row_fields(const Row&)> value;
};

/** @brief `row`'s fields, in the order of `fields`. */
template <class Row>
row_fields fields_of(const Row& row, std::span<const row_field<std::type_identity_t<Row>>> fields) {
  row_fields f;
  for (const row_field<Row>& field : fields) f[field.name] = field.value(row);
  return f;
}

/**
 * @brief A result document: the run's environment as top-level fields (add_environment_json, with
 * `command` saying what wrote it) and an empty "rows" array.
 */
nlohmann::json result_document(std::string_view command, const run_environment& env);

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
  /// After the table: the files asked for, the CSV (`csv_comment`, a header, then each row's
  /// `fields`) and the JSON (`doc`, with the rows' fields as its "rows"), and the picture drawn from
  /// the JSON. Returns the exit code: exit_mismatch when a row is a `mismatch`, else exit_success.
  template <class Row>
  int finish(std::string_view command_name, std::string_view csv_comment, nlohmann::json doc,
             const std::vector<Row>& rows, std::span<const row_field<std::type_identity_t<Row>>> fields) const {
    std::vector<row_fields> row_values;
    row_values.reserve(rows.size());
    for (const Row& r : rows) row_values.push_back(fields_of(r, fields));
    const bool any_mismatch = std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.mismatch; });
    return write(command_name, csv_comment, std::move(doc), row_values, any_mismatch);
  }

  /// finish for command `command` ("race"): the run's environment is the CSV's comment and the
  /// JSON's fields.
  template <class Row>
  int finish(std::string_view command, const run_environment& env, const std::vector<Row>& rows,
             std::span<const row_field<std::type_identity_t<Row>>> fields) const {
    return finish("tally " + std::string(command), environment_csv_comment(command, env), result_document(command, env),
                  rows, fields);
  }

 private:
  int write(std::string_view command_name, std::string_view csv_comment, nlohmann::json doc,
            const std::vector<row_fields>& rows, bool any_mismatch) const;
};

/** @brief What `tally --help` says of a measuring command, and what its result files hold. */
struct measuring_command {
  std::string name;
  std::string description;
  std::string rows;     ///< what the files hold: "rows", "claims"
  std::string picture;  ///< what --plot draws
};

/**
 * @brief Registers a measuring command on `app`: --backend first, then its own options
 * (`add_options`), then the result files'; run, it sets `exit_code` to what `run` returns.
 * `Options` derives from result_files and holds `backend_name`; the command keeps it alive.
 */
template <class Options>
void add_measuring_command(CLI::App& app, int& exit_code, const measuring_command& about, int (*run)(const Options&),
                           std::invocable<CLI::App&, Options&> auto add_options) {
  auto options = std::make_shared<Options>();
  CLI::App* command = app.add_subcommand(about.name, about.description);
  add_backend_option(*command, options->backend_name);
  add_options(*command, *options);
  options->add_to(*command, about.rows, about.picture);
  command->callback([options, run, &exit_code] { exit_code = run(*options); });
}

/**
 * @brief Writes `rows` to `path` as CSV: `comment` (the run's environment) as its first line, the
 * first row's field names, then a line per row: strings quoted (inner quotes doubled), booleans as 1
 * or 0, numbers as the JSON has them. The file is written whole or not at all (output_file.hpp);
 * throws errc::io_error naming --csv when it cannot be.
 */
void write_csv_rows(const std::string& path, std::string_view comment, const std::vector<row_fields>& rows);

/**
 * @brief Writes `doc` to `path` as indented JSON, whole or not at all (output_file.hpp); throws
 * errc::io_error naming --json when it cannot.
 */
void write_json_file(const std::string& path, const nlohmann::json& doc);

}  // namespace tally::cli
