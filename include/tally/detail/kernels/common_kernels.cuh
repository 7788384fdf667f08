// Small kernels every operation's dispatch uses: setting a device scalar without a host copy, and
// handing one to the host without a copy engine.
#pragma once

namespace tally::detail {

/// `*target = value`: a one-thread kernel, so async calls need no host-to-device copy.
template <class T>
__global__ void set_value_kernel(T* target, T value) {
  *target = value;
}

/// Copies `words` words from `source` to `target` (device memory, or pinned host memory the
/// device maps) with one warp: a result's way to the host on the stream's own engine, where a copy
/// engine's copy would wait for the kernels before it across engines.
template <class Word>
__global__ void copy_words_kernel(const Word* source, Word* target, int words) {
  for (int i = static_cast<int>(threadIdx.x); i < words; i += static_cast<int>(blockDim.x)) target[i] = source[i];
}

}  // namespace tally::detail
