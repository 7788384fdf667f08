// The CPU backend's bin mappers over tables of the edges held in cache: an estimate from one
// multiply picks a slot, and compares with its edges settle it (even bins that no exact shortcut
// takes, numpy's float32 edges of a data range, evenly spread range bins); the GPU's grid, its
// tables filled by the host, for other range bins of float and small integer samples; and the
// float grid's cells over a table of double edges for double and int64 samples, whose own grid
// entries hold one threshold each; the GPU's tables of each integer's bin (range bins over few
// integers) and of each 16-bit value's bin, filled by the bins' own mapper. Each is exact against
// the edges: the estimate or cell only picks where the compares start. Host-only: no CUDA header
// is included here.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "tally/bins.hpp"
#include "tally/detail/range_grid.hpp"
#include "tally/detail/value_tables.hpp"

namespace tally::cpu::detail {

/// The least value of `Key` at or above `edge`: a sample x, compared in `Key`, is at or above the
/// edge exactly when x >= it (float samples against double edges, as numpy compares them).
template <class Key>
Key least_key_at_or_above(double edge) {
  if constexpr (std::is_same_v<Key, float>) {
    float up = static_cast<float>(edge);
    if (static_cast<double>(up) < edge) up = std::nextafter(up, std::numeric_limits<float>::infinity());
    return up + 0.0f;
  } else {
    return edge + 0.0;
  }
}

/**
 * The edges as a count loop's slots read them: slot c holds the samples with c edges at or below
 * them, so bin b is slot b + 1, slot 0 the samples below the first edge (and NaN), slots
 * num_bins + 1 and + 2 those at or above the last (+2: infinity). padded[c] is the c-th edge, with
 * -infinity before the first and +infinity after the last; with upper_edge::inclusive the last
 * edge is the next value above it, so a sample equal to it counts in the last bin.
 */
template <class Key>
std::vector<Key> padded_edges(std::span<const Key> edges, upper_edge last_edge) {
  std::vector<Key> padded(edges.size() + 2);
  padded.front() = -std::numeric_limits<Key>::infinity();
  for (std::size_t i = 0; i < edges.size(); ++i) padded[i + 1] = edges[i];
  if (last_edge == upper_edge::inclusive) {
    padded[edges.size()] = std::nextafter(edges.back(), std::numeric_limits<Key>::infinity());
  }
  padded.back() = std::numeric_limits<Key>::infinity();
  return padded;
}

/// The bin of slot `slot` (padded_edges), or left_out_bin.
inline std::int64_t bin_of_slot(std::size_t slot, std::int64_t num_bins) {
  return slot >= 1 && static_cast<std::int64_t>(slot) <= num_bins ? static_cast<std::int64_t>(slot) - 1 : left_out_bin;
}

/**
 * Slots (padded_edges) of samples among sorted edges held as `Key` values (a sample x, compared
 * as Key, counts edge i when x >= it), for edges that estimate_fits: evenly spaced within 2^-10 of
 * a bin. The estimate floor((x - first edge) * scale) + 1, clamped to the slots, is then the slot
 * or a neighbour (its roundings move x by at most 3 * 2^-24 * num_bins bins in float, at most
 * 2^20 bins, and the edges by 2^-10), so one compare with each of its edges settles it. No branch
 * and no select: about fifteen instructions a sample, where the estimate's own host form
 * computes an edge per sample and the general rule loops.
 */
template <class Sample, class Key>
class estimated_table_mapper {
 public:
  /// `padded`: padded_edges of the edges, num_bins + 3 values, alive while this is.
  estimated_table_mapper(std::span<const Key> padded)
      : padded_(padded.data()),
        lower_(padded[1]),
        scale_(static_cast<Key>(static_cast<double>(padded.size() - 3) /
                                (static_cast<double>(padded[padded.size() - 2]) - static_cast<double>(padded[1])))),
        last_estimate_(static_cast<Key>(padded.size() - 2)),
        num_bins_(static_cast<std::int64_t>(padded.size()) - 3) {}

  std::int64_t num_bins() const { return num_bins_; }
  std::int64_t slots() const { return num_bins_ + 3; }
  static constexpr std::int64_t first_bin_slot() { return 1; }

  std::size_t slot(Sample sample) const {
    const Key x = static_cast<Key>(sample);
    // Outside, NaN and infinities clamp to a slot too (NaN to 0), where the compares settle them.
    const int estimate = static_cast<int>(
        tally::detail::clamp_without_branch((x - lower_) * scale_ + Key{1}, Key{0}, last_estimate_));
    return static_cast<std::size_t>(estimate - (x < padded_[estimate] ? 1 : 0) + (x >= padded_[estimate + 1] ? 1 : 0));
  }
  std::int64_t operator()(Sample sample) const { return bin_of_slot(slot(sample), num_bins_); }

  /// Whether this mapper maps `edges` exactly: at most 2^20 bins for float keys (2^30 for
  /// double), distinct edges each within 2^-10 of a bin of where evenly spaced edges would be.
  static bool estimate_fits(std::span<const Key> edges) {
    const std::size_t num_bins = edges.size() - 1;
    if (num_bins > (std::is_same_v<Key, float> ? std::size_t{1} << 20 : std::size_t{1} << 30)) return false;
    const double first = static_cast<double>(edges.front());
    const double span = static_cast<double>(edges.back()) - first;
    const double step = span / static_cast<double>(num_bins);
    const auto scale = static_cast<Key>(static_cast<double>(num_bins) / span);
    if (!(step > 0.0) || !std::isfinite(span) || !std::isfinite(scale)) return false;
    for (std::size_t i = 0; i < edges.size(); ++i) {
      const double off = (static_cast<double>(edges[i]) - first) / step - static_cast<double>(i);
      if (!(std::fabs(off) <= 0x1p-10)) return false;
    }
    return true;
  }

 private:
  const Key* padded_;
  Key lower_;
  Key scale_;
  Key last_estimate_;  // num_bins + 1, the last slot an estimate takes
  std::int64_t num_bins_;
};

/**
 * Slots (padded_edges) of float samples and integers of 32 bits or less among double edges, as
 * the GPU's grid of kind `Kind` counts them: the edges at or below the sample are its slot. The
 * kind is a template argument so that no sample tests it (float32 over 63 bins, 2.37-2.45 ns a
 * sample with the test, 2.29-2.30 without).
 */
template <class Sample, tally::detail::grid_kind Kind>
class grid_slots {
 public:
  using grid = tally::detail::grid_range_bin_mapper<Sample>;

  /// `map`: a grid over padded_edges of the edges (as doubles, the first and last left out) of
  /// kind `Kind`, its tables alive while this is.
  explicit grid_slots(const grid& map) : grid_(map) {}

  std::int64_t num_bins() const { return grid_.num_bins(); }
  std::int64_t slots() const { return grid_.num_bins() + 2; }
  static constexpr std::int64_t first_bin_slot() { return 1; }
  std::size_t slot(Sample sample) const { return static_cast<std::size_t>(grid_.template edges_at_or_below_in<Kind>(sample)); }
  std::int64_t operator()(Sample sample) const { return bin_of_slot(slot(sample), grid_.num_bins()); }

 private:
  grid grid_;
};

/**
 * Slots of 32- and 64-bit integer samples through the GPU's table of each integer's bin, for edges
 * that span few integers (tally::detail::integer_table_mapper): bin b is slot b, a sample left
 * out (outside the window, or on an edge the bins leave out) slot num_bins. A subtraction, a clamp
 * and one load a sample, where the grid computes a cell and compares its edges. The host fills the
 * table by the range-bin mapper (fill_integer_table), as a GPU call fills its own on the device.
 */
template <class Sample>
class integer_table_slots {
 public:
  using table_mapper = tally::detail::integer_table_mapper<Sample>;

  /// `map`: over a table fill_integer_table filled, alive while this is.
  explicit integer_table_slots(const table_mapper& map) : map_(map) {}

  std::int64_t num_bins() const { return map_.num_bins(); }
  std::int64_t slots() const { return map_.num_bins() + 1; }
  static constexpr std::int64_t first_bin_slot() { return 0; }
  std::size_t slot(Sample sample) const { return static_cast<std::size_t>(map_.slot(sample)); }
  std::int64_t operator()(Sample sample) const { return map_(sample); }

 private:
  table_mapper map_;
};

/// Fills the table of `shape` (table_mapper::table_bytes of its span, as 16-bit entries) on the
/// host: entry p holds the bin `bin_of(shape.value_at(p))` gives (the bins' own mapper), the entry
/// past the window leaves out.
template <class Sample, class BinOf>
void fill_integer_table(const tally::detail::integer_table_mapper<Sample>& shape, BinOf bin_of,
                        std::vector<std::uint16_t>& table) {
  using table_mapper = tally::detail::integer_table_mapper<Sample>;
  table.assign(table_mapper::table_bytes(shape.span()) / sizeof(std::uint16_t), 0);
  for (std::uint32_t p = 0; p < shape.span(); ++p) {
    table[p] = table_mapper::entry_of(bin_of(shape.value_at(p)), shape.num_bins());
  }
  table[shape.span()] = table_mapper::entry_of(left_out_bin, shape.num_bins());
}

/**
 * Slots of 16-bit samples (int16, uint16, float16, bfloat16) through the GPU's table of each
 * value's bin over the values the bins count (tally::detail::value_table_mapper): bin b is slot b,
 * a sample left out slot num_bins. A key, a subtraction, a clamp and one load a sample, where the
 * bins' own mapper rounds float16 and bfloat16 edges at each compare (about 20 ns a sample on the
 * 2-core test machine). The host fills the table by that mapper (fill_value_table), as a GPU call
 * fills its own on the device.
 */
template <class Sample>
class value_table_slots {
 public:
  using table_mapper = tally::detail::value_table_mapper<tally::detail::small_values<Sample>::order>;

  /// `map`: over a table fill_value_table filled, alive while this is.
  explicit value_table_slots(const table_mapper& map) : map_(map) {}

  std::int64_t num_bins() const { return map_.num_bins(); }
  std::int64_t slots() const { return map_.num_bins() + 1; }
  static constexpr std::int64_t first_bin_slot() { return 0; }
  std::size_t slot(Sample sample) const { return static_cast<std::size_t>(map_.slot(bits_of(sample))); }
  std::int64_t operator()(Sample sample) const { return map_(bits_of(sample)); }

 private:
  static std::uint16_t bits_of(Sample sample) {
    std::uint16_t bits;
    std::memcpy(&bits, &sample, sizeof(bits));
    return bits;
  }
  table_mapper map_;
};

/// The table of each value's bin over `window` (value_table_mapper::table_bytes of its span, as
/// 16-bit entries): entry p holds the bin `bin_of` (the bins' own mapper) gives the value at
/// position window.first + p; the entry past the window leaves out. `bin_of` is called from the
/// team's threads at once.
template <class Sample, class BinOf>
std::vector<std::uint16_t> fill_value_table(tally::detail::value_window window, std::int64_t num_bins, BinOf bin_of) {
  using values = tally::detail::small_values<Sample>;
  using table_mapper = typename value_table_slots<Sample>::table_mapper;
  std::vector<std::uint16_t> table(table_mapper::table_bytes(window.span) / sizeof(std::uint16_t), 0);
  const auto span = static_cast<std::int64_t>(window.span);
  // The team fills it: one thread would take as long as the count of a few samples an entry.
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < span; ++p) {
    table[static_cast<std::size_t>(p)] =
        table_mapper::entry_of(bin_of(values::at(window.first + static_cast<std::uint32_t>(p))), num_bins);
  }
  table[window.span] = table_mapper::entry_of(left_out_bin, num_bins);
  return table;
}

/**
 * Slots (edges at or below the sample: bin b is slot b + 1) of double and int64 samples among
 * double edges (compared in double, as numpy compares them). A sample's cell is the GPU grid's
 * cell of its float (the float grid, planned over the edges, spaces its cells by value or by a
 * float's bits, whichever suits the edges; the grid over doubles has only the first), which never
 * falls as the sample rises, so taking each edge's cell by the same rule tells which edges lie
 * below a cell; the edges in it, at most three but in rare cells, are compared in double from a
 * table of the edges. Where the GPU grid's double entries hold one threshold (cells of two edges,
 * at both ends always, searched), this takes about twenty instructions a sample and no branch.
 */
template <class Sample>
class float_cell_mapper {
 public:
  using float_grid = tally::detail::grid_range_bin_mapper<float>;
  /// Edges a cell holds that are compared without a search.
  static constexpr int cell_edges = 3;

  /// The cells' words and the padded edges, alive while a mapper reads them.
  struct tables {
    std::vector<std::uint32_t> words;  ///< per cell: the edges below it, shifted left once, the low bit for more than cell_edges
    std::vector<double> edges;         ///< as samples compare with them (+0, not -0), then NaN cell_edges times
  };

  /// The mapper over sorted, finite `edges` (doubles, +0 for 0) and its tables, filled here.
  float_cell_mapper(std::span<const double> edges, upper_edge last_edge, tables& room)
      : num_bins_(static_cast<std::int64_t>(edges.size()) - 1) {
    const auto num_edges = static_cast<std::int64_t>(edges.size());
    room.edges.assign(edges.begin(), edges.end());
    // A closed last bin: the last edge as the next double above it, so a sample equal to it stays below.
    if (last_edge == upper_edge::inclusive) {
      room.edges.back() = std::nextafter(edges.back(), std::numeric_limits<double>::infinity());
    }
    const auto edge_at = [&room](std::int64_t i) { return room.edges[static_cast<std::size_t>(i)]; };
    grid_ = float_grid::plan(edge_at, num_edges, upper_edge::exclusive);
    const int cells = grid_.cells();
    room.words.assign(static_cast<std::size_t>(cells) + 1, 0);
    std::int64_t below = 0;  // edges whose cell is below c
    for (int c = 0; c < cells; ++c) {
      const std::int64_t first = below;
      while (below < num_edges && cell_of(room.edges[static_cast<std::size_t>(below)]) <= c) ++below;
      const bool several = below - first > cell_edges;
      room.words[static_cast<std::size_t>(c)] = (static_cast<std::uint32_t>(first) << 1) | (several ? 1u : 0u);
    }
    room.words[static_cast<std::size_t>(cells)] = static_cast<std::uint32_t>(below) << 1;  // the last cell's search ends here
    room.edges.insert(room.edges.end(), cell_edges, std::numeric_limits<double>::quiet_NaN());  // nothing reaches NaN, +inf neither
    words_ = room.words.data();
    edges_ = room.edges.data();
  }

  std::int64_t num_bins() const { return num_bins_; }
  std::int64_t slots() const { return num_bins_ + 2; }
  static constexpr std::int64_t first_bin_slot() { return 1; }

  std::size_t slot(Sample sample) const {
    const double x = static_cast<double>(sample) + 0.0;  // -0 as +0: they compare equal, so take one cell
    const int c = cell_of(x);
    const std::uint32_t word = words_[c];
    const std::uint32_t first = word >> 1;
    std::uint32_t count = first;
    for (int k = 0; k < cell_edges; ++k) count += x >= edges_[first + static_cast<std::uint32_t>(k)] ? 1u : 0u;
    if ((word & 1u) != 0u) {
      const double* edges = edges_;
      count = static_cast<std::uint32_t>(tally::detail::partition_point(
          static_cast<std::int64_t>(first), static_cast<std::int64_t>(words_[c + 1] >> 1),
          [edges, x](std::int64_t i) { return x >= edges[i]; }));
    }
    return count;
  }
  std::int64_t operator()(Sample sample) const { return bin_of_slot(slot(sample), num_bins_); }

 private:
  /// The cell of a double: the float grid's cell of its nearest float, never falling as it rises.
  int cell_of(double x) const { return grid_.cell_of(static_cast<float>(x)); }

  float_grid grid_;
  const std::uint32_t* words_ = nullptr;
  const double* edges_ = nullptr;
  std::int64_t num_bins_;
};

/// Most bins a per-call edge table is built for (4 bytes or 8 a bin): beyond, as for the grid
/// (max_even_bins_on_grid), the table would cost more than it saves.
inline constexpr std::int64_t max_table_bins = tally::detail::max_even_bins_on_grid;

}  // namespace tally::cpu::detail
