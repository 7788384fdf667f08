// Pictures of results: `--plot FILE.png|FILE.svg` on the measuring commands and `tally plot`.
// The drawing is done by tally_plot.py (matplotlib), which the binary finds and runs with
// python3 on a result JSON; this file finds the script, runs it and turns its failures into
// errors that name the option and say how to install what is missing.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace tally::cli {

/**
 * @brief Checks, before anything is measured, that `picture` ends in .png or .svg (the formats
 * tally_plot.py writes); throws errc::invalid_argument naming `command` and `option` otherwise.
 */
void check_plot_path(const std::string& picture, std::string_view command, std::string_view option);

/**
 * @brief Where tally_plot.py is: $TALLY_PLOT_SCRIPT if set; else share/tally/tally_plot.py beside
 * the installed binary (<prefix>/bin/tally); else the source tree's copy, as configured at build
 * time. Throws errc::not_supported naming `option` when none exists.
 */
std::string find_plot_script(std::string_view command, std::string_view option);

/**
 * @brief Draws the result JSON at `json_path` into `picture` with tally_plot.py, run by
 * $TALLY_PYTHON or python3. The script draws into an output_file's temporary file, renamed over
 * `picture` once it succeeded: a picture is whole or not made. Errors name `command` and
 * `option`: python3 or matplotlib missing (errc::not_supported, with how to install it), a JSON
 * the script cannot draw (errc::invalid_argument naming `json_argument`, with the script's own
 * message), a picture that cannot be written (errc::io_error, with the system's reason).
 */
void draw_plot(const std::string& json_path, const std::string& picture, std::string_view command,
               std::string_view option, std::string_view json_argument);

/**
 * @brief `--plot` of a measuring command, called after its results are printed and written:
 * draws from `json_path` when the command wrote one (--json), else from a temporary JSON that
 * `write_json(path)` writes and that is removed afterwards.
 */
void plot_result(const std::string& picture, const std::string& json_path, std::string_view command,
                 const std::function<void(const std::string&)>& write_json);

}  // namespace tally::cli
