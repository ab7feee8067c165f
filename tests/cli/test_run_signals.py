"""`gpuscope run` and the command it wraps: signals passed on once, nothing run between fork and exec, and the
targets that fork, exec, exit or are killed while gpuscope follows them. Real processes throughout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from typer.testing import CliRunner

import gpuscope
from gpuscope.cli.main import app
from gpuscope.model.schema import PROC_CPU_CORES
from gpuscope.store import Store
from tests.cli.live_targets import SPIN, TARGETS, pyspy_cannot, started

SIGNALS = TARGETS / "signals.py"
FORKS = TARGETS / "forks.py"
RUN = ("run", "--no-stacks", "--interval", "0.2", "--json", "--")


def environment(home: Path) -> dict[str, str]:
    return {**os.environ, "GPUSCOPE_HOME": str(home), "COLUMNS": "120"}


def wait_ready(out: Path, home: Path, timeout_s: float = 60.0) -> None:
    """Until the target says it is ready and gpuscope has saved samples of it: the recording is under way."""
    deadline = time.monotonic() + timeout_s
    while not (out.exists() and out.read_text().startswith("ready") and cpu_span_s(home) is not None):
        assert time.monotonic() < deadline, "the target never started, or gpuscope never recorded it"
        time.sleep(0.05)


def received(out: Path) -> list[str]:
    return out.read_text().splitlines()[1:]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_sent_to_gpuscope_run_reaches_the_command_once(tmp_path: Path, sig: signal.Signals) -> None:
    """As a scheduler does (Slurm, Kubernetes, `timeout`): the signal goes to gpuscope's pid alone."""
    out = tmp_path / "signals.txt"
    proc = subprocess.Popen([sys.executable, "-m", "gpuscope", *RUN, sys.executable, str(SIGNALS), str(out)],
                            env=environment(tmp_path / "home"), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_ready(out, tmp_path / "home")
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    assert received(out) == [sig.name]
    assert proc.returncode == 128 + sig, stderr  # the command's own exit code, as always
    assert "Traceback" not in stderr
    report = json.loads(stdout.splitlines()[-1])
    assert report["run"]["kind"] == "run" and report["run"]["status"] in ("complete", "target_exited")


def test_ctrl_c_at_a_terminal_reaches_the_command_once(tmp_path: Path) -> None:
    """At a terminal the command is in the foreground process group: the kernel sends it the SIGINT itself, and
    gpuscope does not send a second one."""
    out = tmp_path / "signals.txt"
    master, slave = os.openpty()
    proc = subprocess.Popen(["setsid", "--ctty", "--wait", sys.executable, "-m", "gpuscope", *RUN, sys.executable,
                             str(SIGNALS), str(out)], env=environment(tmp_path / "home"),
                            stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    screen: list[bytes] = []
    reader = threading.Thread(target=drain, args=(master, screen), daemon=True)
    reader.start()
    try:
        wait_ready(out, tmp_path / "home")
        os.write(master, b"\x03")  # Ctrl-C, as typed
        assert proc.wait(timeout=120) == 128 + signal.SIGINT, b"".join(screen).decode(errors="replace")
    finally:
        proc.kill()
        reader.join(timeout=10)
        os.close(master)
    assert received(out) == ["SIGINT"]
    assert b"Traceback" not in b"".join(screen)


def drain(fd: int, into: list[bytes]) -> None:
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO once the last process holding the terminal is gone
            return
        if not chunk:
            return
        into.append(chunk)


def popen_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The keyword arguments of every process started through subprocess.Popen from now on."""
    calls: list[dict[str, Any]] = []
    real = subprocess.Popen

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            calls.append({"args": args[0] if args else kwargs.get("args"), **kwargs})
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Recording)
    return calls


def test_the_command_starts_with_nothing_run_between_fork_and_exec(gpuscope_home: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """preexec_fn runs Python in the child before exec, which can deadlock a process with threads (a notebook)."""
    calls = popen_calls(monkeypatch)
    command = [sys.executable, "-c", "import time; time.sleep(0.3)"]
    result = CliRunner().invoke(app, ["run", "--interval", "0.1", "--no-save", "--", *command])
    assert result.exit_code == 0, result.output
    gpuscope.record(command=command, interval_s=0.1, save=False)
    launched = [c for c in calls if c["args"] == command]
    assert len(launched) == 2 and all(c.get("preexec_fn") is None for c in launched)


@pytest.mark.skipif(pyspy_cannot() is not None, reason=str(pyspy_cannot()))
def test_without_preexec_fn_py_spy_still_reads_the_command(gpuscope_home: Path) -> None:
    result = CliRunner().invoke(app, ["run", "--interval", "0.2", "--stack-interval", "0.2", "--json", "--",
                                      sys.executable, str(SPIN), "3"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["live"]["stacks"]["main_samples"] > 0 and "may not read" not in result.stderr


def attach_in_background(pid: int, home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "gpuscope", "attach", str(pid), "--interval", "0.2",
                             "--stack-interval", "0.2", "--json", *args], env=environment(home),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def sampling(home: Path, attach: subprocess.Popen[str], timeout_s: float = 90.0) -> None:
    """Once the attach has saved a second of the target's CPU samples (however long it took to start)."""
    deadline = time.monotonic() + timeout_s
    while (cpu_span_s(home) or 0.0) < 1.0:
        assert attach.poll() is None and time.monotonic() < deadline, "gpuscope attach did not record a second"
        time.sleep(0.1)


def cpu_span_s(home: Path) -> float | None:
    """From the first to the last CPU rate of a process the recording in ``home`` saved; None before it has one
    (a rate takes two looks)."""
    if not (home / "gpuscope.db").exists():
        return None
    with Store(home) as store:
        for meta in store.list_runs():
            ts = store.samples(meta.id, metrics=[PROC_CPU_CORES])["ts_ns"]
            if len(ts):
                return float(ts.max() - ts.min()) / 1e9
    return None


def test_a_target_killed_mid_attach_ends_the_recording_with_its_report(tmp_path: Path) -> None:
    with started(str(SPIN)) as target:  # spins until killed
        attach = attach_in_background(target.pid, tmp_path / "home")
        sampling(tmp_path / "home", attach)
        target.kill()  # SIGKILL: no chance to say goodbye; a zombie until the fixture reaps it
        stdout, stderr = attach.communicate(timeout=120)
    assert attach.returncode == 0 and "Traceback" not in stderr, stderr
    report = json.loads(stdout)
    assert report["run"]["status"] == "target_exited"
    # The samples before the kill are kept: a second or more of them, with the spinning target's CPU.
    assert report["live"]["duration_s"] >= 1.0 and report["live"]["host"]["main_cpu_mean"] > 0


def test_a_target_that_forks_and_execs_is_followed(tmp_path: Path) -> None:
    """The target forks a child that execs into another Python program, then execs itself: same pids, new programs.
    The recording follows the tree through both execs to the end."""
    go = tmp_path / "go"
    target = subprocess.Popen([sys.executable, str(FORKS), "3", str(go)], stdout=subprocess.PIPE, text=True)
    child = -1
    try:
        attach = attach_in_background(target.pid, tmp_path / "home")
        sampling(tmp_path / "home", attach)
        go.touch()
        assert target.stdout is not None
        child = int(target.stdout.readline())
        stdout, stderr = attach.communicate(timeout=120)
    finally:
        for pid in (child, target.pid):
            try:
                psutil.Process(pid).kill()
            except (psutil.NoSuchProcess, ValueError):
                pass
        target.wait()
    assert attach.returncode == 0 and "Traceback" not in stderr, stderr
    report = json.loads(stdout)
    assert report["run"]["status"] == "target_exited"
    pids = {p["pid"] for p in report["live"]["processes"]}
    assert {target.pid, child} <= pids
    if pyspy_cannot() is None:  # after its exec the target is spin.py: still Python, still read
        assert report["live"]["stacks"]["main_samples"] > 0
