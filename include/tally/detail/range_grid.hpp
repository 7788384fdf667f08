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
#include "tally/detail/value_tables.hpp"

#if defined(__SSE2__) && !defined(__CUDACC__)
#include <climits>
#include <emmintrin.h>
#endif

namespace tally::detail {

#if !defined(__CUDA_ARCH__)
/// x clamped to [low, high], NaN to low, with no branch (host code). GCC compiled the same selects
/// written as ternaries into branches, which samples on both sides of a grid's ends mispredicted
/// (7 range bins over uniform float32 samples: 6 ns a sample against 4 at 63 bins). SSE's max and
/// min return their second operand when one is NaN, as the ternaries do.
template <class Float>
inline Float clamp_without_branch(Float x, Float low, Float high) {
#if defined(__SSE2__) && !defined(__CUDACC__)
  if constexpr (std::is_same_v<Float, float>) {
    return _mm_cvtss_f32(_mm_min_ps(_mm_max_ps(_mm_set1_ps(x), _mm_set1_ps(low)), _mm_set1_ps(high)));
  } else {
    return _mm_cvtsd_f64(_mm_min_pd(_mm_max_pd(_mm_set1_pd(x), _mm_set1_pd(low)), _mm_set1_pd(high)));
  }
#else
  const Float above = x > low ? x : low;
  return above < high ? above : high;
#endif
}
#endif

/// What a grid cell's entry holds.
enum class grid_entries : std::uint8_t {
  thresholds,  ///< 16 bytes: the edges below the cell and the next three thresholds (the CPU; GPU tables in global memory)
  counts,      ///< 4 bytes: the bin below the cell and flags for the edges in it, four cells a bin (GPU tables in shared memory)
};

/// How a sample picks its grid cell.
enum class grid_kind : std::uint8_t {
  value,       ///< cells of equal width in value: edges spread evenly (random or even edges)
  float_bits,  ///< cells of equal width in a float's bits, about equal in log(value): log-spaced edges
};

/**
 * Maps a sample to its range bin as range_bin_mapper does (the same bins, edges compared as numpy
 * compares them), with one table read per sample in the common case:
 * - Each edge e becomes a threshold t in the type samples compare in, with x >= e exactly when
 *   x > t: for float samples the greatest float below e, for double (and int64, which numpy
 *   compares as double) the greatest double below e, for integers of 32 bits or less ceil(e) - 1.
 *   An integer edge no sample can reach takes the type's maximum; one every sample reaches counts
 *   for every cell (below the grid). A closed last edge that samples can equal is its own
 *   threshold, so a sample equal to it stays in the last bin.
 * - cell(x) is monotone in x. Each cell's entry (16 bytes, one aligned load) holds the number of
 *   edges below the cell (every sample of the cell is at or above them) and the thresholds of the
 *   next entry_keys edges from there: the cell's own, then those of later cells, which no sample
 *   of the cell exceeds (entries of counts: the bin below the cell and flags for the edges in
 *   it instead, whose first two thresholds the sample reads). So a sample's count of edges at or
 *   below it is the entry's number plus a compare per threshold, with no branch, and its bin is
 *   that less one (-1 below the first edge, n at or above the last; entries of counts hold the
 *   number less one), which one unsigned compare leaves out.
 * - A cell of more edges than its entry holds is flagged; its samples search the thresholds
 *   between its number and the next cell's, after the vector's other samples (map_items). With
 *   cells twice the bins, evenly spread edges put more than three edges in about one cell in 600.
 * NaN compares above nothing and takes cell 0: count 0, bin -1, left out.
 * Trivially copyable for kernels; the tables must stay alive and be readable where it runs.
 */
template <class Sample, grid_entries Entries = grid_entries::thresholds>
class grid_range_bin_mapper {
 public:
  /// Whether entries hold counts (grid_entries::counts): a cell's entry is one 32-bit word, the
  /// edges below the cell less one (the bin of a sample that exceeds none of the cell's edges)
  /// shifted left three times, and three flags: the cell holds an edge, two, three or more (which
  /// its samples search). So the two loads' predicates are the low flags as they stand (one
  /// instruction for both), the bin needs no subtraction and a vector's search test is one OR of
  /// its words: the ALU pipe sets the rate here, and those were its instructions (float32 +8-17%
  /// in most cells: docs/performance.md, "Range bins: a word of the bin below and flags"). A
  /// sample reads its cell's word, then the thresholds of the cell's first two edges with loads
  /// predicated on its lane (only lanes in a cell of edges read), and compares them with no
  /// branch. With four cells a bin about one cell in four holds an edge (evenly spread edges), so
  /// a warp's table reads are one random 4-byte load a sample and loads for the lanes in a cell of
  /// edges, where a random 16-byte entry costs about nine shared-memory wavefronts a warp; and 4096
  /// bins' tables leave two blocks a multiprocessor, where 16-byte entries left one. Two
  /// thresholds, not one: the grid's end cells always hold two edges (the outer edge and the first
  /// or last interior one), and with one their samples all searched (docs/performance.md, "Range
  /// bins: entries of counts").
  static constexpr bool counts_entries = Entries == grid_entries::counts;
  /// Whether samples are integers of 32 bits or less, which compare as themselves.
  static constexpr bool small_integer = std::is_integral_v<Sample> && sizeof(Sample) <= 4;
  /// The type a sample's cell is computed in: float for float samples and small integers (any
  /// monotone cell serves, and float arithmetic is the GPU's fastest), double otherwise.
  using key_type = std::conditional_t<std::is_same_v<Sample, float> || small_integer, float, double>;
  /// The type a sample compares with an edge in: its own for integers of 32 bits or less (whose
  /// thresholds are whole numbers), numpy's floating type otherwise.
  using threshold_type =
      std::conditional_t<small_integer,
                         std::conditional_t<std::is_unsigned_v<Sample> && sizeof(Sample) == 4, std::uint32_t, std::int32_t>,
                         key_type>;
  /// The word of a cell's entry: the edges below the cell, shifted left once, the low bit set for
  /// a cell of more edges than the entry holds.
  using word_type = std::conditional_t<sizeof(threshold_type) == 8, std::uint64_t, std::uint32_t>;
  /// Thresholds an entry holds: as many as fit 16 bytes beside the word (3 of 4 bytes, 1 of 8).
  static constexpr int entry_keys = static_cast<int>((16 - sizeof(word_type)) / sizeof(threshold_type));
  /// A cell's entry: its thresholds and its word in 16 bytes, one aligned load, no padding (so the
  /// host's fill and the device's write the same bytes).
  struct alignas(16) cell_entry {
    threshold_type threshold[entry_keys];
    word_type word;
  };
  static_assert(sizeof(cell_entry) == 16);
  /// What the tables hold for a cell.
  using entry_type = std::conditional_t<counts_entries, std::uint32_t, cell_entry>;

  /// Cells for `num_bins` bins. Entries of thresholds: the power of two at or above 2 * num_bins,
  /// so that evenly spread edges leave few cells with more edges than an entry holds, while those
  /// entries fit a block's shared memory (max_doubled_entry_bytes: 4096 bins); past that, where
  /// the tables stay in global memory, the power of two at or above num_bins, half the bytes to
  /// cache. Entries of counts: the power of two at or above counts_cells_per_bin * num_bins. At
  /// most 2^21 cells: the value grid floors a float below 2^23 by its bits, and more edges than
  /// that share cells (a longer search, still exact).
  static std::int64_t cells_for(std::int64_t num_bins) {
    const std::int64_t wanted =
        counts_entries ? counts_cells_per_bin * num_bins
        : 2 * num_bins * static_cast<std::int64_t>(sizeof(cell_entry)) <= max_doubled_entry_bytes ? 2 * num_bins
                                                                                                  : num_bins;
    return static_cast<std::int64_t>(
        std::bit_ceil(static_cast<std::uint64_t>(std::clamp<std::int64_t>(wanted, 2, std::int64_t{1} << 21))));
  }
  /// The most bytes of entries for which cells_for takes twice the bins.
  static constexpr std::int64_t max_doubled_entry_bytes = 128 * 1024;
  /// Cells a bin for entries of counts.
  static constexpr std::int64_t counts_cells_per_bin = 4;
  /// Whether entries of counts for `num_bins` bins take at most max_counts_entry_bytes (4096
  /// bins), so that two blocks a multiprocessor hold them in shared memory with their copies of
  /// the counts: past that the GPU takes entries of thresholds.
  static constexpr bool counts_fit_block(std::int64_t num_bins) {
    return num_bins * counts_cells_per_bin * static_cast<std::int64_t>(sizeof(std::uint32_t)) <= max_counts_entry_bytes;
  }
  /// The most bytes of entries of counts a GPU block copies into shared memory.
  static constexpr std::int64_t max_counts_entry_bytes = 64 * 1024;
  /// Bytes of the tables for `num_edges` edges: the cells' entries (one more than the cells, whose
  /// number ends the last cell's edges), then the thresholds, each 16-byte aligned.
  static std::size_t table_bytes(std::int64_t num_edges) {
    return entries_bytes(cells_for(num_edges - 1)) + thresholds_bytes(num_edges);
  }
  grid_range_bin_mapper() = default;

  /// A mapper with no tables, for asking a dispatch how much storage `num_edges` edges need.
  static grid_range_bin_mapper for_sizing(std::int64_t num_edges) {
    grid_range_bin_mapper sizing;
    sizing.num_bins_ = static_cast<int>(num_edges - 1);
    sizing.cells_ = static_cast<int>(cells_for(num_edges - 1));
    sizing.last_cell_ = static_cast<key_type>(sizing.cells_ - 1);
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
   * giving edge i as a double), without its tables: the edge values at the ends, which grid and
   * its arithmetic. Both grids are tried on at most plan_sample_edges of the interior edges,
   * spread over them, and the one whose cells hold fewer of them (sum of squares: the search a
   * sample placed like the edges would do) is kept; every grid counts exactly, the choice is
   * speed. Host work independent of the edges' number, so a GPU call can fill the tables on the
   * device (fill_entry) rather than build them here.
   */
  template <class EdgeAt>
  static grid_range_bin_mapper plan(EdgeAt edge_at, std::int64_t num_edges, upper_edge last_edge) {
    grid_range_bin_mapper map = for_sizing(num_edges);
    const int n = map.num_bins_;
    const edge_key last = key_of_edge(edge_at(n));
    // A sample equals the last edge only if the edge is a value samples take.
    const double last_edge_value = edge_at(n);
    if constexpr (small_integer) {
      if (last.place == 0) {
        map.last_value_ = static_cast<threshold_type>(last.threshold + 1);  // the edge's ceiling
        map.inclusive_ = static_cast<double>(map.last_value_) == last_edge_value;
      }
    } else {
      map.last_value_ = static_cast<threshold_type>(last.least);
      map.inclusive_ = static_cast<double>(map.last_value_) == last_edge_value;
    }
    map.inclusive_ = map.inclusive_ && last_edge == upper_edge::inclusive;
    const key_type low = key_of_edge(edge_at(n >= 3 ? 1 : 0)).least;
    const key_type high = n >= 3 ? key_of_edge(edge_at(n - 1)).least : last.least;
    map.choose_value_grid(low, high);
    if constexpr (takes_bits_grid) {
      const grid_range_bin_mapper value = map;
      map.choose_bits_grid(low, high);
      if (map.sampled_cost(edge_at) >= value.sampled_cost(edge_at)) map = value;
    }
    return map;
  }

  /// Fills the tables (table_bytes of this mapper's edges, 16-byte aligned) on the host in one
  /// pass: an edge's cell never falls as the edges rise.
  template <class EdgeAt>
  void fill_tables(EdgeAt edge_at, std::span<std::byte> tables) const {
    auto* entries = reinterpret_cast<entry_type*>(tables.data());
    auto* thresholds = reinterpret_cast<threshold_type*>(tables.data() + entries_bytes(cells_));
    for (int i = 0; i <= num_bins_; ++i) thresholds[i] = threshold_of_edge(i, edge_at(i));
    int below = 0;  // edges whose cell is below c
    const auto walk_below = [&](int c) {  // edges_below, walking on from the last cell's count
      while (below <= num_bins_ && cell_of_key(key_of_edge(edge_at(below))) < c) ++below;
      return below;
    };
    int first = walk_below(0);
    for (int c = 0; c < cells_; ++c) {
      const int next = walk_below(c + 1);
      set_entry(entries[c], first, next, [&](int i) { return i <= num_bins_ ? thresholds[i] : never_threshold(); });
      first = next;
    }
    set_entry(entries[cells_], first, first, [](int) { return never_threshold(); });
  }

  /// Entry i of the tables, as fill_tables writes it, for a kernel that fills them a thread an
  /// entry: threshold i (i <= num_bins) and cell entry i (i <= cells), the latter by binary
  /// searches over the edges' cells.
  template <class EdgeAt>
  TALLY_HOST_DEVICE void fill_entry(EdgeAt edge_at, std::int64_t i, std::byte* tables) const {
    if (i <= num_bins_) {
      reinterpret_cast<threshold_type*>(tables + entries_bytes(cells_))[i] =
          threshold_of_edge(static_cast<int>(i), edge_at(static_cast<int>(i)));
    }
    if (i <= cells_) {
      const int c = static_cast<int>(i);
      const int first = edges_below(edge_at, c);
      const int next = c < cells_ ? edges_below(edge_at, c + 1) : first;
      set_entry(reinterpret_cast<entry_type*>(tables)[c], first, next, [&](int k) {
        return c < cells_ && k <= num_bins_ ? threshold_of_edge(k, edge_at(k)) : never_threshold();
      });
    }
  }

  /// Entries fill_entry takes: the larger of the thresholds and the cells' entries.
  TALLY_HOST_DEVICE std::int64_t table_entries() const {
    return num_bins_ + 1 > cells_ + 1 ? num_bins_ + 1 : cells_ + 1;
  }

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return num_bins_; }
  TALLY_HOST_DEVICE grid_kind kind() const { return kind_; }

  TALLY_HOST_DEVICE std::int64_t operator()(Sample sample) const {
    const Sample one[1] = {sample};
    int bin[1];
    map_items(one, bin);
    return bin[0];
  }

  static constexpr bool maps_items = true;  ///< block pieces map a vector with map_items
  /// Maps `items` samples at once to bins (left_out_bin for a sample left out): each one's cell,
  /// entry and compares first, in one straight line (no branch, so the compiler keeps every entry
  /// read in flight together), then the searches of those in a cell of several edges, rarer.
  /// `Swizzled`: reading a block's copy whose cell words are swizzled (swizzled_word).
  template <int Items, bool Swizzled = false>
  TALLY_HOST_DEVICE void map_items(const Sample (&samples)[Items], int (&bins)[Items]) const {
    int bin[Items];
    bin_items<Items, Swizzled>(samples, bin);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < Items; ++j) {
      bins[j] = static_cast<unsigned>(bin[j]) < static_cast<unsigned>(num_bins_) ? bin[j] : static_cast<int>(left_out_bin);
    }
  }

  static constexpr bool slots_items = true;  ///< block pieces take a vector's words with slot_items
  /// map_items giving each sample's word in a block's copy (block_histogram.cuh's gives_slots):
  /// its bin, or num_bins where it is left out, so the kernel selects no word itself.
  template <int Items, bool Swizzled = false>
  TALLY_HOST_DEVICE void slot_items(const Sample (&samples)[Items], int (&slots)[Items]) const {
    int bin[Items];
    bin_items<Items, Swizzled>(samples, bin);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < Items; ++j) {
      slots[j] = static_cast<unsigned>(bin[j]) < static_cast<unsigned>(num_bins_) ? bin[j] : num_bins_;
    }
  }

  /// The word of the tables a sample reads first, its cell's entry of counts: what a block asks of
  /// its first samples to choose whether to copy the tables with the cell words swizzled
  /// (block_histogram.cuh's has_bank_swizzled_table). Data of few mantissa bits (integers or
  /// eighths stored as floats, values that stride by a power of two) put a warp's cells a multiple
  /// of 32 words apart, in one bank, on both grids: the float-bits grid's cells are a float's top
  /// bits, the value grid's four a unit of value.
  TALLY_HOST_DEVICE int table_word(Sample sample) const
    requires(counts_entries)
  {
    return cell(static_cast<key_type>(compared(sample)));
  }
  /// Where cell word `w` sits in a swizzled copy: row_swizzled_word, so that cells a multiple of 32
  /// words apart spread over the banks. Only the cell words are swizzled (swizzled_table_bytes,
  /// whole rows); the thresholds, read by the lanes in a cell of edges at the edges' numbers, stay
  /// in place.
  TALLY_HOST_DEVICE static std::uint32_t swizzled_word(std::uint32_t w) { return row_swizzled_word(w); }
  /// The bytes at the tables' start whose words a swizzled copy places by swizzled_word.
  TALLY_HOST_DEVICE std::size_t swizzled_table_bytes() const
    requires(counts_entries)
  {
    return entries_bytes(cells_);
  }

#if !defined(__CUDA_ARCH__)
  /// The grid's cell of `key` (any monotone cell serves where both the tables and the samples take
  /// it): the CPU backend's double samples take their float's cell (cpu/edge_tables.hpp).
  int cell_of(key_type key) const { return cell(key); }
  /// The grid's cells.
  int cells() const { return cells_; }

  /// How many edges are at or below `sample` (0 to num_bins + 1; its bin is that less one), for a
  /// grid of kind `Kind` (kind()): the CPU backend's slot mappers take the kind as a template
  /// argument so that no sample tests it (cpu/edge_tables.hpp).
  template <grid_kind Kind>
  int edges_at_or_below_in(Sample sample) const {
    int c = 0;
    threshold_type x{};
    if constexpr (Kind == grid_kind::value && std::is_floating_point_v<Sample>) {
      // -0 and +0 take one value cell and exceed the same thresholds: no compared() here.
      x = static_cast<threshold_type>(sample);
      c = static_cast<int>(clamp_without_branch((x - span_low_) * scale_, key_type{0}, last_cell_));
    } else {
      x = compared(sample);
      c = cell(static_cast<key_type>(x));
    }
    const cell_entry& entry = entries_[c];
    int count = static_cast<int>(entry.word >> 1) + thresholds_exceeded(x, entry);
    if ((entry.word & 1u) != 0u) count = search(x, count, static_cast<int>(entries_[c + 1].word >> 1));
    return count;
  }

  /// How many of an entry's thresholds x exceeds: for 4-byte thresholds one vector compare, whose
  /// mask's bits a table of nibbles counts (0x32212110: the bits set in 0 to 7), where compares
  /// one at a time took a dozen instructions.
  static int thresholds_exceeded(threshold_type x, const cell_entry& entry) {
#if defined(__SSE2__) && !defined(__CUDACC__)
    if constexpr (entry_keys == 3) {
      int mask = 0;
      if constexpr (std::is_same_v<threshold_type, float>) {
        mask = _mm_movemask_ps(_mm_cmplt_ps(_mm_load_ps(entry.threshold), _mm_set1_ps(x)));
      } else {
        // Signed compares; unsigned thresholds and samples compare alike with their top bits flipped.
        constexpr std::int32_t flip = std::is_unsigned_v<threshold_type> ? INT32_MIN : 0;
        const __m128i keys = _mm_xor_si128(_mm_load_si128(reinterpret_cast<const __m128i*>(&entry)), _mm_set1_epi32(flip));
        const __m128i value = _mm_set1_epi32(static_cast<std::int32_t>(x) ^ flip);
        mask = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(value, keys)));
      }
      return (0x32212110 >> ((mask & 7) * 4)) & 0xf;
    }
#endif
    int count = 0;
    for (int k = 0; k < entry_keys; ++k) count += x > entry.threshold[k] ? 1 : 0;
    return count;
  }
#endif

  /// Bytes of the tables (table_bytes of this mapper's edges).
  TALLY_HOST_DEVICE std::size_t tables_bytes() const { return entries_bytes(cells_) + thresholds_bytes(num_bins_ + 1); }
  /// The same mapper reading its tables at `tables` (a copy of them, in shared memory say).
  TALLY_HOST_DEVICE grid_range_bin_mapper reading_tables_at(const std::byte* tables) const {
    grid_range_bin_mapper moved = *this;
    moved.entries_ = reinterpret_cast<const entry_type*>(tables);
    moved.thresholds_ = reinterpret_cast<const threshold_type*>(tables + entries_bytes(cells_));
    return moved;
  }
  TALLY_HOST_DEVICE const std::byte* tables() const { return reinterpret_cast<const std::byte*>(entries_); }

 private:
  /// An edge as the grid sees it: the least value a sample compares as at or above it (clamped to
  /// an integer type's range), its threshold, and whether it sits below every integer sample (-1:
  /// every sample reaches it), above every one (+1: none does) or among them (0).
  struct edge_key {
    key_type least;
    threshold_type threshold;
    int place;
  };

  // Both tables take whole 16-byte vectors, so that blocks copy them 16 bytes at a time; entries
  // of counts take whole 128-byte rows, which a swizzled copy permutes within (swizzled_word).
  TALLY_HOST_DEVICE static std::size_t entries_bytes(std::int64_t cells) {
    constexpr std::size_t unit = counts_entries ? 128 : 16;
    return (static_cast<std::size_t>(cells + 1) * sizeof(entry_type) + unit - 1) / unit * unit;
  }
  TALLY_HOST_DEVICE static std::size_t thresholds_bytes(std::int64_t num_edges) {
    return (static_cast<std::size_t>(num_edges) * sizeof(threshold_type) + 15) / 16 * 16;
  }

  /// A threshold no sample exceeds.
  TALLY_HOST_DEVICE static threshold_type never_threshold() {
    if constexpr (std::is_integral_v<threshold_type>) {
      return static_cast<threshold_type>(std::numeric_limits<Sample>::max());
    } else {
      return std::numeric_limits<threshold_type>::infinity();
    }
  }

  /// A sample as it compares: -0 as +0 (they compare equal, and the bits grid must give them one
  /// cell), int64 rounded to double as numpy compares it.
  TALLY_HOST_DEVICE static threshold_type compared(Sample sample) {
    if constexpr (std::is_same_v<threshold_type, float>) {
      return sample + 0.0f;
    } else if constexpr (std::is_same_v<threshold_type, double>) {
      return static_cast<double>(sample) + 0.0;
    } else {
      return static_cast<threshold_type>(sample);
    }
  }

  /// The greatest value of a floating type below `least` (the threshold of an edge whose least
  /// value at or above it is `least`).
  template <class Float>
  TALLY_HOST_DEVICE static Float below(Float least) {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<Float, float>) {
      return ::nextafterf(least, -std::numeric_limits<float>::infinity());
    } else {
      return ::nextafter(least, -std::numeric_limits<double>::infinity());
    }
#else
    return std::nextafter(least, -std::numeric_limits<Float>::infinity());
#endif
  }

  /// The edge `edge` as the grid sees it (edge_key).
  TALLY_HOST_DEVICE static edge_key key_of_edge(double edge) {
    if constexpr (std::is_same_v<threshold_type, float>) {
      // The least float at or above the edge (the double rounded up: the same float on both sides).
#if defined(__CUDA_ARCH__)
      const float least = __double2float_ru(edge) + 0.0f;
#else
      float up = static_cast<float>(edge);
      if (static_cast<double>(up) < edge) up = std::nextafter(up, std::numeric_limits<float>::infinity());
      const float least = up + 0.0f;
#endif
      return {least, below(least), 0};
    } else if constexpr (std::is_same_v<threshold_type, double>) {
      const double least = edge + 0.0;
      return {least, below(least), 0};
    } else {
      // Integers: x >= edge exactly when x > ceil(edge) - 1.
      constexpr double lowest = static_cast<double>(std::numeric_limits<Sample>::lowest());
      constexpr double highest = static_cast<double>(std::numeric_limits<Sample>::max());
#if defined(__CUDA_ARCH__)
      const double least = ::ceil(edge);
#else
      const double least = std::ceil(edge);
#endif
      if (least <= lowest) {
        return {static_cast<key_type>(lowest), static_cast<threshold_type>(std::numeric_limits<Sample>::lowest()), -1};
      }
      if (least > highest) return {static_cast<key_type>(highest), never_threshold(), 1};
      return {static_cast<key_type>(least), static_cast<threshold_type>(static_cast<std::int64_t>(least) - 1), 0};
    }
  }

  /// Edge i's threshold: x exceeds it exactly when x >= the edge, except a closed last edge that
  /// samples can equal, whose threshold is the edge itself: a sample equal to it counts num_bins
  /// edges, the last bin, with no test of its own a sample.
  TALLY_HOST_DEVICE threshold_type threshold_of_edge(int i, double edge) const {
    return i == num_bins_ && inclusive_ ? last_value_ : key_of_edge(edge).threshold;
  }

  /// The cell an edge counts in: below the grid (-1) when every sample reaches it, past it
  /// (cells) when none does.
  TALLY_HOST_DEVICE int cell_of_key(const edge_key& key) const {
    return key.place < 0 ? -1 : key.place > 0 ? cells_ : cell(key.least);
  }

  /// The edges whose cell is below `c`, by a binary search over the edges' cells.
  template <class EdgeAt>
  TALLY_HOST_DEVICE int edges_below(EdgeAt edge_at, int c) const {
    return partition_point(0, num_bins_ + 1, [&](int i) { return cell_of_key(key_of_edge(edge_at(i))) < c; });
  }

  /// Writes a cell's entry member by member: `first` edges below the cell, `next` below the
  /// next one, and the thresholds of edges `first` on (`threshold_of(i)` gives edge i's, or one
  /// never exceeded past the last): the cell's own, then those of later cells, which no sample of
  /// the cell exceeds. A cell of more edges than the entry holds is flagged and holds none.
  template <class ThresholdOf>
  TALLY_HOST_DEVICE static void set_entry(entry_type& entry, int first, int next, ThresholdOf threshold_of) {
    if constexpr (counts_entries) {
      // Entries of counts: the bin below the cell's edges (first - 1, -1 below every edge), then
      // a flag for each of one, two, and three or more (searched) edges in the cell.
      const int in_cell = next - first;
      const std::uint32_t flags = (in_cell >= 1 ? one_edge_flag : 0u) | (in_cell >= 2 ? two_edges_flag : 0u) |
                                  (in_cell >= 3 ? search_flag : 0u);
      entry = (static_cast<std::uint32_t>(first - 1) << flag_bits) | flags;
    } else {
      const bool several = next - first > entry_keys;
      for (int k = 0; k < entry_keys; ++k) entry.threshold[k] = several ? never_threshold() : threshold_of(first + k);
      entry.word = (static_cast<word_type>(first) << 1) | (several ? 1u : 0u);
    }
  }

  /// The edges below a cell, from its entry.
  TALLY_HOST_DEVICE static int count_of(const entry_type& entry) {
    if constexpr (counts_entries) {
      return bin_below(entry) + 1;
    } else {
      return static_cast<int>(entry.word >> 1);
    }
  }

  /// An entry of counts' flags, in its low flag_bits bits: the cell holds an edge, two edges, and
  /// more than its two thresholds compare (its samples search).
  static constexpr std::uint32_t one_edge_flag = 1u;
  static constexpr std::uint32_t two_edges_flag = 2u;
  static constexpr std::uint32_t search_flag = 4u;
  static constexpr int flag_bits = 3;

  /// An entry of counts' bin below its cell's edges (-1 to num_bins): the word shifted right past
  /// its flags, keeping its sign.
  TALLY_HOST_DEVICE static int bin_below(std::uint32_t entry) { return static_cast<std::int32_t>(entry) >> flag_bits; }

  /// The edges at or below x among those of a cell of several, [lo, hi): the first threshold x does
  /// not exceed, by a binary search.
  TALLY_HOST_DEVICE int search(threshold_type x, int lo, int hi) const {
    const threshold_type* thresholds = thresholds_;
    return partition_point(lo, hi, [thresholds, x](int i) { return x > thresholds[i]; });
  }

  /// The bin of each of `items` samples, -1 to num_bins (the edges at or below it, less one; a
  /// sample equal to a closed last edge counts num_bins edges, its threshold being the edge
  /// itself).
  template <int Items, bool Swizzled>
  TALLY_HOST_DEVICE void bin_items(const Sample (&samples)[Items], int (&bin)[Items]) const {
    threshold_type x[Items];
    int c[Items];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < Items; ++j) x[j] = compared(samples[j]);
#if defined(__CUDA_ARCH__)
    // One test a vector for a float-bits grid over a span above zero (cell_above_zero).
    if (takes_bits_grid && kind_ == grid_kind::float_bits && bits_origin_ > 0) {
#pragma unroll
      for (int j = 0; j < Items; ++j) c[j] = cell_above_zero(static_cast<key_type>(x[j]));
    } else {
#pragma unroll
      for (int j = 0; j < Items; ++j) c[j] = cell(static_cast<key_type>(x[j]));
    }
#else
    for (int j = 0; j < Items; ++j) c[j] = cell(static_cast<key_type>(x[j]));
#endif
    entry_type entry[Items];
    bool searching = false;
#if defined(__CUDA_ARCH__)
    // One test of where the tables live for the whole vector: the compiler cannot tell where a
    // copy lives, and shared-memory loads, not generic ones, are what a block's copy needs.
    if (__isShared(entries_)) {
      const auto base = static_cast<std::uint32_t>(__cvta_generic_to_shared(entries_));
#pragma unroll
      for (int j = 0; j < Items; ++j) entry[j] = load_shared(base + entry_word<Swizzled>(c[j]) * sizeof(entry_type));
      if constexpr (counts_entries) {
        // The cell's first threshold is at the bin below it plus one.
        const auto threshold_base = static_cast<std::uint32_t>(__cvta_generic_to_shared(thresholds_ + 1));
        std::uint32_t flags = 0;
#pragma unroll
        for (int j = 0; j < Items; ++j) {
          const int below = bin_below(entry[j]);
          const std::uint32_t address =
              threshold_base + static_cast<std::uint32_t>(below) * static_cast<std::uint32_t>(sizeof(threshold_type));
          const threshold_type t0 = load_shared_threshold_if(address, entry[j] & one_edge_flag, never_threshold());
          const threshold_type t1 =
              load_shared_threshold_if(address + sizeof(threshold_type), entry[j] & two_edges_flag, never_threshold());
          bin[j] = below + (x[j] > t0 ? 1 : 0) + (x[j] > t1 ? 1 : 0);
          flags |= entry[j];
        }
        searching = (flags & search_flag) != 0u;
      }
    } else {
#pragma unroll
      for (int j = 0; j < Items; ++j) entry[j] = entries_[entry_word<Swizzled>(c[j])];
      if constexpr (counts_entries) {
#pragma unroll
        for (int j = 0; j < Items; ++j) bin[j] = binned_in_cell(x[j], entry[j], searching);
      }
    }
#else
    for (int j = 0; j < Items; ++j) entry[j] = entries_[entry_word<Swizzled>(c[j])];
    if constexpr (counts_entries) {
      for (int j = 0; j < Items; ++j) bin[j] = binned_in_cell(x[j], entry[j], searching);
    }
#endif
    if constexpr (!counts_entries) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int j = 0; j < Items; ++j) {
        bin[j] = static_cast<int>(entry[j].word >> 1) - 1;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (int k = 0; k < entry_keys; ++k) bin[j] += x[j] > entry[j].threshold[k] ? 1 : 0;
        searching = searching || (entry[j].word & 1u) != 0u;
      }
    }
    // Cells of more edges than an entry compares are rare: one test for the vector, then one search
    // a pass for the thread's next sample that needs one, so a warp passes as often as its busiest
    // lane needs. The sample is picked, and its bin put back, by selects: registers cannot be
    // indexed at run time. Thresholds rise, so the search starts at the edges the entry's compares
    // counted, its bin plus one (search() returns that count when x does not exceed its threshold).
    if (!searching) return;
    unsigned pending = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < Items; ++j) pending |= (several_edges(entry[j]) ? 1u : 0u) << j;
    while (pending != 0u) {
      const int j = lowest_set_bit(pending);
      pending &= pending - 1u;
      threshold_type xj = x[0];
      int cj = c[0];
      int lo = bin[0] + 1;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int k = 1; k < Items; ++k) {
        if (j == k) {
          xj = x[k];
          cj = c[k];
          lo = bin[k] + 1;
        }
      }
      const int found = search(xj, lo, count_of(entries_[entry_word<Swizzled>(cj + 1)])) - 1;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int k = 0; k < Items; ++k) bin[k] = j == k ? found : bin[k];
    }
  }

  /// Where cell c's entry is: c, or its place in a swizzled copy.
  template <bool Swizzled>
  TALLY_HOST_DEVICE static std::uint32_t entry_word(int c) {
    return Swizzled ? swizzled_word(static_cast<std::uint32_t>(c)) : static_cast<std::uint32_t>(c);
  }

  /// An entry of counts' bin for x, from the generic tables (global memory, or the host's): the
  /// bin below the cell and a compare with each of the cell's first two thresholds; `searching`
  /// set for a cell of more.
  TALLY_HOST_DEVICE int binned_in_cell(threshold_type x, std::uint32_t entry, bool& searching) const {
    const int below = bin_below(entry);
    int bin = below;
    if ((entry & one_edge_flag) != 0u) bin += x > thresholds_[below + 1] ? 1 : 0;
    if ((entry & two_edges_flag) != 0u) bin += x > thresholds_[below + 2] ? 1 : 0;
    searching = searching || (entry & search_flag) != 0u;
    return bin;
  }

  /// Whether an entry's cell holds more edges than its compares take (searched).
  TALLY_HOST_DEVICE static bool several_edges(const entry_type& entry) {
    if constexpr (counts_entries) {
      return (entry & search_flag) != 0u;
    } else {
      return (entry.word & 1u) != 0u;
    }
  }

#if defined(__CUDA_ARCH__)
  /// The cell entry at shared-memory address `address`.
  __device__ static entry_type load_shared(std::uint32_t address) {
    entry_type entry;
    if constexpr (counts_entries) {
      asm volatile("ld.shared.u32 %0, [%1];" : "=r"(entry) : "r"(address) : "memory");
    } else if constexpr (sizeof(word_type) == 4) {
      std::uint32_t a, b, c, d;
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(address) : "memory");
      std::memcpy(&entry.threshold[0], &a, 4);
      std::memcpy(&entry.threshold[1], &b, 4);
      std::memcpy(&entry.threshold[2], &c, 4);
      entry.word = d;
    } else {
      std::uint64_t a, b;
      asm volatile("ld.shared.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "r"(address) : "memory");
      std::memcpy(&entry.threshold, &a, 8);
      entry.word = b;
    }
    return entry;
  }
#endif

#if defined(__CUDA_ARCH__)
  /// The threshold at shared-memory address `address` where `wanted` is not zero (a flag masked
  /// out of a cell's word, tested as it is: made a bool first, a flag above bit 0 cost a shift
  /// and a compare more), else `otherwise`: one load predicated on the lane, so that lanes that
  /// need no threshold add no wavefront to the warp's.
  __device__ static threshold_type load_shared_threshold_if(std::uint32_t address, std::uint32_t wanted,
                                                            threshold_type otherwise) {
    std::conditional_t<sizeof(threshold_type) == 4, std::uint32_t, std::uint64_t> bits;
    std::memcpy(&bits, &otherwise, sizeof(bits));
    if constexpr (sizeof(threshold_type) == 4) {
      asm volatile("{ .reg .pred p; setp.ne.u32 p, %2, 0; @p ld.shared.u32 %0, [%1]; }"
                   : "+r"(bits) : "r"(address), "r"(wanted) : "memory");
    } else {
      asm volatile("{ .reg .pred p; setp.ne.u32 p, %2, 0; @p ld.shared.u64 %0, [%1]; }"
                   : "+l"(bits) : "r"(address), "r"(wanted) : "memory");
    }
    threshold_type out;
    std::memcpy(&out, &bits, sizeof(out));
    return out;
  }
#endif

  TALLY_HOST_DEVICE static int lowest_set_bit(unsigned bits) {
#if defined(__CUDA_ARCH__)
    return __ffs(static_cast<int>(bits)) - 1;
#else
    return std::countr_zero(bits);
#endif
  }

  /// A float's bits as an int that orders as the floats do (for non-NaN, canonical floats).
  TALLY_HOST_DEVICE static std::int32_t ordered_bits(float x) {
    std::int32_t bits;
    std::memcpy(&bits, &x, sizeof(bits));
    return bits ^ ((bits >> 31) & 0x7fffffff);
  }

#if defined(__CUDA_ARCH__)
  /// cell(x) on a float-bits grid whose span lies above zero (its first key's bits, bits_origin_,
  /// above +0's): every clamped key is a positive float, whose bits order as it does, so the
  /// reordering of negatives that ordered_bits makes (a shift and a logic op a sample, on the ALU
  /// pipe that sets the range bins' rate) is left out. The same cell as cell(x) for every x.
  __device__ int cell_above_zero(key_type x) const {
    const float clamped = clamped_to_bits_span(x);
    return static_cast<int>((__float_as_uint(clamped) - static_cast<std::uint32_t>(bits_origin_)) >> bits_shift_);
  }

  /// x as a float (a double's nearest) clamped to the float-bits grid's span; NaN takes its start
  /// (fmaxf returns the other argument).
  __device__ float clamped_to_bits_span(key_type x) const {
    float key = 0.0f;
    if constexpr (std::is_same_v<key_type, float>) {
      key = x;
    } else {
      key = __double2float_rn(x);
    }
    return fminf(fmaxf(key, bits_low_), bits_high_);
  }
#endif

  /// The cell of x, in [0, cells) for any x, NaN and samples outside the edges included.
  TALLY_HOST_DEVICE int cell(key_type x) const {
    if (takes_bits_grid && kind_ == grid_kind::float_bits) {
      // A double's cell is its nearest float's, which never falls as the double rises. Clamped to
      // the span first: NaN takes its first cell (fmaxf returns the other argument; on the host,
      // selects, as below), and the distance from the span's start fits 32 unsigned bits.
#if defined(__CUDA_ARCH__)
      const float clamped = clamped_to_bits_span(x);
#else
      const float clamped = clamp_without_branch(static_cast<float>(x), bits_low_, bits_high_);
#endif
      const std::uint32_t steps =
          static_cast<std::uint32_t>(ordered_bits(clamped)) - static_cast<std::uint32_t>(bits_origin_);
      return static_cast<int>(steps >> bits_shift_);
    }
    // floor(x * scale + offset), clamped to the cells: on the GPU one multiply-add rounded to
    // nearest, in whichever kernel fills or reads the tables.
#if defined(__CUDA_ARCH__)
    const key_type last_cell = static_cast<key_type>(cells_ - 1);
    if constexpr (std::is_same_v<key_type, float>) {
      const float t = fminf(fmaxf(__fmaf_rn(x, scale_, offset_), 0.0f), last_cell);
      return __float_as_int(__fadd_rd(t, 8388608.0f)) - 0x4b000000;  // the floor, from the bits at 2^23
    } else {
      const double t = fmin(fmax(__fma_rn(x, scale_, offset_), 0.0), last_cell);
      return __double2loint(__dadd_rd(t, 4503599627370496.0));
    }
#else
    // The host's own form, with no math-library call: on x86-64's baseline (no FMA) std::fma,
    // fmin and fmax are calls, which took range bins to 6-7 ns a sample. (x - low) * scale rounds
    // twice, yet never puts a larger x in a smaller cell, and no compiler can fuse it; that is all
    // the tables need, since the host fills the tables it reads with this same function (a GPU
    // call fills its own on the device). The selects take NaN to cell 0, as fmax does.
    const key_type t = (x - span_low_) * scale_;
    return static_cast<int>(clamp_without_branch(t, key_type{0}, last_cell_));  // truncation: the floor, as t >= 0
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
    span_low_ = low;  // the host's form of cell() starts the grid here
  }

  /// Whether plan() may take the float-bits grid: over the floats nearest the interior keys (the
  /// keys themselves for float keys). Double keys take it with entries of counts (four cells a bin,
  /// two thresholds): log-spaced edges crowd the value grid's low cells, which their samples search.
  /// Not with entries of thresholds (one a double): a bin a cell put about two edges in each cell of
  /// the top octaves, where data spread in value lies, and its samples all searched (65536
  /// log-spaced bins, uniform data: 0.214 -> 0.106 of the read bandwidth on an H200).
  static constexpr bool takes_bits_grid = std::is_same_v<key_type, float> || counts_entries;

  void choose_bits_grid(key_type low, key_type high) {
    kind_ = grid_kind::float_bits;
    span_low_ = low;
    bits_low_ = static_cast<float>(low);
    bits_high_ = static_cast<float>(high);
    bits_origin_ = ordered_bits(bits_low_);
    const auto span = static_cast<std::uint64_t>(static_cast<std::int64_t>(ordered_bits(bits_high_)) - bits_origin_);
    bits_shift_ = 0;
    while ((span >> bits_shift_) >= static_cast<std::uint64_t>(cells_)) ++bits_shift_;
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
      const int c = cell_of_key(key_of_edge(edge_at(j)));
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

  const entry_type* entries_ = nullptr;
  const threshold_type* thresholds_ = nullptr;
  threshold_type last_value_{};  // the last edge as a sample equal to it, when inclusive_ (its threshold then)
  key_type scale_{};
  key_type offset_{};
  key_type span_low_{};  // the grid's first interior key (either grid; the host's value grid starts there)
  float bits_low_ = 0.0f;   // the float-bits grid's first and last interior keys, as floats
  float bits_high_ = 0.0f;
  std::int32_t bits_origin_ = 0;
  int bits_shift_ = 0;
  key_type last_cell_ = 1;  // cells_ - 1, for the host's form of cell(), which converts no integer a sample
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
