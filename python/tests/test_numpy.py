"""tally's Python package against numpy, on the CPU backend (numpy arrays): counts and edges equal
numpy's bit for bit, errors name their argument."""

import numpy as np
import pytest

import tally

RNG = np.random.default_rng(20261125)
DTYPES = ["uint8", "int32", "uint32", "int64", "float32", "float64"]


def samples(dtype, n=20000, shape="uniform"):
    """Real-shaped and adversarial samples of `dtype`."""
    dtype = np.dtype(dtype)
    if shape == "uniform":
        if dtype.kind == "f":
            return (RNG.random(n) * 1000 - 100).astype(dtype)
        info = np.iinfo(dtype)
        return RNG.integers(max(info.min, -(10**6)), min(info.max, 10**6), n, endpoint=True).astype(dtype)
    if shape == "normal":
        values = RNG.normal(50, 20, n)
        return (values if dtype.kind == "f" else np.clip(np.round(values), 0, 255)).astype(dtype)
    if shape == "one_value":
        return np.full(n, 7, dtype)
    if shape == "steps":  # values on a coarse grid: many samples exactly on edges
        return (RNG.integers(0, 40, n) * 25).astype(dtype)
    raise ValueError(shape)


SHAPES = ["uniform", "normal", "one_value", "steps"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("bins", [1, 7, 10, 256, 4096])
def test_histogram_over_the_datas_range_equals_numpy(dtype, shape, bins):
    a = samples(dtype, shape=shape)
    counts, edges = tally.histogram(a, bins)
    want_counts, want_edges = np.histogram(a, bins)
    assert counts.dtype == want_counts.dtype and edges.dtype == want_edges.dtype
    np.testing.assert_array_equal(edges, want_edges)
    np.testing.assert_array_equal(counts, want_counts)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bins, range_", [(10, (0, 1000)), (4096, (0, 1000)), (1000, (-100.5, 900.25)), (3, (0.1, 0.7)),
                                          (256, (0, 256)), (77, (-1e6, 1e6))])
def test_histogram_over_a_given_range_equals_numpy(dtype, bins, range_):
    a = samples(dtype, shape="uniform")
    for last_edge in ("inclusive", "exclusive"):
        counts, edges = tally.histogram(a, bins, range=range_, last_edge=last_edge)
        want_counts, want_edges = np.histogram(a, bins, range=range_)
        if last_edge == "exclusive":  # every bin half-open: samples on the last edge are left out
            want_counts[-1] -= np.count_nonzero(a == want_edges[-1])
        np.testing.assert_array_equal(edges, want_edges)
        np.testing.assert_array_equal(counts, want_counts)


@pytest.mark.parametrize("bins", [7, 100, 4096, 65536])
def test_float32_data_over_its_range_counts_through_even_bins_in_numpys_float32_arithmetic(bins):
    # numpy computes float32 data's edges in float32 (its min and max are float32 scalars); over
    # many ranges those edges differ from the float64 rule's, and the library reproduces them as
    # even bins with edges computed in float32, not as range bins.
    float32_plans = 0
    for trial in range(12):
        if trial == 0:  # a range whose float32 edges differ from the float64 rule's at 100 bins and more
            a = np.random.default_rng(7).normal(1234.5, 37.0, 20000).astype(np.float32)
        else:
            a = RNG.normal(RNG.uniform(-1e4, 1e4), 10.0 ** RNG.uniform(-2, 3), 20000).astype(np.float32)
        if trial % 4 == 1:
            try:  # samples on edges
                a = np.concatenate([a, np.repeat(np.histogram_bin_edges(a, bins)[::max(1, bins // 50)], 3)])
            except ValueError:
                pass
        try:
            want_counts, want_edges = np.histogram(a, bins)
        except ValueError as numpy_error:  # edges that collide in float32: tally refuses as numpy does
            with pytest.raises(ValueError, match="Too many bins"):
                tally.histogram(a, bins)
            assert "Too many bins" in str(numpy_error)
            continue
        counts, edges = tally.histogram(a, bins)
        np.testing.assert_array_equal(edges, want_edges)
        np.testing.assert_array_equal(counts, want_counts)
        _, even = tally._plan("float32", bins, None, (a.min(), a.max()))
        assert even is not None, "numpy's float32 edges are reproduced by one of the library's even rules"
        assert even[3] or trial != 0 or bins < 100, "this range's edges need the float32 rule"
        float32_plans += even[3]
        w = RNG.normal(size=a.size)
        sums, _ = tally.histogram(a, bins, weights=w)
        np.testing.assert_allclose(sums, np.histogram(a, bins, weights=w)[0], rtol=1e-9, atol=1e-9)
    assert float32_plans >= 1, "no range took the float32 rule"


def test_a_range_of_other_types_gets_numpys_edges_for_those_types():
    a = samples("float32")
    for range_ in [(0.1, 700.3), (np.float32(0.1), np.float32(700.3)), (np.float64(0.1), np.float64(700.3)),
                   (0, 700), (np.int64(0), np.int64(700))]:
        counts, edges = tally.histogram(a, 999, range=range_)
        want_counts, want_edges = np.histogram(a, 999, range=range_)
        assert edges.dtype == want_edges.dtype
        np.testing.assert_array_equal(edges, want_edges)
        np.testing.assert_array_equal(counts, want_counts)


@pytest.mark.parametrize("dtype", DTYPES)
def test_histogram_over_given_edges_equals_numpy(dtype):
    a = samples(dtype, shape="uniform")
    lists = [
        np.geomspace(1, 1e6, 65),
        np.sort(RNG.random(300) * 1100 - 150),
        np.arange(-100, 1001, 25),
        [0.0, 0.1, 0.2, 0.30000000000000004, 500],
        [5, 5, 5, 10],  # repeated edges: empty bins between them
    ]
    for bins in lists:
        counts, edges = tally.histogram(a, bins)
        want_counts, want_edges = np.histogram(a, bins)
        np.testing.assert_array_equal(edges, want_edges)
        np.testing.assert_array_equal(counts, want_counts)


def test_histogram_bin_edges_and_density_follow_numpy():
    a = samples("float64", shape="normal")
    np.testing.assert_array_equal(tally.histogram_bin_edges(a, 33), np.histogram_bin_edges(a, 33))
    density, _ = tally.histogram(a, 33, density=True)
    np.testing.assert_allclose(density, np.histogram(a, 33, density=True)[0], rtol=1e-12)


def assert_weighted_like_numpy(a, rng=RNG):
    """Weighted sums of `a` over 128 bins of [0, 1000) close to numpy's; deterministic bits alike for every strategy."""
    for weight_dtype in ("float32", "float64"):
        w = rng.normal(size=a.size).astype(weight_dtype)
        sums, _ = tally.histogram(a, 128, range=(0, 1000), weights=w)
        want, _ = np.histogram(a, 128, range=(0, 1000), weights=w)
        assert sums.dtype == want.dtype
        np.testing.assert_allclose(sums, want, rtol=1e-4 if weight_dtype == "float32" else 1e-9, atol=1e-3)
        bits = {tally.histogram(a, 128, range=(0, 1000), weights=w, deterministic=True, strategy=s)[0].tobytes()
                for s in ("sequential", "privatized", "automatic")}
        assert len(bits) == 1


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64"])
def test_weighted_histogram_is_close_to_numpy_and_deterministic_bits_agree(dtype):
    assert_weighted_like_numpy(samples(dtype, shape="uniform"))


@pytest.mark.parametrize("dtype", ["uint8", "int32", "uint32", "int64"])
def test_bincount_equals_numpy(dtype):
    x = samples(dtype, shape="normal")
    np.testing.assert_array_equal(tally.bincount(x), np.bincount(x))
    np.testing.assert_array_equal(tally.bincount(x, minlength=300), np.bincount(x, minlength=300))
    w = RNG.random(x.size)
    np.testing.assert_allclose(tally.bincount(x, weights=w), np.bincount(x, weights=w), rtol=1e-12)
    np.testing.assert_array_equal(tally.bincount(np.array([], dtype)), np.bincount(np.array([], dtype)))
    np.testing.assert_array_equal(tally.bincount(np.array([], dtype), minlength=4), np.zeros(4, np.int64))


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "uint16", "int32", "uint32", "int64"])
def test_bincount_with_a_minlength_that_holds_every_sample_or_not(dtype):
    # A minlength that holds every sample is numpy's length: one count. A sample past it, or a
    # negative one, sends the call the general way (the extremes first), which must give numpy's
    # longer counts or its error.
    top = min(200, int(np.iinfo(dtype).max) + 1)  # values 0 to top - 1, both present
    x = RNG.integers(0, top, 1 << 16).astype(dtype)
    x[:2] = 0, top - 1
    w = RNG.standard_normal(x.shape[0])
    for minlength in (top, top + 1, 256, 5000, top - 1, top * 3 // 4, 1):
        for strategy in ("automatic", "sequential", "privatized"):
            counts, chose = tally.bincount(x, minlength=minlength, strategy=strategy, return_choice=True)
            assert chose.strategy and tally.last_choice() == chose
            np.testing.assert_array_equal(counts, np.bincount(x, minlength=minlength))
            assert counts.dtype == np.int64
            # Weighted the same way: sums over minlength bins, or the general way.
            want = np.bincount(x, weights=w, minlength=minlength)
            sums, chose = tally.bincount(x, weights=w, minlength=minlength, strategy=strategy, return_choice=True)
            assert chose.strategy and tally.last_choice() == chose and sums.dtype == np.float64
            np.testing.assert_allclose(sums, want, rtol=1e-12, atol=1e-12)
            # Deterministic sums round each weight to 2^-32: within count * 2^-33 of numpy's.
            exact = tally.bincount(x, weights=w, minlength=minlength, strategy=strategy, deterministic=True)
            bound = np.bincount(x, minlength=minlength) * 2.0**-33 + 1e-12 * np.abs(want)
            assert exact.shape == want.shape and np.all(np.abs(exact - want) <= bound)
    narrow = tally.bincount(x, minlength=256, dtype="uint32")
    assert narrow.dtype == np.uint32
    np.testing.assert_array_equal(narrow, np.bincount(x, minlength=256))
    with pytest.raises(ValueError, match="strategy"):
        tally.bincount(x, minlength=5000, strategy="no_such_strategy")
    if np.dtype(dtype).kind == "i":
        x[len(x) // 2] = -3
        with pytest.raises(ValueError, match="^x: bincount takes non-negative"):
            tally.bincount(x, minlength=5000)
        with pytest.raises(ValueError, match="^x: bincount takes non-negative"):
            tally.bincount(x, weights=w, minlength=5000)


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "float32", "float64"])
def test_sum_min_max_follow_numpy(dtype):
    a = samples(dtype, shape="uniform")
    assert tally.min(a) == a.min() and tally.max(a) == a.max()
    assert tally.min(a).dtype == a.dtype
    if a.dtype.kind == "f":
        np.testing.assert_allclose(tally.sum(a), a.sum(dtype=np.float64), rtol=1e-5)
        bits = {tally.sum(a, deterministic=True, strategy=s).tobytes() for s in ("sequential", "privatized", "automatic")}
        assert len(bits) == 1
    else:
        assert tally.sum(a) == a.sum() and tally.sum(a).dtype == a.sum().dtype


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "==", "!="])
def test_count_if_and_find_first_follow_numpy(dtype, op):
    a = samples(dtype, shape="steps")
    # values on samples, between them, beyond the dtype, fractions, NaN
    for value in (100, 500, 99.5, -3, 300, 2.0**40, -(2.0**63), 1e30, float("nan"), np.float32(0.25)):
        mask = {"<": a < value, "<=": a <= value, ">": a > value, ">=": a >= value, "==": a == value,
                "!=": a != value}[op]
        assert tally.count_if(a, op, value) == np.count_nonzero(mask), value
        assert tally.find_first(a, op, value) == (np.argmax(mask) if mask.any() else a.size), value


def test_nan_and_infinities():
    a = np.array([1.0, np.nan, 2.0, np.inf, -np.inf, 3.0])
    with pytest.raises(ValueError, match="not finite"):
        tally.histogram(a, 4)  # numpy: the data's range is not finite
    counts, _ = tally.histogram(a, 4, range=(0, 4))
    np.testing.assert_array_equal(counts, np.histogram(a, 4, range=(0, 4))[0])
    assert np.isnan(tally.max(a)) and np.isnan(tally.min(a))
    assert tally.count_if(a, "!=", 2.0) == 5


def test_edge_sizes():
    for n in (0, 1, 2, 31, 33, 1023, 4097):
        a = RNG.random(n).astype(np.float32)
        np.testing.assert_array_equal(tally.histogram(a, 16)[0], np.histogram(a, 16)[0])
        np.testing.assert_array_equal(tally.histogram(a, 16, range=(0, 1))[0], np.histogram(a, 16, range=(0, 1))[0])
        assert tally.count_if(a, ">", 0.5) == np.count_nonzero(a > 0.5)
    assert tally.sum(np.array([], np.int32)) == 0


def test_shapes_and_layouts_numpy_accepts():
    a = samples("float64", shape="uniform").reshape(100, 200)
    for view in (a, a.T, a[::3], np.asfortranarray(a), a.tolist()):
        np.testing.assert_array_equal(tally.histogram(view, 20)[0], np.histogram(view, 20)[0])


def test_big_endian_and_bool_arrays_count_as_numpy_counts_them():
    a = samples("float64", shape="uniform")
    for dtype in (">f8", ">f4", ">i4", ">i2", ">u2", ">i8"):
        view = a.astype(dtype)
        np.testing.assert_array_equal(tally.histogram(view, 20)[0], np.histogram(view, 20)[0])
        if dtype[1] in "iu":
            np.testing.assert_array_equal(tally.bincount(np.abs(view)), np.bincount(np.abs(view)))
    b = RNG.random(1000) < 0.3
    with pytest.warns(RuntimeWarning):  # numpy: "Converting input from bool to uint8"
        want_counts, want_edges = np.histogram(b)
    counts, edges = tally.histogram(b)
    np.testing.assert_array_equal(counts, want_counts)
    np.testing.assert_array_equal(edges, want_edges)
    np.testing.assert_array_equal(tally.bincount(b), np.bincount(b))


def test_jax_arrays_on_the_cpu_give_jax_arrays():
    jax = pytest.importorskip("jax")
    a = samples("float32")
    counts, edges = tally.histogram(jax.numpy.asarray(a), 50)
    assert isinstance(counts, jax.Array) and isinstance(edges, jax.Array)
    np.testing.assert_array_equal(np.asarray(counts), np.histogram(a, 50)[0])


def test_counts_dtype_and_choice():
    a = samples("int32")
    counts, _, chose = tally.histogram(a, 10, dtype="uint32", return_choice=True)
    assert counts.dtype == np.uint32 and chose.strategy and chose.reason
    assert tally.last_choice() == chose
    counts, _ = tally.histogram(a, 10, strategy="sequential")
    assert tally.last_choice().strategy == "sequential"


def test_errors_name_their_argument():
    a = samples("float32")
    with pytest.raises(TypeError, match="^a: dtype complex64"):
        tally.histogram(a.astype(np.complex64), 10)
    with pytest.raises(TypeError, match="^a: expected an array"):
        tally.histogram(object(), 10)
    with pytest.raises(ValueError, match="^bins"):
        tally.histogram(a, 0)
    with pytest.raises(ValueError, match="^bins"):
        tally.histogram(a, [3, 2, 1])
    with pytest.raises(ValueError, match="strategy"):
        tally.histogram(a, 10, strategy="fastest")
    with pytest.raises(TypeError, match="^dtype"):
        tally.histogram(a, 10, dtype="float32")
    with pytest.raises(ValueError, match="^last_edge"):
        tally.histogram(a, 10, last_edge="closed")
    with pytest.raises(ValueError, match="^weights"):
        tally.histogram(a, 10, weights=a[:5])
    with pytest.raises(ValueError, match="^x: bincount takes non-negative"):
        tally.bincount(np.array([1, -2, 3], np.int32))
    with pytest.raises(TypeError, match="^x: bincount takes integer"):
        tally.bincount(a)
    with pytest.raises(TypeError, match="^a: sum, min and max"):
        tally.sum(np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match="^a: zero-size"):
        tally.min(np.array([], np.float32))
    with pytest.raises(ValueError, match="^op"):
        tally.count_if(a, "<>", 1)


def test_backend_is_checked_and_cpu_is_the_default_for_numpy():
    a = np.arange(1000, dtype=np.int32) % 17
    np.testing.assert_array_equal(tally.histogram(a, 17, (0, 17), backend="cpu")[0], np.bincount(a))
    assert tally.sum(a, backend=None) == a.sum()
    for call in (lambda: tally.histogram(a, 10, backend="tpu"), lambda: tally.bincount(a, backend="GPU"),
                 lambda: tally.sum(a, backend=0), lambda: tally.count_if(a, "<", 3, backend="cuda")):
        with pytest.raises(ValueError, match="backend"):
            call()
    if not tally.built_with_cuda() or tally._tally.device_count() == 0:
        with pytest.raises(ValueError, match="backend: 'gpu'"):
            tally.histogram(a, 10, backend="gpu")
