"""`gpuscope memory` as a user runs it, in a real process: a real snapshot and a real ROCm trace in, the JSON and
the terminal out; the snapshot kept as a run that `show` and `memory RUN_ID` read back the same; and what is not a
snapshot, or would run code, is one line and a non-zero exit with nothing run."""

from __future__ import annotations

import gzip
import json
import os
import pickle
from pathlib import Path

import pytest

from tests import hostile as H
from tests import memory_builders as mb
from tests import reference
from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.conftest import SAMPLES

SNAPSHOT = SAMPLES / "memory_snapshots" / "cs336_training_step.pickle.gz"
ROCM = SAMPLES / "dev" / "sglang_decode_cudagraph_bs32.json.gz"


def test_a_snapshot_in_json_and_kept_as_a_run(tmp_path: Path) -> None:
    result = gpuscope("memory", str(SNAPSHOT), "--gpu", "H100 SXM", "--json", home=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    expected = reference.snapshot_replay(reference.snapshot(SNAPSHOT))
    (device,) = report["devices"]
    assert report["schema"] == "gpuscope.memory/1" and report["kind"] == "snapshot"
    assert device["peak_allocated_bytes"] == expected["peak"]
    # What the driver reports for an H100 80GB HBM3 (its deviceProperties), not the 80 GB the datasheet sells.
    assert device["device_bytes"] == 85_018_279_936 and "H100 SXM" in device["device_bytes_source"]
    assert {"frames", "op", "bytes", "count", "category", "label"} <= device["at_peak"][0].keys()
    assert device["at_peak"] == sorted(device["at_peak"], key=lambda g: -g["bytes"])
    assert len(device["timeline"]["time_us"]) <= 2002 and device["timeline"]["points_recorded"] == 19464
    run_id = report["run_id"]
    for args in (("memory", run_id, "--json"), ("show", run_id, "--json")):
        again = gpuscope(*args, home=tmp_path)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout) == report
    listed = gpuscope("runs", home=tmp_path)
    assert run_id in listed.stdout and "memory" in listed.stdout


def test_the_terminal_names_the_peak_and_its_source_lines(tmp_path: Path) -> None:
    result = gpuscope("memory", str(SNAPSHOT), "--no-save", home=tmp_path)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "peak allocated 21.3 GiB" in text and "step (adapters.py:887)" in text
    assert "device memory unknown" in text
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_rocm_trace_end_to_end(tmp_path: Path) -> None:
    result = gpuscope("memory", str(ROCM), "--json", "--no-save", home=tmp_path)
    assert result.returncode == 0, result.stderr
    (device,) = json.loads(result.stdout)["devices"]
    peak = max(e["args"]["Total Allocated"] for e in reference.memory_events(ROCM, (6,)))
    assert device["peak_allocated_bytes"] == pytest.approx(peak, rel=0.01)


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize(("name", "protocol", "zipped"), [("evil.pickle", 4, False), ("evil.pickle", 5, False),
                                                         ("evil.pickle.gz", 4, True), ("snapshot.bin", 2, False),
                                                         ("old.pkl", 0, False)])
def test_a_pickle_that_would_run_code_is_refused_and_nothing_runs(tmp_path: Path, name: str, protocol: int,
                                                                  zipped: bool) -> None:
    marker = tmp_path / "ran"
    data = pickle.dumps({"segments": [], "device_traces": [[_Payload(marker)]]}, protocol=protocol)
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if zipped else data)
    result = gpuscope("memory", str(path), home=tmp_path / "home")
    assert result.returncode == 2
    line = one_clean_error_line(result)
    assert line.startswith("gpuscope: error: ") and "refused" in line and str(path) in line
    assert "names the global posix.system" in line or "names the global nt.system" in line
    assert not marker.exists()


def _gzip_bomb() -> bytes:
    """4 MiB of a list of small ints under ``segments``, gzipped 1,000 to 1."""
    return gzip.compress(b"\x80\x04}(\x8c\x08segments](" + b"K\x01" * (2 << 20) + b"eu.", compresslevel=9)


@pytest.mark.parametrize(("name", "content", "words"), [
    ("bomb.pickle.gz", _gzip_bomb(), "KiB: 100 times its size, the reader's limit for a gzip stream (a gzip "
                                     "bomb?); set GPUSCOPE_MAX_PICKLE_GIB to read it"),
    ("memo.pickle", b"\x80\x04Nr\x00\x00\x00\x04.", "a memo index of 67,108,864 after 8 bytes: past the reader's "
                                                    "limit of one memo slot per byte read"),
    ("jumps.pickle", b"\x80\x04N" + b"".join(b"r" + (i << 20).to_bytes(4, "little") for i in range(1, 81)) + b".",
     "a memo index of 1,048,576 after 8 bytes"),
    ("cut.pickle", pickle.dumps({"segments": list(range(1000))}, protocol=4)[:-300], "cut short?"),
])
def test_a_pickle_past_a_budget_is_one_line(tmp_path: Path, name: str, content: bytes, words: str) -> None:
    """The 1 MB gzip of 1 GiB took 89.6 s and 4.2 GB; the 9-byte memo index allocated 1 GiB, the 404 bytes of
    jumps 686 MiB; a cut pickle named the reader's internals."""
    path = tmp_path / name
    path.write_bytes(content)
    result = gpuscope("memory", str(path), "--no-save", home=tmp_path / "home")
    assert result.returncode == 2
    line = one_clean_error_line(result)
    assert line.startswith(f"gpuscope: error: {path}: ") and words in line


@pytest.mark.parametrize(("args", "words"), [
    (("memory", "/nonexistent/snap.pickle"), "no such snapshot, trace or folder"),
    (("memory", "{snap}", "--gpu", "no such gpu"), "not a GPU the spec table knows"),
    (("memory", "{snap}", "--gpu", "H100"), "'H100' could be any of H100 SXM, H100 NVL or H100 PCIe"),
    (("memory", "{empty}"), "the file is empty"),
    (("memory", "{snap}", "--fixed-step-share", "2"), "--fixed-step-share is a share from 0 to 1"),
    (("memory", "{loop}"), "cannot read: Too many levels of symbolic links"),
])
def test_bad_input_is_one_line(tmp_path: Path, args: tuple[str, ...], words: str) -> None:
    snap = mb.forward_backward(tmp_path / "s.pickle")
    empty = tmp_path / "e.pickle"
    empty.write_bytes(b"")
    loop = tmp_path / "loop.pickle"
    loop.symlink_to(loop)
    result = gpuscope(*(a.format(snap=snap, empty=empty, loop=loop) for a in args), home=tmp_path / "home")
    assert result.returncode == 2
    assert words in one_clean_error_line(result)


def test_names_from_the_snapshot_stay_text(tmp_path: Path) -> None:
    """A frame named with terminal escapes and rich markup prints as the characters it holds."""
    evil = "[bold red]boom[/] \x1b]0;owned\x07\x1b[2J"
    doc = mb.snapshot([mb.segment(0, 8 * mb.MIB, [])], [[
        mb.action("alloc", 0, mb.MIB, 0, [mb.frame(evil, "/work/\x1b[31mmodel.py", 7)])]])
    path = mb.write(tmp_path / "s.pickle", doc)
    result = gpuscope("memory", str(path), "--no-save", home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "[bold red]boom[/]" in result.stdout and "\\x1b" in result.stdout


def test_a_trace_url_is_read_under_its_deadline_and_named_without_its_secrets(tmp_path: Path) -> None:
    """A real server on loopback: serving the ROCm trace, the report names the URL bare and reads its peak; never
    answering, the command ends at its --timeout in one line. The URL's password and token appear nowhere."""
    password, token = "S3cretPW-mem", "t0ken-mem-77"
    server = H.Hostile()
    try:
        url = f"http://alice:{password}@127.0.0.1:{server.port}/job/t.json.gz?token={token}"
        server.behave = lambda r: H.answer(200, ROCM.read_bytes())
        read = gpuscope("memory", url, "--json", "--no-save", home=tmp_path)
        assert read.returncode == 0, read.stderr
        report = json.loads(read.stdout)
        assert report["source"] == f"http://127.0.0.1:{server.port}/job/t.json.gz"
        peak = max(e["args"]["Total Allocated"] for e in reference.memory_events(ROCM, (6,)))
        assert [d["peak_allocated_bytes"] for d in report["devices"]] == [peak]
        server.behave = lambda r: H.hang
        stalled = gpuscope("memory", url, "--timeout", "3", home=tmp_path)
        assert stalled.returncode == 2
        line = one_clean_error_line(stalled)
        assert line.startswith(f"gpuscope: error: http://127.0.0.1:{server.port}/job/t.json.gz: no answer within 3 s")
        for text in (read.stdout, read.stderr, stalled.stdout, stalled.stderr):
            assert password not in text and token not in text
    finally:
        server.close()
