// One process per GPU, as MPI or torch.distributed run them: each process counts its part of the
// input and tally::nccl adds the counts. The NCCL unique id travels from the first process to the
// others (here on the command line of the workers it starts; with MPI, MPI_Bcast; with
// torch.distributed, a broadcast of its bytes). Rank 0 checks the counts against the CPU backend.
//
//   example_nccl_processes [SAMPLES]   starts one worker per visible GPU; exit 77 without a GPU
#include <cuda_runtime.h>
#include <nccl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tally/cpu.hpp"
#include "tally/gpu.hpp"
#include "tally/nccl.hpp"

extern char** environ;

namespace {

constexpr std::int64_t num_bins = 4096;

/// Sample i of the whole input, the same whichever process makes it.
std::int32_t sample_at(std::uint64_t i) {
  std::uint64_t x = i * 0x9e3779b97f4a7c15ull;
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 32;
  return static_cast<std::int32_t>(x % (num_bins + 100)) - 50;  // some below and above the bins
}

int worker(int rank, int ranks, const std::string& id_hex, std::uint64_t total) {
  ncclUniqueId id;
  for (std::size_t i = 0; i < sizeof(id.internal); ++i) {
    id.internal[i] = static_cast<char>(std::stoi(id_hex.substr(2 * i, 2), nullptr, 16));
  }
  cudaSetDevice(rank);
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, ranks, id, rank) != ncclSuccess) {
    std::fprintf(stderr, "rank %d: ncclCommInitRank failed\n", rank);
    return 1;
  }
  // This rank's contiguous part of the input.
  const std::uint64_t first = total * static_cast<std::uint64_t>(rank) / static_cast<std::uint64_t>(ranks);
  const std::uint64_t last = total * static_cast<std::uint64_t>(rank + 1) / static_cast<std::uint64_t>(ranks);
  std::vector<std::int32_t> shard(last - first);
  for (std::uint64_t i = first; i < last; ++i) shard[i - first] = sample_at(i);
  const tally::gpu::device_buffer<std::int32_t> d_shard{std::span<const std::int32_t>(shard)};
  tally::gpu::device_buffer<std::uint64_t> d_counts(num_bins);
  const tally::even_bins bins{num_bins, 0.0, static_cast<double>(num_bins)};
  const tally::nccl::histogram_result result =
      tally::nccl::histogram_even(comm, d_shard.const_span(), d_counts.span(), bins);
  int status = 0;
  if (rank == 0) {
    std::vector<std::uint64_t> counts(num_bins), want(num_bins);
    d_counts.download(counts);
    std::vector<std::int32_t> all(total);
    for (std::uint64_t i = 0; i < total; ++i) all[i] = sample_at(i);
    const auto cpu =
        tally::cpu::histogram_even(std::span<const std::int32_t>(all), std::span<std::uint64_t>(want), bins);
    status = counts == want && result.left_out == cpu.left_out ? 0 : 1;
    std::printf("%d processes, %llu samples, %lld bins: left out %llu; counts %s the CPU's\n", ranks,
                static_cast<unsigned long long>(total), static_cast<long long>(num_bins),
                static_cast<unsigned long long>(result.left_out), status == 0 ? "equal" : "DIFFER FROM");
  }
  ncclCommDestroy(comm);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "--worker") {
    return worker(std::atoi(argv[2]), std::atoi(argv[3]), argv[4], std::strtoull(argv[5], nullptr, 10));
  }
  const std::uint64_t total = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10'000'019;
  // Counted before any CUDA call of this process: the workers own the GPUs.
  const int gpus = tally::gpu::device_count();
  if (gpus == 0 || !tally::nccl::built_with_nccl()) {
    std::printf("SKIPPED: %s\n", gpus == 0 ? "no GPU present" : "tally was built without NCCL");
    return 77;
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  std::string id_hex;
  for (char c : id.internal) {
    char byte[3];
    std::snprintf(byte, sizeof(byte), "%02x", static_cast<unsigned char>(c));
    id_hex += byte;
  }
  std::vector<pid_t> workers;
  for (int rank = 0; rank < gpus; ++rank) {
    const std::string r = std::to_string(rank), n = std::to_string(gpus), t = std::to_string(total);
    std::vector<char*> args{argv[0],
                            const_cast<char*>("--worker"),
                            const_cast<char*>(r.c_str()),
                            const_cast<char*>(n.c_str()),
                            id_hex.data(),
                            const_cast<char*>(t.c_str()),
                            nullptr};
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, args.data(), environ) != 0) return 1;
    workers.push_back(pid);
  }
  int failures = 0;
  for (pid_t pid : workers) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  return failures == 0 ? 0 : 1;
}
