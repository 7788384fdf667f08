"""tally's Python package on int8, int16, uint16 and float16 numpy arrays (the CPU backend): counts,
edges, errors, reductions and predicates equal numpy's on random samples and on samples placed on
and beside every edge, at the types' limits, NaN, infinities, -0.0 and float16 subnormals."""

import math
import re

import numpy as np
import pytest

import tally
from test_numpy import assert_weighted_like_numpy

# numpy's float16 arithmetic warns where it overflows (as tally, which asks numpy for the edges,
# does then): these tests compare results and errors, not warnings.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
RNG = np.random.default_rng(20261126)
SMALL_DTYPES = ["int8", "int16", "uint16", "float16"]
TINY16 = 2.0**-24  # float16's least subnormal
NORMAL16 = 2.0**-14  # float16's least normal value


def float16_specials():
    """float16 values where arithmetic and conversions go wrong: zeros of both signs, subnormals
    (the least, the greatest, between), the least normal, the largest, integers beyond 2048 where
    the spacing is 2, NaN and infinities."""
    return np.array([0.0, -0.0, TINY16, -TINY16, 3 * TINY16, NORMAL16 - TINY16, -(NORMAL16 - TINY16), NORMAL16,
                     -NORMAL16, 65504, -65504, 2048, 2050, 0.1, -0.1, 1, -1, np.nan, np.inf, -np.inf], np.float16)


def samples(dtype, shape, n=20000):
    """Random and adversarial samples of `dtype` (finite, unless `shape` is "specials")."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if shape == "uniform":  # the whole type, its least and greatest values among them
            values = RNG.integers(info.min, info.max, n, endpoint=True)
            values[:2] = info.min, info.max
            return values.astype(dtype)
        if shape == "small":
            return RNG.integers(0, 120, n).astype(dtype)
        if shape == "one_value":
            return np.full(n, 7, dtype)
        if shape == "steps":  # on a coarse grid: many samples on edges
            return (RNG.integers(0, 5, n) * 25).astype(dtype)
        raise ValueError(shape)
    if shape == "uniform":
        return (RNG.random(n) * 1000 - 100).astype(dtype)
    if shape == "small":  # subnormals and zeros of both signs
        values = (RNG.integers(-1023, 1024, n) * TINY16).astype(dtype)
        values[:2] = 0.0, -0.0
        return values
    if shape == "one_value":
        return np.full(n, 7, dtype)
    if shape == "steps":
        return (RNG.integers(0, 40, n) * 25).astype(dtype)
    if shape == "wide":  # the positive range up to the largest value
        values = (RNG.random(n) * 65504).astype(dtype)
        values[:2] = 0, 65504
        return values
    if shape == "specials":
        return np.concatenate([float16_specials(), (RNG.random(n) * 2 - 1).astype(dtype)])
    raise ValueError(shape)


SHAPES = ["uniform", "small", "one_value", "steps"]
DTYPES_AND_SHAPES = [(d, s) for d in SMALL_DTYPES for s in SHAPES] + [("float16", "wide")]


def assert_histogram_as_numpy(a, bins, range_=None):
    """tally.histogram(a, bins, range_) gives numpy's edges and counts, or raises numpy's error.

    numpy computes float16 samples' bins in float16 arithmetic, and it goes wrong in two ways: over
    the data's range an estimate can land two bins from the right one (numpy corrects by one), and
    a sample's distance from the lower edge beyond 65504 overflows (an IndexError). There tally
    counts as numpy's edges say, as numpy counts those edges given as an array.
    """
    try:
        want_counts, want_edges = np.histogram(a, bins, range=range_)
    except ValueError as e:
        with pytest.raises(ValueError, match=re.escape(str(e))):
            tally.histogram(a, bins, range=range_)
        return
    except IndexError:
        assert a.dtype == np.float16, "numpy's index arithmetic overflows for float16 samples only"
        want_counts, want_edges = None, np.histogram_bin_edges(a, bins, range=range_)
    counts, edges = tally.histogram(a, bins, range=range_)
    assert edges.dtype == want_edges.dtype and counts.dtype == np.int64
    np.testing.assert_array_equal(edges, want_edges)
    by_edges, _ = np.histogram(a, want_edges)
    np.testing.assert_array_equal(counts, by_edges)
    if want_counts is not None and not np.array_equal(want_counts, by_edges):
        assert a.dtype == np.float16 and range_ is None, "numpy disagrees with its own edges only there"


@pytest.mark.parametrize("dtype, shape", DTYPES_AND_SHAPES)
@pytest.mark.parametrize("bins", [1, 7, 10, 256, 1000, 4096])
def test_histogram_over_the_datas_range_equals_numpy(dtype, shape, bins):
    assert_histogram_as_numpy(samples(dtype, shape), bins)


@pytest.mark.parametrize("dtype", SMALL_DTYPES)
@pytest.mark.parametrize("bins, range_", [(10, (0, 1000)), (1000, (0, 1000)), (1000, (-100.5, 900.25)),
                                          (3, (0.1, 0.7)), (256, (-128, 128)), (255, (-128, 127)), (77, (-1e6, 1e6)),
                                          (64, (-NORMAL16, NORMAL16)), (7, (0, 65504)), (4, (-65504, 65504)),
                                          (4096, (0, 1000)), (65536, (0, 65536))])
def test_histogram_over_a_given_range_equals_numpy(dtype, bins, range_):
    for shape in ("uniform", "small", "steps"):
        a = samples(dtype, shape)
        assert_histogram_as_numpy(a, bins, range_)
        if dtype == "float16":
            assert_histogram_as_numpy(np.concatenate([a, float16_specials()]), bins, range_)


def samples_on_and_beside(edges: np.ndarray, dtype) -> np.ndarray:
    """Every edge as a sample of `dtype`, and the samples just below and just above it."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        on = edges.astype(dtype)
        return np.concatenate([on, np.nextafter(on, dtype.type(-np.inf)), np.nextafter(on, dtype.type(np.inf))])
    info = np.iinfo(dtype)
    near = np.concatenate([np.floor(edges) + d for d in (-1, 0, 1, 2)])
    return np.clip(near, info.min, info.max).astype(dtype)


@pytest.mark.parametrize("dtype", SMALL_DTYPES)
@pytest.mark.parametrize("bins, range_", [(10, (0, 1000)), (1000, (-100.5, 900.25)), (3, (0.1, 0.7)), (77, (-1e6, 1e6)),
                                          (64, (-NORMAL16, NORMAL16)), (255, (-128, 127)), (7, (0, 65504)),
                                          (100, None)])
def test_samples_on_and_beside_every_edge_go_where_numpy_puts_them(dtype, bins, range_):
    base = samples(dtype, "uniform", 1000)
    try:
        edges = np.histogram_bin_edges(base, bins, range_)
    except ValueError as e:  # float16 edges that collide
        with pytest.raises(ValueError, match=re.escape(str(e))):
            tally.histogram(base, bins, range_)
        return
    near = samples_on_and_beside(edges, dtype)
    if range_ is None:  # within the data's range, which stays the one the edges were made for
        near = near[(near >= base.min()) & (near <= base.max())]
    a = np.concatenate([base, near])
    assert_histogram_as_numpy(a, bins, range_)
    for last_edge in ("inclusive", "exclusive"):  # every bin half-open: samples on the last edge left out
        counts, _ = tally.histogram(a, bins, range=range_, last_edge=last_edge)
        want = np.histogram(a, edges)[0]
        if last_edge == "exclusive":
            want[-1] -= np.count_nonzero(a == edges[-1])
        np.testing.assert_array_equal(counts, want)


def test_float16_edges_and_errors_follow_numpy():
    a = samples("float16", "uniform")
    # numpy's float16 edges over a range of Python numbers: float64 arithmetic rounded to float16;
    # over the data's range: float16 arithmetic; over a range of float64 scalars: float64 edges.
    for range_ in ((0, 1000), None, (np.float64(0.1), np.float64(700.3)), (np.float32(0.1), np.float32(700.3))):
        edges = tally.histogram_bin_edges(a, 999, range_)
        want = np.histogram_bin_edges(a, 999, range_)
        assert edges.dtype == want.dtype
        np.testing.assert_array_equal(edges, want)
        assert_histogram_as_numpy(a, 999, range_)
    # Edges that collide in float16 are numpy's error, and tally's.
    for bins, range_ in ((4096, (0, 1000)), (2048, None), (10, (1000, 1000.25))):
        with pytest.raises(ValueError, match="^Too many bins for data range"):
            np.histogram(a, bins, range=range_)
        with pytest.raises(ValueError, match="^Too many bins for data range"):
            tally.histogram(a, bins, range=range_)
    with pytest.raises(ValueError, match="Too many bins"):  # the data's range beyond float16: inf - -inf
        tally.histogram(np.array([-65504, 65504], np.float16), 10)
    with pytest.raises(ValueError, match="not finite"):
        tally.histogram(float16_specials(), 10)


def test_float16_infinities_stay_out_of_a_last_bin_that_reaches_infinity():
    # 70000 rounds to inf in float16: the last edge is inf. numpy then fails on infinite samples
    # (an IndexError from its index arithmetic); tally leaves them out, as every infinite sample.
    finite = np.array([1, 65504, 35000, 0, -0.0], np.float16)
    a = np.concatenate([finite, np.array([np.inf, -np.inf, np.nan], np.float16)])
    counts, edges = tally.histogram(a, 2, range=(0, 70000))
    want_counts, want_edges = np.histogram(finite, 2, range=(0, 70000))
    np.testing.assert_array_equal(edges, want_edges)
    assert edges[-1] == np.inf
    np.testing.assert_array_equal(counts, want_counts)


@pytest.mark.parametrize("dtype", SMALL_DTYPES)
def test_histogram_over_given_edges_equals_numpy(dtype):
    a = samples(dtype, "uniform")
    if dtype == "float16":
        a = np.concatenate([a, float16_specials()])
    for bins in (np.geomspace(1, 1e6, 65), np.sort(RNG.random(300) * 1100 - 150), np.arange(-100, 1001, 25),
                 [0.0, 0.1, 0.2, 0.30000000000000004, 500], [5, 5, 5, 10], [-TINY16, 0, TINY16, NORMAL16],
                 [-129, -128, 127, 128, 32767, 65535, 65536]):
        counts, edges = tally.histogram(a, bins)
        want_counts, want_edges = np.histogram(a, bins)
        np.testing.assert_array_equal(edges, want_edges)
        np.testing.assert_array_equal(counts, want_counts)


@pytest.mark.parametrize("dtype", SMALL_DTYPES)
def test_density_and_weighted_histograms_follow_numpy(dtype):
    a = samples(dtype, "steps")
    np.testing.assert_allclose(tally.histogram(a, 33, range=(0, 1000), density=True)[0],
                               np.histogram(a, 33, range=(0, 1000), density=True)[0], rtol=1e-12)
    assert_weighted_like_numpy(a, RNG)


@pytest.mark.parametrize("dtype", ["int8", "int16", "uint16"])
def test_bincount_equals_numpy(dtype):
    for x in (samples(dtype, "small"), samples(dtype, "steps"), np.array([np.iinfo(dtype).max, 0], dtype)):
        np.testing.assert_array_equal(tally.bincount(x), np.bincount(x))
        np.testing.assert_array_equal(tally.bincount(x, minlength=300), np.bincount(x, minlength=300))
        w = RNG.random(x.size)
        np.testing.assert_allclose(tally.bincount(x, weights=w), np.bincount(x, weights=w), rtol=1e-12)
    np.testing.assert_array_equal(tally.bincount(np.array([], dtype), minlength=4), np.zeros(4, np.int64))
    if np.iinfo(dtype).min < 0:
        with pytest.raises(ValueError, match="^x: bincount takes non-negative"):
            tally.bincount(np.array([3, np.iinfo(dtype).min, 5], dtype))
    with pytest.raises(TypeError, match="^x: bincount takes integer"):
        tally.bincount(np.zeros(3, np.float16))


@pytest.mark.parametrize("dtype", ["int8", "int16", "uint16"])
def test_integer_sum_min_max_equal_numpys(dtype):
    for shape in ("uniform", "small", "one_value"):
        a = samples(dtype, shape)
        assert tally.sum(a) == a.sum() and tally.sum(a).dtype == a.sum().dtype  # int64, uint64: as numpy
        assert tally.min(a) == a.min() and tally.max(a) == a.max()
        assert tally.min(a).dtype == a.dtype and tally.max(a).dtype == a.dtype
    assert tally.sum(np.full(1 << 17, np.iinfo(dtype).max, dtype)) == (1 << 17) * int(np.iinfo(dtype).max)


def test_float16_sums_are_float32_sums_and_min_max_equal_numpys():
    for shape in ("uniform", "small", "wide", "steps"):
        a = samples("float16", shape)
        exact = math.fsum(a.astype(np.float64))
        total = tally.sum(a)
        assert total.dtype == np.float32  # numpy's a.sum() is float16; tally sums in float32
        np.testing.assert_allclose(total, exact, rtol=1e-5, atol=64 * TINY16)
        # The deterministic sum: float32's, of the values widened exactly, one rounding at the end.
        bits = {tally.sum(a, deterministic=True, strategy=s).tobytes() for s in ("sequential", "privatized",
                                                                                 "automatic")}
        assert bits == {tally.sum(a.astype(np.float32), deterministic=True).tobytes()}
        deterministic = float(tally.sum(a, deterministic=True))
        bound = np.spacing(np.float32(abs(exact))) / 2 + a.size * 2.0**-54 * float(np.abs(a).max())
        assert abs(deterministic - exact) <= bound
        assert tally.min(a) == a.min() and tally.max(a) == a.max() and tally.min(a).dtype == np.float16
    specials = float16_specials()
    assert np.isnan(tally.min(specials)) and np.isnan(tally.max(specials)) and np.isnan(tally.sum(specials))
    finite = specials[np.isfinite(specials)]
    assert tally.min(finite) == np.float16(-65504) and tally.max(finite) == np.float16(65504)
    assert tally.sum(np.array([65504, 65504], np.float16)) == 131008  # beyond float16, within float32
    assert tally.sum(np.array([], np.float16)) == 0


def numpy_predicate(a, op, value):
    return {"<": a < value, "<=": a <= value, ">": a > value, ">=": a >= value, "==": a == value,
            "!=": a != value}[op]


@pytest.mark.parametrize("dtype", SMALL_DTYPES)
@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "==", "!="])
def test_count_if_and_find_first_follow_numpy(dtype, op):
    a = np.concatenate([samples(dtype, "steps", 2000), samples(dtype, "uniform", 2000)])
    values = [100, 500, 99.5, -3, 300, 2.0**40, -(2.0**63), 1e30, float("nan"), np.float32(0.25), -129, 128, 32768,
              65536, -1, 2**70, np.int64(70000)]
    if dtype == "float16":
        a = np.concatenate([a, float16_specials(), samples(dtype, "small", 2000)])
        # Python numbers compare in float16 (2049 as 2048, 65520 as inf), numpy scalars of wider
        # types in their own type (np.float64(0.1) is no float16).
        values += [2049, 2051, 65519.9, 65520, np.float64(0.1), 0.1, np.float32(0.1), np.float64(65504.5),
                   np.float32(2049), TINY16, TINY16 / 2, np.float64(TINY16 / 2), -0.0, np.inf, -np.inf, NORMAL16,
                   np.float16(0.1)]
    for value in values:
        mask = numpy_predicate(a, op, value)
        assert tally.count_if(a, op, value) == np.count_nonzero(mask), value
        assert tally.find_first(a, op, value) == (np.argmax(mask) if mask.any() else a.size), value


def test_float32_samples_compare_with_a_float64_value_as_numpy_does():
    a = np.array([0.1, 0.2, 1.0], np.float32)  # float32(0.1) is above 0.1, float32(0.2) above 0.2
    for op in ("<", "<=", ">", ">=", "==", "!="):
        for value in (np.float64(0.1), 0.1, np.float64(0.2), np.float64(1.0), np.float32(0.1)):
            assert tally.count_if(a, op, value) == np.count_nonzero(numpy_predicate(a, op, value)), (op, value)


def test_bfloat16_on_the_host_is_refused_by_name():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="^a: bfloat16 samples are taken on a GPU only"):
        tally.histogram(torch.zeros(10, dtype=torch.bfloat16), 10)


def test_small_dtypes_in_every_call_name_their_errors():
    a = samples("float16", "uniform")
    with pytest.raises(TypeError, match="^weights: float32 or float64"):
        tally.histogram(a, 10, range=(0, 1000), weights=np.ones(a.size, np.float16))
    with pytest.raises(NotImplementedError, match="^weights"):  # numpy's float16 arithmetic: range bins
        tally.histogram(a, 999, weights=np.ones(a.size))
    with pytest.raises(ValueError, match="^a: zero-size"):
        tally.max(np.array([], np.int8))
