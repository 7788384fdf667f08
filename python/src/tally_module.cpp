// The Python extension `tally._tally`: thin nanobind wrappers over the C++ API. Each takes arrays
// (numpy on the host, any DLPack array on a CUDA device) and runs the CPU or the GPU backend where
// the samples live; the Python layer (tally/__init__.py) owns numpy's semantics, checks and output
// allocation, so these functions only type-dispatch, run and report the library's choice.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <utility>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "tally/cpu.hpp"
#include "tally/error.hpp"
#include "tally/gpu.hpp"
#include "tally/gpu/streaming.hpp"

#if defined(TALLY_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace nb = nanobind;

namespace {

using array = nb::ndarray<nb::ro, nb::c_contig>;  // what the library reads
using output = nb::ndarray<nb::c_contig>;         // what it writes
using choice_tuple = nb::tuple;           // (strategy used, why), Python strings
constexpr std::size_t max_reductions = 8;  // reduce_values' ops at most

/// The library's choice as a Python tuple of two strings, made once per choice: its reason is a
/// static string, so its address and length name it (two new strings a call cost a small call a
/// fraction of a microsecond). The text is compared too, so a reason that were not static would
/// still come back right. Needs the GIL.
choice_tuple to_tuple(const tally::choice& chose) {
  struct made {
    std::string reason;
    nb::tuple tuple;
  };
  using key = std::tuple<tally::strategy, const char*, std::size_t>;
  // Never destroyed: the interpreter may be gone when static objects are. (So one interpreter a
  // process: the tuples would not survive Py_Finalize and a second Py_Initialize.)
  static auto* const known = new std::map<key, made>();
  auto& entry = (*known)[key{chose.used, chose.reason.data(), chose.reason.size()}];
  if (!entry.tuple.is_valid() || entry.reason != chose.reason) {
    const std::string_view used = to_string(chose.used);
    entry.reason = std::string(chose.reason);
    entry.tuple = nb::make_tuple(nb::str(used.data(), used.size()), nb::str(chose.reason.data(), chose.reason.size()));
  }
  return entry.tuple;
}

bool on_gpu(const array& a) { return a.device_type() == nb::device::cuda::value; }

/// The strategy named `name`, or a ValueError naming `strategy`.
tally::strategy strategy_named(const std::string& name) {
  const auto parsed = tally::parse_strategy(name);
  if (!parsed) throw nb::value_error(("strategy: unknown strategy '" + name + "'").c_str());
  return *parsed;
}

/// The library's histogram options for the Python arguments (ValueError naming `strategy`).
tally::histogram_options histogram_options_for(const std::string& strategy, bool inclusive,
                                               bool deterministic = false) {
  tally::histogram_options options;
  options.algorithm = strategy_named(strategy);
  options.last_edge = inclusive ? tally::upper_edge::inclusive : tally::upper_edge::exclusive;
  options.deterministic = deterministic;
  return options;
}

/// DLPack's 16-bit floats, which nanobind names by no C++ type (tally's float16 and bfloat16 are its own).
const nb::dlpack::dtype float16_dtype{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
const nb::dlpack::dtype bfloat16_dtype{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
constexpr const char* sample_dtypes =
    "int8, uint8, int16, uint16, int32, uint32, int64, float16, bfloat16, float32 and float64";

/// Calls `f` with a null pointer of the C++ type of the sample dtype `t`, or raises TypeError
/// naming `argument`.
template <class F>
decltype(auto) with_sample_type(const nb::dlpack::dtype& t, const char* argument, F&& f) {
  if (t == nb::dtype<std::int8_t>()) return f(static_cast<std::int8_t*>(nullptr));
  if (t == nb::dtype<std::uint8_t>()) return f(static_cast<std::uint8_t*>(nullptr));
  if (t == nb::dtype<std::int16_t>()) return f(static_cast<std::int16_t*>(nullptr));
  if (t == nb::dtype<std::uint16_t>()) return f(static_cast<std::uint16_t*>(nullptr));
  if (t == nb::dtype<std::int32_t>()) return f(static_cast<std::int32_t*>(nullptr));
  if (t == nb::dtype<std::uint32_t>()) return f(static_cast<std::uint32_t*>(nullptr));
  if (t == nb::dtype<std::int64_t>()) return f(static_cast<std::int64_t*>(nullptr));
  if (t == float16_dtype) return f(static_cast<tally::float16*>(nullptr));
  if (t == bfloat16_dtype) return f(static_cast<tally::bfloat16*>(nullptr));
  if (t == nb::dtype<float>()) return f(static_cast<float*>(nullptr));
  if (t == nb::dtype<double>()) return f(static_cast<double*>(nullptr));
  throw nb::type_error((std::string(argument) + ": unsupported dtype (tally takes " + sample_dtypes + ")").c_str());
}

template <class F>
decltype(auto) with_sample_type(const array& a, const char* argument, F&& f) {
  return with_sample_type(a.dtype(), argument, std::forward<F>(f));
}

/// The DLPack dtype of the sample dtype named as numpy names it ("bfloat16" too), or a TypeError.
nb::dlpack::dtype sample_dtype_named(const std::string& name) {
  static const std::map<std::string, nb::dlpack::dtype> names{
      {"int8", nb::dtype<std::int8_t>()},     {"uint8", nb::dtype<std::uint8_t>()},
      {"int16", nb::dtype<std::int16_t>()},   {"uint16", nb::dtype<std::uint16_t>()},
      {"int32", nb::dtype<std::int32_t>()},   {"uint32", nb::dtype<std::uint32_t>()},
      {"int64", nb::dtype<std::int64_t>()},   {"float16", float16_dtype},
      {"bfloat16", bfloat16_dtype},           {"float32", nb::dtype<float>()},
      {"float64", nb::dtype<double>()}};
  const auto found = names.find(name);
  if (found == names.end()) {
    throw nb::type_error(("dtype: unsupported sample dtype '" + name + "' (tally takes " + sample_dtypes + ")").c_str());
  }
  return found->second;
}

/// The DLPack dtype (code, bits) names, or a TypeError naming `argument`.
nb::dlpack::dtype dlpack_dtype(int code, int bits, const char* argument) {
  if (code < 0 || code > 4 || (bits != 8 && bits != 16 && bits != 32 && bits != 64)) {
    throw nb::type_error((std::string(argument) + ": not a dtype tally takes").c_str());
  }
  return {static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(bits), 1};
}

/// An argument as an array of `Array`'s kind: a numpy array (or anything nanobind takes: DLPack,
/// the buffer protocol) as itself, or a device array the Python layer hands over as (address,
/// size, DLPack type code, bits, device), which it keeps alive for the call. The Python layer has
/// checked that the array is flat and contiguous: DLPack's hand-over through PyTorch costs
/// microseconds a call, the address a fraction of one (docs/python.md, "Small calls").
template <class Array>
Array array_from(nb::handle argument_value, const char* argument) {
  if (!nb::isinstance<nb::tuple>(argument_value)) {
    Array a;
    if (!nb::try_cast(argument_value, a)) {
      throw nb::type_error((std::string(argument) + ": expected a contiguous array").c_str());
    }
    return a;
  }
  const auto view = nb::borrow<nb::tuple>(argument_value);
  if (view.size() != 5) throw nb::type_error((std::string(argument) + ": expected (address, size, code, bits, device)").c_str());
  const auto address = nb::cast<std::uintptr_t>(view[0]);
  const std::size_t shape[1] = {nb::cast<std::size_t>(view[1])};
  const nb::dlpack::dtype dtype = dlpack_dtype(nb::cast<int>(view[2]), nb::cast<int>(view[3]), argument);
  return Array(reinterpret_cast<void*>(address), 1, shape, nb::handle(), nullptr, dtype, nb::device::cuda::value,
               nb::cast<int>(view[4]));
}

template <class T>
std::span<const T> const_span_of(const array& a) {
  return {static_cast<const T*>(a.data()), a.size()};
}
template <class T>
std::span<T> span_of(const output& a) {
  return {static_cast<T*>(a.data()), a.size()};
}

/// Counts are uint32 or uint64 (int64 arrays pass as uint64: counts never reach 2^63).
template <class F>
decltype(auto) with_counter_type(const output& counts, F&& f) {
  if (counts.dtype() == nb::dtype<std::uint32_t>()) return f(static_cast<std::uint32_t*>(nullptr));
  if (counts.dtype() == nb::dtype<std::uint64_t>() || counts.dtype() == nb::dtype<std::int64_t>()) {
    return f(static_cast<std::uint64_t*>(nullptr));
  }
  throw nb::type_error("dtype: counts are int64, uint64 or uint32");
}

tally::gpu::stream_t as_stream(std::uintptr_t stream) { return reinterpret_cast<tally::gpu::stream_t>(stream); }

#if defined(TALLY_WITH_CUDA)
/// One workspace per (device, stream), kept for the life of the process: a call allocates nothing
/// once its workspace has grown to the size it needs.
tally::gpu::workspace& workspace_for(int device, std::uintptr_t stream) {
  static std::mutex guard;
  static std::map<std::pair<int, std::uintptr_t>, std::unique_ptr<tally::gpu::workspace>> workspaces;
  const std::lock_guard lock(guard);
  auto& slot = workspaces[{device, stream}];
  if (!slot) slot = std::make_unique<tally::gpu::workspace>();
  return *slot;
}

/// Makes `a`'s device current for the call and restores the caller's on return.
class device_scope {
 public:
  explicit device_scope(const array& a) {
    cudaGetDevice(&previous_);
    changed_ = a.device_id() != previous_;
    if (changed_) cudaSetDevice(a.device_id());
  }
  ~device_scope() {
    if (changed_) cudaSetDevice(previous_);
  }
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

std::uint64_t* pinned_results();

/// Copies the 64-bit scalar the last call left in `ws` into `out` (device memory) on `stream`.
void copy_scalar(tally::gpu::workspace& ws, const output& out, std::uintptr_t stream) {
  tally::gpu::detail::copy_words_async(ws.scalar(), out.data(), out.nbytes(), as_stream(stream));
}
#endif

[[noreturn]] void no_gpu_backend() {
  throw nb::value_error("samples: a CUDA array, but this build of tally has no GPU backend");
}

/// A host array counted on the GPU (backend="gpu" for numpy arrays): `run(device_out)` streams the
/// samples through the thread's staging ring into a device array of `out`'s size, without the GIL,
/// and the result is copied into `out`.
template <class T, class Run>
choice_tuple streamed_into(const output& out, Run&& run) {
  tally::choice chose;
  {
    tally::gpu::device_buffer<T> device(out.size());
    const nb::gil_scoped_release unlocked;
    chose = run(device.span());
    device.download(span_of<T>(out));
  }
  return to_tuple(chose);
}

/// The same for a scalar result (a reduction, a count, an index): `run()` returns (value, choice).
template <class Run>
choice_tuple streamed_scalar(const output& out, Run&& run) {
  tally::choice chose;
  {
    const nb::gil_scoped_release unlocked;
    const auto result = run();
    std::memcpy(out.data(), &result.first, sizeof result.first);
    chose = result.second;
  }
  return to_tuple(chose);
}

template <class T>
tally::gpu::host_samples<T> host_samples_of(const array& a) {
  return tally::gpu::host_samples<T>(const_span_of<T>(a));
}

/// Runs `gpu(ws, stream)` on the samples' device with the (device, stream) workspace.
template <class Gpu>
decltype(auto) on_device(const array& samples, std::uintptr_t stream, Gpu&& gpu) {
#if defined(TALLY_WITH_CUDA)
  const device_scope scope(samples);
  return gpu(workspace_for(samples.device_id(), stream), stream);
#else
  (void)samples;
  no_gpu_backend();
  static tally::gpu::workspace never_used;  // unreachable: gives this function gpu's return type
  return gpu(never_used, stream);
#endif
}

/// Even bins over [lower, upper), their edges computed in float32 where `float32_edges` (numpy's
/// edges for float32 data over its own range), else in float64.
tally::even_bins even_bins_of(std::int64_t num_bins, double lower, double upper, bool float32_edges) {
  return {num_bins, lower, upper, float32_edges ? tally::edge_arithmetic::float32 : tally::edge_arithmetic::float64};
}

choice_tuple histogram_even(nb::handle samples_in, nb::handle counts_in, std::int64_t num_bins, double lower,
                            double upper, bool float32_edges, bool inclusive, const std::string& strategy,
                            std::uintptr_t stream, bool streamed) {
  const array samples = array_from<array>(samples_in, "a");
  const output counts = array_from<output>(counts_in, "counts");
  const tally::even_bins bins = even_bins_of(num_bins, lower, upper, float32_edges);
  const tally::histogram_options options = histogram_options_for(strategy, inclusive);
  return with_sample_type(samples, "a", [&](auto* sample_type) {
    using Sample = std::remove_pointer_t<decltype(sample_type)>;
    return with_counter_type(counts, [&](auto* counter_type) {
      using Counter = std::remove_pointer_t<decltype(counter_type)>;
      if (!on_gpu(samples) && streamed) {
        return streamed_into<Counter>(counts, [&](std::span<Counter> device) {
          return tally::gpu::from_host::histogram_even(host_samples_of<Sample>(samples), device, bins, options).chose;
        });
      }
      if (!on_gpu(samples)) {
        return to_tuple(tally::cpu::histogram_even(const_span_of<Sample>(samples), span_of<Counter>(counts), bins,
                                                   options)
                            .chose);
      }
      return on_device(samples, stream, [&](tally::gpu::workspace& ws, std::uintptr_t s) {
        return to_tuple(tally::gpu::histogram_even_async(const_span_of<Sample>(samples), span_of<Counter>(counts),
                                                         bins, ws, options, as_stream(s)));
      });
    });
  });
}

choice_tuple histogram_range(nb::handle samples_in, nb::handle counts_in, nb::ndarray<const double, nb::ndim<1>,
                             nb::c_contig, nb::device::cpu> edges, bool inclusive, const std::string& strategy,
                             std::uintptr_t stream, bool streamed) {
  const array samples = array_from<array>(samples_in, "a");
  const output counts = array_from<output>(counts_in, "counts");
  const tally::histogram_options options = histogram_options_for(strategy, inclusive);
  const std::span<const double> edge_span(edges.data(), edges.size());
  return with_sample_type(samples, "a", [&](auto* sample_type) {
    using Sample = std::remove_pointer_t<decltype(sample_type)>;
    return with_counter_type(counts, [&](auto* counter_type) {
      using Counter = std::remove_pointer_t<decltype(counter_type)>;
      if (!on_gpu(samples) && streamed) {
        return streamed_into<Counter>(counts, [&](std::span<Counter> device) {
          return tally::gpu::from_host::histogram_range(host_samples_of<Sample>(samples), device, edge_span, options)
              .chose;
        });
      }
      if (!on_gpu(samples)) {
        return to_tuple(tally::cpu::histogram_range(const_span_of<Sample>(samples), span_of<Counter>(counts),
                                                    edge_span, options)
                            .chose);
      }
      return on_device(samples, stream, [&](tally::gpu::workspace& ws, std::uintptr_t s) {
        return to_tuple(tally::gpu::histogram_range_async(const_span_of<Sample>(samples), span_of<Counter>(counts),
                                                          edge_span, ws, options, as_stream(s)));
      });
    });
  });
}

/// (strategy, reason, left out): a choice and the samples its call left out.
nb::tuple with_left_out(const tally::choice& chose, std::uint64_t left_out) {
  const choice_tuple strategy_and_reason = to_tuple(chose);
  return nb::make_tuple(strategy_and_reason[0], strategy_and_reason[1], left_out);
}

/// Weighted even bins: float32 or float64 weights, float64 sums. With `report_left_out` (not over
/// streamed samples) it returns (strategy, reason, left out), the GPU's read back: bincount's one
/// pass for a `minlength` that holds every sample.
choice_tuple histogram_even_weighted(nb::handle samples_in, nb::handle weights_in, nb::handle sums_in,
                                     std::int64_t num_bins, double lower, double upper, bool float32_edges,
                                     bool inclusive, const std::string& strategy, bool deterministic,
                                     std::uintptr_t stream, bool streamed, bool report_left_out) {
  const array samples = array_from<array>(samples_in, "a");
  const array weights = array_from<array>(weights_in, "weights");
  const output sums = array_from<output>(sums_in, "sums");
  const tally::even_bins bins = even_bins_of(num_bins, lower, upper, float32_edges);
  const tally::histogram_options options = histogram_options_for(strategy, inclusive, deterministic);
  return with_sample_type(samples, "a", [&](auto* sample_type) {
    using Sample = std::remove_pointer_t<decltype(sample_type)>;
    const auto run = [&](auto* weight_type) {
      using Weight = std::remove_pointer_t<decltype(weight_type)>;
      if (!on_gpu(samples) && streamed) {
        return streamed_into<double>(sums, [&](std::span<double> device) {
          return tally::gpu::from_host::histogram_even(host_samples_of<Sample>(samples), host_samples_of<Weight>(weights),
                                                       device, bins, options)
              .chose;
        });
      }
      if (!on_gpu(samples)) {
        const tally::histogram_result r = tally::cpu::histogram_even(
            const_span_of<Sample>(samples), const_span_of<Weight>(weights), span_of<double>(sums), bins, options);
        return report_left_out ? with_left_out(r.chose, r.left_out) : to_tuple(r.chose);
      }
      return on_device(samples, stream, [&](tally::gpu::workspace& ws, std::uintptr_t s) -> choice_tuple {
        const tally::choice chose =
            tally::gpu::histogram_even_async(const_span_of<Sample>(samples), const_span_of<Weight>(weights),
                                             span_of<double>(sums), bins, ws, options, as_stream(s));
        if (!deterministic && !report_left_out) return to_tuple(chose);
        // The left-out count (word 0) and, deterministic, the flag of a weight beyond the
        // fixed-point range (word 1): waiting for the flag is the price of the error numpy users
        // expect (the CPU backend raises too).
#if defined(TALLY_WITH_CUDA)
        std::uint64_t* words = pinned_results();
        tally::gpu::detail::copy_words_async(ws.scalar(), words, 2 * sizeof(std::uint64_t), as_stream(s));
        const cudaError_t e = cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(s));
        if (e != cudaSuccess) throw nb::value_error(cudaGetErrorString(e));
#else
        const std::uint64_t words[2] = {0, 0};
#endif
        if (deterministic && words[1] != 0) {
          throw nb::value_error("weights: deterministic sums take weights with |w| < 2^31");
        }
        return report_left_out ? with_left_out(chose, words[0]) : to_tuple(chose);
      });
    };
    if (weights.dtype() == nb::dtype<float>()) return run(static_cast<float*>(nullptr));
    if (weights.dtype() == nb::dtype<double>()) return run(static_cast<double*>(nullptr));
    throw nb::type_error("weights: float32 or float64");
  });
}

/// bincount into `counts`. With `refuse_negative` (signed samples on the GPU, whose maximum the
/// Python layer sized the counts by) it waits for the left-out count, which then counts exactly the
/// negative samples, and raises if there are any: one pass where a minimum would take another.
/// With `report_left_out` (not over streamed samples) it returns (strategy, reason, left out), the
/// GPU's read back: where that is 0, the counts are numpy's whole answer for a `minlength` of
/// counts.size(), one pass (and on the GPU one wait) where finding the length first takes a pass
/// and a wait more. The CPU backend raises for a negative sample, as its bincount does.
choice_tuple bincount(nb::handle samples_in, nb::handle counts_in, const std::string& strategy, bool refuse_negative,
                      std::uintptr_t stream, bool streamed, bool report_left_out) {
  const array samples = array_from<array>(samples_in, "x");
  const output counts = array_from<output>(counts_in, "counts");
  const tally::histogram_options options = histogram_options_for(strategy, false);
  return with_sample_type(samples, "x", [&](auto* sample_type) -> choice_tuple {
    using Sample = std::remove_pointer_t<decltype(sample_type)>;
    if constexpr (!std::is_integral_v<Sample>) {
      throw nb::type_error("x: bincount takes integer arrays");
    } else {
      return with_counter_type(counts, [&](auto* counter_type) {
        using Counter = std::remove_pointer_t<decltype(counter_type)>;
        if (!on_gpu(samples) && streamed) {
          // Over host samples the negative ones are left out and counted: the same one-pass check.
          return streamed_into<Counter>(counts, [&](std::span<Counter> device) {
            const tally::histogram_result r =
                tally::gpu::from_host::bincount(host_samples_of<Sample>(samples), device, options);
            if (refuse_negative && r.left_out != 0) {
              throw tally::error(tally::errc::invalid_argument, "x",
                                 "x: bincount takes non-negative integers (found " + std::to_string(r.left_out) +
                                     " negative)");
            }
            return r.chose;
          });
        }
        if (!on_gpu(samples)) {
          const tally::histogram_result r =
              tally::cpu::bincount(const_span_of<Sample>(samples), span_of<Counter>(counts), options);
          return report_left_out ? with_left_out(r.chose, r.left_out) : to_tuple(r.chose);
        }
        return on_device(samples, stream, [&](tally::gpu::workspace& ws, std::uintptr_t s) {
          const tally::choice chose = tally::gpu::bincount_async(const_span_of<Sample>(samples),
                                                                 span_of<Counter>(counts), ws, options, as_stream(s));
          if (!refuse_negative && !report_left_out) return to_tuple(chose);
          const std::uint64_t left_out = ws.read_scalar(as_stream(s));
          if (refuse_negative && left_out != 0) {
            throw nb::value_error(
                ("x: bincount takes non-negative integers (found " + std::to_string(left_out) + " negative)").c_str());
          }
          return report_left_out ? with_left_out(chose, left_out) : to_tuple(chose);
        });
      });
    }
  });
}

/// The edges even bins count with (the library's rule, in the precision samples of the dtype named
/// `sample_dtype` compare in: float32 for float32, float16 and bfloat16, whose edges are rounded
/// to their own precision first; computed in float32 where `float32_edges`) into `edges` (num_bins
/// + 1 values of that precision): what the Python layer compares with numpy's edges before it
/// counts with even bins. By name, as no host array of bfloat16 exists to pass.
void even_edges(const std::string& sample_dtype, std::int64_t num_bins, double lower, double upper,
                bool float32_edges, const output& edges) {
  with_sample_type(sample_dtype_named(sample_dtype), "dtype", [&](auto* sample_type) {
    using Sample = std::remove_pointer_t<decltype(sample_type)>;
    using Edge = typename tally::even_bin_mapper<Sample>::compare_type;
    if (edges.dtype() != nb::dtype<Edge>() || static_cast<std::int64_t>(edges.size()) != num_bins + 1) {
      throw nb::value_error("edges: num_bins + 1 values of the samples' comparison type");
    }
    const tally::even_bins bins = even_bins_of(num_bins, lower, upper, float32_edges);
    if (float32_edges) tally::detail::check_even_bins("even_edges", bins);  // float32 bounds, at most 2^24 bins
    const tally::even_bin_mapper<Sample> map(bins, tally::upper_edge::exclusive);
    const std::span<Edge> out = span_of<Edge>(edges);
    for (std::int64_t i = 0; i <= num_bins; ++i) out[static_cast<std::size_t>(i)] = map.edge(i);
  });
}

/// Fills `rows` rows, `row_stride` bytes apart from device address `destination` on, with the
/// `row_bytes` at device address `source`, on `stream` (enqueued, not waited for): one copy, then
/// copies of the rows made so far, log2(rows) + 1 copies in all. The Python layer hands out fresh
/// copies of a call's edges as rows of such a batch: one copy a call cost as much as the count's
/// launch (docs/python.md, "Small calls").
void fill_rows(std::uintptr_t destination, std::uintptr_t source, std::size_t row_bytes, std::size_t row_stride,
               std::size_t rows, std::uintptr_t stream) {
  if (row_bytes > row_stride) throw nb::value_error("row_bytes: more than a row's stride");
#if defined(TALLY_WITH_CUDA)
  auto* out = reinterpret_cast<char*>(destination);
  const auto copy = [&](void* to, const void* from, std::size_t bytes) {
    const cudaError_t e = cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, reinterpret_cast<cudaStream_t>(stream));
    if (e != cudaSuccess) throw nb::value_error(cudaGetErrorString(e));
  };
  if (rows == 0) return;
  copy(out, reinterpret_cast<const void*>(source), row_bytes);
  for (std::size_t made = 1; made < rows; made *= 2) {
    // Whole strides of the batch itself: the last row copied ends within the batch.
    const std::size_t copied = std::min(made, rows - made);
    copy(out + made * row_stride, out, (copied - 1) * row_stride + row_bytes);
  }
#else
  (void)destination, (void)source, (void)rows, (void)stream;
  no_gpu_backend();
#endif
}

tally::reduce_op reduce_op_named(const std::string& op) {
  if (op == "sum") return tally::reduce_op::sum;
  if (op == "min") return tally::reduce_op::min;
  if (op == "max") return tally::reduce_op::max;
  throw nb::value_error(("op: unknown reduction '" + op + "'").c_str());
}

/// sum, min or max into `out` (one element of the accumulator's type: int64 for signed and uint64
/// for unsigned integers of up to 32 bits, float32 for float16 and bfloat16, else the samples'
/// type), in the samples' memory.
choice_tuple reduce(nb::handle samples_in, const std::string& op, nb::handle out_in, bool deterministic,
                    const std::string& strategy, std::uintptr_t stream, bool streamed) {
  const array samples = array_from<array>(samples_in, "a");
  const output out = array_from<output>(out_in, "out");
  tally::reduce_options options{strategy_named(strategy)};
  options.deterministic = deterministic;
  const tally::reduce_op which = reduce_op_named(op);
  return with_sample_type(samples, "a", [&](auto* sample_type) -> choice_tuple {
    using T = std::remove_pointer_t<decltype(sample_type)>;
    if constexpr (!tally::is_reduce_sample_v<T>) {
      throw nb::type_error(
          "a: sum, min and max take int8, int16, uint16, int32, uint32, int64, float16, bfloat16, float32 and float64");
    } else {
      using A = tally::accumulator_t<T>;
      if (out.nbytes() != sizeof(A)) throw nb::value_error("out: one value of the samples' accumulator type");
      if (!on_gpu(samples) && streamed) {
        return streamed_scalar(out, [&] {
          const tally::reduce_result<T> r = tally::gpu::from_host::reduce(host_samples_of<T>(samples), which, options);
          return std::pair{r.value, r.chose};
        });
      }
      if (!on_gpu(samples)) {
        const tally::reduce_result<T> r = tally::cpu::reduce(const_span_of<T>(samples), which, options);
        std::memcpy(out.data(), &r.value, sizeof r.value);
        return to_tuple(r.chose);
      }
      return on_device(samples, stream, [&](tally::gpu::workspace& ws, std::uintptr_t s) {
        // Stored straight into `out` (device memory, as the samples), so no copy follows.
        return to_tuple(tally::gpu::detail::naming_failures("tally::gpu::reduce", [&] {
          return tally::gpu::detail::reduce_into_async(const_span_of<T>(samples), which, static_cast<A*>(out.data()), ws,
                                                       options, as_stream(s));
        }));
      });
    }
  });
}

/// Pinned host words, mapped, into which reduce_values and the deterministic weights' check read
/// their results: one block a host thread.
std::uint64_t* pinned_results() {
#if defined(TALLY_WITH_CUDA)
  struct block {
    std::uint64_t* words = nullptr;
    block() {
      void* p = nullptr;
      // Mapped: results come in by a kernel's copy (copy_words_async), not a copy engine's.
      if (cudaHostAlloc(&p, sizeof(std::uint64_t) * max_reductions, cudaHostAllocMapped | cudaHostAllocPortable) !=
          cudaSuccess) {
        (void)cudaGetLastError();
        throw nb::value_error("cudaHostAlloc of the reductions' result words failed");
      }
      words = static_cast<std::uint64_t*>(p);
    }
    ~block() { (void)cudaFreeHost(words); }
  };
  thread_local block results;
  return results.words;
#else
  no_gpu_backend();
#endif
}

/// The reductions `ops` ("sum", "min", "max", at most max_reductions) of device samples, as
/// Python ints or floats: enqueued one after another on `stream`, each result copied into pinned
/// memory behind its reduction, then one wait; "min" then "max" together in one pass
/// (extremes_async). What the Python layer needs on the host (the data's extremes, bincount's
/// length) at the cost of one wait, where reading each through a device array and its framework
/// cost a wait and more each.
nb::tuple reduce_values(nb::handle samples_in, const std::vector<std::string>& ops, std::uintptr_t stream) {
  const array samples = array_from<array>(samples_in, "a");
  if (!on_gpu(samples)) throw nb::value_error("a: reduce_values takes device arrays");
  if (ops.empty() || ops.size() > max_reductions) throw nb::value_error("ops: one to eight reductions");
  return with_sample_type(samples, "a", [&](auto* sample_type) -> nb::tuple {
    using T = std::remove_pointer_t<decltype(sample_type)>;
    if constexpr (!tally::is_reduce_sample_v<T>) {
      throw nb::type_error("a: sum, min and max do not take uint8");
    } else {
      using A = tally::accumulator_t<T>;
      std::uint64_t* words = pinned_results();
      on_device(samples, stream, [&](tally::gpu::workspace& ws, std::uintptr_t s) {
#if defined(TALLY_WITH_CUDA)
        // Value i lands sizeof(A) * i bytes in, as a pair of extremes lies in the workspace.
        const auto copy_values = [&](std::size_t first, std::size_t count) {
          tally::gpu::detail::copy_words_async(ws.scalar(), reinterpret_cast<char*>(words) + first * sizeof(A),
                                               count * sizeof(A), as_stream(s));
        };
        for (std::size_t i = 0; i < ops.size(); ++i) {
          if (ops[i] == "min" && i + 1 < ops.size() && ops[i + 1] == "max") {
            tally::gpu::detail::extremes_async(const_span_of<T>(samples), ws, as_stream(s));
            copy_values(i, 2);
            ++i;
            continue;
          }
          (void)tally::gpu::reduce_async(const_span_of<T>(samples), reduce_op_named(ops[i]), ws, {}, as_stream(s));
          copy_values(i, 1);
        }
        const nb::gil_scoped_release unlocked;
        const cudaError_t e = cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(s));
        if (e != cudaSuccess) throw nb::value_error(cudaGetErrorString(e));
#endif
        return 0;
      });
      nb::list values;
      for (std::size_t i = 0; i < ops.size(); ++i) {
        A value;
        std::memcpy(&value, reinterpret_cast<const char*>(words) + i * sizeof(A), sizeof(A));
        if constexpr (std::is_integral_v<A>) {
          values.append(nb::int_(value));
        } else {
          values.append(nb::float_(static_cast<double>(value)));
        }
      }
      return nb::tuple(values);
    }
  });
}

tally::comparison comparison_named(const std::string& op) {
  static const std::map<std::string, tally::comparison> names{
      {"<", tally::comparison::less},    {"<=", tally::comparison::less_equal}, {">", tally::comparison::greater},
      {">=", tally::comparison::greater_equal}, {"==", tally::comparison::equal},   {"!=", tally::comparison::not_equal}};
  const auto found = names.find(op);
  if (found == names.end()) throw nb::value_error(("op: one of < <= > >= == !=, not '" + op + "'").c_str());
  return found->second;
}

/// count_if (`find` false: the count, uint64) or find_first_if (the first index, int64) into `out`.
/// The value is `integer_value` for integer samples (exact), `float_value` for float ones (a value
/// of the samples' type: the Python layer rounds it as numpy compares).
choice_tuple predicate(bool find, nb::handle samples_in, const std::string& op, double float_value,
                       std::int64_t integer_value, nb::handle out_in, const std::string& strategy,
                       std::uintptr_t stream, bool streamed) {
  const array samples = array_from<array>(samples_in, "a");
  const output out = array_from<output>(out_in, "out");
  const tally::reduce_options options{strategy_named(strategy)};
  const tally::comparison which = comparison_named(op);
  return with_sample_type(samples, "a", [&](auto* sample_type) {
    using T = std::remove_pointer_t<decltype(sample_type)>;
    T value;
    if constexpr (std::is_integral_v<T>) {
      value = static_cast<T>(integer_value);
    } else if constexpr (tally::is_half_float_v<T>) {
      value = T::nearest(float_value);
    } else {
      value = static_cast<T>(float_value);
    }
    const tally::compare_to<T> compare{which, value};
    if (!on_gpu(samples) && streamed) {
      return streamed_scalar(out, [&] {
        if (find) {
          const tally::find_result r = tally::gpu::from_host::find_first_if(host_samples_of<T>(samples), compare, options);
          return std::pair{static_cast<std::uint64_t>(r.index), r.chose};
        }
        const tally::count_result r = tally::gpu::from_host::count_if(host_samples_of<T>(samples), compare, options);
        return std::pair{r.count, r.chose};
      });
    }
    if (!on_gpu(samples)) {
      std::uint64_t result = 0;
      tally::choice chose;
      if (find) {
        const tally::find_result r = tally::cpu::find_first_if(const_span_of<T>(samples), compare, options);
        result = static_cast<std::uint64_t>(r.index);
        chose = r.chose;
      } else {
        const tally::count_result r = tally::cpu::count_if(const_span_of<T>(samples), compare, options);
        result = r.count;
        chose = r.chose;
      }
      std::memcpy(out.data(), &result, sizeof result);
      return to_tuple(chose);
    }
    return on_device(samples, stream, [&](tally::gpu::workspace& ws, std::uintptr_t s) {
      const tally::choice chose =
          find ? tally::gpu::find_first_if_async(const_span_of<T>(samples), compare, ws, options, as_stream(s))
               : tally::gpu::count_if_async(const_span_of<T>(samples), compare, ws, options, as_stream(s));
#if defined(TALLY_WITH_CUDA)
      copy_scalar(ws, out, s);
#endif
      return to_tuple(chose);
    });
  });
}

}  // namespace

NB_MODULE(_tally, m) {
  m.doc() = "tally's C++ library: histograms, counts and reductions on CPUs and GPUs (use the tally package)";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const tally::error& e) {
      // The library's errors name the argument; a bad argument is a ValueError to Python users.
      if (e.code() == tally::errc::not_supported) {
        PyErr_SetString(PyExc_NotImplementedError, e.what());
      } else if (e.code() == tally::errc::cuda_error || e.code() == tally::errc::out_of_memory) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
      } else {
        PyErr_SetString(PyExc_ValueError, e.what());
      }
    }
  });
  m.def("built_with_cuda", &tally::gpu::built_with_cuda);
  m.def("device_count", &tally::gpu::device_count);
  m.def("histogram_even", &histogram_even);
  m.def("histogram_range", &histogram_range);
  m.def("histogram_even_weighted", &histogram_even_weighted);
  m.def("bincount", &bincount);
  m.def("even_edges", &even_edges);
  m.def("fill_rows", &fill_rows);
  m.def("reduce", &reduce);
  m.def("reduce_values", &reduce_values);
  m.def("predicate", &predicate);
}
