"""Tests of `tally lab`: on the CPU backend, one row per claim with its lesson, the figure
measured and a verdict consistent with that figure, the environment in JSON and CSV, and errors
naming the option at fault (exit code 2). On the GPU with TALLY_TEST_GPU=1 (else `--backend gpu`
must fail cleanly).
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
LESSONS = {"races", "atomics and CAS", "contention", "privatization", "reductions", "OpenMP"}


def run(*args):
    return subprocess.run([TALLY, *args], capture_output=True, text=True, timeout=900)


def check_rows(rows):
    for r in rows:
        assert r["lesson"] in LESSONS, r
        assert r["claim"] and r["measured"], r
        verdict = r["verdict"]
        assert not verdict.startswith("MISMATCH"), r
        if r["unit"] == "lost":
            assert 0.0 <= r["figure"] <= 1.0, r
            # Racy results are labelled wrong (or right by luck), never timed.
            if r["figure"] == 0.0:
                assert "by luck" in r["measured"] and verdict.startswith("does not hold here"), r
            else:
                assert "WRONG, lost" in r["measured"], r
                assert verdict == "holds" or verdict.startswith("partly"), r
        else:
            assert r["unit"] == "x" and r["figure"] > 0, r
            if verdict == "holds" and "as good" not in r["claim"]:
                assert r["figure"] > 1.0, r
            elif verdict.startswith("partly"):
                assert r["figure"] >= 1.1, r
            else:
                assert verdict in ("holds", "does not hold here"), r


def test_cpu_lab_prints_every_claim_with_a_figure_and_a_verdict(tmp_path):
    json_path = tmp_path / "lab.json"
    csv_path = tmp_path / "lab.csv"
    result = run("lab", "--backend", "cpu", "--samples", "2^16", "--runs", "2", "--json", str(json_path),
                 "--csv", str(csv_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "lab | backend cpu" in result.stdout and "0 verification mismatches" in result.stdout
    assert "[lab 1]" in result.stderr
    doc = json.loads(json_path.read_text())
    for field in ("tally_version", "backend", "device", "build", "date"):
        assert doc[field], field
    rows = doc["rows"]
    assert len(rows) == 9 and all(r["backend"] == "cpu" for r in rows)
    # CAS loops and the GPU's reductions are GPU claims; the CPU's sums are OpenMP's
    assert {r["lesson"] for r in rows} == {"races", "contention", "privatization", "OpenMP"}
    check_rows(rows)
    for r in rows:
        assert f"\"{r['claim']}\"" in result.stdout and r["verdict"] in result.stdout
        assert f"[{r['lesson']}; cpu] \"{r['claim']}\"" in result.stdout
    lines = csv_path.read_text().splitlines()
    assert lines[0].startswith("# tally ") and " lab," in lines[0] and "date" in lines[0]
    table = list(csv.DictReader(lines[1:]))
    assert [row["lesson"] for row in table] == [r["lesson"] for r in rows]
    assert [row["claim"] for row in table] == [r["claim"] for r in rows]
    assert [row["verdict"] for row in table] == [r["verdict"] for r in rows]


def test_quiet_prints_no_progress():
    result = run("lab", "--backend", "cpu", "--samples", "4096", "--runs", "1", "--quiet")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


@pytest.mark.parametrize("args, option", [
    (["--samples", "100"], "--samples"),
    (["--samples", "lots"], "--samples"),
    (["--runs", "0"], "--runs"),
])
def test_bad_arguments_are_usage_errors_naming_the_option(args, option):
    result = run("lab", "--backend", "cpu", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert option in result.stderr and result.stdout == ""


@gpu_absent
def test_gpu_backend_without_a_gpu_is_a_usage_error_naming_backend():
    result = run("lab", "--backend", "gpu")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--backend" in result.stderr and ("no GPU" in result.stderr or "without CUDA" in result.stderr)


@gpu_only
def test_gpu_lab_prints_every_claim_with_a_figure_and_a_verdict(tmp_path):
    json_path = tmp_path / "lab.json"
    result = run("lab", "--backend", "gpu", "--samples", "2^20", "--runs", "3", "--json", str(json_path))
    assert result.returncode == 0, result.stdout + result.stderr
    rows = json.loads(json_path.read_text())["rows"]
    assert len(rows) == 12 + 4  # the GPU's claims, then the OpenMP ones on the CPU
    assert [r["backend"] for r in rows] == ["gpu"] * 12 + ["cpu"] * 4
    assert {r["lesson"] for r in rows} == LESSONS
    check_rows(rows)
    counter = rows[0]
    assert counter["unit"] == "lost" and counter["figure"] > 0, counter  # 1,000,000 racy increments lose some
