// `tally plot RESULTS -o FILE` and the `--plot` of the measuring commands: both run
// tally_plot.py (matplotlib) on a result JSON. The script is found at run time (see
// find_plot_script) and run without a shell, its stderr captured so that its message becomes the
// error's.
#include "plot.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "output_file.hpp"
#include "tally/error.hpp"

extern char** environ;

namespace tally::cli {
namespace {

/// The script's exit codes (tally_plot.py says the same).
constexpr int script_bad_input = 2;
constexpr int script_no_matplotlib = 4;
constexpr int script_cannot_write = 5;

constexpr const char* install_hint = "python3 -m pip install matplotlib";

std::string lower_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

/// What a run of the script did: its exit status (or -1 with `spawn_errno` when it never ran) and its stderr.
struct script_run {
  int status = -1;
  int spawn_errno = 0;
  std::string errors;
};

script_run run_script(const std::string& python, const std::vector<std::string>& arguments) {
  script_run result;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);  // the copy on fd 2 is not close-on-exec
  std::vector<std::string> words{python};
  words.insert(words.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, python.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (spawned != 0) {
    close(fds[0]);
    result.spawn_errno = spawned;
    return result;
  }
  char buffer[4096];
  for (;;) {
    const ssize_t got = read(fds[0], buffer, sizeof(buffer));
    if (got > 0) {
      result.errors.append(buffer, static_cast<std::size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int wait_status = 0;
  while (waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  result.status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
  return result;
}

std::string trimmed(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  // The script starts its messages with "tally plot: "; the caller's prefix replaces it.
  constexpr std::string_view prefix = "tally plot: ";
  if (text.rfind(prefix, 0) == 0) text.erase(0, prefix.size());
  return text;
}

/// Removes the temporary JSON of `--plot` without --json, however the drawing ends.
struct temporary_file {
  std::filesystem::path path;
  ~temporary_file() {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
};

}  // namespace

void check_plot_path(const std::string& picture, std::string_view command, std::string_view option) {
  const std::string ext = lower_extension(picture);
  if (ext != ".png" && ext != ".svg") {
    throw_invalid_argument(command, option, "must name a .png or .svg file (got '" + picture + "')");
  }
}

std::string find_plot_script(std::string_view command, std::string_view option) {
  std::vector<std::filesystem::path> tried;
  if (const char* from_env = std::getenv("TALLY_PLOT_SCRIPT"); from_env != nullptr && *from_env != '\0') {
    if (std::filesystem::is_regular_file(from_env)) return from_env;
    throw error(errc::not_supported, std::string(option),
                fmt::format("{}: {}: TALLY_PLOT_SCRIPT='{}', the plot script to draw with, is not a file", command,
                            option, from_env));
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) tried.push_back(self.parent_path().parent_path() / "share" / "tally" / "tally_plot.py");
  tried.emplace_back(TALLY_SOURCE_PLOT_SCRIPT);
  std::string looked;
  for (const std::filesystem::path& p : tried) {
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
    looked += (looked.empty() ? "" : ", ") + p.string();
  }
  throw error(errc::not_supported, std::string(option),
              fmt::format("{}: {} needs tally_plot.py, found in none of {} (reinstall tally, or set "
                          "TALLY_PLOT_SCRIPT to the script)",
                          command, option, looked));
}

void draw_plot(const std::string& json_path, const std::string& picture, std::string_view command,
               std::string_view option, std::string_view json_argument) {
  check_plot_path(picture, command, option);
  const std::string script = find_plot_script(command, option);
  const char* python_env = std::getenv("TALLY_PYTHON");
  const std::string python = python_env != nullptr && *python_env != '\0' ? python_env : "python3";
  // The script draws into the temporary file, which becomes the picture only once it is whole.
  output_file drawn(picture, std::string(option));
  const std::string drawing = drawn.temporary_path().string();
  const script_run run = run_script(python, {script, json_path, drawing});
  if (run.status == 0) {
    if (!run.errors.empty()) std::fputs(run.errors.c_str(), stderr);  // warnings, if matplotlib had any
    drawn.commit();
    return;
  }
  if (run.status == script_cannot_write) {
    // The script says "cannot write 'PATH': REASON" of the temporary file; the user knows the picture's name.
    std::string reason = trimmed(run.errors);
    const std::string about_temporary = "cannot write '" + drawing + "': ";
    if (reason.rfind(about_temporary, 0) == 0) reason.erase(0, about_temporary.size());
    drawn.fail(reason);
  }
  if (run.status == -1 || run.status == 127) {
    throw error(errc::not_supported, std::string(option),
                fmt::format("{}: {} {}: drawing needs Python 3 with matplotlib, and '{}' could not be run ({}): "
                            "install Python 3, then `{}` (or set TALLY_PYTHON to an interpreter that has matplotlib)",
                            command, option, picture, python,
                            run.spawn_errno != 0 ? std::strerror(run.spawn_errno) : "exit status 127", install_hint));
  }
  if (run.status == script_no_matplotlib) {
    throw error(errc::not_supported, std::string(option),
                fmt::format("{}: {} {}: drawing needs matplotlib, which '{}' does not have: `{}` (or set "
                            "TALLY_PYTHON to an interpreter that has it)",
                            command, option, picture, python, install_hint));
  }
  if (run.status == script_bad_input) {
    throw error(errc::invalid_argument, std::string(json_argument),
                fmt::format("{}: {}", command, trimmed(run.errors)));
  }
  throw std::runtime_error(fmt::format("{}: {}: the plot script {} failed (exit status {}): {}", command, option,
                                       script, run.status, trimmed(run.errors)));
}

void plot_result(const std::string& picture, const std::string& json_path, std::string_view command,
                 const std::function<void(const std::string&)>& write_json) {
  if (!json_path.empty()) {
    draw_plot(json_path, picture, command, "--plot", "--json");
    return;
  }
  static int made = 0;
  const temporary_file json{std::filesystem::temp_directory_path() /
                            fmt::format("tally-plot-{}-{}.json", static_cast<long>(getpid()), made++)};
  write_json(json.path.string());
  draw_plot(json.path.string(), picture, command, "--plot", "--plot");
}

// ---- `tally plot` ------------------------------------------------------------------------------

void add_plot_command(CLI::App& app, int& exit_code) {
  struct plot_arguments {
    std::string results;
    std::string output;
    bool quiet = false;
  };
  auto args = std::make_shared<plot_arguments>();
  CLI::App* sub = app.add_subcommand(
      "plot",
      "Draw a saved result (tally bench / contention / race / advise / lab --json) as a PNG or SVG picture "
      "(matplotlib)");
  sub->add_option("results", args->results, "The result JSON, as written by --json")->required();
  sub->add_option("-o,--output", args->output, "The picture to write: a .png or .svg file")->required();
  sub->add_flag("--quiet", args->quiet, "Do not say what was drawn");
  sub->callback([args, &exit_code] {
    constexpr const char* command = "tally plot";
    check_plot_path(args->output, command, "--output");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(args->results, ec)) {
      throw error(errc::io_error, "results",
                  fmt::format("{}: argument 'results': no such file '{}'", command, args->results));
    }
    draw_plot(args->results, args->output, command, "--output", "results");
    if (!args->quiet) std::printf("%s: drew %s\n", command, args->output.c_str());
    exit_code = exit_success;
  });
}

}  // namespace tally::cli
