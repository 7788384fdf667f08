// The dispatch of reduce, count_if and find_first_if: the only code that sizes their launches
// and launches their kernels (CUB's included). CUB's temporary-storage contract: called with
// `temp == nullptr` a function only sets `temp_bytes` (never 0); called again with that much
// storage it runs. Functions return cudaError_t and never throw; the owning layer (src/)
// validates arguments, picks the strategy and turns errors into exceptions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cub/device/device_reduce.cuh>
#include <cub/iterator/arg_index_input_iterator.cuh>
#include <cuda_runtime.h>

#include "tally/detail/dispatch/device_properties.cuh"
#include "tally/detail/fixed_point_sum.hpp"
#include "tally/detail/kernels/reduce_kernels.cuh"
#include "tally/detail/tuning/reduce_tuning.cuh"
#include "tally/reduce.hpp"
#include "tally/strategy.hpp"

namespace tally::detail {

/// Launch bounds asked of tally's own reduction kernels (reduce_options::max_blocks and
/// block_threads; 0 means "sized to the device" and "the tuned default").
struct reduce_launch {
  int max_blocks = 0;
  int block_threads = 0;
};

/// automatic for reduce: the fixed-point sum when asked to be deterministic; for other float sums
/// two passes with no atomics (the same bits on every run on one GPU); else one atomic per block,
/// exact whatever the order.
template <class T>
choice choose_gpu_reduce(strategy requested, reduce_op op, bool deterministic) {
  if (requested != strategy::automatic) return {requested, "asked for"};
  if (deterministic) {
    return {strategy::block_reduce_atomic,
            "deterministic float sum: exact fixed-point chunk sums, block results added with integer atomics (the "
            "same bits for any launch, run or strategy)"};
  }
  if (is_floating_sample_v<T> && op == reduce_op::sum) {
    return {strategy::two_phase,
            "floating-point sum: block results combined in a fixed order with no atomics, so every run on this GPU "
            "gives the same bits, at the read bandwidth"};
  }
  return {strategy::block_reduce_atomic,
          "exact in any order (integer sums, min, max): a block reduction, then one atomic per block"};
}

inline choice choose_gpu_count(strategy requested) {
  if (requested != strategy::automatic) return {requested, "asked for"};
  return {strategy::block_reduce_atomic, "counts are exact in any order: a block reduction, then one atomic per block"};
}

inline choice choose_gpu_find(strategy requested) {
  if (requested != strategy::automatic) return {requested, "asked for"};
  return {strategy::atomic, "stops early: atomic min on the index, blocks skip tiles past a match"};
}

/// Why strategy `s` cannot give a deterministic sum, or nullptr if it can.
inline const char* deterministic_strategy_unfit(strategy s) {
  switch (s) {
    case strategy::automatic:
    case strategy::block_reduce_atomic:
    case strategy::two_phase: return nullptr;
    case strategy::cub: return "is CUB's own float reduction, whose bits follow its launch shape";
    default: return "adds floats with atomics in arrival order (use automatic, block_reduce_atomic or two_phase)";
  }
}

/// Blocks for `kernel`: as many as are resident on the device at once, no more than the work
/// needs (`items_per_block` samples per block and step), no more than asked; at least one.
template <class Kernel>
cudaError_t reduce_grid(Kernel kernel, std::int64_t num_samples, std::int64_t items_per_block, int threads,
                        std::size_t shared_bytes, const reduce_launch& launch, int& blocks) {
  device_properties props;
  if (cudaError_t e = current_device_properties(props); e != cudaSuccess) return e;
  int per_sm = 0;
  if (cudaError_t e = resident_blocks_per_multiprocessor(kernel, threads, shared_bytes, per_sm); e != cudaSuccess) {
    return e;
  }
  std::int64_t count = std::int64_t{std::max(per_sm, 1)} * props.multiprocessors;
  count = std::min<std::int64_t>(count, (num_samples + items_per_block - 1) / items_per_block);
  if (launch.max_blocks > 0) count = std::min<std::int64_t>(count, launch.max_blocks);
  blocks = static_cast<int>(std::max<std::int64_t>(count, 1));
  return cudaSuccess;
}

inline int block_threads_or(const reduce_launch& launch, int tuned) {
  return launch.block_threads > 0 ? launch.block_threads : tuned;
}

/// CUB's reduction for each fold: DeviceReduce::Reduce straight over the samples for reduce (its
/// vectorized path), TransformReduce with the predicate for count_if.
template <class T, reduce_op Op>
cudaError_t cub_fold(void* temp, std::size_t& temp_bytes, const T* samples, std::int64_t num_samples,
                     const reduce_fold<T, Op>& fold, accumulator_t<T>* result, cudaStream_t stream) {
  if constexpr (is_half_float_v<T>) {
    // CUB converts samples to the accumulator implicitly; float16 and bfloat16 widen explicitly.
    const auto widen = [] __host__ __device__(T x) { return static_cast<float>(x); };
    return cub::DeviceReduce::TransformReduce(temp, temp_bytes, samples, result, num_samples, fold, widen,
                                              fold.identity(), stream);
  } else {
    return cub::DeviceReduce::Reduce(temp, temp_bytes, samples, result, num_samples, fold, fold.identity(), stream);
  }
}

template <class T, class Predicate>
struct count_transform {
  Predicate predicate;
  __host__ __device__ std::uint64_t operator()(T x) const { return predicate(x) ? 1 : 0; }
};

template <class T, class Predicate>
cudaError_t cub_fold(void* temp, std::size_t& temp_bytes, const T* samples, std::int64_t num_samples,
                     const count_fold<T, Predicate>& fold, std::uint64_t* result, cudaStream_t stream) {
  return cub::DeviceReduce::TransformReduce(temp, temp_bytes, samples, result, num_samples, fold,
                                            count_transform<T, Predicate>{fold.predicate}, std::uint64_t{0}, stream);
}

/**
 * two_phase over `fold` into `*result` (device memory): each block writes its fold to the storage,
 * then one block combines them in a fixed order. No atomics, so it also runs folds whose value no
 * atomic combines (extremes_fold).
 */
template <class Fold>
cudaError_t dispatch_two_phase_fold(void* temp, std::size_t& temp_bytes, const typename Fold::input_type* samples,
                                    std::int64_t num_samples, const Fold& fold, typename Fold::value_type* result,
                                    const reduce_launch& launch, cudaStream_t stream) {
  using T = typename Fold::input_type;
  using V = typename Fold::value_type;
  constexpr int unroll = tuning::reduce_unroll<T>;
  const int threads = block_threads_or(launch, tuning::reduce_block_threads);
  const std::int64_t per_block_step = std::int64_t{threads} * unroll * sample_vector<T>::items;
  int blocks = 1;
  auto kernel = block_results_kernel<unroll, Fold>;
  if (cudaError_t e = reduce_grid(kernel, num_samples, per_block_step, threads, 0, launch, blocks); e != cudaSuccess) {
    return e;
  }
  if (temp == nullptr) {
    temp_bytes = sizeof(V) * static_cast<std::size_t>(blocks);
    return cudaSuccess;
  }
  if (blocks == 1) {
    // One block's fold is the result: the combining pass would fold it with identities only, which
    // changes no bits (a block's fold starts from the identity, so it is never a lone -0.0). A
    // launch fewer for a small call.
    kernel<<<1, threads, 0, stream>>>(samples, num_samples, fold, result);
    return cudaGetLastError();
  }
  auto* block_results = static_cast<V*>(temp);
  kernel<<<blocks, threads, 0, stream>>>(samples, num_samples, fold, block_results);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  combine_block_results_kernel<Fold><<<1, tuning::combine_block_threads, 0, stream>>>(block_results, blocks, fold,
                                                                                    result);
  return cudaGetLastError();
}

/**
 * Runs strategy `s` (atomic, atomic_per_thread, block_reduce_atomic, two_phase or cub)
 * of `fold` over `samples` into `*result` (device memory), which the call initializes.
 */
template <class Fold>
cudaError_t dispatch_fold(void* temp, std::size_t& temp_bytes, strategy s,
                          const typename Fold::input_type* samples, std::int64_t num_samples, const Fold& fold,
                          typename Fold::value_type* result, const fold_start_words& words, const reduce_launch& launch,
                          cudaStream_t stream) {
  using T = typename Fold::input_type;
  constexpr int unroll = tuning::reduce_unroll<T>;
  const int threads = block_threads_or(launch, tuning::reduce_block_threads);
  const std::int64_t per_block_step = std::int64_t{threads} * unroll * sample_vector<T>::items;
  int blocks = 1;

  switch (s) {
    case strategy::cub: return cub_fold(temp, temp_bytes, samples, num_samples, fold, result, stream);
    case strategy::two_phase:
      return dispatch_two_phase_fold(temp, temp_bytes, samples, num_samples, fold, result, launch, stream);
    default: break;
  }

  // The atomic strategies combine into `*result`, set to the identity first (block_reduce_atomic:
  // by its first finished block, in the launch). They need no storage but ask for one byte, so
  // that the run call gets a non-null `temp` (CUB's contract).
  if (temp == nullptr) {
    temp_bytes = 1;
    return cudaSuccess;
  }
  // Sizes the grid of `kernel` (each block `block_step` samples) and launches it into `*result`.
  const auto launch_atomic = [&](auto kernel, std::int64_t block_step, auto... words_of_block_reduce) {
    if (cudaError_t e = reduce_grid(kernel, num_samples, block_step, threads, 0, launch, blocks); e != cudaSuccess) {
      return e;
    }
    kernel<<<blocks, threads, 0, stream>>>(samples, num_samples, fold, result, words_of_block_reduce...);
    return cudaGetLastError();
  };
  if (s == strategy::block_reduce_atomic && num_samples > 0) {
    return launch_atomic(block_reduce_atomic_kernel<unroll, Fold>, per_block_step, words);
  }
  set_value_kernel<<<1, 1, 0, stream>>>(result, fold.identity());
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess || num_samples == 0) return e;
  switch (s) {
    case strategy::atomic: return launch_atomic(atomic_per_element_kernel<Fold>, threads);
    case strategy::atomic_per_thread: return launch_atomic(atomic_per_thread_kernel<unroll, Fold>, per_block_step);
    default: return cudaErrorInvalidValue;
  }
}

/// Widens float16 or bfloat16 samples into floats (exact), for the deterministic sum of their values.
template <class T>
cudaError_t dispatch_widen_to_float(const T* samples, std::int64_t num_samples, float* widened, cudaStream_t stream) {
  if (num_samples == 0) return cudaSuccess;
  constexpr int threads = 256;
  const std::int64_t blocks = std::min<std::int64_t>((num_samples + threads - 1) / threads, std::int64_t{1} << 16);
  widen_to_float_kernel<<<static_cast<int>(blocks), threads, 0, stream>>>(samples, num_samples, widened);
  return cudaGetLastError();
}

/**
 * Adds the deterministic sum's integers of samples[0, num_samples) (chunks cut from samples[0]) to
 * `slots` and `flags`, which the caller zeroed: block_reduce_atomic's pass, not rounded. What one
 * rank of a sharded sum (tally/nccl.hpp) runs over the whole chunks of its shard.
 */
template <class T>
cudaError_t dispatch_deterministic_slots(const T* samples, std::int64_t num_samples, std::int64_t* slots,
                                         std::uint32_t* flags, const reduce_launch& launch, cudaStream_t stream) {
  if (num_samples == 0) return cudaSuccess;
  const int threads = block_threads_or(launch, tuning::deterministic_block_threads);
  const int warps = threads / 32;
  const std::size_t shared_bytes =
      static_cast<std::size_t>(warps) * (fixed_point::digits<T> * sizeof(std::int64_t) + sizeof(std::uint32_t));
  auto kernel = deterministic_sum_kernel<false, T>;
  int blocks = 1;
  if (cudaError_t e = reduce_grid(kernel, num_samples, chunk_shape<T>::size * warps, threads, shared_bytes, launch, blocks);
      e != cudaSuccess) {
    return e;
  }
  kernel<<<blocks, threads, shared_bytes, stream>>>(samples, num_samples, slots, flags, nullptr, nullptr);
  return cudaGetLastError();
}

/**
 * The deterministic float/double sum into `*result`: strategy block_reduce_atomic (block slots
 * added with integer atomics) or two_phase (block slots written out, added by the finishing
 * kernel). Both give the same bits, whatever the launch shape.
 */
template <class T>
cudaError_t dispatch_deterministic_sum(void* temp, std::size_t& temp_bytes, strategy s, const T* samples,
                                       std::int64_t num_samples, T* result, const reduce_launch& launch,
                                       cudaStream_t stream) {
  constexpr int digits = fixed_point::digits<T>;
  const bool block_results = s == strategy::two_phase;
  if (!block_results && s != strategy::block_reduce_atomic) return cudaErrorInvalidValue;
  const int threads = block_threads_or(launch, tuning::deterministic_block_threads);
  const int warps = threads / 32;
  const std::size_t shared_bytes = static_cast<std::size_t>(warps) * (digits * sizeof(std::int64_t) + sizeof(std::uint32_t));
  auto kernel = block_results ? deterministic_sum_kernel<true, T> : deterministic_sum_kernel<false, T>;
  int blocks = 1;
  if (cudaError_t e = reduce_grid(kernel, num_samples, chunk_shape<T>::size * warps, threads, shared_bytes, launch, blocks);
      e != cudaSuccess) {
    return e;
  }
  // Storage: the slots and flags word (block_reduce_atomic), or each block's slots and flags
  // (two_phase), slot-major so the finishing block reads each slot's block results contiguously.
  const std::size_t slot_bytes = digits * sizeof(std::int64_t) + sizeof(std::int64_t);
  const std::size_t block_bytes = static_cast<std::size_t>(blocks) * (digits * sizeof(std::int64_t) + sizeof(std::uint32_t));
  if (temp == nullptr) {
    temp_bytes = block_results ? block_bytes : slot_bytes;
    return cudaSuccess;
  }
  if (block_results) {
    auto* block_slots = static_cast<std::int64_t*>(temp);
    auto* block_flags = reinterpret_cast<std::uint32_t*>(block_slots + static_cast<std::size_t>(digits) * blocks);
    kernel<<<blocks, threads, shared_bytes, stream>>>(samples, num_samples, nullptr, nullptr, block_slots, block_flags);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    deterministic_finish_kernel<T><<<1, tuning::combine_block_threads, 0, stream>>>(nullptr, nullptr, block_slots,
                                                                                   block_flags, blocks, result);
    return cudaGetLastError();
  }
  auto* slots = static_cast<std::int64_t*>(temp);
  auto* flags = reinterpret_cast<std::uint32_t*>(slots + digits);
  if (cudaError_t e = cudaMemsetAsync(temp, 0, slot_bytes, stream); e != cudaSuccess) return e;
  if (cudaError_t e = dispatch_deterministic_slots(samples, num_samples, slots, flags, launch, stream); e != cudaSuccess) {
    return e;
  }
  deterministic_finish_kernel<T><<<1, 32, 0, stream>>>(slots, flags, nullptr, nullptr, 0, result);
  return cudaGetLastError();
}

/// find_first_if's CUB pass: the minimum over all samples of (match ? index : num_samples).
template <class T, class Predicate>
struct index_if_match {
  Predicate predicate;
  std::int64_t none;
  __host__ __device__ std::int64_t operator()(const cub::KeyValuePair<std::int64_t, T>& indexed) const {
    return predicate(indexed.value) ? indexed.key : none;
  }
};

struct min_index {
  __host__ __device__ std::int64_t operator()(std::int64_t a, std::int64_t b) const { return b < a ? b : a; }
};

/**
 * find_first_if into `words.first` (num_samples when nothing matches): strategy atomic (the
 * early-exit search, one launch) or cub (a full pass: DeviceReduce over the indexed samples).
 */
template <class T, class Predicate>
cudaError_t dispatch_find_first(void* temp, std::size_t& temp_bytes, strategy s, const T* samples,
                                std::int64_t num_samples, Predicate predicate, const find_words& words,
                                const reduce_launch& launch, cudaStream_t stream) {
  if (s == strategy::cub) {
    const cub::ArgIndexInputIterator<const T*, std::int64_t> indexed(samples);
    return cub::DeviceReduce::TransformReduce(temp, temp_bytes, indexed, reinterpret_cast<std::int64_t*>(words.first),
                                              num_samples, min_index{},
                                              index_if_match<T, Predicate>{predicate, num_samples}, num_samples,
                                              stream);
  }
  if (s != strategy::atomic) return cudaErrorInvalidValue;
  if (temp == nullptr) {
    temp_bytes = 1;
    return cudaSuccess;
  }
  constexpr int items = tuning::find_items_per_thread;
  const int threads = block_threads_or(launch, tuning::find_block_threads);
  auto kernel = find_first_kernel<items, T, Predicate>;
  int blocks = 1;
  reduce_launch capped = launch;
  if (capped.max_blocks == 0) {
    device_properties props;
    if (cudaError_t e = current_device_properties(props); e != cudaSuccess) return e;
    capped.max_blocks = tuning::find_blocks_per_multiprocessor * props.multiprocessors;
  }
  if (cudaError_t e = reduce_grid(kernel, num_samples, std::int64_t{threads} * items, threads, 0, capped, blocks);
      e != cudaSuccess) {
    return e;
  }
  // With no samples the one block still runs: as the last block it writes the answer, 0.
  kernel<<<blocks, threads, 0, stream>>>(samples, num_samples, predicate, words);
  return cudaGetLastError();
}

}  // namespace tally::detail
