// The lab's GPU experiments as a host API (tally::lab): atomic contention (memory space x scope x
// operation x warp aggregation x number of addresses) and the deliberate data races of `tally race`
// (the racy counter, the naive histogram, the block histogram without its barrier).
// Part of the lab's own target (tally::lab, lab/), not of the library's public API. Host-safe (no
// CUDA type in here), so the CLI and tests call it from plain C++; the kernels are in
// lab/src/lab_kernels.cuh, their launches in lab/src/lab_dispatch.cuh, the bodies in lab/src/lab.cu.
// Built without CUDA, the runs (run_contention, count_with_threads, naive_histogram, block_histogram) throw
// errc::not_supported (lab/src/no_cuda.cpp); the names, the validation and the checks
// (lab/src/lab_common.cpp) work in every build.
//
// The contention layout (shared with the CPU side of `tally contention`, but on 32-bit words):
// T = blocks x block_threads GPU threads each make K updates; thread t (its global index) sends its
// i-th update (0 <= i < K) to word (t + i*T) mod A with the value
//   add, cas:  1 + ((t xor i) mod 8)        (sums are compared mod 2^32: a lost update still shows)
//   max, exch: i*T + t + 1                  (unique, in [1, T K], so T K < 2^32)
// Global memory: one array of A words for the whole grid. Shared memory: every block has its own
// zeroed array of A words (dynamic shared memory), updates the same addresses with the same values,
// then folds its array into global memory (add, cas: a device-scope add per non-zero word; max: a
// device-scope max; exch: the words are written out per block), so a correct run leaves exactly
// what the global run leaves (exch: see check below). The zeroing and the fold are inside the timed
// kernel: they are what privatizing into shared memory costs. Global private (a per-block
// histogram privatized in global memory): every block has its own slice of A words in global memory (blocks x A
// words, block b's at [b A, (b + 1) A)), zeroed before the timed launch, and updates the same
// addresses with the same values there; nothing is folded, each slice is checked on its own. Only
// one block touches a slice, so block scope is enough there, as in shared memory.
//
// Every update of a contended word is a CUDA atomic intrinsic (atomicAdd_block / atomicAdd /
// atomicAdd_system and the same for atomicCAS and atomicExch) on a pointer whose state space the
// compiler sees, so the PTX is atom.shared.* / atom.global.* at scope cta / gpu / sys: the same
// operation and scope as cuda::atomic_ref<unsigned, thread_scope_block|device|system> (whose inline
// PTX takes a generic address), without the generic-address path.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tally::lab {

/** @brief Where the contended words live. */
enum class memory_space : std::uint8_t {
  global,          ///< one array of A words for the whole grid
  shared,          ///< a zeroed copy of the A words per block in shared memory, folded into global memory
  global_private,  ///< a slice of A words per block in global memory (blocks x A), no fold
};

/** @brief The scope of every atomic on the contended words (as cuda::thread_scope). */
enum class atomic_scope : std::uint8_t {
  block,   ///< cuda::thread_scope_block: only the threads of one block are guaranteed to see each other
  device,  ///< cuda::thread_scope_device: every thread of the GPU
  system,  ///< cuda::thread_scope_system: the GPU and the host (and peers)
};

/** @brief The update each thread makes. */
enum class atomic_op : std::uint8_t {
  add,   ///< fetch_add; its result is unused, so the compiler may emit a reduction (RED) with no round trip
  cas,   ///< the same sum by a compare_exchange loop (load, add, swap, retry with what was found)
  max,   ///< a compare_exchange loop that stops as soon as the word is already >= the value
  exch,  ///< exchange; the old values are summed (and squared) so every one is accounted for
};

/** @brief Whether the lanes of a warp that hit one word combine before the atomic. */
enum class aggregation : std::uint8_t {
  none,  ///< one atomic per thread and update
  warp,  ///< lanes on the same word (__match_any_sync) combine, their leader makes one atomic
};

std::string_view to_string(memory_space m);
std::string_view to_string(atomic_scope s);
std::string_view to_string(atomic_op o);
std::string_view to_string(aggregation a);
std::optional<memory_space> parse_memory_space(std::string_view name);
std::optional<atomic_scope> parse_atomic_scope(std::string_view name);
std::optional<atomic_op> parse_atomic_op(std::string_view name);
std::optional<aggregation> parse_aggregation(std::string_view name);

/** @brief One GPU contention case (see the layout at the top of this file). */
struct contention_case {
  atomic_op op = atomic_op::add;
  memory_space memory = memory_space::global;
  atomic_scope scope = atomic_scope::device;
  aggregation aggregate = aggregation::none;
  std::int64_t addresses = 1;       ///< A >= 1
  std::int64_t blocks = 1;          ///< blocks of the grid >= 1
  int block_threads = 256;          ///< a multiple of 32, 32 to 1024: warps are always full
  std::int64_t ops_per_thread = 1;  ///< K >= 1; T K < 2^32
};

/** @brief T = blocks x block_threads. */
std::int64_t total_threads(const contention_case& c);

/**
 * @brief Whether the case's scope is too narrow for the threads that share a word: block scope on
 * global memory, where threads of different blocks update the same words. The memory model then
 * promises no atomicity between blocks; whatever the run gives is reported, labelled, never as a
 * bug. (In shared memory and in a global_private slice only one block sees a word: block scope
 * is exactly enough.)
 */
bool scope_too_narrow(const contention_case& c);

/**
 * @brief The threads that compete for one word at a time: T / A in global memory (block_threads / A
 * in shared memory and global_private slices), divided by the lanes that combine when
 * warp-aggregated. A compare-and-swap add where every one of them must write costs about that
 * many retries per success.
 */
double contenders_per_address(const contention_case& c);

/** @brief What one case measured. */
struct contention_result {
  std::string not_run;            ///< non-empty: the case did not run, and why (e.g. shared memory too small)
  std::string wrong;              ///< non-empty: a run failed its check: the run and the first wrong word
  std::vector<double> times_ms;   ///< the timed runs (all checked), CUDA-event milliseconds
  std::int64_t shared_bytes = 0;  ///< dynamic shared memory per block (shared memory cases)
};

/**
 * @brief Runs `warmup` + `runs` launches of the case from zeroed memory, each timed with CUDA
 * events and then copied back and checked against the layout's exact expectation: add and cas sums
 * (mod 2^32) and max maxima word for word (global_private: slice by slice); exch: every final word
 * is 0 where no update went, else the last value some thread (of that block, in shared memory and
 * global_private) wrote there, and the old values returned plus the final words are exactly the
 * values written plus the initial zeros (their sum and sum of squares mod 2^64). Stops at the first
 * wrong run. Throws tally::error for bad arguments (naming them) and CUDA failures.
 */
contention_result run_contention(const contention_case& c, int runs, int warmup);

/** @brief What one contention run left in memory, copied back. */
struct contention_outcome {
  std::vector<std::uint32_t> words;        ///< the A global words (add, cas, max; global exch); global_private:
                                           ///< the blocks x A words, slice after slice (every op)
  std::vector<std::uint32_t> block_words;  ///< shared exch: each block's A words, block after block
  std::uint64_t returned_sum = 0;          ///< exch: the old values returned, summed mod 2^64
  std::uint64_t returned_square_sum = 0;   ///< exch: their squares, summed mod 2^64
};

/** @brief What a correct run must leave, from the layout alone (computed once per case, on the host). */
struct contention_expectation {
  std::vector<std::uint32_t> words;    ///< add, cas: the sums mod 2^32; max: the maxima (exch: empty);
                                       ///< global_private: per slice (blocks x A)
  std::vector<std::uint8_t> touched;   ///< exch: 1 where some update went (per block and word in shared
                                       ///< memory and global_private)
  std::uint64_t written_sum = 0;       ///< exch: the values written, 1 + 2 + ... + T K, mod 2^64
  std::uint64_t written_square_sum = 0;  ///< exch: their squares, mod 2^64
};

/** @brief The expectation of a valid case (see validate_contention_case). */
contention_expectation expected_contention(const contention_case& c);

/** @brief Throws errc::invalid_argument naming the field of `c` that is out of range. */
void validate_contention_case(const contention_case& c);

/**
 * @brief Nothing if `got` is what a correct run of `c` leaves, else the first thing wrong. Host
 * code, in every build: the GPU runs are checked with it, and the CPU tests check it against a
 * sequential simulation of the layout and against corrupted copies.
 */
std::optional<std::string> check_contention(const contention_case& c, const contention_expectation& want,
                                            const contention_outcome& got);

/** @brief What a racy experiment counted against what it should have. */
struct race_count {
  std::uint64_t expected = 0;     ///< updates made: the right total
  std::uint64_t actual = 0;       ///< what memory holds in total
  std::int64_t wrong_bins = 0;    ///< histograms: bins that differ from the reference
  std::int64_t over_bins = 0;     ///< histograms: bins above the reference (no lost update can do that)
};

/**
 * @brief The racy counter (lost updates): `threads` GPU threads (blocks of 256) each add 1
 * to one zeroed counter in global memory, once. Racy: a relaxed atomic load, then a relaxed atomic
 * store of the value + 1 (the split read-modify-write of `counter[0] = counter[0] + 1`, without
 * undefined behaviour, and which the compiler may not fold); else a device-scope fetch_add.
 */
race_count count_with_threads(std::int64_t threads, bool racy);

/**
 * @brief The naive histogram: one sample per thread (blocks of 256), each adding 1 to its bin of a
 * zeroed histogram in global memory with no synchronization, `counts[bin] = counts[bin] + 1`
 * through a volatile pointer (every increment a real load and store, which the compiler may not
 * merge): concurrent increments of one bin lose updates. The fix is one atomic per sample
 * (tally::gpu::bincount with strategy::atomic). `samples` (host memory) must lie in [0, bins);
 * `reference` is their exact histogram. Returns what it counted against the reference.
 */
race_count naive_histogram(std::span<const std::int32_t> samples, std::span<const std::uint64_t> reference);

/**
 * @brief The block histogram: one sample per thread (blocks of 256), each block counts
 * its samples in a shared-memory histogram (block-scope fetch_add), then its threads add the block's
 * bins to the global histogram (device-scope fetch_add). With `barrier`, __syncthreads() separates
 * the two phases (the fix); without it (the bug) a thread may add a bin that other
 * warps of its block are still counting into. `samples` (host memory) must lie in [0, bins);
 * `reference` is their exact histogram. Returns the comparison.
 */
race_count block_histogram(std::span<const std::int32_t> samples, std::span<const std::uint64_t> reference,
                           bool barrier);

/** @brief A histogram's `counts` against the exact `reference` (as many bins): totals, bins wrong, bins above. */
race_count compare_with_reference(std::span<const std::uint32_t> counts, std::span<const std::uint64_t> reference);

}  // namespace tally::lab
