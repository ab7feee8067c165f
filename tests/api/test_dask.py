"""Per-rank work on a real Dask cluster (a distributed.LocalCluster of worker processes on loopback): the same report
as the local run, the saved run's columns sent back by the workers, progress as ranks finish, and one line when
the cluster cannot be used."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gpuscope
from gpuscope.api import GpuscopeError
from gpuscope.api.analysis import analyze_path
from tests.cli.helpers import gpuscope as gpuscope_cli
from tests.cli.helpers import one_clean_error_line
from tests.conftest import SAMPLES

distributed = pytest.importorskip("distributed")
dask_config = pytest.importorskip("dask.config")
DLRM = SAMPLES / "dlrm_8rank"


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """The address of a LocalCluster of two single-threaded worker processes."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  host="127.0.0.1") as cluster:
        yield cluster.scheduler_address


def _without_run_id(doc: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "run": {k: v for k, v in doc["run"].items() if k != "id"}}


def test_the_cli_on_dask_gives_the_local_json_report(scheduler: str, tmp_path: Path) -> None:
    local = gpuscope_cli("analyze", str(DLRM), "--json", "--no-save", home=tmp_path)
    on_dask = gpuscope_cli("analyze", str(DLRM), "--json", "--no-save", "--dask", scheduler, home=tmp_path)
    assert local.returncode == 0 and on_dask.returncode == 0, on_dask.stderr
    assert _without_run_id(json.loads(on_dask.stdout)) == _without_run_id(json.loads(local.stdout))
    assert len(json.loads(on_dask.stdout)["ranks"]) == 8


def test_the_workers_ran_the_ranks(scheduler: str, gpuscope_home: Path) -> None:
    with distributed.Client(scheduler) as client:
        workers = set(client.scheduler_info()["workers"])
        with distributed.get_task_stream(client=client) as stream:
            gpuscope.analyze(DLRM, dask=client)
    tasks = [t for t in stream.data if "read_one" in str(t["key"])]
    assert len(tasks) == 8  # one task a rank file, run on the cluster's worker processes
    assert {t["worker"] for t in tasks} <= workers


def test_a_run_saved_from_dask_keeps_the_columns_the_workers_sent(scheduler: str, gpuscope_home: Path) -> None:
    first = gpuscope.analyze(DLRM, dask=scheduler, save=True)
    again = gpuscope.load(first.run.id, reanalyze=True)
    assert json.loads(again.to_json()) == json.loads(first.to_json())
    assert len(list((gpuscope_home / "runs" / first.run.id).glob("rank*.npz"))) == 8
    assert list((gpuscope_home / "staging").iterdir()) == []


def test_progress_is_told_as_each_rank_finishes(scheduler: str, gpuscope_home: Path) -> None:
    seen: list[tuple[float, str]] = []
    analyze_path(DLRM, dask=scheduler, on_progress=lambda source: seen.append((time.monotonic(), source.name)))
    assert sorted(name for _, name in seen) == sorted(p.name for p in DLRM.iterdir())


def test_the_cli_shows_a_progress_bar_on_a_terminal(scheduler: str, tmp_path: Path) -> None:
    primary, secondary = pty.openpty()
    env = {**os.environ, "GPUSCOPE_HOME": str(tmp_path), "COLUMNS": "120", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "gpuscope", "analyze", str(DLRM), "--no-save", "--dask", scheduler],
                            stdout=subprocess.DEVNULL, stderr=secondary, env=env)
    os.close(secondary)
    shown = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        shown += chunk
    os.close(primary)
    assert proc.wait(timeout=120) == 0
    assert b"analysing ranks" in shown


def test_an_unreachable_scheduler_is_one_line(gpuscope_home: Path) -> None:
    with pytest.raises(GpuscopeError, match=r"^cannot reach the Dask scheduler at tcp://127\.0\.0\.1:9: "), \
            dask_config.set({"distributed.comm.timeouts.connect": "1s"}):
        gpuscope.analyze(DLRM, dask="tcp://127.0.0.1:9")


def test_without_the_dask_extra_the_option_says_what_to_install(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # an import of it fails as if it were not installed
    with pytest.raises(GpuscopeError, match=r"pip install 'gpuscope\[dask\]'"):
        gpuscope.analyze(DLRM, dask="tcp://127.0.0.1:9")


@pytest.mark.parametrize("address", ["nonsense://nowhere", "tcp://127.0.0.1:9"])
def test_the_cli_names_a_scheduler_it_cannot_use_in_one_line(address: str, tmp_path: Path) -> None:
    result = gpuscope_cli("analyze", str(DLRM), "--dask", address, home=tmp_path,
                          DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="2s")
    assert result.returncode == 2
    assert one_clean_error_line(result).startswith(f"gpuscope: error: cannot reach the Dask scheduler at {address}: ")


def test_a_relative_path_is_read_by_the_workers_from_where_it_was_given(scheduler: str, gpuscope_home: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(SAMPLES)  # the workers started elsewhere: "dlrm_8rank" alone means nothing to them
    report = gpuscope.analyze("dlrm_8rank", dask=scheduler)
    assert [r.source for r in report.ranks] == [str(p) for p in sorted(DLRM.glob("*.json.gz"))]
