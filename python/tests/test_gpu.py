"""tally's Python package on CUDA arrays (CuPy and PyTorch): the same counts as numpy on a host copy,
results on the input's device, in its framework, on its stream. Skipped without a GPU backend, a
GPU or the framework."""

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
        tally.histogram(to_device(framework, np.zeros(10, np.int16)), 10)
