"""The store under faults, for real: `kill -9` of a recording gpuscope (while it samples, and while it saves the
end of the run), readers while it writes, two recordings into one store at once, and a full disk (a file size
limit on the gpuscope process)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpuscope.store import Store
from tests.cli.helpers import gpuscope
from tests.cli.live_targets import SPIN, TARGETS, pyspy_cannot, started
from tests.conftest import SAMPLES


def listed(home: Path) -> list[dict[str, Any]]:
    """`gpuscope runs --json` in its own process: a reader next to the writer."""
    result = gpuscope("runs", "--json", home=home)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_kill_9_keeps_the_samples_and_the_run_is_interrupted(gpuscope_home: Path) -> None:
    stacks = () if pyspy_cannot() is None else ("--no-stacks",)
    with started(str(SPIN), "120") as target:
        attach = subprocess.Popen(
            [sys.executable, "-m", "gpuscope", "attach", str(target.pid), "--interval", "0.1",
             "--stack-interval", "0.2", *stacks],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "GPUSCOPE_HOME": str(gpuscope_home)})
        try:
            run_id, samples_seen = wait_for_growth(gpuscope_home)
            (row,) = listed(gpuscope_home)  # another process reads the catalog while attach writes
            assert row["id"] == run_id and row["status"] == "running" and int(row["samples"]) >= samples_seen
            samples_seen = wait_for_growth(gpuscope_home, above=int(row["samples"]))[1]
        finally:
            attach.send_signal(signal.SIGKILL)
            attach.wait()
    assert attach.returncode == -signal.SIGKILL
    with Store(gpuscope_home) as store:  # opening the store finds the writer gone
        meta = store.get_meta(run_id)
        samples = store.samples(run_id)
        stack_samples = store.stacks(run_id)
    assert meta.status == "interrupted"
    assert len(samples) >= samples_seen > 0  # everything flushed before the kill is kept
    assert meta.ended_ns is not None and meta.ended_ns >= int(samples["ts_ns"].max())  # the last flush
    if not stacks:
        assert stack_samples is not None and len(stack_samples.samples) > 0


def wait_for_growth(home: Path, *, above: int = 0, timeout_s: float = 60.0) -> tuple[str, int]:
    """Poll the store (a reader in this process) until the running run holds more than ``above`` samples."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (home / "gpuscope.db").exists():
            with Store(home) as store:
                counts = store.sample_counts()
            for run_id, n in counts.items():
                if n > above:
                    return run_id, n
        time.sleep(0.1)
    raise AssertionError(f"the samples did not grow past {above} while attach ran")


def run_command(home: Path, *args: str) -> subprocess.Popen[str]:
    """`gpuscope run` of a target from tests/targets, in its own process."""
    return subprocess.Popen([sys.executable, "-m", "gpuscope", "run", "--no-stacks", "--interval", "0.1", "--",
                             sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "GPUSCOPE_HOME": str(home)})


def test_two_runs_into_one_new_store_at_once_are_both_saved(gpuscope_home: Path) -> None:
    # No store yet: both create it, and both write their samples and reports into it while the other does.
    first, second = (run_command(gpuscope_home, str(SPIN), "3") for _ in range(2))
    for proc in (first, second):
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "Traceback" not in err, err
    rows = listed(gpuscope_home)
    assert len(rows) == 2 and len({r["id"] for r in rows}) == 2
    with Store(gpuscope_home) as store:
        for row in rows:
            assert row["status"] == "target_exited" and row["samples"] > 0
            assert store.load_report(row["id"]) is not None


def test_kill_9_during_the_final_save_keeps_the_run_as_interrupted(gpuscope_home: Path) -> None:
    trace = next((SAMPLES / "resnet50_dataloader_bound").glob("*.json.gz"))
    recording = run_command(gpuscope_home, str(TARGETS / "leave_trace.py"), str(trace), "1.5")
    lock = None
    try:
        assert recording.stdout is not None and recording.stdout.readline().strip() == "trace left"
        run_dir = next(iter((gpuscope_home / "runs").iterdir()))
        deadline = time.monotonic() + 120
        while not (run_dir / "rank00000.npz").exists():  # sampling is over: the trace is being saved with the run
            assert recording.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        lock = sqlite3.connect(gpuscope_home / "gpuscope.db", isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # the report's save waits for this writer: the kill lands before it
        with Store(gpuscope_home) as store:
            samples_seen = store.sample_count(run_dir.name)
        time.sleep(0.5)
        recording.send_signal(signal.SIGKILL)
        recording.wait()
    finally:
        if lock is not None:
            lock.execute("ROLLBACK")
            lock.close()
        recording.kill()
        recording.wait()
    (row,) = listed(gpuscope_home)
    assert row["id"] == run_dir.name and row["status"] == "interrupted" and row["verdict"] is None
    assert row["samples"] == samples_seen > 0  # every sample flushed before the kill is kept
    assert row["ended_ns"] is not None


@contextmanager
def size_limited(limit_bytes: int) -> Iterator[list[str]]:
    """A command line prefix that runs gpuscope with RLIMIT_FSIZE: a write past ``limit_bytes`` into any file
    fails with EFBIG (Python ignores SIGXFSZ), as on a full disk."""
    yield [sys.executable, "-c", "import os, resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, "
           f"({limit_bytes}, {limit_bytes})); os.execv(sys.executable, [sys.executable, '-m', 'gpuscope',"
           " *sys.argv[1:]])"]


def analysed(home: Path) -> str:
    result = gpuscope("analyze", str(SAMPLES / "resnet50_dataloader_bound"), "--json", home=home)
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)["run"]["id"])


def test_disk_full_while_recording_keeps_what_was_saved(gpuscope_home: Path) -> None:
    before = analysed(gpuscope_home)
    limit = max(p.stat().st_size for p in gpuscope_home.glob("gpuscope.db*")) + 96 * 1024
    with started(str(SPIN), "120") as target, size_limited(limit) as prefix:
        attach = subprocess.run([*prefix, "attach", str(target.pid), "--no-stacks", "--interval", "0.02",
                                 "--duration", "60"], capture_output=True, text=True, timeout=120,
                                env={**os.environ, "GPUSCOPE_HOME": str(gpuscope_home)})
    assert attach.returncode == 2 and "Traceback" not in attach.stderr, attach.stderr
    (line,) = [x for x in attach.stderr.splitlines() if x.startswith("gpuscope: error: ")]
    assert str(gpuscope_home / "gpuscope.db") in line and "could not be written" in line
    assert "samples of run" in line and "was not saved" in line and "everything saved before is kept" in line
    rows = {r["id"]: r for r in listed(gpuscope_home)}
    (cut,) = set(rows) - {before}
    assert rows[cut]["status"] == "interrupted" and rows[cut]["samples"] > 0  # the flushes before the limit
    assert rows[before]["verdict"] == "data_loading"  # the earlier run, untouched
    assert gpuscope("show", before, home=gpuscope_home).returncode == 0


def test_disk_full_while_saving_an_analysis_saves_none_of_it(gpuscope_home: Path) -> None:
    before = analysed(gpuscope_home)
    catalog = (gpuscope_home / "gpuscope.db").read_bytes()
    limit = max(p.stat().st_size for p in gpuscope_home.glob("gpuscope.db*")) + 64 * 1024  # less than a trace
    with size_limited(limit) as prefix:
        result = subprocess.run([*prefix, "analyze", str(SAMPLES / "resnet50_dataloader_bound"), "--new-run"],
                                capture_output=True, text=True, timeout=120,
                                env={**os.environ, "GPUSCOPE_HOME": str(gpuscope_home)})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "could not be written" in line and "not saved" in line
    assert [r["id"] for r in listed(gpuscope_home)] == [before]  # no half-saved run
    assert sorted(p.name for p in (gpuscope_home / "runs").iterdir()) == [before]
    assert (gpuscope_home / "gpuscope.db").read_bytes() == catalog


def test_disk_full_while_running_a_command_still_waits_for_it(gpuscope_home: Path) -> None:
    analysed(gpuscope_home)
    limit = max(p.stat().st_size for p in gpuscope_home.glob("gpuscope.db*")) + 96 * 1024
    with size_limited(limit) as prefix:
        result = subprocess.run([*prefix, "run", "--no-stacks", "--interval", "0.02", "--", sys.executable, str(SPIN),
                                 "8"], capture_output=True, text=True, timeout=120,
                                env={**os.environ, "GPUSCOPE_HOME": str(gpuscope_home)})
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("gpuscope: error: ")]
    assert "could not be written" in line and "was not saved" in line
    windows = [[int(v) for v in x.split()[1:3]] for x in result.stdout.splitlines() if x.startswith("window ")]
    assert (windows[-1][1] - windows[0][0]) / 1e9 > 7  # the command ran its 8 s to the end, waited for
    (cut,) = [r for r in listed(gpuscope_home) if r["kind"] == "run"]
    assert cut["status"] == "interrupted" and cut["samples"] > 0
