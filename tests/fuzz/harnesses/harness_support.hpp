// What the fuzz harnesses share: a scratch file per process for the parsers that take a path, and
// the check that a refused input is refused as `tally hist` must refuse it (exit code 2, the file
// named, a short printable message).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "tally/error.hpp"

namespace tally::fuzz {

/**
 * @brief A file that each input is written to before a parser opens it by path, as the CLI does.
 * In /dev/shm where there is one (no disk traffic), one name per process so that harnesses run
 * side by side; removed when the process ends normally.
 */
class scratch_file {
 public:
  explicit scratch_file(std::string_view suffix) {
    std::error_code ec;
    const std::filesystem::path folder =
        std::filesystem::is_directory("/dev/shm", ec) ? std::filesystem::path("/dev/shm")
                                                      : std::filesystem::temp_directory_path();
    path_ = folder / ("tally-fuzz-" + std::to_string(::getpid()) + std::string(suffix));
  }
  scratch_file(const scratch_file&) = delete;
  scratch_file& operator=(const scratch_file&) = delete;
  ~scratch_file() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }

  /** @brief Replaces the file's content with `bytes`; aborts if it cannot (not a finding). */
  void write(const std::uint8_t* bytes, std::size_t size) const {
    std::FILE* file = std::fopen(path_.c_str(), "wb");
    if (file == nullptr || std::fwrite(bytes, 1, size, file) != size || std::fclose(file) != 0) {
      std::fprintf(stderr, "cannot write the scratch file %s\n", path_.c_str());
      std::abort();
    }
  }

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

/**
 * @brief Runs `read`, which may refuse its input only with a tally::error that main() maps to exit
 * code 2 and whose message names `path` and stays short and printable. Anything else (another
 * exception, a message that hides the file or dumps the input) aborts, which libFuzzer reports.
 */
template <class Read>
void expect_clean_refusal(const std::filesystem::path& path, Read&& read) {
  try {
    read();
  } catch (const tally::error& refusal) {
    const std::string_view message = refusal.what();
    const bool usage_error = refusal.code() == errc::invalid_argument || refusal.code() == errc::io_error ||
                             refusal.code() == errc::not_supported;
    constexpr std::size_t longest_message = 1024;  // a line or two on a terminal, not the input echoed back
    bool printable = true;
    for (const char c : message) printable = printable && c >= 0x20 && c < 0x7f;
    if (!usage_error || message.find(path.string()) == std::string_view::npos ||
        message.size() > longest_message || !printable) {
      std::fprintf(stderr, "bad refusal (code %d, %zu bytes): %.*s\n", static_cast<int>(refusal.code()),
                   message.size(), static_cast<int>(std::min(message.size(), std::size_t{2048})), message.data());
      std::abort();
    }
  }
}

}  // namespace tally::fuzz
