// The options and the writing of a measuring command's result files (result_files.hpp).
#include "result_files.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "output_file.hpp"
#include "plot.hpp"

namespace tally::cli {

void add_backend_option(CLI::App& command, std::string& backend_name) {
  command.add_option("--backend", backend_name, "auto (the GPU when there is one), gpu or cpu")
      ->check(CLI::IsMember({"auto", "gpu", "cpu"}))
      ->capture_default_str();
}

void result_files::add_to(CLI::App& command, std::string_view rows, std::string_view picture) {
  command.add_option("--csv", csv, "Also write the " + std::string(rows) + " as CSV to this file");
  command.add_option("--json", json, "Also write the " + std::string(rows) + " as JSON to this file");
  command.add_option("--plot", plot,
                     "Also draw the results to this .png or .svg file: " + std::string(picture) +
                         " (needs python3 with matplotlib)");
  command.add_flag("--quiet", quiet, "No progress on stderr");
}

void result_files::check(std::string_view command_name) const {
  if (!plot.empty()) check_plot_path(plot, command_name, "--plot");
}

int result_files::write(std::string_view command_name, std::string_view csv_comment, nlohmann::json doc,
                        const std::vector<row_fields>& rows, bool any_mismatch) const {
  if (!csv.empty()) write_csv_rows(csv, csv_comment, rows);
  for (const row_fields& fields : rows) doc["rows"].push_back(nlohmann::json(fields));
  const auto write_json = [&doc](const std::string& path) { write_json_file(path, doc); };
  if (!json.empty()) write_json(json);
  if (!plot.empty()) plot_result(plot, json, command_name, write_json);
  return any_mismatch ? exit_mismatch : exit_success;
}

nlohmann::json result_document(std::string_view command, const run_environment& env) {
  nlohmann::json doc;
  add_environment_json(doc, command, env);
  doc["rows"] = nlohmann::json::array();
  return doc;
}

void write_csv_rows(const std::string& path, std::string_view comment, const std::vector<row_fields>& rows) {
  std::string text(comment);
  text += "\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::string header;
    std::string line;
    for (const auto& [name, value] : rows[i].items()) {
      const char* comma = header.empty() ? "" : ",";
      header += comma + name;
      line += comma;
      if (value.is_string()) {
        line += '"';
        for (const char ch : value.get<std::string>()) line += ch == '"' ? std::string("\"\"") : std::string(1, ch);
        line += '"';
      } else if (value.is_boolean()) {
        line += value.get<bool>() ? "1" : "0";
      } else {
        line += value.dump();
      }
    }
    if (i == 0) text += header + "\n";
    text += line + "\n";
  }
  write_output_file(path, "--csv", text);
}

void write_json_file(const std::string& path, const nlohmann::json& doc) {
  write_output_file(path, "--json", doc.dump(2) + "\n");
}

}  // namespace tally::cli
