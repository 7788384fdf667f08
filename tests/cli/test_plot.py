"""Tests of the pictures: `tally plot RESULTS -o FILE` redraws a saved bench / contention / race /
lab JSON as PNG or SVG, `--plot FILE` on bench, contention, race and lab draws after the results are
written, and the errors (exit code 2) name the argument at fault and, when python3 or matplotlib
is missing, say how to install it. CPU backend, tiny sizes.
"""

import json
import os
import pathlib
import subprocess
import xml.etree.ElementTree as ElementTree

import pytest

TALLY = os.environ.get("TALLY_BIN")
REPO = pathlib.Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The binary draws with `python3` (or $TALLY_PYTHON): tests that draw need matplotlib there.
# scripts/deps installs it, so CI always runs them; a GPU machine without it reports them skipped.
HAS_MATPLOTLIB = subprocess.run([os.environ.get("TALLY_PYTHON", "python3"), "-c", "import matplotlib"],
                                capture_output=True).returncode == 0
needs_matplotlib = pytest.mark.skipif(not HAS_MATPLOTLIB, reason="python3 has no matplotlib (pip install matplotlib)")


def run(*args, env=None):
    return subprocess.run([TALLY, *args], capture_output=True, text=True, timeout=600,
                          env=None if env is None else {**os.environ, **env})


def assert_png(path):
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == PNG_SIGNATURE, data[:16]
    assert len(data) > 10_000  # a picture with bars and text, not an empty canvas


def assert_svg(path):
    root = ElementTree.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
    assert len(list(root.iter())) > 100  # drawn elements, not an empty document


@pytest.fixture(scope="module")
def bench_result(tmp_path_factory):
    """A tiny CPU bench with --json and --plot: (the run, its JSON path, its PNG path)."""
    folder = tmp_path_factory.mktemp("bench")
    json_path, png_path = folder / "bench.json", folder / "bench.png"
    result = run("bench", "--backend", "cpu", "--sizes", "2^16", "--bins", "16,256", "--dists", "uniform,single",
                 "--runs", "2", "--warmup", "1", "--quiet", "--json", str(json_path), "--plot", str(png_path))
    return result, json_path, png_path


@needs_matplotlib
def test_bench_plot_flag_draws_after_writing_the_json(bench_result):
    result, json_path, png_path = bench_result
    assert result.returncode == 0, result.stderr
    assert "0 verification mismatches" in result.stdout
    doc = json.loads(json_path.read_text())
    assert doc["command"] == "bench"
    for field in ("device", "build", "date", "tally_version", "backend"):
        assert doc[field], field
    assert_png(png_path)


@needs_matplotlib
def test_plot_redraws_a_saved_bench_json_as_png_and_svg(bench_result, tmp_path):
    _, json_path, _ = bench_result
    png, svg = tmp_path / "again.png", tmp_path / "again.svg"
    result = run("plot", str(json_path), "-o", str(png))
    assert result.returncode == 0, result.stderr
    assert_png(png)
    result = run("plot", str(json_path), "--output", str(svg))
    assert result.returncode == 0, result.stderr
    assert_svg(svg)


@needs_matplotlib
def test_contention_plot_flag_without_json_draws_from_a_temporary_file(tmp_path):
    svg = tmp_path / "contention.svg"
    temporary = tmp_path / "tmp"  # the binary's temporary directory: only this test writes there
    temporary.mkdir()
    result = run("contention", "--backend", "cpu", "--addresses", "1,16,256", "--ops", "add,max", "--threads", "2",
                 "--ops-per-thread", "2000", "--runs", "1", "--warmup", "0", "--quiet", "--plot", str(svg),
                 env={"TMPDIR": str(temporary)})
    assert result.returncode == 0, result.stderr
    assert "0 verification mismatches" in result.stdout
    assert_svg(svg)
    assert list(temporary.iterdir()) == []  # the temporary JSON was removed


@needs_matplotlib
def test_race_and_contention_jsons_carry_their_command_and_redraw(tmp_path):
    race_json, contention_json = tmp_path / "race.json", tmp_path / "contention.json"
    assert run("race", "--backend", "cpu", "--threads", "100,10000", "--samples", "2^14", "--bins", "16", "--runs",
               "2", "--quiet", "--json", str(race_json)).returncode == 0
    assert run("contention", "--backend", "cpu", "--addresses", "1,64", "--ops", "add", "--threads", "2",
               "--ops-per-thread", "1000", "--runs", "1", "--quiet", "--json", str(contention_json)).returncode == 0
    for path, command in ((race_json, "race"), (contention_json, "contention")):
        assert json.loads(path.read_text())["command"] == command
        png = tmp_path / (command + ".png")
        result = run("plot", str(path), "-o", str(png))
        assert result.returncode == 0, result.stderr
        assert_png(png)


@needs_matplotlib
def test_a_json_saved_before_the_command_field_is_recognized_by_its_rows(bench_result, tmp_path):
    _, json_path, _ = bench_result
    doc = json.loads(json_path.read_text())
    del doc["command"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    result = run("plot", str(old), "-o", str(tmp_path / "old.png"))
    assert result.returncode == 0, result.stderr
    assert_png(tmp_path / "old.png")


def test_a_json_of_an_unknown_kind_is_an_error_naming_the_kind(tmp_path):
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"command": "frobnicate", "rows": [{"x": 1}]}))
    result = run("plot", str(unknown), "-o", str(tmp_path / "u.png"))
    assert result.returncode == 2
    assert "frobnicate" in result.stderr and "kind" in result.stderr
    assert not (tmp_path / "u.png").exists()

    unrecognized = tmp_path / "rows.json"
    unrecognized.write_text(json.dumps({"rows": [{"colour": "blue"}]}))
    result = run("plot", str(unrecognized), "-o", str(tmp_path / "r.png"))
    assert result.returncode == 2
    assert "no \"command\" field" in result.stderr

    not_json = tmp_path / "not.json"
    not_json.write_text("rows: 1\n")
    result = run("plot", str(not_json), "-o", str(tmp_path / "n.png"))
    assert result.returncode == 2 and "not JSON" in result.stderr


def test_missing_input_file_and_bad_output_names_the_argument(tmp_path):
    result = run("plot", str(tmp_path / "nowhere.json"), "-o", str(tmp_path / "x.png"))
    assert result.returncode == 2
    assert "'results'" in result.stderr and "nowhere.json" in result.stderr

    result = run("plot", str(tmp_path / "nowhere.json"))
    assert result.returncode == 2 and "--output" in result.stderr  # required

    result = run("plot", str(tmp_path / "nowhere.json"), "-o", str(tmp_path / "x.jpg"))
    assert result.returncode == 2 and "--output" in result.stderr and ".png or .svg" in result.stderr


@needs_matplotlib
def test_lab_plot_flag_draws_a_png_and_its_json_redraws_as_svg(tmp_path):
    json_path, png, svg = tmp_path / "lab.json", tmp_path / "lab.png", tmp_path / "lab.svg"
    result = run("lab", "--backend", "cpu", "--samples", "2^12", "--runs", "1", "--quiet", "--json", str(json_path),
                 "--plot", str(png))
    assert result.returncode == 0, result.stderr
    doc = json.loads(json_path.read_text())
    assert doc["command"] == "lab" and doc["rows"]
    assert_png(png)
    result = run("plot", str(json_path), "-o", str(svg))
    assert result.returncode == 0, result.stderr
    assert_svg(svg)
    # every claim labelled: matplotlib writes each text it draws as paths with the string in a comment
    text = svg.read_text()
    assert all(f"{i}. {r['lesson']} [cpu]" in text for i, r in enumerate(doc["rows"], 1))


def test_a_bad_plot_file_is_refused_before_anything_is_measured(tmp_path):
    result = run("bench", "--backend", "cpu", "--sizes", "2^16", "--plot", str(tmp_path / "x.pdf"))
    assert result.returncode == 2
    assert "'--plot'" in result.stderr and ".png or .svg" in result.stderr
    assert "read bandwidth" not in result.stdout

    result = run("lab", "--backend", "cpu", "--samples", "2^12", "--runs", "1", "--plot", str(tmp_path / "x.jpg"))
    assert result.returncode == 2
    assert "'--plot'" in result.stderr and ".png or .svg" in result.stderr
    assert "claims:" not in result.stdout and "[lab" not in result.stderr  # nothing was measured


def test_missing_matplotlib_or_python_is_an_error_after_the_results(tmp_path):
    # A matplotlib that cannot be imported, found first on PYTHONPATH.
    fake = tmp_path / "fake" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no matplotlib here (test)')\n")
    json_path = tmp_path / "c.json"
    args = ["contention", "--backend", "cpu", "--addresses", "1,4", "--ops", "add", "--methods", "atomic",
            "--threads", "2", "--ops-per-thread", "500", "--runs", "1", "--quiet", "--json", str(json_path),
            "--plot", str(tmp_path / "c.png")]
    result = run(*args, env={"PYTHONPATH": str(fake.parent)})
    assert result.returncode == 2
    assert "--plot" in result.stderr and "pip install matplotlib" in result.stderr
    assert "verification mismatches" in result.stdout  # the results were printed first
    assert json.loads(json_path.read_text())["rows"]  # and written
    assert not (tmp_path / "c.png").exists()

    result = run(*args, env={"TALLY_PYTHON": str(tmp_path / "no-such-python3")})
    assert result.returncode == 2
    assert "--plot" in result.stderr and "pip install matplotlib" in result.stderr
    assert "no-such-python3" in result.stderr


@needs_matplotlib
def test_the_committed_h100_pictures_source_still_draws(tmp_path):
    # A real GPU result from results/ (written before the "command" field): every panel draws.
    source = REPO / "results" / "2026-11-23-h100-histograms" / "bench.json"
    if not source.exists():
        pytest.skip("results/2026-11-23-h100-histograms/bench.json is not in this checkout")
    result = run("plot", str(source), "-o", str(tmp_path / "h100.svg"))
    assert result.returncode == 0, result.stderr
    assert_svg(tmp_path / "h100.svg")


@pytest.fixture(scope="module")
def bins_kinds_result(tmp_path_factory):
    """A tiny CPU bench of every bins kind: even bins over the exact and the data's general range,
    range bins with log and random edges. (The run, its JSON path, its SVG path.)"""
    folder = tmp_path_factory.mktemp("kinds")
    json_path, svg_path = folder / "kinds.json", folder / "kinds.svg"
    result = run("bench", "--backend", "cpu", "--sizes", "2^12", "--bins", "16", "--dists", "uniform,few_hot",
                 "--types", "int32", "--ops", "histogram,histogram_range", "--range-kind", "exact,general",
                 "--strategies", "sequential,privatized", "--runs", "1", "--warmup", "0", "--quiet",
                 "--json", str(json_path), "--plot", str(svg_path))
    return result, json_path, svg_path


@needs_matplotlib
def test_bench_draws_a_panel_per_bins_kind(bins_kinds_result, tmp_path):
    result, json_path, svg_path = bins_kinds_result
    assert result.returncode == 0, result.stderr
    assert_svg(svg_path)
    # Each (operation, type, bins, bins kind) case is a panel: the script's own grouping says how many.
    import importlib.util
    spec = importlib.util.spec_from_file_location("tally_plot", REPO / "tool" / "tally_plot.py")
    tally_plot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tally_plot)
    rows = json.loads(json_path.read_text())["rows"]
    titles = [title for title, _, _, _ in tally_plot.bench_panels(rows)]
    assert titles == ["int32, 16 bins", "int32, 16 bins, general range", "range bins, log edges: int32, 16",
                      "range bins, random edges: int32, 16"]
    # A result written before bins kinds existed reads as the exact range.
    old = [{k: v for k, v in r.items() if k not in ("bins_kind", "lower", "upper")} for r in rows
           if r["operation"] == "histogram" and r["bins_kind"] == "exact"]
    assert [title for title, _, _, _ in tally_plot.bench_panels(old)] == ["int32, 16 bins"]


def test_summarize_bench_lists_every_bins_kind_and_reads_older_results(bins_kinds_result, tmp_path):
    _, json_path, _ = bins_kinds_result
    summary = subprocess.run([os.environ.get("TALLY_PYTHON", "python3"), str(REPO / "scripts" / "summarize-bench"),
                              str(json_path)], capture_output=True, text=True, timeout=60)
    assert summary.returncode == 0, summary.stderr
    lines = summary.stdout.splitlines()
    assert "## Range bins (sorted edges over [0, bins]: log-spaced or random)" in lines
    for kind, dist in (("exact", "uniform"), ("general", "few_hot"), ("log", "uniform"), ("random", "few_hot")):
        assert any(line.startswith(f"| int32 | 16 | {kind} | {dist} | ") for line in lines), (kind, dist)
    doc = json.loads(json_path.read_text())
    doc["rows"] = [{k: v for k, v in r.items() if k not in ("bins_kind", "lower", "upper")} for r in doc["rows"]
                   if r["operation"] == "histogram" and r["bins_kind"] == "exact"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    summary = subprocess.run([os.environ.get("TALLY_PYTHON", "python3"), str(REPO / "scripts" / "summarize-bench"),
                              str(old)], capture_output=True, text=True, timeout=60)
    assert summary.returncode == 0, summary.stderr
    assert "| int32 | 16 | exact | uniform | " in summary.stdout
