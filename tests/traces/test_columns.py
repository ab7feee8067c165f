"""The reader's columns against the file itself: each host op's interned input shapes, and the content hash of the
text, whether the file is decoded whole or in chunks (the interning then crosses chunks)."""

from __future__ import annotations

import gzip
import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from gpuscope.traces import kineto, read_trace, split
from tests import builders as b
from tests.traces.conftest import force_stretches

OP_CATS = ("cpu_op", "operator")
"""Kineto's categories of host operators (2021 traces capitalise them)."""


def _op(name: str, ts: float, *, dims: Any = None, dims_key: str = "Input Dims", types: list[str] | None = None,
        concrete: Any = None, cat: str = "cpu_op") -> b.Event:
    event = b.cpu_op(name, ts, 5, cat=cat)
    for key, value in ((dims_key, dims), ("Input type", types), ("Concrete Inputs", concrete)):
        if value is not None:
            event["args"][key] = value
    return event


def _events() -> list[b.Event]:
    """Ops whose shapes repeat, change, come under both spellings of the key, or are missing; a user annotation and
    a runtime call that carry shapes too (only host ops are read)."""
    return [
        b.step(0, 0, 1000),
        _op("aten::mm", 10, dims=[[4, 8], [8, 2]], types=["float", "float"]),
        _op("aten::add", 20, dims=[[4, 2], []], types=["float", "Scalar"], concrete=["", "1"]),
        _op("aten::mm", 30, dims=[[4, 8], [8, 2]], types=["float", "float"]),  # the first shapes again
        _op("aten::mm", 40, dims=[[4, 8], [8, 2]], types=["c10::Half", "c10::Half"]),  # same dims, other types
        _op("aten::relu", 50),  # no record_shapes
        _op("aten::empty", 60, dims=[]),  # recorded, but no inputs
        _op("aten::conv2d", 70, dims=[[1, 3, 8, 8]], dims_key="Input dims", types=["float"], cat="Operator"),
        _op("my_region", 80, dims=[[1]], types=["float"], cat="user_annotation"),
        {**b.launch(90, 2, 1), "args": {"correlation": 1, "Input Dims": [[9]]}},
        _op("aten::add", 100, dims=[[4, 2], []], types=["float", "Scalar"], concrete=["", "1"]),
        b.kernel("gemm", 95, 3, 1),
    ]


def _expected_shapes(events: list[b.Event]) -> tuple[list[tuple[str, tuple[str, ...], str]], dict[float, int]]:
    """The distinct (dims, types, concrete inputs) of host ops with recorded input dims, in file order, and each
    event's index into them by its start (-1: none), recomputed from the events as written."""
    table: list[tuple[str, tuple[str, ...], str]] = []
    index: dict[float, int] = {}
    for e in events:
        args = e.get("args", {})
        dims = args["Input Dims"] if "Input Dims" in args else args.get("Input dims")  # [] is a shape: no inputs
        if e["cat"].lower() not in OP_CATS or dims is None:
            index[e["ts"]] = -1
            continue
        key = (json.dumps(dims), tuple(args.get("Input type", ())),
               json.dumps(args["Concrete Inputs"]) if "Concrete Inputs" in args else "")
        if key not in table:
            table.append(key)
        index[e["ts"]] = table.index(key)
    return table, index


@pytest.fixture(params=["whole", "chunks of 3 events", "stretches read by 3 processes"])
def decoding(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param != "whole":
        monkeypatch.setattr(kineto, "CHUNKED_MIN_BYTES", 0)
        monkeypatch.setattr(split, "CHUNK_EVENTS", 3)
    if request.param.startswith("stretches"):
        force_stretches(monkeypatch, 3)
    return str(request.param)


def test_each_host_op_has_its_recorded_shapes_numbered_as_they_first_appear(tmp_path: Path, decoding: str) -> None:
    events = _events()
    t = read_trace(b.write(tmp_path / "t.json", b.trace(events)))
    table, index = _expected_shapes(events)
    assert [(s.dims, s.types, s.concrete) for s in t.shapes] == table
    got = dict(zip((t.events.ts_ns / 1000).tolist(), t.events.shape_id.tolist()))
    assert got == index
    assert sorted(i for i in index.values() if i >= 0)[-1] == len(table) - 1


@pytest.mark.parametrize("gz", [False, True])
def test_the_content_hash_is_that_of_the_json_text(tmp_path: Path, decoding: str, gz: bool) -> None:
    text = json.dumps(b.trace(_events())).encode()
    path = tmp_path / ("t.json.gz" if gz else "t.json")
    path.write_bytes(gzip.compress(text) if gz else text)
    assert read_trace(path).content_sha256 == hashlib.sha256(text).hexdigest()
    assert read_trace(path, hash_content=False).content_sha256 == ""  # unknown: a reading nothing is saved from


def test_a_file_that_is_not_json_still_ends_as_one_trace_error_with_the_hash_thread_done(
        tmp_path: Path, decoding: str) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b'{"traceEvents": [{"ph": "X"},' + b"x" * 100)
    with pytest.raises(kineto.TraceError, match="not valid JSON"):
        read_trace(path)
    assert not [t for t in threading.enumerate() if t.name == "gpuscope-trace-hash"]
