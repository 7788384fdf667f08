"""numpy arrays counted on the GPU with backend="gpu": streamed from host memory through the
library's pinned staging ring, and equal to numpy (counts, min/max, counts of matches, the first
match; float sums within their bound). Skipped without a GPU backend or a GPU."""

import numpy as np
import pytest

import tally

if not tally.built_with_cuda():
    pytest.skip("this build of tally has no GPU backend", allow_module_level=True)
if tally._tally.device_count() == 0:
    pytest.skip("no CUDA device is visible", allow_module_level=True)

RNG = np.random.default_rng(20261125)
# Several 32 MiB chunks of the default ring with a ragged end, one part chunk, one sample, none.
SIZES = [0, 1, 1000, (80 << 20) // 4 + 123]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["int32", "float32", "uint8", "int16", "float64"])
def test_histograms_equal_numpy(n, dtype):
    a = (RNG.random(n) * 1200 - 100).astype(dtype) if dtype != "uint8" else RNG.integers(0, 256, n, dtype=np.uint8)
    for bins, range_ in [(256, (0, 256)), (1000, (0, 1000)), (37, None)]:
        if range_ is None and n == 0:
            continue
        got, edges = tally.histogram(a, bins, range_, backend="gpu")
        want, want_edges = np.histogram(a, bins, range_)
        assert isinstance(got, np.ndarray) and got.dtype == np.int64
        np.testing.assert_array_equal(got, want, err_msg=f"{dtype} n={n} bins={bins} range={range_}")
        np.testing.assert_array_equal(edges, want_edges)
    edges = np.array([-50, 0, 3.5, 100, 101, 999.25])
    np.testing.assert_array_equal(tally.histogram(a, edges, backend="gpu")[0], np.histogram(a, edges)[0])


@pytest.mark.parametrize("n", SIZES)
def test_bincounts_and_weights_equal_numpy(n):
    x = RNG.integers(0, 5000, n, dtype=np.int32)
    np.testing.assert_array_equal(tally.bincount(x, backend="gpu"), np.bincount(x))
    np.testing.assert_array_equal(tally.bincount(x, minlength=6000, backend="gpu"), np.bincount(x, minlength=6000))
    w = RNG.integers(-3, 4, n).astype(np.float64)  # small integers: every order of sums is exact
    np.testing.assert_array_equal(tally.bincount(x, w, backend="gpu"), np.bincount(x, w))
    counts, _ = tally.histogram(x, 64, (0, 5000), weights=w, backend="gpu")
    np.testing.assert_array_equal(counts, np.histogram(x, 64, (0, 5000), weights=w)[0])
    if n > 0:
        with pytest.raises(ValueError, match="x"):
            tally.bincount(np.concatenate([x, np.array([-2], np.int32)]), backend="gpu")


@pytest.mark.parametrize("n", SIZES[1:])
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64", "float16"])
def test_reductions_and_predicates_equal_numpy(n, dtype):
    a = (RNG.random(n) * 2000 - 1000).astype(dtype)
    assert tally.min(a, backend="gpu") == a.min()
    assert tally.max(a, backend="gpu") == a.max()
    total = tally.sum(a, backend="gpu")
    if np.issubdtype(a.dtype, np.integer):
        assert total == a.sum()
    else:
        exact = np.sum(a.astype(np.float64))
        eps = np.finfo(np.float32 if dtype == "float16" else dtype).eps
        assert abs(float(total) - exact) <= 2 * n * eps * np.sum(np.abs(a.astype(np.float64)))
    assert tally.count_if(a, "<", 10, backend="gpu") == np.count_nonzero(a < a.dtype.type(10))
    at = n * 2 // 3
    b = a.copy()
    b[at] = 5000 if dtype != "float16" else 5000.0
    assert tally.find_first(b, ">", 1500, backend="gpu") == at
    assert tally.find_first(a, ">", 1500, backend="gpu") == n


def test_returns_the_choice_and_refuses_what_it_cannot_do():
    a = RNG.integers(0, 100, 10000, dtype=np.int32)
    counts, _, chose = tally.histogram(a, 100, (0, 100), backend="gpu", return_choice=True)
    np.testing.assert_array_equal(counts, np.histogram(a, 100, (0, 100))[0])
    assert chose.strategy and chose.reason
    with pytest.raises(NotImplementedError, match="options"):
        tally.sum(a.astype(np.float32), deterministic=True, backend="gpu")
    with pytest.raises(ValueError, match="backend"):
        tally.histogram(a, 10, backend="tpu")
