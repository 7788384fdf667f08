// Tuning kept apart from logic: block sizes, grid limits and the budget for per-block copies in
// global memory. Values are for sm_90 (H100); they are safe, if not optimal, elsewhere.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tally::detail::tuning {

/// Threads per block of the histogram kernels.
#ifndef TALLY_HISTOGRAM_BLOCK_THREADS
#define TALLY_HISTOGRAM_BLOCK_THREADS 512
#endif
#ifndef TALLY_HISTOGRAM_MIN_BLOCKS
#define TALLY_HISTOGRAM_MIN_BLOCKS 2
#endif
#ifndef TALLY_HISTOGRAM_UNROLL
#define TALLY_HISTOGRAM_UNROLL 2
#endif
#ifndef TALLY_HISTOGRAM_BYTE_BLOCK_THREADS
#define TALLY_HISTOGRAM_BYTE_BLOCK_THREADS 1024
#endif
/// Byte samples (16 to a load) keep the shared-memory atomic unit busier than the loads, so their
/// kernels run fewer, larger blocks: fewer per-block copies to zero and merge. Measured on an H100
/// in a standalone probe (results/2026-11-22-h100-probes): 32 replicas reach 0.92 of the read
/// bandwidth on uniform bytes in 1024-thread blocks, 0.87-0.89 in 512-thread ones.
template <class Sample>
inline constexpr int histogram_block_threads =
    sizeof(Sample) == 1 ? TALLY_HISTOGRAM_BYTE_BLOCK_THREADS : TALLY_HISTOGRAM_BLOCK_THREADS;
/// Blocks per multiprocessor the privatized kernels are compiled to fit, which caps their
/// registers (64 for two blocks of 512 threads, or for one of 1024 byte threads; 128 for one block
/// of 8-byte samples), and the 16-byte loads each thread issues per chunk: two, pipelined (the
/// next chunk's loads issued before this one is counted, histogram_pipelined), two for bytes
/// unpipelined (16 samples a load already). Pipelined two-load chunks keep loads in flight while a
/// thread counts, which mappers with long arithmetic chains need: measured on an H100 in the
/// library's kernel, 2^28 samples, 4096 bins (docs/performance.md), against four loads
/// unpipelined: estimated float bins 0.829 against 0.817, estimated int32 0.820 against 0.768,
/// exact float 0.949 against 0.951, unit-step int32 0.982 against 0.960.
template <class Sample>
inline constexpr int histogram_min_blocks = sizeof(Sample) == 4 ? TALLY_HISTOGRAM_MIN_BLOCKS : (TALLY_HISTOGRAM_MIN_BLOCKS + 1) / 2;
template <class Sample>
inline constexpr int histogram_unroll = sizeof(Sample) == 1 ? 2 : TALLY_HISTOGRAM_UNROLL;
#ifndef TALLY_HISTOGRAM_PIPELINED
#define TALLY_HISTOGRAM_PIPELINED 1
#endif
/// Whether count_vectorized issues a chunk's loads before it counts the previous one.
template <class Sample>
inline constexpr bool histogram_pipelined = sizeof(Sample) != 1 && TALLY_HISTOGRAM_PIPELINED != 0;
/// Loads per thread of the byte kernel over all 256 values (byte_shift_mapper, shared memory, no
/// aggregation), whose count of a byte takes few registers: four, where other byte kernels spill
/// with four. Measured on an H100 in a standalone probe of 32 replicas, timed with the launch
/// (results/2026-11-23-h100-byte-layout): uniform bytes 0.867 of the read bandwidth with two loads a
/// thread, 0.900 with four, 0.885 with eight.
inline constexpr int byte_replica_unroll = 4;
/// Threads per block of packed16, which runs one large block per multiprocessor (65536 bins
/// take 128 KiB), and its 16-byte loads per thread per tile: four (one for bytes, 16 samples a
/// load). Measured on an H100 in a standalone probe (results/2026-11-22-h100-probes): four
/// loads and a 2^12 spill threshold take uniform int32 samples over 65536 bins from 0.86 to 0.89 of
/// the read bandwidth, where two loads and 2^15 left them.
inline constexpr int packed_block_threads = 1024;
template <class Sample>
inline constexpr int packed_unroll = sizeof(Sample) == 1 ? 1 : 4;
/// `replicated` keeps up to this many copies of the bins per block: 32, one per lane, puts bin b of
/// lane l at word b * 32 + l, in bank l, so a warp's increments never share a bank...
inline constexpr int max_replicas = 32;
/// Blocks per multiprocessor of the byte kernel with replicas (measured with 32; not measured again
/// with 64, 64 KiB a block). Uniform bytes count
/// faster the fewer copies a multiprocessor holds: measured on an H100
/// (results/2026-11-23-h100-bytes), kernel alone, 2^28 bytes, 1024 threads a block: one block per
/// multiprocessor 0.845-0.854 of the read bandwidth on uniform bytes, 0.899-0.911 on one value;
/// two blocks 0.783-0.792 and 0.919-0.921; four 256-thread blocks 0.69, six 0.60.
#ifndef TALLY_BYTE_REPLICA_BLOCKS_PER_SM
#define TALLY_BYTE_REPLICA_BLOCKS_PER_SM 1
#endif
inline constexpr int byte_replica_blocks_per_multiprocessor = TALLY_BYTE_REPLICA_BLOCKS_PER_SM;
/// ...within this much shared memory, so several blocks still fit one multiprocessor.
inline constexpr std::size_t replicated_shared_budget = std::size_t{48} << 10;
/// Replicas of the byte kernel: bin x of replica r at word x * 64 + r, and thread t counts into
/// replica t % 64 (lane l of an even warp in bank l, of an odd warp in bank l too, 32 words on).
/// With a row of 64 words (256 bytes) per bin, the byte offset of a count is the byte value in
/// bits 8-15 and the replica's offset (r * 4 <= 252) in bits 0-7: one byte permute (PRMT) builds it
/// from the loaded word, so a byte costs two instructions in a bare kernel, the permute and the
/// shared-memory atomic (three in the library, with an add of the block's row base:
/// add_vector_of_bytes_to_replicas), where the 32-replica layout (x * 128 + lane * 4) took five
/// (shift, mask, multiply, add, atomic). Measured on an H100 in bare kernels, the two timed the same (0.0986 and 0.0988 ms for
/// 2^28 uniform bytes, results/2026-11-23-h100-byte-layout): the instructions are not the limit. At
/// 1980 MHz the atomic unit alone is not either: a bare kernel took as long with the SM clock held
/// at 1.56 GHz; the time is the reads and the atomics overlapping (results/2026-11-23-h100-byte-floor),
/// and the blocks' hand-off of their counts: one bulk reduction a block in place of 256 global
/// atomics took uniform bytes from 0.101-0.102 ms to 0.093 in `tally bench`
/// (add_byte_copy_in_bulk, results/2026-11-23-h100-bulk-end).
inline constexpr int byte_replicas = 64;
/// The shared memory the byte replicas may take per block (256 bins: 64 KiB).
inline constexpr std::size_t byte_replicas_shared_budget = std::size_t{128} << 10;
/// Threads per block of the weighted histogram kernels (a first choice, not yet measured).
inline constexpr int weighted_block_threads = 256;
/// Threads per block of the merge and helper kernels.
inline constexpr int merge_block_threads = 256;
/// Global-memory budget for per-block histogram copies (global_privatized, shared_two_phase).
inline constexpr std::size_t block_copies_budget_bytes = std::size_t{512} << 20;
/// A block counts at most this many samples, so its 32-bit private counters cannot overflow.
inline constexpr std::int64_t max_samples_per_block = std::int64_t{1} << 31;

}  // namespace tally::detail::tuning
