// The files `tally hist` reads and writes: a minimal .npy header parser and writer (no
// third-party npy library), raw binary sample files, stdin, and a reader that hands the samples
// over in chunks so that files larger than memory can be counted. Host-only.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "huge_pages.hpp"
#include "tally/small_float.hpp"

namespace tally::cli {

static_assert(std::endian::native == std::endian::little,
              "raw files are read as little-endian, and .npy files swapped from big-endian; this host is not");

/** @brief The sample types a data file may hold (the types tally histograms accept). */
enum class dtype : std::uint8_t { int8, uint8, int16, uint16, int32, uint32, int64, float16, bfloat16, float32, float64 };

/** @brief Every dtype, in the order the CLI lists them. */
inline constexpr std::array all_dtypes{dtype::int8,    dtype::uint8,    dtype::int16,   dtype::uint16,
                                       dtype::int32,   dtype::uint32,   dtype::int64,   dtype::float16,
                                       dtype::bfloat16, dtype::float32, dtype::float64};

/** @brief The dtype's name as `--dtype` spells it ("int8", ..., "float64"). */
std::string_view to_string(dtype type);
/** @brief The dtype `--dtype` names, if it is one. */
std::optional<dtype> parse_dtype(std::string_view name);
/** @brief Bytes per sample. */
std::size_t size_of(dtype type);
/** @brief The .npy `descr` numpy writes for the dtype ("|u1", "<i4", ...); empty for bfloat16, which numpy lacks. */
std::string_view npy_descr(dtype type);
/** @brief The names of every dtype, comma-separated, for messages and help. */
std::string dtype_names();
/** @brief Whether the dtype holds integers (the dtypes --bincount takes). */
bool is_integer(dtype type);
/** @brief The names of the integer dtypes, comma-separated. */
std::string integer_dtype_names();

/** @brief The dtype of a C++ sample type. */
template <class T>
constexpr dtype dtype_of() {
  static_assert(std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int16_t> ||
                    std::is_same_v<T, std::uint16_t> || std::is_same_v<T, std::int32_t> ||
                    std::is_same_v<T, std::uint32_t> || std::is_same_v<T, std::int64_t> ||
                    std::is_same_v<T, float16> || std::is_same_v<T, bfloat16> || std::is_same_v<T, float> ||
                    std::is_same_v<T, double>,
                "no dtype for this type");
  if constexpr (std::is_same_v<T, std::int8_t>) return dtype::int8;
  if constexpr (std::is_same_v<T, std::uint8_t>) return dtype::uint8;
  if constexpr (std::is_same_v<T, std::int16_t>) return dtype::int16;
  if constexpr (std::is_same_v<T, std::uint16_t>) return dtype::uint16;
  if constexpr (std::is_same_v<T, std::int32_t>) return dtype::int32;
  if constexpr (std::is_same_v<T, std::uint32_t>) return dtype::uint32;
  if constexpr (std::is_same_v<T, std::int64_t>) return dtype::int64;
  if constexpr (std::is_same_v<T, float16>) return dtype::float16;
  if constexpr (std::is_same_v<T, bfloat16>) return dtype::bfloat16;
  if constexpr (std::is_same_v<T, float>) return dtype::float32;
  return dtype::float64;
}

/** @brief Calls `visit(std::type_identity<T>{})` with the C++ type of `type`. */
template <class Visit>
decltype(auto) visit_dtype(dtype type, Visit&& visit) {
  switch (type) {
    case dtype::int8: return visit(std::type_identity<std::int8_t>{});
    case dtype::uint8: return visit(std::type_identity<std::uint8_t>{});
    case dtype::int16: return visit(std::type_identity<std::int16_t>{});
    case dtype::uint16: return visit(std::type_identity<std::uint16_t>{});
    case dtype::int32: return visit(std::type_identity<std::int32_t>{});
    case dtype::uint32: return visit(std::type_identity<std::uint32_t>{});
    case dtype::int64: return visit(std::type_identity<std::int64_t>{});
    case dtype::float16: return visit(std::type_identity<float16>{});
    case dtype::bfloat16: return visit(std::type_identity<bfloat16>{});
    case dtype::float32: return visit(std::type_identity<float>{});
    case dtype::float64: break;
  }
  return visit(std::type_identity<double>{});
}

/**
 * @brief A sample as messages and tables write it: integers in full, floating samples in the
 * fewest digits that read back as the same value of their own type (numpy's repr of a float16).
 */
template <class T>
std::string format_sample(T x) {
  if constexpr (is_half_float_v<T>) {
    const double value = static_cast<double>(x);
    if (!std::isfinite(value)) return fmt::format("{}", value);
    for (int digits = 1; digits < 17; ++digits) {
      const std::string text = fmt::format("{:.{}g}", value, digits);
      if (T::nearest(std::strtod(text.c_str(), nullptr)).bits == x.bits) return text;
    }
    return fmt::format("{}", value);
  } else {
    return fmt::format("{}", x);
  }
}

/** @brief What a .npy header says. */
struct npy_header {
  int major_version = 1;
  int minor_version = 0;
  std::string descr;  ///< e.g. "<f8"
  bool fortran_order = false;
  std::vector<std::uint64_t> shape;
  std::uint64_t data_offset = 0;   ///< bytes from the start of the file to the first element
  std::uint64_t num_elements = 1;  ///< the product of `shape` (1 for a 0-d array)
};

/** @brief How a .npy file stores its samples: their type, byte order, and whether they are bools. */
struct npy_storage {
  dtype type = dtype::uint8;
  bool big_endian = false;  ///< '>' in 'descr': each sample is byte-swapped as it is read
  bool bools = false;       ///< '|b1': numpy's bool, read as uint8 0 and 1
};

/** @brief Reverses the bytes of each of `count` values of `size` bytes at `data` (big-endian to this host's order). */
void swap_bytes(void* data, std::size_t count, std::size_t size);

/** @brief Whether `prefix` (the first bytes of a file) starts with the .npy magic string. */
bool has_npy_magic(std::span<const char> prefix);

/**
 * @brief Parses the header of the .npy file `path` (format versions 1.0, 2.0 and 3.0).
 * @throws tally::error (io_error, argument `argument`) naming the file and the field at fault.
 */
npy_header read_npy_header(std::FILE* file, const std::string& path, const std::string& argument);

/** @brief A complete version 1.0 header (magic to newline, 64-byte aligned) for a C-order array. */
std::string format_npy_header(std::string_view descr, std::span<const std::uint64_t> shape);

/**
 * @brief Reads bin edges for `--edges`: a 1-d .npy of any numeric dtype numpy saves (float16,
 * float32, float64, or integers within 2^53, each exact in float64; either byte order), or a text
 * file of numbers separated by whitespace, commas or newlines ('#' starts a comment). An array of
 * another dimension is an error, as numpy.histogram says ("bins must be 1d"). Checks nothing
 * about order.
 */
std::vector<double> read_edges_file(const std::filesystem::path& path, const std::string& argument);

/** @brief How a stream (stdin or a named pipe) is read: copied to a temporary file first, so that
 * it can be read twice, or once, in order, as it arrives (when nothing needs a second pass). */
enum class stream_reading : std::uint8_t { copy_first, in_one_pass };

/**
 * @brief A file of samples: a .npy file (recognized by its magic string; C or Fortran order, either
 * byte order, bool read as uint8) or a raw binary file of one dtype, little-endian, with no header.
 * The path `-` is stdin. Opening checks that the size matches the samples; a stream read in one
 * pass is checked at its end instead (finish_stream).
 */
class sample_file {
 public:
  /**
   * @param requested the `--dtype` given: required for raw files; for .npy files it must agree.
   * @param streams how a stream is read (files are read in place either way).
   * @throws tally::error (io_error / invalid_argument) naming the file and what is wrong.
   */
  sample_file(const std::filesystem::path& path, std::optional<dtype> requested,
              stream_reading streams = stream_reading::copy_first);

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  /** @brief The path, or "stdin" for `-`: how reports name the input. */
  [[nodiscard]] std::string name() const;
  [[nodiscard]] dtype type() const noexcept { return type_; }
  [[nodiscard]] bool is_npy() const noexcept { return is_npy_; }
  /** @brief ".npy" or "raw", with what else was read: "big-endian", "Fortran order", "bool as uint8". */
  [[nodiscard]] std::string layout() const;
  /** @brief The samples: a raw stream read in one pass knows them once finish_stream has run. */
  [[nodiscard]] std::uint64_t num_samples() const noexcept { return num_samples_; }
  /** @brief Whether this is a stream read in one pass, in order: read_next, then finish_stream. */
  [[nodiscard]] bool in_one_pass() const noexcept { return one_pass_ != nullptr; }
  /**
   * @brief The sample at `position` in the file's order, as numpy indexes it: "sample 7" for a 1-d
   * array or a raw file; for an array of several dimensions, its index in C order (numpy's ravel)
   * and its multi-index, "sample 7 (index [1, 3] of the 2x4 array)", which for a Fortran-order
   * file is not its position in the file.
   */
  [[nodiscard]] std::string sample_at(std::uint64_t position) const;
  /** @brief Bytes after the last sample that the header does not account for (.npy only). */
  [[nodiscard]] std::uint64_t trailing_bytes() const noexcept { return trailing_bytes_; }

  /**
   * @brief Throws tally::error (io_error) when the open file is no longer as it was when opened:
   * it grew, shrank, or was written (its size or modification time differ), so that what was read
   * may be a mix of two versions. Called after each pass over the file.
   */
  void check_unchanged() const;

  /**
   * @brief Reads samples [first, first + out.size()) of the file's order into `out`, in this
   * host's byte order (bools as 0 and 1).
   */
  template <class T>
  void read(std::uint64_t first, std::span<T> out) {
    if (dtype_of<T>() != type_) throw std::logic_error("sample_file::read: wrong sample type");
    read_bytes(data_offset_ + first * sizeof(T), out.data(), out.size_bytes());
    if (storage_.big_endian) swap_bytes(out.data(), out.size(), sizeof(T));
    if (storage_.bools) bools_to_0_1(out.data(), out.size_bytes());
  }

  /**
   * @brief A stream read in one pass: the next samples into `out`, returning how many (fewer than
   * out.size() only at the end of the samples), in this host's byte order.
   */
  template <class T>
  std::size_t read_next(std::span<T> out) {
    if (dtype_of<T>() != type_) throw std::logic_error("sample_file::read_next: wrong sample type");
    const std::size_t n = read_next_bytes(out.data(), out.size(), sizeof(T));
    if (storage_.big_endian) swap_bytes(out.data(), n, sizeof(T));
    if (storage_.bools) bools_to_0_1(out.data(), n * sizeof(T));
    return n;
  }
  /**
   * @brief After the last read_next: reads what follows the samples, and throws tally::error
   * (invalid_argument) when the stream ended inside a sample or before the samples a .npy header
   * promised. Sets num_samples (raw) and trailing_bytes (.npy).
   */
  void finish_stream();

 private:
  struct one_pass_state;
  std::size_t read_next_bytes(void* destination, std::size_t count, std::size_t size);
  void open_one_pass(const std::string& argument, const std::string& name, std::optional<dtype> requested);
  /// Takes a .npy header's type, layout and shape, and checks them against `--dtype`.
  void adopt_npy_header(const npy_header& header, std::optional<dtype> requested, const std::string& argument,
                        const std::string& name);
  /// A raw file's type: `--dtype`, which it needs.
  static dtype raw_dtype(std::optional<dtype> requested, const std::string& argument, const std::string& name);
  void read_bytes(std::uint64_t offset, void* destination, std::size_t bytes);
  /// numpy's bool is one byte that should be 0 or 1; any other byte is true, as numpy reads it.
  static void bools_to_0_1(void* data, std::size_t bytes);
  /// Opens stdin, or a pipe, as a file that can be read twice: see the constructor.
  void open_stream(const std::string& argument, const std::string& name);

  struct file_closer {
    void operator()(std::FILE* file) const noexcept { std::fclose(file); }
  };
  std::filesystem::path path_;
  std::unique_ptr<std::FILE, file_closer> file_;
  dtype type_ = dtype::uint8;
  bool is_npy_ = false;
  std::uint64_t data_offset_ = 0;
  std::uint64_t num_samples_ = 0;
  std::uint64_t trailing_bytes_ = 0;
  npy_storage storage_;                ///< .npy only: byte order and bools
  bool fortran_order_ = false;         ///< .npy only: the first axis varies fastest in the file
  std::vector<std::uint64_t> shape_;   ///< .npy only
  bool spooled_ = false;               ///< a stream (stdin, a pipe) copied to a temporary file
  std::shared_ptr<one_pass_state> one_pass_;  ///< a stream read in one pass
  std::uint64_t opened_bytes_ = 0;     ///< the file's size when opened (fstat)
  std::int64_t opened_modified_ns_ = 0;  ///< its modification time then, in ns since the epoch
};

/**
 * @brief Hands the samples of a file over in chunks of at most `chunk_bytes`, in file order,
 * through one reused buffer. A file that fits in one chunk is read once and kept, so that a
 * second pass over it (after a min/max pass) costs no I/O.
 */
template <class T>
class chunk_reader {
 public:
  chunk_reader(sample_file& file, std::uint64_t chunk_bytes)
      : file_(file),
        chunk_samples_(std::max<std::uint64_t>(1, chunk_bytes / sizeof(T))),
        capacity_(file.in_one_pass() ? chunk_samples_ : std::min(chunk_samples_, file.num_samples())),
        buffer_(huge_page_buffer<T>(static_cast<std::size_t>(capacity_))) {}

  /** @brief The most samples one chunk holds. */
  [[nodiscard]] std::uint64_t capacity() const noexcept { return capacity_; }
  /** @brief How many chunks a pass over the file takes. */
  [[nodiscard]] std::uint64_t num_chunks() const noexcept {
    return (file_.num_samples() + chunk_samples_ - 1) / chunk_samples_;
  }

  /**
   * @brief Calls `visit(std::span<const T> samples, std::uint64_t index_of_first)` per chunk, then
   * checks that the file did not change during the pass (sample_file::check_unchanged), so that
   * the caller uses what it gathered only when it is the whole of one version of the file.
   */
  template <class Visit>
  void for_each_chunk(Visit&& visit) {
    if (file_.in_one_pass()) {  // a stream, read as it arrives: its end says how many samples there are
      std::uint64_t first = 0;
      for (bool more = true; more;) {
        const std::span<T> chunk(buffer_.get(), static_cast<std::size_t>(capacity_));
        const std::size_t count = file_.read_next(chunk);
        more = count == chunk.size();
        if (count > 0) visit(std::span<const T>(chunk.first(count)), first);
        first += count;
      }
      file_.finish_stream();
      return;
    }
    const std::uint64_t total = file_.num_samples();
    for (std::uint64_t first = 0; first < total; first += chunk_samples_) {
      const std::uint64_t count = std::min(chunk_samples_, total - first);
      const std::span<T> chunk(buffer_.get(), static_cast<std::size_t>(count));
      if (!(cached_ && first == 0)) file_.read(first, chunk);
      cached_ = total <= chunk_samples_;
      visit(std::span<const T>(chunk), first);
    }
    file_.check_unchanged();
  }

 private:
  sample_file& file_;
  std::uint64_t chunk_samples_;
  std::uint64_t capacity_;
  std::unique_ptr<T[], free_delete> buffer_;
  bool cached_ = false;
};

}  // namespace tally::cli
