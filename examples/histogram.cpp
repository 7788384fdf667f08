// The smallest useful tally program: one histogram on the CPU backend and, when a GPU is
// present, the same histogram on the GPU, with what each call chose and left out.
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "tally/cpu.hpp"
#include "tally/gpu.hpp"

int main() {
  std::mt19937 rng(1);
  std::normal_distribution<float> temperature(20.0f, 8.0f);
  std::vector<float> samples(1 << 20);
  for (float& s : samples) s = temperature(rng);

  // 10 bins of 5 degrees over [0, 50): colder and warmer readings are left out, and counted.
  const tally::even_bins bins{10, 0.0, 50.0};
  std::vector<std::uint32_t> counts(10);
  const tally::histogram_result cpu = tally::cpu::histogram_even<float, std::uint32_t>(samples, counts, bins);
  std::printf("cpu: strategy %s (%s), %llu samples left out\n", tally::to_string(cpu.chose.used).data(),
              cpu.chose.reason.data(), static_cast<unsigned long long>(cpu.left_out));
  for (std::size_t i = 0; i < counts.size(); ++i) std::printf("  [%2zu, %2zu) %u\n", i * 5, i * 5 + 5, counts[i]);

  if (tally::gpu::device_count() == 0) {
    std::printf("gpu: no GPU present\n");
    return 0;
  }
  tally::gpu::device_buffer<float> device_samples(std::span<const float>(samples.data(), samples.size()));
  tally::gpu::device_buffer<std::uint32_t> device_counts(10);
  const tally::histogram_result gpu = tally::gpu::histogram_even(device_samples.const_span(), device_counts.span(), bins);
  std::vector<std::uint32_t> from_gpu(10);
  device_counts.download(from_gpu);
  std::printf("gpu: strategy %s (%s), %llu samples left out, %s the CPU\n", tally::to_string(gpu.chose.used).data(),
              gpu.chose.reason.data(), static_cast<unsigned long long>(gpu.left_out),
              from_gpu == counts ? "same counts as" : "DIFFERENT counts from");
  return from_gpu == counts && gpu.left_out == cpu.left_out ? 0 : 1;
}
