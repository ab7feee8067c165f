"""Fixtures of the trace reader's tests."""

from __future__ import annotations

import pytest


@pytest.fixture(params=[False, True], ids=["whole", "chunked"])
def chunked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Each test twice: the file read whole, and read in chunks of three events (the path large files take)."""
    if request.param:
        monkeypatch.setattr("gpuscope.traces.kineto.CHUNKED_MIN_BYTES", 0)
        monkeypatch.setattr("gpuscope.traces.kineto.CHUNK_EVENTS", 3)
    return bool(request.param)
