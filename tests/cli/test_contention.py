"""Tests of `tally contention`: the built binary (TALLY_BIN), its table, its JSON and CSV files
(environment header, one verified row per case) and its errors (exit code 2, naming the option at
fault), on the CPU backend; on the GPU backend with TALLY_TEST_GPU=1 (else those tests skip, and
`--backend gpu` must fail cleanly instead).
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
OPS = ["add", "cas", "max", "exch"]
METHODS = ["atomic", "critical", "privatized"]
NOT_APPLICABLE = {("cas", "critical"), ("cas", "privatized"), ("exch", "privatized")}


def run(*args):
    return subprocess.run([TALLY, *args], capture_output=True, text=True, timeout=600)


def small_sweep(tmp_path, *extra):
    json_path = tmp_path / "contention.json"
    csv_path = tmp_path / "contention.csv"
    result = run("contention", "--backend", "cpu", "--addresses", "1,4,64", "--ops-per-thread", "3000",
                 "--runs", "2", "--json", str(json_path), "--csv", str(csv_path), *extra)
    return result, json_path, csv_path


def test_cpu_sweep_verifies_and_times_every_op_method_and_address_count(tmp_path):
    result, json_path, csv_path = small_sweep(tmp_path, "--threads", "2")
    assert result.returncode == 0, result.stderr
    assert "contention | backend cpu" in result.stdout
    assert "0 verification mismatches" in result.stdout
    assert "[contention 1/36]" in result.stderr and "[contention 36/36]" in result.stderr  # progress on stderr

    doc = json.loads(json_path.read_text())
    assert doc["backend"] == "cpu"
    for field in ("device", "build", "date", "tally_version", "layout"):
        assert doc[field], field
    rows = doc["rows"]
    assert len(rows) == len(OPS) * len(METHODS) * 3
    cases = {(r["op"], r["method"], r["addresses"]) for r in rows}
    assert cases == {(o, m, a) for o in OPS for m in METHODS for a in (1, 4, 64)}
    for r in rows:
        assert r["threads"] == 2 and r["ops_per_thread"] == 3000
        if (r["op"], r["method"]) in NOT_APPLICABLE:
            assert r["check"].startswith("skipped: "), r
            assert not r["timed"] and r["ops_per_s"] == 0
            continue
        assert r["check"] == "exact", r
        assert r["timed"] and r["runs"] == 2 and r["median_ms"] > 0
        assert 1 <= r["team"] <= 2
        assert r["ops_per_s"] > 0
        assert r["ops_per_s"] == pytest.approx(2 * 3000 / (r["median_ms"] * 1e-3), rel=1e-6)
        assert r["min_ms"] <= r["median_ms"]

    lines = csv_path.read_text().splitlines()
    assert lines[0].startswith("# tally ") and " contention," in lines[0]
    for field in ("backend cpu", "device", "build", "date"):
        assert field in lines[0], field
    table = list(csv.DictReader(lines[1:]))
    assert len(table) == len(rows)
    for row, r in zip(table, rows):
        assert (row["op"], row["method"], int(row["addresses"])) == (r["op"], r["method"], r["addresses"])
        assert row["check"] == r["check"]
        assert float(row["ops_per_s"]) == pytest.approx(r["ops_per_s"], rel=1e-5)


def test_more_logical_threads_than_cores_and_addresses_sharing_factors_with_them(tmp_path):
    # T = 6 with A = 4 and 9 (common factors 2 and 3) and A = 1000 > T K; a team no larger than T.
    json_path = tmp_path / "c.json"
    result = run("contention", "--backend", "cpu", "--threads", "6", "--addresses", "4,9,1000",
                 "--ops-per-thread", "150", "--runs", "3", "--warmup", "2", "--json", str(json_path), "--quiet")
    assert result.returncode == 0, result.stderr
    assert "[contention" not in result.stderr  # --quiet
    rows = json.loads(json_path.read_text())["rows"]
    timed = [r for r in rows if r["timed"]]
    assert len(timed) == 3 * (len(OPS) * len(METHODS) - len(NOT_APPLICABLE))
    for r in timed:
        assert r["check"] == "exact", r
        assert r["threads"] == 6 and 1 <= r["team"] <= 6 and r["runs"] == 3


def test_ops_and_methods_can_be_chosen(tmp_path):
    result, json_path, _ = small_sweep(tmp_path, "--ops", "max,exch", "--methods", "critical", "--threads", "3")
    assert result.returncode == 0, result.stderr
    rows = json.loads(json_path.read_text())["rows"]
    assert {(r["op"], r["method"]) for r in rows} == {("max", "critical"), ("exch", "critical")}
    assert all(r["check"] == "exact" and r["threads"] == 3 for r in rows)


@pytest.mark.parametrize("args, option", [
    (["--addresses", "0"], "--addresses"),
    (["--addresses", "1,abc"], "--addresses"),
    (["--addresses", "2^23"], "--addresses"),
    (["--ops", "add,fetch_or"], "--ops"),
    (["--methods", "atomic,mutex"], "--methods"),
    (["--threads", "0"], "--threads"),
    (["--ops-per-thread", "0"], "--ops-per-thread"),
    (["--threads", "1024", "--ops-per-thread", "2^31"], "--ops-per-thread"),
    (["--runs", "0"], "--runs"),
])
def test_bad_arguments_are_usage_errors_naming_the_option(args, option):
    result = run("contention", "--backend", "cpu", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert option in result.stderr, result.stderr
    assert result.stdout == ""  # refused before anything ran


@pytest.mark.parametrize("args, option", [
    (["--memory", "shared"], "--memory"),
    (["--scopes", "block"], "--scopes"),
    (["--aggregation", "warp"], "--aggregation"),
    (["--block-threads", "128"], "--block-threads"),
])
def test_gpu_only_options_are_refused_on_the_cpu(args, option):
    result = run("contention", "--backend", "cpu", "--addresses", "1", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert option in result.stderr and "GPU" in result.stderr, result.stderr


@gpu_absent
def test_gpu_backend_without_a_gpu_is_a_usage_error_naming_backend():
    result = run("contention", "--backend", "gpu", "--addresses", "1")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--backend" in result.stderr and ("no GPU" in result.stderr or "without CUDA" in result.stderr)
    assert result.stdout == ""


@gpu_absent
def test_auto_backend_runs_on_the_cpu_without_a_gpu():
    result = run("contention", "--addresses", "2", "--ops", "add", "--ops-per-thread", "100", "--runs", "1")
    assert result.returncode == 0, result.stderr
    assert "backend cpu" in result.stdout and "0 verification mismatches" in result.stdout


GPU_METHODS = [f"{m}-{s}-{a}" for m in ("global", "shared", "global_private") for s in ("block", "device", "system")
               for a in ("none", "warp")]


@gpu_only
def test_gpu_sweep_checks_every_memory_scope_op_and_aggregation(tmp_path):
    json_path = tmp_path / "gpu.json"
    csv_path = tmp_path / "gpu.csv"
    result = run("contention", "--backend", "gpu", "--addresses", "1,32,4096", "--threads", "4096",
                 "--ops-per-thread", "16", "--runs", "2", "--json", str(json_path), "--csv", str(csv_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "contention | backend gpu" in result.stdout and "0 verification mismatches" in result.stdout
    assert "[contention 1/216]" in result.stderr and "[contention 216/216]" in result.stderr
    doc = json.loads(json_path.read_text())
    assert doc["backend"] == "gpu"
    for field in ("device", "build", "date", "tally_version", "layout"):
        assert doc[field], field
    rows = doc["rows"]
    assert {(r["op"], r["method"], r["addresses"]) for r in rows} == {
        (o, m, a) for o in OPS for m in GPU_METHODS for a in (1, 32, 4096)}
    for r in rows:
        assert r["threads"] == 4096 and r["ops_per_thread"] == 16
        assert r["method"] == f"{r['memory']}-{r['scope']}-{r['aggregation']}"
        if r["check"].startswith("skipped: a CAS loop"):
            assert r["op"] == "cas" and r["contenders"] > 256, r
            continue
        if r["memory"] == "global" and r["scope"] == "block":
            # Formally racy (block scope across blocks): exact or labelled WRONG, never a mismatch.
            # (global_private, a slice per block, must be exact at every scope: checked below.)
            assert r["check"].startswith("exact (block scope") or r["check"].startswith("WRONG"), r
            continue
        assert r["check"] == "exact", r
        assert r["timed"] and r["runs"] == 2 and r["ops_per_s"] > 0
        assert r["ops_per_s"] == pytest.approx(4096 * 16 / (r["median_ms"] * 1e-3), rel=1e-6)
    lines = csv_path.read_text().splitlines()
    assert lines[0].startswith("# tally ") and "backend gpu" in lines[0]
    assert len(list(csv.DictReader(lines[1:]))) == len(rows)


@gpu_only
def test_gpu_sweep_reports_shared_arrays_that_do_not_fit():
    result = run("contention", "--backend", "gpu", "--memory", "shared", "--scopes", "block", "--aggregation", "none",
                 "--ops", "add", "--addresses", "2^20", "--threads", "1024", "--ops-per-thread", "4", "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "skipped: does not fit" in result.stdout


@gpu_only
@pytest.mark.parametrize("args, option", [
    (["--threads", "1000"], "--threads"),
    (["--block-threads", "100"], "--block-threads"),
    (["--methods", "atomic"], "--methods"),
    (["--memory", "texture"], "--memory"),
    (["--threads", "1048576", "--ops-per-thread", "2^12"], "--ops-per-thread"),
])
def test_gpu_bad_arguments_are_usage_errors_naming_the_option(args, option):
    result = run("contention", "--backend", "gpu", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert option in result.stderr, result.stderr
