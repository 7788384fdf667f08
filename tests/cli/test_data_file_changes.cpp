// Tests that a sample file which shrinks, grows or is rewritten while `tally hist` reads it
// (sample_file and chunk_reader of tool/data_file.hpp) is reported as a tally::error naming the
// file and what changed, never handed over as if it were whole.
//
// Why none of these can pass by luck: the file is changed from inside the reader's `visit`
// callback, which the reader calls on this thread between one read and the next (or before its
// end-of-pass check). The change therefore falls at that exact point on every run; no second
// thread, no timing. The control test reads the same files unchanged and must see no error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data_file.hpp"
#include "tally/error.hpp"

namespace {

namespace fs = std::filesystem;
using tally::cli::chunk_reader;
using tally::cli::dtype;
using tally::cli::sample_file;

constexpr std::uint64_t num_samples = 1000;      // int32: 4000 bytes
constexpr std::uint64_t chunk_bytes = 1024;      // 256 samples: 4 chunks
constexpr std::uint64_t file_bytes = num_samples * sizeof(std::int32_t);

/// A folder of its own for each test, removed afterwards.
class DataFileChanges : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    folder_ = fs::temp_directory_path() /
              ("tally-data-file-changes-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(folder_);
    fs::create_directories(folder_);
  }
  void TearDown() override { fs::remove_all(folder_); }

  /// 0, 1, ..., num_samples - 1 as int32: raw, or after a .npy header.
  fs::path write_samples(bool npy) {
    std::vector<std::int32_t> values(num_samples);
    std::iota(values.begin(), values.end(), 0);
    const fs::path path = folder_ / (npy ? "samples.npy" : "samples.bin");
    std::ofstream out(path, std::ios::binary);
    if (npy) {
      const std::uint64_t shape[] = {num_samples};
      out << tally::cli::format_npy_header("<i4", shape);
    }
    out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(file_bytes));
    out.close();
    // A write right after the file was made could land within the same tick of the coarse clock
    // that stamps modification times, and leave the time as it was: start an hour back instead.
    fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::hours(1));
    return path;
  }

  fs::path folder_;
};

void resize(const fs::path& path, std::uint64_t bytes) { fs::resize_file(path, bytes); }

void append(const fs::path& path, std::uint64_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << std::string(bytes, '\x7f');
}

/// Overwrites bytes in the middle of the file, keeping its size.
void overwrite(const fs::path& path) {
  std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
  out.seekp(2048);
  out << std::string(64, '\x7f');
}

/**
 * `passes` passes over `path` in chunks, as `tally hist` makes them, calling `change(chunk_index)`
 * after each chunk is visited. Returns the error's message, or nothing when every pass ended
 * without one (then `sum` holds the last pass's sum of the samples).
 */
std::optional<std::string> read_while_changing(const fs::path& path, const std::function<void(std::uint64_t)>& change,
                                               std::int64_t* sum = nullptr, int passes = 1) {
  try {
    sample_file file(path, dtype::int32);
    chunk_reader<std::int32_t> reader(file, chunk_bytes);
    for (int pass = 0; pass < passes; ++pass) {
      std::int64_t total = 0;
      std::uint64_t index = 0;
      reader.for_each_chunk([&](std::span<const std::int32_t> chunk, std::uint64_t) {
        total = std::accumulate(chunk.begin(), chunk.end(), total);
        change(index++);
      });
      if (sum != nullptr) *sum = total;
    }
  } catch (const tally::error& e) {
    EXPECT_EQ(e.code(), tally::errc::io_error) << e.what();
    EXPECT_EQ(e.argument(), "FILE") << e.what();
    const std::string message = e.what();
    EXPECT_NE(message.find(path.string()), std::string::npos) << "the message names the file: " << message;
    return message;
  }
  return std::nullopt;
}

constexpr std::int64_t whole_sum = static_cast<std::int64_t>(num_samples * (num_samples - 1) / 2);

TEST_F(DataFileChanges, AnUnchangedFileIsReadWholeInOnePassOrTwo) {
  for (const bool npy : {false, true}) {
    const fs::path path = write_samples(npy);
    std::int64_t sum = 0;
    EXPECT_EQ(read_while_changing(path, [](std::uint64_t) {}, &sum, 2), std::nullopt);
    EXPECT_EQ(sum, whole_sum);
  }
}

TEST_F(DataFileChanges, AFileTruncatedBetweenChunksIsReportedAsShrunk) {
  for (const bool npy : {false, true}) {
    const fs::path path = write_samples(npy);
    const std::uint64_t header = fs::file_size(path) - file_bytes;
    const auto message = read_while_changing(path, [&](std::uint64_t chunk) {
      if (chunk == 0) resize(path, header + 2000);
    });
    ASSERT_TRUE(message.has_value()) << "a truncated file was read without an error";
    EXPECT_NE(message->find("shrank from " + std::to_string(header + file_bytes) + " to " +
                            std::to_string(header + 2000) + " bytes"),
              std::string::npos)
        << *message;
  }
}

TEST_F(DataFileChanges, AFileTruncatedToNothingIsReportedAsShrunk) {
  const fs::path path = write_samples(false);
  const auto message = read_while_changing(path, [&](std::uint64_t chunk) {
    if (chunk == 1) resize(path, 0);
  });
  ASSERT_TRUE(message.has_value());
  EXPECT_NE(message->find("shrank from 4000 to 0 bytes"), std::string::npos) << *message;
}

TEST_F(DataFileChanges, AFileThatGrowsWhileReadIsReportedAfterThePass) {
  // Every read succeeds (the samples asked for are all there), so only the check at the end of the
  // pass can see it; growing during the last chunk's visit is the latest moment it can happen.
  for (const std::uint64_t when : {std::uint64_t{0}, std::uint64_t{3}}) {
    const fs::path path = write_samples(false);
    const auto message = read_while_changing(path, [&](std::uint64_t chunk) {
      if (chunk == when) append(path, 400);
    });
    ASSERT_TRUE(message.has_value()) << "a file that grew after chunk " << when << " was taken as whole";
    EXPECT_NE(message->find("grew from 4000 to 4400 bytes"), std::string::npos) << *message;
  }
}

TEST_F(DataFileChanges, AFileRewrittenInPlaceIsReported) {
  const fs::path path = write_samples(true);
  const auto message = read_while_changing(path, [&](std::uint64_t chunk) {
    if (chunk == 1) overwrite(path);
  });
  ASSERT_TRUE(message.has_value()) << "a file rewritten at the same size was taken as whole";
  EXPECT_NE(message->find("was written to"), std::string::npos) << *message;
}

TEST_F(DataFileChanges, AFileThatFitsInOneChunkIsCheckedOnItsSecondPassToo) {
  // One chunk: the second pass counts the copy read in the first and reads nothing, yet a file
  // that grew in between is reported, as the count would not be of the file as it now is.
  const fs::path path = write_samples(false);
  try {
    sample_file file(path, dtype::int32);
    chunk_reader<std::int32_t> reader(file, file_bytes);
    ASSERT_EQ(reader.num_chunks(), 1u);
    reader.for_each_chunk([](std::span<const std::int32_t>, std::uint64_t) {});
    append(path, 8);
    reader.for_each_chunk([](std::span<const std::int32_t>, std::uint64_t) {});
    ADD_FAILURE() << "the second pass did not see the file grow";
  } catch (const tally::error& e) {
    EXPECT_NE(std::string(e.what()).find("grew from 4000 to 4008 bytes"), std::string::npos) << e.what();
  }
}

}  // namespace
