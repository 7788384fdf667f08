// The contention experiment of the lab (tally::lab), one model for both backends: the hot-word
// layout, the word, the strategies compared, the check every run must pass and the result row. A
// backend only supplies how to run one trial (the CPU's OpenMP loops in lab/src/contention_cpu.cpp,
// the GPU's kernels in lab/src/lab.cu); run_contention runs, checks and times the trials of either.
//
// The layout: T threads each make K updates; thread t sends its i-th update (0 <= i < K) to word
// (t + i*T) mod A of an array of A 32-bit words, with the value
//   add, cas:  1 + ((t xor i) mod 8)        (sums are compared mod 2^32: a lost update still shows)
//   max, exch: i*T + t + 1                  (unique, in [1, T K], so T K < 2^32)
// so with A >= T the threads of one round touch distinct words, and with A = 1 all collide.
//
// The strategies compared. CPU (T logical threads over the OpenMP team): std::atomic_ref atomics,
// one `omp critical` section, or per-thread private copies merged at the end. GPU (T threads in
// blocks of block_threads): the memory the words live in x the scope of every atomic x warp
// aggregation. Global memory: one array of A words for the whole grid. Shared memory: every block
// has its own zeroed array of A words, updates the same addresses with the same values, then folds
// it into global memory (add, cas: a device-scope add per non-zero word; max: a device-scope max;
// exch: the words are written out per block), so a correct run leaves exactly what the global run
// leaves (exch: see the check); the zeroing and the fold are timed, they are what privatizing into
// shared memory costs. Global private: every block has its own slice of A words in global memory
// (blocks x A words, block b's at [b A, (b + 1) A)), zeroed before the timed launch; nothing is
// folded, each slice is checked on its own. Only one block touches a shared array or a slice, so
// block scope is enough there.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tally/strategy.hpp"

namespace tally::lab {

/** @brief The contended word on both backends. */
using contention_word = std::uint32_t;

/** @brief The update each thread makes. */
enum class atomic_op : std::uint8_t {
  add,   ///< fetch_add; its result is unused, so a GPU may make it a reduction (RED) with no round trip
  cas,   ///< the same sum by a compare-exchange loop (load, add, swap, retry with what was found)
  max,   ///< a compare-exchange loop that stops as soon as the word is already >= the value
  exch,  ///< exchange; the old values are summed (and squared) so every one is accounted for
};

/** @brief How the CPU's threads resolve conflicting updates. */
enum class cpu_method : std::uint8_t {
  atomic,      ///< std::atomic_ref on the shared words, relaxed order (counting needs no ordering)
  critical,    ///< one `omp critical` section around a plain read-modify-write of any word
  privatized,  ///< each OpenMP thread updates its own zeroed copy of the A words; a parallel merge combines them
};

/** @brief Where the GPU's contended words live. */
enum class memory_space : std::uint8_t {
  global,          ///< one array of A words for the whole grid
  shared,          ///< a zeroed copy of the A words per block in shared memory, folded into global memory
  global_private,  ///< a slice of A words per block in global memory (blocks x A), no fold
};

/** @brief The scope of every GPU atomic on the contended words (as cuda::thread_scope). */
enum class atomic_scope : std::uint8_t {
  block,   ///< cuda::thread_scope_block: only the threads of one block are guaranteed to see each other
  device,  ///< cuda::thread_scope_device: every thread of the GPU
  system,  ///< cuda::thread_scope_system: the GPU and the host (and peers)
};

/** @brief Whether the lanes of a warp that hit one word combine before the atomic. */
enum class aggregation : std::uint8_t {
  none,  ///< one atomic per thread and update
  warp,  ///< lanes on the same word (__match_any_sync) combine, their leader makes one atomic
};

/** @brief How the GPU makes the updates. */
struct gpu_method {
  memory_space memory = memory_space::global;
  atomic_scope scope = atomic_scope::device;
  aggregation aggregate = aggregation::none;
  int block_threads = 256;  ///< a multiple of 32, 32 to 1024: warps are always full
};

/** @brief The strategy a case measures; which of the two it holds says the backend that runs it. */
using contention_method = std::variant<cpu_method, gpu_method>;

/** @brief One contention case (see the layout at the top of this file). */
struct contention_case {
  atomic_op op = atomic_op::add;
  contention_method method = cpu_method::atomic;
  std::int64_t addresses = 1;       ///< A >= 1
  std::int64_t threads = 1;         ///< T >= 1; on the GPU a multiple of block_threads
  std::int64_t ops_per_thread = 1;  ///< K >= 1; T K < 2^32
};

inline constexpr atomic_op all_atomic_ops[] = {atomic_op::add, atomic_op::cas, atomic_op::max, atomic_op::exch};
inline constexpr cpu_method all_cpu_methods[] = {cpu_method::atomic, cpu_method::critical, cpu_method::privatized};
inline constexpr memory_space all_memory_spaces[] = {memory_space::global, memory_space::shared,
                                                     memory_space::global_private};
inline constexpr atomic_scope all_atomic_scopes[] = {atomic_scope::block, atomic_scope::device, atomic_scope::system};
inline constexpr aggregation all_aggregations[] = {aggregation::none, aggregation::warp};

std::string_view to_string(atomic_op o);
std::string_view to_string(cpu_method m);
std::string_view to_string(memory_space m);
std::string_view to_string(atomic_scope s);
std::string_view to_string(aggregation a);
std::optional<atomic_op> parse_atomic_op(std::string_view name);
std::optional<cpu_method> parse_cpu_method(std::string_view name);
std::optional<memory_space> parse_memory_space(std::string_view name);
std::optional<atomic_scope> parse_atomic_scope(std::string_view name);
std::optional<aggregation> parse_aggregation(std::string_view name);

/** @brief The method's name in rows: the CPU method, or "<memory>-<scope>-<aggregation>" on the GPU. */
std::string method_name(const contention_method& method);

/** @brief The layout and the backend's strategies in one paragraph, as reports print it. */
std::string layout_text(backend b);

/** @brief The backend that runs the case. */
backend backend_of(const contention_case& c);

/** @brief GPU cases: the blocks, T / block_threads; CPU cases: 1. */
std::int64_t blocks_of(const contention_case& c);

/** @brief Why the case's method cannot make its update (a CAS loop or an exchange with no merge), or nothing. */
std::optional<std::string> not_applicable(const contention_case& c);

/**
 * @brief Whether the case's scope is too narrow for the threads that share a word: block scope on
 * global memory, where threads of different blocks update the same words. The memory model then
 * promises no atomicity between blocks; whatever the run gives is reported, labelled, never as a
 * bug. (In shared memory and in a global_private slice only one block sees a word: block scope
 * is exactly enough.) Never on the CPU.
 */
bool scope_too_narrow(const contention_case& c);

/**
 * @brief The threads that compete for one word at a time: T / A (on the GPU, block_threads / A in
 * shared memory and global_private slices, divided by the lanes that combine when warp-aggregated).
 * A compare-and-swap add where every one of them must write costs about that many retries per success.
 */
double contenders_per_address(const contention_case& c);

/** @brief A field of a case out of range: its name, and what is wrong with it. */
struct case_problem {
  std::string field;  ///< addresses, threads, ops_per_thread or block_threads
  std::string what;   ///< e.g. "must be between 1 and 2^22 on the CPU (got 0)"
};

/** @brief The first field of `c` out of range, or nothing. */
std::optional<case_problem> problem_of(const contention_case& c);

/** @brief Throws errc::invalid_argument naming the field of `c` that is out of range. */
void validate_contention_case(const contention_case& c);

/** @brief What a correct run must leave, from the layout alone (computed once per case, on the host). */
struct contention_expectation {
  std::vector<contention_word> words;  ///< add, cas: the sums mod 2^32; max: the maxima (exch: empty);
                                       ///< global_private: per slice (blocks x A)
  std::vector<std::uint8_t> touched;   ///< exch: 1 where some update went (per block and word in shared
                                       ///< memory and global_private)
  std::uint64_t written_sum = 0;         ///< exch: the values written, 1 + 2 + ... + T K, mod 2^64
  std::uint64_t written_square_sum = 0;  ///< exch: their squares, mod 2^64
};

/** @brief The expectation of a valid case (see validate_contention_case). */
contention_expectation expected_contention(const contention_case& c);

/** @brief What one trial left in memory, copied back, and how long it took. */
struct contention_outcome {
  std::string not_run;                       ///< non-empty: the trial cannot run on this machine, and why
  std::vector<contention_word> words;        ///< the A words (add, cas, max; exch but in shared memory);
                                             ///< global_private: the blocks x A words, slice after slice
  std::vector<contention_word> block_words;  ///< shared-memory exch: each block's A words, block after block
  std::uint64_t returned_sum = 0;            ///< exch: the old values returned, summed mod 2^64
  std::uint64_t returned_square_sum = 0;     ///< exch: their squares, summed mod 2^64
  double ms = 0.0;                           ///< the updates (CPU: wall time, merge included; GPU: CUDA events)
  int team = 0;                              ///< CPU: the OpenMP threads that ran the T logical threads
};

/**
 * @brief Nothing if `got` is what a correct run of `c` leaves, else the first thing wrong. Sums
 * (mod 2^32) and maxima must equal `want` word for word (global_private: slice by slice). An
 * exchange's final word must be 0 where no update went, else the last value some thread (of that
 * block, in shared memory and global_private) wrote there: the modification order of a word keeps
 * each thread's program order, so the last write is some thread's last. And the old values returned
 * plus the final words must be the initial zeros plus every value written, once each: checked by
 * their sum and sum of squares (a lost or duplicated exchange changes both).
 */
std::optional<std::string> check_contention(const contention_case& c, const contention_expectation& want,
                                            const contention_outcome& got);

/** @brief The result of one case: its check and, when every run passed, its times. */
struct contention_row {
  contention_case what;
  std::string check;  ///< "exact", "exact (block scope across blocks: not guaranteed)", "WRONG (block scope
                      ///< across blocks): ...", "MISMATCH run R: ..." or "skipped: why"
  bool timed = false;            ///< every run passed its check, and times_ms holds the timed ones
  bool mismatch = false;         ///< a run that had to be exact was not
  int team = 0;                  ///< CPU: the OpenMP threads that ran
  std::vector<double> times_ms;  ///< the timed runs, after the warm-up
};

/** @brief A row for a case that is not run, and why: "skipped: why". */
contention_row skipped_contention(const contention_case& c, const std::string& why);

/**
 * @brief Runs `warmup` + `runs` trials of the case on its backend from zeroed memory, each checked
 * against the layout's expectation before its time counts; stops at the first wrong run. A case
 * its method cannot make (not_applicable) or that does not fit the machine is skipped. Throws
 * tally::error for bad arguments (naming them), CUDA failures, and GPU cases in a build without CUDA.
 */
contention_row run_contention(const contention_case& c, int runs, int warmup);

}  // namespace tally::lab
