"""The store under faults, for real: `kill -9` of a recording gpuscope, and readers while it writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gpuscope.store import Store
from tests.cli.helpers import gpuscope
from tests.cli.live_targets import SPIN, pyspy_cannot, started


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
