// The CPU contention experiment: the update loops of each method and operation, the sequential
// expectation, and the checks (the layout and the checked properties are in the header).
//
// Privatized copies live on the heap, one std::vector per OpenMP thread, merged by a parallel
// loop over the addresses. `reduction(+ : data[:A])` would say the same in one line, but GCC 12
// puts each thread's private copy of an array section on that thread's stack: 2^20 words
// (8 MiB) already crash with the default stack, and this sweep must not depend on OMP_STACKSIZE.
#include "tally/lab/contention_experiment.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>

#include <fmt/format.h>

#include "tally/cpu/parallel.hpp"

namespace tally::cli {

namespace {
/// Milliseconds that `work()` took on the host's steady clock (the tool's host_timing.hpp times alike).
template <class F>
double host_ms(F&& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free,
              "the atomic method measures hardware atomics: 64-bit atomic_ref must be lock-free");

std::string_view to_string(contention_op op) {
  switch (op) {
    case contention_op::add: return "add";
    case contention_op::cas: return "cas";
    case contention_op::max: return "max";
    case contention_op::exch: return "exch";
  }
  return "?";
}

std::string_view to_string(contention_method method) {
  switch (method) {
    case contention_method::atomic: return "atomic";
    case contention_method::critical: return "critical";
    case contention_method::privatized: return "privatized";
  }
  return "?";
}

std::optional<contention_op> parse_contention_op(std::string_view name) {
  for (const contention_op op : {contention_op::add, contention_op::cas, contention_op::max, contention_op::exch}) {
    if (name == to_string(op)) return op;
  }
  return std::nullopt;
}

std::optional<contention_method> parse_contention_method(std::string_view name) {
  for (const contention_method m :
       {contention_method::atomic, contention_method::critical, contention_method::privatized}) {
    if (name == to_string(m)) return m;
  }
  return std::nullopt;
}

std::optional<std::string> not_applicable(contention_op op, contention_method method) {
  if (op == contention_op::cas && method != contention_method::atomic) {
    return "a CAS loop is a way to add atomically; under " + std::string(to_string(method)) +
           " it is the add row's plain addition";
  }
  if (op == contention_op::exch && method == contention_method::privatized) {
    return std::string("private copies of an exchange have no merge (nothing to combine: the last write wins)");
  }
  return std::nullopt;
}

namespace {

template <contention_op Op>
std::uint64_t value_of(std::uint64_t threads, std::uint64_t t, std::uint64_t i) {
  if constexpr (Op == contention_op::add || Op == contention_op::cas) {
    return 1 + ((t ^ i) & 7);
  } else {
    return i * threads + t + 1;
  }
}

/// The OpenMP team that runs the T logical threads: no more threads than the machine has, so a
/// large T measures contention between cores, not the scheduler's time slices.
int team_for(const contention_case& c) {
  return static_cast<int>(std::min<std::int64_t>(c.threads, cpu::detail::max_threads()));
}

/// Logical thread t runs on OpenMP thread t mod team (schedule(static, 1)) and walks its
/// addresses t, t + T, t + 2T, ... mod A by adding T mod A (no division per update).
template <contention_op Op, class Update>
void walk_updates(const contention_case& c, Update&& update) {
  const auto threads = static_cast<std::uint64_t>(c.threads);
  const auto addresses = static_cast<std::uint64_t>(c.addresses);
  const std::uint64_t step = threads % addresses;
#pragma omp for schedule(static, 1)
  for (std::int64_t logical = 0; logical < c.threads; ++logical) {
    const auto t = static_cast<std::uint64_t>(logical);
    std::uint64_t address = t % addresses;
    for (std::uint64_t i = 0; i < static_cast<std::uint64_t>(c.ops_per_thread); ++i) {
      update(address, value_of<Op>(threads, t, i));
      address += step;
      if (address >= addresses) address -= addresses;
    }
  }
}

template <contention_op Op>
void run_atomic(const contention_case& c, contention_outcome& out) {
  std::uint64_t* const memory = out.memory.data();
  std::uint64_t returned_sum = 0;
  std::uint64_t returned_square_sum = 0;
  out.ms = host_ms([&] {
#pragma omp parallel num_threads(team_for(c)) reduction(+ : returned_sum, returned_square_sum)
    {
#pragma omp single nowait
      out.team = cpu::detail::team_size();
      walk_updates<Op>(c, [&](std::uint64_t address, std::uint64_t value) {
        std::atomic_ref<std::uint64_t> word(memory[address]);
        if constexpr (Op == contention_op::add) {
          word.fetch_add(value, std::memory_order_relaxed);
        } else if constexpr (Op == contention_op::cas) {
          std::uint64_t seen = word.load(std::memory_order_relaxed);
          while (!word.compare_exchange_weak(seen, seen + value, std::memory_order_relaxed)) {
          }
        } else if constexpr (Op == contention_op::max) {
          std::uint64_t seen = word.load(std::memory_order_relaxed);
          while (seen < value && !word.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
          }
        } else {
          const std::uint64_t old = word.exchange(value, std::memory_order_relaxed);
          returned_sum += old;
          returned_square_sum += old * old;
        }
      });
    }
  });
  out.returned_sum = returned_sum;
  out.returned_square_sum = returned_square_sum;
}

template <contention_op Op>
void run_critical(const contention_case& c, contention_outcome& out) {
  std::uint64_t* const memory = out.memory.data();
  std::uint64_t returned_sum = 0;
  std::uint64_t returned_square_sum = 0;
  out.ms = host_ms([&] {
#pragma omp parallel num_threads(team_for(c)) reduction(+ : returned_sum, returned_square_sum)
    {
#pragma omp single nowait
      out.team = cpu::detail::team_size();
      walk_updates<Op>(c, [&](std::uint64_t address, std::uint64_t value) {
        // One section for every address: the lesson's critical, which serializes all updates.
#pragma omp critical(tally_contention)
        {
          if constexpr (Op == contention_op::add) {
            memory[address] += value;
          } else if constexpr (Op == contention_op::max) {
            memory[address] = std::max(memory[address], value);
          } else if constexpr (Op == contention_op::exch) {
            const std::uint64_t old = memory[address];
            memory[address] = value;
            returned_sum += old;
            returned_square_sum += old * old;
          }
        }
      });
    }
  });
  out.returned_sum = returned_sum;
  out.returned_square_sum = returned_square_sum;
}

template <contention_op Op>
void run_privatized(const contention_case& c, contention_outcome& out) {
  static_assert(Op == contention_op::add || Op == contention_op::max);
  const int team = team_for(c);
  const auto addresses = static_cast<std::size_t>(c.addresses);
  std::vector<std::vector<std::uint64_t>> copies(static_cast<std::size_t>(team));
  std::uint64_t* const memory = out.memory.data();
  out.ms = host_ms([&] {
#pragma omp parallel num_threads(team)
    {
#pragma omp single nowait
      out.team = cpu::detail::team_size();
      // Each thread zeroes its own copy (first touch puts it near that thread).
      std::vector<std::uint64_t>& mine = copies[static_cast<std::size_t>(cpu::detail::thread_num())];
      mine.assign(addresses, 0);
      walk_updates<Op>(c, [&](std::uint64_t address, std::uint64_t value) {
        if constexpr (Op == contention_op::add) {
          mine[address] += value;
        } else {
          mine[address] = std::max(mine[address], value);
        }
      });  // the implied barrier of `omp for`: every copy is complete before the merge
#pragma omp for schedule(static)
      for (std::int64_t a = 0; a < c.addresses; ++a) {
        std::uint64_t merged = 0;
        for (const std::vector<std::uint64_t>& copy : copies) {
          if (copy.empty()) continue;  // a thread the runtime did not start
          const std::uint64_t v = copy[static_cast<std::size_t>(a)];
          merged = Op == contention_op::add ? merged + v : std::max(merged, v);
        }
        memory[a] = merged;
      }
    }
  });
}

template <contention_op Op>
void run_op(const contention_case& c, contention_outcome& out) {
  switch (c.method) {
    case contention_method::atomic: run_atomic<Op>(c, out); break;
    case contention_method::critical:
      if constexpr (Op != contention_op::cas) run_critical<Op>(c, out);
      break;
    case contention_method::privatized:
      if constexpr (Op == contention_op::add || Op == contention_op::max) run_privatized<Op>(c, out);
      break;
  }
}

}  // namespace

std::int64_t contention_address(const contention_case& c, std::int64_t t, std::int64_t i) {
  return (t + i * c.threads) % c.addresses;  // < T K <= 2^40: no overflow
}

std::uint64_t contention_value(contention_op op, std::int64_t threads, std::int64_t t, std::int64_t i) {
  const auto T = static_cast<std::uint64_t>(threads);
  const auto ut = static_cast<std::uint64_t>(t);
  const auto ui = static_cast<std::uint64_t>(i);
  switch (op) {
    case contention_op::add: return value_of<contention_op::add>(T, ut, ui);
    case contention_op::cas: return value_of<contention_op::cas>(T, ut, ui);
    case contention_op::max: return value_of<contention_op::max>(T, ut, ui);
    case contention_op::exch: return value_of<contention_op::exch>(T, ut, ui);
  }
  return 0;
}

contention_expectation expected_outcome(const contention_case& c) {
  contention_expectation want;
  want.memory.assign(static_cast<std::size_t>(c.addresses), 0);
  for (std::int64_t t = 0; t < c.threads; ++t) {
    for (std::int64_t i = 0; i < c.ops_per_thread; ++i) {
      std::uint64_t& word = want.memory[static_cast<std::size_t>(contention_address(c, t, i))];
      const std::uint64_t v = contention_value(c.op, c.threads, t, i);
      switch (c.op) {
        case contention_op::add:
        case contention_op::cas: word += v; break;
        case contention_op::max: word = std::max(word, v); break;
        case contention_op::exch:
          word = 1;
          want.written_sum += v;
          want.written_square_sum += v * v;
          break;
      }
    }
  }
  return want;
}

contention_outcome run_contention_case(const contention_case& c) {
  contention_outcome out;
  out.memory.assign(static_cast<std::size_t>(c.addresses), 0);
  switch (c.op) {
    case contention_op::add: run_op<contention_op::add>(c, out); break;
    case contention_op::cas: run_op<contention_op::cas>(c, out); break;
    case contention_op::max: run_op<contention_op::max>(c, out); break;
    case contention_op::exch: run_op<contention_op::exch>(c, out); break;
  }
  return out;
}

namespace {

std::optional<std::string> check_exchange(const contention_case& c, const contention_expectation& want,
                                          const contention_outcome& got) {
  const auto T = static_cast<std::uint64_t>(c.threads);
  const auto K = static_cast<std::uint64_t>(c.ops_per_thread);
  // Thread t comes back to an address every A / gcd(T, A) updates.
  const auto period = static_cast<std::uint64_t>(c.addresses / std::gcd(c.threads, c.addresses));
  std::uint64_t final_sum = 0;
  std::uint64_t final_square_sum = 0;
  for (std::size_t a = 0; a < got.memory.size(); ++a) {
    const std::uint64_t word = got.memory[a];
    final_sum += word;
    final_square_sum += word * word;
    if (want.memory[a] == 0) {
      if (word != 0) return fmt::format("address {} holds {}, but no update went there", a, word);
      continue;
    }
    const std::uint64_t t = (word - 1) % T;  // value i T + t + 1
    const std::uint64_t i = (word - 1) / T;
    const bool last_of_a_thread = word != 0 && i < K && i + period >= K &&
                                  contention_address(c, static_cast<std::int64_t>(t), static_cast<std::int64_t>(i)) ==
                                      static_cast<std::int64_t>(a);
    if (!last_of_a_thread) {
      return fmt::format("address {} holds {}, which is not the last value any thread wrote there", a, word);
    }
  }
  if (got.returned_sum + final_sum != want.written_sum ||
      got.returned_square_sum + final_square_sum != want.written_square_sum) {
    return std::string("the old values returned and the final words are not the values written, each once "
                       "(an exchange was lost or duplicated)");
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_contention_outcome(const contention_case& c, const contention_expectation& want,
                                                    const contention_outcome& got) {
  if (got.memory.size() != want.memory.size()) return std::string("the memory has the wrong size");
  if (c.op == contention_op::exch) return check_exchange(c, want, got);
  const auto bad = std::mismatch(want.memory.begin(), want.memory.end(), got.memory.begin());
  if (bad.first == want.memory.end()) return std::nullopt;
  return fmt::format("address {} holds {}, expected {}", bad.first - want.memory.begin(), *bad.second, *bad.first);
}

}  // namespace tally::cli
