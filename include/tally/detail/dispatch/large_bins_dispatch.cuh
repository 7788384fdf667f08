// The dispatch of the large-bin strategies: partitioned (partition by bucket, then a shared-memory
// histogram per bucket) and radix_sort (CUB's radix sort and run-length encoding). Same contract
// as dispatch_histogram: a null `temp` only sets `temp_bytes`; cudaError_t, never an exception.
// Both take the input in chunks of at most tuning::large_bins_chunk samples, so their storage
// (large_bins_layout.hpp) stops growing there.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>
#include <cuda_runtime.h>

#include "tally/detail/dispatch/device_properties.cuh"
#include "tally/detail/kernels/large_bins_kernels.cuh"
#include "tally/detail/large_bins_layout.hpp"
#include "tally/detail/tuning/histogram_tuning.cuh"

namespace tally::detail {

/// The slices each bucket is counted in (bucket_slice): one where a block's shared memory holds a
/// 32-bit counter for each of a bucket's min(num_bins, 2^15) bins (128 KiB: sm_80, sm_90, sm_100),
/// else the fewest, a power of two up to tuning::max_bucket_slices, whose counters fit (two on
/// 99 KiB chips); 0 where none fit. Each slice more reads the offsets once more.
inline int bucket_slices(std::int64_t num_bins, const device_properties& props) {
  const std::int64_t bins = std::min(num_bins, tuning::bucket_bins);
  for (int slices = 1; slices <= tuning::max_bucket_slices; slices *= 2) {
    if (static_cast<std::size_t>((bins + slices - 1) / slices) * 4 <= props.shared_memory_per_block_optin) {
      return slices;
    }
  }
  return 0;
}

/// Slice `index` of `slices` of every bucket.
inline bucket_slice slice_of_buckets(std::int64_t num_bins, int slices, int index) {
  const auto bins = static_cast<std::uint32_t>((std::min(num_bins, tuning::bucket_bins) + slices - 1) / slices);
  return {static_cast<std::uint32_t>(index) * bins, bins};
}

/// Blocks to fill the GPU with `kernel` (at least one), at most `cap`.
template <class Kernel>
cudaError_t filling_grid(Kernel kernel, int threads, std::size_t shared_bytes, const device_properties& props,
                         std::int64_t cap, int& blocks) {
  int per_sm = 0;
  if (cudaError_t e = resident_blocks_per_multiprocessor(kernel, threads, shared_bytes, per_sm); e != cudaSuccess) {
    return e;
  }
  const std::int64_t fill = std::int64_t{std::max(per_sm, 1)} * props.multiprocessors;
  blocks = static_cast<int>(std::max<std::int64_t>(1, std::min(fill, cap)));
  return cudaSuccess;
}

/// The first-pass kernel for `buckets` buckets (tile_ranking_for), staged or not.
template <class Sample, class Mapper>
auto partition_kernel_for(std::int64_t buckets, bool staged) {
  constexpr auto columns = tile_ranking::thread_columns;
  constexpr auto atomics = tile_ranking::block_atomics;
  if (tile_ranking_for(buckets) == columns) {
    return staged ? partition_kernel<Sample, Mapper, true, columns> : partition_kernel<Sample, Mapper, false, columns>;
  }
  return staged ? partition_kernel<Sample, Mapper, true, atomics> : partition_kernel<Sample, Mapper, false, atomics>;
}

/// One large-bin histogram: the samples (at least one), the counts (zeroed by the caller: both
/// strategies add to them, chunk by chunk), the mapper and its bins, and the word left-out samples
/// are added to. Null pointers when only sizing the storage.
template <class Sample, class Counter, class Mapper>
struct large_bins_call {
  const Sample* samples;
  std::int64_t num_samples;
  Counter* counts;
  const Mapper& map;
  std::int64_t num_bins;
  std::uint64_t* left_out;
  cudaStream_t stream;
};

/// partitioned over `call`'s samples.
template <class Sample, class Counter, class Mapper>
cudaError_t dispatch_partitioned(void* temp, std::size_t& temp_bytes,
                                 const large_bins_call<Sample, Counter, Mapper>& call, const device_properties& props) {
  const auto& [samples, num_samples, counts, map, num_bins, left_out, stream] = call;
  const partitioned_layout layout(num_samples, num_bins);
  std::size_t scan_bytes = 0;
  if (cudaError_t e = cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<std::uint32_t*>(nullptr),
                                                    static_cast<int>(layout.max_cells + 1), stream);
      e != cudaSuccess) {
    return e;
  }
  if (temp == nullptr) {
    temp_bytes = layout.bytes(scan_bytes);
    return cudaSuccess;
  }
  const auto [offsets, cell_first, cell_start, scan_storage] = layout.in(temp);

  // Aligned samples are staged a tile ahead in shared memory (partition_kernel); others are read
  // straight from global memory. Chunks start at multiples of 2^28 samples, so they share the
  // input's alignment.
  const bool staged = reinterpret_cast<std::uintptr_t>(samples) % 16 == 0;
  const int group_tiles = tuning::cell_group_tiles(layout.buckets);
  const auto partition = partition_kernel_for<Sample, Mapper>(layout.buckets, staged);
  const std::size_t partition_shared_bytes = partition_smem_layout(layout.buckets, group_tiles)
                                                 .bytes(staged ? 2 * tuning::partition_tile * sizeof(Sample) : 0);
  int partition_blocks = 1;
  if (cudaError_t e = filling_grid(partition, tuning::partition_threads, partition_shared_bytes, props,
                                   layout.max_tiles, partition_blocks);
      e != cudaSuccess) {
    return e;
  }
  const int slices = std::max(bucket_slices(num_bins, props), 1);  // histogram_strategy_unfit refused 0
  auto count = slices == 1 ? bucket_histogram_kernel<Counter, false> : bucket_histogram_kernel<Counter, true>;
  const std::size_t copy_bytes = std::size_t{slice_of_buckets(num_bins, slices, 0).bins} * 4;
  int count_blocks = 1;
  if (cudaError_t e = filling_grid(count, tuning::bucket_threads, copy_bytes, props, std::int64_t{1} << 20, count_blocks);
      e != cudaSuccess) {
    return e;
  }

  for (std::int64_t begin = 0; begin < num_samples; begin += tuning::large_bins_chunk) {
    const std::int64_t size = std::min(num_samples - begin, tuning::large_bins_chunk);
    const std::int64_t tiles = (size + tuning::partition_tile - 1) / tuning::partition_tile;
    const std::int64_t cells = layout.buckets * tiles;
    // The entry past the last cell becomes the chunk's total in the exclusive scan.
    if (cudaError_t e = cudaMemsetAsync(cell_first + cells, 0, sizeof(std::uint32_t), stream); e != cudaSuccess) {
      return e;
    }
    const partition_output out{offsets, cell_first, cell_start, tiles, static_cast<int>(layout.buckets), group_tiles};
    partition<<<static_cast<int>(std::min<std::int64_t>(partition_blocks, tiles)), tuning::partition_threads,
                partition_shared_bytes, stream>>>(samples + begin, size, map, out, left_out);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    // In place: cell counts become each cell's first position in bucket order.
    if (cudaError_t e = cub::DeviceScan::ExclusiveSum(scan_storage, scan_bytes, cell_first, static_cast<int>(cells + 1),
                                                      stream);
        e != cudaSuccess) {
      return e;
    }
    const cell_table table{offsets, cell_first, cell_start, tiles, cells};
    for (int slice = 0; slice < slices; ++slice) {
      count<<<count_blocks, tuning::bucket_threads, copy_bytes, stream>>>(table, num_bins, counts,
                                                                          slice_of_buckets(num_bins, slices, slice));
      if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    }
  }
  return cudaSuccess;
}

/// radix_sort over `call`'s samples. Keys are 32-bit bin indices, num_bins < 2^31
/// (histogram_strategy_unfit).
template <class Sample, class Counter, class Mapper>
cudaError_t dispatch_radix_sort(void* temp, std::size_t& temp_bytes,
                                const large_bins_call<Sample, Counter, Mapper>& call, const device_properties& props) {
  const auto& [samples, num_samples, counts, map, num_bins, left_out, stream] = call;
  // The left-out key num_bins must fit the sorted bits too.
  const int end_bit = std::bit_width(static_cast<std::uint64_t>(num_bins));
  const radix_sort_layout layout(num_samples, num_bins);
  const int max_chunk = static_cast<int>(layout.chunk);
  std::size_t sort_bytes = 0;
  std::size_t encode_bytes = 0;
  {
    cub::DoubleBuffer<std::uint32_t> keys(nullptr, nullptr);
    if (cudaError_t e = cub::DeviceRadixSort::SortKeys(nullptr, sort_bytes, keys, max_chunk, 0, end_bit, stream);
        e != cudaSuccess) {
      return e;
    }
    if (cudaError_t e = cub::DeviceRunLengthEncode::Encode(nullptr, encode_bytes, static_cast<const std::uint32_t*>(nullptr),
                                                           static_cast<std::uint32_t*>(nullptr),
                                                           static_cast<std::uint32_t*>(nullptr),
                                                           static_cast<int*>(nullptr), max_chunk, stream);
        e != cudaSuccess) {
      return e;
    }
  }
  std::size_t cub_bytes = std::max(sort_bytes, encode_bytes);
  if (temp == nullptr) {
    temp_bytes = layout.bytes(cub_bytes);
    return cudaSuccess;
  }
  const auto [keys_a, keys_b, lengths, num_runs, cub_storage] = layout.in(temp);

  constexpr int threads = tuning::merge_block_threads;
  auto to_keys = bin_keys_kernel<Sample, Mapper>;
  int key_blocks = 1;
  if (cudaError_t e = filling_grid(to_keys, threads, 0, props, (layout.chunk + threads - 1) / threads, key_blocks);
      e != cudaSuccess) {
    return e;
  }
  const int run_blocks = static_cast<int>(std::min<std::int64_t>((layout.max_runs + threads - 1) / threads,
                                                                  std::int64_t{props.multiprocessors} * 8));

  for (std::int64_t begin = 0; begin < num_samples; begin += tuning::large_bins_chunk) {
    const int size = static_cast<int>(std::min(num_samples - begin, tuning::large_bins_chunk));
    to_keys<<<key_blocks, threads, 0, stream>>>(samples + begin, size, map, keys_a, left_out);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    cub::DoubleBuffer<std::uint32_t> keys(keys_a, keys_b);
    std::size_t bytes = cub_bytes;
    if (cudaError_t e = cub::DeviceRadixSort::SortKeys(cub_storage, bytes, keys, size, 0, end_bit, stream);
        e != cudaSuccess) {
      return e;
    }
    // The sort leaves its result in one buffer (keys.Current()); the unique keys go to the other.
    std::uint32_t* unique = keys.Alternate();
    bytes = cub_bytes;
    if (cudaError_t e = cub::DeviceRunLengthEncode::Encode(cub_storage, bytes, keys.Current(), unique, lengths,
                                                           num_runs, size, stream);
        e != cudaSuccess) {
      return e;
    }
    add_runs_kernel<<<std::max(run_blocks, 1), threads, 0, stream>>>(unique, lengths, num_runs,
                                                                     static_cast<std::uint32_t>(num_bins), counts);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace tally::detail
