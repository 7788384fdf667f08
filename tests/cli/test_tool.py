"""Tests of the `tally` tool as a whole (TALLY_BIN): what a bare `tally` prints, "did you mean" for
misspelled commands and options, one error style (`tally <command>: ...`) for every command,
--quiet on every command, sizes refused before anything is allocated, and the read bandwidth
measured over a buffer sized to the input.
"""

import json
import os
import re
import subprocess

import pytest

TALLY = os.environ.get("TALLY_BIN")
COMMANDS = ["devices", "bench", "hist", "contention", "race", "lab", "advise", "plot"]


@pytest.fixture(scope="session", autouse=True)
def tally_binary():
    assert TALLY, "set TALLY_BIN to the built tally executable (CTest does)"
    assert os.access(TALLY, os.X_OK), f"TALLY_BIN={TALLY} is not an executable"


def run_tally(*args, expect=0):
    result = subprocess.run([TALLY, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert result.returncode == expect, (
        f"tally {' '.join(map(str, args))}: exit code {result.returncode}, expected {expect}\n"
        f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}")
    return result


# ---- a bare `tally`, and misspellings --------------------------------------------------------------

def test_bare_tally_lists_every_command_and_is_a_usage_error():
    # As git does: the commands on stdout, and an exit code that says nothing was done (ours is 2).
    result = run_tally(expect=2)
    for command in COMMANDS:
        assert re.search(rf"^\s+{command}\s", result.stdout, re.MULTILINE), f"{command} is not listed:\n{result.stdout}"
    assert "tally hist data.npy" in result.stdout, result.stdout


@pytest.mark.parametrize("typed, meant", [("hsit", "hist"), ("becnh", "bench"), ("advice", "advise"),
                                          ("devcies", "devices"), ("plto", "plot")])
def test_a_misspelled_command_gets_a_suggestion(typed, meant):
    result = run_tally(typed, expect=2)
    assert result.stderr == f"tally: '{typed}' is not a tally command; did you mean '{meant}'? (see 'tally --help')\n", (
        result.stderr)


def test_an_unknown_command_far_from_any_is_named_without_a_guess():
    result = run_tally("frobnicate", expect=2)
    assert result.stderr.startswith("tally: 'frobnicate' is not a tally command") and "did you mean" not in result.stderr


# (command, its arguments with one option misspelled, the misspelling, the option meant)
MISSPELLED_OPTIONS = [
    ("hist", ["data.npy", "--bnis", "5"], "--bnis", "--bins"),
    ("hist", ["data.npy", "--last-egde", "exclusive"], "--last-egde", "--last-edge"),
    ("hist", ["data.npy", "--include-upper-edg"], "--include-upper-edg", "--include-upper-edge"),
    ("bench", ["--size", "2^10"], "--size", "--sizes"),
    ("bench", ["--qiuet"], "--qiuet", "--quiet"),
    ("advise", ["--distribution", "uniform", "--bisn", "4"], "--bisn", "--bins"),
    ("contention", ["--adresses", "4"], "--adresses", "--addresses"),
    ("race", ["--experiment", "counter"], "--experiment", "--experiments"),
    ("lab", ["--sample", "2^12"], "--sample", "--samples"),
    ("plot", ["r.json", "--ouptut", "x.png"], "--ouptut", "--output"),
    ("devices", ["--quite"], "--quite", "--quiet"),
]


@pytest.mark.parametrize("command, args, typed, meant", MISSPELLED_OPTIONS)
def test_a_misspelled_option_gets_a_suggestion(command, args, typed, meant):
    result = run_tally(command, *args, expect=2)
    assert result.stderr.startswith(f"tally {command}: "), result.stderr
    assert f"did you mean '{meant}'?" in result.stderr and typed in result.stderr, result.stderr
    assert f"(see 'tally {command} --help')" in result.stderr, result.stderr


def test_an_option_before_the_command_is_explained():
    result = run_tally("--bins", "4", expect=2)
    assert result.stderr.startswith("tally: '--bins' is not an option of tally itself"), result.stderr


# ---- one error style ---------------------------------------------------------------------------------

# Failures of every kind, from CLI11, from the command's own checks, from the files it reads or the
# library: each message is one line, `tally <command>: ...`, and names what is wrong.
ERRORS = [
    ("devices", ["--gpu"], "--gpu"),
    ("bench", ["--sizes", "lots"], "--sizes"),
    ("bench", ["--types", "complex64"], "--types"),
    ("bench", ["--backend", "tpu"], "--backend"),
    ("hist", ["no-such-file.npy"], "no-such-file.npy"),
    ("hist", [], "FILE"),
    ("contention", ["--runs", "0"], "--runs"),
    ("race", ["--bins", "0"], "--bins"),
    ("lab", ["--samples", "5"], "--samples"),
    ("advise", ["--distribution", "uniform", "--bins", "0"], "--bins"),
    ("advise", ["--file", "no-such-file.npy", "--bins", "4"], "no-such-file.npy"),
    ("plot", ["no-such-results.json", "-o", "x.png"], "no-such-results.json"),
]


@pytest.mark.parametrize("command, args, named", ERRORS)
def test_every_error_is_one_line_labelled_with_its_command(tmp_path, command, args, named):
    result = subprocess.run([TALLY, command, *args], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 2, result
    assert result.stderr.startswith(f"tally {command}: "), result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.count("tally ") >= 1, result.stderr
    assert f"tally {command}: tally" not in result.stderr and named in result.stderr, result.stderr


# ---- --quiet -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_quiet(command):
    assert "--quiet" in run_tally(command, "--help").stdout


@pytest.mark.parametrize("args", [
    ["devices"],
    ["bench", "--sizes", "2^12", "--bins", "16", "--dists", "uniform", "--strategies", "sequential", "--runs", "1"],
    ["race", "--experiments", "counter", "--threads", "100", "--runs", "1"],
    ["advise", "--distribution", "uniform", "--bins", "16", "--samples", "2^12", "--runs", "1"],
])
def test_quiet_commands_print_nothing_on_stderr(args):
    loud = run_tally(*args)
    quiet = run_tally(*args, "--quiet")
    assert quiet.stderr == "" and quiet.stdout != "", quiet.stderr
    if args[0] != "devices":
        assert loud.stderr != "", "the command has no progress for --quiet to silence"


# ---- sizes and the read bandwidth ----------------------------------------------------------------

def test_sizes_too_large_for_memory_are_refused_before_anything_runs():
    result = run_tally("bench", "--sizes", "2^40", expect=2)
    assert result.stdout == "", "the header was printed before the sizes were checked:\n" + result.stdout
    assert result.stderr.startswith("tally bench: argument '--sizes' is too large: 1099511627776 int32 samples need "
                                    "4.0 TiB of host memory"), result.stderr
    assert "available" in result.stderr, result.stderr
    result = run_tally("bench", "--sizes", "2^38", "--types", "uint8,float64", expect=2)
    assert "float64 samples need 2.0 TiB" in result.stderr, result.stderr
    result = run_tally("advise", "--distribution", "uniform", "--bins", "4", "--samples", "2^40", expect=2)
    assert result.stderr.startswith("tally advise: argument '--samples' is too large: "), result.stderr


def read_bandwidth_bytes(document):
    """The buffer the read bandwidth was measured over, from a result JSON's read_method."""
    found = re.search(r"over (\d+) (KiB|MiB|GiB)", document["read_method"])
    assert found, document["read_method"]
    return int(found.group(1)) * {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[found.group(2)]


def test_the_read_bandwidth_is_measured_over_a_buffer_sized_to_the_input(tmp_path):
    measured = {}
    for samples in (2**12, 2**24):  # int32: 16 KiB, within any L2; 64 MiB
        out = tmp_path / f"bench-{samples}.json"
        run_tally("bench", "--backend", "cpu", "--sizes", samples, "--bins", "16", "--dists", "uniform",
                  "--strategies", "sequential", "--runs", "1", "--warmup", "0", "--quiet", "--json", out)
        measured[samples] = read_bandwidth_bytes(json.loads(out.read_text()))
    # A small input is measured beyond L2, never over the input itself; never over the old 512 MiB.
    assert 4 * 2**12 * 4 < measured[2**12] < 512 * 2**20, measured
    # A larger input is measured over itself (at least), not over 512 MiB.
    assert 4 * 2**24 <= measured[2**24] < 512 * 2**20, measured


def test_advise_says_how_noisy_the_figures_it_compares_are(tmp_path):
    out = tmp_path / "advise.json"
    run_tally("advise", "--distribution", "uniform", "--bins", "64", "--samples", "2^16", "--runs", "5", "--quiet",
              "--json", out)
    doc = json.loads(out.read_text())
    for row in doc["rows"]:
        if row["timed"]:
            assert row["min_ms"] <= row["median_ms"] <= row["max_ms"], row
    text = doc["explanation"]
    assert re.search(r"was fastest: [\d.e+-]+ ms \(runs [\d.e+-]+-[\d.e+-]+\)", text), text
    # automatic is either the fastest, as fast, within the noise, or slower beyond it (and says by how much).
    assert re.search(r"the fastest strategy\.|no slower\.|within noise \(the runs overlap\)|even from its fastest run",
                     text), text
