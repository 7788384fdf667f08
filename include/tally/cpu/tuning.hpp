// Tuning of the CPU backend, kept apart from its logic: every threshold and size its strategies and
// `automatic` read, each with the measurement behind it (docs/performance.md, "CPU backend").
#pragma once

#include <cstddef>
#include <cstdint>

namespace tally::cpu::detail {

/// Below this many samples, starting threads costs more than it saves.
inline constexpr std::uint64_t parallel_threshold = 1 << 16;

/// Per-thread copies of the counts are used while they take at most this many bytes.
inline constexpr std::uint64_t private_copies_budget = std::uint64_t{256} << 20;

/// A thread counts into this many interleaved tables (sample i into table i % 8) while they take
/// at most interleaved_tables_bytes, within the first-level cache (48 KiB here): with one table,
/// consecutive samples of a hot bin wait for each other's counter store. Where the mapping is
/// cheap it shows: uint8 bincount of normal-shaped bytes took 0.54, 0.44, 0.37 and 0.32 ns a
/// sample with 1, 2, 4 and 8 tables; float samples through the table or grid (1.7-2.1 ns) did not
/// move, nor did 10^7 equal samples (their chain hides behind the mapping).
inline constexpr int interleaved_tables = 8;
inline constexpr std::uint64_t interleaved_tables_bytes = std::uint64_t{32} << 10;

/// The count loops ask for the samples this many bytes ahead (a prefetch each step): on the 2-core
/// test machine the hardware's own prefetch left the loops waiting for memory, 10^7 samples from
/// memory took 2.4x their time from cache (doubles over 256 even bins, 4.3 ns a sample against
/// 1.8), and 2-8 KiB ahead closed the gap (1.8-1.9 ns; 512 bytes: 2.2).
inline constexpr std::size_t prefetch_distance = std::size_t{4} << 10;

/// Integer samples take a table of each integer's bin over edges that span few integers where
/// there are at least this many samples for each of its entries. The host fills the table by a
/// search of the edges, one thread: 3, 10 and 37 ns an entry at 64, 4096 and 65535 bins over 65536
/// integers; the table then saves 0.75-1.3 ns a sample on the 2-core test machine (int32 range
/// bins, 10^7 samples: 9.3-15.4 ms through the grid, 1.8-2.5 ms), so 32 samples an entry repay
/// the fill several times over at 4096 bins and about once at 65535 (docs/performance.md, "Range
/// bins over few integers on the CPU").
inline constexpr std::size_t integer_table_samples_per_entry = 32;

/// 16-bit samples take a table of each value's bin (value_table_slots) where there are at least
/// this many samples for each entry and the bins have no shortcut of a few integer instructions:
/// range bins, and even bins over float16 and bfloat16 or over 16-bit integers with a step that is
/// not whole, weighted or not. The team fills it by the bins' own mapper, at the mapper's cost a
/// value; the table then saves most of that cost a sample (float16: 17.6 -> 0.6 ns on 2 cores;
/// docs/performance.md, "16-bit samples on the CPU: a table of each value's bin").
inline constexpr std::size_t value_table_samples_per_entry = 4;

}  // namespace tally::cpu::detail
