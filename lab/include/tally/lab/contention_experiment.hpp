// The CPU side of `tally contention`: T logical threads each apply K updates (add, CAS-loop add,
// max or exchange) to A 64-bit words of host memory, by one of three methods (std::atomic_ref
// atomics, one critical section, per-thread private copies merged at the end), and the checks
// that say whether the memory each run leaves is right. No CLI and no reporting here.
//
// The layout, which the checks and the GPU version must share: logical thread t's i-th update
// (0 <= t < T, 0 <= i < K) goes to address (t + i * T) mod A with the value
//   add, cas:  1 + ((t xor i) mod 8)    (sums are exact: at most 8 T K < 2^64)
//   max, exch: i * T + t + 1            (unique, in [1, T K]; rises with i, so most max updates write)
// so with A >= T the threads of one round touch distinct addresses, and with A = 1 all collide.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tally::cli {

enum class contention_op : std::uint8_t {
  add,   ///< fetch_add of the value
  cas,   ///< the same sum, by a compare-exchange loop (load, add, retry until no one else wrote)
  max,   ///< a compare-exchange loop that stops when the value in memory is already >= ours
  exch,  ///< exchange: write the value, keep the old one (every old value is accounted for)
};

enum class contention_method : std::uint8_t {
  atomic,      ///< std::atomic_ref on the shared words, relaxed order (counting needs no ordering)
  critical,    ///< one `omp critical` section around a plain read-modify-write of any address
  privatized,  ///< each OpenMP thread updates its own zeroed copy of the A words; a parallel merge
               ///< combines them (the OpenMP-reduction idea; copies on the heap, see the .cpp)
};

std::string_view to_string(contention_op op);
std::string_view to_string(contention_method method);
std::optional<contention_op> parse_contention_op(std::string_view name);
std::optional<contention_method> parse_contention_method(std::string_view name);

/** @brief Why `method` cannot do `op` (privatized exchange and CAS have no meaning), or nothing. */
std::optional<std::string> not_applicable(contention_op op, contention_method method);

struct contention_case {
  contention_op op = contention_op::add;
  contention_method method = contention_method::atomic;
  std::int64_t addresses = 1;       ///< A >= 1
  std::int64_t threads = 1;         ///< T logical threads >= 1, spread over the OpenMP team
  std::int64_t ops_per_thread = 1;  ///< K >= 1; T K <= 2^40
};

/** @brief The address of logical thread t's i-th update: (t + i T) mod A. */
std::int64_t contention_address(const contention_case& c, std::int64_t t, std::int64_t i);
/** @brief The value of logical thread t's i-th update (see the file comment). */
std::uint64_t contention_value(contention_op op, std::int64_t threads, std::int64_t t, std::int64_t i);

/** @brief What a correct run must leave, computed sequentially from the layout alone. */
struct contention_expectation {
  std::vector<std::uint64_t> memory;  ///< add, cas: the sums; max: the maxima; exch: 1 where some update went, else 0
  std::uint64_t written_sum = 0;      ///< exch: the sum of all values written, mod 2^64
  std::uint64_t written_square_sum = 0;  ///< exch: the sum of their squares, mod 2^64
};
contention_expectation expected_outcome(const contention_case& c);

/** @brief What one run left: the memory, and for exch the values the exchanges returned. */
struct contention_outcome {
  std::vector<std::uint64_t> memory;
  std::uint64_t returned_sum = 0;         ///< exch: sum of the old values returned, mod 2^64
  std::uint64_t returned_square_sum = 0;  ///< exch: sum of their squares, mod 2^64
  int team = 0;                           ///< OpenMP threads that ran the T logical threads
  double ms = 0.0;                        ///< wall time of the updates (and the merge, privatized)
};

/** @brief Runs one case from zeroed memory and times it; `c` must pass not_applicable. */
contention_outcome run_contention_case(const contention_case& c);

/**
 * @brief Nothing if `got` is right, else what is wrong (first bad address). Sums and maxima must
 * equal `want` exactly. An exchange's final word must be 0 where no update went, else the last
 * value some thread wrote there (the modification order of a word keeps each thread's program
 * order, so the last write is some thread's last); and the old values returned plus the final
 * words must be the initial zeros plus every value written, once each: checked by their sum and
 * sum of squares (a lost or duplicated exchange changes both).
 */
std::optional<std::string> check_contention_outcome(const contention_case& c, const contention_expectation& want,
                                                    const contention_outcome& got);

}  // namespace tally::cli
