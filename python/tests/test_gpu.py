"""tally's Python package on CUDA arrays (CuPy and PyTorch): the same counts as numpy on a host copy,
results on the input's device, in its framework, on its stream. Skipped without a GPU backend, a
GPU or the framework."""

import operator
import re

import numpy as np
import pytest

import tally

if not tally.built_with_cuda():
    pytest.skip("this build of tally has no GPU backend", allow_module_level=True)

RNG = np.random.default_rng(20261125)


def frameworks():
    found = []
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            found.append("cupy")
    except Exception:  # noqa: BLE001 - not installed, or no device: that framework's tests skip
        pass
    try:
        import torch

        if torch.cuda.is_available():
            found.append("torch")
    except Exception:  # noqa: BLE001
        pass
    try:
        import jax

        jax.config.update("jax_enable_x64", True)  # float64 and int64 arrays stay 64-bit
        if found and any(d.platform == "gpu" for d in jax.devices()):
            found.append("jax")  # through PyTorch or CuPy, so only with one of them
    except Exception:  # noqa: BLE001
        pass
    return found


FRAMEWORKS = frameworks()
if not FRAMEWORKS:
    pytest.skip("no GPU, or neither CuPy nor PyTorch with CUDA", allow_module_level=True)


def to_device(framework, host):
    if framework == "jax":
        import jax

        return jax.device_put(host, jax.devices("gpu")[0])
    if framework == "cupy":
        import cupy

        return cupy.asarray(host)
    import torch

    return torch.from_numpy(np.ascontiguousarray(host)).cuda()


def to_host(framework, a):
    if framework == "jax":
        return np.asarray(a)
    return a.get() if framework == "cupy" else a.cpu().numpy()


def assert_like(framework, result, source):
    """`result` is an array of the input's framework, on its device."""
    if framework == "jax":
        import jax

        assert isinstance(result, jax.Array) and result.devices() == source.devices()
        return
    if framework == "cupy":
        import cupy

        assert isinstance(result, cupy.ndarray) and result.device == source.device
    else:
        import torch

        assert isinstance(result, torch.Tensor) and result.device == source.device


def host_samples(dtype, n=1 << 20):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return (RNG.random(n) * 1000 - 100).astype(dtype)
    high = 255 if dtype == np.uint8 else 100000
    return RNG.integers(0, high, n, endpoint=True).astype(dtype)


DTYPES = ["uint8", "int32", "int64", "float32", "float64"]  # torch has no uint32 arithmetic to compare with


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bins, range_", [(256, None), (4096, None), (10, (0, 1000)), (4096, (0, 1000)),
                                          (65536, None)])
def test_histogram_equals_numpy(framework, dtype, bins, range_):
    host = host_samples(dtype)
    a = to_device(framework, host)
    counts, edges = tally.histogram(a, bins, range=range_)
    want_counts, want_edges = np.histogram(host, bins, range=range_)
    assert_like(framework, counts, a)
    assert_like(framework, edges, a)
    np.testing.assert_array_equal(to_host(framework, edges), want_edges)
    np.testing.assert_array_equal(to_host(framework, counts), want_counts)


@pytest.mark.parametrize("framework", [f for f in FRAMEWORKS if f != "jax"])  # JAX arrays are immutable
@pytest.mark.parametrize("dtype, bins", [("int32", 256), ("float32", 4096), ("float16", 100)])
def test_each_call_returns_edges_of_its_own(framework, dtype, bins):
    # Calls hand out rows of batches of edge copies: more calls than a batch has rows, each
    # result overwritten at once, must still give numpy's edges every time and change no other.
    host = host_samples(dtype, 1 << 12)
    a = to_device(framework, host)
    want = np.histogram(host, bins, range=(0, 1000))[1]
    kept = []
    for _ in range(80):
        _, edges = tally.histogram(a, bins, range=(0, 1000))
        np.testing.assert_array_equal(to_host(framework, edges), want)
        edges[:] = -1
        kept.append(edges)
    assert all(bool((to_host(framework, e) == -1).all()) for e in kept)
    np.testing.assert_array_equal(to_host(framework, tally.histogram(a, bins, range=(0, 1000))[1]), want)


@pytest.mark.parametrize("framework", [f for f in FRAMEWORKS if f != "jax"])
def test_kept_plans_of_calls_keep_apart_what_numpy_does(framework):
    # A PyTorch or CuPy call with a range reuses the plan of an earlier call with the same dtype, device,
    # bins, range and options. Ranges equal as numbers but of other types promote differently in
    # numpy (float32 data: Python numbers and float32 scalars give float32 edges, float64 scalars
    # float64 ones), and the options change the counts: each must keep a plan of its own, the
    # second round (from the kept plans) as right as the first.
    host = host_samples("float32", 1 << 12)
    host[:4] = 0, 1000, np.nextafter(np.float32(1000), np.float32(0)), 1000.1
    a = to_device(framework, host)
    ranges = [(0, 1000), (0.0, 1000.0), (0, 1000.1), (np.float64(0), np.float64(1000.1)),
              (np.float32(0), np.float32(1000.1)), (-0.5, 999.5)]
    for _ in range(2):
        for range_ in ranges:
            counts, edges = tally.histogram(a, 4096, range=range_)
            want_counts, want_edges = np.histogram(host, 4096, range=range_)
            np.testing.assert_array_equal(to_host(framework, edges), want_edges)
            np.testing.assert_array_equal(to_host(framework, counts), want_counts)
        want = np.histogram(host, 4096, range=(0, 1000))[0]
        exclusive = to_host(framework, tally.histogram(a, 4096, range=(0, 1000), last_edge="exclusive")[0])
        np.testing.assert_array_equal(exclusive[:-1], want[:-1])
        assert exclusive[-1] == want[-1] - np.count_nonzero(host == 1000)
        narrow = tally.histogram(a, 4096, range=(0, 1000), dtype="uint32")[0]
        assert to_host(framework, narrow).dtype == np.uint32
        np.testing.assert_array_equal(to_host(framework, narrow), want)
        square = tally.histogram(a.reshape(64, 64), 4096, range=(0, 1000))[0]  # 2-d: the general path
        np.testing.assert_array_equal(to_host(framework, square), want)
        counts, _, chose = tally.histogram(a, 4096, range=(0, 1000), strategy="atomic", return_choice=True)
        assert chose.strategy == "atomic" and tally.last_choice() == chose
        np.testing.assert_array_equal(to_host(framework, counts), want)
    with pytest.raises(ValueError, match="last_edge"):
        tally.histogram(a, 4096, range=(0, 1000), last_edge="closed")
    with pytest.raises(ValueError, match="bins"):
        tally.histogram(a, 0, range=(0, 1000))
    with pytest.raises(ValueError, match="range"):
        tally.histogram(a, 10, range=(np.nan, 1000))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_range_bins_and_a_view_that_is_not_contiguous(framework):
    host = host_samples("float32")
    edges = np.geomspace(1, 1000, 200)
    a = to_device(framework, host)
    np.testing.assert_array_equal(to_host(framework, tally.histogram(a, edges)[0]), np.histogram(host, edges)[0])
    np.testing.assert_array_equal(to_host(framework, tally.histogram(a[::3], 100)[0]), np.histogram(host[::3], 100)[0])


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64"])
def test_bincount_equals_numpy(framework, dtype):
    host = host_samples(dtype, 1 << 18)
    host = host if dtype == "uint8" else host % 5000
    x = to_device(framework, host)
    counts = tally.bincount(x, minlength=10)
    assert_like(framework, counts, x)
    np.testing.assert_array_equal(to_host(framework, counts), np.bincount(host, minlength=10))
    for negative in ([3, -1], [-3, -1], [0] * 1000 + [-5] + [7] * 1000):
        with pytest.raises(ValueError, match="^x: bincount takes non-negative"):
            tally.bincount(to_device(framework, np.array(negative, np.int64)))


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("dtype", ["uint8", "int16", "int32", "uint32", "int64"])
def test_bincount_with_a_minlength_that_holds_every_sample_or_not(framework, dtype):
    # A minlength that holds every sample is numpy's length: one count, its left-out samples read
    # back. Any sample past it, or negative, sends the call the general way (the maximum first),
    # which must give numpy's longer counts or its error.
    host = (host_samples("int64", 1 << 16) % 200).astype(dtype)
    host[:2] = 0, 199
    x = to_device(framework, host)
    host_w = host_samples("float32", 1 << 16)
    w = to_device(framework, host_w)
    for minlength in (200, 201, 256, 5000, 199, 150, 1):
        counts, chose = tally.bincount(x, minlength=minlength, return_choice=True)
        assert_like(framework, counts, x)
        assert chose.strategy and tally.last_choice() == chose
        np.testing.assert_array_equal(to_host(framework, counts), np.bincount(host, minlength=minlength))
        # Weighted the same way: sums over minlength bins, read back, or the general way.
        want = np.bincount(host, weights=host_w.astype(np.float64), minlength=minlength)
        for deterministic in (False, True):
            sums, chose = tally.bincount(x, weights=w, minlength=minlength, deterministic=deterministic,
                                         return_choice=True)
            assert chose.strategy and tally.last_choice() == chose
            np.testing.assert_allclose(to_host(framework, sums), want, rtol=1e-9, atol=1e-6)
    narrow = tally.bincount(x, minlength=256, dtype="uint32")
    assert to_host(framework, narrow).dtype == np.uint32
    np.testing.assert_array_equal(to_host(framework, narrow), np.bincount(host, minlength=256))
    if np.dtype(dtype).kind == "i":
        host[len(host) // 2] = -3
        with pytest.raises(ValueError, match="^x: bincount takes non-negative"):
            tally.bincount(to_device(framework, host), minlength=5000)
        with pytest.raises(ValueError, match="^x: bincount takes non-negative"):
            tally.bincount(to_device(framework, host), weights=w, minlength=5000)


@pytest.mark.parametrize("framework", [f for f in FRAMEWORKS if f != "jax"])
def test_bincount_refuses_negative_samples_on_either_side_of_the_minimum_read(framework):
    # Small signed arrays read their minimum with their maximum; larger ones count the negative
    # samples as left out and wait for that count: both must refuse one negative sample anywhere.
    limit = tally._BINCOUNT_MINIMUM_READ_BYTES // 4
    for n in (limit, limit + 1):
        host = (np.arange(n, dtype=np.int64) % 1000).astype(np.int32)
        np.testing.assert_array_equal(to_host(framework, tally.bincount(to_device(framework, host))),
                                      np.bincount(host))
        for at in (0, n // 2, n - 1):
            host[at] = -7
            with pytest.raises(ValueError, match="^x: bincount takes non-negative"):
                tally.bincount(to_device(framework, host))
            host[at] = at % 1000


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_deterministic_weighted_sums_have_numpys_bits(framework):
    host = host_samples("int32", 1 << 18) % 1000
    weights = RNG.normal(size=host.size)
    want = tally.histogram(host, 100, range=(0, 1000), weights=weights, deterministic=True)[0]
    got = tally.histogram(to_device(framework, host), 100, range=(0, 1000), weights=to_device(framework, weights),
                          deterministic=True)[0]
    assert to_host(framework, got).tobytes() == want.tobytes()
    # The deterministic sums' bound: each weight on a grid of 2^-32, one rounding at the end.
    counts = np.histogram(host, 100, range=(0, 1000))[0]
    numpy_sums = np.histogram(host, 100, range=(0, 1000), weights=weights)[0]
    assert np.all(np.abs(want - numpy_sums) <= counts * 2.0**-33 + 1e-12 * np.abs(numpy_sums) + 1e-12)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
def test_reductions_and_predicates_follow_numpy(framework, dtype):
    host = host_samples(dtype)
    a = to_device(framework, host)
    assert to_host(framework, tally.min(a)) == host.min() and to_host(framework, tally.max(a)) == host.max()
    if host.dtype.kind == "f":
        np.testing.assert_allclose(to_host(framework, tally.sum(a)), host.sum(dtype=np.float64), rtol=1e-5)
        assert to_host(framework, tally.sum(a, deterministic=True)).tobytes() == tally.sum(host, deterministic=True).tobytes()
    else:
        assert to_host(framework, tally.sum(a)) == host.sum()
    assert to_host(framework, tally.count_if(a, "<", 500)) == np.count_nonzero(host < 500)
    mask = host >= 999
    assert to_host(framework, tally.find_first(a, ">=", 999)) == (np.argmax(mask) if mask.any() else host.size)
    # Each is a 0-d array on the device, as numpy's results are scalars.
    for result in (tally.sum(a), tally.min(a), tally.max(a), tally.count_if(a, "<", 500), tally.find_first(a, ">=", 9)):
        assert tuple(result.shape) == ()


@pytest.mark.parametrize("framework", [f for f in FRAMEWORKS if f != "jax"])  # JAX has no stream to give
def test_runs_on_the_stream_it_is_given(framework):
    host = host_samples("float32")
    a = to_device(framework, host)
    if framework == "cupy":
        import cupy

        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            counts, _ = tally.histogram(a, 64, range=(0, 1000))
        stream.synchronize()
        explicit, _ = tally.histogram(a, 64, range=(0, 1000), stream=stream)
        stream.synchronize()
    else:
        import torch

        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            counts, _ = tally.histogram(a, 64, range=(0, 1000))
        stream.synchronize()
        explicit, _ = tally.histogram(a, 64, range=(0, 1000), stream=stream)
        stream.synchronize()
    want = np.histogram(host, 64, range=(0, 1000))[0]
    np.testing.assert_array_equal(to_host(framework, counts), want)
    np.testing.assert_array_equal(to_host(framework, explicit), want)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_edge_sizes_density_and_counts_dtype(framework):
    for n in (0, 1, 31, 4097):
        host = host_samples("float32", n)
        a = to_device(framework, host)
        np.testing.assert_array_equal(to_host(framework, tally.histogram(a, 16)[0]), np.histogram(host, 16)[0])
        np.testing.assert_array_equal(to_host(framework, tally.histogram(a, 16, range=(0, 500))[0]),
                                      np.histogram(host, 16, range=(0, 500))[0])
        assert to_host(framework, tally.count_if(a, ">", 500)) == np.count_nonzero(host > 500)
        assert to_host(framework, tally.find_first(a, ">", 500)) == (np.argmax(host > 500) if (host > 500).any() else n)
    assert to_host(framework, tally.sum(to_device(framework, np.zeros(0, np.int32)))) == 0
    np.testing.assert_array_equal(to_host(framework, tally.bincount(to_device(framework, np.zeros(0, np.int64)),
                                                                     minlength=3)), np.zeros(3, np.int64))
    host = host_samples("float64", 1 << 16)
    a = to_device(framework, host)
    np.testing.assert_allclose(to_host(framework, tally.histogram(a, 50, density=True)[0]),
                               np.histogram(host, 50, density=True)[0], rtol=1e-12)
    counts, _ = tally.histogram(a, 50, range=(0, 900), dtype="uint32")
    assert to_host(framework, counts).dtype == np.uint32
    np.testing.assert_array_equal(to_host(framework, counts), np.histogram(host, 50, range=(0, 900))[0])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_errors_name_their_argument(framework):
    a = to_device(framework, host_samples("float32", 1000))
    with pytest.raises(ValueError, match="^weights"):
        tally.histogram(a, 10, weights=np.ones(1000))  # host weights for device samples
    with pytest.raises(TypeError, match="^a: dtype"):
        tally.histogram(to_device(framework, np.zeros(10, np.complex64)), 10)


# int8, int16, uint16 and float16 arrays of every framework, bfloat16 ones of PyTorch and JAX: the
# GPU counts as the CPU backend counts the same values (test_small_dtypes.py checks those against
# numpy), with numpy's edges and errors.
SMALL_DTYPES = ["int8", "int16", "uint16", "float16"]
FLOAT16_SPECIALS = np.array([0.0, -0.0, 2.0**-24, -(2.0**-24), 2.0**-14 - 2.0**-24, 2.0**-14, 65504, -65504, 2048,
                             2050, 0.1, np.nan, np.inf, -np.inf], np.float16)


def small_host_samples(dtype, finite=True, n=1 << 20):
    """Random samples of `dtype`: the whole integer type (its least and greatest values first), or
    floats over [-100, 900) with float16's zeros, subnormals and limits (NaN and infinities unless
    `finite`: the data's range must be finite)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = RNG.integers(info.min, info.max, n, endpoint=True)
        values[:2] = info.min, info.max
        return values.astype(dtype)
    values = (RNG.random(n) * 1000 - 100).astype(dtype)
    specials = FLOAT16_SPECIALS[np.isfinite(FLOAT16_SPECIALS)] if finite else FLOAT16_SPECIALS
    values[: specials.size] = specials
    return values


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("dtype", SMALL_DTYPES)
@pytest.mark.parametrize("bins, range_", [(256, None), (1000, None), (10, (0, 1000)), (1000, (-100.5, 900.25)),
                                          (4096, (0, 1000)), (65536, (0, 65536)), (64, (-(2.0**-14), 2.0**-14))])
def test_small_dtypes_count_as_the_cpu_backend_with_numpys_edges(framework, dtype, bins, range_):
    host = small_host_samples(dtype, finite=range_ is None)
    a = to_device(framework, host)
    with np.errstate(all="ignore"):
        try:
            want_edges = np.histogram_bin_edges(host, bins, range_)
        except ValueError as e:  # float16 edges that collide: numpy's error, and tally's
            with pytest.raises(ValueError, match=re.escape(str(e))):
                tally.histogram(a, bins, range=range_)
            return
        cpu_counts, cpu_edges = tally.histogram(host, bins, range=range_)
    np.testing.assert_array_equal(cpu_counts, np.histogram(host, want_edges)[0])  # numpy's counts, by its edges
    counts, edges = tally.histogram(a, bins, range=range_)
    assert_like(framework, counts, a)
    assert to_host(framework, edges).dtype == want_edges.dtype
    np.testing.assert_array_equal(to_host(framework, edges), want_edges)
    np.testing.assert_array_equal(to_host(framework, counts), cpu_counts)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("dtype", ["int8", "int16", "uint16"])
def test_small_integer_bincounts_equal_numpy(framework, dtype):
    host = small_host_samples(dtype, n=1 << 18)
    host = np.abs(host.astype(np.int64)).clip(0, np.iinfo(dtype).max).astype(dtype)
    x = to_device(framework, host)
    np.testing.assert_array_equal(to_host(framework, tally.bincount(x, minlength=10)), np.bincount(host, minlength=10))
    if np.iinfo(dtype).min < 0:
        with pytest.raises(ValueError, match="^x: bincount takes non-negative"):
            tally.bincount(to_device(framework, np.array([0] * 1000 + [-5] + [7] * 1000, dtype)))


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("dtype", SMALL_DTYPES)
def test_small_dtypes_reductions_and_predicates_follow_numpy(framework, dtype):
    host = small_host_samples(dtype)
    a = to_device(framework, host)
    assert to_host(framework, tally.min(a)) == host.min() and to_host(framework, tally.max(a)) == host.max()
    assert to_host(framework, tally.min(a)).dtype == host.dtype
    if dtype == "float16":
        total = to_host(framework, tally.sum(a))
        assert total.dtype == np.float32  # summed in float32, as the CPU backend sums them
        np.testing.assert_allclose(total, host.sum(dtype=np.float64), rtol=1e-5)
        assert to_host(framework, tally.sum(a, deterministic=True)).tobytes() == tally.sum(host, deterministic=True).tobytes()
        values = [500, 99.5, 2049, 0.1, np.float64(0.1), 65520, float("nan"), 2.0**-24]
    else:
        assert to_host(framework, tally.sum(a)) == host.sum()
        values = [500, 99.5, -3, 300, -129, 128, 32768, 65536]
    for value in values:
        with np.errstate(all="ignore"):
            mask = host < value
        assert to_host(framework, tally.count_if(a, "<", value)) == np.count_nonzero(mask), value
        assert to_host(framework, tally.find_first(a, "<", value)) == (np.argmax(mask) if mask.any() else host.size)


BFLOAT16_FRAMEWORKS = [f for f in FRAMEWORKS if f in ("torch", "jax")]
try:
    import torch  # noqa: F401 - JAX's bfloat16 arrays go through PyTorch too
except ImportError:
    BFLOAT16_FRAMEWORKS = []


def to_device_bfloat16(framework, host32):
    """float32 values, each a bfloat16 (so the conversion is exact), as a bfloat16 device array."""
    if framework == "jax":
        import jax

        return jax.device_put(jax.numpy.asarray(host32, dtype=jax.numpy.bfloat16), jax.devices("gpu")[0])
    import torch

    return torch.from_numpy(host32).cuda().to(torch.bfloat16)


def to_host_float32(framework, a):
    if framework == "jax":
        import jax

        return np.asarray(a.astype(jax.numpy.float32))
    return a.float().cpu().numpy()


def bfloat16_values(host: np.ndarray) -> np.ndarray:
    """float32 `host` truncated to bfloat16 (the top 16 bits): float32 values that are bfloat16's."""
    return (host.astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)


def rounded_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """float64 `x` rounded to the nearest bfloat16 (ties to even), straight from double: 8
    significant bits, normal down to 2^-126, infinity beyond the largest value."""
    mantissa, exponent = np.frexp(x)
    unit = np.maximum(exponent, -125) - 8
    rounded = np.ldexp(np.rint(np.ldexp(x, -unit)), unit)
    return np.where(np.abs(rounded) > float.fromhex("0x1.fep127"), np.copysign(np.inf, x), rounded)


@pytest.mark.parametrize("framework", BFLOAT16_FRAMEWORKS or [pytest.param("torch", marks=pytest.mark.skip(
    reason="bfloat16 arrays need PyTorch with CUDA"))])
def test_bfloat16_counts_with_edges_rounded_to_bfloat16(framework):
    host = bfloat16_values(RNG.random(1 << 20) * 1000 - 100)
    host[:8] = [0.0, -0.0, 2.0**-126, -(2.0**-133), 255, 256, 257, 900]  # 257 is no bfloat16: 256 stands
    host = bfloat16_values(host)
    with_specials = host.copy()
    with_specials[8:11] = [np.nan, np.inf, -np.inf]
    a, a_specials = to_device_bfloat16(framework, host), to_device_bfloat16(framework, with_specials)
    for bins, range_ in ((10, (0, 1000)), (37, (-100.5, 900.25)), (100, None), (256, (0, 1024)), (1, None)):
        lower, upper = (float(host.min()), float(host.max())) if range_ is None else map(float, range_)
        step = (upper - lower) / bins
        want_edges = rounded_to_bfloat16(np.concatenate([np.arange(bins) * step + lower, [upper]]))
        counts, edges = tally.histogram(a if range_ is None else a_specials, bins, range=range_)
        np.testing.assert_array_equal(to_host_float32(framework, edges), want_edges)
        # numpy counts float32 values against float64 edges given as an array exactly: by the edges
        want_counts = np.histogram(with_specials if range_ else host, want_edges)[0]
        np.testing.assert_array_equal(to_host(framework, counts), want_counts)
    with pytest.raises(ValueError, match="^Too many bins for data range"):  # bfloat16 edges 4 apart near 1000
        tally.histogram(a, 1000, range=(0, 1000))
    with pytest.raises(ValueError, match="not finite"):
        tally.histogram(a_specials, 10)
    with pytest.raises(TypeError, match="^x: bincount takes integer"):
        tally.bincount(a)


@pytest.mark.parametrize("framework", BFLOAT16_FRAMEWORKS or [pytest.param("torch", marks=pytest.mark.skip(
    reason="bfloat16 arrays need PyTorch with CUDA"))])
def test_bfloat16_reductions_and_predicates(framework):
    host = bfloat16_values(RNG.random(1 << 20) * 1000 - 100)
    a = to_device_bfloat16(framework, host)
    assert to_host_float32(framework, tally.min(a)) == host.min()
    assert to_host_float32(framework, tally.max(a)) == host.max()
    total = to_host(framework, tally.sum(a))
    assert total.dtype == np.float32
    np.testing.assert_allclose(total, host.sum(dtype=np.float64), rtol=1e-5)
    # The deterministic sum of bfloat16 values is float32's of the same values: the same bits.
    assert to_host(framework, tally.sum(a, deterministic=True)).tobytes() == tally.sum(host, deterministic=True).tobytes()
    import torch

    reference = torch.from_numpy(host).cuda().to(torch.bfloat16)  # PyTorch compares a Python float in bfloat16
    compare = {"<": operator.lt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}
    for op, value in (("<", 0.1), ("<", 500), (">=", 257.0), ("==", 256), ("!=", float("nan")), ("<", 1e39)):
        want = int(torch.count_nonzero(compare[op](reference, value)))
        assert to_host(framework, tally.count_if(a, op, value)) == want, (op, value)
