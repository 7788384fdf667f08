"""Tests of `tally race` on the CPU backend, and on the GPU with TALLY_TEST_GPU=1 (else `--backend
gpu` must fail cleanly): correct variants exact, racy rows labelled as wrong results that never
count more than expected, the environment header in JSON and CSV, and errors naming the option at
fault (exit code 2).
"""

import csv
import json
import os
import subprocess

import pytest

TALLY = os.environ.get("TALLY_BIN")
GPU_WANTED = os.environ.get("TALLY_TEST_GPU") == "1"
gpu_only = pytest.mark.skipif(not GPU_WANTED, reason="GPU runs only with TALLY_TEST_GPU=1 (a GPU and a CUDA build)")
gpu_absent = pytest.mark.skipif(GPU_WANTED, reason="TALLY_TEST_GPU=1: this machine has a GPU")


def run(*args):
    return subprocess.run([TALLY, *args], capture_output=True, text=True, timeout=600)


def test_every_experiment_reports_expected_actual_and_lost(tmp_path):
    json_path = tmp_path / "race.json"
    csv_path = tmp_path / "race.csv"
    result = run("race", "--backend", "cpu", "--threads", "100,1e5", "--samples", "2^18", "--bins", "16",
                 "--runs", "2", "--json", str(json_path), "--csv", str(csv_path))
    assert result.returncode == 0, result.stderr
    assert "race | backend cpu" in result.stdout and "0 verification mismatches" in result.stdout
    assert "[race]" in result.stderr

    doc = json.loads(json_path.read_text())
    for field in ("tally_version", "backend", "device", "build", "date"):
        assert doc[field], field
    rows = doc["rows"]
    # counter: 2 thread counts x 2 runs x (racy, atomic); histograms: 2 runs x 2 variants each.
    assert len(rows) == 8 + 4 + 4
    counters = [r for r in rows if r["experiment"] == "counter"]
    assert {(r["threads"], r["run"], r["correct"]) for r in counters} == {
        (t, run_, c) for t in (100, 100000) for run_ in (0, 1) for c in (True, False)}
    for r in rows:
        expected = r["threads"] if r["experiment"] == "counter" else 2**18
        assert r["expected"] == expected, r
        assert r["lost"] == r["expected"] - r["actual"]
        if r["correct"]:
            assert r["check"] == "exact" and r["actual"] == expected and r["wrong_bins"] == 0, r
        else:
            assert 0 <= r["actual"] <= expected, r  # a race loses updates, never invents them
            if r["lost"] > 0:
                assert r["check"].startswith("WRONG (racy): lost "), r
            else:
                assert r["check"].startswith("racy: right this run"), r
    variants = {(r["experiment"], r["variant"]) for r in rows}
    assert ("block_histogram", "barrier missing") in variants and ("block_histogram", "barrier") in variants
    assert ("histogram", "racy (load, store)") in variants and ("histogram", "atomic fetch_add") in variants

    lines = csv_path.read_text().splitlines()
    assert lines[0].startswith("# tally ") and " race," in lines[0] and "date" in lines[0]
    table = list(csv.DictReader(lines[1:]))
    assert len(table) == len(rows)
    assert [int(row["lost"]) for row in table] == [r["lost"] for r in rows]


def test_experiments_can_be_chosen():
    result = run("race", "--backend", "cpu", "--experiments", "block_histogram", "--samples", "1000", "--bins", "3",
                 "--runs", "1", "--quiet")
    assert result.returncode == 0, result.stderr
    assert "block_histogram" in result.stdout and "counter  " not in result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize("args, option", [
    (["--experiments", "counter,deadlock"], "--experiments"),
    (["--threads", "0"], "--threads"),
    (["--threads", "ten"], "--threads"),
    (["--samples", "0"], "--samples"),
    (["--bins", "0"], "--bins"),
    (["--runs", "0"], "--runs"),
])
def test_bad_arguments_are_usage_errors_naming_the_option(args, option):
    result = run("race", "--backend", "cpu", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert option in result.stderr, result.stderr
    assert result.stdout == ""


@gpu_absent
def test_gpu_backend_without_a_gpu_is_a_usage_error_naming_backend():
    result = run("race", "--backend", "gpu")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--backend" in result.stderr and ("no GPU" in result.stderr or "without CUDA" in result.stderr)
    assert result.stdout == ""


@gpu_only
def test_gpu_races_beside_their_correct_variants(tmp_path):
    json_path = tmp_path / "race.json"
    result = run("race", "--backend", "gpu", "--threads", "100,1e6", "--samples", "2^20", "--bins", "256",
                 "--runs", "2", "--json", str(json_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "race | backend gpu" in result.stdout and "0 verification mismatches" in result.stdout
    doc = json.loads(json_path.read_text())
    assert doc["backend"] == "gpu"
    rows = doc["rows"]
    assert len(rows) == 8 + 4 + 4
    for r in rows:
        if r["correct"]:
            assert r["check"] == "exact" and r["actual"] == r["expected"], r
        else:
            assert 0 <= r["actual"] <= r["expected"] and r["lost"] == r["expected"] - r["actual"], r
            assert r["check"].startswith("WRONG (racy): lost ") or r["check"].startswith("racy: right this run"), r
    million = [r for r in rows if r["experiment"] == "counter" and not r["correct"] and r["threads"] == 1000000]
    assert len(million) == 2 and all(r["lost"] > 0 for r in million), million
    variants = {(r["experiment"], r["variant"]) for r in rows}
    assert ("histogram", "racy (volatile hist[bin]++)") in variants and ("histogram", "atomic") in variants
    assert ("block_histogram", "barrier missing") in variants and ("block_histogram", "barrier") in variants


@gpu_only
def test_gpu_block_histogram_bins_are_limited_to_its_shared_memory():
    result = run("race", "--backend", "gpu", "--experiments", "block_histogram", "--bins", "20000")
    assert result.returncode == 2 and "--bins" in result.stderr
