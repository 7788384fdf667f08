// Writing a user's file through a temporary file beside it and a rename (output_file.hpp).
#include "output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "tally/error.hpp"

namespace tally::cli {
namespace {

std::string system_reason(int number) { return std::strerror(number); }

/// ".counts.csv.tally-k3J9aQx2.csv": hidden, marked as tally's should one outlive a killed run, and
/// ending in the target's extension, by which the plot script's matplotlib picks the format.
std::filesystem::path temporary_name(const std::filesystem::path& target, std::mt19937_64& random) {
  constexpr std::string_view letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string tag(8, ' ');
  for (char& c : tag) c = letters[random() % letters.size()];
  std::string extension = target.extension().string();
  if (extension.size() > 16) extension.clear();
  // Within NAME_MAX (255 bytes) whatever the target's name.
  const std::string name = target.filename().string().substr(0, 200);
  return target.parent_path() / fmt::format(".{}.tally-{}{}", name, tag, extension);
}

/// Makes the rename itself survive a crash. Best effort: the file is already whole under its
/// name, so a failure here must not be reported as a failure to write it.
void sync_folder(const std::filesystem::path& folder) {
  const int descriptor = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (descriptor < 0) return;
  (void)::fsync(descriptor);
  (void)::close(descriptor);
}

/// STDOUT_FILENO or STDERR_FILENO when `file` is where that stream goes, else -1.
int standard_stream(const struct stat& file) {
  for (const int stream : {STDOUT_FILENO, STDERR_FILENO}) {
    struct stat status {};
    if (::fstat(stream, &status) == 0 && status.st_dev == file.st_dev && status.st_ino == file.st_ino) return stream;
  }
  return -1;
}

}  // namespace

output_file::output_file(const std::filesystem::path& target, std::string option)
    : named_(target), target_(target), option_(std::move(option)) {
  try {
    struct stat existing {};
    if (::stat(named_.c_str(), &existing) == 0) {
      target_existed_ = true;
      if (const int stream = standard_stream(existing); stream >= 0) {
        // /dev/stdout, or the file stdout goes to: the bytes follow what was printed there, as after
        // `tally ... --json /dev/stdout > out.txt`, rather than replacing (or overwriting) it.
        in_place_ = true;
        temporary_ = target_;
        std::fflush(nullptr);
        descriptor_ = ::fcntl(stream, F_DUPFD_CLOEXEC, 0);
        if (descriptor_ < 0) fail(system_reason(errno));
        return;
      }
      if (!S_ISREG(existing.st_mode)) {
        in_place_ = true;
        temporary_ = target_;
        descriptor_ = ::open(target_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
        if (descriptor_ < 0) fail(system_reason(errno));
        return;
      }
    }
    // Writing through a symlink replaces the file it points to and keeps the link.
    std::error_code ec;
    if (std::filesystem::is_symlink(named_, ec)) {
      std::filesystem::path resolved = std::filesystem::weakly_canonical(named_, ec);
      if (!ec) target_ = std::move(resolved);
    }
    std::mt19937_64 random(std::random_device{}());
    for (int attempt = 1; descriptor_ < 0; ++attempt) {
      temporary_ = temporary_name(target_, random);
      descriptor_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (descriptor_ < 0 && (errno != EEXIST || attempt == 100)) {
        const int number = errno;
        temporary_.clear();  // not ours: never removed
        fail(system_reason(number));
      }
    }
    // The new file keeps the permissions of the one it replaces, as writing into that would.
    if (target_existed_ && ::fchmod(descriptor_, existing.st_mode & 07777) != 0) fail(system_reason(errno));
  } catch (...) {
    discard();  // a constructor that throws gets no destructor
    throw;
  }
}

output_file::~output_file() {
  if (!committed_) discard();
}

void output_file::discard() noexcept {
  if (descriptor_ >= 0) (void)::close(descriptor_);
  descriptor_ = -1;
  if (!in_place_ && !temporary_.empty()) (void)::unlink(temporary_.c_str());
  temporary_.clear();
}

void output_file::write(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t wrote = ::write(descriptor_, bytes.data(), std::min<std::size_t>(bytes.size(), std::size_t{1} << 30));
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) fail(system_reason(errno));
    if (wrote == 0) fail("the system took none of the bytes left to write");
    bytes.remove_prefix(static_cast<std::size_t>(wrote));
  }
}

void output_file::commit() {
  // Synced before the rename: else a crash soon after could leave the name on missing data.
  if (!in_place_ && ::fsync(descriptor_) != 0) fail(system_reason(errno));
  const int closed = ::close(descriptor_);
  descriptor_ = -1;
  if (closed != 0) fail(system_reason(errno));  // network file systems may report a failed write only here
  if (!in_place_) {
    if (std::rename(temporary_.c_str(), target_.c_str()) != 0) fail(system_reason(errno));
    sync_folder(target_.parent_path());
  }
  committed_ = true;
}

void output_file::fail(std::string_view reason) const {
  const char* outcome = in_place_ ? "" : target_existed_ ? "; the existing file is unchanged" : "; no file was made";
  throw error(errc::io_error, option_,
              fmt::format("{} '{}' cannot be written: {}{}", option_, named_.string(), reason, outcome));
}

void write_output_file(const std::filesystem::path& target, std::string_view option, std::string_view content) {
  output_file file(target, std::string(option));
  file.write(content);
  file.commit();
}

}  // namespace tally::cli
