// Reading every sample of an opened file as `tally hist` does (chunk_reader, chunk by chunk), for
// the harnesses of the .npy and raw readers; the samples are folded into a sum so that each read
// byte is used, and the first of each chunk is formatted as the CLI's messages format samples.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

#include "data_file.hpp"

namespace tally::fuzz {

/** @brief Reads every sample of `file` in chunks of at most `chunk_bytes`; returns a sum of their bits. */
inline std::uint64_t read_every_sample(cli::sample_file& file, std::uint64_t chunk_bytes) {
  return cli::visit_dtype(file.type(), [&]<class T>(std::type_identity<T>) {
    cli::chunk_reader<T> reader(file, chunk_bytes);
    std::uint64_t sum = 0;
    std::uint64_t samples_seen = 0;
    reader.for_each_chunk([&](std::span<const T> chunk, std::uint64_t first_index) {
      if (first_index != samples_seen || chunk.empty() || chunk.size() > reader.capacity()) std::abort();
      samples_seen += chunk.size();
      for (const T& sample : chunk) {
        std::uint64_t bits = 0;
        std::memcpy(&bits, &sample, sizeof(T));
        sum += bits;
      }
      sum += cli::format_sample(chunk.front()).size();
    });
    if (samples_seen != file.num_samples()) std::abort();
    return sum;
  });
}

}  // namespace tally::fuzz
