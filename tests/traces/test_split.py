"""A large trace file read in stretches by several processes (``gpuscope.traces.split``) gives the trace one process
gives, every column and table alike; a worker that dies leaves its stretch to the reader; a reader killed while its
workers read leaves none of them running; a daemonic process, which may start none, reads alone. Real forked
processes throughout."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscope.api.analysis import analyze_path
from gpuscope.model.codec import to_json
from gpuscope.model.report import Report
from gpuscope.traces import kineto, load, read_trace, split
from gpuscope.traces.loader import load_files
from tests.cli.test_kill_analyze import end, gone_within, tree
from tests.conftest import SAMPLES
from tests.traces.conftest import force_stretches
from tests.traces.same import assert_same

# Each reads differently: 2021's schema (thread ids as text, memory events), shapes recorded with a first layer
# (DLRM, a transformer), collectives with their sizes (gloo), ROCm, a serving engine, CPU only.
TRACES = ("resnet50_dataloader_bound", "dlrm_8rank/worker0_step_12.1694128201545.pt.trace.json.gz",
          "h200/transformer_bf16", "gloo_4rank/late_once/rank1", "dev/mi300x_resnet_act_checkpoint.json.gz",
          "serving/sglang_qwen3_8b_extend_decode.json.gz", "cpu_mlp_aa/run_a")


def trace_file(name: str) -> Path:
    path = SAMPLES / name
    if path.is_file():
        return path
    if not path.exists():  # a rank by its prefix
        return next(path.parent.glob(path.name + ".*.json.gz"))
    return next(path.glob("*.json.gz"))


@pytest.mark.parametrize("name", TRACES)
def test_a_trace_read_in_stretches_is_the_trace_read_in_one_process(name: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = trace_file(name)
    alone = read_trace(path)
    monkeypatch.setattr(kineto, "CHUNKED_MIN_BYTES", 0)
    monkeypatch.setattr(split, "CHUNK_EVENTS", max(1, (len(alone.events) + len(alone.memory.ts_ns)) // 12))
    force_stretches(monkeypatch, 3)  # three stretches of four chunks or more each
    assert_same(read_trace(path, jobs=3), alone)


def _note_pid(lo: int, hi: int) -> tuple[object, object]:
    """``split._read_stretch``, leaving a file named by the process that ran it and the stretch's first event in
    the folder ``PIDS``."""
    (Path(os.environ["PIDS"]) / f"{os.getpid()}.{lo}").touch()
    return READ_STRETCH(lo, hi)


def stretches_read(folder: Path) -> list[tuple[int, int]]:
    """(process, first event) of each stretch read in a worker, from ``_note_pid``'s files."""
    return sorted((int(pid), int(lo)) for pid, lo in (p.name.split(".") for p in folder.iterdir()))


READ_STRETCH = split._read_stretch


def _die(lo: int, hi: int) -> None:
    os._exit(3)


def test_the_stretches_after_the_first_are_read_by_other_processes(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = trace_file(TRACES[0])
    monkeypatch.setenv("PIDS", str(tmp_path))
    monkeypatch.setattr(split, "_read_stretch", _note_pid)
    force_stretches(monkeypatch, 3)
    read_trace(path, jobs=3)
    read = stretches_read(tmp_path)  # the second and third, each once, in workers (one or two of them)
    assert len(read) == 2 and len({lo for _, lo in read}) == 2 and os.getpid() not in {pid for pid, _ in read}


@pytest.mark.parametrize("jobs", [1, 3])
def test_load_reads_a_single_large_file_with_as_many_processes_as_its_jobs(jobs: int, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIDS", str(tmp_path))
    monkeypatch.setattr(split, "_read_stretch", _note_pid)
    monkeypatch.setattr(split, "STRETCH_MIN_EVENTS", 1_000)  # the sample as large as the files that are split
    loaded = load(SAMPLES / TRACES[0], jobs=jobs)
    assert len(loaded.traces) == 1 and len(stretches_read(tmp_path)) == jobs - 1


def test_fewer_files_than_jobs_each_read_with_its_share_of_them(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIDS", str(tmp_path))
    monkeypatch.setattr(split, "_read_stretch", _note_pid)
    monkeypatch.setattr(split, "STRETCH_MIN_EVENTS", 1_000)
    files = [trace_file("resnet50_dataloader_bound"), trace_file("resnet50_workers4")]
    loaded = load_files(files, where="two", jobs=6)  # two workers, each file in three stretches
    read = stretches_read(tmp_path)
    assert len(loaded.traces) == 2 and len(read) == 4 and os.getpid() not in {pid for pid, _ in read}
    alone = load_files(files, where="two", jobs=1)
    for a, b in zip(loaded.traces, alone.traces):
        assert_same(a, b)


def test_the_report_of_a_file_read_in_stretches_is_the_report_of_one_read_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    path = SAMPLES / TRACES[0]
    alone, _ = analyze_path(path, jobs=1)
    monkeypatch.setattr(split, "STRETCH_MIN_EVENTS", 1_000)
    apart, _ = analyze_path(path, jobs=3)
    assert _without_run_id(apart) == _without_run_id(alone)


def _without_run_id(report: Report) -> Any:
    """The report as JSON, less the run's id (random: each analysis not saved is a run of its own)."""
    out = json.loads(to_json(report))
    del out["run"]["id"]
    return out


def _read_in_daemon(answers: multiprocessing.Queue[str]) -> None:
    """In a daemonic process (which may not start any): one large file, then two files, each asked of 3 jobs."""
    try:
        split.STRETCH_MIN_EVENTS = 1_000
        one = load(SAMPLES / TRACES[0], jobs=3)
        two = load_files([trace_file("resnet50_dataloader_bound"), trace_file("resnet50_workers4")], where="two",
                         jobs=3)
        answers.put(f"{len(one.traces)} {len(two.traces)}")
    except BaseException as exc:
        answers.put(repr(exc))


def test_a_daemonic_process_reads_in_itself(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    answers: multiprocessing.Queue[str] = context.Queue()
    reader = context.Process(target=_read_in_daemon, args=(answers,), daemon=True)
    reader.start()
    try:
        assert answers.get(timeout=120) == "1 2"
    finally:
        reader.join(timeout=10)
        if reader.is_alive():
            reader.kill()


def test_a_worker_that_dies_leaves_its_stretch_to_the_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    path = trace_file(TRACES[1])
    monkeypatch.setattr(kineto, "CHUNKED_MIN_BYTES", 0)
    monkeypatch.setattr(split, "CHUNK_EVENTS", 200)
    alone = read_trace(path)
    force_stretches(monkeypatch, 3)
    monkeypatch.setattr(split, "_read_stretch", _die)
    assert_same(read_trace(path, jobs=3), alone)


@given(events=st.integers(0, 10**6), jobs=st.integers(1, 64))
def test_stretches_are_whole_chunks_in_order_that_cover_every_event(events: int, jobs: int) -> None:
    bounds = split.stretches(events, jobs)
    assert bounds[0][0] == 0 and bounds[-1][1] == events
    assert all(hi == lo for (_, hi), (lo, _) in zip(bounds, bounds[1:]))
    assert all(lo % split.CHUNK_EVENTS == 0 for lo, _ in bounds)
    assert len(bounds) <= max(1, min(jobs, events // split.STRETCH_MIN_EVENTS))
    if jobs >= 2 and events >= 2 * split.STRETCH_MIN_EVENTS:  # then every process gets its share, in whole chunks
        assert len(bounds) >= 2
        assert all(hi - lo >= split.STRETCH_MIN_EVENTS - split.CHUNK_EVENTS for lo, hi in bounds)
    else:
        assert bounds == [(0, events)]


def test_one_process_reads_a_file_too_small_to_share_or_when_one_job_is_asked() -> None:
    assert split.stretches(2 * split.STRETCH_MIN_EVENTS - 1, 8) == [(0, 2 * split.STRETCH_MIN_EVENTS - 1)]
    assert split.stretches(10**6, 1) == [(0, 10**6)]
    assert len(split.stretches(10**6, 3)) == 3


# A reader whose workers never finish their stretch, so that it is killed while they read.
HANGING_READER = textwrap.dedent("""
    import sys, time
    from gpuscope.traces import kineto, read_trace, split

    def hang(lo, hi):
        time.sleep(600)

    kineto.CHUNKED_MIN_BYTES = 0
    split.CHUNK_EVENTS = 100
    split.STRETCH_MIN_EVENTS = 1
    split._read_stretch = hang
    read_trace(sys.argv[1], jobs=3)
""")


def test_kill_9_of_the_reader_leaves_none_of_its_workers(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", HANGING_READER, str(trace_file(TRACES[1]))],
                            env={**os.environ, "GPUSCOPE_HOME": str(tmp_path)})
    pids: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while len(pids) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, "the workers never started"
            pids |= tree(proc.pid)
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert gone_within(pids, 10.0) == set(), "workers of the killed reader still run"
    finally:
        end(pids | {proc.pid})
