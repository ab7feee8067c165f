"""The files a user may hand over: a ``.nsys-rep`` with and without ``nsys`` on PATH, an SQLite file that is no
Nsight Systems export, and a damaged one: each is read or said in one line (exit 2), never a traceback."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import sys
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuscope.net.deadline import Timeouts
from gpuscope.traces import TraceError
from gpuscope.traces.errors import RemoteTimeout
from gpuscope.traces.loader import read_traces
from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.servers import serving
from tests.traces.nsys.exports import training_job

FAKE_NSYS = """#!{python}
import shutil, sys, time
args = sys.argv[1:]
mode = {mode!r}
if mode == "sleep":
    time.sleep(30)
if mode == "fail":
    print("ERROR: the report is damaged", file=sys.stderr)
    sys.exit(1)
assert args[:2] == ["export", "--type"] and args[2] == "sqlite", args
out = args[args.index("--output") + 1]
shutil.copyfile({export!r}, out)
"""


def fake_nsys(folder: Path, export: Path, mode: str = "ok") -> Path:
    """An ``nsys`` that 'exports' ``export`` (or fails, or hangs), first on a PATH of its own."""
    folder.mkdir(exist_ok=True)
    script = folder / "nsys"
    script.write_text(FAKE_NSYS.format(python=sys.executable, mode=mode, export=str(export)))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder


def test_a_report_is_exported_by_nsys_on_path_and_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    export = training_job(ranks=2).write(tmp_path / "made.sqlite")
    report = tmp_path / "job.nsys-rep"
    report.write_bytes(b"NSYS report bytes")
    monkeypatch.setenv("PATH", f"{fake_nsys(tmp_path / 'bin', export)}{os.pathsep}{os.environ['PATH']}")
    traces = read_traces(str(report))
    assert [t.rank for t in traces] == [0, 1] and {t.source for t in traces} == {str(report)}
    assert traces[0].content_sha256 != read_traces(str(export))[0].content_sha256  # the report's bytes name it


@pytest.mark.parametrize("mode", ["fail", "sleep"])
def test_an_export_that_fails_or_runs_past_the_deadline_is_one_error(tmp_path: Path, mode: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    report = tmp_path / "job.nsys-rep"
    report.write_bytes(b"NSYS report bytes")
    monkeypatch.setenv("PATH", f"{fake_nsys(tmp_path / 'bin', tmp_path, mode)}{os.pathsep}{os.environ['PATH']}")
    expected = RemoteTimeout if mode == "sleep" else TraceError
    with pytest.raises(expected, match="the report is damaged" if mode == "fail" else "did not finish within"):
        read_traces(str(report), timeouts=Timeouts.within(0.5))


def test_files_that_are_no_profile_are_one_line_and_exit_2(tmp_path: Path) -> None:
    report = tmp_path / "job.nsys-rep"
    report.write_bytes(b"NSYS report bytes")
    other = tmp_path / "app.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    damaged = tmp_path / "damaged.sqlite"
    damaged.write_bytes(training_job(ranks=1).write(tmp_path / "whole.sqlite").read_bytes()[:5000])
    no_nsys = {"PATH": str(Path(sys.executable).parent)}  # python, without any nsys
    lines = {}
    for path in (report, other, damaged):
        result = gpuscope("analyze", str(path), "--no-save", home=tmp_path / "home", **no_nsys)
        assert result.returncode == 2
        lines[path.name] = one_clean_error_line(result)
    assert lines["job.nsys-rep"] == (
        f"gpuscope: error: {report}: an Nsight Systems report, which only nsys reads, and nsys is not on PATH: "
        f"export it with `nsys export --type sqlite --output {tmp_path / 'job.sqlite'} --force-overwrite true "
        f"{report}` and analyse the .sqlite file")
    assert "an SQLite database, but not an Nsight Systems export" in lines["app.sqlite"]
    assert "damaged SQLite database" in lines["damaged.sqlite"]


def test_an_export_reads_through_the_command_line_with_its_step_range(tmp_path: Path) -> None:
    export = training_job(ranks=2, steps=4, step_names="train_step").write(tmp_path / "job.sqlite")
    result = gpuscope("analyze", str(export), "--no-save", "--json", "--step-range", "train_step",
                      home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [(r["rank"], r["steps"]) for r in report["ranks"]] == [(0, 4), (1, 4)]
    assert {r["profile"]["setup"]["profiler"] for r in report["ranks"]} == {"nsys"}


def test_an_export_by_url_reads_as_the_local_file(tmp_path: Path) -> None:
    export = training_job(ranks=2).write(tmp_path / "job.sqlite")
    handler = partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/job.sqlite"
        remote = read_traces(url, timeouts=Timeouts.within(60))
    local = read_traces(str(export))
    assert [t.source for t in remote] == [url, url]
    for a, b in zip(remote, local):
        assert (a.rank, a.names, a.content_sha256) == (b.rank, b.names, b.content_sha256)
        assert (a.events.ts_ns == b.events.ts_ns).all() and (a.events.kind == b.events.kind).all()
