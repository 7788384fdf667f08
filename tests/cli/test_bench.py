"""Tests of `tally bench` and `tally devices`: the built binary (TALLY_BIN), its output, its files
and its exit codes (0 success, 1 a verification mismatch, 2 a usage error).

Runs on the CPU backend everywhere; with TALLY_TEST_GPU=1 the GPU backend is benchmarked too.
"""

import csv
import json
import os
import subprocess

import pytest

TALLY = os.environ.get("TALLY_BIN")
GPU_WANTED = os.environ.get("TALLY_TEST_GPU") == "1"
CPU_STRATEGIES = ["automatic", "sequential", "critical", "atomic", "privatized", "reduction"]
DISTRIBUTIONS = ["uniform", "geometric", "single", "sorted", "loguniform", "strided32", "few_hot"]


def run(*args):
    return subprocess.run([TALLY, *args], capture_output=True, text=True, timeout=600)


def small_bench(tmp_path, backend, extra=()):
    json_path = tmp_path / "bench.json"
    csv_path = tmp_path / "bench.csv"
    result = run("bench", "--backend", backend, "--sizes", "2^14,1000", "--bins", "7,256", "--runs", "2",
                 "--json", str(json_path), "--csv", str(csv_path), *extra)
    return result, json_path, csv_path


def test_cpu_bench_verifies_and_times_every_strategy_on_every_distribution(tmp_path):
    result, json_path, csv_path = small_bench(tmp_path, "cpu")
    assert result.returncode == 0, result.stderr
    assert "backend cpu" in result.stdout
    assert "read bandwidth" in result.stdout
    assert "0 verification mismatches" in result.stdout
    assert "[bench]" in result.stderr  # progress goes to stderr

    doc = json.loads(json_path.read_text())
    assert doc["backend"] == "cpu"
    assert doc["read_bytes_per_s"] > 0
    for field in ("device", "build", "date", "tally_version"):
        assert doc[field], field
    rows = doc["rows"]
    cases = {(r["samples"], r["bins"], r["distribution"], r["strategy"]) for r in rows}
    for samples in (16384, 1000):
        for bins in (7, 256):
            for dist in DISTRIBUTIONS:
                for strategy in CPU_STRATEGIES:
                    assert (samples, bins, dist, strategy) in cases
    for r in rows:
        assert r["check"] == "exact", r
        assert r["operation"] == "histogram" and r["bins_kind"] == "exact"  # the defaults
        assert (r["lower"], r["upper"]) == (0, r["bins"])
        assert r["timed"] and r["runs"] == 2 and r["median_ms"] > 0
        assert r["bytes_per_s"] == pytest.approx(r["samples"] * 4 / (r["median_ms"] * 1e-3), rel=1e-6)
        assert r["read_fraction"] == pytest.approx(r["bytes_per_s"] / doc["read_bytes_per_s"], rel=1e-6)
        if r["strategy"] != "automatic":
            assert r["used"] == r["strategy"]
        else:
            assert r["used"] in CPU_STRATEGIES

    lines = csv_path.read_text().splitlines()
    assert lines[0].startswith("# tally ") and "device" in lines[0] and "date" in lines[0]
    table = list(csv.DictReader(lines[1:]))
    assert len(table) == len(rows)
    assert {row["strategy"] for row in table} == set(CPU_STRATEGIES)


def test_bench_types_and_distributions_can_be_chosen(tmp_path):
    result, json_path, _ = small_bench(tmp_path, "cpu", ("--types", "uint8,float64", "--dists", "strided32,few_hot",
                                                          "--strategies", "privatized"))
    assert result.returncode == 0, result.stderr
    rows = json.loads(json_path.read_text())["rows"]
    assert {r["type"] for r in rows} == {"uint8", "float64"}
    assert {r["distribution"] for r in rows} == {"strided32", "few_hot"}
    assert {r["strategy"] for r in rows} == {"privatized"}
    assert all(r["check"] == "exact" for r in rows)


def test_bench_takes_bank32_as_strided32s_old_name(tmp_path):
    result, json_path, _ = small_bench(tmp_path, "cpu", ("--dists", "bank32", "--strategies", "sequential"))
    assert result.returncode == 0, result.stderr
    assert {r["distribution"] for r in json.loads(json_path.read_text())["rows"]} == {"strided32"}


def test_few_hot_puts_90_percent_in_four_spread_bins_and_strided32_on_multiples_of_32(tmp_path):
    # `tally advise` reports the generated input's shape: the fullest bin's share and the 32 fullest.
    json_path = tmp_path / "advise.json"
    result = run("advise", "--distribution", "few_hot", "--bins", "4096", "--samples", "2^18", "--backend", "cpu",
                 "--runs", "1", "--quiet", "--json", str(json_path))
    assert result.returncode == 0, result.stderr
    shape = json.loads(json_path.read_text())["input"]
    assert shape["top_bin_share"] == pytest.approx(0.5, abs=0.01)  # the hottest of the four: 50%
    assert shape["top_32_bins_share"] == pytest.approx(0.9, abs=0.01)  # four hot bins, 90%; the tail is thin
    assert shape["used_bins"] > 4000  # the uniform 10% reaches (nearly) every bin
    result = run("advise", "--distribution", "strided32", "--bins", "4096", "--samples", "2^16", "--backend", "cpu",
                 "--runs", "1", "--quiet", "--json", str(json_path))
    assert result.returncode == 0, result.stderr
    assert json.loads(json_path.read_text())["input"]["used_bins"] == 4096 // 32


def test_bench_general_range_is_the_datas_min_and_max_counted_half_open(tmp_path):
    # numpy.histogram(a, bins) takes [min, max] from the data; bench counts it half-open, [min, max).
    result, json_path, csv_path = small_bench(tmp_path, "cpu", ("--types", "int32,float32,uint8",
                                                                 "--range-kind", "exact,general",
                                                                 "--ops", "histogram,weighted_histogram",
                                                                 "--strategies", "sequential,privatized"))
    assert result.returncode == 0, result.stderr
    assert "general" in result.stdout and "0 verification mismatches" in result.stdout
    rows = json.loads(json_path.read_text())["rows"]
    timed = [r for r in rows if r["strategy"] != "all"]
    assert {r["bins_kind"] for r in timed} == {"exact", "general"}
    assert {r["operation"] for r in timed} == {"histogram", "weighted_histogram"}
    for r in timed:
        assert r["check"] in ("exact", "within bound"), r
        if r["bins_kind"] == "exact":
            assert (r["lower"], r["upper"]) == (0, r["bins"])
        elif r["distribution"] == "single" and r["type"] != "float32":
            # one integer value, bins // 2: numpy widens the empty range by 0.5 each way
            assert (r["lower"], r["upper"]) == (r["bins"] // 2 - 0.5, r["bins"] // 2 + 0.5), r
        else:
            # min < max, or one value (strided32 below 32 bins: all zero) widened as numpy does
            widened = r["upper"] - r["lower"] == 1 and (r["lower"] + 0.5).is_integer()
            assert widened or 0 <= r["lower"] < r["upper"] < r["bins"], r
            assert -0.5 <= r["lower"] and r["upper"] <= r["bins"], r
    exact_cases = {(r["operation"], r["type"], r["samples"], r["bins"], r["distribution"], r["strategy"], r["variant"])
                   for r in timed if r["bins_kind"] == "exact"}
    general_cases = {(r["operation"], r["type"], r["samples"], r["bins"], r["distribution"], r["strategy"], r["variant"])
                     for r in timed if r["bins_kind"] == "general"}
    assert exact_cases == general_cases
    table = list(csv.DictReader(csv_path.read_text().splitlines()[1:]))
    assert {row["bins_kind"] for row in table if row["strategy"] != "all"} == {"exact", "general"}
    assert all(float(row["lower"]) < float(row["upper"]) for row in table if row["strategy"] != "all")


def test_bench_range_bins_verify_every_strategy_on_log_and_random_edges(tmp_path):
    result, json_path, csv_path = small_bench(tmp_path, "cpu", ("--ops", "histogram_range", "--types",
                                                                 "int32,float64"))
    assert result.returncode == 0, result.stderr
    assert "range bins" in result.stdout and "summary of range-bin histograms" in result.stdout
    assert "0 verification mismatches" in result.stdout
    rows = json.loads(json_path.read_text())["rows"]
    assert {r["operation"] for r in rows} == {"histogram_range"}
    cases = {(r["type"], r["samples"], r["bins"], r["distribution"], r["bins_kind"], r["strategy"]) for r in rows}
    for sample_type in ("int32", "float64"):
        for samples in (16384, 1000):
            for bins in (7, 256):
                for dist in DISTRIBUTIONS:
                    for kind in ("log", "random"):
                        for strategy in CPU_STRATEGIES:
                            assert (sample_type, samples, bins, dist, kind, strategy) in cases
    for r in rows:
        assert r["check"] == "exact", r
        assert (r["lower"], r["upper"]) == (0, r["bins"])
        assert r["timed"] and r["median_ms"] > 0
    assert {row["bins_kind"] for row in csv.DictReader(csv_path.read_text().splitlines()[1:])} == {"log", "random"}
    only_log, json_path2, _ = small_bench(tmp_path, "cpu", ("--ops", "histogram_range", "--edges", "log",
                                                            "--strategies", "sequential"))
    assert only_log.returncode == 0, only_log.stderr
    assert {r["bins_kind"] for r in json.loads(json_path2.read_text())["rows"]} == {"log"}


def test_cpu_bench_reductions_verify_every_strategy_and_keep_histograms_out(tmp_path):
    json_path = tmp_path / "bench.json"
    csv_path = tmp_path / "bench.csv"
    result = run("bench", "--backend", "cpu", "--ops", "reduce,count_if,find_first_if", "--types", "int32,float32,uint8",
                 "--sizes", "3000", "--runs", "2", "--json", str(json_path), "--csv", str(csv_path))
    assert result.returncode == 0, result.stderr
    assert "summary of reductions" in result.stdout
    assert result.stdout.rstrip().endswith("0 verification mismatches")
    rows = json.loads(json_path.read_text())["rows"]
    assert {r["operation"] for r in rows} == {"reduce", "count_if", "find_first_if"}
    assert {r["type"] for r in rows} == {"int32", "float32"}  # uint8 is no reduce type
    cases = {(r["operation"], r["variant"], r["type"], r["strategy"]) for r in rows}
    for strategy in CPU_STRATEGIES:
        for sample_type in ("int32", "float32"):
            assert ("reduce", "sum", sample_type, strategy) in cases
            assert ("count_if", "half match", sample_type, strategy) in cases
            assert ("find_first_if", "match at 1%", sample_type, strategy) in cases
            assert ("find_first_if", "no match", sample_type, strategy) in cases
        assert ("reduce", "min", "int32", strategy) in cases  # min/max for the first type only
        assert ("reduce", "sum deterministic", "float32", strategy) in cases
    for r in rows:
        if r["variant"] == "sum deterministic" and r["strategy"] in ("critical", "atomic", "reduction"):
            assert r["check"].startswith("skipped:") and "deterministic" in r["check"], r
        elif r["variant"] == "sum" and r["type"] == "float32":
            assert r["check"] == "within bound", r
        else:
            assert r["check"] == "exact", r
    table = list(csv.DictReader(csv_path.read_text().splitlines()[1:]))
    assert {row["operation"] for row in table} == {"reduce", "count_if", "find_first_if"}


def test_cpu_bench_weighted_histograms_verify_every_strategy_both_ways(tmp_path):
    json_path = tmp_path / "bench.json"
    csv_path = tmp_path / "bench.csv"
    result = run("bench", "--backend", "cpu", "--ops", "weighted_histogram", "--types", "int32,float32",
                 "--sizes", "3000", "--bins", "7,256", "--runs", "2", "--json", str(json_path), "--csv", str(csv_path))
    assert result.returncode == 0, result.stderr
    assert "CUB has no weighted histogram" in result.stdout
    assert "summary of weighted histograms" in result.stdout
    assert result.stdout.rstrip().endswith("0 verification mismatches")
    doc = json.loads(json_path.read_text())
    rows = doc["rows"]
    assert {r["operation"] for r in rows} == {"weighted_histogram"}
    cases = {(r["type"], r["bins"], r["distribution"], r["variant"], r["strategy"]) for r in rows}
    strategies = ["automatic", "sequential", "privatized"]  # the CPU's weighted strategies
    variants = ["float weights", "float weights, deterministic"]
    for sample_type in ("int32", "float32"):
        for bins in (7, 256):
            for dist in DISTRIBUTIONS:
                for variant in variants:
                    for strategy in strategies:
                        assert (sample_type, bins, dist, variant, strategy) in cases
    assert len(rows) == 2 * 2 * len(DISTRIBUTIONS) * len(variants) * len(strategies)
    for r in rows:
        # deterministic: the CPU reference's bits; in double: within the stated bound of it
        assert r["check"] == ("exact" if r["variant"].endswith("deterministic") else "within bound"), r
        assert r["timed"] and r["runs"] == 2 and r["median_ms"] > 0
        assert r["samples"] == 3000
        assert r["bytes_per_s"] == pytest.approx(r["samples"] * (4 + 4) / (r["median_ms"] * 1e-3), rel=1e-6)
        assert r["read_fraction"] > 0
        assert r["read_fraction"] == pytest.approx(r["bytes_per_s"] / doc["read_bytes_per_s"], rel=1e-6)
        assert r["used"] in ("sequential", "privatized")
        if r["strategy"] != "automatic":
            assert r["used"] == r["strategy"]
    table = list(csv.DictReader(csv_path.read_text().splitlines()[1:]))
    assert len(table) == len(rows)
    assert {row["operation"] for row in table} == {"weighted_histogram"}
    assert {row["variant"] for row in table} == set(variants)
    assert {row["check"] for row in table} == {"exact", "within bound"}
    assert all(float(row["read_fraction"]) > 0 for row in table)


def test_cpu_bench_weighted_histograms_with_double_weights(tmp_path):
    """--weights float,double: rows of each weight type, both ways, verified, bytes read counting
    8-byte weights."""
    json_path = tmp_path / "bench.json"
    result = run("bench", "--backend", "cpu", "--ops", "weighted_histogram", "--weights", "float,double",
                 "--types", "int32", "--dists", "uniform,single", "--sizes", "20000", "--bins", "7,300",
                 "--runs", "1", "--json", str(json_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip().endswith("0 verification mismatches")
    rows = json.loads(json_path.read_text())["rows"]
    variants = {"float weights": 4, "float weights, deterministic": 4, "double weights": 8,
                "double weights, deterministic": 8}
    assert {r["variant"] for r in rows} == set(variants)
    assert len(rows) == 2 * 2 * len(variants) * 3  # bins, distributions, variants, strategies
    for r in rows:
        assert r["check"] == ("exact" if r["variant"].endswith("deterministic") else "within bound"), r
        weight_bytes = variants[r["variant"]]
        assert r["bytes_per_s"] == pytest.approx(r["samples"] * (4 + weight_bytes) / (r["median_ms"] * 1e-3),
                                                 rel=1e-6)


# The narrow types: bytes a sample, and how many bins of [0, bins) their values reach (int8: 0..127;
# float16 holds every integer to 2048, bfloat16 to 256).
NARROW_TYPES = {"int8": (1, 128), "int16": (2, 32768), "uint16": (2, 65536), "float16": (2, 2048),
                "bfloat16": (2, 256)}


def test_cpu_bench_runs_the_narrow_types_on_every_operation(tmp_path):
    json_path = tmp_path / "bench.json"
    ops = ["histogram", "histogram_range", "weighted_histogram", "reduce", "count_if", "find_first_if"]
    result = run("bench", "--backend", "cpu", "--types", ",".join(NARROW_TYPES), "--ops", ",".join(ops),
                 "--range-kind", "exact,general", "--sizes", "3000", "--bins", "7,256,4096", "--runs", "1",
                 "--strategies", "sequential,privatized", "--quiet", "--json", str(json_path))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert result.stdout.rstrip().endswith("0 verification mismatches")
    rows = json.loads(json_path.read_text())["rows"]
    assert {r["type"] for r in rows} == set(NARROW_TYPES)
    assert {r["operation"] for r in rows} == set(ops)
    for sample_type, (size, reach) in NARROW_TYPES.items():
        for operation, kinds in (("histogram", ("exact", "general")), ("histogram_range", ("log", "random")),
                                 ("weighted_histogram", ("exact", "general"))):
            for bins in (7, 256, 4096):
                case = [r for r in rows if (r["type"], r["operation"], r["bins"]) == (sample_type, operation, bins)]
                if bins > reach:
                    # one row a distribution, skipped: the type's values reach no further bin
                    assert len(case) == len(DISTRIBUTIONS), case
                    assert all(r["strategy"] == "all" and r["check"] == f"skipped: {sample_type} samples reach the "
                               f"bins 0 to {reach - 1} only" for r in case), case
                    continue
                assert {(r["distribution"], r["bins_kind"]) for r in case} == {
                    (d, k) for d in DISTRIBUTIONS for k in kinds}, (sample_type, operation, bins)
                for r in case:
                    weighted = operation == "weighted_histogram"
                    want = ("exact", "within bound") if weighted else ("exact",)
                    assert r["check"] in want and r["timed"], r
                    assert r["bytes_per_s"] == pytest.approx(
                        r["samples"] * (size + 4 * weighted) / (r["median_ms"] * 1e-3), rel=1e-6), r
        reductions = {(r["operation"], r["variant"], r["strategy"]): r for r in rows
                      if r["type"] == sample_type and r["operation"] in ("reduce", "count_if", "find_first_if")}
        floating = sample_type.startswith(("float", "bfloat"))
        for strategy in CPU_STRATEGIES:
            sum_row = reductions[("reduce", "sum", strategy)]
            assert sum_row["check"] == ("within bound" if floating else "exact"), sum_row
            assert reductions[("count_if", "half match", strategy)]["check"] == "exact"
            assert reductions[("find_first_if", "match at 1%", strategy)]["check"] == "exact"
            assert reductions[("find_first_if", "no match", strategy)]["check"] == "exact"
            assert sum_row["bytes_per_s"] == pytest.approx(3000 * size / (sum_row["median_ms"] * 1e-3), rel=1e-6)
            if floating:
                deterministic = reductions[("reduce", "sum deterministic", strategy)]
                if strategy in ("critical", "atomic", "reduction"):
                    assert deterministic["check"].startswith("skipped:"), deterministic
                else:
                    assert deterministic["check"] == "exact", deterministic
        min_max = sample_type == "int8"  # min and max for the first type only
        assert (("reduce", "min", "sequential") in reductions) == min_max
        assert (("reduce", "max", "sequential") in reductions) == min_max


@pytest.mark.parametrize("args, argument", [
    (("--ops", "sort"), "--ops"),
    (("--ops", "weighted_histogram,weighted"), "--ops"),
    (("--ops", "histogram_ranges"), "--ops"),
    (("--range-kind", "numpy"), "--range-kind"),
    (("--range-kind", "exact,log"), "--range-kind"),  # log is a layout of edges, not an even range
    (("--edges", "linear"), "--edges"),
    (("--ops", "weighted_histogram", "--weights", "half"), "--weights"),
    (("--ops", "weighted_histogram", "--weights", "float,int32"), "--weights"),
    (("--ops", "weighted_histogram", "--sizes", "2^32"), "--sizes"),
    (("--strategies", "nonsense"), "--strategies"),
    (("--strategies", "shared_atomic", "--backend", "cpu"), "--strategies"),
    (("--dists", "zipf"), "--dists"),
    (("--types", "int128"), "--types"),
    (("--types", "int8,bf16"), "--types"),
    (("--sizes", "lots"), "--sizes"),
    (("--bins", "0"), "--bins"),
    (("--backend", "tpu"), "--backend"),
    (("--runs", "0"), "--runs"),      # left out means the default; a given 0 or less is an error
    (("--runs", "-3"), "--runs"),
    (("--warmup", "-1"), "--warmup"),
    (("--timing", "events"), "--timing"),
])
def test_bench_usage_errors_exit_2_and_name_the_option(args, argument):
    full = list(args)
    if "--backend" not in full:
        full += ["--backend", "cpu"]
    result = run("bench", *full)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert argument in result.stderr


def test_racy_is_no_strategy_and_the_error_says_it_lives_in_tally_race():
    for backend in ("cpu", "auto"):
        result = run("bench", "--strategies", "racy", "--backend", backend, "--sizes", "1000")
        assert result.returncode == 2, (result.stdout, result.stderr)
        assert "--strategies" in result.stderr and "tally race" in result.stderr, result.stderr
        assert result.stdout == ""
    listed = run("bench", "--help")
    assert listed.returncode == 0 and "racy" not in listed.stdout


@pytest.mark.skipif(GPU_WANTED, reason="checks the no-GPU behaviour")
def test_devices_and_gpu_bench_without_a_gpu():
    devices = run("devices")
    assert devices.returncode == 0, devices.stderr
    assert devices.stdout.startswith("no GPU: CPU backend")
    bench = run("bench", "--backend", "gpu", "--sizes", "1000")
    assert bench.returncode == 2
    assert "--backend" in bench.stderr


@pytest.mark.skipif(not GPU_WANTED, reason="GPU benchmarks run only with TALLY_TEST_GPU=1 (a GPU and a CUDA build)")
def test_gpu_devices_and_bench(tmp_path):
    devices = run("devices")
    assert devices.returncode == 0, devices.stderr
    assert "read bandwidth" in devices.stdout and "multiprocessors" in devices.stdout
    result, json_path, _ = small_bench(tmp_path, "gpu")
    assert result.returncode == 0, result.stderr
    doc = json.loads(json_path.read_text())
    assert doc["backend"] == "gpu"
    checks = {(r["strategy"], r["check"]) for r in doc["rows"]}
    assert all(check == "exact" or check.startswith("skipped") for _, check in checks), checks
    reductions, json_path2, _ = small_bench(tmp_path, "gpu", ("--ops", "reduce,count_if,find_first_if",
                                                             "--types", "int32,float32"))
    assert reductions.returncode == 0, reductions.stderr
    rows = json.loads(json_path2.read_text())["rows"]
    assert {r["strategy"] for r in rows} >= {"atomic", "block_reduce_atomic", "two_phase", "cub"}
    assert not any(r["check"].startswith("MISMATCH") for r in rows)
    weighted, json_path3, _ = small_bench(tmp_path, "gpu", ("--ops", "weighted_histogram", "--types", "int32,float32"))
    assert weighted.returncode == 0, weighted.stderr
    rows = json.loads(json_path3.read_text())["rows"]
    assert {r["strategy"] for r in rows} == {"automatic", "atomic", "shared_atomic"}
    for r in rows:
        assert r["check"] == ("exact" if r["variant"].endswith("deterministic") else "within bound"), r
        assert r["read_fraction"] > 0
    # The data's own range and range bins, CUB beside: CUB refuses (skipped) what it cannot count as
    # tally does, and never reports a mismatch.
    ranged, json_path4, _ = small_bench(tmp_path, "gpu", ("--ops", "histogram,histogram_range", "--range-kind",
                                                          "exact,general", "--types", "int32,float32"))
    assert ranged.returncode == 0, ranged.stdout + ranged.stderr
    rows = json.loads(json_path4.read_text())["rows"]
    assert {(r["operation"], r["bins_kind"]) for r in rows} == {
        ("histogram", "exact"), ("histogram", "general"), ("histogram_range", "log"), ("histogram_range", "random")}
    assert all(r["check"] == "exact" or r["check"].startswith(("skipped", "cannot run"))
               for r in rows), [r for r in rows if r["check"] != "exact"]
    assert any(r["strategy"] == "cub" and r["operation"] == "histogram_range" and r["check"] == "exact" for r in rows)


def test_top_level_help_lists_the_commands():
    result = run("--help")
    assert result.returncode == 0
    for command in ("devices", "bench", "hist"):
        assert command in result.stdout


def test_bench_takes_a_given_zero_warm_ups_and_one_run(tmp_path):
    # --warmup 0 means none (it used to mean the default), --runs 1 one timed run a row.
    json_path = tmp_path / "bench.json"
    result = run("bench", "--backend", "cpu", "--sizes", "1000", "--bins", "16", "--strategies", "sequential",
                 "--warmup", "0", "--runs", "1", "--quiet", "--json", str(json_path))
    assert result.returncode == 0, result.stderr
    doc = json.loads(json_path.read_text())
    assert doc["warmup_runs"] == 0
    assert doc["rows"] and all(r["runs"] == 1 and r["median_ms"] > 0 for r in doc["rows"] if r["timed"])
    # left out, the CPU default: one warm-up run
    assert run("bench", "--backend", "cpu", "--sizes", "1000", "--bins", "16", "--strategies", "sequential",
               "--runs", "1", "--quiet", "--json", str(json_path)).returncode == 0
    assert json.loads(json_path.read_text())["warmup_runs"] == 1


def test_bench_says_how_it_timed(tmp_path):
    # CPUs: the wall clock, whatever --timing says (it names how GPU runs are timed).
    json_path = tmp_path / "bench.json"
    for timing in ("gpu", "with_launch"):
        result = run("bench", "--backend", "cpu", "--sizes", "1000", "--bins", "16", "--strategies", "sequential",
                     "--runs", "1", "--timing", timing, "--quiet", "--json", str(json_path))
        assert result.returncode == 0, result.stderr
        assert json.loads(json_path.read_text())["timing"] == "wall_clock"
        assert "timing: wall_clock" in result.stdout


@pytest.mark.skipif(not GPU_WANTED, reason="GPU benchmarks run only with TALLY_TEST_GPU=1 (a GPU and a CUDA build)")
def test_gpu_bench_times_gpu_time_or_with_the_launch(tmp_path):
    # GPU time (each run held until launched) by default; with_launch when asked. Both verified,
    # both timed; the header and the JSON say which.
    json_path = tmp_path / "bench.json"
    for timing, header in (("gpu", "GPU time"), ("with_launch", "with launch")):
        args = ["bench", "--backend", "gpu", "--sizes", "2^20", "--bins", "256", "--types", "uint8",
                "--strategies", "replicated,cub", "--dists", "uniform", "--runs", "3", "--quiet", "--json", str(json_path)]
        if timing != "gpu":
            args += ["--timing", timing]
        result = run(*args)
        assert result.returncode == 0, result.stderr
        doc = json.loads(json_path.read_text())
        assert doc["timing"] == timing
        assert header in result.stdout
        assert doc["rows"] and all(r["check"] == "exact" and r["median_ms"] > 0 for r in doc["rows"])
        assert not any("timed with its launch" in r["note"] for r in doc["rows"])
