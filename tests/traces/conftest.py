"""Fixtures of the trace reader's tests."""

from __future__ import annotations

import pytest

from gpuscope.traces import split


@pytest.fixture(params=["whole", "chunked", "split"])
def chunked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Each test three times: the file read whole; read in chunks of three events (the path large files take);
    and in chunks of three events in stretches read by three processes and joined (the path a large file read
    where cores are free takes). True when the file is read in chunks."""
    if request.param != "whole":
        monkeypatch.setattr("gpuscope.traces.kineto.CHUNKED_MIN_BYTES", 0)
        monkeypatch.setattr("gpuscope.traces.split.CHUNK_EVENTS", 3)
    if request.param == "split":
        force_stretches(monkeypatch, 3)
    return request.param != "whole"


def force_stretches(monkeypatch: pytest.MonkeyPatch, processes: int) -> None:
    """Every file read in chunks is read in (up to) ``processes`` stretches, whatever its size and the jobs asked."""
    cut = split.stretches
    monkeypatch.setattr(split, "STRETCH_MIN_EVENTS", 1)
    monkeypatch.setattr(split, "stretches", lambda events, jobs: cut(events, processes))
