// The NCCL layer of a build without NCCL (or without CUDA): the same symbols as src/nccl.cu, each
// reporting that this build cannot count across GPUs (built_with_nccl() is false, so callers can
// check first).
#include "tally/nccl.hpp"

namespace tally::nccl {

bool built_with_nccl() noexcept { return false; }

local_team::local_team(std::span<const int>) {
  throw error(errc::not_supported, "devices",
              "tally::nccl::local_team: tally was built without NCCL (or without CUDA): counting across GPUs is not "
              "available");
}
local_team::~local_team() = default;
void local_team::abort() noexcept {}

namespace detail {
namespace {
[[noreturn]] void no_nccl(std::string_view function) {
  throw error(errc::not_supported, "comm",
              std::string(function) +
                  ": tally was built without NCCL (or without CUDA): counting across GPUs is "
                  "not available");
}
}  // namespace

void make_current(int) { no_nccl("tally::nccl::local_team"); }
void require_nccl(std::string_view function) { no_nccl(function); }
void wait(std::string_view function, stream_t, comm_t) { no_nccl(function); }
void check_not_aborted(comm_t, std::string_view function) { no_nccl(function); }
shard_layout agree(comm_t, std::string_view function, const call_signature&, std::uint64_t, stream_t) {
  no_nccl(function);
}
std::vector<std::uint64_t> all_gather_words(comm_t, std::string_view function, std::span<const std::uint64_t>,
                                            stream_t) {
  no_nccl(function);
}
void begin_agreement(comm_t, std::string_view function, const call_signature&, std::uint64_t, stream_t) {
  no_nccl(function);
}
shard_layout end_agreement(comm_t, std::string_view function, const call_signature&, stream_t) { no_nccl(function); }
std::array<std::int64_t, 2> sum_bins(comm_t, std::string_view function, void*, std::int64_t, bin_type, placement,
                                     const shard_layout&, stream_t, std::uint64_t*) {
  no_nccl(function);
}
template <class T>
accumulator_t<T> deterministic_sum(comm_t, std::string_view function, std::span<const T>, const reduce_options&,
                                   const shard_layout&, stream_t) {
  no_nccl(function);
}
TALLY_NCCL_INSTANTIATE_SUMS(TALLY_NCCL_DETERMINISTIC_SUM)
bool combine_fixed_point_sums(comm_t, std::string_view function, gpu::workspace&, std::span<double>, placement,
                              const shard_layout&, stream_t) {
  no_nccl(function);
}
}  // namespace detail
}  // namespace tally::nccl
