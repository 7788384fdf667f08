// Reading and writing the files of `tally hist`: the .npy header (a Python dict literal after a
// magic string and a length, parsed here by hand), raw sample files, stdin and `--edges` files.
#include "data_file.hpp"
#include "parallel_read.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "tally/error.hpp"

namespace tally::cli {
namespace {

constexpr std::string_view npy_magic{"\x93NUMPY", 6};

struct dtype_spelling {
  dtype type;
  std::string_view name;
  std::size_t size;
  std::string_view descr;
};
constexpr std::array<dtype_spelling, 11> dtype_spellings{{
    {dtype::int8, "int8", 1, "|i1"},
    {dtype::uint8, "uint8", 1, "|u1"},
    {dtype::int16, "int16", 2, "<i2"},
    {dtype::uint16, "uint16", 2, "<u2"},
    {dtype::int32, "int32", 4, "<i4"},
    {dtype::uint32, "uint32", 4, "<u4"},
    {dtype::int64, "int64", 8, "<i8"},
    {dtype::float16, "float16", 2, "<f2"},
    {dtype::bfloat16, "bfloat16", 2, ""},  // numpy has no bfloat16: raw files only
    {dtype::float32, "float32", 4, "<f4"},
    {dtype::float64, "float64", 8, "<f8"},
}};

const dtype_spelling& spelling_of(dtype type) {
  for (const auto& entry : dtype_spellings) {
    if (entry.type == type) return entry;
  }
  return dtype_spellings.back();
}

/// "FILE 'data.npy'": how every message about a file starts, so the argument and file are named.
std::string file_label(const std::string& argument, const std::string& path) {
  return argument + " '" + path + "'" + (path == "-" ? " (stdin)" : "");
}

[[noreturn]] void fail(errc code, const std::string& argument, const std::string& path, const std::string& what) {
  throw error(code, argument, file_label(argument, path) + ": " + what);
}

std::string system_reason() { return std::strerror(errno); }

std::int64_t modified_ns(const struct stat& status) {
  return std::int64_t{status.st_mtim.tv_sec} * 1'000'000'000 + status.st_mtim.tv_nsec;
}

/// "changed while being read: it shrank from 800 to 400 bytes": what is said of a file whose size moved.
std::string size_change(std::uint64_t opened_bytes, std::uint64_t bytes_now) {
  return "changed while being read: it " + std::string(bytes_now > opened_bytes ? "grew" : "shrank") + " from " +
         std::to_string(opened_bytes) + " to " + std::to_string(bytes_now) + " bytes";
}

/// Text from a file, quoted for a message: a hostile file's bytes must not reach the terminal raw
/// or by the megabyte, so bytes outside printable ASCII become \xNN and a long text is cut short
/// (after its trailing spaces, the padding of a .npy header, are dropped).
std::string quoted_excerpt(std::string_view text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n')) text.remove_suffix(1);
  constexpr std::size_t longest = 48;
  std::string quoted = "'";
  for (const char c : text.substr(0, longest)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && c != '\\') {
      quoted += c;
    } else {
      quoted += fmt::format("\\x{:02x}", byte);
    }
  }
  quoted += "'";
  if (text.size() > longest) quoted += fmt::format(" (the first {} of {} bytes)", longest, text.size());
  return quoted;
}

/// The dict literal of a .npy header, e.g. {'descr': '<f8', 'fortran_order': False, 'shape': (3,), }.
class npy_dict_parser {
 public:
  npy_dict_parser(std::string_view text, const std::string& path, const std::string& argument)
      : text_(text), path_(path), argument_(argument) {}

  void parse(npy_header& header) {
    bool seen_descr = false;
    bool seen_fortran_order = false;
    bool seen_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = parse_string("a key");
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() == '[')
          malformed("field 'descr' is a structured dtype (a list of fields), which tally does not read");
        header.descr = parse_string("field 'descr'");
        seen_descr = true;
      } else if (key == "fortran_order") {
        header.fortran_order = parse_bool("field 'fortran_order'");
        seen_fortran_order = true;
      } else if (key == "shape") {
        header.shape = parse_shape();
        seen_shape = true;
      } else {
        malformed("has an unexpected field " + quoted_excerpt(key) +
                  " (a .npy header holds descr, fortran_order and shape)");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      skip_space();
      if (peek() != '}') malformed("expected ',' or '}' after field '" + key + "'");
    }
    ++pos_;
    // numpy pads the dict with spaces and a newline; anything else there, numpy would refuse too.
    skip_space();
    if (pos_ < text_.size()) malformed("has " + quoted_excerpt(text_.substr(pos_)) + " after its closing '}'");
    if (!seen_descr) malformed("has no field 'descr'");
    if (!seen_fortran_order) malformed("has no field 'fortran_order'");
    if (!seen_shape) malformed("has no field 'shape'");
  }

 private:
  [[noreturn]] void malformed(const std::string& what) const {
    fail(errc::invalid_argument, argument_, path_, ".npy header " + what);
  }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  void expect(char c) {
    skip_space();
    if (peek() != c) {
      malformed(std::string("is malformed: expected '") + c + "' at offset " + std::to_string(pos_) +
                " of its dict, which reads " + quoted_excerpt(text_.substr(pos_)) + " there");
    }
    ++pos_;
  }

  std::string parse_string(const std::string& what) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') malformed(what + " is not a string");
    ++pos_;
    std::string value;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
      value += text_[pos_++];
    }
    if (pos_ >= text_.size()) malformed(what + " is an unterminated string");
    ++pos_;
    return value;
  }

  bool parse_bool(const std::string& what) {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    malformed(what + " is neither True nor False");
  }

  std::vector<std::uint64_t> parse_shape() {
    std::vector<std::uint64_t> shape;
    bool comma_after_last = false;  // (3) is Python's 3, not a tuple: numpy refuses it as a shape
    expect('(');
    while (true) {
      skip_space();
      if (peek() == ')') break;
      std::uint64_t dimension = 0;
      const auto [end, status] = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), dimension);
      if (status != std::errc()) malformed("field 'shape' holds something other than non-negative integers");
      pos_ = static_cast<std::size_t>(end - text_.data());
      if (peek() == 'L') ++pos_;  // Python 2 longs, in files written long ago
      shape.push_back(dimension);
      skip_space();
      comma_after_last = peek() == ',';
      if (comma_after_last) {
        ++pos_;
      } else if (peek() != ')') {
        malformed("field 'shape' is not a tuple of integers");
      }
    }
    if (shape.size() == 1 && !comma_after_last) {
      malformed("field 'shape' is an integer in parentheses, not a tuple (a 1-d shape is written (n,))");
    }
    ++pos_;
    return shape;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  const std::string& path_;
  const std::string& argument_;
};

/// The storage of a .npy `descr`, or an error that says why it is not read. numpy writes '<' (or
/// '>' on a big-endian machine, or for an array made so) before a type of several bytes and '|'
/// before a one-byte type; '=' (this host's order) is taken too. Bool is read as uint8.
npy_storage storage_of_descr(const std::string& descr, const std::string& path, const std::string& argument) {
  const bool marked = descr.size() == 3 && (descr[0] == '<' || descr[0] == '>' || descr[0] == '=' || descr[0] == '|');
  const std::string_view kind = marked ? std::string_view(descr).substr(1) : std::string_view();
  for (const auto& entry : dtype_spellings) {
    if (entry.descr.empty() || kind != entry.descr.substr(1)) continue;
    // '|' is numpy's mark for "no byte order", which only a one-byte type lacks.
    if (descr[0] == '|' && entry.size > 1) break;
    return {entry.type, descr[0] == '>' && entry.size > 1, false};
  }
  if (kind == "b1") return {dtype::uint8, false, true};
  std::string supported;
  for (const auto& entry : dtype_spellings) {
    if (entry.descr.empty()) continue;
    supported += (supported.empty() ? "" : ", ") + std::string(entry.descr) + " (" + std::string(entry.name) + ")";
  }
  fail(errc::invalid_argument, argument, path,
       ".npy header field 'descr' is " + quoted_excerpt(descr) + ", which tally does not read; supported: " +
           supported + ", |b1 (bool, read as uint8), in either byte order ('>' for big-endian)");
}

std::uint64_t read_little_endian(const unsigned char* bytes, int count) {
  std::uint64_t value = 0;
  for (int i = count - 1; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

}  // namespace

std::string_view to_string(dtype type) { return spelling_of(type).name; }

std::optional<dtype> parse_dtype(std::string_view name) {
  for (const auto& entry : dtype_spellings) {
    if (entry.name == name) return entry.type;
  }
  return std::nullopt;
}

std::size_t size_of(dtype type) { return spelling_of(type).size; }

std::string_view npy_descr(dtype type) { return spelling_of(type).descr; }

std::string dtype_names() {
  std::string names;
  for (const auto& entry : dtype_spellings) names += (names.empty() ? "" : ", ") + std::string(entry.name);
  return names;
}

bool is_integer(dtype type) {
  return type != dtype::float16 && type != dtype::bfloat16 && type != dtype::float32 && type != dtype::float64;
}

std::string integer_dtype_names() {
  std::string names;
  for (const auto& entry : dtype_spellings) {
    if (is_integer(entry.type)) names += (names.empty() ? "" : ", ") + std::string(entry.name);
  }
  return names;
}

bool has_npy_magic(std::span<const char> prefix) {
  return prefix.size() >= npy_magic.size() && std::string_view(prefix.data(), npy_magic.size()) == npy_magic;
}

namespace {

/// The magic string and version of a .npy preamble (its first 10 bytes).
npy_header npy_preamble(const unsigned char* preamble, const std::string& path, const std::string& argument) {
  if (!has_npy_magic({reinterpret_cast<const char*>(preamble), 6})) {
    fail(errc::invalid_argument, argument, path,
         "is not a .npy file: it does not start with the magic string \\x93NUMPY");
  }
  npy_header header;
  header.major_version = preamble[6];
  header.minor_version = preamble[7];
  if (header.major_version < 1 || header.major_version > 3 || header.minor_version != 0) {
    fail(errc::invalid_argument, argument, path,
         ".npy format version " + std::to_string(header.major_version) + "." + std::to_string(header.minor_version) +
             " is not one tally reads (1.0, 2.0, 3.0)");
  }
  return header;
}

constexpr std::uint64_t longest_npy_header = std::uint64_t{1} << 24;  // numpy itself refuses far shorter ones

/// The header's length field (2 bytes in version 1, 4 after), checked for size.
std::uint64_t npy_header_length(const npy_header& header, const unsigned char* preamble, const std::string& path,
                                const std::string& argument) {
  const std::uint64_t length = read_little_endian(preamble + 8, header.major_version == 1 ? 2 : 4);
  if (length > longest_npy_header) {
    fail(errc::invalid_argument, argument, path, ".npy header length " + std::to_string(length) + " is implausibly large");
  }
  return length;
}

/// The header's dictionary, and the number of elements its shape holds.
void parse_npy_dictionary(npy_header& header, const std::string& text, const std::string& path,
                          const std::string& argument) {
  npy_dict_parser(text, path, argument).parse(header);
  header.num_elements = 1;
  for (const std::uint64_t dimension : header.shape) {
    if (dimension != 0 && header.num_elements > std::numeric_limits<std::uint64_t>::max() / dimension) {
      fail(errc::invalid_argument, argument, path, ".npy header field 'shape' overflows 64 bits");
    }
    header.num_elements *= dimension;
  }
}

}  // namespace

npy_header read_npy_header(std::FILE* file, const std::string& path, const std::string& argument) {
  unsigned char preamble[12] = {};
  if (std::fseek(file, 0, SEEK_SET) != 0 || std::fread(preamble, 1, 10, file) != 10) {
    fail(errc::invalid_argument, argument, path, "is too short for a .npy file");
  }
  npy_header header = npy_preamble(preamble, path, argument);
  std::uint64_t length_field_end = 10;
  if (header.major_version > 1) {
    if (std::fread(preamble + 10, 1, 2, file) != 2)
      fail(errc::invalid_argument, argument, path, "is truncated in its .npy header");
    length_field_end = 12;
  }
  const std::uint64_t header_length = npy_header_length(header, preamble, path, argument);
  // Measured before the header's buffer is allocated: a 40-byte file may claim a 16 MiB header.
  const off_t file_bytes = std::fseek(file, 0, SEEK_END) == 0 ? ftello(file) : -1;
  if (file_bytes < 0 || fseeko(file, static_cast<off_t>(length_field_end), SEEK_SET) != 0) {
    fail(errc::io_error, argument, path, "cannot be read: " + system_reason());
  }
  if (length_field_end + header_length > static_cast<std::uint64_t>(file_bytes)) {
    fail(errc::invalid_argument, argument, path,
         "is truncated: its .npy header length " + std::to_string(header_length) + " goes past the end of the file (" +
             std::to_string(file_bytes) + " bytes)");
  }
  std::string text(static_cast<std::size_t>(header_length), '\0');
  if (std::fread(text.data(), 1, text.size(), file) != text.size()) {
    fail(errc::invalid_argument, argument, path, "is truncated in its .npy header");
  }
  header.data_offset = length_field_end + header_length;
  parse_npy_dictionary(header, text, path, argument);
  return header;
}

std::string format_npy_header(std::string_view descr, std::span<const std::uint64_t> shape) {
  std::string dict = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (";
  for (const std::uint64_t dimension : shape) dict += std::to_string(dimension) + ", ";
  if (shape.size() == 1)
    dict.pop_back();  // (n,) as Python writes a 1-tuple
  else if (shape.size() > 1)
    dict.resize(dict.size() - 2);
  dict += "), }";
  // magic (6) + version (2) + length (2) + dict + padding + '\n', a multiple of 64 in all.
  const std::size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string header(npy_magic);
  header += '\x01';
  header += '\x00';
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>((dict.size() >> 8) & 0xff);
  return header + dict;
}

std::vector<double> read_edges_file(const std::filesystem::path& path, const std::string& argument) {
  const std::string name = path.string();
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) fail(errc::io_error, argument, name, "cannot be opened: " + system_reason());
  std::string content;
  char block[1 << 16];
  for (std::size_t got; (got = std::fread(block, 1, sizeof(block), file.get())) > 0;) content.append(block, got);
  if (std::ferror(file.get())) fail(errc::io_error, argument, name, "cannot be read: " + system_reason());

  std::vector<double> edges;
  if (has_npy_magic(content)) {
    const npy_header header = read_npy_header(file.get(), name, argument);
    const npy_storage storage = storage_of_descr(header.descr, name, argument);
    if (storage.bools) {
      fail(errc::invalid_argument, argument, name,
           "holds bools (.npy header field 'descr' is '|b1'); edges are numbers: np.save(path, edges.astype(float))");
    }
    if (header.shape.size() != 1) {
      std::string shape;
      for (const std::uint64_t dimension : header.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(dimension);
      fail(errc::invalid_argument, argument, name,
           fmt::format("holds a {}-d array, shape ({}{}); the edges must be 1-d (numpy.histogram: '`bins` must be 1d'){}",
                       header.shape.size(), shape, header.shape.size() == 1 ? "," : "",
                       header.shape.empty() ? ". For N even bins, pass --bins N" : ""));
    }
    const std::size_t size = size_of(storage.type);
    // Divided, not multiplied: a shape of 2^61 edges times 8 bytes would wrap to 8.
    const std::uint64_t available = content.size() >= header.data_offset ? content.size() - header.data_offset : 0;
    if (header.num_elements > available / size) {
      fail(errc::invalid_argument, argument, name,
           "is shorter than its .npy header field 'shape' says: " + std::to_string(header.num_elements) +
               " edges, but only " + std::to_string(available) + " bytes follow the header");
    }
    edges.resize(static_cast<std::size_t>(header.num_elements));
    visit_dtype(storage.type, [&]<class T>(std::type_identity<T>) {
      for (std::size_t i = 0; i < edges.size(); ++i) {
        T value;
        std::memcpy(&value, content.data() + header.data_offset + i * sizeof(T), sizeof(T));
        if (storage.big_endian) swap_bytes(&value, 1, sizeof(T));
        edges[i] = static_cast<double>(value);
        // Samples are compared with the edges in float64, so an edge must be one exactly; and an
        // integer sample past 2^53, rounded to float64, could land on an edge numpy tells it from.
        constexpr double exact_integers = 9007199254740992.0;  // 2^53
        if constexpr (std::is_integral_v<T> && sizeof(T) == 8) {
          if (!(std::fabs(edges[i]) < exact_integers)) {
            fail(errc::invalid_argument, argument, name,
                 fmt::format("edge {} is {}, an integer edge beyond 2^53, which float64 (the precision tally "
                             "compares edges in) does not hold exactly; save the edges as float64",
                             i, value));
          }
        }
      }
    });
    return edges;
  }

  // Text: numbers separated by whitespace (or commas); '#' comments out the rest of a line.
  std::size_t line = 1;
  for (std::size_t pos = 0; pos < content.size();) {
    const char c = content[pos];
    if (c == '\n') {
      ++line;
      ++pos;
    } else if (std::isspace(static_cast<unsigned char>(c)) || c == ',') {
      ++pos;
    } else if (c == '#') {
      while (pos < content.size() && content[pos] != '\n') ++pos;
    } else {
      std::size_t end = pos;
      while (end < content.size() && !std::isspace(static_cast<unsigned char>(content[end])) && content[end] != ',' &&
             content[end] != '#') {
        ++end;
      }
      const std::string_view token(content.data() + pos, end - pos);
      const char* first = token.data();
      // from_chars takes no '+'; one is skipped, but not before a second sign ("+-1" is no number).
      if (token.size() > 1 && token[0] == '+' && token[1] != '-' && token[1] != '+') ++first;
      double value = 0.0;
      const auto [stop, status] = std::from_chars(first, token.data() + token.size(), value);
      if (status != std::errc() || stop != token.data() + token.size()) {
        const bool out_of_range = status == std::errc::result_out_of_range && stop == token.data() + token.size();
        fail(errc::invalid_argument, argument, name,
             "line " + std::to_string(line) + ": " + quoted_excerpt(token) +
                 (out_of_range ? " is a number beyond float64's range" : " is not a number"));
      }
      edges.push_back(value);
      pos = end;
    }
  }
  return edges;
}

namespace {

/// Byte-swaps `count` unsigned integers of type U in place, a loop the compiler vectorizes (a byte
/// at a time took about 6 ns a float32 sample).
template <class U>
void swap_each(unsigned char* bytes, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    U value;
    std::memcpy(&value, bytes + i * sizeof(U), sizeof(U));
    if constexpr (sizeof(U) == 2) value = __builtin_bswap16(value);
    if constexpr (sizeof(U) == 4) value = __builtin_bswap32(value);
    if constexpr (sizeof(U) == 8) value = __builtin_bswap64(value);
    std::memcpy(bytes + i * sizeof(U), &value, sizeof(U));
  }
}

}  // namespace

void swap_bytes(void* data, std::size_t count, std::size_t size) {
  auto* bytes = static_cast<unsigned char*>(data);
  switch (size) {
    case 2: return swap_each<std::uint16_t>(bytes, count);
    case 4: return swap_each<std::uint32_t>(bytes, count);
    case 8: return swap_each<std::uint64_t>(bytes, count);
    default:
      for (std::size_t i = 0; i < count; ++i, bytes += size) std::reverse(bytes, bytes + size);
  }
}

void sample_file::bools_to_0_1(void* data, std::size_t bytes) {
  auto* values = static_cast<std::uint8_t*>(data);
  for (std::size_t i = 0; i < bytes; ++i) values[i] = values[i] != 0 ? 1 : 0;
}

void sample_file::open_stream(const std::string& argument, const std::string& name) {
  // A stream can be read once, but tally reads its input twice when the range or a bincount's
  // length comes from the data: it is copied first to a temporary file, removed at once (so it
  // goes when tally does, however it ends), which nothing else can change while it is read.
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string folder = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
  const std::string where = "a temporary file in '" + folder + "' (set TMPDIR for another folder)";
  std::string pattern = folder + "/.tally-stream-XXXXXX";
  const int descriptor = ::mkstemp(pattern.data());
  if (descriptor < 0) fail(errc::io_error, argument, name, "cannot be copied to " + where + ": " + system_reason());
  ::unlink(pattern.c_str());
  std::unique_ptr<std::FILE, file_closer> copy(::fdopen(descriptor, "w+b"));
  if (!copy) {
    ::close(descriptor);
    fail(errc::io_error, argument, name, "cannot be copied to " + where + ": " + system_reason());
  }
  std::FILE* source = name == "-" ? stdin : file_.get();
  std::vector<char> block(std::size_t{1} << 20);
  for (std::size_t got; (got = std::fread(block.data(), 1, block.size(), source)) > 0;) {
    if (std::fwrite(block.data(), 1, got, copy.get()) != got) {
      fail(errc::io_error, argument, name, "cannot be copied to " + where + ": " + system_reason());
    }
  }
  if (std::ferror(source)) fail(errc::io_error, argument, name, "cannot be read: " + system_reason());
  if (std::fflush(copy.get()) != 0) {
    fail(errc::io_error, argument, name, "cannot be copied to " + where + ": " + system_reason());
  }
  file_ = std::move(copy);
  spooled_ = true;
}

sample_file::sample_file(const std::filesystem::path& path, std::optional<dtype> requested, stream_reading streams)
    : path_(path) {
  const std::string argument = "FILE";
  const std::string name = path.string();
  if (name == "-") {
    struct stat input {};
    if (::fstat(STDIN_FILENO, &input) != 0) fail(errc::io_error, argument, name, "cannot be read: " + system_reason());
    if (S_ISREG(input.st_mode)) {
      // A file redirected to stdin (tally hist - < data.npy) is read in place, whole, like any file.
      const int descriptor = ::dup(STDIN_FILENO);
      file_.reset(descriptor >= 0 ? ::fdopen(descriptor, "rb") : nullptr);
      if (!file_) fail(errc::io_error, argument, name, "cannot be opened: " + system_reason());
    } else if (::isatty(STDIN_FILENO)) {
      fail(errc::invalid_argument, argument, name,
           "is a terminal: pipe the samples in (... | tally hist -) or redirect a file (tally hist - < data.npy)");
    } else if (streams == stream_reading::in_one_pass) {
      file_.reset(::fdopen(::dup(STDIN_FILENO), "rb"));
      if (!file_) fail(errc::io_error, argument, name, "cannot be opened: " + system_reason());
      open_one_pass(argument, name, requested);
      return;
    } else {
      open_stream(argument, name);
    }
  } else {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) fail(errc::io_error, argument, name, "is a directory, not a file");
    file_.reset(std::fopen(path.c_str(), "rb"));
    if (!file_) fail(errc::io_error, argument, name, "cannot be opened: " + system_reason());
  }
  // The file opened, not whatever the path names a moment later: check_unchanged compares with this.
  struct stat opened {};
  if (::fstat(fileno(file_.get()), &opened) != 0) {
    fail(errc::io_error, argument, name, "has no size: " + system_reason());
  }
  if ((S_ISFIFO(opened.st_mode) || S_ISSOCK(opened.st_mode)) && streams == stream_reading::in_one_pass) {
    open_one_pass(argument, name, requested);
    return;
  }
  if (S_ISFIFO(opened.st_mode) || S_ISSOCK(opened.st_mode)) {
    open_stream(argument, name);  // a named pipe, or a shell's <(...)
    if (::fstat(fileno(file_.get()), &opened) != 0) {
      fail(errc::io_error, argument, name, "has no size: " + system_reason());
    }
  }
  if (!S_ISREG(opened.st_mode)) fail(errc::io_error, argument, name, "has no size: it is not a regular file");
  const auto file_bytes = static_cast<std::uint64_t>(opened.st_size);
  opened_bytes_ = file_bytes;
  opened_modified_ns_ = modified_ns(opened);

  char prefix[6] = {};
  if (std::fseek(file_.get(), 0, SEEK_SET) != 0) fail(errc::io_error, argument, name, "cannot be read: " + system_reason());
  const std::size_t prefix_bytes = std::fread(prefix, 1, sizeof(prefix), file_.get());
  is_npy_ = has_npy_magic({prefix, prefix_bytes});
  if (!is_npy_ && path.extension() == ".npy") {
    fail(errc::invalid_argument, argument, name,
         "is named .npy but does not start with the .npy magic string; is it a raw file misnamed?");
  }

  if (is_npy_) {
    const npy_header header = read_npy_header(file_.get(), name, argument);
    adopt_npy_header(header, requested, argument, name);
    const std::uint64_t size = size_of(type_);
    const std::uint64_t available = file_bytes >= header.data_offset ? file_bytes - header.data_offset : 0;
    if (header.num_elements > available / size) {
      fail(errc::invalid_argument, argument, name,
           "is truncated: its .npy header field 'shape' says " + std::to_string(header.num_elements) + " elements (" +
               (header.num_elements > std::numeric_limits<std::uint64_t>::max() / size
                    ? std::string("more than 2^64")
                    : std::to_string(header.num_elements * size)) +
               " bytes) but only " + std::to_string(available) + " bytes follow the header");
    }
    data_offset_ = header.data_offset;
    num_samples_ = header.num_elements;
    trailing_bytes_ = available - header.num_elements * size;
  } else {
    type_ = raw_dtype(requested, argument, name);
    const std::uint64_t size = size_of(type_);
    if (file_bytes % size != 0) {
      fail(errc::invalid_argument, argument, name,
           "has " + std::to_string(file_bytes) + " bytes, not a multiple of " + std::to_string(size) +
               " (the size of " + std::string(to_string(type_)) + "): is --dtype right?");
    }
    data_offset_ = 0;
    num_samples_ = file_bytes / size;
  }
}

/// A stream read in one pass: bytes already taken from it (the first ones, read to tell a .npy from
/// a raw stream) come first; a .npy stream's samples end where its header says.
struct sample_file::one_pass_state {
  std::vector<char> pending;          ///< bytes read ahead, not yet handed over
  std::size_t pending_at = 0;
  std::uint64_t samples_read = 0;
  std::uint64_t samples_expected = 0;  ///< .npy: the header's count; raw: none (read to the end)
  std::size_t partial_bytes = 0;       ///< bytes of an unfinished sample at the end
  std::string argument;
};

void sample_file::adopt_npy_header(const npy_header& header, std::optional<dtype> requested,
                                   const std::string& argument, const std::string& name) {
  // Fortran order holds the same samples in another order: their counts are the same.
  storage_ = storage_of_descr(header.descr, name, argument);
  type_ = storage_.type;
  fortran_order_ = header.fortran_order;
  shape_ = header.shape;
  if (requested && *requested != type_) {
    throw error(errc::invalid_argument, "--dtype",
                "argument '--dtype' is " + std::string(to_string(*requested)) + " but " + file_label(argument, name) +
                    " holds " + std::string(to_string(type_)) + " (.npy header field 'descr' is '" + header.descr +
                    "'); " +
                    (*requested == dtype::bfloat16
                         ? "numpy has no bfloat16, so bfloat16 samples come in raw files (their 16 bits each, "
                           "little-endian), not .npy files"
                         : "leave --dtype out for .npy files"));
  }
}

dtype sample_file::raw_dtype(std::optional<dtype> requested, const std::string& argument, const std::string& name) {
  if (!requested) {
    throw error(errc::invalid_argument, "--dtype",
                file_label(argument, name) +
                    " is a raw binary file (no .npy header): argument '--dtype' is required (" + dtype_names() + ")");
  }
  return *requested;
}

void sample_file::open_one_pass(const std::string& argument, const std::string& name, std::optional<dtype> requested) {
  auto state = std::make_shared<one_pass_state>();
  state->argument = argument;
  std::FILE* stream = file_.get();
#if defined(F_SETPIPE_SZ)
  // A pipe holds 64 KiB by default: 1 MiB (Linux's default limit for unprivileged processes) lets
  // the writer run further ahead between reads. A failure leaves the pipe as it was.
  (void)::fcntl(fileno(stream), F_SETPIPE_SZ, 1 << 20);
#endif
  const auto take = [&](void* into, std::size_t bytes) { return std::fread(into, 1, bytes, stream); };
  unsigned char preamble[12] = {};
  const std::size_t got = take(preamble, 10);
  if (std::ferror(stream)) fail(errc::io_error, argument, name, "cannot be read: " + system_reason());
  is_npy_ = has_npy_magic({reinterpret_cast<const char*>(preamble), std::min<std::size_t>(got, 6)});
  if (is_npy_) {
    if (got < 10) fail(errc::invalid_argument, argument, name, "is too short for a .npy file");
    npy_header header = npy_preamble(preamble, name, argument);
    std::uint64_t length_field_end = 10;
    if (header.major_version > 1) {
      if (take(preamble + 10, 2) != 2) fail(errc::invalid_argument, argument, name, "is truncated in its .npy header");
      length_field_end = 12;
    }
    const std::uint64_t header_length = npy_header_length(header, preamble, name, argument);
    std::string text(static_cast<std::size_t>(header_length), '\0');
    if (take(text.data(), text.size()) != text.size()) {
      fail(errc::invalid_argument, argument, name, "is truncated in its .npy header");
    }
    header.data_offset = length_field_end + header_length;
    parse_npy_dictionary(header, text, name, argument);
    adopt_npy_header(header, requested, argument, name);
    num_samples_ = header.num_elements;
    state->samples_expected = header.num_elements;
  } else {
    type_ = raw_dtype(requested, argument, name);
    state->pending.assign(reinterpret_cast<const char*>(preamble), reinterpret_cast<const char*>(preamble) + got);
    state->samples_expected = std::numeric_limits<std::uint64_t>::max();
  }
  one_pass_ = std::move(state);
}

std::size_t sample_file::read_next_bytes(void* destination, std::size_t count, std::size_t size) {
  one_pass_state& state = *one_pass_;
  count = static_cast<std::size_t>(std::min<std::uint64_t>(count, state.samples_expected - state.samples_read));
  auto* out = static_cast<char*>(destination);
  const std::size_t wanted = count * size;
  std::size_t have = std::min(wanted, state.pending.size() - state.pending_at);
  std::memcpy(out, state.pending.data() + state.pending_at, have);
  state.pending_at += have;
  while (have < wanted) {
    const std::size_t got = std::fread(out + have, 1, wanted - have, file_.get());
    if (got == 0) break;
    have += got;
  }
  if (have < wanted && std::ferror(file_.get())) {
    fail(errc::io_error, state.argument, path_.string(), "could not be read: " + system_reason());
  }
  // Bytes of an unfinished sample go back to be read first next time: only the stream's end can
  // leave them, and finish_stream reports them.
  state.partial_bytes = have % size;
  if (state.partial_bytes != 0) {
    state.pending.assign(out + have - state.partial_bytes, out + have);
    state.pending_at = 0;
  }
  state.samples_read += have / size;
  return have / size;
}

void sample_file::finish_stream() {
  one_pass_state& state = *one_pass_;
  const std::string name = path_.string();
  const std::uint64_t size = size_of(type_);
  if (is_npy_) {
    if (state.samples_read < state.samples_expected) {
      fail(errc::invalid_argument, state.argument, name,
           "is truncated: its .npy header field 'shape' says " + std::to_string(state.samples_expected) +
               " elements but the stream ended after " + std::to_string(state.samples_read) + " (and " +
               std::to_string(state.partial_bytes) + " bytes)");
    }
    char rest[1 << 16];
    for (std::size_t got; (got = std::fread(rest, 1, sizeof(rest), file_.get())) > 0;) trailing_bytes_ += got;
    trailing_bytes_ += state.pending.size() - state.pending_at;
  } else {
    if (state.partial_bytes != 0) {
      fail(errc::invalid_argument, state.argument, name,
           "has " + std::to_string(state.samples_read * size + state.partial_bytes) + " bytes, not a multiple of " +
               std::to_string(size) + " (the size of " + std::string(to_string(type_)) + "): is --dtype right?");
    }
    num_samples_ = state.samples_read;
  }
  if (std::ferror(file_.get())) fail(errc::io_error, state.argument, name, "could not be read: " + system_reason());
}

std::string sample_file::name() const { return path_.string() == "-" ? "stdin" : path_.string(); }

std::string sample_file::layout() const {
  if (!is_npy_) return "raw";
  std::string text = ".npy";
  if (storage_.big_endian) text += ", big-endian";
  if (fortran_order_ && shape_.size() > 1) text += ", Fortran order";
  if (storage_.bools) text += ", bool read as uint8";
  return text;
}

std::string sample_file::sample_at(std::uint64_t position) const {
  if (shape_.size() <= 1) return "sample " + std::to_string(position);
  // The multi-index of the position: in the file the last axis varies fastest (C order) or the
  // first (Fortran order); numpy's flat index (a.ravel()) is always C order's.
  std::vector<std::uint64_t> index(shape_.size());
  std::uint64_t rest = position;
  for (std::size_t k = 0; k < shape_.size(); ++k) {
    const std::size_t axis = fortran_order_ ? k : shape_.size() - 1 - k;
    index[axis] = rest % shape_[axis];  // no axis is 0 long: there is a sample
    rest /= shape_[axis];
  }
  std::uint64_t flat = 0;
  std::string index_text;
  std::string shape_text;
  for (std::size_t axis = 0; axis < shape_.size(); ++axis) {
    flat = flat * shape_[axis] + index[axis];
    if (axis > 0) {
      index_text += ", ";
      shape_text += "x";
    }
    index_text += std::to_string(index[axis]);
    shape_text += std::to_string(shape_[axis]);
  }
  return fmt::format("sample {} (index [{}] of the {} array)", flat, index_text, shape_text);
}

void sample_file::read_bytes(std::uint64_t offset, void* destination, std::size_t bytes) {
  if (bytes == 0) return;
  if (offset > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max()) ||
      fseeko(file_.get(), static_cast<off_t>(offset), SEEK_SET) != 0) {
    fail(errc::io_error, "FILE", path_.string(),
         "cannot seek to byte " + std::to_string(offset) + ": " + system_reason());
  }
  bool failed = false;  // large reads in pieces over the threads (parallel_read.hpp)
  if (read_at(file_.get(), offset, destination, bytes, failed) != bytes) {
    const std::string where = "byte " + std::to_string(offset) + " (" + std::to_string(bytes) + " bytes)";
    if (failed) {
      fail(errc::io_error, "FILE", path_.string(), "could not be read at " + where + ": " + system_reason());
    }
    struct stat now {};
    const bool shrank =
        ::fstat(fileno(file_.get()), &now) == 0 && static_cast<std::uint64_t>(now.st_size) < opened_bytes_;
    fail(errc::io_error, "FILE", path_.string(),
         shrank ? size_change(opened_bytes_, static_cast<std::uint64_t>(now.st_size)) + " (a read at " + where +
                      " found the end of the file)"
                : "ended early while being read: a read at " + where + " found the end of the file");
  }
}

void sample_file::check_unchanged() const {
  if (one_pass_) return;  // a stream read once: nothing else can change it, and it has no size
  struct stat now {};
  if (::fstat(fileno(file_.get()), &now) != 0) {
    fail(errc::io_error, "FILE", path_.string(), "cannot be checked after it was read: " + system_reason());
  }
  const auto bytes_now = static_cast<std::uint64_t>(now.st_size);
  if (bytes_now != opened_bytes_) fail(errc::io_error, "FILE", path_.string(), size_change(opened_bytes_, bytes_now));
  if (modified_ns(now) != opened_modified_ns_) {
    fail(errc::io_error, "FILE", path_.string(),
         "changed while being read: it was written to (the same size, a new modification time), so what was read "
         "may mix old and new data");
  }
}

}  // namespace tally::cli
