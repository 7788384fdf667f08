// The lab's contention model on the host, in every build: the names of the contention choices, the
// argument checks, and above all the contention check every run of either backend is judged by. A
// sequential simulation of the layout (the updates applied one at a time, in an order a correct run
// could have taken) must pass; copies with one lost update, a wrong maximum, an exchange lost, a
// final word that is not the last write of any thread, or (global_private) an update in another
// block's slice must fail. GPU cases cover every memory; CPU cases are checked as one array.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tally/error.hpp"
#include "tally/lab.hpp"

namespace tally::test {
namespace {

using lab::aggregation;
using lab::atomic_op;
using lab::atomic_scope;
using lab::contention_case;
using lab::contention_outcome;
using lab::cpu_method;
using lab::gpu_method;
using lab::memory_space;

lab::gpu_method& gpu_of(contention_case& c) { return std::get<gpu_method>(c.method); }

/// Where a correct run leaves its words: the CPU's, like the GPU's global memory, in one array.
memory_space memory_of(const contention_case& c) {
  const auto* gpu = std::get_if<gpu_method>(&c.method);
  return gpu != nullptr ? gpu->memory : memory_space::global;
}

std::uint32_t value_of(const contention_case& c, std::uint64_t t, std::uint64_t i) {
  const auto T = static_cast<std::uint64_t>(c.threads);
  if (c.op == atomic_op::add || c.op == atomic_op::cas) return static_cast<std::uint32_t>(1 + ((t ^ i) & 7));
  return static_cast<std::uint32_t>(i * T + t + 1);
}

/// A correct run, simulated: round i of every thread, the threads in ascending or descending order
/// (not always the order of the expectation's own loop); in shared memory a copy per block, then
/// folded as the kernel folds; global_private a slice per block, left as it is.
contention_outcome simulate(const contention_case& c, bool reverse_threads) {
  const auto T = static_cast<std::uint64_t>(c.threads);
  const auto K = static_cast<std::uint64_t>(c.ops_per_thread);
  const auto A = static_cast<std::uint64_t>(c.addresses);
  const memory_space memory_kind = memory_of(c);
  const bool shared = memory_kind == memory_space::shared;
  const bool per_block = memory_kind != memory_space::global;
  const std::uint64_t copies = per_block ? static_cast<std::uint64_t>(lab::blocks_of(c)) : 1;
  std::vector<std::uint32_t> memory(copies * A, 0);
  contention_outcome out;
  for (std::uint64_t i = 0; i < K; ++i) {
    for (std::uint64_t k = 0; k < T; ++k) {
      const std::uint64_t t = reverse_threads ? T - 1 - k : k;
      const std::uint64_t copy =
          per_block ? t / static_cast<std::uint64_t>(std::get<gpu_method>(c.method).block_threads) : 0;
      std::uint32_t& word = memory[copy * A + (t + i * T) % A];
      const std::uint32_t v = value_of(c, t, i);
      switch (c.op) {
        case atomic_op::add:
        case atomic_op::cas: word += v; break;
        case atomic_op::max: word = std::max(word, v); break;
        case atomic_op::exch:
          out.returned_sum += word;
          out.returned_square_sum += static_cast<std::uint64_t>(word) * word;
          word = v;
          break;
      }
    }
  }
  if (memory_kind == memory_space::global_private) {
    out.words = memory;  // the slices are the result, for every op
    return out;
  }
  if (c.op == atomic_op::exch) {
    (shared ? out.block_words : out.words) = memory;
    if (shared) out.words.assign(A, 0);
    return out;
  }
  out.words.assign(A, 0);
  for (std::uint64_t copy = 0; copy < copies; ++copy) {
    for (std::uint64_t a = 0; a < A; ++a) {
      const std::uint32_t w = memory[copy * A + a];
      out.words[a] = c.op == atomic_op::max ? std::max(out.words[a], w) : out.words[a] + w;
    }
  }
  return out;
}

contention_case make_case(atomic_op op, memory_space memory, std::int64_t addresses, std::int64_t blocks = 3,
                          int block_threads = 64, std::int64_t ops = 5) {
  return {op, gpu_method{memory, atomic_scope::device, aggregation::none, block_threads}, addresses,
          blocks * block_threads, ops};
}

std::string describe(const contention_case& c) {
  return std::string(lab::to_string(c.op)) + " " + lab::method_name(c.method) + " A=" + std::to_string(c.addresses) +
         " T=" + std::to_string(c.threads) + " K=" + std::to_string(c.ops_per_thread);
}

// A = 1 (everything collides), A dividing T, A sharing a factor with T, A > T K (untouched words).
constexpr std::int64_t address_counts[] = {1, 4, 6, 64, 5000};

TEST(LabContentionCheck, AcceptsEverySimulatedCorrectRun) {
  for (const atomic_op op : lab::all_atomic_ops) {
    for (const memory_space memory : lab::all_memory_spaces) {
      for (const std::int64_t a : address_counts) {
        for (const bool reverse : {false, true}) {
          const contention_case c = make_case(op, memory, a);
          const auto want = lab::expected_contention(c);
          const auto wrong = lab::check_contention(c, want, simulate(c, reverse));
          EXPECT_FALSE(wrong.has_value()) << describe(c) << ": " << wrong.value_or("");
        }
      }
    }
  }
}

TEST(LabContentionCheck, SumsAndMaximaAreCheckedWordForWord) {
  for (const atomic_op op : {atomic_op::add, atomic_op::cas, atomic_op::max}) {
    for (const std::int64_t a : address_counts) {
      const contention_case c = make_case(op, memory_space::global, a);
      const auto want = lab::expected_contention(c);
      contention_outcome got = simulate(c, false);
      got.words[0] -= op == atomic_op::max ? 1 : value_of(c, 0, 0);  // thread 0's first update lost
      const auto wrong = lab::check_contention(c, want, got);
      ASSERT_TRUE(wrong.has_value()) << describe(c);
      EXPECT_NE(wrong->find("word 0"), std::string::npos) << *wrong;
    }
  }
}

TEST(LabContentionCheck, GlobalPrivateSlicesAreCheckedSliceBySlice) {
  // Three blocks of 64 threads, A = 4: slice b holds only block b's updates.
  for (const atomic_op op : {atomic_op::add, atomic_op::cas, atomic_op::max}) {
    const contention_case c = make_case(op, memory_space::global_private, 4);
    const auto want = lab::expected_contention(c);
    ASSERT_EQ(want.words.size(), 3u * 4u) << describe(c);
    contention_outcome got = simulate(c, true);
    ASSERT_FALSE(lab::check_contention(c, want, got).has_value()) << describe(c);
    // One update of block 2's thread 128 (round 0, word 0 of its slice) lost.
    got.words[2 * 4 + 0] -= op == atomic_op::max ? 1 : value_of(c, 128, 0);
    const auto wrong = lab::check_contention(c, want, got);
    ASSERT_TRUE(wrong.has_value()) << describe(c);
    EXPECT_NE(wrong->find("block 2's word 0"), std::string::npos) << *wrong;
  }
  // An update counted in the wrong block's slice: the totals over the slices still agree (a fold
  // would hide it), the slices do not.
  const contention_case c = make_case(atomic_op::add, memory_space::global_private, 4);
  const auto want = lab::expected_contention(c);
  contention_outcome got = simulate(c, false);
  got.words[0] -= 1;
  got.words[4] += 1;
  const auto wrong = lab::check_contention(c, want, got);
  ASSERT_TRUE(wrong.has_value());
  EXPECT_NE(wrong->find("block 0's word 0"), std::string::npos) << *wrong;
}

TEST(LabContentionCheck, GlobalPrivateMaximaAreEachBlocksOwn) {
  // Two blocks of 32 threads, K = 1, A = 4: block 0 writes 1..32, block 1 writes 33..64; slice b's
  // word a ends at the largest of its block's values with (value - 1) mod 4 = a.
  const contention_case c = make_case(atomic_op::max, memory_space::global_private, 4, 2, 32, 1);
  EXPECT_EQ(lab::expected_contention(c).words, (std::vector<std::uint32_t>{29, 30, 31, 32, 61, 62, 63, 64}));
}

TEST(LabContentionCheck, MaximaFollowTheClosedForm) {
  // T K = 32 x 1 updates over A = 5 words: word a ends at the largest m < 32 with m mod 5 = a, plus 1.
  const contention_case c = make_case(atomic_op::max, memory_space::global, 5, 1, 32, 1);
  EXPECT_EQ(lab::expected_contention(c).words, (std::vector<std::uint32_t>{31, 32, 28, 29, 30}));
}

TEST(LabContentionCheck, ExchangeLostOrDuplicatedIsCaught) {
  for (const memory_space memory : lab::all_memory_spaces) {
    for (const std::int64_t a : address_counts) {
      const contention_case c = make_case(atomic_op::exch, memory, a);
      const auto want = lab::expected_contention(c);
      contention_outcome got = simulate(c, false);
      got.returned_sum += 7;  // one returned value too many
      EXPECT_TRUE(lab::check_contention(c, want, got).has_value()) << describe(c);
      got = simulate(c, false);
      got.returned_square_sum -= 1;
      EXPECT_TRUE(lab::check_contention(c, want, got).has_value()) << describe(c);
    }
  }
}

TEST(LabContentionCheck, ExchangeFinalWordMustBeTheLastWriteOfSomeThreadThere) {
  // A = 4 over T = 64 threads: thread t writes word t mod 4 every round; its round-0 value is not
  // its last there, so a final word holding it is wrong even with the sums made to agree.
  const contention_case c = make_case(atomic_op::exch, memory_space::global, 4, 1, 64, 3);
  const auto want = lab::expected_contention(c);
  contention_outcome got = simulate(c, false);
  const std::uint32_t stale = value_of(c, 0, 0);  // thread 0, round 0, word 0
  const std::uint32_t final_word = got.words[0];
  got.words[0] = stale;
  got.returned_sum = got.returned_sum + final_word - stale;
  got.returned_square_sum =
      got.returned_square_sum + std::uint64_t{final_word} * final_word - std::uint64_t{stale} * stale;
  const auto wrong = lab::check_contention(c, want, got);
  ASSERT_TRUE(wrong.has_value());
  EXPECT_NE(wrong->find("not the last value"), std::string::npos) << *wrong;
}

TEST(LabContentionCheck, PerBlockExchangeWordsMustComeFromTheirOwnBlock) {
  // Two blocks, A = 256 >= T: every thread owns one word per round. Block 1's copy of a word that
  // only block 0 writes must stay 0.
  for (const memory_space memory : {memory_space::shared, memory_space::global_private}) {
    const contention_case c = make_case(atomic_op::exch, memory, 256, 2, 32, 1);
    const auto want = lab::expected_contention(c);
    contention_outcome got = simulate(c, false);
    ASSERT_FALSE(lab::check_contention(c, want, got).has_value()) << describe(c);
    // Block 0's word 0 moved to block 1.
    std::vector<std::uint32_t>& finals = memory == memory_space::shared ? got.block_words : got.words;
    ASSERT_EQ(finals.size(), 512u) << describe(c);
    std::swap(finals[0], finals[256]);
    EXPECT_TRUE(lab::check_contention(c, want, got).has_value()) << describe(c);
  }
}

TEST(LabContentionCheck, UntouchedWordsMustStayZero) {
  const contention_case c = make_case(atomic_op::exch, memory_space::global, 5000);  // T K = 960 < A
  const auto want = lab::expected_contention(c);
  contention_outcome got = simulate(c, false);
  got.words[4999] = 1;
  got.returned_sum -= 1;
  got.returned_square_sum -= 1;
  const auto wrong = lab::check_contention(c, want, got);
  ASSERT_TRUE(wrong.has_value());
  EXPECT_NE(wrong->find("no update went there"), std::string::npos) << *wrong;
}

TEST(LabContentionCheck, CpuCasesAreCheckedAsOneArray) {
  // The CPU's runs leave one array of A words, as the GPU's global memory does: the same check.
  for (const atomic_op op : lab::all_atomic_ops) {
    for (const std::int64_t a : address_counts) {
      const contention_case c{op, cpu_method::atomic, a, 6, 50};
      const auto want = lab::expected_contention(c);
      contention_outcome got = simulate(c, true);
      ASSERT_FALSE(lab::check_contention(c, want, got).has_value()) << describe(c);
      if (op == atomic_op::exch) {
        got.returned_sum += 7;  // one returned value too many
      } else {
        got.words[0] -= 1;  // a unit of a sum lost, or a maximum one too small
      }
      EXPECT_TRUE(lab::check_contention(c, want, got).has_value()) << describe(c);
    }
  }
}

TEST(LabContentionCase, BadFieldsAreNamed) {
  const auto field_of = [](contention_case c) -> std::string {
    try {
      lab::validate_contention_case(c);
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument);
      return e.argument();
    }
    return "";
  };
  const contention_case good = make_case(atomic_op::add, memory_space::global, 16);
  EXPECT_EQ(field_of(good), "");
  contention_case c = good;
  c.addresses = 0;
  EXPECT_EQ(field_of(c), "addresses");
  c.addresses = (std::int64_t{1} << 26) + 1;
  EXPECT_EQ(field_of(c), "addresses");
  c = good;
  gpu_of(c).block_threads = 100;
  EXPECT_EQ(field_of(c), "block_threads");
  c = good;
  c.threads = 0;
  EXPECT_EQ(field_of(c), "threads");
  c.threads = 100;  // not a multiple of the 64 block threads
  EXPECT_EQ(field_of(c), "threads");
  c = good;
  c.ops_per_thread = 0;
  EXPECT_EQ(field_of(c), "ops_per_thread");
  c = good;
  gpu_of(c).block_threads = 1024;
  c.threads = std::int64_t{1} << 30;
  c.ops_per_thread = 4;  // T K = 2^32: max and exch values would wrap
  EXPECT_EQ(field_of(c), "ops_per_thread");
  c = good;
  gpu_of(c).memory = memory_space::global_private;
  gpu_of(c).block_threads = 32;
  c.threads = 32 << 12;
  c.addresses = 1 << 16;  // blocks x A = 2^28: the largest slice array
  EXPECT_EQ(field_of(c), "");
  c.addresses = (1 << 16) + 1;
  EXPECT_EQ(field_of(c), "addresses");
  gpu_of(c).memory = memory_space::global;  // one array of A words: fine
  EXPECT_EQ(field_of(c), "");
}

TEST(LabContentionCase, NamesRoundTripAndContendersFollowTheLayout) {
  for (const atomic_op op : lab::all_atomic_ops) EXPECT_EQ(lab::parse_atomic_op(lab::to_string(op)), op);
  for (const auto s : {atomic_scope::block, atomic_scope::device, atomic_scope::system}) {
    EXPECT_EQ(lab::parse_atomic_scope(lab::to_string(s)), s);
  }
  for (const memory_space m : lab::all_memory_spaces) EXPECT_EQ(lab::parse_memory_space(lab::to_string(m)), m);
  EXPECT_EQ(lab::parse_memory_space("global_private"), memory_space::global_private);
  EXPECT_FALSE(lab::parse_memory_space("private").has_value());
  EXPECT_EQ(lab::parse_aggregation("warp"), aggregation::warp);
  EXPECT_FALSE(lab::parse_atomic_op("fetch_or").has_value());

  contention_case c = make_case(atomic_op::cas, memory_space::global, 1, 4, 256);
  EXPECT_EQ(lab::contenders_per_address(c), 1024.0);
  gpu_of(c).aggregate = aggregation::warp;
  EXPECT_EQ(lab::contenders_per_address(c), 32.0);  // one leader per warp
  gpu_of(c).memory = memory_space::shared;
  EXPECT_EQ(lab::contenders_per_address(c), 8.0);  // the block's 8 warps
  c.addresses = 4096;
  EXPECT_EQ(lab::contenders_per_address(c), 1.0);
  gpu_of(c).memory = memory_space::global;
  gpu_of(c).scope = atomic_scope::block;
  EXPECT_TRUE(lab::scope_too_narrow(c));
  gpu_of(c).memory = memory_space::shared;
  EXPECT_FALSE(lab::scope_too_narrow(c));
  gpu_of(c).memory = memory_space::global_private;  // a slice per block: block scope is enough
  EXPECT_FALSE(lab::scope_too_narrow(c));
  c.addresses = 1;
  gpu_of(c).aggregate = aggregation::none;
  EXPECT_EQ(lab::contenders_per_address(c), 256.0);  // the block's threads, not the grid's
  EXPECT_EQ(lab::method_name(c.method), "global_private-block-none");
  EXPECT_EQ(lab::backend_of(c), backend::gpu);
  EXPECT_EQ(lab::blocks_of(c), 4);

  const contention_case on_cpu{atomic_op::cas, cpu_method::atomic, 1, 4, 8};
  EXPECT_EQ(lab::method_name(on_cpu.method), "atomic");
  EXPECT_EQ(lab::backend_of(on_cpu), backend::cpu);
  EXPECT_FALSE(lab::scope_too_narrow(on_cpu));
  for (const cpu_method m : lab::all_cpu_methods) EXPECT_EQ(lab::parse_cpu_method(lab::to_string(m)), m);
}

}  // namespace
}  // namespace tally::test
