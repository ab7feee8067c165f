from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"


def load_benchmark(name: str) -> ModuleType:
    """A script of benchmarks/ imported as a module (they are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def gpuscope_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty run store for the test, used by the CLI through GPUSCOPE_HOME."""
    home = tmp_path / "home"
    monkeypatch.setenv("GPUSCOPE_HOME", str(home))
    yield home
