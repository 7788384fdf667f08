"""Tests of `tally advise` on the CPU backend: a .npy file, a raw file and a named distribution
each get every exact CPU strategy measured and verified, a recommendation that names one of them,
and a paragraph built from the input's own statistics (checked against numpy here); bad arguments
are errors that name the flag (exit code 2).
"""

import json
import os
import re
import subprocess

import numpy as np
import pytest

TALLY = os.environ.get("TALLY_BIN")
CPU_STRATEGIES = {"sequential", "critical", "atomic", "privatized", "reduction"}


def run(*args):
    return subprocess.run([TALLY, *args], capture_output=True, text=True, timeout=600)


def recommendation(stdout):
    found = re.search(r"^recommendation: (\S+)$", stdout, re.MULTILINE)
    assert found, stdout
    return found.group(1)


def window_statistics(bins_of_samples):
    """Mean distinct bins and mean size of the most common bin per 32 consecutive samples."""
    windows = np.sort(bins_of_samples[: len(bins_of_samples) // 32 * 32].reshape(-1, 32), axis=1)
    starts = np.concatenate([np.ones((len(windows), 1), bool), windows[:, 1:] != windows[:, :-1]], axis=1)
    distinct = starts.sum(axis=1)
    deepest = [np.diff(np.append(np.flatnonzero(s), 32)).max() for s in starts]
    return distinct.mean(), np.mean(deepest)


def test_npy_file_gets_a_verified_recommendation_explained_by_its_statistics(tmp_path):
    rng = np.random.default_rng(7)
    samples = np.minimum(rng.geometric(0.3, size=2**18) - 1, 63).astype(np.int32)  # skewed: bin 0 holds 30%
    path = tmp_path / "skewed.npy"
    np.save(path, samples)
    json_path = tmp_path / "advice.json"
    result = run("advise", "--file", str(path), "--bins", "64", "--backend", "cpu", "--runs", "2", "--json",
                 str(json_path), "--quiet")
    assert result.returncode == 0, result.stderr
    chosen = recommendation(result.stdout)
    assert chosen in CPU_STRATEGIES
    assert "0 verification mismatches" in result.stdout

    doc = json.loads(json_path.read_text())
    assert doc["command"] == "advise" and doc["recommendation"] == chosen
    for field in ("device", "build", "date", "tally_version"):
        assert doc[field], field
    rows = {r["strategy"]: r for r in doc["rows"]}
    assert set(rows) == CPU_STRATEGIES | {"automatic"}
    for r in rows.values():
        assert r["check"] == "exact" and r["timed"], r
    fastest = min((r for name, r in rows.items() if name != "automatic"), key=lambda r: r["median_ms"])
    assert fastest["strategy"] == chosen

    # The range is the data's [min, max + 1): 0..63 over 64 bins, one value a bin.
    counts = np.bincount(samples - samples.min(), minlength=64)
    stats = doc["input"]
    assert (stats["lower"], stats["upper"], stats["bins"]) == (samples.min(), samples.max() + 1, 64)
    assert stats["counted"] == len(samples) and stats["left_out"] == 0
    assert stats["used_bins"] == np.count_nonzero(counts)
    assert stats["top_bin_share"] == pytest.approx(counts.max() / len(samples), rel=1e-12)
    assert stats["top_32_bins_share"] == pytest.approx(np.sort(counts)[-32:].sum() / len(samples), rel=1e-12)
    assert stats["windows_of_32"] == len(samples) // 32
    distinct, deepest = window_statistics(samples - samples.min())
    assert stats["window_distinct_bins"] == pytest.approx(distinct, rel=1e-9)
    assert stats["window_most_common_bin"] == pytest.approx(deepest, rel=1e-9)

    paragraph = doc["explanation"]
    assert paragraph in result.stdout
    assert "{:.1f}%".format(100 * counts.max() / len(samples)) in paragraph
    assert "automatic chose " + rows["automatic"]["used"] in paragraph
    assert chosen + " was fastest" in paragraph


def test_raw_file_needs_its_type_and_takes_the_given_range(tmp_path):
    path = tmp_path / "samples.f32"
    np.random.default_rng(3).uniform(-1, 1, 2**16).astype(np.float32).tofile(path)
    result = run("advise", "--file", str(path), "--bins", "32", "--backend", "cpu", "--runs", "1", "--quiet")
    assert result.returncode == 2 and "--dtype" in result.stderr
    result = run("advise", "--file", str(path), "--type", "float32", "--bins", "32", "--lower", "-0.5", "--upper",
                 "0.5", "--backend", "cpu", "--runs", "1", "--quiet")
    assert result.returncode == 0, result.stderr
    assert recommendation(result.stdout) in CPU_STRATEGIES
    assert "even bins over [-0.5, 0.5)" in result.stdout
    assert "samples fall outside the bins" in result.stdout  # half of them


def test_named_distribution_single_bin_is_the_worst_contention(tmp_path):
    json_path = tmp_path / "single.json"
    result = run("advise", "--distribution", "single", "--bins", "256", "--samples", "2^18", "--backend", "cpu",
                 "--runs", "2", "--json", str(json_path), "--quiet")
    assert result.returncode == 0, result.stderr
    assert recommendation(result.stdout) in CPU_STRATEGIES
    stats = json.loads(json_path.read_text())["input"]
    assert stats["top_bin_share"] == 1.0 and stats["used_bins"] == 1
    assert stats["window_distinct_bins"] == 1.0 and stats["window_most_common_bin"] == 32.0
    assert "collide heavily" in result.stdout


@pytest.mark.skipif(subprocess.run(["python3", "-c", "import matplotlib"], capture_output=True).returncode != 0,
                    reason="python3 has no matplotlib (pip install matplotlib)")
def test_named_distribution_uniform_plots_like_a_bench(tmp_path):
    png = tmp_path / "advice.png"
    result = run("advise", "--distribution", "uniform", "--bins", "4096", "--samples", "2^18", "--backend", "cpu",
                 "--runs", "1", "--quiet", "--plot", str(png))
    assert result.returncode == 0, result.stderr
    assert recommendation(result.stdout) in CPU_STRATEGIES
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("narrow, wide", [("int8", "int32"), ("int16", "int32"), ("uint16", "int32"),
                                          ("float16", "float32"), ("bfloat16", "float32")])
def test_narrow_types_generate_the_same_bins_as_wide_ones(tmp_path, narrow, wide):
    # One random stream draws the same bins in every integer type, and the same bins and fractions
    # in every floating one (float16 and bfloat16 keep what of the fraction they hold, inside the bin).
    for dist in ("few_hot", "loguniform", "sorted"):
        shapes = {}
        for sample_type in (narrow, wide):
            json_path = tmp_path / f"{sample_type}.json"
            result = run("advise", "--distribution", dist, "--type", sample_type, "--bins", "128", "--samples",
                         "2^14", "--backend", "cpu", "--runs", "1", "--quiet", "--json", str(json_path))
            assert result.returncode == 0, result.stderr
            shape = json.loads(json_path.read_text())["input"]
            assert sample_type in shape.pop("description")
            shapes[sample_type] = shape
        assert shapes[narrow] == shapes[wide], (dist, shapes)
        assert shapes[narrow]["counted"] == 2**14 and shapes[narrow]["left_out"] == 0


@pytest.mark.parametrize("sample_type", ["float16", "bfloat16"])
def test_half_float_file_keeps_its_largest_sample_inside_the_data_range(tmp_path, sample_type):
    # The range is [min, max] with max just inside: the next value of the samples' own type above max,
    # since their bins' edges are rounded to it.
    values = np.random.default_rng(5).uniform(-3, 1000, 4096).astype(np.float32)
    path = tmp_path / "samples.bin"
    if sample_type == "float16":
        values = values.astype(np.float16)
        values.tofile(path)
        top, above = float(values.max()), float(np.nextafter(values.max(), np.float16(np.inf)))
    else:
        bits = (values.view(np.uint32) >> 16).astype("<u2")  # truncated: bfloat16 values exactly
        bits.tofile(path)
        as_float = (bits.astype(np.uint32) << 16).view(np.float32)
        top = float(as_float.max())
        top_bits = int(as_float.max().view(np.uint32)) >> 16  # positive: the next bfloat16 up is one more
        above = float(np.array([(top_bits + 1) << 16], np.uint32).view(np.float32)[0])
    json_path = tmp_path / "advice.json"
    result = run("advise", "--file", str(path), "--type", sample_type, "--bins", "16", "--backend", "cpu", "--runs",
                 "1", "--quiet", "--json", str(json_path))
    assert result.returncode == 0, result.stderr
    stats = json.loads(json_path.read_text())["input"]
    assert stats["upper"] == above and above > top, (stats, top)
    assert stats["counted"] == 4096 and stats["left_out"] == 0, stats


@pytest.mark.parametrize("args, flag", [
    (["--bins", "16"], "--file"),                                             # neither input
    (["--distribution", "uniform"], "--bins"),                                # --bins is required
    (["--distribution", "nope", "--bins", "16"], "--distribution"),
    (["--distribution", "uniform", "--bins", "0"], "--bins"),
    (["--distribution", "uniform", "--bins", "16", "--lower", "1"], "--upper"),
    (["--distribution", "uniform", "--bins", "16", "--lower", "2", "--upper", "1"], "--upper"),
    (["--distribution", "uniform", "--bins", "16", "--samples", "lots"], "--samples"),
    (["--distribution", "uniform", "--bins", "16", "--type", "int128"], "--dtype"),  # one flag, two names
    (["--distribution", "uniform", "--bins", "129", "--type", "int8"], "--bins"),    # int8 reaches bin 127
    (["--distribution", "uniform", "--bins", "2049", "--type", "float16"], "--bins"),
    (["--distribution", "uniform", "--bins", "16", "--plot", "x.gif"], "--plot"),
    (["--file", "/no/such/file.npy", "--bins", "16"], "/no/such/file.npy"),
    (["--file", "a.npy", "--distribution", "uniform", "--bins", "16"], "--distribution"),
    (["--distribution", "uniform", "--bins", "16", "--runs", "0"], "--runs"),  # left out: the default
    (["--distribution", "uniform", "--bins", "16", "--warmup", "-1"], "--warmup"),
    (["--distribution", "uniform", "--bins", "16", "--timing", "cpu"], "--timing"),
])
def test_bad_arguments_name_the_flag(args, flag):
    result = run("advise", "--backend", "cpu", *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert flag in result.stderr, result.stderr
    assert "recommendation" not in result.stdout
