// Small kernels every operation's dispatch uses: setting a device scalar without a host copy.
#pragma once

namespace tally::detail {

/// `*target = value`: a one-thread kernel, so async calls need no host-to-device copy.
template <class T>
__global__ void set_value_kernel(T* target, T value) {
  *target = value;
}

}  // namespace tally::detail
