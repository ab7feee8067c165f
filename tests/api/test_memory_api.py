"""``gpuscope.api.memory``: its docstring's example holds, and the report it returns is the command's JSON."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest

import gpuscope.api.memory
from gpuscope.api.errors import GpuscopeError
from gpuscope.api.memory import MemoryInputs, memory
from gpuscope.model.codec import to_json
from tests.cli.helpers import gpuscope as run_cli
from tests.conftest import ROOT, SAMPLES


def test_the_docstring_example_holds(gpuscope_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = doctest.testmod(gpuscope.api.memory, report=True)
    assert result.attempted >= 2 and result.failed == 0


def test_the_api_and_the_command_agree(tmp_path: Path) -> None:
    snap = SAMPLES / "memory_snapshots" / "cs336_forward_backward_windows.pickle.gz"
    ours = json.loads(to_json(memory(snap, MemoryInputs(device_gib=24), save=False)))
    cli = run_cli("memory", str(snap), "--device-gib", "24", "--json", "--no-save", home=tmp_path)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout) == ours


def test_a_bad_setting_is_the_apis_error() -> None:
    with pytest.raises(GpuscopeError, match="--device-gib must be 0 or more"):
        memory(SAMPLES / "memory_snapshots" / "cs336_forward_backward_windows.pickle.gz",
               MemoryInputs(device_gib=-1), save=False)
