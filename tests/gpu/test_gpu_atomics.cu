// GPU tests of tally's public device-side atomic helpers (include/tally/atomic.cuh). Every helper
// runs under heavy contention (all threads on one address, and on a few) in global memory (device
// scope) and shared memory (block scope), and some on managed memory (system scope); every result
// is checked exactly: final values bit for bit, and the old values the helpers returned as a
// history that must add up (a permutation, a chain, a bound). CUDA source, built only with the GPU
// backend; without a GPU it exits 77 (skipped).
//
// Sizes. Native atomics (fetch_max, fetch_add, the warp-aggregated add) get millions of threads on
// one address. A compare-and-swap loop where *every* thread must write is different: each success
// makes every other pending swap fail, so its cost grows with the square of the number of
// contenders; those tests use thousands of threads per address in global memory (one block's
// worth per address in shared memory) to stay in milliseconds. TALLY_TEST_QUICK=1 divides sizes
// by 16, for runs under compute-sanitizer.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "common/quick_mode.hpp"
#include "tally/atomic.cuh"
#include "tally/gpu.hpp"

namespace tally::test {
namespace {

using gpu::device_buffer;

// ---- launching and moving data ---------------------------------------------------------------

void cuda_check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

/// `full`, or a sixteenth of it (at least `floor`) under TALLY_TEST_QUICK=1.
std::int64_t scaled(std::int64_t full, std::int64_t floor = 256) {
  return quick_mode() ? std::max<std::int64_t>(full / 16, std::min(floor, full)) : full;
}

/// A number of 1024-thread blocks, scaled.
int scaled_blocks(int full) { return static_cast<int>(scaled(full, 8)); }

constexpr int global_block_size = 256;
constexpr int shared_block_size = 1024;

/// body(i) on its own thread for every i in [0, n). The last warp may be partial: divergence.
template <class Body>
__global__ void for_each_thread_kernel(std::int64_t n, Body body) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) body(i);
}

template <class Body>
void for_each_thread(std::int64_t n, const Body& body) {
  const auto blocks = static_cast<unsigned>((n + global_block_size - 1) / global_block_size);
  for_each_thread_kernel<<<blocks, global_block_size>>>(n, body);
  cuda_check(cudaGetLastError(), "launch");
  cuda_check(cudaDeviceSynchronize(), "kernel");
}

/// Block-private slots in shared memory: set by the first threads, a barrier, every thread's
/// update (atomic helpers only touch the slots here), a barrier, then the slots handed to
/// `finish`. The barriers keep the plain stores and loads apart from the atomics (racecheck).
template <class Body>
__global__ void shared_slots_kernel(Body body) {
  using Slot = typename Body::slot_type;
  __shared__ Slot slots[Body::num_slots];
  if (threadIdx.x < Body::num_slots) slots[threadIdx.x] = body.initial(static_cast<int>(threadIdx.x));
  __syncthreads();
  body.update(slots, static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
  __syncthreads();
  if (threadIdx.x < Body::num_slots) body.finish(static_cast<int>(blockIdx.x), static_cast<int>(threadIdx.x), slots[threadIdx.x]);
}

template <class Body>
void for_each_block_in_shared(int blocks, const Body& body) {
  shared_slots_kernel<<<blocks, shared_block_size>>>(body);
  cuda_check(cudaGetLastError(), "launch");
  cuda_check(cudaDeviceSynchronize(), "kernel");
}

template <class T>
device_buffer<T> to_device(const std::vector<T>& host) {
  return device_buffer<T>(std::span<const T>(host));
}

template <class T>
std::vector<T> to_host(const device_buffer<T>& buffer) {
  std::vector<T> host(buffer.size());
  buffer.download(host);
  return host;
}

/// Memory the host and the device both see (system scope's test ground).
template <class T>
class managed_buffer {
 public:
  explicit managed_buffer(std::size_t size) { cuda_check(cudaMallocManaged(&data_, size * sizeof(T)), "cudaMallocManaged"); }
  managed_buffer(const managed_buffer&) = delete;
  managed_buffer& operator=(const managed_buffer&) = delete;
  ~managed_buffer() { cudaFree(data_); }
  T* data() const { return data_; }

 private:
  T* data_ = nullptr;
};

/// A well-mixed hash of a thread index, the same on host and device: which lanes take part, and
/// on which counter, in the divergence tests.
__host__ __device__ constexpr std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// ---- checks ------------------------------------------------------------------------------------

/// `values` are first, first + 1, ..., first + size - 1 in some order: every value handed out
/// exactly once.
template <class T>
::testing::AssertionResult consecutive_from(const std::vector<T>& values, T first) {
  std::vector<bool> seen(values.size(), false);
  for (std::size_t k = 0; k < values.size(); ++k) {
    const T offset = static_cast<T>(values[k] - first);
    if (values[k] < first || offset >= values.size()) {
      return ::testing::AssertionFailure() << "old value " << values[k] << " (entry #" << k << ") is outside ["
                                           << first << ", " << first + values.size() << ")";
    }
    if (seen[offset]) return ::testing::AssertionFailure() << "old value " << values[k] << " was handed out twice";
    seen[offset] = true;
  }
  return ::testing::AssertionSuccess();
}

template <class T>
using bits_of = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;

template <class T>
bits_of<T> bits(T value) {
  return std::bit_cast<bits_of<T>>(value);
}

template <class T>
T from_bits(bits_of<T> b) {
  return std::bit_cast<T>(b);
}

/// The oracle's order for non-NaN values: the usual one, with -0.0 below +0.0.
template <class T>
bool ordered_below(T a, T b) {
  return a < b || (a == b && std::signbit(a) && !std::signbit(b));
}

/// IEEE 754 totalOrder as an unsigned key, for NaN-inclusive bounds on the returned old values.
template <class T>
bits_of<T> total_order_key(T value) {
  constexpr bits_of<T> sign = bits_of<T>{1} << (8 * sizeof(T) - 1);
  const bits_of<T> b = bits(value);
  return (b & sign) ? static_cast<bits_of<T>>(~b) : static_cast<bits_of<T>>(b | sign);
}

template <class T>
std::string describe(T value) {
  std::ostringstream out;
  out << value << " (bits 0x" << std::hex << static_cast<unsigned long long>(bits(value)) << ")";
  return out.str();
}

// ---- atomic_update -----------------------------------------------------------------------------

/// Thread i adds one to counter i % num_counters (counters a cache line apart) with atomic_update.
struct add_one_with_update {
  unsigned* counters;
  int num_counters;
  unsigned* olds;
  __device__ void operator()(std::int64_t i) const {
    unsigned* counter = counters + (i % num_counters) * 32;
    olds[i] = tally::atomic_update(counter, [](unsigned x) { return x + 1u; });
  }
};

void check_add_one_with_update(std::int64_t n, int num_counters) {
  device_buffer<unsigned> counters(static_cast<std::size_t>(num_counters) * 32);
  counters.fill_bytes(0);
  device_buffer<unsigned> olds(static_cast<std::size_t>(n));
  for_each_thread(n, add_one_with_update{counters.data(), num_counters, olds.data()});
  const auto counts = to_host(counters);
  const auto old = to_host(olds);
  for (int c = 0; c < num_counters; ++c) {
    std::vector<unsigned> mine;
    for (std::int64_t i = c; i < n; i += num_counters) mine.push_back(old[static_cast<std::size_t>(i)]);
    EXPECT_EQ(counts[static_cast<std::size_t>(c) * 32], mine.size()) << "counter " << c;
    EXPECT_TRUE(consecutive_from(mine, 0u)) << "counter " << c;
  }
}

TEST(AtomicUpdate, EveryThreadAddingOneToOneGlobalAddressCountsExactlyAndHandsOutEachOldValueOnce) {
  check_add_one_with_update(scaled(1 << 13), 1);
}

TEST(AtomicUpdate, ThreadsSpreadOverSixteenGlobalAddressesCountEachExactly) {
  check_add_one_with_update(scaled(1 << 15), 16);
}

/// Per block: every thread adds one to one shared slot at block scope.
struct add_one_in_shared {
  using slot_type = unsigned;
  static constexpr int num_slots = 1;
  unsigned* olds;
  unsigned* totals;
  __device__ unsigned initial(int) const { return 0; }
  __device__ void update(unsigned* slots, std::int64_t i) const {
    olds[i] = tally::atomic_update<cuda::thread_scope_block>(&slots[0], [](unsigned x) { return x + 1u; });
  }
  __device__ void finish(int block, int, unsigned slot) const { totals[block] = slot; }
};

TEST(AtomicUpdate, EveryThreadOfABlockAddingOneToOneSharedSlotAtBlockScopeCountsExactly) {
  const int blocks = scaled_blocks(512);
  device_buffer<unsigned> olds(static_cast<std::size_t>(blocks) * shared_block_size);
  device_buffer<unsigned> totals(static_cast<std::size_t>(blocks));
  for_each_block_in_shared(blocks, add_one_in_shared{olds.data(), totals.data()});
  const auto old = to_host(olds);
  const auto total = to_host(totals);
  for (int b = 0; b < blocks; ++b) {
    ASSERT_EQ(total[static_cast<std::size_t>(b)], static_cast<unsigned>(shared_block_size)) << "block " << b;
    const auto first = old.begin() + static_cast<std::ptrdiff_t>(b) * shared_block_size;
    ASSERT_TRUE(consecutive_from(std::vector<unsigned>(first, first + shared_block_size), 0u)) << "block " << b;
  }
}

/// An 8-byte trivially copyable struct updated as one: a count and the largest id seen.
struct count_and_largest {
  unsigned count;
  unsigned largest;
};

struct count_and_track_largest {
  count_and_largest* target;
  unsigned* old_counts;
  __device__ void operator()(std::int64_t i) const {
    const auto id = static_cast<unsigned>(i);
    const count_and_largest old = tally::atomic_update(target, [id](count_and_largest seen) {
      return count_and_largest{seen.count + 1, seen.largest > id ? seen.largest : id};
    });
    old_counts[i] = old.count;
  }
};

TEST(AtomicUpdate, AnEightByteStructIsUpdatedAsOneValue) {
  const std::int64_t n = scaled(1 << 13);
  device_buffer<count_and_largest> target(1);
  target.fill_bytes(0);
  device_buffer<unsigned> old_counts(static_cast<std::size_t>(n));
  for_each_thread(n, count_and_track_largest{target.data(), old_counts.data()});
  const count_and_largest final_value = to_host(target)[0];
  EXPECT_EQ(final_value.count, static_cast<unsigned>(n));
  EXPECT_EQ(final_value.largest, static_cast<unsigned>(n - 1));
  EXPECT_TRUE(consecutive_from(to_host(old_counts), 0u));
}

/// An update that leaves a NaN as it is: comparing values (NaN != NaN) would retry forever or
/// write needlessly; comparing bits sees "unchanged" and returns.
struct keep_nan {
  float* target;
  float* olds;
  __device__ void operator()(std::int64_t i) const {
    olds[i] = tally::atomic_update(target, [](float x) { return x; });
  }
};

/// An update that turns a NaN into some NaN (x + 1): must end, and leave a NaN.
struct nan_plus_one {
  float* target;
  float* olds;
  __device__ void operator()(std::int64_t i) const {
    olds[i] = tally::atomic_update(target, [](float x) { return x + 1.0f; });
  }
};

TEST(AtomicUpdate, AStoredNanWithAPayloadEndsTheLoopAndIsComparedByItsBits) {
  const std::int64_t n = scaled(1 << 16);
  const float payload_nan = from_bits<float>(0x7fc00123u);
  device_buffer<float> target(std::span<const float>(&payload_nan, 1));
  device_buffer<float> olds(static_cast<std::size_t>(n));
  for_each_thread(n, keep_nan{target.data(), olds.data()});
  EXPECT_EQ(bits(to_host(target)[0]), 0x7fc00123u) << "an unchanged NaN must not be rewritten";
  for (const float old : to_host(olds)) ASSERT_EQ(bits(old), 0x7fc00123u);

  for_each_thread(n, nan_plus_one{target.data(), olds.data()});
  EXPECT_TRUE(std::isnan(to_host(target)[0]));
  for (const float old : to_host(olds)) ASSERT_TRUE(std::isnan(old));
}

// ---- atomic_max / atomic_min, both forms --------------------------------------------------------

using form = tally::extremum_form;
enum class extreme { max, min };

template <form Form, extreme Which, cuda::thread_scope Scope = cuda::thread_scope_device, class T>
__device__ T apply_extreme(T* target, T value) {
  if constexpr (Which == extreme::max) return tally::atomic_max<Scope, Form>(target, value);
  else return tally::atomic_min<Scope, Form>(target, value);
}

/// Thread i folds values[i] into targets[(i % num_targets) * 32] and keeps the old value.
template <class T, form Form, extreme Which>
struct fold_extreme {
  const T* values;
  T* targets;
  int num_targets;
  T* olds;
  __device__ void operator()(std::int64_t i) const {
    olds[i] = apply_extreme<Form, Which>(targets + (i % num_targets) * 32, values[i]);
  }
};

/// Random values of both signs and many magnitudes, with -0.0, +0.0, the smallest subnormals,
/// the largest finite values and (if asked) infinities and NaNs of both signs mixed in.
template <class T>
std::vector<T> mixed_values(std::size_t n, std::uint64_t seed, bool infinities, bool nans) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-30, 30);
  std::vector<T> out(n);
  using limits = std::numeric_limits<T>;
  const T specials[] = {T(-0.0), T(0.0), limits::denorm_min(), -limits::denorm_min(), limits::max(), limits::lowest()};
  for (std::size_t i = 0; i < n; ++i) {
    const double fraction = unit(rng);  // drawn in a fixed order: the same values on every compiler
    out[i] = static_cast<T>(std::ldexp(fraction, exponent(rng)));
    const std::uint64_t pick = rng() % 1024;
    if (pick < 6) out[i] = specials[pick];
    if (infinities && pick == 6) out[i] = limits::infinity();
    if (infinities && pick == 7) out[i] = -limits::infinity();
    if (nans && pick == 8) out[i] = limits::quiet_NaN();
    if (nans && pick == 9) out[i] = -limits::quiet_NaN();
    if (nans && pick == 10) out[i] = from_bits<T>(bits(limits::quiet_NaN()) | 0x5);  // a payload
  }
  return out;
}

/// What the contract says the target holds after folding `values` into `initial`.
template <class T>
T expected_extreme(extreme which, T initial, const std::vector<T>& values) {
  const bool any_nan = std::any_of(values.begin(), values.end(), [](T v) { return std::isnan(v); });
  if (any_nan) return which == extreme::max ? tally::max_nan<T>() : tally::min_nan<T>();
  // A NaN stored beforehand keeps its totalOrder place: above everything (+NaN) or below (-NaN).
  if (std::isnan(initial)) {
    const bool stays = std::signbit(initial) == (which == extreme::min);
    if (stays) return initial;
    if (values.empty()) return initial;
    T best = values[0];
    for (const T v : values) best = (which == extreme::max ? ordered_below(best, v) : ordered_below(v, best)) ? v : best;
    return best;
  }
  T best = initial;
  for (const T v : values) best = (which == extreme::max ? ordered_below(best, v) : ordered_below(v, best)) ? v : best;
  return best;
}

/// Runs one form on one or more targets and checks the final values bit for bit and the returned
/// old values: each is the initial value or an argument (a NaN argument as the stored NaN), none
/// is beyond the final value, and some thread saw the initial value.
template <class T, form Form, extreme Which>
void check_extreme(const std::vector<T>& values, T initial, int num_targets) {
  const auto n = static_cast<std::int64_t>(values.size());
  auto d_values = to_device(values);
  const std::vector<T> initial_targets(static_cast<std::size_t>(num_targets) * 32, initial);
  auto targets = to_device(initial_targets);
  device_buffer<T> olds(values.size());
  for_each_thread(n, fold_extreme<T, Form, Which>{d_values.data(), targets.data(), num_targets, olds.data()});
  const auto final_values = to_host(targets);
  const auto old = to_host(olds);
  const T stored_nan = Which == extreme::max ? tally::max_nan<T>() : tally::min_nan<T>();
  for (int t = 0; t < num_targets; ++t) {
    SCOPED_TRACE("target " + std::to_string(t) + " of " + std::to_string(num_targets));
    std::vector<T> mine;
    std::vector<bits_of<T>> allowed{bits(initial)};
    for (std::int64_t i = t; i < n; i += num_targets) {
      const T v = values[static_cast<std::size_t>(i)];
      mine.push_back(v);
      allowed.push_back(bits(std::isnan(v) ? stored_nan : v));
    }
    std::sort(allowed.begin(), allowed.end());
    const T expected = expected_extreme(Which, initial, mine);
    const T got = final_values[static_cast<std::size_t>(t) * 32];
    ASSERT_EQ(bits(got), bits(expected)) << "final " << describe(got) << ", expected " << describe(expected);
    bool someone_saw_initial = false;
    for (std::int64_t i = t; i < n; i += num_targets) {
      const T o = old[static_cast<std::size_t>(i)];
      ASSERT_TRUE(std::binary_search(allowed.begin(), allowed.end(), bits(o)))
          << "thread " << i << " got old value " << describe(o) << ", which nobody stored";
      if (Which == extreme::max) {
        ASSERT_LE(total_order_key(o), total_order_key(got)) << "thread " << i << " saw " << describe(o) << " above the final value";
      } else {
        ASSERT_GE(total_order_key(o), total_order_key(got)) << "thread " << i << " saw " << describe(o) << " below the final value";
      }
      someone_saw_initial = someone_saw_initial || bits(o) == bits(initial);
    }
    EXPECT_TRUE(someone_saw_initial);
  }
}

template <class T, form Form>
void check_both_extremes(const std::vector<T>& values, int num_targets) {
  check_extreme<T, Form, extreme::max>(values, -std::numeric_limits<T>::infinity(), num_targets);
  check_extreme<T, Form, extreme::min>(values, std::numeric_limits<T>::infinity(), num_targets);
}

template <class T>
class AtomicExtreme : public ::testing::Test {};
using FloatingTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(AtomicExtreme, FloatingTypes);

TYPED_TEST(AtomicExtreme, IntegerFormMatchesTheCpuBitForBitWithAMillionThreadsOnOneAddress) {
  using T = TypeParam;
  const auto n = static_cast<std::size_t>(scaled(1 << 20));
  SCOPED_TRACE("seed 11");
  check_both_extremes<T, form::integer>(mixed_values<T>(n, 11, false, false), 1);
  SCOPED_TRACE("seed 12, with infinities, eight addresses");
  check_both_extremes<T, form::integer>(mixed_values<T>(n, 12, true, false), 8);
}

TYPED_TEST(AtomicExtreme, CasFormMatchesTheCpuBitForBitWithAMillionThreadsOnOneAddress) {
  using T = TypeParam;
  const auto n = static_cast<std::size_t>(scaled(1 << 20));
  SCOPED_TRACE("seed 13");
  check_both_extremes<T, form::cas_loop>(mixed_values<T>(n, 13, false, false), 1);
  SCOPED_TRACE("seed 14, with infinities, eight addresses");
  check_both_extremes<T, form::cas_loop>(mixed_values<T>(n, 14, true, false), 8);
}

TYPED_TEST(AtomicExtreme, MinusZeroIsBelowPlusZeroInBothForms) {
  using T = TypeParam;
  const auto n = static_cast<std::size_t>(scaled(1 << 18));
  std::vector<T> zeros(n);
  for (std::size_t i = 0; i < n; ++i) zeros[i] = i % 2 ? T(0.0) : T(-0.0);
  check_both_extremes<T, form::integer>(zeros, 1);
  check_both_extremes<T, form::cas_loop>(zeros, 1);
  // Only -0.0 arguments: max leaves a stored +0.0, min replaces it.
  const std::vector<T> minus_zeros(n, T(-0.0));
  check_extreme<T, form::integer, extreme::max>(minus_zeros, T(0.0), 1);
  check_extreme<T, form::cas_loop, extreme::max>(minus_zeros, T(0.0), 1);
  check_extreme<T, form::integer, extreme::min>(minus_zeros, T(0.0), 1);
  check_extreme<T, form::cas_loop, extreme::min>(minus_zeros, T(0.0), 1);
}

TYPED_TEST(AtomicExtreme, ANanArgumentOfEitherSignStoresTheDocumentedNanInBothForms) {
  using T = TypeParam;
  const auto n = static_cast<std::size_t>(scaled(1 << 18));
  SCOPED_TRACE("seed 15, NaNs of both signs");
  const auto values = mixed_values<T>(n, 15, true, true);
  ASSERT_TRUE(std::any_of(values.begin(), values.end(), [](T v) { return std::isnan(v) && std::signbit(v); }));
  ASSERT_TRUE(std::any_of(values.begin(), values.end(), [](T v) { return std::isnan(v) && !std::signbit(v); }));
  check_both_extremes<T, form::integer>(values, 1);
  check_both_extremes<T, form::cas_loop>(values, 1);
  // One lone NaN, of each sign, among ordinary values.
  for (const T nan : {std::numeric_limits<T>::quiet_NaN(), -std::numeric_limits<T>::quiet_NaN()}) {
    auto one_nan = mixed_values<T>(n, 16, false, false);
    one_nan[n / 3] = nan;
    check_both_extremes<T, form::integer>(one_nan, 1);
    check_both_extremes<T, form::cas_loop>(one_nan, 1);
  }
}

TYPED_TEST(AtomicExtreme, ANanStoredBeforehandKeepsItsTotalOrderPlaceInBothForms) {
  using T = TypeParam;
  const auto n = static_cast<std::size_t>(scaled(1 << 18));
  SCOPED_TRACE("seed 17");
  const auto values = mixed_values<T>(n, 17, true, false);
  const T plus_nan = std::numeric_limits<T>::quiet_NaN();
  const T minus_nan = -std::numeric_limits<T>::quiet_NaN();
  ASSERT_FALSE(std::signbit(plus_nan));
  ASSERT_TRUE(std::signbit(minus_nan));
  // +NaN is above everything: max keeps it, min replaces it; -NaN the other way round.
  check_extreme<T, form::integer, extreme::max>(values, plus_nan, 1);
  check_extreme<T, form::cas_loop, extreme::max>(values, plus_nan, 1);
  check_extreme<T, form::integer, extreme::min>(values, plus_nan, 1);
  check_extreme<T, form::cas_loop, extreme::min>(values, plus_nan, 1);
  check_extreme<T, form::integer, extreme::max>(values, minus_nan, 1);
  check_extreme<T, form::cas_loop, extreme::max>(values, minus_nan, 1);
  check_extreme<T, form::integer, extreme::min>(values, minus_nan, 1);
  check_extreme<T, form::cas_loop, extreme::min>(values, minus_nan, 1);
}

/// Per block: both forms of max and min into four shared slots at block scope.
template <class T>
struct extremes_in_shared {
  using slot_type = T;
  static constexpr int num_slots = 4;  // integer max, integer min, CAS max, CAS min
  const T* values;
  T* results;
  __device__ T initial(int slot) const {
    return slot % 2 == 0 ? -cuda::std::numeric_limits<T>::infinity() : cuda::std::numeric_limits<T>::infinity();
  }
  __device__ void update(T* slots, std::int64_t i) const {
    constexpr auto block = cuda::thread_scope_block;
    apply_extreme<form::integer, extreme::max, block>(&slots[0], values[i]);
    apply_extreme<form::integer, extreme::min, block>(&slots[1], values[i]);
    apply_extreme<form::cas_loop, extreme::max, block>(&slots[2], values[i]);
    apply_extreme<form::cas_loop, extreme::min, block>(&slots[3], values[i]);
  }
  __device__ void finish(int block, int slot, T value) const { results[block * num_slots + slot] = value; }
};

TYPED_TEST(AtomicExtreme, BothFormsInSharedMemoryAtBlockScopeMatchTheCpuPerBlock) {
  using T = TypeParam;
  const int blocks = scaled_blocks(256);
  const auto n = static_cast<std::size_t>(blocks) * shared_block_size;
  SCOPED_TRACE("seed 18");
  auto values = mixed_values<T>(n, 18, true, false);
  // Every fourth block sees only zeros of both signs: the -0.0 < +0.0 rule per block.
  for (std::size_t i = 0; i < n; ++i) {
    if ((i / shared_block_size) % 4 == 0) values[i] = (mix(i) & 1) ? T(0.0) : T(-0.0);
  }
  auto d_values = to_device(values);
  device_buffer<T> results(static_cast<std::size_t>(blocks) * 4);
  for_each_block_in_shared(blocks, extremes_in_shared<T>{d_values.data(), results.data()});
  const auto got = to_host(results);
  for (int b = 0; b < blocks; ++b) {
    const auto first = values.begin() + static_cast<std::ptrdiff_t>(b) * shared_block_size;
    const std::vector<T> mine(first, first + shared_block_size);
    const T max = expected_extreme(extreme::max, -std::numeric_limits<T>::infinity(), mine);
    const T min = expected_extreme(extreme::min, std::numeric_limits<T>::infinity(), mine);
    const std::size_t at = static_cast<std::size_t>(b) * 4;
    ASSERT_EQ(bits(got[at + 0]), bits(max)) << "block " << b << " integer max " << describe(got[at + 0]);
    ASSERT_EQ(bits(got[at + 1]), bits(min)) << "block " << b << " integer min " << describe(got[at + 1]);
    ASSERT_EQ(bits(got[at + 2]), bits(max)) << "block " << b << " CAS max " << describe(got[at + 2]);
    ASSERT_EQ(bits(got[at + 3]), bits(min)) << "block " << b << " CAS min " << describe(got[at + 3]);
  }
}

// ---- atomic_add (native) against atomic_add_cas (the pre-Pascal fallback) -----------------------

template <class T, bool Cas>
struct add_into {
  const T* values;
  T* target;
  __device__ void operator()(std::int64_t i) const {
    if constexpr (Cas) tally::atomic_add_cas(target, values[i]);
    else tally::atomic_add(target, values[i]);
  }
};

template <class T, bool Cas>
T gpu_sum(const device_buffer<T>& values, std::int64_t n) {
  device_buffer<T> target(1);
  target.fill_bytes(0);
  for_each_thread(n, add_into<T, Cas>{values.data(), target.data()});
  return to_host(target)[0];
}

/// k * 2^-10 with |k| <= 2^20: every partial sum of up to 2^22 of them is a multiple of 2^-10
/// below 2^32 in magnitude (42 significant bits), exact in a double, so any order of additions
/// gives the same bits.
std::vector<double> exact_doubles(std::size_t n, std::uint64_t seed, std::int64_t& k_sum) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> k(-(1 << 20), 1 << 20);
  std::vector<double> out(n);
  k_sum = 0;
  for (auto& v : out) {
    const std::int64_t draw = k(rng);
    k_sum += draw;
    v = std::ldexp(static_cast<double>(draw), -10);
  }
  return out;
}

TEST(AtomicAdd, CasFallbackAndNativeGiveIdenticalBitsOnExactDoubleSums) {
  SCOPED_TRACE("seed 21");
  std::int64_t k_sum = 0;
  const auto many = exact_doubles(static_cast<std::size_t>(scaled(1 << 22)), 21, k_sum);
  const auto d_many = to_device(many);
  // The native instruction, every thread on one address.
  EXPECT_EQ(bits(gpu_sum<double, false>(d_many, static_cast<std::int64_t>(many.size()))),
            bits(std::ldexp(static_cast<double>(k_sum), -10)));
  // The CAS loop (every thread must write: fewer threads), and the native one on the same values.
  std::int64_t few_sum = 0;
  const auto few = exact_doubles(static_cast<std::size_t>(scaled(1 << 13)), 22, few_sum);
  const auto d_few = to_device(few);
  const double exact = std::ldexp(static_cast<double>(few_sum), -10);
  const double by_cas = gpu_sum<double, true>(d_few, static_cast<std::int64_t>(few.size()));
  const double native = gpu_sum<double, false>(d_few, static_cast<std::int64_t>(few.size()));
  EXPECT_EQ(bits(by_cas), bits(exact));
  EXPECT_EQ(bits(by_cas), bits(native));
}

TEST(AtomicAdd, CasFallbackAndNativeGiveIdenticalBitsOnExactFloatSums) {
  const auto n = static_cast<std::size_t>(scaled(1 << 13));
  std::mt19937_64 rng(23);
  std::uniform_int_distribution<int> k(-100, 100);
  std::vector<float> values(n);
  std::int64_t exact = 0;
  for (auto& v : values) {
    const int draw = k(rng);
    exact += draw;
    v = static_cast<float>(draw);  // partial sums below 2^20: exact in a float
  }
  const auto d_values = to_device(values);
  const float by_cas = gpu_sum<float, true>(d_values, static_cast<std::int64_t>(n));
  const float native = gpu_sum<float, false>(d_values, static_cast<std::int64_t>(n));
  EXPECT_EQ(bits(by_cas), bits(static_cast<float>(exact)));
  EXPECT_EQ(bits(by_cas), bits(native));
}

TEST(AtomicAdd, BothFormsOnRandomDoublesLandWithinTheRecursiveSummationBound) {
  const auto n = static_cast<std::size_t>(scaled(1 << 13));
  SCOPED_TRACE("seed 24");
  std::mt19937_64 rng(24);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-30, 30);
  std::vector<double> values(n);
  long double reference = 0;
  long double magnitude = 0;
  for (auto& v : values) {
    const double fraction = unit(rng);
    v = std::ldexp(fraction, exponent(rng));
    reference += v;
    magnitude += std::fabs(static_cast<long double>(v));
  }
  // Any order of n - 1 double additions is within (n - 1) u sum|x| of the exact sum (to first
  // order; the slack covers the rest), u = 2^-53; the long double reference adds its own
  // (n - 1) u_ld sum|x|.
  const long double u = std::ldexp(1.0L, -53);
  const long double u_reference = std::numeric_limits<long double>::epsilon() / 2;
  const long double bound = static_cast<long double>(n - 1) * (u + u_reference) * magnitude * 1.001L;
  const auto d_values = to_device(values);
  const double by_cas = gpu_sum<double, true>(d_values, static_cast<std::int64_t>(n));
  const double native = gpu_sum<double, false>(d_values, static_cast<std::int64_t>(n));
  EXPECT_LE(std::fabs(static_cast<long double>(by_cas) - reference), bound) << "CAS form";
  EXPECT_LE(std::fabs(static_cast<long double>(native) - reference), bound) << "native";
}

/// Per block: both forms of add into two shared slots at block scope, exact values.
struct adds_in_shared {
  using slot_type = double;
  static constexpr int num_slots = 2;  // native, CAS
  const double* values;
  double* results;
  __device__ double initial(int) const { return 0.0; }
  __device__ void update(double* slots, std::int64_t i) const {
    tally::atomic_add<cuda::thread_scope_block>(&slots[0], values[i]);
    tally::atomic_add_cas<cuda::thread_scope_block>(&slots[1], values[i]);
  }
  __device__ void finish(int block, int slot, double value) const { results[block * num_slots + slot] = value; }
};

TEST(AtomicAdd, BothFormsInSharedMemoryAtBlockScopeGiveTheExactSumPerBlock) {
  const int blocks = scaled_blocks(256);
  std::int64_t ignored = 0;
  SCOPED_TRACE("seed 25");
  const auto values = exact_doubles(static_cast<std::size_t>(blocks) * shared_block_size, 25, ignored);
  const auto d_values = to_device(values);
  device_buffer<double> results(static_cast<std::size_t>(blocks) * 2);
  for_each_block_in_shared(blocks, adds_in_shared{d_values.data(), results.data()});
  const auto got = to_host(results);
  for (int b = 0; b < blocks; ++b) {
    double exact = 0;  // exact in any order (see exact_doubles)
    for (int j = 0; j < shared_block_size; ++j) exact += values[static_cast<std::size_t>(b) * shared_block_size + j];
    ASSERT_EQ(bits(got[static_cast<std::size_t>(b) * 2]), bits(exact)) << "block " << b << " native";
    ASSERT_EQ(bits(got[static_cast<std::size_t>(b) * 2 + 1]), bits(exact)) << "block " << b << " CAS";
  }
}

// ---- saturating_add ----------------------------------------------------------------------------

template <class T>
struct saturate_into {
  T* counter;
  const T* values;
  T limit;
  T* olds;
  __device__ void operator()(std::int64_t i) const { olds[i] = tally::saturating_add(counter, values[i], limit); }
};

/// The returned old values must tell one consistent story: the calls that changed the counter
/// (old below the limit), sorted by old value, form a chain from the initial value where each
/// one's old value is the previous one's plus what it added (its value, capped at the limit),
/// ending at the final value; every other call saw the counter already at the limit.
template <class T>
void check_saturating_history(T initial, const std::vector<T>& values, T limit, const std::vector<T>& olds, T final_value) {
  ASSERT_LE(final_value, limit);
  std::vector<std::pair<T, T>> changes;  // (old, amount added)
  for (std::size_t i = 0; i < values.size(); ++i) {
    const T old = olds[i];
    if (old >= limit) {
      ASSERT_EQ(old, limit) << "thread " << i << " saw " << old << ", above the limit " << limit;
      continue;
    }
    ASSERT_GT(values[i], T{0});
    changes.emplace_back(old, values[i] >= limit - old ? limit - old : values[i]);
  }
  std::sort(changes.begin(), changes.end());
  T expected_old = initial;
  for (const auto& [old, added] : changes) {
    ASSERT_EQ(old, expected_old) << "the chain of old values breaks";
    expected_old = old + added;
  }
  EXPECT_EQ(final_value, expected_old);
}

template <class T>
void check_saturating_add(T initial, const std::vector<T>& values, T limit) {
  device_buffer<T> counter(std::span<const T>(&initial, 1));
  const auto d_values = to_device(values);
  device_buffer<T> olds(values.size());
  for_each_thread(static_cast<std::int64_t>(values.size()), saturate_into<T>{counter.data(), d_values.data(), limit, olds.data()});
  check_saturating_history(initial, values, limit, to_host(olds), to_host(counter)[0]);
}

TEST(SaturatingAdd, AddingOnesStopsExactlyAtTheLimitAndEachCountBelowItIsHandedOutOnce) {
  const std::int64_t n = scaled(1 << 15);
  const unsigned limit = quick_mode() ? 500u : 1000u;
  const std::vector<unsigned> ones(static_cast<std::size_t>(n), 1u);
  device_buffer<unsigned> counter(1);
  counter.fill_bytes(0);
  const auto d_ones = to_device(ones);
  device_buffer<unsigned> olds(ones.size());
  for_each_thread(n, saturate_into<unsigned>{counter.data(), d_ones.data(), limit, olds.data()});
  EXPECT_EQ(to_host(counter)[0], limit);
  auto old = to_host(olds);
  std::sort(old.begin(), old.end());
  for (std::size_t k = 0; k < old.size(); ++k) ASSERT_EQ(old[k], std::min<unsigned>(static_cast<unsigned>(k), limit)) << k;
}

TEST(SaturatingAdd, RandomAmountsGiveAConsistentChainOfOldValues) {
  const auto n = static_cast<std::size_t>(scaled(1 << 13));
  std::mt19937_64 rng(31);
  std::uniform_int_distribution<unsigned> amount(1, 7);
  std::vector<unsigned> values(n);
  for (auto& v : values) v = amount(rng);
  const unsigned total = std::accumulate(values.begin(), values.end(), 0u);
  SCOPED_TRACE("seed 31, reaching the limit");
  check_saturating_add<unsigned>(0u, values, total * 5 / 8);
  SCOPED_TRACE("seed 31, limit never reached");
  check_saturating_add<unsigned>(0u, values, std::numeric_limits<unsigned>::max());
}

TEST(SaturatingAdd, NeverWrapsAround) {
  const auto n = static_cast<std::size_t>(scaled(1 << 12));
  std::mt19937_64 rng(32);
  // 32 bits: every amount is at least 2^31, so any two of them would wrap.
  std::vector<unsigned> huge(n);
  for (auto& v : huge) v = (1u << 31) + static_cast<unsigned>(rng() % (1u << 30));
  check_saturating_add<unsigned>(0u, huge, std::numeric_limits<unsigned>::max());
  // 64 bits (std::uint64_t), starting 2^40 below the top, amounts up to 2^32.
  std::vector<std::uint64_t> large(n);
  for (auto& v : large) v = 1 + rng() % (std::uint64_t{1} << 32);
  const std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
  check_saturating_add<std::uint64_t>(top - (std::uint64_t{1} << 40), large, top);
}

/// Per block: every thread adds one to a shared counter capped at 700, at block scope.
struct saturate_in_shared {
  using slot_type = unsigned;
  static constexpr int num_slots = 1;
  static constexpr unsigned limit = 700;
  unsigned* olds;
  unsigned* totals;
  __device__ unsigned initial(int) const { return 0; }
  __device__ void update(unsigned* slots, std::int64_t i) const {
    olds[i] = tally::saturating_add<cuda::thread_scope_block>(&slots[0], 1u, limit);
  }
  __device__ void finish(int block, int, unsigned slot) const { totals[block] = slot; }
};

TEST(SaturatingAdd, InSharedMemoryAtBlockScopeEachBlockStopsExactlyAtTheLimit) {
  const int blocks = scaled_blocks(512);
  device_buffer<unsigned> olds(static_cast<std::size_t>(blocks) * shared_block_size);
  device_buffer<unsigned> totals(static_cast<std::size_t>(blocks));
  for_each_block_in_shared(blocks, saturate_in_shared{olds.data(), totals.data()});
  const auto old = to_host(olds);
  const auto total = to_host(totals);
  for (int b = 0; b < blocks; ++b) {
    ASSERT_EQ(total[static_cast<std::size_t>(b)], saturate_in_shared::limit) << "block " << b;
    const auto first = old.begin() + static_cast<std::ptrdiff_t>(b) * shared_block_size;
    std::vector<unsigned> mine(first, first + shared_block_size);
    std::sort(mine.begin(), mine.end());
    for (unsigned k = 0; k < mine.size(); ++k) ASSERT_EQ(mine[k], std::min(k, saturate_in_shared::limit)) << "block " << b;
  }
}

// ---- warp_aggregated_increment -------------------------------------------------------------------

constexpr unsigned not_taking_part = 0xffffffffu;

/// Thread i takes part unless mix(i) % skip_one_in == 0 (0: everyone), on counter
/// (mix(i) >> 8) % num_counters; two call sites, so lanes of one warp diverge onto both.
struct increment_some {
  unsigned* counters;
  int num_counters;
  unsigned skip_one_in;
  unsigned* olds;
  __device__ void operator()(std::int64_t i) const {
    const std::uint64_t h = mix(static_cast<std::uint64_t>(i));
    if (skip_one_in != 0 && h % skip_one_in == 0) {
      olds[i] = not_taking_part;
      return;
    }
    unsigned* counter = counters + ((h >> 8) % static_cast<unsigned>(num_counters)) * 32;
    if (h & (1u << 20)) {
      olds[i] = tally::warp_aggregated_increment(counter);
    } else {
      __nanosleep(static_cast<unsigned>(h >> 40) % 256);  // a different path, arriving later
      olds[i] = tally::warp_aggregated_increment(counter);
    }
  }
};

void check_increment_some(std::int64_t n, int num_counters, unsigned skip_one_in) {
  device_buffer<unsigned> counters(static_cast<std::size_t>(num_counters) * 32);
  counters.fill_bytes(0);
  device_buffer<unsigned> olds(static_cast<std::size_t>(n));
  for_each_thread(n, increment_some{counters.data(), num_counters, skip_one_in, olds.data()});
  const auto counts = to_host(counters);
  const auto old = to_host(olds);
  std::vector<std::vector<unsigned>> per_counter(static_cast<std::size_t>(num_counters));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t h = mix(static_cast<std::uint64_t>(i));
    if (skip_one_in != 0 && h % skip_one_in == 0) {
      ASSERT_EQ(old[static_cast<std::size_t>(i)], not_taking_part);
      continue;
    }
    per_counter[(h >> 8) % static_cast<unsigned>(num_counters)].push_back(old[static_cast<std::size_t>(i)]);
  }
  for (int c = 0; c < num_counters; ++c) {
    EXPECT_EQ(counts[static_cast<std::size_t>(c) * 32], per_counter[static_cast<std::size_t>(c)].size()) << "counter " << c;
    EXPECT_TRUE(consecutive_from(per_counter[static_cast<std::size_t>(c)], 0u)) << "counter " << c;
  }
}

TEST(WarpAggregatedIncrement, MillionsOfThreadsOnOneCounterGetEveryValueExactlyOnce) {
  check_increment_some(scaled(1 << 22), 1, 0);
}

TEST(WarpAggregatedIncrement, DivergentLanesOnDifferentCountersGetEveryValueOfTheirCounterOnce) {
  check_increment_some(scaled(1 << 22), 5, 3);
}

struct increment_wide {
  unsigned long long* counter;
  unsigned long long* olds;
  __device__ void operator()(std::int64_t i) const { olds[i] = tally::warp_aggregated_increment(counter); }
};

TEST(WarpAggregatedIncrement, SixtyFourBitCounterCrossesTheThirtyTwoBitBoundary) {
  const std::int64_t n = scaled(1 << 20);
  const unsigned long long start = (1ull << 32) - 1000;
  device_buffer<unsigned long long> counter(std::span<const unsigned long long>(&start, 1));
  device_buffer<unsigned long long> olds(static_cast<std::size_t>(n));
  for_each_thread(n, increment_wide{counter.data(), olds.data()});
  EXPECT_EQ(to_host(counter)[0], start + static_cast<unsigned long long>(n));
  EXPECT_TRUE(consecutive_from(to_host(olds), start));
}

/// Per block: two of three threads (diverging inside warps) increment one shared counter at block scope.
struct increment_in_shared {
  using slot_type = unsigned;
  static constexpr int num_slots = 1;
  unsigned* olds;
  unsigned* totals;
  __device__ unsigned initial(int) const { return 0; }
  __device__ void update(unsigned* slots, std::int64_t i) const {
    olds[i] = mix(static_cast<std::uint64_t>(i)) % 3 == 0
                  ? not_taking_part
                  : tally::warp_aggregated_increment<cuda::thread_scope_block>(&slots[0]);
  }
  __device__ void finish(int block, int, unsigned slot) const { totals[block] = slot; }
};

TEST(WarpAggregatedIncrement, DivergentLanesInSharedMemoryAtBlockScopeGetEveryValueOnce) {
  const int blocks = scaled_blocks(512);
  device_buffer<unsigned> olds(static_cast<std::size_t>(blocks) * shared_block_size);
  device_buffer<unsigned> totals(static_cast<std::size_t>(blocks));
  for_each_block_in_shared(blocks, increment_in_shared{olds.data(), totals.data()});
  const auto old = to_host(olds);
  const auto total = to_host(totals);
  for (int b = 0; b < blocks; ++b) {
    std::vector<unsigned> mine;
    for (int j = 0; j < shared_block_size; ++j) {
      const std::size_t i = static_cast<std::size_t>(b) * shared_block_size + j;
      if (mix(i) % 3 == 0) {
        ASSERT_EQ(old[i], not_taking_part);
      } else {
        mine.push_back(old[i]);
      }
    }
    ASSERT_EQ(total[static_cast<std::size_t>(b)], mine.size()) << "block " << b;
    ASSERT_TRUE(consecutive_from(mine, 0u)) << "block " << b;
  }
}

// ---- system scope, on managed memory the host reads directly ----------------------------------

struct system_scope_updates {
  unsigned* cas_counter;
  unsigned* aggregated_counter;
  float* max_target;
  const float* values;
  std::int64_t cas_threads;
  unsigned* olds;
  __device__ void operator()(std::int64_t i) const {
    constexpr auto system = cuda::thread_scope_system;
    if (i < cas_threads) tally::atomic_update<system>(cas_counter, [](unsigned x) { return x + 1u; });
    olds[i] = tally::warp_aggregated_increment<system>(aggregated_counter);
    tally::atomic_max<system>(max_target, values[i]);
  }
};

TEST(SystemScope, HelpersOnManagedMemoryGiveExactResultsTheHostReadsDirectly) {
  int managed = 0;
  cuda_check(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, 0), "cudaDeviceGetAttribute");
  if (managed == 0) GTEST_SKIP() << "this GPU has no managed memory";
  const std::int64_t n = scaled(1 << 20);
  const std::int64_t cas_threads = scaled(1 << 13);
  SCOPED_TRACE("seed 41");
  const auto values = mixed_values<float>(static_cast<std::size_t>(n), 41, true, false);
  const auto d_values = to_device(values);
  managed_buffer<unsigned> counters(2);
  managed_buffer<float> max_target(1);
  counters.data()[0] = 0;
  counters.data()[1] = 0;
  max_target.data()[0] = -std::numeric_limits<float>::infinity();
  device_buffer<unsigned> olds(static_cast<std::size_t>(n));
  for_each_thread(n, system_scope_updates{counters.data(), counters.data() + 1, max_target.data(), d_values.data(),
                                          cas_threads, olds.data()});
  EXPECT_EQ(counters.data()[0], static_cast<unsigned>(cas_threads));
  EXPECT_EQ(counters.data()[1], static_cast<unsigned>(n));
  EXPECT_TRUE(consecutive_from(to_host(olds), 0u));
  const float expected = expected_extreme(extreme::max, -std::numeric_limits<float>::infinity(), values);
  EXPECT_EQ(bits(max_target.data()[0]), bits(expected)) << describe(max_target.data()[0]);
}

}  // namespace
}  // namespace tally::test
