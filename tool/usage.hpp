// What a person sees when a command line is wrong or a command fails: every message in one style,
// `tally <command>: ...`, and a "did you mean" for a misspelled command or option (CLI11 2.1 has
// none of its own). Host-only.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace CLI {
class App;
class ParseError;
}  // namespace CLI

namespace tally::cli {

/** @brief "tally hist" for the command the command line chose; "tally" before one is chosen. */
std::string command_label(const CLI::App& app);

/**
 * @brief `message` as "`label`: message". A message that already starts with the label, or with
 * "tally: ", is not labelled twice.
 */
std::string labelled(std::string_view label, std::string_view message);

/**
 * @brief The name of `names` closest to `typed` in edit distance (insertions, deletions,
 * substitutions and swaps of neighbours), if it is close enough to be a typo of it: at most 2
 * edits and fewer than half the name's length.
 */
std::optional<std::string> closest_name(std::string_view typed, std::span<const std::string> names);

/**
 * @brief The one-line message for a command line CLI11 refused: its reason, labelled with the
 * command; for an unknown command or option close to a known one, "did you mean ...?"; and where
 * the help is.
 */
std::string parse_error_message(const CLI::App& app, const CLI::ParseError& error);

}  // namespace tally::cli
