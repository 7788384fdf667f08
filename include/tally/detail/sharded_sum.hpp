// The deterministic sum of one input split over ranks (GPUs), with the same bits as one call over
// the whole: how a shard cuts into the input's chunks, and the arithmetic of a chunk's piece
// (host and device code; no CUDA header needed).
//
// The deterministic sum (fixed_point_sum.hpp) cuts its input by index into chunks of
// chunk_size<T> samples and puts each chunk on a grid set by the chunk's largest exponent. A shard
// that starts or ends inside a chunk holds only a piece of it, and the chunk's grid depends on the
// pieces the other ranks hold. So a rank splits its shard into
//   - a head: the piece of a chunk that began on an earlier rank (empty when the shard starts on a
//     chunk boundary),
//   - a body of whole chunks, aligned to the input's chunks, summed as one call would sum them,
//   - a tail: the piece of a chunk that goes on into a later rank;
// the ranks exchange the largest finite exponent of each piece, each piece is summed on the
// grid of its whole chunk, and every rank's slots are added. Integer additions in any grouping
// give the same value, so the rounded sum has the bits of the one-call sum, for any number of
// ranks and any sharding.
#pragma once

#include <cstdint>

#include "tally/config.hpp"
#include "tally/detail/fixed_point_sum.hpp"

namespace tally::detail::sharded_sum {

/// A piece of one chunk held by this rank: local indices [begin, end) of the shard, and the
/// chunk's index in the whole input (-1 for no piece).
struct chunk_piece {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t chunk = -1;
  constexpr bool empty() const { return begin == end; }
};

/// How a shard (local indices [0, size)) cuts into the input's chunks: head, body [body_begin,
/// body_end) of whole chunks starting on a chunk boundary, tail.
struct shard_cut {
  chunk_piece head;
  std::int64_t body_begin = 0;
  std::int64_t body_end = 0;
  chunk_piece tail;
};

/// The cut of the shard that starts at `offset` in an input of `total` samples and holds `size`.
/// The input's last chunk may be short; a shard holding all of it sums it in its body.
constexpr shard_cut cut_shard(std::int64_t offset, std::int64_t size, std::int64_t total, std::int64_t chunk_size) {
  shard_cut cut;
  if (size <= 0) return cut;
  const std::int64_t start = offset;
  const std::int64_t stop = offset + size;
  const std::int64_t first_chunk = start / chunk_size;
  std::int64_t body_start = start;  // global index
  if (start % chunk_size != 0) {
    const std::int64_t head_stop = stop < (first_chunk + 1) * chunk_size ? stop : (first_chunk + 1) * chunk_size;
    cut.head = {0, head_stop - start, first_chunk};
    body_start = head_stop;
  }
  std::int64_t body_stop = stop;
  const std::int64_t last_chunk = (stop - 1) / chunk_size;
  const std::int64_t last_chunk_end = (last_chunk + 1) * chunk_size < total ? (last_chunk + 1) * chunk_size : total;
  // The last chunk goes on past this shard and was not already the head's.
  if (stop < last_chunk_end && last_chunk * chunk_size >= body_start) {
    cut.tail = {last_chunk * chunk_size - start, size, last_chunk};
    body_stop = last_chunk * chunk_size;
  }
  cut.body_begin = body_start - start;
  cut.body_end = body_stop - start;
  return cut;
}

/// The magnitude bits of the top word of the largest finite sample of x[0, n) (0 if none): what a
/// rank tells the others of a piece, so that all agree on the chunk's grid.
template <class T>
TALLY_HOST_DEVICE inline std::uint32_t piece_top(const T* x, std::int64_t n) {
  using traits = fixed_point::traits<T>;
  std::uint32_t max_top = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t top = traits::top_word(fixed_point::to_bits(x[i])) & 0x7fffffffu;
    if (top < fixed_point::special_top<T> && top > max_top) max_top = top;
  }
  return max_top;
}

/// Adds the piece x[0, n) of a chunk whose largest finite top word (over all its pieces) is
/// `chunk_top` to the slots and flags: the same integers the whole chunk's sum gives these samples.
template <class T>
TALLY_HOST_DEVICE inline void add_piece(const T* x, std::int64_t n, std::uint32_t chunk_top, std::int64_t* slots,
                                        std::uint32_t& flags) {
  const int e = fixed_point::chunk_exponent<T>(chunk_top);
  typename fixed_point::traits<T>::chunk_sum sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t special = fixed_point::special_flags(x[i]);
    if (special != 0) {
      flags |= special;
    } else {
      sum += fixed_point::to_fixed(x[i], e);
    }
  }
  fixed_point::add_chunk(slots, e, sum);
}

/// The flags of a rank as a word whose 16-bit fields count the ranks that saw each flag: adding
/// the words of up to 65535 ranks is their OR, in a collective that only adds.
constexpr std::uint64_t spread_flags(std::uint32_t flags) {
  std::uint64_t spread = 0;
  for (int bit = 0; bit < 4; ++bit) {
    if ((flags >> bit) & 1u) spread |= std::uint64_t{1} << (16 * bit);
  }
  return spread;
}

/// The OR of the flags whose spread words were added.
constexpr std::uint32_t gather_flags(std::uint64_t spread_sum) {
  std::uint32_t flags = 0;
  for (int bit = 0; bit < 4; ++bit) {
    if (((spread_sum >> (16 * bit)) & 0xffffu) != 0) flags |= 1u << bit;
  }
  return flags;
}

}  // namespace tally::detail::sharded_sum
