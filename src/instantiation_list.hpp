// The types the compiled GPU library is instantiated for, as X-macros shared by the CUDA
// build and the no-CUDA stubs, so both provide exactly the same symbols.
#pragma once

#include <cstdint>

#define TALLY_INSTANTIATE_HISTOGRAMS(Sample)                                                               \
  template choice histogram_even_async<Sample, std::uint32_t>(std::span<const Sample>, std::span<std::uint32_t>, \
                                                              const even_bins&, workspace&,                  \
                                                              const histogram_options&, stream_t);           \
  template choice histogram_even_async<Sample, std::uint64_t>(std::span<const Sample>, std::span<std::uint64_t>, \
                                                              const even_bins&, workspace&,                  \
                                                              const histogram_options&, stream_t);           \
  template choice histogram_range_async<Sample, std::uint32_t>(                                              \
      std::span<const Sample>, std::span<std::uint32_t>, std::span<const double>, workspace&,                \
      const histogram_options&, stream_t);                                                                   \
  template choice histogram_range_async<Sample, std::uint64_t>(                                              \
      std::span<const Sample>, std::span<std::uint64_t>, std::span<const double>, workspace&,                \
      const histogram_options&, stream_t);                                                                   \
  template choice predicate_async<Sample>(operation, std::span<const Sample>, compare_to<Sample>, workspace&, \
                                          const reduce_options&, stream_t);

#define TALLY_INSTANTIATE_BINCOUNT(Sample)                                                                  \
  template choice bincount_async<Sample, std::uint32_t>(std::span<const Sample>, std::span<std::uint32_t>, \
                                                        workspace&, const histogram_options&, stream_t);   \
  template choice bincount_async<Sample, std::uint64_t>(std::span<const Sample>, std::span<std::uint64_t>, \
                                                        workspace&, const histogram_options&, stream_t);   \
  template void check_bincount_samples<Sample>(std::span<const Sample>, workspace&, stream_t);

#define TALLY_INSTANTIATE_REDUCE(Sample)                                                                     \
  template choice reduce_into_async<Sample>(std::span<const Sample>, reduce_op, accumulator_t<Sample>*,      \
                                            workspace&, const reduce_options&, stream_t);                    \
  template void extremes_async<Sample>(std::span<const Sample>, workspace&, stream_t);

/// Weighted histograms: float and double weights, double sums (the async and the waiting form).
#define TALLY_INSTANTIATE_WEIGHTED_ONE(Sample, Weight)                                                      \
  template choice histogram_even_weighted_async<Sample, Weight, double>(                                   \
      std::span<const Sample>, std::span<const Weight>, std::span<double>, const even_bins&, workspace&,   \
      const histogram_options&, stream_t);                                                                 \
  template histogram_result histogram_even_weighted<Sample, Weight, double>(                               \
      std::span<const Sample>, std::span<const Weight>, std::span<double>, const even_bins&,               \
      const histogram_options&, stream_t);
#define TALLY_INSTANTIATE_WEIGHTED(Sample) \
  TALLY_INSTANTIATE_WEIGHTED_ONE(Sample, float) TALLY_INSTANTIATE_WEIGHTED_ONE(Sample, double)

/// What each kind of sample type is compiled for: integers every operation, bytes all but reduce
/// (a sum of bytes is a bincount's job), floating point all but bincount.
#define TALLY_INSTANTIATE_INTEGER(Sample) \
  TALLY_INSTANTIATE_HISTOGRAMS(Sample) TALLY_INSTANTIATE_WEIGHTED(Sample) TALLY_INSTANTIATE_BINCOUNT(Sample) \
  TALLY_INSTANTIATE_REDUCE(Sample)
#define TALLY_INSTANTIATE_BYTE(Sample) \
  TALLY_INSTANTIATE_HISTOGRAMS(Sample) TALLY_INSTANTIATE_WEIGHTED(Sample) TALLY_INSTANTIATE_BINCOUNT(Sample)
#define TALLY_INSTANTIATE_FLOATING(Sample) \
  TALLY_INSTANTIATE_HISTOGRAMS(Sample) TALLY_INSTANTIATE_WEIGHTED(Sample) TALLY_INSTANTIATE_REDUCE(Sample)
