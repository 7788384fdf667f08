// The arithmetic of the deterministic sum split over ranks (tally/detail/sharded_sum.hpp), run on
// the host: ranks emulated one after the other, each cutting its shard into head, body and tail,
// exchanging its pieces' largest exponents, and adding its slots to the others'. The rounded sum
// must have the bits of the CPU backend's deterministic sum over the whole input, for every
// number of ranks and every sharding (empty shards, shards inside one chunk, cuts on and beside
// chunk boundaries). The GPU form (tally/nccl.hpp) runs the same functions on each rank's device.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/sum_inputs.hpp"
#include "tally/cpu/reduce.hpp"
#include "tally/detail/fixed_point_sum.hpp"
#include "tally/detail/sharded_sum.hpp"
#include "test_support.hpp"

namespace {

namespace fp = tally::detail::fixed_point;
namespace ss = tally::detail::sharded_sum;

TEST(ShardCut, PiecesAndBodyCoverTheShardAndTheBodyIsWholeChunks) {
  constexpr std::int64_t chunk = 512;
  for (const std::int64_t total : {0, 1, 511, 512, 513, 1024, 1500, 5000}) {
    for (std::int64_t offset = 0; offset <= total; offset += (offset < 1100 ? 1 : 97)) {
      for (const std::int64_t size : {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}, std::int64_t{300},
                                      std::int64_t{511}, std::int64_t{512}, std::int64_t{513}, total - offset}) {
        if (size < 0 || offset + size > total) continue;
        const ss::shard_cut cut = ss::cut_shard(offset, size, total, chunk);
        const std::string where =
            "total " + std::to_string(total) + " offset " + std::to_string(offset) + " size " + std::to_string(size);
        // head, body and tail, in that order, cover [0, size) without gaps.
        const std::int64_t head_end = cut.head.empty() ? 0 : cut.head.end;
        EXPECT_EQ(cut.head.empty() ? 0 : cut.head.begin, 0) << where;
        EXPECT_EQ(cut.body_begin, head_end) << where;
        EXPECT_LE(cut.body_begin, cut.body_end) << where;
        EXPECT_EQ(cut.tail.empty() ? size : cut.tail.begin, cut.body_end) << where;
        if (!cut.tail.empty()) {
          EXPECT_EQ(cut.tail.end, size) << where;
        }
        // The body starts on a chunk boundary of the whole input and ends on one or at its end.
        if (cut.body_end > cut.body_begin) {
          EXPECT_EQ((offset + cut.body_begin) % chunk, 0) << where;
          EXPECT_TRUE((offset + cut.body_end) % chunk == 0 || offset + cut.body_end == total) << where;
        }
        // Each piece lies in the chunk it names, which goes on beyond the shard.
        const ss::chunk_piece pieces[] = {cut.head, cut.tail};
        for (const ss::chunk_piece& piece : pieces) {
          if (piece.empty()) continue;
          EXPECT_EQ((offset + piece.begin) / chunk, piece.chunk) << where;
          EXPECT_EQ((offset + piece.end - 1) / chunk, piece.chunk) << where;
          const std::int64_t chunk_end = std::min((piece.chunk + 1) * chunk, total);
          EXPECT_TRUE(piece.chunk * chunk < offset + piece.begin || chunk_end > offset + piece.end) << where;
        }
      }
    }
  }
}

/// The sharded sum, ranks emulated in turn: what tally::nccl::reduce computes with `deterministic`.
template <class T>
T sharded_sum(std::span<const T> input, const std::vector<std::int64_t>& sizes) {
  constexpr int digits = fp::digits<T>;
  const auto total = static_cast<std::int64_t>(input.size());
  struct rank_state {
    std::int64_t offset = 0;
    std::int64_t size = 0;
    ss::shard_cut cut;
    std::vector<std::int64_t> slots;
    std::uint32_t flags = 0;
  };
  std::vector<rank_state> ranks(sizes.size());
  for (rank_state& rank : ranks) rank.slots.assign(digits, 0);
  std::vector<std::uint64_t> gathered;  // (chunk, top) of every rank's head and tail
  std::int64_t offset = 0;
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    rank_state& rank = ranks[r];
    rank.offset = offset;
    rank.size = sizes[r];
    offset += sizes[r];
    rank.cut = ss::cut_shard(rank.offset, rank.size, total, fp::chunk_size<T>);
    const T* shard = input.data() + rank.offset;
    for (std::int64_t at = rank.cut.body_begin; at < rank.cut.body_end; at += fp::chunk_size<T>) {
      fp::add_chunk_of(shard + at, std::min(fp::chunk_size<T>, rank.cut.body_end - at), rank.slots.data(), rank.flags);
    }
    const ss::chunk_piece pieces[] = {rank.cut.head, rank.cut.tail};
    for (const ss::chunk_piece& piece : pieces) {
      gathered.push_back(static_cast<std::uint64_t>(piece.chunk));
      gathered.push_back(ss::piece_top(shard + piece.begin, piece.end - piece.begin));
    }
  }
  const auto chunk_top = [&](std::int64_t chunk) {
    std::uint32_t top = 0;
    for (std::size_t i = 0; i < gathered.size(); i += 2) {
      if (static_cast<std::int64_t>(gathered[i]) == chunk)
        top = std::max(top, static_cast<std::uint32_t>(gathered[i + 1]));
    }
    return top;
  };
  std::vector<std::int64_t> slots(digits, 0);
  std::uint64_t spread = 0;
  for (rank_state& rank : ranks) {
    const T* shard = input.data() + rank.offset;
    const ss::chunk_piece pieces[] = {rank.cut.head, rank.cut.tail};
    for (const ss::chunk_piece& piece : pieces) {
      if (!piece.empty()) {
        ss::add_piece(shard + piece.begin, piece.end - piece.begin, chunk_top(piece.chunk), rank.slots.data(),
                      rank.flags);
      }
    }
    for (int j = 0; j < digits; ++j) {
      slots[j] =
          static_cast<std::int64_t>(static_cast<std::uint64_t>(slots[j]) + static_cast<std::uint64_t>(rank.slots[j]));
    }
    spread += ss::spread_flags(rank.flags);
  }
  return fp::round_slots<T>(slots.data(), ss::gather_flags(spread));
}

/// Cut points: random, plus ones on and beside chunk boundaries, sorted, as shard sizes.
std::vector<std::int64_t> random_sizes(std::int64_t total, int ranks, std::int64_t chunk, std::mt19937_64& rng) {
  std::vector<std::int64_t> cuts;
  for (int r = 1; r < ranks; ++r) {
    const std::int64_t base = total == 0 ? 0 : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(total + 1));
    const std::int64_t nudge = static_cast<std::int64_t>(rng() % 5);
    std::int64_t cut = base;
    if (nudge == 1)
      cut = base / chunk * chunk;
    else if (nudge == 2)
      cut = base / chunk * chunk + 1;
    else if (nudge == 3)
      cut = base / chunk * chunk - 1;
    cuts.push_back(std::clamp<std::int64_t>(cut, 0, total));
  }
  return tally::test::sizes_between_cuts(cuts, total);
}

template <class T>
void expect_same_bits_for_any_sharding() {
  const std::uint64_t seed = tally_test::test_seed();
  std::mt19937_64 rng(seed);
  tally::reduce_options deterministic;
  deterministic.deterministic = true;
  deterministic.algorithm = tally::strategy::sequential;
  for (const std::size_t n : {0, 1, 255, 256, 511, 512, 513, 1537, 20000, 100003}) {
    for (const bool giants : {false, true}) {
      std::vector<T> values = giants ? tally::test::cancelling_giants<T>(n, rng) : tally::test::wide_values<T>(n, rng);
      const T whole = tally::cpu::reduce<T>(values, tally::reduce_op::sum, deterministic).value;
      for (const int ranks : {1, 2, 3, 8}) {
        for (int trial = 0; trial < 6; ++trial) {
          const std::vector<std::int64_t> sizes =
              random_sizes(static_cast<std::int64_t>(n), ranks, fp::chunk_size<T>, rng);
          const T sharded = sharded_sum<T>(values, sizes);
          std::string shards;
          for (std::int64_t s : sizes) shards += std::to_string(s) + " ";
          EXPECT_EQ(std::bit_cast<typename fp::traits<T>::bits_type>(sharded),
                    std::bit_cast<typename fp::traits<T>::bits_type>(whole))
              << tally_test::seed_trace(seed) << ", " << n << (giants ? " cancelling giants" : " wide values")
              << ", shards " << shards << ": " << sharded << " against " << whole;
        }
      }
    }
  }
}

TEST(ShardedDeterministicSum, FloatHasTheWholeInputsBitsForAnySharding) { expect_same_bits_for_any_sharding<float>(); }

TEST(ShardedDeterministicSum, DoubleHasTheWholeInputsBitsForAnySharding) {
  expect_same_bits_for_any_sharding<double>();
}

TEST(ShardedDeterministicSum, SpecialValuesOnDifferentRanksCombineAsInOneSum) {
  // +inf on one rank and -inf on another make NaN, as in one sum; one infinity stays.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> values(2000, 1.0f);
  values[10] = inf;
  EXPECT_EQ(sharded_sum<float>(values, {1000, 1000}), inf);
  values[1500] = -inf;
  EXPECT_TRUE(std::isnan(sharded_sum<float>(values, {1000, 1000})));
  EXPECT_TRUE(std::isnan(sharded_sum<float>(values, {1, 1999})));
}

TEST(ShardedDeterministicSum, SpreadFlagsAddAsAnOr) {
  for (std::uint32_t a = 0; a < 16; ++a) {
    for (std::uint32_t b = 0; b < 16; ++b) {
      EXPECT_EQ(ss::gather_flags(ss::spread_flags(a) + ss::spread_flags(b) + ss::spread_flags(a)), a | b);
    }
  }
}

}  // namespace
