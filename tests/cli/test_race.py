"""Tests of `tally race` on the CPU backend: correct variants exact, racy rows labelled as wrong
results that never count more than expected, the environment header in JSON and CSV, and errors
naming the option at fault (exit code 2).
"""

import csv
import json
import os
import subprocess

import pytest

TALLY = os.environ.get("TALLY_BIN")


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


def test_gpu_backend_is_refused_until_the_gpu_experiments_exist():
    result = run("race", "--backend", "gpu")
    assert result.returncode == 2
    assert "--backend" in result.stderr and "not built yet" in result.stderr
