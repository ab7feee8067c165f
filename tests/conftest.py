from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"


@pytest.fixture
def gpuscope_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty run store for the test, used by the CLI through GPUSCOPE_HOME."""
    home = tmp_path / "home"
    monkeypatch.setenv("GPUSCOPE_HOME", str(home))
    yield home
