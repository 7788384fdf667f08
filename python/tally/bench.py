"""python -m tally.bench: tally's Python calls beside their peers' on the same GPU arrays.

Peers: PyTorch, CuPy and, where it is installed, cuda.compute (CUB's histogram_even, compiled at
run time).

Large inputs (2^28 samples by default) as a fraction of the read bandwidth, which torch.sum over
the same bytes (as float32) measures in the same run (GPU time a call, CUDA events around ten calls
enqueued back to back, median); small inputs as wall microseconds a call, from the call to its
result ready on the stream (median; the calls of a case take turns, a streak of calls each).
Every result is checked against numpy's on a host copy before it is timed. With --weighted,
weighted bincounts instead (int32 samples, float32 weights; bytes read count both): tally.bincount, plain and
deterministic, beside torch.bincount and cupy.bincount with weights, every result within a bound
of numpy's float64 sums. Writes a CSV with --csv."""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time

import numpy as np

import tally
from tally._arrays import _torch_current_stream


def _median_gpu_ms(torch, fn, runs: int, batch: int = 10) -> float:
    """GPU milliseconds a call: CUDA events around `batch` calls enqueued back to back (so the
    host's work a call hides behind the GPU's, as it does in a stream of calls), median of `runs`."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(runs):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(batch):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / batch)
    return statistics.median(times)


def _median_wall_us(torch, calls: dict, runs: int, streak: int = 25) -> dict:
    """Wall microseconds a call, from the call to its result ready on the stream, median of `runs`
    for each of `calls` (label -> function). The calls take turns in streaks of `streak` calls, so
    that every peer meets the same moments of the machine (its clocks and wake-ups drift by
    microseconds over seconds) while each runs as a loop calls it: in turns of one call each,
    every call, the peers' alike, took two to three times as long on an H200 (not profiled)."""
    stream = torch.cuda.current_stream()
    for fn in calls.values():
        for _ in range(5):
            fn()
    torch.cuda.synchronize()
    times = {label: [] for label in calls}
    for _ in range(-(-runs // streak)):
        for label, fn in calls.items():
            for _ in range(streak):
                begin = time.perf_counter()
                fn()
                stream.synchronize()
                times[label].append((time.perf_counter() - begin) * 1e6)
    return {label: statistics.median(t) for label, t in times.items()}


class _TorchStream:
    """PyTorch's current stream on device `index`, as the __cuda_stream__ protocol hands it to
    cuda.compute: through the raw query tally itself uses (torch.cuda.current_stream costs 3.6 us)."""

    def __init__(self, index: int):
        self._index = index

    def __cuda_stream__(self):
        return 0, int(_torch_current_stream()(self._index))


def _cuda_compute_call(torch, a, bins: int, range_):
    """cuda.compute's histogram_even (CUB's, compiled at run time) over `a` in `bins` even bins over
    `range_` (levels of the samples' dtype), as a user calling it repeatedly would run it: the
    algorithm object made and its temporary storage allocated once. None where cuda.compute is not
    installed; a function that raises where it cannot run here."""
    try:
        from cuda.compute import make_histogram_even
    except ImportError:
        return None
    try:
        dtype = np.float32 if a.dtype == torch.float32 else np.int32
        levels = np.array([bins + 1], np.int32)
        lower, upper = np.array([range_[0]], dtype), np.array([range_[1]], dtype)
        counts = torch.empty(bins, dtype=torch.int32, device=a.device)
        n = a.numel()
        histogram = make_histogram_even(d_samples=a, d_histogram=counts, h_num_output_levels=levels,
                                        h_lower_level=lower, h_upper_level=upper, num_samples=n)
        stream = _TorchStream(a.get_device())
        temp_bytes = histogram(temp_storage=None, d_samples=a, d_histogram=counts, h_num_output_levels=levels,
                               h_lower_level=lower, h_upper_level=upper, num_samples=n, stream=stream)
        temp = torch.empty(max(temp_bytes, 1), dtype=torch.uint8, device=a.device)
    except Exception as e:  # noqa: BLE001 - reported as the peer's row
        failure = e

        def refuse():
            raise failure
        return refuse

    def call():
        histogram(temp_storage=temp, d_samples=a, d_histogram=counts, h_num_output_levels=levels, h_lower_level=lower,
                  h_upper_level=upper, num_samples=n, stream=stream)
        return counts
    return call


def _cases(torch, cupy, n: int, seed: int):
    """(name, bins, the samples as torch and cupy arrays sharing memory, the host copy, calls)."""
    rng = np.random.default_rng(seed)
    ints = torch.from_numpy(rng.integers(0, 256, n, dtype=np.int32)).cuda()
    floats = torch.from_numpy((rng.random(n, dtype=np.float32) * 1000).astype(np.float32)).cuda()
    cases = []
    for name, a, bins, range_ in (("int32 uniform, 256 bins [0, 256)", ints, 256, (0, 256)),
                                  ("float32 uniform, 4096 bins [0, 1000)", floats, 4096, (0, 1000)),
                                  ("float32 uniform, 4096 bins, data's range", floats, 4096, None)):
        host = a.cpu().numpy()
        want = np.histogram(host, bins, range=range_)[0]
        c = cupy.from_dlpack(a) if cupy is not None else None
        calls = {"tally (torch)": lambda a=a, b=bins, r=range_: tally.histogram(a, b, range=r)[0],
                 "tally (cupy)": (lambda c=c, b=bins, r=range_: tally.histogram(c, b, range=r)[0]) if c is not None else None}
        if a.dtype == torch.int32 and range_ == (0, bins):
            calls["torch.bincount"] = lambda a=a, b=bins: torch.bincount(a, minlength=b)
            calls["tally.bincount (torch)"] = lambda a=a, b=bins: tally.bincount(a, minlength=b)
            if c is not None:
                calls["cupy.bincount"] = lambda c=c, b=bins: cupy.bincount(c, minlength=b)
        if a.dtype == torch.float32 and range_ is not None:
            calls["torch.histc"] = lambda a=a, b=bins, r=range_: torch.histc(a, b, r[0], r[1])
        if c is not None:
            calls["cupy.histogram"] = lambda c=c, b=bins, r=range_: cupy.histogram(c, b, range=r)[0]
        if range_ is not None:
            calls["cuda.compute.histogram_even"] = _cuda_compute_call(torch, a, bins, range_)
        cases.append((name, a, host, want, {k: v for k, v in calls.items() if v is not None}))
    return cases


def _weighted_cases(torch, cupy, n: int, seed: int, bins_list, dists):
    """(name, samples, weights, host copies, numpy's sums, calls) for weighted bincounts: int32 samples
    in [0, bins) spread (uniform), crowded (geometric: bin k with probability 2^-(k+1)) or all in one
    bin (single), float32 weights uniform in [0, 1)."""
    rng = np.random.default_rng(seed)
    weights = torch.from_numpy(rng.random(n, dtype=np.float32)).cuda()
    host_weights = weights.cpu().numpy()
    cases = []
    for dist in dists:
        for bins in bins_list:
            if dist == "uniform":
                host = rng.integers(0, bins, n, dtype=np.int32)
            elif dist == "geometric":
                host = np.minimum(rng.geometric(0.5, n) - 1, bins - 1).astype(np.int32)
            elif dist == "single":
                host = np.full(n, bins // 3, dtype=np.int32)
            else:
                raise ValueError(f"unknown distribution {dist!r}")
            x = torch.from_numpy(host).cuda()
            want = np.bincount(host, weights=host_weights.astype(np.float64), minlength=bins)
            c, cw = (cupy.from_dlpack(x), cupy.from_dlpack(weights)) if cupy is not None else (None, None)
            calls = {"tally.bincount (torch)": lambda x=x, b=bins: tally.bincount(x, weights, minlength=b),
                     "tally.bincount deterministic (torch)":
                         lambda x=x, b=bins: tally.bincount(x, weights, minlength=b, deterministic=True),
                     "torch.bincount": lambda x=x, b=bins: torch.bincount(x, weights, minlength=b)}
            if c is not None:
                calls["cupy.bincount"] = lambda c=c, b=bins: cupy.bincount(c, cw, minlength=b)
            cases.append((f"int32 {dist}, {bins} bins, float32 weights", x, weights, host, host_weights, want, calls))
    return cases


def _sums_close(got: np.ndarray, want: np.ndarray, host: np.ndarray, host_weights: np.ndarray) -> bool:
    """Within the float32 accumulation a peer may use: count * 2^-23 * sum|w| per bin (tally's own
    sums are far closer; its tests hold them to their stated bounds)."""
    if got.shape != want.shape:
        return False
    counts = np.bincount(host, minlength=len(want)).astype(np.float64)
    mass = np.bincount(host, weights=np.abs(host_weights.astype(np.float64)), minlength=len(want))
    return bool(np.all(np.abs(got.astype(np.float64) - want) <= counts * 2.0**-23 * mass + 1e-30))


def _main_weighted(args, torch, cupy) -> int:
    rows, misses = [], 0
    n = 1 << args.log2_size
    bins_list = [int(b) for b in args.bins.split(",")]
    for name, x, weights, host, host_weights, want, calls in _weighted_cases(
            torch, cupy, n, args.seed, bins_list, args.dists.split(",")):
        bytes_as_float = x.view(torch.float32)
        read_ms = (_median_gpu_ms(torch, lambda: bytes_as_float.sum(), args.runs) +
                   _median_gpu_ms(torch, lambda: weights.sum(), args.runs))
        for label, call in calls.items():
            try:
                result = call()
            except Exception as e:  # noqa: BLE001 - a peer that refuses the case is a row, not a crash
                rows.append(dict(case=name, samples=n, call=label, check=f"refused: {type(e).__name__}"))
                continue
            got = result.get() if hasattr(result, "get") else result.cpu().numpy()
            close = _sums_close(got, want, host, host_weights)
            if not close and label.startswith("tally"):
                misses += 1
            ms = _median_gpu_ms(torch, call, args.runs)
            row = dict(case=name, samples=n, call=label, check="within bound" if close else "off numpy's sums",
                       median_ms=round(ms, 4), read_fraction=round(read_ms / ms, 3))
            rows.append(row)
            print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    _write_csv(args.csv, rows)
    print(f"{len(rows)} rows, {misses} tally results off numpy's sums")
    return 1 if misses else 0


def _write_csv(path, rows):
    if path:
        fields = ["case", "samples", "call", "check", "median_ms", "read_fraction", "median_us"]
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fields)
            writer.writeheader()
            writer.writerows(rows)


def _counts(result) -> np.ndarray:
    return (result.get() if hasattr(result, "get") else result.cpu().numpy()).astype(np.int64)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tally.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--log2-size", type=int, default=28, help="large inputs: 2^N samples (default 28)")
    parser.add_argument("--small", default="10,16,20", help="small inputs: log2 sizes, microseconds a call")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=20261125)
    parser.add_argument("--csv", help="write the rows here")
    parser.add_argument("--weighted", action="store_true", help="weighted bincounts (large inputs only)")
    parser.add_argument("--bins", default="256,4096,65536", help="with --weighted: the bin counts")
    parser.add_argument("--dists", default="uniform,geometric,single", help="with --weighted: the distributions")
    args = parser.parse_args(argv)
    import torch

    try:
        import cupy
    except ImportError:
        cupy = None
    print(f"tally.bench | {torch.cuda.get_device_name()} | torch {torch.__version__}"
          f"{'' if cupy is None else ', cupy ' + cupy.__version__} | {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
    if args.weighted:
        return _main_weighted(args, torch, cupy)
    rows = []
    mismatches = 0
    sizes = [(args.log2_size, "large")] + [(int(s), "small") for s in args.small.split(",") if s]
    for log2, scale in sizes:
        n = 1 << log2
        for name, a, host, want, calls in _cases(torch, cupy, n, args.seed):
            # The yardstick: torch.sum over the same bytes read as float32 (its int32 sum is slower).
            bytes_as_float = a.view(torch.float32)
            read_ms = _median_gpu_ms(torch, lambda: bytes_as_float.sum(), args.runs) if scale == "large" else None
            checked = {}
            for label, call in calls.items():
                try:
                    got = _counts(call())
                except Exception as e:  # noqa: BLE001 - a peer that refuses the case is a row, not a crash
                    rows.append(dict(case=name, samples=n, call=label, check=f"refused: {type(e).__name__}"))
                    print(f"case={name}  samples={n}  call={label}  refused: {type(e).__name__}: {e}"[:400], flush=True)
                    continue
                exact = got.shape == want.shape and np.array_equal(got, want)
                if not exact and label.startswith("tally"):
                    mismatches += 1
                checked[label] = dict(case=name, samples=n, call=label, check="exact" if exact else "differs from numpy")
            if scale == "small":
                wall_us = _median_wall_us(torch, {label: calls[label] for label in checked}, args.runs * 10)
            for label, row in checked.items():
                if scale == "large":
                    ms = _median_gpu_ms(torch, calls[label], args.runs)
                    row.update(median_ms=round(ms, 4), read_fraction=round(read_ms / ms, 3))
                else:
                    row.update(median_us=round(wall_us[label], 1))
                rows.append(row)
                print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    _write_csv(args.csv, rows)
    print(f"{len(rows)} rows, {mismatches} tally results differing from numpy")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
