// The entry points that add a streamed chunk's results into the call's totals
// (tally/gpu/streaming.hpp), over the streaming dispatch.
#include <cstdint>

#include "tally/detail/cuda_check.hpp"
#include "tally/detail/dispatch/streaming_dispatch.cuh"
#include "tally/gpu/streaming.hpp"

namespace tally::gpu::detail {

namespace {
template <class T>
void add_counts(T* totals, const T* part, std::size_t n, std::uint64_t* left_total, const std::uint64_t* left_part,
                bool first, stream_t stream) {
  check_cuda(tally::detail::dispatch_add_chunk_counts(totals, part, n, left_total, left_part, first, stream),
             "adding a chunk's counts");
}
}  // namespace

void add_chunk_counts(std::uint32_t* totals, const std::uint32_t* part, std::size_t n, std::uint64_t* left_total,
                      const std::uint64_t* left_part, bool first, stream_t stream) {
  add_counts(totals, part, n, left_total, left_part, first, stream);
}
void add_chunk_counts(std::uint64_t* totals, const std::uint64_t* part, std::size_t n, std::uint64_t* left_total,
                      const std::uint64_t* left_part, bool first, stream_t stream) {
  add_counts(totals, part, n, left_total, left_part, first, stream);
}
void add_chunk_counts(double* totals, const double* part, std::size_t n, std::uint64_t* left_total,
                      const std::uint64_t* left_part, bool first, stream_t stream) {
  add_counts(totals, part, n, left_total, left_part, first, stream);
}

template <class A>
void combine_chunk_results(reduce_op op, std::uint64_t* total, const std::uint64_t* part, bool first, stream_t stream) {
  check_cuda(tally::detail::dispatch_combine_chunk_results<A>(op, total, part, first, stream),
             "combining a chunk's result");
}
template void combine_chunk_results<std::int64_t>(reduce_op, std::uint64_t*, const std::uint64_t*, bool, stream_t);
template void combine_chunk_results<std::uint64_t>(reduce_op, std::uint64_t*, const std::uint64_t*, bool, stream_t);
template void combine_chunk_results<float>(reduce_op, std::uint64_t*, const std::uint64_t*, bool, stream_t);
template void combine_chunk_results<double>(reduce_op, std::uint64_t*, const std::uint64_t*, bool, stream_t);

void record_first_match(std::uint64_t* found, const std::uint64_t* part, std::uint64_t elements,
                        std::uint64_t first_index, bool first, stream_t stream) {
  check_cuda(tally::detail::dispatch_record_first_match(found, part, elements, first_index, first, stream),
             "recording a chunk's match");
}

}  // namespace tally::gpu::detail
