// How the CPU runs one trial of a contention case (tally/lab/contention.hpp): the update loops of
// each method and operation over the OpenMP team, on 32-bit words of host memory.
//
// Privatized copies live on the heap, one std::vector per OpenMP thread, merged by a parallel
// loop over the addresses. `reduction(+ : data[:A])` would say the same in one line, but GCC 12
// puts each thread's private copy of an array section on that thread's stack: 2^20 words
// already crash with the default stack, and this sweep must not depend on OMP_STACKSIZE.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "contention_trials.hpp"
#include "tally/cpu/parallel.hpp"

namespace tally::lab {

namespace {

static_assert(std::atomic_ref<contention_word>::is_always_lock_free,
              "the atomic method measures hardware atomics: atomic_ref on the word must be lock-free");

/// Milliseconds that `work()` took on the host's steady clock.
template <class F>
double host_ms(F&& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

template <atomic_op Op>
contention_word value_of(std::uint64_t threads, std::uint64_t t, std::uint64_t i) {
  if constexpr (Op == atomic_op::add || Op == atomic_op::cas) {
    return static_cast<contention_word>(1 + ((t ^ i) & 7));
  } else {
    return static_cast<contention_word>(i * threads + t + 1);  // < 2^32: validate_contention_case
  }
}

/// The OpenMP team that runs the T logical threads: no more threads than the machine has, so a
/// large T measures contention between cores, not the scheduler's time slices.
int team_for(const contention_case& c) {
  return static_cast<int>(std::min<std::int64_t>(c.threads, tally::cpu::detail::max_threads()));
}

/// Logical thread t runs on OpenMP thread t mod team (schedule(static, 1)) and walks its
/// addresses t, t + T, t + 2T, ... mod A by adding T mod A (no division per update).
template <atomic_op Op, class Update>
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

/// The atomic and critical methods: the team updates the one array of words, each update made by
/// `update(word, value, returned_sum, returned_square_sum)` (the last two: exch's old values, summed
/// and squared mod 2^64, see the exch check).
template <atomic_op Op, class Update>
void run_on_shared_words(const contention_case& c, contention_outcome& out, Update update) {
  contention_word* const memory = out.words.data();
  std::uint64_t returned_sum = 0;
  std::uint64_t returned_square_sum = 0;
  out.ms = host_ms([&] {
#pragma omp parallel num_threads(team_for(c)) reduction(+ : returned_sum, returned_square_sum)
    {
#pragma omp single nowait
      out.team = tally::cpu::detail::team_size();
      walk_updates<Op>(c, [&](std::uint64_t address, contention_word value) {
        update(memory[address], value, returned_sum, returned_square_sum);
      });
    }
  });
  out.returned_sum = returned_sum;
  out.returned_square_sum = returned_square_sum;
}

template <atomic_op Op>
void run_atomic(const contention_case& c, contention_outcome& out) {
  run_on_shared_words<Op>(c, out, [](contention_word& memory, contention_word value, std::uint64_t& returned_sum,
                                     std::uint64_t& returned_square_sum) {
    std::atomic_ref<contention_word> word(memory);
    if constexpr (Op == atomic_op::add) {
      word.fetch_add(value, std::memory_order_relaxed);
    } else if constexpr (Op == atomic_op::cas) {
      contention_word seen = word.load(std::memory_order_relaxed);
      while (!word.compare_exchange_weak(seen, seen + value, std::memory_order_relaxed)) {
      }
    } else if constexpr (Op == atomic_op::max) {
      contention_word seen = word.load(std::memory_order_relaxed);
      while (seen < value && !word.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
      }
    } else {
      const contention_word old = word.exchange(value, std::memory_order_relaxed);
      returned_sum += old;
      returned_square_sum += static_cast<std::uint64_t>(old) * old;
    }
  });
}

template <atomic_op Op>
void run_critical(const contention_case& c, contention_outcome& out) {
  run_on_shared_words<Op>(c, out, [](contention_word& word, contention_word value, std::uint64_t& returned_sum,
                                     std::uint64_t& returned_square_sum) {
    // One section for every address: the lesson's critical, which serializes all updates.
#pragma omp critical(tally_contention)
    {
      if constexpr (Op == atomic_op::add) {
        word += value;
      } else if constexpr (Op == atomic_op::max) {
        word = std::max(word, value);
      } else if constexpr (Op == atomic_op::exch) {
        returned_sum += word;
        returned_square_sum += static_cast<std::uint64_t>(word) * word;
        word = value;
      }
    }
  });
}

template <atomic_op Op>
void run_privatized(const contention_case& c, contention_outcome& out) {
  static_assert(Op == atomic_op::add || Op == atomic_op::max);
  const int team = team_for(c);
  const auto addresses = static_cast<std::size_t>(c.addresses);
  std::vector<std::vector<contention_word>> copies(static_cast<std::size_t>(team));
  contention_word* const memory = out.words.data();
  out.ms = host_ms([&] {
#pragma omp parallel num_threads(team)
    {
#pragma omp single nowait
      out.team = tally::cpu::detail::team_size();
      // Each thread zeroes its own copy (first touch puts it near that thread).
      std::vector<contention_word>& mine = copies[static_cast<std::size_t>(tally::cpu::detail::thread_num())];
      mine.assign(addresses, 0);
      walk_updates<Op>(c, [&](std::uint64_t address, contention_word value) {
        if constexpr (Op == atomic_op::add) {
          mine[address] += value;
        } else {
          mine[address] = std::max(mine[address], value);
        }
      });  // the implied barrier of `omp for`: every copy is complete before the merge
#pragma omp for schedule(static)
      for (std::int64_t a = 0; a < c.addresses; ++a) {
        contention_word merged = 0;
        for (const std::vector<contention_word>& copy : copies) {
          if (copy.empty()) continue;  // a thread the runtime did not start
          const contention_word v = copy[static_cast<std::size_t>(a)];
          merged = Op == atomic_op::add ? merged + v : std::max(merged, v);
        }
        memory[a] = merged;
      }
    }
  });
}

template <atomic_op Op>
void run_op(const contention_case& c, cpu_method method, contention_outcome& out) {
  switch (method) {
    case cpu_method::atomic: run_atomic<Op>(c, out); break;
    case cpu_method::critical:
      if constexpr (Op != atomic_op::cas) run_critical<Op>(c, out);
      break;
    case cpu_method::privatized:
      if constexpr (Op == atomic_op::add || Op == atomic_op::max) run_privatized<Op>(c, out);
      break;
  }
}

/// One trial from zeroed memory; `c` passed not_applicable.
contention_outcome run_trial(const contention_case& c) {
  const cpu_method method = std::get<cpu_method>(c.method);
  contention_outcome out;
  out.words.assign(static_cast<std::size_t>(c.addresses), 0);
  switch (c.op) {
    case atomic_op::add: run_op<atomic_op::add>(c, method, out); break;
    case atomic_op::cas: run_op<atomic_op::cas>(c, method, out); break;
    case atomic_op::max: run_op<atomic_op::max>(c, method, out); break;
    case atomic_op::exch: run_op<atomic_op::exch>(c, method, out); break;
  }
  return out;
}

}  // namespace

contention_trial cpu_contention_trial(const contention_case& c) {
  return [c] { return run_trial(c); };
}

}  // namespace tally::lab
