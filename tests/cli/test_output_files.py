"""Tests that every file the tool writes for the user (`tally hist --output`, the --csv, --json and
--plot of the measuring commands, `tally plot -o`) is written whole or not at all: when the write
fails, the tool exits with code 2 and one message naming the option, the file and the system's
reason, an existing file keeps its old content, and the folder holds no temporary file and no
partial one.

The failures are real ones, made three ways:
- a read-only folder: a tmpfs remounted read-only where the tests may mount (root with the right to
  mount); else, not as root, a folder chmod 555; as root without the right to mount, skipped with
  the reason (root writes through any chmod);
- a full disk: a 64 KiB tmpfs, too small for the output or filled up first (skipped, with the
  reason, where the tests may not mount);
- a file size limit (RLIMIT_FSIZE, with SIGXFSZ ignored so that a write past it fails with EFBIG,
  as a full disk's fails with ENOSPC): needs no mount and no root, so it runs everywhere, also where
  the tmpfs tests are skipped.
Mounts are undone in the fixtures' teardown, whatever the test did.
"""

import contextlib
import errno
import os
import resource
import shutil
import signal
import stat
import subprocess
import threading

import numpy as np
import pytest

TALLY = os.environ.get("TALLY_BIN")
PYTHON = os.environ.get("TALLY_PYTHON", "python3")
HAS_MATPLOTLIB = subprocess.run([PYTHON, "-c", "import matplotlib"], capture_output=True).returncode == 0
needs_matplotlib = pytest.mark.skipif(not HAS_MATPLOTLIB, reason="python3 has no matplotlib (pip install matplotlib)")

OLD_CONTENT = b"the results of an earlier run\n"
RACE = ["race", "--backend", "cpu", "--threads", "100", "--samples", "1000", "--bins", "4", "--quiet"]
ADVISE = ["advise", "--distribution", "uniform", "--samples", "1000", "--bins", "16", "--backend", "cpu", "--runs", "1",
          "--warmup", "0", "--quiet"]
# A bincount of 20000 values: 160 KB as .npy, about as much as .csv; more than the small disk holds.
BIG_BINCOUNT = 20000


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """What the writers read, kept out of the folders under test: samples, and a result JSON to draw."""
    assert TALLY, "set TALLY_BIN to the built tally executable (CTest does)"
    folder = tmp_path_factory.mktemp("inputs")
    samples = folder / "samples.npy"
    np.save(samples, np.arange(BIG_BINCOUNT, dtype=np.int32))
    results = folder / "race.json"
    made = subprocess.run([TALLY, *RACE, "--json", str(results)], capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    if HAS_MATPLOTLIB:
        # matplotlib builds its font cache on first use; built here, it is not written under a size limit.
        subprocess.run([PYTHON, "-c", "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot"],
                       capture_output=True, timeout=300)
    return {"samples": str(samples), "results": str(results)}


# Every writer: (the option that names the target, the target's name, the arguments given the target).
WRITERS = {
    "hist_npy": ("--output", "counts.npy",
                 lambda i, t: ["hist", i["samples"], "--bincount", "--bins", str(BIG_BINCOUNT), "--output", t]),
    "hist_csv": ("--output", "counts.csv",
                 lambda i, t: ["hist", i["samples"], "--bincount", "--bins", str(BIG_BINCOUNT), "--output", t]),
    "race_csv": ("--csv", "race.csv", lambda i, t: [*RACE, "--csv", t]),
    "race_json": ("--json", "race.json", lambda i, t: [*RACE, "--json", t]),
    "advise_json": ("--json", "advise.json", lambda i, t: [*ADVISE, "--json", t]),
    "race_plot": ("--plot", "race.png", lambda i, t: [*RACE, "--plot", t]),
    "plot_output": ("--output", "race.svg", lambda i, t: ["plot", i["results"], "-o", t]),
}
DRAWING = {"race_plot", "plot_output"}


def writer_params(names):
    return [pytest.param(name, marks=[needs_matplotlib] if name in DRAWING else [], id=name) for name in names]


def folder_state(folder):
    """Every entry of `folder` with its content: what a failed write must leave exactly as it was."""
    return {entry.name: (entry.read_bytes() if entry.is_file() else None) for entry in folder.iterdir()}


def run_writer(name, inputs, folder, preexec_fn=None):
    option, file_name, make_args = WRITERS[name]
    target = str(folder / file_name)
    result = subprocess.run([TALLY, *make_args(inputs, target)], capture_output=True, text=True, timeout=300,
                            preexec_fn=preexec_fn)
    return result, option, target


def assert_failed_cleanly(result, option, target, reason, before, folder, existed=True):
    """Exit code 2, one message naming the option, the file and `reason`, and the folder as it was."""
    outcome = "the existing file is unchanged" if existed else "no file was made"
    command = result.args[1]  # every message is `tally <command>: ...`
    expected = f"tally {command}: {option} '{target}' cannot be written: {reason}; {outcome}"
    assert result.returncode == 2, (
        f"exit code {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    assert expected in result.stderr, f"expected '{expected}' in stderr:\n{result.stderr}"
    assert result.stderr.count(f"tally {command}: ") == 1, f"one error, not several:\n{result.stderr}"
    assert folder_state(folder) == before, "the folder changed: a temporary or partial file is left, or the target moved"


# ---- mounts -------------------------------------------------------------------------------------

def mount_tmpfs(folder, size):
    """Mounts a tmpfs of `size` on `folder`; returns None, or why it could not."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    if shutil.which("mount") is None:
        return "there is no mount command"
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    first_line = (mounted.stderr.strip().splitlines() or ["no message"])[0]
    return None if mounted.returncode == 0 else f"mount -t tmpfs failed here: {first_line}"


def unmount(folder):
    if os.path.ismount(folder):
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@contextlib.contextmanager
def small_disk(tmp_path):
    """A 64 KiB tmpfs holding an earlier run's file (for every writer), or a skip saying why there is none."""
    folder = tmp_path / "small_disk"
    folder.mkdir()
    why_not = mount_tmpfs(folder, "64k")
    if why_not:
        pytest.skip(f"no small disk to fill ({why_not}); test_file_size_limit stands in for it")
    try:
        for _, file_name, _ in WRITERS.values():
            (folder / file_name).write_bytes(OLD_CONTENT)
        yield folder
    finally:
        unmount(folder)


def fill(folder):
    """Writes a file that takes every byte left on the file system of `folder`."""
    descriptor = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(descriptor, b"\0" * 4096)
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
    finally:
        os.close(descriptor)


@pytest.fixture
def read_only_folder(tmp_path):
    """(a folder that holds an earlier run's file for every writer and refuses new files, the reason
    the system gives). A tmpfs remounted read-only where mounting works, else chmod 555 (not as root)."""
    folder = tmp_path / "read_only"
    folder.mkdir()
    why_not = mount_tmpfs(folder, "1m")
    try:
        for _, file_name, _ in WRITERS.values():
            (folder / file_name).write_bytes(OLD_CONTENT)
        if why_not is None:
            remounted = subprocess.run(["mount", "-o", "remount,ro", str(folder)], capture_output=True, text=True)
            assert remounted.returncode == 0, remounted.stderr
            reason = os.strerror(errno.EROFS)
        elif os.geteuid() != 0:
            folder.chmod(0o555)
            reason = os.strerror(errno.EACCES)
        else:
            pytest.skip(f"root writes through chmod 555, and no read-only mount can be made ({why_not})")
        try:
            (folder / "probe").write_bytes(b"")
        except OSError:
            pass
        else:
            pytest.skip("the folder made read-only still takes new files (a capability overrides its mode)")
        yield folder, reason
    finally:
        unmount(folder)
        folder.chmod(0o755)


# ---- failures -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", writer_params(WRITERS))
def test_read_only_folder(name, inputs, read_only_folder):
    folder, reason = read_only_folder
    before = folder_state(folder)
    result, option, target = run_writer(name, inputs, folder)
    assert_failed_cleanly(result, option, target, reason, before, folder)


def test_read_only_folder_makes_no_new_file(inputs, read_only_folder):
    folder, reason = read_only_folder
    before = folder_state(folder)
    target = str(folder / "new.csv")
    result = subprocess.run([TALLY, *RACE, "--csv", target], capture_output=True, text=True, timeout=300)
    assert_failed_cleanly(result, "--csv", target, reason, before, folder, existed=False)


@pytest.mark.parametrize("name", writer_params(["hist_npy", "hist_csv"]))
def test_big_output_does_not_fit_on_a_small_disk(name, inputs, tmp_path):
    with small_disk(tmp_path) as folder:
        before = folder_state(folder)
        result, option, target = run_writer(name, inputs, folder)
        assert_failed_cleanly(result, option, target, os.strerror(errno.ENOSPC), before, folder)


@pytest.mark.parametrize("name", writer_params(WRITERS))
def test_full_disk(name, inputs, tmp_path):
    with small_disk(tmp_path) as folder:
        fill(folder)
        before = folder_state(folder)
        result, option, target = run_writer(name, inputs, folder)
        assert_failed_cleanly(result, option, target, os.strerror(errno.ENOSPC), before, folder)


def limit_file_size():
    """In the child: no file may grow past 1 KiB, and a write past that fails (EFBIG) rather than killing."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))


# race_plot is left out: with --plot alone, the JSON it draws from goes to a temporary file first, and
# that JSON, not the picture, would reach the limit. plot_output writes the picture alone.
@pytest.mark.parametrize("name", writer_params(sorted(set(WRITERS) - {"race_plot"})))
def test_file_size_limit(name, inputs, tmp_path):
    folder = tmp_path / "limited"
    folder.mkdir()
    for _, file_name, _ in WRITERS.values():
        (folder / file_name).write_bytes(OLD_CONTENT)
    before = folder_state(folder)
    result, option, target = run_writer(name, inputs, folder, preexec_fn=limit_file_size)
    assert_failed_cleanly(result, option, target, os.strerror(errno.EFBIG), before, folder)


# ---- successes ----------------------------------------------------------------------------------

def test_a_write_replaces_the_file_whole_keeps_its_mode_and_leaves_nothing_else(inputs, tmp_path):
    target = tmp_path / "counts.csv"
    target.write_bytes(OLD_CONTENT)
    target.chmod(0o640)
    result, _, _ = run_writer("hist_csv", inputs, tmp_path)
    assert result.returncode == 0, result.stderr
    lines = target.read_text().splitlines()
    assert lines[0] == "value,count" and len(lines) == BIG_BINCOUNT + 1 and lines[-1] == f"{BIG_BINCOUNT - 1},1"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.csv"]


def test_a_symlinked_target_is_written_through_its_link(inputs, tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "links").mkdir()
    real = tmp_path / "real" / "race.json"
    real.write_bytes(OLD_CONTENT)
    link = tmp_path / "links" / "race.json"
    link.symlink_to(real)
    result, _, _ = run_writer("race_json", inputs, tmp_path / "links")
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text().startswith("{") and '"command": "race"' in real.read_text()
    assert [p.name for p in (tmp_path / "real").iterdir()] == ["race.json"]
    assert [p.name for p in (tmp_path / "links").iterdir()] == ["race.json"]


def test_a_fifo_is_written_in_place_not_replaced(inputs, tmp_path):
    fifo = tmp_path / "race.csv"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    try:
        result, _, _ = run_writer("race_csv", inputs, tmp_path)
    finally:
        if reader.is_alive():  # the tool never opened it: unblock the reader
            with open(fifo, "wb"):
                pass
        reader.join(timeout=60)
    assert result.returncode == 0, result.stderr
    assert received and received[0].startswith(b"# tally"), received
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["race.csv"]


def test_the_file_stdout_goes_to_gets_the_bytes_after_the_table(tmp_path):
    out = tmp_path / "out.txt"
    with open(out, "wb") as stdout:
        inode = os.fstat(stdout.fileno()).st_ino
        result = subprocess.run([TALLY, *RACE, "--csv", "/dev/stdout"], stdout=stdout, stderr=subprocess.PIPE,
                                text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert "verification mismatches" in text and text.index("verification mismatches") < text.index("# tally"), text
    assert out.stat().st_ino == inode, "the file stdout went to was replaced, not written"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
