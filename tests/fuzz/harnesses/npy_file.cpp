// libFuzzer harness: the input is a whole .npy file, opened as `tally hist FILE` opens it (the
// header parsed by read_npy_header inside sample_file) and, when accepted, read to its last sample.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "harness_support.hpp"
#include "read_samples.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const tally::fuzz::scratch_file scratch(".npy");
  scratch.write(data, size);
  tally::fuzz::expect_clean_refusal(scratch.path(), [&] {
    tally::cli::sample_file file(scratch.path(), std::nullopt);
    // Small chunks, so that a file of a few samples is still read in several.
    tally::fuzz::read_every_sample(file, 24);
  });
  return 0;
}
