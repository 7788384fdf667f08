// libFuzzer harness: the input is a whole `--edges` file, read by read_edges_file as `tally hist
// --edges FILE` reads it: a 1-d .npy of numbers when it starts with the .npy magic string, else text.
#include <cstddef>
#include <cstdint>

#include "data_file.hpp"
#include "harness_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const tally::fuzz::scratch_file scratch(".edges");
  scratch.write(data, size);
  tally::fuzz::expect_clean_refusal(scratch.path(), [&] {
    const std::vector<double> edges = tally::cli::read_edges_file(scratch.path(), "--edges");
    // A text file holds at most one edge per two bytes ("1 1 1"); a .npy file one per byte (int8).
    if (edges.size() > size) std::abort();
  });
  return 0;
}
