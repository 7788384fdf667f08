// The CLI's messages in one style, `tally <command>: ...`, and the "did you mean" of a misspelled
// command or option.
#include "usage.hpp"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace tally::cli {
namespace {

/// Edit distance where swapping two neighbours counts one ("hsit" is one from "hist").
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::string_view without_dashes(std::string_view name) {
  while (!name.empty() && name.front() == '-') name.remove_prefix(1);
  return name;
}

/// The command CLI11 was parsing when it stopped: the deepest one chosen, or the app itself.
const CLI::App& active_command(const CLI::App& app) {
  const std::vector<CLI::App*> chosen = app.get_subcommands();
  return chosen.empty() ? app : *chosen.back();
}

/// Every spelling of the options of `command` and of the app above it (--help, --version).
std::vector<std::string> option_names(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::App* level = &command; level != nullptr; level = level->get_parent()) {
    for (const CLI::Option* option : level->get_options()) {
      for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
      for (const std::string& name : option->get_snames()) names.push_back("-" + name);
    }
  }
  return names;
}

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
  return names;
}

/// CLI11's sentences start with a capital ("The following arguments..."); after a label they do not.
std::string lower_first_word(std::string text) {
  if (text.size() > 1 && std::isupper(static_cast<unsigned char>(text[0])) &&
      !std::isupper(static_cast<unsigned char>(text[1]))) {
    text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  }
  return text;
}

}  // namespace

std::string command_label(const CLI::App& app) {
  std::string label = "tally";
  for (const CLI::App* sub : app.get_subcommands()) label += " " + sub->get_name();
  return label;
}

std::string labelled(std::string_view label, std::string_view message) {
  const std::string own = std::string(label) + ": ";
  if (message.starts_with(own)) return std::string(message);
  if (message.starts_with("tally: ")) message.remove_prefix(7);
  return own + std::string(message);
}

std::optional<std::string> closest_name(std::string_view typed, std::span<const std::string> names) {
  const std::string_view bare = without_dashes(typed);
  std::optional<std::string> best;
  std::size_t best_distance = 3;  // more than 2 edits is no typo
  std::vector<std::string> extended;  // names that `typed` starts, "--last" of "--last-edge"
  for (const std::string& name : names) {
    const std::size_t distance = edit_distance(typed, name);
    if (distance < best_distance && 2 * distance < without_dashes(name).size()) {
      best = name;
      best_distance = distance;
    }
    if (bare.size() >= 3 && name.starts_with(typed)) extended.push_back(name);
  }
  if (!best && extended.size() == 1) best = extended.front();
  return best;
}

std::string parse_error_message(const CLI::App& app, const CLI::ParseError& error) {
  const CLI::App& command = active_command(app);
  const std::string label = command_label(app);
  std::string reason = lower_first_word(error.what());

  // The words CLI11 could not place: unknown options, or an unknown command before any was chosen.
  std::vector<std::string> unknown;
  std::vector<std::pair<std::string, std::string>> meant;  // (typed, the name it is closest to)
  const bool no_command_yet = &command == &app;
  for (const std::string& word : app.remaining(true)) {
    const bool is_option = word.starts_with("-") && word.size() > 1;
    if (!is_option && !no_command_yet) continue;  // a stray value: CLI11's reason names it
    const std::string typed = word.substr(0, word.find('='));
    if (no_command_yet && unknown.empty()) {
      // CLI11 says only that a command is required; say what was wrong with what was given.
      reason = is_option ? "'" + typed + "' is not an option of tally itself (a command's options follow the command)"
                         : "'" + typed + "' is not a tally command";
    }
    unknown.push_back(typed);
    if (const std::optional<std::string> near =
            closest_name(typed, is_option ? option_names(command) : command_names(app))) {
      meant.emplace_back(typed, *near);
    }
  }
  // An unknown option is the likely cause of whatever else CLI11 found (a value left over, a
  // required option "missing" because it was misspelled): say that first.
  if (!no_command_yet && !unknown.empty()) {
    std::string names;
    for (std::size_t i = 0; i < unknown.size(); ++i) names += (i == 0 ? "'" : ", '") + unknown[i] + "'";
    reason = names + (unknown.size() == 1 ? " is not an option of " : " are not options of ") + label;
  }
  std::string text = label + ": " + reason;
  if (meant.size() == 1 && unknown.size() == 1) {
    text += "; did you mean '" + meant.front().second + "'?";
  } else if (!meant.empty()) {
    text += "; did you mean ";
    for (std::size_t i = 0; i < meant.size(); ++i) {
      text += (i == 0 ? "'" : ", '") + meant[i].second + "' for '" + meant[i].first + "'";
    }
    text += "?";
  }
  return text + " (see '" + label + " --help')";
}

}  // namespace tally::cli
