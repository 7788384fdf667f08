// Range bins (sorted edges of the caller's) found without a search over all the edges: a grid of
// cells over the edges says, for each cell, which bins its samples can fall in, usually one or
// two, and a short search among those settles it. Host-safe: the host plans a grid; its tables are
// filled on the device (GPU calls) or the host (the CPU backend), and kernels read them from shared
// memory (tables_in_block) or, when they do not fit, global memory.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>

#include "tally/bins.hpp"
#include "tally/config.hpp"

namespace tally::detail {

/// How a sample picks its grid cell.
enum class grid_kind : std::uint8_t {
  value,       ///< cells of equal width in value: edges spread evenly (random or even edges)
  float_bits,  ///< cells of equal width in a float's bits, about equal in log(value): log-spaced edges
};

/**
 * Maps a sample to its range bin as range_bin_mapper does (the same bins, edges compared as numpy
 * compares them), in a few instructions per sample:
 * - keys: the edges 0..n in the precision samples compare in, and one more after them that no
 *   search reads but a load may. Float samples take each double edge rounded up to a float
 *   (x >= e exactly when x >= that float), so they compare in float.
 * - cells: cell(x) is monotone in x, and first[c] counts the keys whose cell is below c. For x in
 *   cell c, every such key is below x and no key above cell c is at or below x, so the number of
 *   keys at or below x lies in [first[c], first[c + 1]]: a binary search over that short span.
 *   That number less one is x's bin, -1 below the first edge and n at or above the last, so one
 *   unsigned compare leaves samples out (NaN takes cell 0 and no key: -1).
 * Trivially copyable for kernels; the tables must stay alive and be readable where it runs.
 */
template <class Sample>
class grid_range_bin_mapper {
 public:
  using key_type = std::conditional_t<std::is_same_v<Sample, float>, float, double>;

  /// Cells for `num_bins` bins: the power of two at or above 2 * num_bins, so that evenly spread
  /// edges leave most cells with one edge or none, and most samples one compare or none; at most
  /// 2^21 cells: the value grid floors a float below 2^23 by its bits, and more edges than
  /// that share cells (a longer search, still exact).
  static std::int64_t cells_for(std::int64_t num_bins) {
    return static_cast<std::int64_t>(
        std::bit_ceil(static_cast<std::uint64_t>(std::min<std::int64_t>(2 * num_bins, std::int64_t{1} << 21))));
  }
  /// Bytes of the tables for `num_edges` edges: the keys, then the cells' first bins, 16-byte aligned.
  static std::size_t table_bytes(std::int64_t num_edges) {
    return keys_bytes(num_edges + 1) + first_bytes(cells_for(num_edges - 1));
  }
  grid_range_bin_mapper() = default;

  /// A mapper with no tables, for asking a dispatch how much storage `num_edges` edges need.
  static grid_range_bin_mapper for_sizing(std::int64_t num_edges) {
    grid_range_bin_mapper sizing;
    sizing.num_bins_ = static_cast<int>(num_edges - 1);
    sizing.cells_ = static_cast<int>(cells_for(num_edges - 1));
    return sizing;
  }

  /**
   * Builds the tables on the host for sorted, finite `edges` (check_range_edges) into `tables`
   * (table_bytes(edges.size()) bytes, 16-byte aligned), and sets the mapper to read them at
   * `device_tables` (the host bytes themselves, for the CPU backend; GPU calls plan() and have
   * the device fill the tables).
   */
  grid_range_bin_mapper(std::span<const double> edges, upper_edge last_edge, std::span<std::byte> tables,
                        const std::byte* device_tables) {
    const auto edge_at = [edges](std::int64_t i) { return edges[static_cast<std::size_t>(i)]; };
    *this = plan(edge_at, static_cast<std::int64_t>(edges.size()), last_edge).reading_tables_at(device_tables);
    fill_tables(edge_at, tables);
  }

  /**
   * The grid for the sorted, finite edges `edge_at(0)` to `edge_at(num_edges - 1)` (a callable
   * giving edge i as a double), without its tables: the keys at the ends, which grid and its
   * arithmetic. Both grids are tried on at most plan_sample_edges of the interior edges, spread
   * over them, and the one whose cells hold fewer of them (sum of squares: the search a sample
   * placed like the edges would do) is kept; every grid counts exactly, the choice is speed. Host
   * work independent of the edges' number, so a GPU call can fill the tables on the device
   * (fill_entry) rather than build them here.
   */
  template <class EdgeAt>
  static grid_range_bin_mapper plan(EdgeAt edge_at, std::int64_t num_edges, upper_edge last_edge) {
    grid_range_bin_mapper map = for_sizing(num_edges);
    const int n = map.num_bins_;
    const key_type first_key = key_of_edge(edge_at(0));
    map.last_key_ = key_of_edge(edge_at(n));
    // A sample equals the last edge only if the edge is exactly a key (a float, for float samples).
    map.inclusive_ = last_edge == upper_edge::inclusive && static_cast<double>(map.last_key_) == edge_at(n);
    const key_type low = n >= 3 ? key_of_edge(edge_at(1)) : first_key;
    const key_type high = n >= 3 ? key_of_edge(edge_at(n - 1)) : map.last_key_;
    map.choose_value_grid(low, high);
    if constexpr (std::is_same_v<key_type, float>) {
      const grid_range_bin_mapper value = map;
      map.choose_bits_grid(low, high);
      if (map.sampled_cost(edge_at) >= value.sampled_cost(edge_at)) map = value;
    }
    return map;
  }

  /// Fills the tables (table_bytes of this mapper's edges, 16-byte aligned) on the host: the keys,
  /// then first[c] for every cell, in one pass, since a key's cell never falls as the keys rise.
  template <class EdgeAt>
  void fill_tables(EdgeAt edge_at, std::span<std::byte> tables) const {
    auto* keys = reinterpret_cast<key_type*>(tables.data());
    auto* first = reinterpret_cast<std::uint32_t*>(tables.data() + keys_bytes(num_bins_ + 2));
    for (int i = 0; i <= num_bins_ + 1; ++i) keys[i] = key_at(edge_at, i);
    int below = 0;  // keys whose cell is below c
    for (int c = 0; c <= cells_; ++c) {
      while (below <= num_bins_ && cell(keys[below]) < c) ++below;
      first[c] = static_cast<std::uint32_t>(below);
    }
  }

  /// Entry i of the tables, as fill_tables writes it, for a kernel that fills them a thread an
  /// entry: key i (i <= num_bins + 1) and first[i] (i <= cells), the latter by a binary search over
  /// the keys' cells.
  template <class EdgeAt>
  TALLY_HOST_DEVICE void fill_entry(EdgeAt edge_at, std::int64_t i, std::byte* tables) const {
    if (i <= num_bins_ + 1) reinterpret_cast<key_type*>(tables)[i] = key_at(edge_at, static_cast<int>(i));
    if (i <= cells_) {
      int lo = 0;  // the first key whose cell is at or above i, or num_bins + 1 if none is
      int hi = num_bins_ + 1;
      while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (cell(key_of_edge(edge_at(mid))) < i) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      reinterpret_cast<std::uint32_t*>(tables + keys_bytes(num_bins_ + 2))[i] = static_cast<std::uint32_t>(lo);
    }
  }

  /// Entries fill_entry takes: the larger of the keys and the cells' first bins.
  TALLY_HOST_DEVICE std::int64_t table_entries() const {
    return num_bins_ + 2 > cells_ + 1 ? num_bins_ + 2 : cells_ + 1;
  }

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return num_bins_; }
  TALLY_HOST_DEVICE grid_kind kind() const { return kind_; }

  TALLY_HOST_DEVICE std::int64_t operator()(Sample sample) const {
    const auto x = canonical(static_cast<key_type>(sample));
    // Every sample, in range or not, takes the cell (clamped to the grid), the compare and the
    // selects: no branch in the common path, so the compiler interleaves the samples of a vector,
    // each waiting on two dependent table reads. Only cells with more than one candidate key loop.
    const int c = cell(x);
    int lo = static_cast<int>(first_[c]);  // the keys at or below x number lo to hi
    int hi = static_cast<int>(first_[c + 1]);
    while (hi - lo > 1) {  // narrow it to two candidates
      const int mid = (lo + hi) >> 1;
      if (x >= keys_[mid]) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const bool above = x >= keys_[lo];  // read whatever the span: lo <= num_bins + 1
    const int bin = (hi > lo && above ? hi : lo) - 1;
    const int outside = (inclusive_ && x == last_key_) ? num_bins_ - 1 : static_cast<int>(left_out_bin);
    return static_cast<unsigned>(bin) < static_cast<unsigned>(num_bins_) ? bin : outside;
  }

  /// Bytes of the tables (table_bytes of this mapper's edges).
  TALLY_HOST_DEVICE std::size_t tables_bytes() const { return keys_bytes(num_bins_ + 2) + first_bytes(cells_); }
  /// The same mapper reading its tables at `tables` (a copy of them, in shared memory say).
  TALLY_HOST_DEVICE grid_range_bin_mapper reading_tables_at(const std::byte* tables) const {
    grid_range_bin_mapper moved = *this;
    moved.keys_ = reinterpret_cast<const key_type*>(tables);
    moved.first_ = reinterpret_cast<const std::uint32_t*>(tables + keys_bytes(num_bins_ + 2));
    return moved;
  }
  TALLY_HOST_DEVICE const std::byte* tables() const { return reinterpret_cast<const std::byte*>(keys_); }

 private:
  // Both tables take whole 16-byte vectors, so that blocks copy them 16 bytes at a time.
  TALLY_HOST_DEVICE static std::size_t keys_bytes(std::int64_t num_edges) {
    return (static_cast<std::size_t>(num_edges) * sizeof(key_type) + 15) / 16 * 16;
  }
  TALLY_HOST_DEVICE static std::size_t first_bytes(std::int64_t cells) {
    return (static_cast<std::size_t>(cells + 1) * sizeof(std::uint32_t) + 15) / 16 * 16;
  }

  /// The key of an edge: itself, or for float samples the least float at or above it (the double
  /// rounded up: the same float on both sides).
  TALLY_HOST_DEVICE static key_type key_of_edge(double edge) {
    if constexpr (std::is_same_v<key_type, float>) {
#if defined(__CUDA_ARCH__)
      return canonical(__double2float_ru(edge));
#else
      float up = static_cast<float>(edge);
      if (static_cast<double>(up) < edge) up = std::nextafter(up, std::numeric_limits<float>::infinity());
      return canonical(up);
#endif
    } else {
      return edge;
    }
  }

  /// Key i of the tables: key_of_edge of edge i, and after the last edge one that no search
  /// reads (the last key again).
  template <class EdgeAt>
  TALLY_HOST_DEVICE key_type key_at(EdgeAt edge_at, int i) const {
    return key_of_edge(edge_at(i <= num_bins_ ? i : num_bins_));
  }

  /// -0 as +0: they compare equal, and the bits grid must give them one cell.
  TALLY_HOST_DEVICE static key_type canonical(key_type x) {
    if constexpr (std::is_same_v<key_type, float>) {
      return x + 0.0f;
    } else {
      return x;
    }
  }

  /// A float's bits as an int that orders as the floats do (for non-NaN, canonical floats).
  TALLY_HOST_DEVICE static std::int32_t ordered_bits(float x) {
    std::int32_t bits;
    std::memcpy(&bits, &x, sizeof(bits));
    return bits ^ ((bits >> 31) & 0x7fffffff);
  }

  /// The cell of x, in [0, cells) for any x, NaN and samples outside the edges included.
  TALLY_HOST_DEVICE int cell(key_type x) const {
    if constexpr (std::is_same_v<key_type, float>) {
      if (kind_ == grid_kind::float_bits) {
        // Clamped to the span first: NaN takes its first cell (fmaxf returns the other argument),
        // and the distance from the span's start fits 32 unsigned bits.
        const float clamped = fminf(fmaxf(x, span_low_), span_high_);
        const std::uint32_t steps =
            static_cast<std::uint32_t>(ordered_bits(clamped)) - static_cast<std::uint32_t>(bits_origin_);
        return static_cast<int>(steps >> bits_shift_);
      }
    }
    // floor(x * scale + offset), clamped to the cells: one multiply-add rounded to nearest, the
    // same on the host (fma) as on the GPU, so the tables built here hold there.
    const key_type last_cell = static_cast<key_type>(cells_ - 1);
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<key_type, float>) {
      const float t = fminf(fmaxf(__fmaf_rn(x, scale_, offset_), 0.0f), last_cell);
      return __float_as_int(__fadd_rd(t, 8388608.0f)) - 0x4b000000;  // the floor, from the bits at 2^23
    } else {
      const double t = fmin(fmax(__fma_rn(x, scale_, offset_), 0.0), last_cell);
      return __double2loint(__dadd_rd(t, 4503599627370496.0));
    }
#else
    // fmax and fmin, not max and min: they take NaN to the grid (cell 0) too.
    const key_type t = std::fmin(std::fmax(std::fma(x, scale_, offset_), key_type{0}), last_cell);
    return static_cast<int>(std::floor(t));
#endif
  }

  // The grid spans the interior keys (1 and n - 1) when there are any, since every sample below
  // the first or above the last of them has one candidate bin whatever its cell. Spanning the
  // outer edges gives cells to ranges no edge divides: for log-spaced edges from 0, the bits grid
  // spent cells on every float octave between 0 and the first interior edge (over a hundred),
  // leaving fewer for the octaves where the edges are.
  void choose_value_grid(key_type low, key_type high) {
    kind_ = grid_kind::value;
    const double width = static_cast<double>(high) - static_cast<double>(low);
    // Edges all equal, or a width whose scale overflows: every sample lands in one cell.
    const double scale = width > 0.0 ? static_cast<double>(cells_) / width : 0.0;
    scale_ = std::isfinite(static_cast<key_type>(scale)) ? static_cast<key_type>(scale) : key_type{0};
    offset_ = static_cast<key_type>(-static_cast<double>(low) * static_cast<double>(scale_));
    if (!std::isfinite(offset_)) scale_ = offset_ = 0;
  }

  void choose_bits_grid(key_type low, key_type high) {
    if constexpr (std::is_same_v<key_type, float>) {
      kind_ = grid_kind::float_bits;
      span_low_ = low;
      span_high_ = high;
      bits_origin_ = ordered_bits(low);
      const auto span = static_cast<std::uint64_t>(static_cast<std::int64_t>(ordered_bits(high)) - bits_origin_);
      bits_shift_ = 0;
      while ((span >> bits_shift_) >= static_cast<std::uint64_t>(cells_)) ++bits_shift_;
    }
  }

  /// The sum over cells of the interior keys they hold, squared, over at most plan_sample_edges of
  /// those keys spread evenly: cells rise with the keys, so a cell's keys are one run.
  template <class EdgeAt>
  std::uint64_t sampled_cost(EdgeAt edge_at) const {
    const std::int64_t interior = num_bins_ - 1;
    const std::int64_t step = std::max<std::int64_t>(1, (interior + plan_sample_edges - 1) / plan_sample_edges);
    std::uint64_t cost = 0;
    std::uint64_t run = 0;
    int run_cell = -1;
    for (std::int64_t j = 1; j <= interior; j += step) {
      const int c = cell(key_of_edge(edge_at(j)));
      if (c != run_cell) {
        cost += run * run;
        run = 0;
        run_cell = c;
      }
      ++run;
    }
    return cost + run * run;
  }

  /// Interior edges plan() looks at to choose a grid: enough to tell the layouts apart, few
  /// enough that the host's work does not grow with the edges.
  static constexpr std::int64_t plan_sample_edges = 4096;

  const key_type* keys_ = nullptr;
  const std::uint32_t* first_ = nullptr;
  key_type last_key_{};
  key_type scale_{};
  key_type offset_{};
  key_type span_low_{};   // the float-bits grid's span: its first and last interior keys
  key_type span_high_{};
  std::int32_t bits_origin_ = 0;
  int bits_shift_ = 0;
  int cells_ = 2;
  int num_bins_ = 0;
  grid_kind kind_ = grid_kind::value;
  bool inclusive_ = false;
};

/// The most even bins that go through the grid when the estimate cannot take them: beyond, the
/// tables' memory and the CPU backend's work to build them per call would show.
inline constexpr std::int64_t max_even_bins_on_grid = std::int64_t{1} << 22;

/// Whether even bins go through the grid over their edges (numpy's, in the precision samples
/// compare in): when no exact shortcut or estimate takes them (a range far narrower than its
/// distance from zero, as a float data's own [min, max] often is: a float's rounding of the edges
/// is then a sizeable part of a bin), they are not too many, and their first and last edges are
/// finite where samples compare (the general rule leaves infinities out even where a bound rounds
/// to one). The grid counts them with a compare or two a sample, where the general rule searches
/// with doubles. Both backends ask it.
template <class Sample>
bool even_bins_take_grid(const even_bin_mapper<Sample>& map) {
  return map.shortcut() == even_shortcut::none && map.num_bins() <= max_even_bins_on_grid &&
         std::isfinite(static_cast<double>(map.edge(0))) && std::isfinite(static_cast<double>(map.edge(map.num_bins())));
}

}  // namespace tally::detail
