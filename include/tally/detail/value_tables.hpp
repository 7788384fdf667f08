// How the GPU bins 8- and 16-bit samples, and float32 samples over a range that holds few floats:
// such a type (or range) has at most 65536 values, so a bin is decided once per value, not once
// per sample. Samples are counted by their bits, whatever the type (one
// set of kernels per width): through a window of unit-width bins (value_window_mapper), through a
// table of each value's bin filled on the device from the type's own mapper (value_table_mapper;
// float_table_mapper for such float32 ranges; both a window_table),
// or, for more bins than a 16-bit table entry holds and for bytes, counted per value and folded
// into the bins afterwards. The type's mapper (even_bin_mapper, range_bin_mapper) stays the one
// definition of its bins; the CPU backend maps with it directly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "tally/bins.hpp"
#include "tally/config.hpp"
#include "tally/small_float.hpp"

namespace tally::detail {

/// The bits a small sample is counted by.
template <class Sample>
using sample_bits_t = std::conditional_t<sizeof(Sample) == 1, std::uint8_t, std::uint16_t>;

/// How a width's values are ordered by their bits: integers by the bits themselves (a signed
/// type's values in order are a rotation of them, which windows taken modulo 2^16 follow), floats
/// by sign and magnitude (negatives reversed below the positives).
enum class value_order : std::uint8_t { bits, sign_magnitude };

/// What the window and the table index by: the bits, or for floats a key that orders the values
/// (-0 and +0 adjacent, NaN at both ends).
template <value_order Order>
TALLY_HOST_DEVICE inline std::uint32_t order_key(std::uint32_t bits) {
  if constexpr (Order == value_order::bits) {
    return bits;
  } else {
    return bits ^ ((bits & 0x8000u) != 0 ? 0xffffu : 0x8000u);
  }
}

/// The values of one small sample type, by position: position p is the p-th value in increasing
/// order (NaN excluded from the finite range), which windows and tables are planned over.
template <class Sample>
struct small_values {
  static constexpr std::uint32_t count = std::uint32_t{1} << (8 * sizeof(Sample));
  static constexpr value_order order = is_half_float_v<Sample> ? value_order::sign_magnitude : value_order::bits;

  /// The position of the value with these bits.
  TALLY_HOST_DEVICE static std::uint32_t position(std::uint32_t bits) {
    if constexpr (is_half_float_v<Sample>) {
      return order_key<value_order::sign_magnitude>(bits);
    } else if constexpr (std::is_signed_v<Sample>) {
      return bits ^ (count >> 1);  // offset binary
    } else {
      return bits;
    }
  }
  /// The bits of the value at `position` (the inverse of position()).
  TALLY_HOST_DEVICE static std::uint32_t bits_at(std::uint32_t position) {
    if constexpr (is_half_float_v<Sample>) {
      return position ^ ((position & 0x8000u) != 0 ? 0x8000u : 0xffffu);
    } else if constexpr (std::is_signed_v<Sample>) {
      return position ^ (count >> 1);
    } else {
      return position;
    }
  }
  /// The key the device indexes by (order_key of the bits) for the value at `position`.
  TALLY_HOST_DEVICE static std::uint32_t key_at(std::uint32_t position) { return order_key<order>(bits_at(position)); }

  TALLY_HOST_DEVICE static Sample from_bits(std::uint32_t bits) {
    Sample sample;
    const auto word = static_cast<sample_bits_t<Sample>>(bits);
    memcpy(&sample, &word, sizeof(sample));
    return sample;
  }
  TALLY_HOST_DEVICE static Sample at(std::uint32_t position) { return from_bits(bits_at(position)); }

  /// Positions of the finite values: all of an integer type's; a float type's from its most
  /// negative finite value to its largest (infinities are never counted).
  static constexpr std::uint32_t first_finite =
      is_half_float_v<Sample> ? (std::is_same_v<Sample, float16> ? 0x03ffu : 0x007fu) + 1 : 0;
  static constexpr std::uint32_t last_finite =
      is_half_float_v<Sample> ? (std::is_same_v<Sample, float16> ? 0xfbffu : 0xff7fu) : count - 1;
};

/// The values a histogram can count: the positions [first, first + span) (span 0: none).
struct value_window {
  std::uint32_t first = 0;
  std::uint32_t span = 0;
};

/// The window of values with first_edge <= x < last_edge (x <= last_edge when `inclusive`), for
/// edges in double: found by two binary searches over the finite values' positions.
template <class Sample>
value_window counted_values(double first_edge, double last_edge, bool inclusive) {
  using values = small_values<Sample>;
  const auto value = [](std::uint32_t p) { return static_cast<double>(values::at(p)); };
  const std::uint32_t lo = partition_point(values::first_finite, values::last_finite + 1,
                                           [&](std::uint32_t p) { return value(p) < first_edge; });
  const std::uint32_t end = partition_point(values::first_finite, values::last_finite + 1, [&](std::uint32_t p) {
    return inclusive ? value(p) <= last_edge : value(p) < last_edge;
  });
  return end > lo ? value_window{lo, end - lo} : value_window{lo, 0};
}

/// The bin of a mapper's slot (its `slot`: the bin, or num_bins for a sample it leaves out).
TALLY_HOST_DEVICE inline std::int64_t bin_of_slot(int slot, std::int64_t num_bins) {
  return slot < num_bins ? slot : left_out_bin;
}

/// 16-bit integer samples, as their bits, in bins of width one (even bins of step one, bincount):
/// bin = (bits - first) mod 2^16 + bin_offset, for the `span` values from `first` on. One
/// subtraction, a mask and a compare a sample. With `ClosedLast` the window's last value (the
/// upper edge of a closed last bin, numpy's) joins the bin below it: one clamp more.
template <bool ClosedLast = false>
class value_window_mapper {
 public:
  value_window_mapper() = default;
  value_window_mapper(std::uint32_t first_bits, std::uint32_t span, std::int64_t bin_offset, std::int64_t num_bins)
      : first_(first_bits), span_(span), bin_offset_(static_cast<int>(bin_offset)), num_bins_(num_bins) {}

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return num_bins_; }

  /// Whether the bins are the 65536 values themselves, bin (bits - first) mod 2^16, none left out
  /// (uint16 over [0, 65536), int16 over [-32768, 32768), a uint16 bincount of 65536, the counts
  /// of every value that more bins are folded from): kernels may then skip each sample's range test.
  TALLY_HOST_DEVICE bool counts_every_value() const
    requires(!ClosedLast)
  {
    return span_ == 0x10000u && bin_offset_ == 0 && num_bins_ == 0x10000;
  }
  TALLY_HOST_DEVICE std::uint32_t first_bits() const
    requires(!ClosedLast)
  {
    return first_;
  }

  TALLY_HOST_DEVICE std::int64_t operator()(std::uint16_t bits) const { return bin_of_slot(slot(bits), num_bins_); }
  /// The bin, or num_bins() where the sample is left out (the shared kernels' left-out word).
  TALLY_HOST_DEVICE int slot(std::uint16_t bits) const {
    const std::uint32_t offset = (static_cast<std::uint32_t>(bits) - first_) & 0xffffu;
    if constexpr (ClosedLast) {
      const int bin = static_cast<int>(offset) + bin_offset_;
      const int last_bin = static_cast<int>(num_bins_) - 1;
      return offset < span_ ? (bin < last_bin ? bin : last_bin) : static_cast<int>(num_bins_);
    } else {
      return offset < span_ ? static_cast<int>(offset) + bin_offset_ : static_cast<int>(num_bins_);
    }
  }

 private:
  std::uint32_t first_ = 0;
  std::uint32_t span_ = 0;
  int bin_offset_ = 0;  // the bin of the first value (unit_window_for keeps bins below 2^31)
  std::int64_t num_bins_ = 0;
};

/// 16-bit integer samples, as their bits, in even bins of a whole step: the value's offset from
/// the bins' lower edge, divided by the step with one multiply-high (exact while
/// num_bins * step^2 < 2^32, which `fits` checks; a table takes the others). The last value,
/// counted in the last bin with an inclusive upper edge, is clamped there.
class value_step_mapper {
 public:
  /// Whether floor(x * magic / 2^32), magic = floor(2^32 / step) + 1, is floor(x / step) for
  /// every offset x up to num_bins * step: the error x * (magic - 2^32 / step) / 2^32, at most
  /// x / 2^32, stays below 1 / step (the least distance from x / step up to the next whole
  /// number) while x * step < 2^32.
  static bool fits(std::int64_t num_bins, std::int64_t step) {
    return step >= 2 &&
           static_cast<double>(num_bins) * static_cast<double>(step) * static_cast<double>(step) < 4294967296.0;
  }

  value_step_mapper() = default;
  /// Values from `first_bits` on, `span` of them, whose offsets from the lower edge start at
  /// `start` (the first counted value less the lower edge).
  value_step_mapper(std::uint32_t first_bits, std::uint32_t span, std::uint32_t start, std::int64_t step,
                    std::int64_t num_bins)
      : first_(first_bits), span_(span), start_(start),
        magic_(static_cast<std::uint32_t>((std::uint64_t{1} << 32) / static_cast<std::uint64_t>(step) + 1)),
        num_bins_(num_bins) {}

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return num_bins_; }

  TALLY_HOST_DEVICE std::int64_t operator()(std::uint16_t bits) const { return bin_of_slot(slot(bits), num_bins_); }
  /// The bin, or num_bins() where the sample is left out (the shared kernels' left-out word).
  /// Bins of a 16-bit table or step fit an int.
  TALLY_HOST_DEVICE int slot(std::uint16_t bits) const {
    const std::uint32_t offset = (static_cast<std::uint32_t>(bits) - first_) & 0xffffu;
    const std::uint32_t x = offset + start_;
#if defined(__CUDA_ARCH__)
    const std::uint32_t quotient = __umulhi(x, magic_);
#else
    const auto quotient = static_cast<std::uint32_t>((static_cast<std::uint64_t>(x) * magic_) >> 32);
#endif
    const auto last = static_cast<std::uint32_t>(num_bins_ - 1);
    return offset < span_ ? static_cast<int>(quotient < last ? quotient : last) : static_cast<int>(num_bins_);
  }

 private:
  std::uint32_t first_ = 0;
  std::uint32_t span_ = 0;
  std::uint32_t start_ = 0;
  std::uint32_t magic_ = 0;
  std::int64_t num_bins_ = 0;
};

/// A 16-bit integer's even bin by a fixed-point ratio, for any step: bin = floor((offset * ratio +
/// start) / 2^32), the ratio (about 2^32 / step) in 32.32 fixed point and the start (the first
/// value's bin and its fraction, in 2^-32) found on the host by ratio_for so that every value of
/// the window gets the bin of the type's own mapper. value_table_mapper carries one where it is
/// found; a block whose samples spread over the table's banks counts with it, since there every
/// table read takes turns on its banks (value_ratio_mapper).
struct value_ratio {
  std::uint32_t whole = 0;     // the ratio's whole part: below 2^15 (ratio_for)
  std::uint32_t fraction = 0;  // its fraction, in 2^-32
  std::uint64_t start = 0;     // in 2^-32: below 2^48, so offset * fraction + start fits 64 bits
};

/// 16-bit integer samples, as their bits, in even bins by their value_ratio: no table read, a
/// 64-bit multiply-add (the fraction's product and the start), a multiply-add (the whole part's)
/// and a clamp a sample. The offset is taken modulo 2^16, as the table's is; ratio_for takes a
/// ratio that gives every offset past the window num_bins or more, so the clamp to num_bins (the
/// left-out word) leaves those out with no compare of the offset.
class value_ratio_mapper {
 public:
  value_ratio_mapper() = default;
  TALLY_HOST_DEVICE value_ratio_mapper(std::uint32_t first_bits, value_ratio ratio, std::int64_t num_bins)
      : first_(first_bits), ratio_(ratio), num_bins_(static_cast<std::uint32_t>(num_bins)) {}

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return num_bins_; }

  TALLY_HOST_DEVICE std::int64_t operator()(std::uint16_t bits) const { return bin_of_slot(slot(bits), num_bins_); }
  /// The bin, or num_bins() where the sample is left out (the shared kernels' left-out word).
  TALLY_HOST_DEVICE int slot(std::uint16_t bits) const {
    const std::uint32_t offset = (static_cast<std::uint32_t>(bits) - first_) & 0xffffu;
    // A multiply-high that adds the start's low word (IMAD.HI), its high word, and the whole
    // part's multiply-add: three instructions (an IMAD.WIDE.U32 with the start as its 64-bit addend
    // took four, the start copied into its register pair each sample).
    const std::uint64_t scaled = static_cast<std::uint64_t>(offset) * ratio_.fraction + ratio_.start;
    const std::uint32_t bin = offset * ratio_.whole + static_cast<std::uint32_t>(scaled >> 32);
    return static_cast<int>(bin < num_bins_ ? bin : num_bins_);
  }

 private:
  std::uint32_t first_ = 0;
  value_ratio ratio_;
  std::uint32_t num_bins_ = 0;  // at most value_table_mapper::max_bins
};

/// float16 or bfloat16 samples, as their bits, in even bins whose edges are all exact in the
/// type (a power-of-two step): the exact-float shortcut on the value widened to float, which
/// then compares as the edges rounded to the type do (they are the same numbers).
template <class Half>
class half_exact_mapper {
 public:
  half_exact_mapper() = default;
  explicit half_exact_mapper(const exact_float_bin_mapper& map) : map_(map) {}

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return map_.num_bins(); }
  TALLY_HOST_DEVICE std::int64_t operator()(std::uint16_t bits) const {
    Half h;
    memcpy(&h, &bits, sizeof(h));
    return map_(static_cast<float>(h));
  }

 private:
  exact_float_bin_mapper map_;
};

/// Where word `w` of a table sits in a block's swizzled copy (block_histogram.cuh's
/// swizzle_table_in_block): within its row of 32 words (one a bank), its bank XORed with the row's
/// number, so that words a multiple of 32 apart, which a warp would read in turns from one bank,
/// spread over the banks. The copy and every mapper that reads it (window_table::place,
/// grid_range_bin_mapper::swizzled_word) place words by it.
TALLY_HOST_DEVICE constexpr std::uint32_t row_swizzled_word(std::uint32_t w) { return w ^ ((w >> 5) & 31u); }

/// What value_table_mapper and float_table_mapper share: `span` entries over a window of keys from
/// `first`, and one past them that every key outside the window reads (the offset clamped: one
/// instruction, no test). An entry is a bin, or num_bins for a key left out: the shared kernels'
/// left-out word, so a sample's word in a block's copy (slot) is a clamp and one load. The table is
/// filled on the device and, like the range-bin grid's, copied to a block's shared memory where it
/// fits (has_tables); `Derived` is the mapper, which reading_tables_at returns.
template <class Entry, class Derived>
class window_table {
 public:
  using entry_type = Entry;

  /// The entry of a key in bin `bin` (left_out_bin: left out).
  TALLY_HOST_DEVICE static entry_type entry_of(std::int64_t bin, std::int64_t num_bins) {
    return static_cast<entry_type>(bin < 0 ? num_bins : bin);
  }
  /// Bytes of a table of `span` entries and the one past them, in whole 128-byte rows (a word a
  /// bank), which a block's swizzled copy permutes within (`place`).
  TALLY_HOST_DEVICE static std::size_t table_bytes(std::uint32_t span) {
    return ((span + 1) * sizeof(entry_type) + 127) / 128 * 128;
  }
  /// Where entry `p` sits in a swizzled copy (bank_swizzled_table): within its 128-byte row, its
  /// word's bank XORed with the row's number, so that entries a multiple of 32 words apart
  /// (16-bit values that step by 64, 32-bit keys by 32), which sit in one or two banks and make a
  /// warp's reads take turns, spread over the banks like any others: row_swizzled_word of the
  /// entry's word, the entry keeping its half of a word.
  TALLY_HOST_DEVICE static std::uint32_t place(std::uint32_t p) {
    constexpr int word_shift = sizeof(entry_type) == 2 ? 1 : 0;  // entries a 32-bit word: two or one
    return p ^ (((p >> (5 + word_shift)) & 31u) << word_shift);
  }
  /// The 32-bit word of the table that the entry `offset` keys past the window's first is in
  /// (unswizzled): what a block asks of its first samples to choose its copy's layout.
  TALLY_HOST_DEVICE int word_at(std::uint32_t offset) const {
    return static_cast<int>((offset < span_ ? offset : span_) * sizeof(entry_type) / 4);
  }

  /// A sample's bin, or num_bins() where it is left out (`Swizzled`: from a swizzled copy): the
  /// entry at the derived mapper's offset of the sample (`offset_of`).
  template <bool Swizzled = false, class Key>
  TALLY_HOST_DEVICE int slot(Key x) const {
    return entry_at<Swizzled>(static_cast<const Derived&>(*this).offset_of(x));
  }
  template <class Key>
  TALLY_HOST_DEVICE std::int64_t operator()(Key x) const {
    return bin_of_slot(slot(x), num_bins_);
  }
  /// The table's word a sample reads (word_at): what a block asks of its first samples.
  template <class Key>
  TALLY_HOST_DEVICE int table_word(Key x) const {
    return word_at(static_cast<const Derived&>(*this).offset_of(x));
  }

  TALLY_HOST_DEVICE std::int64_t num_bins() const { return num_bins_; }
  TALLY_HOST_DEVICE std::uint32_t span() const { return span_; }
  /// The key of entry `p` (below span()), which the fill maps by the bins' own mapper.
  TALLY_HOST_DEVICE std::uint32_t key_at(std::uint32_t p) const { return first_ + p; }

  TALLY_HOST_DEVICE std::size_t tables_bytes() const { return table_bytes(span_); }
  TALLY_HOST_DEVICE const std::byte* tables() const { return reinterpret_cast<const std::byte*>(table_); }
  TALLY_HOST_DEVICE Derived reading_tables_at(const std::byte* tables) const {
    Derived moved = static_cast<const Derived&>(*this);
    moved.table_ = reinterpret_cast<const entry_type*>(tables);
    return moved;
  }

 protected:
  window_table() = default;
  window_table(std::uint32_t first_key, std::uint32_t span, std::int64_t num_bins, const std::byte* table)
      : first_(first_key), span_(span), num_bins_(num_bins), table_(reinterpret_cast<const entry_type*>(table)) {}

  TALLY_HOST_DEVICE std::uint32_t first_key() const { return first_; }

  /// The entry `offset` keys past the window's first (the last entry past the window), in a table
  /// laid out plainly or, `Swizzled`, by `place`.
  template <bool Swizzled = false>
  TALLY_HOST_DEVICE int entry_at(std::uint32_t offset) const {
    const std::uint32_t clamped = offset < span_ ? offset : span_;
    const std::uint32_t p = Swizzled ? place(clamped) : clamped;
#if defined(__CUDA_ARCH__)
    if (__isShared(table_)) {
      // A shared-memory load, not a generic one: the compiler cannot tell where the copy lives.
      // The "memory" clobber keeps it after the barrier that follows the table's fill (an asm
      // without one may move across it); sm_90's machine code is the same with it.
      const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(table_ + p));
      if constexpr (sizeof(entry_type) == 2) {
        std::uint16_t value;
        asm("ld.shared.u16 %0, [%1];" : "=h"(value) : "r"(address) : "memory");
        return value;
      } else {
        std::int32_t value;
        asm("ld.shared.s32 %0, [%1];" : "=r"(value) : "r"(address) : "memory");
        return value;
      }
    }
#endif
    return static_cast<int>(table_[p]);
  }

 private:
  std::uint32_t first_ = 0;
  std::uint32_t span_ = 0;
  std::int64_t num_bins_ = 0;
  const entry_type* table_ = nullptr;
};

/// A table mapper reading a block's swizzled copy of its table (window_table::place, or the
/// range-bin grid's swizzled_word): the mapper a block counts with where its first samples crowd
/// the table's banks (swizzle_table_in_block). The grid maps vectors (map_items, slot_items).
template <class Mapper>
struct bank_swizzled_table : Mapper {
  TALLY_HOST_DEVICE explicit bank_swizzled_table(const Mapper& map) : Mapper(map) {}
  template <class Sample>
  TALLY_HOST_DEVICE int slot(Sample x) const {
    return Mapper::template slot<true>(x);
  }
  template <class Sample>
  TALLY_HOST_DEVICE std::int64_t operator()(Sample x) const {
    if constexpr (requires { Mapper::maps_items; }) {
      const Sample one[1] = {x};
      int bin[1];
      map_items(one, bin);
      return bin[0];
    } else {
      return bin_of_slot(slot(x), this->num_bins());
    }
  }
  template <int Items, class Sample>
  TALLY_HOST_DEVICE void map_items(const Sample (&samples)[Items], int (&bins)[Items]) const {
    Mapper::template map_items<Items, true>(samples, bins);
  }
  template <int Items, class Sample>
  TALLY_HOST_DEVICE void slot_items(const Sample (&samples)[Items], int (&slots)[Items]) const {
    Mapper::template slot_items<Items, true>(samples, slots);
  }
};

/// 16-bit samples, as their bits, through a table of each counted value's bin (window_table): the
/// key (order_key) less the window's first, modulo 2^16, indexes it. For at most 65535 bins.
template <value_order Order>
class value_table_mapper : public window_table<std::uint16_t, value_table_mapper<Order>> {
  using base = window_table<std::uint16_t, value_table_mapper<Order>>;

 public:
  static constexpr std::int64_t max_bins = 0xffff;

  value_table_mapper() = default;
  value_table_mapper(std::uint32_t first_key, std::uint32_t span, std::int64_t num_bins, const std::byte* table)
      : base(first_key, span, num_bins, table) {}

  /// The entry a sample's bits index (window_table's slot, table_word).
  TALLY_HOST_DEVICE std::uint32_t offset_of(std::uint16_t bits) const {
    return (order_key<Order>(bits) - this->first_key()) & 0xffffu;
  }

  /// The same mapper carrying the ratio that gives every value of its window its bin (ratio_for):
  /// even bins over 16-bit integers.
  value_table_mapper with_ratio(value_ratio ratio) const
    requires(Order == value_order::bits)
  {
    value_table_mapper carrying = *this;
    carrying.ratio_ = ratio;
    carrying.has_ratio_ = true;
    return carrying;
  }
  /// Whether it carries a ratio; the mapper that counts by it (no table read).
  TALLY_HOST_DEVICE bool has_ratio() const { return has_ratio_; }
  TALLY_HOST_DEVICE value_ratio_mapper ratio_mapper() const
    requires(Order == value_order::bits)
  {
    return value_ratio_mapper(this->first_key(), ratio_, this->num_bins());
  }

 private:
  value_ratio ratio_;
  bool has_ratio_ = false;
};

/// Even bins over float32 samples whose range holds few floats: a range far from zero for its
/// width, such as numpy's [v - 0.5, v + 0.5] for data of the one value v, or [10^6, 10^6 + 1000).
/// There the edges, rounded to floats, pile up (several bins between two neighbouring floats), so
/// the estimate is no longer the bin or the one below (estimated_even_bin_mapper::fits fails), and
/// the range-bin grid counted them at 0.40-0.59 of the read bandwidth. Each float of the range gets
/// its bin in a table instead (window_table), filled on the device by the bins' own mapper (the
/// general rule): a sample is its key (the float's bits, ordered), a subtraction, a clamp and one
/// load.
class float_table_mapper : public window_table<std::int32_t, float_table_mapper> {
 public:
  /// The most floats a table spans (256 KiB of entries).
  static constexpr std::uint32_t max_span = std::uint32_t{1} << 16;

  /// A key that orders floats by value: negatives (their bits reversed) below the positives, -0
  /// just below +0, NaN past both infinities.
  TALLY_HOST_DEVICE static std::uint32_t key_of_bits(std::uint32_t bits) {
    return bits ^ ((bits & 0x80000000u) != 0 ? 0xffffffffu : 0x80000000u);
  }
  TALLY_HOST_DEVICE static std::uint32_t bits_of_key(std::uint32_t key) {
    return key ^ ((key & 0x80000000u) != 0 ? 0x80000000u : 0xffffffffu);
  }
  static std::uint32_t key_of(float x) {
    std::uint32_t bits;
    std::memcpy(&bits, &x, sizeof(bits));
    return key_of_bits(bits);
  }

  /// The keys a table for `map`'s bins spans: every float from its first edge to its last, and
  /// one more at each end (-0 and +0 are neighbours, both counted where zero is an edge; the
  /// fill leaves out whatever the bins do not count); none past max_span floats.
  static std::optional<value_window> window_for(const even_bin_mapper<float>& map) {
    const float first = map.edge(0);
    const float last = map.edge(map.num_bins());
    if (!std::isfinite(first) || !std::isfinite(last) || !(first <= last)) return std::nullopt;
    const std::uint32_t low = key_of(first) - 1;  // finite: keys from 0x007fffff + 1 to 0xff800000 - 1
    const std::uint64_t span = std::uint64_t{key_of(last)} + 1 - low + 1;
    if (span > max_span) return std::nullopt;
    return value_window{low, static_cast<std::uint32_t>(span)};
  }

  float_table_mapper() = default;
  float_table_mapper(value_window window, std::int64_t num_bins, const std::byte* table)
      : window_table(window.first, window.span, num_bins, table) {}

  /// The entry a sample's key indexes (window_table's slot, table_word).
  TALLY_HOST_DEVICE std::uint32_t offset_of(float x) const {
    std::uint32_t bits;
    memcpy(&bits, &x, sizeof(bits));
    return key_of_bits(bits) - first_key();
  }
};

/// Bins over 32- and 64-bit integer samples whose edges span few integers: range bins over
/// [0, 1000) or ages, even bins far from zero for their width. Every integer from the first edge to
/// the last gets its bin in a table (window_table), filled on the device by the bins' own mapper:
/// a sample is a subtraction, a clamp and one load, where the range-bin grid read a 16-byte entry
/// and compared three thresholds. The offset is taken modulo 2^bits: a sample below the window
/// wraps past it (the window never reaches past the type's largest value), so one unsigned
/// compare leaves out both sides.
template <class Sample>
class integer_table_mapper : public window_table<std::uint16_t, integer_table_mapper<Sample>> {
  using base = window_table<std::uint16_t, integer_table_mapper<Sample>>;
  using unsigned_type = std::make_unsigned_t<Sample>;

 public:
  static_assert(std::is_integral_v<Sample> && sizeof(Sample) >= 4);
  /// The most bins a 16-bit entry holds beside the left-out entry (num_bins).
  static constexpr std::int64_t max_bins = 0xffff;
  /// The most integers a table spans (128 KiB of entries).
  static constexpr std::uint32_t max_span = std::uint32_t{1} << 16;

  /// The integers from `first_edge` up to `last_edge` (both finite doubles, first <= last),
  /// clamped to the type: the first, and how many; none when more than max_span, more bins than
  /// max_bins, or (int64) an edge of 2^52 or more in magnitude, where numpy's compare of a sample
  /// as a double rounds it (the grid takes those).
  static std::optional<std::pair<std::int64_t, std::uint32_t>> window_for(double first_edge, double last_edge,
                                                                          std::int64_t num_bins) {
    constexpr double limit = 4503599627370496.0;  // 2^52
    if (num_bins > max_bins || !(first_edge <= last_edge) || !(std::fabs(first_edge) < limit) ||
        !(std::fabs(last_edge) < limit)) {
      return std::nullopt;
    }
    const double lowest = static_cast<double>(std::numeric_limits<Sample>::lowest());
    const double highest = static_cast<double>(std::numeric_limits<Sample>::max());
    const double first = std::max(std::ceil(first_edge), lowest);
    const double last = std::min(std::floor(last_edge), highest);
    if (last < first) return std::pair<std::int64_t, std::uint32_t>{0, 0};  // no integer counted
    const double span = last - first + 1;
    if (span > static_cast<double>(max_span)) return std::nullopt;
    return std::pair<std::int64_t, std::uint32_t>{static_cast<std::int64_t>(first), static_cast<std::uint32_t>(span)};
  }

  integer_table_mapper() = default;
  integer_table_mapper(std::int64_t first, std::uint32_t span, std::int64_t num_bins, const std::byte* table)
      : base(0, span, num_bins, table), first_(static_cast<Sample>(first)) {}

  /// The integer of entry `p` (below span()), which the fill maps by the bins' own mapper.
  TALLY_HOST_DEVICE Sample value_at(std::uint32_t p) const {
    return static_cast<Sample>(static_cast<unsigned_type>(first_) + p);
  }

  /// The entry a sample indexes (window_table's slot, table_word; entry_at clamps to the entry
  /// past the window).
  TALLY_HOST_DEVICE std::uint32_t offset_of(Sample x) const {
    const unsigned_type offset = static_cast<unsigned_type>(x) - static_cast<unsigned_type>(first_);
    if constexpr (sizeof(Sample) == 4) {
      return offset;
    } else {
      const unsigned_type span = this->span();
      return static_cast<std::uint32_t>(offset < span ? offset : span);
    }
  }

 private:
  Sample first_{};
};

/// The first and the last value of a 16-bit integer type that bins [lower, upper) count (upper
/// too when `inclusive`), clamped to the type; last < first when none.
template <class Sample>
std::pair<std::int64_t, std::int64_t> counted_integers(const even_bins& bins, bool inclusive) {
  const auto lowest = static_cast<std::int64_t>(std::numeric_limits<Sample>::lowest());
  const auto highest = static_cast<std::int64_t>(std::numeric_limits<Sample>::max());
  const auto lower = static_cast<std::int64_t>(bins.lower);
  const auto upper = static_cast<std::int64_t>(bins.upper);
  const std::int64_t first = std::clamp(lower, lowest, highest + 1);
  const std::int64_t last = std::clamp(inclusive ? upper : upper - 1, lowest - 1, highest);
  return {first, last};
}

/// The window for even bins of width one over a 16-bit integer type, for fewer than 2^31 bins (its
/// bin offset is an int); else none. `ClosedLast`: bins with a closed last bin some value reaches
/// (`map.closed_unit_step()`: numpy's bins over integers); else half-open ones (`map.unit_step()`).
template <bool ClosedLast, class Sample>
std::optional<value_window_mapper<ClosedLast>> unit_window_for(const even_bin_mapper<Sample>& map,
                                                               const even_bins& bins) {
  const bool unit = ClosedLast ? map.closed_unit_step() : map.unit_step();
  if (!unit || bins.num_bins > std::numeric_limits<int>::max()) return std::nullopt;
  const auto [first, last] = counted_integers<Sample>(bins, ClosedLast);
  return value_window_mapper<ClosedLast>(static_cast<std::uint16_t>(first),
                                         static_cast<std::uint32_t>(std::max<std::int64_t>(last - first + 1, 0)),
                                         first - static_cast<std::int64_t>(bins.lower), bins.num_bins);
}

/// The multiply-high for even bins of a whole step over a 16-bit integer type, where it is exact
/// (value_step_mapper::fits); else none.
template <class Sample>
std::optional<value_step_mapper> whole_step_for(const even_bin_mapper<Sample>& map, const even_bins& bins,
                                                bool inclusive) {
  if (map.shortcut() != even_shortcut::integer_step) return std::nullopt;
  const auto step = static_cast<std::int64_t>((bins.upper - bins.lower) / static_cast<double>(bins.num_bins));
  if (!value_step_mapper::fits(bins.num_bins, step)) return std::nullopt;
  const auto [first, last] = counted_integers<Sample>(bins, inclusive);
  return value_step_mapper(static_cast<std::uint16_t>(first),
                           static_cast<std::uint32_t>(std::max<std::int64_t>(last - first + 1, 0)),
                           static_cast<std::uint32_t>(first - static_cast<std::int64_t>(bins.lower)), step,
                           bins.num_bins);
}

/// The ratio (value_ratio_mapper) that gives every value of `window` (positions of a 16-bit integer
/// type) the bin `map` gives it, or none. `map` puts an integer in the last bin whose lower edge
/// (`edge`, monotone) is at or below it (its general rule fixes its estimate up against the edges,
/// and its shortcuts give the same bins), so a bin's values run from the first integer at or past
/// its lower edge to the one before the next bin's. For a ratio, each bin bounds the start from
/// below at its first offset and from above at its last, and the first offset past the window
/// (values above it, and below it taken modulo 2^16) from below, at num_bins; the ratios next to
/// 2^32 / step are tried, each given up at the first bin that leaves no start. O(bins) edges, and
/// O(bins) integer steps a ratio tried that fits (about 15 us at 4096 bins).
template <class Sample>
std::optional<value_ratio> ratio_for(const even_bin_mapper<Sample>& map, value_window window) {
  static_assert(std::is_integral_v<Sample> && sizeof(Sample) == 2);
  using values = small_values<Sample>;
  if (window.span == 0) return std::nullopt;
  const auto span = static_cast<std::int64_t>(window.span);
  const auto first_value = static_cast<double>(values::at(window.first));
  struct run {
    std::int64_t bin;
    std::int64_t first;  // offsets, both in the run
    std::int64_t last;
  };
  std::vector<run> runs;
  runs.reserve(static_cast<std::size_t>(std::min<std::int64_t>(map.num_bins(), span)));
  std::int64_t current = map(values::at(window.first));
  if (current < 0) return std::nullopt;
  std::int64_t begin = 0;
  for (std::int64_t b = current + 1; b <= map.num_bins() && begin < span; ++b) {
    // The first offset of bin b: of the first integer at or past its lower edge (clamped to the
    // window in double, before it becomes an integer).
    const std::int64_t next =
        b < map.num_bins()
            ? static_cast<std::int64_t>(
                  std::clamp(std::ceil(static_cast<double>(map.edge(b))) - first_value, 0.0, static_cast<double>(span)))
            : span;
    if (next < begin) return std::nullopt;  // edges out of order: not bins this reasons about
    if (next > begin) {
      runs.push_back({current, begin, next - 1});
      begin = next;
    }
    current = b;
  }
  if (begin < span) return std::nullopt;
  // For `ratio`, the least start, in 2^-32, or none. int64 holds every bound: bins below 2^16, the
  // ratio below 2^47 and offsets at most 2^16.
  constexpr std::int64_t max_ratio = std::int64_t{1} << 47;
  const auto start_for = [&](std::int64_t ratio) -> std::optional<std::int64_t> {
    std::int64_t least = std::numeric_limits<std::int64_t>::min();
    std::int64_t greatest = std::numeric_limits<std::int64_t>::max();
    if (span < std::int64_t{1} << 16) least = (map.num_bins() << 32) - span * ratio;
    for (const run& r : runs) {
      least = std::max(least, (r.bin << 32) - r.first * ratio);
      greatest = std::min(greatest, ((r.bin + 1) << 32) - 1 - r.last * ratio);
      if (least > greatest) return std::nullopt;
    }
    return least;  // at least the first bin's << 32 >= 0 (its run starts at offset 0), below 2^48
  };
  const double width = static_cast<double>(map.edge(map.num_bins())) - static_cast<double>(map.edge(0));
  const double center = std::ldexp(static_cast<double>(map.num_bins()) / width, 32);
  if (!(center >= 0.0) || !(center < static_cast<double>(max_ratio))) return std::nullopt;
  const auto nearest = static_cast<std::int64_t>(center);
  // Ratios tried each side of the nearest: a closed last bin that a value reaches needs one a
  // little below it. A search by thirds over 2^21 ratios found none more in the CPU test's random
  // ranges, at up to 0.7 ms a range.
  constexpr std::int64_t farthest = 16;
  for (std::int64_t distance = 0; distance <= farthest; ++distance) {
    for (const std::int64_t ratio : {nearest - distance, nearest + distance}) {
      if (ratio < 0 || ratio >= max_ratio) continue;
      if (const auto start = start_for(ratio)) {
        return value_ratio{static_cast<std::uint32_t>(ratio >> 32), static_cast<std::uint32_t>(ratio & 0xffffffff),
                           static_cast<std::uint64_t>(*start)};
      }
    }
  }
  return std::nullopt;
}

}  // namespace tally::detail
