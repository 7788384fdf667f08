// The loops that count samples on the CPU, shared by the strategies that keep counts of their own
// (sequential, privatized, reduction): what one thread does with its share of the samples, and
// where its counts live. Host-only: no CUDA header is included here.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <utility>
#include <vector>

#include "tally/bins.hpp"
#include "tally/cpu/parallel.hpp"

namespace tally::cpu::detail {

/**
 * A mapper the count loop reads a sample's slot from: `slot(x)` in [0, slots()), where slots
 * [first_bin_slot(), first_bin_slot() + num_bins()) are the bins and any other slot holds samples
 * left out. Counting every sample into its slot takes no branch and no select.
 */
template <class Mapper, class Sample>
concept slot_mapper = requires(const Mapper& m, Sample x) {
  { m.slot(x) } -> std::convertible_to<std::size_t>;
  { m.slots() } -> std::convertible_to<std::int64_t>;
  { m.first_bin_slot() } -> std::convertible_to<std::int64_t>;
};

/**
 * A slot mapper that refuses some samples (bincount's negative values): they take slot
 * refused_slot(), and refuse(samples) throws naming the first. The loops below call it when that
 * slot counted anything, before they write a count, so a refusal leaves the counts untouched
 * without a pass of its own over the samples.
 */
template <class Mapper, class Sample>
concept refusing_mapper = slot_mapper<Mapper, Sample> && requires(const Mapper& m, std::span<const Sample> samples) {
  { m.refused_slot() } -> std::convertible_to<std::int64_t>;
  m.refuse(samples);
};

/// Whether any of `copies` blocks of `tables` tables counted a refused sample (never, for a mapper
/// that refuses none).
template <class Sample, class SlotMapper, class CopyAt>
bool counted_refused(const SlotMapper& map, std::size_t copies, int tables, CopyAt copy_at) {
  if constexpr (refusing_mapper<SlotMapper, Sample>) {
    const auto slots = static_cast<std::size_t>(map.slots());
    const auto refused = static_cast<std::size_t>(map.refused_slot());
    for (std::size_t c = 0; c < copies; ++c) {
      for (std::size_t t = 0; t < static_cast<std::size_t>(tables); ++t) {
        if (copy_at(c)[t * slots + refused] != 0) return true;
      }
    }
  }
  return false;
}

/// Calls map.refuse(samples) if any of `copies` blocks of `tables` tables counted a refused sample.
template <class Sample, class Counter, class SlotMapper, class CopyAt>
void refuse_if_counted(std::span<const Sample> samples, const SlotMapper& map, std::size_t copies, int tables,
                       CopyAt copy_at) {
  if constexpr (refusing_mapper<SlotMapper, Sample>) {
    if (counted_refused<Sample>(map, copies, tables, copy_at)) map.refuse(samples);
  }
}

/// Any bin mapper as slots: bin b is slot b, a left-out sample (bin -1, which wraps past every
/// bin) slot num_bins, picked with a select, not a branch: samples out of range in no predictable
/// order cost no mispredicted branch.
template <class Mapper>
class slots_of_bins {
 public:
  explicit slots_of_bins(const Mapper& map) : map_(map), num_bins_(static_cast<std::uint64_t>(map.num_bins())) {}
  std::int64_t num_bins() const { return static_cast<std::int64_t>(num_bins_); }
  std::int64_t slots() const { return static_cast<std::int64_t>(num_bins_) + (tally::detail::maps_every_sample<Mapper> ? 0 : 1); }
  static constexpr std::int64_t first_bin_slot() { return 0; }
  template <class Sample>
  std::size_t slot(Sample x) const {
    const auto bin = static_cast<std::uint64_t>(map_(x));
    if constexpr (tally::detail::maps_every_sample<Mapper>) {
      return static_cast<std::size_t>(bin);
    } else {
      return static_cast<std::size_t>(bin < num_bins_ ? bin : num_bins_);
    }
  }

 private:
  Mapper map_;
  std::uint64_t num_bins_;
};

/// The slot mapper for `map`: itself when it has slots, else its bins as slots.
template <class Sample, class Mapper>
auto as_slots(const Mapper& map) {
  if constexpr (slot_mapper<Mapper, Sample>) {
    return map;
  } else {
    return slots_of_bins<Mapper>(map);
  }
}

/// How many interleaved tables of slots one thread counts into: interleaved_tables while they take
/// at most interleaved_tables_bytes (cpu/tuning.hpp), else one.
template <class Counter>
int count_tables(std::int64_t slots) {
  const auto bytes = static_cast<std::uint64_t>(slots) * sizeof(Counter) * interleaved_tables;
  return bytes <= interleaved_tables_bytes ? interleaved_tables : 1;
}

/**
 * Adds data[0, n) into `Tables` consecutive tables of `map.slots()` counters from `tables`
 * (sample i into table i % Tables). With several tables, consecutive samples of one slot add to
 * different counters, so an increment need not wait for the store of the one before: with one
 * table, hot bins made that chain of stores the loop's bound.
 */
template <int Tables, class Sample, class Counter, class SlotMapper>
void count_slots(const Sample* data, std::size_t n, Counter* tables, const SlotMapper& map) {
  // Local copies: a counter store could otherwise alias the mapper (for the compiler), which it
  // then reads again after every store.
  const SlotMapper local = map;
  const auto stride = static_cast<std::size_t>(local.slots());
  Counter* table[Tables];
  for (int t = 0; t < Tables; ++t) table[t] = tables + static_cast<std::size_t>(t) * stride;
  std::size_t i = 0;
  for (; i + Tables <= n; i += Tables) {
    __builtin_prefetch(data + i + prefetch_distance / sizeof(Sample));  // cpu/tuning.hpp
    for (int t = 0; t < Tables; ++t) ++table[t][local.slot(data[i + t])];
  }
  for (; i < n; ++i) ++table[0][local.slot(data[i])];
}

/// count_slots with the number of tables chosen at run time (1 or interleaved_tables).
template <class Sample, class Counter, class SlotMapper>
void count_slots(const Sample* data, std::size_t n, Counter* tables, int num_tables, const SlotMapper& map) {
  if (num_tables == interleaved_tables) {
    count_slots<interleaved_tables>(data, n, tables, map);
  } else {
    count_slots<1>(data, n, tables, map);
  }
}

/// Adds `copies` blocks of `tables` tables of slots into counts[from, to) (bin b from slot
/// first_bin_slot + b).
template <class Counter, class SlotMapper, class CopyAt>
void merge_bins(Counter* counts, const SlotMapper& map, std::size_t copies, int tables, CopyAt copy_at,
                std::size_t from, std::size_t to) {
  const auto slots = static_cast<std::size_t>(map.slots());
  const auto first = static_cast<std::size_t>(map.first_bin_slot());
  for (std::size_t bin = from; bin < to; ++bin) {
    Counter total = 0;
    for (std::size_t c = 0; c < copies; ++c) {
      for (std::size_t t = 0; t < static_cast<std::size_t>(tables); ++t) total += copy_at(c)[t * slots + first + bin];
    }
    counts[bin] = total;
  }
}

/// The samples that `copies` blocks of `tables` tables of slots left out: their slots outside the bins.
template <class SlotMapper, class CopyAt>
std::uint64_t left_out_of(const SlotMapper& map, std::size_t copies, int tables, CopyAt copy_at) {
  const auto slots = static_cast<std::size_t>(map.slots());
  const auto first = static_cast<std::size_t>(map.first_bin_slot());
  const auto past = first + static_cast<std::size_t>(map.num_bins());
  std::uint64_t left_out = 0;
  for (std::size_t c = 0; c < copies; ++c) {
    for (std::size_t t = 0; t < static_cast<std::size_t>(tables); ++t) {
      for (std::size_t s = 0; s < first; ++s) left_out += copy_at(c)[t * slots + s];
      for (std::size_t s = past; s < slots; ++s) left_out += copy_at(c)[t * slots + s];
    }
  }
  return left_out;
}

/// Adds one thread's tables of slots into the counts and returns the samples they left out.
template <class Counter, class SlotMapper, class CopyAt>
std::uint64_t merge_slots(Counter* counts, const SlotMapper& map, int tables, CopyAt copy_at) {
  merge_bins(counts, map, 1, tables, copy_at, 0, static_cast<std::size_t>(map.num_bins()));
  return left_out_of(map, 1, tables, copy_at);
}

/// Adds data[0, n) straight into `counts` (num_bins counters, no slots of its own): a left-out
/// sample adds to a counter on the stack, picked with a select. For counts too large to copy.
template <class Sample, class Counter, class SlotMapper>
std::uint64_t count_into_bins(const Sample* data, std::size_t n, Counter* counts, const SlotMapper& map) {
  const SlotMapper local = map;
  const auto num_bins = static_cast<std::uint64_t>(local.num_bins());
  const auto first = static_cast<std::uint64_t>(local.first_bin_slot());
  Counter spill = 0;
  for (std::size_t i = 0; i < n; ++i) {
    __builtin_prefetch(data + i + prefetch_distance / sizeof(Sample));
    const std::uint64_t bin = static_cast<std::uint64_t>(local.slot(data[i])) - first;  // below wraps past every bin
    Counter* counter = bin < num_bins ? counts + bin : &spill;
    ++*counter;
  }
  return spill;
}

/// Per-thread copies of the bins (`Bin` a bin), each allocated and zeroed by the thread that fills
/// it, in memory of its own, as the OpenMP reduction clause keeps its copies on each thread's
/// stack. Copies side by side in one array zeroed by the caller were slower: on a 2-core machine,
/// 2^24 int32 samples over 256 bins took 10-11 ms (uniform) where copies shared a cache line at
/// their boundary, 6-8.5 ms (uniform, strided32, loguniform) with each copy on lines of its own,
/// and 4.3-5 ms as here, the reduction clause's time.
template <class Bin>
class private_copies {
 public:
  static constexpr std::size_t line = 64;

  /// `bins` a copy (a thread's tables of slots, for the count loops).
  private_copies(std::size_t threads, std::int64_t bins)
      : num_bins_(static_cast<std::size_t>(bins)), copies_(threads) {}

  /// The calling thread's copy, allocated and zeroed; call once from each thread of the region.
  /// nullptr when the memory cannot be had: an exception must not leave an OpenMP region (the
  /// program would end), so the thread skips its share and throw_if_short() reports it after.
  Bin* take() {
    const std::size_t bytes = (num_bins_ * sizeof(Bin) + line - 1) / line * line;  // no line shared
    auto& mine = copies_[static_cast<std::size_t>(thread_num())];
    if (thread_num() == 0) team_ = static_cast<std::size_t>(team_size());
    mine.reset(static_cast<Bin*>(::operator new(bytes, std::align_val_t{line}, std::nothrow)));
    if (!mine) {
      short_.store(true, std::memory_order_relaxed);
      return nullptr;
    }
    std::uninitialized_fill_n(mine.get(), num_bins_, Bin{});
    return mine.get();
  }

  /// After the region: throws std::bad_alloc (which the calls report as errc::out_of_memory) when
  /// a thread got no copy.
  void throw_if_short() const {
    if (short_of_memory()) throw std::bad_alloc();
  }
  /// Whether a thread got no copy (read after every thread took one: after a barrier).
  bool short_of_memory() const { return short_.load(std::memory_order_relaxed); }

  /// Copy `t` of the team that took them; read after the parallel region.
  const Bin* copy(std::size_t t) const { return copies_[t].get(); }
  /// The threads that took a copy (OpenMP may start fewer than max_threads()).
  std::size_t team() const { return team_; }

 private:
  struct aligned_delete {
    void operator()(Bin* p) const { ::operator delete(p, std::align_val_t{line}); }
  };
  std::size_t num_bins_;
  std::vector<std::unique_ptr<Bin, aligned_delete>> copies_;
  std::size_t team_ = 0;
  std::atomic<bool> short_{false};
};

/// The share of [0, n) that the calling thread of a team takes: contiguous, as schedule(static).
inline std::pair<std::size_t, std::size_t> thread_share(std::size_t n) {
  const auto threads = static_cast<std::size_t>(team_size());
  const auto t = static_cast<std::size_t>(thread_num());
  const std::size_t base = n / threads;
  const std::size_t extra = n % threads;
  const std::size_t first = t * base + std::min(t, extra);
  return {first, first + base + (t < extra ? 1 : 0)};
}

/// One thread: its own tables of slots while they are small beside the input (then summed into
/// the counts), else straight into the counts.
template <class Sample, class Counter, class SlotMapper>
std::uint64_t count_sequential(std::span<const Sample> samples, Counter* counts, const SlotMapper& map) {
  const std::int64_t slots = map.slots();
  const int tables = count_tables<Counter>(slots);
  if (static_cast<std::uint64_t>(slots) * 4 > samples.size() && tables == 1) {
    if constexpr (refusing_mapper<SlotMapper, Sample>) map.refuse(samples);  // a pass of its own here
    std::fill(counts, counts + map.num_bins(), Counter{0});
    return count_into_bins(samples.data(), samples.size(), counts, map);
  }
  std::vector<Counter> all(static_cast<std::size_t>(tables) * static_cast<std::size_t>(slots), Counter{0});
  count_slots(samples.data(), samples.size(), all.data(), tables, map);
  const auto copy_at = [&all](std::size_t) { return all.data(); };
  refuse_if_counted<Sample, Counter>(samples, map, 1, tables, copy_at);
  return merge_slots(counts, map, tables, copy_at);
}

/// A private copy of the slots per thread (each thread a contiguous share of the samples), summed.
template <class Sample, class Counter, class SlotMapper>
std::uint64_t count_privatized(std::span<const Sample> samples, Counter* counts, const SlotMapper& map) {
  const std::int64_t slots = map.slots();
  const int tables = count_tables<Counter>(slots);
  private_copies<Counter> copies(static_cast<std::size_t>(max_threads()), slots * tables);
  const auto copy_at = [&copies](std::size_t t) { return copies.copy(t); };
  // One region counts and then merges, each thread a share of the bins: a second region for the
  // merge is a second wait for both threads, which on a busy machine cost more than the merge.
#pragma omp parallel
  {
    Counter* mine = copies.take();
    const auto [first, last] = thread_share(samples.size());
    if (mine != nullptr) count_slots(samples.data() + first, last - first, mine, tables, map);
#pragma omp barrier
    // No count is written when a copy is missing or a sample is refused: both throw below.
    if (!copies.short_of_memory() && !counted_refused<Sample>(map, copies.team(), tables, copy_at)) {
      const auto [from, to] = thread_share(static_cast<std::size_t>(map.num_bins()));
      merge_bins(counts, map, copies.team(), tables, copy_at, from, to);
    }
  }
  copies.throw_if_short();
  refuse_if_counted<Sample, Counter>(samples, map, copies.team(), tables, copy_at);
  return left_out_of(map, copies.team(), tables, copy_at);
}

/// The OpenMP reduction clause over the slots: each thread gets a private, zeroed copy, counts its
/// share into it with the loop the other strategies use, and OpenMP adds the copies up.
template <class Sample, class Counter, class SlotMapper>
std::uint64_t count_reduction(std::span<const Sample> samples, Counter* counts, const SlotMapper& map) {
  const std::int64_t slots = map.slots();
  std::vector<Counter> total(static_cast<std::size_t>(slots), Counter{0});
  Counter* all = total.data();
#pragma omp parallel reduction(+ : all[:slots])
  {
    const auto [first, last] = thread_share(samples.size());
    count_slots<1>(samples.data() + first, last - first, all, map);  // `all` is the thread's copy here
  }
  const auto copy_at = [all](std::size_t) { return all; };
  refuse_if_counted<Sample, Counter>(samples, map, 1, 1, copy_at);
  return merge_slots(counts, map, 1, copy_at);
}

}  // namespace tally::cpu::detail
