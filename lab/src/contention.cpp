// The contention model of the lab on the host, for both backends (tally/lab/contention.hpp): the
// names, the validation of a case, the expectation and check of a run, and run_contention, which
// runs, checks and times the trials a backend supplies (lab/src/contention_trials.hpp).
#include "tally/lab/contention.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>

#include "contention_trials.hpp"
#include "tally/cpu/parallel.hpp"
#include "tally/error.hpp"

namespace tally::lab {

namespace {

template <class Enum, std::size_t N>
using name_table = std::array<std::pair<Enum, std::string_view>, N>;

constexpr name_table<atomic_op, 4> atomic_op_names{
    {{atomic_op::add, "add"}, {atomic_op::cas, "cas"}, {atomic_op::max, "max"}, {atomic_op::exch, "exch"}}};
constexpr name_table<cpu_method, 3> cpu_method_names{
    {{cpu_method::atomic, "atomic"}, {cpu_method::critical, "critical"}, {cpu_method::privatized, "privatized"}}};
constexpr name_table<memory_space, 3> memory_space_names{{{memory_space::global, "global"},
                                                          {memory_space::shared, "shared"},
                                                          {memory_space::global_private, "global_private"}}};
constexpr name_table<atomic_scope, 3> atomic_scope_names{
    {{atomic_scope::block, "block"}, {atomic_scope::device, "device"}, {atomic_scope::system, "system"}}};
constexpr name_table<aggregation, 2> aggregation_names{{{aggregation::none, "none"}, {aggregation::warp, "warp"}}};

template <class Enum, std::size_t N>
std::string_view name_in(const name_table<Enum, N>& names, Enum value) {
  for (const auto& [v, name] : names) {
    if (v == value) return name;
  }
  return "?";
}

template <class Enum, std::size_t N>
std::optional<Enum> value_in(const name_table<Enum, N>& names, std::string_view name) {
  for (const auto& [v, n] : names) {
    if (n == name) return v;
  }
  return std::nullopt;
}

constexpr const char* run_function = "tally::lab::run_contention";

const gpu_method* gpu_method_of(const contention_case& c) { return std::get_if<gpu_method>(&c.method); }

/// Where a correct run's final words are: one array of A words (the CPU's, and the GPU's global
/// memory), a copy per block (shared memory) or a slice per block (global_private).
memory_space memory_of(const contention_case& c) {
  const gpu_method* gpu = gpu_method_of(c);
  return gpu != nullptr ? gpu->memory : memory_space::global;
}

/// The threads that share a block's words: the GPU's blocks, and on the CPU all of them.
std::uint64_t block_threads_of(const contention_case& c) {
  const gpu_method* gpu = gpu_method_of(c);
  return static_cast<std::uint64_t>(gpu != nullptr ? gpu->block_threads : c.threads);
}

}  // namespace

std::string_view to_string(atomic_op o) { return name_in(atomic_op_names, o); }
std::string_view to_string(cpu_method m) { return name_in(cpu_method_names, m); }
std::string_view to_string(memory_space m) { return name_in(memory_space_names, m); }
std::string_view to_string(atomic_scope s) { return name_in(atomic_scope_names, s); }
std::string_view to_string(aggregation a) { return name_in(aggregation_names, a); }
std::optional<atomic_op> parse_atomic_op(std::string_view name) { return value_in(atomic_op_names, name); }
std::optional<cpu_method> parse_cpu_method(std::string_view name) { return value_in(cpu_method_names, name); }
std::optional<memory_space> parse_memory_space(std::string_view name) { return value_in(memory_space_names, name); }
std::optional<atomic_scope> parse_atomic_scope(std::string_view name) { return value_in(atomic_scope_names, name); }
std::optional<aggregation> parse_aggregation(std::string_view name) { return value_in(aggregation_names, name); }

std::string method_name(const contention_method& method) {
  if (const auto* cpu = std::get_if<cpu_method>(&method)) return std::string(to_string(*cpu));
  const auto& gpu = std::get<gpu_method>(method);
  return std::string(to_string(gpu.memory)) + "-" + std::string(to_string(gpu.scope)) + "-" +
         std::string(to_string(gpu.aggregate));
}

std::string layout_text(backend b) {
  const std::string common =
      "thread t (of T) sends its i-th update to word (t + i*T) mod A; add/cas add 1 + ((t xor i) mod 8) (sums mod "
      "2^32), max/exch write i*T + t + 1; 32-bit words, contiguous (16 to a 64-byte line); ";
  if (b == backend::cpu) return common + "T logical threads over the OpenMP team";
  return common +
         "T = blocks x block threads; shared memory: a zeroed copy of the A words per block, folded into global "
         "memory at the end (zeroing and fold timed); global_private: a slice of A global words per block (blocks x "
         "A, zeroed before the timed launch), the same updates of its block's threads, each slice checked, no fold";
}

backend backend_of(const contention_case& c) { return gpu_method_of(c) != nullptr ? backend::gpu : backend::cpu; }

std::int64_t blocks_of(const contention_case& c) {
  const gpu_method* gpu = gpu_method_of(c);
  return gpu != nullptr ? c.threads / gpu->block_threads : 1;
}

std::optional<std::string> not_applicable(const contention_case& c) {
  const auto* method = std::get_if<cpu_method>(&c.method);
  if (method == nullptr) return std::nullopt;  // the GPU makes every update every way
  if (c.op == atomic_op::cas && *method != cpu_method::atomic) {
    return "a CAS loop is a way to add atomically; under " + std::string(to_string(*method)) +
           " it is the add row's plain addition";
  }
  if (c.op == atomic_op::exch && *method == cpu_method::privatized) {
    return std::string("private copies of an exchange have no merge (nothing to combine: the last write wins)");
  }
  return std::nullopt;
}

bool scope_too_narrow(const contention_case& c) {
  const gpu_method* gpu = gpu_method_of(c);
  return gpu != nullptr && gpu->memory == memory_space::global && gpu->scope == atomic_scope::block &&
         blocks_of(c) > 1;
}

double contenders_per_address(const contention_case& c) {
  const gpu_method* gpu = gpu_method_of(c);
  const double addresses = static_cast<double>(c.addresses);
  if (gpu == nullptr) {
    // The OpenMP team runs the logical threads, at most one per hardware thread at a time.
    const auto team = std::min<std::int64_t>(c.threads, tally::cpu::detail::max_threads());
    return std::max(1.0, static_cast<double>(team) / addresses);
  }
  // Shared memory and global_private slices: only the threads of one block share a word.
  const double sharers =
      gpu->memory == memory_space::global ? static_cast<double>(c.threads) : static_cast<double>(gpu->block_threads);
  double per_address = std::max(1.0, sharers / addresses);
  // Aggregated, the lanes of a warp on one word make one atomic: with A < 32 a warp's 32 lanes
  // spread over A words (lanes t and t + A share one), so each word gets 32 / A lanes' worth once.
  if (gpu->aggregate == aggregation::warp) per_address /= std::max(1.0, 32.0 / addresses);
  return std::max(1.0, per_address);
}

std::optional<case_problem> problem_of(const contention_case& c) {
  const auto problem = [](std::string field, std::string what) {
    return case_problem{std::move(field), std::move(what)};
  };
  const gpu_method* gpu = gpu_method_of(c);
  const bool on_cpu = gpu == nullptr;
  // The CPU's privatized copies are one per thread; the GPU's words one array (or per block, below).
  const std::int64_t max_addresses = std::int64_t{1} << (on_cpu ? 22 : 26);
  if (c.addresses < 1 || c.addresses > max_addresses) {
    return problem("addresses", "must be between 1 and 2^" + std::string(on_cpu ? "22 on the CPU" : "26 on the GPU") +
                                    " (got " + std::to_string(c.addresses) + ")");
  }
  if (on_cpu && (c.threads < 1 || c.threads > (std::int64_t{1} << 20))) {
    return problem("threads", "must be between 1 and 2^20 on the CPU (got " + std::to_string(c.threads) + ")");
  }
  if (!on_cpu) {
    if (gpu->block_threads < 32 || gpu->block_threads > 1024 || gpu->block_threads % 32 != 0) {
      return problem("block_threads",
                     "must be a multiple of 32 from 32 to 1024 (got " + std::to_string(gpu->block_threads) + ")");
    }
    if (c.threads < gpu->block_threads || c.threads % gpu->block_threads != 0 ||
        blocks_of(c) > (std::int64_t{1} << 31) - 1) {
      return problem("threads", "must be a positive multiple of the block threads " +
                                    std::to_string(gpu->block_threads) +
                                    " on the GPU, in at most 2^31 - 1 blocks (got " + std::to_string(c.threads) + ")");
    }
  }
  if (c.ops_per_thread < 1) {
    return problem("ops_per_thread", "must be >= 1 (got " + std::to_string(c.ops_per_thread) + ")");
  }
  // T K < 2^32: the values i T + t + 1 of max and exch, and every address walk, stay in 32 bits.
  if (c.threads >= (std::int64_t{1} << 32) || c.ops_per_thread >= (std::int64_t{1} << 32) / c.threads) {
    return problem("ops_per_thread", "times the threads (" + std::to_string(c.threads) +
                                         ") must stay below 2^32 (got " + std::to_string(c.ops_per_thread) +
                                         " per thread)");
  }
  if (on_cpu) return std::nullopt;
  const std::int64_t block_words = blocks_of(c) * c.addresses;
  if (gpu->memory == memory_space::shared && c.op == atomic_op::exch && block_words > (std::int64_t{1} << 28)) {
    return problem("addresses",
                   "times the blocks must be at most 2^28 for a shared-memory exch (each block's words are copied "
                   "out)");
  }
  if (gpu->memory == memory_space::global_private && block_words > (std::int64_t{1} << 28)) {
    return problem("addresses",
                   "times the blocks must be at most 2^28 for global_private (a slice of A words per block)");
  }
  return std::nullopt;
}

void validate_contention_case(const contention_case& c) {
  if (const auto problem = problem_of(c)) throw_invalid_argument(run_function, problem->field, problem->what);
}

contention_expectation expected_contention(const contention_case& c) {
  validate_contention_case(c);
  contention_expectation want;
  const auto T = static_cast<std::uint64_t>(c.threads);
  const auto K = static_cast<std::uint64_t>(c.ops_per_thread);
  const auto A = static_cast<std::uint64_t>(c.addresses);
  const std::uint64_t updates = T * K;
  const std::uint64_t per_block = block_threads_of(c);
  const auto blocks = static_cast<std::uint64_t>(blocks_of(c));
  const memory_space memory = memory_of(c);
  // Update number m = i T + t goes to word m mod A; so do the values m + 1 of max and exch.
  if (memory == memory_space::global_private && c.op != atomic_op::exch) {
    // A slice per block: thread t's updates land in slice t / block_threads. m grows along the
    // loops, so the last value a word receives is its maximum.
    want.words.assign(blocks * A, 0);
    for (std::uint64_t i = 0; i < K; ++i) {
      for (std::uint64_t t = 0; t < T; ++t) {
        contention_word& word = want.words[(t / per_block) * A + (i * T + t) % A];
        if (c.op == atomic_op::max) {
          word = static_cast<contention_word>(i * T + t + 1);
        } else {
          word += static_cast<contention_word>(1 + ((t ^ i) & 7));  // wraps mod 2^32, as the trials do
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
          want.words[(i * T + t) % A] += static_cast<contention_word>(1 + ((t ^ i) & 7));  // wraps mod 2^32
        }
      }
      break;
    case atomic_op::max:
      want.words.assign(A, 0);
      // The largest m < T K with m mod A = a; none when a >= T K.
      for (std::uint64_t a = 0; a < std::min(A, updates); ++a) {
        want.words[a] = static_cast<contention_word>(a + A * ((updates - 1 - a) / A) + 1);
      }
      break;
    case atomic_op::exch: {
      if (memory == memory_space::global) {
        want.touched.assign(A, 0);
        std::fill(want.touched.begin(), want.touched.begin() + static_cast<std::ptrdiff_t>(std::min(A, updates)), 1);
      } else {  // shared, global_private: per block
        want.touched.assign(blocks * A, 0);
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
/// global_private, else -1): a value some thread wrote there, and that thread's last write there.
bool is_last_write_of_a_thread(const contention_case& c, contention_word word, std::uint64_t a, std::int64_t block) {
  if (word == 0) return false;
  const auto T = static_cast<std::uint64_t>(c.threads);
  const auto K = static_cast<std::uint64_t>(c.ops_per_thread);
  const auto A = static_cast<std::uint64_t>(c.addresses);
  const std::uint64_t m = word - 1;  // update number i T + t
  const std::uint64_t t = m % T;
  const std::uint64_t i = m / T;
  // Thread t comes back to a word every A / gcd(T, A) updates.
  const std::uint64_t period = A / std::gcd(T, A);
  if (i >= K || m % A != a || i + period < K) return false;
  return block < 0 || t / block_threads_of(c) == static_cast<std::uint64_t>(block);
}

std::optional<std::string> check_exchange(const contention_case& c, const contention_expectation& want,
                                          const contention_outcome& got) {
  // Shared memory: each block's words were copied out to block_words; global_private: the slices
  // are the words themselves. Both are checked block by block.
  const memory_space memory = memory_of(c);
  const bool per_block = memory != memory_space::global;
  const std::vector<contention_word>& finals = memory == memory_space::shared ? got.block_words : got.words;
  if (finals.size() != want.touched.size()) return std::string("the copied-back memory has the wrong size");
  const auto A = static_cast<std::uint64_t>(c.addresses);
  std::uint64_t final_sum = 0;
  std::uint64_t final_square_sum = 0;
  for (std::size_t k = 0; k < finals.size(); ++k) {
    const contention_word word = finals[k];
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
  const std::string where = memory_of(c) == memory_space::global_private
                                ? "block " + std::to_string(k / A) + "'s word " + std::to_string(k % A)
                                : "word " + std::to_string(k);
  return where + " holds " + std::to_string(*bad.second) + ", expected " + std::to_string(*bad.first);
}

contention_row skipped_contention(const contention_case& c, const std::string& why) {
  contention_row row;
  row.what = c;
  row.check = "skipped: " + why;
  return row;
}

contention_row run_contention(const contention_case& c, int runs, int warmup) {
  validate_contention_case(c);
  if (runs < 1) throw_invalid_argument(run_function, "runs", "must be >= 1");
  if (warmup < 0) throw_invalid_argument(run_function, "warmup", "must be >= 0");
  if (const auto why = not_applicable(c)) return skipped_contention(c, *why);
  const contention_expectation want = expected_contention(c);
  const contention_trial trial = backend_of(c) == backend::cpu ? cpu_contention_trial(c) : gpu_contention_trial(c);
  // Block scope across blocks is formally a race: a wrong result there is the lesson, not a bug.
  const bool narrow = scope_too_narrow(c);
  contention_row row;
  row.what = c;
  for (int run = 0; run < warmup + runs; ++run) {
    const contention_outcome got = trial();
    if (!got.not_run.empty()) return skipped_contention(c, got.not_run);
    row.team = got.team;
    if (const auto wrong = check_contention(c, want, got)) {
      const std::string which =
          (run < warmup ? "warm-up run " + std::to_string(run) : "run " + std::to_string(run - warmup)) + ": " + *wrong;
      row.check = narrow ? "WRONG (block scope across blocks): " + which : "MISMATCH " + which;
      row.mismatch = !narrow;
      row.times_ms.clear();
      return row;
    }
    if (run >= warmup) row.times_ms.push_back(got.ms);
  }
  row.check = narrow ? "exact (block scope across blocks: not guaranteed)" : "exact";
  row.timed = true;
  return row;
}

}  // namespace tally::lab
