// The host side of tally::lab that every build has (with or without CUDA): the names of the
// contention choices, the validation of a case, the expectation and check of a contention run
// (the layout is described in tally/lab.hpp), and the comparison of a race's histogram with its
// reference. The GPU runs are in lab.cu.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>

#include "tally/error.hpp"
#include "tally/lab.hpp"

namespace tally::lab {

std::string_view to_string(memory_space m) {
  switch (m) {
    case memory_space::global: return "global";
    case memory_space::shared: return "shared";
    case memory_space::global_private: return "global_private";
  }
  return "?";
}

std::string_view to_string(atomic_scope s) {
  switch (s) {
    case atomic_scope::block: return "block";
    case atomic_scope::device: return "device";
    case atomic_scope::system: return "system";
  }
  return "?";
}

std::string_view to_string(atomic_op o) {
  switch (o) {
    case atomic_op::add: return "add";
    case atomic_op::cas: return "cas";
    case atomic_op::max: return "max";
    case atomic_op::exch: return "exch";
  }
  return "?";
}

std::string_view to_string(aggregation a) { return a == aggregation::none ? "none" : "warp"; }

namespace {
template <class Enum, std::size_t N>
std::optional<Enum> parse_among(std::string_view name, const Enum (&values)[N]) {
  for (const Enum v : values) {
    if (to_string(v) == name) return v;
  }
  return std::nullopt;
}
}  // namespace

std::optional<memory_space> parse_memory_space(std::string_view name) {
  return parse_among(name, {memory_space::global, memory_space::shared, memory_space::global_private});
}
std::optional<atomic_scope> parse_atomic_scope(std::string_view name) {
  return parse_among(name, {atomic_scope::block, atomic_scope::device, atomic_scope::system});
}
std::optional<atomic_op> parse_atomic_op(std::string_view name) {
  return parse_among(name, {atomic_op::add, atomic_op::cas, atomic_op::max, atomic_op::exch});
}
std::optional<aggregation> parse_aggregation(std::string_view name) {
  return parse_among(name, {aggregation::none, aggregation::warp});
}

std::int64_t total_threads(const contention_case& c) { return c.blocks * c.block_threads; }

bool scope_too_narrow(const contention_case& c) {
  return c.memory == memory_space::global && c.scope == atomic_scope::block && c.blocks > 1;
}

double contenders_per_address(const contention_case& c) {
  // Shared memory and global_private slices: only the threads of one block share a word.
  const double sharers = c.memory == memory_space::global ? static_cast<double>(total_threads(c))
                                                          : static_cast<double>(c.block_threads);
  const double addresses = static_cast<double>(c.addresses);
  double per_address = std::max(1.0, sharers / addresses);
  // Aggregated, the lanes of a warp on one word make one atomic: with A < 32 a warp's 32 lanes
  // spread over A words (lanes t and t + A share one), so each word gets 32 / A lanes' worth once.
  if (c.aggregate == aggregation::warp) per_address /= std::max(1.0, 32.0 / addresses);
  return std::max(1.0, per_address);
}

void validate_contention_case(const contention_case& c) {
  constexpr const char* function = "tally::lab::run_contention";
  constexpr std::int64_t max_addresses = std::int64_t{1} << 26;
  if (c.addresses < 1 || c.addresses > max_addresses) {
    throw_invalid_argument(function, "addresses", "must be between 1 and 2^26 (got " + std::to_string(c.addresses) + ")");
  }
  if (c.block_threads < 32 || c.block_threads > 1024 || c.block_threads % 32 != 0) {
    throw_invalid_argument(function, "block_threads",
                           "must be a multiple of 32 from 32 to 1024 (got " + std::to_string(c.block_threads) + ")");
  }
  if (c.blocks < 1 || c.blocks > (std::int64_t{1} << 31) - 1) {
    throw_invalid_argument(function, "blocks", "must be between 1 and 2^31 - 1 (got " + std::to_string(c.blocks) + ")");
  }
  if (c.ops_per_thread < 1) {
    throw_invalid_argument(function, "ops_per_thread", "must be >= 1 (got " + std::to_string(c.ops_per_thread) + ")");
  }
  // T K < 2^32: the values i T + t + 1 of max and exch, and every address walk, stay in 32 bits.
  const std::int64_t threads = total_threads(c);
  if (threads >= (std::int64_t{1} << 32) || c.ops_per_thread >= (std::int64_t{1} << 32) / threads) {
    throw_invalid_argument(function, "ops_per_thread",
                           "times the threads (" + std::to_string(threads) + ") must stay below 2^32 (got " +
                               std::to_string(c.ops_per_thread) + " per thread)");
  }
  if (c.memory == memory_space::shared && c.op == atomic_op::exch && c.blocks * c.addresses > (std::int64_t{1} << 28)) {
    throw_invalid_argument(function, "addresses",
                           "times the blocks must be at most 2^28 for a shared-memory exch (each block's words are "
                           "copied out)");
  }
  if (c.memory == memory_space::global_private && c.blocks * c.addresses > (std::int64_t{1} << 28)) {
    throw_invalid_argument(function, "addresses",
                           "times the blocks must be at most 2^28 for global_private (a slice of A words per block)");
  }
}

contention_expectation expected_contention(const contention_case& c) {
  validate_contention_case(c);
  contention_expectation want;
  const auto T = static_cast<std::uint64_t>(total_threads(c));
  const auto K = static_cast<std::uint64_t>(c.ops_per_thread);
  const auto A = static_cast<std::uint64_t>(c.addresses);
  const std::uint64_t updates = T * K;
  const auto per_block = static_cast<std::uint64_t>(c.block_threads);
  // Update number m = i T + t goes to word m mod A; so do the values m + 1 of max and exch.
  if (c.memory == memory_space::global_private && c.op != atomic_op::exch) {
    // A slice per block: thread t's updates land in slice t / block_threads. m grows along the
    // loops, so the last value a word receives is its maximum.
    want.words.assign(static_cast<std::size_t>(c.blocks) * A, 0);
    for (std::uint64_t i = 0; i < K; ++i) {
      for (std::uint64_t t = 0; t < T; ++t) {
        std::uint32_t& word = want.words[(t / per_block) * A + (i * T + t) % A];
        if (c.op == atomic_op::max) {
          word = static_cast<std::uint32_t>(i * T + t + 1);
        } else {
          word += static_cast<std::uint32_t>(1 + ((t ^ i) & 7));  // wraps mod 2^32, as the GPU
        }
      }
    }
    return want;
  }
  switch (c.op) {
    case atomic_op::add:
    case atomic_op::cas:
      want.words.assign(A, 0);
      for (std::uint64_t i = 0; i < K; ++i) {
        for (std::uint64_t t = 0; t < T; ++t) {
          want.words[(i * T + t) % A] += static_cast<std::uint32_t>(1 + ((t ^ i) & 7));  // wraps mod 2^32, as the GPU
        }
      }
      break;
    case atomic_op::max:
      want.words.assign(A, 0);
      // The largest m < T K with m mod A = a; none when a >= T K.
      for (std::uint64_t a = 0; a < std::min(A, updates); ++a) {
        want.words[a] = static_cast<std::uint32_t>(a + A * ((updates - 1 - a) / A) + 1);
      }
      break;
    case atomic_op::exch: {
      if (c.memory == memory_space::global) {
        want.touched.assign(A, 0);
        std::fill(want.touched.begin(), want.touched.begin() + static_cast<std::ptrdiff_t>(std::min(A, updates)), 1);
      } else {  // shared, global_private: per block
        want.touched.assign(static_cast<std::size_t>(c.blocks) * A, 0);
        for (std::uint64_t t = 0; t < T; ++t) {
          std::uint8_t* row = want.touched.data() + (t / per_block) * A;
          for (std::uint64_t i = 0; i < std::min(K, A); ++i) row[(i * T + t) % A] = 1;  // repeats after A rounds
        }
      }
      for (std::uint64_t v = 1; v <= updates; ++v) {
        want.written_sum += v;
        want.written_square_sum += v * v;
      }
      break;
    }
  }
  return want;
}

namespace {

/// Whether `word` can be the final value of word `a` (of block `block` in shared memory and
/// global_private, else -1):
/// a value some thread wrote there, and that thread's last write there.
bool is_last_write_of_a_thread(const contention_case& c, std::uint32_t word, std::uint64_t a, std::int64_t block) {
  if (word == 0) return false;
  const auto T = static_cast<std::uint64_t>(total_threads(c));
  const auto K = static_cast<std::uint64_t>(c.ops_per_thread);
  const auto A = static_cast<std::uint64_t>(c.addresses);
  const std::uint64_t m = word - 1;  // update number i T + t
  const std::uint64_t t = m % T;
  const std::uint64_t i = m / T;
  // Thread t comes back to a word every A / gcd(T, A) updates.
  const std::uint64_t period = A / std::gcd(T, A);
  if (i >= K || m % A != a || i + period < K) return false;
  return block < 0 || t / static_cast<std::uint64_t>(c.block_threads) == static_cast<std::uint64_t>(block);
}

std::optional<std::string> check_exchange(const contention_case& c, const contention_expectation& want,
                                          const contention_outcome& got) {
  // Shared memory: each block's words were copied out to block_words; global_private: the slices
  // are the words themselves. Both are checked block by block.
  const bool per_block = c.memory != memory_space::global;
  const std::vector<std::uint32_t>& finals = c.memory == memory_space::shared ? got.block_words : got.words;
  if (finals.size() != want.touched.size()) return std::string("the copied-back memory has the wrong size");
  const auto A = static_cast<std::uint64_t>(c.addresses);
  std::uint64_t final_sum = 0;
  std::uint64_t final_square_sum = 0;
  for (std::size_t k = 0; k < finals.size(); ++k) {
    const std::uint32_t word = finals[k];
    final_sum += word;
    final_square_sum += static_cast<std::uint64_t>(word) * word;
    const std::uint64_t a = k % A;
    const std::string where =
        per_block ? "block " + std::to_string(k / A) + "'s word " + std::to_string(a) : "word " + std::to_string(a);
    if (want.touched[k] == 0) {
      if (word != 0) return where + " holds " + std::to_string(word) + ", but no update went there";
      continue;
    }
    if (!is_last_write_of_a_thread(c, word, a, per_block ? static_cast<std::int64_t>(k / A) : -1)) {
      return where + " holds " + std::to_string(word) + ", which is not the last value any thread wrote there";
    }
  }
  if (got.returned_sum + final_sum != want.written_sum ||
      got.returned_square_sum + final_square_sum != want.written_square_sum) {
    return std::string("the old values returned and the final words are not the values written, each once (an "
                       "exchange was lost or duplicated)");
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_contention(const contention_case& c, const contention_expectation& want,
                                            const contention_outcome& got) {
  if (c.op == atomic_op::exch) return check_exchange(c, want, got);
  if (got.words.size() != want.words.size()) return std::string("the copied-back memory has the wrong size");
  const auto bad = std::mismatch(want.words.begin(), want.words.end(), got.words.begin());
  if (bad.first == want.words.end()) return std::nullopt;
  const auto k = static_cast<std::uint64_t>(bad.first - want.words.begin());
  const auto A = static_cast<std::uint64_t>(c.addresses);
  const std::string where = c.memory == memory_space::global_private
                                ? "block " + std::to_string(k / A) + "'s word " + std::to_string(k % A)
                                : "word " + std::to_string(k);
  return where + " holds " + std::to_string(*bad.second) + ", expected " + std::to_string(*bad.first);
}

race_count compare_with_reference(std::span<const std::uint32_t> counts, std::span<const std::uint64_t> reference) {
  if (counts.size() != reference.size()) {
    throw_invalid_argument("tally::lab::compare_with_reference", "counts", "must have as many bins as the reference");
  }
  race_count out;
  for (std::size_t b = 0; b < counts.size(); ++b) {
    out.expected += reference[b];
    out.actual += counts[b];
    if (counts[b] != reference[b]) ++out.wrong_bins;
    if (counts[b] > reference[b]) ++out.over_bins;
  }
  return out;
}

}  // namespace tally::lab
