// Writing the files the tool makes for the user (--output, --csv, --json, --plot) so that none is
// ever left half-written: a temporary file beside the target, written and synced with every error
// checked, then renamed over it; on any failure the target keeps what it held.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace tally::cli {

/**
 * @brief A file being written for the user: the bytes go to a temporary file in the target's
 * folder (so that the final rename is atomic), and commit() syncs it and renames it over the
 * target. Destroyed without a successful commit (an error, an exception), the temporary file is
 * removed and the target is as it was. Errors are tally::error (errc::io_error, argument
 * `option`) naming the option, the target and the system's reason.
 *
 * A target that exists and is not a regular file (/dev/null, a FIFO) is written in place: there is
 * nothing to rename over, and replacing a device with a file would be wrong. Nor is the file that
 * stdout or stderr goes to (/dev/stdout, or its very name) replaced: the bytes follow what was
 * printed there.
 */
class output_file {
 public:
  /** @brief Creates the temporary file for `target` (a symlink's own file is the target). */
  output_file(const std::filesystem::path& target, std::string option);
  ~output_file();
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;

  /** @brief Appends `bytes`. */
  void write(std::string_view bytes);

  /**
   * @brief Where the bytes go until commit(): for a writer in another process (the plot script),
   * which writes this path (it keeps the target's extension) and exits before commit().
   */
  [[nodiscard]] const std::filesystem::path& temporary_path() const noexcept { return temporary_; }

  /** @brief Syncs and closes the file, then renames it over the target. */
  void commit();

  /**
   * @brief Throws this file's error: `reason` (the system's, or another writer's), after the
   * option and the target, and what became of the target.
   */
  [[noreturn]] void fail(std::string_view reason) const;

 private:

  void discard() noexcept;

  std::filesystem::path named_;   ///< as the user wrote it, for messages
  std::filesystem::path target_;  ///< the file replaced: `named_`, or where it links to
  std::filesystem::path temporary_;
  std::string option_;
  int descriptor_ = -1;
  bool in_place_ = false;        ///< a device or FIFO: written directly, nothing renamed
  bool target_existed_ = false;  ///< what the error says of the target
  bool committed_ = false;
};

/** @brief Writes `content` to `target` through an output_file: all of it, or nothing. */
void write_output_file(const std::filesystem::path& target, std::string_view option, std::string_view content);

}  // namespace tally::cli
