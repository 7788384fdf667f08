"""tally: histograms, bincounts, reductions and counts with numpy's semantics, on the GPU for CuPy,
PyTorch and JAX arrays on a CUDA device (zero-copy, on the array's device and its framework's
current stream) and on the CPU for numpy arrays. See docs/python.md."""

from __future__ import annotations

import itertools
import math
import operator
import threading
from typing import NamedTuple

import numpy as np

from . import _tally
from ._arrays import _DLPACK_TYPES, Kind, _module_of, dtype_name, numpy_dtype, take

__all__ = [
    "Choice",
    "bincount",
    "built_with_cuda",
    "count_if",
    "find_first",
    "histogram",
    "histogram_bin_edges",
    "last_choice",
    "max",
    "min",
    "sum",
]

_builtin_max, _builtin_min = max, min  # this module defines its own min, max and sum


class Choice(NamedTuple):
    """The strategy the library ran and why (`strategy="automatic"` names the one it picked)."""

    strategy: str
    reason: str


_local = threading.local()


def last_choice() -> Choice | None:
    """The Choice of this thread's last call (None before the first)."""
    chose = getattr(_local, "choice", None)
    return None if chose is None else Choice(*chose)


def _chose(kind: Kind, result, return_choice: bool):
    """Records the library's choice of the call just made, as the extension gave it (a Choice is
    made only when asked for: a microsecond a call); `result` as the caller's kind of array, with
    the choice if asked."""
    _local.choice = _local.pending
    if kind.jax:
        result = tuple(kind.export(r) for r in result) if isinstance(result, tuple) else kind.export(result)
    if not return_choice:
        return result
    chose = Choice(*_local.choice)
    return (*result, chose) if isinstance(result, tuple) else (result, chose)


def built_with_cuda() -> bool:
    """Whether this build holds the GPU backend (CuPy and PyTorch CUDA arrays need it)."""
    return bool(_tally.built_with_cuda())


_COUNT_DTYPES = ("int64", "uint64", "uint32")
_SIGNED = frozenset(("int8", "int16", "int32", "int64"))  # integer samples, by name (numpy's checks cost microseconds)
_UNSIGNED = frozenset(("uint8", "uint16", "uint32", "uint64"))
_CHECKED_COUNT_DTYPES: dict = {}  # `dtype` as given -> (numpy dtype, its name): numpy's names cost microseconds


def _count_dtype(dtype) -> tuple[np.dtype, str]:
    """The counts' dtype for the `dtype` argument, and its name."""
    try:
        found = _CHECKED_COUNT_DTYPES.get(dtype)
    except TypeError:  # unhashable: numpy names the error below
        found = None
    if found is None:
        checked = np.dtype("int64" if dtype is None else dtype)
        if checked.name not in _COUNT_DTYPES:
            raise TypeError(f"dtype: counts are {', '.join(_COUNT_DTYPES)}, not {checked}")
        found = (checked, checked.name)
        try:
            _remember(_CHECKED_COUNT_DTYPES, dtype, found)
        except TypeError:
            pass
    return found


# What the library's reductions return: integers of up to 32 bits widen to 64 (as numpy sums them),
# float16 and bfloat16 to float32 (the library sums them in float32); the rest stay.
_ACCUMULATORS = {"int8": "int64", "int16": "int64", "int32": "int64", "uint16": "uint64", "uint32": "uint64",
                 "float16": "float32", "bfloat16": "float32"}


def _accumulator(name: str) -> np.dtype:
    return np.dtype(_ACCUMULATORS.get(name, name))


def _reduce_into(flat, kind: Kind, op: str, deterministic: bool, strategy: str, stream: int, streamed=False):
    name = _dtype_name(flat)
    accumulator = _accumulator(name)
    out = kind.empty((), accumulator) if kind.on_gpu else kind.empty(1, accumulator)  # 0-d: the call's result as is
    _local.pending = _tally.reduce(kind.view(flat, name), op, kind.view(out, dtype_name(accumulator)),
                                   deterministic, strategy, stream, streamed)
    return out


_BACKENDS = (None, "cpu", "gpu")


def _streamed(kind: Kind, backend) -> bool:
    """Whether numpy samples are counted on the GPU: backend="gpu" streams them from host memory
    through pinned staging buffers (the library's tally::gpu::from_host); None counts where the
    array lives. Device arrays are never copied to the host."""
    if backend not in _BACKENDS:
        raise ValueError(f"backend: 'cpu', 'gpu' or None (where the array lives), not {backend!r}")
    if kind.on_gpu:
        if backend == "cpu":
            raise ValueError("backend: 'cpu', but the array is on a CUDA device; tally copies no samples to the host "
                             "(pass a numpy array, or leave backend=None)")
        return False
    if backend != "gpu":
        return False
    if not _tally.built_with_cuda() or _tally.device_count() == 0:
        raise ValueError("backend: 'gpu', but " + ("this build of tally has no GPU backend" if not _tally.built_with_cuda()
                                                   else "no CUDA device is visible"))
    return True


def _dtype_name(flat) -> str:
    return dtype_name(numpy_dtype(flat))


def _sample_dtype(name: str):
    """The numpy dtype of samples named `name`; for bfloat16, which numpy has not got, float32, which
    holds each of its values exactly."""
    return np.dtype("float32" if name == "bfloat16" else name)


def _extremes(flat, kind: Kind, stream: int):
    """The least and greatest sample, as numpy scalars of the samples' dtype (float32 for bfloat16;
    NaN if any is NaN)."""
    dtype = _sample_dtype(_dtype_name(flat))
    if not kind.on_gpu and _dtype_name(flat) != "bfloat16":
        # numpy's own min and max (vector instructions, one core) beat the library's CPU reduction:
        # 0.8 against 1.8 ms each over 10^7 int32 samples on 2 cores, 1.0 against 2.4 over float32.
        return flat.min(), flat.max()
    if dtype == np.uint8:  # no uint8 reduction: the byte values present, from a 256-bin count
        counts = kind.empty(256, np.int64)
        _tally.histogram_even(kind.view(flat, "uint8"), kind.view(counts, "int64"), 256, 0.0, 256.0, False, False, "automatic",
                              stream, False)
        present = np.flatnonzero(kind.to_numpy(counts))
        return np.uint8(present[0]), np.uint8(present[-1])
    if kind.on_gpu:
        low, high = _device_values(flat, kind, ("min", "max"), stream)
        return dtype.type(low), dtype.type(high)
    low = _reduce_into(flat, kind, "min", False, "automatic", stream)
    high = _reduce_into(flat, kind, "max", False, "automatic", stream)
    return dtype.type(kind.scalar(low)), dtype.type(kind.scalar(high))


def _device_values(flat, kind: Kind, ops: tuple, stream: int) -> tuple:
    """The reductions `ops` ("sum", "min", "max") of device samples `flat`, on the host as Python
    numbers: enqueued together and read with one wait by the extension (a device array read
    through its framework cost a wait and more each)."""
    return _tally.reduce_values(kind.view(flat, _dtype_name(flat)), list(ops), stream)


# bincount of signed samples on a device up to this many bytes reads their minimum with their
# maximum (one wait) rather than waiting for the count's left-out samples (a second wait): the
# extra pass over the samples (at 3 TB/s, 1.4 us for 4 MiB) costs less than a wait (about 8 us on
# an H100, docs/python.md) up to about 24 MiB.
_BINCOUNT_MINIMUM_READ_BYTES = 16 << 20


_FLOAT32_EDGES = ("float16", "bfloat16", "float32")  # samples the library compares with float32 edges


def _library_even_edges(lower: float, upper: float, num_bins: int, name: str, float32_edges: bool = False) -> np.ndarray:
    """The edges the library's even bins count with (its own rule, computed in float64, or in float32
    where `float32_edges`, in the precision samples of the dtype named `name` compare in: float32 for
    float32, and for float16 and bfloat16 with the edges rounded to the samples' dtype first; else
    float64)."""
    edges = np.empty(num_bins + 1, np.float32 if name in _FLOAT32_EDGES else np.float64)
    _tally.even_edges(name, num_bins, lower, upper, float32_edges, edges)
    return edges


def _float32_rule_fits(lower: float, upper: float, num_bins: int) -> bool:
    """Whether the library computes even edges in float32 over [lower, upper]: both float32 values,
    their difference finite in float32, at most 2^24 bins."""
    low, high = np.float32(lower), np.float32(upper)
    with np.errstate(over="ignore"):
        return (float(low) == lower and float(high) == upper and low < high and num_bins <= 1 << 24
                and bool(np.isfinite(high - low)))


_PLANS: dict = {}  # (dtype, bins, range) -> (numpy's edges, even bins or None): numpy's work, once
_DEVICE_EDGES: dict = {}  # (device, plan key) -> those edges on the device
_EDGE_ROW_NAMES = itertools.count()  # a name for each device copy's batches of rows
_CACHE_LIMIT = 256


def _remember(cache: dict, key, value):
    if len(cache) >= _CACHE_LIMIT:
        cache.pop(next(iter(cache), None), None)  # another thread may have taken the same oldest key
    cache[key] = value
    return value


def _bfloat16_plan(num_bins: int, range, proxy_values=None):
    """The edges of `num_bins` bins of bfloat16 samples, which numpy cannot give: the library's even
    rule rounded to bfloat16, as numpy rounds float16 edges over a range of Python numbers, over
    `range` or the data's extremes alike (float32 values); numpy's errors where numpy would raise
    one for float16 (edges that collide: too many bins)."""
    proxy = np.array([] if proxy_values is None else proxy_values, np.float64)
    np.histogram_bin_edges(proxy, num_bins, range)  # numpy's checks of the range
    lower, upper = (range if range is not None else proxy_values if proxy_values is not None else (0, 1))
    lower, upper = float(lower), float(upper)
    if lower == upper:
        lower, upper = lower - 0.5, upper + 0.5
    edges = _library_even_edges(lower, upper, num_bins, "bfloat16")
    if np.any(edges[:-1] >= edges[1:]):
        raise ValueError(f"Too many bins for data range. Cannot create {num_bins} finite-sized bins.")
    return edges, (num_bins, lower, upper, False)


def _plan(name: str, num_bins: int, range, proxy_values=None):
    """numpy's edges for `num_bins` bins over `range` (or over the data's extremes `proxy_values`),
    computed by numpy itself, and the even bins (n, lower, upper, edges in float32) whose library
    rule reproduces them exactly, or None where only the edges do. numpy computes the edges in the
    type it promotes the range and the samples to: float64 for a range of Python numbers, float32
    for float32 data over its own extremes; the library has both rules."""
    if name == "bfloat16":
        return _bfloat16_plan(num_bins, range, proxy_values)
    dtype = np.dtype(name)
    if range is not None:
        lower, upper = range
        proxy = np.empty(0, dtype)
    elif proxy_values is None:  # no samples: numpy's (0, 1)
        lower, upper = 0, 1
        proxy = np.empty(0, dtype)
    else:
        lower, upper = proxy_values
        proxy = np.array(proxy_values, dtype)
    edges = np.histogram_bin_edges(proxy, num_bins, range)  # numpy's checks and arithmetic
    if lower == upper:
        lower, upper = lower - 0.5, upper + 0.5
    lower, upper = float(lower), float(upper)
    # Equal values are enough: samples compare with either set of edges exactly, so alike.
    if np.array_equal(_library_even_edges(lower, upper, num_bins, name), edges):
        return edges, (num_bins, lower, upper, False)
    if (edges.dtype == np.float32 and _float32_rule_fits(lower, upper, num_bins)
            and np.array_equal(_library_even_edges(lower, upper, num_bins, name, True), edges)):
        return edges, (num_bins, lower, upper, True)
    return edges, None


def _bins_of(flat, kind: Kind, name: str, bins, range, stream: int):
    """numpy's bin edges for `bins` and `range` over samples of the dtype named `name`, the even
    bins that reproduce them (or None), and a key naming them for the caches (None for edges given
    as an array)."""
    if type(bins) is int:  # the common case, without numpy's checks of a sequence
        return _even_plan(flat, kind, name, bins, range, stream)
    if isinstance(bins, str):
        raise NotImplementedError(f"bins: the estimator '{bins}' is not supported; give a number or edges")
    if np.ndim(bins) == 1:
        edges = np.asarray(bins.get() if hasattr(bins, "get") else bins.cpu() if hasattr(bins, "cpu") else bins)
        if edges.size < 2:
            raise ValueError("bins: at least two edges")
        if np.any(edges[:-1] > edges[1:]):
            raise ValueError("bins: `bins` must increase monotonically, when an array")
        return edges, None, None
    if np.ndim(bins) != 0:
        raise ValueError("bins: `bins` must be 1d, when an array")
    try:
        num_bins = operator.index(bins)
    except TypeError as e:
        raise TypeError("bins: `bins` must be an integer, a string, or an array") from e
    return _even_plan(flat, kind, name, num_bins, range, stream)


def _even_plan(flat, kind: Kind, name: str, num_bins: int, range, stream: int):
    """_bins_of for `num_bins` bins: numpy's edges over `range` or the data's extremes, planned once
    per (dtype, bins, range) and kept."""
    if num_bins < 1:
        raise ValueError("bins: `bins` must be positive, when an integer")
    if range is None and flat.shape[0] > 0:
        extremes = tuple(_extremes(flat, kind, stream))
        key = (name, num_bins, None, extremes)
    else:
        extremes = None
        # The range's types are part of the key: numpy computes the edges in the type it promotes
        # them to with the samples (float32 for Python floats or float32 scalars with float32 data,
        # float64 for numpy float64 or int64 scalars).
        key = (name, num_bins, None if range is None else tuple([(type(r), float(r)) for r in range]), None)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _remember(_PLANS, key, _plan(name, num_bins, range, extremes))
    return plan[0], plan[1], key


_ROW_BATCHES: dict = {}  # (device, stream, what, size, dtype name) -> the batch's rows not handed out yet
_ROW_BATCH_BYTES = 1 << 18  # a batch's device memory, at most
_ROW_BATCH_ROWS = 32
_ROW_ALIGNMENT = 256  # bytes: each row starts where a fresh allocation would (JAX requires it)
_ROW_BATCHES_KEPT = 64  # so at most 16 MiB of device memory waits in batches
_ITEM_BYTES = {"bfloat16": 2}


def _fresh_row(kind: Kind, size: int, name: str, stream: int, what, fill_from=None):
    """A fresh 1-d device array of `size` elements of the dtype named `name`, for a call's result
    on `stream`. Small ones are rows of a batch made for up to 32 calls alike (`what` names the
    likeness): an allocation a call cost microseconds, as much as the count's own launch. Rows are
    distinct arrays (writing one changes no other), each aligned as an allocation is; a batch's
    memory goes when its last row does. `fill_from`, a device address, gives every row's contents,
    copied on `stream` when the batch is made; else the rows hold nothing yet (the library writes
    every count it is given)."""
    batch_key = (kind.device, stream, what, size, name)
    try:
        return _ROW_BATCHES[batch_key].pop()  # one step: threads never get the same row
    except (KeyError, IndexError):  # no batch yet, or all its rows handed out
        pass
    if len(_ROW_BATCHES) >= _ROW_BATCHES_KEPT:
        _ROW_BATCHES.pop(next(iter(_ROW_BATCHES), None), None)
    rows = _row_batch(kind, size, name, stream, fill_from)
    row = rows.pop()
    _ROW_BATCHES[batch_key] = rows
    return row


def _row_batch(kind: Kind, size: int, name: str, stream: int, fill_from):
    """The rows of a new batch (_fresh_row), as a list."""
    item = _ITEM_BYTES.get(name) or np.dtype(name).itemsize
    row_bytes = size * item
    stride = -(-_builtin_max(row_bytes, 1) // _ROW_ALIGNMENT) * _ROW_ALIGNMENT
    count = _builtin_max(1, _builtin_min(_ROW_BATCH_ROWS, _ROW_BATCH_BYTES // stride))
    batch = kind.empty(count * stride // item, name)
    if fill_from is not None:
        _tally.fill_rows(kind.address(batch), fill_from, row_bytes, stride, count, stream)
    table = batch.reshape(count, stride // item)[:, :size]
    return list(table.unbind(0)) if kind.name == "torch" else [table[i] for i in range(count)]


def _edges_like(kind: Kind, edges: np.ndarray, key, stream: int):
    """`edges` as a fresh array like the samples: on a device, where `key` names the plan, copied
    on `stream` from a device array kept per plan (no copy from the host a call). bfloat16 samples'
    planned edges (float32 on the host) come back as bfloat16, as float16 samples' come back as
    float16."""
    if not kind.on_gpu:
        return edges.copy()
    if key is None:
        return kind.from_numpy(edges)
    cache_key = (kind.device, key)
    cached = _DEVICE_EDGES.get(cache_key)
    if cached is None:
        on_device = kind.from_numpy(edges)
        name = key[0] if key[0] == "bfloat16" else edges.dtype.name
        if name == "bfloat16":
            on_device = kind.astype(on_device, "bfloat16")
            kind.synchronize()  # converted on the framework's stream, which may not be `stream`
        # Rows of these edges are batched under a short name of their own (the plan's key, nested
        # tuples, costs its hash a call).
        cached = _remember(_DEVICE_EDGES, cache_key,
                           (on_device, name, kind.address(on_device), ("edges", next(_EDGE_ROW_NAMES))))
    _, name, address, rows_name = cached
    return _fresh_row(kind, edges.size, name, stream, rows_name, address)


_LAST_EDGES = ("inclusive", "exclusive")

_PLANNED_CALLS: dict = {}  # a planned call's arguments (_planned_device_histogram) -> its plan, or None
_UNPLANNED = object()


def _device_histogram_plan(a, bins: int, range, last_edge: str, dtype):
    """What histogram() works out for a 1-d contiguous PyTorch or CuPy CUDA array `a` besides its
    address and size, through its own steps (their checks and errors too): the Kind, numpy's edges,
    the even bins that reproduce them, the plan's key, the counts' dtype name, whether the last bin
    is closed, and the samples' DLPack type; None where the bins are range bins (the general path
    counts them)."""
    flat, kind = take(a, "a")
    if last_edge not in _LAST_EDGES:
        raise ValueError(f"last_edge: 'inclusive' or 'exclusive', not {last_edge!r}")
    name = _dtype_name(flat)
    edges, even, key = _bins_of(flat, kind, name, bins, range, 0)  # a range is given: no reduction, no stream
    if even is None:
        return None
    _, count_name = _count_dtype(dtype)
    return kind, edges, even, key, count_name, last_edge == "inclusive", *_DLPACK_TYPES[name]


def _planned_device_histogram(a, bins: int, range: tuple, last_edge, strategy, dtype, stream, return_choice):
    """histogram() of a 1-d contiguous PyTorch or CuPy CUDA array over `bins` even bins and a given
    range, no weights: the call's plan (its array kind, dtype, device, bins, range and options) worked
    out once and kept, so that a call costs its arrays and its launch (the general path's steps took
    about 3 us of a 2^10-sample call's 20 on an H200, docs/python.md "Small calls"); None for any
    other call."""
    module = _module_of(a)
    if module == "torch":
        if not a.is_cuda or a.dim() != 1 or not a.is_contiguous():
            return None
        device = a.get_device()
    elif module == "cupy":
        if a.ndim != 1 or not a.flags.c_contiguous:
            return None
        device = a.device.id
    else:
        return None
    lower, upper = range
    try:
        call = (module, a.dtype, device, bins, type(lower), lower, type(upper), upper, last_edge, dtype)
        plan = _PLANNED_CALLS.get(call, _UNPLANNED)
    except TypeError:  # an unhashable bound or dtype: the general path
        return None
    if plan is _UNPLANNED:
        plan = _remember(_PLANNED_CALLS, call, _device_histogram_plan(a, bins, range, last_edge, dtype))
    if plan is None:
        return None
    kind, edges, even, key, count_name, inclusive, code, item_bits = plan
    s = kind.stream(stream)
    result_edges = _edges_like(kind, edges, key, s)
    counts = _fresh_row(kind, bins, count_name, s, "counts")
    samples = (a.data_ptr(), a.numel(), code, item_bits, device) if module == "torch" else \
        (a.data.ptr, a.size, code, item_bits, device)
    _local.pending = _tally.histogram_even(samples, kind.view(counts, count_name), *even, inclusive, strategy, s,
                                           False)
    return _chose(kind, (counts, result_edges), return_choice)


def histogram_bin_edges(a, bins=10, range=None, weights=None, *, stream=None):
    """numpy.histogram_bin_edges: the edges histogram() counts with, as an array like `a`."""
    flat, kind = take(a, "a")
    s = kind.stream(stream)
    edges, _, key = _bins_of(flat, kind, _dtype_name(flat), bins, range, s)
    return kind.export(_edges_like(kind, edges, key, s))


def histogram(a, bins=10, range=None, weights=None, density=False, *, last_edge="inclusive", strategy="automatic",
              deterministic=False, dtype=None, stream=None, backend=None, return_choice=False):
    """numpy.histogram(a, bins, range, weights, density) -> (counts, edges), counted exactly as numpy
    counts (its edges, its comparisons) by tally's library. Arrays like `a` (numpy, or CuPy, PyTorch
    or JAX on a CUDA device). Keyword-only: `last_edge` "inclusive" (numpy's closed last bin) or
    "exclusive" (every bin half-open); `strategy` (the library's names); `deterministic` (weighted
    sums with the same bits on every backend and launch); `dtype` of the counts (int64, uint64,
    uint32); `stream` (CUDA; default: the framework's current stream); `backend` "gpu" counts numpy
    samples on the GPU, streamed from host memory (None: where the array lives); `return_choice`
    adds the library's Choice."""
    if weights is None and not density and backend is None and type(bins) is int and type(range) is tuple \
            and len(range) == 2:
        planned = _planned_device_histogram(a, bins, range, last_edge, strategy, dtype, stream, return_choice)
        if planned is not None:
            return planned
    flat, kind = take(a, "a")
    streamed = _streamed(kind, backend)
    if last_edge not in _LAST_EDGES:
        raise ValueError(f"last_edge: 'inclusive' or 'exclusive', not {last_edge!r}")
    inclusive = last_edge == "inclusive"
    s = kind.stream(stream)
    name = _dtype_name(flat)
    edges, even, key = _bins_of(flat, kind, name, bins, range, s)
    num_bins = edges.size - 1
    # The edges' copy first: the count, enqueued last, is then all the GPU has left when the host is done.
    result_edges = _edges_like(kind, edges, key, s)
    samples = kind.view(flat, name)
    if weights is None:
        count_dtype, count_name = _count_dtype(dtype)
        counts = _fresh_row(kind, num_bins, count_name, s, "counts") if kind.on_gpu else kind.empty(num_bins, count_dtype)
        if even is not None:
            _local.pending = _tally.histogram_even(samples, kind.view(counts, count_name), *even, inclusive, strategy,
                                                   s, streamed)
        else:
            _local.pending = _tally.histogram_range(samples, kind.view(counts, count_name),
                                                    np.ascontiguousarray(edges, np.float64), inclusive, strategy, s,
                                                    streamed)
    else:
        w, weight_kind = take(weights, "weights")
        if weight_kind.device != kind.device or w.shape[0] != flat.shape[0]:
            raise ValueError("weights: an array like `a`, of the same size and on the same device")
        if even is None:
            raise NotImplementedError(
                "weights: weighted histograms take even bins whose edges the library reproduces; these edges "
                "(given as an array, or numpy's over a range the library's float64 and float32 rules miss) need "
                "range bins")
        sums = kind.empty(num_bins, np.float64)
        _local.pending = _tally.histogram_even_weighted(samples, kind.view(w, _dtype_name(w)), kind.view(sums, "float64"),
                                                        *even, inclusive, strategy, deterministic, s, streamed, False)
        # numpy sums in the weights' dtype: float32 weights give float32 sums (here rounded once)
        counts = sums if np.dtype(_dtype_name(w)) == np.float64 else kind.astype(sums, np.float32)
    if density:
        widths = kind.from_numpy(np.diff(edges).astype(np.float64))
        total = counts.sum()
        counts = counts / widths / total
    return _chose(kind, (counts, result_edges), return_choice)


def bincount(x, weights=None, minlength=0, *, strategy="automatic", deterministic=False, dtype=None, stream=None,
             backend=None, return_choice=False):
    """numpy.bincount(x, weights, minlength): counts of each value 0..max(x) (at least `minlength`
    of them) of non-negative integers, as an array like `x`; float64 sums with `weights`; `backend`
    as for histogram()."""
    flat, kind = take(x, "x")
    streamed = _streamed(kind, backend)
    name = _dtype_name(flat)
    if name not in _SIGNED and name not in _UNSIGNED:
        raise TypeError("x: bincount takes integer arrays")
    minlength = operator.index(minlength)
    if minlength < 0:
        raise ValueError("minlength: must be non-negative")
    s = kind.stream(stream)
    if weights is not None:
        w, weight_kind = take(weights, "weights")
        if weight_kind.device != kind.device or w.shape[0] != flat.shape[0]:
            raise ValueError("weights: an array like `x`, of the same size and on the same device")
    if weights is not None:
        def weigh(sums, length, report_left_out):
            return _tally.histogram_even_weighted(kind.view(flat, name), kind.view(w, _dtype_name(w)),
                                                  kind.view(sums, "float64"), length, 0.0, float(length), False,
                                                  False, strategy, deterministic, s, streamed, report_left_out)
    if not streamed and minlength > 0 and flat.shape[0] > 0:
        # Every sample in [0, minlength) makes numpy's length minlength: count (or sum) into that many
        # bins and read back what was left out (one pass, one wait); anything left out, or a negative
        # sample (which the CPU backend's bincount refuses), the general way below, which names it as
        # numpy does.
        if weights is None:
            count_dtype, count_name = _count_dtype(dtype)
            out = _fresh_row(kind, minlength, count_name, s, "counts") if kind.on_gpu else kind.empty(minlength,
                                                                                                   count_dtype)
            try:
                *chose, left_out = _tally.bincount(kind.view(flat, name), kind.view(out, count_name), strategy, False,
                                                   s, False, True)
            except ValueError:
                left_out = 1
        else:
            out = kind.empty(minlength, np.float64)
            *chose, left_out = weigh(out, minlength, True)
        if left_out == 0:
            _local.pending = tuple(chose)
            return _chose(kind, out, return_choice)
    dtype_of_x = np.dtype(name)
    # Unweighted on the GPU: the maximum alone sizes the counts, and the count's left-out samples,
    # waited for, are exactly the negative ones (one pass fewer than a minimum); small signed
    # device arrays read their minimum with the maximum instead (one wait fewer).
    by_maximum = weights is None and (kind.on_gpu or streamed) and dtype_of_x != np.uint8 and flat.shape[0] > 0
    refuse_negative = by_maximum and name in _SIGNED
    if flat.shape[0] == 0:
        length = minlength
    elif by_maximum:
        if not kind.on_gpu:
            high = dtype_of_x.type(kind.scalar(_reduce_into(flat, kind, "max", False, "automatic", s)))
        elif refuse_negative and flat.shape[0] * dtype_of_x.itemsize <= _BINCOUNT_MINIMUM_READ_BYTES:
            low, high = _device_values(flat, kind, ("min", "max"), s)
            if low < 0:
                raise ValueError(f"x: bincount takes non-negative integers (found {low})")
            refuse_negative = False
        else:
            (high,) = _device_values(flat, kind, ("max",), s)
        if high < 0:
            raise ValueError(f"x: bincount takes non-negative integers (found {high})")
        length = _builtin_max(int(high) + 1, minlength)
    else:
        low, high = _extremes(flat, kind, s)
        if low < 0:
            raise ValueError(f"x: bincount takes non-negative integers (found {low})")
        length = _builtin_max(int(high) + 1, minlength)
    if weights is None:
        count_dtype, count_name = _count_dtype(dtype)
        counts = _fresh_row(kind, length, count_name, s, "counts") if kind.on_gpu else kind.empty(length, count_dtype)
        _local.pending = (_tally.bincount(kind.view(flat, name), kind.view(counts, count_name), strategy,
                                          refuse_negative, s, streamed, False) if length > 0
                          else ("automatic", "no bins"))
        return _chose(kind, counts, return_choice)
    sums = kind.empty(length, np.float64)
    if length > 0:
        _local.pending = weigh(sums, length, False)
    else:
        _local.pending = ("automatic", "no bins")
    return _chose(kind, sums, return_choice)


def _reduction(a, op: str, deterministic: bool, strategy: str, stream, backend, return_choice: bool):
    flat, kind = take(a, "a")
    streamed = _streamed(kind, backend)
    name = _dtype_name(flat)
    if name == "uint8":
        raise TypeError("a: sum, min and max take int8, int16, uint16, int32, uint32, int64, float16, bfloat16, "
                        "float32 and float64")
    if flat.shape[0] == 0 and op != "sum":
        raise ValueError(f"a: zero-size array to reduction operation {op}imum which has no identity")
    out = _reduce_into(flat, kind, op, deterministic, strategy, kind.stream(stream), streamed)
    if op != "sum":
        out = kind.astype(out, name)  # exact: the least or greatest sample, widened
    result = out if kind.on_gpu else out[0]
    return _chose(kind, result, return_choice)


def sum(a, *, deterministic=False, strategy="automatic", stream=None, backend=None, return_choice=False):  # noqa: A001
    """The sum of `a` (integers of up to 32 bits in 64 bits, as numpy; float16 and bfloat16 in
    float32, and returned as float32, where numpy sums float16 in float16); `deterministic` float
    sums have bits that depend only on the values (not the launch, the strategy or the backend). A
    numpy scalar for numpy input, else a 0-d array on the device. `backend` as for histogram()
    (deterministic sums are not offered over streamed numpy samples)."""
    return _reduction(a, "sum", deterministic, strategy, stream, backend, return_choice)


def min(a, *, strategy="automatic", stream=None, backend=None, return_choice=False):  # noqa: A001
    """The least sample of `a` (NaN if any is NaN, as numpy)."""
    return _reduction(a, "min", False, strategy, stream, backend, return_choice)


def max(a, *, strategy="automatic", stream=None, backend=None, return_choice=False):  # noqa: A001
    """The greatest sample of `a` (NaN if any is NaN, as numpy)."""
    return _reduction(a, "max", False, strategy, stream, backend, return_choice)


_OPS = ("<", "<=", ">", ">=", "==", "!=")

# (significant bits, exponent of the least normal value, largest finite value) of the float samples
_FLOAT_FORMATS = {
    "float16": (11, -14, 65504.0),
    "bfloat16": (8, -126, float.fromhex("0x1.fep127")),
    "float32": (24, -126, float.fromhex("0x1.fffffep127")),
}


def _round_to_format(x: float, name: str, rounding) -> float:
    """`x` rounded to a value of the float dtype named `name`: `rounding` is round (to nearest,
    ties to even, beyond the largest value infinity: a cast's rule), math.floor or math.ceil. Exact
    arithmetic on doubles: scaling by a power of two and rounding an integer-sized value."""
    if x == 0 or not math.isfinite(x):
        return x
    digits, min_exponent, largest = _FLOAT_FORMATS[name]
    unit = _builtin_max(math.frexp(x)[1], min_exponent + 1) - digits  # the spacing of values near x
    rounded = math.ldexp(rounding(math.ldexp(x, -unit)), unit)
    if rounded > largest:
        return largest if rounding is math.floor else math.inf
    if rounded < -largest:
        return -largest if rounding is math.ceil else -math.inf
    return rounded


def _float_predicate(op: str, value, name: str):
    """`x op value` for floats x of the dtype named `name`, as numpy compares them, as `x op v` with v
    a value of that dtype: a Python number is rounded to the dtype, as numpy and PyTorch convert it;
    a numpy scalar of a wider type (compared in that type) is rounded toward the side that keeps the
    same samples, or, for == and != with a value no sample can equal, is NaN (never equal)."""
    x = float(value)
    if name == "float64" or math.isnan(x):
        return op, x
    weak = isinstance(value, (int, float)) and not isinstance(value, np.generic)  # np.float64 is a float
    if weak or (name != "bfloat16" and np.result_type(np.dtype(name), value) == np.dtype(name)):
        return op, _round_to_format(x, name, round)
    if op in ("==", "!="):
        return op, x if _round_to_format(x, name, round) == x else math.nan
    return op, _round_to_format(x, name, math.ceil if op in ("<", ">=") else math.floor)


def _integer_predicate(op: str, value, info):
    """`x op value` for integers x of the dtype `info` describes, as `x op' v` with v an integer of
    that dtype: the same samples satisfy both, whatever `value` (a fraction, beyond the dtype)."""
    value = float(value) if not isinstance(value, (int, np.integer)) else int(value)
    if isinstance(value, float):
        if np.isnan(value):
            return (">=", info.min) if op == "!=" else ("<", info.min)  # only != holds for NaN
        if op in ("==", "!=") and not value.is_integer():
            return (">=", info.min) if op == "!=" else ("<", info.min)
        value = math.ceil(value) if op in ("<", ">=") else math.floor(value) if op in ("<=", ">") else int(value)
    if value < info.min or value > info.max:
        holds = {"<": value > info.max, "<=": value > info.max, ">": value < info.min, ">=": value < info.min,
                 "==": False, "!=": True}[op]
        return (">=", info.min) if holds else ("<", info.min)
    return op, value


def _predicate(find: bool, a, op: str, value, strategy: str, stream, backend, return_choice: bool):
    flat, kind = take(a, "a")
    streamed = _streamed(kind, backend)
    if op not in _OPS:
        raise ValueError(f"op: one of {' '.join(_OPS)}, not {op!r}")
    name = _dtype_name(flat)
    integer_value = 0
    if np.issubdtype(_sample_dtype(name), np.integer):
        op, integer_value = _integer_predicate(op, value, np.iinfo(name))
        value = float(integer_value)
    else:
        op, value = _float_predicate(op, value, name)
    out = kind.empty(1, np.int64)
    _local.pending = _tally.predicate(find, kind.view(flat, name), op, float(value), integer_value,
                                      kind.view(out, "int64"), strategy, kind.stream(stream), streamed)
    result = out.reshape(()) if kind.on_gpu else out[0]
    return _chose(kind, result, return_choice)


def count_if(a, op, value, *, strategy="automatic", stream=None, backend=None, return_choice=False):
    """How many samples x of `a` satisfy `x op value` (op: < <= > >= == !=; NaN compares false
    except !=); `backend` as for histogram()."""
    return _predicate(False, a, op, value, strategy, stream, backend, return_choice)


def find_first(a, op, value, *, strategy="automatic", stream=None, backend=None, return_choice=False):
    """The index of the first sample x of `a` with `x op value`, or a.size when none has; `backend`
    as for histogram() (streamed, reading stops soon after the first match)."""
    return _predicate(True, a, op, value, strategy, stream, backend, return_choice)
