// An N-body energy example: the kinetic and potential energy of N bodies, in double
// precision, summed on the GPU two ways and checked against a compensated CPU sum.
//
//   hybrid     each block reduces its threads' terms in shared memory, then thread 0 adds the
//              block's sum to the global total with ONE atomicAdd per quantity;
//   two-phase  each block writes its sum to a global array of partials, and a second kernel adds
//              the partials in a fixed order: no atomics at all.
//
// Both are timed (CUDA events, median of several runs after a warm-up) and run repeatedly to show
// the lesson: the two-phase result is bitwise identical from run to run, the hybrid's need not be,
// because the atomics add the block sums in whatever order the blocks happen to finish.
//
// Physics (G = 1, no softening: random positions in a cube never coincide, so every
// 1/|r_i - r_j| is finite):
//   kinetic   K = sum_i 0.5 m_i |v_i|^2
//   potential U = - sum_{i<j} G m_i m_j / |r_i - r_j|
//   total     E = K + U
//
// Usage: example_nbody_energy [--bodies N] [--runs R] [--seed S]
// Exit code: 0 every check passed; 1 a check or a CUDA call failed; 2 bad usage; 77 no GPU (the
// CPU reference is still computed and printed; CTest reports 77 as skipped).
//
// Self-contained on purpose: plain CUDA runtime calls, no tally headers, so it reads top to bottom.
#include <algorithm>
#include <bit>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

// atomicAdd(double*, double) is native from compute capability 6.0 (Pascal) on. Older GPUs need
// a compare-and-swap loop (tally::atomic_add_cas); tally builds for sm_90, so we do not carry it.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 600
#error "nbody_energy needs compute capability 6.0 or newer for atomicAdd on double"
#endif

namespace {

// ---- the problem ------------------------------------------------------------------------------

constexpr double gravitational_constant = 1.0;  // N-body units

constexpr int default_bodies = 16384;
constexpr int max_bodies = 131072;  // the CPU reference is O(N^2); see also the tolerance below
constexpr int default_runs = 15;
constexpr int warmup_runs = 2;
constexpr std::uint64_t default_seed = 20261122;

// Every relative error must be at most this, or the program exits 1.
//
// Why a correct program passes: every kinetic term is >= 0 and every potential term is <= 0, so
// each sum has condition number 1 and the classic bound for a summation in which no term passes
// through more than d additions holds in relative form: |computed - exact| <= d * eps * |exact|
// (to first order, eps = 2^-53 ~ 1.1e-16). On the GPU, d <= pair_tile (one thread's run over its
// tile of j) + 8 (the tree over 256 threads) + the number of blocks (the hybrid's chain of
// atomics; the two-phase's final pass is far shorter). At the largest N accepted (131072) that is
// 1024 + 8 + 65536 ~ 6.7e4 additions, plus a few eps for each term's own rounding (subtractions,
// fused multiply-adds, sqrt, division), which the CPU's terms share up to an ulp or two: at most
// ~7.5e-12, 13 times under the tolerance. The CPU reference's compensated sums are good to a few
// eps. In practice rounding errors partly cancel: a host emulation of this exact summation order
// at the default N was off by about 1e-15.
// Why it still catches bugs: losing one body changes K by ~1/N relative, losing one pair changes U
// by ~2/N^2 relative: 3e-8 at N = 8191 (the CTest run), 1.2e-10 at the largest N.
constexpr double tolerance = 1e-10;

// ---- the GPU launch shape ---------------------------------------------------------------------

// Threads per block. A power of two: the tree reduction halves the active threads each step.
constexpr int threads_per_block = 256;
// The pair triangle i < j is cut into column tiles of this many j: block (bx, by) handles rows
// i in [256 bx, 256 bx + 256) against columns j in [1024 by, 1024 by + 1024). Without the tiles
// the grid would have only N / 256 blocks (64 at the default N, for 132 SMs on an H100) and the
// thread with i = 0 would do N - 1 pairs while the last does none.
constexpr int pair_tile = 1024;

// ---- device code ------------------------------------------------------------------------------

// The bodies, structure of arrays, as device pointers: passed to kernels by value.
struct bodies_view {
  const double* mass;
  const double* x;
  const double* y;
  const double* z;
  const double* vx;
  const double* vy;
  const double* vz;
  int count;
};

struct energy_pair {
  double kinetic;
  double potential;
};

// What one thread contributes. Thread i of block (bx, by) owns body i = 256 bx + threadIdx.x:
//  - its kinetic energy, in the blocks of the first tile column only (by == 0), so each body
//    counts once;
//  - the part of row i of the pair triangle inside this block's tile: j > i and
//    1024 by <= j < 1024 (by + 1). A tile wholly left of the diagonal gives 0.
// Threads with i >= N contribute zeros: they still take part in the block reduction below, whose
// __syncthreads() every thread of the block must reach.
__device__ energy_pair thread_energy_terms(const bodies_view bodies) {
  energy_pair mine{0.0, 0.0};
  const int i = static_cast<int>(blockIdx.x) * threads_per_block + static_cast<int>(threadIdx.x);
  if (i >= bodies.count) return mine;

  const double mass_i = bodies.mass[i];
  if (blockIdx.y == 0) {
    const double vx = bodies.vx[i], vy = bodies.vy[i], vz = bodies.vz[i];
    mine.kinetic = 0.5 * mass_i * (vx * vx + vy * vy + vz * vz);
  }

  const int tile_begin = static_cast<int>(blockIdx.y) * pair_tile;
  const int tile_end = tile_begin + pair_tile < bodies.count ? tile_begin + pair_tile : bodies.count;
  const int first_j = i + 1 > tile_begin ? i + 1 : tile_begin;
  const double xi = bodies.x[i], yi = bodies.y[i], zi = bodies.z[i];
  // Sum of m_j / r_ij; the common factor -G m_i is applied once, after the loop. In a tile right
  // of the diagonal all lanes of a warp read the same j (one broadcast load); in the diagonal
  // tile lane k starts at its own i + 1, so the lanes read neighbouring j (coalesced loads).
  double mass_over_distance = 0.0;
  for (int j = first_j; j < tile_end; ++j) {
    const double dx = bodies.x[j] - xi;
    const double dy = bodies.y[j] - yi;
    const double dz = bodies.z[j] - zi;
    mass_over_distance += bodies.mass[j] / sqrt(dx * dx + dy * dy + dz * dz);
  }
  mine.potential = -gravitational_constant * mass_i * mass_over_distance;
  return mine;
}

// Sums both quantities over the block with a shared-memory tree; the result is meant for
// thread 0 (every thread gets it, only thread 0 uses it). Must be called by every thread of the
// block, with blockDim.x == threads_per_block. The order of the additions depends only on the
// block size, never on timing, so it gives the same bits every run.
__device__ energy_pair block_sum(const energy_pair mine) {
  __shared__ double kinetic[threads_per_block];
  __shared__ double potential[threads_per_block];
  const int t = static_cast<int>(threadIdx.x);
  kinetic[t] = mine.kinetic;
  potential[t] = mine.potential;
  // Every thread's value must be in shared memory before any thread reads a neighbour's.
  __syncthreads();
  for (int stride = threads_per_block / 2; stride > 0; stride /= 2) {
    if (t < stride) {
      kinetic[t] += kinetic[t + stride];
      potential[t] += potential[t + stride];
    }
    // The next step reads slots this step just wrote (thread t reads t + stride/2, written by
    // another thread), so all writes of this step must land first. The barrier is outside the
    // `if`: a __syncthreads() that only some threads of a block reach is undefined behaviour.
    __syncthreads();
  }
  return {kinetic[0], potential[0]};
}

// Hybrid reduction: block sums, then one atomicAdd per block and quantity into totals[0] (kinetic)
// and totals[1] (potential), which the host zeroes before the launch. Blocks off the first tile
// column add an exact 0 to the kinetic total, blocks left of the diagonal an exact 0 to the
// potential: harmless, and it keeps the rule "one atomic per block per quantity" plain.
// The atomics make the result correct in any order of the blocks, but the order changes the
// rounding: (a + b) + c need not equal (a + c) + b in floating point.
__global__ void __launch_bounds__(threads_per_block) energy_hybrid_kernel(const bodies_view bodies, double* totals) {
  const energy_pair block = block_sum(thread_energy_terms(bodies));
  if (threadIdx.x == 0) {
    atomicAdd(&totals[0], block.kinetic);
    atomicAdd(&totals[1], block.potential);
  }
}

// Two-phase reduction, phase 1: the same block sums, written to this block's own slot of
// block_kinetic / block_potential (one slot per block, so no two blocks write the same address).
__global__ void __launch_bounds__(threads_per_block)
    energy_block_partials_kernel(const bodies_view bodies, double* block_kinetic, double* block_potential) {
  const energy_pair block = block_sum(thread_energy_terms(bodies));
  if (threadIdx.x == 0) {
    const int slot = static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x);
    block_kinetic[slot] = block.kinetic;
    block_potential[slot] = block.potential;
  }
}

// Two-phase reduction, phase 2, launched as ONE block after phase 1 on the same stream (a kernel
// sees every write of the kernels launched before it on its stream, so no other synchronization
// is needed). Thread t adds partials t, t + 256, t + 512, ... in that order, then the block tree
// adds the 256 running sums: a fixed order, hence the same bits every run.
__global__ void __launch_bounds__(threads_per_block)
    sum_block_partials_kernel(const double* block_kinetic, const double* block_potential, int block_count,
                              double* totals) {
  energy_pair mine{0.0, 0.0};
  for (int slot = static_cast<int>(threadIdx.x); slot < block_count; slot += threads_per_block) {
    mine.kinetic += block_kinetic[slot];
    mine.potential += block_potential[slot];
  }
  const energy_pair sum = block_sum(mine);
  if (threadIdx.x == 0) {
    totals[0] = sum.kinetic;
    totals[1] = sum.potential;
  }
}

// ---- host: errors, device memory, timing ------------------------------------------------------

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// An owning array of doubles in device memory.
class device_array {
 public:
  explicit device_array(std::size_t count) : count_(count) {
    check(cudaMalloc(&data_, count * sizeof(double)), "cudaMalloc");
  }
  explicit device_array(const std::vector<double>& host) : device_array(host.size()) {
    check(cudaMemcpy(data_, host.data(), count_ * sizeof(double), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  ~device_array() { cudaFree(data_); }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  double* data() const { return data_; }
  std::size_t size() const { return count_; }

 private:
  double* data_ = nullptr;
  std::size_t count_;
};

// ---- host: the bodies and the CPU reference ---------------------------------------------------

struct host_bodies {
  std::vector<double> mass, x, y, z, vx, vy, vz;
};

// Masses uniform in [0.5, 1.5) / N (total mass ~1), positions uniform in the cube [-1, 1)^3,
// velocity components normal with sigma 0.3: K ~ 0.13, U ~ -0.47, so E = K + U ~ -0.33 is not a
// near-cancellation. Seeded, so every run (and every machine) sees the same system.
host_bodies make_bodies(int count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_real_distribution<double> coordinate(-1.0, 1.0);
  std::normal_distribution<double> velocity(0.0, 0.3);
  host_bodies b;
  for (auto* v : {&b.mass, &b.x, &b.y, &b.z, &b.vx, &b.vy, &b.vz}) v->resize(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < b.mass.size(); ++i) {
    b.mass[i] = (0.5 + unit(rng)) / count;
    b.x[i] = coordinate(rng);
    b.y[i] = coordinate(rng);
    b.z[i] = coordinate(rng);
    b.vx[i] = velocity(rng);
    b.vy[i] = velocity(rng);
    b.vz[i] = velocity(rng);
  }
  return b;
}

// Neumaier's variant of Kahan summation: it keeps the rounding error of every addition in
// `compensation` and adds it back at the end, so the result is accurate to a few eps whatever the
// number of terms (a plain running sum of n terms can be off by up to n eps).
struct compensated_sum {
  double sum = 0.0;
  double compensation = 0.0;
  void add(double term) {
    const double next = sum + term;
    compensation += std::abs(sum) >= std::abs(term) ? (sum - next) + term : (term - next) + sum;
    sum = next;
  }
  double value() const { return sum + compensation; }
};

struct energies {
  double kinetic;
  double potential;
  double total() const { return kinetic + potential; }
};

// The reference: the same terms as the GPU, each row of the pair triangle summed with
// compensation (rows in parallel with OpenMP), then the rows summed with compensation in index
// order. Each row lands in its own slot, so the result does not depend on the thread count.
energies cpu_reference(const host_bodies& b) {
  const int n = static_cast<int>(b.mass.size());
  compensated_sum kinetic;
  for (int i = 0; i < n; ++i) {
    kinetic.add(0.5 * b.mass[i] * (b.vx[i] * b.vx[i] + b.vy[i] * b.vy[i] + b.vz[i] * b.vz[i]));
  }

  std::vector<double> row_potential(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(dynamic, 16)
  for (int i = 0; i < n; ++i) {
    compensated_sum mass_over_distance;
    for (int j = i + 1; j < n; ++j) {
      const double dx = b.x[j] - b.x[i];
      const double dy = b.y[j] - b.y[i];
      const double dz = b.z[j] - b.z[i];
      mass_over_distance.add(b.mass[j] / std::sqrt(dx * dx + dy * dy + dz * dz));
    }
    row_potential[static_cast<std::size_t>(i)] = -gravitational_constant * b.mass[i] * mass_over_distance.value();
  }
  compensated_sum potential;
  for (const double row : row_potential) potential.add(row);
  return {kinetic.value(), potential.value()};
}

// ---- host: running and reporting one GPU method -----------------------------------------------

struct method_runs {
  std::vector<energies> results;     // one per timed run
  std::vector<float> milliseconds;   // one per timed run
};

// A device buffer written by a method, filled with NaN (all bytes 0xff) before every timed run,
// so a value the method forgot to write cannot pass for one from the previous run.
struct output_to_poison {
  double* data;
  std::size_t count;
};

// Runs `launch` (which enqueues the whole method on `stream`) warmup_runs times untimed, then
// `runs` times timed, reading totals[0..1] back after each timed run.
template <class Launch>
method_runs run_method(Launch launch, const double* totals, const std::vector<output_to_poison>& outputs, int runs,
                       cudaStream_t stream) {
  // A pair of CUDA events around the launch times the GPU's work on the stream.
  cudaEvent_t started = nullptr, finished = nullptr;
  check(cudaEventCreate(&started), "cudaEventCreate");
  check(cudaEventCreate(&finished), "cudaEventCreate");
  method_runs out;
  for (int r = 0; r < warmup_runs + runs; ++r) {
    for (const output_to_poison& o : outputs) {
      check(cudaMemsetAsync(o.data, 0xff, o.count * sizeof(double), stream), "cudaMemsetAsync (poison)");
    }
    check(cudaEventRecord(started, stream), "cudaEventRecord");
    launch();
    check(cudaEventRecord(finished, stream), "cudaEventRecord");
    double host_totals[2];
    check(cudaMemcpyAsync(host_totals, totals, sizeof host_totals, cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync to host");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (r < warmup_runs) continue;
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, started, finished), "cudaEventElapsedTime");
    out.results.push_back({host_totals[0], host_totals[1]});
    out.milliseconds.push_back(ms);
  }
  cudaEventDestroy(started);
  cudaEventDestroy(finished);
  return out;
}

double relative_error(double value, double reference, double scale) { return std::abs(value - reference) / scale; }

// The larger of two errors, NaN (a poisoned output that was never written) winning over any number.
double worse(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

std::uint64_t bits(double value) { return std::bit_cast<std::uint64_t>(value); }

// Prints one method's values, errors, time and reproducibility; returns whether its errors are
// within the tolerance in every run, and (through bitwise_identical) whether all runs gave the
// same bits.
bool report(const char* name, const char* how, const method_runs& runs, const energies& reference, long long pairs,
            bool* bitwise_identical) {
  // K and U are same-sign sums: relative to themselves. E = K + U subtracts, so its error is
  // measured against |K| + |U|: relative to |E| it would blow up when K ~ -U through no fault of
  // the sums.
  const double total_scale = std::abs(reference.kinetic) + std::abs(reference.potential);
  double worst_kinetic = 0.0, worst_potential = 0.0, worst_total = 0.0;
  std::set<std::pair<std::uint64_t, std::uint64_t>> distinct;
  double lowest_potential = runs.results.front().potential, highest_potential = lowest_potential;
  for (const energies& e : runs.results) {
    worst_kinetic = worse(worst_kinetic, relative_error(e.kinetic, reference.kinetic, std::abs(reference.kinetic)));
    worst_potential =
        worse(worst_potential, relative_error(e.potential, reference.potential, std::abs(reference.potential)));
    worst_total = worse(worst_total, relative_error(e.total(), reference.total(), total_scale));
    distinct.insert({bits(e.kinetic), bits(e.potential)});
    lowest_potential = std::min(lowest_potential, e.potential);
    highest_potential = std::max(highest_potential, e.potential);
  }
  std::vector<float> sorted = runs.milliseconds;
  std::sort(sorted.begin(), sorted.end());
  const double median_ms = sorted[sorted.size() / 2];
  const energies& first = runs.results.front();

  std::printf("\n%s: %s\n", name, how);
  std::printf("  kinetic   %+.17e   worst relative error %.2e\n", first.kinetic, worst_kinetic);
  std::printf("  potential %+.17e   worst relative error %.2e\n", first.potential, worst_potential);
  std::printf("  total     %+.17e   worst relative error %.2e (of |K| + |U|)\n", first.total(), worst_total);
  std::printf("  time      median %.3f ms over %zu runs (min %.3f, max %.3f), %.2f Gpairs/s\n", median_ms,
              sorted.size(), sorted.front(), sorted.back(), static_cast<double>(pairs) / (median_ms * 1e6));
  *bitwise_identical = distinct.size() == 1;
  if (*bitwise_identical) {
    std::printf("  repeated runs: all %zu bitwise identical\n", runs.results.size());
  } else {
    std::printf("  repeated runs: %zu distinct results in %zu runs; potential spread %.2e relative\n", distinct.size(),
                runs.results.size(), (highest_potential - lowest_potential) / std::abs(reference.potential));
  }
  const bool within = worst_kinetic <= tolerance && worst_potential <= tolerance && worst_total <= tolerance;
  if (!within) std::printf("  FAILED: a relative error exceeds the tolerance %.0e\n", tolerance);
  return within;
}

// ---- host: the command line -------------------------------------------------------------------

struct options {
  int bodies = default_bodies;
  int runs = default_runs;
  std::uint64_t seed = default_seed;
};

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: example_nbody_energy [--bodies N] [--runs R] [--seed S]\n"
               "  --bodies N  number of bodies, 2..%d (default %d)\n"
               "  --runs R    timed runs per GPU method, 1..1000 (default %d), after %d warm-up runs\n"
               "  --seed S    seed of the random system (default %llu)\n",
               max_bodies, default_bodies, default_runs, warmup_runs, static_cast<unsigned long long>(default_seed));
}

// Parses `text` as an integer in [lowest, highest]; throws an error naming `argument` otherwise.
template <class Integer>
Integer parse_integer(std::string_view argument, std::string_view text, Integer lowest, Integer highest) {
  Integer value{};
  const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (status != std::errc{} || end != text.data() + text.size() || value < lowest || value > highest) {
    throw std::invalid_argument(std::string(argument) + ": expected an integer in [" + std::to_string(lowest) + ", " +
                                std::to_string(highest) + "], got '" + std::string(text) + "'");
  }
  return value;
}

options parse_options(int argc, char** argv) {
  options o;
  for (int a = 1; a < argc; ++a) {
    const std::string_view argument = argv[a];
    if (argument == "--help" || argument == "-h") {
      usage(stdout);
      std::exit(0);
    }
    if (argument != "--bodies" && argument != "--runs" && argument != "--seed") {
      throw std::invalid_argument("unknown argument '" + std::string(argument) + "'");
    }
    if (a + 1 == argc) throw std::invalid_argument(std::string(argument) + ": missing value");
    const std::string_view value = argv[++a];
    if (argument == "--bodies") o.bodies = parse_integer(argument, value, 2, max_bodies);
    if (argument == "--runs") o.runs = parse_integer(argument, value, 1, 1000);
    if (argument == "--seed") o.seed = parse_integer<std::uint64_t>(argument, value, 0, UINT64_MAX);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  options opts;
  try {
    opts = parse_options(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    usage(stderr);
    return 2;
  }
  const int n = opts.bodies;
  const long long pairs = static_cast<long long>(n) * (n - 1) / 2;
  std::printf("N-body energy, double precision: %d bodies, %lld pairs, seed %llu, G = 1, no softening\n", n, pairs,
              static_cast<unsigned long long>(opts.seed));

  const host_bodies bodies = make_bodies(n, opts.seed);
  const auto cpu_start = std::chrono::steady_clock::now();
  const energies reference = cpu_reference(bodies);
  const double cpu_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - cpu_start).count();
  std::printf("\ncpu reference (compensated sums, OpenMP rows): %.3f s\n", cpu_seconds);
  std::printf("  kinetic   %+.17e\n  potential %+.17e\n  total     %+.17e\n", reference.kinetic, reference.potential,
              reference.total());

  int device_count = 0;
  const cudaError_t device_status = cudaGetDeviceCount(&device_count);
  if (device_status != cudaSuccess || device_count == 0) {
    std::printf("\nSKIPPED: no CUDA GPU available (%s); the GPU part did not run (exit code 77)\n",
                device_status != cudaSuccess ? cudaGetErrorString(device_status) : "no devices");
    return 77;
  }

  try {
    cudaDeviceProp properties{};
    check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
    const dim3 grid((n + threads_per_block - 1) / threads_per_block, (n + pair_tile - 1) / pair_tile);
    const int block_count = static_cast<int>(grid.x * grid.y);
    std::printf("\nGPU: %s (sm_%d%d, %d SMs); grid %u x %u blocks of %d threads, tiles of %d columns\n",
                properties.name, properties.major, properties.minor, properties.multiProcessorCount, grid.x, grid.y,
                threads_per_block, pair_tile);
    std::printf("tolerance on every relative error: %.0e\n", tolerance);

    const device_array mass(bodies.mass), x(bodies.x), y(bodies.y), z(bodies.z), vx(bodies.vx), vy(bodies.vy),
        vz(bodies.vz);
    const bodies_view view{mass.data(), x.data(), y.data(), z.data(), vx.data(), vy.data(), vz.data(), n};
    const device_array totals(2);                        // [0] kinetic, [1] potential
    const device_array block_kinetic(static_cast<std::size_t>(block_count));
    const device_array block_potential(static_cast<std::size_t>(block_count));
    cudaStream_t stream = nullptr;
    check(cudaStreamCreate(&stream), "cudaStreamCreate");

    // Hybrid: the atomics add to the totals, so they start at zero; the zeroing is part of the
    // method and is timed with it.
    const auto launch_hybrid = [&] {
      check(cudaMemsetAsync(totals.data(), 0, 2 * sizeof(double), stream), "cudaMemsetAsync");
      energy_hybrid_kernel<<<grid, threads_per_block, 0, stream>>>(view, totals.data());
      check(cudaGetLastError(), "energy_hybrid_kernel launch");
    };
    // Two-phase: two kernels on one stream, the second as a single block; nothing to zero.
    const auto launch_two_phase = [&] {
      energy_block_partials_kernel<<<grid, threads_per_block, 0, stream>>>(view, block_kinetic.data(),
                                                                           block_potential.data());
      check(cudaGetLastError(), "energy_block_partials_kernel launch");
      sum_block_partials_kernel<<<1, threads_per_block, 0, stream>>>(block_kinetic.data(), block_potential.data(),
                                                                     block_count, totals.data());
      check(cudaGetLastError(), "sum_block_partials_kernel launch");
    };

    const method_runs hybrid = run_method(launch_hybrid, totals.data(), {{totals.data(), 2}}, opts.runs, stream);
    const method_runs two_phase = run_method(launch_two_phase, totals.data(),
                                             {{totals.data(), 2},
                                              {block_kinetic.data(), block_kinetic.size()},
                                              {block_potential.data(), block_potential.size()}},
                                             opts.runs, stream);
    check(cudaStreamDestroy(stream), "cudaStreamDestroy");

    const std::string hybrid_how = "block reduction, then one atomicAdd per block and quantity (" +
                                   std::to_string(2 * block_count) + " atomics per run)";
    const std::string two_phase_how = "block partials to global memory, then one block adds all " +
                                      std::to_string(block_count) + " in a fixed order (no atomics)";
    bool hybrid_identical = false, two_phase_identical = false;
    const bool hybrid_ok = report("hybrid", hybrid_how.c_str(), hybrid, reference, pairs, &hybrid_identical);
    const bool two_phase_ok =
        report("two-phase", two_phase_how.c_str(), two_phase, reference, pairs, &two_phase_identical);

    std::printf("\nlesson: the two-phase sum runs in a fixed order, so its bits %s from run to run (they must);\n",
                two_phase_identical ? "were identical" : "DIFFERED");
    std::printf("        the hybrid's atomics add block sums in arrival order, so its bits %s (they need not be).\n",
                hybrid_identical ? "happened to be identical this time" : "differed between runs");
    if (!two_phase_identical) {
      std::printf("FAILED: the two-phase result is not reproducible: a race in the reduction?\n");
    }
    const bool ok = hybrid_ok && two_phase_ok && two_phase_identical;
    std::printf("%s\n", ok ? "OK: both methods match the CPU reference" : "FAILED");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
