// Tuning of the histogram kernels, kept apart from their logic as data: one launch tuning per
// kernel family and sample size (what CUB calls an agent policy), and the budgets the dispatch
// sizes copies by. Values are for sm_90 (H100); safe, if not optimal, on other GPUs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tally::detail::tuning {

/// The launch tuning of one histogram kernel: the kernel takes it as a template argument (its
/// __launch_bounds__ and loop shape need constants) and the dispatch launches with the same
/// struct, so the two cannot disagree.
template <int BlockThreads, int MinBlocks, int LoadsPerThread, bool Pipelined>
struct counting_tuning {
  static constexpr int block_threads = BlockThreads;
  /// Blocks per multiprocessor the kernel is compiled to fit, which caps its registers.
  static constexpr int min_blocks = MinBlocks;
  /// 16-byte loads a thread issues per chunk of its walk.
  static constexpr int loads_per_thread = LoadsPerThread;
  /// Whether the next chunk's loads are issued before this one is counted.
  static constexpr bool pipelined = Pipelined;
};

/// The histogram kernels' tuning on sm_90, by sample size (docs/performance.md has the figures).
template <std::size_t SampleBytes>
struct histogram_tuning_sm90 {
  /// Per-block copies in shared or global memory (shared_atomic, two_phase, replicated,
  /// warp_aggregated, global_privatized): two 512-thread blocks a multiprocessor (64 registers),
  /// one for 8-byte samples; two pipelined loads a chunk keep loads in flight while a long mapper
  /// computes. Bytes (16 samples a load already) run one 1024-thread block, unpipelined: fewer
  /// copies to zero and merge.
  using privatized = counting_tuning<SampleBytes == 1 ? 1024 : 512, SampleBytes == 2 || SampleBytes == 4 ? 2 : 1, 2,
                                     SampleBytes != 1>;
  /// packed16: one large block a multiprocessor (65536 bins take 128 KiB), four loads a tile (one
  /// for bytes).
  using packed = counting_tuning<1024, 1, SampleBytes == 1 ? 1 : 4, false>;
};

/// How the shared kernels keep the walk's tail (its invalid vectors) out of the counts: one test
/// a vector, for 16-bit samples (eight a vector, whose mappings interleave within it; a select a
/// sample instead: uint16 unit windows 0.97 -> 0.90, float16 exact ranges 0.93 -> 0.84), or a
/// select a sample, for wider ones (four a vector, interleaved across a thread's vectors; float32
/// data of one value through the float table, 4096 bins: 0.927 with selects, 0.887 with the test).
/// (docs/performance.md, "A sample's word from its mapper")
template <std::size_t SampleBytes>
inline constexpr bool tail_tested_per_vector = SampleBytes == 2;

/// The byte kernel (bytes over all 256 values, byte_shift_mapper): a permute and an atomic per
/// byte take few registers, so four loads a thread, in one 1024-thread block a multiprocessor.
using all_bytes_tuning = counting_tuning<1024, 1, 4, false>;
/// Blocks per multiprocessor of the byte kernel in replicas: uniform bytes count faster the fewer
/// copies a multiprocessor holds (one: 0.845-0.854 of the read bandwidth; two: 0.783-0.792).
inline constexpr int byte_replica_blocks_per_multiprocessor = 1;

/// The tuning the histogram kernels of `Sample` are built with.
template <class Sample>
using histogram_tuning = histogram_tuning_sm90<sizeof(Sample)>;

/// `replicated` keeps up to this many copies of the bins per block: 32, one per lane, puts bin b of
/// lane l at word b * 32 + l, in bank l, so a warp's increments never share a bank...
inline constexpr int max_replicas = 32;
/// ...within this much shared memory, so several blocks still fit one multiprocessor.
inline constexpr std::size_t replicated_shared_budget = std::size_t{48} << 10;
/// Replicas of the byte kernel: bin x of replica r at word x * 64 + r, and thread t counts into
/// replica t % 64. With a row of 64 words (256 bytes) per bin, the byte offset of a count is the
/// byte value in bits 8-15 and the replica's offset (r * 4 <= 252) in bits 0-7: one byte permute
/// (PRMT) builds it from the loaded word (add_vector_of_bytes_to_replicas).
inline constexpr int byte_replicas = 64;
/// The shared memory the byte replicas may take per block (256 bins: 64 KiB).
inline constexpr std::size_t byte_replicas_shared_budget = std::size_t{128} << 10;
/// Threads per block of the weighted histogram kernels (a first choice, not yet measured).
inline constexpr int weighted_block_threads = 256;
/// Threads per block of shared_atomic's weighted kernel, whose copy in integer limbs takes 16
/// (deterministic) or 24 bytes a bin: 512 keep 1024 threads a multiprocessor at 4096 bins.
inline constexpr int weighted_limb_block_threads = 512;
/// ...and of its wide blocks, where a 512-thread block's copy has room for one replica of its
/// limbs only: twice the threads share one copy, so a copy in two replicas takes the shared memory
/// a thread had with one (at 2048-4096 bins), and past that one replica serves twice the threads.
inline constexpr int weighted_limb_wide_block_threads = 1024;
/// Threads a multiprocessor that keep the limb kernel's adds in flight where samples spread: with
/// fewer it waits (8192 bins, one 512-thread block a multiprocessor: 0.31 of an H200's bandwidth,
/// 0.47 with 1024 threads); more gained little (4096 bins, deterministic: 0.55 with 1536, 0.54 with
/// 1024), so past this many the dispatch takes replicas first.
inline constexpr int weighted_limb_enough_threads = 1024;
/// Samples (and weights) each lane of that kernel loads a step, all before any is used.
inline constexpr int weighted_limb_items_per_lane = 4;
/// ...and of its narrow kernel of long steps, which the dispatch takes where it holds at least
/// weighted_limb_long_step_threads a multiprocessor: twice a lane's loads in flight, at the cost of
/// a quarter of the warps (three narrow blocks where four fit). At 256 bins, Nsight Compute: the
/// 4-sample walk held 48 warps on average, and for each instruction a scheduler issued 4.0 of its
/// 12 waited on global loads.
inline constexpr int weighted_limb_long_step_items = 8;
inline constexpr int weighted_limb_long_step_threads = 1536;
/// A warp of that kernel (short or long steps; not the walk that loads ahead) claims this many
/// steps at a time: 2048 or 4096 samples a claim, one atomic on one word each (65536-131072
/// at 2^28 samples).
inline constexpr int weighted_limb_claim_steps = 16;
/// At most this many replicas of shared_atomic's weighted limbs (a power of two; the dispatch ranks
/// the shapes, weighted_limb_enough_threads): a warp's lanes of one bin take turns on `replicas`
/// words, 32 / replicas lanes on each.
inline constexpr int weighted_max_replicas = 8;
/// shared_atomic's weighted copies test whether a warp's steps each fall in one bin, and add such a
/// lane's step as one value (limb_copy_visitor), only where the copy has at most this many
/// replicas: there 16 lanes of one bin or more take turns on a word. On an H200 (2^28 int32
/// samples, float weights): data of one bin at 4096-8192 bins (one or two replicas) 0.29-0.54 ->
/// 0.61-0.86; at 256 bins (eight replicas) the test cost spread data 4% in deterministic sums, and
/// double sums of one bin, summed without a vote, lost 13% (their windows' 128-bit sum).
inline constexpr int weighted_one_bin_steps_max_replicas = 2;
/// Where a whole copy does not fit, shared_atomic's block keeps a cache of this many bins (80 KiB
/// for double sums, 64 deterministic, with one replica of its limbs; 144 and 112 with two)...
inline constexpr std::uint32_t weighted_cache_slots = 4096;
/// ...or the largest power of two below it that fits the device, down to this many...
inline constexpr std::uint32_t weighted_cache_min_slots = 256;
/// ...and empties it every this many steps (a step: weighted_limb_items_per_lane samples a thread),
/// 65536 samples a block (the cache runs in blocks of weighted_limb_wide_block_threads).
inline constexpr int weighted_cache_period_steps = 16;
/// Samples (and weights) each lane of warp_aggregated's weighted kernels loads a step, all loads
/// issued before the first is used.
inline constexpr int weighted_items_per_lane = 4;
/// Blocks of weighted_block_threads a multiprocessor must hold for warp_aggregated's weighted
/// kernels: at most 40 registers a thread (they took 44-47, five blocks).
inline constexpr int weighted_in_warps_min_blocks = 6;
/// Threads per block of the merge and helper kernels.
inline constexpr int merge_block_threads = 256;
/// Global-memory budget for per-block histogram copies (global_privatized, two_phase).
inline constexpr std::size_t block_copies_budget_bytes = std::size_t{512} << 20;
/// A block counts at most this many samples, so its 32-bit private counters cannot overflow.
inline constexpr std::int64_t max_samples_per_block = std::int64_t{1} << 31;

/// The grid of the shared-memory kernels (shared_kernel_blocks). On an H200 (2026-11-28, a probe of
/// the kernel at 1 to 264 blocks over 2^14 to 2^24 samples and 256 to 16384 bins) a lone block read
/// 23 GB/s (float32 through the estimate) to 38 GB/s (int32, unit bins); a launch of more blocks
/// paid about 2 us more for its zeroing protocol and about 0.4 us a thousand bins for the blocks'
/// hand-offs. One block, then, while the samples take at most one_block_bytes +
/// one_block_bytes_per_bin a bin of its copy (bins times replicas) (docs/performance.md, "One
/// block for a small call, and a grid by size").
inline constexpr std::int64_t one_block_bytes = std::int64_t{48} << 10;
inline constexpr std::int64_t one_block_bytes_per_bin = 8;
/// Beyond that a block for every min_block_bytes of samples, up to one a multiprocessor...
inline constexpr std::int64_t min_block_bytes = std::int64_t{4} << 10;
/// ...and as many as a multiprocessor holds only where each gets at least this many bytes, and
/// this many a bin of its copy (fewer, a second block a multiprocessor cost more than it read).
inline constexpr std::int64_t full_occupancy_block_bytes = std::int64_t{128} << 10;
inline constexpr std::int64_t full_occupancy_bytes_per_bin = 16;

/// Even bins over 16-bit integers look for a ratio (value_ratio_mapper) from this many samples on,
/// up to this many bins: a call of one block keeps the table, and the search costs the host about
/// 4 ns a bin (17-21 us at 4096 bins), against about 0.3 ps a sample that the ratio saves where
/// blocks spread. So a call searches at once from this many samples a bin, else the second time a
/// thread asks for the same bins (src/small_samples.cuh, remembered_ratio).
inline constexpr std::int64_t value_ratio_min_samples = std::int64_t{1} << 20;
inline constexpr std::int64_t value_ratio_max_bins = 8192;
inline constexpr std::int64_t value_ratio_samples_per_bin = std::int64_t{1} << 14;

}  // namespace tally::detail::tuning
