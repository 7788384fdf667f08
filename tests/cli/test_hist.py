"""Tests of `tally hist`: the built binary (TALLY_BIN) against numpy.histogram and numpy.bincount.

Every comparison is exact. bfloat16, which numpy lacks, is written here as raw files from float32
bits and compared with the library's rule computed here in float64. Random inputs are seeded; the seed is in every failure message and
TALLY_TEST_SEED=N replays a run with another base seed. The GPU backend is compared too when
TALLY_TEST_GPU=1 (a machine with a GPU and a CUDA build); otherwise those cases are skipped.
"""

import os
import re
import subprocess
import zlib

import numpy as np
import pytest

TALLY = os.environ.get("TALLY_BIN")
BASE_SEED = int(os.environ.get("TALLY_TEST_SEED", "20240611"))
GPU_WANTED = os.environ.get("TALLY_TEST_GPU") == "1"

DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "float16", "float32", "float64"]
INT_DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]
DOUBLE_MAX = float(np.finfo(np.float64).max)

BACKENDS = [
    "cpu",
    pytest.param(
        "gpu",
        marks=pytest.mark.skipif(
            not GPU_WANTED, reason="GPU comparisons run only with TALLY_TEST_GPU=1 (a GPU and a CUDA build)"
        ),
    ),
]


@pytest.fixture(scope="session", autouse=True)
def tally_binary():
    assert TALLY, "set TALLY_BIN to the built tally executable (CTest does)"
    assert os.access(TALLY, os.X_OK), f"TALLY_BIN={TALLY} is not an executable"


def seed_for(*parts):
    """A seed per test case, stable across runs, derived from the base seed and the case's name."""
    return (BASE_SEED + zlib.crc32(repr(parts).encode())) % 2**32


def run_tally(*args, expect=0):
    result = subprocess.run([TALLY, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert result.returncode == expect, (
        f"tally {' '.join(map(str, args))}: exit code {result.returncode}, expected {expect}\n"
        f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    )
    return result


def report_numbers(stderr):
    """The counted and left-out numbers of the report tally prints on stderr."""
    counted = re.search(r"counted:\s+(\d+)", stderr)
    left_out = re.search(r"left out:\s+(\d+)", stderr)
    assert counted and left_out, f"no counted / left out lines in the report:\n{stderr}"
    return int(counted.group(1)), int(left_out.group(1))


def hist_counts(tmp_path, data_file, *args, backend="cpu"):
    """Runs tally hist with --output out.npy; returns the counts and the stderr report."""
    out = tmp_path / f"out_{zlib.crc32(repr(args).encode())}.npy"
    result = run_tally("hist", data_file, "--backend", backend, "--output", out, *args)
    counts = np.load(out)
    assert counts.dtype == np.uint64 and counts.ndim == 1, f"output .npy holds {counts.dtype} {counts.shape}"
    return counts, result.stderr


def save(tmp_path, a, kind, name="data"):
    """Writes `a` as .npy (returns [path]) or raw (returns [path, --dtype, name])."""
    if kind == "npy":
        path = tmp_path / f"{name}.npy"
        np.save(path, a)
        return [path]
    path = tmp_path / f"{name}.bin"
    a.tofile(path)
    return [path, "--dtype", a.dtype.name]


def check_equal(got, expected, what, seed):
    if not np.array_equal(got, expected):
        diff = np.flatnonzero(got != expected) if got.shape == expected.shape else []
        raise AssertionError(
            f"{what} (seed {seed}): tally and numpy differ\n"
            f"shapes {got.shape} vs {expected.shape}; first differing bins {list(diff[:10])}\n"
            f"tally: {got[:40]}\nnumpy: {expected[:40]}"
        )


def check_report(stderr, n, expected_counts, seed, what):
    counted, left_out = report_numbers(stderr)
    total = int(np.asarray(expected_counts, dtype=np.uint64).sum())
    assert counted == total and left_out == n - total, (
        f"{what} (seed {seed}): report says counted {counted}, left out {left_out}; "
        f"numpy counts {total} of {n}\n{stderr}"
    )


def edge_rule_counts(x, edges, include_upper):
    """Counts of the float64 values x in the bins [edges[i], edges[i + 1]), compared exactly; the
    last bin closed when `include_upper`; NaN, infinities and values outside left out."""
    x = np.asarray(x, np.float64)
    edges = np.asarray(edges, np.float64)
    x = x[np.isfinite(x)]
    n = len(edges) - 1
    index = np.searchsorted(edges, x, side="right") - 1
    if include_upper:
        index[x == edges[-1]] = n - 1
    keep = (index >= 0) & (index < n)
    return np.bincount(index[keep], minlength=n).astype(np.uint64)


def numpy_histogram(a, bins, range=None):
    """numpy.histogram(a, bins, range), checked against numpy's own edges: numpy finds float16
    samples' bins in float16 arithmetic, and a case is a test only where that agrees with the edges
    (edge_rule_counts over them, the rule tally follows)."""
    counts, edges = np.histogram(a, bins=bins, range=range)
    by_edges = edge_rule_counts(np.asarray(a, np.float64).ravel(), edges.astype(np.float64), True)
    assert np.array_equal(counts, by_edges), (
        f"numpy.histogram's counts differ from its own edges for {a.dtype} data, bins={bins}, range={range}; "
        f"not a case to compare with: {counts} vs {by_edges}")
    return counts, edges


def exclusive_counts(inclusive_counts, a, last_edge):
    """numpy's counts with samples equal to the last edge moved out, the default half-open rule.
    `last_edge` has the dtype samples are compared in (numpy's bin_edges dtype)."""
    counts = inclusive_counts.astype(np.uint64)
    counts[-1] -= np.uint64(np.count_nonzero(a == last_edge))
    return counts


# ---- data ---------------------------------------------------------------------------------

def neighbours(values, dtype):
    """`values` converted to `dtype`, and for floats their nextafter neighbours; ints: +-1."""
    dtype = np.dtype(dtype)
    values = np.asarray(values, dtype=np.float64)
    if dtype.kind == "f":
        v = values.astype(dtype)
        out = [v, np.nextafter(v, np.array(np.inf, dtype)), np.nextafter(v, np.array(-np.inf, dtype))]
        return np.concatenate(out).astype(dtype)
    info = np.iinfo(dtype)
    out = []
    for delta in (-1, 0, 1):
        for rounding in (np.floor, np.ceil):
            w = rounding(values) + delta
            w = w[(w >= info.min) & (w <= info.max)]
            out.append(w.astype(dtype))
    return np.concatenate(out)


def random_samples(rng, dtype, lo, hi, n):
    """n samples of dtype spread over [lo, hi] and a bit beyond, clipped to the dtype."""
    dtype = np.dtype(dtype)
    width = hi - lo
    x = rng.uniform(lo - 0.1 * width, hi + 0.1 * width, size=n)
    if dtype.kind == "f":
        return x.astype(dtype)
    info = np.iinfo(dtype)
    return np.clip(np.round(x), info.min, info.max).astype(dtype)


# (lower, upper, bins) per dtype: one range with integral edges, one with awkward fractional ones.
# Whole-number and power-of-two steps are here too: the library may count those by a shortcut.
RANGES = {
    "int8": [(-100.0, 100.0, 20), (-3.3, 100.7, 7), (-128.0, 128.0, 256), (-128.0, 127.0, 5), (16.0, 64.0, 3)],
    "uint8": [(0.0, 250.0, 25), (3.3, 200.7, 7), (0.0, 256.0, 256), (16.0, 64.0, 3)],
    "int16": [(-1000.0, 1000.0, 20), (-32768.0, 32768.0, 64), (-1234.5, 20000.25, 13), (-5.0, 5.0, 10)],
    "uint16": [(0.0, 65536.0, 16), (100.5, 60000.25, 11), (0.0, 1000.0, 1000), (7.0, 65535.0, 1)],
    "int32": [(-100.0, 100.0, 20), (-1234.567, 98765.4321, 13), (-2.0**31, 2.0**31, 16), (-5.0, 5.0, 10)],
    "uint32": [(0.0, 4e9, 8), (1000.5, 3.9e9 + 0.25, 11), (0.0, 2.0**32, 16), (7.0, 2.0**32 - 1, 1)],
    "int64": [(-1e6, 1e6, 20), (2.0**53, 2.0**53 + 4096.0, 7), (-7.7e15, 3.3e15, 9),
              (-(2.0**52), 2.0**52, 8), (0.0, 2.0**53 - 1, 1), (2.0**53 - 64, 2.0**53 + 64, 4), (-9.0, 9.0, 6)],
    # float16: edges rounded to float16; subnormal edges; wide ranges kept where numpy's own float16
    # arithmetic (x - lower) does not overflow.
    "float16": [(-1.0, 1.0, 20), (0.1, 3.3333333333, 7), (-8.0, 8.0, 64), (0.0, 1.0, 1024), (1000.0, 1064.0, 64),
                (-3.0, 5.0, 32), (-30000.0, 30000.0, 16), (-1e-4, 1e-4, 8), (-3e-5, 7e-5, 10)],
    "float32": [(-1.0, 1.0, 20), (0.1000000020, 3.3333333333, 7), (-1.2345678901234, 1e-3, 33),
                (-8.0, 8.0, 64), (0.0, 1.0, 1024), (1e6, 1e6 + 64.0, 512), (-3.0, 5.0, 32)],
    "float64": [(-1.0, 1.0, 20), (0.1, 0.7, 3), (-1e-300, 5e-301, 9), (-3.14159, 2.71828, 1000), (-8.0, 8.0, 64)],
}


def even_case(dtype, lo, hi, bins, seed):
    rng = np.random.default_rng(seed)
    edges64 = np.linspace(lo, hi, bins + 1)
    _, numpy_edges = np.histogram(np.zeros(0, dtype), bins=bins, range=(lo, hi))
    a = np.concatenate([
        random_samples(rng, dtype, lo, hi, 20000),
        neighbours(edges64, dtype),
        neighbours(numpy_edges, dtype),
        neighbours([lo, hi], dtype),
    ])
    if np.dtype(dtype).kind == "f":
        a = np.concatenate([a, np.array([np.nan, np.inf, -np.inf, np.nan], dtype)])
    else:
        info = np.iinfo(dtype)
        a = np.concatenate([a, np.array([info.min, info.max], dtype)])
    rng.shuffle(a)
    return a


# ---- even bins ----------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["npy", "raw"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_even_bins_match_numpy_histogram(tmp_path, dtype, kind, backend):
    for lo, hi, bins in RANGES[dtype]:
        seed = seed_for("even", dtype, kind, lo, hi, bins)
        a = even_case(dtype, lo, hi, bins, seed)
        data = save(tmp_path, a, kind)
        expected, edges = numpy_histogram(a, bins=bins, range=(lo, hi))
        what = f"{dtype} {kind} --bins {bins} --range {lo!r} {hi!r}"
        args = ["--bins", bins, "--range", repr(lo), repr(hi)]

        got, stderr = hist_counts(tmp_path, *data, *args, backend=backend)
        check_equal(got, expected, what + " (the default: numpy's closed last bin)", seed)
        check_report(stderr, a.size, expected, seed, what)

        got, stderr = hist_counts(tmp_path, *data, *args, "--last-edge", "exclusive", backend=backend)
        want = exclusive_counts(expected, a, edges[-1])
        check_equal(got, want, what + " (half-open)", seed)
        check_report(stderr, a.size, want, seed, what + " (half-open)")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_nan_and_infinities_are_left_out_and_reported(tmp_path, dtype):
    a = np.array([0.5, np.nan, np.inf, -np.inf, 0.25, np.nan, 2.0, -1.0], dtype=dtype)
    (path,) = save(tmp_path, a, "npy")
    result = run_tally("hist", path, "--bins", 4, "--range", 0, 1, "--backend", "cpu")
    assert re.search(r"left out:\s+6 \(NaN or infinite: 4; outside the bins: 2\)", result.stderr), result.stderr
    assert re.search(r"counted:\s+2\b", result.stderr), result.stderr


# Edges at the ends of the doubles, where the CPU counts NaN and infinities apart from samples
# outside by extending the user's edges (tool/sample_scan.hpp): the split must not move.
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("last_edge", ["inclusive", "exclusive"])
@pytest.mark.parametrize("edges", [[-1.0, 0.0, 1.0], [-DOUBLE_MAX, 0.0, 1.0], [0.0, 1.0, DOUBLE_MAX],
                                   [-DOUBLE_MAX, DOUBLE_MAX]], ids=["finite", "lowest", "largest", "all"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_edges_report_nan_and_infinities_apart(tmp_path, dtype, edges, last_edge, backend):
    values = [np.nan, -np.inf, np.inf, -DOUBLE_MAX, DOUBLE_MAX, 0.5, 1.0, -5.0, 5.0, -1.0, 0.0, np.nan]
    with np.errstate(over="ignore"):  # the largest double is infinite in float32
        a = np.array(values, dtype=dtype)
    (path,) = save(tmp_path, a, "npy")
    edges_path = tmp_path / "edges.npy"
    np.save(edges_path, np.array(edges, np.float64))
    finite = a[np.isfinite(a)].astype(np.float64)
    want = edge_rule_counts(finite, edges, last_edge == "inclusive")
    got, stderr = hist_counts(tmp_path, path, "--edges", edges_path, "--last-edge", last_edge, backend=backend)
    check_equal(got, want, f"{dtype} --edges {edges} --last-edge {last_edge}", 0)
    not_finite = int(np.count_nonzero(~np.isfinite(a)))
    outside = finite.size - int(want.sum())
    assert f"(NaN or infinite: {not_finite}; outside the bins: {outside})" in stderr, stderr


# ---- automatic range ------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_automatic_range_matches_numpy(tmp_path, dtype, backend):
    seed = seed_for("auto", dtype)
    rng = np.random.default_rng(seed)
    cases = {
        "normal": random_samples(rng, dtype, 0, 200, 30000) if dtype in INT_DTYPES
        else rng.normal(size=30000).astype(dtype),
        "one value": np.full(1000, 7, dtype=dtype),
        "two values": np.array([3, 9, 9, 3, 9], dtype=dtype),
    }
    if dtype in FLOAT_DTYPES:
        cases["awkward floats"] = rng.uniform(0.1, 0.7, size=5000).astype(dtype)
        cases["tiny range"] = (1.0 + np.arange(50) * np.finfo(dtype).eps).astype(dtype)
    for name, base in cases.items():
        for bins in (1, 7, 10, 64):
            what = f"{dtype} {name}, --bins {bins}, no --range"
            try:
                _, edges = np.histogram(base, bins=bins)
            except ValueError as numpy_error:  # too many bins for a tiny range: tally must refuse too
                (path,) = save(tmp_path, base, "npy", "too_many")
                result = run_tally("hist", path, "--bins", bins, "--backend", backend, expect=2)
                assert "--bins" in result.stderr, f"{what}: numpy raised {numpy_error}; tally said {result.stderr}"
                continue
            # Samples on and next to numpy's edges, kept inside [min, max] so that the range stays.
            near = neighbours(edges, dtype)
            a = np.concatenate([base, near[(near >= base.min()) & (near <= base.max())]])
            (path,) = save(tmp_path, a, "npy", name.replace(" ", "_"))
            expected, edges_again = numpy_histogram(a, bins=bins)
            assert np.array_equal(edges, edges_again)
            got, stderr = hist_counts(tmp_path, path, "--bins", bins, backend=backend)
            check_equal(got, expected, what + " (the default: numpy's closed last bin)", seed)
            check_report(stderr, a.size, expected, seed, what)
            got, stderr = hist_counts(tmp_path, path, "--bins", bins, "--last-edge", "exclusive", backend=backend)
            want = exclusive_counts(expected, a, edges[-1])
            check_equal(got, want, what + " (half-open)", seed)
            check_report(stderr, a.size, want, seed, what)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_data_over_its_range_counts_as_even_bins_in_float32(tmp_path, backend):
    # numpy computes these edges in float32 arithmetic, and 4096 of them over normal data's range
    # differ from the float64 rule's; the library's float32 rule reproduces them, so the run counts
    # even bins (the estimate), not range bins over numpy's edges.
    rng = np.random.default_rng(seed_for("float32 rule"))
    a = rng.normal(1234.5, 37.0, size=50000).astype(np.float32)
    numpy_edges = np.histogram_bin_edges(a, 4096)
    assert np.any(numpy_edges != np.histogram_bin_edges(a.astype(np.float64), 4096).astype(np.float32))
    near = neighbours(numpy_edges, "float32")
    a = np.concatenate([a, near[(near >= a.min()) & (near <= a.max())]])
    (path,) = save(tmp_path, a, "npy")
    expected, _ = numpy_histogram(a, bins=4096)
    got, stderr = hist_counts(tmp_path, path, "--bins", 4096, backend=backend)
    check_equal(got, expected, "float32 normal data, 4096 bins over its range", seed_for("float32 rule"))
    report = run_tally("hist", path, "--bins", 4096, "--backend", backend)
    assert "even bins" in report.stdout + report.stderr
    assert "range bins" not in report.stdout + report.stderr, report.stderr


def test_automatic_range_edges_in_table_match_numpy(tmp_path):
    a = np.random.default_rng(seed_for("table")).uniform(0.1, 0.7, size=1000).astype(np.float32)
    (path,) = save(tmp_path, a, "npy")
    out = tmp_path / "out.csv"
    run_tally("hist", path, "--bins", 7, "--output", out, "--backend", "cpu")
    rows = np.loadtxt(out, delimiter=",", skiprows=1, dtype=np.float64)
    _, edges = np.histogram(a, bins=7)
    assert np.array_equal(rows[:, 1].astype(np.float32), edges[:-1]), (rows[:, 1], edges)
    assert np.array_equal(rows[:, 2].astype(np.float32), edges[1:]), (rows[:, 2], edges)


def test_automatic_range_refuses_nan_like_numpy(tmp_path):
    (path,) = save(tmp_path, np.array([1.0, np.nan, 2.0]), "npy")
    result = run_tally("hist", path, "--backend", "cpu", expect=2)
    assert "--range" in result.stderr and "sample 1" in result.stderr, result.stderr


def test_default_is_ten_bins_like_numpy(tmp_path):
    a = np.random.default_rng(seed_for("ten")).normal(size=1000)
    (path,) = save(tmp_path, a, "npy")
    got, _ = hist_counts(tmp_path, path)
    check_equal(got, np.histogram(a)[0], "default bins", "fixed")


# ---- range bins (--edges) -------------------------------------------------------------------

EDGE_SETS = {
    "int8": [-128.0, -3.5, 0.0, 0.0, 7.0, 127.0],
    "uint8": [0.0, 1.0, 2.5, 10.0, 10.0, 100.0, 254.5],
    "int16": [-32768.0, -1000.5, 0.0, 0.0, 255.0, 32767.0],
    "uint16": [0.0, 1.0, 255.5, 256.0, 65535.0],
    # float16(0.1) = 0.0999755859375 < 0.1 < the next float16, 0.10003662109375: compared in float64
    "float16": [-1.0, -0.1, 0.0999755859375, 0.1, 0.10003662109375, 1.0 / 3.0, 2.0, 50000.0],
    "int32": [-1000.0, -3.5, 0.0, 0.0, 7.0, 1e6],
    "uint32": [0.0, 1.0, 65536.0, 2.0**31, 4294967295.0],
    "int64": [-2.0**62, -1.0, 0.0, 2.0**53, 2.0**53 + 2.0, 2.0**62],
    "float32": [-1.0, -0.1, 0.1, 0.1000000020, 0.30000001192092896, 1.0 / 3.0, 2.0],
    "float64": [-1.0, -0.1, 0.1, 0.1, 1.0 / 3.0, 2.0, 2.0000000000000004],
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("edges_format", ["text", "npy"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_range_bins_match_numpy_histogram(tmp_path, dtype, edges_format, backend):
    seed = seed_for("edges", dtype, edges_format)
    rng = np.random.default_rng(seed)
    edges = np.array(EDGE_SETS[dtype], dtype=np.float64)
    a = np.concatenate([
        random_samples(rng, dtype, edges[0], edges[-1], 20000),
        random_samples(rng, dtype, edges[1], edges[3], 5000),
        neighbours(edges, dtype),
    ])
    if dtype in FLOAT_DTYPES:
        a = np.concatenate([a, np.array([np.nan, np.inf, -np.inf], dtype)])
    rng.shuffle(a)
    (path,) = save(tmp_path, a, "npy")
    if edges_format == "text":
        edges_path = tmp_path / "edges.txt"
        edges_path.write_text("# edges\n" + "\n".join(repr(float(e)) for e in edges[:3]) + "\n"
                              + "  ".join(repr(float(e)) for e in edges[3:]) + "\n")
    else:
        edges_path = tmp_path / "edges.npy"
        np.save(edges_path, edges)
    expected, _ = np.histogram(a, bins=edges)
    what = f"{dtype} --edges {edges_format} {list(edges)}"

    got, stderr = hist_counts(tmp_path, path, "--edges", edges_path, backend=backend)
    check_equal(got, expected, what + " (the default: numpy's closed last bin)", seed)
    check_report(stderr, a.size, expected, seed, what)

    got, stderr = hist_counts(tmp_path, path, "--edges", edges_path, "--last-edge", "exclusive", backend=backend)
    want = exclusive_counts(expected, a, edges[-1])
    check_equal(got, want, what + " (half-open)", seed)
    check_report(stderr, a.size, want, seed, what + " (half-open)")


# ---- bincount -------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["npy", "raw"])
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_bincount_matches_numpy(tmp_path, dtype, kind, backend):
    seed = seed_for("bincount", dtype, kind)
    rng = np.random.default_rng(seed)
    top = {"uint8": 255, "int8": 127}.get(dtype, 5000)
    a = np.concatenate([rng.integers(0, top + 1, size=30000), [0, top]]).astype(dtype)
    rng.shuffle(a)
    data = save(tmp_path, a, kind)
    expected = np.bincount(a)

    got, stderr = hist_counts(tmp_path, *data, "--bincount", backend=backend)
    check_equal(got, expected, f"{dtype} {kind} --bincount", seed)
    check_report(stderr, a.size, expected, seed, f"{dtype} --bincount")

    for length in (1, 100, top, top + 1, top + 50):
        got, stderr = hist_counts(tmp_path, *data, "--bincount", "--bins", length, backend=backend)
        want = np.bincount(a, minlength=length)[:length]
        check_equal(got, want, f"{dtype} {kind} --bincount --bins {length}", seed)
        check_report(stderr, a.size, want, seed, f"{dtype} --bincount --bins {length}")
        assert f"values >= {length}" in stderr, stderr


def test_bincount_of_an_empty_file_is_empty_like_numpy(tmp_path):
    (path,) = save(tmp_path, np.zeros(0, np.int32), "npy")
    got, _ = hist_counts(tmp_path, path, "--bincount")
    assert got.size == np.bincount(np.zeros(0, np.int64)).size == 0


# ---- streaming ------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int64", "float16", "float32", "float64"])
def test_streamed_chunks_give_the_same_counts(tmp_path, dtype, backend):
    seed = seed_for("stream", dtype)
    rng = np.random.default_rng(seed)
    n = (3 << 20) // np.dtype(dtype).itemsize + 12345  # a bit over 3 MiB: four 1 MiB chunks
    a = random_samples(rng, dtype, 30, 250, n)  # 8..272: no negatives, for --bincount
    (path,) = save(tmp_path, a, "npy")
    modes = [["--bins", 13, "--range", 10, 200], ["--bins", 13], ["--edges", tmp_path / "edges.txt"]]
    (tmp_path / "edges.txt").write_text("0 1 2 3 50 100 249.5\n")
    if dtype in INT_DTYPES:
        modes.append(["--bincount"])
    for mode in modes:
        whole, whole_err = hist_counts(tmp_path, path, *mode, backend=backend)
        chunked, chunked_err = hist_counts(tmp_path, path, *mode, "--chunk-mb", 1, backend=backend)
        check_equal(chunked, whole, f"{dtype} {mode}: --chunk-mb 1 vs one chunk", seed)
        assert report_numbers(chunked_err) == report_numbers(whole_err), (whole_err, chunked_err)
        assert "4 chunks" in chunked_err and "1 chunk " in whole_err, (whole_err, chunked_err)
    expected, _ = numpy_histogram(a, bins=13, range=(10, 200))
    check_equal(hist_counts(tmp_path, path, "--bins", 13, "--range", 10, 200, "--chunk-mb", 1,
                            backend=backend)[0], expected, f"{dtype} streamed vs numpy", seed)


def test_streamed_raw_file_matches_numpy(tmp_path):
    seed = seed_for("stream raw")
    a = np.random.default_rng(seed).normal(size=(5 << 20) // 8).astype(np.float64)
    data = save(tmp_path, a, "raw")
    got, stderr = hist_counts(tmp_path, *data, "--bins", 50, "--chunk-mb", 1)
    check_equal(got, np.histogram(a, bins=50)[0], "float64 raw, automatic range, 5 chunks", seed)
    assert "5 chunks" in stderr, stderr


# ---- float16 at its limits ------------------------------------------------------------------

# Zeros of both signs, the smallest subnormal, the largest subnormal, the smallest normal, the
# largest finite value and its neighbour, infinities, NaN.
FLOAT16_SPECIALS = np.array([0.0, -0.0, 2.0**-24, -2.0**-24, 2.0**-14 - 2.0**-24, -(2.0**-14 - 2.0**-24), 2.0**-14,
                             -2.0**-14, 65504.0, -65504.0, 65472.0, np.inf, -np.inf, np.nan, 1.0, -1.0], np.float16)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["npy", "raw"])
def test_float16_specials_and_subnormal_bins_match_numpy(tmp_path, kind, backend):
    for lo, hi, bins in [(-1.0, 1.0, 16), (-2.0**-14, 2.0**-14, 8), (0.0, 0.1, 10), (-3e-5, 7e-5, 10),
                         (-2.0**-24, 2.0**-23, 3), (0.0, 2.0**-14, 1024)]:
        seed = seed_for("float16 specials", kind, lo, hi, bins)
        rng = np.random.default_rng(seed)
        _, numpy_edges = np.histogram(np.zeros(0, np.float16), bins=bins, range=(lo, hi))
        a = np.concatenate([FLOAT16_SPECIALS, random_samples(rng, "float16", lo, hi, 5000),
                            neighbours(numpy_edges, "float16"), neighbours(np.linspace(lo, hi, bins + 1), "float16")])
        rng.shuffle(a)
        data = save(tmp_path, a, kind)
        expected, edges = numpy_histogram(a, bins=bins, range=(lo, hi))
        what = f"float16 {kind} --bins {bins} --range {lo!r} {hi!r}"
        args = ["--bins", bins, "--range", repr(lo), repr(hi)]
        got, stderr = hist_counts(tmp_path, *data, *args, backend=backend)
        check_equal(got, expected, what + " (the default: numpy's closed last bin)", seed)
        check_report(stderr, a.size, expected, seed, what)
        assert re.search(r"NaN or infinite: 3;", stderr), stderr
        got, stderr = hist_counts(tmp_path, *data, *args, "--last-edge", "exclusive", backend=backend)
        check_equal(got, exclusive_counts(expected, a, edges[-1]), what + " (half-open)", seed)


# numpy finds a sample's bin from its proportion of the range, then moves it at most one bin to agree
# with the edges. Over [-0, 2^-14] in 100 bins its float16 linspace rounds the step, 10.24 subnormal
# units, to 10, so the edges drift two bins from the proportions and some samples land in other bins
# than numpy's own edges say; these are compared with numpy's edges only.
NUMPY_FLOAT16_SEARCH_MISSES = {("subnormals and zeros", 100)}


@pytest.mark.parametrize("backend", BACKENDS)
def test_float16_range_from_the_data_has_numpys_float16_edges(tmp_path, backend):
    # numpy computes these edges in float16 arithmetic; the table must print them and the counts
    # follow them (numpy's counts too, but where its float16 search misses).
    seed = seed_for("float16 data range")
    rng = np.random.default_rng(seed)
    cases = {
        "subnormals and zeros": np.array([-0.0, 0.0, 2.0**-24, 3 * 2.0**-24, 2.0**-14, 100 * 2.0**-24], np.float16),
        "minus zero lowest": np.array([-0.0, 1.0, 0.5, 0.25], np.float16),
        "largest magnitudes apart": np.array([-30000.0, 32000.0, 0.0, 1.0], np.float16),
        "awkward": rng.uniform(0.1, 0.7, size=3000).astype(np.float16),
        "wide": (rng.normal(size=3000) * 1000).astype(np.float16),
        "near the top": rng.uniform(60000, 65504, size=3000).astype(np.float16),
    }
    for name, base in cases.items():
        for bins in (3, 7, 10, 33, 100):
            what = f"float16 {name}, --bins {bins}, no --range"
            try:
                _, edges = np.histogram(base, bins=bins)
            except ValueError:  # numpy: too many bins for the range; tally must refuse too
                (path,) = save(tmp_path, base, "npy", "too_many")
                result = run_tally("hist", path, "--bins", bins, "--backend", backend, expect=2)
                assert "--bins" in result.stderr and "float16" in result.stderr, f"{what}: {result.stderr}"
                continue
            with np.errstate(over="ignore"):  # the neighbour of 65504 is infinite
                near = neighbours(edges, "float16")
            a = np.concatenate([base, near[(near >= base.min()) & (near <= base.max())]])
            (path,) = save(tmp_path, a, "npy", "data")
            if (name, bins) in NUMPY_FLOAT16_SEARCH_MISSES:
                _, edges_again = np.histogram(a, bins=bins)
                expected = edge_rule_counts(a, edges_again, True)
            else:
                expected, edges_again = numpy_histogram(a, bins=bins)
            assert np.array_equal(edges, edges_again) and edges.dtype == np.float16
            out = tmp_path / "table.csv"
            result = run_tally("hist", path, "--bins", bins, "--backend", backend, "--output", out)
            table = np.loadtxt(out, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
            check_equal(table[:, 3].astype(np.uint64), expected, what, seed)
            # The printed edges read back as numpy's float16 edges, bit for bit.
            assert np.array_equal(table[:, 1].astype(np.float16).view(np.uint16), edges[:-1].view(np.uint16)), (
                what, table[:, 1], edges)
            assert np.array_equal(table[:, 2].astype(np.float16).view(np.uint16), edges[1:].view(np.uint16)), (
                what, table[:, 2], edges)
            check_report(result.stderr, a.size, expected, seed, what)


def test_float16_edges_numpy_rounds_from_float64_print_as_numpy_prints_them(tmp_path):
    (path,) = save(tmp_path, np.array([0.1, 0.2, 3.3], np.float16), "npy")
    out = tmp_path / "table.csv"
    run_tally("hist", path, "--bins", 3, "--range", 0.1, 3.3, "--output", out, "--backend", "cpu")
    _, edges = np.histogram(np.zeros(0, np.float16), bins=3, range=(0.1, 3.3))
    lines = out.read_text().splitlines()[1:]
    assert [line.split(",")[1] for line in lines] == [str(e) for e in edges[:-1]], (lines, edges)
    assert [line.split(",")[2] for line in lines] == [str(e) for e in edges[1:]], (lines, edges)


def test_float16_data_whose_range_overflows_float16_needs_a_range(tmp_path):
    # max - min = 120000 is infinite in float16: numpy's edges are NaN and infinite, and it raises.
    a = np.array([-60000.0, 60000.0, 1.0], np.float16)
    with np.errstate(over="ignore", invalid="ignore"), pytest.raises(ValueError):
        np.histogram(a, bins=4)
    (path,) = save(tmp_path, a, "npy")
    result = run_tally("hist", path, "--bins", 4, "--backend", "cpu", expect=2)
    assert "--range" in result.stderr and "float16" in result.stderr, result.stderr
    got, _ = hist_counts(tmp_path, path, "--bins", 4, "--range", -60000, 60000)
    check_equal(got, numpy_histogram(a.astype(np.float64), bins=4, range=(-60000, 60000))[0],
                "float16 with --range", "fixed")


def test_one_byte_npy_descr_of_any_byte_order_is_int8(tmp_path):
    a = np.array([5, 0, 127, 5, 3], np.int8)
    path = npy(tmp_path, a)
    content = path.read_bytes()
    assert b"'|i1'" in content
    for order in (b"<", b">", b"="):
        path.write_bytes(content.replace(b"'|i1'", b"'" + order + b"i1'"))
        got, stderr = hist_counts(tmp_path, path, "--bincount")
        check_equal(got, np.bincount(a), f"{order!r}i1 .npy", "fixed")
        assert "int8 samples (.npy)" in stderr, stderr


# ---- bfloat16: raw files, the library's rule -------------------------------------------------

BFLOAT16_LARGEST = float.fromhex("0x1.fep127")


def bfloat16_bits(values):
    """The bfloat16 bits of float32 `values`: the top 16 bits, rounded to nearest, ties to even
    (NaN stays a quiet NaN of its sign)."""
    f = np.asarray(values, np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return np.where(np.isnan(f), 0x7FC0 | ((bits >> 16) & 0x8000), rounded).astype(np.uint16)


def bfloat16_values(bits):
    """bfloat16 bits as the float64 values they are."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def round_to_bfloat16(x):
    """float64 `x` rounded to the nearest bfloat16 in float64 arithmetic, ties to even (8
    significant bits, subnormals from 2^-126 down, infinity beyond the largest): the rounding of
    the library's bfloat16 edges, done apart from bfloat16_bits."""
    x = np.asarray(x, np.float64)
    _, exponent = np.frexp(x)  # |x| in [2^(exponent - 1), 2^exponent)
    unit = np.ldexp(1.0, np.maximum(exponent, -125) - 8)
    rounded = np.round(x / unit) * unit  # x / unit is exact; np.round rounds half to even
    return np.where(np.abs(rounded) > BFLOAT16_LARGEST, np.copysign(np.inf, x), rounded)


def bfloat16_edges(lo, hi, bins):
    """The library's even edges for bfloat16 samples: lo + i * ((hi - lo) / bins) in float64 (as
    numpy.linspace computes it), the last one hi, each rounded to bfloat16."""
    return round_to_bfloat16(np.linspace(lo, hi, bins + 1))


def bfloat16_neighbours(values):
    """The bfloat16 nearest to each value and the next ones down and up, as bits."""
    bits = bfloat16_bits(np.asarray(values, np.float32)).astype(np.int32)
    finite = np.isfinite(bfloat16_values(bits.astype(np.uint16)))
    bits = bits[finite]
    # bits + 1 and - 1 step the magnitude; for negative values that steps the other way, just as well
    return np.concatenate([bits, bits + 1, bits - 1]).clip(0, 0xFFFF).astype(np.uint16)


# Zeros, the smallest subnormal, the smallest normal, the largest finite value, infinities and NaN.
BFLOAT16_SPECIAL_BITS = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x0080, 0x8080, 0x007F, 0x7F7F, 0xFF7F, 0x7F80,
                                  0xFF80, 0x7FC0, 0x3F80, 0xBF80], np.uint16)


def save_bfloat16(tmp_path, bits, name="data"):
    path = tmp_path / f"{name}.bf16"
    np.asarray(bits, "<u2").tofile(path)
    return [path, "--dtype", "bfloat16"]


def test_bfloat16_rounding_here_agrees_with_itself():
    # The two roundings the bfloat16 tests rest on, done two ways, must agree on float32 inputs,
    # ties included (bit patterns with the low 16 bits 0x8000).
    rng = np.random.default_rng(seed_for("bfloat16 rounding"))
    bits = rng.integers(0, 2**32, size=200000, dtype=np.uint64)
    bits[:1000] = (bits[:1000] & 0xFFFF0000) | 0x8000
    f = bits.astype(np.uint32).view(np.float32)
    f = f[np.isfinite(f)]
    f = f[np.abs(f.astype(np.float64)) < BFLOAT16_LARGEST]
    assert np.array_equal(bfloat16_values(bfloat16_bits(f)), round_to_bfloat16(f.astype(np.float64)))
    assert bfloat16_values(bfloat16_bits(np.float32(1.0 + 2.0**-8)))[()] == 1.0  # a tie to even, down
    assert bfloat16_values(bfloat16_bits(np.float32(1.0 + 3 * 2.0**-8)))[()] == 1.0 + 2.0**-6  # up


def bfloat16_case(rng, lo, hi, edges, n=20000):
    """bfloat16 bits: random values over [lo, hi] and beyond, the specials, values on and next to
    `edges` and to lo and hi."""
    width = hi - lo
    largest32 = float(np.finfo(np.float32).max)
    spread = bfloat16_bits(np.clip(rng.uniform(lo - 0.1 * width, hi + 0.1 * width, size=n), -largest32, largest32)
                           .astype(np.float32))
    bits = np.concatenate([spread, BFLOAT16_SPECIAL_BITS, bfloat16_neighbours(edges), bfloat16_neighbours([lo, hi])])
    rng.shuffle(bits)
    return bits


@pytest.mark.parametrize("backend", BACKENDS)
def test_bfloat16_even_bins_follow_the_rule_computed_here(tmp_path, backend):
    for lo, hi, bins in [(-1.0, 1.0, 20), (0.1, 3.3333333333, 7), (-8.0, 8.0, 64), (0.0, 1000.0, 100),
                         (-1e-38, 1e-38, 10), (1e30, 3e30, 5), (-3e38, 3e38, 6), (0.0, 256.0, 256)]:
        seed = seed_for("bfloat16 even", lo, hi, bins)
        edges = bfloat16_edges(lo, hi, bins)
        assert np.all(edges[:-1] < edges[1:]) and np.all(np.isfinite(edges)), (lo, hi, bins, edges)
        bits = bfloat16_case(np.random.default_rng(seed), lo, hi, edges)
        x = bfloat16_values(bits)
        data = save_bfloat16(tmp_path, bits)
        what = f"bfloat16 --bins {bins} --range {lo!r} {hi!r}"
        args = ["--bins", bins, "--range", repr(lo), repr(hi)]
        for include_upper in (True, False):
            expected = edge_rule_counts(x, edges, include_upper)
            flags = [] if include_upper else ["--last-edge", "exclusive"]
            got, stderr = hist_counts(tmp_path, *data, *args, *flags, backend=backend)
            check_equal(got, expected, f"{what} {flags}", seed)
            check_report(stderr, x.size, expected, seed, what)
            assert f"NaN or infinite: {np.count_nonzero(~np.isfinite(x))};" in stderr, stderr


@pytest.mark.parametrize("backend", BACKENDS)
def test_bfloat16_range_from_the_data_follows_the_rule_computed_here(tmp_path, backend):
    seed = seed_for("bfloat16 data range")
    rng = np.random.default_rng(seed)
    cases = {
        "normal": bfloat16_bits(rng.normal(size=5000).astype(np.float32)),
        "one value": bfloat16_bits(np.full(100, 7, np.float32)),
        "two values": bfloat16_bits(np.array([3, 9, 9, 3, 9], np.float32)),
        "subnormals": np.array([0x0000, 0x8000, 0x0001, 0x0005, 0x0080, 0x0040], np.uint16),
        "extremes": np.array([0x7F7F, 0xFF7F, 0x3F80, 0x0000], np.uint16),
    }
    for name, bits in cases.items():
        x = bfloat16_values(bits)
        lo, hi = x.min(), x.max()
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        for bins in (1, 7, 10, 64):
            what = f"bfloat16 {name}, --bins {bins}, no --range"
            edges = bfloat16_edges(lo, hi, bins)
            data = save_bfloat16(tmp_path, bits)
            if not np.all(edges[:-1] < edges[1:]):  # edges equal in bfloat16: too many bins, as numpy would say
                result = run_tally("hist", *data, "--bins", bins, "--backend", backend, expect=2)
                assert "--bins" in result.stderr and "bfloat16" in result.stderr, f"{what}: {result.stderr}"
                continue
            for include_upper in (True, False):
                expected = edge_rule_counts(x, edges, include_upper)
                flags = [] if include_upper else ["--last-edge", "exclusive"]
                got, stderr = hist_counts(tmp_path, *data, "--bins", bins, *flags, backend=backend)
                check_equal(got, expected, f"{what} {flags}", seed)
                check_report(stderr, x.size, expected, seed, what)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bfloat16_range_bins_compare_in_float64_like_numpy(tmp_path, backend):
    seed = seed_for("bfloat16 edges")
    rng = np.random.default_rng(seed)
    # 0.1 lies between the bfloat16s 0.099609375 and 0.10009765625.
    edges = np.array([-1.0, -0.1, 0.099609375, 0.1, 0.10009765625, 1.0 / 3.0, 2.0, 3e38])
    bits = bfloat16_case(rng, -1.0, 2.0, edges)
    x = bfloat16_values(bits)
    edges_path = tmp_path / "edges.npy"
    np.save(edges_path, edges)
    data = save_bfloat16(tmp_path, bits)
    finite = x[np.isfinite(x)]
    expected, _ = np.histogram(finite, bins=edges)  # float64 samples: numpy compares exactly
    got, stderr = hist_counts(tmp_path, *data, "--edges", edges_path, backend=backend)
    check_equal(got, expected, "bfloat16 --edges (the default: numpy's closed last bin)", seed)
    check_report(stderr, x.size, expected, seed, "bfloat16 --edges")
    got, _ = hist_counts(tmp_path, *data, "--edges", edges_path, "--last-edge", "exclusive", backend=backend)
    check_equal(got, exclusive_counts(expected, finite, edges[-1]), "bfloat16 --edges (half-open)", seed)


# ---- .npy files -----------------------------------------------------------------------------

@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_npy_format_versions(tmp_path, version):
    a = np.arange(100, dtype=np.int32)
    path = tmp_path / "v.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array(f, a, version=version)
    got, _ = hist_counts(tmp_path, path, "--bincount")
    check_equal(got, np.bincount(a), f"format version {version}", "fixed")


def test_npy_of_several_dimensions_is_flattened(tmp_path):
    a = np.random.default_rng(seed_for("2d")).normal(size=(30, 40))
    (path,) = save(tmp_path, a, "npy")
    got, _ = hist_counts(tmp_path, path, "--bins", 9)
    check_equal(got, np.histogram(a, bins=9)[0], "2-d array", "fixed")


def test_output_npy_is_readable_by_numpy(tmp_path):
    (path,) = save(tmp_path, np.arange(1000, dtype=np.uint8), "npy")  # wraps: 0..255 several times
    got, _ = hist_counts(tmp_path, path, "--bincount")
    check_equal(got, np.bincount(np.arange(1000, dtype=np.uint8)), "uint8 bincount", "fixed")


def test_table_on_stdout_lists_every_bin(tmp_path):
    a = np.array([0.0, 0.5, 1.5, 2.5, 2.9, 3.0], dtype=np.float64)
    (path,) = save(tmp_path, a, "npy")
    result = run_tally("hist", path, "--bins", 3, "--range", 0, 3, "--backend", "cpu")
    lines = result.stdout.strip().splitlines()
    assert lines[0].split() == ["bin", "lower", "upper", "count"], result.stdout
    # 3.0, the last edge, is in the last bin, as numpy.histogram(a, 3, range=(0, 3)) counts it: [2, 1, 3].
    assert [line.split() for line in lines[1:]] == [["0", "0", "1", "2"], ["1", "1", "2", "1"], ["2", "2", "3", "3"]]
    assert "strategy:" in result.stderr and "backend:  cpu" in result.stderr, result.stderr


def test_csv_output_columns(tmp_path):
    a = np.array([1, 1, 3, 7], dtype=np.int32)
    (path,) = save(tmp_path, a, "npy")
    out = tmp_path / "out.csv"
    run_tally("hist", path, "--bincount", "--output", out)
    assert out.read_text().splitlines() == ["value,count", "0,0", "1,2", "2,0", "3,1", "4,0", "5,0", "6,0", "7,1"]
    run_tally("hist", path, "--bins", 2, "--range", 0, 8, "--output", out)
    assert out.read_text().splitlines() == ["bin,lower,upper,count", "0,0,4,3", "1,4,8,1"]


def test_dtype_that_agrees_with_the_npy_header_is_accepted(tmp_path):
    (path,) = save(tmp_path, np.arange(10, dtype=np.float32), "npy")
    run_tally("hist", path, "--dtype", "float32")


# ---- numpy's default: `tally hist FILE` is numpy.histogram(np.load(FILE)) -----------------------

def table_of(stdout):
    """The table `tally hist` prints on stdout: the counts, and the lower and upper edges as printed."""
    rows = [line.split() for line in stdout.strip().splitlines()]
    assert rows[0] == ["bin", "lower", "upper", "count"], stdout
    return (np.array([int(r[3]) for r in rows[1:]], np.uint64), [r[1] for r in rows[1:]], [r[2] for r in rows[1:]])


def with_the_maximum_repeated(rng, a, times=7):
    """`a` with `times` more samples equal to its largest: the samples half-open bins would leave out."""
    a = a.copy()
    a[rng.choice(a.size, times, replace=False)] = a.max()
    return a


@pytest.mark.parametrize("dtype", DTYPES)
def test_plain_tally_hist_is_numpy_histogram_of_np_load(tmp_path, dtype):
    seed = seed_for("plain", dtype)
    rng = np.random.default_rng(seed)
    lo = 0 if dtype.startswith("u") else -50
    a = with_the_maximum_repeated(rng, random_samples(rng, dtype, lo, 100, 5000))
    path = npy(tmp_path, a)
    result = run_tally("hist", path)  # nothing else: the defaults are numpy's
    counts, lowers, uppers = table_of(result.stdout)
    expected, edges = np.histogram(np.load(path))
    check_equal(counts, expected, f"tally hist FILE ({dtype}) against numpy.histogram(np.load(FILE))", seed)
    assert counts[-1] >= np.count_nonzero(a == a.max()) >= 8, (counts, a.max())
    # The table's edges read back as numpy's, in numpy's dtype for them.
    assert np.array_equal(np.array(lowers, np.float64).astype(edges.dtype), edges[:-1]), (lowers, edges)
    assert np.array_equal(np.array(uppers, np.float64).astype(edges.dtype), edges[1:]), (uppers, edges)

    top = float(a.max())
    edges_path = tmp_path / "edges.txt"
    edges_path.write_text(" ".join(repr(float(e)) for e in sorted({lo, -1.5, 0, 2.25, 7, top}) if e >= lo) + "\n")
    for args, numpy_call in [
        (["--bins", 7], lambda x: np.histogram(x, 7)),
        (["--range", lo, top], lambda x: np.histogram(x, range=(lo, top))),
        (["--bins", 33, "--range", repr(lo + 0.5), top], lambda x: np.histogram(x, 33, range=(lo + 0.5, top))),
        (["--edges", edges_path], lambda x: np.histogram(x, bins=np.loadtxt(edges_path))),
    ]:
        result = run_tally("hist", path, *args)
        check_equal(table_of(result.stdout)[0], numpy_call(np.load(path))[0], f"tally hist FILE {args} ({dtype})",
                    seed)


def test_include_upper_edge_is_still_taken_and_is_the_default(tmp_path):
    a = with_the_maximum_repeated(np.random.default_rng(seed_for("old flag")), np.arange(100.0))
    path = npy(tmp_path, a)
    default, _ = hist_counts(tmp_path, path)
    old, _ = hist_counts(tmp_path, path, "--include-upper-edge")
    named, _ = hist_counts(tmp_path, path, "--last-edge", "inclusive")
    check_equal(old, default, "--include-upper-edge", "fixed")
    check_equal(named, default, "--last-edge inclusive", "fixed")
    check_equal(default, np.histogram(a)[0], "the default", "fixed")


def test_half_open_bins_say_what_they_left_out(tmp_path):
    a = with_the_maximum_repeated(np.random.default_rng(seed_for("note")), np.arange(100.0), times=4)
    path = npy(tmp_path, a)
    got, stderr = hist_counts(tmp_path, path, "--last-edge", "exclusive")
    check_equal(got, exclusive_counts(np.histogram(a)[0], a, a.max()), "--last-edge exclusive", "fixed")
    assert "5 samples equal to the largest value, the last edge, are left out (--last-edge exclusive)" in stderr, stderr
    _, stderr = hist_counts(tmp_path, path)
    assert "note:" not in stderr and "as numpy.histogram closes it" in stderr, stderr


def test_quiet_prints_no_report_but_the_warnings(tmp_path):
    path = npy(tmp_path, np.arange(50, dtype=np.int64))
    loud = run_tally("hist", path, "--bincount")
    quiet = run_tally("hist", path, "--bincount", "--quiet")
    assert quiet.stdout == loud.stdout and "counted:" in loud.stderr and quiet.stderr == "", quiet.stderr
    with open(path, "ab") as f:
        f.write(b"\1\2\3")
    quiet = run_tally("hist", path, "--bincount", "--quiet")
    assert quiet.stderr == "tally hist: warning: 3 bytes after the last sample were ignored (as numpy.load ignores them)\n", (
        quiet.stderr)


# ---- every array file numpy saves -----------------------------------------------------------------

LAYOUTS = {
    "C order": lambda a: a,
    "Fortran order": np.asfortranarray,
    "big-endian": lambda a: a.astype(a.dtype.newbyteorder(">")),
    "big-endian, Fortran order": lambda a: np.asfortranarray(a.astype(a.dtype.newbyteorder(">"))),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_layout_numpy_saves_counts_as_numpy(tmp_path, dtype, layout):
    seed = seed_for("layout", dtype, layout)
    rng = np.random.default_rng(seed)
    a = with_the_maximum_repeated(rng, random_samples(rng, dtype, 12, 120, 3 * 4 * 250)).reshape(3, 4, 250)  # >= 0
    path = npy(tmp_path, LAYOUTS[layout](a))
    loaded = np.load(path)
    big_endian = "big" in layout and loaded.dtype.itemsize > 1  # one byte has no order: numpy writes '|'
    assert loaded.flags.f_contiguous == ("Fortran" in layout) and (loaded.dtype.byteorder == ">") == big_endian
    what = f"{dtype} {layout}"
    got, stderr = hist_counts(tmp_path, path)
    check_equal(got, np.histogram(loaded)[0], what, seed)
    assert ("big-endian" in stderr) == big_endian and ("Fortran order" in stderr) == ("Fortran" in layout), stderr
    got, _ = hist_counts(tmp_path, path, "--bins", 13, "--range", 10, 100)
    check_equal(got, np.histogram(loaded, 13, range=(10, 100))[0], what + " --bins 13 --range 10 100", seed)
    if dtype in INT_DTYPES:
        got, _ = hist_counts(tmp_path, path, "--bincount")
        check_equal(got, np.bincount(loaded.ravel().astype(np.int64)), what + " --bincount", seed)


@pytest.mark.parametrize("dtype", ["int16", "float32", "float64"])
def test_big_endian_fortran_order_streamed_in_chunks(tmp_path, dtype):
    seed = seed_for("layout chunks", dtype)
    rng = np.random.default_rng(seed)
    n = (3 << 20) // np.dtype(dtype).itemsize + 1000  # four chunks of 1 MiB
    a = random_samples(rng, dtype, 0, 300, n - n % 8).reshape(8, -1)
    path = npy(tmp_path, np.asfortranarray(a.astype(a.dtype.newbyteorder(">"))))
    got, stderr = hist_counts(tmp_path, path, "--bins", 17, "--chunk-mb", 1)
    check_equal(got, np.histogram(a, 17)[0], f"{dtype} big-endian Fortran order in chunks", seed)
    assert "4 chunks" in stderr, stderr


def test_bool_arrays_count_as_uint8_like_numpy(tmp_path):
    seed = seed_for("bool")
    a = np.random.default_rng(seed).random((40, 25)) < 0.3
    for stored in (a, np.asfortranarray(a)):
        path = npy(tmp_path, stored)
        with pytest.warns(RuntimeWarning):  # numpy: "Converting input from bool to uint8"
            expected = np.histogram(a)[0]
        got, stderr = hist_counts(tmp_path, path)
        check_equal(got, expected, "bool .npy", seed)
        assert "uint8 samples (.npy" in stderr and "bool read as uint8" in stderr, stderr
        got, _ = hist_counts(tmp_path, path, "--bincount")
        check_equal(got, np.bincount(a.ravel()), "bool .npy --bincount", seed)
    # Bytes other than 0 and 1 are true, as numpy reads them.
    path = npy_by_hand(tmp_path, b"{'descr': '|b1', 'fortran_order': False, 'shape': (5,)}", b"\0\2\xff\1\0",
                       name="bools.npy")
    got, _ = hist_counts(tmp_path, path, "--bincount")
    check_equal(got, np.bincount(np.load(path)), "bool bytes other than 0 and 1", "fixed")


def test_messages_name_a_sample_by_its_numpy_index_in_either_order(tmp_path):
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    a[2, 1] = -7  # flat index 9 in C order; position 5 in a Fortran-order file
    f = np.ones((2, 3))
    f[1, 0] = np.nan  # flat index 3; position 1 in a Fortran-order file
    for order in (np.ascontiguousarray, np.asfortranarray):
        result = run_tally("hist", npy(tmp_path, order(a)), "--bincount", expect=2)
        assert "sample 9 (index [2, 1] of the 3x4 array) of FILE" in result.stderr and "is -7" in result.stderr, (
            result.stderr)
        result = run_tally("hist", npy(tmp_path, order(f)), expect=2)
        assert "sample 3 (index [1, 0] of the 2x3 array)" in result.stderr and "is nan" in result.stderr, result.stderr


# (samples dtype, edges as given) where numpy compares in a common dtype; every edge is exact in float64.
EDGE_VALUES = {"signed": [-3, 0, 2, 7, 50, 100], "unsigned": [0, 2, 7, 50, 100, 200],
               "float": [-3.5, 0.1, 2.0, 7.25, 50.0, 100.0]}


@pytest.mark.parametrize("edge_dtype", ["float16", "float32", "float64", ">f8", ">f4", "<f2", "int8", "int16", "int32",
                                        "int64", ">i8", "uint8", "uint16", "uint32", ">u4"])
def test_edges_of_any_numeric_dtype_count_as_numpy(tmp_path, edge_dtype):
    kind = np.dtype(edge_dtype).kind
    values = EDGE_VALUES["float" if kind == "f" else "unsigned" if kind == "u" else "signed"]
    edges = np.array(values, np.float64).astype(edge_dtype)
    edges_path = npy(tmp_path, edges, "edges")
    for dtype in ["int8", "uint8", "int32", "int64", "float16", "float32", "float64"]:
        seed = seed_for("edge dtypes", edge_dtype, dtype)
        rng = np.random.default_rng(seed)
        a = np.concatenate([random_samples(rng, dtype, -10, 210, 5000), neighbours(edges.astype(np.float64), dtype)])
        expected = np.histogram(a, bins=np.load(edges_path))[0]
        got, stderr = hist_counts(tmp_path, npy(tmp_path, a), "--edges", edges_path)
        check_equal(got, expected, f"{dtype} samples, {edge_dtype} edges", seed)
    # A 1-d array marked Fortran order is the same bytes as C order.
    fortran = npy_by_hand(tmp_path, b"{'descr': '<f8', 'fortran_order': True, 'shape': (3,)}",
                          np.array([0.0, 1.5, 4.0]).tobytes(), name="fortran-edges.npy")
    a = np.arange(10.0) / 2
    got, _ = hist_counts(tmp_path, npy(tmp_path, a), "--edges", fortran)
    check_equal(got, np.histogram(a, bins=[0.0, 1.5, 4.0])[0], "1-d Fortran-order edges", "fixed")


# ---- stdin ----------------------------------------------------------------------------------------

def run_tally_stdin(*args, stdin, expect=0, env=None):
    """Runs tally with `stdin`: bytes (a pipe) or an open file (a redirect)."""
    piped = isinstance(stdin, bytes)
    result = subprocess.run([TALLY, *map(str, args)], input=stdin if piped else None, stdin=None if piped else stdin,
                            capture_output=True, timeout=300, env=env)
    stderr = result.stderr.decode(errors="replace")
    assert result.returncode == expect, f"tally {args}: exit code {result.returncode}, expected {expect}\n{stderr}"
    return result, stderr


@pytest.mark.parametrize("how", ["pipe", "redirect"])
def test_stdin_counts_as_the_file_would(tmp_path, how):
    seed = seed_for("stdin", how)
    rng = np.random.default_rng(seed)
    a = with_the_maximum_repeated(rng, rng.normal(size=(3 << 20) // 4 + 123).astype(np.float32))  # 4 chunks of 1 MiB
    path = npy(tmp_path, a)
    raw = tmp_path / "raw.bin"
    a.tofile(raw)
    ids = rng.integers(0, 300, size=20000).astype(np.int16)
    ids_path = npy(tmp_path, ids, "ids")
    cases = [
        (path, [], np.histogram(a)[0]),
        (path, ["--bins", 13, "--chunk-mb", 1], np.histogram(a, 13)[0]),  # two passes over four chunks
        (raw, ["--dtype", "float32", "--bins", 5, "--range", -1, 1], np.histogram(a, 5, range=(-1, 1))[0]),
        (ids_path, ["--bincount"], np.bincount(ids)),
    ]
    for source, args, expected in cases:
        out = tmp_path / "out.npy"
        with open(source, "rb") as f:
            stdin = f.read() if how == "pipe" else f
            _, stderr = run_tally_stdin("hist", "-", "--output", out, *args, stdin=stdin)
        check_equal(np.load(out), expected, f"stdin ({how}) {source.name} {args}", seed)
        assert stderr.startswith("tally hist: stdin: "), stderr


def test_stdin_npy_with_a_dtype_that_disagrees_is_refused(tmp_path):
    _, stderr = run_tally_stdin("hist", "-", "--dtype", "int32", stdin=npy(tmp_path, np.arange(4.0)).read_bytes(),
                                expect=2)
    assert stderr.startswith("tally hist: ") and "'-' (stdin)" in stderr and "--dtype" in stderr, stderr


def test_raw_stdin_needs_a_dtype(tmp_path):
    _, stderr = run_tally_stdin("hist", "-", stdin=b"\0" * 16, expect=2)
    assert "--dtype" in stderr and "'-' (stdin)" in stderr, stderr


def test_stdin_that_is_a_terminal_is_refused(tmp_path):
    leader, follower = os.openpty()
    try:
        with os.fdopen(follower, "rb", closefd=False) as terminal:
            _, stderr = run_tally_stdin("hist", "-", stdin=terminal, expect=2)
    finally:
        os.close(leader)
        os.close(follower)
    assert "terminal" in stderr and "'-' (stdin)" in stderr, stderr


def test_stdin_copy_in_a_folder_that_cannot_take_it_is_an_error_naming_the_folder(tmp_path):
    missing = tmp_path / "no-such-folder"
    env = dict(os.environ, TMPDIR=str(missing))
    _, stderr = run_tally_stdin("hist", "-", stdin=npy(tmp_path, np.arange(4.0)).read_bytes(), env=env, expect=2)
    assert str(missing) in stderr and "TMPDIR" in stderr and "'-' (stdin)" in stderr, stderr


def test_a_named_pipe_is_read(tmp_path):
    a = np.random.default_rng(seed_for("fifo")).normal(size=10000)
    content = npy(tmp_path, a).read_bytes()
    fifo = tmp_path / "samples.fifo"
    os.mkfifo(fifo)
    process = subprocess.Popen([TALLY, "hist", str(fifo), "--bins", "9"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    with open(fifo, "wb") as writer:
        writer.write(content)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    check_equal(table_of(stdout)[0], np.histogram(a, 9)[0], "a named pipe", "fixed")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_pipe_whose_bins_are_known_is_counted_as_it_arrives(tmp_path, backend):
    """With a range, edges or a bincount's --bins, a pipe is read once as it arrives (no temporary
    copy: a TMPDIR that does not exist is never needed), with the counts and the report of the file."""
    seed = seed_for("one pass", backend)
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(3 << 20) // 4 + 77).astype(np.float32)  # four chunks of 1 MiB
    a[::1001] = np.nan
    a[5::997] = np.inf
    ids = rng.integers(0, 300, size=70001).astype(np.int16)
    edges = tmp_path / "edges.txt"
    edges.write_text("-2 -0.5 0 0.25 1 3")
    raw = tmp_path / "raw.bin"
    a.tofile(raw)
    cases = [
        (npy(tmp_path, a), ["--bins", 13, "--range", -1, 1, "--chunk-mb", 1], np.histogram(a, 13, range=(-1, 1))[0]),
        (raw, ["--dtype", "float32", "--edges", edges, "--chunk-mb", 1], np.histogram(a, [-2, -0.5, 0, 0.25, 1, 3])[0]),
        (npy(tmp_path, ids, "ids"), ["--bincount", "--bins", 250], np.bincount(ids[ids < 250], minlength=250)),
        (npy(tmp_path, np.zeros(0, np.float64), "empty"), ["--bins", 4, "--range", 0, 1], np.zeros(4, np.int64)),
    ]
    env = dict(os.environ, TMPDIR=str(tmp_path / "no-such-folder"))
    for source, args, expected in cases:
        out = tmp_path / "out.npy"
        _, piped = run_tally_stdin("hist", "-", "--backend", backend, "--output", out, *args,
                                   stdin=source.read_bytes(), env=env)
        check_equal(np.load(out), expected, f"a pipe of {source.name} {args}", seed)
        _, from_file = run_tally_stdin("hist", source, "--backend", backend, "--output", out, *args,
                                       stdin=source.read_bytes())
        assert piped.replace("stdin", str(source)) == from_file, (piped, from_file)


def test_a_pipe_read_in_one_pass_checks_its_end(tmp_path):
    a = np.arange(1000, dtype=np.int32)
    content = npy(tmp_path, a).read_bytes()
    # a .npy stream shorter than its header says; a raw one that ends inside a sample
    _, stderr = run_tally_stdin("hist", "-", "--bins", 4, "--range", 0, 1000, stdin=content[:-6], expect=2)
    assert "truncated" in stderr and "'-' (stdin)" in stderr and "after 998" in stderr, stderr
    _, stderr = run_tally_stdin("hist", "-", "--dtype", "int32", "--bins", 4, "--range", 0, 1000,
                                stdin=a.tobytes() + b"\1\2", expect=2)
    assert "not a multiple of 4" in stderr and "'-' (stdin)" in stderr, stderr
    # bytes after a .npy stream's samples are reported, as after a file's
    out = tmp_path / "out.npy"
    _, stderr = run_tally_stdin("hist", "-", "--bincount", "--bins", 1000, "--output", out, stdin=content + b"xyz")
    check_equal(np.load(out), np.ones(1000, np.int64), "trailing bytes after a .npy stream", "fixed")
    assert "3 bytes" in stderr, stderr
    # a negative sample of a bincount is named, as in a file
    b = a.copy()
    b[777] = -5
    _, stderr = run_tally_stdin("hist", "-", "--bincount", "--bins", 10, stdin=npy(tmp_path, b, "neg").read_bytes(),
                                expect=2)
    assert "-5" in stderr and "777" in stderr, stderr


# ---- errors ---------------------------------------------------------------------------------

def write_raw(tmp_path, data, name="raw.bin"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


ERROR_CASES = {
    "missing file": (lambda p: [p / "nope.npy"], ["nope.npy"]),
    "unknown dtype": (lambda p: [write_raw(p, b"\0" * 8), "--dtype", "complex64"], ["--dtype"]),
    "raw file without --dtype": (lambda p: [write_raw(p, b"\0" * 8)], ["--dtype", "raw.bin"]),
    "--bins 0": (lambda p: [npy(p, np.arange(5.0)), "--bins", 0], ["--bins"]),
    "--bins negative": (lambda p: [npy(p, np.arange(5.0)), "--bins", -3], ["--bins"]),
    "--range LO == HI": (lambda p: [npy(p, np.arange(5.0)), "--range", 1, 1], ["--range"]),
    "--range LO > HI": (lambda p: [npy(p, np.arange(5.0)), "--range", 2, 1], ["--range"]),
    "--range with one value": (lambda p: [npy(p, np.arange(5.0)), "--range", 1], ["--range"]),
    "--range inf": (lambda p: [npy(p, np.arange(5.0)), "--range", 0, "inf"], ["--range"]),
    "unsorted --edges": (lambda p: [npy(p, np.arange(5.0)), "--edges", text(p, "0 2 1 3")], ["--edges", "sorted"]),
    "one edge": (lambda p: [npy(p, np.arange(5.0)), "--edges", text(p, "1")], ["--edges"]),
    "--edges not a number": (lambda p: [npy(p, np.arange(5.0)), "--edges", text(p, "0 1 x")], ["--edges", "'x'"]),
    "--edges missing file": (lambda p: [npy(p, np.arange(5.0)), "--edges", p / "none.txt"], ["--edges"]),
    "--edges .npy of bools": (lambda p: [npy(p, np.arange(5.0)), "--edges", npy(p, np.array([False, True]), "e")],
                              ["--edges", "bools", "|b1"]),
    "--edges .npy of 2 dimensions": (lambda p: [npy(p, np.arange(5.0)), "--edges", npy(p, np.ones((2, 3)), "e")],
                                     ["--edges", "2-d", "(2, 3)", "must be 1d"]),
    "--edges .npy of 0 dimensions": (lambda p: [npy(p, np.arange(5.0)), "--edges", npy(p, np.float64(4), "e")],
                                     ["--edges", "0-d", "--bins N"]),
    "--edges int64 beyond 2^53": (
        lambda p: [npy(p, np.arange(5.0)), "--edges", npy(p, np.array([0, 2**53], np.int64), "e")],
        ["--edges", "edge 1", "9007199254740992", "2^53"]),
    "--edges with --range": (lambda p: [npy(p, np.arange(5.0)), "--edges", text(p, "0 1"), "--range", 0, 1],
                             ["--edges", "--range"]),
    "negative value with --bincount": (lambda p: [npy(p, np.array([3, 1, -2, 5, -1], np.int64)), "--bincount"],
                                       ["--bincount", "sample 2", "-2"]),
    "negative value with --bincount --bins": (
        lambda p: [npy(p, np.array([3, 1, 0, 5, -7], np.int32)), "--bincount", "--bins", 4],
        ["--bincount", "sample 4", "-7"]),
    "float file with --bincount": (lambda p: [npy(p, np.arange(5.0)), "--bincount"], ["--bincount", "float64"]),
    "--bincount with --range": (lambda p: [npy(p, np.arange(5)), "--bincount", "--range", 0, 1],
                                ["--bincount", "--range"]),
    "unknown --strategy": (lambda p: [npy(p, np.arange(5.0)), "--strategy", "fastest"], ["--strategy", "fastest"]),
    "--strategy racy, now the lab's": (lambda p: [npy(p, np.arange(5.0)), "--strategy", "racy"],
                                       ["--strategy", "racy", "tally race"]),
    "GPU strategy with --backend cpu": (
        lambda p: [npy(p, np.arange(5.0)), "--strategy", "shared_atomic", "--backend", "cpu"],
        ["--strategy", "shared_atomic"]),
    "unknown --backend": (lambda p: [npy(p, np.arange(5.0)), "--backend", "tpu"], ["--backend"]),
    "--chunk-mb 0": (lambda p: [npy(p, np.arange(5.0)), "--chunk-mb", 0], ["--chunk-mb"]),
    "--output of another kind": (lambda p: [npy(p, np.arange(5.0)), "--output", p / "out.txt"], ["--output"]),
    "misaligned raw file": (lambda p: [write_raw(p, b"\0" * 10), "--dtype", "int32"], ["raw.bin", "multiple of 4"]),
    "--dtype disagrees with .npy": (lambda p: [npy(p, np.arange(5.0)), "--dtype", "int32"],
                                    ["--dtype", "float64", "descr"]),
    "'|' on a type of several bytes": (
        lambda p: [npy_by_hand(p, b"{'descr': '|i4', 'fortran_order': False, 'shape': (1,)}", b"\0" * 4)],
        ["descr", "'|i4'", "hostile.npy"]),
    "--include-upper-edge with --last-edge": (
        lambda p: [npy(p, np.arange(5.0)), "--include-upper-edge", "--last-edge", "exclusive"],
        ["--include-upper-edge", "--last-edge"]),
    "unknown --last-edge": (lambda p: [npy(p, np.arange(5.0)), "--last-edge", "open"], ["--last-edge", "open"]),
    "unsupported .npy dtype": (lambda p: [npy(p, np.arange(5, dtype=np.uint64))], ["descr", "<u8", "data.npy"]),
    "complex .npy": (lambda p: [npy(p, np.arange(5, dtype=np.complex64))], ["descr", "<c8", "<f2"]),
    "truncated .npy": (lambda p: [truncated_npy(p)], ["data.npy", "truncated"]),
    "misnamed raw .npy": (lambda p: [write_raw(p, b"\0" * 16, "data.npy")], ["data.npy", "magic"]),
    "too many bins for the range": (lambda p: [npy(p, np.arange(5.0)), "--range", 1.0, 1.0 + 2e-16, "--bins", 4],
                                    ["--bins", "too many bins"]),
    "too many bins for float16": (lambda p: [npy(p, np.arange(5, dtype=np.float16)), "--range", 0, 1, "--bins", 5000],
                                  ["--bins", "too many bins", "float16"]),
    "too many bins for bfloat16": (lambda p: [write_raw(p, b"\0" * 8), "--dtype", "bfloat16", "--range", 1, 2,
                                              "--bins", 200], ["--bins", "too many bins", "bfloat16"]),
    "--range beyond float16": (lambda p: [npy(p, np.arange(5, dtype=np.float16)), "--range", 0, 70000, "--bins", 2],
                               ["--range", "float16"]),
    "float16 NaN without --range": (lambda p: [npy(p, np.array([1, np.nan], np.float16))], ["--range", "sample 1"]),
    "float16 file with --bincount": (lambda p: [npy(p, np.arange(5, dtype=np.float16)), "--bincount"],
                                     ["--bincount", "float16", "int8"]),
    "bfloat16 file with --bincount": (lambda p: [write_raw(p, b"\0" * 8), "--dtype", "bfloat16", "--bincount"],
                                      ["--bincount", "bfloat16"]),
    "--dtype bfloat16 for a .npy": (lambda p: [npy(p, np.arange(5, dtype=np.float16)), "--dtype", "bfloat16"],
                                    ["--dtype", "bfloat16", "raw"]),
    "misaligned bfloat16 raw file": (lambda p: [write_raw(p, b"\0" * 7), "--dtype", "bfloat16"],
                                     ["raw.bin", "multiple of 2"]),
    "negative int8 with --bincount": (lambda p: [npy(p, np.array([3, -128, 1], np.int8)), "--bincount"],
                                      ["--bincount", "sample 1", "-128"]),
    "negative int16 with --bincount --bins": (
        lambda p: [npy(p, np.array([3, 1, -300], np.int16)), "--bincount", "--bins", 4],
        ["--bincount", "sample 2", "-300"]),
}


def npy(p, a, name="data"):
    path = p / f"{name}.npy"
    np.save(path, a)
    return path


def text(p, content):
    path = p / "edges.txt"
    path.write_text(content)
    return path


def truncated_npy(p):
    path = npy(p, np.arange(100.0))
    path.write_bytes(path.read_bytes()[:-8])
    return path


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_usage_errors_exit_2_and_name_the_argument(tmp_path, case):
    make_args, must_mention = ERROR_CASES[case]
    result = run_tally("hist", *make_args(tmp_path), expect=2)
    for word in must_mention:
        assert word in result.stderr, f"{case}: the message does not mention {word!r}:\n{result.stderr}"
    assert result.stdout == "", f"{case}: an error wrote a table:\n{result.stdout}"


def test_gpu_backend_without_a_gpu_is_a_usage_error(tmp_path):
    if GPU_WANTED:
        pytest.skip("TALLY_TEST_GPU=1: this machine has a GPU")
    result = run_tally("hist", npy(tmp_path, np.arange(5.0)), "--backend", "gpu", expect=2)
    assert "--backend" in result.stderr, result.stderr


def test_gpus_without_a_gpu_is_a_usage_error(tmp_path):
    if GPU_WANTED:
        pytest.skip("TALLY_TEST_GPU=1: this machine has a GPU")
    result = run_tally("hist", npy(tmp_path, np.arange(5.0)), "--gpus", "all", expect=2)
    assert "--gpus" in result.stderr and "GPUs" in result.stderr, result.stderr


@pytest.mark.skipif(not GPU_WANTED, reason="GPU comparisons run only with TALLY_TEST_GPU=1 (a GPU and a CUDA build)")
@pytest.mark.parametrize("dtype", ["int32", "float32", "uint8"])
@pytest.mark.parametrize("bins", ["even", "range", "bincount"])
def test_gpus_counts_equal_numpy(tmp_path, dtype, bins):
    """--gpus all: the file in a part a GPU, counts added by NCCL, equal to numpy's."""
    rng = np.random.default_rng(seed_for("gpus", dtype, bins))
    n = 3_000_017
    if dtype == "float32":
        a = rng.normal(size=n).astype(np.float32)
        a[::1001] = np.nan
    elif dtype == "uint8":
        a = rng.integers(0, 256, size=n).astype(np.uint8)
    else:
        a = rng.integers(-50, 5000, size=n).astype(np.int32)
    if bins == "bincount" and dtype == "int32":
        a = np.abs(a)
    if bins == "bincount" and dtype == "float32":
        pytest.skip("bincount counts integers")
    path = npy(tmp_path, a)
    if bins == "even":
        args, want = ("--bins", 1000, "--range", -3, 300), np.histogram(a, 1000, range=(-3, 300))[0]
    elif bins == "range":
        edges = np.array([-2.0, -0.5, 0.0, 1.0, 7.5, 100.0, 255.0, 4000.0])
        edge_file = tmp_path / "edges.npy"
        np.save(edge_file, edges)
        args, want = ("--edges", edge_file), np.histogram(a, edges)[0]
    else:
        args, want = ("--bincount", "--bins", 6000), np.bincount(a, minlength=6000)[:6000]
    counts, report = hist_counts(tmp_path, path, *args, "--gpus", "all", backend="gpu")
    assert np.array_equal(counts, want), f"{dtype} {bins}: counts differ from numpy's"
    assert re.search(r"backend:\s+gpu, \d+ GPUs?", report), report
    counted, _ = report_numbers(report)
    assert counted == int(want.sum()), report


@pytest.mark.skipif(not GPU_WANTED, reason="GPU comparisons run only with TALLY_TEST_GPU=1 (a GPU and a CUDA build)")
def test_gpus_refuses_more_gpus_than_there_are_and_a_negative_bincount(tmp_path):
    result = run_tally("hist", npy(tmp_path, np.arange(5.0)), "--gpus", "64", expect=2)
    assert "--gpus" in result.stderr, result.stderr
    a = np.arange(100000, dtype=np.int32)
    a[77777] = -3
    result = run_tally("hist", npy(tmp_path, a), "--bincount", "--bins", 10, "--gpus", "all", expect=2)
    assert "77777" in result.stderr and "--bincount" in result.stderr, result.stderr


def test_auto_backend_runs_a_cpu_strategy_on_the_cpu(tmp_path):
    result = run_tally("hist", npy(tmp_path, np.arange(5.0)), "--strategy", "privatized")
    assert "backend:  cpu" in result.stderr and "strategy: privatized (asked for)" in result.stderr, result.stderr


@pytest.mark.parametrize("strategy", ["sequential", "critical", "atomic", "privatized", "reduction"])
def test_every_cpu_strategy_counts_the_same(tmp_path, strategy):
    seed = seed_for("strategy", strategy)
    a = np.random.default_rng(seed).normal(size=200000).astype(np.float32)
    (path,) = save(tmp_path, a, "npy")
    got, stderr = hist_counts(tmp_path, path, "--bins", 100, "--range", -3, 3, "--strategy", strategy)
    check_equal(got, np.histogram(a, bins=100, range=(-3, 3))[0], f"--strategy {strategy}", seed)
    assert f"strategy: {strategy} (asked for)" in stderr, stderr


# ---- the tool -------------------------------------------------------------------------------

def test_help_mentions_the_options():
    top = run_tally("--help")
    assert "hist" in top.stdout, top.stdout
    hist = run_tally("hist", "--help")
    for option in ["FILE", "--dtype", "--bins", "--range", "--edges", "--bincount", "--last-edge",
                   "--strategy", "--backend", "--chunk-mb", "--output", "--quiet"]:
        assert option in hist.stdout, f"tally hist --help does not mention {option}:\n{hist.stdout}"
    assert "numpy.histogram(np.load(FILE))" in hist.stdout and "left out" in hist.stdout, hist.stdout


def test_version():
    result = run_tally("--version")
    assert re.search(r"tally \d+\.\d+\.\d+", result.stdout), result.stdout


def test_no_subcommand_is_a_usage_error():
    result = run_tally(expect=2)
    assert "subcommand" in (result.stderr + result.stdout).lower()


def test_bytes_after_the_npy_data_are_ignored_with_a_warning(tmp_path):
    a = np.arange(50, dtype=np.int64)
    path = npy(tmp_path, a)
    with open(path, "ab") as f:
        f.write(b"\1\2\3")
    got, stderr = hist_counts(tmp_path, path, "--bincount")
    check_equal(got, np.bincount(a), "trailing bytes", "fixed")
    assert "3 bytes after the last sample were ignored" in stderr, stderr


# ---- hostile files ----------------------------------------------------------------------------
# tests/fuzz/ fuzzes the same readers; a case marked "fuzz finding" is an input the fuzzer found.

NPY_DICT = b"{'descr': '<f8', 'fortran_order': False, 'shape': (0,)}"


def npy_by_hand(p, dict_text, data=b"", version=1, length=None, name="hostile.npy"):
    """A .npy file with the header dict `dict_text` (bytes) as given, padded as numpy pads it;
    `length` replaces the header length field."""
    length_field_end = 10 if version == 1 else 12
    header = dict_text + b" " * ((64 - (length_field_end + len(dict_text) + 1) % 64) % 64) + b"\n"
    field_format = "<H" if version == 1 else "<I"
    field = np.array([len(header) if length is None else length], dtype=field_format[1:]).astype(field_format)
    path = p / name
    path.write_bytes(b"\x93NUMPY" + bytes([version, 0]) + field.tobytes() + header + data)
    return path


def edges_text(p, content):
    path = p / "edges.txt"
    path.write_bytes(content)
    return path


def data_with_edges(p, edges_path):
    return [npy(p, np.arange(5.0)), "--edges", edges_path]


# name: (make(p) -> (arguments of tally hist, the file at fault), words the message must hold)
HOSTILE_FILES = {
    "header length past the file's end": (
        lambda p: [npy_by_hand(p, NPY_DICT, length=4000)], ["header length 4000", "goes past the end of the file"]),
    "huge header length field": (
        lambda p: [npy_by_hand(p, NPY_DICT, version=2, length=0xFFFFFFFF)],
        ["header length 4294967295", "implausibly large"]),
    "shape whose product overflows 64 bits": (
        lambda p: [npy_by_hand(p, b"{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}",
                               b"\0" * 8)], ["'shape' overflows 64 bits"]),
    "shape whose byte count overflows 64 bits": (
        lambda p: [npy_by_hand(p, b"{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693953,)}",
                               b"\0" * 8)], ["truncated", "2305843009213693953 elements", "more than 2^64 bytes"]),
    "shape an integer in parentheses": (  # numpy refuses (3) too: it is Python's 3, not a tuple
        lambda p: [npy_by_hand(p, b"{'descr': '<f8', 'fortran_order': False, 'shape': (3)}", b"\0" * 24)],
        ["'shape'", "not a tuple", "(n,)"]),
    "garbage descr": (
        lambda p: [npy_by_hand(p, b"{'descr': '\xff\x00\x1b[2J', 'fortran_order': False, 'shape': (1,)}", b"\0" * 8)],
        ["'descr'", r"'\xff\x00\x1b[2J'", "does not read"]),
    "binary header": (  # fuzz finding: the message quoted the whole header, control bytes and all
        lambda p: [npy_by_hand(p, bytes(range(256)))], ["malformed", "expected '{'", "the first 48 of"]),
    "text after the header dict": (
        lambda p: [npy_by_hand(p, NPY_DICT + b" junk")], ["'junk'", "after its closing '}'"]),
    "format version 4.0": (
        lambda p: [npy_by_hand(p, NPY_DICT, version=4)], ["format version 4.0"]),
    "magic string alone": (
        lambda p: [write_raw(p, b"\x93NUMPY", "hostile.npy")], ["too short"]),
    "NaN edge in a text file": (
        lambda p: data_with_edges(p, edges_text(p, b"0 nan 1\n")), ["--edges", "non-finite", "index 1"]),
    "NaN edge in a .npy file": (
        lambda p: data_with_edges(p, npy(p, np.array([0.0, 1.0, np.nan]), "edges")),
        ["--edges", "non-finite", "index 2"]),
    "unsorted edges in a .npy file": (
        lambda p: data_with_edges(p, npy(p, np.array([0.0, 2.0, 1.0]), "edges")), ["--edges", "sorted"]),
    "empty edges file": (
        lambda p: data_with_edges(p, edges_text(p, b"")), ["--edges", "at least 2 edges", "got 0"]),
    "edges file of comments only": (
        lambda p: data_with_edges(p, edges_text(p, b"# 0 1 2\n")), ["--edges", "at least 2 edges", "got 0"]),
    "empty .npy of edges": (  # fuzz finding: memcpy was handed the null data() of an empty vector
        lambda p: data_with_edges(p, npy(p, np.zeros(0), "edges")), ["--edges", "at least 2 edges", "got 0"]),
    "empty 2-d .npy of edges": (  # the fuzz finding's own shape, now refused before any copy for being 2-d
        lambda p: data_with_edges(p, npy(p, np.zeros((2, 0)), "edges")), ["--edges", "2-d", "must be 1d"]),
    ".npy of edges whose byte count overflows 64 bits": (  # was a std::length_error, exit code 1
        lambda p: data_with_edges(
            p, npy_by_hand(p, b"{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693953,)}",
                           b"\0" * 8, name="edges.npy")),
        ["--edges", "shorter than its .npy header", "2305843009213693953 edges"]),
    "edge with two signs": (
        lambda p: data_with_edges(p, edges_text(p, b"0 +-1\n")), ["--edges", "'+-1' is not a number"]),
    "edge beyond float64": (
        lambda p: data_with_edges(p, edges_text(p, b"0\n1e309\n")), ["--edges", "line 2", "beyond float64's range"]),
    "binary edges file": (  # fuzz finding: the message quoted the bytes as they were
        lambda p: data_with_edges(p, edges_text(p, b"\x00\xff\x1b[2J\x07" * 40)),
        ["--edges", r"'\x00\xff\x1b[2J\x07", "is not a number", "the first 48 of 280 bytes"]),
}


@pytest.mark.parametrize("case", list(HOSTILE_FILES))
def test_hostile_files_exit_2_with_a_short_message_naming_the_file(tmp_path, case):
    make_args, must_mention = HOSTILE_FILES[case]
    args = make_args(tmp_path)
    at_fault = args[-1] if "--edges" in map(str, args) else args[0]
    result = run_tally("hist", *args, "--backend", "cpu", expect=2)
    for word in [str(at_fault), *must_mention]:
        assert word in result.stderr, f"{case}: the message does not mention {word!r}:\n{result.stderr}"
    assert result.stdout == "", f"{case}: an error wrote a table:\n{result.stdout}"
    assert len(result.stderr) < 1024 and all(" " <= c <= "~" or c == "\n" for c in result.stderr), (
        f"{case}: the message is long or holds bytes a terminal would act on:\n{result.stderr!r}")
