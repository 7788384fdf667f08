// libFuzzer harness: a raw sample file with each `--dtype`. The input's first byte picks the dtype
// (modulo the 11 there are) and its second the chunk size in bytes (1 to 256); the rest is the file,
// opened and read to its last sample as `tally hist FILE --dtype TYPE` reads it.
#include <cstddef>
#include <cstdint>

#include "harness_support.hpp"
#include "read_samples.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const tally::cli::dtype type = tally::cli::all_dtypes[data[0] % tally::cli::all_dtypes.size()];
  const std::uint64_t chunk_bytes = std::uint64_t{data[1]} + 1;
  static const tally::fuzz::scratch_file scratch(".bin");
  scratch.write(data + 2, size - 2);
  tally::fuzz::expect_clean_refusal(scratch.path(), [&] {
    tally::cli::sample_file file(scratch.path(), type);
    tally::fuzz::read_every_sample(file, chunk_bytes);
  });
  return 0;
}
