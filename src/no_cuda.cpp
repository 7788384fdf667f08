// The GPU backend of a build without CUDA: the same symbols as the CUDA build, each reporting
// that this build has no GPU support (device_count() is 0, so callers can check first).
#include <cstdint>
#include <span>

#include "instantiation_list.hpp"
#include "tally/error.hpp"
#include "tally/gpu.hpp"
#include "tally/gpu/streaming.hpp"
#include "tally/gpu/timing.hpp"

namespace tally::gpu {
namespace {
[[noreturn]] void no_cuda() {
  throw error(errc::not_supported, "backend", "tally was built without CUDA: the GPU backend is not available");
}
}  // namespace

bool built_with_cuda() noexcept { return false; }
int device_count() noexcept { return 0; }
device_info describe_device() { no_cuda(); }
double measure_read_bandwidth(std::size_t, int, run_timing) { no_cuda(); }
timed_runs time_runs(const std::function<void(stream_t)>&, int, stream_t, run_timing) { no_cuda(); }
void synchronize() { no_cuda(); }

namespace detail {
void* device_allocate(std::size_t) { no_cuda(); }
void device_free(void*) noexcept {}
void copy_to_device(void*, const void*, std::size_t) { no_cuda(); }
void copy_to_host(void*, const void*, std::size_t) { no_cuda(); }
void device_fill_bytes(void*, int, std::size_t) { no_cuda(); }
}  // namespace detail

workspace::workspace(workspace&&) noexcept {}
workspace& workspace::operator=(workspace&&) noexcept { return *this; }
workspace::~workspace() = default;
void* workspace::reserve(std::size_t, stream_t) { no_cuda(); }
std::uint64_t* workspace::scalar() { no_cuda(); }
std::uint64_t workspace::read_scalar(stream_t) { no_cuda(); }
namespace detail {
workspace& waiting_workspace(stream_t) { no_cuda(); }
void copy_words_async(const void*, void*, std::size_t, stream_t) { no_cuda(); }
void check_no_pending_cuda_error(std::string_view) { no_cuda(); }
}  // namespace detail

namespace detail {
template <class Sample, class Counter>
choice histogram_even_async(std::span<const Sample>, std::span<Counter>, const even_bins&, workspace&,
                            const histogram_options&, stream_t) {
  no_cuda();
}
template <class Sample, class Weight, class Sum>
choice histogram_even_weighted_async(std::span<const Sample>, std::span<const Weight>, std::span<Sum>, const even_bins&,
                                     workspace&, const histogram_options&, stream_t) {
  no_cuda();
}
template <class Sample, class Weight, class Sum>
histogram_result histogram_even_weighted(std::span<const Sample>, std::span<const Weight>, std::span<Sum>,
                                         const even_bins&, const histogram_options&, stream_t) {
  no_cuda();
}
template <class Sample, class Counter>
choice histogram_range_async(std::span<const Sample>, std::span<Counter>, std::span<const double>, workspace&,
                             const histogram_options&, stream_t) {
  no_cuda();
}
template <class Sample, class Counter>
choice bincount_async(std::span<const Sample>, std::span<Counter>, workspace&, const histogram_options&, stream_t) {
  no_cuda();
}
template <class Sample>
void check_bincount_samples(std::span<const Sample>, workspace&, stream_t) {
  no_cuda();
}
template <class T>
choice reduce_into_async(std::span<const T>, reduce_op, accumulator_t<T>*, workspace&, const reduce_options&,
                         stream_t) {
  no_cuda();
}
template <class T>
void extremes_async(std::span<const T>, workspace&, stream_t) {
  no_cuda();
}
template <class T>
  requires is_histogram_sample_v<T>
choice predicate_async(operation, std::span<const T>, compare_to<T>, workspace&, const reduce_options&, stream_t) {
  no_cuda();
}

TALLY_INSTANTIATE_BYTE(std::uint8_t)
TALLY_INSTANTIATE_INTEGER(std::int32_t)
TALLY_INSTANTIATE_INTEGER(std::uint32_t)
TALLY_INSTANTIATE_INTEGER(std::int64_t)
TALLY_INSTANTIATE_FLOATING(float)
TALLY_INSTANTIATE_FLOATING(double)
TALLY_INSTANTIATE_INTEGER(std::int8_t)
TALLY_INSTANTIATE_INTEGER(std::int16_t)
TALLY_INSTANTIATE_INTEGER(std::uint16_t)
TALLY_INSTANTIATE_FLOATING(tally::float16)
TALLY_INSTANTIATE_FLOATING(tally::bfloat16)
}  // namespace detail

// Host samples: the ring keeps its options, every use reports the missing backend.
struct staging_ring::state {
  staging_options options;
};
staging_ring::staging_ring(const staging_options& options) : state_(std::make_unique<state>(state{options})) {}
staging_ring::staging_ring(staging_ring&&) noexcept = default;
staging_ring& staging_ring::operator=(staging_ring&&) noexcept = default;
staging_ring::~staging_ring() = default;
const staging_options& staging_ring::options() const noexcept { return state_->options; }
std::size_t staging_ring::pinned_bytes() const noexcept { return 0; }
staging_ring& staging_ring::thread_ring() { no_cuda(); }

namespace detail {
streamed stream_chunks(staging_ring&, std::string_view, std::span<const host_lane>, const chunk_work&, stream_t,
                       const std::uint64_t*) {
  no_cuda();
}
void* ring_scratch(staging_ring&, std::size_t, stream_t) { no_cuda(); }
void add_chunk_counts(std::uint32_t*, const std::uint32_t*, std::size_t, std::uint64_t*, const std::uint64_t*, bool,
                      stream_t) {
  no_cuda();
}
void add_chunk_counts(std::uint64_t*, const std::uint64_t*, std::size_t, std::uint64_t*, const std::uint64_t*, bool,
                      stream_t) {
  no_cuda();
}
void add_chunk_counts(double*, const double*, std::size_t, std::uint64_t*, const std::uint64_t*, bool, stream_t) {
  no_cuda();
}
template <class A>
void combine_chunk_results(reduce_op, std::uint64_t*, const std::uint64_t*, bool, stream_t) {
  no_cuda();
}
template void combine_chunk_results<std::int64_t>(reduce_op, std::uint64_t*, const std::uint64_t*, bool, stream_t);
template void combine_chunk_results<std::uint64_t>(reduce_op, std::uint64_t*, const std::uint64_t*, bool, stream_t);
template void combine_chunk_results<float>(reduce_op, std::uint64_t*, const std::uint64_t*, bool, stream_t);
template void combine_chunk_results<double>(reduce_op, std::uint64_t*, const std::uint64_t*, bool, stream_t);
void record_first_match(std::uint64_t*, const std::uint64_t*, std::uint64_t, std::uint64_t, bool, stream_t) {
  no_cuda();
}
std::uint64_t read_device_word(const std::uint64_t*, stream_t) { no_cuda(); }
}  // namespace detail
}  // namespace tally::gpu
