// The 8- and 16-bit sample types on the GPU (int8, int16, uint16, float16, bfloat16), bit-exact
// against the CPU reference with every strategy: the value window, the value table (in shared or
// global memory) and the per-value count folded into the bins; the layouts on which CUB's
// DeviceHistogram is known to miscount these types; edge sizes and misaligned inputs;
// reductions, count_if and find_first_if.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "common/small_values.hpp"
#include "gpu/gpu_test_support.hpp"
#include "tally/detail/value_tables.hpp"

namespace tally::test {
namespace {

constexpr std::uint64_t seed = 20261125;

using tally_test::from_bits;
using tally_test::value_count;

/// Samples that reach every value of the type several times (shuffled), then `extra` more: random
/// bits, or one value, or a few hot values among a sparse tail, or (in order) runs of values 64
/// apart (a 16-bit table's words 32 apart: one bank, which a block swizzles its copy for) between
/// runs of random bits, so that blocks of either layout run in one launch.
enum class shape { every_value, random_bits, one_value, few_hot, strided_runs };

template <class T>
std::vector<T> make_small_samples(shape s, std::size_t extra, std::uint64_t case_seed) {
  std::mt19937_64 rng(case_seed);
  std::vector<T> out;
  if (s == shape::every_value) {
    for (int copy = 0; copy < 3; ++copy) {
      for (std::uint32_t bits = 0; bits < value_count<T>; ++bits) out.push_back(from_bits<T>(bits));
    }
  }
  const T hot[3] = {from_bits<T>(static_cast<std::uint32_t>(rng())), from_bits<T>(static_cast<std::uint32_t>(rng())),
                    from_bits<T>(static_cast<std::uint32_t>(rng()))};
  for (std::size_t i = 0; i < extra; ++i) {
    switch (s) {
      case shape::one_value: out.push_back(hot[0]); break;
      case shape::few_hot:
        out.push_back(rng() % 16 == 0 ? from_bits<T>(static_cast<std::uint32_t>(rng())) : hot[rng() % 3]);
        break;
      case shape::strided_runs:
        out.push_back(from_bits<T>(static_cast<std::uint32_t>((i / 65536) % 2 == 0 ? (64 * i) % value_count<T>
                                                                                      : rng() % value_count<T>)));
        break;
      default: out.push_back(from_bits<T>(static_cast<std::uint32_t>(rng() % value_count<T>))); break;
    }
  }
  if (s != shape::strided_runs) std::shuffle(out.begin(), out.end(), rng);
  return out;
}

std::vector<strategy> gpu_strategies_and_automatic() {
  std::vector<strategy> all{strategy::automatic};
  for (const strategy s : strategies_for(backend::gpu, operation::histogram)) all.push_back(s);
  return all;
}

/// The one call under test: even bins, range bins or bincount, on either backend.
struct layout {
  enum kind_type { even, range, bincount } kind = even;
  even_bins bins{};
  std::vector<double> edges;
  std::int64_t num_bins() const {
    return kind == range ? static_cast<std::int64_t>(edges.size()) - 1 : bins.num_bins;
  }
};

template <class T>
bool cub_known_wrong() {
  return !std::is_same_v<T, std::uint16_t>;
}

/// Whether strategy `s` may refuse this layout: cub (it runs uint16 only, and only where its levels
/// give numpy's bins), the strategies of one 32-bit copy a block in shared memory where the
/// counted bins do not fit it (bytes and more than 65535 bins count the type's 256 or 65536
/// values first), and packed16 where they do not fit as 16-bit counters (65536 on a 99 KiB chip:
/// test_gpu_small_types_99k).
template <class T>
bool may_refuse(strategy s, std::int64_t num_bins) {
  if (s == strategy::cub) return true;
  const bool shared_copy = s == strategy::shared_atomic || s == strategy::two_phase ||
                           s == strategy::warp_aggregated || s == strategy::replicated;
  const std::int64_t counted = sizeof(T) == 1 ? 256 : std::max<std::int64_t>(num_bins, num_bins > 65535 ? 65536 : 0);
  const std::int64_t copy_bytes = (counted + 1 + 31) / 32 * 32 * 4;  // whole rows, and the left-out word
  // Two a word with the left-out slot (counted + 1 counters), whole rows, and two mode words.
  const std::int64_t packed_bytes = ((counted + 2) / 2 + 31) / 32 * 32 * 4 + 8;
  const auto shared = static_cast<std::int64_t>(gpu::describe_device().shared_memory_per_block_optin);
  return (shared_copy && copy_bytes > shared) || (s == strategy::packed16 && packed_bytes > shared);
}

/// Runs `s` on the GPU over `host` (from `offset` on) and compares with the sequential CPU
/// strategy; a refusal must be not_supported, leave the counts untouched, and for cub on a type
/// CUB miscounts, name CUB's issues.
template <class T>
void expect_matches(const std::vector<T>& host, std::size_t offset, const layout& l, strategy s, upper_edge mode) {
  const std::span<const T> host_span = std::span<const T>(host).subspan(offset);
  std::vector<std::uint64_t> expected(static_cast<std::size_t>(l.num_bins()));
  const histogram_options cpu_options{strategy::sequential, mode};
  histogram_result want;
  if (l.kind == layout::even) {
    want = cpu::histogram_even(host_span, std::span<std::uint64_t>(expected), l.bins, cpu_options);
  } else if (l.kind == layout::range) {
    want = cpu::histogram_range(host_span, std::span<std::uint64_t>(expected), std::span<const double>(l.edges),
                                cpu_options);
  } else if constexpr (std::is_integral_v<T>) {
    want = cpu::histogram_even(host_span, std::span<std::uint64_t>(expected),
                               even_bins{l.num_bins(), 0.0, static_cast<double>(l.num_bins())}, cpu_options);
  }
  auto samples = to_device(host);
  const std::span<const T> device_span = samples.const_span().subspan(offset);
  gpu::device_buffer<std::uint64_t> counts(expected.size());
  counts.fill_bytes(poison_byte);
  const histogram_options options{s, mode};
  try {
    histogram_result got;
    if (l.kind == layout::even) {
      got = gpu::histogram_even(device_span, counts.span(), l.bins, options);
    } else if (l.kind == layout::range) {
      got = gpu::histogram_range(device_span, counts.span(), std::span<const double>(l.edges), options);
    } else if constexpr (std::is_integral_v<T>) {
      // The async form leaves negative samples out (the waiting one refuses them), as the CPU's
      // unit bins over [0, num_bins) do.
      gpu::workspace ws;
      got.chose = gpu::bincount_async(device_span, counts.span(), ws, options);
      got.left_out = ws.read_scalar(nullptr);
    }
    ASSERT_EQ(download(counts), expected);
    ASSERT_EQ(got.left_out, want.left_out);
  } catch (const error& e) {
    ASSERT_EQ(e.code(), errc::not_supported) << e.what();
    ASSERT_TRUE(may_refuse<T>(s, l.num_bins())) << "refused where it should count: " << e.what();
    if (s == strategy::cub && cub_known_wrong<T>()) {
      ASSERT_NE(std::string(e.what()).find("cccl#"), std::string::npos) << e.what();
    }
    for (const std::uint64_t c : download(counts)) ASSERT_EQ(c, 0xababababababababull);
  }
}

template <class T>
std::vector<layout> layouts_for() {
  std::vector<layout> out;
  const auto even = [&](std::int64_t n, double lo, double hi) { out.push_back({layout::even, {n, lo, hi}, {}}); };
  if constexpr (std::is_integral_v<T>) {
    const double lo = std::numeric_limits<T>::lowest();
    const double hi = std::numeric_limits<T>::max();
    even(256, -0.25, 1000.0);                                      // a table of the values in range
    even(static_cast<std::int64_t>(hi - lo + 1), lo, hi + 1);      // every value its own bin: the window
    even(100, -50.0, 50.0);                                        // unit step across zero
    even(4096, lo - 10.0, hi + 10.0);                              // past both ends
    even(70000, lo, hi + 1);                                       // more bins than a table entry holds: the fold
    even(7, 3.5, 3.75);                                            // no value inside
    even(256, lo, hi + 1);                                         // a whole step: the multiply-high
    even(1000, -3000.0, 7000.0);                                   // a whole step, past int8's ends
    out.push_back({layout::bincount, {1000, 0, 0}, {}});
    out.push_back({layout::bincount, {70000, 0, 0}, {}});
  } else {
    even(4096, 0.0, 1000.0);
    even(256, -1.0, 1.0);                // edges exact in the type: widened to float, no table
    even(2048, -1024.0, 1024.0);         // exact in float16, not in bfloat16 (a table)
    even(4096, -8.0, 8.0);               // float16's widest exact reach: 2^11 steps from zero
    even(64, 0x1p-20, 0x1p-14);          // float16 subnormal edges
    even(1000, -3.3, 7.9);
    even(100, 1.0, 1.001);  // edges that round onto each other: empty bins
    even(70000, -1000.0, 1000.0);
    even(65535, -60000.0, 60000.0);  // the most a table holds, its entries over most finite values
  }
  // Range bins: log-spaced, and random over the type's span with duplicates.
  std::vector<double> log_edges;
  for (int i = 0; i <= 300; ++i) log_edges.push_back(std::pow(10.0, -2.0 + 6.0 * i / 300.0));
  out.push_back({layout::range, {}, log_edges});
  std::mt19937_64 rng(seed);
  const double span_lo = std::is_integral_v<T> ? static_cast<double>(std::numeric_limits<T>::lowest()) : -70000.0;
  const double span_hi = std::is_integral_v<T> ? static_cast<double>(std::numeric_limits<T>::max()) : 70000.0;
  std::uniform_real_distribution<double> position(span_lo, span_hi);
  for (const int n : {5, 3000, 70000}) {
    std::vector<double> edges(static_cast<std::size_t>(n) + 1);
    for (double& e : edges) e = std::round(position(rng) * 2.0) / 2.0;
    std::sort(edges.begin(), edges.end());
    out.push_back({layout::range, {}, edges});
  }
  return out;
}

template <class T>
class GpuSmallTypes : public ::testing::Test {};
using SmallTypes = ::testing::Types<std::int8_t, std::int16_t, std::uint16_t, float16, bfloat16>;
TYPED_TEST_SUITE(GpuSmallTypes, SmallTypes);

TYPED_TEST(GpuSmallTypes, EveryStrategyMatchesTheCpuReference) {
  using T = TypeParam;
  int case_index = 0;
  for (const layout& l : layouts_for<T>()) {
    for (const shape sh : {shape::every_value, shape::random_bits, shape::one_value, shape::few_hot, shape::strided_runs}) {
      ++case_index;
      const std::uint64_t case_seed = seed + static_cast<std::uint64_t>(case_index);
      const std::size_t extra = quick_mode() ? 5000 : 300001;
      const auto host = make_small_samples<T>(sh, extra, case_seed);
      for (const strategy s : gpu_strategies_and_automatic()) {
        // bincount has no upper edge; cub counts half-open bins only.
        const bool half_open = case_index % 2 == 0 || s == strategy::cub || l.kind == layout::bincount;
        const upper_edge mode = half_open ? upper_edge::exclusive : upper_edge::inclusive;
        SCOPED_TRACE(::testing::Message() << tally_test::small_type_name<T>() << " kind=" << l.kind << " bins=" << l.num_bins()
                                          << " shape=" << static_cast<int>(sh) << " " << to_string(s)
                                          << " seed=" << case_seed);
        expect_matches(host, 0, l, s, mode);
      }
    }
  }
}

/// Even bins over 16-bit integers with a step that is not whole take a ratio as well as the table
/// (from 2^20 samples on, up to 8192 bins), and each block of the shared kernel chooses between
/// them by its first samples. Samples in runs, in order, so that blocks of every choice count in one
/// launch: values spread over the bins' window with one in 16 outside it (the ratio, its clamp
/// leaving those out), one value (the table), values 64 apart (the ratio, its copy swizzled), a few
/// neighbouring values (the table). Bins with a ratio (the whole range in 4096 bins, a step just
/// over one value, a step below one: a whole part of one, a step of 255) and without one (7185 bins
/// over the whole range: edges that round past whole numbers; int16 bins past 32767) are counted
/// exactly by every strategy, and `automatic` says which it took.
TYPED_TEST(GpuSmallTypes, BlocksCountingByTheRatioOrTheTableAgreeWithTheCpu) {
  using T = TypeParam;
  if constexpr (!std::is_integral_v<T> || sizeof(T) != 2) {
    GTEST_SKIP() << "the ratio is for even bins over 16-bit integers";
  } else {
    const double lo = std::numeric_limits<T>::lowest();
    const double hi = std::numeric_limits<T>::max();
    const std::size_t n = quick_mode() ? (std::size_t{1} << 20) + 77 : (std::size_t{1} << 22) + 77;
    const std::vector<even_bins> cases{{4096, lo, hi},           {1000, 0.5, 1000.3}, {3000, -100.25, 2000.0},
                                       {257, lo + 7.0, hi - 3.0}, {7185, lo, hi},      {8192, 0.0, 60000.0}};
    int with_ratio = 0;
    for (const even_bins& bins : cases) {
      const double first = std::max(std::ceil(bins.lower), lo);
      const double last = std::min(std::floor(bins.upper), hi);
      const auto width = static_cast<std::uint64_t>(last - first) + 1;
      std::mt19937_64 rng(seed + static_cast<std::uint64_t>(bins.num_bins));
      std::vector<T> host(n);
      const std::size_t run = 40000;  // several blocks' first samples a run
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t draw = rng();
        const auto in_window = [&](std::uint64_t k) { return static_cast<T>(first + static_cast<double>(k % width)); };
        switch ((i / run) % 4) {
          case 0: host[i] = draw % 16 == 0 ? from_bits<T>(static_cast<std::uint32_t>(draw >> 40)) : in_window(draw >> 8); break;
          case 1: host[i] = in_window(width / 2); break;
          case 2: host[i] = in_window(64 * (draw >> 8)); break;
          default: host[i] = in_window(draw % 8); break;
        }
      }
      auto samples = to_device(host);
      for (const upper_edge mode : {upper_edge::inclusive, upper_edge::exclusive}) {
        SCOPED_TRACE(::testing::Message() << tally_test::small_type_name<T>() << " bins=" << bins.num_bins << " ["
                                          << bins.lower << ", " << bins.upper
                                          << "] inclusive=" << (mode == upper_edge::inclusive));
        for (const strategy s : {strategy::automatic, strategy::shared_atomic, strategy::replicated}) {
          SCOPED_TRACE(to_string(s));
          expect_matches(host, 0, layout{layout::even, bins, {}}, s, mode);
          expect_matches(host, 1, layout{layout::even, bins, {}}, s, mode);
        }
        // The host finds a ratio where the CPU's search does, and `automatic` says it counts by it.
        const even_bin_mapper<T> map(bins, mode);
        const bool has_ratio = tally::detail::ratio_for(
                                   map, tally::detail::counted_values<T>(static_cast<double>(map.edge(0)),
                                                                         static_cast<double>(map.edge(bins.num_bins)),
                                                                         mode == upper_edge::inclusive))
                                   .has_value();
        with_ratio += has_ratio ? 1 : 0;
        gpu::device_buffer<std::uint64_t> counts(static_cast<std::size_t>(bins.num_bins));
        const histogram_result got = gpu::histogram_even(samples.const_span(), counts.span(), bins, {strategy::automatic, mode});
        EXPECT_EQ(got.chose.reason.find("fixed-point ratio") != std::string::npos, has_ratio) << got.chose.reason;
      }
    }
    EXPECT_GE(with_ratio, 8);  // four of the six binnings, both modes
  }
}

TYPED_TEST(GpuSmallTypes, EdgeSizesAndMisalignedInputsAreCountedExactly) {
  using T = TypeParam;
  const auto all = layouts_for<T>();
  for (const std::size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 33, 4099}) {
    for (std::size_t offset = 0; offset < 3; ++offset) {
      auto host = make_small_samples<T>(shape::random_bits, n + offset, seed + n);
      for (const layout& l : {all[0], all[1], all[4]}) {
        for (const strategy s : gpu_strategies_and_automatic()) {
          SCOPED_TRACE(::testing::Message() << tally_test::small_type_name<T>() << " n=" << n << " offset=" << offset
                                            << " bins=" << l.num_bins() << " " << to_string(s));
          expect_matches(host, offset, l, s, upper_edge::exclusive);
        }
      }
    }
  }
}

/// The layouts where CUB's DeviceHistogram is known to miscount these types, exact on every tally
/// strategy (and refused by cub): negative int8 samples (NVIDIA/cccl#10977), full-range int8 and
/// int16 levels (#10975), bfloat16 even bins (#10940), and more than 256 bfloat16, 2048 float16 or
/// 32768 int16 bins (#10976).
TEST(GpuSmallTypesCubCases, LayoutsCubMiscountsAreExactOnEveryStrategy) {
  const auto run_all = [](const auto& host, const even_bins& bins) {
    for (const strategy s : gpu_strategies_and_automatic()) {
      SCOPED_TRACE(::testing::Message() << "bins=" << bins.num_bins << " [" << bins.lower << ", " << bins.upper
                                        << ") " << to_string(s));
      expect_matches(host, 0, layout{layout::even, bins, {}}, s, upper_edge::exclusive);
    }
  };
  const auto int8s = make_small_samples<std::int8_t>(shape::every_value, 100000, seed);
  run_all(int8s, even_bins{256, -128.0, 128.0});
  run_all(int8s, even_bins{16, -128.0, 128.0});
  const auto int16s = make_small_samples<std::int16_t>(shape::every_value, 100000, seed);
  run_all(int16s, even_bins{256, -32768.0, 32768.0});
  run_all(int16s, even_bins{65536, -32768.0, 32768.0});
  run_all(int16s, even_bins{40000, -20000.0, 20000.0});
  const auto bf16s = make_small_samples<bfloat16>(shape::every_value, 100000, seed);
  run_all(bf16s, even_bins{10, -1.0, 1.0});
  run_all(bf16s, even_bins{1000, -100.0, 100.0});
  const auto halves = make_small_samples<float16>(shape::every_value, 100000, seed);
  run_all(halves, even_bins{4096, -100.0, 100.0});
}

TYPED_TEST(GpuSmallTypes, ReductionsAndPredicatesMatchTheCpu) {
  using T = TypeParam;
  using A = accumulator_t<T>;
  const auto host = make_small_samples<T>(shape::random_bits, 1000003, seed);
  auto samples = to_device(host);
  const std::span<const T> h(host);
  // Sums of half types are float sums, whose bits depend on the order: over whole numbers in
  // [-8, 8] every order gives the exact sum, so every strategy must give the CPU's.
  std::vector<T> whole(host.size());
  std::mt19937_64 rng(seed);
  for (T& v : whole) {
    if constexpr (is_half_float_v<T>) {
      v = T::nearest(static_cast<double>(static_cast<int>(rng() % 17) - 8));
    } else {
      v = host[&v - whole.data()];
    }
  }
  auto whole_samples = to_device(whole);
  for (const reduce_op op : {reduce_op::sum, reduce_op::min, reduce_op::max}) {
    const bool sum = op == reduce_op::sum;
    const A want = cpu::reduce(std::span<const T>(sum ? whole : host), op, {strategy::sequential}).value;
    for (const strategy s : strategies_for(backend::gpu, operation::reduce)) {
      const A got = gpu::reduce((sum ? whole_samples : samples).const_span(), op, {s}).value;
      if constexpr (std::is_floating_point_v<A>) {
        if (std::isnan(want)) {  // random bits hold NaN: min and max are NaN then, of either sign
          EXPECT_TRUE(std::isnan(got)) << to_string(s) << " op=" << static_cast<int>(op);
          continue;
        }
      }
      EXPECT_EQ(got, want) << to_string(s) << " op=" << static_cast<int>(op);
    }
  }
  if constexpr (is_half_float_v<T>) {
    reduce_options det;
    det.deterministic = true;
    // Over values of every size (NaN and infinities left out): the same bits as the CPU's.
    std::vector<T> finite;
    for (const T v : host) {
      if (std::isfinite(static_cast<double>(v))) finite.push_back(v);
    }
    auto finite_samples = to_device(finite);
    const A want = cpu::reduce(std::span<const T>(finite), reduce_op::sum, det).value;
    for (const strategy s : {strategy::automatic, strategy::block_reduce_atomic, strategy::two_phase}) {
      det.algorithm = s;
      EXPECT_EQ(gpu::reduce(finite_samples.const_span(), reduce_op::sum, det).value, want) << to_string(s);
    }
  }
  for (const comparison op : {comparison::less, comparison::less_equal, comparison::greater,
                              comparison::greater_equal, comparison::equal, comparison::not_equal}) {
    for (const T value : {host[host.size() / 2], host[host.size() - 5]}) {
      const compare_to<T> predicate{op, value};
      const auto count = cpu::count_if(h, predicate, {strategy::sequential}).count;
      const auto first = cpu::find_first_if(h, predicate, {strategy::sequential}).index;
      for (const strategy s : strategies_for(backend::gpu, operation::count_if)) {
        EXPECT_EQ(gpu::count_if(samples.const_span(), predicate, {s}).count, count)
            << to_string(s) << " op=" << static_cast<int>(op);
      }
      for (const strategy s : strategies_for(backend::gpu, operation::find_first_if)) {
        EXPECT_EQ(gpu::find_first_if(samples.const_span(), predicate, {s}).index, first)
            << to_string(s) << " op=" << static_cast<int>(op);
      }
    }
  }
}

}  // namespace
}  // namespace tally::test
